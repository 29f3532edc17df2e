/* FFTW local transforms for one precision; included by fftw.c with
 * X(name) = fftw_name or fftwf_name, REAL the real type, TAG the suffix of the
 * functions it defines. Plans are made through the guru64 interface, so any
 * size fits, on scratch arrays (MEASURE overwrites what it plans on), and
 * executed on the caller's arrays with the new-array execute functions. Those
 * require the arrays to have the alignment the plan was made for, so each
 * role keeps a plan per (input, output) alignment, made on first use. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(name) CAT(name, TAG)

/* Plan role r for these arrays (real or complex per role). */
static X(plan) F(make_)(const dist_fft_plan *p, int r, int64_t nl, void *in, void *out) {
  unsigned flags = p->measure ? FFTW_MEASURE : FFTW_ESTIMATE;
  X(iodim64) dims[2], many;
  int inv = r == ROWS_INV;
  if (r == ROWS_FWD || r == ROWS_INV) {
    /* A row: [n1] or [n1, n2] real/complex <-> [k1] or [k1, R] complex. */
    int64_t nlast = p->rank == 3 ? p->n2 : p->n1, klast = p->rank == 3 ? p->R : p->k1;
    int64_t row_in = p->n1 * p->n2, row_a = p->k1 * p->R;
    int rank = p->rank - 1;
    if (rank == 2) {
      dims[0] = (X(iodim64)){p->n1, inv ? klast : nlast, inv ? nlast : klast};
      dims[1] = (X(iodim64)){p->n2, 1, 1};
    } else {
      dims[0] = (X(iodim64)){p->n1, 1, 1};
    }
    many = (X(iodim64)){nl * p->in_sizes[p->me], inv ? row_a : row_in, inv ? row_in : row_a};
    if (p->type == DIST_FFT_C2C)
      return X(plan_guru64_dft)(rank, dims, 1, &many, in, out, inv ? FFTW_BACKWARD : FFTW_FORWARD, flags);
    if (!inv) return X(plan_guru64_dft_r2c)(rank, dims, 1, &many, in, out, flags);
    return X(plan_guru64_dft_c2r)(rank, dims, 1, &many, in, out, flags | FFTW_DESTROY_INPUT);
  }
  int64_t M = p->L * p->out_sizes[p->me] * p->R;
  dims[0] = (X(iodim64)){p->n0, M, M};
  many = (X(iodim64)){M, 1, 1};
  return X(plan_guru64_dft)(1, dims, 1, &many, in, out, r == COLS_FWD ? FFTW_FORWARD : FFTW_BACKWARD, flags);
}

/* Elements (reals) of the input and output arrays of role r. */
static void F(extent_)(const dist_fft_plan *p, int r, int64_t nl, size_t *nin, size_t *nout) {
  size_t in_layout = (size_t)(nl * p->in_sizes[p->me] * p->n1 * p->n2) * (p->type == DIST_FFT_C2C ? 2 : 1);
  size_t a = 2 * (size_t)(nl * p->in_sizes[p->me] * p->k1 * p->R);
  size_t t = 2 * (size_t)(p->n0 * p->L * p->out_sizes[p->me] * p->R);
  switch (r) {
  case ROWS_FWD: *nin = in_layout, *nout = a; break;
  case ROWS_INV: *nin = a, *nout = in_layout; break;
  default: *nin = *nout = t;
  }
}

static int F(empty_)(const dist_fft_plan *p, int r, int64_t nl) {
  if (r == ROWS_FWD || r == ROWS_INV) return nl * p->in_sizes[p->me] == 0;
  return p->L * p->out_sizes[p->me] * p->R == 0;
}

/* The plan of role r for nl batch entries (row roles) and arrays with these
 * alignments, made on first use on scratch arrays of the same alignments. */
static dist_status F(get_)(dist_fft_plan *p, int r, int64_t nl, const void *in, const void *out, X(plan) * plan) {
  fftw_state *st = p->eng_state;
  int ain = X(alignment_of)((REAL *)in), aout = X(alignment_of)((REAL *)out);
  int inplace = r == COLS_FWD || r == COLS_INV;
  for (int i = 0; i < st->n[r]; i++)
    if (st->cache[r][i].ain == ain && st->cache[r][i].aout == aout && st->cache[r][i].nl == nl) {
      *plan = (X(plan))st->cache[r][i].plan;
      return DIST_SUCCESS;
    }
  if (st->n[r] == CACHE) { /* evict the oldest */
    X(destroy_plan)((X(plan))st->cache[r][0].plan);
    memmove(st->cache[r], st->cache[r] + 1, sizeof(fftw_entry) * (CACHE - 1));
    st->n[r]--;
  }
  size_t nin, nout;
  F(extent_)(p, r, nl, &nin, &nout);
  char *bin = X(malloc)(sizeof(REAL) * nin + 64), *bout = inplace ? NULL : X(malloc)(sizeof(REAL) * nout + 64);
  X(plan) made = NULL;
  int have = bin && (inplace || bout);
  if (have) made = F(make_)(p, r, nl, bin + ain, inplace ? bin + ain : bout + aout);
  X(free)(bin);
  X(free)(bout);
  if (!made)
    return dist__error(have ? DIST_ERR_INTERNAL : DIST_ERR_NO_MEMORY, "dist_fft: FFTW could not plan the %s transform (%s)",
                       role_name[r], have ? "planner failed" : "out of memory for its planning arrays");
  st->cache[r][st->n[r]++] = (fftw_entry){ain, aout, nl, (void *)made};
  *plan = made;
  return DIST_SUCCESS;
}

static void F(destroy_)(dist_fft_plan *p) {
  fftw_state *st = p->eng_state;
  if (!st) return;
  for (int r = 0; r < ROLES; r++)
    for (int i = 0; i < st->n[r]; i++) X(destroy_plan)((X(plan))st->cache[r][i].plan);
  free(st);
  p->eng_state = NULL;
}

static dist_status F(run_)(dist_fft_plan *p, int r, int64_t nl, const void *in, void *out) {
  if (F(empty_)(p, r, nl)) return DIST_SUCCESS;
  X(plan) plan;
  DIST_CHECK(F(get_)(p, r, nl, in, out, &plan));
  if (p->type == DIST_FFT_R2C && r == ROWS_FWD) X(execute_dft_r2c)(plan, (REAL *)in, out);
  else if (p->type == DIST_FFT_R2C && r == ROWS_INV) X(execute_dft_c2r)(plan, (void *)in, out);
  else X(execute_dft)(plan, (void *)in, out);
  return DIST_SUCCESS;
}

/* Row roles: the plans for a full chunk and for the last, shorter one. */
static dist_status F(prepare_)(dist_fft_plan *p, int r, const void *in, void *out) {
  X(plan) plan;
  int rows = r == ROWS_FWD || r == ROWS_INV;
  int64_t last = p->L % p->lc;
  if (!F(empty_)(p, r, p->lc)) DIST_CHECK(F(get_)(p, r, rows ? p->lc : 0, in, out, &plan));
  if (rows && last && !F(empty_)(p, r, last)) DIST_CHECK(F(get_)(p, r, last, in, out, &plan));
  return DIST_SUCCESS;
}

/* The plans every call needs, for arrays aligned like FFTW's own. */
static dist_status F(create_)(dist_fft_plan *p) {
  fftw_state *st = calloc(1, sizeof *st);
  if (!st) return dist__error(DIST_ERR_NO_MEMORY, "dist_fft_plan_create: FFTW state");
  p->eng_state = st;
  for (int r = 0; r < ROLES; r++) DIST_CHECK(F(prepare_)(p, r, NULL, NULL)); /* alignment 0, as X(malloc)'s */
  return DIST_SUCCESS;
}

static char *F(export_)(void) { return X(export_wisdom_to_string)(); }
static int F(import_)(const char *w) { return X(import_wisdom_from_string)(w); }

#undef F
#undef CAT
#undef CAT_
