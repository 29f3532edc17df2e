/* AFNO checkpoints as safetensors files, in the reference names and shapes
 * whatever the layout: world rank 0 assembles every whole tensor and writes
 * the file atomically; on load rank 0 reads the bytes and broadcasts them,
 * every rank checks the whole file before changing anything and keeps its
 * shard of each tensor.
 *
 * Optimizer state (when an optimizer is given): per parameter
 * "optimizer.<name>.<slot>" (exp_avg, exp_avg_sq, max_exp_avg_sq for Adam;
 * momentum_buffer for SGD), same shape as the parameter, and
 * "optimizer.<name>.step" (I64 scalar); metadata "optimizer" (its name), "lr",
 * "base_lr" and "schedule_count" (the attached schedule resumes from there). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "afno_internal.h"
#include "safetensors.h"

static const char *slot_name(const dist_optim *o, int slot) {
  static const char *adam[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return strcmp(dist_optim_name(o), "sgd") == 0 ? "momentum_buffer" : adam[slot];
}

static int world_rank(const dist_afno *m) {
  int r = 0;
  if (!m->solo) dist_manager_rank(&r);
  return r;
}

/* Rank 0's status for everyone (the others' own failures are agreed first). */
static dist_status from_root(const dist_afno *m, dist_status s, const char *what) {
  if (m->solo) return s;
  int32_t code = (int32_t)s;
  dist_tensor t = dist_tensor_host(&code, DIST_I32, 0, NULL);
  dist_status b = dist_broadcast("world", &t, 0);
  if (b) return b;
  if (code != DIST_SUCCESS && s == DIST_SUCCESS) return dist_set_error((dist_status)code, "%s failed on rank 0 (see its message)", what);
  return (dist_status)code;
}

typedef struct ckpt_table {
  int n, cap;
  dist__st_tensor *t;
  char (*names)[96];
  float **bufs; /* owned whole tensors (rank 0) */
  int64_t *steps;
} ckpt_table;

static void table_free(ckpt_table *c) {
  for (int i = 0; i < c->n; i++) free(c->bufs[i]);
  free(c->t), free(c->names), free(c->bufs), free(c->steps);
}

static dist_status check_save_args(dist_afno *m, const dist_optim *opt, const char *path, const dist_afno_meta *meta,
                                   int nmeta) {
  static const char *fn = "dist_afno_save";
  if (!m || !path) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, m ? "path" : "model");
  if (nmeta < 0 || (nmeta > 0 && !meta))
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: nmeta = %d with meta %s", fn, nmeta, meta ? "set" : "NULL");
  for (int i = 0; i < nmeta; i++)
    if (!meta[i].key || !meta[i].value)
      return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: meta[%d] has a NULL key or value", fn, i);
  if (opt && dist_optim_params(opt) != m->set)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: the optimizer is not over this model's parameters", fn);
  return DIST_SUCCESS;
}

/* Assemble tensor `local` of parameter p as entry `name` (kept on rank 0). */
static dist_status add_whole(dist_afno *m, ckpt_table *c, int p, const float *local, const char *name, int root) {
  const afno_param *q = &m->params[p];
  float *full = malloc(sizeof(float) * (size_t)q->numel);
  /* Agreed before the gather, which every rank must join. */
  dist_status s = afno_agree(m, full ? DIST_SUCCESS : dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_save: %s (%" PRId64 " floats)", name, q->numel),
                             "dist_afno_save");
  if (!s) s = afno_shard_gather(m, p, local, full, 1);
  if (s || !root) {
    free(full);
    return s;
  }
  int i = c->n++;
  snprintf(c->names[i], sizeof c->names[i], "%s", name);
  c->bufs[i] = full;
  c->t[i] = (dist__st_tensor){c->names[i], DIST_F32, q->ndim, {0}, full, 0};
  for (int a = 0; a < q->ndim; a++) c->t[i].shape[a] = q->shape[a];
  return DIST_SUCCESS;
}

dist_status dist_afno_save(dist_afno *m, const dist_optim *opt, const char *path, const dist_afno_meta *meta,
                           int nmeta) {
  dist_status s = afno_agree(m, check_save_args(m, opt, path, meta, nmeta), "dist_afno_save");
  if (s) return s;
  dist_optim *o = (dist_optim *)opt;
  const int root = world_rank(m) == 0, slots = o ? dist_optim_state_slots(o) : 0;
  ckpt_table c = {0};
  c.cap = m->nparams * (2 + slots);
  c.t = calloc((size_t)c.cap, sizeof *c.t);
  c.names = calloc((size_t)c.cap, sizeof *c.names);
  c.bufs = calloc((size_t)c.cap, sizeof *c.bufs);
  c.steps = calloc((size_t)m->nparams, sizeof *c.steps);
  if (!c.t || !c.names || !c.bufs || !c.steps) s = dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_save: tensor table");
  s = afno_agree(m, s, "dist_afno_save");
  for (int p = 0; !s && p < m->nparams; p++) { /* collective: every rank runs the same calls */
    s = add_whole(m, &c, p, m->data + m->params[p].offset, m->params[p].name, root);
    for (int k = 0; !s && k < slots; k++) {
      void *buf = NULL;
      char name[96];
      snprintf(name, sizeof name, "optimizer.%s.%s", m->params[p].name, slot_name(o, k));
      s = dist_optim_state_buffer(o, p, k, &buf);
      if (!s) s = add_whole(m, &c, p, buf, name, root);
    }
    if (!s && o && root) {
      s = dist_optim_state_step(o, p, &c.steps[p]);
      int i = c.n++;
      snprintf(c.names[i], sizeof c.names[i], "optimizer.%s.step", m->params[p].name);
      c.t[i] = (dist__st_tensor){c.names[i], DIST_I64, 0, {0}, &c.steps[p], 0};
    }
  }
  s = afno_agree(m, s, "dist_afno_save");
  if (!s && root) { /* only rank 0 writes */
    char lr[32], base[32], kbuf[32];
    int64_t k = 0;
    dist__st_meta *md = calloc((size_t)nmeta + 5, sizeof *md);
    int nm = 0;
    if (!md) s = dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_save: metadata");
    for (int i = 0; !s && i < nmeta; i++) md[nm++] = (dist__st_meta){meta[i].key, meta[i].value};
    if (!s) md[nm++] = (dist__st_meta){"format", "pt"};
    if (!s && o) {
      dist_optim_schedule_count(o, &k);
      snprintf(lr, sizeof lr, "%.17g", dist_optim_get_lr(o));
      snprintf(base, sizeof base, "%.17g", dist_optim_get_base_lr(o));
      snprintf(kbuf, sizeof kbuf, "%" PRId64, k);
      md[nm++] = (dist__st_meta){"optimizer", dist_optim_name(o)};
      md[nm++] = (dist__st_meta){"lr", lr};
      md[nm++] = (dist__st_meta){"base_lr", base};
      md[nm++] = (dist__st_meta){"schedule_count", kbuf};
    }
    if (!s) s = dist__st_write(path, c.t, c.n, md, nm);
    free(md);
  }
  table_free(&c);
  return from_root(m, s, "dist_afno_save: writing the file");
}

/* Rank 0 reads the file; everyone gets its bytes. */
static dist_status read_everywhere(dist_afno *m, const char *path, void **bytes, size_t *size) {
  dist_status s = DIST_SUCCESS;
  int64_t n = 0;
  *bytes = NULL;
  if (world_rank(m) == 0) {
    s = dist__st_read_file(path, bytes, size);
    n = s ? -1 : (int64_t)*size;
  }
  s = from_root(m, s, "dist_afno_load: reading the file");
  if (s || m->solo) return s;
  dist_tensor tn = dist_tensor_host(&n, DIST_I64, 0, NULL);
  if ((s = dist_broadcast("world", &tn, 0))) return s;
  if (world_rank(m) != 0) {
    *size = (size_t)n;
    *bytes = malloc(n > 0 ? (size_t)n : 1);
    s = *bytes ? DIST_SUCCESS : dist_set_error(DIST_ERR_NO_MEMORY, "dist_afno_load: %" PRId64 " bytes", n);
  }
  if ((s = afno_agree(m, s, "dist_afno_load"))) return s;
  const int64_t chunk = (int64_t)1 << 30; /* keep every MPI count far below 2^31 */
  for (int64_t off = 0; !s && off < n; off += chunk) {
    int64_t len[1] = {n - off < chunk ? n - off : chunk};
    dist_tensor t = dist_tensor_host((char *)*bytes + off, DIST_U8, 1, len);
    s = dist_broadcast("world", &t, 0);
  }
  return s;
}

/* Tensor `name` must be F32 (or I64 scalar for steps) with parameter p's shape. */
static dist_status expect(const dist_afno *m, const dist__st_file *f, const char *path, const char *name, int p,
                          int step, dist__st_tensor *t) {
  dist_status s = dist__st_find(f, name, t);
  if (s) return s;
  const afno_param *q = &m->params[p];
  int ok = step ? t->dtype == DIST_I64 && t->ndim == 0 : t->dtype == DIST_F32 && t->ndim == q->ndim;
  for (int a = 0; ok && !step && a < q->ndim; a++) ok = t->shape[a] == q->shape[a];
  if (ok) return DIST_SUCCESS;
  char want[96] = "", got[96] = "";
  size_t u = 0, v = 0;
  for (int a = 0; !step && a < q->ndim; a++) u += (size_t)snprintf(want + u, sizeof want - u, "%s%" PRId64, a ? ", " : "", q->shape[a]);
  for (int a = 0; a < t->ndim && a < 8 && v < sizeof got - 24; a++) v += (size_t)snprintf(got + v, sizeof got - v, "%s%" PRId64, a ? ", " : "", t->shape[a]);
  return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '%s' is %s [%s], the model expects %s [%s]", path, name,
                        dist_dtype_name(t->dtype), got, step ? "i64" : "f32", want);
}

/* Pass 0 (commit = 0) checks everything and makes the optimizer's state
 * exist; pass 1 copies the shards and cannot fail. The caller agrees between
 * the two, so that a rank that failed (its parse or state ran out of memory)
 * leaves every rank's model and optimizer as they were. */
static dist_status apply(dist_afno *m, dist_optim *o, const dist__st_file *f, const char *path, int commit) {
  const int slots = o ? dist_optim_state_slots(o) : 0;
  dist__st_tensor t;
  char name[96];
  dist_status s = DIST_SUCCESS;
  if (o) {
    const char *kind = dist__st_meta_get(f, "optimizer");
    if (!kind || strcmp(kind, dist_optim_name(o)) != 0)
      return dist_set_error(DIST_ERR_CORRUPT, "%s: holds %s%s%s optimizer state, the optimizer given is %s", path,
                            kind ? "'" : "no", kind ? kind : "", kind ? "'" : "", dist_optim_name(o));
  }
  double v[3] = {0, 0, 0}; /* lr, the schedule's base and count, as saved */
  if (o) {
    const char *keys[3] = {"lr", "base_lr", "schedule_count"};
    for (int i = 0; !s && i < 3; i++) {
      const char *txt = dist__st_meta_get(f, keys[i]);
      char *end = NULL;
      v[i] = txt ? strtod(txt, &end) : -1;
      if (!txt || end == txt || *end || !(v[i] >= 0 && v[i] < 1e18))
        s = dist_set_error(DIST_ERR_CORRUPT, "%s: metadata %s = '%s' is not valid", path, keys[i], txt ? txt : "(absent)");
    }
  }
  for (int p = 0; !s && p < m->nparams; p++) {
    if (!(s = expect(m, f, path, m->params[p].name, p, 0, &t)) && commit)
      afno_shard_extract(m, p, t.data, m->data + m->params[p].offset);
    for (int k = 0; !s && k < slots; k++) {
      snprintf(name, sizeof name, "optimizer.%s.%s", m->params[p].name, slot_name(o, k));
      void *buf = NULL; /* allocated here in pass 0 when the optimizer has not stepped yet */
      if (!(s = expect(m, f, path, name, p, 0, &t)) && !(s = dist_optim_state_buffer(o, p, k, &buf)) && commit)
        afno_shard_extract(m, p, t.data, buf);
    }
    if (!s && o) {
      snprintf(name, sizeof name, "optimizer.%s.step", m->params[p].name);
      int64_t step = 0;
      if (!(s = expect(m, f, path, name, p, 1, &t))) memcpy(&step, t.data, sizeof step);
      if (!s && step < 0) s = dist_set_error(DIST_ERR_CORRUPT, "%s: '%s' = %" PRId64 " is negative", path, name, step);
      if (!s && commit) s = dist_optim_state_set_step(o, p, step);
    }
  }
  if (!s && o && commit) s = dist_optim_restore_schedule(o, v[0], v[1], (int64_t)v[2]);
  return s;
}

dist_status dist_afno_load(dist_afno *m, dist_optim *opt, const char *path) {
  dist_status s = DIST_SUCCESS;
  if (!m || !path) s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_load: %s is NULL", m ? "path" : "model");
  else if (opt && dist_optim_params(opt) != m->set)
    s = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_load: the optimizer is not over this model's parameters");
  if ((s = afno_agree(m, s, "dist_afno_load"))) return s;
  void *bytes = NULL;
  size_t size = 0;
  dist__st_file *f = NULL;
  s = read_everywhere(m, path, &bytes, &size);
  if (!s) s = dist__st_parse(bytes, size, path, &f); /* the same bytes everywhere: the same verdict, unless memory */
  if (!s) s = apply(m, opt, f, path, 0);
  s = afno_agree(m, s, "dist_afno_load"); /* nothing has changed yet on any rank */
  if (!s) s = apply(m, opt, f, path, 1);
  dist__st_free(f);
  free(bytes);
  return afno_agree(m, s, "dist_afno_load");
}

dist_status dist_afno_meta_read(const char *path, const char *key, char *buf, size_t size) {
  if (!path || !key || !buf || size == 0)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "dist_afno_meta_read: NULL argument or size 0");
  void *bytes = NULL;
  size_t n = 0;
  dist__st_file *f = NULL;
  dist_status s = dist__st_read_file(path, &bytes, &n);
  if (!s) s = dist__st_parse(bytes, n, path, &f);
  if (!s) {
    const char *v = dist__st_meta_get(f, key);
    if (v && strlen(v) >= size) s = dist_set_error(DIST_ERR_BUFFER_TOO_SMALL, "dist_afno_meta_read: '%s' needs %zu bytes", key, strlen(v) + 1);
    else snprintf(buf, size, "%s", v ? v : "");
  }
  dist__st_free(f);
  free(bytes);
  return s;
}
