/* Making rank-local outcomes collective, so that errors never turn into hangs. */
#include <stdio.h>

#include "state.h"

dist_status dist__mpi_error(int code, const char *call) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", code);
  return dist__error(DIST_ERR_MPI, "%s failed: %s", call, text);
}

dist_status dist__agree(MPI_Comm comm, dist_status mine, const char *what) {
  int rank, in[2], out[2];
  MPI_Comm_rank(comm, &rank);
  /* MINLOC over (status, rank): the most negative code, lowest rank on ties. */
  in[0] = (int)mine;
  in[1] = rank;
  int rc = MPI_Allreduce(in, out, 1, MPI_2INT, MPI_MINLOC, comm);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Allreduce (agreement)");
  if (out[0] == DIST_SUCCESS) return DIST_SUCCESS;
  if (mine != DIST_SUCCESS) return (dist_status)out[0]; /* keep this rank's own message */
  return dist__error((dist_status)out[0], "%s failed on rank %d: %s", what, out[1],
                     dist_status_string((dist_status)out[0]));
}

uint64_t dist__hash(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL; /* FNV-1a */
  return h;
}

dist_status dist__agree_hash(MPI_Comm comm, uint64_t hash, const char *what) {
  uint64_t in[2] = {hash, ~hash}, out[2];
  /* max(h) == h and max(~h) == ~h on every rank iff all hashes are equal. */
  int rc = MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, comm);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Allreduce (call-order check)");
  if (out[0] != in[0] || out[1] != in[1])
    return dist__error(DIST_ERR_MISMATCH,
                       "%s: ranks called it with different arguments or in a different order (creations are "
                       "collective over the world, in the same order on every rank)",
                       what);
  return DIST_SUCCESS;
}

dist_status dist__agree_status_hash(MPI_Comm comm, dist_status mine, uint64_t hash, const char *what) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  /* MAX over (-status << 32 | ~rank): the most negative code, lowest rank on ties. */
  uint64_t in[3] = {mine ? ((uint64_t)(uint32_t)(-mine) << 32) | (uint32_t)(0x7fffffff - rank) : 0, hash, ~hash}, out[3];
  int rc = MPI_Allreduce(in, out, 3, MPI_UINT64_T, MPI_MAX, comm);
  if (rc != MPI_SUCCESS) return dist__mpi_error(rc, "MPI_Allreduce (agreement)");
  if (out[0]) {
    if (mine) return mine;
    dist_status s = (dist_status)(-(int)(out[0] >> 32));
    return dist__error(s, "%s failed on rank %d: %s", what, 0x7fffffff - (int)(out[0] & 0xffffffffu),
                       dist_status_string(s));
  }
  if (out[1] != hash || out[2] != ~hash) return DIST_ERR_MISMATCH; /* the caller names what differs */
  return DIST_SUCCESS;
}
