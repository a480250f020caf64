/* mtp_loss.c: CPU twin of the MTP loss scaling and combination (contract in mtp_loss.h). */
#include "mtp_loss.h"

#include <math.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"lm", ALIGN_DT_F32, "T", {ALIGN_FILL_POSITIVE, 8.0f, 0, 0}, "main (lm) loss per row"},
	{"mtp", ALIGN_DT_F32, "T,K", {ALIGN_FILL_POSITIVE, 8.0f, 0, 0}, "MTP loss of each depth per row"},
};
static const struct align_tensor_spec out_specs[] = {
	{"scaled", ALIGN_DT_F32, "T", {ALIGN_FILL_NORMAL, 0, 0, 0}, "the MTP term (factor / K scaling)"},
	{"total", ALIGN_DT_F32, "T", {ALIGN_FILL_NORMAL, 0, 0, 0}, "forward value of the training loss"},
};

int mtp_loss_cfg_init(struct mtp_loss_cfg *c, const struct mtp_loss_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err)
{
	(void)device;
	ALIGN_TRY(err, op_cfg_counts(err, "mtp_loss", m, in, n_in, out, n_out, 2, 2));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "mtp_loss: no params");
	ALIGN_TRY(err, op_cfg_rank(err, "mtp_loss", "mtp", &in[1], 2));
	int64_t T = in[1].shape[0], K = in[1].shape[1], t1[1] = {T}, tk[2] = {T, K};
	if (K < 1)
		return align_fail(err, ALIGN_ERR_INPUT, "mtp_loss: K = %lld depths, want at least 1", (long long)K);
	if (!isfinite(p->factor))
		return align_fail(err, ALIGN_ERR_INPUT, "mtp_loss: factor %g is not finite", p->factor);
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp_loss", "input", "lm", &in[0], ALIGN_DT_F32, 1, t1));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp_loss", "input", "mtp", &in[1], ALIGN_DT_F32, 2, tk));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp_loss", "output", "scaled", &out[0], ALIGN_DT_F32, 1, t1));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp_loss", "output", "total", &out[1], ALIGN_DT_F32, 1, t1));
	int sum_first = 0;
	ALIGN_TRY(err, op_cfg_flag(err, "mtp_loss", "mtp_loss_cfg_init", m, MODE_MTP_LOSS_SCALE,
				   ALIGN_MTP_LOSS_SCALE_PER_DEPTH, ALIGN_MTP_LOSS_SCALE_SUM_THEN_SCALE, &sum_first));
	int combine;
	switch ((enum align_MTP_LOSS_COMBINE_value)m->v[MODE_MTP_LOSS_COMBINE]) {
	case ALIGN_MTP_LOSS_COMBINE_AUTOSCALER:
		combine = MTP_LOSS_AUTOSCALER;
		break;
	case ALIGN_MTP_LOSS_COMBINE_ADD_DETACH:
		combine = MTP_LOSS_ADD_DETACH;
		break;
	case ALIGN_MTP_LOSS_COMBINE_ADD:
		combine = MTP_LOSS_ADD;
		break;
	default:
		return op_cfg_unhandled(err, "mtp_loss", MODE_MTP_LOSS_COMBINE, m->v[MODE_MTP_LOSS_COMBINE],
					"mtp_loss_cfg_init");
	}
	c->T = T, c->K = K;
	c->sum_first = sum_first;
	c->combine = combine;
	c->s = (float)(p->factor / (double)K);
	c->lambda = (float)p->factor;
	c->inv_k = (float)(1.0 / (double)K);
	return ALIGN_OK;
}

int mtp_loss_fwd_cpu(const struct mtp_loss_params *p, const struct align_modes *m, const struct align_tensor *in,
		     int n_in, struct align_tensor *out, int n_out)
{
	struct mtp_loss_cfg c;
	ALIGN_TRY(NULL, mtp_loss_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "mtp_loss", in, n_in, out, n_out));
	const float *lm = in[0].data, *L = in[1].data;
	float *scaled = out[0].data, *total = out[1].data;
	for (int64_t t = 0; t < c.T; t++)
		mtp_loss_row(&c, lm[t], L + t * c.K, &scaled[t], &total[t]);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	((struct mtp_loss_params *)params)->factor = 0.1; /* Megatron DSv4 recipes */
}

/* 0: factor 0.1 (Megatron recipes), 1: 0.3 (PaddleNLP multi_token_pred_lambda default) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	if (k == 1)
		((struct mtp_loss_params *)params)->factor = 0.3;
	return k >= 0 && k <= 1;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mtp_loss_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[2];
	struct mtp_loss_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mtp_loss_impl, m, d, in, out, err));
	return mtp_loss_cfg_init(&c, params, m, in, 2, out, 2, device, err);
}

static const int modes_read[] = {MODE_MTP_LOSS_SCALE, MODE_MTP_LOSS_COMBINE, -1};

const struct align_op_impl mtp_loss_impl = {
	2,
	in_specs,
	2,
	out_specs,
	"T=16,K=3",
	modes_read,
	sizeof(struct mtp_loss_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
