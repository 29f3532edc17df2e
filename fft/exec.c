/* Executing a plan: the argument checks of a collective call, then one of
 * two pipelines (see fft_internal.h for the layouts). The gradients reuse
 * them: the adjoint of the forward is the inverse pipeline with the
 * forward's scale, and the other way round; for r2c plans a column weight
 * accounts for the half spectrum. */
#include <string.h>

#include "fft_internal.h"

enum { FORWARD, INVERSE, FORWARD_BACKWARD, INVERSE_BACKWARD };
static const char *const names[] = {"dist_fft_forward", "dist_fft_inverse", "dist_fft_forward_backward",
                                    "dist_fft_inverse_backward"};

/* The pipelines return an exchange's failure; a local step's goes into
 * *local (see dist__fft_exchange_x), and run() agrees on it. */
static dist_status forward_pipe(dist_fft_plan *p, dist__call *c, const void *in, void *out, double scale,
                                double wmul, dist_status *local) {
  if (p->layout == DIST_FFT_OUT_TRANSPOSED) {
    DIST_CHECK(dist__fft_exchange_x(p, c, in, NULL, out, scale, wmul, local));
    DIST__FFT_STEP(local, p->eng->cols(p, 0, out, out));
    return DIST_SUCCESS;
  }
  DIST_CHECK(dist__fft_exchange_x(p, c, in, NULL, p->T, scale, wmul, local));
  DIST__FFT_STEP(local, p->eng->cols(p, 0, p->T, p->T));
  return dist__fft_exchange_y(p, c, p->T, out, NULL, 1.0, 1.0, local);
}

static dist_status inverse_pipe(dist_fft_plan *p, dist__call *c, const void *in, void *out, double scale,
                                double wmul, dist_status *local) {
  void *t = p->T;
  if (p->destroy_input) {
    t = (void *)in;
  } else if (p->layout == DIST_FFT_OUT_TRANSPOSED) {
    /* Copy (scaled) and transform in place: `in` is preserved, and FFTW's
     * in-place strided plans beat its out-of-place ones here. */
    dist__fft_box all = {p->T, in, 1, 1, (int64_t)p->t_elems, 0, 0, 0, 0, scale, 0, 1, 0, 1.0, 0};
    DIST__FFT_STEP(local, p->eng->copy(p, &all));
    scale = 1.0;
  } else {
    DIST_CHECK(dist__fft_exchange_x(p, c, NULL, in, p->T, scale, wmul, local));
    scale = wmul = 1.0;
  }
  DIST__FFT_STEP(local, p->eng->cols(p, 1, t, t));
  return dist__fft_exchange_y(p, c, t, NULL, out, scale, wmul, local);
}

static dist_status check_tensor(const dist__call *c, const dist_fft_plan *p, const dist_tensor *t, const char *name,
                                const dist_fft_local *want) {
  if (!t) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' is NULL", c->what, name);
  char have[128], need[128];
  dist_tensor w = {NULL, want->dtype, p->mem, p->device, want->ndim, {0}};
  memcpy(w.shape, want->shape, sizeof w.shape);
  int same = t->dtype == w.dtype && t->ndim == w.ndim && !memcmp(t->shape, w.shape, sizeof(int64_t) * (size_t)w.ndim);
  if (!same) {
    dist__describe_shape(t, have, sizeof have);
    dist__describe_shape(&w, need, sizeof need);
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' is %s but this rank's piece of the plan is %s", c->what,
                       name, have, need);
  }
  if (t->memory != p->mem)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' is in %s memory but the plan is for %s memory", c->what,
                       name, t->memory == DIST_MEM_CUDA ? "CUDA" : "host", p->mem == DIST_MEM_CUDA ? "CUDA" : "host");
  if (p->mem == DIST_MEM_CUDA && t->device != p->device)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' is on device %d but the plan is for device %d", c->what,
                       name, t->device, p->device);
  if (!t->data && want->numel)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' has %lld elements but no data", c->what, name,
                       (long long)want->numel);
  return DIST_SUCCESS;
}

static int overlap(const dist_tensor *a, const dist_tensor *b) {
  const char *pa = a->data, *pb = b->data;
  size_t na = dist_tensor_nbytes(a), nb = dist_tensor_nbytes(b);
  return pa && pb && na && nb && pa < pb + nb && pb < pa + na;
}

static dist_status run(dist_fft_plan *p, int op, const dist_tensor *in, dist_tensor *out) {
  const char *what = names[op];
  if (!p) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the plan is NULL", what);
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, what, p->group));
  /* FORWARD and INVERSE_BACKWARD read the input layout; the others the output layout. */
  int from_input = op == FORWARD || op == INVERSE_BACKWARD;
  dist_fft_local li, lo;
  dist_fft_local_input(p, &li);
  dist_fft_local_output(p, &lo);
  const char *iname = op >= FORWARD_BACKWARD ? "grad_out" : "in", *oname = op >= FORWARD_BACKWARD ? "grad_in" : "out";
  dist_status s = check_tensor(&c, p, in, iname, from_input ? &li : &lo);
  if (!s) s = check_tensor(&c, p, out, oname, from_input ? &lo : &li);
  if (!s && overlap(in, out))
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: '%s' and '%s' overlap; the transform is out of place", what, iname,
                    oname);
  if (!s) s = dist__call_backend(&c, p->mem);
  if (!s) s = p->eng->prepare(p, !from_input, in->data, out->data);
  c.sig.dtype = p->prec, c.sig.memory = p->mem, c.sig.ndim = p->ndim, c.sig.op = op, c.sig.dim = p->rank;
  c.sig.root = p->layout, c.sig.aux = p->type;
  c.sig.sizes = p->sizes_hash;
  memcpy(c.sig.shape, p->shape, sizeof c.sig.shape);
  DIST_CHECK(dist__call_verify(&c, s));
  int r2c = p->type == DIST_FFT_R2C, dev = dist__fft_device_enter(p);
  dist_status local = DIST_SUCCESS;
  switch (op) {
  case FORWARD:
    s = p->whole ? p->eng->whole(p, 0, in->data, out->data, p->scale_fwd)
                 : forward_pipe(p, &c, in->data, out->data, p->scale_fwd, 1.0, &local);
    break;
  case INVERSE:
    s = p->whole ? p->eng->whole(p, 1, in->data, out->data, p->scale_inv)
                 : inverse_pipe(p, &c, in->data, out->data, p->scale_inv, 1.0, &local);
    break;
  case FORWARD_BACKWARD: s = inverse_pipe(p, &c, in->data, out->data, p->scale_fwd, r2c ? 0.5 : 1.0, &local); break;
  default: s = forward_pipe(p, &c, in->data, out->data, p->scale_inv, r2c ? 2.0 : 1.0, &local);
  }
  dist__fft_device_leave(p, dev);
  if (s || p->whole) return s ? s : local; /* an exchange failed (its engine reports it), or no exchange at all */
  /* A local step failed on some rank: its output is wrong, and so are the
   * others' (its pieces went out unfinished). One small round tells every
   * rank (skipped with DIST_VERIFY=0: then only the failing rank knows). */
  return dist__call_ready(&c, local);
}

dist_status dist_fft_forward(dist_fft_plan *p, const dist_tensor *in, dist_tensor *out) {
  return run(p, FORWARD, in, out);
}
dist_status dist_fft_inverse(dist_fft_plan *p, const dist_tensor *in, dist_tensor *out) {
  return run(p, INVERSE, in, out);
}
dist_status dist_fft_forward_backward(dist_fft_plan *p, const dist_tensor *grad_out, dist_tensor *grad_in) {
  return run(p, FORWARD_BACKWARD, grad_out, grad_in);
}
dist_status dist_fft_inverse_backward(dist_fft_plan *p, const dist_tensor *grad_out, dist_tensor *grad_in) {
  return run(p, INVERSE_BACKWARD, grad_out, grad_in);
}
