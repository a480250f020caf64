/* test-op-cfg.c: every op's config builder (X_cfg_init through op->impl->cfg_check) handles every value
 * of every switch the op reads, on both devices, as the registry says: a value runs on a device unless
 * modes.def marks it GPU_ONLY (refused on the CPU) or CPU_ONLY (refused on CUDA) or the op lists it in its
 * refuses (both devices: RMSNORM_REDUCE=torch outside the whole-tensor norms), and a refusal is
 * ALIGN_ERR_UNSUPPORTED with a message. A value the builder does not handle (a row added to modes.def
 * without its case in X_cfg_init) returns ALIGN_ERR_INTERNAL and fails here, on a machine without a GPU,
 * before any CUDA twin runs it. Each case starts from the defaults and changes one switch; the
 * parameter variants of the op are covered too. Exit status 0 = pass. */
#include <stdio.h>
#include <string.h>

#include "ops.h"

static int fails, cases;

/* Values that need another switch of the same op set too (the default of that switch refuses them, with a
 * message): the case runs with the partner value. lm_head's default fp32 logits are fp32 operands, which
 * the bf16-only GEMM engines tc and cublas_pinned refuse (matmul.h "Engines"). */
static const struct {
	const char *op;
	int mode, value, partner, partner_value;
} partners[] = {
	{"lm_head", MODE_MATMUL_IMPL, ALIGN_MATMUL_IMPL_TC, MODE_LMHEAD_LOGITS, ALIGN_LMHEAD_LOGITS_BF16},
	{"lm_head", MODE_MATMUL_IMPL, ALIGN_MATMUL_IMPL_CUBLAS_PINNED, MODE_LMHEAD_LOGITS, ALIGN_LMHEAD_LOGITS_BF16},
};

static void set_partner(const struct align_op *op, struct align_modes *m, int id, int v)
{
	for (size_t i = 0; i < sizeof partners / sizeof partners[0]; i++)
		if (!strcmp(op->name, partners[i].op) && id == partners[i].mode && v == partners[i].value)
			m->v[partners[i].partner] = partners[i].partner_value;
}

static void check_one(const struct align_op *op, const void *params, const struct align_dims *d,
		      const struct align_modes *m, int id, int v, int device)
{
	struct align_err err = {0};
	int rc = op->impl->cfg_check(params, m, d, device, &err);
	int refused = modes_value_refused_on(id, v, device) || ops_op_refuses(op, id, v);
	int want = refused ? ALIGN_ERR_UNSUPPORTED : ALIGN_OK;
	cases++;
	if (rc == want && (rc == ALIGN_OK || err.msg[0]))
		return;
	fails++;
	printf("FAIL %s: %s=%s on %s: status %d (%s), want %d; message: %s\n", op->name, modes_info(id)->env,
	       modes_value_name(id, v), device == ALIGN_DEVICE_CPU ? "cpu" : "cuda", rc, align_status_name(rc), want,
	       err.msg[0] ? err.msg : "(none)");
}

static void check_op(const struct align_op *op)
{
	if (!op->impl->cfg_check) {
		fails++;
		printf("FAIL %s: no cfg_check (every op builds its config through X_cfg_init)\n", op->name);
		return;
	}
	struct align_dims d;
	unsigned char params[512];
	if (ops_dims_default(op, &d) || op->impl->params_size > sizeof params) {
		fails++;
		printf("FAIL %s: default dims or params\n", op->name);
		return;
	}
	for (int k = 0;; k++) {
		if (k == 0)
			op->impl->params_default(params, &d);
		else if (!op->impl->params_variant || !op->impl->params_variant(params, &d, k))
			break;
		for (const int *id = op->impl->modes; *id >= 0; id++)
			for (int v = 0; v < modes_value_count(*id); v++)
				for (int device = ALIGN_DEVICE_CPU; device <= ALIGN_DEVICE_CUDA; device++) {
					struct align_modes m;
					modes_init_default(&m);
					m.v[*id] = v;
					set_partner(op, &m, *id, v);
					check_one(op, params, &d, &m, *id, v, device);
				}
	}
}

int main(void)
{
	for (int i = 0; i < ALIGN_OP_COUNT; i++)
		check_op(ops_at(i));
	printf("%d cases, %d failed\n", cases, fails);
	return fails ? 1 : 0;
}
