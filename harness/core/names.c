/* names: the built-in alias table and the default normalisation. */
#include "names.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

struct alias {
	const char *from;
	const char *to;
};

static const struct alias aliases[] = {
	{"lm loss", "loss"},
	{"lm_loss", "loss"},
	{"main", "loss"},
	{"final_loss", "loss"},
	{"global_avg_loss", "loss"},
	{"loss_metrics/global_avg_loss", "loss"},
	{"mtp", "mtp_1_loss"},
	{"grad norm", "grad_norm"},
	{"grad-norm", "grad_norm"},
	{"global_norm", "grad_norm"},
	{"learning rate", "learning_rate"},
	{"learning-rate", "learning_rate"},
	{"num zeros", "num_zeros"},
	{"num-zeros", "num_zeros"},
	{"validation lm loss", "eval_loss"},
	{"eval_loss", "eval_loss"},
	{"indexer loss", "indexer_loss"},
	{"params norm", "params_norm"},
	{"loss scale", "loss_scale"},
};

/* "mtp_K loss", "mtp_K_loss", "mtpK.final_loss", "mtp_K" -> "mtp_K_loss" */
static int mtp_alias(const char *name, char *out, size_t outlen)
{
	unsigned k;
	int used = 0;
	char rest[64] = "";
	if (sscanf(name, "mtp_%u%n", &k, &used) == 1 || sscanf(name, "mtp%u%n", &k, &used) == 1) {
		snprintf(rest, sizeof rest, "%s", name + used);
		if (!strcmp(rest, " loss") || !strcmp(rest, "_loss") || !strcmp(rest, ".final_loss") || !rest[0]) {
			snprintf(out, outlen, "mtp_%u_loss", k);
			return 1;
		}
	}
	return 0;
}

void names_canonical(const char *name, char *out, size_t outlen)
{
	for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
		if (!strcmp(name, aliases[i].from)) {
			snprintf(out, outlen, "%s", aliases[i].to);
			return;
		}
	}
	if (!strncmp(name, "mtp", 3) && mtp_alias(name, out, outlen)) /* its sscanf costs: only for "mtp..." */
		return;
	size_t o = 0;
	int sep = 0;
	for (const char *p = name; *p && o + 1 < outlen; p++) {
		if (*p == ' ' || *p == '-' || *p == '/') {
			sep = 1;
			continue;
		}
		if (sep && o > 0 && o + 2 < outlen)
			out[o++] = '_';
		sep = 0;
		out[o++] = (char)tolower((unsigned char)*p);
	}
	out[o] = '\0';
}
