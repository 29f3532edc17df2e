/* The small model the training examples share: an MLP IN -> HID tanh -> 1
 * learning y = sin(3 x0) + x1 x2, with a hand-written backward that hands
 * each gradient to a reducer as soon as it is final (as an autograd engine
 * would). Parameters in forward order: 0 w1, 1 b1 (layer 0), 2 w2, 3 b2
 * (layer 1). Header-only so each example still builds from one file. */
#ifndef TINY_MLP_H
#define TINY_MLP_H

#include <distmgr.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* Each example defines EXAMPLE (its name) before including this. */
#define CHECK(call)                                                                                  \
  do {                                                                                               \
    dist_status s_ = (call);                                                                         \
    if (s_ != DIST_SUCCESS) {                                                                        \
      fprintf(stderr, EXAMPLE ": %s: %s (%s)\n", #call, dist_status_string(s_), dist_last_error()); \
      return 1;                                                                                      \
    }                                                                                                \
  } while (0)

#define IN 8
#define HID 32
#define TEST 1000

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

static void hidden(const float x[IN], float h[HID]) { /* layer 0 */
  for (int j = 0; j < HID; j++) {
    float z = b1[j];
    for (int i = 0; i < IN; i++) z += w1[j][i] * x[i];
    h[j] = tanhf(z);
  }
}

static float output(const float h[HID]) { /* layer 1 */
  float out = b2[0];
  for (int j = 0; j < HID; j++) out += w2[j] * h[j];
  return out;
}

/* Random start (rank-dependent on purpose: commit broadcasts rank 0's),
 * registration in forward order over "world", commit. */
static dist_status mlp_register(int rank, dist_params **out) {
  uint32_t seed = 777u + (uint32_t)rank;
  for (int j = 0; j < HID; j++) {
    for (int i = 0; i < IN; i++) w1[j][i] = uniform(&seed) / sqrtf(IN);
    w2[j] = uniform(&seed) / sqrtf(HID);
  }
  dist_params *p;
  dist_status s = dist_params_create(NULL, &p);
  if (s) return s;
  if (!s) s = dist_params_add_host(p, "fc1.weight", &w1[0][0], &gw1[0][0], HID * IN, NULL);
  if (!s) s = dist_params_add_host(p, "fc1.bias", b1, gb1, HID, NULL);
  if (!s) s = dist_params_add_host(p, "fc2.weight", w2, gw2, HID, NULL);
  if (!s) s = dist_params_add_host(p, "fc2.bias", b2, gb2, 1, NULL);
  if (!s) s = dist_params_commit(p);
  if (s) dist_params_destroy(p);
  else *out = p;
  return s;
}

/* Called with a parameter index once its gradient is final. */
typedef dist_status (*mlp_ready_fn)(void *ctx, int index);

/* Gradients of n samples (d = dloss/dprediction) added into the zeroed grad
 * buffers; the output layer's are final first, so they are handed over first. */
static dist_status mlp_backward(int n, float x[][IN], float h[][HID], const float *d, mlp_ready_fn ready, void *ctx) {
  for (int k = 0; k < n; k++) {
    for (int j = 0; j < HID; j++) gw2[j] += d[k] * h[k][j];
    gb2[0] += d[k];
  }
  dist_status s = ready(ctx, 2);
  if (!s) s = ready(ctx, 3);
  for (int k = 0; k < n; k++)
    for (int j = 0; j < HID; j++) {
      float dz = d[k] * w2[j] * (1 - h[k][j] * h[k][j]); /* through tanh */
      for (int i = 0; i < IN; i++) gw1[j][i] += dz * x[k][i];
      gb1[j] += dz;
    }
  if (!s) s = ready(ctx, 0);
  if (!s) s = ready(ctx, 1);
  return s;
}

/* Mean squared error on a fixed test set (the same on every rank). */
static double mlp_test_loss(void) {
  uint32_t test = 99u;
  double mse = 0;
  for (int k = 0; k < TEST; k++) {
    float x[IN], y, h[HID];
    sample(&test, x, &y);
    hidden(x, h);
    float e = output(h) - y;
    mse += (double)e * e / TEST;
  }
  return mse;
}

#endif
