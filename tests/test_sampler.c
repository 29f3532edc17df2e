/* The distributed sampler: exclusive shards that cover every index once per
 * epoch (padding repeats the permutation's first indices, as torch's
 * DistributedSampler), reshuffled by epoch, reproducible from the seed. */
#include <stdlib.h>
#include <string.h>

#include "../examples/sampler.h"
#include "cunit_main.h"

static void count_epoch(int64_t n, int R, int drop_last, int64_t epoch, uint64_t seed, int *count, int64_t *first) {
  memset(count, 0, sizeof(int) * (size_t)n);
  for (int r = 0; r < R; r++) {
    sampler s = {n, R, r, seed, 1, drop_last};
    int64_t per = sampler_per_replica(&s), *idx = malloc(sizeof(int64_t) * (size_t)(per + 1));
    ASSERT_OK(sampler_epoch(&s, epoch, idx));
    for (int64_t k = 0; k < per; k++) {
      CU_ASSERT(idx[k] >= 0 && idx[k] < n);
      if (idx[k] >= 0 && idx[k] < n) count[idx[k]]++;
    }
    if (r == 0 && first) *first = per > 0 ? idx[0] : -1;
    free(idx);
  }
}

static void test_cover_once(void) {
  const int64_t sizes[] = {1, 7, 12, 100, 101};
  int count[101];
  for (int a = 0; a < 5; a++)
    for (int R = 1; R <= 4; R++) {
      int64_t n = sizes[a], per = (n + R - 1) / R, pad = per * R - n;
      count_epoch(n, R, 0, 3, 42, count, NULL);
      int64_t ones = 0, twos = 0, bad = 0;
      for (int64_t i = 0; i < n; i++) ones += count[i] == 1, twos += count[i] == 2, bad += count[i] < 1 || count[i] > 1 + (pad > n ? pad : 1);
      if (pad <= n) { /* every index once, the first `pad` of the permutation twice */
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(twos, pad);
        CU_ASSERT_EQUAL(ones + twos, n);
      }
      if (n >= R) { /* drop_last: each index at most once, n - n % R of them */
        count_epoch(n, R, 1, 3, 42, count, NULL);
        int64_t seen = 0, over = 0;
        for (int64_t i = 0; i < n; i++) seen += count[i] == 1, over += count[i] > 1;
        CU_ASSERT_EQUAL(over, 0);
        CU_ASSERT_EQUAL(seen, n - n % R);
      }
    }
}

static void test_epochs_and_seeds(void) {
  const int64_t n = 100;
  sampler s = {n, 3, 1, 7, 1, 0};
  int64_t a[34], b[34], c[34], d[34];
  ASSERT_OK(sampler_epoch(&s, 0, a));
  ASSERT_OK(sampler_epoch(&s, 0, b));
  ASSERT_OK(sampler_epoch(&s, 1, c));
  s.seed = 8;
  ASSERT_OK(sampler_epoch(&s, 0, d));
  CU_ASSERT(memcmp(a, b, sizeof a) == 0);  /* same seed and epoch: same order */
  CU_ASSERT(memcmp(a, c, sizeof a) != 0);  /* another epoch: another order */
  CU_ASSERT(memcmp(a, d, sizeof a) != 0);  /* another seed: another order */
  s.shuffle = 0;
  ASSERT_OK(sampler_epoch(&s, 5, a));
  for (int k = 0; k < 33; k++) CU_ASSERT_EQUAL(a[k], 3 * k + 1); /* no shuffle: strided */
}

static void test_bad_input(void) {
  int64_t out[4];
  sampler s = {10, 2, 2, 0, 1, 0};
  ASSERT_STATUS(sampler_epoch(&s, 0, out), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("rank = 2");
  s.rank = 0, s.n = 0;
  ASSERT_STATUS(sampler_epoch(&s, 0, out), DIST_ERR_INVALID_ARGUMENT);
  s.n = 10;
  ASSERT_STATUS(sampler_epoch(&s, -1, out), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(sampler_epoch(NULL, 0, out), DIST_ERR_INVALID_ARGUMENT);
}

static CU_TestInfo tests[] = {
    {"every index once per epoch (padding, drop_last)", test_cover_once},
    {"reshuffled by epoch, reproducible by seed", test_epochs_and_seeds},
    {"bad input", test_bad_input},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"sampler", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_run(suites, "test_sampler", 0) != 0; }
