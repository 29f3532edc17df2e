/* train_ddp: data-parallel training with the DDP gradient reducer.
 *
 * Every rank holds the same small MLP (tiny_mlp.h) and trains it on its own
 * samples. The backward pass hands each gradient to the reducer as soon as
 * it is final (dist_ddp_mark_ready), so its all-reduce can start while the
 * rest of the backward runs; dist_ddp_finalize waits and leaves the
 * gradients averaged over the ranks, and a local SGD step then keeps every
 * replica identical.
 *
 *   mpirun -np 4 examples/train_ddp */
#define EXAMPLE "train_ddp"
#include "tiny_mlp.h"

#define BATCH 32
#define STEPS 300

static dist_status mark(void *ddp, int index) { return dist_ddp_mark_ready(ddp, index); }

/* Mean squared error of one batch of this rank's samples; gradients marked
 * ready during the backward. */
static dist_status train_batch(dist_ddp *ddp, uint32_t *seed, float *loss) {
  float x[BATCH][IN], y[BATCH], h[BATCH][HID], d[BATCH];
  *loss = 0;
  for (int k = 0; k < BATCH; k++) {
    sample(seed, x[k], &y[k]);
    hidden(x[k], h[k]);
    float e = output(h[k]) - y[k];
    *loss += e * e / BATCH;
    d[k] = 2 * e / BATCH; /* dloss/dprediction */
  }
  return mlp_backward(BATCH, x, h, d, mark, ddp);
}

int main(void) {
  CHECK(dist_manager_initialize());
  int rank, size;
  CHECK(dist_manager_rank(&rank));
  CHECK(dist_manager_world_size(&size));

  dist_params *params;
  CHECK(mlp_register(rank, &params)); /* replicas over "world", rank 0's start everywhere */
  dist_sgd_options so = DIST_SGD_OPTIONS_INIT;
  so.lr = 0.1, so.momentum = 0.9;
  dist_optim *opt;
  CHECK(dist_optim_sgd(params, &so, &opt));
  dist_ddp *ddp;
  CHECK(dist_ddp_create(params, NULL, &ddp)); /* default buckets */

  uint32_t seed = 1234u + (uint32_t)rank;
  for (int step = 0; step < STEPS; step++) {
    float loss;
    CHECK(dist_optim_zero_grad(opt));
    CHECK(train_batch(ddp, &seed, &loss));
    CHECK(dist_ddp_finalize(ddp)); /* gradients now averaged over all ranks */
    CHECK(dist_optim_step(opt));
    if (step % 100 == 0) dist_print0("step %3d: batch loss on rank 0 %.4f\n", step, loss);
  }
  /* The replicas are identical: every rank gets the same test loss. */
  dist_print0("train_ddp: %d ranks, %d steps of %d samples per rank: final loss %.4f\n", size, STEPS, BATCH,
              mlp_test_loss());

  dist_ddp_destroy(ddp);
  dist_optim_destroy(opt);
  dist_params_destroy(params);
  CHECK(dist_manager_finalize());
  return 0;
}
