/* DASO's schedule as pure logic (no communication): the phase and plateau
 * logic run at the end of each epoch, and the per-batch decision of what
 * step() does. daso.c executes the decisions; tests drive this directly. */
#ifndef DISTMGR_DASO_SCHEDULE_H
#define DISTMGR_DASO_SCHEDULE_H

typedef struct dist__daso_sched {
  /* configuration */
  int total_epochs, warmup_epochs, cooldown_epochs;
  int max_global_skips, skip_reduction_factor, local_skip_factor;
  double stability_level;
  int nsenders; /* local ranks per node: send_mod cycles over them */
  /* state */
  int epoch, cur, last; /* cur: batch in epoch; last: batches per epoch - 1 (-1 = not set) */
  int gs, ls, btw;      /* global skips, local skips, batches to wait (0,0,0 = blocking) */
  int send_mod;         /* local rank whose cross group sends next */
  int prev_sender;      /* local rank whose send is in flight (-1: none) */
  int pending_btw;      /* the btw that send was made with (meaningless when prev_sender is -1) */
  /* plateau detector: patience 2, relative threshold, mode min */
  double best;
  int have_best, bad;
} dist__daso_sched;

/* Initial state: epoch 0, cur 0, last -1, gs = ls = btw = 0, send_mod 0,
 * prev_sender -1, plateau empty. nsenders < 1 is taken as 1. */
void dist__daso_sched_init(dist__daso_sched *s, int total_epochs, int warmup_epochs, int cooldown_epochs,
                           int max_global_skips, int skip_reduction_factor, int local_skip_factor,
                           double stability_level, int nsenders);

/* Plateau test with the epoch's averaged loss: returns 1 when stable.
 * An epoch improves when loss < best * (1 - stability_level) (strict; with
 * no best yet every non-NaN loss improves, as if best were +inf); otherwise
 * bad += 1, NaN included. bad > 2 (three non-improving epochs in a row)
 * returns 1 and resets bad to 0, keeping best. */
int dist__daso_plateau(dist__daso_sched *s, double loss);

/* epoch_loss_logic with the averaged loss (s->epoch is the epoch about to
 * start: plan_step has already counted the finished one). Sets gs/ls/btw:
 * zeros before warmup_epochs and from total - cooldown on; (4,1,1) at
 * epoch == warmup; in between one move per plateau: gs > 1 divides gs and
 * ls by skip_reduction_factor and lowers btw by one, gs == 1 jumps to
 * (max, max/local_skip_factor, max/local_skip_factor). While cycling gs,
 * ls, btw >= 1 and btw < gs whenever gs > 1 (btw clipped to gs - 1), so a
 * send is received before the next global sync.
 * Note: with warmup_epochs 0 the first call already sees epoch 1, so
 * epoch == warmup never happens and the schedule stays blocking. */
void dist__daso_epoch_end(dist__daso_sched *s, double loss);

/* What step() does for the batch s->cur. Execution order for the caller:
 * if receive, first receive + merge the send in flight (cross group of
 * local rank recv_from, merged with recv_btw) and broadcast in the node
 * from recv_from; then, if global, send (cross group of local rank
 * `sender`, with send_btw), waiting and broadcasting from `sender` now when
 * blocking; finally apply local_sync. */
typedef struct dist__daso_plan {
  int global;       /* 1: global sync; send_btw and blocking apply */
  int send_btw;     /* btw sent with the parameters (clipped at the epoch's end: b + send_btw <= last) */
  int blocking;     /* the global sync waits and averages now (always on the last batch) */
  int sender;       /* global: local rank whose cross group sends now (s->send_mod before the call);
                       receive outside a global sync: equal to recv_from; otherwise unused */
  int receive;      /* receive + merge the send in flight first */
  int recv_from;    /* receive: local rank that sent it (s->prev_sender before the call); else -1 */
  int recv_btw;     /* receive: the btw it was sent with (s->pending_btw before the call); else 0 */
  int local_sync;   /* local gradient sync for the next batch: -1 unchanged, 0 off, 1 on */
} dist__daso_plan;

/* Decide, then advance the state (cur / epoch / send_mod / prev_sender /
 * pending_btw) as if the plan had been executed. Requires s->last >= 0
 * (callers check). */
void dist__daso_plan_step(dist__daso_sched *s, dist__daso_plan *p);

#endif
