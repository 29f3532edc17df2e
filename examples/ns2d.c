/* Pseudo-spectral 2-D Navier-Stokes (see ns2d.h). The state is the
 * vorticity spectrum in the FFT's transposed layout [n (k_x), k_y local]:
 * every rank holds all k_x for its slab of k_y = 0..n/2. */
#include "ns2d.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ns2d {
  ns2d_config c;
  char group[64];
  dist_fft_plan *plan;
  int64_t n, rows, row0, kl, k0, S, P; /* S spectral values, P physical values here */
  double complex *w, *a, *k1, *k2, *k3, *k4, *f, *t[4];
  double *e_half, *e_full, *kx, *ky, *keep;
  double *phys[4];
  double time;
};

#define FAIL(code, ...) dist_set_error(code, "ns2d: " __VA_ARGS__)

static dist_tensor spec_t(ns2d *s, double complex *p) {
  int64_t shape[2] = {s->n, s->kl};
  return dist_tensor_host(p, DIST_C128, 2, shape);
}

static dist_tensor phys_t(ns2d *s, double *p) {
  int64_t shape[2] = {s->rows, s->n};
  return dist_tensor_host(p, DIST_F64, 2, shape);
}

static dist_status forward(ns2d *s, double *in, double complex *out) {
  dist_tensor a = phys_t(s, in), b = spec_t(s, out);
  return dist_fft_forward(s->plan, &a, &b);
}

static dist_status inverse(ns2d *s, double complex *in, double *out) { /* destroys in */
  dist_tensor a = spec_t(s, in), b = phys_t(s, out);
  return dist_fft_inverse(s->plan, &a, &b);
}

void ns2d_destroy(ns2d *s) {
  if (!s) return;
  dist_fft_plan_destroy(s->plan);
  free(s->w);
  free(s->e_half);
  free(s->phys[0]);
  free(s);
}

dist_status ns2d_create(const ns2d_config *c, ns2d **out) {
  if (!c || !out) return FAIL(DIST_ERR_INVALID_ARGUMENT, "NULL argument");
  if (c->n < 4 || c->n % 2 || c->n > (1 << 20))
    return FAIL(DIST_ERR_INVALID_ARGUMENT, "n = %lld must be even, in [4, 2^20]", (long long)c->n);
  if (!(c->nu >= 0) || !(c->dt > 0) || !isfinite(c->nu) || !isfinite(c->dt) || !isfinite(c->force_amp) ||
      c->force_k < 1 || c->force_k > c->n / 3)
    return FAIL(DIST_ERR_INVALID_ARGUMENT, "nu = %g, dt = %g, force_amp = %g, force_k = %d (needs nu >= 0, dt > 0, "
                "1 <= force_k <= n/3)", c->nu, c->dt, c->force_amp, c->force_k);
  ns2d *s = calloc(1, sizeof *s);
  if (!s) return FAIL(DIST_ERR_NO_MEMORY, "solver object");
  s->c = *c;
  snprintf(s->group, sizeof s->group, "%s", c->group ? c->group : "world");
  s->c.group = s->group;
  s->n = c->n;
  dist_fft_options o = DIST_FFT_OPTIONS_INIT;
  o.group = s->group;
  o.destroy_input = 1;
  int64_t shape[2] = {s->n, s->n};
  dist_status st = dist_fft_plan_create(&s->plan, DIST_FFT_R2C, DIST_F64, DIST_MEM_HOST, 2, shape, 2, &o);
  dist_fft_local in, sp;
  if (!st) st = dist_fft_local_input(s->plan, &in);
  if (!st) st = dist_fft_local_output(s->plan, &sp);
  if (st) {
    ns2d_destroy(s);
    return st;
  }
  s->rows = in.shape[0], s->row0 = in.offset[0];
  s->kl = sp.shape[1], s->k0 = sp.offset[1];
  s->S = s->n * s->kl, s->P = s->rows * s->n;
  s->w = malloc(sizeof(double complex) * (size_t)(11 * (s->S > 0 ? s->S : 1)));
  s->e_half = malloc(sizeof(double) * (size_t)(5 * (s->S > 0 ? s->S : 1)));
  s->phys[0] = malloc(sizeof(double) * (size_t)(4 * (s->P > 0 ? s->P : 1)));
  if (!s->w || !s->e_half || !s->phys[0]) {
    ns2d_destroy(s);
    return FAIL(DIST_ERR_NO_MEMORY, "%lld x %lld grid", (long long)c->n, (long long)c->n);
  }
  double complex *q[11];
  for (int i = 0; i < 11; i++) q[i] = s->w + (int64_t)i * s->S;
  s->a = q[1], s->k1 = q[2], s->k2 = q[3], s->k3 = q[4], s->k4 = q[5], s->f = q[6];
  for (int i = 0; i < 4; i++) s->t[i] = q[7 + i], s->phys[i] = s->phys[0] + (int64_t)i * s->P;
  s->e_full = s->e_half + s->S, s->kx = s->e_half + 2 * s->S, s->ky = s->e_half + 3 * s->S, s->keep = s->e_half + 4 * s->S;
  for (int64_t r = 0; r < s->n; r++)
    for (int64_t c2 = 0; c2 < s->kl; c2++) {
      int64_t i = r * s->kl + c2;
      double kx = r <= s->n / 2 ? (double)r : (double)(r - s->n), ky = (double)(s->k0 + c2), k2 = kx * kx + ky * ky;
      s->kx[i] = kx, s->ky[i] = ky;
      s->keep[i] = (3 * fabs(kx) <= (double)s->n && 3 * ky <= (double)s->n) ? 1.0 : 0.0; /* the 2/3 rule */
      s->e_half[i] = exp(-c->nu * k2 * 0.5 * c->dt);
      s->e_full[i] = exp(-c->nu * k2 * c->dt);
    }
  /* Forcing spectrum: -amp kf cos(kf y) in physical space. */
  for (int64_t r = 0; r < s->rows; r++)
    for (int64_t j = 0; j < s->n; j++)
      s->phys[0][r * s->n + j] = -c->force_amp * c->force_k * cos(c->force_k * 2.0 * M_PI * (double)j / (double)s->n);
  st = forward(s, s->phys[0], s->f);
  memset(s->w, 0, sizeof(double complex) * (size_t)s->S);
  if (st) {
    ns2d_destroy(s);
    return st;
  }
  *out = s;
  return DIST_SUCCESS;
}

int64_t ns2d_rows(const ns2d *s) { return s ? s->rows : -1; }
int64_t ns2d_row_offset(const ns2d *s) { return s ? s->row0 : -1; }
double ns2d_time(const ns2d *s) { return s ? s->time : NAN; }

dist_status ns2d_set_vorticity(ns2d *s, const double *omega) {
  if (!s || !omega) return FAIL(DIST_ERR_INVALID_ARGUMENT, "NULL argument");
  memcpy(s->phys[0], omega, sizeof(double) * (size_t)s->P);
  dist_status st = forward(s, s->phys[0], s->w);
  for (int64_t i = 0; !st && i < s->S; i++) s->w[i] *= s->keep[i];
  s->time = 0;
  return st;
}

dist_status ns2d_get_vorticity(ns2d *s, double *omega) {
  if (!s || !omega) return FAIL(DIST_ERR_INVALID_ARGUMENT, "NULL argument");
  memcpy(s->t[0], s->w, sizeof(double complex) * (size_t)s->S);
  return inverse(s, s->t[0], omega);
}

/* out = dealiased FFT(-(u w_x + v w_y)) + forcing, for the spectrum in. */
static dist_status nonlinear(ns2d *s, const double complex *in, double complex *out) {
  for (int64_t i = 0; i < s->S; i++) {
    double k2 = s->kx[i] * s->kx[i] + s->ky[i] * s->ky[i];
    double complex psi = k2 > 0 ? in[i] / k2 : 0;
    s->t[0][i] = I * s->ky[i] * psi;    /* u = d psi / dy */
    s->t[1][i] = -I * s->kx[i] * psi;   /* v = -d psi / dx */
    s->t[2][i] = I * s->kx[i] * in[i];  /* w_x */
    s->t[3][i] = I * s->ky[i] * in[i];  /* w_y */
  }
  dist_status st = DIST_SUCCESS;
  for (int q = 0; !st && q < 4; q++) st = inverse(s, s->t[q], s->phys[q]);
  if (st) return st;
  double *u = s->phys[0], *v = s->phys[1], *wx = s->phys[2], *wy = s->phys[3];
  for (int64_t i = 0; i < s->P; i++) u[i] = -(u[i] * wx[i] + v[i] * wy[i]);
  st = forward(s, u, out);
  for (int64_t i = 0; !st && i < s->S; i++) out[i] = out[i] * s->keep[i] + s->f[i];
  return st;
}

/* RK4 with the integrating factor E(h) = exp(-nu k^2 h). */
static dist_status rk4(ns2d *s) {
  const double h = s->c.dt;
  double complex *w = s->w, *a = s->a;
  const double *eh = s->e_half, *ef = s->e_full;
  dist_status st = nonlinear(s, w, s->k1);
  if (st) return st;
  for (int64_t i = 0; i < s->S; i++) a[i] = eh[i] * (w[i] + 0.5 * h * s->k1[i]);
  if ((st = nonlinear(s, a, s->k2))) return st;
  for (int64_t i = 0; i < s->S; i++) a[i] = eh[i] * w[i] + 0.5 * h * s->k2[i];
  if ((st = nonlinear(s, a, s->k3))) return st;
  for (int64_t i = 0; i < s->S; i++) a[i] = ef[i] * w[i] + h * eh[i] * s->k3[i];
  if ((st = nonlinear(s, a, s->k4))) return st;
  for (int64_t i = 0; i < s->S; i++)
    w[i] = ef[i] * w[i] + h / 6.0 * (ef[i] * s->k1[i] + 2.0 * eh[i] * (s->k2[i] + s->k3[i]) + s->k4[i]);
  s->time += h;
  return DIST_SUCCESS;
}

dist_status ns2d_step(ns2d *s, int steps) {
  if (!s || steps < 0) return FAIL(DIST_ERR_INVALID_ARGUMENT, "%s", s ? "steps < 0" : "NULL solver");
  for (int k = 0; k < steps; k++) {
    dist_status st = rk4(s);
    if (st) return st;
  }
  return DIST_SUCCESS;
}

dist_status ns2d_diagnostics(ns2d *s, double *energy, double *enstrophy) {
  if (!s || !energy || !enstrophy) return FAIL(DIST_ERR_INVALID_ARGUMENT, "NULL argument");
  double acc[2] = {0, 0}, norm = (double)s->n * (double)s->n;
  for (int64_t i = 0; i < s->S; i++) {
    double k2 = s->kx[i] * s->kx[i] + s->ky[i] * s->ky[i], a2 = creal(s->w[i] * conj(s->w[i]));
    double mult = (s->ky[i] == 0 || s->ky[i] == (double)(s->n / 2)) ? 1.0 : 2.0; /* the half spectrum */
    if (k2 > 0) acc[0] += mult * a2 / k2;
    acc[1] += mult * a2;
  }
  int64_t shape[1] = {2};
  dist_tensor t = dist_tensor_host(acc, DIST_F64, 1, shape);
  dist_status st = dist_all_reduce(s->group, &t, DIST_SUM);
  if (st) return st;
  *energy = 0.5 * acc[0] / (norm * norm);
  *enstrophy = 0.5 * acc[1] / (norm * norm);
  return DIST_SUCCESS;
}

static double hash_uniform(uint64_t seed, uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull ^ (seed + 0x632BE59BD9B4E019ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return (double)(x >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

dist_status ns2d_random_init(ns2d *s, uint64_t seed, double k0, double energy) {
  if (!s || !(k0 > 0) || !(energy > 0)) return FAIL(DIST_ERR_INVALID_ARGUMENT, "random init: k0 and energy must be > 0");
  for (int64_t r = 0; r < s->rows; r++)
    for (int64_t j = 0; j < s->n; j++) s->phys[0][r * s->n + j] = hash_uniform(seed, (uint64_t)((s->row0 + r) * s->n + j));
  dist_status st = forward(s, s->phys[0], s->w);
  if (st) return st;
  const double sigma = k0 / 4 > 1 ? k0 / 4 : 1;
  for (int64_t i = 0; i < s->S; i++) {
    double k = sqrt(s->kx[i] * s->kx[i] + s->ky[i] * s->ky[i]);
    s->w[i] *= k > 0 ? s->keep[i] * exp(-(k - k0) * (k - k0) / (2 * sigma * sigma)) : 0.0;
  }
  double e, z;
  if ((st = ns2d_diagnostics(s, &e, &z))) return st;
  if (!(e > 0)) return FAIL(DIST_ERR_INVALID_ARGUMENT, "random init: k0 = %g leaves no energy on a %lld grid", k0, (long long)s->n);
  const double scale = sqrt(energy / e);
  for (int64_t i = 0; i < s->S; i++) s->w[i] *= scale;
  s->time = 0;
  return DIST_SUCCESS;
}
