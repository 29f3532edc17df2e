/* Distributed tests of the manager and named groups (run at 1, 2, 3, 4 ranks).
 * Every group's communicator is checked by all-gathering world ranks over it
 * and comparing with members computed here from the layout rules. */
#include <distmgr.h>
#include <distmgr/mpi.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_mpi.h"

static int W, R; /* world size and rank: MPI's own, or the manager's without MPI */

/* Rank 0 says once per run which MPI-only checks did not run (without MPI). */
static void not_run(int *said, const char *what) {
  if (!*said && R == 0) printf("test_groups: not run: manager / %s: no MPI in this run (Gloo)\n", what);
  *said = 1;
}

/* The world ranks of `name`'s communicator in group-rank order must equal
 * `expected` (n entries), and dist_group_members/size/rank must agree.
 * Without MPI the ranks are all-gathered over the group's Gloo context
 * instead, and the communicator checks do not apply. */
static void expect_group(const char *name, int n, const int *expected) {
  static int said;
  MPI_Comm comm = MPI_COMM_NULL;
  int size = -1, rank = -1, count = -1, members[64], on_mpi = cunit_mpi_in_use();
  ASSERT_OK(dist_group_size(name, &size));
  ASSERT_OK(dist_group_rank(name, &rank));
  ASSERT_OK(dist_group_members(name, members, 64, &count));
  CU_ASSERT_EQUAL(size, n);
  CU_ASSERT_EQUAL(count, n);
  int csize = size, gathered[64];
  if (on_mpi) {
    ASSERT_OK(dist_group_comm(name, &comm));
    if (comm == MPI_COMM_NULL) {
      CU_FAIL("member has no communicator");
      return;
    }
    MPI_Comm_size(comm, &csize);
    CU_ASSERT_EQUAL(csize, n);
  } else
    not_run(&said, "the group communicators (dist_group_comm, MPI_Comm_size, dist_group_name_of)");
  if (csize != n || n > 64) return;
  if (on_mpi) MPI_Allgather(&R, 1, MPI_INT, gathered, 1, MPI_INT, comm);
  else {
    int64_t one = 1, all = n;
    int32_t me = R;
    dist_tensor in = dist_tensor_host(&me, DIST_I32, 1, &one), out = dist_tensor_host(gathered, DIST_I32, 1, &all);
    ASSERT_OK(dist_all_gather(name, &in, &out, 0));
  }
  for (int i = 0; i < n; i++) {
    if (gathered[i] != expected[i] || members[i] != expected[i])
      fprintf(stderr, "[%d] group %s member %d: comm %d, list %d, expected %d\n", R, name, i, gathered[i], members[i],
              expected[i]);
    CU_ASSERT_EQUAL(gathered[i], expected[i]);
    CU_ASSERT_EQUAL(members[i], expected[i]);
    if (expected[i] == R) CU_ASSERT_EQUAL(rank, i);
  }
  if (!on_mpi) return;
  const char *back = NULL;
  ASSERT_OK(dist_group_name_of(comm, &back));
  CU_ASSERT_PTR_NOT_NULL(back);
  if (back) CU_ASSERT_STRING_EQUAL(back, name ? name : "world");
}

/* Members of a copy: start, start+stride, ... (n of them). */
static void strided(int start, int stride, int n, int *out) {
  for (int i = 0; i < n; i++) out[i] = start + i * stride;
}

/* Two groups are orthogonal when their copies meet exactly in me. */
static void expect_orthogonal(const char *a, const char *b) {
  int ma[64], mb[64], na, nb, shared = 0;
  ASSERT_OK(dist_group_members(a, ma, 64, &na));
  ASSERT_OK(dist_group_members(b, mb, 64, &nb));
  for (int i = 0; i < na; i++)
    for (int j = 0; j < nb; j++)
      if (ma[i] == mb[j]) {
        shared++;
        CU_ASSERT_EQUAL(ma[i], R);
      }
  CU_ASSERT_EQUAL(shared, 1);
}

static void test_queries(void) {
  int rank, size, lrank, lsize, node, nnodes, dist;
  const char *addr, *method;
  dist_device dev;
  ASSERT_OK(dist_manager_rank(&rank));
  ASSERT_OK(dist_manager_world_size(&size));
  ASSERT_OK(dist_manager_local_rank(&lrank));
  ASSERT_OK(dist_manager_local_size(&lsize));
  ASSERT_OK(dist_manager_node(&node));
  ASSERT_OK(dist_manager_node_count(&nnodes));
  ASSERT_OK(dist_manager_is_distributed(&dist));
  ASSERT_OK(dist_manager_master_address(&addr));
  ASSERT_OK(dist_manager_method_name(&method));
  ASSERT_OK(dist_manager_device(&dev));
  CU_ASSERT_EQUAL(rank, R);
  CU_ASSERT_EQUAL(size, W);
  CU_ASSERT_EQUAL(dist, W > 1);
  CU_ASSERT_TRUE(strlen(addr) > 0);
  CU_ASSERT_TRUE(node >= 0 && node < nnodes);
  /* The method must be the launcher that started us. */
  const char *expected = getenv("TORCHELASTIC_RUN_ID") && getenv("RANK") ? "ENV"
                         : getenv("OMPI_COMM_WORLD_RANK")                ? "OPENMPI"
                         : getenv("PMI_RANK")           ? "MPICH"
                         : getenv("SLURM_PROCID")       ? "SLURM"
                                                        : "SINGLE";
  CU_ASSERT_STRING_EQUAL(method, expected);
  /* No GPU on the test machines unless DIST_DEVICE says otherwise: CPU, index 0. */
  if (dev.kind == DIST_DEVICE_CPU) CU_ASSERT_EQUAL(dev.index, 0);
  char line[256];
  ASSERT_OK(dist_manager_describe(line, sizeof line));
  CU_ASSERT_PTR_NOT_NULL(strstr(line, method));
  /* Local ranks: the launcher's values where it gives them (unless nodes are simulated). */
  if (getenv("DIST_RANKS_PER_NODE")) return;
  const char *ol = getenv("OMPI_COMM_WORLD_LOCAL_RANK"), *os = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (ol) CU_ASSERT_EQUAL(lrank, atoi(ol));
  if (os) CU_ASSERT_EQUAL(lsize, atoi(os));
  const char *tl = getenv("LOCAL_RANK"), *ts = getenv("LOCAL_WORLD_SIZE"); /* torchrun's */
  if (!ol && tl) CU_ASSERT_EQUAL(lrank, atoi(tl));
  if (!os && ts) CU_ASSERT_EQUAL(lsize, atoi(ts));
}

/* world, local, cross, self against the node layout, all-gathered independently. */
static void test_builtins(void) {
  int all[64], expected[64];
  strided(0, 1, W, expected);
  expect_group("world", W, expected);
  expect_group(NULL, W, expected);
  /* Who shares my node? Gather (node, local rank) from the manager's queries. */
  int mine[2], table[128], n = 0, nodes[64], lranks[64];
  ASSERT_OK(dist_manager_node(&mine[0]));
  ASSERT_OK(dist_manager_local_rank(&mine[1]));
  cunit_all_gather_int(mine[0], nodes);
  cunit_all_gather_int(mine[1], lranks);
  for (int r = 0; r < W; r++) table[2 * r] = nodes[r], table[2 * r + 1] = lranks[r];
  for (int r = 0; r < W; r++)
    if (table[2 * r] == mine[0]) all[table[2 * r + 1]] = r, n++;
  expect_group("local", n, all);
  /* The shared-memory truth: MPI's own split must hold the same ranks. */
  static int said;
  if (!cunit_mpi_in_use()) not_run(&said, "built-in groups: \"local\" against MPI's shared-memory split");
  else if (!getenv("DIST_RANKS_PER_NODE")) {
    MPI_Comm shm;
    int ssize;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, R, MPI_INFO_NULL, &shm);
    MPI_Comm_size(shm, &ssize);
    CU_ASSERT_EQUAL(ssize, n);
    MPI_Comm_free(&shm);
  }
  n = 0;
  for (int r = 0; r < W; r++)
    if (table[2 * r + 1] == mine[1]) all[table[2 * r]] = r, n++; /* ranked by node */
  expect_group("cross", n, all);
  expect_orthogonal("local", "cross");
  expect_group("self", 1, &R);
  int nnodes;
  ASSERT_OK(dist_manager_node_count(&nnodes));
  int maxnode = 0;
  for (int r = 0; r < W; r++) maxnode = table[2 * r] > maxnode ? table[2 * r] : maxnode;
  CU_ASSERT_EQUAL(nnodes, maxnode + 1);
}

static void test_subgroup_orthogonal(void) {
  int s = W % 2 == 0 ? 2 : 1, e[64];
  ASSERT_OK(dist_group_create_subgroup("pairs", s, NULL));
  strided(R / s * s, 1, s, e);
  expect_group("pairs", s, e);
  ASSERT_OK(dist_group_create_orthogonal("pairs_orth", "pairs"));
  strided(R % s, s, W / s, e);
  expect_group("pairs_orth", W / s, e);
  expect_orthogonal("pairs", "pairs_orth");
  const char *parent;
  ASSERT_OK(dist_group_parent("pairs_orth", &parent));
  CU_ASSERT_STRING_EQUAL(parent, "world");
  /* A subgroup of a subgroup: singles inside pairs. */
  ASSERT_OK(dist_group_create_subgroup("single", 1, "pairs"));
  e[0] = R;
  expect_group("single", 1, e);
}

static void test_tree(void) {
  int mp = W % 2 == 0 ? 2 : 1, e[64];
  dist_group_node leaves[2] = {{"tp", mp, 0, NULL}, {"dp", 0, 0, NULL}};
  leaves[1].size = W / mp;
  dist_group_node root = {"world", 0, 2, leaves};
  ASSERT_OK(dist_group_create_tree(&root));
  strided(R / mp * mp, 1, mp, e);
  expect_group("tp", mp, e);
  strided(R % mp, mp, W / mp, e);
  expect_group("dp", W / mp, e);
  expect_orthogonal("tp", "dp");

  /* A new root with three children: W = a*b*c, first child fastest. */
  dist_group_node kids[3] = {{"k0", 1, 0, NULL}, {"k1", 1, 0, NULL}, {"k2", 1, 0, NULL}};
  if (W == 4) kids[0].size = kids[1].size = 2;
  else kids[2].size = W;
  dist_group_node r2 = {"root2", 0, 3, kids};
  ASSERT_OK(dist_group_create_tree(&r2));
  int s0 = kids[0].size, s1 = kids[1].size;
  strided(R - R % s0, 1, s0, e);
  expect_group("k0", s0, e);
  strided(R % s0 + (R / (s0 * s1)) * s0 * s1, s0, s1, e);
  expect_group("k1", s1, e);
  strided(R % (s0 * s1), s0 * s1, kids[2].size, e);
  expect_group("k2", kids[2].size, e);
}

static void test_mesh(void) {
  int s = W % 2 == 0 ? 2 : 1, e[64];
  int sizes[2] = {-1, s};
  const char *names[2] = {"mesh_a", "mesh_b"};
  ASSERT_OK(dist_group_create_mesh(NULL, 2, sizes, names));
  strided(R / s * s, 1, s, e); /* last axis consecutive */
  expect_group("mesh_b", s, e);
  strided(R % s, s, W / s, e);
  expect_group("mesh_a", W / s, e);
  expect_orthogonal("mesh_a", "mesh_b");
}

/* Odd world ranks: even ranks are not members and have no communicator. */
static void test_explicit_ranks(void) {
  int ranks[64], n = 0;
  for (int r = 1; r < W; r += 2) ranks[n++] = r;
  if (n == 0) ranks[n++] = 0;
  ASSERT_OK(dist_group_create_ranks("odd", n, ranks));
  int member = -1, size = -1, count = -1, rank, list[64];
  ASSERT_OK(dist_group_is_member("odd", &member));
  ASSERT_OK(dist_group_size("odd", &size));
  ASSERT_OK(dist_group_members("odd", list, 64, &count));
  CU_ASSERT_EQUAL(size, n);
  CU_ASSERT_EQUAL(count, n);
  for (int i = 0; i < n && i < count; i++) CU_ASSERT_EQUAL(list[i], ranks[i]);
  int expect_member = W == 1 || R % 2 == 1;
  CU_ASSERT_EQUAL(member, expect_member);
  if (expect_member) {
    expect_group("odd", n, ranks);
  } else {
    MPI_Comm comm;
    ASSERT_OK(dist_group_comm("odd", &comm));
    CU_ASSERT_EQUAL(comm, MPI_COMM_NULL); /* without MPI too: there is none */
    ASSERT_STATUS(dist_group_rank("odd", &rank), DIST_ERR_NOT_MEMBER);
    ASSERT_MSG_HAS("odd");
  }
}

static void test_errors(void) {
  int v;
  const char *name;
  ASSERT_STATUS(dist_group_size("nope", &v), DIST_ERR_UNKNOWN_GROUP);
  ASSERT_MSG_HAS("nope");
  ASSERT_STATUS(dist_group_size("world", NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist_group_create_subgroup("pairs", 1, NULL), DIST_ERR_DUPLICATE_GROUP);
  ASSERT_MSG_HAS("pairs");
  ASSERT_STATUS(dist_group_create_subgroup("local", 1, NULL), DIST_ERR_DUPLICATE_GROUP);
  ASSERT_STATUS(dist_group_create_subgroup("", 1, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("empty");
  ASSERT_STATUS(dist_group_create_subgroup(NULL, 1, NULL), DIST_ERR_INVALID_ARGUMENT);
  char longname[100];
  memset(longname, 'x', sizeof longname - 1);
  longname[99] = 0;
  ASSERT_STATUS(dist_group_create_subgroup(longname, 1, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("limit is 63");
  ASSERT_STATUS(dist_group_create_subgroup("g", 1, "nope"), DIST_ERR_UNKNOWN_GROUP);
  ASSERT_STATUS(dist_group_create_subgroup("g", W + 1, NULL), DIST_ERR_GROUP_SIZE);
  ASSERT_MSG_HAS("does not divide");
  if (W == 3) ASSERT_STATUS(dist_group_create_subgroup("g", 2, NULL), DIST_ERR_GROUP_SIZE); /* uneven */
  ASSERT_STATUS(dist_group_create_orthogonal("o", "world"), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist_group_create_orthogonal("o", "nope"), DIST_ERR_UNKNOWN_GROUP);
  int sizes[2] = {W + 1, 1};
  const char *names[2] = {"ma", "mb"}, *dup[2] = {"ma", "ma"};
  ASSERT_STATUS(dist_group_create_mesh(NULL, 2, sizes, names), DIST_ERR_GROUP_SIZE);
  ASSERT_MSG_HAS("multiply to");
  sizes[0] = -1;
  ASSERT_STATUS(dist_group_create_mesh(NULL, 2, sizes, dup), DIST_ERR_DUPLICATE_GROUP);
  ASSERT_STATUS(dist_group_create_mesh(NULL, 0, sizes, names), DIST_ERR_INVALID_ARGUMENT);
  dist_group_node leaves[2] = {{"t1", 2, 0, NULL}, {"t2", W + 1, 0, NULL}};
  dist_group_node root = {"world", 0, 2, leaves};
  ASSERT_STATUS(dist_group_create_tree(&root), DIST_ERR_GROUP_SIZE);
  ASSERT_STATUS(dist_group_create_tree(NULL), DIST_ERR_INVALID_ARGUMENT);
  dist_group_node cyc[2] = {{"c1", 0, 2, NULL}, {"c2", 1, 0, NULL}};
  cyc[0].children = cyc; /* a node that is its own child: an error, not an endless walk */
  dist_group_node croot = {"world", 0, 1, cyc};
  ASSERT_STATUS(dist_group_create_tree(&croot), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(dist_group_name_of(MPI_COMM_WORLD, &name), DIST_ERR_UNKNOWN_GROUP);
  int exists = -1;
  ASSERT_OK(dist_group_exists("t1", &exists)); /* failed creations leave nothing behind */
  CU_ASSERT_EQUAL(exists, 0);
  int list[1];
  if (W > 1) ASSERT_STATUS(dist_group_members("world", list, 1, &v), DIST_ERR_BUFFER_TOO_SMALL);
  if (W > 1) CU_ASSERT_EQUAL(v, W);
}

/* Ranks that call creations in different orders get an error, not a hang. */
static void test_call_order_mismatch(void) {
  if (W == 1) return;
  dist_status s = R == 0 ? dist_group_create_subgroup("first", 1, NULL) : dist_group_create_subgroup("second", 1, NULL);
  CU_ASSERT_EQUAL(s, DIST_ERR_MISMATCH);
  ASSERT_MSG_HAS("same order");
  s = R == 0 ? dist_group_create_subgroup("sz", 1, NULL) : dist_group_create_subgroup("sz", W, NULL);
  CU_ASSERT_EQUAL(s, DIST_ERR_MISMATCH);
}

/* Names handed out stay valid while the table grows. */
static void test_names_stay_valid(void) {
  const char *first = NULL;
  ASSERT_OK(dist_group_name_at(1, &first));
  for (int i = 0; i < 20; i++) {
    char name[16];
    snprintf(name, sizeof name, "extra%d", i);
    ASSERT_OK(dist_group_create_subgroup(name, 1, NULL));
  }
  CU_ASSERT_STRING_EQUAL(first, "local");
}

static void test_idempotent_initialize(void) {
  int n_before, n_after;
  ASSERT_OK(dist_group_count(&n_before));
  ASSERT_OK(dist_manager_initialize());
  ASSERT_OK(dist_group_count(&n_after));
  CU_ASSERT_EQUAL(n_before, n_after);
}

static CU_TestInfo manager_tests[] = {
    {"queries", test_queries},
    {"built-in groups", test_builtins},
    {"subgroup and orthogonal", test_subgroup_orthogonal},
    {"tree", test_tree},
    {"mesh", test_mesh},
    {"explicit ranks", test_explicit_ranks},
    {"errors", test_errors},
    {"call-order mismatch", test_call_order_mismatch},
    {"names stay valid", test_names_stay_valid},
    {"idempotent initialize", test_idempotent_initialize},
    CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"manager", NULL, NULL, NULL, NULL, manager_tests}, CU_SUITE_INFO_NULL};

/* Before initialize: every query fails loudly. */
static int check_uninitialized(int after_finalize) {
  int v, bad = 0;
  dist_device d;
  const char *s;
  bad += dist_manager_is_initialized() != 0;
  bad += dist_manager_rank(&v) != DIST_ERR_NOT_INITIALIZED;
  bad += strstr(dist_last_error(), "dist_manager_rank") == NULL;
  /* The message says which: before the first initialize, or after a finalize. */
  bad += strstr(dist_last_error(), after_finalize ? "after dist_manager_finalize()" : "before dist_manager_initialize()") == NULL;
  bad += dist_manager_device(&d) != DIST_ERR_NOT_INITIALIZED;
  bad += dist_manager_master_address(&s) != DIST_ERR_NOT_INITIALIZED;
  bad += dist_group_size("world", &v) != DIST_ERR_NOT_INITIALIZED;
  bad += dist_group_create_subgroup("g", 1, NULL) != DIST_ERR_NOT_INITIALIZED;
  bad += dist_manager_finalize() != DIST_ERR_NOT_INITIALIZED;
  return bad;
}

/* Two rounds: real nodes, then finalize, then again with simulated nodes of
 * 2 ranks (initialize must work again after finalize). Queries fail before
 * the first initialize and after each finalize. */
static int before_round(int round) {
  int bad = 0;
  if (round == 0 && (bad = check_uninitialized(0)))
    fprintf(stderr, "queries before initialize did not fail as they should\n");
  if (round == 1) setenv("DIST_RANKS_PER_NODE", "2", 1);
  return bad;
}

static int after_round(int round) {
  (void)round;
  return check_uninitialized(1);
}

int main(void) {
  return cunit_mpi_run(&(cunit_mpi_test){"test_groups", suites, .rank = &R, .size = &W, .rounds = 2,
                                         .before = before_round, .after = after_round});
}
