/* The memory the collective suite (tests/test_coll.c) runs in, and its buffers.
 *
 * A memory provider allocates, fills and reads back memory of one space:
 * host memory with malloc and memcpy; CUDA memory (programs built with
 * COLL_DEVICE, in builds with CUDA) with cudaMalloc and copies enqueued on
 * dist_cuda_stream() and waited for, so that a copy back sees the results of
 * the work distmgr enqueued there before.
 *
 * A buf keeps a host image of its tensor: a case writes the input there,
 * buf_place() puts it in the memory under test (MEM), and after the call
 * buf_fetch() copies the result back into the image, where the checks read
 * it. On device memory each buf also has a host twin holding the same input:
 * the case runs the same call on the twins (over the MPI backend) and
 * compares the two results. */
#ifndef DISTMGR_TESTS_COLL_MEMORY_H
#define DISTMGR_TESTS_COLL_MEMORY_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <distmgr.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(COLL_DEVICE) && defined(HAVE_CUDA)
#include "cuda_mem.h" /* CUDA_CHECK, cuda_upload, cuda_download (on dist_cuda_stream, waited for) */
#endif

typedef struct coll_memory {
  const char *name;  /* "host", "device" */
  dist_memory space;
  int twins;         /* every call also runs on host twins of its tensors; the results are compared */
  void *(*alloc)(size_t bytes); /* NULL after a failure (asserted) */
  void (*release)(void *p);     /* accepts NULL */
  int (*put)(void *dst, const void *host, size_t bytes); /* 1 on success (a failure is asserted) */
  int (*get)(void *host, const void *src, size_t bytes); /* the same; sees distmgr's enqueued work */
  dist_tensor (*tensor)(void *data, dist_dtype dtype, int ndim, const int64_t *shape);
} coll_memory;

static void *host_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
static int host_copy(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return 1;
}
static dist_tensor host_tensor(void *data, dist_dtype dtype, int ndim, const int64_t *shape) {
  return dist_tensor_host(data, dtype, ndim, shape);
}
static const coll_memory coll_host = {"host", DIST_MEM_HOST, 0, host_alloc, free, host_copy, host_copy, host_tensor};

#if defined(COLL_DEVICE) && defined(HAVE_CUDA)
static int coll_device_ordinal; /* the manager's device, made current by the test's setup */

static void *device_alloc(size_t bytes) {
  void *p = NULL;
  return CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1)) ? p : NULL;
}
static void device_release(void *p) {
  if (p) CUDA_CHECK(cudaFree(p));
}
static int device_put(void *dst, const void *host, size_t bytes) { return cuda_upload(dst, host, bytes); }
static int device_get(void *host, const void *src, size_t bytes) { return cuda_download(host, src, bytes); }
static dist_tensor device_tensor(void *data, dist_dtype dtype, int ndim, const int64_t *shape) {
  return dist_tensor_cuda(data, dtype, coll_device_ordinal, ndim, shape);
}
static const coll_memory coll_device = {"device",   DIST_MEM_CUDA, 1,         device_alloc, device_release,
                                        device_put, device_get,    device_tensor};
#endif

static const coll_memory *MEM = &coll_host; /* the memory under test */

typedef struct {
  dist_tensor t;    /* in MEM: what the call gets (data NULL when empty: the API allows it) */
  dist_tensor twin; /* MEM->twins: the same input in host memory */
  void *mem;        /* host image: n elements and a guard byte */
  void *at;         /* t's memory, or NULL for a host-only buffer (references) */
  void *twin_mem;
  int64_t n;
  size_t bytes; /* of the n elements */
} buf;

/* A host-only buffer of n elements (+1 guard byte) of 0x5A bytes, so that an
 * output the library never wrote cannot pass; t views it. */
static buf buf_host(dist_dtype dt, int ndim, const int64_t *shape) {
  buf b;
  memset(&b, 0, sizeof b);
  b.n = 1;
  for (int d = 0; d < ndim; d++) b.n *= shape[d];
  b.bytes = (size_t)b.n * dist_dtype_size(dt);
  b.mem = malloc(b.bytes + 1);
  memset(b.mem, 0x5A, b.bytes + 1);
  b.t = dist_tensor_host(b.n ? b.mem : NULL, dt, ndim, shape);
  return b;
}

/* Put the image (guard byte included) in MEM, and in a host twin when MEM has twins. */
static void buf_place(buf *b) {
  const dist_tensor h = b->t;
  b->at = MEM->alloc(b->bytes + 1);
  if (b->at) MEM->put(b->at, b->mem, b->bytes + 1);
  b->t = MEM->tensor(b->n ? b->at : NULL, h.dtype, h.ndim, h.shape);
  if (MEM->twins) {
    b->twin_mem = malloc(b->bytes + 1);
    memcpy(b->twin_mem, b->mem, b->bytes + 1);
    b->twin = dist_tensor_host(b->n ? b->twin_mem : NULL, h.dtype, h.ndim, h.shape);
  }
}

/* The tensor's elements back into the image (after every pass of the call). */
static void buf_fetch(buf *b) {
  if (b->at) MEM->get(b->mem, b->at, b->bytes);
}

static void buf_free(buf *b) {
  free(b->mem);
  if (b->at) MEM->release(b->at);
  free(b->twin_mem);
}

/* Pass k of a call: 0 on the memory under test, 1 (when MEM has twins) on the host twins. */
#define PASSES (MEM->twins ? 2 : 1)
static dist_tensor *T(buf *b, int k) { return k ? &b->twin : &b->t; }

#endif
