/* Rendezvous through a TCPStore for launches without MPI (torchrun, or any
 * launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
 *
 * Where the store is:
 * - TORCHELASTIC_USE_AGENT_STORE=True (torchrun's static rendezvous, and c10d
 *   from torch 2.5): torchrun's agent already serves MASTER_ADDR:MASTER_PORT;
 *   every rank is a client, in that torch's dialect.
 * - otherwise rank 0 serves distmgr's own store on MASTER_PORT (torch >= 2.2
 *   dialect, VALIDATE first) and every rank, rank 0 too, is a client.
 * The dialect of an agent's store: DIST_STORE_DIALECT when set (torch22,
 * torch21, torch113 or a torch version), else read from what torchrun puts in
 * the environment: TORCH_NCCL_ASYNC_ERROR_HANDLING (torch >= 2.2) or
 * NCCL_ASYNC_ERROR_HANDLING (torch <= 2.1; requests common to 1.13 and 2.1).
 *
 * Keys live under "/distmgr/<TORCHELASTIC_RUN_ID>/<restart>/", apart from
 * the keys of a PyTorch program in the same job. Every exchange is
 * collective: all ranks make the same calls in the same order. */
#ifndef DISTMGR_STORE_RENDEZVOUS_H
#define DISTMGR_STORE_RENDEZVOUS_H

#include <stddef.h>

#include "distmgr/launch.h"
#include "store/store.h"

/* Where the store is and how to speak to it: a pure function of the launch
 * and the environment. */
typedef struct dist__rdzv_plan {
  int agent_store;             /* 1: another process serves it; 0: rank 0 serves distmgr's */
  int external;                /* 1: not torchrun's agent but DIST_STORE_SERVER=external (e.g. PyTorch's rank 0) */
  int torchrun;                /* started by torchrun (TORCHELASTIC_RUN_ID): MASTER_PORT is the job's own */
  dist__store_dialect dialect;
  char prefix[160];            /* of every key */
} dist__rdzv_plan;

dist_status dist__rdzv_plan_make(const dist_launch *l, const char *const *env, dist__rdzv_plan *out);

typedef struct dist__rdzv dist__rdzv;

/* Connect (and, on rank 0 without an agent store, serve first). `timeout`
 * bounds every later exchange too. */
dist_status dist__rdzv_open(const dist_launch *l, const char *const *env, double timeout, dist__rdzv **out);
/* Everyone's `len` bytes, in rank order, into all[size * len]. A rank that
 * does not arrive in time is named in the error, and every later exchange
 * (these three) then fails at once with it instead of waiting again. */
dist_status dist__rdzv_all_gather(dist__rdzv *r, const char *what, const void *mine, size_t len, void *all);
/* root's `len` bytes into everyone's buf. */
dist_status dist__rdzv_broadcast(dist__rdzv *r, const char *what, int root, void *buf, size_t len);
dist_status dist__rdzv_barrier(dist__rdzv *r, const char *what);
/* DIST_SUCCESS, or the error of the exchange a rank did not arrive for
 * (engines check it before a rendezvous of their own). */
dist_status dist__rdzv_still_there(const dist__rdzv *r, const char *what);
/* The client and the key prefix, for an engine's own rendezvous (Gloo). */
dist__store_client *dist__rdzv_client(dist__rdzv *r);
const char *dist__rdzv_prefix(const dist__rdzv *r);
/* After a failure `code` on this rank (local): tell the others, so that
 * their waits on the store end now with that code and `why` ("rank R of N
 * gave up: why") instead of at the timeout. Every rank's client watches that
 * key (dist__store_watch); the first rank's message is kept. Best effort. */
void dist__rdzv_give_up(dist__rdzv *r, dist_status code, const char *why);
/* The same on a key of an engine's own (a Gloo connect's, which its
 * members watch meanwhile in the client's slot 1): the rendezvous goes on. */
void dist__rdzv_give_up_on(dist__rdzv *r, const char *key, dist_status code, const char *why);
/* orderly (collective): a barrier first, so that rank 0's server outlives
 * every use; else (after a failure) just let go. */
dist_status dist__rdzv_close(dist__rdzv *r, int orderly);

#endif
