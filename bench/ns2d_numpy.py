#!/usr/bin/env python3
"""The numpy peer of bench/ns2d: the same pseudo-spectral 2-D Navier-Stokes
solver as examples/ns2d.c, on numpy's FFT (pocketfft, single-threaded),
timed per step.

It is the same algorithm, operation for operation where it counts:
vorticity form on [0, 2 pi)^2 with x along the first index and y along the
second; the state is the rfft2 spectrum [n (k_x), n/2+1 (k_y)] in float64 /
complex128; each of the four RK4 stages computes u, v, w_x, w_y spectrally
and takes them to physical space (4 inverse real FFTs, done as one batched
irfft2), forms -(u w_x + v w_y) and takes it back (1 forward real FFT),
dealiases by the 2/3 rule (|k_x| or k_y > n/3 set to zero) and adds the
Kolmogorov forcing F = -amp kf cos(kf y); time stepping is RK4 with the
integrating factor exp(-nu k^2 h), so viscosity is exact. The random
initial field is the C solver's: the same hash of the global grid index,
the same Gaussian shell filter around k0, the same energy normalisation, so
both start from the same field and their energy and enstrophy after the
same steps can be compared.

It is meant as a fair peer, not a strawman: wavenumbers, integrating
factors, dealiasing mask and the spectral multipliers of u, v, w_x, w_y are
precomputed once; the stage work is done in preallocated buffers with
in-place ufuncs (out=); the four inverse transforms are one batched call.

  python3 bench/ns2d_numpy.py --size 256 --steps 10 --repeats 5 --warmup 3

prints one line
  numpy n=<n> step_ms=<median over blocks of block time / steps> steps=<total steps taken>
      energy=<E> enstrophy=<Z>
(the timed blocks are --repeats blocks of --steps steps after --warmup
steps).

  python3 bench/ns2d_numpy.py --self-check

runs the solver against two analytic solutions and prints
  numpy_self_check taylor_green_err=<max abs error> kolmogorov_err=<max abs error>
Taylor-Green: omega = 2 sin x sin y, n = 32, nu = 0.05, dt = 0.01, 100
steps (the nonlinear term vanishes; omega decays as exp(-2 nu t)), as
tests/test_ns2d.c does for the C solver. Kolmogorov: zero start, forcing
amp = 1, kf = 4, n = 32, nu = 0.05, dt = 0.01, 100 steps; the laminar
solution omega = -(amp / (nu kf)) (1 - exp(-nu kf^2 t)) cos(kf y).

Where numpy cannot be imported it prints "SKIP: numpy not importable
(<reason>)" and exits 0. Set OMP_NUM_THREADS=1 (bench/ns2d does):
pocketfft is single-threaded anyway.
"""

import argparse
import statistics
import sys
import time


class NS2D:
    """IF-RK4 pseudo-spectral solver; see the module docstring."""

    def __init__(self, np, n, nu, dt, amp, kf):
        if n < 4 or n % 2:
            raise ValueError("n = %d must be even and >= 4" % n)
        if not (1 <= kf <= n // 3):
            raise ValueError("kf = %d needs 1 <= kf <= n/3" % kf)
        self.np, self.n, self.nu, self.dt, self.time = np, n, nu, dt, 0.0
        nh = n // 2 + 1
        r = np.arange(n)
        kx = np.where(r <= n // 2, r, r - n).astype(np.float64)[:, None]  # +n/2 at the Nyquist row, as in C
        ky = np.arange(nh, dtype=np.float64)[None, :]
        self.kx = np.broadcast_to(kx, (n, nh)).copy()
        self.ky = np.broadcast_to(ky, (n, nh)).copy()
        k2 = self.kx ** 2 + self.ky ** 2
        self.k2 = k2
        inv_k2 = np.zeros_like(k2)
        np.divide(1.0, k2, out=inv_k2, where=k2 > 0)
        self.keep = ((3 * np.abs(self.kx) <= n) & (3 * self.ky <= n)).astype(np.float64)  # the 2/3 rule
        self.neg_keep = -self.keep  # -(u w_x + v w_y), dealiased, in one multiply
        self.e_half = np.exp(-nu * k2 * 0.5 * dt)
        self.e_full = np.exp(-nu * k2 * dt)
        self.h_e_half = dt * self.e_half
        # Spectral multipliers: u = d psi/dy, v = -d psi/dx with psi = w / k^2; w_x; w_y.
        self.mult = np.empty((4, n, nh), dtype=np.complex128)
        self.mult[0] = 1j * self.ky * inv_k2
        self.mult[1] = -1j * self.kx * inv_k2
        self.mult[2] = 1j * self.kx
        self.mult[3] = 1j * self.ky
        y = 2.0 * np.pi * np.arange(n) / n
        force = np.broadcast_to(-amp * kf * np.cos(kf * y)[None, :], (n, n))
        self.f = np.fft.rfft2(force)
        self.w = np.zeros((n, nh), dtype=np.complex128)
        self.spec4 = np.empty((4, n, nh), dtype=np.complex128)
        self.prod = np.empty((n, n), dtype=np.float64)
        self.tmp = np.empty((n, n), dtype=np.float64)
        self.a = np.empty_like(self.w)
        self.k = [np.empty_like(self.w) for _ in range(4)]

    def nonlinear(self, src, out):
        """out = dealiased rfft2(-(u w_x + v w_y)) + forcing, for the spectrum src."""
        np = self.np
        np.multiply(self.mult, src[None, :, :], out=self.spec4)
        phys = np.fft.irfft2(self.spec4, s=(self.n, self.n))  # 4 inverse real FFTs, batched
        np.multiply(phys[0], phys[2], out=self.prod)
        np.multiply(phys[1], phys[3], out=self.tmp)
        self.prod += self.tmp
        np.multiply(np.fft.rfft2(self.prod), self.neg_keep, out=out)
        out += self.f

    def step(self, steps=1):
        np = self.np
        h, eh, ef = self.dt, self.e_half, self.e_full
        w, a = self.w, self.a
        k1, k2, k3, k4 = self.k
        for _ in range(steps):
            self.nonlinear(w, k1)
            np.multiply(k1, 0.5 * h, out=a)  # a = eh (w + h/2 k1)
            a += w
            a *= eh
            self.nonlinear(a, k2)
            np.multiply(k2, 0.5 * h, out=a)  # a = eh w + h/2 k2
            a += eh * w
            self.nonlinear(a, k3)
            np.multiply(k3, self.h_e_half, out=a)  # a = ef w + h eh k3
            a += ef * w
            self.nonlinear(a, k4)
            k2 += k3  # w = ef w + h/6 (ef k1 + 2 eh (k2 + k3) + k4)
            k2 *= 2.0 * eh
            k1 *= ef
            k1 += k2
            k1 += k4
            k1 *= h / 6.0
            w *= ef
            w += k1
            self.time += h

    def set_vorticity(self, omega):
        self.w[...] = self.np.fft.rfft2(omega) * self.keep
        self.time = 0.0

    def vorticity(self):
        return self.np.fft.irfft2(self.w, s=(self.n, self.n))

    def diagnostics(self):
        """Energy 1/2 <|u|^2> and enstrophy 1/2 <omega^2> from the half spectrum."""
        np, n = self.np, self.n
        a2 = self.w.real ** 2 + self.w.imag ** 2
        mult = np.where((self.ky == 0) | (self.ky == n // 2), 1.0, 2.0)
        inv_k2 = np.zeros_like(self.k2)
        np.divide(1.0, self.k2, out=inv_k2, where=self.k2 > 0)
        norm = float(n) * float(n)
        return (0.5 * float(np.sum(mult * a2 * inv_k2)) / (norm * norm),
                0.5 * float(np.sum(mult * a2)) / (norm * norm))

    def random_init(self, seed, k0, energy):
        """examples/ns2d.c's ns2d_random_init: hashed white noise, Gaussian shell, scaled."""
        np, n = self.np, self.n
        with np.errstate(over="ignore"):
            i = np.arange(n * n, dtype=np.uint64).reshape(n, n)
            x = (i * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64((seed + 0x632BE59BD9B4E019) % (1 << 64))
            x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            x ^= x >> np.uint64(31)
        noise = (x >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 * 2.0 - 1.0
        self.w[...] = np.fft.rfft2(noise)
        sigma = k0 / 4 if k0 / 4 > 1 else 1.0
        k = np.sqrt(self.k2)
        self.w *= np.where(k > 0, self.keep * np.exp(-(k - k0) ** 2 / (2 * sigma * sigma)), 0.0)
        e, _ = self.diagnostics()
        if not e > 0:
            raise ValueError("random init: k0 = %g leaves no energy on a %d grid" % (k0, n))
        self.w *= np.sqrt(energy / e)
        self.time = 0.0


def self_check(np):
    n, nu, dt = 32, 0.05, 0.01
    x = 2 * np.pi * np.arange(n) / n
    X, Y = x[:, None], x[None, :]
    s = NS2D(np, n, nu, dt, 0.0, 4)
    s.set_vorticity(2 * np.sin(X) * np.sin(Y))
    s.step(100)
    tg = float(np.max(np.abs(s.vorticity() - 2 * np.sin(X) * np.sin(Y) * np.exp(-2 * nu * s.time))))
    amp, kf = 1.0, 4
    s = NS2D(np, n, nu, dt, amp, kf)
    s.step(100)
    exact = -(amp / (nu * kf)) * (1 - np.exp(-nu * kf * kf * s.time)) * np.cos(kf * Y) + 0 * X
    ko = float(np.max(np.abs(s.vorticity() - exact)))
    print("numpy_self_check taylor_green_err=%.3e kolmogorov_err=%.3e t=%g" % (tg, ko, s.time))
    return 0 if tg < 1e-10 and ko < 1e-8 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10, help="steps per timed block")
    ap.add_argument("--repeats", type=int, default=5, help="timed blocks (the median is reported)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--nu", type=float, default=1e-3)
    ap.add_argument("--dt", type=float, default=None, help="default 2/n")
    ap.add_argument("--amp", type=float, default=1.0)
    ap.add_argument("--kf", type=int, default=4)
    ap.add_argument("--k0", type=float, default=8.0)
    ap.add_argument("--energy", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--self-check", action="store_true")
    args = ap.parse_args()
    if args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        ap.error("--steps and --repeats must be >= 1, --warmup >= 0")
    try:
        import numpy as np
    except Exception as e:  # ImportError, or a broken installation
        print("SKIP: numpy not importable (%s)" % (str(e) or type(e).__name__))
        return 0
    if args.self_check:
        return self_check(np)
    n = args.size
    dt = args.dt if args.dt is not None else 2.0 / n
    try:
        s = NS2D(np, n, args.nu, dt, args.amp, args.kf)
        s.random_init(args.seed, args.k0, args.energy)
    except ValueError as e:
        print("ns2d_numpy.py: %s" % e, file=sys.stderr)
        return 2
    s.step(args.warmup)
    blocks = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        s.step(args.steps)
        blocks.append((time.perf_counter() - t0) / args.steps)
    e, z = s.diagnostics()
    print("numpy n=%d step_ms=%.3f steps=%d energy=%.15e enstrophy=%.15e"
          % (n, 1e3 * statistics.median(blocks), args.warmup + args.repeats * args.steps, e, z))
    return 0


if __name__ == "__main__":
    sys.exit(main())
