/* train_daso: data-parallel training with DASO (Heat's Distributed
 * Asynchronous and Selective Optimization) on train_ddp's model and data
 * (tiny_mlp.h). DASO averages gradients inside each node every batch, but
 * parameters across nodes only every few batches, without blocking, and
 * adapts how often from the epoch losses. It wraps the local optimizer: one
 * dist_daso_step per batch replaces finalize + step. A warm-up and a
 * cool-down epoch synchronise every batch.
 *
 * DASO needs nodes; on one machine, make two nodes of two ranks:
 *   mpirun -np 4 -x DIST_RANKS_PER_NODE=2 examples/train_daso */
#define EXAMPLE "train_daso"
#include "tiny_mlp.h"

#define BATCH 32
#define EPOCHS 10
#define BATCHES 30 /* per epoch */

static dist_status mark(void *daso, int index) { return dist_daso_mark_ready(daso, index); }

/* One batch of this rank's samples; the node-local reducer starts averaging
 * the output layer's gradients during the rest of the backward. */
static dist_status train_batch(dist_daso *daso, uint32_t *seed, float *loss) {
  float x[BATCH][IN], y[BATCH], h[BATCH][HID], d[BATCH];
  *loss = 0;
  for (int k = 0; k < BATCH; k++) {
    sample(seed, x[k], &y[k]);
    hidden(x[k], h[k]);
    float e = output(h[k]) - y[k];
    *loss += e * e / BATCH;
    d[k] = 2 * e / BATCH;
  }
  return mlp_backward(BATCH, x, h, d, mark, daso);
}

int main(void) {
  CHECK(dist_manager_initialize());
  int rank, size, nodes;
  CHECK(dist_manager_rank(&rank));
  CHECK(dist_manager_world_size(&size));
  CHECK(dist_manager_node_count(&nodes));

  dist_params *params;
  CHECK(mlp_register(rank, &params)); /* DASO needs the set over "world" */
  dist_sgd_options so = DIST_SGD_OPTIONS_INIT;
  so.lr = 0.1, so.momentum = 0.9;
  dist_optim *opt;
  CHECK(dist_optim_sgd(params, &so, &opt)); /* the local optimizer DASO wraps */
  dist_daso_options o = DIST_DASO_OPTIONS_INIT;
  o.total_epochs = EPOCHS;
  o.warmup_epochs = o.cooldown_epochs = 1; /* the defaults (4) suit long runs */
  o.verbose = 1;                           /* rank 0 prints the schedule's changes */
  dist_daso *daso;
  CHECK(dist_daso_create(opt, &o, &daso));
  CHECK(dist_daso_set_last_batch(daso, BATCHES - 1));

  uint32_t seed = 1234u + (uint32_t)rank;
  for (int epoch = 0; epoch < EPOCHS; epoch++) {
    double sum = 0;
    for (int b = 0; b < BATCHES; b++) {
      float loss;
      CHECK(dist_daso_zero_grad(daso));
      CHECK(train_batch(daso, &seed, &loss));
      sum += loss;
      CHECK(dist_daso_step(daso)); /* local optimizer step, then the node / global sync of this batch */
    }
    CHECK(dist_daso_epoch_loss_logic(daso, sum / BATCHES, 0)); /* averaged over the world inside */
  }
  /* The last batch of an epoch is a blocking sync: the replicas agree again. */
  dist_print0("train_daso: %d ranks on %d nodes, %d epochs of %d batches: final loss %.4f\n", size, nodes, EPOCHS,
              BATCHES, mlp_test_loss());

  dist_daso_destroy(daso);
  dist_optim_destroy(opt);
  dist_params_destroy(params);
  CHECK(dist_manager_finalize());
  return 0;
}
