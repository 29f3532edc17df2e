/* DataParallelOptimizer (Heat's semantics): data parallelism by averaging
 * each parameter's gradient over the group, wrapping a local optimizer.
 *
 * Blocking mode: dist_dpo_grad_ready(index) all-reduces that gradient at
 * once (average over the group) and dist_dpo_step applies the optimizer to
 * every parameter immediately.
 *
 * Non-blocking mode: dist_dpo_grad_ready copies the gradient into the
 * optimizer's own buffer and starts a non-blocking average of it (still a
 * collective: all ranks hand parameters in the same order); the grad buffer
 * is free again at once for host memory, and in stream order for CUDA
 * memory (zero_grad and the next backward may run).
 * dist_dpo_step records that an update is due (and, with DIST_VERIFY=1,
 * agrees over the group that no gradient was lost). Before a layer's next
 * forward, call dist_dpo_before_forward(layer): it waits for that layer's
 * averages and steps just those parameters from them, so
 * the layer computes with exactly the parameters blocking mode would have
 * given it, while the other layers' reductions are still in flight.
 * dist_dpo_flush completes every pending update (before evaluation,
 * checkpointing or reading parameters). Layers default to one per parameter;
 * dist_dpo_set_layers groups them.
 *
 * Both modes give the same parameters bit for bit: both run the same
 * non-blocking all-reduce (blocking mode waits at once; MPI may sum in
 * another order in MPI_Allreduce) and the same optimizer arithmetic. */
#ifndef DISTMGR_DPO_H
#define DISTMGR_DPO_H

#include "distmgr/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist_dpo dist_dpo;

/* Wrap `opt` (over its committed parameter set and that set's group).
 * blocking = 1 or 0. Collective over the group (checks agreement). */
dist_status dist_dpo_create(dist_optim *opt, int blocking, dist_dpo **out);
/* layer_of[i] = layer of parameter i (values 0..nlayers-1, every layer used).
 * Local; not while updates are pending. */
dist_status dist_dpo_set_layers(dist_dpo *d, const int *layer_of, int nlayers);
/* Backward hook: the gradient of `index` is final. Collective over the group
 * in both modes: all ranks call it for the same parameters in the same order.
 * A gradient that cannot be copied (a failed device copy) is an error here,
 * but its sum is still posted (this rank contributing zeros), so the other
 * ranks do not wait; step reports it again. A layer whose last update is
 * still due (before_forward skipped or failed) gets that update applied
 * first (dropped if it fails again, then step fails too): an error naming
 * before_forward, but the gradient is handed. */
dist_status dist_dpo_grad_ready(dist_dpo *d, int index);
/* Blocking: step now. Non-blocking: mark an update as due (every parameter
 * must have been handed to grad_ready since the last step). If a gradient
 * could not be handed this iteration, the averages are wrong: with
 * DIST_VERIFY=1 (default) step is collective over the group (one small
 * all-reduce), every rank's step fails and none updates; with
 * DIST_VERIFY=0 step is local, only the rank that failed knows and skips its
 * update, and the others update from the wrong averages. */
dist_status dist_dpo_step(dist_dpo *d);
/* Non-blocking: finish `layer`'s due update before its forward (no-op when
 * none is due; in blocking mode always a no-op). Local. After a failure it
 * may be called again: parameters already updated are not updated twice. */
dist_status dist_dpo_before_forward(dist_dpo *d, int layer);
/* Complete every due update. Local. */
dist_status dist_dpo_flush(dist_dpo *d);
dist_status dist_dpo_zero_grad(dist_dpo *d);
int dist_dpo_blocking(const dist_dpo *d);
int dist_dpo_pending(const dist_dpo *d); /* layers whose update is due */

void dist_dpo_destroy(dist_dpo *d); /* flushes first */

#ifdef __cplusplus
}
#endif
#endif
