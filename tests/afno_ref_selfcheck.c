/* Self-check of the C reference afno_ref.h against PyTorch (not a unit test:
 * it needs python3 with torch and numpy). Writes seeded parameters, an input
 * and the reference's outputs as raw little-endian float64 files into DIR;
 * bench/afno_torch.py --check-ref DIR builds the same model in float64 and
 * prints the largest relative differences (forward output, the filter's
 * spectral part alone, and afno_ref_fd's central differences of the MSE
 * loss at three elements of every parameter against torch's autograd).
 *
 *   cc -std=c11 -O2 -o /tmp/afno_ref_selfcheck tests/afno_ref_selfcheck.c -lm
 *   /tmp/afno_ref_selfcheck DIR H W Cin Cout p0 p1 D depth nb B mlp_ratio sparsity fraction [seed]
 *   python3 bench/afno_torch.py --check-ref DIR
 *
 * Values are scaled so that ReLU and softshrink cut a real share of the
 * spectral activations (the check script prints those shares). */
#include <stdint.h>

#include "afno_ref.h"

static uint64_t rng_state;
static double unit(void) { /* splitmix64 -> uniform [-1, 1) */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

static void dump(const char *dir, const char *name, const double *v, long n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(v, sizeof(double), (size_t)n, f) != (size_t)n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc < 15) {
    fprintf(stderr, "usage: %s DIR H W Cin Cout p0 p1 D depth nb B mlp_ratio sparsity fraction [seed]\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  afno_ref_cfg c = {atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]),
                    atoi(argv[8]), atoi(argv[9]), atoi(argv[10]), atof(argv[12]), atof(argv[13]), atof(argv[14])};
  int B = atoi(argv[11]);
  rng_state = argc > 15 ? strtoull(argv[15], NULL, 10) : 1;
  if (c.H % c.p0 || c.W % c.p1 || c.D % c.nb) {
    fprintf(stderr, "shape not divisible\n");
    return 2;
  }
  int P = afno_ref_nparams(&c), N = afno_ref_tokens(&c), bs = c.D / c.nb, Hd = afno_ref_hidden(&c);
  double **p = afno_ref_params_new(&c);
  char path[4096], name[64];
  snprintf(path, sizeof path, "%s/params.txt", dir);
  FILE *pl = fopen(path, "w");
  if (!pl) return fprintf(stderr, "cannot write %s\n", path), 1;
  for (int i = 0; i < P; i++) {
    int nd;
    long shape[4], n;
    afno_ref_param_shape(&c, i, name, &nd, shape, &n);
    /* scales: unit-ish activations everywhere */
    double scale, offset = 0;
    int k = i >= 3 && i < P - 1 ? (i - 3) % 12 : -1;
    if (i == 0) scale = 1.0 / sqrt((double)c.Cin * c.p0 * c.p1);
    else if (i == 1 || i == 2) scale = 0.3;
    else if (i == P - 1) scale = 1.0 / sqrt((double)c.D);
    else if (k == 0 || k == 6) scale = 0.2, offset = 1.0; /* LayerNorm gains */
    else if (k == 2 || k == 4) scale = 1.5 / sqrt((double)bs); /* spectral weights */
    else if (k == 3 || k == 5) scale = 0.3;                    /* spectral biases */
    else if (k == 8) scale = 1.7 / sqrt((double)c.D);
    else if (k == 10) scale = 1.7 / sqrt((double)Hd);
    else scale = 0.2;
    for (long j = 0; j < n; j++) p[i][j] = offset + scale * unit();
    snprintf(path, sizeof path, "p%03d.bin", i);
    dump(dir, path, p[i], n);
    fprintf(pl, "%s", name);
    for (int d = 0; d < nd; d++) fprintf(pl, " %ld", shape[d]);
    fprintf(pl, "\n");
  }
  fclose(pl);

  long nin = (long)B * c.Cin * c.H * c.W, nout = (long)B * c.Cout * c.H * c.W, ntok = (long)B * N * c.D;
  double *img = afno_ref_alloc_((size_t)nin, sizeof(double)), *out = afno_ref_alloc_((size_t)nout, sizeof(double));
  double *tok = afno_ref_alloc_((size_t)ntok, sizeof(double)), *fo = afno_ref_alloc_((size_t)ntok, sizeof(double));
  for (long j = 0; j < nin; j++) img[j] = unit();
  for (long j = 0; j < ntok; j++) tok[j] = 1.7 * unit();
  afno_ref_forward(&c, B, img, (const double *const *)p, out);
  afno_ref_filter(&c, B, tok, p[5], p[6], p[7], p[8], fo);
  for (long j = 0; j < ntok; j++) fo[j] -= tok[j]; /* the spectral part alone */
  /* central differences of mse(forward(img), target) at a few elements of every parameter */
  double *target = afno_ref_alloc_((size_t)nout, sizeof(double));
  for (long j = 0; j < nout; j++) target[j] = unit();
  dump(dir, "target.bin", target, nout);
  snprintf(path, sizeof path, "%s/fd.txt", dir);
  FILE *fd = fopen(path, "w");
  if (!fd) return fprintf(stderr, "cannot write %s\n", path), 1;
  for (int i = 0; i < P; i++) {
    long n;
    afno_ref_param_shape(&c, i, name, NULL, NULL, &n);
    long at[3] = {0, n / 2, n - 1};
    for (int k = 0; k < 3; k++)
      fprintf(fd, "%d %ld %.17g\n", i, at[k], afno_ref_fd(&c, B, img, p, target, i, at[k], 1e-6));
  }
  fclose(fd);
  free(target);
  dump(dir, "img.bin", img, nin);
  dump(dir, "out.bin", out, nout);
  dump(dir, "ftok.bin", tok, ntok);
  dump(dir, "fout.bin", fo, ntok);
  snprintf(path, sizeof path, "%s/cfg.txt", dir);
  FILE *f = fopen(path, "w");
  if (!f) return fprintf(stderr, "cannot write %s\n", path), 1;
  fprintf(f, "%d %d %d %d %d %d %d %d %d %d %.17g %.17g %.17g\n", c.H, c.W, c.Cin, c.Cout, c.p0, c.p1, c.D, c.depth,
          c.nb, B, c.mlp_ratio, c.sparsity, c.fraction);
  fclose(f);
  printf("wrote %s: %d parameters (%ld values)\n", dir, P, afno_ref_param_count(&c));
  afno_ref_params_free(&c, p);
  free(img), free(out), free(tok), free(fo);
  return 0;
}
