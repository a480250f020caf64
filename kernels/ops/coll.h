/* coll.h: the collectives allreduce, reduce_scatter and all_gather (ops.def), one contract for the three
 * (they share the layout, the dtypes and the orders, so they share this header, coll.c and coll.cu).
 *
 * Layout. A collective is not a single-process op: its inputs are the N ranks' contributions, one row per
 * rank, and the twins compute every rank's output from all of them.
 *   allreduce      x[N,D]   -> y[N,D]    y[r,i] = sum over ranks k of x[k,i]  (every row the same)
 *   reduce_scatter x[N,N*D] -> y[N,D]    y[r,i] = sum over k of x[k, r*D+i]
 *   all_gather     x[N,D]   -> y[N,N*D]  y[r, k*D+i] = x[k,i]                  (no arithmetic)
 * N = ranks (at most COLL_MAX_RANKS), D = elements per rank. The dtype of x and y is ALIGN_COLL_DTYPE
 * (fp32, bf16, fp16). With `align run OP --ranks N` each process holds one row and NCCL moves the data
 * (harness/run/run-ranks.c, run-nccl.cu); the rows and the bits are the same as here.
 *
 * Orders (ALIGN_COLL_IMPL). F = exact widening to binary32, R = rounding to the dtype (RNE), + = binary32
 * addition; binary32 addition is commutative bit for bit, so a chain is fixed by its sequence of ranks.
 *   fixed (both twins, and the --ranks path: all-to-all, this sum, all-gather):
 *       acc = F(x[0,i]); acc = acc + F(x[k,i]) for k = 1..N-1; y = R(acc).
 *       Rank order, one rounding at the end: the bits are a function of the contributions alone, not of
 *       the message size, chunking, channels, protocol or algorithm, and not of N for a fixed list of
 *       contributions. (For fp32 R is the identity.)
 *   nccl (GPU only, --ranks): NCCL's own ncclAllReduce / ncclReduceScatter under the NCCL_* environment.
 *   nccl_model_ring, nccl_model_tree (C twin only): NCCL's order computed on the CPU (coll_model.h):
 *       a chain of ranks per element, and in a tree the children's partial sums, each addition rounded
 *       to the dtype as NCCL's device reductions do: acc = R(F(acc) + F(x)) (for bf16/fp16 this equals
 *       the correctly rounded sum, binary32 being wide enough: p32 >= 2 p16 + 2).
 *       reduce_scatter under nccl_model_tree: NCCL has no Tree reduce-scatter; the model gives the Tree
 *       all-reduce's elements of the rank's block (what an all-reduce-then-slice emulation gets).
 *   all_gather reads no COLL_IMPL: it copies, so every engine gives the inputs' bits.
 * Which value a framework mimics: modes.def.
 *
 * Params (struct coll_params) hold the NCCL model's parameters: channels, protocol, chunk size, ring
 * order, nodes. `align run` fills them from NCCL's own variables (NCCL_MAX_NCHANNELS, NCCL_PROTO,
 * NCCL_BUFFSIZE, NCCL_RINGS, ...: coll_params_from_env), so one environment drives NCCL and its model.
 * Config: coll_cfg_init checks the tensors and decodes the modes once; both twins read only the cfg.
 */
#ifndef ALIGN_COLL_H
#define ALIGN_COLL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_MAX_RANKS 64 /* ranks a twin handles (the model's ring order array) */

struct align_modes;
struct align_tensor;
struct align_err;

enum coll_kind { COLL_ALLREDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER };
enum coll_proto { COLL_PROTO_SIMPLE, COLL_PROTO_LL, COLL_PROTO_LL128 };

/* the NCCL model's parameters (ignored by fixed and nccl) */
struct coll_params {
	int nchannels;	  /* channels the collective is split over (NCCL_MIN/MAX_NCHANNELS pin it); >= 1 */
	int proto;	  /* enum coll_proto (NCCL_PROTO) */
	int64_t buffsize; /* NCCL_BUFFSIZE of the protocol, bytes (Simple default 4 MiB) */
	int nnodes;	  /* tree model: nodes; ranks are split into nnodes equal consecutive groups */
	int nrings;	  /* ring orders given (0: identity); channel c uses ring c % nrings */
	uint8_t ring[4][COLL_MAX_RANKS]; /* ring[j][p] = rank at ring position p (NCCL_RINGS) */
};

/* what both twins run */
struct coll_cfg {
	int kind;	  /* enum coll_kind */
	int64_t N, D;	  /* ranks, elements per rank (per output block for reduce_scatter) */
	int64_t in_cols;  /* elements per input row: D, N*D (reduce_scatter) */
	int64_t out_cols; /* elements per output row: D, N*D (all_gather) */
	int dtype;	  /* enum align_dtype of x and y */
	int impl;	  /* ALIGN_COLL_IMPL_* value (all_gather: FIXED) */
};

int coll_cfg_init(struct coll_cfg *c, int kind, const struct coll_params *p, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		  struct align_err *err);

/* the C twins */
int allreduce_fwd_cpu(const struct coll_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		      struct align_tensor *out, int n_out);
int reduce_scatter_fwd_cpu(const struct coll_params *p, const struct align_modes *m, const struct align_tensor *in,
			   int n_in, struct align_tensor *out, int n_out);
int all_gather_fwd_cpu(const struct coll_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out);

/* The fixed-order sum on the GPU (coll.cu): y[i] = R(F(x[0,i]) + ... + F(x[nrows-1,i])) for i < n, x rows
 * row_len apart, dtype dt, enqueued on stream (a cudaStream_t). The --ranks path runs it on the blocks its
 * all-to-all gathered. 0, or 3 with the message on stderr. */
int coll_sum_rows_cuda(const void *x, int dt, int64_t nrows, int64_t row_len, int64_t n, void *y, void *stream);

/* The model's defaults (1 channel, Simple, NCCL's default buffer sizes, identity ring, one node), then
 * NCCL's variables where set: NCCL_MAX_NCHANNELS (else NCCL_MIN_NCHANNELS), NCCL_PROTO (one of Simple, LL,
 * LL128), NCCL_BUFFSIZE / NCCL_LL_BUFFSIZE / NCCL_LL128_BUFFSIZE, NCCL_RINGS ("0 1 2 3|3 2 1 0"; at most
 * 4 orders). nnodes is the caller's (NCCL has no variable for it). getenv_fn reads a variable (getenv).
 * 0, or ALIGN_ERR_INPUT with the variable and its value in err. */
int coll_params_from_env(struct coll_params *p, int nranks, const char *(*getenv_fn)(const char *),
			 struct align_err *err);

/* bus bandwidth as nccl-tests defines it (doc/PERFORMANCE.md): algbw = bytes / seconds, where bytes is
 * the per-rank buffer of the operation (allreduce: count * size; reduce_scatter: the input, N * recvcount
 * * size; all_gather: the output, N * sendcount * size); busbw = algbw * 2(N-1)/N for allreduce and
 * algbw * (N-1)/N for reduce_scatter and all_gather. Bytes per second. */
double coll_algbw(double bytes, double seconds);
double coll_busbw(int kind, int nranks, double bytes, double seconds);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_COLL_H */
