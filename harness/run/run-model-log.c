/* run-model-log: the per-step loss line of `align run model`, in the layout `align ingest` reads back.
 *   megatron: Megatron-LM training_log: "iteration  k/  N | ... | lm loss: %E | mtp_1 loss: %E | ..."
 *             (the loss printed with 6 digits, as Megatron's '{:.6E}').
 *   paddle:   PaddleFleet / PaddleNLP trainer: "loss: round(x, 8), ..., loss_md5: md5 of the float32,
 *             ..., mtp_1_loss: repr(float(x)), mtp_1_loss_md5: ..." (Python's repr: the shortest text
 *             that reads back as the same binary64).
 * The fields that describe a real cluster (time per iteration, memory, throughput) are left out; the
 * timestamps are fixed so that two runs of the same model print the same text. */
#include "ctx.h"
#include "digest.h"
#include "err.h"
#include "run-model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Python's round(x, 8) printed by repr: "%.8f" without its trailing zeros (one digit kept). */
static void py_round8(double x, char *buf, size_t len)
{
	snprintf(buf, len, "%.8f", x);
	char *dot = strchr(buf, '.');
	if (!dot)
		return;
	char *end = buf + strlen(buf) - 1;
	while (end > dot + 1 && *end == '0')
		*end-- = '\0';
}

/* Python's repr of a float: the shortest %.{p}g that reads back as x ("11.86336898803711"). */
static void py_repr(double x, char *buf, size_t len)
{
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, len, "%.*g", p, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	if (!strpbrk(buf, ".eEn"))
		strncat(buf, ".0", len - strlen(buf) - 1);
}

/* md5 of the float32's little-endian bytes (the trainers' LOG_LOSS_MD5). */
static int f32_md5(struct align_ctx *ctx, float v, char out[65])
{
	unsigned char le[4];
	uint32_t b;
	memcpy(&b, &v, 4);
	for (int i = 0; i < 4; i++)
		le[i] = (unsigned char)(b >> (8 * i));
	return digest_compute_hex("md5", le, 4, out) ? fail_internal(&ctx->err, "md5 unavailable") : ALIGN_OK;
}

int run_model_log(struct align_ctx *ctx, int log_format, int step, int steps, float lm_loss, float mtp_loss)
{
	FILE *out = ctx->out;
	if (log_format == RUN_LOG_MEGATRON) {
		fprintf(out,
			"[default0]: [2026-01-01 00:00:%02d.000000] iteration %8d/%8d | consumed samples: %12d | "
			"learning rate: 0.000000E+00 | global batch size: %5d | lm loss: %E | mtp_1 loss: %E | "
			"loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n",
			step % 60, step, steps, step * 2, 2, (double)lm_loss, (double)mtp_loss);
		return ferror(out) ? fail_input(&ctx->err, "cannot write the log") : ALIGN_OK;
	}
	char loss[64], mtp[64], md5[65], mtp_md5[65];
	py_round8((double)lm_loss, loss, sizeof loss);
	py_repr((double)mtp_loss, mtp, sizeof mtp);
	ALIGN_TRY(&ctx->err, f32_md5(ctx, lm_loss, md5));
	ALIGN_TRY(&ctx->err, f32_md5(ctx, mtp_loss, mtp_md5));
	fprintf(out,
		"[2026-01-01 00:00:%02d,000] [    INFO] - loss: %s, learning_rate: 0.0, global_step: %d, loss_md5: %s, "
		"mtp_1_loss: %s, mtp_1_loss_md5: %s\n",
		step % 60, loss, step, md5, mtp, mtp_md5);
	return ferror(out) ? fail_input(&ctx->err, "cannot write the log") : ALIGN_OK;
}
