/* Shared CUnit driver for the test programs.
 *
 * A test file defines its suites as arrays of CU_TestInfo and calls
 * cunit_run(suites). In MPI tests every rank runs the same tests (they may
 * call collectives); each rank prints its own failures, rank 0 prints the
 * totals, and the exit status is non-zero if any rank failed. */
#ifndef DISTMGR_TESTS_CUNIT_MAIN_H
#define DISTMGR_TESTS_CUNIT_MAIN_H

#include <CUnit/Basic.h>
#include <stdio.h>

/* Assert that `call` returns `code`; on mismatch print distmgr's message. */
#define ASSERT_STATUS(call, code)                                                                  \
  do {                                                                                             \
    dist_status got_ = (call);                                                                     \
    if (got_ != (code))                                                                            \
      fprintf(stderr, "%s:%d: %s returned %d (%s: %s), expected %d\n", __FILE__, __LINE__, #call,  \
              (int)got_, dist_status_string(got_), dist_last_error(), (int)(code));                \
    CU_ASSERT_EQUAL(got_, (code));                                                                 \
  } while (0)

#define ASSERT_OK(call) ASSERT_STATUS(call, DIST_SUCCESS)

/* Assert that the last error message contains `text`. */
#define ASSERT_MSG_HAS(text)                                                                 \
  do {                                                                                       \
    if (!strstr(dist_last_error(), (text)))                                                  \
      fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__, dist_last_error(), (text)); \
    CU_ASSERT_PTR_NOT_NULL(strstr(dist_last_error(), (text)));                               \
  } while (0)

/* Register `suites`, run them, print failures prefixed with `tag` (e.g. the
 * rank), return the number of failed assertions plus failed tests (-1 on a
 * CUnit error). `quiet` hides the per-test listing. */
static inline int cunit_run(CU_SuiteInfo *suites, const char *tag, int quiet) {
  if (CU_initialize_registry() != CUE_SUCCESS) return -1;
  if (CU_register_suites(suites) != CUE_SUCCESS) {
    fprintf(stderr, "%s: CU_register_suites: %s\n", tag, CU_get_error_msg());
    CU_cleanup_registry();
    return -1;
  }
  CU_basic_set_mode(quiet ? CU_BRM_SILENT : CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures() + (int)CU_get_number_of_tests_failed();
  for (CU_pFailureRecord f = CU_get_failure_list(); f; f = f->pNext)
    fprintf(stderr, "%s FAIL %s/%s %s:%u: %s\n", tag, f->pSuite ? f->pSuite->pName : "?",
            f->pTest ? f->pTest->pName : "?", f->strFileName ? f->strFileName : "?", f->uiLineNumber,
            f->strCondition ? f->strCondition : "?");
  printf("%s: %u tests, %u asserts, %d failures\n", tag, CU_get_number_of_tests_run(), CU_get_number_of_asserts(),
         failed);
  CU_cleanup_registry();
  return failed;
}

#endif
