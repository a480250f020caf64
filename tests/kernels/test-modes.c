/* test-modes.c: the modes registry. Every row has a valid default, distinct id and env name,
 * every value has a name and is named in the "mimics" column; every profile row names a valid
 * value; resolution order default < profile < environment < command line with the source
 * recorded; error messages for unknown variables, switches, values and profiles list the valid
 * ones; non-mode ALIGN_ variables are ignored. Exit status 0 = pass. */
#include <stdio.h>
#include <string.h>

#include "modes.h"

static int fails;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                    \
			printf(__VA_ARGS__);                                                                           \
			printf("\n");                                                                                  \
			fails++;                                                                                       \
		}                                                                                                      \
	} while (0)

static void check_rows(void)
{
	for (int i = 0; i < MODE_COUNT; i++) {
		const struct align_mode_info *r = modes_info(i);
		CHECK(r && strncmp(r->env, "ALIGN_", 6) == 0, "row %d env", i);
		CHECK(strcmp(r->env + 6, r->id) == 0, "%s: env must be ALIGN_<id>", r->id);
		CHECK(modes_default_name(i) && modes_value_index(i, modes_default_name(i)) == r->def,
		      "%s: default %d not a value", r->id, r->def);
		char mimics[1024];
		modes_mimics_text(i, mimics, sizeof mimics);
		CHECK(modes_value_count(i) >= 2 && modes_value_count(i) <= MODES_MAX_VALUES, "%s: value count", r->id);
		CHECK(modes_find(r->env) == i && modes_find(r->id) == i, "%s: find", r->id);
		CHECK(r->meaning[0] && mimics[0], "%s: meaning/mimics", r->id);
		for (int v = 0; v < modes_value_count(i); v++) {
			const char *name = modes_value_name(i, v);
			CHECK(name != NULL, "%s: value %d has no name", r->id, v);
			if (!name)
				continue;
			CHECK(modes_value_index(i, name) == v, "%s: value %s index", r->id, name);
			char key[64];
			snprintf(key, sizeof key, "%s=", name);
			const char *p = strstr(mimics, key);
			CHECK(p && (p == mimics || p[-1] == ',') && modes_value(i, v)->mimics[0],
			      "%s: mimics does not say who '%s' mimics", r->id, name);
		}
		for (int j = 0; j < i; j++)
			CHECK(strcmp(modes_info(j)->env, r->env) != 0, "%s duplicated", r->env);
	}
	CHECK(modes_info(MODE_COUNT) == NULL && modes_info(-1) == NULL, "out of range info");
	CHECK(modes_value_name(0, 99) == NULL, "out of range value");
	CHECK(modes_find("ALIGN_NOPE") == -1, "unknown find");
	CHECK(modes_find("rmsnorm_weight") == MODE_RMSNORM_WEIGHT, "case-insensitive id");
}

static void check_profiles(void)
{
	const char *const want[] = {"megatron",	    "paddle",	     "paddle-accuracy",
				    "deepseek-ref", "megatron-cuda", "deepseek-ref-cuda"};
	const char *const *p = modes_profiles();
	int n = 0;
	for (; p[n]; n++)
		CHECK(n < 6 && strcmp(p[n], want[n]) == 0, "profile %d is %s", n, p[n]);
	CHECK(n == 6, "6 profiles, got %d", n);
	for (int i = 0; p[i]; i++) {
		struct align_modes m;
		char err[512] = "";
		modes_init_default(&m);
		CHECK(modes_apply_profile(&m, p[i], err, sizeof err) == 0, "profile %s: %s", p[i], err);
		CHECK(strcmp(m.profile, p[i]) == 0, "profile name recorded");
	}
	struct align_modes d, r;
	char err[512];
	modes_init_default(&d);
	modes_init_default(&r);
	modes_apply_profile(&r, "deepseek-ref", err, sizeof err);
	CHECK(memcmp(d.v, r.v, sizeof d.v) == 0, "deepseek-ref must equal the defaults");
	modes_apply_profile(&r, "paddle-accuracy", err, sizeof err);
	CHECK(r.v[MODE_MHC_SINKHORN] == modes_value_index(MODE_MHC_SINKHORN, "c0"), "paddle-accuracy sinkhorn");

	/* a *-cuda profile = its base profile's rows, then its own GPU-only and torch-order rows */
	const char *const pairs[][2] = {{"megatron", "megatron-cuda"}, {"deepseek-ref", "deepseek-ref-cuda"}};
	for (int i = 0; i < 2; i++) {
		struct align_modes b, c;
		modes_init_default(&b);
		modes_init_default(&c);
		CHECK(modes_apply_profile(&b, pairs[i][0], err, sizeof err) == 0, "base %s", pairs[i][0]);
		CHECK(modes_apply_profile(&c, pairs[i][1], err, sizeof err) == 0, "%s: %s", pairs[i][1], err);
		int own = 0;
		for (int id = 0; id < MODE_COUNT; id++) {
			if (b.v[id] == c.v[id])
				continue;
			own++;
			CHECK(id == MODE_MATH_IMPL || id == MODE_RMSNORM_RSQRT || id == MODE_ROUTER_TOPK_ORDER ||
				      id == MODE_ROUTER_SUM || id == MODE_MHC_SUM_ORDER || id == MODE_MATMUL_IMPL ||
				      id == MODE_CSA_SUM_ORDER || id == MODE_CSA_COMP_SUM_ORDER ||
				      id == MODE_INDEXER_TOPK_ORDER || id == MODE_XENT_SUM || id == MODE_XENT_MEAN ||
				      id == MODE_RMSNORM_BWD_DW_ORDER || id == MODE_XENT_BWD_PROB ||
				      id == MODE_XENT_BWD_FORM || (i == 0 && id == MODE_CSA_BWD_SOFTMAX) ||
				      (i == 1 && (id == MODE_ROPE_YARN_FREQ || id == MODE_MHC_BWD_SINKHORN ||
						  id == MODE_MHC_BWD_DSUM || id == MODE_MHC_BWD_TSUM)),
			      "%s changes %s beyond its base", pairs[i][1], modes_info(id)->env);
		}
		/* megatron-cuda also takes torch's sum orders in sparse_attn (its unfused fp32 path); both take
		 * F.cross_entropy's log_softmax and nll_loss orders in xent and its autograd in xent_bwd
		 * (XENT_BWD_*); deepseek-ref-cuda takes autograd's
		 * x.sum(0) for rmsnorm_bwd dw (megatron's is TE's dgamma, not torch's) and its freqs_cis divisions
		 * by host scalars (torch's CUDA reciprocal product); autograd's backward forms: megatron-cuda the
		 * unfused sink softmax's (CSA_BWD_SOFTMAX), deepseek-ref-cuda the mHC loop's (MHC_BWD_*); both the
		 * compressor's window softmax and sum (CSA_COMP_SUM_ORDER: torch eager in both) */
		int want = i == 0 ? 14 : 17;
		CHECK(own == want, "%s: %d own rows, got %d", pairs[i][1], want, own);
		CHECK(modes_gpu_only_in(&c, NULL) >= 0 && modes_gpu_only_in(&b, NULL) < 0, "%s is GPU only",
		      pairs[i][1]);
		CHECK(strcmp(c.profile, pairs[i][1]) == 0, "profile name of %s", pairs[i][1]);
	}
	/* GPU-only registry */
	CHECK(modes_value_gpu_only(MODE_MATH_IMPL, modes_value_index(MODE_MATH_IMPL, "cuda")), "cuda GPU only");
	CHECK(modes_value_gpu_only(MODE_MATMUL_IMPL, modes_value_index(MODE_MATMUL_IMPL, "tc")), "tc GPU only");
	CHECK(!modes_value_gpu_only(MODE_MATH_IMPL, modes_value_index(MODE_MATH_IMPL, "libm")), "libm is not");
	CHECK(!modes_value_gpu_only(MODE_ROUTER_TOPK_ORDER, modes_value_index(MODE_ROUTER_TOPK_ORDER, "torch")),
	      "torch order is portable");
	CHECK(!modes_value_gpu_only(-1, 0) && !modes_value_gpu_only(MODE_MATH_IMPL, 99), "out of range");
}

static void check_resolution(void)
{
	struct align_modes m;
	char err[2048] = "";
	modes_init_default(&m);
	CHECK(m.v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_FP32 && m.src[MODE_RMSNORM_WEIGHT] == MODE_SRC_DEFAULT,
	      "default");
	CHECK(modes_apply_profile(&m, "megatron", err, sizeof err) == 0, "megatron");
	CHECK(m.v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_BF16 && m.src[MODE_RMSNORM_WEIGHT] == MODE_SRC_PROFILE,
	      "profile wins");
	CHECK(m.src[MODE_MATMUL_FMA] == MODE_SRC_DEFAULT, "untouched stays default");
	char *env[] = {"HOME=/x",	"ALIGN_RMSNORM_WEIGHT=fp32", "ALIGN_TRACE=out.jsonl",
		       "ALIGN_DB=a.db", "ALIGN_MHC_EXP=exp",	     NULL};
	CHECK(modes_apply_env(&m, env, err, sizeof err) == 0, "env: %s", err);
	CHECK(m.v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_FP32 && m.src[MODE_RMSNORM_WEIGHT] == MODE_SRC_ENV,
	      "env wins");
	CHECK(m.v[MODE_MHC_EXP] == ALIGN_MHC_EXP_EXP && m.src[MODE_MHC_EXP] == MODE_SRC_ENV, "env over profile");
	CHECK(modes_apply_kv(&m, "ALIGN_RMSNORM_WEIGHT=bf16", err, sizeof err) == 0, "kv env name");
	CHECK(m.v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_BF16 && m.src[MODE_RMSNORM_WEIGHT] == MODE_SRC_CLI,
	      "cli wins");
	CHECK(modes_apply_kv(&m, "mhc_exp=exp2", err, sizeof err) == 0, "kv by id");
	CHECK(m.v[MODE_MHC_EXP] == ALIGN_MHC_EXP_EXP2 && m.src[MODE_MHC_EXP] == MODE_SRC_CLI, "cli by id");

	struct align_modes before = m;
	char *bad_var[] = {"ALIGN_RMSNORM_WEIGHTS=fp32", NULL};
	CHECK(modes_apply_env(&m, bad_var, err, sizeof err) == 2, "unknown var must fail");
	CHECK(strstr(err, "'ALIGN_RMSNORM_WEIGHTS'") && strstr(err, "ALIGN_RMSNORM_WEIGHT,") &&
		      strstr(err, "ALIGN_MATMUL_OUT"),
	      "unknown var message: %s", err);
	char *bad_val[] = {"ALIGN_ROUTER_SUM=fp16", NULL};
	CHECK(modes_apply_env(&m, bad_val, err, sizeof err) == 2, "unknown value must fail");
	CHECK(strstr(err, "'fp16'") && strstr(err, "ALIGN_ROUTER_SUM") && strstr(err, "fp32, fp64"),
	      "unknown value message: %s", err);
	CHECK(memcmp(before.v, m.v, sizeof m.v) == 0, "failed env must not change a valid value");
	CHECK(modes_apply_kv(&m, "NOPE=1", err, sizeof err) == 2 && strstr(err, "'NOPE'"), "kv unknown: %s", err);
	CHECK(modes_apply_kv(&m, "MHC_SINKHORN=c2", err, sizeof err) == 2 && strstr(err, "c1, c0, c0p"),
	      "kv bad value: %s", err);
	CHECK(modes_apply_kv(&m, "MHC_SINKHORN", err, sizeof err) == 2 && strstr(err, "KEY=VALUE"), "kv form: %s", err);
	CHECK(modes_apply_profile(&m, "megatronn", err, sizeof err) == 2 &&
		      strstr(err, "megatron, paddle, paddle-accuracy, deepseek-ref"),
	      "profile message: %s", err);
	char small[16];
	CHECK(modes_apply_kv(&m, "NOPE=1", small, sizeof small) == 2 && strlen(small) < sizeof small, "truncation");
	char buf[4096];
	int n = modes_format(&m, buf, sizeof buf);
	CHECK(n > 0 && (size_t)n < sizeof buf && strstr(buf, "MHC_SINKHORN=c1") && strstr(buf, "MHC_EXP=exp2"),
	      "format: %s", buf);
}

int main(void)
{
	check_rows();
	check_profiles();
	check_resolution();
	printf("test-modes: %d switches, %s\n", MODE_COUNT, fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
