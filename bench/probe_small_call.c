/* Ad-hoc probe behind bench/RESULTS.md "Reliability costs" (issue 18): the best
 * per-call time of a 4-byte dist_all_reduce. Not built by make; compare two
 * libraries with: mpicc -Iinclude -o probe bench/probe_small_call.c -ldistmgr. */
#include <distmgr.h>
#include <mpi.h>
#include <stdio.h>
int main(void) {
  if (dist_manager_initialize()) return 1;
  int r; dist_manager_rank(&r);
  float x = 1;
  dist_tensor t = dist_tensor_host(&x, DIST_F32, 1, (int64_t[1]){1});
  for (int i = 0; i < 2000; i++) dist_all_reduce(NULL, &t, DIST_SUM);
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < 5000; i++) dist_all_reduce(NULL, &t, DIST_SUM);
    double dt = (MPI_Wtime() - t0) / 5000 * 1e6;
    if (dt < best) best = dt;
  }
  if (r == 0) printf("%.2f us per 4-byte dist_all_reduce\n", best);
  return dist_manager_finalize();
}
