/* bench/bench_util: what the bench programs share.
 *
 *   bench_now             seconds on the monotonic clock
 *   bench_max, bench_slowest
 *                         the slowest rank's time (an all-reduce MAX)
 *   bench_median          median of doubles
 *   bench_rounds          blocks of several variants, interleaved over rounds
 *   bench_paired_ratio    median over rounds of one variant's time over another's
 *   bench_ratio           the `ratio:` line that scripts and bench/RESULTS.md read
 *   bench_launcher, bench_self
 *                         what a driver needs to start its workers
 *   bench_torchrun        the launcher of the legs without MPI (Gloo, torch)
 *   bench_a2a_share       the uneven all-to-all-v split the benches share
 *
 * The bench programs are built with the MPI compiler wrapper (configure sets
 * CC to mpicc), so this header may name MPI types. Nothing here is part of
 * the library. */
#ifndef DIST_BENCH_UTIL_H
#define DIST_BENCH_UTIL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Seconds on CLOCK_MONOTONIC: every process on a node reads the same clock,
 * so spans of different ranks compare. Local. */
double bench_now(void);

/* v[i] = the largest v[i] over the ranks of comm, for i < n, in place: with
 * times, the slowest rank's. Collective on comm; an MPI error aborts the job. */
void bench_max(MPI_Comm comm, double *v, int n);

/* The slowest rank's `seconds` (any unit): bench_max of one value. Collective. */
double bench_slowest(MPI_Comm comm, double seconds);

/* Median of v[0..n-1], the mean of the two middle values when n is even;
 * v is left as it is. n >= 1. Local. */
double bench_median(const double *v, int n);

/* Median over r < n of num[r] / den[r]. Pairing each round's two blocks
 * cancels load that drifts between rounds (other jobs on shared cores), which
 * the ratio of two medians does not. Local. */
double bench_paired_ratio(const double *num, const double *den, int n);

/* One timed block of variant k: its time (seconds or any unit, the same for
 * all variants of one call). */
typedef double (*bench_block_fn)(void *ctx, int k);

/* Runs `rounds` rounds of one block per variant, t[k * rounds + r] = block(ctx, k)
 * of round r. In index order every round when rotate is 0; with rotate, the
 * k-th block of round r is variant (k + r) % nv, so none always goes first or
 * follows the same neighbour (with two variants: ABBAAB...). Warm-up and
 * calibration are the caller's, before. Collective where block is. */
void bench_rounds(int nv, int rounds, int rotate, bench_block_fn block, void *ctx, double *t);

/* Writes one line to out, the format scripts parse:
 *   ratio: <what> = <value, 3 decimals> (<note>)
 * note is the target ("target <= 1.05", "target >= 2") or, for a ratio with
 * no target, what else to read with it. what is a printf format. Local. */
void bench_ratio(FILE *out, double value, const char *note, const char *what, ...)
    __attribute__((format(printf, 4, 5)));

/* The command that starts N workers: $LAUNCHER, else the launcher of the MPI
 * this build uses (configure's DIST_DEFAULT_LAUNCHER). Local. */
const char *bench_launcher(void);

/* This program's own path into buf (the real binary, which the libtool
 * wrapper re-execs: the one to launch); 0 on success, -1 if it cannot be
 * read or does not fit. Local. */
int bench_self(char *buf, size_t cap);

/* The Python that runs torch and torchrun (Debian's python3-torch; the one
 * tests/torchrun-launch.sh uses). */
#define BENCH_PYTHON "/usr/bin/python3"

/* The command that starts N processes under torchrun without MPI, to which
 * "N PROG ARGS" are appended: "sh SRCDIR/tests/torchrun-launch.sh" (a free
 * port per job, DIST_HOST_ENGINE=gloo), into buf; 0. Or -1 with buf saying
 * why the Gloo and torch legs cannot run: a build without Gloo, or no torch
 * for BENCH_PYTHON (torchrun is torch's). Local; runs BENCH_PYTHON once. */
int bench_torchrun(const char *srcdir, char *buf, size_t cap);

/* Elements rank src sends to rank dst out of its count, for an all-to-all-v
 * over n ranks: weights 1..n rotated by rank, so no split is even and every
 * rank's differs; the last destination takes the rounding remainder. Every
 * rank receives about count. Local. */
int64_t bench_a2a_share(int64_t count, int n, int src, int dst);

#endif
