/* Whole parameters in the reference layout from the ranks' shards and back:
 * what checkpoints and tests see, whatever the parallel layout. */
#include <stdlib.h>
#include <string.h>

#include "afno_internal.h"

/* The one rank of each set of replicas that speaks for a shard. */
static int owns(const dist_afno *m, const afno_param *p) {
  return m->d.dp_rank == 0 && (!p->shared_sp || m->d.sp_rank == 0);
}

static dist_status check(const dist_afno *m, int index, const void *buf, const char *fn) {
  dist_status s = DIST_SUCCESS;
  if (!m || !buf) s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, m ? "buffer" : "model");
  else if (index < 0 || index >= m->nparams)
    s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: index = %d out of range [0, %d)", fn, index, m->nparams);
  return afno_agree(m, s, fn);
}

dist_status afno_shard_gather(dist_afno *m, int index, const float *local, float *full, int root_only) {
  const afno_param *p = &m->params[index];
  memset(full, 0, sizeof(float) * (size_t)p->numel);
  if (m->solo || owns(m, p)) /* every owner writes its shard into zeros; a sum over the world assembles it */
    for (int64_t k = 0; k < p->local_numel; k++) full[afno_param_global_index(p, k)] = local[k];
  if (m->solo) return DIST_SUCCESS; /* the whole model is here */
  int64_t shape[1] = {p->numel};
  dist_tensor t = dist_tensor_host(full, DIST_F32, 1, shape);
  return root_only ? dist_reduce("world", &t, DIST_SUM, 0) : dist_all_reduce("world", &t, DIST_SUM);
}

void afno_shard_extract(const dist_afno *m, int index, const void *full, float *local) {
  const afno_param *p = &m->params[index];
  const unsigned char *bytes = full; /* a file's data need not be aligned */
  for (int64_t k = 0; k < p->local_numel; k++)
    memcpy(local + k, bytes + sizeof(float) * (size_t)afno_param_global_index(p, k), sizeof(float));
}

static dist_status gather(dist_afno *m, int index, const float *arena, float *full) {
  return afno_shard_gather(m, index, arena + m->params[index].offset, full, 0);
}

dist_status dist_afno_param_get(dist_afno *m, int index, float *full) {
  dist_status s = check(m, index, full, "dist_afno_param_get");
  return s ? s : gather(m, index, m->data, full);
}

dist_status dist_afno_grad_get(dist_afno *m, int index, float *full) {
  dist_status s = check(m, index, full, "dist_afno_grad_get");
  return s ? s : gather(m, index, m->grad, full);
}

dist_status dist_afno_param_set(dist_afno *m, int index, const float *full) {
  dist_status s = check(m, index, full, "dist_afno_param_set");
  if (s) return s;
  afno_shard_extract(m, index, full, m->data + m->params[index].offset);
  return DIST_SUCCESS;
}
