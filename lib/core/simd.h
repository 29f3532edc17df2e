/* DIST__CLONES marks a hot host loop to be compiled three times: for
 * x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA, F16C) and the baseline; the
 * dynamic loader picks one for the CPU it runs on (GCC target_clones, an
 * ifunc). The library stays a portable x86-64 build, while a bf16 loop, which
 * the baseline (SSE2) cannot vectorise well, runs at memory speed on AVX-512.
 * configure defines HAVE_TARGET_CLONES where the toolchain supports it;
 * elsewhere the macro is empty. */
#ifndef DISTMGR_SIMD_H
#define DISTMGR_SIMD_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#if defined(HAVE_TARGET_CLONES) && !defined(__CUDACC__)
#define DIST__CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DIST__CLONES
#endif

#endif
