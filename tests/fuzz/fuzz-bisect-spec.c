/* fuzz-bisect-spec: the ENV_SPEC parser of align bisect (bisect-spec.c). The input is the good spec,
 * a NUL byte, then the bad spec (a single spec is the good one, the bad one empty); a spec "@TEXT" is
 * read from a file holding TEXT, as `--good @FILE` does. Both are merged and their switches listed. */
#include "bisect.h"
#include "err.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

/* The spec text for `text` (n bytes): "@<file holding the rest>" or the text itself (malloc'd). */
static char *spec_of(const char *text, size_t n, const char *file)
{
	if (n && text[0] == '@') {
		const char *path = fuzz_file(file, (const uint8_t *)text + 1, n - 1);
		if (!path)
			return NULL;
		size_t len = strlen(path);
		char *s = malloc(len + 2);
		if (s)
			s[0] = '@', memcpy(s + 1, path, len + 1);
		return s;
	}
	char *s = malloc(n + 1);
	if (s)
		memcpy(s, text, n), s[n] = '\0';
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nul = memchr(text, '\0', size);
	size_t n_good = nul ? (size_t)(nul - text) : size;
	char *good = spec_of(text, n_good, "good.env");
	char *bad = nul ? spec_of(nul + 1, size - n_good - 1, "bad.env") : strdup("");
	struct align_err e = {0};
	struct bisect b;
	memset(&b, 0, sizeof b);
	b.err = &e;
	struct bisect_env bad_env = {0};
	if (good && bad && !bisect_spec_parse("--good", good, &b.good, &e) &&
	    !bisect_spec_parse("--bad", bad, &bad_env, &e) && !bisect_switches(&b, &bad_env)) {
		char buf[256];
		for (size_t i = 0; i < b.n_sw; i++) {
			bisect_switch_text(&b.sw[i], 0, buf, sizeof buf);
			bisect_switch_text(&b.sw[i], 1, buf, sizeof buf);
		}
	}
	for (size_t i = 0; i < b.n_sw; i++)
		free(b.sw[i].key), free(b.sw[i].good), free(b.sw[i].bad);
	free(b.sw);
	bisect_env_free(&b.good);
	bisect_env_free(&bad_env);
	free(good);
	free(bad);
	return 0;
}
