/* examples/picture: the colour map, PNG write/read round trips (with libpng
 * read directly for tEXt and for the colour types picture_read_png expands),
 * the panel layout documented at the top of examples/picture.c, and the error
 * paths: missing, garbage and every truncation of a PNG, unwritable paths, bad
 * sizes, and a write that runs into RLIMIT_FSIZE. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../examples/picture.h"
#include "cunit_main.h"

/* ---- helpers -------------------------------------------------------------------- */

static char dir[64];

static const char *in_dir(const char *name) {
  static char path[2][256];
  static int turn;
  turn ^= 1;
  snprintf(path[turn], sizeof path[turn], "%s/%.180s", dir, name);
  return path[turn];
}

static int make_dir(void) {
  strcpy(dir, "/tmp/test_picture_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) remove(in_dir(e->d_name));
  closedir(d);
  return rmdir(dir);
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint8_t rand_byte(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint8_t)(rng >> 24);
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  rewind(fp);
  uint8_t *buf = malloc((size_t)n + 1);
  *len = buf ? fread(buf, 1, (size_t)n, fp) : 0;
  fclose(fp);
  return buf;
}

static int spill(const char *path, const void *data, size_t len) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return -1;
  size_t put = fwrite(data, 1, len, fp);
  return fclose(fp) == 0 && put == len ? 0 : -1;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static int same_colour(const uint8_t *a, const uint8_t *b) { return a[0] == b[0] && a[1] == b[1] && a[2] == b[2]; }

/* ---- colour map ------------------------------------------------------------------ */

static void test_colour_identities(void) {
  uint8_t c[3], d[3];
  const uint8_t white[3] = {255, 255, 255}, black[3] = {0, 0, 0};
  picture_colour(0.0f, 1.0f, c);
  CU_ASSERT(same_colour(c, white));
  picture_colour(-0.0f, 3.0f, c);
  CU_ASSERT(same_colour(c, white));
  picture_colour(NAN, 1.0f, c);
  CU_ASSERT(same_colour(c, black));
  picture_colour(NAN, 0.0f, c);
  CU_ASSERT(same_colour(c, black));
  /* a useless limit: finite values are white, no division by zero */
  const float bad_vmax[] = {0.0f, -1.0f, NAN, INFINITY, -INFINITY};
  for (int k = 0; k < 5; k++) {
    picture_colour(0.7f, bad_vmax[k], c);
    CU_ASSERT(same_colour(c, white));
    picture_colour(-1e30f, bad_vmax[k], c);
    CU_ASSERT(same_colour(c, white));
  }
  /* the colour depends on v / vmax only, and clamps beyond +-vmax */
  picture_colour(0.5f, 1.0f, c), picture_colour(1.0f, 2.0f, d);
  CU_ASSERT(same_colour(c, d));
  picture_colour(1.0f, 1.0f, c);
  const float beyond[] = {1.0001f, 5.0f, 1e30f, INFINITY};
  for (int k = 0; k < 4; k++) {
    picture_colour(beyond[k], 1.0f, d);
    CU_ASSERT(same_colour(c, d));
  }
  picture_colour(-1.0f, 1.0f, c), picture_colour(-7.0f, 1.0f, d);
  CU_ASSERT(same_colour(c, d));
  picture_colour(-INFINITY, 1.0f, d);
  CU_ASSERT(same_colour(c, d));
}

static void test_colour_shape(void) {
  uint8_t prev[3] = {255, 255, 255}, c[3], m[3];
  int jumps = 0, bad_order = 0, bad_sign = 0, bad_mirror = 0;
  for (int s = 1; s <= 600; s++) {
    float v = (float)s / 600.0f;
    picture_colour(v, 1.0f, c);
    picture_colour(-v, 1.0f, m);
    for (int k = 0; k < 3; k++) {
      bad_order += c[k] > prev[k];          /* every channel falls with |v|: darker away from 0 */
      jumps += abs(c[k] - prev[k]) > 2;      /* continuous: small steps, no seams */
    }
    /* red above 0, blue below (strictly once the step from white exceeds rounding) */
    bad_sign += !(c[0] >= c[2] && m[2] >= m[0]) || (s > 1 && !(c[0] > c[2] && m[2] > m[0]));
    bad_mirror += !(m[0] == c[2] && m[1] == c[1] && m[2] == c[0]); /* colour(-v) = colour(v), red <-> blue */
    memcpy(prev, c, 3);
  }
  CU_ASSERT_EQUAL(bad_order, 0);
  CU_ASSERT_EQUAL(jumps, 0);
  CU_ASSERT_EQUAL(bad_sign, 0);
  CU_ASSERT_EQUAL(bad_mirror, 0);
  picture_colour(1.0f, 1.0f, c); /* dark red end, dark blue end */
  CU_ASSERT(c[0] > 64 && c[0] < 160 && c[1] < 32 && c[2] < 32);
  picture_colour(-1.0f, 1.0f, c);
  CU_ASSERT(c[2] > 64 && c[2] < 160 && c[1] < 32 && c[0] < 32);
}

/* ---- libpng used directly: tEXt read-back, other colour types ------------------- */

static int read_all(png_structp png, png_infop info, FILE *fp) {
  if (setjmp(png_jmpbuf(png))) return -1;
  png_init_io(png, fp);
  png_read_png(png, info, PNG_TRANSFORM_IDENTITY, NULL);
  return 0;
}

/* The tEXt value of key in the PNG at path, copied to out; 0 if found. */
static int text_of(const char *path, const char *key, char *out, size_t cap) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return -1;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  int rc = read_all(png, info, fp);
  png_textp t = NULL;
  int nt = rc == 0 ? png_get_text(png, info, &t, NULL) : 0;
  rc = -1;
  for (int i = 0; i < nt; i++)
    if (!strcmp(t[i].key, key)) snprintf(out, cap, "%s", t[i].text), rc = 0;
  png_destroy_read_struct(&png, &info, NULL);
  fclose(fp);
  return rc;
}

typedef struct {
  int w, h, depth, type, interlace;
  const uint8_t *data; /* packed rows of rowbytes each */
  size_t rowbytes;
  const png_color *pal;
  int npal;
  const uint8_t *trns;
  int ntrns;
} raw_png;

static int raw_body(png_structp png, png_infop info, FILE *fp, const raw_png *r, png_bytep *rows) {
  if (setjmp(png_jmpbuf(png))) return -1;
  png_init_io(png, fp);
  png_set_IHDR(png, info, (png_uint_32)r->w, (png_uint_32)r->h, r->depth, r->type, r->interlace,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (r->npal) png_set_PLTE(png, info, r->pal, r->npal);
  if (r->ntrns) png_set_tRNS(png, info, r->trns, r->ntrns, NULL);
  png_write_info(png, info);
  png_write_image(png, rows); /* does the interlace passes itself */
  png_write_end(png, NULL);
  return 0;
}

static int write_raw(const char *path, const raw_png *r) {
  FILE *fp = fopen(path, "wb");
  png_bytep rows[64];
  if (!fp || r->h > 64) return -1;
  for (int y = 0; y < r->h; y++) rows[y] = (png_bytep)r->data + (size_t)y * r->rowbytes;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  int rc = raw_body(png, info, fp, r, rows);
  png_destroy_write_struct(&png, &info);
  return fclose(fp) == 0 ? rc : -1;
}

/* Decode path with picture_read_png and compare with the expected w x h RGB. */
static void check_decodes_to(const char *path, int w, int h, const uint8_t *want) {
  int64_t gw = 0, gh = 0;
  uint8_t *got = NULL;
  ASSERT_OK(picture_read_png(path, &gw, &gh, &got));
  CU_ASSERT_EQUAL(gw, w);
  CU_ASSERT_EQUAL(gh, h);
  CU_ASSERT(got && gw == w && gh == h && memcmp(got, want, (size_t)w * h * 3) == 0);
  free(got);
}

/* ---- PNG round trips ---------------------------------------------------------------- */

static void test_round_trip(void) {
  const int sizes[][2] = {{1, 1}, {37, 13}, {3, 200}, {256, 1}};
  const char *kv[] = {"Title", "vorticity, step 120", "Comment", "vmax = 1.5e-3; rank 0/4", "Software", "distmgr"};
  for (int s = 0; s < 4; s++) {
    int w = sizes[s][0], h = sizes[s][1];
    uint8_t *img = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) img[i] = rand_byte();
    const char *path = in_dir("round.png");
    ASSERT_OK(picture_write_png(path, w, h, img, kv, s == 0 ? 0 : 3));
    CU_ASSERT(!exists(in_dir("round.png.tmp")));
    check_decodes_to(path, w, h, img);
    char value[128] = "";
    if (s > 0) {
      CU_ASSERT(text_of(path, "Title", value, sizeof value) == 0 && !strcmp(value, kv[1]));
      CU_ASSERT(text_of(path, "Comment", value, sizeof value) == 0 && !strcmp(value, kv[3]));
      CU_ASSERT(text_of(path, "Software", value, sizeof value) == 0 && !strcmp(value, kv[5]));
    } else
      CU_ASSERT(text_of(path, "Title", value, sizeof value) != 0); /* none asked for: none written */
    free(img);
  }
}

/* picture_read_png expands gray, low bit depths, palettes (with tRNS), alpha,
 * 16 bits and interlacing to plain 8-bit RGB. */
static void test_read_expands(void) {
  const char *path = in_dir("raw.png");
  uint8_t want[9 * 7 * 3];
  { /* gray 8 */
    const uint8_t px[6] = {0, 17, 255, 128, 3, 200};
    raw_png r = {3, 2, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, px, 3, NULL, 0, NULL, 0};
    for (int i = 0; i < 6; i++) memset(want + 3 * i, px[i], 3);
    CU_ASSERT_EQUAL(write_raw(path, &r), 0);
    check_decodes_to(path, 3, 2, want);
  }
  { /* gray 1 bit: 10 pixels a row, MSB first */
    const uint8_t px[4] = {0xA5, 0x80, 0x3C, 0x40};
    raw_png r = {10, 2, 1, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, px, 2, NULL, 0, NULL, 0};
    for (int y = 0; y < 2; y++)
      for (int x = 0; x < 10; x++) memset(want + 3 * (y * 10 + x), (px[2 * y + x / 8] >> (7 - x % 8) & 1) ? 255 : 0, 3);
    CU_ASSERT_EQUAL(write_raw(path, &r), 0);
    check_decodes_to(path, 10, 2, want);
  }
  { /* palette with a transparent entry: the colour stays, alpha goes */
    const png_color pal[3] = {{10, 20, 30}, {200, 100, 0}, {1, 2, 3}};
    const uint8_t trns[1] = {0}, px[8] = {0, 1, 2, 1, 2, 2, 0, 0};
    raw_png r = {4, 2, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, px, 4, pal, 3, trns, 1};
    for (int i = 0; i < 8; i++)
      want[3 * i] = pal[px[i]].red, want[3 * i + 1] = pal[px[i]].green, want[3 * i + 2] = pal[px[i]].blue;
    CU_ASSERT_EQUAL(write_raw(path, &r), 0);
    check_decodes_to(path, 4, 2, want);
  }
  { /* RGBA, 16 bits big-endian; b * 257 so that chopping and scaling agree */
    uint8_t px[2 * 2 * 8];
    for (int i = 0; i < 4; i++)
      for (int k = 0; k < 4; k++) {
        uint8_t b = rand_byte();
        px[8 * i + 2 * k] = px[8 * i + 2 * k + 1] = b;
        if (k < 3) want[3 * i + k] = b;
      }
    raw_png r = {2, 2, 16, PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_NONE, px, 16, NULL, 0, NULL, 0};
    CU_ASSERT_EQUAL(write_raw(path, &r), 0);
    check_decodes_to(path, 2, 2, want);
  }
  { /* gray + alpha */
    const uint8_t px[4] = {50, 0, 250, 255};
    raw_png r = {2, 1, 8, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_INTERLACE_NONE, px, 4, NULL, 0, NULL, 0};
    memset(want, 50, 3), memset(want + 3, 250, 3);
    CU_ASSERT_EQUAL(write_raw(path, &r), 0);
    check_decodes_to(path, 2, 1, want);
  }
  { /* Adam7-interlaced RGB */
    uint8_t px[9 * 7 * 3];
    for (int i = 0; i < 9 * 7 * 3; i++) px[i] = want[i] = rand_byte();
    raw_png r = {9, 7, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_ADAM7, px, 27, NULL, 0, NULL, 0};
    CU_ASSERT_EQUAL(write_raw(path, &r), 0);
    check_decodes_to(path, 9, 7, want);
  }
}

static void test_overwrite(void) {
  const char *path = in_dir("over.png");
  uint8_t a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, b[3] = {9, 9, 9};
  ASSERT_OK(picture_write_png(path, 2, 2, a, NULL, 0));
  ASSERT_OK(picture_write_png(path, 1, 1, b, NULL, 0)); /* rename replaces the old file */
  check_decodes_to(path, 1, 1, b);
  CU_ASSERT(!exists(in_dir("over.png.tmp")));
}

/* ---- panels ------------------------------------------------------------------------ */

/* The layout at the top of examples/picture.c. */
enum { M = 8, N = 5, Z = 3, P = N * Z, PITCH = P + 6 };
static int64_t panel_x(int64_t L, int c) { return M + L + 1 + c * PITCH; }
static int64_t panel_y(int64_t T, int r) { return M + T + 1 + r * PITCH; }

static float fields_data[6][N * N];
static const float *fields[6];
static const float vmax[3] = {1.0f, 0.25f, 3.0f};

static void make_fields(void) {
  for (int k = 0; k < 6; k++) {
    for (int i = 0; i < N * N; i++) fields_data[k][i] = ((float)(i % 7) - 3.0f) * 0.1f * (float)(k + 1) * vmax[k % 3];
    fields[k] = fields_data[k];
  }
  fields_data[4][12] = NAN;       /* drawn black */
  fields_data[2][0] = 1e6f;       /* clamped */
}

static uint8_t *panels_image(const char *name, const char *const *cl, const char *const *rl, int64_t *w, int64_t *h) {
  uint8_t *img = NULL;
  ASSERT_OK(picture_panels(in_dir(name), 2, 3, N, fields, vmax, Z, cl, rl));
  ASSERT_OK(picture_read_png(in_dir(name), w, h, &img));
  return img;
}

static void test_panels_pixels(void) {
  make_fields();
  int64_t w, h;
  uint8_t *img = panels_image("plain.png", NULL, NULL, &w, &h);
  if (!img) return;
  CU_ASSERT_EQUAL(w, M + 3 * PITCH - 4 + M);
  CU_ASSERT_EQUAL(h, M + 2 * PITCH - 4 + 23 + M);
  const uint8_t grey[3] = {128, 128, 128}, white[3] = {255, 255, 255};
  int wrong = 0, frame = 0;
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 3; c++) {
      int64_t x0 = panel_x(0, c), y0 = panel_y(0, r);
      for (int y = 0; y < P; y++)
        for (int x = 0; x < P; x++) {
          uint8_t want[3];
          picture_colour(fields[r * 3 + c][(y / Z) * N + x / Z], vmax[c], want);
          wrong += !same_colour(img + 3 * ((y0 + y) * w + x0 + x), want);
        }
      for (int k = -1; k <= P; k++) /* the frame: top, bottom, left, right */
        frame += same_colour(img + 3 * ((y0 - 1) * w + x0 + k), grey) +
                 same_colour(img + 3 * ((y0 + P) * w + x0 + k), grey) +
                 same_colour(img + 3 * ((y0 + k) * w + x0 - 1), grey) +
                 same_colour(img + 3 * ((y0 + k) * w + x0 + P), grey);
    }
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(frame, 6 * 4 * (P + 2));
  CU_ASSERT(same_colour(img, white));                                      /* margin */
  CU_ASSERT(same_colour(img + 3 * (panel_y(0, 1) * w + panel_x(0, 1) - 3), white)); /* gap between panels */
  free(img);
}

/* The bar under column c runs from -vmax (left) to +vmax (right), white-ish in the middle. */
static void test_panels_bar(void) {
  make_fields();
  int64_t w, h;
  uint8_t *img = panels_image("bar.png", NULL, NULL, &w, &h);
  if (!img) return;
  int64_t y = M + 2 * PITCH - 4 + 4 + 3, bad = 0; /* a row inside the bar */
  for (int c = 0; c < 3; c++)
    for (int k = 0; k < P; k++) {
      uint8_t want[3];
      const uint8_t *got = img + 3 * (y * w + panel_x(0, c) + k);
      picture_colour(vmax[c] * (2.0f * ((float)k + 0.5f) / P - 1.0f), vmax[c], want);
      for (int ch = 0; ch < 3; ch++) bad += abs(got[ch] - want[ch]) > 1;
    }
  CU_ASSERT_EQUAL(bad, 0);
  const uint8_t *left = img + 3 * (y * w + panel_x(0, 0)), *mid = img + 3 * (y * w + panel_x(0, 0) + P / 2),
                *right = img + 3 * (y * w + panel_x(0, 0) + P - 1);
  CU_ASSERT(left[2] > left[0] && right[0] > right[2] && mid[0] == 255 && mid[2] == 255);
  /* the "+-vmax" text: some black below the bar of each column */
  for (int c = 0; c < 3; c++) {
    int black = 0;
    for (int64_t yy = y + 9; yy < h - M; yy++)
      for (int64_t x = panel_x(0, c) - 1; x <= panel_x(0, c) + P; x++) black += img[3 * (yy * w + x)] == 0;
    CU_ASSERT(black > 10);
  }
  free(img);
}

/* Which pixels differ between two same-sized pictures: their bounding box, or -1 if none. */
static int diff_box(const uint8_t *a, const uint8_t *b, int64_t w, int64_t h, int64_t box[4]) {
  box[0] = box[1] = INT64_MAX, box[2] = box[3] = -1;
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++)
      if (!same_colour(a + 3 * (y * w + x), b + 3 * (y * w + x))) {
        box[0] = x < box[0] ? x : box[0], box[1] = y < box[1] ? y : box[1];
        box[2] = x > box[2] ? x : box[2], box[3] = y > box[3] ? y : box[3];
      }
  return box[2] < 0 ? -1 : 0;
}

static void test_panels_labels(void) {
  make_fields();
  const char *blank_c[] = {"", "", ""}, *cols[] = {"TRUTH", "pred", "err: 1.5%/(x)=+-"};
  const char *upper_c[] = {"", "PRED", ""}, *lower_c[] = {"", "pred", ""}, *odd_c[] = {"", "#~", ""};
  const char *blank_r[] = {"    ", "    "}, *rows[] = {"T=0", "T=10"};
  int64_t w, h, w2, h2, box[4];
  uint8_t *plain = panels_image("lab0.png", blank_c, blank_r, &w, &h);
  uint8_t *lab = panels_image("lab1.png", cols, blank_r, &w2, &h2);
  const int64_t T = 12, L = 6 * 4 + 4;
  if (plain && lab && w == w2 && h == h2) { /* column labels: only the label row changes */
    CU_ASSERT_EQUAL(diff_box(plain, lab, w, h, box), 0);
    CU_ASSERT(box[1] >= M && box[3] < M + 7 && box[0] >= M + L && box[2] < w - M);
  } else
    CU_FAIL("column-labelled picture");
  free(lab);
  lab = panels_image("lab2.png", blank_c, rows, &w2, &h2);
  if (plain && lab && w == w2 && h == h2) { /* row labels: only the label column changes */
    CU_ASSERT_EQUAL(diff_box(plain, lab, w, h, box), 0);
    CU_ASSERT(box[0] >= M && box[2] < M + L && box[1] > M + T && box[3] < panel_y(T, 1) + P);
  } else
    CU_FAIL("row-labelled picture");
  free(lab);
  uint8_t *up = panels_image("up.png", upper_c, blank_r, &w, &h);
  uint8_t *low = panels_image("low.png", lower_c, blank_r, &w2, &h2);
  CU_ASSERT(up && low && w == w2 && h == h2 && memcmp(up, low, (size_t)(w * h * 3)) == 0); /* lower case = upper case */
  free(up), free(low);
  uint8_t *odd = panels_image("odd.png", odd_c, blank_r, &w2, &h2);
  CU_ASSERT(plain && odd && memcmp(plain, odd, (size_t)(w * h * 3)) == 0); /* unknown characters: blank */
  free(odd), free(plain);
}

static void test_panels_errors(void) {
  make_fields();
  const char *path = in_dir("err.png");
  const float *holes[6] = {fields[0], fields[1], NULL, fields[3], fields[4], fields[5]};
  const char *bad_labels[] = {"A", NULL, "C"};
  ASSERT_STATUS(picture_panels(path, 0, 3, N, fields, vmax, Z, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("nrow = 0");
  ASSERT_STATUS(picture_panels(path, 2, 0, N, fields, vmax, Z, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 2, 3, 0, fields, vmax, Z, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 2, 3, N, fields, vmax, 0, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("zoom = 0");
  ASSERT_STATUS(picture_panels(path, 2, 3, N, fields, vmax, 65, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(NULL, 2, 3, N, fields, vmax, Z, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 2, 3, N, NULL, vmax, Z, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 2, 3, N, fields, NULL, Z, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 2, 3, N, holes, vmax, Z, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("fields[2]");
  ASSERT_STATUS(picture_panels(path, 2, 3, N, fields, vmax, Z, bad_labels, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("col_labels[1]");
  /* sizes whose products would overflow, or merely be absurd, fail before any allocation */
  ASSERT_STATUS(picture_panels(path, 2, 3, (int64_t)1 << 40, fields, vmax, Z, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 2, 3, INT64_MAX, fields, vmax, 64, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 1000000, 1000000, 1, fields, vmax, 1, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 1, 1, 20000, fields, vmax, 40, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_panels(path, 1, 1, 10000, fields, vmax, 20, NULL, NULL), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS("too large");
  CU_ASSERT(!exists(path));
}

/* ---- error paths of write and read ---------------------------------------------------------- */

static void test_write_errors(void) {
  uint8_t px[12] = {0};
  const char *path = in_dir("bad.png");
  ASSERT_STATUS(picture_write_png("/nonexistent-dir-of-test_picture/x.png", 2, 2, px, NULL, 0), DIST_ERR_IO);
  ASSERT_MSG_HAS("/nonexistent-dir-of-test_picture/x.png");
  ASSERT_MSG_HAS(strerror(ENOENT));
  ASSERT_STATUS(picture_write_png(path, 0, 2, px, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_MSG_HAS(path);
  ASSERT_STATUS(picture_write_png(path, 2, -1, px, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_write_png(path, INT64_MAX, INT64_MAX, px, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_write_png(path, (int64_t)1 << 32, 1, px, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_write_png(path, 2, 2, NULL, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_write_png(NULL, 2, 2, px, NULL, 0), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_write_png(path, 2, 2, px, NULL, 1), DIST_ERR_INVALID_ARGUMENT);
  const char *bad_key[] = {"", "value"}, *long_key[] = {"K123456789012345678901234567890123456789012345678901234567890"
                                                        "12345678901234567890", "v"},
             *spaced[] = {"two  spaces", "v"}, *null_value[] = {"Title", NULL};
  ASSERT_STATUS(picture_write_png(path, 2, 2, px, bad_key, 1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_write_png(path, 2, 2, px, long_key, 1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_write_png(path, 2, 2, px, spaced, 1), DIST_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(picture_write_png(path, 2, 2, px, null_value, 1), DIST_ERR_INVALID_ARGUMENT);
  CU_ASSERT(!exists(path) && !exists(in_dir("bad.png.tmp")));
}

/* A full disk, played by RLIMIT_FSIZE: the write fails with EFBIG (SIGXFSZ
 * ignored), the .tmp file goes, the old picture at the path stays. */
static void test_disk_full(void) {
  const char *path = in_dir("full.png");
  uint8_t old[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ASSERT_OK(picture_write_png(path, 2, 2, old, NULL, 0));
  size_t len0 = 0, len1 = 0;
  uint8_t *before = slurp(path, &len0);
  enum { W = 200, H = 200 };
  uint8_t *noise = malloc(W * H * 3);
  for (int i = 0; i < W * H * 3; i++) noise[i] = rand_byte(); /* incompressible: well above the limit */
  struct rlimit saved, small;
  CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_FSIZE, &saved), 0);
  small = saved;
  small.rlim_cur = 4096;
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  CU_ASSERT_EQUAL(setrlimit(RLIMIT_FSIZE, &small), 0);
  dist_status st = picture_write_png(path, W, H, noise, NULL, 0);
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  CU_ASSERT_EQUAL(st, DIST_ERR_IO);
  ASSERT_MSG_HAS(path);
  ASSERT_MSG_HAS(strerror(EFBIG));
  CU_ASSERT(!exists(in_dir("full.png.tmp")));
  uint8_t *after = slurp(path, &len1);
  CU_ASSERT(before && after && len0 == len1 && memcmp(before, after, len0) == 0);
  free(before), free(after), free(noise);
}

static void test_read_errors(void) {
  int64_t w = -1, h = -1;
  uint8_t *px = (uint8_t *)&w;
  const char *missing = in_dir("missing.png");
  ASSERT_STATUS(picture_read_png(missing, &w, &h, &px), DIST_ERR_IO);
  ASSERT_MSG_HAS(missing);
  CU_ASSERT(px == NULL);
  ASSERT_STATUS(picture_read_png(dir, &w, &h, &px), DIST_ERR_IO); /* a directory */
  ASSERT_STATUS(picture_read_png(NULL, &w, &h, &px), DIST_ERR_INVALID_ARGUMENT);
  uint8_t junk[300];
  for (int i = 0; i < 300; i++) junk[i] = rand_byte();
  const char *garbage = in_dir("garbage.png");
  CU_ASSERT_EQUAL(spill(garbage, junk, sizeof junk), 0);
  ASSERT_STATUS(picture_read_png(garbage, &w, &h, &px), DIST_ERR_CORRUPT);
  ASSERT_MSG_HAS(garbage);
  memcpy(junk, "\x89PNG\r\n\x1a\n", 8); /* a signature, then noise */
  CU_ASSERT_EQUAL(spill(garbage, junk, sizeof junk), 0);
  ASSERT_STATUS(picture_read_png(garbage, &w, &h, &px), DIST_ERR_CORRUPT);
  ASSERT_MSG_HAS(garbage);
  CU_ASSERT_EQUAL(spill(garbage, junk, 0), 0);
  ASSERT_STATUS(picture_read_png(garbage, &w, &h, &px), DIST_ERR_CORRUPT);
  CU_ASSERT(px == NULL);
}

/* Every proper prefix of a small PNG (with a tEXt chunk) is an error, never a crash or a success. */
static void test_truncated(void) {
  uint8_t img[5 * 4 * 3];
  for (int i = 0; i < 60; i++) img[i] = rand_byte();
  const char *kv[] = {"Comment", "truncate me"};
  const char *full = in_dir("whole.png"), *cut = in_dir("cut.png");
  ASSERT_OK(picture_write_png(full, 5, 4, img, kv, 1));
  size_t len = 0;
  uint8_t *bytes = slurp(full, &len);
  CU_ASSERT_FATAL(bytes != NULL && len > 60);
  int accepted = 0, unnamed = 0;
  for (size_t k = 0; k < len; k++) {
    int64_t w, h;
    uint8_t *px = NULL;
    CU_ASSERT_EQUAL(spill(cut, bytes, k), 0);
    dist_status st = picture_read_png(cut, &w, &h, &px);
    accepted += st != DIST_ERR_CORRUPT;
    unnamed += strstr(dist_last_error(), cut) == NULL;
    free(px);
  }
  CU_ASSERT_EQUAL(accepted, 0);
  CU_ASSERT_EQUAL(unnamed, 0);
  check_decodes_to(full, 5, 4, img);
  free(bytes);
}

static CU_TestInfo tests[] = {
    {"colour map: white at 0, clamps, NaN black, useless vmax", test_colour_identities},
    {"colour map: monotone in |v|, red/blue mirror, continuous", test_colour_shape},
    {"write/read round trip, tEXt chunks", test_round_trip},
    {"read expands gray/palette/alpha/16-bit/interlaced", test_read_expands},
    {"write replaces an existing file", test_overwrite},
    {"panels: pixels follow picture_colour and the layout", test_panels_pixels},
    {"panels: colour bar and its vmax text", test_panels_bar},
    {"panels: labels change only their band", test_panels_labels},
    {"panels: bad input", test_panels_errors},
    {"write errors", test_write_errors},
    {"disk full (RLIMIT_FSIZE)", test_disk_full},
    {"read errors: missing, directory, garbage, empty", test_read_errors},
    {"read errors: every truncation", test_truncated},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"picture", make_dir, remove_dir, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return cunit_run(suites, "test_picture", 0) != 0; }
