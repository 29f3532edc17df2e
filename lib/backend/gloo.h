/* Gloo, the host engine of launches without MPI: a C view of a small C++
 * shim (gloo_shim.cpp). A context is a set of ranks fully connected over TCP,
 * met through the rendezvous store (store/store.h: Gloo's own store
 * interface is served by distmgr's client). Every call is collective over
 * the context and bounded by its timeout; Gloo's exceptions come back as a
 * dist_status with Gloo's message. Built when configure finds libgloo. */
#ifndef DISTMGR_BACKEND_GLOO_H
#define DISTMGR_BACKEND_GLOO_H

#include <stddef.h>

#include "distmgr/coll.h"
#include "mem/dtype.h"
#include "store/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist__gloo dist__gloo;

/* Rank `rank` of `size` meets the others under key prefix `prefix` (unique
 * per context) in `store`. The TCP address: GLOO_SOCKET_IFNAME's interface
 * (as PyTorch reads it) when set, else this host's name. */
dist_status dist__gloo_connect(dist__store_client *store, const char *prefix, int rank, int size, double timeout,
                               dist__gloo **out);
void dist__gloo_free(dist__gloo *g);
int dist__gloo_rank(const dist__gloo *g);
int dist__gloo_size(const dist__gloo *g);

/* In place; t one of f32, f64, i32, i64, u8 (sum, max, min, prod), c64/c128 (sum, avg's sum, prod). */
dist_status dist__gloo_all_reduce(dist__gloo *g, void *buf, size_t count, dist_dtype t, dist_reduce_op op);
dist_status dist__gloo_broadcast(dist__gloo *g, void *buf, size_t bytes, int root);
/* Rank r's bytes[r] bytes, concatenated in rank order; mine from `send`. */
dist_status dist__gloo_all_gather_v(dist__gloo *g, const void *send, void *recv, const size_t *bytes);
/* send holds send_bytes[r] bytes for each rank r in rank order; recv gets
 * recv_bytes[r] from each, in rank order. */
dist_status dist__gloo_all_to_all_v(dist__gloo *g, const void *send, const size_t *send_bytes, void *recv,
                                    const size_t *recv_bytes);
/* Chunk r of `send` (counts[r] elements, in rank order) reduced over the
 * ranks into rank r's recv: one Gloo reduce per chunk, rooted at its owner
 * (Gloo has no reduce-scatter-v). */
dist_status dist__gloo_reduce_scatter_v(dist__gloo *g, const void *send, void *recv, const size_t *counts,
                                        dist_dtype t, dist_reduce_op op);
dist_status dist__gloo_barrier(dist__gloo *g);
/* One step of a point-to-point schedule: `sbytes` from send to rank `to`
 * and `rbytes` from rank `from` into recv (a negative rank: no traffic that
 * way). Every step of one schedule on a context uses the same slot, so steps
 * pair up by order, as MPI messages of one tag do. */
dist_status dist__gloo_sendrecv(dist__gloo *g, const void *send, size_t sbytes, int to, void *recv, size_t rbytes,
                                int from);
/* Send `bytes` to every other rank and receive as much from each into recv:
 * block k-1 from rank me-k (mod P), k = 1..P-1. On the control steps' slot. */
dist_status dist__gloo_exchange_all(dist__gloo *g, const void *send, size_t bytes, void *recv);
/* In-place sum of bf16 or f16 values that stay 16-bit on the wire: each
 * combine adds in f32 and rounds back (as the MPI and NCCL backends do). */
dist_status dist__gloo_sum16(dist__gloo *g, void *buf, size_t count, dist_dtype t);
/* count elements of t reduced over the ranks into root's recv (send ==
 * recv allowed); non-roots' recv is not written. */
dist_status dist__gloo_reduce(dist__gloo *g, const void *send, void *recv, size_t count, dist_dtype t,
                              dist_reduce_op op, int root);
/* Point to point, all posted before any is waited for: to each peer r,
 * send_bytes[r] bytes from send + send_displ[r]; from each peer r,
 * recv_bytes[r] bytes into recv + recv_displ[r] (bytes throughout); my own
 * block is copied. NULL arrays: no traffic that way. The sizes must pair up
 * across ranks, as MPI's would. */
dist_status dist__gloo_exchange(dist__gloo *g, const void *send, const size_t *send_bytes, const size_t *send_displ,
                                void *recv, const size_t *recv_bytes, const size_t *recv_displ);

#ifdef __cplusplus
}
#endif

#endif
