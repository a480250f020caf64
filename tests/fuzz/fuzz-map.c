/* fuzz-map: the --map rules file of align report (report-map.c): the input is the file; every rule
 * that loads is matched against a few record names. A pattern that compiles must compile in bounded
 * memory and time (the fuzzer's -rss_limit_mb and -timeout see it). */
#include "err.h"
#include "fuzz.h"
#include "report-impl.h"

#include <string.h>

static const char *const names[] = {"lm loss", "loss", "grad_norm", "decoder.layers.0.mlp.fc1.weight", "", "a-b->c"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file("rules.map", data, size);
	if (!path)
		return 0;
	struct align_err e = {0};
	struct rp_ctx c;
	memset(&c, 0, sizeof c);
	c.e = &e;
	if (!rp_map_load(&c, path))
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
			(void)rp_map_name(&c, names[i], "canon");
	rp_map_free(&c);
	return 0;
}
