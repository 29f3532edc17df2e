/* Loading cuFFT and NCCL (see cuda_libs.h). */
#include "config.h"

#define DIST__CUDA_LIBS_IMPL
#include "cuda_libs.h"

#include <pthread.h>
#include <string.h>

#include "internal.h"

#ifdef DIST_CUDA_DLOPEN
#include <dlfcn.h>
#include <stdio.h>

#define DIST__STR_(x) #x
#define DIST__STR(x) DIST__STR_(x)

/* Open `soname` and resolve `n` names into `slots`; on failure the message
 * names the library, the symbol if one was missing, and dlerror(). */
static dist_status open_lib(const char *soname, const char *what, const char *const *names, void **slots, size_t n,
                            char *why, size_t why_n) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, why_n, "%s cannot be loaded (%s), so %s is unavailable; install it on this node or add its folder to "
             "LD_LIBRARY_PATH (host memory works without it)", soname, e ? e : "not found", what);
    return DIST_ERR_CUDA;
  }
  for (size_t i = 0; i < n; i++) {
    dlerror();
    slots[i] = dlsym(h, names[i]);
    if (!slots[i]) {
      snprintf(why, why_n, "%s has no symbol %s (an older version than distmgr was built for?), so %s is unavailable",
               soname, names[i], what);
      dlclose(h);
      return DIST_ERR_CUDA;
    }
  }
  return DIST_SUCCESS; /* kept open for the life of the process */
}
#define DIST__FN_NAME(f) #f,
#endif

#ifdef HAVE_CUFFT
dist__cufft_fns dist__cufft;
static pthread_once_t cufft_once = PTHREAD_ONCE_INIT;
static dist_status cufft_status;
static char cufft_why[512];

static void cufft_resolve(void) {
#ifdef DIST_CUDA_DLOPEN
  static const char *const names[] = {DIST__CUFFT_FUNCS(DIST__FN_NAME)};
  void *slots[sizeof names / sizeof names[0]];
  cufft_status = open_lib("libcufft.so." DIST__STR(CUFFT_VER_MAJOR), "the FFT of CUDA memory (cuFFT)", names, slots,
                          sizeof names / sizeof names[0], cufft_why, sizeof cufft_why);
  if (!cufft_status) memcpy(&dist__cufft, slots, sizeof dist__cufft);
#else
#define DIST__FN_SET(f) dist__cufft.f = f;
  DIST__CUFFT_FUNCS(DIST__FN_SET)
#undef DIST__FN_SET
#endif
}

dist_status dist__cufft_load(void) {
  pthread_once(&cufft_once, cufft_resolve);
  return cufft_status ? dist__error(cufft_status, "%s", cufft_why) : DIST_SUCCESS;
}
#endif

#ifdef HAVE_NCCL
dist__nccl_fns dist__nccl;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static dist_status nccl_status;
static char nccl_why[512];

static void nccl_resolve(void) {
#ifdef DIST_CUDA_DLOPEN
  static const char *const names[] = {DIST__NCCL_FUNCS(DIST__FN_NAME)};
  void *slots[sizeof names / sizeof names[0]];
  nccl_status = open_lib("libnccl.so." DIST__STR(NCCL_MAJOR), "the NCCL backend of device collectives", names, slots,
                         sizeof names / sizeof names[0], nccl_why, sizeof nccl_why);
  if (!nccl_status) memcpy(&dist__nccl, slots, sizeof dist__nccl);
#else
#define DIST__FN_SET(f) dist__nccl.f = f;
  DIST__NCCL_FUNCS(DIST__FN_SET)
#undef DIST__FN_SET
#endif
}

dist_status dist__nccl_load(void) {
  pthread_once(&nccl_once, nccl_resolve);
  return nccl_status ? dist__error(nccl_status, "%s", nccl_why) : DIST_SUCCESS;
}
#endif
