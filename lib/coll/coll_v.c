/* Gathers, scatters and all-to-alls along a dimension, with per-rank sizes. */
#include <stdlib.h>
#include <string.h>

#include "coll/coll_internal.h"
#include "core/reserve.h"

/* Counts and displacements of a split (v[0..P) and v[P..2P)), in the
 * caller's frame for groups of up to COUNTS_SMALL ranks: no allocation per
 * call (bench/collectives' per-call cost); beyond, from core/reserve.h (they
 * are made after the check round). Never copied. */
#define COUNTS_SMALL 16
typedef struct counts {
  size_t *v;
  size_t small[2 * COUNTS_SMALL];
} counts;

static dist_status counts_of(const dist__split *s, counts *c) {
  c->v = s->P <= COUNTS_SMALL ? c->small : dist__reserve_alloc(sizeof(size_t) * 2 * (size_t)s->P, 0);
  if (!c->v) return dist__error(DIST_ERR_NO_MEMORY, "count arrays for %d ranks", s->P);
  dist__split_counts(s, c->v, c->v + s->P);
  return DIST_SUCCESS;
}

static void counts_free(counts *c) {
  if (c->v != c->small) dist__reserve_free(c->v);
  c->v = NULL;
}

/* Hand a launched operation's post-processing to its request, or run it now. */
static dist_status conclude(dist__post *post, dist_status launched, dist_request **req) {
  if (launched) {
    dist__post_release(post);
    if (req && *req) {
      dist__request_discard(*req);
      *req = NULL;
    }
    return launched;
  }
  if (req) {
    dist__post_move(&(*req)->post, post);
    return DIST_SUCCESS;
  }
  return dist__post_run(post);
}

/* The whole a call concatenates or splits: `ref` with extent P x its own
 * along dim (every rank's extent the same, no sizes given) into *total. */
static dist_status equal_total(const dist__call *c, const dist_tensor *ref, const char *name, int dim,
                               int64_t *total) {
  if (__builtin_mul_overflow(ref->shape[dim], (int64_t)c->g->size, total))
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "%s: the whole along dim %d (%d ranks x '%s''s extent %lld) overflows int64", c->what, dim,
                       c->g->size, name, (long long)ref->shape[dim]);
  return DIST_SUCCESS;
}

/* `ref` with extent n along dim (the whole of a gather or scatter) must fit:
 * checked on every rank, also those that hold no tensor of that shape. */
static dist_status check_whole(const dist__call *c, const dist_tensor *ref, int dim, int64_t n, const char *sizes) {
  dist_tensor w = *ref;
  w.shape[dim] = n;
  if (dist__tensor_span(&w) >= 0) return DIST_SUCCESS;
  char d[160];
  dist__describe_shape(&w, d, sizeof d);
  return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %s give a whole of shape %s, whose size overflows int64 bytes",
                     c->what, sizes, d);
}

/* ---- all-gather-v / gather-v ------------------------------------------------- */

/* Concatenate every rank's `in` along dim into out (root < 0: everywhere). */
static dist_status gather_common(dist__call *c, const dist_tensor *in, dist_tensor *out, int dim,
                                 const int64_t *sizes, int root, dist_request **req) {
  int P = c->g->size, me = c->g->rank, receives = root < 0 || root == me;
  dist__post post;
  if (req) *req = NULL;
  dist__post_init(&post, in->memory);
  counts cnt;
  cnt.v = NULL; /* (the inline storage needs no zeroing) */
  void *recv = receives ? out->data : NULL;
  dist_status s = dist__split_init(&post.split, in, dim, P, sizes, in->shape[dim]);
  if (!s) s = counts_of(&post.split, &cnt);
  if (!s && receives && !dist__split_contiguous(&post.split)) {
    s = dist__post_alloc(&post, dist_tensor_nbytes(out), &recv);
    post.wire = recv;
    post.unpack_to = out->data;
  }
  if (!s && req) s = dist__request_new(c, req);
  if (!dist__split_contiguous(&post.split)) s = dist__call_ready(c, s);
  if (s) {
    counts_free(&cnt);
    return conclude(&post, s, req);
  }
  if (root < 0) s = c->be->all_gather_v(c->g, in->data, recv, cnt.v, cnt.v + P, in->dtype, req ? &(*req)->pending : NULL);
  else s = c->be->gather_v(c->g, in->data, recv, cnt.v, cnt.v + P, in->dtype, root);
  counts_free(&cnt);
  return conclude(&post, s, req);
}

/* Checks shared by all-gather-v and gather-v (out only on receivers). */
static dist_status gather_checks(dist__call *c, const dist_tensor *in, const dist_tensor *out, int dim,
                                 const int64_t *sizes, int receives) {
  dist_status s = dist__check_tensor(c, in, "in");
  if (!s && receives) s = dist__check_tensor(c, out, "out");
  if (!s && receives) s = dist__check_same_memory(c, in, out);
  if (!s) s = dist__call_backend(c, in->memory);
  if (!s) s = dist__check_dim(c, in, dim, "in");
  int64_t total = 0;
  if (!s && !sizes) s = equal_total(c, in, "in", dim, &total);
  if (!s && sizes) s = dist__check_sizes(c, sizes, "sizes", &total);
  if (!s && sizes && sizes[c->g->rank] != in->shape[dim])
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: sizes[%d] = %lld but this rank's 'in' has extent %lld along dim %d",
                    c->what, c->g->rank, (long long)sizes[c->g->rank], (long long)in->shape[dim], dim);
  if (!s) s = check_whole(c, in, dim, total, sizes ? "sizes" : "the ranks' equal extents");
  if (!s && receives) s = dist__check_shape_along(c, out, "out", in, dim, total);
  if (!s) {
    dist__sig_tensor(c, in, sizes ? dim : -1); /* without sizes all extents must be equal */
    c->sig.dim = dim;
    if (sizes) dist__sig_sizes(c, sizes);
  }
  return s;
}

static dist_status all_gather_v(const char *what, const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                                const int64_t *sizes, int nb, dist_request **req) {
  dist__call c;
  if (req) *req = NULL;
  DIST_CHECK(dist__call_begin(&c, what, group));
  dist_status s = gather_checks(&c, in, out, dim, sizes, 1);
  if (!s && nb && !req) s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the request pointer is NULL", what);
  DIST_CHECK(dist__call_verify(&c, s));
  int ordered = nb && in->memory == DIST_MEM_CUDA; /* enqueue now, track with an event */
  s = gather_common(&c, in, out, dim, sizes, -1, nb && !ordered ? req : NULL);
  return !s && ordered ? dist__request_stream(&c, in->memory, req) : s;
}

dist_status dist_all_gather(const char *group, const dist_tensor *in, dist_tensor *out, int dim) {
  return all_gather_v("dist_all_gather", group, in, out, dim, NULL, 0, NULL);
}

dist_status dist_all_gather_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                              const int64_t *sizes) {
  return all_gather_v("dist_all_gather_v", group, in, out, dim, sizes, 0, NULL);
}

dist_status dist_all_gather_v_start(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                                    const int64_t *sizes, dist_request **req) {
  return all_gather_v("dist_all_gather_v_start", group, in, out, dim, sizes, 1, req);
}

dist_status dist_gather_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim, const int64_t *sizes,
                          int dst) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, "dist_gather_v", group));
  dist_status s = dist__check_rank(&c, dst, "dst");
  if (!s) s = gather_checks(&c, in, out, dim, sizes, dst == c.g->rank);
  c.sig.root = dst;
  DIST_CHECK(dist__call_verify(&c, s));
  return gather_common(&c, in, out, dim, sizes, dst, NULL);
}

/* ---- reduce-scatter-v / scatter-v --------------------------------------------- */

dist_status dist_reduce_scatter_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                                  const int64_t *sizes, dist_reduce_op op) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, "dist_reduce_scatter_v", group));
  int P = c.g->size, me = c.g->rank;
  dist_status s = dist__check_tensor(&c, in, "in");
  if (!s) s = dist__check_tensor(&c, out, "out");
  if (!s) s = dist__check_same_memory(&c, in, out);
  if (!s) s = dist__call_backend(&c, in->memory);
  if (!s) s = dist__check_op(&c, in->dtype, op);
  if (!s) s = dist__check_dim(&c, in, dim, "in");
  int64_t total = 0, mine = 0;
  if (!s && sizes) s = dist__check_sizes(&c, sizes, "sizes", &total);
  if (!s && !sizes && in->shape[dim] % P)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: extent %lld along dim %d does not divide into %d equal chunks (pass sizes)",
                    c.what, (long long)in->shape[dim], dim, P);
  if (!s) {
    mine = sizes ? sizes[me] : in->shape[dim] / P;
    if (sizes && total != in->shape[dim])
      s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: sizes add up to %lld but 'in' has extent %lld along dim %d", c.what,
                      (long long)total, (long long)in->shape[dim], dim);
  }
  if (!s) s = dist__check_shape_along(&c, out, "out", in, dim, mine);
  if (!s) {
    dist__sig_tensor(&c, in, -1);
    c.sig.dim = dim;
    c.sig.op = op;
    if (sizes) dist__sig_sizes(&c, sizes);
  }
  DIST_CHECK(dist__call_verify(&c, s));

  /* Wire form: packed chunks, in f32 for 16-bit floats. */
  dist__post post;
  dist__post_init(&post, in->memory);
  counts cnt;
  cnt.v = NULL; /* (the inline storage needs no zeroing) */
  size_t n_in = (size_t)dist_tensor_numel(in), n_out = (size_t)dist_tensor_numel(out);
  dist_dtype wt = dist__wire_type(in->dtype, op);
  int is16 = wt != in->dtype; /* reduced in a wider type */
  dist_tensor win = *in;
  win.dtype = wt;
  const void *send = in->data;
  s = dist__split_init(&post.split, &win, dim, P, sizes, in->shape[dim] / P);
  if (!s) s = counts_of(&post.split, &cnt);
  if (!s && is16) {
    void *f;
    s = dist__post_alloc(&post, n_in * dist_dtype_size(wt), &f);
    if (!s) s = dist__mem_widen(in->memory, in->data, in->dtype, f, n_in);
    send = f;
  }
  if (!s && !dist__split_contiguous(&post.split)) {
    void *packed;
    s = dist__post_alloc(&post, n_in * dist_dtype_size(wt), &packed);
    if (!s) s = dist__split_pack(in->memory, &post.split, send, packed);
    send = packed;
  }
  post.wire = out->data;
  post.wire_type = wt;
  post.wire_n = n_out;
  if (!s && is16) {
    s = dist__post_alloc(&post, n_out * dist_dtype_size(wt), &post.wire);
    post.cast_to = out->data;
    post.cast_type = in->dtype;
  }
  dist_reduce_op wop = op;
  if (op == DIST_AVG && !c.be->can_reduce(wt, DIST_AVG)) wop = DIST_SUM, post.divisor = P;
  if (is16 || !dist__split_contiguous(&post.split)) s = dist__call_ready(&c, s);
  if (!s) s = c.be->reduce_scatter_v(c.g, send, post.wire, cnt.v, cnt.v + P, wt, wop);
  counts_free(&cnt);
  dist__split_free(&post.split); /* the result needs no unpacking */
  return conclude(&post, s, NULL);
}

dist_status dist_scatter_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim, const int64_t *sizes,
                           int src) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, "dist_scatter_v", group));
  int P = c.g->size, me = c.g->rank;
  dist_status s = dist__check_rank(&c, src, "src");
  if (!s) s = dist__check_tensor(&c, out, "out");
  if (!s) s = dist__call_backend(&c, out->memory);
  if (!s) s = dist__check_dim(&c, out, dim, "out");
  int64_t total = 0;
  if (!s && !sizes) s = equal_total(&c, out, "out", dim, &total);
  if (!s && sizes) s = dist__check_sizes(&c, sizes, "sizes", &total);
  if (!s && sizes && sizes[me] != out->shape[dim])
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: sizes[%d] = %lld but this rank's 'out' has extent %lld along dim %d",
                    c.what, me, (long long)sizes[me], (long long)out->shape[dim], dim);
  if (!s) s = check_whole(&c, out, dim, total, sizes ? "sizes" : "the ranks' equal extents");
  if (!s && me == src) s = dist__check_tensor(&c, in, "in");
  if (!s && me == src) s = dist__check_same_memory(&c, in, out);
  if (!s && me == src) s = dist__check_shape_along(&c, in, "in", out, dim, total);
  if (!s) {
    dist__sig_tensor(&c, out, sizes ? dim : -1);
    c.sig.dim = dim;
    c.sig.root = src;
    if (sizes) dist__sig_sizes(&c, sizes);
  }
  DIST_CHECK(dist__call_verify(&c, s));

  dist__post post;
  dist__post_init(&post, out->memory);
  counts cnt;
  cnt.v = NULL; /* (the inline storage needs no zeroing) */
  const void *send = me == src ? in->data : NULL;
  s = dist__split_init(&post.split, out, dim, P, sizes, out->shape[dim]);
  if (!s) s = counts_of(&post.split, &cnt);
  if (!s && me == src && !dist__split_contiguous(&post.split)) {
    void *packed;
    s = dist__post_alloc(&post, dist_tensor_nbytes(in), &packed);
    if (!s) s = dist__split_pack(in->memory, &post.split, in->data, packed);
    send = packed;
  }
  if (!dist__split_contiguous(&post.split)) s = dist__call_ready(&c, s);
  if (!s) s = c.be->scatter_v(c.g, send, out->data, cnt.v, cnt.v + P, out->dtype, src);
  counts_free(&cnt);
  dist__split_free(&post.split);
  return conclude(&post, s, NULL);
}

/* ---- all-to-all ------------------------------------------------------------------ */

dist_status dist__all_to_all_dims(dist__call *c, const dist_tensor *in, int split_dim, const int64_t *send_sizes,
                                  dist_tensor *out, int cat_dim, const int64_t *recv_sizes, dist_request **req) {
  int P = c->g->size;
  dist__post post;
  dist__split sin;
  if (req) *req = NULL;
  dist__post_init(&post, in->memory);
  counts sc, rc;
  sc.v = rc.v = NULL;
  const void *send = in->data;
  void *recv = out->data;
  dist_status s = dist__split_init(&sin, in, split_dim, P, send_sizes, 0);
  if (!s) s = dist__split_init(&post.split, out, cat_dim, P, recv_sizes, 0);
  if (!s) s = counts_of(&sin, &sc);
  if (!s) s = counts_of(&post.split, &rc);
  if (!s && !dist__split_contiguous(&sin)) {
    void *packed;
    s = dist__post_alloc(&post, dist_tensor_nbytes(in), &packed);
    if (!s) s = dist__split_pack(in->memory, &sin, in->data, packed);
    send = packed;
  }
  if (!s && !dist__split_contiguous(&post.split)) {
    s = dist__post_alloc(&post, dist_tensor_nbytes(out), &recv);
    post.wire = recv;
    post.unpack_to = out->data;
  }
  if (!s && req) s = dist__request_new(c, req);
  /* Packing (which can fail) happens on the same ranks everywhere when both
   * sides split the same dim. A transpose's outer extents differ per rank, so
   * it always agrees. */
  if (split_dim != cat_dim || !dist__split_contiguous(&sin) || !dist__split_contiguous(&post.split))
    s = dist__call_ready(c, s);
  if (!s)
    s = c->be->all_to_all_v(c->g, send, sc.v, sc.v + P, recv, rc.v, rc.v + P, in->dtype, req ? &(*req)->pending : NULL);
  counts_free(&sc);
  counts_free(&rc);
  dist__split_free(&sin);
  return conclude(&post, s, req);
}

/* A verified blocking all-to-all-v whose data goes first, the check round
 * after (backend/spec.h): chunks contiguous in both tensors, so no packing
 * runs before the round. `s`: this rank's argument checks. */
static dist_status all_to_all_spec(dist__call *c, const dist_tensor *in, dist_tensor *out, int dim, const int64_t *ss,
                                   const int64_t *rs, dist_status s) {
  int P = c->g->size;
  counts sc, rc;
  sc.v = P <= COUNTS_SMALL ? sc.small : malloc(sizeof(size_t) * 2 * (size_t)P);
  rc.v = P <= COUNTS_SMALL ? rc.small : malloc(sizeof(size_t) * 2 * (size_t)P);
  if (!s && (!sc.v || !rc.v)) s = dist__error(DIST_ERR_NO_MEMORY, "%s: count arrays for %d ranks", c->what, P);
  if (!s) {
    /* Chunks are contiguous (every extent before dim is 1): counts are the
     * sizes times the extent after dim, which the checks kept in range. */
    size_t inner = 1;
    for (int i = dim + 1; i < in->ndim; i++) inner *= (size_t)in->shape[i];
    size_t so = 0, ro = 0;
    for (int r = 0; r < P; r++) {
      sc.v[r] = (size_t)ss[r] * inner, sc.v[P + r] = so, so += sc.v[r];
      rc.v[r] = (size_t)rs[r] * inner, rc.v[P + r] = ro, ro += rc.v[r];
    }
  }
  dist__spec sp;
  dist__spec_init(&sp);
  if (!s) s = c->be->all_to_all_v_post(&sp, c->g, in->data, sc.v, sc.v + P, out->data, rc.v, rc.v + P, in->dtype);
  s = dist__call_verify_spec(c, s, &sp);
  if (!s) s = dist__spec_finish(&sp, c->what);
  else dist__spec_release(&sp);
  counts_free(&sc);
  counts_free(&rc);
  return s;
}

/* Can this call's data go first and be checked after? The same answer on
 * every rank whose signature matches (memory, shape before dim, blocking or
 * not). With DIST_VERIFY=0 the same exchange runs without a round: as fast
 * as MPI_Alltoallv, without its set-up per call (bench/RESULTS.md). */
static int speculates(const dist__call *c, const dist_tensor *in, int dim, int nb, dist_status s) {
  if (s || nb || c->g->size == 1 || !c->be->all_to_all_v_post ||
      in->memory != DIST_MEM_HOST)
    return 0;
  for (int i = 0; i < dim; i++)
    if (in->shape[i] != 1) return 0;
  return 1;
}

static dist_status all_to_all_v(const char *what, const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                                const int64_t *ss, const int64_t *rs, int equal, int nb, dist_request **req) {
  dist__call c;
  if (req) *req = NULL;
  DIST_CHECK(dist__call_begin(&c, what, group));
  int P = c.g->size;
  int64_t *eq = NULL;
  dist_status s = dist__check_tensor(&c, in, "in");
  if (!s) s = dist__check_tensor(&c, out, "out");
  if (!s) s = dist__check_same_memory(&c, in, out);
  if (!s) s = dist__call_backend(&c, in->memory);
  if (!s) s = dist__check_dim(&c, in, dim, "in");
  if (!s && nb && !req) s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: the request pointer is NULL", what);
  if (!s && equal) { /* dist_all_to_all: equal chunks */
    if (in->shape[dim] % P)
      s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: extent %lld along dim %d does not divide into %d equal chunks",
                      what, (long long)in->shape[dim], dim, P);
    else if (!(eq = malloc(sizeof *eq * (size_t)P))) s = dist__error(DIST_ERR_NO_MEMORY, "%s: sizes", what);
    else {
      for (int r = 0; r < P; r++) eq[r] = in->shape[dim] / P;
      ss = rs = eq;
    }
  }
  int64_t st = 0, rt = 0;
  if (!s && (!ss || !rs))
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: %s is NULL", what, ss ? "recv_sizes" : "send_sizes");
  if (!s) s = dist__check_sizes(&c, ss, "send_sizes", &st);
  if (!s) s = dist__check_sizes(&c, rs, "recv_sizes", &rt);
  if (!s && st != in->shape[dim])
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: send_sizes add up to %lld but 'in' has extent %lld along dim %d", what,
                    (long long)st, (long long)in->shape[dim], dim);
  if (!s && ss[c.g->rank] != rs[c.g->rank])
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: send_sizes[%d] = %lld but recv_sizes[%d] = %lld (what I send myself)",
                    what, c.g->rank, (long long)ss[c.g->rank], c.g->rank, (long long)rs[c.g->rank]);
  if (!s) s = dist__check_shape_along(&c, out, "out", in, dim, rt);
  if (!s && dist__state.settings.verify) { /* only the check round reads them */
    dist__sig_tensor(&c, in, eq ? -1 : dim);
    c.sig.dim = dim;
    if (!eq) dist__sig_exchange(&c, ss, rs);
  }
  if (speculates(&c, in, dim, nb, s)) {
    s = all_to_all_spec(&c, in, out, dim, ss, rs, s);
    free(eq);
    return s;
  }
  if (!s) s = dist__check_engine_count(&c, in, "in");
  if (!s) s = dist__check_engine_count(&c, out, "out");
  s = dist__call_verify(&c, s);
  int ordered = nb && !s && in->memory == DIST_MEM_CUDA; /* enqueue now, track with an event */
  if (!s) s = dist__all_to_all_dims(&c, in, dim, ss, out, dim, rs, nb && !ordered ? req : NULL);
  if (!s && ordered) s = dist__request_stream(&c, in->memory, req);
  free(eq);
  return s;
}

dist_status dist_all_to_all(const char *group, const dist_tensor *in, dist_tensor *out, int dim) {
  return all_to_all_v("dist_all_to_all", group, in, out, dim, NULL, NULL, 1, 0, NULL);
}

dist_status dist_all_to_all_v(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                              const int64_t *send_sizes, const int64_t *recv_sizes) {
  return all_to_all_v("dist_all_to_all_v", group, in, out, dim, send_sizes, recv_sizes, 0, 0, NULL);
}

dist_status dist_all_to_all_v_start(const char *group, const dist_tensor *in, dist_tensor *out, int dim,
                                    const int64_t *send_sizes, const int64_t *recv_sizes, dist_request **req) {
  return all_to_all_v("dist_all_to_all_v_start", group, in, out, dim, send_sizes, recv_sizes, 0, 1, req);
}
