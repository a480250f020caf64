/* embedding.h: token embedding lookup (DSv4 `embed`, MCore `LanguageModelEmbedding`, PaddleFleet
 * `embedding`), with the optional output scale some models apply (DSv4 applies none: scale = 0).
 * ids[T] i32, table[V,D] f32 (the fp32 master of a bf16 parameter) -> y[T,D] bf16.
 *
 * Operation order per element (CPU twin = specification), w = table[ids[t], j]:
 *   scale == 0 (DSv4, every framework):  y = R(w)                  (the bf16 parameter's value)
 *   scale != 0, EMBED_SCALE=fp32:        y = R(F(R(w)) * scale)     (bf16 row times a python float:
 *                                                                   torch opmath fp32, one rounding)
 *   scale != 0, EMBED_SCALE=bf16:        y = R(F(R(w)) * F(R(scale))) (a normalizer tensor in the model
 *                                                                   dtype, HF Gemma style)
 * Every id must lie in [0, V): an id outside is ALIGN_ERR_INPUT naming the token and the id (the CUDA twin
 * copies ids to the host and checks them before its launch: it waits for that copy).
 * Error bound vs fp64: exact lookup; with a scale, half a bf16 ulp of R(w)*scale (fp32: one rounding of
 * an exact-in-fp32 product up to 2^-24), bf16 scale adds the scale's own rounding (2^-9 relative).
 * Checked by test-ops-ref-model.c. Rows are independent: batch invariant by construction.
 * Config: embedding_cfg_init (embedding.c) checks the tensors and decodes the mode; both twins read it.
 */
#ifndef ALIGN_EMBEDDING_H
#define ALIGN_EMBEDDING_H

#include <stdint.h>

#include "numerics.h"

#ifdef __cplusplus
extern "C" {
#endif

struct align_modes;
struct align_tensor;
struct align_err;

struct embedding_params {
	float scale; /* output scale (e.g. sqrt(D) in Gemma); 0 = none (DSv4) */
};

/* what both twins run */
struct embedding_cfg {
	int64_t T, V, D; /* ids [T], table [V,D], y [T,D] */
	int scaled;	 /* params.scale != 0 */
	float scale;	 /* the scale as applied: params.scale, or F(R(scale)) with EMBED_SCALE=bf16 */
};

/* Check in/out (data may be NULL) and decode the mode for device (enum align_device): ALIGN_ERR_INPUT for
 * a bad tensor, ALIGN_ERR_INTERNAL for a modes.def value not handled; the message goes to err. */
int embedding_cfg_init(struct embedding_cfg *c, const struct embedding_params *p, const struct align_modes *m,
		       const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		       struct align_err *err);

/* ids[0..T) inside [0, V), else ALIGN_ERR_INPUT "embedding: ids[3] = 5000 is outside [0, 1024)" */
int embedding_check_ids(const int32_t *ids, int64_t T, int64_t V, struct align_err *err);

/* one output element from the table value w (binary32) */
ALIGN_HD static inline float embedding_value(const struct embedding_cfg *c, float w)
{
	float r = align_round_bf16(w);
	return c->scaled ? r * c->scale : r;
}

int embedding_fwd_cpu(const struct embedding_params *p, const struct align_modes *m, const struct align_tensor *in,
		      int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_EMBEDDING_H */
