#include "agree.h"

#include <stdio.h>

dist_status agree_status(MPI_Comm comm, dist_status st) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  struct {
    int value, rank;
  } in = {(int)st, rank}, out;
  if (MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, comm) != MPI_SUCCESS)
    return dist_set_error(DIST_ERR_MPI, "MPI_Allreduce of the outcome failed");
  if (out.value == DIST_SUCCESS) return DIST_SUCCESS;
  char msg[1024];
  if (rank == out.rank) snprintf(msg, sizeof msg, "%s", dist_last_error());
  if (MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, out.rank, comm) != MPI_SUCCESS)
    return dist_set_error(DIST_ERR_MPI, "MPI_Bcast of an error message failed");
  msg[sizeof msg - 1] = 0;
  return dist_set_error((dist_status)out.value, "%s", msg);
}
