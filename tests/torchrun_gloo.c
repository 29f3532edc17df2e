/* The Gloo engine (lib/backend/gloo.h) under a real torchrun or a bare
 * launcher (tests/torchrun.sh), no MPI: contexts met through the store
 * rendezvous, then every collective on uneven sizes against a serial
 * reference computed here, on the world and on a subgroup (the even ranks).
 * One line per rank; exit status 0 when every check held.
 * DIST_TIMEOUT (seconds, default 60) bounds the rendezvous and each call;
 * TORCHRUN_GLOO_QUIT=connect|collective makes the last rank exit before
 * connecting or before the first collective, to check the others' errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/gloo.h"
#include "core/internal.h"
#include "store/rendezvous.h"

extern char **environ;
static int bad;
#define CHECK(c) \
  do { if (!(c)) { fprintf(stderr, "torchrun_gloo: check failed at line %d: %s (%s)\n", __LINE__, #c, dist_last_error()); bad++; } } while (0)

/* Rank q's value at position i of a test buffer: exact in f32 and small ints. */
static double val(int q, size_t i) { return (double)((q * 7 + (int)i * 3) % 11) - 4; }

static void check_all_reduce(dist__gloo *g, const int *ranks, int n) {
  int me = dist__gloo_rank(g);
  const dist_reduce_op ops[] = {DIST_SUM, DIST_MAX, DIST_MIN, DIST_PROD};
  for (int k = 0; k < 4; k++) {
    enum { N = 1000 };
    float f[N];
    double d[N];
    int32_t i32[N];
    int64_t i64[N];
    for (size_t i = 0; i < N; i++) f[i] = (float)val(ranks[me], i), d[i] = val(ranks[me], i) * 0.5, i32[i] = (int32_t)val(ranks[me], i), i64[i] = (int64_t)val(ranks[me], i) * ((int64_t)1 << 33);
    CHECK(dist__gloo_all_reduce(g, f, N, DIST_F32, ops[k]) == DIST_SUCCESS);
    CHECK(dist__gloo_all_reduce(g, d, N, DIST_F64, ops[k]) == DIST_SUCCESS);
    CHECK(dist__gloo_all_reduce(g, i32, N, DIST_I32, ops[k]) == DIST_SUCCESS);
    if (ops[k] != DIST_PROD) CHECK(dist__gloo_all_reduce(g, i64, N, DIST_I64, ops[k]) == DIST_SUCCESS);
    for (size_t i = 0; i < N; i++) {
      double want = ops[k] == DIST_PROD ? 1 : ops[k] == DIST_SUM ? 0 : val(ranks[0], i);
      for (int q = 0; q < n; q++) {
        double v = val(ranks[q], i);
        want = ops[k] == DIST_SUM ? want + v : ops[k] == DIST_PROD ? want * v : ops[k] == DIST_MAX ? fmax(want, v) : fmin(want, v);
      }
      if (f[i] != (float)want || d[i] != want * (ops[k] == DIST_PROD ? pow(0.5, n) : 0.5) || i32[i] != (int32_t)want ||
          (ops[k] != DIST_PROD && i64[i] != (int64_t)want * ((int64_t)1 << 33))) {
        CHECK(!"all-reduce value");
        break;
      }
    }
  }
  float c[4] = {1, 2, 3, 4}; /* complex sum: pairs of reals */
  CHECK(dist__gloo_all_reduce(g, c, 2, DIST_C64, DIST_SUM) == DIST_SUCCESS);
  CHECK(c[0] == n && c[3] == 4 * n);
  CHECK(dist__gloo_all_reduce(g, c, 2, DIST_C64, DIST_MAX) == DIST_ERR_UNSUPPORTED);
}

static void check_moves(dist__gloo *g, const int *ranks, int n) {
  int me = dist__gloo_rank(g);
  /* broadcast from every root */
  for (int root = 0; root < n; root++) {
    int64_t b[5];
    for (int i = 0; i < 5; i++) b[i] = me == root ? 100 * root + i : -1;
    CHECK(dist__gloo_broadcast(g, b, sizeof b, root) == DIST_SUCCESS);
    for (int i = 0; i < 5; i++) CHECK(b[i] == 100 * root + i);
  }
  /* all-gather-v: rank q sends q % 3 ints (some send nothing) */
  size_t bytes[8], total = 0;
  for (int q = 0; q < n; q++) bytes[q] = sizeof(int) * (size_t)(q % 3), total += bytes[q];
  int mine[2] = {ranks[me] * 10, ranks[me] * 10 + 1}, *all = malloc(total + 1);
  CHECK(dist__gloo_all_gather_v(g, mine, all, bytes) == DIST_SUCCESS);
  for (int q = 0, at = 0; q < n; q++)
    for (int j = 0; j < q % 3; j++, at++) CHECK(all[at] == ranks[q] * 10 + j);
  free(all);
  /* all-to-all-v: rank s sends (s + d) % 3 + 1 ints to rank d, valued s*100+d */
  int send[64], recv[64];
  size_t sb[8], rb[8];
  int at = 0;
  for (int d = 0; d < n; d++) {
    sb[d] = sizeof(int) * (size_t)((me + d) % 3 + 1);
    for (int j = 0; j < (me + d) % 3 + 1; j++) send[at++] = me * 100 + d;
    rb[d] = sizeof(int) * (size_t)((d + me) % 3 + 1);
  }
  CHECK(dist__gloo_all_to_all_v(g, send, sb, recv, rb) == DIST_SUCCESS);
  at = 0;
  for (int s = 0; s < n; s++)
    for (int j = 0; j < (s + me) % 3 + 1; j++) CHECK(recv[at++] == s * 100 + me);
  /* reduce-scatter-v: chunk r has r + 1 doubles; rank q contributes q + position */
  size_t counts[8], off = 0;
  double in[64], out[8];
  for (int r = 0; r < n; r++) counts[r] = (size_t)r + 1;
  for (int r = 0; r < n; r++)
    for (size_t j = 0; j < counts[r]; j++) in[off++] = ranks[me] + (double)j;
  CHECK(dist__gloo_reduce_scatter_v(g, in, out, counts, DIST_F64, DIST_SUM) == DIST_SUCCESS);
  double rank_sum = 0;
  for (int q = 0; q < n; q++) rank_sum += ranks[q];
  for (size_t j = 0; j < counts[me]; j++) CHECK(out[j] == rank_sum + n * (double)j);
  CHECK(dist__gloo_barrier(g) == DIST_SUCCESS);
}

/* The backend table on a group around the context: counts in elements and
 * displacements that are not blocks in rank order (reversed, with gaps), so
 * the point-to-point paths run, against values each rank can compute. */
static void check_backend(dist__gloo *ctx, int me, int n) {
  dist__group g;
  memset(&g, 0, sizeof g);
  snprintf(g.name, sizeof g.name, "world");
  g.rank = me, g.size = n, g.gloo = ctx;
  const dist__backend *b = &dist__backend_gloo;
  size_t cnt[8], dsp[8], rc[8], rd[8], span = 0;
  /* Rank q's block: q + 1 elements; placed in reverse rank order with a gap of 1. */
  for (int q = n - 1; q >= 0; q--) cnt[q] = (size_t)q + 1, dsp[q] = span, span += cnt[q] + 1;
  int32_t mine[8], all[64], want[64];
  for (int j = 0; j <= me; j++) mine[j] = me * 10 + j;
  memset(want, 0xff, sizeof want);
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < cnt[q]; j++) want[dsp[q] + j] = q * 10 + (int)j;
  memset(all, 0xff, sizeof all);
  CHECK(b->all_gather_v(&g, mine, all, cnt, dsp, DIST_I32, NULL) == DIST_SUCCESS);
  CHECK(!memcmp(all, want, sizeof(int32_t) * span));
  for (int root = 0; root < n; root++) { /* gather-v and scatter-v at every root */
    memset(all, 0xff, sizeof all);
    CHECK(b->gather_v(&g, mine, all, cnt, dsp, DIST_I32, root) == DIST_SUCCESS);
    if (me == root) CHECK(!memcmp(all, want, sizeof(int32_t) * span));
    int32_t got[8];
    memset(got, 0, sizeof got);
    CHECK(b->scatter_v(&g, me == root ? want : NULL, got, cnt, dsp, DIST_I32, root) == DIST_SUCCESS);
    for (int j = 0; j <= me; j++) CHECK(got[j] == me * 10 + j);
  }
  /* all-to-all-v: to rank d, (me + d) % 2 + 1 values me*100+d, laid out reversed. */
  int32_t send[64], recv[64];
  size_t sc[8], sd[8], at = 0;
  for (int d = n - 1; d >= 0; d--) {
    sc[d] = (size_t)((me + d) % 2 + 1), sd[d] = at;
    for (size_t j = 0; j < sc[d]; j++) send[at++] = me * 100 + d;
  }
  at = 0;
  for (int s = n - 1; s >= 0; s--) rc[s] = (size_t)((s + me) % 2 + 1), rd[s] = at, at += rc[s] + 2;
  memset(recv, 0xff, sizeof recv);
  CHECK(b->all_to_all_v(&g, send, sc, sd, recv, rc, rd, DIST_I32, NULL) == DIST_SUCCESS);
  for (int s = 0; s < n; s++)
    for (size_t j = 0; j < rc[s]; j++) CHECK(recv[rd[s] + j] == s * 100 + me);
  /* all-reduce out of place, reduce to each root, reduce-scatter-v with displacements. */
  double x[3] = {me, 2.0 * me, 1}, y[3] = {0};
  CHECK(b->all_reduce(&g, x, y, 3, DIST_F64, DIST_SUM, NULL) == DIST_SUCCESS);
  CHECK(y[0] == n * (n - 1) / 2.0 && y[1] == n * (n - 1.0) && y[2] == n && x[2] == 1);
  for (int root = 0; root < n; root++) {
    double z = -1;
    CHECK(b->reduce(&g, &x[2], &z, 1, DIST_F64, DIST_MAX, root) == DIST_SUCCESS);
    CHECK(me == root ? z == 1 : z == -1);
  }
  double in[64], out[8];
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < cnt[q]; j++) in[dsp[q] + j] = me + (double)j;
  CHECK(b->reduce_scatter_v(&g, in, out, cnt, dsp, DIST_F64, DIST_SUM) == DIST_SUCCESS);
  for (size_t j = 0; j < cnt[me]; j++) CHECK(out[j] == n * (n - 1) / 2.0 + n * (double)j);
  CHECK(!b->can_reduce(DIST_BF16, DIST_SUM) && !b->can_reduce(DIST_F32, DIST_AVG) && b->can_reduce(DIST_I64, DIST_MAX));
  CHECK(b->barrier(&g) == DIST_SUCCESS);
  /* The control round and exchanges on Gloo: a failure on the last rank is
   * every rank's, a hash that differs on one rank is seen everywhere. */
  CHECK(dist__agree_group(&g, DIST_SUCCESS, "all fine") == DIST_SUCCESS);
  dist_status got = dist__agree_group(&g, me == n - 1 ? dist__error(DIST_ERR_INVALID_ARGUMENT, "mine") : DIST_SUCCESS,
                                      "one rank fails");
  CHECK(got == DIST_ERR_INVALID_ARGUMENT);
  if (me != n - 1) CHECK(strstr(dist_last_error(), "failed on rank") != NULL);
  int differs = -1;
  got = dist__agree_status_hash_group(&g, DIST_SUCCESS, me == 0 ? 1 : 2, "hashes", &differs);
  CHECK(n > 1 ? got == DIST_ERR_MISMATCH && differs == 1 : got == DIST_SUCCESS && differs == 0);
  int64_t cin[2] = {me, -me}, cout[2];
  CHECK(dist__control_all_reduce(&g, cin, cout, 2, DIST_MAX, "max") == DIST_SUCCESS);
  CHECK(cout[0] == n - 1 && cout[1] == 0);
  int64_t *ga = calloc((size_t)n, sizeof *ga), mine1 = 7 * me;
  CHECK(dist__control_all_gather(&g, &mine1, sizeof mine1, ga, "gather") == DIST_SUCCESS);
  for (int q = 0; q < n; q++) CHECK(ga[q] == 7 * q);
  int64_t sa[8], ra[8];
  for (int q = 0; q < n; q++) sa[q] = 100 * me + q;
  CHECK(dist__control_all_to_all(&g, sa, ra, "a2a") == DIST_SUCCESS);
  for (int q = 0; q < n; q++) CHECK(ra[q] == 100 * q + me);
  free(ga);
}

int main(void) {
  const char *const *env = (const char *const *)environ;
  dist_launch l;
  dist__rdzv *r;
  const char *t = getenv("DIST_TIMEOUT"), *quit = getenv("TORCHRUN_GLOO_QUIT");
  double timeout = t ? atof(t) : 60;
  if (dist_launch_detect(env, DIST_LAUNCH_ENV, &l) || dist__rdzv_open(&l, env, timeout, &r)) {
    fprintf(stderr, "torchrun_gloo: %s\n", dist_last_error());
    return 1;
  }
  if (l.size > 8) return fprintf(stderr, "torchrun_gloo: at most 8 ranks\n"), 1;
  char prefix[256];
  snprintf(prefix, sizeof prefix, "%sgloo/world/", dist__rdzv_prefix(r));
  dist__gloo *world = NULL, *even = NULL;
  int ranks[8], evens[8], ne = 0;
  for (int q = 0; q < l.size; q++) ranks[q] = q;
  for (int q = 0; q < l.size; q += 2) evens[ne++] = q;
  int last = l.rank == l.size - 1 && l.size > 1;
  if (last && quit && !strcmp(quit, "connect")) return dist__rdzv_close(r, 0), 0;
  if (dist__gloo_connect(dist__rdzv_client(r), prefix, l.rank, l.size, timeout, &world)) {
    fprintf(stderr, "torchrun_gloo: rank %d: connect: %s\n", l.rank, dist_last_error());
    return dist__rdzv_close(r, 0), 1;
  }
  if (last && quit && !strcmp(quit, "collective")) return dist__gloo_free(world), dist__rdzv_close(r, 0), 0;
  if (quit) { /* the others: the first collective must fail, not hang */
    float x = 1;
    dist_status s = dist__gloo_all_reduce(world, &x, 1, DIST_F32, DIST_SUM);
    fprintf(stderr, "torchrun_gloo: rank %d: all-reduce: %s\n", l.rank, s ? dist_last_error() : "succeeded");
    return dist__gloo_free(world), dist__rdzv_close(r, 0), 1;
  }
  if (world) {
    CHECK(dist__gloo_size(world) == l.size && dist__gloo_rank(world) == l.rank);
    check_all_reduce(world, ranks, l.size);
    check_moves(world, ranks, l.size);
    check_backend(world, l.rank, l.size);
  }
  if (l.rank % 2 == 0) { /* a subgroup: its own context, its own keys */
    snprintf(prefix, sizeof prefix, "%sgloo/even/", dist__rdzv_prefix(r));
    CHECK(dist__gloo_connect(dist__rdzv_client(r), prefix, l.rank / 2, ne, timeout, &even) == DIST_SUCCESS);
    if (even) check_all_reduce(even, evens, ne), check_moves(even, evens, ne);
  }
  dist__gloo_free(even);
  dist__gloo_free(world);
  CHECK(dist__rdzv_close(r, 1) == DIST_SUCCESS);
  printf("torchrun_gloo: rank %d of %d %s\n", l.rank, l.size, bad ? "FAILED" : "ok");
  return bad != 0;
}
