/* Unit tests of DASO's schedule (lib/reducer/daso_schedule.c: pure logic, no MPI).
 * Every expected table below was worked out by hand from the rules in
 * daso_schedule.h / reference reducers.md ("Heat DASO"): the plateau test,
 * epoch_loss_logic and step()/global_sync. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cunit_main.h"
#include "reducer/daso_schedule.h"

/* Defaults of dist_daso_options: total 40, warmup 4, cooldown 4, max 8, srf 2, lsf 4, 5%. */
static void init_default(dist__daso_sched *s, int nsenders) {
  dist__daso_sched_init(s, 40, 4, 4, 8, 2, 4, 0.05, nsenders);
}

/* ---------------------------------------------------------------- plateau */

/* Feed `n` losses; compare every return value with `expect`. */
static void plateau_seq(double stability, const double *loss, const int *expect, int n, const char *name) {
  dist__daso_sched s;
  dist__daso_sched_init(&s, 40, 4, 4, 8, 2, 4, stability, 1);
  for (int i = 0; i < n; i++) {
    int got = dist__daso_plateau(&s, loss[i]);
    if (got != expect[i]) fprintf(stderr, "  plateau %s: call %d (loss %g) gave %d\n", name, i, loss[i], got);
    CU_ASSERT_EQUAL(got, expect[i]);
  }
}

static void test_plateau_improving(void) {
  /* Each loss is below 95% of the previous one: always improving, never stable. */
  const double l[] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  const int e[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  plateau_seq(0.05, l, e, 10, "improving");
  dist__daso_sched s;
  init_default(&s, 1);
  for (int i = 0; i < 10; i++) dist__daso_plateau(&s, l[i]);
  CU_ASSERT_EQUAL(s.bad, 0);
  CU_ASSERT_DOUBLE_EQUAL(s.best, 1.0, 0);
}

static void test_plateau_flat(void) {
  /* First call seeds best; then bad 1, 2, 3 -> stable at calls 3, 6, 9 (bad resets each time). */
  const double l[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const int e[] = {0, 0, 0, 1, 0, 0, 1, 0, 0, 1};
  plateau_seq(0.05, l, e, 10, "flat");
  /* A rising loss is just as non-improving. */
  const double r[] = {1, 2, 3, 4, 5};
  const int re[] = {0, 0, 0, 1, 0};
  plateau_seq(0.05, r, re, 5, "rising");
}

static void test_plateau_threshold(void) {
  /* best 1: 0.96 and 0.951 are within 5% (bad 1, 2); 0.949 < 0.95 improves (bad 0, best
   * 0.949); then 0.94, 0.93, 0.92 are all above 0.949*0.95 = 0.9016: stable at the third. */
  const double l[] = {1.0, 0.96, 0.951, 0.949, 0.94, 0.93, 0.92};
  const int e[] = {0, 0, 0, 0, 0, 0, 1};
  plateau_seq(0.05, l, e, 7, "5%");
  dist__daso_sched s;
  init_default(&s, 1);
  for (int i = 0; i < 7; i++) dist__daso_plateau(&s, l[i]);
  CU_ASSERT_DOUBLE_EQUAL(s.best, 0.949, 0); /* kept through the plateau */
  CU_ASSERT_EQUAL(s.bad, 0);

  /* The comparison is strict: with 25% (exact in binary) 0.75 = 1*(1-0.25) does not
   * improve, 0.7499 does; 0.7499*0.75 = 0.562425 is the next bar. */
  const double q[] = {1.0, 0.75, 0.75, 0.7499, 0.5625, 0.5624, 0.6, 0.6, 0.6};
  const int qe[] = {0, 0, 0, 0, 0, 0, 0, 0, 1};
  plateau_seq(0.25, q, qe, 9, "25% boundary");

  /* stability_level 0: any strictly smaller loss improves. */
  const double z[] = {1.0, 1.0, 0.9999, 0.9999, 0.9999, 0.9999};
  const int ze[] = {0, 0, 0, 0, 0, 1};
  plateau_seq(0.0, z, ze, 6, "0%");
}

static void test_plateau_nan(void) {
  /* NaN never improves: three in a row are a plateau, best stays 1. */
  const double n1[] = {1.0, NAN, NAN, NAN, 0.5};
  const int e1[] = {0, 0, 0, 1, 0};
  plateau_seq(0.05, n1, e1, 5, "nan after best");
  dist__daso_sched s;
  init_default(&s, 1);
  for (int i = 0; i < 4; i++) dist__daso_plateau(&s, n1[i]);
  CU_ASSERT_DOUBLE_EQUAL(s.best, 1.0, 0);
  CU_ASSERT_EQUAL(s.bad, 0);

  /* A NaN between improvements only counts once: 0.5 improves and clears it. */
  const double n2[] = {1.0, NAN, 0.5, NAN, NAN, 0.4, NAN};
  const int e2[] = {0, 0, 0, 0, 0, 0, 0};
  plateau_seq(0.05, n2, e2, 7, "nan mixed");

  /* NaN before any real loss: non-improving (bad 1, 2), never becomes best; 5 seeds best
   * and clears bad, so three flat epochs are needed again. */
  const double n3[] = {NAN, NAN, 5.0, 5.0, 5.0, 5.0};
  const int e3[] = {0, 0, 0, 0, 0, 1};
  plateau_seq(0.05, n3, e3, 6, "nan first");
  init_default(&s, 1);
  dist__daso_plateau(&s, NAN);
  CU_ASSERT_EQUAL(s.have_best, 0);
  CU_ASSERT_EQUAL(s.bad, 1);
  const double n4[] = {NAN, NAN, NAN, 2.0};
  const int e4[] = {0, 0, 1, 0};
  plateau_seq(0.05, n4, e4, 4, "nan only");
}

/* -------------------------------------------------------------- epoch_end */

/* (gs, ls, btw) per epoch 0..n-1: epoch 0 is the initial state; for epoch e >= 1,
 * epoch_end runs with s->epoch = e and the loss of epoch e-1. */
static void trajectory(dist__daso_sched *s, const double *loss, int n, const int (*expect)[3], const char *name) {
  int e = 0;
  for (; e < n; e++) {
    if (e > 0) {
      s->epoch = e;
      dist__daso_epoch_end(s, loss[e - 1]);
    }
    int ok = s->gs == expect[e][0] && s->ls == expect[e][1] && s->btw == expect[e][2];
    if (!ok)
      fprintf(stderr, "  %s epoch %d: (%d,%d,%d), expected (%d,%d,%d)\n", name, e, s->gs, s->ls, s->btw,
              expect[e][0], expect[e][1], expect[e][2]);
    CU_ASSERT_TRUE(ok);
  }
}

#define Z {0, 0, 0}
#define T(a, b, c) {a, b, c}

static void flat_losses(double *l, int n) {
  /* Warmup losses (epochs 0-2) are never tested; flat 1.0 from the last warmup
   * epoch on, whose loss seeds the plateau at epoch 4. */
  for (int i = 0; i < n; i++) l[i] = i < 3 ? 4.0 - i : 1.0;
}

static void test_epoch_end_flat(void) {
  /* Plateau fires every third epoch after epoch 4 seeds best: 7, 10, 13, ...,
   * 34; from 36 = total - cooldown on, zeros. */
  static const int ex[41][3] = {
      Z,           Z,           Z,           Z,           /* 0-3 warmup */
      T(4, 1, 1),  T(4, 1, 1),  T(4, 1, 1),               /* 4-6 */
      T(2, 1, 1),  T(2, 1, 1),  T(2, 1, 1),               /* 7-9 */
      T(1, 1, 1),  T(1, 1, 1),  T(1, 1, 1),               /* 10-12 */
      T(8, 2, 2),  T(8, 2, 2),  T(8, 2, 2),               /* 13-15 */
      T(4, 1, 1),  T(4, 1, 1),  T(4, 1, 1),               /* 16-18 */
      T(2, 1, 1),  T(2, 1, 1),  T(2, 1, 1),               /* 19-21 */
      T(1, 1, 1),  T(1, 1, 1),  T(1, 1, 1),               /* 22-24 */
      T(8, 2, 2),  T(8, 2, 2),  T(8, 2, 2),               /* 25-27 */
      T(4, 1, 1),  T(4, 1, 1),  T(4, 1, 1),               /* 28-30 */
      T(2, 1, 1),  T(2, 1, 1),  T(2, 1, 1),               /* 31-33 */
      T(1, 1, 1),  T(1, 1, 1),                            /* 34-35 */
      Z,           Z,           Z,           Z,  Z};      /* 36-39 cooldown, 40: after training */
  double l[40];
  flat_losses(l, 40);
  dist__daso_sched s;
  init_default(&s, 2);
  /* No plateau test during warmup: nothing recorded before epoch 4. */
  for (int e = 1; e < 4; e++) {
    s.epoch = e;
    dist__daso_epoch_end(&s, l[e - 1]);
    CU_ASSERT_EQUAL(s.have_best, 0);
  }
  init_default(&s, 2);
  trajectory(&s, l, 41, ex, "flat");
}

static void test_epoch_end_decreasing(void) {
  /* Loss falling 10% per epoch (more than 5%): never stable, (4,1,1) from warmup to
   * cooldown, zeros from 36 whatever the loss. */
  int ex[41][3];
  double l[40];
  for (int e = 0; e < 41; e++) {
    if (e < 40) l[e] = 100.0 * pow(0.9, e);
    int on = e >= 4 && e < 36;
    ex[e][0] = on ? 4 : 0;
    ex[e][1] = ex[e][2] = on ? 1 : 0;
  }
  dist__daso_sched s;
  init_default(&s, 2);
  trajectory(&s, l, 41, (const int(*)[3])ex, "decreasing");
  CU_ASSERT_EQUAL(s.bad, 0);
}

static void test_epoch_end_max16(void) {
  /* max 16, lsf 4 -> (16,4,4); halving gives (8,2,3) then (4,1,2) then (2,1,1) (ls 0 -> 1). */
  static const int ex[37][3] = {
      Z,            Z,            Z,            Z,           /* 0-3 */
      T(4, 1, 1),   T(4, 1, 1),   T(4, 1, 1),                /* 4-6 */
      T(2, 1, 1),   T(2, 1, 1),   T(2, 1, 1),                /* 7-9 */
      T(1, 1, 1),   T(1, 1, 1),   T(1, 1, 1),                /* 10-12 */
      T(16, 4, 4),  T(16, 4, 4),  T(16, 4, 4),               /* 13-15 */
      T(8, 2, 3),   T(8, 2, 3),   T(8, 2, 3),                /* 16-18 */
      T(4, 1, 2),   T(4, 1, 2),   T(4, 1, 2),                /* 19-21 */
      T(2, 1, 1),   T(2, 1, 1),   T(2, 1, 1),                /* 22-24 */
      T(1, 1, 1),   T(1, 1, 1),   T(1, 1, 1),                /* 25-27 */
      T(16, 4, 4),  T(16, 4, 4),  T(16, 4, 4),               /* 28-30 */
      T(8, 2, 3),   T(8, 2, 3),   T(8, 2, 3),                /* 31-33 */
      T(4, 1, 2),   T(4, 1, 2),   Z};                        /* 34-35, 36 cooldown */
  double l[40];
  flat_losses(l, 40);
  dist__daso_sched s;
  dist__daso_sched_init(&s, 40, 4, 4, 16, 2, 4, 0.05, 2);
  trajectory(&s, l, 37, ex, "max16");
}

static void test_epoch_end_srf4(void) {
  /* srf 4: (4,1,1) -> (1,1,1) (ls, btw 0 -> 1) -> (8,2,2) -> (2,1,1) -> gs 2/4 = 0 is held
   * at 1: (1,1,1) -> (8,2,2) ... */
  static const int ex[37][3] = {
      Z,           Z,           Z,           Z,           /* 0-3 */
      T(4, 1, 1),  T(4, 1, 1),  T(4, 1, 1),               /* 4-6 */
      T(1, 1, 1),  T(1, 1, 1),  T(1, 1, 1),               /* 7-9 */
      T(8, 2, 2),  T(8, 2, 2),  T(8, 2, 2),               /* 10-12 */
      T(2, 1, 1),  T(2, 1, 1),  T(2, 1, 1),               /* 13-15 */
      T(1, 1, 1),  T(1, 1, 1),  T(1, 1, 1),               /* 16-18: gs held at 1 */
      T(8, 2, 2),  T(8, 2, 2),  T(8, 2, 2),               /* 19-21 */
      T(2, 1, 1),  T(2, 1, 1),  T(2, 1, 1),               /* 22-24 */
      T(1, 1, 1),  T(1, 1, 1),  T(1, 1, 1),               /* 25-27 */
      T(8, 2, 2),  T(8, 2, 2),  T(8, 2, 2),               /* 28-30 */
      T(2, 1, 1),  T(2, 1, 1),  T(2, 1, 1),               /* 31-33 */
      T(1, 1, 1),  T(1, 1, 1),  Z};                       /* 34-35, 36 */
  double l[40];
  flat_losses(l, 40);
  dist__daso_sched s;
  dist__daso_sched_init(&s, 40, 4, 4, 8, 4, 4, 0.05, 2);
  trajectory(&s, l, 37, ex, "srf4");
}

static void test_epoch_end_btw_clip(void) {
  /* max 2, lsf 1: the jump gives (2,2,2), btw clipped to gs-1 = 1; then (1,1,1).
   * max 8, lsf 1: (8,8,8) clipped to (8,8,7). max 1: gs 1 stays (1,1,1). */
  static const int ex2[17][3] = {Z,          Z,          Z,          Z,          T(4, 1, 1), T(4, 1, 1),
                                 T(4, 1, 1), T(2, 1, 1), T(2, 1, 1), T(2, 1, 1), T(1, 1, 1), T(1, 1, 1),
                                 T(1, 1, 1), T(2, 2, 1), T(2, 2, 1), T(2, 2, 1), T(1, 1, 1)};
  double l[40];
  flat_losses(l, 40);
  dist__daso_sched s;
  dist__daso_sched_init(&s, 40, 4, 4, 2, 2, 1, 0.05, 2);
  trajectory(&s, l, 17, ex2, "max2 lsf1");

  static const int ex8[14][3] = {Z,          Z,          Z,          Z,          T(4, 1, 1), T(4, 1, 1), T(4, 1, 1),
                                 T(2, 1, 1), T(2, 1, 1), T(2, 1, 1), T(1, 1, 1), T(1, 1, 1), T(1, 1, 1), T(8, 8, 7)};
  dist__daso_sched_init(&s, 40, 4, 4, 8, 2, 1, 0.05, 2);
  trajectory(&s, l, 14, ex8, "max8 lsf1");

  static const int ex1[17][3] = {Z,          Z,          Z,          Z,          T(4, 1, 1), T(4, 1, 1),
                                 T(4, 1, 1), T(2, 1, 1), T(2, 1, 1), T(2, 1, 1), T(1, 1, 1), T(1, 1, 1),
                                 T(1, 1, 1), T(1, 1, 1), T(1, 1, 1), T(1, 1, 1), T(1, 1, 1)};
  dist__daso_sched_init(&s, 40, 4, 4, 1, 2, 4, 0.05, 2);
  trajectory(&s, l, 17, ex1, "max1");
}

static void test_epoch_end_short(void) {
  /* total 6, warmup 4, cooldown 4: cooldown starts at 2, so epoch 4 sets (4,1,1) and the
   * cooldown check immediately zeros it; no plateau test ever runs. */
  dist__daso_sched s;
  dist__daso_sched_init(&s, 6, 4, 4, 8, 2, 4, 0.05, 2);
  for (int e = 1; e <= 6; e++) {
    s.epoch = e;
    dist__daso_epoch_end(&s, 1.0);
    CU_ASSERT_EQUAL(s.gs, 0);
    CU_ASSERT_EQUAL(s.ls, 0);
    CU_ASSERT_EQUAL(s.btw, 0);
  }
  CU_ASSERT_EQUAL(s.have_best, 0);
}

/* -------------------------------------------------------------- plan_step */

/* One expected plan: global, blocking, sender (checked when global or receive),
 * send_btw, receive, recv_from, recv_btw, local_sync. */
typedef struct row {
  int g, blk, snd, sbtw, rcv, from, rbtw, lsync;
} row;
#define NG(ls) {0, 0, 0, 0, 0, -1, 0, ls}                   /* plain batch: only local sync */
#define GS(snd, sbtw, ls) {1, 0, snd, sbtw, 0, -1, 0, ls}    /* non-blocking send, no receive */
#define GSR(snd, sbtw, from, rbtw) {1, 0, snd, sbtw, 1, from, rbtw, -1} /* receive, then send */
#define GB(snd, from) {1, 1, snd, 0, from >= 0, from, from >= 0 ? 1 : 0, 1} /* blocking; receives a btw-1 send from `from` >= 0 */
#define RCV(from, rbtw, ls) {0, 0, from, 0, 1, from, rbtw, ls} /* receive outside a global sync */

static int check_plan(const dist__daso_plan *p, const row *r, int b, const char *name) {
  int ok = p->global == r->g && p->blocking == r->blk && p->send_btw == r->sbtw && p->receive == r->rcv &&
           p->recv_from == r->from && p->recv_btw == r->rbtw && p->local_sync == r->lsync &&
           (!(p->global || p->receive) || p->sender == r->snd);
  if (!ok)
    fprintf(stderr,
            "  %s b=%d: got g%d blk%d snd%d sbtw%d rcv%d from%d rbtw%d ls%d; expected g%d blk%d snd%d sbtw%d rcv%d "
            "from%d rbtw%d ls%d\n",
            name, b, p->global, p->blocking, p->sender, p->send_btw, p->receive, p->recv_from, p->recv_btw,
            p->local_sync, r->g, r->blk, r->snd, r->sbtw, r->rcv, r->from, r->rbtw, r->lsync);
  return ok;
}

/* Run one epoch of last+1 batches at (gs, ls, btw) with 2 senders and compare each plan;
 * the last batch must close the epoch. */
static void epoch_table(int gs, int ls, int btw, int last, const row *t, const char *name) {
  dist__daso_sched s;
  init_default(&s, 2);
  s.epoch = 7;
  s.last = last;
  s.gs = gs;
  s.ls = ls;
  s.btw = btw;
  for (int b = 0; b <= last; b++) {
    dist__daso_plan p;
    CU_ASSERT_EQUAL(s.cur, b);
    CU_ASSERT_EQUAL(s.epoch, 7);
    dist__daso_plan_step(&s, &p);
    CU_ASSERT_TRUE(check_plan(&p, &t[b], b, name));
  }
  CU_ASSERT_EQUAL(s.epoch, 8);
  CU_ASSERT_EQUAL(s.cur, 0);
  CU_ASSERT_EQUAL(s.send_mod, 0);
  CU_ASSERT_EQUAL(s.prev_sender, -1);
}

static void test_plan_blocking(void) {
  /* (0,0,0): every batch is a blocking global sync with local sync on; senders alternate. */
  static const row t[10] = {GB(0, -1), GB(1, -1), GB(0, -1), GB(1, -1), GB(0, -1),
                            GB(1, -1), GB(0, -1), GB(1, -1), GB(0, -1), GB(1, -1)};
  epoch_table(0, 0, 0, 9, t, "(0,0,0)");
}

static void test_plan_411(void) {
  /* (4,1,1): sends at 0, 4, 8 (senders 0,1,0), each received one batch later (1, 5) or at the
   * blocking last batch (9, sender 1); ls 1 keeps local sync on; 0/4/8 leave it unchanged. */
  static const row t[10] = {GS(0, 1, -1), RCV(0, 1, 1), NG(1), NG(1), GS(1, 1, -1),
                            RCV(1, 1, 1), NG(1),        NG(1), GS(0, 1, -1), GB(1, 0)};
  epoch_table(4, 1, 1, 9, t, "(4,1,1)");
}

static void test_plan_211(void) {
  /* (2,1,1): btw = gs-1, so (b+1)%gs == 0 wins over gmod == btw: each send is received at
   * the next global sync (one batch late), just before that sync sends; odd batches sync locally. */
  static const row t[10] = {GS(0, 1, -1),     NG(1), GSR(1, 1, 0, 1), NG(1), GSR(0, 1, 1, 1),
                            NG(1),            GSR(1, 1, 0, 1), NG(1), GSR(0, 1, 1, 1), GB(1, 0)};
  epoch_table(2, 1, 1, 9, t, "(2,1,1)");
}

static void test_plan_111(void) {
  /* (1,1,1): every batch sends non-blocking and first receives the previous batch's send. */
  static const row t[10] = {GS(0, 1, -1),     GSR(1, 1, 0, 1), GSR(0, 1, 1, 1), GSR(1, 1, 0, 1), GSR(0, 1, 1, 1),
                            GSR(1, 1, 0, 1), GSR(0, 1, 1, 1), GSR(1, 1, 0, 1), GSR(0, 1, 1, 1), GB(1, 0)};
  epoch_table(1, 1, 1, 9, t, "(1,1,1)");
}

static void test_plan_822(void) {
  /* (8,2,2): send at 0 (btw 2) received at 2 (local sync off there), local sync then
   * alternates off/on with ls 2 (on before 4, 6, 8); 1 changes nothing (gmod < btw); the
   * send at 8 is clipped to btw 1 and received by the blocking last batch (sender 0). */
  static const row t[10] = {GS(0, 2, -1), NG(-1), RCV(0, 2, 0), NG(1),        NG(0),
                            NG(1),        NG(0),  NG(1),        GS(1, 1, -1), {1, 1, 0, 0, 1, 1, 1, 1}};
  epoch_table(8, 2, 2, 9, t, "(8,2,2)");
}

static void test_plan_831(void) {
  /* (8,3,1): the receive at 1 turns local sync off although 1 is off the ls grid (2 % 3 != 0,
   * lmod 1); then ls 3 rules: on before 3 and 6 (2, 5), off at 3 and 6, 4 unchanged; 7 on
   * before the global sync at 8. */
  static const row t[10] = {GS(0, 1, -1), RCV(0, 1, 0), NG(1), NG(0),        NG(-1),
                            NG(1),        NG(0),        NG(1), GS(1, 1, -1), GB(0, 1)};
  epoch_table(8, 3, 1, 9, t, "(8,3,1)");
}

static void test_plan_btw_clip(void) {
  /* (8,2,5), last 10: send at 0 with btw 5, received at 5; send at 8 clipped to 10-8 = 2,
   * received by the last batch 10. 1-4 wait (gmod < btw: local sync unchanged); 5-7 follow
   * ls 2 (on before even batches, off at even ones); 9 turns it on before the last batch. */
  static const row t[11] = {GS(0, 5, -1), NG(-1), NG(-1), NG(-1), NG(-1), RCV(0, 5, 1),
                            NG(0),        NG(1),  GS(1, 2, -1), NG(1), {1, 1, 0, 0, 1, 1, 2, 1}};
  epoch_table(8, 2, 5, 10, t, "(8,2,5) last 10");

  /* Clipping against the epoch's end directly: send_btw = min(btw, last - b). */
  dist__daso_sched s;
  dist__daso_plan p;
  for (int b = 0; b <= 9; b += 1) {
    init_default(&s, 2);
    s.last = 9;
    s.gs = 1; /* every batch is a global sync */
    s.ls = 1;
    s.btw = 3;
    s.cur = b;
    dist__daso_plan_step(&s, &p);
    CU_ASSERT_EQUAL(p.global, 1);
    CU_ASSERT_EQUAL(p.send_btw, b + 3 <= 9 ? 3 : 9 - b);
    CU_ASSERT_EQUAL(p.blocking, b == 9);
  }
  /* last 0: the only batch is the last: blocking, btw 0, next epoch. */
  init_default(&s, 2);
  s.last = 0;
  s.gs = 4;
  s.ls = s.btw = 1;
  for (int e = 0; e < 3; e++) {
    dist__daso_plan_step(&s, &p);
    CU_ASSERT_TRUE(p.global && p.blocking && p.send_btw == 0 && p.sender == 0 && !p.receive);
    CU_ASSERT_EQUAL(s.epoch, e + 1);
    CU_ASSERT_EQUAL(s.cur, 0);
  }
}

static void test_plan_last_batch(void) {
  /* The last batch is blocking whatever the phase and position, receives what is in
   * flight, and resets cur / send_mod, advancing the epoch. */
  static const int cfg[][3] = {{0, 0, 0}, {1, 1, 1}, {2, 1, 1}, {4, 1, 1}, {8, 2, 2}, {8, 8, 7}, {16, 4, 4}};
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
    for (int last = 0; last <= 12; last++) {
      dist__daso_sched s;
      init_default(&s, 3);
      s.gs = cfg[c][0];
      s.ls = cfg[c][1];
      s.btw = cfg[c][2];
      s.last = last;
      s.epoch = 5;
      s.cur = last;
      s.send_mod = 2;
      s.prev_sender = last > 0 && cfg[c][2] > 0 ? 1 : -1; /* something in flight when it can be */
      s.pending_btw = 1;
      int inflight = s.prev_sender;
      dist__daso_plan p;
      dist__daso_plan_step(&s, &p);
      CU_ASSERT_TRUE(p.global && p.blocking && p.local_sync == 1 && p.send_btw == 0 && p.sender == 2);
      CU_ASSERT_EQUAL(p.receive, inflight >= 0);
      CU_ASSERT_EQUAL(p.recv_from, inflight);
      CU_ASSERT_EQUAL(s.epoch, 6);
      CU_ASSERT_EQUAL(s.cur, 0);
      CU_ASSERT_EQUAL(s.send_mod, 0);
      CU_ASSERT_EQUAL(s.prev_sender, -1);
    }
}

static void test_plan_senders(void) {
  /* send_mod cycles over nsenders at every global sync (blocking or not) and restarts at
   * 0 each epoch: (0,0,0) with 3 senders and last 6 gives 0,1,2,0,1,2,0. */
  dist__daso_sched s;
  dist__daso_plan p;
  init_default(&s, 3);
  s.last = 6;
  for (int e = 0; e < 2; e++)
    for (int b = 0; b <= 6; b++) {
      dist__daso_plan_step(&s, &p);
      CU_ASSERT_EQUAL(p.sender, b % 3);
    }
  /* One sender: always 0. */
  init_default(&s, 1);
  s.last = 9;
  s.gs = 2;
  s.ls = s.btw = 1;
  for (int b = 0; b <= 9; b++) {
    dist__daso_plan_step(&s, &p);
    if (p.global) CU_ASSERT_EQUAL(p.sender, 0);
    if (p.receive) CU_ASSERT_EQUAL(p.recv_from, 0);
  }
  /* nsenders < 1 is taken as 1 (no modulo by zero). */
  init_default(&s, 0);
  CU_ASSERT_EQUAL(s.nsenders, 1);
}

/* ------------------------------------------------------------ invariants */

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;
static int rnd(int n) { /* xorshift64: deterministic, no libc rand() differences */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (int)(rng_state % (unsigned long long)n);
}

/* Run `epochs` epochs of the current s->gs/ls/btw, checking every plan. Returns the
 * number of violations (each also printed once). */
static int run_checked(dist__daso_sched *s, int epochs, const char *name) {
  int bad = 0;
  for (int e = 0; e < epochs; e++) {
    const int gs = s->gs, btw = s->btw, last = s->last, epoch0 = s->epoch;
    int fl_b = -1, fl_from = -1, fl_btw = 0; /* send in flight: batch, sender, btw */
    int nsend = 0, nrecv = 0, nglobal = 0, b;
    int lsync = 1; /* local sync state entering batch b: on after the previous epoch's blocking end */
#define CHECK(cond)                                                                                            \
  do {                                                                                                         \
    if (!(cond)) {                                                                                             \
      if (!bad) fprintf(stderr, "  %s (%d,%d,%d) last %d b %d: %s\n", name, gs, s->ls, btw, last, b, #cond); \
      bad++;                                                                                                   \
    }                                                                                                          \
  } while (0)
    for (b = 0; b <= last; b++) {
      dist__daso_plan p;
      CHECK(s->cur == b && s->epoch == epoch0);
      dist__daso_plan_step(s, &p);
      CHECK(p.local_sync >= -1 && p.local_sync <= 1);
      /* gradients are averaged in the node on every batch that syncs globally and on the last */
      if (p.global || b == last) CHECK(lsync == 1);
      if (p.local_sync >= 0) lsync = p.local_sync;
      if (p.receive) {
        /* exactly one receive per send, of that send, at the batch its btw says (one later
         * when btw == gs-1: the step before a global sync only turns local sync on) */
        CHECK(fl_b >= 0);
        CHECK(p.recv_from == fl_from && p.recv_btw == fl_btw);
        int late = gs > 1 && btw == gs - 1 && fl_b + btw < last;
        CHECK(b == fl_b + fl_btw + late);
        if (!p.global) CHECK(p.sender == p.recv_from);
        fl_b = -1;
        nrecv++;
      } else {
        CHECK(p.recv_from == -1);
      }
      if (p.global) {
        CHECK(fl_b < 0); /* the previous send was received first (this plan or earlier) */
        CHECK(p.sender == nglobal % s->nsenders);
        CHECK(b + p.send_btw <= last);
        CHECK(p.blocking == (b == last || btw == 0));
        if (p.blocking) {
          CHECK(p.local_sync == 1);
        } else {
          CHECK(p.send_btw >= 1);
          fl_b = b;
          fl_from = p.sender;
          fl_btw = p.send_btw;
          nsend++;
        }
        nglobal++;
      }
      CHECK(p.global == (b == last || gs == 0 || b % gs == 0));
    }
    CHECK(fl_b < 0 && nsend == nrecv); /* nothing crosses the epoch's end */
    CHECK(s->cur == 0 && s->epoch == epoch0 + 1 && s->send_mod == 0 && s->prev_sender == -1);
#undef CHECK
  }
  return bad;
}

static void test_invariants_random(void) {
  static const int gss[] = {0, 1, 2, 4, 8};
  int bad = 0;
  for (int trial = 0; trial < 5000 && !bad; trial++) {
    dist__daso_sched s;
    init_default(&s, 1 + rnd(4));
    int gs = gss[rnd(5)], ls, btw;
    if (gs == 0)
      ls = btw = 0;
    else if (gs == 1)
      ls = btw = 1; /* the cycling (1,1,1); (1,x,0) is covered by btw 0 below */
    else {
      ls = 1 + rnd(gs + 2);
      btw = rnd(gs); /* 0 .. gs-1 */
    }
    if (gs == 1 && rnd(4) == 0) btw = 0;
    s.gs = gs;
    s.ls = ls;
    s.btw = btw;
    s.last = rnd(21);
    bad += run_checked(&s, 3, "random");
  }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_full_run(void) {
  /* Whole training, plan_step and epoch_end together (flat loss so every phase is
   * visited): plan_step advances the epoch that epoch_end then reads. */
  for (int last = 0; last <= 12; last++) {
    dist__daso_sched s;
    init_default(&s, 2);
    s.last = last;
    int bad = 0, visited_cycling = 0;
    for (int e = 0; e < 40; e++) {
      CU_ASSERT_EQUAL(s.epoch, e);
      visited_cycling |= s.gs == 1 && s.btw == 1;
      bad += run_checked(&s, 1, "full run");
      dist__daso_epoch_end(&s, 1.0);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(visited_cycling);
    CU_ASSERT_EQUAL(s.gs, 0);
  }
}

static CU_TestInfo plateau_tests[] = {{"improving", test_plateau_improving},
                                      {"flat and rising", test_plateau_flat},
                                      {"threshold", test_plateau_threshold},
                                      {"nan", test_plateau_nan},
                                      CU_TEST_INFO_NULL};
static CU_TestInfo epoch_tests[] = {{"flat trajectory", test_epoch_end_flat},
                                    {"decreasing loss", test_epoch_end_decreasing},
                                    {"max 16", test_epoch_end_max16},
                                    {"skip reduction 4", test_epoch_end_srf4},
                                    {"btw < gs", test_epoch_end_btw_clip},
                                    {"warmup overlaps cooldown", test_epoch_end_short},
                                    CU_TEST_INFO_NULL};
static CU_TestInfo plan_tests[] = {{"(0,0,0)", test_plan_blocking},
                                   {"(4,1,1)", test_plan_411},
                                   {"(2,1,1)", test_plan_211},
                                   {"(1,1,1)", test_plan_111},
                                   {"(8,2,2)", test_plan_822},
                                   {"(8,3,1)", test_plan_831},
                                   {"btw clipping", test_plan_btw_clip},
                                   {"last batch", test_plan_last_batch},
                                   {"senders", test_plan_senders},
                                   CU_TEST_INFO_NULL};
static CU_TestInfo invariant_tests[] = {
    {"random epochs", test_invariants_random}, {"full run", test_full_run}, CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"daso plateau", NULL, NULL, NULL, NULL, plateau_tests},
                                {"daso epoch_end", NULL, NULL, NULL, NULL, epoch_tests},
                                {"daso plan_step", NULL, NULL, NULL, NULL, plan_tests},
                                {"daso invariants", NULL, NULL, NULL, NULL, invariant_tests},
                                CU_SUITE_INFO_NULL};

int main(void) { return cunit_run(suites, "test_daso_schedule", 0) != 0; }
