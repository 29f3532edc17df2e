/* Distributed autograd with explicit backward: calls recorded in a context,
 * their VJPs run newest first on the workers that ran them; gradients are
 * kept per tensor memory (data pointer, dtype, shape), so an argument that
 * is an earlier call's output hands its gradient on to that call. */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_internal.h"

typedef struct record {
  int to;
  char name[DIST_RPC_MAX_NAME + 1];
  int nargs;
  dist_tensor args[DIST_RPC_MAX_ARGS];     /* copies (the caller may reuse its buffers) */
  const void *arg_key[DIST_RPC_MAX_ARGS]; /* the caller's memory: where their gradients go */
  void *opts;
  size_t opts_bytes;
  dist_future *f; /* its outputs (held) */
} record;

typedef struct grad {
  const void *key;
  dist_tensor t; /* f64 accumulator view? no: the tensor's own dtype, f32/f64 */
} grad;

struct dist_autograd_ctx {
  record *rec;
  int nrec, caprec;
  grad *g;
  int ng, capg;
  dist_status failed; /* a recording that could not be kept */
};


dist_status dist_autograd_begin(dist_autograd_ctx **ctx) {
  if (!ctx) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_autograd_begin: NULL context pointer");
  if (dist__rpc_me.autograd) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_autograd_begin: a context is recording on this thread");
  *ctx = calloc(1, sizeof **ctx);
  if (!*ctx) return dist__error(DIST_ERR_NO_MEMORY, "dist_autograd_begin");
  dist__rpc_me.autograd = *ctx;
  return DIST_SUCCESS;
}

dist_status dist_autograd_end(dist_autograd_ctx *ctx) {
  if (!ctx || ctx != dist__rpc_me.autograd) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_autograd_end: not this thread's recording context");
  dist__rpc_me.autograd = NULL;
  return ctx->failed ? dist__error(ctx->failed, "dist_autograd_end: a call could not be recorded (out of memory)") : DIST_SUCCESS;
}

static void *dup_bytes(const void *p, size_t n) {
  void *q = malloc(n ? n : 1);
  if (q && n) memcpy(q, p, n);
  return q;
}

void dist__autograd_record_on(int to, const char *name, const dist_tensor *args, int nargs, const void *opts,
                           size_t opts_bytes, dist_future *f) {
  dist_autograd_ctx *c = dist__rpc_me.autograd;
  if (!c) return;
  const dist__rpc_fn_entry *e;
  if (dist__rpc_lookup(name, strlen(name), &e) || !dist__rpc_entry_vjp(e)) return; /* not differentiable: not recorded */
  if (c->nrec == c->caprec) {
    int cap = c->caprec ? 2 * c->caprec : 8;
    record *r = realloc(c->rec, sizeof *r * (size_t)cap);
    if (!r) return (void)(c->failed = DIST_ERR_NO_MEMORY);
    c->rec = r, c->caprec = cap;
  }
  record *r = &c->rec[c->nrec];
  memset(r, 0, sizeof *r);
  r->to = to;
  snprintf(r->name, sizeof r->name, "%s", name);
  r->nargs = nargs;
  for (int i = 0; i < nargs; i++) {
    r->args[i] = args[i];
    r->arg_key[i] = args[i].data;
    r->args[i].data = dup_bytes(args[i].data, dist_tensor_nbytes(&args[i]));
    if (!r->args[i].data) c->failed = DIST_ERR_NO_MEMORY;
  }
  r->opts = dup_bytes(opts, opts_bytes);
  r->opts_bytes = opts_bytes;
  r->f = f;
  atomic_fetch_add(&f->refs, 1);
  c->nrec++;
}

static int same_shape(const dist_tensor *a, const dist_tensor *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim);
}

static grad *find_grad(const dist_autograd_ctx *c, const void *key, const dist_tensor *like) {
  for (int i = 0; i < c->ng; i++)
    if (c->g[i].key == key && same_shape(&c->g[i].t, like)) return &c->g[i];
  return NULL;
}

/* g[key] += t (f32 or f64). */
static dist_status accumulate(dist_autograd_ctx *c, const void *key, const dist_tensor *t) {
  if (t->dtype != DIST_F32 && t->dtype != DIST_F64)
    return dist__error(DIST_ERR_UNSUPPORTED, "distributed autograd: gradients of %s (f32 and f64 only)",
                       dist_dtype_name(t->dtype));
  grad *g = find_grad(c, key, t);
  size_t n = (size_t)dist_tensor_numel(t);
  if (!g) {
    if (c->ng == c->capg) {
      int cap = c->capg ? 2 * c->capg : 16;
      grad *ng = realloc(c->g, sizeof *ng * (size_t)cap);
      if (!ng) return dist__error(DIST_ERR_NO_MEMORY, "distributed autograd: gradients");
      c->g = ng, c->capg = cap;
    }
    g = &c->g[c->ng];
    g->key = key;
    g->t = *t;
    g->t.data = calloc(n ? n : 1, dist_dtype_size(t->dtype));
    if (!g->t.data) return dist__error(DIST_ERR_NO_MEMORY, "distributed autograd: a gradient");
    c->ng++;
  }
  if (t->dtype == DIST_F32)
    for (size_t i = 0; i < n; i++) ((float *)g->t.data)[i] += ((const float *)t->data)[i];
  else
    for (size_t i = 0; i < n; i++) ((double *)g->t.data)[i] += ((const double *)t->data)[i];
  return DIST_SUCCESS;
}

dist_status dist_autograd_backward(dist_autograd_ctx *ctx, const dist_tensor *roots, const dist_tensor *grads, int n) {
  if (!ctx || n < 0 || (n && (!roots || !grads)))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_autograd_backward: NULL context or roots");
  if (ctx == dist__rpc_me.autograd) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_autograd_backward: end the recording first");
  for (int i = 0; i < n; i++) {
    if (!same_shape(&roots[i], &grads[i]))
      return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_autograd_backward: root %d and its gradient differ in dtype or shape", i);
    DIST_CHECK(accumulate(ctx, roots[i].data, &grads[i]));
  }
  for (int k = ctx->nrec - 1; k >= 0; k--) {
    record *r = &ctx->rec[k];
    DIST_CHECK(dist_future_wait(r->f));
    int nout = dist_future_count(r->f);
    if (r->nargs + nout > DIST_RPC_MAX_ARGS)
      return dist__error(DIST_ERR_UNSUPPORTED, "distributed autograd: '%s' has %d arguments and %d outputs (at most %d together)",
                         r->name, r->nargs, nout, DIST_RPC_MAX_ARGS);
    dist_tensor in[DIST_RPC_MAX_ARGS];
    void *zeros[DIST_RPC_MAX_ARGS] = {0};
    memcpy(in, r->args, sizeof in[0] * (size_t)r->nargs);
    int any = 0;
    for (int j = 0; j < nout; j++) {
      const dist_tensor *o = dist_future_output(r->f, j);
      grad *g = find_grad(ctx, o->data, o);
      if (g) in[r->nargs + j] = g->t, any = 1;
      else { /* no gradient reached this output: zeros */
        zeros[j] = calloc((size_t)dist_tensor_numel(o) + 1, dist_dtype_size(o->dtype));
        in[r->nargs + j] = *o;
        in[r->nargs + j].data = zeros[j];
      }
    }
    dist_status s = DIST_SUCCESS;
    dist_future *b = NULL;
    if (any) {
      s = dist__rpc_call(DIST__RPC_VJP, r->to, r->name, strlen(r->name), in, r->nargs + nout, r->opts, r->opts_bytes, &b, NULL);
      if (!s) s = dist_future_wait(b);
      if (!s && dist_future_count(b) != r->nargs)
        s = dist__error(DIST_ERR_MISMATCH, "distributed autograd: the VJP of '%s' on worker%d gave %d gradients for %d arguments",
                        r->name, r->to, dist_future_count(b), r->nargs);
      for (int i = 0; !s && i < r->nargs; i++) {
        const dist_tensor *gi = dist_future_output(b, i);
        if (!same_shape(gi, &r->args[i]))
          s = dist__error(DIST_ERR_MISMATCH, "distributed autograd: the VJP of '%s' gave gradient %d of another dtype or shape", r->name, i);
        else s = accumulate(ctx, r->arg_key[i], gi);
      }
    }
    for (int j = 0; j < nout; j++) free(zeros[j]);
    dist_future_free(b);
    DIST_CHECK(s);
  }
  return DIST_SUCCESS;
}

dist_status dist_autograd_grad(const dist_autograd_ctx *ctx, const dist_tensor *t, dist_tensor *out) {
  if (!ctx || !t || !out) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_autograd_grad: NULL argument");
  if (!same_shape(t, out) || (dist_tensor_numel(out) && !out->data))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_autograd_grad: the output differs from the tensor in dtype or shape");
  const grad *g = find_grad(ctx, t->data, t);
  size_t n = dist_tensor_nbytes(t);
  if (g) memcpy(out->data, g->t.data, n);
  else if (n) memset(out->data, 0, n);
  return DIST_SUCCESS;
}

void dist_autograd_free(dist_autograd_ctx *ctx) {
  if (!ctx) return;
  if (ctx == dist__rpc_me.autograd) dist__rpc_me.autograd = NULL;
  for (int k = 0; k < ctx->nrec; k++) {
    for (int i = 0; i < ctx->rec[k].nargs; i++) free(ctx->rec[k].args[i].data);
    free(ctx->rec[k].opts);
    dist_future_free(ctx->rec[k].f);
  }
  for (int i = 0; i < ctx->ng; i++) free(ctx->g[i].t.data);
  free(ctx->rec);
  free(ctx->g);
  free(ctx);
}
