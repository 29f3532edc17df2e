/* What remains to do after a backend call completes (divide for avg, cast
 * back from f32, unpack chunks, free scratch), and the request that carries
 * it for non-blocking calls. */
#ifndef DISTMGR_COLL_OP_H
#define DISTMGR_COLL_OP_H

#include "manager/coll_call.h"
#include "mem/split.h"

/* Set field by field in dist__post_init: a new field must be added there. */
typedef struct dist__post {
  dist_memory mem;
  void *wire;           /* what the backend wrote (user buffer or scratch) */
  dist_dtype wire_type; /* its element type */
  size_t wire_n;        /* its element count */
  int64_t divisor;      /* > 1: avg emulated as sum / divisor */
  void *cast_to;        /* non-NULL: wire (the wider type) is narrowed back into it */
  dist_dtype cast_type;
  void *unpack_to;      /* non-NULL: wire (packed chunks) is unpacked into it */
  dist__split split;
  void *scratch[3];     /* freed at the end */
} dist__post;

void dist__post_init(dist__post *p, dist_memory mem);
dist_status dist__post_alloc(dist__post *p, size_t bytes, void **out); /* a scratch buffer freed with p */
dist_status dist__post_run(dist__post *p);  /* runs the steps, then releases */
void dist__post_release(dist__post *p);
/* Hand a post to a request: *to = *from (the split's sizes may live inside it). */
void dist__post_move(dist__post *to, const dist__post *from);

struct dist_request {
  const char *what;
  const dist__backend *be; /* NULL: a stream-ordered request (pending.event only) */
  dist__pending pending;
  dist__post post;
  int complete;
  dist_status result;
};

/* A request for a launched call: takes over `post`. */
dist_status dist__request_new(const dist__call *c, dist_request **out);
/* For stream-ordered memory (CUDA) an operation is enqueued completely at
 * start, post-processing included; its request only waits for an event. */
dist_status dist__request_stream(const dist__call *c, dist_memory mem, dist_request **out);
/* Free a request whose operation was never launched. */
void dist__request_discard(dist_request *r);

#endif
