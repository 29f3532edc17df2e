/* Evaluation of the surrogate: from each held-out trajectory's first
 * snapshot, apply the AFNO step after step (its own output as the next
 * input) and compare with the solver's snapshots: the relative L2 error
 * ||pred - omega|| / ||omega|| per step, averaged over the trajectories,
 * beside the error of persistence (omega(0) held fixed) as the trivial
 * baseline. Held-out trajectories are dealt over the data-parallel ranks;
 * every rank works on its own image rows. Rank 0 prints the table, writes
 * rollout.csv and draws solver | AFNO | difference at a few steps of the
 * first held-out trajectory into vorticity.png. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picture.h"
#include "surrogate.h"

typedef struct rollout {
  int64_t traj0, mine, steps, each; /* first held-out trajectory, mine, steps, floats per sample */
  float *cur, *truth, *x, *y, *init;
  double *err, *pers;               /* per step: sums over my trajectories */
  float *pic;                       /* rank 0: [pictures][2][n * n] solver, AFNO */
  int64_t *pic_step, npic;
} rollout;

/* Sum over the spatial group (each rank holds some rows of every sample). */
static dist_status sum_spatial(double *v, int64_t n) {
  dist_tensor t = dist_tensor_host(v, DIST_F64, 1, &n);
  return dist_all_reduce("spatial", &t, DIST_SUM);
}

/* Whole fields of sample k of cur and truth on spatial rank 0 (for pictures). */
static dist_status gather_picture(surr *s, rollout *r, int64_t k, float *solver, float *afno) {
  int sp = (int)s->o.sp;
  int64_t *rows = malloc((size_t)sp * sizeof(int64_t)), one = 1, spn = sp;
  if (!rows) return dist_set_error(DIST_ERR_NO_MEMORY, "picture rows");
  dist_tensor mine = dist_tensor_host(&s->rows, DIST_I64, 1, &one), all = dist_tensor_host(rows, DIST_I64, 1, &spn);
  dist_status st = dist_all_gather("spatial", &mine, &all, 0);
  int64_t in_shape[2] = {s->rows, s->n}, out_shape[2] = {s->n, s->n};
  const float *src[2] = {r->truth + k * r->each, r->cur + k * r->each};
  float *dst[2] = {solver, afno};
  for (int i = 0; i < 2 && !st; i++) {
    dist_tensor in = dist_tensor_host((void *)src[i], DIST_F32, 2, in_shape);
    dist_tensor out = dist_tensor_host(dst[i], DIST_F32, 2, out_shape);
    st = dist_gather_v("spatial", &in, &out, 0, rows, 0);
  }
  free(rows);
  return st;
}

static dist_status advance(surr *s, rollout *r, int64_t step) {
  const double mean = s->meta.mean, inv_std = 1 / s->meta.std, dstd = s->meta.delta_std;
  int64_t total = r->mine * r->each;
  for (int64_t i = 0; i < total; i++) r->x[i] = (float)((r->cur[i] - mean) * inv_std);
  dist_status st = surr_agree(dist_afno_forward(s->model, r->mine, r->x, r->y)); /* one replica's failure: everyone's */
  for (int64_t i = 0; !st && i < total; i++) r->cur[i] = (float)(r->cur[i] + dstd * r->y[i]);
  for (int64_t k = 0; !st && k < r->mine; k++)
    st = flowdata_read(s->data, r->traj0 + s->L.dp_rank + k * s->o.dp, step, s->row0, s->rows, r->truth + k * r->each);
  return st;
}

/* Per trajectory: |pred - truth|^2, |truth|^2, |init - truth|^2 summed over
 * the spatial group; the relative errors added into the step's sums. */
static dist_status score(surr *s, rollout *r, int64_t step) {
  double *v = calloc((size_t)(3 * r->mine + 1), sizeof(double));
  if (!v) return dist_set_error(DIST_ERR_NO_MEMORY, "rollout sums");
  for (int64_t k = 0; k < r->mine; k++)
    for (int64_t i = k * r->each; i < (k + 1) * r->each; i++) {
      double d = (double)r->cur[i] - r->truth[i], p = (double)r->init[i] - r->truth[i];
      v[3 * k] += d * d, v[3 * k + 1] += (double)r->truth[i] * r->truth[i], v[3 * k + 2] += p * p;
    }
  dist_status st = sum_spatial(v, 3 * r->mine);
  for (int64_t k = 0; !st && k < r->mine; k++) {
    r->err[step - 1] += sqrt(v[3 * k] / v[3 * k + 1]);
    r->pers[step - 1] += sqrt(v[3 * k + 2] / v[3 * k + 1]);
  }
  free(v);
  return st;
}

static dist_status run_rollout(surr *s, rollout *r) {
  dist_status st = DIST_SUCCESS;
  for (int64_t k = 0; !st && k < r->mine; k++)
    st = flowdata_read(s->data, r->traj0 + s->L.dp_rank + k * s->o.dp, 0, s->row0, s->rows, r->cur + k * r->each);
  if (!st) memcpy(r->init, r->cur, (size_t)(r->mine * r->each) * sizeof(float));
  st = surr_agree(st);
  int64_t pic = 0, nn = s->n * s->n;
  for (int64_t step = 1; !st && step <= r->steps; step++) {
    if (r->mine) st = advance(s, r, step);
    st = surr_agree(st);
    if (!st && r->mine) st = score(s, r, step);
    if (!st && s->L.dp_rank == 0 && pic < r->npic && r->pic_step[pic] == step) {
      st = gather_picture(s, r, 0, r->pic + (2 * pic) * nn, r->pic + (2 * pic + 1) * nn);
      pic++;
    }
  }
  if (st) return st;
  int64_t two = 2 * r->steps;
  double *both = malloc((size_t)two * sizeof(double));
  if (!both) return dist_set_error(DIST_ERR_NO_MEMORY, "rollout sums");
  memcpy(both, r->err, (size_t)r->steps * sizeof(double));
  memcpy(both + r->steps, r->pers, (size_t)r->steps * sizeof(double));
  dist_tensor t = dist_tensor_host(both, DIST_F64, 1, &two);
  st = dist_all_reduce("data_parallel", &t, DIST_SUM);
  int64_t held = s->meta.trajectories - s->meta.train_trajectories;
  for (int64_t i = 0; !st && i < r->steps; i++) r->err[i] = both[i] / (double)held, r->pers[i] = both[r->steps + i] / (double)held;
  free(both);
  return st;
}

static dist_status draw(surr *s, rollout *r, const char *path) {
  int64_t nn = s->n * s->n;
  float *diff = malloc((size_t)(r->npic * nn) * sizeof(float));
  const float **fields = malloc((size_t)(3 * r->npic) * sizeof(float *));
  char (*labels)[48] = malloc((size_t)r->npic * sizeof *labels);
  const char **rl = malloc((size_t)r->npic * sizeof(char *));
  dist_status st = diff && fields && labels && rl ? DIST_SUCCESS : dist_set_error(DIST_ERR_NO_MEMORY, "pictures");
  float vmax[3] = {0, 0, 0};
  for (int64_t p = 0; !st && p < r->npic; p++) {
    const float *sol = r->pic + 2 * p * nn, *net = sol + nn;
    for (int64_t i = 0; i < nn; i++) {
      diff[p * nn + i] = net[i] - sol[i];
      vmax[0] = fmaxf(vmax[0], fabsf(sol[i]));
      vmax[2] = fmaxf(vmax[2], fabsf(diff[p * nn + i]));
    }
    fields[3 * p] = sol, fields[3 * p + 1] = net, fields[3 * p + 2] = diff + p * nn;
    snprintf(labels[p], sizeof labels[p], "STEP %" PRId64 " T=%.2f", r->pic_step[p], s->snap_time[r->pic_step[p]] - s->snap_time[0]);
    rl[p] = labels[p];
  }
  vmax[1] = vmax[0]; /* solver and AFNO on one scale; the difference on its own */
  const char *cols[3] = {"SOLVER", "AFNO ROLLOUT", "DIFFERENCE"};
  int zoom = s->n >= 256 ? 1 : (int)(256 / s->n);
  if (!st) st = picture_panels(path, (int)r->npic, 3, s->n, fields, vmax, zoom, cols, rl);
  free(diff), free(fields), free(labels), free(rl);
  return st;
}

static dist_status report(surr *s, rollout *r, double *final) {
  char path[4200];
  *final = r->err[r->steps - 1];
  if (s->rank != 0) return DIST_SUCCESS;
  snprintf(path, sizeof path, "%s/rollout.csv", s->o.out);
  FILE *f = fopen(path, "w");
  if (!f) return dist_set_error(DIST_ERR_IO, "cannot write %s", path);
  fputs("step,time,rel_l2,persistence_rel_l2\n", f);
  int64_t every = r->steps > 10 ? r->steps / 10 : 1;
  for (int64_t i = 0; i < r->steps; i++) {
    double t = s->snap_time[i + 1] - s->snap_time[0];
    fprintf(f, "%" PRId64 ",%.6g,%.6e,%.6e\n", i + 1, t, r->err[i], r->pers[i]);
    if (!s->o.quiet && ((i + 1) % every == 0 || i == 0))
      printf("rollout step %3" PRId64 "  t = %6.2f  relative L2 error %.4f  (persistence %.4f)\n", i + 1, t, r->err[i], r->pers[i]);
  }
  if (fclose(f)) return dist_set_error(DIST_ERR_IO, "cannot write %s", path);
  printf("ns2d_train: rollout of %" PRId64 " held-out trajectories over %" PRId64 " steps: relative L2 error %.4f after 1 step, "
         "%.4f after %" PRId64 " (persistence: %.4f); table in %s\n",
         s->meta.trajectories - s->meta.train_trajectories, r->steps, r->err[0], r->err[r->steps - 1], r->steps,
         r->pers[r->steps - 1], path);
  return DIST_SUCCESS;
}

dist_status surr_evaluate(surr *s, double *final_error) {
  rollout r = {.traj0 = s->meta.train_trajectories, .each = s->rows * s->n};
  int64_t held = s->meta.trajectories - r.traj0;
  r.steps = s->o.rollout_steps && s->o.rollout_steps < s->pairs ? s->o.rollout_steps : s->pairs;
  r.mine = held / s->o.dp + (s->L.dp_rank < held % s->o.dp);
  r.npic = s->o.pictures < r.steps ? s->o.pictures : r.steps;
  size_t each = (size_t)(r.mine * r.each);
  r.cur = malloc(each * sizeof(float) + 1), r.truth = malloc(each * sizeof(float) + 1);
  r.x = malloc(each * sizeof(float) + 1), r.y = malloc(each * sizeof(float) + 1), r.init = malloc(each * sizeof(float) + 1);
  r.err = calloc((size_t)r.steps, sizeof(double)), r.pers = calloc((size_t)r.steps, sizeof(double));
  r.pic = malloc((size_t)(2 * r.npic * s->n * s->n) * sizeof(float) + 1);
  r.pic_step = malloc((size_t)r.npic * sizeof(int64_t) + 1);
  dist_status st = r.cur && r.truth && r.x && r.y && r.init && r.err && r.pers && r.pic && r.pic_step
                       ? DIST_SUCCESS : dist_set_error(DIST_ERR_NO_MEMORY, "rollout buffers");
  /* Picture steps spaced geometrically up to the last: early tracking and late drift both show. */
  for (int64_t p = 0; p < r.npic; p++) {
    int64_t k = (int64_t)llround(pow((double)r.steps, (double)(p + 1) / (double)r.npic));
    int64_t lo = p ? r.pic_step[p - 1] + 1 : 1, hi = r.steps - (r.npic - 1 - p);
    r.pic_step[p] = k < lo ? lo : k > hi ? hi : k;
  }
  st = surr_agree(st);
  if (!st) st = run_rollout(s, &r);
  if (!st) st = surr_agree(report(s, &r, final_error));
  char path[4200];
  snprintf(path, sizeof path, "%s/vorticity.png", s->o.out);
  if (!st && r.npic > 0) {
    st = surr_agree(s->rank == 0 ? draw(s, &r, path) : DIST_SUCCESS);
    if (!st && s->rank == 0)
      printf("ns2d_train: pictures %s (rows: steps %" PRId64 "..%" PRId64 " of held-out trajectory %" PRId64 "; columns: solver, AFNO rollout, difference)\n",
             path, r.pic_step[0], r.pic_step[r.npic - 1], r.traj0);
  }
  free(r.cur), free(r.truth), free(r.x), free(r.y), free(r.init), free(r.err), free(r.pers), free(r.pic), free(r.pic_step);
  return st;
}
