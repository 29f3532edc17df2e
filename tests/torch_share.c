/* The C side of tests/torch_share.py: a PyTorch program that loads this
 * module with ctypes runs distmgr in the same processes, on the same
 * torchrun rendezvous (MASTER_ADDR:MASTER_PORT, the agent's store). Each
 * function returns a dist_status; share_error() says what went wrong. */
#include <distmgr.h>
#include <string.h>

int share_initialize(void) { return dist_manager_initialize(); }

int share_finalize(void) { return dist_manager_finalize(); }

const char *share_error(void) { return dist_last_error(); }

/* rank and world size as distmgr sees them, into out[0] and out[1] */
int share_ranks(int *out) {
  dist_status s = dist_manager_rank(&out[0]);
  return s ? s : dist_manager_world_size(&out[1]);
}

/* In-place sum of n floats over the world (a tensor's memory from PyTorch). */
int share_all_reduce(float *buf, long long n) {
  int64_t shape[1] = {n};
  dist_tensor t = dist_tensor_host(buf, DIST_F32, 1, shape);
  return dist_all_reduce(NULL, &t, DIST_SUM);
}

/* The host engine distmgr runs on: "shm" or "gloo" under torchrun. */
const char *share_engine(void) {
  const char *name = "?";
  return dist_coll_backend(NULL, DIST_MEM_HOST, &name) ? "?" : name;
}
