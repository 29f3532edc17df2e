/* DASO's global synchronisation: parameters are packed as their change
 * since the group's last agreed copy (ref), downcast, summed over the cross
 * group in chunks of non-blocking all-reduces, and merged. The last wire
 * element counts non-finite values, so a NaN fails every rank of the group
 * in the same round trip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "daso_internal.h"
#include "half_ops.h"
#include "memops.h"

static size_t wsize(const dist_daso *d) { return dist_dtype_size(d->o.downcast); }

static void wire_store(dist_daso *d, int64_t k, double v) {
  switch (d->o.downcast) {
    case DIST_BF16: ((uint16_t *)d->wire)[k] = dist_f32_to_bf16((float)v); break;
    case DIST_F16: ((uint16_t *)d->wire)[k] = dist_f32_to_f16((float)v); break;
    default: ((float *)d->wire)[k] = (float)v;
  }
}

static double wire_load(const dist_daso *d, int64_t k) {
  switch (d->o.downcast) {
    case DIST_BF16: return dist_bf16_to_f32(((const uint16_t *)d->wire)[k]);
    case DIST_F16: return dist_f16_to_f32(((const uint16_t *)d->wire)[k]);
    default: return ((const float *)d->wire)[k];
  }
}

/* Parameters <-> the host double scratch. */
static dist_status gather(dist_daso *d) {
  int64_t off = 0;
  for (int i = 0; i < d->p->n; i++) {
    const dist__param *q = &d->p->p[i];
    size_t bytes = dist__param_bytes(q);
    const void *src = q->data;
    void *tmp = NULL;
    if (q->memory != DIST_MEM_HOST) {
      if (!(tmp = malloc(bytes ? bytes : 1))) return dist__error(DIST_ERR_NO_MEMORY, "DASO: staging '%s'", q->name);
      dist_status s = dist__mem_download(q->memory, tmp, q->data, bytes);
      if (!s) s = dist__mem_sync(q->memory);
      if (s) return free(tmp), s;
      src = tmp;
    }
    for (int64_t k = 0; k < q->numel; k++)
      d->host[off + k] = q->dtype == DIST_F64 ? ((const double *)src)[k] : ((const float *)src)[k];
    free(tmp);
    off += q->numel;
  }
  return DIST_SUCCESS;
}

static dist_status scatter(dist_daso *d) {
  int64_t off = 0;
  for (int i = 0; i < d->p->n; i++) {
    dist__param *q = &d->p->p[i];
    size_t bytes = dist__param_bytes(q);
    void *dst = q->data, *tmp = NULL;
    if (q->memory != DIST_MEM_HOST) {
      if (!(tmp = malloc(bytes ? bytes : 1))) return dist__error(DIST_ERR_NO_MEMORY, "DASO: staging '%s'", q->name);
      dst = tmp;
    }
    for (int64_t k = 0; k < q->numel; k++) {
      if (q->dtype == DIST_F64) ((double *)dst)[k] = d->host[off + k];
      else ((float *)dst)[k] = (float)d->host[off + k];
    }
    dist_status s = tmp ? dist__mem_upload(q->memory, q->data, tmp, bytes) : DIST_SUCCESS;
    if (!s && tmp) s = dist__mem_sync(q->memory);
    free(tmp);
    DIST_CHECK(s);
    off += q->numel;
  }
  return DIST_SUCCESS;
}

dist_status dist__daso_sync_init(dist_daso *d) {
  for (int i = 0; i < d->p->n; i++) {
    const dist__param *q = &d->p->p[i];
    if (q->dtype != DIST_F32 && q->dtype != DIST_F64)
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_daso_create: parameter '%s' is %s (f32 or f64 expected)", q->name,
                         dist_dtype_name(q->dtype));
    d->n += q->numel;
  }
  int64_t chunk = d->o.sending_chunk_size;
  d->nchunks = (int)((d->n + 1 + chunk - 1) / chunk);
  if ((d->n + 1 + chunk - 1) / chunk > 0x7fffffff) return dist__error(DIST_ERR_UNSUPPORTED, "dist_daso_create: too many chunks");
  d->ref = malloc(sizeof(double) * (size_t)(d->n + 1));
  d->host = malloc(sizeof(double) * (size_t)(d->n + 1));
  d->wire = malloc(wsize(d) * (size_t)(d->n + 1));
  d->req = malloc(sizeof(MPI_Request) * (size_t)d->nchunks);
  if (d->o.merge == DIST_DASO_MERGE_DELTA) d->sent = malloc(sizeof(double) * (size_t)(d->n + 1));
  if (!d->ref || !d->host || !d->wire || !d->req || (d->o.merge == DIST_DASO_MERGE_DELTA && !d->sent))
    return dist__error(DIST_ERR_NO_MEMORY, "dist_daso_create: buffers for %lld parameters", (long long)d->n);
  for (int c = 0; c < d->nchunks; c++) d->req[c] = MPI_REQUEST_NULL;
  return dist__daso_set_ref(d);
}

void dist__daso_sync_free(dist_daso *d) {
  if (d->inflight) MPI_Waitall(d->nchunks, d->req, MPI_STATUSES_IGNORE);
  free(d->ref);
  free(d->host);
  free(d->wire);
  free(d->req);
  free(d->sent);
}

dist_status dist__daso_set_ref(dist_daso *d) {
  DIST_CHECK(gather(d));
  memcpy(d->ref, d->host, sizeof(double) * (size_t)d->n);
  return DIST_SUCCESS;
}

dist_status dist__daso_send(dist_daso *d, int sender) {
  if (d->lrank != sender) return DIST_SUCCESS;
  if (d->inflight) return dist__error(DIST_ERR_INTERNAL, "DASO: a send is already in flight");
  DIST_CHECK(gather(d));
  double bad = 0;
  for (int64_t k = 0; k < d->n; k++) {
    if (!isfinite(d->host[k])) bad += 1;
    wire_store(d, k, d->host[k] - d->ref[k]);
    if (d->o.downcast == DIST_F16 && !isfinite(wire_load(d, k))) bad += 1; /* a change beyond f16's range */
    if (d->sent) d->sent[k] = d->ref[k] + wire_load(d, k); /* exactly what this rank contributes */
  }
  wire_store(d, d->n, bad > 0 ? 1 : 0); /* a flag, not a count: it must survive 16-bit sums */
  MPI_Datatype t = d->o.downcast == DIST_F32 ? MPI_FLOAT : MPI_UINT16_T;
  MPI_Op op = MPI_SUM;
  if (d->o.downcast != DIST_F32) DIST_CHECK(dist__half_sum_op(d->o.downcast, &op));
  int64_t total = d->n + 1, chunk = d->o.sending_chunk_size;
  for (int c = 0; c < d->nchunks; c++) {
    int64_t lo = c * chunk, len = total - lo < chunk ? total - lo : chunk;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)d->wire + (size_t)lo * wsize(d), (int)len, t, op, d->cross, &d->req[c]);
    if (rc != MPI_SUCCESS) {
      MPI_Waitall(c, d->req, MPI_STATUSES_IGNORE);
      return dist__mpi_error(rc, "MPI_Iallreduce (DASO parameters)");
    }
  }
  d->inflight = 1;
  d->bytes_sent += (uint64_t)total * wsize(d);
  d->syncs++;
  return DIST_SUCCESS;
}

dist_status dist__daso_poke(dist_daso *d) {
  if (!d->inflight) return DIST_SUCCESS;
  int done = 0; /* completed requests become MPI_REQUEST_NULL: the later Waitall returns at once */
  int rc = MPI_Testall(d->nchunks, d->req, &done, MPI_STATUSES_IGNORE);
  return rc == MPI_SUCCESS ? DIST_SUCCESS : dist__mpi_error(rc, "MPI_Testall (DASO parameters)");
}

void dist__daso_merge(double *p, double *ref, const double *sum, int64_t n, int nodes, int btw, int blocking) {
  double w = btw > 0 ? 2.0 * btw : 1.0;
  for (int64_t k = 0; k < n; k++) {
    double avg = ref[k] + sum[k] / nodes; /* the mean of what the group sent */
    p[k] = blocking ? avg : (w * p[k] + nodes * avg) / (nodes + w);
    ref[k] = avg;
  }
}

void dist__daso_merge_delta(double *p, double *ref, const double *sum, const double *own_sent, int64_t n, int nodes) {
  for (int64_t k = 0; k < n; k++) {
    double avg = ref[k] + sum[k] / nodes;
    p[k] += avg - own_sent[k]; /* the group's mean, plus what I trained since I sent */
    ref[k] = avg;
  }
}

/* The sender's side: wait for every chunk (Heat waits for one at most),
 * check the flag, merge into host[] and the parameters. */
static dist_status finish(dist_daso *d, int blocking, int btw) {
  int rc = MPI_Waitall(d->nchunks, d->req, MPI_STATUSES_IGNORE);
  d->inflight = 0;
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Waitall (DASO parameters)");
  if (wire_load(d, d->n) != 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "DASO global sync: a sent parameter buffer held NaN or inf, or a change beyond f16 range (on some rank of "
                       "this cross group); "
                       "the parameters were not merged");
  DIST_CHECK(gather(d));
  if (d->nodes == 1) {
    /* Nothing to average with (daso.h: a no-op). Merging would pull the
     * parameters back towards the stale copy sent, or round them by the
     * downcast; the send above still served to check them for NaN. */
    memcpy(d->ref, d->host, sizeof(double) * (size_t)d->n);
    return DIST_SUCCESS;
  }
  double *sum = malloc(sizeof(double) * (size_t)(d->n + 1));
  if (!sum) return dist__error(DIST_ERR_NO_MEMORY, "DASO merge");
  for (int64_t k = 0; k < d->n; k++) sum[k] = wire_load(d, k);
  if (d->sent && !blocking) dist__daso_merge_delta(d->host, d->ref, sum, d->sent, d->n, d->nodes);
  else dist__daso_merge(d->host, d->ref, sum, d->n, d->nodes, btw, blocking);
  free(sum);
  return scatter(d);
}

dist_status dist__daso_receive(dist_daso *d, int sender, int blocking, int btw) {
  dist_status s = DIST_SUCCESS;
  if (d->lrank == sender) s = d->inflight ? finish(d, blocking, btw) : dist__error(DIST_ERR_INTERNAL, "DASO: nothing to receive");
  /* The sender's outcome reaches its node first, so no rank waits for a
   * broadcast that will not come. */
  int code = (int)s;
  int rc = MPI_Bcast(&code, 1, MPI_INT, sender, d->local->comm);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Bcast (DASO status)");
  if (code) {
    /* The sender's reason too (e.g. the NaN), not just the code. */
    char why[512] = "";
    if (d->lrank == sender) snprintf(why, sizeof why, "%s", dist_last_error());
    rc = MPI_Bcast(why, (int)sizeof why, MPI_CHAR, sender, d->local->comm);
    if (s) return s;
    if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Bcast (DASO status)");
    why[sizeof why - 1] = '\0';
    return dist__error((dist_status)code, "DASO global sync failed on local rank %d of this node: %s", sender, why);
  }
  for (int i = 0; i < d->p->n && d->lsize > 1; i++) {
    dist__param *q = &d->p->p[i];
    const dist__backend *be;
    DIST_CHECK(dist__backend_for(q->memory, &be));
    DIST_CHECK(be->broadcast(d->local, q->data, (size_t)q->numel, q->dtype, sender));
  }
  /* After a blocking sync every rank holds the same parameters: all groups
   * restart their changes from there (else a group that did not send would
   * round a change spanning many batches). Non-blocking: only the sending
   * group's ref moved. */
  return blocking ? dist__daso_set_ref(d) : DIST_SUCCESS;
}
