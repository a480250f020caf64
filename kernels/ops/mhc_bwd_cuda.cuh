/* mhc_bwd_cuda.cuh: the CUDA twin of the hc_pre and hc_head backwards (contract: mhc_pre_bwd.h,
 * mhc_head_bwd.h; specification: mhc_bwd_fwd_cpu in mhc_pre_bwd.c), included by mhc_pre_bwd.cu and
 * mhc_head_bwd.cu. The C twin's bytes in every portable mode: the forward recompute uses the forward
 * twins' device helpers (mhc_pairwise_sq_seq, mhc_dev_rms, mm_dot_ref, mhc_dev_compute_h,
 * mhc_dev_sigmoid, mhc_dev_exp: bitwise the C helpers, as the forward CUDA twins show), and the backward
 * steps are the shared ALIGN_HD functions of mhc_bwd.h.
 * Layout (a first, correct version; not tuned): kernel 1, one thread per token (forward recompute,
 * Sinkhorn states in the workspace, dh, dx, the token's dmix and dscale terms into the workspace);
 * kernel 2, one thread per parameter-gradient element (dfn[r, i], dbase[r], dscale[c]), each a token sum
 * in the stated order. No atomics. Not run on a GPU yet (the session that wrote it had none).
 */
#ifndef ALIGN_MHC_BWD_CUDA_CUH
#define ALIGN_MHC_BWD_CUDA_CUH

#include "mhc_cuda.cuh"
#include "mhc_pre_bwd.h"
#include "op_cfg.h"

struct mhc_bwd_args {
	const align_bf16 *x, *dy;
	const float *fn, *base, *scale, *dpost, *dcomb;
	align_bf16 *dx;
	float *dfn, *dbase, *dscale;
	float *dmix, *dh, *ps, *St, *Dv; /* workspace: [T,R], [T,R], [T,3], [T,steps*N*N], [T,steps*N] */
	unsigned char *Cl;		 /* [T, steps*N] */
	struct mhc_bwd_cfg c;
	int emode;
};

static __global__ void mhc_bwd_token_kernel(const struct mhc_bwd_args a)
{
	const struct mhc_bwd_cfg *c = &a.c;
	const long long T = c->T, N = c->N, D = c->D, K = c->K, R = c->R;
	const int n = (int)N, pb = c->mm.param_bf16, steps = 2 * c->p.sinkhorn_iters;
	for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < T;
	     t += (long long)gridDim.x * blockDim.x) {
		const align_bf16 *xt = a.x + t * K, *gy = a.dy + t * D;
		float scale[3], mix[MHC_BWD_MAX_R], h[MHC_BWD_MAX_R], s[2 * MHC_MAX_N], yc[MHC_MAX_N];
		for (int i = 0; i < (c->head ? 1 : 3); i++)
			scale[i] = mhc_bwd_par(a.scale[i], pb);
		const float ss = mhc_pairwise_sq_seq(xt, K);
		const float rs = mhc_dev_rms(ss, K, c->mm.inv_rms, c->p.norm_eps);
		for (long long r = 0; r < R; r++) {
			mix[r] = mm_dot_ref(xt, 1, a.fn + r * K, 0, K, c->mm.opd_x, c->mm.opd_fn, c->mm.accum, 0);
			h[r] = mhc_dev_compute_h(mix[r], rs, scale[mhc_bwd_group(c, r)], mhc_bwd_par(a.base[r], pb),
						 c->mm.computeh_fma);
		}
		for (long long i = 0; i < (c->head ? N : 2 * N); i++)
			s[i] = mhc_dev_sigmoid(h[i], a.emode);
		float *dht = a.dh + t * R;
		for (long long j = 0; j < N; j++) {
			float pre = c->head || c->hpre_eps ? hn_add(s[j], c->p.hc_eps) : s[j];
			yc[j] = c->mm.coef_bf16 ? align_round_bf16(pre) : pre;
			float dpre = mhc_bwd_dpre(c, gy, xt + j * D, t * N + j);
			dht[j] = mhc_bwd_sig(dpre, s[j]);
		}
		if (!c->head) {
			for (long long i = 0; i < N; i++)
				dht[N + i] = mhc_bwd_sig(hn_mul(2.0f, a.dpost[t * N + i]), s[N + i]);
			float E[MHC_MAX_N * MHC_MAX_N], P[MHC_MAX_N * MHC_MAX_N], G[MHC_MAX_N * MHC_MAX_N];
			for (int j = 0; j < n; j++) {
				const float *M0 = h + 2 * N + j * N;
				float mx = M0[0];
				for (int k = 1; k < n; k++)
					mx = M0[k] > mx ? M0[k] : mx;
				for (int k = 0; k < n; k++)
					E[j * n + k] = mhc_dev_exp(hn_sub(M0[k], mx), a.emode);
			}
			float *St = a.St + t * steps * N * N, *Dv = a.Dv + t * steps * N;
			unsigned char *Cl = a.Cl + t * steps * N;
			mhc_bwd_sinkhorn_fwd(c, E, n, St, Dv, Cl, P);
			for (int i = 0; i < n * n; i++)
				G[i] = a.dcomb[t * N * N + i];
			mhc_bwd_sinkhorn(c, St, Dv, Cl, P, G, n, dht + 2 * N);
		}
		mhc_bwd_tail(c, scale, ss, rs, mix, dht, xt, a.fn, gy, yc, a.dx + t * K, a.dmix + t * R, a.ps + 3 * t);
	}
}

static __global__ void mhc_bwd_param_kernel(const struct mhc_bwd_args a)
{
	const struct mhc_bwd_cfg *c = &a.c;
	const long long R = c->R, K = c->K, G = c->head ? 1 : 3, n = R * K + R + G;
	for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n;
	     q += (long long)gridDim.x * blockDim.x) {
		if (q < R * K)
			a.dfn[q] = mhc_bwd_dfn(c, a.dmix, a.x, q / K, q % K);
		else if (q < R * K + R)
			a.dbase[q - R * K] = mhc_bwd_dbase(c, a.dh, q - R * K);
		else
			a.dscale[q - R * K - R] = mhc_bwd_tsum(a.ps + (q - R * K - R), 3, c->T, c->tsum_split);
	}
}

static inline int mhc_bwd_cuda(const char *op, const void *params, const struct align_modes *m,
			       const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out,
			       const struct align_launch *launch, struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	struct mhc_launch L;
	struct mhc_bwd_args a;
	ALIGN_TRY(dev->err, mhc_launch_resolve(op, launch, &L, dev->err));
	ALIGN_TRY(dev->err, mhc_bwd_cfg_init(&a.c, op, (const struct mhc_params *)params, m, in, n_in, out, n_out,
					     ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, op, in, n_in, out, n_out));
	const long long T = a.c.T, N = a.c.N, R = a.c.R, K = a.c.K, steps = 2 * (long long)a.c.p.sinkhorn_iters;
	const long long sn = a.c.head ? 0 : steps * N; /* Sinkhorn states kept per token (divisors) */
	size_t nf = (size_t)(2 * T * R + 3 * T + T * sn * N + T * sn);
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, nf * sizeof(float) + (size_t)(T * sn) + 16, &ws));
	a.dmix = (float *)ws;
	a.dh = a.dmix + T * R;
	a.ps = a.dh + T * R;
	a.St = a.ps + 3 * T;
	a.Dv = a.St + T * sn * N;
	a.Cl = (unsigned char *)(a.Dv + T * sn);
	a.x = (const align_bf16 *)in[0].data;
	a.fn = (const float *)in[1].data;
	a.base = (const float *)in[2].data;
	a.scale = (const float *)in[3].data;
	a.dy = (const align_bf16 *)in[4].data;
	a.dpost = a.c.head ? NULL : (const float *)in[5].data;
	a.dcomb = a.c.head ? NULL : (const float *)in[6].data;
	a.dx = (align_bf16 *)out[0].data;
	a.dfn = (float *)out[1].data;
	a.dbase = (float *)out[2].data;
	a.dscale = (float *)out[3].data;
	a.emode = mhc_emode(&a.c.mm);
	const int th = L.serial ? 1 : 64;
	if (T > 0) {
		ALIGN_CUDA_LAUNCH(mhc_bwd_token_kernel, mhc_grid((T + th - 1) / th, L.grid_cap), th, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_bwd_token_kernel */
	}
	const long long np = R * K + R + (a.c.head ? 1 : 3);
	const int tp = L.serial ? 1 : L.threads;
	ALIGN_CUDA_LAUNCH(mhc_bwd_param_kernel, mhc_grid((np + tp - 1) / tp, L.grid_cap), tp, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_bwd_param_kernel */
	return 0;
}

#endif /* ALIGN_MHC_BWD_CUDA_CUH */
