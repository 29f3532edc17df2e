/* train_daso: data-parallel training with DASO (Heat's Distributed
 * Asynchronous and Selective Optimization). Model and data are train_ddp's:
 * a small MLP (IN -> HID tanh -> 1) learning y = sin(3 x0) + x1 x2 from
 * samples that differ per rank. DASO averages gradients inside each node
 * every batch, but parameters across nodes only every few batches, without
 * blocking, and adapts how often from the epoch losses. It wraps the local
 * optimizer: one dist_daso_step per batch replaces finalize + step. A
 * warm-up and a cool-down epoch synchronise every batch.
 *
 * DASO needs nodes; on one machine, make two nodes of two ranks:
 *   mpirun -np 4 -x DIST_RANKS_PER_NODE=2 examples/train_daso */
#include <distmgr.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define IN 8
#define HID 32
#define BATCH 32
#define EPOCHS 10
#define BATCHES 30 /* per epoch */
#define TEST 1000

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    dist_status s_ = (call);                                                                          \
    if (s_ != DIST_SUCCESS) {                                                                         \
      fprintf(stderr, "train_daso: %s: %s (%s)\n", #call, dist_status_string(s_), dist_last_error()); \
      return 1;                                                                                       \
    }                                                                                                 \
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

/* Mean squared error of one batch and its gradients (into the zeroed grad
 * buffers), each marked ready as soon as it is final: the node-local
 * reducer starts averaging the output layer's during the rest of the backward. */
static float train_batch(dist_daso *daso, uint32_t *seed, dist_status *err) {
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
  *err = dist_daso_mark_ready(daso, 2);
  if (!*err) *err = dist_daso_mark_ready(daso, 3);
  for (int k = 0; k < BATCH; k++)
    for (int j = 0; j < HID; j++) {
      float dz = d[k] * w2[j] * (1 - h[k][j] * h[k][j]); /* through tanh */
      for (int i = 0; i < IN; i++) gw1[j][i] += dz * x[k][i];
      gb1[j] += dz;
    }
  if (!*err) *err = dist_daso_mark_ready(daso, 0);
  if (!*err) *err = dist_daso_mark_ready(daso, 1);
  return loss;
}

int main(void) {
  CHECK(dist_manager_initialize());
  int rank, size, nodes;
  CHECK(dist_manager_rank(&rank));
  CHECK(dist_manager_world_size(&size));
  CHECK(dist_manager_node_count(&nodes));

  /* Any start will do: commit broadcasts rank 0's parameters to all ranks. */
  uint32_t seed = 1234u + (uint32_t)rank;
  for (int j = 0; j < HID; j++) {
    for (int i = 0; i < IN; i++) w1[j][i] = uniform(&seed) / sqrtf(IN);
    w2[j] = uniform(&seed) / sqrtf(HID);
  }
  dist_params *params;
  CHECK(dist_params_create(NULL, &params)); /* DASO needs the set over "world" */
  CHECK(dist_params_add_host(params, "fc1.weight", &w1[0][0], &gw1[0][0], HID * IN, NULL));
  CHECK(dist_params_add_host(params, "fc1.bias", b1, gb1, HID, NULL));
  CHECK(dist_params_add_host(params, "fc2.weight", w2, gw2, HID, NULL));
  CHECK(dist_params_add_host(params, "fc2.bias", b2, gb2, 1, NULL));
  CHECK(dist_params_commit(params));

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

  for (int epoch = 0; epoch < EPOCHS; epoch++) {
    double sum = 0;
    for (int b = 0; b < BATCHES; b++) {
      CHECK(dist_daso_zero_grad(daso));
      dist_status err;
      sum += train_batch(daso, &seed, &err); /* this rank's samples */
      CHECK(err);
      CHECK(dist_daso_step(daso)); /* local optimizer step, then the node / global sync of this batch */
    }
    CHECK(dist_daso_epoch_loss_logic(daso, sum / BATCHES, 0)); /* averaged over the world inside */
  }

  /* The last batch of an epoch is a blocking sync: the replicas agree again. */
  uint32_t test = 99u;
  double mse = 0;
  for (int k = 0; k < TEST; k++) {
    float x[IN], y, h[HID];
    sample(&test, x, &y);
    float e = forward(x, h) - y;
    mse += (double)e * e / TEST;
  }
  dist_print0("train_daso: %d ranks on %d nodes, %d epochs of %d batches: final loss %.4f\n", size, nodes, EPOCHS,
              BATCHES, mse);

  dist_daso_destroy(daso);
  dist_optim_destroy(opt);
  dist_params_destroy(params);
  CHECK(dist_manager_finalize());
  return 0;
}
