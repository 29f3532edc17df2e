#define DIST_STAMPS 1
#include <x86intrin.h>
#include <stdio.h>
#include <time.h>
extern unsigned long long dist__st[32], dist__stn[32];
extern _Thread_local unsigned long long dist__stb;
#ifdef DIST_STAMPS
#define STB() (dist__stb = __rdtsc())
#define STAMP(k) do { unsigned long long d_ = __rdtsc() - dist__stb; if (d_ < 60000) { dist__st[k] += d_; dist__stn[k]++; } } while (0)
#else
#define STB() ((void)0)
#define STAMP(k) ((void)0)
#endif
static inline void stamp_print(int rank) {
#ifndef DIST_STAMPS
  (void)rank; return;
#endif
  struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a); unsigned long long r0 = __rdtsc();
  do clock_gettime(CLOCK_MONOTONIC, &b); while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < 2e7);
  double ghz = (__rdtsc() - r0) / ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
  for (int k = 0; k < 32; k++) if (dist__stn[k]) fprintf(stderr, "rank %d stamp %2d: %7.1f ns (n=%llu)\n", rank, k, dist__st[k] / (double)dist__stn[k] / ghz, dist__stn[k]);
}
