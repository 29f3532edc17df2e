/* 2-D incompressible Navier-Stokes in vorticity form on the periodic square
 * [0, 2 pi)^2, pseudo-spectral on distmgr's distributed FFT:
 *
 *   d(omega)/dt + u . grad(omega) = nu lap(omega) + F,   lap(psi) = -omega,
 *   u = (d psi/dy, -d psi/dx),
 *
 * x along the first grid index (rows, split over the group, uneven allowed),
 * y along the second. Time stepping: RK4 with an integrating factor, so the
 * viscous term is exact (exp(-nu k^2 t)); the nonlinear term is computed in
 * physical space and dealiased by the 2/3 rule (modes with |k_x| or |k_y| >
 * n/3 set to zero). Forcing: Kolmogorov, F = -amp * kf * cos(kf * y) (the
 * curl of the body force amp * sin(kf y) along x). All in double.
 *
 * Every call is collective over the group. */
#ifndef DISTMGR_EXAMPLES_NS2D_H
#define DISTMGR_EXAMPLES_NS2D_H

#include <distmgr.h>

typedef struct ns2d_config {
  int64_t n;          /* grid points per side (>= 4, even) */
  double nu;          /* viscosity >= 0 */
  double dt;          /* time step > 0 */
  double force_amp;   /* Kolmogorov forcing amplitude (0: none) */
  int force_k;        /* its wavenumber kf >= 1 */
  const char *group;  /* the spatial group (NULL = world) */
} ns2d_config;

#define NS2D_CONFIG_INIT {64, 1e-3, 1e-2, 0.0, 4, NULL}

typedef struct ns2d ns2d;

dist_status ns2d_create(const ns2d_config *c, ns2d **out);
void ns2d_destroy(ns2d *s);

/* This rank's rows of the physical field: [rows, n] from row offset. */
int64_t ns2d_rows(const ns2d *s);
int64_t ns2d_row_offset(const ns2d *s);

/* Set / read this rank's rows of the vorticity (rows x n doubles). */
dist_status ns2d_set_vorticity(ns2d *s, const double *omega);
dist_status ns2d_get_vorticity(ns2d *s, double *omega);

/* A random initial field from `seed`, the same whatever the layout: white
 * noise from the global grid index, filtered to the band around k0 (a
 * Gaussian shell), scaled to kinetic energy `energy`. */
dist_status ns2d_random_init(ns2d *s, uint64_t seed, double k0, double energy);

/* Advance `steps` steps of dt. */
dist_status ns2d_step(ns2d *s, int steps);
double ns2d_time(const ns2d *s);

/* Kinetic energy 1/2 <|u|^2> and enstrophy 1/2 <omega^2> (means over the
 * domain), from the spectrum (Parseval). */
dist_status ns2d_diagnostics(ns2d *s, double *energy, double *enstrophy);

#endif
