/* An LD_PRELOAD shim for the allocation-failure sweep (malloc_sweep.sh):
 * on one rank, the k-th allocation that distmgr's own code makes returns
 * NULL. Allocations made by other libraries (MPI, libc on distmgr's behalf)
 * pass through: only calls whose return address lies in a libdistmgr*
 * library count, so the sweep tests distmgr's error paths, not MPI's.
 *
 *   FAILMALLOC_RANK  the rank that fails (from OMPI_COMM_WORLD_RANK,
 *                         PMI_RANK or RANK); unset: every rank counts
 *   FAILMALLOC_AT    k >= 1: fail the k-th counted allocation, once;
 *                         0 or unset: fail none, count only
 * The failing allocation's call stack goes to stderr. At exit the failing rank prints (when it counted any) "failmalloc: N counted, failed #k" to
 * stderr, which the sweep reads to know how far to go. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);

static long counted, fail_at = -1, failed_at;
static int armed = -1; /* -1: not read yet; 0: this rank does not count */
static __thread int inside; /* dladdr or getenv allocating: pass through */

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}

static void read_settings(void) {
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  if (!r) r = getenv("PMI_RANK");
  if (!r) r = getenv("RANK");
  long want = env_long("FAILMALLOC_RANK", -1);
  armed = want < 0 || (r && strtol(r, NULL, 10) == want);
  fail_at = env_long("FAILMALLOC_AT", 0);
}

static int from_distmgr(const void *ret) {
  Dl_info info;
  return dladdr(ret, &info) && info.dli_fname && strstr(info.dli_fname, "libdistmgr");
}

/* 1: this allocation fails. */
static int should_fail(const void *ret) {
  if (inside) return 0;
  inside = 1;
  if (armed < 0) read_settings();
  int fail = 0;
  if (armed && from_distmgr(ret)) {
    counted++;
    if (fail_at > 0 && counted == fail_at) fail = 1, failed_at = counted;
  }
  if (fail) { /* where: malloc_sweep.sh turns the frames into functions */
    void *frames[12];
    int n = backtrace(frames, 12);
    fprintf(stderr, "failmalloc: failing allocation #%ld at:\n", counted);
    backtrace_symbols_fd(frames + 1, n - 1, 2);
  }
  inside = 0;
  return fail;
}

/* For a program that sweeps only its later part (load_sweep.c, via dlsym). */
long failmalloc_counted(void) { return counted; }

__attribute__((destructor)) static void report(void) {
  if (armed > 0 && counted > 0) fprintf(stderr, "failmalloc: %ld counted, failed #%ld\n", counted, failed_at);
}

#define RET __builtin_return_address(0)

void *malloc(size_t n) {
  if (should_fail(RET)) return errno = ENOMEM, NULL;
  return __libc_malloc(n);
}

void *calloc(size_t m, size_t n) {
  if (should_fail(RET)) return errno = ENOMEM, NULL;
  return __libc_calloc(m, n);
}

void *realloc(void *p, size_t n) {
  if (should_fail(RET)) return errno = ENOMEM, NULL;
  return __libc_realloc(p, n);
}

void *aligned_alloc(size_t a, size_t n) {
  if (should_fail(RET)) return errno = ENOMEM, NULL;
  return __libc_memalign(a, n);
}

int posix_memalign(void **out, size_t a, size_t n) {
  if (should_fail(RET)) return ENOMEM;
  void *p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
