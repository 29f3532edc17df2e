/* Unit tests of dist_compute_split_shapes (local: no initialize, no MPI).
 * Rule (mapping.h, as PhysicsNeMo): chunks of ceil(size/n) with the remainder
 * last; if that leaves a chunk empty, chunks of floor(size/n) with the
 * remainder added to the last. Every expected row below was worked out by
 * hand from that rule. */
#include <distmgr.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"

typedef struct split_case {
  int64_t size;
  int n;
  int64_t expect[8];
} split_case;

static const split_case CASES[] = {
    {10, 4, {3, 3, 3, 1}}, /* ceil 3: the PhysicsNeMo examples */
    {9, 4, {2, 2, 2, 3}},  /* ceil 3 would leave 3,3,3,0: floor 2, remainder on the last */
    {7, 3, {3, 3, 1}},
    {8, 4, {2, 2, 2, 2}},
    {5, 5, {1, 1, 1, 1, 1}},
    {3, 4, {0, 0, 0, 3}}, /* ceil 1 gives 1,1,1,0: floor 0, all on the last */
    {1, 1, {1}},
    {0, 2, {0, 0}},
    {0, 1, {0}},
    {7, 1, {7}},
    {10, 3, {4, 4, 2}},
    {11, 4, {3, 3, 3, 2}},
    {7, 4, {2, 2, 2, 1}},
    {5, 4, {1, 1, 1, 2}},  /* ceil 2 gives 2,2,1,0 */
    {6, 4, {1, 1, 1, 3}},  /* ceil 2 gives 2,2,2,0 */
    {12, 5, {2, 2, 2, 2, 4}},
    {13, 5, {3, 3, 3, 3, 1}},
    {10, 7, {1, 1, 1, 1, 1, 1, 4}}, /* ceil 2 would run out after five chunks */
    {1, 3, {0, 0, 1}},
    {2, 3, {0, 0, 2}},
    {100, 8, {13, 13, 13, 13, 13, 13, 13, 9}},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static void test_table(void) {
  for (size_t c = 0; c < NCASES; c++) {
    const split_case *k = &CASES[c];
    int64_t got[10];
    for (int i = 0; i < 10; i++) got[i] = -7; /* sentinel: only n entries may be written */
    ASSERT_OK(dist_compute_split_shapes(k->size, k->n, got));
    int64_t sum = 0;
    int bad = 0;
    for (int i = 0; i < k->n; i++) {
      sum += got[i];
      bad |= got[i] != k->expect[i];
    }
    CU_ASSERT_EQUAL(sum, k->size);
    CU_ASSERT_FALSE(bad);
    CU_ASSERT_EQUAL(got[k->n], -7);
    if (bad) {
      fprintf(stderr, "  split %lld/%d gave", (long long)k->size, k->n);
      for (int i = 0; i < k->n; i++) fprintf(stderr, " %lld", (long long)got[i]);
      fprintf(stderr, "\n");
    }
  }
}

/* Beyond the table: for every size/n the parts are non-negative, sum to size,
 * are equal except the last, and the ceil split is used whenever it leaves no
 * chunk empty. */
static void test_properties(void) {
  int64_t got[17];
  for (int n = 1; n <= 16; n++)
    for (int64_t size = 0; size <= 40; size++) {
      ASSERT_OK(dist_compute_split_shapes(size, n, got));
      int64_t sum = 0, ceil = (size + n - 1) / n;
      int ok = 1;
      for (int i = 0; i < n; i++) {
        sum += got[i];
        ok &= got[i] >= 0;
        if (i < n - 1) ok &= got[i] == got[0];
      }
      int64_t expect0 = size - ceil * (n - 1) > 0 || n == 1 ? ceil : size / n;
      ok &= sum == size && got[0] == expect0;
      if (!ok) fprintf(stderr, "  split %lld/%d is wrong (first %lld)\n", (long long)size, n, (long long)got[0]);
      CU_ASSERT_TRUE(ok);
    }
}

static void test_bad_input(void) {
  int64_t out[4];
  ASSERT_STATUS(dist_compute_split_shapes(10, 0, out), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_NOT_EQUAL(strlen(dist_last_error()), 0);
  ASSERT_STATUS(dist_compute_split_shapes(10, -2, out), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_NOT_EQUAL(strlen(dist_last_error()), 0);
  ASSERT_STATUS(dist_compute_split_shapes(-1, 4, out), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT_NOT_EQUAL(strlen(dist_last_error()), 0);
  ASSERT_STATUS(dist_compute_split_shapes(10, 4, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("NULL");
  /* A valid call still works after the errors. */
  ASSERT_OK(dist_compute_split_shapes(10, 4, out));
  CU_ASSERT_EQUAL(out[3], 1);
}

/* Sizes near INT64_MAX (issue 18): ceil(size/n) must not be computed as
 * (size + n - 1) / n, which overflows there and gave negative chunks. */
static void test_near_int64_max(void) {
  const int64_t sizes[] = {INT64_MAX, INT64_MAX - 1, INT64_MAX - 6, INT64_MAX / 2 + 1, (int64_t)1 << 62};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    for (int n = 1; n <= 9; n++) {
      int64_t size = sizes[k], got[10];
      ASSERT_OK(dist_compute_split_shapes(size, n, got));
      int64_t ceil = size / n + (size % n != 0), expect0 = n == 1 || size - ceil * (n - 1) > 0 ? ceil : size / n;
      uint64_t sum = 0; /* unsigned: a wrong split must not overflow the check itself */
      int ok = got[0] == expect0;
      for (int i = 0; i < n; i++) {
        sum += (uint64_t)got[i];
        ok &= got[i] >= 0 && (i == n - 1 || got[i] == got[0]);
      }
      ok &= sum == (uint64_t)size;
      if (!ok) {
        fprintf(stderr, "  split %lld/%d gave", (long long)size, n);
        for (int i = 0; i < n; i++) fprintf(stderr, " %lld", (long long)got[i]);
        fprintf(stderr, " (first should be %lld)\n", (long long)expect0);
      }
      CU_ASSERT_TRUE(ok);
    }
  int64_t two[2];
  ASSERT_OK(dist_compute_split_shapes(INT64_MAX, 2, two));
  CU_ASSERT_EQUAL(two[0], (int64_t)1 << 62);
  CU_ASSERT_EQUAL(two[1], ((int64_t)1 << 62) - 1);
}

static CU_TestInfo split_tests[] = {
    {"table of hand-computed splits", test_table},
    {"properties for all small sizes", test_properties},
    {"bad input", test_bad_input},
    {"sizes near INT64_MAX", test_near_int64_max},
    CU_TEST_INFO_NULL};

static CU_SuiteInfo suites[] = {{"split shapes", NULL, NULL, NULL, NULL, split_tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_run(suites, "test_split", 0) != 0; }
