/* ns2d_train: train an AFNO surrogate of the ns2d solver on the dataset of
 * ns2d_sim, on a mesh of the world chosen by flags (data x model x spatial),
 * with Adam and a cosine learning rate, DDP over the data-parallel group,
 * checkpoints that resume at any layout, then an autoregressive rollout
 * against the solver with pictures.
 *
 *   mpirun -n 4 examples/ns2d_train --data flow.h5 --out run --dp 2 --sp 2
 *
 * Run with --help for the flags. Every error names its cause on every rank
 * and exits with status 1 (2 for bad flags). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "sampler.h"
#include "surrogate.h"

static const char usage[] =
    "usage: ns2d_train --data FILE --out DIR [flags]\n"
    "  mesh      --dp D --mp M --sp S      data x model x spatial = world size (default: dp fills)\n"
    "  training  --epochs 30 --batch 8     global batch over the data-parallel ranks\n"
    "            --lr 2e-3 --lr-min 0.02   cosine from lr to lr * lr-min over the run\n"
    "            --seed 0                  model initialisation and sampler shuffles\n"
    "            --max-steps N             stop after N steps (the schedule still spans all epochs)\n"
    "  model     --embed 64 --depth 4 --patch 4 --blocks 8 --mlp-ratio 2\n"
    "  progress  --log-every 100 --val-samples 32 --quiet\n"
    "  ckpt      --ckpt-every 100 --keep 3 --resume | --resume-from FILE\n"
    "  eval      --rollout-steps 0 (all) --pictures 4 (rows of vorticity.png; 0: none) --eval-only\n"
    "  testing   --kill-at-step N --kill-rank R   SIGKILL rank R right after step N\n";

static dist_status parse(int argc, char **argv, surr_opts *o) {
  *o = (surr_opts){.epochs = 30, .batch = 8, .embed = 64, .depth = 4, .patch = 4, .blocks = 8, .mlp_ratio = 2, .sparsity = 0.01,
                   .lr = 2e-3, .lr_min_frac = 0.02, .log_every = 100, .val_samples = 32, .ckpt_every = 100,
                   .keep = 3, .pictures = 4, .kill_at_step = -1};
  struct { const char *flag; int64_t *v, lo, hi; } ints[] = {
      {"--dp", &o->dp, 1, 1 << 20},          {"--mp", &o->mp, 1, 1 << 20},         {"--sp", &o->sp, 1, 1 << 20},
      {"--epochs", &o->epochs, 1, 1000000},  {"--batch", &o->batch, 1, 1 << 20},   {"--embed", &o->embed, 1, 65536},
      {"--depth", &o->depth, 1, 1024},       {"--patch", &o->patch, 1, 4096},      {"--blocks", &o->blocks, 1, 65536},
      {"--seed", &o->seed, 0, INT64_MAX},    {"--log-every", &o->log_every, 1, INT32_MAX},
      {"--val-samples", &o->val_samples, 0, 1 << 20}, {"--ckpt-every", &o->ckpt_every, 1, INT32_MAX},
      {"--keep", &o->keep, 1, 1000},         {"--max-steps", &o->max_steps, 1, INT64_MAX},
      {"--rollout-steps", &o->rollout_steps, 0, 1 << 20}, {"--pictures", &o->pictures, 0, 16},
      {"--kill-at-step", &o->kill_at_step, 0, INT64_MAX}, {"--kill-rank", &o->kill_rank, 0, 1 << 20}};
  struct { const char *flag; double *v, lo, hi; } reals[] = {
      {"--lr", &o->lr, 1e-12, 10}, {"--lr-min", &o->lr_min_frac, 0, 1}, {"--mlp-ratio", &o->mlp_ratio, 0.01, 64},
      {"--sparsity", &o->sparsity, 0, 10}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int done = 0;
    dist_status s = DIST_SUCCESS;
    if (!strcmp(a, "--resume")) o->resume = 1, done = 1;
    else if (!strcmp(a, "--eval-only")) o->eval_only = 1, done = 1;
    else if (!strcmp(a, "--quiet")) o->quiet = 1, done = 1;
    else if (!strcmp(a, "--help")) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "help");
    for (size_t k = 0; !done && k < sizeof ints / sizeof *ints; k++)
      if (!strcmp(a, ints[k].flag)) s = cli_int(a, v, ints[k].lo, ints[k].hi, ints[k].v), done = 2;
    for (size_t k = 0; !done && k < sizeof reals / sizeof *reals; k++)
      if (!strcmp(a, reals[k].flag)) s = cli_real(a, v, reals[k].lo, reals[k].hi, reals[k].v), done = 2;
    if (!done && (!strcmp(a, "--data") || !strcmp(a, "--out") || !strcmp(a, "--resume-from"))) {
      if (!v || !*v) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s needs a value", a);
      *(a[2] == 'd' ? &o->data : a[2] == 'o' ? &o->out : &o->resume_from) = v;
      done = 2;
    }
    if (!done) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "unknown flag '%s'", a);
    if (s) return s;
    i += done - 1;
  }
  if (!o->data) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--data FILE is required");
  if (!o->out) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--out DIR is required");
  if (strchr(o->out, '\'') || strchr(o->out, '"')) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--out: quotes are not allowed in '%s'", o->out);
  if (o->resume_from) o->resume = 1;
  return DIST_SUCCESS;
}

/* The mesh: dp x mp x sp over the world; a missing dp fills the rest. */
static dist_status make_mesh(surr *s) {
  surr_opts *o = &s->o;
  int64_t mp = o->mp ? o->mp : 1, sp = o->sp ? o->sp : 1;
  int64_t dp = o->dp ? o->dp : (s->size % (mp * sp) ? 0 : s->size / (mp * sp));
  if (dp * mp * sp != s->size)
    return dist_set_error(DIST_ERR_GROUP_SIZE, "the mesh --dp %lld x --mp %lld x --sp %lld does not make the %d ranks of the world",
                          (long long)(o->dp ? o->dp : dp), (long long)mp, (long long)sp, s->size);
  o->dp = dp, o->mp = mp, o->sp = sp;
  int sizes[3] = {(int)dp, (int)mp, (int)sp};
  const char *names[3] = {"data_parallel", "model_parallel", "spatial"};
  return dist_group_create_mesh(NULL, 3, sizes, names);
}

typedef struct cosine { int64_t total; double min_frac; } cosine;
static double cosine_lr(void *ctx, int64_t k, double base) {
  const cosine *c = ctx;
  double f = c->total > 0 ? (double)(k < c->total ? k : c->total) / (double)c->total : 1;
  return base * (c->min_frac + (1 - c->min_frac) * 0.5 * (1 + cos(M_PI * f)));
}

static dist_status make_model(surr *s, cosine *cos_ctx) {
  const surr_opts *o = &s->o;
  dist_afno_config c = DIST_AFNO_CONFIG_INIT;
  c.inp_shape[0] = c.inp_shape[1] = s->n;
  c.in_channels = c.out_channels = 1;
  c.patch_size[0] = c.patch_size[1] = (int)o->patch;
  c.embed_dim = (int)o->embed, c.depth = (int)o->depth, c.num_blocks = (int)o->blocks;
  c.mlp_ratio = o->mlp_ratio, c.seed = (uint64_t)o->seed, c.sparsity_threshold = o->sparsity;
  dist_status st = dist_afno_create(&c, &s->model);
  if (st) return st;
  dist_afno_layout_get(s->model, &s->L);
  s->rows = s->L.rows, s->row0 = s->L.row_offset;
  dist_adam_options a = DIST_ADAM_OPTIONS_INIT;
  a.lr = o->lr;
  st = surr_agree(dist_optim_adam(dist_afno_params(s->model), &a, &s->opt));
  dist_lr_schedule sch = {.kind = DIST_LR_CUSTOM, .fn = cosine_lr, .ctx = cos_ctx};
  if (!st) st = dist_optim_set_schedule(s->opt, &sch);
  return st;
}

/* Batch sizes, steps per epoch and buffers, checked against the dataset. */
static dist_status plan(surr *s) {
  const surr_opts *o = &s->o;
  s->pairs = s->meta.snapshots - 1;
  if (s->pairs < 1) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: needs at least 2 snapshots per trajectory", o->data);
  s->train_samples = s->meta.train_trajectories * s->pairs;
  if (o->batch % o->dp)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--batch %lld does not divide over --dp %lld data-parallel ranks",
                          (long long)o->batch, (long long)o->dp);
  s->local_batch = o->batch / o->dp;
  sampler sp = {s->train_samples, (int)o->dp, 0, (uint64_t)o->seed, 1, 0};
  s->steps_per_epoch = sampler_per_replica(&sp) / s->local_batch;
  if (s->steps_per_epoch < 1)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "--batch %lld is larger than the %lld training samples",
                          (long long)o->batch, (long long)s->train_samples);
  s->total_steps = s->steps_per_epoch * o->epochs;
  size_t each = (size_t)(s->local_batch * s->rows * s->n);
  s->x = malloc(each * sizeof(float)), s->target = malloc(each * sizeof(float));
  s->y = malloc(each * sizeof(float)), s->dy = malloc(each * sizeof(float));
  s->snap_time = malloc((size_t)s->meta.snapshots * sizeof(double));
  if (!s->x || !s->target || !s->y || !s->dy || !s->snap_time) return dist_set_error(DIST_ERR_NO_MEMORY, "batch buffers");
  return flowdata_read_time(s->data, s->snap_time);
}

/* Mean loss over a fixed, evenly spread set of held-out pairs (the same set
 * whatever the layout as long as dp divides it). NaN when there is none. */
static dist_status validate(surr *s, double *loss) {
  int64_t avail = (s->meta.trajectories - s->meta.train_trajectories) * s->pairs;
  int64_t v = (s->o.val_samples < avail ? s->o.val_samples : avail) / s->o.dp * s->o.dp;
  *loss = NAN;
  if (v == 0) return DIST_SUCCESS;
  int64_t mine = v / s->o.dp, *idx = malloc((size_t)s->local_batch * sizeof(int64_t));
  double sum = 0;
  dist_status st = surr_agree(idx ? DIST_SUCCESS : dist_set_error(DIST_ERR_NO_MEMORY, "validation indices"));
  for (int64_t at = 0; !st && at < mine; at += s->local_batch) {
    int64_t cnt = mine - at < s->local_batch ? mine - at : s->local_batch;
    for (int64_t k = 0; k < cnt; k++) idx[k] = (s->L.dp_rank + (at + k) * s->o.dp) * avail / v;
    double l = 0;
    st = surr_agree(surr_load_pairs(s, s->meta.train_trajectories, idx, cnt, s->x, s->target));
    if (!st) st = surr_agree(dist_afno_forward(s->model, cnt, s->x, s->y)); /* (see train_step) */
    if (!st) st = dist_afno_mse(s->model, cnt, s->y, s->target, &l, NULL);
    sum += l * (double)cnt;
  }
  free(idx);
  if (st) return st;
  *loss = sum / (double)mine;
  return DIST_SUCCESS;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fmt_time(double sec, char *buf, size_t n) {
  long t = (long)(sec + 0.5);
  if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

/* loss.csv on rank 0: fresh, or cut back to the checkpoint's step on resume
 * (rows logged after it are logged again). */
static dist_status open_csv(surr *s, FILE **out) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/loss.csv", s->o.out);
  *out = NULL;
  if (s->rank != 0) return DIST_SUCCESS;
  FILE *old = s->step > 0 ? fopen(path, "r") : NULL;
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    if (old) fclose(old);
    return dist_set_error(DIST_ERR_IO, "cannot write %s", tmp);
  }
  fputs("step,epoch,lr,train_loss,val_loss\n", f);
  char line[512];
  while (old && fgets(line, sizeof line, old)) {
    long long st;
    if (sscanf(line, "%lld,", &st) == 1 && st <= s->step) fputs(line, f);
  }
  if (old) fclose(old);
  if (fclose(f) || rename(tmp, path)) return dist_set_error(DIST_ERR_IO, "cannot write %s", path);
  *out = fopen(path, "a");
  return *out ? DIST_SUCCESS : dist_set_error(DIST_ERR_IO, "cannot append to %s", path);
}

typedef struct progress {
  FILE *csv;
  double t_start, t_train, last_loss;
  int64_t step_start;
} progress;

static dist_status log_line(surr *s, progress *p, int64_t epoch) {
  double val, mean = s->interval_loss / (double)s->interval_count;
  dist_status st = validate(s, &val);
  if (st) return st;
  double lr = dist_optim_get_lr(s->opt);
  if (s->rank == 0) {
    double elapsed = now() - p->t_start, rate = (double)(s->step - p->step_start) / elapsed;
    char eta[32];
    fmt_time((double)(s->total_steps - s->step) / rate, eta, sizeof eta);
    if (!s->o.quiet)
      printf("epoch %lld/%lld  step %lld/%lld  loss %.4e  val %.4e  lr %.2e  %.0f samples/s  ETA %s\n",
             (long long)epoch + 1, (long long)s->o.epochs, (long long)s->step, (long long)s->total_steps, mean, val, lr,
             (double)(s->step - p->step_start) * (double)s->o.batch / p->t_train, eta);
    fprintf(p->csv, "%lld,%lld,%.6e,%.9e,%.9e\n", (long long)s->step, (long long)epoch, lr, mean, val);
    fflush(p->csv);
    fflush(stdout);
  }
  p->last_loss = mean, s->interval_loss = 0, s->interval_count = 0;
  return DIST_SUCCESS;
}

static dist_status train_step(surr *s, const int64_t *idx, double *loss) {
  dist_status st = surr_agree(surr_load_pairs(s, 0, idx, s->local_batch, s->x, s->target));
  if (!st) st = dist_afno_zero_grad(s->model);
  /* The forward is collective over one replica (model-parallel x spatial
   * ranks): a failure in one replica (out of memory for a new FFT plan) is
   * made the world's here, before the replicas meet again in the loss. */
  if (!st) st = surr_agree(dist_afno_forward(s->model, s->local_batch, s->x, s->y));
  if (!st) st = dist_afno_mse(s->model, s->local_batch, s->y, s->target, loss, s->dy);
  if (!st && !isfinite(*loss)) st = surr_agree(dist_set_error(DIST_ERR_INVALID_ARGUMENT, "the loss is %g at step %lld: lower --lr", *loss, (long long)s->step));
  if (!st) st = dist_afno_backward(s->model, s->dy);
  if (!st) st = dist_optim_step(s->opt);
  if (!st) st = dist_optim_schedule_step(s->opt);
  return st;
}

static dist_status train(surr *s) {
  progress p = {0};
  dist_status st = surr_agree(open_csv(s, &p.csv));
  sampler smp = {s->train_samples, (int)s->o.dp, s->L.dp_rank, (uint64_t)s->o.seed, 1, 0};
  int64_t *order = malloc((size_t)sampler_per_replica(&smp) * sizeof(int64_t));
  if (!st && !order) st = dist_set_error(DIST_ERR_NO_MEMORY, "sampler indices");
  int64_t end = s->o.max_steps && s->o.max_steps < s->total_steps ? s->o.max_steps : s->total_steps;
  p.t_start = now(), p.step_start = s->step;
  int64_t last_ckpt = s->step;
  while (!st && s->step < end) {
    int64_t epoch = s->step / s->steps_per_epoch, b = s->step % s->steps_per_epoch;
    if (b == 0 || s->step == p.step_start) st = sampler_epoch(&smp, epoch, order);
    double loss = 0, t0 = now();
    if (!st) st = train_step(s, order + b * s->local_batch, &loss);
    if (st) break;
    p.t_train += now() - t0;
    s->step++;
    s->interval_loss += loss, s->interval_count++;
    if (s->step % s->o.log_every == 0 || s->step == end) st = log_line(s, &p, epoch);
    if (!st && (s->step % s->o.ckpt_every == 0 || s->step == end)) {
      st = surr_ckpt_save(s, s->step / s->steps_per_epoch);
      last_ckpt = s->step;
    }
    if (s->step == s->o.kill_at_step && s->rank == s->o.kill_rank) raise(SIGKILL);
  }
  if (p.csv) fclose(p.csv);
  free(order);
  if (!st && s->rank == 0 && end > p.step_start) {
    char took[32];
    fmt_time(now() - p.t_start, took, sizeof took);
    printf("ns2d_train: %lld steps (%.2f epochs) in %s, %.0f samples/s; last loss %.4e; checkpoint %s/ckpt/step_%08lld.safetensors\n",
           (long long)(end - p.step_start), (double)(end - p.step_start) / (double)s->steps_per_epoch, took,
           (double)(end - p.step_start) * (double)s->o.batch / p.t_train, p.last_loss, s->o.out, (long long)last_ckpt);
  }
  return st;
}

/* The loss curve through the gnuplot script the example ships (rank 0). */
static void plot_loss(const surr *s) {
#ifdef GNUPLOT
  if (s->rank != 0 || !*GNUPLOT) return;
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "%s -e \"in='%s/loss.csv'; out='%s/loss.png'\" %s/examples/loss_curve.gp", GNUPLOT, s->o.out,
           s->o.out, SRCDIR);
  if (system(cmd) == 0) printf("ns2d_train: loss curve %s/loss.png\n", s->o.out);
  else fprintf(stderr, "ns2d_train: warning: gnuplot failed; no loss.png (loss.csv has the figures)\n");
#else
  if (s->rank == 0) printf("ns2d_train: gnuplot was not found at configure time: no loss.png (loss.csv has the figures)\n");
#endif
}

static dist_status run(surr *s) {
  cosine cos_ctx = {0, s->o.lr_min_frac};
  dist_status st = make_mesh(s);
  if (!st) st = flowdata_open(s->o.data, &s->data);
  if (!st) s->meta = *flowdata_meta_get(s->data), s->n = s->meta.n;
  if (!st) st = make_model(s, &cos_ctx);
  if (!st) st = surr_agree(plan(s));
  if (st) return st;
  cos_ctx.total = s->total_steps;
  if (s->rank == 0 && (mkdir(s->o.out, 0777) && errno != EEXIST)) st = dist_set_error(DIST_ERR_IO, "cannot create %s: %s", s->o.out, strerror(errno));
  st = surr_agree(st);
  char path[4096] = "";
  if (!st && s->o.resume) {
    if (s->o.resume_from) snprintf(path, sizeof path, "%s", s->o.resume_from);
    else st = surr_ckpt_latest(s, path, sizeof path);
    if (!st && *path) st = surr_ckpt_load(s, path);
    if (!st && *path && s->rank == 0)
      printf("ns2d_train: resumed from %s at step %lld (epoch %lld, batch %lld of %lld)\n", path, (long long)s->step,
             (long long)(s->step / s->steps_per_epoch + 1), (long long)(s->step % s->steps_per_epoch), (long long)s->steps_per_epoch);
    else if (!st && s->rank == 0) printf("ns2d_train: --resume: no checkpoint in %s/ckpt, starting from scratch\n", s->o.out);
  }
  if (st) return st;
  if (s->rank == 0 && !s->o.quiet)
    printf("ns2d_train: %s: %lldx%lld, %lld training samples (%lld trajectories), %lld held out; mesh dp %lld x mp %lld x sp %lld; "
           "AFNO embed %lld depth %lld patch %lld, %lld parameters; batch %lld, %lld steps/epoch, %lld epochs\n",
           s->o.data, (long long)s->n, (long long)s->n, (long long)s->train_samples, (long long)s->meta.train_trajectories,
           (long long)(s->meta.trajectories - s->meta.train_trajectories), (long long)s->o.dp, (long long)s->o.mp,
           (long long)s->o.sp, (long long)s->o.embed, (long long)s->o.depth, (long long)s->o.patch,
           (long long)s->L.params_global, (long long)s->o.batch, (long long)s->steps_per_epoch, (long long)s->o.epochs);
  if (!s->o.eval_only) st = train(s);
  if (st) return st;
  if (!s->o.eval_only) plot_loss(s);
  double err;
  return surr_evaluate(s, &err);
}

int main(int argc, char **argv) {
  surr s = {0};
  dist_status st = parse(argc, argv, &s.o);
  if (st) {
    /* Same flags on every rank: each would print the same line; rank 0 is enough. */
    /* (before initialize: the launcher's rank; RANK under torchrun) */
    const char *r = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK")
                    : getenv("PMI_RANK")           ? getenv("PMI_RANK")
                                                   : getenv("RANK");
    if (!r || !strcmp(r, "0")) {
      if (strcmp(dist_last_error(), "help")) fprintf(stderr, "ns2d_train: %s\n", dist_last_error());
      fputs(usage, stderr);
    }
    return 2;
  }
  st = dist_manager_initialize();
  if (st) return fprintf(stderr, "ns2d_train: %s\n", dist_last_error()), 1;
  dist_manager_rank(&s.rank);
  dist_manager_world_size(&s.size);
  st = run(&s);
  if (st) fprintf(stderr, "ns2d_train: rank %d: %s\n", s.rank, dist_last_error());
  dist_optim_destroy(s.opt);
  dist_afno_destroy(s.model);
  flowdata_close(s.data);
  free(s.x), free(s.target), free(s.y), free(s.dy), free(s.snap_time);
  dist_manager_finalize();
  return st ? 1 : 0;
}
