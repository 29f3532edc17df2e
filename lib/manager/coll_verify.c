/* The cross-rank verification round of collectives: every rank of the group
 * agrees that all arguments are valid and match before any data moves. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manager/coll_call.h"
#include "backend/faults.h"
#include "backend/wait.h"

void dist__sig_tensor(dist__call *c, const dist_tensor *t, int dim) {
  c->sig.dtype = t->dtype;
  c->sig.memory = t->memory;
  c->sig.ndim = t->ndim;
  c->sig.dim = dim;
  for (int i = 0; i < t->ndim; i++) c->sig.shape[i] = i == dim ? 0 : t->shape[i];
}

void dist__sig_sizes(dist__call *c, const int64_t *sizes) {
  c->sig.sizes = dist__hash(c->sig.sizes ? c->sig.sizes : DIST__HASH_SEED, sizes, sizeof *sizes * (size_t)c->g->size);
}

static void describe_sig(const dist__sig *s, char *buf, size_t n) {
  dist_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = (dist_dtype)s->dtype;
  t.memory = (dist_memory)s->memory;
  t.ndim = s->ndim >= 0 && s->ndim <= DIST_TENSOR_MAX_DIMS ? s->ndim : 0;
  memcpy(t.shape, s->shape, sizeof t.shape);
  dist__describe_shape(&t, buf, n);
  size_t k = strlen(buf);
  if (s->dim >= 0 && k < n) k += (size_t)snprintf(buf + k, n - k, " dim %d", s->dim);
  if (s->op >= 0 && k < n) k += (size_t)snprintf(buf + k, n - k, " op %s", dist_reduce_op_name((dist_reduce_op)s->op));
  if (s->root >= 0 && k < n) snprintf(buf + k, n - k, " root %d", s->root);
}

/* "dist_all_gather (call #5 on this group) with f32[4,3] dim 0". */
static void describe_call(const dist__call *c, const dist__sig *s, char *buf, size_t n) {
  char kind[sizeof s->kind + 1], rest[200];
  memcpy(kind, s->kind, sizeof s->kind);
  kind[sizeof s->kind] = 0;
  (c->describe ? c->describe : describe_sig)(s, rest, sizeof rest);
  snprintf(buf, n, "%s (call #%llu on this group) with %s", kind, (unsigned long long)s->seq, rest);
}

/* The error paths' exchanges below are waited for like the round (control
 * waits): a rank that gave up during the round (its contribution completed
 * ours) never joins them. Their buffers are on the heap and left to MPI when
 * the wait gives up. */

/* Error path only: find the first rank whose signature differs from rank 0's. */
static dist_status mismatch(dist__call *c) {
  int P = c->g->size;
  dist__sig *all = malloc(sizeof *all * (size_t)(P + 1)), *mine = all + P;
  if (!all) return dist__error(DIST_ERR_MISMATCH, "%s: ranks of group '%s' passed different arguments", c->what,
                               c->g->name);
  *mine = c->sig;
  DIST_CHECK(dist__control_all_gather(c->g, mine, sizeof *mine, all, "argument check"));
  int who = 1;
  while (who < P - 1 && memcmp(&all[who], &all[0], sizeof *all) == 0) who++;
  char a[300], b[300];
  describe_call(c, &all[0], a, sizeof a);
  describe_call(c, &all[who], b, sizeof b);
  char extra[600] = "";
  if (memcmp(&all[who], &all[0], offsetof(dist__sig, sizes)) == 0) snprintf(extra, sizeof extra, " (their size arrays differ)");
  free(all);
  /* A rank in another call may have failed before it (an unknown group). */
  dist__faults_note(c->g->members[who], extra, sizeof extra);
  dist__faults_note(c->g->members[0], extra, sizeof extra);
  return dist__error(DIST_ERR_MISMATCH, "%s: rank %d of group '%s' disagrees with rank 0: %s vs %s%s", c->what, who,
                     c->g->name, b, a, extra);
}

static uint64_t mix(uint64_t x) { /* splitmix64 finalizer */
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

static uint64_t pair_hash(int src, int dst, int64_t count) {
  return mix(mix(((uint64_t)(uint32_t)src << 32) | (uint32_t)dst) ^ (uint64_t)count);
}

void dist__sig_exchange(dist__call *c, const int64_t *send, const int64_t *recv) {
  int me = c->g->rank;
  uint64_t b = 0;
  for (int r = 0; r < c->g->size; r++) b += pair_hash(me, r, send[r]) - pair_hash(r, me, recv[r]);
  c->xsend = send;
  c->xrecv = recv;
  c->balance = b;
}

/* Error path only: name the first (receiver, sender) pair whose counts disagree. */
static dist_status exchange_mismatch(dist__call *c) {
  int P = c->g->size, me = c->g->rank;
  /* theirs[r]: what rank r says it sends me; then mine, key, best, d[2], sum[2] */
  int64_t *theirs = calloc((size_t)(2 * P + 6), sizeof *theirs), *mine = theirs + P, *key = mine + P;
  if (!theirs) return dist__error(DIST_ERR_NO_MEMORY, "%s: count check", c->what);
  int64_t *best = key + 1, *d = key + 2, *sum = key + 4;
  memcpy(mine, c->xsend, sizeof *mine * (size_t)P);
  DIST_CHECK(dist__control_all_to_all(c->g, mine, theirs, "count check"));
  *key = INT64_MAX;
  for (int r = 0; r < P && *key == INT64_MAX; r++)
    if (theirs[r] != c->xrecv[r]) *key = (int64_t)me * P + r;
  DIST_CHECK(dist__control_all_reduce(c->g, key, best, 1, DIST_MIN, "count check"));
  if (*best == *key && *key != INT64_MAX) d[0] = theirs[*key % P], d[1] = c->xrecv[*key % P];
  DIST_CHECK(dist__control_all_reduce(c->g, d, sum, 2, DIST_SUM, "count check"));
  int64_t found = *best, says = sum[0], expects = sum[1];
  free(theirs);
  if (found == INT64_MAX) /* a hash collision in the balance, or none at all */
    return dist__error(DIST_ERR_MISMATCH, "%s: send and receive counts disagree between ranks of group '%s'", c->what,
                       c->g->name);
  int recv = (int)(found / P), send = (int)(found % P);
  return dist__error(DIST_ERR_MISMATCH,
                     "%s: rank %d of group '%s' sends %lld slices to rank %d, which expects %lld (its recv_sizes[%d])",
                     c->what, send, c->g->name, (long long)says, recv, (long long)expects, send);
}

dist_status dist__call_ready(dist__call *c, dist_status s) {
  if (!dist__state.settings.verify || c->g->size == 1) return s;
  return dist__agree_group(c->g, s, c->what);
}

static dist_status verify_round(dist__call *c, dist_status local, dist__spec *spec) {
  if (c->g->size == 1) return local;
  dist__round r = dist__round_init_group(c->g, local, dist__hash(DIST__HASH_SEED, &c->sig, sizeof c->sig));
  r.in[3] = local ? 0 : (int64_t)c->balance;
  r.in[4] = spec && spec->posted;
  r.spec = spec;
  DIST_CHECK(dist__round_run_group(c->g, &r, "the argument check round"));
  if (r.out[0]) { /* some rank failed: its message, named once */
    char where[160];
    snprintf(where, sizeof where, " on group '%s' (call #%llu)", c->g->name, (unsigned long long)c->sig.seq);
    return dist__round_failure_group(c->g, &r, local, c->what, where);
  }
  if (dist__round_hash_differs(&r)) { /* every check round shares mismatch()'s exchange: one point */
    DIST_CHECK(dist__round_same_point_group(c->g, "the check round of a collective", c->what));
    return mismatch(c);
  }
  if (r.out[3] != 0) return exchange_mismatch(c); /* same on every rank: a sum */
  return DIST_SUCCESS;
}

dist_status dist__call_verify_always(dist__call *c, dist_status local) { return verify_round(c, local, NULL); }

dist_status dist__call_verify_spec(dist__call *c, dist_status local, dist__spec *spec) {
  if (!dist__state.settings.verify) return local;
  return verify_round(c, local, spec);
}

dist_status dist__call_verify(dist__call *c, dist_status local) { return dist__call_verify_spec(c, local, NULL); }
