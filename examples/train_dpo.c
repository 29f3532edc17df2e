/* train_dpo: data-parallel training with the DataParallelOptimizer (Heat's
 * semantics). Model and data are train_ddp's: a small MLP (IN -> HID tanh
 * -> 1) learning y = sin(3 x0) + x1 x2 from samples that differ per rank.
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
#include <distmgr.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define IN 8
#define HID 32
#define BATCH 32
#define STEPS 300
#define TEST 1000

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    dist_status s_ = (call);                                                                         \
    if (s_ != DIST_SUCCESS) {                                                                        \
      fprintf(stderr, "train_dpo: %s: %s (%s)\n", #call, dist_status_string(s_), dist_last_error()); \
      return 1;                                                                                      \
    }                                                                                                \
  } while (0)

/* Parameters and their gradients, registered in forward order: 0 w1, 1 b1
 * (layer 0), 2 w2, 3 b2 (layer 1). */
static float w1[HID][IN], b1[HID], w2[HID], b2[1];
static float gw1[HID][IN], gb1[HID], gw2[HID], gb2[1];

static float uniform(uint32_t *s) { /* in [-1, 1) */
  *s = *s * 1664525u + 1013904223u;
  return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

static void sample(uint32_t *s, float x[IN], float *y) {
  for (int i = 0; i < IN; i++) x[i] = uniform(s);
  *y = sinf(3 * x[0]) + x[1] * x[2];
}

/* A batch's forward layer by layer, each layer's due update applied first;
 * returns the mean squared error and leaves d = dloss/dprediction. */
static dist_status forward(dist_dpo *dpo, int n, float x[][IN], const float *y, float h[][HID], float *d, float *loss) {
  dist_status s = dist_dpo_before_forward(dpo, 0);
  for (int k = 0; k < n && !s; k++)
    for (int j = 0; j < HID; j++) {
      float z = b1[j];
      for (int i = 0; i < IN; i++) z += w1[j][i] * x[k][i];
      h[k][j] = tanhf(z);
    }
  if (!s) s = dist_dpo_before_forward(dpo, 1);
  *loss = 0;
  for (int k = 0; k < n && !s; k++) {
    float e = b2[0] - y[k];
    for (int j = 0; j < HID; j++) e += w2[j] * h[k][j];
    *loss += e * e / n;
    d[k] = 2 * e / n;
  }
  return s;
}

/* Gradients into the zeroed grad buffers, each handed over once final. */
static dist_status backward(dist_dpo *dpo, float x[][IN], float h[][HID], const float *d) {
  for (int k = 0; k < BATCH; k++) {
    for (int j = 0; j < HID; j++) gw2[j] += d[k] * h[k][j];
    gb2[0] += d[k];
  }
  dist_status s = dist_dpo_grad_ready(dpo, 2);
  if (!s) s = dist_dpo_grad_ready(dpo, 3);
  for (int k = 0; k < BATCH; k++)
    for (int j = 0; j < HID; j++) {
      float dz = d[k] * w2[j] * (1 - h[k][j] * h[k][j]); /* through tanh */
      for (int i = 0; i < IN; i++) gw1[j][i] += dz * x[k][i];
      gb1[j] += dz;
    }
  if (!s) s = dist_dpo_grad_ready(dpo, 0);
  if (!s) s = dist_dpo_grad_ready(dpo, 1);
  return s;
}

int main(int argc, char **argv) {
  int blocking = argc > 1 && strcmp(argv[1], "--blocking") == 0;
  CHECK(dist_manager_initialize());
  int rank, size;
  CHECK(dist_manager_rank(&rank));
  CHECK(dist_manager_world_size(&size));

  /* Any start will do: commit broadcasts rank 0's parameters to all ranks. */
  uint32_t seed = 1234u + (uint32_t)rank;
  for (int j = 0; j < HID; j++) {
    for (int i = 0; i < IN; i++) w1[j][i] = uniform(&seed) / sqrtf(IN);
    w2[j] = uniform(&seed) / sqrtf(HID);
  }
  dist_params *params;
  CHECK(dist_params_create(NULL, &params)); /* replicas over "world" */
  CHECK(dist_params_add_host(params, "fc1.weight", &w1[0][0], &gw1[0][0], HID * IN, NULL));
  CHECK(dist_params_add_host(params, "fc1.bias", b1, gb1, HID, NULL));
  CHECK(dist_params_add_host(params, "fc2.weight", w2, gw2, HID, NULL));
  CHECK(dist_params_add_host(params, "fc2.bias", b2, gb2, 1, NULL));
  CHECK(dist_params_commit(params));

  dist_sgd_options so = DIST_SGD_OPTIONS_INIT;
  so.lr = 0.1, so.momentum = 0.9;
  dist_optim *opt;
  CHECK(dist_optim_sgd(params, &so, &opt));
  dist_dpo *dpo;
  CHECK(dist_dpo_create(opt, blocking, &dpo));
  const int layer_of[4] = {0, 0, 1, 1};
  CHECK(dist_dpo_set_layers(dpo, layer_of, 2));

  float x[BATCH][IN], y[BATCH], h[BATCH][HID], d[BATCH], loss;
  for (int step = 0; step < STEPS; step++) {
    for (int k = 0; k < BATCH; k++) sample(&seed, x[k], &y[k]); /* this rank's samples */
    CHECK(forward(dpo, BATCH, x, y, h, d, &loss)); /* applies the last step's updates */
    CHECK(dist_dpo_zero_grad(dpo));
    CHECK(backward(dpo, x, h, d));
    CHECK(dist_dpo_step(dpo)); /* non-blocking: the update is now due */
    if (step % 100 == 0) dist_print0("step %3d: batch loss on rank 0 %.4f\n", step, loss);
  }
  CHECK(dist_dpo_flush(dpo)); /* apply what is still due before using the parameters */

  float tx[TEST][IN], ty[TEST], th[TEST][HID], td[TEST], mse;
  uint32_t test = 99u;
  for (int k = 0; k < TEST; k++) sample(&test, tx[k], &ty[k]);
  CHECK(forward(dpo, TEST, tx, ty, th, td, &mse)); /* the same on every rank */
  dist_print0("train_dpo: %d ranks, %s mode, %d steps of %d samples per rank: final loss %.4f\n", size,
              blocking ? "blocking" : "non-blocking", STEPS, BATCH, mse);

  dist_dpo_destroy(dpo);
  dist_optim_destroy(opt);
  dist_params_destroy(params);
  CHECK(dist_manager_finalize());
  return 0;
}
