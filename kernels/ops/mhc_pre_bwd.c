/* mhc_pre_bwd.c: CPU twin of the hc_pre and hc_head backwards (contract in mhc_pre_bwd.h,
 * mhc_head_bwd.h) and their configuration (mhc_bwd_cfg_init), which the CUDA twins call too. */
/* NaN picks in the written operand order, as the CUDA twin makes them (nan_host.h): gcc commuted one here */
#define ALIGN_NAN_WRITTEN_ORDER 1

#include "mhc_pre_bwd.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "op_cfg.h"
#include "ops.h"

int mhc_bwd_cfg_init(struct mhc_bwd_cfg *c, const char *op, const struct mhc_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err)
{
	const char *fn = "mhc_bwd_cfg_init";
	const int head = !strcmp(op, "mhc_head_bwd");
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, head ? 5 : 7, 4));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, mhc_check_x(op, &in[0], device, err));
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2], K = N * D, R = head ? N : (2 + N) * N;
	int64_t xs[3] = {T, N, D}, fs[2] = {R, K}, bs[1] = {R}, ss[1] = {head ? 1 : 3}, ys[2] = {T, D}, ns[2] = {T, N},
		cs[3] = {T, N, N};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "fn", &in[1], ALIGN_DT_F32, 2, fs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "base", &in[2], ALIGN_DT_F32, 1, bs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "scale", &in[3], ALIGN_DT_F32, 1, ss));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dy", &in[4], ALIGN_DT_BF16, 2, ys));
	if (!head) {
		ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dpost", &in[5], ALIGN_DT_F32, 2, ns));
		ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dcomb", &in[6], ALIGN_DT_F32, 3, cs));
	}
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dx", &out[0], ALIGN_DT_BF16, 3, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dfn", &out[1], ALIGN_DT_F32, 2, fs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dbase", &out[2], ALIGN_DT_F32, 1, bs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dscale", &out[3], ALIGN_DT_F32, 1, ss));
	if (p->sinkhorn_iters < 1 || 2 * p->sinkhorn_iters > MHC_BWD_MAX_STEPS)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: sinkhorn_iters = %d, must be 1..%d", op, p->sinkhorn_iters,
				  MHC_BWD_MAX_STEPS / 2);
	memset(c, 0, sizeof *c);
	c->T = T, c->N = N, c->D = D, c->K = K, c->R = R, c->head = head;
	c->p = *p;
	ALIGN_TRY(err, mhc_modes_init(&c->mm, op, m, device, err));
	ALIGN_TRY(err, mhc_bwd_dsum_cfg(err, op, m, T * N, D, &c->dsum_split, &c->dsum_torch, &c->dplan));
	int v;
	c->tsum_step = -1;
	switch ((enum align_MHC_BWD_TSUM_value)(v = m->v[MODE_MHC_BWD_TSUM])) {
	case ALIGN_MHC_BWD_TSUM_SEQ:
		break;
	case ALIGN_MHC_BWD_TSUM_SPLIT16:
		c->tsum_split = 1;
		break;
	case ALIGN_MHC_BWD_TSUM_TORCH:
		c->tsum_step = torch_sum_cols_step(T, R);
		if (c->tsum_step < 0 || c->tsum_step > TORCH_COLS_MAX_STEP)
			return align_fail(err, ALIGN_ERR_UNSUPPORTED,
					  "%s: ALIGN_MHC_BWD_TSUM=torch: x.sum(0) of the [%" PRId64 ", %" PRId64
					  "] base gradient is not modelled at this token count (ATen adds a cross-CTA "
					  "reduction sized by the SM count)",
					  op, T, R);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MHC_BWD_TSUM, v, fn);
	}
	if (head)
		return ALIGN_OK;
	switch ((enum align_MHC_SINKHORN_value)(v = m->v[MODE_MHC_SINKHORN])) {
	case ALIGN_MHC_SINKHORN_C1:
	case ALIGN_MHC_SINKHORN_C0:
	case ALIGN_MHC_SINKHORN_C0P:
		c->sinkhorn = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MHC_SINKHORN, v, fn);
	}
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_MHC_SUM_ORDER, ALIGN_MHC_SUM_ORDER_SEQ,
				   ALIGN_MHC_SUM_ORDER_TORCH, &c->torch_sums));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_MHC_HPRE_EPS, ALIGN_MHC_HPRE_EPS_OFF, ALIGN_MHC_HPRE_EPS_ON,
				   &c->hpre_eps));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_MHC_HPOST_EPS, ALIGN_MHC_HPOST_EPS_OFF, ALIGN_MHC_HPOST_EPS_ON,
				   &c->hpost_eps));
	switch ((enum align_MHC_BWD_SINKHORN_value)(v = m->v[MODE_MHC_BWD_SINKHORN])) {
	case ALIGN_MHC_BWD_SINKHORN_UNROLLED:
	case ALIGN_MHC_BWD_SINKHORN_AUTOGRAD:
	case ALIGN_MHC_BWD_SINKHORN_IMPLICIT:
		c->bwd_sinkhorn = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MHC_BWD_SINKHORN, v, fn);
	}
	return ALIGN_OK;
}

int mhc_bwd_fwd_cpu(const char *op, const struct mhc_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct mhc_bwd_cfg c;
	ALIGN_TRY(NULL, mhc_bwd_cfg_init(&c, op, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, op, in, n_in, out, n_out));
	const int64_t T = c.T, N = c.N, D = c.D, K = c.K, R = c.R;
	const struct mhc_modes *mm = &c.mm;
	const int pb = mm->param_bf16, n = (int)N;
	const int64_t steps = 2 * (int64_t)c.p.sinkhorn_iters;
	size_t nf = (size_t)R * K + 3 * (size_t)K + 2 * (size_t)T * R + 3 * (size_t)T + (size_t)steps * N * N +
		    (size_t)steps * N;
	float *buf = malloc(nf * sizeof(float));
	unsigned char *cl = malloc((size_t)steps * N + 1);
	if (!buf || !cl) {
		free(buf);
		free(cl);
		return ALIGN_ERR_INTERNAL;
	}
	float *fnr = buf, *x32 = fnr + R * K, *scratch = x32 + K, *dmix = scratch + 2 * K, *dh = dmix + T * R,
	      *ps = dh + T * R, *St = ps + 3 * T, *Dv = St + steps * N * N;
	const float *fn_in = in[1].data, *base_in = in[2].data, *scale_in = in[3].data;
	const align_bf16 *x = in[0].data, *dy = in[4].data;
	for (int64_t i = 0; i < R * K; i++)
		fnr[i] = mhc_bwd_par(fn_in[i], pb);
	float scale[3], base[MHC_BWD_MAX_R];
	for (int i = 0; i < (c.head ? 1 : 3); i++)
		scale[i] = mhc_bwd_par(scale_in[i], pb);
	for (int64_t r = 0; r < R; r++)
		base[r] = mhc_bwd_par(base_in[r], pb);
	for (int64_t t = 0; t < T; t++) {
		float mix[MHC_BWD_MAX_R], s[2 * MHC_MAX_N], yc[MHC_MAX_N];
		const align_bf16 *xt = x + t * K, *gy = dy + t * D;
		for (int64_t i = 0; i < K; i++)
			x32[i] = align_bf16_to_f32(xt[i]);
		float ss = align_reduce_hn(ALIGN_REDUCE_PAIRWISE, x32, K, 1, 0, 1);
		float rs = mm->inv_rms ? hn_div(1.0f, hn_add(align_sqrtf(hn_div(ss, (float)K)), c.p.norm_eps))
				       : align_rsqrtf(hn_add(hn_div(ss, (float)K), c.p.norm_eps));
		mhc_project(mm, x32, fnr, R, K, scratch, mix);
		float h[MHC_BWD_MAX_R];
		for (int64_t r = 0; r < R; r++)
			h[r] = mhc_compute_h(mix[r], rs, scale[mhc_bwd_group(&c, r)], base[r], mm->computeh_fma);
		for (int64_t i = 0; i < (c.head ? N : 2 * N); i++)
			s[i] = mhc_sigmoid(mm, h[i]);
		float *dht = dh + t * R;
		for (int64_t j = 0; j < N; j++) {
			float pre = c.head || c.hpre_eps ? hn_add(s[j], c.p.hc_eps) : s[j];
			yc[j] = mm->coef_bf16 ? align_round_bf16(pre) : pre;
			float dpre = mhc_bwd_dpre(&c, gy, xt + j * D, t * N + j);
			dht[j] = mhc_bwd_sig(dpre, s[j]);
		}
		if (!c.head) {
			const float *dpost = in[5].data, *dcomb = in[6].data;
			for (int64_t i = 0; i < N; i++)
				dht[N + i] = mhc_bwd_sig(hn_mul(2.0f, dpost[t * N + i]), s[N + i]);
			float E[MHC_MAX_N * MHC_MAX_N], P[MHC_MAX_N * MHC_MAX_N], G[MHC_MAX_N * MHC_MAX_N];
			for (int j = 0; j < n; j++) {
				const float *M0 = h + 2 * N + j * N;
				float mx = M0[0];
				for (int k = 1; k < n; k++)
					mx = M0[k] > mx ? M0[k] : mx;
				for (int k = 0; k < n; k++)
					E[j * n + k] = mhc_exp(mm, hn_sub(M0[k], mx));
			}
			mhc_bwd_sinkhorn_fwd(&c, E, n, St, Dv, cl, P);
			for (int i = 0; i < n * n; i++)
				G[i] = dcomb[t * N * N + i];
			mhc_bwd_sinkhorn(&c, St, Dv, cl, P, G, n, dht + 2 * N);
		}
		mhc_bwd_tail(&c, scale, ss, rs, mix, dht, xt, fn_in, gy, yc, (align_bf16 *)out[0].data + t * K,
			     dmix + t * R, ps + 3 * t);
	}
	float *dfn = out[1].data, *dbase = out[2].data, *dscale = out[3].data;
	for (int64_t r = 0; r < R; r++) {
		for (int64_t i = 0; i < K; i++)
			dfn[r * K + i] = mhc_bwd_dfn(&c, dmix, x, r, i);
		dbase[r] = mhc_bwd_dbase(&c, dh, r);
	}
	for (int g = 0; g < (c.head ? 1 : 3); g++)
		dscale[g] = mhc_bwd_tsum(ps + g, 3, T, c.tsum_split);
	free(buf);
	free(cl);
	return ALIGN_OK;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mhc_bwd_fwd_cpu("mhc_pre_bwd", params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[7], out[4];
	struct mhc_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mhc_pre_bwd_impl, m, d, in, out, err));
	return mhc_bwd_cfg_init(&c, "mhc_pre_bwd", params, m, in, 7, out, 4, device, err);
}

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "residual streams"},
	{"fn", ALIGN_DT_F32, "(2+N)*N,N*D", {ALIGN_FILL_NORMAL, 0.02f, 0, 0}, "mapping weight hc_fn"},
	{"base", ALIGN_DT_F32, "(2+N)*N", {ALIGN_FILL_NORMAL, 0.5f, 0, 0}, "hc_base"},
	{"scale", ALIGN_DT_F32, "3", {ALIGN_FILL_POSITIVE, 1.0f, 0, 0}, "hc_scale (pre, post, comb)"},
	{"dy", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of y"},
	{"dpost", ALIGN_DT_F32, "T,N", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of post"},
	{"dcomb", ALIGN_DT_F32, "T,N,N", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of comb"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dx", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of x"},
	{"dfn", ALIGN_DT_F32, "(2+N)*N,N*D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of hc_fn (summed over tokens)"},
	{"dbase", ALIGN_DT_F32, "(2+N)*N", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of hc_base"},
	{"dscale", ALIGN_DT_F32, "3", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of hc_scale"},
};
static const int modes_read[] = {MODE_MATH_IMPL,	MODE_MHC_SINKHORN,
				 MODE_MHC_SUM_ORDER,	MODE_MHC_HPRE_EPS,
				 MODE_MHC_RMS_FORM,	MODE_MHC_PROJ_GEMM,
				 MODE_MHC_PARAM,	MODE_MHC_COEF,
				 MODE_MHC_EXP,		MODE_MHC_COMPUTEH_FMA,
				 MODE_MHC_BWD_DSUM,	MODE_MHC_BWD_TSUM,
				 MODE_MHC_BWD_SINKHORN, -1};

const struct align_op_impl mhc_pre_bwd_impl = {
	7,
	in_specs,
	4,
	out_specs,
	"T=32,N=4,D=128",
	modes_read,
	sizeof(struct mhc_params),
	mhc_params_default,
	mhc_params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
