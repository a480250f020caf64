/* matmul_bwd.h: backward of the matmul op (y = a @ b^T, matmul.h): the data gradient da = dy @ b and the
 * weight gradient db = dy^T @ a, with Megatron's main_grad accumulation as a mode.
 * Inputs a[T,D] f32, b[F,D] f32 (the forward's inputs), dy[T,F] f32 (the output gradient), main_grad[F,D]
 * (dtype per WGRAD_DTYPE: the existing gradient buffer; read only by WGRAD_ACCUM=main_grad and add, the
 * op keeps one signature so `align run`, traces and explain see the same tensors in every mode).
 * Outputs da[T,D] (bf16 or f32 per MATMUL_OUT, the dtype of the forward's activations' gradient) and
 * db[F,D] (bf16 or f32 per WGRAD_DTYPE). Dims T tokens, D in features, F out features, S tokens per
 * sequence (T = B*S; the tokens are stored batch-first, t = b*S + s; read by WGRAD_ORDER=sb only).
 * Saved from forward: nothing beyond the forward's inputs (a linear saves its input and weight).
 *
 * Operation order (CPU twin = specification; every element read as binary32 and rounded per
 * MATMUL_OPERAND as matmul.h step 1: op(v) = F(R(v)) bf16, rna tf32, or v fp32; products of two bf16 or
 * two tf32 operands are exact in binary32):
 *   dgrad  da[t,d] = dot over f = 0..F-1 of op(dy[t,f]) * op(b[f,d]) in the MATMUL_ACCUM order (seq,
 *          split16 in 16 contiguous chunks of ceil(F/16), fp64), MATMUL_FMA as matmul.h (fmaf from +0,
 *          or acc = p0 then acc + R32(p_k)); stored R(acc) (MATMUL_OUT=bf16) or acc (fp32).
 *   wgrad  acc[f,d] = dot over the T tokens of op(dy[t,f]) * op(a[t,d]), the tokens visited per
 *          WGRAD_ORDER (the K = tokens reduction of dy^T @ a):
 *            bs:      batch-first flattening [b,s]: t = 0, 1, ..., T-1, one sequential chain;
 *            sb:      sequence-first flattening [s,b] (Megatron's [s,b,h] activations viewed as [s*b,h]):
 *                     k = 0..T-1 visits t = (k mod B)*S + floor(k/B), one sequential chain;
 *            split16: split-K: bs order in 16 contiguous chunks of ceil(T/16) tokens, each a chain, the
 *                     partials then added left to right (empty chunks skipped);
 *          each chain per MATMUL_FMA as the dgrad. Then per WGRAD_ACCUM, with mg = main_grad[f,d] as
 *          stored (WGRAD_DTYPE) and R_w the rounding to WGRAD_DTYPE (none for fp32):
 *            fresh:     db = R_w(acc)                   (PyTorch autograd: a new .grad)
 *            main_grad: db = R_w(acc + mg)              (fused wgrad GEMM with beta = 1: one add of the
 *                                                        fp32 accumulator to the buffer in the epilogue)
 *            add:       db = R_w(mg + F(R_bf16(acc)))   (unfused: the wgrad is first written as the bf16
 *                                                        parameter's .grad, then main_grad.add_(grad))
 * Frameworks (read upstream): Megatron-LM megatron/core/tensor_parallel/layers.py,
 * LinearWithGradAccumulationAndAsyncCommunication.backward: prepare_input_tensors_for_wgrad_compute
 * views the [s,b,h] grad_output and input as [s*b,h] (WGRAD_ORDER=sb); with gradient_accumulation_fusion
 * (the training default) fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output,
 * weight.main_grad) (apex: cublasGemmEx with beta = 1 into the fp32 main_grad: WGRAD_ACCUM=main_grad),
 * wgrad_gemm_accum_fp16 for a bf16 main_grad (WGRAD_DTYPE=bf16); without it grad_weight =
 * grad_output.t().matmul(total_input) and the DDP hook (megatron/core/distributed, _make_backward_post_hook)
 * does param.main_grad.add_(param.grad.data) (WGRAD_ACCUM=add). PyTorch autograd (mm_mat2_backward in
 * tools/autograd/templates/FunctionsManual.cpp): grad.t().mm(self) over the batch-first flattened
 * tokens into a fresh tensor of the parameter's dtype (bs, fresh, bf16). Paddle: the batch-first [b,s]
 * layout and fused_linear_param_grad_add (fp32 main_grad accumulated by the GEMM: bs, main_grad).
 *
 * Error bound vs the exact sums of the operands as used (u = 2^-24, S = sum |p_k| over the reduction):
 *   dgrad as matmul.h with K = F; wgrad chain: T u S (bs, sb), (ceil(T/16) + 16) u S (split16); plus
 *   main_grad: u (|acc| + |mg|) for the add; add: 2^-8 |acc| (the bf16 .grad) + u (|.| + |mg|); plus
 *   half an ulp of the output dtype. test-ops-ref-bwd.c checks these against a long double reference and
 *   central differences of the fp64 forward on a small shape.
 * Batch invariance: da's row t depends only on row t of dy (a row of the dgrad is its own dot); db sums
 * over all tokens, so its bits depend on T by definition (not a row output).
 * Engines: the portable order only (MATMUL_IMPL is not read); cuBLAS as autograd calls it is a later step.
 */
#ifndef ALIGN_MATMUL_BWD_H
#define ALIGN_MATMUL_BWD_H

#include <stdint.h>

#include "matmul.h"
#include "nan_host.h"

#ifdef __cplusplus
extern "C" {
#endif

struct matmul_bwd_params {
	int64_t S; /* tokens per sequence (dims S by default); 0 = T (one sequence) */
};

/* what both twins run: dims and every decoded choice (matmul_bwd_cfg_init) */
struct matmul_bwd_cfg {
	int64_t T, D, F, S, B; /* a[T,D], b[F,D], dy[T,F]; T = B*S */
	int operand;	       /* ALIGN_MATMUL_OPERAND_* */
	int accum;	       /* ALIGN_MATMUL_ACCUM_*: the dgrad's K order */
	int fma;	       /* MATMUL_FMA=on */
	int da_dtype;	       /* enum align_dtype of da (MATMUL_OUT) */
	int order;	       /* ALIGN_WGRAD_ORDER_* */
	int wacc;	       /* ALIGN_WGRAD_ACCUM_* */
	int w_dtype;	       /* enum align_dtype of db and main_grad (WGRAD_DTYPE) */
};

/* fmaf with the host's NaN bits on the device (nan_host.h hn_fmaf); the plain fmaf on the host */
ALIGN_HD static inline float mmb_fmaf(float a, float b, float c)
{
	return hn_fmaf(a, b, c);
}

/* element k of a strided operand sequence, rounded per MATMUL_OPERAND */
ALIGN_HD static inline float mmb__op(const float *x, int64_t i, int operand)
{
	return matmul_operand(x[i], operand);
}

/* a chain over k = k0..k1-1 of op(x[xi(k)]) * op(y[yi(k)]) with xi(k) = xo + tok(k)*xs (same for y);
 * tok(k) = k, or the sequence-first map when B > 0 */
ALIGN_HD static inline int64_t mmb__tok(int64_t k, int64_t B, int64_t S)
{
	return B > 0 ? (k % B) * S + k / B : k;
}

ALIGN_HD static inline float mmb__chain(const float *x, int64_t xs, const float *y, int64_t ys, int64_t k0, int64_t k1,
					int64_t B, int64_t S, int operand, int fma)
{
	if (k1 <= k0)
		return 0.0f;
	float acc;
	if (fma) {
		acc = 0.0f;
		for (int64_t k = k0; k < k1; k++) {
			int64_t t = mmb__tok(k, B, S);
			acc = mmb_fmaf(mmb__op(x, t * xs, operand), mmb__op(y, t * ys, operand), acc);
		}
		return acc;
	}
	int64_t t = mmb__tok(k0, B, S);
	acc = hn_mul(mmb__op(x, t * xs, operand), mmb__op(y, t * ys, operand));
	for (int64_t k = k0 + 1; k < k1; k++) {
		t = mmb__tok(k, B, S);
		acc = hn_add(acc, hn_mul(mmb__op(x, t * xs, operand), mmb__op(y, t * ys, operand)));
	}
	return acc;
}

/* dot over n strided elements: seq (one chain), split16 (16 chunks of ceil(n/16), partials left to right)
 * or fp64 (binary64 sum of exact products, k ascending, one rounding); B > 0: sequence-first token map */
ALIGN_HD static inline float mmb_dot(const float *x, int64_t xs, const float *y, int64_t ys, int64_t n, int split16,
				     int f64, int64_t B, int64_t S, int operand, int fma)
{
	if (f64) {
		double s = 0.0;
		for (int64_t k = 0; k < n; k++)
			s = hn_addd(s,
				    hn_muld(hn_f2d(mmb__op(x, k * xs, operand)), hn_f2d(mmb__op(y, k * ys, operand))));
		return hn_d2f(s);
	}
	if (!split16)
		return mmb__chain(x, xs, y, ys, 0, n, B, S, operand, fma);
	int64_t c = (n + 15) / 16;
	float total = 0.0f;
	for (int64_t k0 = 0; k0 < n && c > 0; k0 += c) {
		float part = mmb__chain(x, xs, y, ys, k0, k0 + c < n ? k0 + c : n, B, S, operand, fma);
		total = k0 == 0 ? part : hn_add(total, part);
	}
	return total;
}

/* da[t,d] before the output rounding */
ALIGN_HD static inline float matmul_bwd_dgrad(const struct matmul_bwd_cfg *c, const float *dy, const float *b,
					      int64_t t, int64_t d)
{
	return mmb_dot(dy + t * c->F, 1, b + d, c->D, c->F, c->accum == ALIGN_MATMUL_ACCUM_SPLIT16,
		       c->accum == ALIGN_MATMUL_ACCUM_FP64, 0, 0, c->operand, c->fma);
}

/* db[f,d] as binary32 before the WGRAD_DTYPE rounding; mg: main_grad[f,d] as stored (read for main_grad
 * and add only) */
ALIGN_HD static inline float matmul_bwd_wgrad(const struct matmul_bwd_cfg *c, const float *dy, const float *a,
					      int64_t f, int64_t d, float mg)
{
	float acc = mmb_dot(dy + f, c->F, a + d, c->D, c->T, c->order == ALIGN_WGRAD_ORDER_SPLIT16, 0,
			    c->order == ALIGN_WGRAD_ORDER_SB ? c->B : 0, c->S, c->operand, c->fma);
	if (c->wacc == ALIGN_WGRAD_ACCUM_MAIN_GRAD)
		return hn_add(acc, mg);
	if (c->wacc == ALIGN_WGRAD_ACCUM_ADD)
		return hn_add(mg, align_round_bf16(acc));
	return acc;
}

/* Check a[T,D], b[F,D], dy[T,F] f32, main_grad[F,D] (WGRAD_DTYPE) -> da[T,D] (MATMUL_OUT), db[F,D]
 * (WGRAD_DTYPE), T % S == 0 (p->S; 0 = T), and decode the modes for device.
 * ALIGN_ERR_INPUT, ALIGN_ERR_UNSUPPORTED (MATMUL_IMPL other than portable), ALIGN_ERR_INTERNAL (a value not
 * handled); the message goes to err (NULL: stderr). */
int matmul_bwd_cfg_init(struct matmul_bwd_cfg *c, const struct matmul_bwd_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err);

int matmul_bwd_fwd_cpu(const struct matmul_bwd_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MATMUL_BWD_H */
