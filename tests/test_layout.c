/* Group layout math against the examples of PhysicsNeMo's layout (world 8). */
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "core/internal.h"
#include "group/layout.h"

/* Expect copy `copy` of layout `l` (the copy containing world rank
 * expected[0]) to be exactly `expected` in key order. */
static void expect_copy(const dist__layout *l, int n, const int *expected) {
  int members[64];
  CU_ASSERT_EQUAL_FATAL(l->size, n);
  CU_ASSERT_TRUE_FATAL(dist__layout_members(l, expected[0], members));
  for (int i = 0; i < n; i++) {
    if (members[i] != expected[i]) fprintf(stderr, "member %d: got %d, expected %d\n", i, members[i], expected[i]);
    CU_ASSERT_EQUAL(members[i], expected[i]);
  }
}

static void test_subgroup_of_world(void) {
  dist__layout w, g;
  ASSERT_OK(dist__layout_world(8, &w));
  ASSERT_OK(dist__layout_subgroup(&w, 2, &g));
  CU_ASSERT_EQUAL(g.ncopies, 4);
  int e[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  for (int c = 0; c < 4; c++) expect_copy(&g, 2, e[c]);
  dist__layout_free(&g);
  dist__layout_free(&w);
}

static void test_orthogonal_of_subgroup(void) {
  dist__layout w, g, o;
  ASSERT_OK(dist__layout_world(8, &w));
  ASSERT_OK(dist__layout_subgroup(&w, 2, &g));
  ASSERT_OK(dist__layout_orthogonal(&w, &g, &o));
  CU_ASSERT_EQUAL(o.ncopies, 2);
  int e[2][4] = {{0, 2, 4, 6}, {1, 3, 5, 7}};
  expect_copy(&o, 4, e[0]);
  expect_copy(&o, 4, e[1]);
  /* Orthogonality: a subgroup copy and an orthogonal copy meet in exactly one rank. */
  for (int r = 0; r < 8; r++) {
    int shared = 0;
    for (int q = 0; q < 8; q++) shared += g.color[q] == g.color[r] && o.color[q] == o.color[r];
    CU_ASSERT_EQUAL(shared, 1);
  }
  dist__layout_free(&o);
  dist__layout_free(&g);
  dist__layout_free(&w);
}

/* Tree world(8) -> {model_parallel 2, data_parallel 4}: children as a mesh
 * (4, 2) with the first child on the fastest axis. */
static void test_tree_2x4(void) {
  dist__layout w, mp, dp;
  int dims[2] = {4, 2};
  ASSERT_OK(dist__layout_world(8, &w));
  ASSERT_OK(dist__layout_axis(&w, 2, dims, 1, &mp));
  ASSERT_OK(dist__layout_axis(&w, 2, dims, 0, &dp));
  int emp[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  for (int c = 0; c < 4; c++) expect_copy(&mp, 2, emp[c]);
  int edp[2][4] = {{0, 2, 4, 6}, {1, 3, 5, 7}};
  expect_copy(&dp, 4, edp[0]);
  expect_copy(&dp, 4, edp[1]);
  dist__layout_free(&mp);
  dist__layout_free(&dp);
  dist__layout_free(&w);
}

/* Nested: world 16 -> A (8) -> {a1 2, a2 4}. a2 stays inside each copy of A. */
static void test_orthogonal_nested_stays_in_parent(void) {
  dist__layout w, a, a1, a2;
  ASSERT_OK(dist__layout_world(16, &w));
  ASSERT_OK(dist__layout_subgroup(&w, 8, &a));
  ASSERT_OK(dist__layout_subgroup(&a, 2, &a1));
  ASSERT_OK(dist__layout_orthogonal(&a, &a1, &a2));
  int e0[4] = {0, 2, 4, 6}, e1[4] = {9, 11, 13, 15};
  expect_copy(&a2, 4, e0);
  expect_copy(&a2, 4, e1);
  CU_ASSERT_EQUAL(a2.ncopies, 4);
  dist__layout_free(&a2);
  dist__layout_free(&a1);
  dist__layout_free(&a);
  dist__layout_free(&w);
}

/* Mesh (2, -1) over 8 ranks, row-major as torch's DeviceMesh. */
static void test_mesh_with_wildcard(void) {
  int sizes[2] = {2, -1}, dims[2];
  ASSERT_OK(dist__mesh_resolve(2, sizes, 8, dims));
  CU_ASSERT_EQUAL(dims[0], 2);
  CU_ASSERT_EQUAL(dims[1], 4);
  dist__layout w, ax0, ax1;
  ASSERT_OK(dist__layout_world(8, &w));
  ASSERT_OK(dist__layout_axis(&w, 2, dims, 0, &ax0));
  ASSERT_OK(dist__layout_axis(&w, 2, dims, 1, &ax1));
  int e1[2][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  expect_copy(&ax1, 4, e1[0]);
  expect_copy(&ax1, 4, e1[1]);
  int e0[4][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  for (int c = 0; c < 4; c++) expect_copy(&ax0, 2, e0[c]);
  /* Every pair of axes meets only in the calling rank. */
  for (int r = 0; r < 8; r++) {
    int shared = 0;
    for (int q = 0; q < 8; q++) shared += ax0.color[q] == ax0.color[r] && ax1.color[q] == ax1.color[r];
    CU_ASSERT_EQUAL(shared, 1);
  }
  dist__layout_free(&ax0);
  dist__layout_free(&ax1);
  dist__layout_free(&w);
}

/* A 3-d mesh 2x2x3 over 12 ranks: axis groups are the ranks differing only in
 * one coordinate, checked against coordinates computed here independently. */
static void test_mesh_3d_against_coordinates(void) {
  int dims[3] = {2, 2, 3};
  dist__layout w, ax[3];
  ASSERT_OK(dist__layout_world(12, &w));
  for (int k = 0; k < 3; k++) ASSERT_OK(dist__layout_axis(&w, 3, dims, k, &ax[k]));
  for (int r = 0; r < 12; r++)
    for (int q = 0; q < 12; q++) {
      int cr[3] = {r / 6, (r / 3) % 2, r % 3}, cq[3] = {q / 6, (q / 3) % 2, q % 3};
      for (int k = 0; k < 3; k++) {
        int same_other = 1;
        for (int j = 0; j < 3; j++)
          if (j != k && cr[j] != cq[j]) same_other = 0;
        CU_ASSERT_EQUAL(ax[k].color[r] == ax[k].color[q], same_other);
        if (r == q) CU_ASSERT_EQUAL(ax[k].key[r], cr[k]);
      }
    }
  for (int k = 0; k < 3; k++) dist__layout_free(&ax[k]);
  dist__layout_free(&w);
}

static void test_explicit_ranks(void) {
  dist__layout l;
  int ranks[3] = {5, 1, 3};
  ASSERT_OK(dist__layout_ranks(8, 3, ranks, &l));
  expect_copy(&l, 3, ranks);
  CU_ASSERT_EQUAL(l.color[0], -1);
  CU_ASSERT_FALSE(dist__layout_members(&l, 0, (int[8]){0}));
  dist__layout_free(&l);
  int dup[2] = {1, 1}, out_of_range[2] = {1, 8};
  ASSERT_STATUS(dist__layout_ranks(8, 2, dup, &l), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("listed twice");
  ASSERT_STATUS(dist__layout_ranks(8, 2, out_of_range, &l), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("rank 8");
  ASSERT_STATUS(dist__layout_ranks(8, 0, ranks, &l), DIST_ERR_GROUP_SIZE);
}

static void test_errors(void) {
  dist__layout w, g;
  ASSERT_OK(dist__layout_world(8, &w));
  ASSERT_STATUS(dist__layout_subgroup(&w, 3, &g), DIST_ERR_GROUP_SIZE);
  ASSERT_MSG_HAS("does not divide");
  ASSERT_STATUS(dist__layout_subgroup(&w, 0, &g), DIST_ERR_GROUP_SIZE);
  int bad[2] = {3, 3}, dims[3];
  ASSERT_STATUS(dist__layout_axis(&w, 2, bad, 0, &g), DIST_ERR_GROUP_SIZE);
  ASSERT_MSG_HAS("multiply to 9");
  int two_wild[2] = {-1, -1}, zero[2] = {0, 8}, nodiv[2] = {3, -1}, prod[3] = {2, 2, 3};
  ASSERT_STATUS(dist__mesh_resolve(2, two_wild, 8, dims), DIST_ERR_GROUP_SIZE);
  ASSERT_MSG_HAS("both -1");
  ASSERT_STATUS(dist__mesh_resolve(2, zero, 8, dims), DIST_ERR_GROUP_SIZE);
  ASSERT_STATUS(dist__mesh_resolve(2, nodiv, 8, dims), DIST_ERR_GROUP_SIZE);
  ASSERT_MSG_HAS("does not divide 8");
  ASSERT_STATUS(dist__mesh_resolve(3, prod, 8, dims), DIST_ERR_GROUP_SIZE);
  ASSERT_MSG_HAS("multiply to 12");
  dist__layout_free(&w);
  /* A failed call gets its own variable: dist__layout_world clears its
   * output first, so reusing `w` before the free above leaked w's arrays. */
  dist__layout none;
  ASSERT_STATUS(dist__layout_world(0, &none), DIST_ERR_INVALID_ARGUMENT);
  dist__layout_free(&none); /* cleared, so freeing is safe */
}

/* Copies of different sizes ("local" on uneven nodes) cannot be subdivided. */
static void test_uneven_copies(void) {
  dist__layout l, g;
  ASSERT_OK(dist__layout_alloc(4, &l));
  int color[4] = {0, 0, 0, 1}, key[4] = {0, 1, 2, 0};
  memcpy(l.color, color, sizeof color);
  memcpy(l.key, key, sizeof key);
  memcpy(l.sub, color, sizeof color);
  ASSERT_OK(dist__layout_finish(&l));
  CU_ASSERT_EQUAL(l.ncopies, 2);
  CU_ASSERT_EQUAL(l.size, -1);
  ASSERT_STATUS(dist__layout_subgroup(&l, 1, &g), DIST_ERR_GROUP_SIZE);
  ASSERT_MSG_HAS("differ in size");
  dist__layout_free(&l);
}

/* local/cross from (node, local rank) per world rank, for node layouts a real
 * job can have: a short first node, and ranks dealt round-robin to nodes. */
static void test_node_layouts(void) {
  dist__layout local, cross;
  int node1[3] = {0, 1, 1}, lrank1[3] = {0, 0, 1}; /* hostfile "a slots=1, b slots=2" */
  ASSERT_OK(dist__layout_nodes(3, node1, lrank1, &local, &cross));
  int a[1] = {0}, b[2] = {1, 2}, c0[2] = {0, 1}, c1[1] = {2};
  CU_ASSERT_EQUAL(local.size, -1); /* uneven nodes */
  CU_ASSERT_EQUAL(cross.size, -1);
  int m[4] = {-1, -1, -1, -1};
  CU_ASSERT_EQUAL(dist__layout_members(&local, 0, m), 1); /* each copy's own size */
  CU_ASSERT_EQUAL(m[0], a[0]);
  CU_ASSERT_EQUAL(dist__layout_members(&local, 2, m), 2);
  CU_ASSERT_EQUAL(m[0], b[0]);
  CU_ASSERT_EQUAL(m[1], b[1]);
  CU_ASSERT_EQUAL(dist__layout_members(&cross, 1, m), 2);
  CU_ASSERT_EQUAL(m[0], c0[0]);
  CU_ASSERT_EQUAL(m[1], c0[1]);
  CU_ASSERT_EQUAL(cross.key[2], 0); /* only node 1 has local rank 1: key 0, not the node index */
  CU_ASSERT_EQUAL(dist__layout_members(&cross, 2, m), 1);
  CU_ASSERT_EQUAL(m[0], c1[0]);
  dist__layout_free(&local);
  dist__layout_free(&cross);

  int node2[4] = {0, 1, 0, 1}, lrank2[4] = {0, 0, 1, 1}; /* mpirun --map-by node */
  ASSERT_OK(dist__layout_nodes(4, node2, lrank2, &local, &cross));
  int l0[2] = {0, 2}, x1[2] = {2, 3};
  expect_copy(&local, 2, l0);
  expect_copy(&cross, 2, x1);
  dist__layout_free(&local);
  dist__layout_free(&cross);
}

static CU_TestInfo layout_tests[] = {
    {"node layouts (uneven, round-robin)", test_node_layouts},
    {"subgroup of world 8 by 2", test_subgroup_of_world},
    {"orthogonal of subgroup", test_orthogonal_of_subgroup},
    {"tree 2x4", test_tree_2x4},
    {"nested orthogonal stays in parent", test_orthogonal_nested_stays_in_parent},
    {"mesh with -1", test_mesh_with_wildcard},
    {"3-d mesh against coordinates", test_mesh_3d_against_coordinates},
    {"explicit ranks", test_explicit_ranks},
    {"errors", test_errors},
    {"uneven copies", test_uneven_copies},
    CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"layout", NULL, NULL, NULL, NULL, layout_tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_run(suites, "test_layout", 0) != 0; }
