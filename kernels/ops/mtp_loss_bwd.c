/* mtp_loss_bwd.c: CPU twin of the MTP loss side's backward (contract in mtp_loss_bwd.h). */
#include "mtp_loss_bwd.h"

#include <math.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"mtp", ALIGN_DT_F32, "T,K", {ALIGN_FILL_POSITIVE, 8.0f, 0, 0}, "MTP loss of each depth (shape only)"},
	{"dtotal", ALIGN_DT_F32, "T", {ALIGN_FILL_SPECIAL, 1.0f, 1.0f, 0}, "gradient of the training loss"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dlm", ALIGN_DT_F32, "T", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the main (lm) loss"},
	{"dmtp", ALIGN_DT_F32, "T,K", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of each depth's MTP loss"},
};

int mtp_loss_bwd_cfg_init(struct mtp_loss_bwd_cfg *c, const struct mtp_loss_bwd_params *p, const struct align_modes *m,
			  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			  int device, struct align_err *err)
{
	const char *op = "mtp_loss_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 2, 2));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "mtp_loss_bwd: no params");
	ALIGN_TRY(err, op_cfg_rank(err, op, "mtp", &in[0], 2));
	int64_t T = in[0].shape[0], K = in[0].shape[1], t1[1] = {T}, tk[2] = {T, K};
	if (K < 1)
		return align_fail(err, ALIGN_ERR_INPUT, "mtp_loss_bwd: K = %lld depths, want at least 1", (long long)K);
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "mtp", &in[0], ALIGN_DT_F32, 2, tk));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dtotal", &in[1], ALIGN_DT_F32, 1, t1));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dlm", &out[0], ALIGN_DT_F32, 1, t1));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dmtp", &out[1], ALIGN_DT_F32, 2, tk));
	if (!isfinite(p->factor))
		return align_fail(err, ALIGN_ERR_INPUT, "mtp_loss_bwd: factor %g is not finite", p->factor);
	if (!isfinite(p->main_scale))
		return align_fail(err, ALIGN_ERR_INPUT, "mtp_loss_bwd: main_scale %g is not finite", p->main_scale);
	/* the forward's config (K, factor, both switches) on descriptors of the forward's shapes */
	struct align_tensor fi[2] = {in[1], in[0]}, fo[2] = {out[0], out[0]};
	struct mtp_loss_params fp = {p->factor};
	for (int i = 0; i < 2; i++)
		fi[i].data = fo[i].data = NULL;
	ALIGN_TRY(err, mtp_loss_cfg_init(&c->f, &fp, m, fi, 2, fo, 2, device, err));
	c->main_scale = (float)p->main_scale;
	return ALIGN_OK;
}

int mtp_loss_bwd_fwd_cpu(const struct mtp_loss_bwd_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct mtp_loss_bwd_cfg c;
	ALIGN_TRY(NULL, mtp_loss_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "mtp_loss_bwd", in, n_in, out, n_out));
	const float *dtotal = in[1].data;
	float *dlm = out[0].data, *dL = out[1].data;
	for (int64_t t = 0; t < c.f.T; t++)
		mtp_loss_bwd_row(&c, dtotal[t], &dlm[t], dL + t * c.f.K);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	struct mtp_loss_bwd_params *p = params;
	p->factor = 0.1;     /* Megatron DSv4 recipes */
	p->main_scale = 1.0; /* torch.tensor(1.0): loss_scale 1 (bf16), one micro-batch */
}

/* 0: factor 0.1, main_scale 1; 1: factor 0.3 (PaddleNLP multi_token_pred_lambda default); 2: factor 0.1,
 * main_scale R32(1 / 3) (Megatron's loss_scale / num_microbatches with 3 micro-batches, an fp32 division) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct mtp_loss_bwd_params *p = params;
	params_default(params, d);
	if (k == 1)
		p->factor = 0.3;
	if (k == 2)
		p->main_scale = 1.0 / 3.0;
	return k >= 0 && k <= 2;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mtp_loss_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[2];
	struct mtp_loss_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mtp_loss_bwd_impl, m, d, in, out, err));
	return mtp_loss_bwd_cfg_init(&c, params, m, in, 2, out, 2, device, err);
}

static const int modes_read[] = {MODE_MTP_LOSS_SCALE, MODE_MTP_LOSS_COMBINE, -1};

const struct align_op_impl mtp_loss_bwd_impl = {
	2,
	in_specs,
	2,
	out_specs,
	"T=16,K=3",
	modes_read,
	sizeof(struct mtp_loss_bwd_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
