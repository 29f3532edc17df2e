/* train_ddp: data-parallel training with the DDP gradient reducer.
 *
 * Every rank holds the same small MLP (IN -> HID tanh -> 1) and trains it on
 * its own samples of y = sin(3 x0) + x1 x2. The backward pass hands each
 * gradient to the reducer as soon as it is final (dist_ddp_mark_ready), so
 * its all-reduce can start while the rest of the backward runs;
 * dist_ddp_finalize waits and leaves the gradients averaged over the ranks,
 * and a local SGD step then keeps every replica identical.
 *
 *   mpirun -np 4 examples/train_ddp */
#include <distmgr.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define IN 8
#define HID 32
#define BATCH 32
#define STEPS 300
#define TEST 1000

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    dist_status s_ = (call);                                                                         \
    if (s_ != DIST_SUCCESS) {                                                                        \
      fprintf(stderr, "train_ddp: %s: %s (%s)\n", #call, dist_status_string(s_), dist_last_error()); \
      return 1;                                                                                      \
    }                                                                                                \
  } while (0)

/* Parameters and their gradients, registered in forward order: 0 w1, 1 b1, 2 w2, 3 b2. */
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

/* Prediction for x; h receives the hidden activations. */
static float forward(const float x[IN], float h[HID]) {
  float out = b2[0];
  for (int j = 0; j < HID; j++) {
    float z = b1[j];
    for (int i = 0; i < IN; i++) z += w1[j][i] * x[i];
    h[j] = tanhf(z);
    out += w2[j] * h[j];
  }
  return out;
}

/* Mean squared error of one batch and its gradients (accumulated into the
 * zeroed grad buffers). The output layer's gradients are final first, so
 * they are marked ready first, as an autograd engine would. */
static float train_batch(dist_ddp *ddp, uint32_t *seed, dist_status *err) {
  float x[BATCH][IN], y[BATCH], h[BATCH][HID], d[BATCH], loss = 0;
  for (int k = 0; k < BATCH; k++) {
    sample(seed, x[k], &y[k]);
    float e = forward(x[k], h[k]) - y[k];
    loss += e * e / BATCH;
    d[k] = 2 * e / BATCH; /* dloss/dprediction */
  }
  for (int k = 0; k < BATCH; k++) {
    for (int j = 0; j < HID; j++) gw2[j] += d[k] * h[k][j];
    gb2[0] += d[k];
  }
  *err = dist_ddp_mark_ready(ddp, 2);
  if (!*err) *err = dist_ddp_mark_ready(ddp, 3);
  for (int k = 0; k < BATCH; k++)
    for (int j = 0; j < HID; j++) {
      float dz = d[k] * w2[j] * (1 - h[k][j] * h[k][j]); /* through tanh */
      for (int i = 0; i < IN; i++) gw1[j][i] += dz * x[k][i];
      gb1[j] += dz;
    }
  if (!*err) *err = dist_ddp_mark_ready(ddp, 0);
  if (!*err) *err = dist_ddp_mark_ready(ddp, 1);
  return loss;
}

int main(void) {
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
  dist_ddp *ddp;
  CHECK(dist_ddp_create(params, NULL, &ddp)); /* default buckets */

  for (int step = 0; step < STEPS; step++) {
    CHECK(dist_optim_zero_grad(opt));
    dist_status err;
    float loss = train_batch(ddp, &seed, &err); /* this rank's samples */
    CHECK(err);
    CHECK(dist_ddp_finalize(ddp)); /* gradients now averaged over all ranks */
    CHECK(dist_optim_step(opt));
    if (step % 100 == 0) dist_print0("step %3d: batch loss on rank 0 %.4f\n", step, loss);
  }

  /* The replicas are identical: every rank gets the same test loss. */
  uint32_t test = 99u;
  double mse = 0;
  for (int k = 0; k < TEST; k++) {
    float x[IN], y, h[HID];
    sample(&test, x, &y);
    float e = forward(x, h) - y;
    mse += (double)e * e / TEST;
  }
  dist_print0("train_ddp: %d ranks, %d steps of %d samples per rank: final loss %.4f\n", size, STEPS, BATCH, mse);

  dist_ddp_destroy(ddp);
  dist_optim_destroy(opt);
  dist_params_destroy(params);
  CHECK(dist_manager_finalize());
  return 0;
}
