/* Post-processing of collectives and the request handle. */
#include <stdlib.h>
#include <string.h>

#include "coll/coll_op.h"
#include "core/reserve.h"

void dist__post_init(dist__post *p, dist_memory mem) {
  /* Field by field (a new field must be set here): a memset would also
   * clear the split's inline sizes, a cost on every collective for nothing. */
  p->mem = mem;
  p->wire = p->cast_to = p->unpack_to = NULL;
  p->wire_type = p->cast_type = DIST_F32;
  p->wire_n = 0;
  p->divisor = 0;
  dist__split_clear(&p->split);
  for (int i = 0; i < 3; i++) p->scratch[i] = NULL;
}

dist_status dist__post_alloc(dist__post *p, size_t bytes, void **out) {
  int i = 0;
  while (i < 3 && p->scratch[i]) i++;
  if (i == 3) return dist__error(DIST_ERR_INTERNAL, "more than three scratch buffers");
  DIST_CHECK(dist__mem_alloc(p->mem, bytes, &p->scratch[i]));
  *out = p->scratch[i];
  return DIST_SUCCESS;
}

void dist__post_move(dist__post *to, const dist__post *from) {
  *to = *from;
  dist__split_move(&to->split, &from->split);
}

void dist__post_release(dist__post *p) {
  for (int i = 0; i < 3; i++) {
    dist__mem_free(p->mem, p->scratch[i]);
    p->scratch[i] = NULL;
  }
  dist__split_free(&p->split);
}

dist_status dist__post_run(dist__post *p) {
  dist_status s = DIST_SUCCESS;
  if (p->divisor > 1) s = dist__mem_divide(p->mem, p->wire, p->wire_type, p->wire_n, p->divisor);
  if (!s && p->cast_to) s = dist__mem_narrow(p->mem, p->wire, p->cast_type, p->cast_to, p->wire_n);
  if (!s && p->unpack_to) s = dist__split_unpack(p->mem, &p->split, p->wire, p->unpack_to);
  dist__post_release(p);
  return s;
}

dist_status dist__request_new(const dist__call *c, dist_request **out) {
  dist_request *r = dist__reserve_alloc(sizeof *r, 1); /* (after the check round: core/reserve.h) */
  if (!r) return dist__error(DIST_ERR_NO_MEMORY, "%s: request", c->what);
  r->what = c->what;
  r->be = c->be;
  *out = r;
  return DIST_SUCCESS;
}

static dist_status finish(dist_request *r, dist_status s) {
  r->complete = 1;
  r->result = s ? s : dist__post_run(&r->post);
  if (s) dist__post_release(&r->post);
  return r->result;
}

dist_status dist_request_wait(dist_request *r) {
  if (!r) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_request_wait: request is NULL");
  if (r->complete) return r->result;
  return finish(r, r->be ? r->be->wait(&r->pending) : dist__mem_event_wait(r->pending.event));
}

dist_status dist_request_test(dist_request *r, int *done) {
  if (!r || !done) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_request_test: %s is NULL", r ? "done" : "request");
  if (r->complete) {
    *done = 1;
    return r->result;
  }
  int flag = 0;
  dist_status s = r->be ? r->be->test(&r->pending, &flag) : dist__mem_event_test(r->pending.event, &flag);
  if (s || flag) {
    *done = 1;
    return finish(r, s);
  }
  *done = 0;
  return DIST_SUCCESS;
}

dist_status dist__request_stream(const dist__call *c, dist_memory mem, dist_request **out) {
  DIST_CHECK(dist__request_new(c, out));
  (*out)->be = NULL;
  dist_status s = dist__mem_event_record(mem, &(*out)->pending.event);
  if (s) {
    dist__reserve_free(*out);
    *out = NULL;
  }
  return s;
}

void dist__request_discard(dist_request *r) {
  if (!r) return;
  dist__post_release(&r->post);
  dist__reserve_free(r);
}

dist_status dist_request_free(dist_request *r) {
  if (!r) return DIST_SUCCESS;
  dist_status s = DIST_SUCCESS;
  if (!r->complete) {
    const char *what = r->what;
    dist_request_wait(r); /* never leave communication writing into buffers after this call */
    s = dist__error(DIST_ERR_INVALID_ARGUMENT,
                    "dist_request_free: the %s request was still in flight; it was completed before being freed "
                    "(wait or test it to completion first)",
                    what);
  }
  dist__reserve_free(r);
  return s;
}
