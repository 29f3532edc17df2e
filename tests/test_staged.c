/* The staged backend (CUDA memory without NCCL) when a device-to-host copy
 * or a host buffer's allocation fails on one rank only (run at 1, 2, 3 and 4
 * ranks).
 *
 * A rank that returned on its own failure would leave the others waiting in
 * the collective for good. So the ranks agree before posting: on a failure
 * anywhere no rank posts, every rank returns an error (the others name the
 * failing rank) and leaves its buffers as they were. The failures are
 * injected (fault sites "staged_download" and "mem_alloc"), so the test runs
 * with or without a GPU. Without one, every real device copy fails too (the
 * buffers are host memory then), which checks that nothing hangs when all
 * ranks fail; with one, the buffers are checked as well. After each case an
 * all-reduce on the host engine checks that every rank is still at the same
 * collective.
 *
 * Exits 77 (automake's SKIP) when built without CUDA. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <stdio.h>

#include "cuda_skip.h"

#ifndef HAVE_CUDA

int main(void) { return cuda_skip_build("test_staged", "built without CUDA (no staged backend)"); }

#else /* HAVE_CUDA */

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cunit_mpi.h"
#include "core/fault.h"
#include "manager/state.h"

#define N 1000

static int W, R, GPU; /* GPU: every rank has a device, so the buffers are device memory */

/* N floats of "device" memory holding v: cudaMalloc'd with a GPU, else host
 * memory, from which every device copy fails (a failure on every rank). */
static float *dev_new(float v) {
  float h[N];
  for (int i = 0; i < N; i++) h[i] = v;
  void *p = NULL;
  if (GPU) {
    if (cudaMalloc(&p, sizeof h) != cudaSuccess) return NULL;
    if (cudaMemcpy(p, h, sizeof h, cudaMemcpyHostToDevice) != cudaSuccess) return cudaFree(p), NULL;
  } else if ((p = malloc(sizeof h))) {
    memcpy(p, h, sizeof h);
  }
  return p;
}

static void dev_free(float *p) {
  if (GPU) cudaFree(p);
  else free(p);
}

/* Every element of the device buffer equals `want` (checked with a GPU only). */
static void expect_all(const float *dev, float want, const char *what) {
  if (!GPU) return;
  float h[N];
  CU_ASSERT_FATAL(cudaMemcpy(h, dev, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += h[i] != want;
  if (bad) fprintf(stderr, "[rank %d/%d] %s: %d of %d elements differ from %g (first: %g)\n", R, W, what, bad, N, want, h[0]);
  CU_ASSERT_EQUAL(bad, 0);
}

/* The rank that failed reports the injected fault at `site` (with its
 * code), and the site was used. */
static void expect_injected(dist_status s, const char *site, dist_status code, const char *what) {
  CU_ASSERT_EQUAL(s, code);
  if (s != code) fprintf(stderr, "[rank %d/%d] %s: status %d (%s)\n", R, W, what, s, dist_last_error());
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), site));
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "not posted on any rank"));
  CU_ASSERT_PTR_NULL(dist__fault_site);
  dist__fault_site = NULL;
}

/* The others fail too, with the failing rank's code: with a GPU because of
 * the failing rank (named), without one because of their own device copies. */
static void expect_others(dist_status s, int failing, dist_status code, const char *what) {
  CU_ASSERT(s != DIST_SUCCESS);
  if (!GPU) return;
  char want[64];
  snprintf(want, sizeof want, "rank %d of group", failing);
  CU_ASSERT_EQUAL(s, code);
  CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), want));
  if (s != code || !strstr(dist_last_error(), want))
    fprintf(stderr, "[rank %d/%d] %s: status %d (%s)\n", R, W, what, s, dist_last_error());
}

/* Every rank is at the same collective: one more all-reduce must sum to W. */
static void expect_in_step(dist__group *g) {
  (void)g; /* the world */
  CU_ASSERT_EQUAL(cunit_all_reduce_int(1, DIST_SUM), W);
}

static dist__group *world(void) {
  dist__group *g = NULL;
  CU_ASSERT_EQUAL_FATAL(dist__group_find(NULL, &g), DIST_SUCCESS);
  return g;
}

/* Only the root copies from the device: the case that used to hang. */
static void test_broadcast(void) {
  dist__group *g = world();
  int root = W - 1;
  float *buf = dev_new(R == root ? 7.0f : -1.0f);
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  if (R == root) dist__fault_site = "staged_download";
  dist_status s = dist__backend_staged.broadcast(g, buf, N, DIST_F32, root);
  if (R == root) {
    expect_injected(s, "staged_download", DIST_ERR_INTERNAL, "broadcast, root");
    expect_all(buf, 7.0f, "the root's buffer is left as it was");
  } else {
    expect_others(s, root, DIST_ERR_INTERNAL, "broadcast, receiver");
    expect_all(buf, -1.0f, "no result is copied back");
  }
  expect_in_step(g);
  dev_free(buf);
}

/* Every rank copies; the last one fails. */
static void test_all_reduce(void) {
  dist__group *g = world();
  float *buf = dev_new((float)(R + 1));
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  if (R == W - 1) dist__fault_site = "staged_download";
  dist_status s = dist__backend_staged.all_reduce(g, buf, buf, N, DIST_F32, DIST_SUM, NULL);
  if (R == W - 1) {
    expect_injected(s, "staged_download", DIST_ERR_INTERNAL, "all_reduce, failing rank");
    expect_all(buf, (float)(R + 1), "the failing rank's buffer is left as it was");
  } else {
    expect_others(s, W - 1, DIST_ERR_INTERNAL, "all_reduce");
    expect_all(buf, (float)(R + 1), "no result is copied back");
  }
  expect_in_step(g);
  dev_free(buf);
}

/* N elements in W equal blocks, back to back. */
static void equal_split(size_t *counts, size_t *displs) {
  for (int r = 0; r < W; r++) counts[r] = N / W, displs[r] = (size_t)r * (N / W);
}

/* Scatter: again only the root copies from the device. */
static void test_scatter(void) {
  dist__group *g = world();
  int root = 0;
  size_t counts[4], displs[4];
  equal_split(counts, displs);
  float *send = dev_new(5.0f), *recv = dev_new(-1.0f);
  CU_ASSERT_PTR_NOT_NULL_FATAL(send);
  CU_ASSERT_PTR_NOT_NULL_FATAL(recv);
  if (R == root) dist__fault_site = "staged_download";
  dist_status s = dist__backend_staged.scatter_v(g, send, recv, counts, displs, DIST_F32, root);
  if (R == root) {
    expect_injected(s, "staged_download", DIST_ERR_INTERNAL, "scatter_v, root");
    expect_all(recv, -1.0f, "the root's receive buffer is left as it was");
  } else {
    expect_others(s, root, DIST_ERR_INTERNAL, "scatter_v, receiver");
    expect_all(recv, -1.0f, "no result is copied back");
  }
  expect_in_step(g);
  dev_free(send);
  dev_free(recv);
}

/* The host buffer for the data sent fails to allocate on the last rank: it
 * returned before posting and left the others in MPI_Alltoallv. */
static void test_all_to_all_send_alloc(void) {
  dist__group *g = world();
  size_t counts[4], displs[4];
  equal_split(counts, displs);
  float *send = dev_new((float)R), *recv = dev_new(-1.0f);
  CU_ASSERT_PTR_NOT_NULL_FATAL(send);
  CU_ASSERT_PTR_NOT_NULL_FATAL(recv);
  if (R == W - 1) dist__fault_site = "mem_alloc";
  dist_status s = dist__backend_staged.all_to_all_v(g, send, counts, displs, recv, counts, displs, DIST_F32, NULL);
  if (R == W - 1) expect_injected(s, "mem_alloc", DIST_ERR_NO_MEMORY, "all_to_all_v, failing rank");
  else expect_others(s, W - 1, DIST_ERR_NO_MEMORY, "all_to_all_v");
  expect_all(recv, -1.0f, "no result is copied back");
  expect_in_step(g);
  dev_free(send);
  dev_free(recv);
}

/* The receive buffer (the second allocation, after the device copy) fails
 * on rank 0. Without a GPU the device copy fails first on every rank, so the
 * site is never reached: then only "nobody hangs" is checked. */
static void test_all_gather_recv_alloc(void) {
  dist__group *g = world();
  size_t counts[4], displs[4];
  equal_split(counts, displs);
  float *send = dev_new((float)R), *recv = dev_new(-1.0f);
  CU_ASSERT_PTR_NOT_NULL_FATAL(send);
  CU_ASSERT_PTR_NOT_NULL_FATAL(recv);
  if (R == 0) dist__fault_site = "mem_alloc", dist__fault_skip = 1;
  dist_status s = dist__backend_staged.all_gather_v(g, send, recv, counts, displs, DIST_F32, NULL);
  if (!GPU) {
    CU_ASSERT(s != DIST_SUCCESS);
    dist__fault_site = NULL, dist__fault_skip = 0;
  } else if (R == 0) {
    expect_injected(s, "mem_alloc", DIST_ERR_NO_MEMORY, "all_gather_v, failing rank");
  } else {
    expect_others(s, 0, DIST_ERR_NO_MEMORY, "all_gather_v");
  }
  expect_all(recv, -1.0f, "no result is copied back");
  expect_in_step(g);
  dev_free(send);
  dev_free(recv);
}

/* With nothing failing (a GPU only), the result is right: the agreement
 * before the post must not cost correctness. */
static void test_all_reduce_ok(void) {
  dist__group *g = world();
  float *buf = dev_new((float)(R + 1));
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  dist_status s = dist__backend_staged.all_reduce(g, buf, buf, N, DIST_F32, DIST_SUM, NULL);
  if (GPU) {
    CU_ASSERT_EQUAL(s, DIST_SUCCESS);
    expect_all(buf, (float)(W * (W + 1) / 2), "the sum of every rank's R + 1");
  } else {
    CU_ASSERT(s != DIST_SUCCESS); /* host memory: every device copy fails */
  }
  expect_in_step(g);
  dev_free(buf);
}

static CU_TestInfo staged_tests[] = {{"broadcast: the root's device copy fails", test_broadcast},
                                     {"all_reduce: one rank's device copy fails", test_all_reduce},
                                     {"scatter_v: the root's device copy fails", test_scatter},
                                     {"all_to_all_v: one rank's send buffer allocation fails", test_all_to_all_send_alloc},
                                     {"all_gather_v: one rank's receive buffer allocation fails", test_all_gather_recv_alloc},
                                     {"all_reduce: nothing fails", test_all_reduce_ok},
                                     CU_TEST_INFO_NULL};
/* All ranks or none use device buffers (suite init runs on every rank). */
static int agree_gpu(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  GPU = cunit_all_reduce_int(count, DIST_MIN) > 0;
  if (R == 0) printf("test_staged: %s\n", GPU ? "device buffers" : "no GPU: host buffers, every device copy fails");
  return 0;
}

static CU_SuiteInfo suites[] = {{"staged", agree_gpu, NULL, NULL, NULL, staged_tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_mpi_main(suites, "test_staged", &R, &W); }

#endif /* HAVE_CUDA */
