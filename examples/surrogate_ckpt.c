/* The surrogate's checkpoints: <out>/ckpt/step_<8 digits>.safetensors, the
 * AFNO and Adam state (dist_afno_save, written atomically by rank 0) plus
 * what resuming needs in the metadata: the step (the sampler's position is
 * step / steps_per_epoch and step % steps_per_epoch, the permutation coming
 * from seed + epoch), the global batch, the partial progress-line sums, and
 * descriptions of the model and the dataset to refuse a foreign file. The
 * newest `keep` files stay. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "surrogate.h"

#define CKPT_PREFIX "step_"
#define CKPT_SUFFIX ".safetensors"

static void model_desc(const surr *s, char *buf, size_t n) {
  snprintf(buf, n, "afno embed=%" PRId64 " depth=%" PRId64 " patch=%" PRId64 " blocks=%" PRId64 " mlp_ratio=%.17g",
           s->o.embed, s->o.depth, s->o.patch, s->o.blocks, s->o.mlp_ratio);
}

static void data_desc(const surr *s, char *buf, size_t n) {
  const flowdata_meta *m = &s->meta;
  snprintf(buf, n, "ns2d n=%" PRId64 " trajectories=%" PRId64 " snapshots=%" PRId64 " train=%" PRId64 " seed=%" PRIu64
           " dt=%.17g nu=%.17g", m->n, m->trajectories, m->snapshots, m->train_trajectories, m->seed, m->dt_snapshot, m->nu);
}

/* The step of a file name "step_<digits>.safetensors", -1 for other names. */
static int64_t step_of(const char *name) {
  size_t lp = strlen(CKPT_PREFIX), ls = strlen(CKPT_SUFFIX), n = strlen(name);
  if (n <= lp + ls || strncmp(name, CKPT_PREFIX, lp) || strcmp(name + n - ls, CKPT_SUFFIX)) return -1;
  int64_t v = 0;
  for (size_t i = lp; i < n - ls; i++) {
    if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

/* Rank 0: the newest `keep` checkpoints stay; leftovers of a save that was
 * killed midway (".tmp.<pid>") go. */
static void prune(const surr *s, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  int64_t steps[1024];
  int n = 0;
  struct dirent *e;
  char path[4500];
  while ((e = readdir(d))) {
    int64_t st = step_of(e->d_name);
    if (st >= 0 && n < 1024) steps[n++] = st;
    else if (strstr(e->d_name, CKPT_SUFFIX ".tmp.")) snprintf(path, sizeof path, "%s/%s", dir, e->d_name), unlink(path);
  }
  closedir(d);
  for (int i = 0; i < n; i++) {
    int newer = 0;
    for (int j = 0; j < n; j++) newer += steps[j] > steps[i];
    if (newer >= s->o.keep) {
      snprintf(path, sizeof path, "%s/" CKPT_PREFIX "%08" PRId64 CKPT_SUFFIX, dir, steps[i]);
      unlink(path);
    }
  }
}

dist_status surr_ckpt_save(surr *s, int64_t epoch) {
  char dir[4200], path[4400];
  snprintf(dir, sizeof dir, "%s/ckpt", s->o.out);
  dist_status st = DIST_SUCCESS;
  if (s->rank == 0 && mkdir(dir, 0777) && errno != EEXIST)
    st = dist_set_error(DIST_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
  st = surr_agree(st);
  if (st) return st;
  snprintf(path, sizeof path, "%s/" CKPT_PREFIX "%08" PRId64 CKPT_SUFFIX, dir, s->step);
  char v[8][160], model[256], data[512];
  model_desc(s, model, sizeof model);
  data_desc(s, data, sizeof data);
  snprintf(v[0], sizeof v[0], "%" PRId64, s->step);
  snprintf(v[1], sizeof v[1], "%" PRId64, epoch);
  snprintf(v[2], sizeof v[2], "%" PRId64, s->o.batch);
  snprintf(v[3], sizeof v[3], "%" PRId64, s->steps_per_epoch);
  snprintf(v[4], sizeof v[4], "%" PRId64, s->o.seed);
  snprintf(v[5], sizeof v[5], "%.17g", s->interval_loss);
  snprintf(v[6], sizeof v[6], "%" PRId64, s->interval_count);
  snprintf(v[7], sizeof v[7], "%" PRId64 "x%" PRId64 "x%" PRId64, s->o.dp, s->o.mp, s->o.sp);
  dist_afno_meta meta[] = {{"step", v[0]},          {"epoch", v[1]},          {"global_batch", v[2]},
                           {"steps_per_epoch", v[3]}, {"seed", v[4]},         {"interval_loss", v[5]},
                           {"interval_count", v[6]}, {"mesh_dp_mp_sp", v[7]}, {"model", model},
                           {"dataset", data}};
  st = dist_afno_save(s->model, s->opt, path, meta, (int)(sizeof meta / sizeof *meta));
  if (!st && s->rank == 0) prune(s, dir);
  return st;
}

dist_status surr_ckpt_latest(const surr *s, char *buf, size_t size) {
  char found[4500] = "";
  if (s->rank == 0) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/ckpt", s->o.out);
    DIR *d = opendir(dir);
    int64_t best = -1;
    struct dirent *e;
    while (d && (e = readdir(d))) {
      int64_t st = step_of(e->d_name);
      if (st > best) best = st, snprintf(found, sizeof found, "%s/%s", dir, e->d_name);
    }
    if (d) closedir(d);
  }
  int64_t n = sizeof found;
  dist_tensor t = dist_tensor_host(found, DIST_U8, 1, &n);
  dist_status st = dist_broadcast(NULL, &t, 0);
  if (!st && strlen(found) >= size) st = dist_set_error(DIST_ERR_BUFFER_TOO_SMALL, "checkpoint path %s is too long", found);
  if (!st) snprintf(buf, size, "%s", found);
  return st;
}

/* One metadata value as a whole number. */
static dist_status meta_int(const char *path, const char *key, int64_t *out) {
  char buf[64], *end = NULL;
  dist_status st = dist_afno_meta_read(path, key, buf, sizeof buf);
  if (st) return st;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (!*buf || *end || errno || v < 0)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: metadata %s = '%s' is not a count (not a checkpoint of ns2d_train?)", path, key, buf);
  *out = v;
  return DIST_SUCCESS;
}

/* The metadata: the same model, dataset and global batch, a sane step. */
static dist_status check_meta(surr *s, const char *path, int64_t *step, double *loss, int64_t *count) {
  char want[512], got[512], lossbuf[64], *end = NULL;
  model_desc(s, want, sizeof want);
  dist_status st = dist_afno_meta_read(path, "model", got, sizeof got);
  if (!st && strcmp(want, got))
    return dist_set_error(DIST_ERR_MISMATCH, "%s holds a different model ('%s'; this run: '%s')", path, got, want);
  data_desc(s, want, sizeof want);
  if (!st) st = dist_afno_meta_read(path, "dataset", got, sizeof got);
  if (!st && strcmp(want, got))
    return dist_set_error(DIST_ERR_MISMATCH, "%s was trained on a different dataset ('%s'; %s: '%s')", path, got, s->o.data, want);
  int64_t batch = 0;
  if (!st) st = meta_int(path, "global_batch", &batch);
  if (!st && batch != s->o.batch)
    return dist_set_error(DIST_ERR_MISMATCH, "%s was trained with --batch %" PRId64 " (this run: %" PRId64 "); the sampler position needs the same global batch",
                          path, batch, s->o.batch);
  if (!st) st = meta_int(path, "step", step);
  if (!st) st = meta_int(path, "interval_count", count);
  if (!st) st = dist_afno_meta_read(path, "interval_loss", lossbuf, sizeof lossbuf);
  if (!st) *loss = strtod(lossbuf, &end);
  if (!st && (!*lossbuf || *end)) st = dist_set_error(DIST_ERR_CORRUPT, "%s: metadata interval_loss = '%s'", path, lossbuf);
  if (!st && *step > s->total_steps)
    st = dist_set_error(DIST_ERR_MISMATCH, "%s is at step %" PRId64 ", beyond this run's %" PRId64 " steps (--epochs)", path, *step, s->total_steps);
  return st;
}

dist_status surr_ckpt_load(surr *s, const char *path) {
  int64_t step = 0, count = 0;
  double loss = 0;
  dist_status st = surr_agree(check_meta(s, path, &step, &loss, &count));
  if (!st) st = dist_afno_load(s->model, s->opt, path);
  if (st) return st;
  s->step = step, s->interval_loss = loss, s->interval_count = count;
  return DIST_SUCCESS;
}
