/* DASO's global synchronisation: parameters are packed as their change
 * since the group's last agreed copy (ref), downcast, summed over the cross
 * group in chunks of non-blocking all-reduces, and merged (the loops are in
 * daso_kernels.c). The last wire element flags a non-finite value or a
 * failed send, so either fails every rank of the group in the same round
 * trip, and nobody waits for a rank that gave up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "core/fault.h"
#include "reducer/daso_internal.h"
#include "backend/wait.h"
#include "backend/half_ops.h"
#include "mem/memops.h"

#if defined(MPICH) && defined(__GNUC__) && !defined(__clang__)
/* MPICH's headers give MPI_Waitall/MPI_Testall access attributes that GCC
 * applies to MPI_STATUSES_IGNORE (a sentinel address), warning that it
 * points to 0 bytes; the sentinel is never dereferenced. */
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

static size_t wsize(const dist_daso *d) { return dist_dtype_size(d->o.downcast); }

/* The last wire element: 0 or 1, in the wire type. */
static void set_flag(dist_daso *d, int bad) {
  float one = bad ? 1.0f : 0.0f;
  void *at = (char *)d->wire + (size_t)d->n * wsize(d);
  if (d->o.downcast == DIST_F32) memcpy(at, &one, sizeof one);
  else *(uint16_t *)at = d->o.downcast == DIST_BF16 ? dist_f32_to_bf16(one) : dist_f32_to_f16(one);
}

static int flag_set(const dist_daso *d) {
  const void *at = (const char *)d->wire + (size_t)d->n * wsize(d);
  if (d->o.downcast == DIST_F32) return *(const float *)at != 0;
  uint16_t h = *(const uint16_t *)at;
  return (d->o.downcast == DIST_BF16 ? dist_bf16_to_f32(h) : dist_f16_to_f32(h)) != 0;
}

/* A host view of parameter q's data: the data itself, or a copy of device
 * memory in d->stage (write_back returns it). */
static dist_status host_view(dist_daso *d, const dist__param *q, void **v) {
  if (q->memory == DIST_MEM_HOST) {
    *v = q->data;
    return DIST_SUCCESS;
  }
  DIST_CHECK(dist__mem_download(q->memory, d->stage, q->data, dist__param_bytes(q)));
  DIST_CHECK(dist__mem_sync(q->memory));
  *v = d->stage;
  return DIST_SUCCESS;
}

static dist_status write_back(dist_daso *d, const dist__param *q) {
  if (q->memory == DIST_MEM_HOST) return DIST_SUCCESS;
  DIST_CHECK(dist__mem_upload(q->memory, q->data, d->stage, dist__param_bytes(q)));
  return dist__mem_sync(q->memory);
}

dist_status dist__daso_sync_init(dist_daso *d) {
  size_t stage = 0;
  for (int i = 0; i < d->p->n; i++) {
    const dist__param *q = &d->p->p[i];
    if (q->dtype != DIST_F32 && q->dtype != DIST_F64)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_create: parameter '%s' is %s (f32 or f64 expected)", q->name,
                         dist_dtype_name(q->dtype));
    d->n += q->numel;
    d->nbytes += dist__param_bytes(q);
    if (q->memory != DIST_MEM_HOST && dist__param_bytes(q) > stage) stage = dist__param_bytes(q);
  }
  int64_t chunk = d->o.sending_chunk_size;
  d->nchunks = (int)((d->n + 1 + chunk - 1) / chunk);
  if ((d->n + 1 + chunk - 1) / chunk > 0x7fffffff) return dist__error(DIST_ERR_UNSUPPORTED, "dist_daso_create: too many chunks");
  d->ref = malloc(d->nbytes + 1);
  d->wire = malloc(wsize(d) * (size_t)(d->n + 1));
  d->req = malloc(sizeof *d->req * (size_t)d->nchunks);
  if (d->o.merge == DIST_DASO_MERGE_DELTA) d->sent = malloc(d->nbytes + 1);
  if (stage) d->stage = malloc(stage);
  if (!d->ref || !d->wire || !d->req || (d->o.merge == DIST_DASO_MERGE_DELTA && !d->sent) || (stage && !d->stage))
    return dist__error(DIST_ERR_NO_MEMORY, "dist_daso_create: buffers for %lld parameters", (long long)d->n);
  for (int c = 0; c < d->nchunks; c++) dist__pending_init(&d->req[c]);
  /* MPI's 16-bit sum op, made now so that a send cannot fail on it */
  if (d->o.downcast != DIST_F32 && dist__backend_host(&d->cross) == &dist__backend_mpi)
    DIST_CHECK(dist__half_sum_ready(d->o.downcast));
  return dist__daso_set_ref(d);
}

void dist__daso_sync_free(dist_daso *d) {
  for (int c = 0; d->inflight && c < d->nchunks; c++) dist__backend_host(&d->cross)->wait(&d->req[c]);
  free(d->ref);
  free(d->wire);
  free(d->req);
  free(d->sent);
  free(d->stage);
}

dist_status dist__daso_set_ref(dist_daso *d) {
  size_t off = 0;
  for (int i = 0; i < d->p->n; i++) {
    const dist__param *q = &d->p->p[i];
    size_t bytes = dist__param_bytes(q);
    DIST_CHECK(dist__mem_download(q->memory, (char *)d->ref + off, q->data, bytes)); /* a memcpy for host memory */
    DIST_CHECK(dist__mem_sync(q->memory));
    off += bytes;
  }
  return DIST_SUCCESS;
}

/* Pack every parameter into the wire; a local failure is kept in
 * d->send_error and sent as the flag, so the group still completes the
 * round and learns of it there instead of waiting for this rank. */
static int pack_all(dist_daso *d) {
  size_t off = 0;
  int64_t k0 = 0;
  int bad = 0;
  for (int i = 0; i < d->p->n && !d->send_error; i++) {
    const dist__param *q = &d->p->p[i];
    void *v;
    d->send_error = dist__fault("daso_pack") ? dist__error(DIST_ERR_INTERNAL, "injected fault (daso_pack)") : host_view(d, q, &v);
    if (!d->send_error)
      bad |= dist__daso_pack(q->dtype, v, (char *)d->ref + off, d->sent ? (char *)d->sent + off : NULL, d->o.downcast,
                             (char *)d->wire + (size_t)k0 * wsize(d), q->numel);
    off += dist__param_bytes(q);
    k0 += q->numel;
  }
  if (d->send_error) {
    snprintf(d->send_why, sizeof d->send_why, "%s", dist_last_error());
    memset(d->wire, 0, wsize(d) * (size_t)d->n);
    bad = 1;
  }
  return bad;
}

dist_status dist__daso_send(dist_daso *d, int sender) {
  if (d->lrank != sender) return DIST_SUCCESS;
  if (d->inflight) return dist__error(DIST_ERR_INTERNAL, "DASO: a send is already in flight");
  set_flag(d, pack_all(d));
  const dist__backend *be = dist__backend_host(&d->cross);
  int64_t total = d->n + 1, chunk = d->o.sending_chunk_size;
  for (int c = 0; c < d->nchunks; c++) {
    int64_t lo = c * chunk, len = total - lo < chunk ? total - lo : chunk;
    void *at = (char *)d->wire + (size_t)lo * wsize(d);
    dist_status s = d->o.downcast == DIST_F32 ? be->all_reduce(&d->cross, at, at, (size_t)len, DIST_F32, DIST_SUM, &d->req[c])
                                              : be->sum16(&d->cross, at, (size_t)len, d->o.downcast, &d->req[c]);
    if (s) {
      for (int k = 0; k < c; k++) be->wait(&d->req[k]);
      return s;
    }
  }
  d->inflight = 1;
  d->bytes_sent += (uint64_t)total * wsize(d);
  d->syncs++;
  return DIST_SUCCESS;
}

dist_status dist__daso_poke(dist_daso *d) {
  if (!d->inflight) return DIST_SUCCESS;
  /* completed requests are done: the later waits return at once */
  for (int c = 0; c < d->nchunks; c++) {
    int done = 0;
    DIST_CHECK(dist__backend_host(&d->cross)->test(&d->req[c], &done));
  }
  return DIST_SUCCESS;
}

/* The sender's side: wait for every chunk (Heat waits for one at most),
 * check the flag and the sum, merge into the parameters. Once merging
 * starts (*merged), ref moves on for every parameter even when one cannot
 * be merged here (a failed device copy), so it stays equal across the cross
 * group; the first failure is returned. */
static dist_status finish(dist_daso *d, int blocking, int btw, int *merged) {
  for (int c = 0; c < d->nchunks; c++) {
    dist_status ws = dist__backend_host(&d->cross)->wait(&d->req[c]);
    if (ws) return ws; /* left in flight: the job cannot continue (see wait.h) */
  }
  d->inflight = 0;
  if (d->send_error) {
    dist_status e = d->send_error;
    d->send_error = DIST_SUCCESS;
    return dist__error(e, "DASO global sync: this rank could not send its parameters: %s", d->send_why);
  }
  if (flag_set(d))
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "DASO global sync: a sent parameter buffer held NaN or inf, or a change beyond %s range, or a rank "
                       "failed to send (on some rank of this cross group); the parameters were not merged",
                       dist_dtype_name(d->o.downcast));
  if (dist__daso_wire_bad(d->o.downcast, d->wire, d->n)) /* the same sum on every sender: all fail alike */
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "DASO global sync: the sum of the sent changes overflows %s; the parameters were not merged",
                       dist_dtype_name(d->o.downcast));
  /* One node: nothing to average with (daso.h: a no-op). Merging would pull
   * the parameters back towards the stale copy sent, or round them by the
   * downcast; the send above still served to check them for NaN. */
  if (d->nodes == 1) return dist__daso_set_ref(d);
  *merged = 1;
  dist_status first = DIST_SUCCESS;
  char why[512] = "";
  size_t off = 0;
  int64_t k0 = 0;
  for (int i = 0; i < d->p->n; i++) {
    dist__param *q = &d->p->p[i];
    void *v, *ref = (char *)d->ref + off;
    const void *sum = (const char *)d->wire + (size_t)k0 * wsize(d);
    dist_status s = dist__fault("daso_merge") ? dist__error(DIST_ERR_INTERNAL, "injected fault (daso_merge)")
                                              : host_view(d, q, &v);
    if (s) dist__daso_advance_ref(q->dtype, ref, d->o.downcast, sum, q->numel, d->nodes);
    else if (d->sent && !blocking)
      dist__daso_merge_delta(q->dtype, v, ref, d->o.downcast, sum, (char *)d->sent + off, q->numel, d->nodes);
    else dist__daso_merge(q->dtype, v, ref, d->o.downcast, sum, q->numel, d->nodes, btw, blocking);
    if (!s) s = write_back(d, q);
    if (s && !first) first = s, snprintf(why, sizeof why, "DASO merge of parameter '%s': %s", q->name, dist_last_error());
    off += dist__param_bytes(q);
    k0 += q->numel;
  }
  return first ? dist__error(first, "%s", why) : DIST_SUCCESS;
}

/* The node waits for its sender's global sync, which takes as long as the
 * link does: wait without spinning, so that the sender and the network
 * stack get the cores (bench/daso, 4 ranks on 2 cores: blocking syncs 11 %
 * faster). A 50 us nap is noise against a sync of milliseconds. */
/* My copy of the group's agreed parameters from the node's sender, in
 * pieces that fit MPI's int count. */
static dist_status bcast_ref(dist_daso *d, int sender) {
  const size_t piece = (size_t)1 << 30;
  for (size_t off = 0; off < d->nbytes; off += piece) {
    size_t len = d->nbytes - off < piece ? d->nbytes - off : piece;
    DIST_CHECK(dist__backend_host(d->local)->broadcast(d->local, (char *)d->ref + off, len, DIST_U8, sender));
  }
  return DIST_SUCCESS;
}

dist_status dist__daso_receive(dist_daso *d, int sender, int blocking, int btw) {
  dist_status s = DIST_SUCCESS;
  int merged = 0;
  if (d->lrank == sender)
    s = d->inflight ? finish(d, blocking, btw, &merged) : dist__error(DIST_ERR_INTERNAL, "DASO: nothing to receive");
  /* The sender's outcome reaches its node first, so no rank waits for a
   * broadcast that will not come: the status, and whether the merge ran
   * (then the node follows the sender even if part of it failed there). */
  char why[512] = "";
  if (s) snprintf(why, sizeof why, "%s", dist_last_error());
  int32_t st[2] = {(int32_t)s, merged};
  DIST_CHECK(dist__broadcast_napping(d->local, st, 2, DIST_I32, sender));
  if (st[0]) { /* the sender's reason too (e.g. the NaN), not just the code */
    dist_status bs = dist__backend_host(d->local)->broadcast(d->local, why, sizeof why, DIST_U8, sender);
    if (bs && !s) return bs;
    why[sizeof why - 1] = '\0';
    if (!st[1]) return s ? dist__error(s, "%s", why)
                         : dist__error((dist_status)st[0], "DASO global sync failed on local rank %d of this node: %s",
                                       sender, why);
  }
  for (int i = 0; i < d->p->n && d->lsize > 1; i++) {
    dist__param *q = &d->p->p[i];
    const dist__backend *be;
    DIST_CHECK(dist__backend_for(q->memory, d->local, &be));
    DIST_CHECK(be->broadcast(d->local, q->data, (size_t)q->numel, q->dtype, sender));
  }
  /* After a blocking sync every rank holds the same parameters: all groups
   * restart their changes from there (else a group that did not send would
   * round a change spanning many batches). If the sender's merge failed
   * partly, its parameters are not the agreed ones, but its ref is: the
   * node takes that, so the next sync's average is right everywhere.
   * Non-blocking: only the sending group's ref moved. */
  dist_status r = !blocking ? DIST_SUCCESS : st[0] ? bcast_ref(d, sender) : dist__daso_set_ref(d);
  if (!st[0]) return r;
  return s ? dist__error(s, "%s", why)
           : dist__error((dist_status)st[0], "DASO global sync failed on local rank %d of this node: %s", sender, why);
}
