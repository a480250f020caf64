/* coll_model.h: a CPU model of the order in which NCCL sums the ranks' contributions (the C twin's
 * ALIGN_COLL_IMPL=nccl_model_ring / nccl_model_tree; contract of the collectives: coll.h).
 *
 * Read from NVIDIA/nccl (master at 2.30.7: src/device/all_reduce.h runRing / runTreeUpDown,
 * src/device/reduce_scatter.h runRing, src/include/device.h ncclCollCbdPart and ncclProtoGrainSize,
 * src/enqueue.cc the channel split and calcCollChunking, src/graph/trees.cc ncclGetBtree / ncclGetDtree).
 * What is VERIFIED from that source and what is ASSUMED is marked; the check against real NCCL bits on
 * several GPUs is a later issue.
 *
 * Ring all-reduce (VERIFIED, all_reduce.h runRing). The buffer is cut into per-channel parts
 * (coll_model_parts). Within a part of count c with chunk count cc, loops of N*cc elements: chunk j of a
 * loop covers elements [j*cc, (j+1)*cc); in the last, short loop (rem < N*cc) cc is
 * alignUp(divUp(rem, N), 16/size). The rank at ring position p first sends chunk (p-1) mod N; each next
 * rank adds its own data; the rank at position j finishes chunk j. So an element of chunk j is
 *     x[ring[j+1]] + x[ring[j+2]] + ... + x[ring[j]]   (positions mod N, one rounding per addition).
 * Message size moves the chunk boundaries, hence the order: the source of "Ring gives other bits for the
 * same data sent as 2 MiB or 16 MiB".
 * Ring reduce-scatter (VERIFIED, reduce_scatter.h runRing): the block of the rank at ring position p is
 * summed from position p+1 around to p, whatever the chunking.
 *
 * Channel split (VERIFIED for one collective alone in a kernel plan, enqueue.cc; ASSUMED: the collective
 * is the only task of its plan, and calcCollChunking leaves Ring/Simple's chunk at buffsize / NCCL_STEPS *
 * chunkSteps): traffic = max(32 KiB, count*size*T) with T = 2 (allreduce) or 1 (LL: times 4);
 * cells of divUp(divUp(32 KiB, T), 16)*16 bytes, filled channel by channel (first channel up to
 * divUp(traffic/nch, 16)*16 of traffic, then equal middle channels, the remainder last), the element
 * count trimmed from the last part. Chunk bytes per channel part: Simple buffsize/8*4 (NCCL_STEPS = 8,
 * ALLREDUCE_CHUNKSTEPS = 4: ASSUMED defaults), LL buffsize/8/2, LL128 buffsize/8 * 15/16; the chunk count
 * is whole protocol grains (Simple 512 bytes, LL 16, LL128 1920).
 *
 * Tree all-reduce (VERIFIED: runTreeUpDown reduces up the tree then broadcasts the root's result, so
 * every rank gets the same bits; the element order does not depend on chunking). The tree of a channel:
 * inside a node, a chain from the node's first rank (the head) through its ranks in order (ASSUMED: the
 * chain follows rank order; NCCL follows its intra-node ring); between nodes, NCCL's double binary tree
 * of the node indices (trees.cc: channel c uses the btree for even c, its mirror (even node count) or
 * shift (odd) for odd c: ASSUMED even/odd). At each rank: acc = own contribution; then acc = acc + the
 * partial sum of each child in the order: next rank of the node's chain, tree child 0, tree child 1
 * (ASSUMED: the order NCCL's primitives add their receive peers). One node: the chain only, so an
 * element is x[head+L-1] + ... + x[head] for every element, channel and size.
 */
#ifndef ALIGN_COLL_MODEL_H
#define ALIGN_COLL_MODEL_H

#include <stdint.h>

#include "coll.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_MODEL_MAX_PARTS 64 /* channel parts (NCCL's MAXCHANNELS is 64) */

/* one channel's part of the buffer */
struct coll_part {
	int64_t offset;	     /* first element */
	int64_t count;	     /* elements */
	int64_t chunk_count; /* ring chunk, elements */
	int channel;	     /* channel id */
};

/* The per-channel parts of a collective of count elements of elt_size bytes (NCCL's channel split, as
 * above); kind selects the traffic per byte. Returns the number of parts (>= 1 when count > 0). */
int coll_model_parts(int kind, int64_t count, int elt_size, int nranks, const struct coll_params *p,
		     struct coll_part *parts);

/* Ring position j (0..N-1) of the chunk holding each element: start[e] = ring position whose rank's
 * contribution comes first (j+1 mod N), ring_of[e] = the ring order used (channel c: c % nrings). */
void coll_model_ring_starts(int64_t count, int elt_size, int nranks, const struct coll_params *p,
			    const struct coll_part *parts, int nparts, uint8_t *start, uint8_t *ring_of);

/* The ring order j of p (identity when none is given): order[pos] = rank. */
void coll_model_ring_order(const struct coll_params *p, int j, int nranks, int *order);

/* Sum of column i of the N contributions (x: N rows of row_len elements, dtype dt) along a chain of
 * ranks, one rounding to dt per addition: acc = x[chain[0]]; acc = R(F(acc) + F(x[chain[k]])). */
float coll_model_chain(const void *x, int dt, int64_t row_len, int64_t i, const int *chain, int n);

/* The Tree all-reduce value of column i for channel c (structure above); nnodes must divide N. */
float coll_model_tree(const void *x, int dt, int64_t row_len, int64_t i, int nranks, int nnodes, int channel);

/* ncclGetBtree's shape, re-derived: parent and two children of node r of n (-1 = none) */
void coll_model_btree(int n, int r, int *up, int *d0, int *d1);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_COLL_MODEL_H */
