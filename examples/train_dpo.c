/* train_dpo: data-parallel training with the DataParallelOptimizer (Heat's
 * semantics) on train_ddp's model and data (tiny_mlp.h).
 *
 * Non-blocking mode (the default here): dist_dpo_grad_ready starts the
 * average of each gradient at once and dist_dpo_step only records that an
 * update is due; each layer's update is applied just before that layer's
 * next forward (dist_dpo_before_forward), so the output layer's all-reduce
 * overlaps the hidden layer's forward. With --blocking every gradient is
 * averaged at once and the step applies immediately; both modes give the
 * same parameters bit for bit.
 *
 *   mpirun -np 4 examples/train_dpo [--blocking] */
#include <string.h>

#define EXAMPLE "train_dpo"
#include "tiny_mlp.h"

#define BATCH 32
#define STEPS 300

static dist_status ready(void *dpo, int index) { return dist_dpo_grad_ready(dpo, index); }

/* A batch's forward layer by layer, each layer's due update applied first;
 * returns the mean squared error and leaves d = dloss/dprediction. */
static dist_status forward(dist_dpo *dpo, int n, float x[][IN], const float *y, float h[][HID], float *d, float *loss) {
  dist_status s = dist_dpo_before_forward(dpo, 0);
  for (int k = 0; k < n && !s; k++) hidden(x[k], h[k]);
  if (!s) s = dist_dpo_before_forward(dpo, 1);
  *loss = 0;
  for (int k = 0; k < n && !s; k++) {
    float e = output(h[k]) - y[k];
    *loss += e * e / n;
    d[k] = 2 * e / n;
  }
  return s;
}

int main(int argc, char **argv) {
  int blocking = argc > 1 && strcmp(argv[1], "--blocking") == 0;
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
  dist_dpo *dpo;
  CHECK(dist_dpo_create(opt, blocking, &dpo));
  const int layer_of[4] = {0, 0, 1, 1};
  CHECK(dist_dpo_set_layers(dpo, layer_of, 2));

  uint32_t seed = 1234u + (uint32_t)rank;
  float x[BATCH][IN], y[BATCH], h[BATCH][HID], d[BATCH], loss;
  for (int step = 0; step < STEPS; step++) {
    for (int k = 0; k < BATCH; k++) sample(&seed, x[k], &y[k]); /* this rank's samples */
    CHECK(forward(dpo, BATCH, x, y, h, d, &loss)); /* applies the last step's updates */
    CHECK(dist_dpo_zero_grad(dpo));
    CHECK(mlp_backward(BATCH, x, h, d, ready, dpo)); /* each gradient handed over once final */
    CHECK(dist_dpo_step(dpo)); /* non-blocking: the update is now due */
    if (step % 100 == 0) dist_print0("step %3d: batch loss on rank 0 %.4f\n", step, loss);
  }
  CHECK(dist_dpo_flush(dpo)); /* apply what is still due before using the parameters */

  dist_print0("train_dpo: %d ranks, %s mode, %d steps of %d samples per rank: final loss %.4f\n", size,
              blocking ? "blocking" : "non-blocking", STEPS, BATCH, mlp_test_loss());

  dist_dpo_destroy(dpo);
  dist_optim_destroy(opt);
  dist_params_destroy(params);
  CHECK(dist_manager_finalize());
  return 0;
}
