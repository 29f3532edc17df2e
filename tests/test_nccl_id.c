/* NCCL's unique id travels over the group's host engine (MPI under mpirun,
 * Gloo met through the rendezvous store under torchrun) and every member
 * joins one communicator with it (run at 1, 2, 3 and 4 ranks).
 *
 * The NCCL backend is called directly, past the engine choice, so that the
 * id exchange runs even where the ranks share a GPU (the lent test machine
 * has one). Which outcome is right depends on the GPUs:
 *  - every rank on its own GPU: the all-reduce sums;
 *  - two ranks on one GPU: ncclCommInitRank fails with "Duplicate GPU
 *    detected". NCCL can only say that after its bootstrap gathered every
 *    rank's peer information, which needs the same id on every rank: a rank
 *    with another id would fail to connect or leave the others waiting.
 *
 * Exits 77 (automake's SKIP) without CUDA, NCCL or a GPU on every rank. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <stdio.h>

#include "cuda_skip.h"

#if !defined(HAVE_CUDA) || !defined(HAVE_NCCL)

int main(void) { return cuda_skip_build("test_nccl_id", "built without CUDA or NCCL"); }

#else

#include <cuda_runtime.h>
#include <distmgr/cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cunit_mpi.h"
#include "manager/state.h"

#define N 4096

static int W, R;

static dist__group *world(void) {
  dist__group *g = NULL;
  CU_ASSERT_EQUAL_FATAL(dist__group_find(NULL, &g), DIST_SUCCESS);
  return g;
}

/* NCCL's own last message (ncclGetLastError, NCCL >= 2.13), from the copy
 * distmgr loaded; "" when it cannot be read. */
static const char *nccl_last_error(void) {
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  const char *(*last)(void *) = h ? (const char *(*)(void *))dlsym(h, "ncclGetLastError") : NULL;
  const char *m = last ? last(NULL) : NULL;
  if (h) dlclose(h);
  return m ? m : "";
}

static void test_id_reaches_every_rank(void) {
  dist__group *g = world();
  const dist__backend *picked;
  CU_ASSERT_EQUAL_FATAL(dist__backend_for(DIST_MEM_CUDA, g, &picked), DIST_SUCCESS); /* makes g->device */
  int all[4] = {0, 1, 2, 3}, a = -1, b = -1;
  int shared = dist__engine.device_keys && dist__device_shared(dist__engine.device_keys, all, W, &a, &b);

  float h[N], *dev = NULL;
  for (int i = 0; i < N; i++) h[i] = (float)(R + 1);
  CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&dev, sizeof h), cudaSuccess);
  CU_ASSERT_EQUAL_FATAL(cudaMemcpy(dev, h, sizeof h, cudaMemcpyHostToDevice), cudaSuccess);
  /* Out of place, so that one rank calls NCCL too. */
  float *out = NULL;
  CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&out, sizeof h), cudaSuccess);
  dist_status s = dist__backend_nccl.all_reduce(g, dev, out, N, DIST_F32, DIST_SUM, NULL);
  if (!shared) {
    if (s) fprintf(stderr, "[rank %d/%d] all-reduce on NCCL: %s\n", R, W, dist_last_error());
    CU_ASSERT_EQUAL_FATAL(s, DIST_SUCCESS);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(dist_cuda_stream()), cudaSuccess);
    CU_ASSERT_EQUAL_FATAL(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += h[i] != (float)(W * (W + 1) / 2);
    CU_ASSERT_EQUAL(bad, 0);
    if (R == 0) printf("test_nccl_id: %d rank(s), one GPU each: the all-reduce on NCCL sums\n", W);
  } else {
    const char *nccl = nccl_last_error();
    if (s != DIST_ERR_NCCL || !strstr(nccl, "Duplicate GPU detected"))
      fprintf(stderr, "[rank %d/%d] status %d (%s); NCCL's last error: %s\n", R, W, s, dist_last_error(), nccl);
    CU_ASSERT_EQUAL(s, DIST_ERR_NCCL);
    CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), "ncclCommInitRank"));
    CU_ASSERT_PTR_NOT_NULL(strstr(nccl, "Duplicate GPU detected"));
    if (R == 0)
      printf("test_nccl_id: %d ranks, world ranks %d and %d on one GPU: every rank reached NCCL's peer check "
             "(\"%s\")\n", W, a, b, nccl);
  }
  cudaFree(dev);
  cudaFree(out);
  /* Every rank is at the same collective afterwards. */
  CU_ASSERT_EQUAL(cunit_all_reduce_int(1, DIST_SUM), W);
}

static CU_TestInfo tests[] = {{"NCCL's unique id reaches every rank over the host engine", test_id_reaches_every_rank},
                              CU_TEST_INFO_NULL};

static int setup(int round) {
  (void)round;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (cunit_all_reduce_int(count, DIST_MIN) == 0) return cunit_mpi_skip("a rank sees no GPU");
  if (W > 4) return cunit_mpi_skip("written for 1-4 ranks");
  return 0;
}

static CU_SuiteInfo suites[] = {{"nccl_id", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) {
  return cunit_mpi_run(&(cunit_mpi_test){.name = "test_nccl_id", .suites = suites, .setup = setup, .rank = &R, .size = &W});
}

#endif
