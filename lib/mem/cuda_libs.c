/* Loading cuFFT and NCCL (see cuda_libs.h). */
#include "config.h"

#define DIST__CUDA_LIBS_IMPL
#include "mem/cuda_libs.h"

#include <pthread.h>
#include <stdio.h>

#include "core/internal.h"

#ifdef DIST_CUDA_DLOPEN
#include <dlfcn.h>
#endif

/* A library loaded once: the outcome, and the reason when it failed. */
typedef struct loader {
  pthread_once_t once;
  dist_status status;
  char why[512];
} loader;

static dist_status outcome(const loader *l) { return l->status ? dist__error(l->status, "%s", l->why) : DIST_SUCCESS; }

#ifdef DIST_CUDA_DLOPEN
#define DIST__STR_(x) #x
#define DIST__STR(x) DIST__STR_(x)
#define DIST__FN_NAME(f) #f,

/* Open `soname` and resolve `n` names into `table` (a struct of n function
 * pointers, filled as an array of pointers, as dlsym's contract allows); on
 * failure l says why (the library, the symbol if one was missing, dlerror())
 * and takes `status`: DIST_ERR_NCCL for NCCL, DIST_ERR_CUDA for the rest. */
static void open_lib(loader *l, dist_status status, const char *soname, const char *what, const char *const *names,
                     void **table, size_t n) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(l->why, sizeof l->why, "%s cannot be loaded (%s), so %s is unavailable; install it on this node or add "
             "its folder to LD_LIBRARY_PATH (host memory works without it)", soname, e ? e : "not found", what);
    l->status = status;
    return;
  }
  for (size_t i = 0; i < n; i++) {
    dlerror();
    if (!(table[i] = dlsym(h, names[i]))) {
      snprintf(l->why, sizeof l->why,
               "%s has no symbol %s (an older version than distmgr was built for?), so %s is unavailable", soname,
               names[i], what);
      l->status = status;
      dlclose(h);
      return;
    }
  }
  /* kept open for the life of the process */
}
#endif

#ifdef HAVE_CUFFT
dist__cufft_fns dist__cufft;
static loader cufft = {PTHREAD_ONCE_INIT, DIST_SUCCESS, ""};

static void cufft_resolve(void) {
#ifdef DIST_CUDA_DLOPEN
  static const char *const names[] = {DIST__CUFFT_FUNCS(DIST__FN_NAME)};
  open_lib(&cufft, DIST_ERR_CUDA, "libcufft.so." DIST__STR(CUFFT_VER_MAJOR), "the FFT of CUDA memory (cuFFT)", names,
           (void **)&dist__cufft, sizeof names / sizeof names[0]);
#else
#define DIST__FN_SET(f) dist__cufft.f = f;
  DIST__CUFFT_FUNCS(DIST__FN_SET)
#undef DIST__FN_SET
#endif
}

dist_status dist__cufft_load(void) {
  pthread_once(&cufft.once, cufft_resolve);
  return outcome(&cufft);
}
#endif

#ifdef HAVE_NCCL
dist__nccl_fns dist__nccl;
static loader nccl = {PTHREAD_ONCE_INIT, DIST_SUCCESS, ""};

static void nccl_resolve(void) {
#ifdef DIST_CUDA_DLOPEN
  static const char *const names[] = {DIST__NCCL_FUNCS(DIST__FN_NAME)};
  open_lib(&nccl, DIST_ERR_NCCL, "libnccl.so." DIST__STR(NCCL_MAJOR), "the NCCL backend of device collectives", names,
           (void **)&dist__nccl, sizeof names / sizeof names[0]);
#else
#define DIST__FN_SET(f) dist__nccl.f = f;
  DIST__NCCL_FUNCS(DIST__FN_SET)
#undef DIST__FN_SET
#endif
}

dist_status dist__nccl_load(void) {
  pthread_once(&nccl.once, nccl_resolve);
  return outcome(&nccl);
}
#endif
