/* dist_manager_initialize without MPI (DIST_HOST_ENGINE=gloo) under a real
 * torchrun or a bare launcher (tests/torchrun.sh), through the public API
 * only: the manager's queries, the built-in groups, a subgroup, and the
 * collectives on host memory with uneven sizes along dim 0 of a [rows, 3]
 * tensor, each checked against values every rank can compute; a collective
 * whose arguments differ between ranks fails on every rank (the
 * verification round on Gloo); finalize. One line per rank; exit 0 when
 * every check held. */
#include <distmgr.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int bad;
#define CHECK(c)                                                                                            \
  do {                                                                                                      \
    if (!(c)) {                                                                                             \
      fprintf(stderr, "torchrun_coll: check failed at line %d: %s (%s)\n", __LINE__, #c, dist_last_error()); \
      bad++;                                                                                                \
    }                                                                                                       \
  } while (0)

#define COLS 3
static float v(int rank, int row, int col) { return (float)(rank * 100 + row * 10 + col); }

/* The collectives on `group` (my rank r of n). Rank q contributes q % 3 + 1 rows. */
static void check_group(const char *group, int r, int n, const int *world_of) {
  int64_t sizes[16], total = 0;
  for (int q = 0; q < n; q++) sizes[q] = q % 3 + 1, total += sizes[q];
  float in[3 * COLS], *out = calloc((size_t)(total * COLS), sizeof *out);
  for (int i = 0; i < sizes[r]; i++)
    for (int c = 0; c < COLS; c++) in[i * COLS + c] = v(world_of[r], i, c);
  int64_t shape_in[2] = {sizes[r], COLS}, shape_out[2] = {total, COLS};
  dist_tensor ti = dist_tensor_host(in, DIST_F32, 2, shape_in), to = dist_tensor_host(out, DIST_F32, 2, shape_out);
  CHECK(dist_all_gather_v(group, &ti, &to, 0, sizes) == DIST_SUCCESS);
  for (int q = 0, row = 0; q < n; q++)
    for (int i = 0; i < sizes[q]; i++, row++)
      for (int c = 0; c < COLS; c++) CHECK(out[row * COLS + c] == v(world_of[q], i, c));
  /* all-reduce, sum and max, over the same shape on every rank */
  float s[2 * COLS];
  int64_t shape_s[2] = {2, COLS};
  for (int i = 0; i < 2 * COLS; i++) s[i] = (float)(world_of[r] + i);
  dist_tensor ts = dist_tensor_host(s, DIST_F32, 2, shape_s);
  CHECK(dist_all_reduce(group, &ts, DIST_SUM) == DIST_SUCCESS);
  float ranks = 0;
  int top = 0;
  for (int q = 0; q < n; q++) ranks += (float)world_of[q], top = world_of[q] > top ? world_of[q] : top;
  for (int i = 0; i < 2 * COLS; i++) CHECK(s[i] == ranks + (float)(n * i));
  for (int i = 0; i < 2 * COLS; i++) s[i] = (float)(world_of[r] + i);
  CHECK(dist_all_reduce(group, &ts, DIST_MAX) == DIST_SUCCESS);
  for (int i = 0; i < 2 * COLS; i++) CHECK(s[i] == (float)(top + i));
  /* avg (sum, then divide) */
  double d = world_of[r];
  int64_t one = 1;
  dist_tensor td = dist_tensor_host(&d, DIST_F64, 1, &one);
  CHECK(dist_all_reduce(group, &td, DIST_AVG) == DIST_SUCCESS);
  CHECK(d == (double)ranks / n);
  /* broadcast from the last rank */
  float b[COLS] = {0};
  int64_t shape_b[1] = {COLS};
  if (r == n - 1)
    for (int c = 0; c < COLS; c++) b[c] = v(world_of[r], 9, c);
  dist_tensor tb = dist_tensor_host(b, DIST_F32, 1, shape_b);
  CHECK(dist_broadcast(group, &tb, n - 1) == DIST_SUCCESS);
  for (int c = 0; c < COLS; c++) CHECK(b[c] == v(world_of[n - 1], 9, c));
  /* all-to-all-v: to rank d, (r + d) % 2 + 1 rows valued (my rank, d) */
  int64_t ss[16], rs[16], st = 0, rt = 0;
  for (int q = 0; q < n; q++) ss[q] = (r + q) % 2 + 1, rs[q] = (q + r) % 2 + 1, st += ss[q], rt += rs[q];
  float *a2 = malloc(sizeof *a2 * (size_t)(st * COLS)), *b2 = malloc(sizeof *b2 * (size_t)(rt * COLS));
  for (int q = 0, row = 0; q < n; q++)
    for (int i = 0; i < ss[q]; i++, row++)
      for (int c = 0; c < COLS; c++) a2[row * COLS + c] = (float)(world_of[r] * 1000 + q * 10 + c);
  int64_t sa[2] = {st, COLS}, sb[2] = {rt, COLS};
  dist_tensor t2a = dist_tensor_host(a2, DIST_F32, 2, sa), t2b = dist_tensor_host(b2, DIST_F32, 2, sb);
  CHECK(dist_all_to_all_v(group, &t2a, &t2b, 0, ss, rs) == DIST_SUCCESS);
  for (int q = 0, row = 0; q < n; q++)
    for (int i = 0; i < rs[q]; i++, row++)
      for (int c = 0; c < COLS; c++) CHECK(b2[row * COLS + c] == (float)(world_of[q] * 1000 + r * 10 + c));
  /* reduce-scatter-v: everyone sends `out` (the gathered rows); I keep my rows, summed n times */
  float mine[3 * COLS];
  dist_tensor tm = dist_tensor_host(mine, DIST_F32, 2, shape_in);
  CHECK(dist_reduce_scatter_v(group, &to, &tm, 0, sizes, DIST_SUM) == DIST_SUCCESS);
  for (int i = 0; i < sizes[r]; i++)
    for (int c = 0; c < COLS; c++) CHECK(mine[i * COLS + c] == (float)n * v(world_of[r], i, c));
  CHECK(dist_barrier(group) == DIST_SUCCESS);
  free(out), free(a2), free(b2);
}

int main(void) {
  if (dist_manager_initialize() != DIST_SUCCESS) {
    fprintf(stderr, "torchrun_coll: initialize: %s\n", dist_last_error());
    return 1;
  }
  int rank = -1, size = 0, lrank = -1, lsize = 0, nodes = 0;
  CHECK(dist_manager_rank(&rank) == DIST_SUCCESS && dist_manager_world_size(&size) == DIST_SUCCESS);
  CHECK(dist_manager_local_rank(&lrank) == DIST_SUCCESS && dist_manager_local_size(&lsize) == DIST_SUCCESS);
  CHECK(dist_manager_node_count(&nodes) == DIST_SUCCESS);
  /* TORCHRUN_COLL_QUIT: the last rank dies without a word (=stall: it
   * sleeps instead, alive, then exits; =fork: it forks a child, which lives
   * on 12 s, first); every other rank's next collective must fail within
   * DIST_TIMEOUT, never hang. =late: it only comes 1 s late, alive, and the
   * collective must succeed (the others slept on it). */
  const char *quit = getenv("TORCHRUN_COLL_QUIT");
  if (quit && size > 1) {
    float x = 1;
    int64_t one = 1;
    dist_tensor tx = dist_tensor_host(&x, DIST_F32, 1, &one);
    /* TORCHRUN_COLL_WARM: one collective first (the shared-memory engine's
     * segment is made there), so that the next one waits in the engine */
    if (getenv("TORCHRUN_COLL_WARM")) CHECK(dist_all_reduce(NULL, &tx, DIST_SUM) == DIST_SUCCESS);
    const int late = !strcmp(quit, "late");
    if (rank == size - 1 && late) sleep(1);
    else if (rank == size - 1 && !strcmp(quit, "stall")) sleep(8); /* past the others' DIST_TIMEOUT */
    if (rank == size - 1 && !strcmp(quit, "fork") && fork() == 0) { /* a child without exec outlives it */
      int nul = open("/dev/null", O_WRONLY);
      if (nul >= 0) dup2(nul, 1), dup2(nul, 2); /* the launcher's output must not wait for it */
      sleep(12);
      _exit(0);
    }
    if (rank == size - 1 && !late) _exit(3);
    x = 1;
    dist_status s = dist_all_reduce(NULL, &tx, DIST_SUM);
    if (late && !s && x != (float)size) s = dist_set_error(DIST_ERR_INTERNAL, "sum %g, not %d", (double)x, size);
    printf("torchrun_coll: rank %d: after the last rank %s: %s\n", rank, late ? "came late" : "died",
           s ? dist_last_error() : "no error");
    fflush(stdout); /* before exit: a sanitizer's exit-time report may end the process without flushing */
    return s ? 2 : 0;
  }
  /* torchrun's node layout (one node per agent); the bare launcher's: one host. */
  const char *lr = getenv("LOCAL_RANK"), *ls = getenv("LOCAL_WORLD_SIZE");
  if (lr && ls) CHECK(lrank == atoi(lr) && lsize == atoi(ls) && nodes == size / lsize);
  else CHECK(lrank == rank && lsize == size && nodes == 1);
  const char *backend = NULL;
  /* One node and DIST_SHM_DATA=auto (the default): shared memory; else Gloo. */
  const char *shm = getenv("DIST_SHM_DATA");
  int want_shm = nodes == 1 && size > 1 && !(shm && !strcasecmp(shm, "off"));
  CHECK(dist_coll_backend(NULL, DIST_MEM_HOST, &backend) == DIST_SUCCESS && backend &&
        !strcmp(backend, want_shm ? "shm" : "gloo"));
  int world_of[16];
  for (int q = 0; q < size; q++) world_of[q] = q;
  check_group(NULL, rank, size, world_of);
  /* The node groups: local (my node's ranks) and cross (one per node, same local rank). */
  static const char *const built_in[] = {"local", "cross"};
  for (int k = 0; k < 2; k++) {
    int gr = -1, gs = 0, n = 0, of[16];
    CHECK(dist_group_rank(built_in[k], &gr) == DIST_SUCCESS && dist_group_size(built_in[k], &gs) == DIST_SUCCESS);
    CHECK(gs == (k ? nodes : lsize) && gr == (k ? rank / lsize : lrank));
    CHECK(dist_group_members(built_in[k], of, 16, &n) == DIST_SUCCESS && n == gs);
    if (!bad) check_group(built_in[k], gr, gs, of);
  }
  /* A subgroup: pairs (the last rank alone at odd sizes). */
  CHECK(dist_group_create_subgroup("pair", size % 2 ? 1 : 2, NULL) == DIST_SUCCESS);
  int pr = -1, ps = 0, members[2];
  CHECK(dist_group_rank("pair", &pr) == DIST_SUCCESS && dist_group_size("pair", &ps) == DIST_SUCCESS);
  int count = 0;
  CHECK(dist_group_members("pair", members, 2, &count) == DIST_SUCCESS && count == ps);
  if (!bad) check_group("pair", pr, ps, members);
  /* Ranks that disagree: the last rank all-reduces 2 elements, the others 1. */
  if (size > 1) {
    float x[2] = {1, 1};
    int64_t n1 = rank == size - 1 ? 2 : 1;
    dist_tensor tx = dist_tensor_host(x, DIST_F32, 1, &n1);
    dist_status s = dist_all_reduce(NULL, &tx, DIST_SUM);
    CHECK(s == DIST_ERR_MISMATCH);
    CHECK(dist_barrier(NULL) == DIST_SUCCESS); /* and the world goes on */
  }
  CHECK(dist_manager_finalize() == DIST_SUCCESS);
  printf("torchrun_coll: rank %d of %d %s\n", rank, size, bad ? "FAILED" : "ok");
  return bad != 0;
}
