/* DASO's schedule (Heat's epoch_loss_logic and step()/global_sync decisions)
 * as pure state transitions; see daso_schedule.h. */
#include <math.h>
#include <string.h>

#include "reducer/daso_schedule.h"

void dist__daso_sched_init(dist__daso_sched *s, int total_epochs, int warmup_epochs, int cooldown_epochs,
                           int max_global_skips, int skip_reduction_factor, int local_skip_factor,
                           double stability_level, int nsenders) {
  memset(s, 0, sizeof *s);
  s->total_epochs = total_epochs;
  s->warmup_epochs = warmup_epochs;
  s->cooldown_epochs = cooldown_epochs;
  s->max_global_skips = max_global_skips;
  s->skip_reduction_factor = skip_reduction_factor;
  s->local_skip_factor = local_skip_factor;
  s->stability_level = stability_level;
  s->nsenders = nsenders < 1 ? 1 : nsenders; /* send_mod is taken modulo this */
  s->last = -1;
  s->prev_sender = -1;
}

int dist__daso_plateau(dist__daso_sched *s, double loss) {
  if (!s->have_best && !isnan(loss)) {
    /* No best yet behaves like best = +inf: any real loss improves. A NaN
     * first loss must not become best, or nothing could ever improve. */
    s->best = loss;
    s->have_best = 1;
    s->bad = 0;
    return 0;
  }
  /* NaN compares false, so it falls to the non-improving branch. */
  if (s->have_best && loss < s->best * (1.0 - s->stability_level)) {
    s->best = loss;
    s->bad = 0;
    return 0;
  }
  if (++s->bad > 2) {
    s->bad = 0; /* keep best: the next plateau needs three more flat epochs */
    return 1;
  }
  return 0;
}

static int max_int(int a, int b) { return a > b ? a : b; }

void dist__daso_epoch_end(dist__daso_sched *s, double loss) {
  if (s->epoch < s->warmup_epochs) {
    s->gs = s->ls = s->btw = 0; /* blocking average every batch; no plateau test yet */
    return;
  }
  if (s->epoch == s->warmup_epochs) {
    s->gs = 4;
    s->ls = 1;
    s->btw = 1; /* and the loss still seeds the plateau test below */
  }
  if (s->epoch >= s->total_epochs - s->cooldown_epochs) {
    s->gs = s->ls = s->btw = 0;
    return;
  }
  int stable = dist__daso_plateau(s, loss);
  if (stable && s->gs > 1) {
    int f = s->skip_reduction_factor;
    s->gs /= f;
    s->ls /= f;
    s->btw -= 1;
    /* gs 0 would mean blocking forever (no further move is defined from 0);
     * stay in the cycle at gs 1 instead. */
    if (s->gs < 1) s->gs = 1;
    s->btw = max_int(s->btw, 1);
    s->ls = max_int(s->ls, 1);
  } else if (stable && s->gs == 1) {
    s->gs = s->max_global_skips;
    s->ls = s->btw = max_int(1, s->max_global_skips / s->local_skip_factor);
  }
  /* A send must be received before the next global sync starts another:
   * btw < gs (gs 1 is the exception: every batch syncs and receives the
   * previous send first). */
  if (s->gs > 1 && s->btw > s->gs - 1) s->btw = s->gs - 1;
}

/* Fill the receive fields from the send in flight and mark it received. */
static void take_receive(dist__daso_sched *s, dist__daso_plan *p) {
  p->receive = 1;
  p->recv_from = s->prev_sender;
  p->recv_btw = s->pending_btw;
  s->prev_sender = -1;
}

void dist__daso_plan_step(dist__daso_sched *s, dist__daso_plan *p) {
  const int b = s->cur, last = s->last, gs = s->gs, ls = s->ls, btw = s->btw;
  const int gmod = gs ? b % gs : 0, lmod = ls ? b % ls : 0;
  /* A send must arrive by the last batch, which is the epoch's blocking sync. */
  const int btwc = btw + b <= last ? btw : last - b;

  p->global = p->blocking = p->receive = 0;
  p->local_sync = -1;
  p->send_btw = 0;
  p->sender = s->send_mod;
  p->recv_from = -1;
  p->recv_btw = 0;

  if (b == last || gmod == 0) {
    p->global = 1;
    p->send_btw = btwc;
    /* The previous send is merged before this one starts: at most one in flight. */
    if (s->prev_sender >= 0) take_receive(s, p);
    if (b == last || btw == 0) {
      p->blocking = 1;
      p->local_sync = 1; /* blocking phases and the epoch's end keep local sync on */
      if (b == last) {
        s->send_mod = 0;
        s->epoch += 1;
        s->cur = 0;
      } else {
        s->cur += 1;
        s->send_mod = (s->send_mod + 1) % s->nsenders;
      }
    } else {
      s->cur += 1;
      s->prev_sender = s->send_mod;
      s->pending_btw = btwc;
      s->send_mod = (s->send_mod + 1) % s->nsenders;
    }
    return;
  }
  /* Here gs >= 2 (gs 0 and 1 always take the global branch), so % gs is safe. */
  if ((b + 1) % gs == 0) {
    /* The next batch is a global sync: sync locally before it. A send made
     * with btw == gs - 1 is therefore received there, one batch late. */
    p->local_sync = 1;
    s->cur += 1;
    return;
  }
  if (gmod < btw) {
    s->cur += 1;
    if (b + 1 == last) p->local_sync = 1;
    return;
  } else if (gmod == btw) {
    if (s->prev_sender >= 0) {
      take_receive(s, p);
      p->sender = p->recv_from;
    }
    if (ls > 1) p->local_sync = 0;
  }
  if (ls == 1 && b + 1 != last) {
    s->cur += 1;
    p->local_sync = 1;
    return;
  }
  /* lmod != 0 implies ls >= 1, so % ls is safe. */
  if (lmod == 0)
    p->local_sync = 0;
  else if ((b + 1) % ls == 0)
    p->local_sync = 1;
  if (b + 1 == last) p->local_sync = 1;
  s->cur += 1;
}
