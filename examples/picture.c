/* Pictures of the surrogate pipeline (see picture.h): a diverging colour map,
 * PNG write/read with libpng, and a labelled grid of panels.
 *
 * Layout of picture_panels, in pixels (tests/test_picture.c relies on it):
 *   margin M = 8 on every side;
 *   label row: T = 12 high when col_labels is given (text rows M .. M+6), else 0;
 *   label column: L = 6 * (longest row label, at most 64) + 4 wide when
 *   row_labels is given (text from x = M), else 0;
 *   P = n * zoom, pitch = P + 6 (1-pixel grey frame each side, 4 white gap);
 *   panel (r, c) interior starts at x = M + L + 1 + c * pitch,
 *                                   y = M + T + 1 + r * pitch;
 *   under the grid (bottom g = M + T + nrow * pitch - 4): a framed colour bar
 *   of 8 rows at y = g + 4, pixel k of P showing -vmax + 2 vmax (k + 0.5) / P,
 *   then "+-vmax" (printf %.3g) at y = g + 16; height g + 23 + M. */
#include "picture.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- colour map ---------------------------------------------------------------- */

/* The positive half, at |v| / vmax = 0, 1/3, 2/3, 1 (white, light red, red,
 * dark red); the negative half is the same with red and blue swapped, so the
 * map is exactly symmetric and every channel falls monotonically with |v|. */
static const uint8_t warm[4][3] = {{255, 255, 255}, {240, 176, 160}, {208, 64, 48}, {112, 0, 16}};

void picture_colour(float v, float vmax, uint8_t rgb[3]) {
  if (isnan(v)) {
    rgb[0] = rgb[1] = rgb[2] = 0;
    return;
  }
  float t; /* v / vmax clamped to [-1, 1]; a useless vmax leaves finite v white */
  if (isinf(v)) t = v > 0 ? 1.0f : -1.0f;
  else if (!(vmax > 0) || isinf(vmax)) t = 0;
  else t = fmaxf(-1.0f, fminf(1.0f, v / vmax));
  float s = fabsf(t) * 3.0f;
  int i = s >= 3.0f ? 2 : (int)s;
  float f = s - (float)i;
  uint8_t c[3];
  for (int k = 0; k < 3; k++) c[k] = (uint8_t)lrintf((float)warm[i][k] + f * (float)(warm[i + 1][k] - warm[i][k]));
  rgb[0] = t < 0 ? c[2] : c[0];
  rgb[1] = c[1];
  rgb[2] = t < 0 ? c[0] : c[2];
}

/* ---- libpng plumbing ------------------------------------------------------------- */

/* Everything a read or write touches after setjmp lives here, and libpng holds
 * a pointer to it (io and error pointer), so the values survive a longjmp. */
typedef struct {
  FILE *fp;
  int err;        /* errno of a failed stdio call; 0 when libpng itself complained */
  int nomem;      /* our own allocation failed */
  char msg[160];  /* libpng's message */
  uint8_t *pix;   /* read: the decoded image */
  png_bytep *rows;
} png_job;

static void on_error(png_structp png, png_const_charp msg) {
  png_job *job = png_get_error_ptr(png);
  snprintf(job->msg, sizeof job->msg, "%s", msg);
  png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; } /* not failures */

/* Own stdio callbacks so that errno (EFBIG, ENOSPC, ...) reaches the message. */
static void write_data(png_structp png, png_bytep data, size_t len) {
  png_job *job = png_get_io_ptr(png);
  errno = 0;
  if (fwrite(data, 1, len, job->fp) != len) {
    job->err = errno ? errno : EIO;
    png_error(png, "write failed");
  }
}

static void flush_data(png_structp png) {
  png_job *job = png_get_io_ptr(png);
  errno = 0;
  if (fflush(job->fp) != 0) {
    job->err = errno ? errno : EIO;
    png_error(png, "flush failed");
  }
}

static void read_data(png_structp png, png_bytep data, size_t len) {
  png_job *job = png_get_io_ptr(png);
  errno = 0;
  if (fread(data, 1, len, job->fp) == len) return;
  if (ferror(job->fp)) {
    job->err = errno ? errno : EIO;
    png_error(png, "read failed");
  }
  png_error(png, "unexpected end of file (truncated)");
}

/* ---- writing ----------------------------------------------------------------------- */

/* PNG keywords: 1-79 printable Latin-1 characters, no leading, trailing or
 * double spaces (libpng would otherwise fail half-way through the file). */
static int keyword_ok(const char *key) {
  size_t len = strlen(key);
  if (len < 1 || len > 79 || key[0] == ' ' || key[len - 1] == ' ') return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)key[i];
    if (ch < 32 || (ch > 126 && ch < 161) || (ch == ' ' && key[i + 1] == ' ')) return 0;
  }
  return 1;
}

/* libpng's default limit on either side; rows of 3 bytes must also fit size_t. */
#define SIDE_MAX 1000000

static dist_status check_write_args(const char *path, int64_t w, int64_t h, const uint8_t *rgb,
                                    const char *const *kv, int ntext) {
  if (!path || !rgb) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_write_png: NULL path or pixels");
  if (w < 1 || h < 1 || w > SIDE_MAX || h > SIDE_MAX || (uint64_t)w > SIZE_MAX / 3 / (uint64_t)h)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_write_png: '%s': size %lld x %lld (need 1 .. %d a side)",
                          path, (long long)w, (long long)h, SIDE_MAX);
  if (ntext < 0 || (ntext > 0 && !kv))
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_write_png: '%s': %d text pairs from %s", path, ntext,
                          kv ? "a list" : "NULL");
  for (int i = 0; i < ntext; i++)
    if (!kv[2 * i] || !kv[2 * i + 1] || !keyword_ok(kv[2 * i]))
      return dist_set_error(DIST_ERR_INVALID_ARGUMENT,
                            "picture_write_png: '%s': text pair %d: key '%s' (need 1-79 printable Latin-1 "
                            "characters, single inner spaces) and a non-NULL value", path, i,
                            kv[2 * i] ? kv[2 * i] : "(null)");
  return DIST_SUCCESS;
}

/* The only function that calls setjmp on writes: no local changes after it. */
static int write_body(png_structp png, png_infop info, const uint8_t *rgb, int64_t w, int64_t h,
                      const png_text *text, int ntext) {
  if (setjmp(png_jmpbuf(png))) return -1;
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (ntext > 0) png_set_text(png, info, text, ntext);
  png_write_info(png, info);
  for (int64_t y = 0; y < h; y++) png_write_row(png, rgb + (size_t)y * (size_t)w * 3);
  png_write_end(png, info);
  return 0;
}

/* Encode into the open job->fp; returns 0, or -1 with job->err / job->msg / job->nomem set. */
static int encode(png_job *job, const uint8_t *rgb, int64_t w, int64_t h, const char *const *kv, int ntext) {
  png_text *text = ntext > 0 ? calloc((size_t)ntext, sizeof *text) : NULL;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, job, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  int rc = -1;
  if (!info || (ntext > 0 && !text)) job->nomem = 1;
  else {
    for (int i = 0; i < ntext; i++) {
      text[i].compression = PNG_TEXT_COMPRESSION_NONE;
      text[i].key = (png_charp)kv[2 * i]; /* libpng copies, never writes */
      text[i].text = (png_charp)kv[2 * i + 1];
    }
    png_set_write_fn(png, job, write_data, flush_data);
    rc = write_body(png, info, rgb, w, h, text, ntext);
  }
  png_destroy_write_struct(&png, &info);
  free(text);
  return rc;
}

static dist_status write_failure(const png_job *job, const char *path, const char *tmp) {
  if (job->nomem) return dist_set_error(DIST_ERR_NO_MEMORY, "picture_write_png: '%s': out of memory", path);
  if (job->err)
    return dist_set_error(DIST_ERR_IO, "picture_write_png: cannot write '%s' (via '%s'): %s", path, tmp,
                          strerror(job->err));
  return dist_set_error(DIST_ERR_IO, "picture_write_png: '%s': libpng: %s", path, job->msg);
}

dist_status picture_write_png(const char *path, int64_t width, int64_t height, const uint8_t *rgb,
                              const char *const *text_kv, int ntext) {
  dist_status st = check_write_args(path, width, height, rgb, text_kv, ntext);
  if (st != DIST_SUCCESS) return st;
  char *tmp = malloc(strlen(path) + 5);
  if (!tmp) return dist_set_error(DIST_ERR_NO_MEMORY, "picture_write_png: '%s': out of memory", path);
  strcpy(stpcpy(tmp, path), ".tmp");
  png_job job = {0};
  if (!(job.fp = fopen(tmp, "wb"))) {
    st = dist_set_error(DIST_ERR_IO, "picture_write_png: cannot create '%s' (for '%s'): %s", tmp, path,
                        strerror(errno));
    free(tmp);
    return st;
  }
  int bad = encode(&job, rgb, width, height, text_kv, ntext);
  errno = 0;
  if (fclose(job.fp) != 0 && !bad) bad = -1, job.err = errno ? errno : EIO; /* buffered data lands here */
  if (bad) st = write_failure(&job, path, tmp);
  else if (rename(tmp, path) != 0)
    st = dist_set_error(DIST_ERR_IO, "picture_write_png: cannot rename '%s' to '%s': %s", tmp, path,
                        strerror(errno));
  if (st != DIST_SUCCESS) remove(tmp);
  free(tmp);
  return st;
}

/* ---- reading ---------------------------------------------------------------------- */

/* The only function that calls setjmp on reads; results go to job (see png_job). */
static int read_body(png_structp png, png_infop info, png_job *job, int64_t *width, int64_t *height) {
  if (setjmp(png_jmpbuf(png))) return -1;
  png_set_read_fn(png, job, read_data);
  png_set_sig_bytes(png, 8);
  png_read_info(png, info);
  png_set_expand(png); /* palette -> RGB, gray < 8 bits -> 8 bits, tRNS -> alpha */
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (png_get_rowbytes(png, info) != (size_t)w * 3) png_error(png, "unexpected row size after expansion to RGB");
  if (w == 0 || h == 0 || (size_t)h > SIZE_MAX / 3 / w) /* libpng caps h at 10^6: rows fit too */
    png_error(png, "image too large");
  job->pix = malloc((size_t)w * h * 3);
  job->rows = malloc(sizeof(png_bytep) * h);
  if (!job->pix || !job->rows) {
    job->nomem = 1;
    png_error(png, "out of memory");
  }
  for (png_uint_32 y = 0; y < h; y++) job->rows[y] = job->pix + (size_t)y * w * 3;
  png_read_image(png, job->rows);
  png_read_end(png, info); /* also catches a file cut after the image data */
  *width = w, *height = h;
  return 0;
}

static dist_status read_failure(const png_job *job, const char *path) {
  if (job->nomem) return dist_set_error(DIST_ERR_NO_MEMORY, "picture_read_png: '%s': out of memory", path);
  if (job->err) return dist_set_error(DIST_ERR_IO, "picture_read_png: reading '%s': %s", path, strerror(job->err));
  return dist_set_error(DIST_ERR_CORRUPT, "picture_read_png: '%s' is not a valid PNG: %s", path, job->msg);
}

/* Open `path` and check the 8-byte signature (a clear message for non-PNG files). */
static dist_status open_png(const char *path, FILE **fp) {
  if (!(*fp = fopen(path, "rb")))
    return dist_set_error(DIST_ERR_IO, "picture_read_png: cannot open '%s': %s", path, strerror(errno));
  unsigned char sig[8];
  size_t got = fread(sig, 1, sizeof sig, *fp);
  if (got == sizeof sig && png_sig_cmp(sig, 0, sizeof sig) == 0) return DIST_SUCCESS;
  dist_status st = ferror(*fp)
                       ? dist_set_error(DIST_ERR_IO, "picture_read_png: reading '%s': %s", path, strerror(errno))
                       : dist_set_error(DIST_ERR_CORRUPT, "picture_read_png: '%s' is not a PNG file (%s)", path,
                                        got < sizeof sig ? "shorter than the signature" : "bad signature");
  fclose(*fp);
  *fp = NULL;
  return st;
}

dist_status picture_read_png(const char *path, int64_t *width, int64_t *height, uint8_t **rgb) {
  if (!path || !width || !height || !rgb)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_read_png: NULL argument");
  *rgb = NULL, *width = *height = 0;
  png_job job = {0};
  dist_status st = open_png(path, &job.fp);
  if (st != DIST_SUCCESS) return st;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  int64_t w = 0, h = 0;
  int bad = !info ? (job.nomem = 1) : read_body(png, info, &job, &w, &h);
  png_destroy_read_struct(&png, &info, NULL);
  fclose(job.fp); /* read-only: nothing to lose */
  free(job.rows);
  if (bad) {
    free(job.pix);
    return read_failure(&job, path);
  }
  *rgb = job.pix, *width = w, *height = h;
  return DIST_SUCCESS;
}

/* ---- 5x7 font ---------------------------------------------------------------------- */

/* Rows top to bottom, bit 4 = leftmost column. A-Z, 0-9, then PUNCT. */
static const char PUNCT[] = " .=-+:/()%";
static const uint8_t GLYPHS[][7] = {
    {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}, /* A */
    {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}, /* B */
    {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}, /* C */
    {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}, /* D */
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}, /* E */
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}, /* F */
    {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}, /* G */
    {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}, /* H */
    {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* I */
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}, /* J */
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}, /* K */
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}, /* L */
    {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}, /* M */
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}, /* N */
    {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, /* O */
    {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}, /* P */
    {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}, /* Q */
    {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}, /* R */
    {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}, /* S */
    {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* T */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, /* U */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}, /* V */
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}, /* W */
    {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}, /* X */
    {0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04}, /* Y */
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}, /* Z */
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}, /* 0 */
    {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* 1 */
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}, /* 2 */
    {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}, /* 3 */
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}, /* 4 */
    {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}, /* 5 */
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}, /* 6 */
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}, /* 7 */
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}, /* 8 */
    {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}, /* 9 */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* space */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}, /* . */
    {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00}, /* = */
    {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}, /* - */
    {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}, /* + */
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}, /* : */
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}, /* / */
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}, /* ( */
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}, /* ) */
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}, /* % */
};

/* The glyph of ch; lower case as upper case, anything else blank. */
static const uint8_t *glyph(char ch) {
  unsigned char u = (unsigned char)ch;
  if (u >= 'a' && u <= 'z') u = (unsigned char)(u - 'a' + 'A');
  if (u >= 'A' && u <= 'Z') return GLYPHS[u - 'A'];
  if (u >= '0' && u <= '9') return GLYPHS[26 + u - '0'];
  const char *p = u ? strchr(PUNCT, u) : NULL;
  return GLYPHS[36 + (p ? p - PUNCT : 0)];
}

/* ---- panels ------------------------------------------------------------------------ */

enum { MARGIN = 8, GLYPH_W = 6, GLYPH_H = 7, LABEL_MAX = 64, FRAME_GREY = 128, BAR_H = 8 };

typedef struct {
  uint8_t *pix;
  int64_t w, h;
} canvas;

typedef struct {
  int64_t P, pitch, T, L, bottom; /* see the layout at the top of this file */
} layout;

static void put(canvas *cv, int64_t x, int64_t y, const uint8_t rgb[3]) {
  if (x < 0 || y < 0 || x >= cv->w || y >= cv->h) return;
  memcpy(cv->pix + 3 * (y * cv->w + x), rgb, 3);
}

/* Text with its top-left at (x, y), clipped to columns [x_lo, x_hi). */
static void draw_text(canvas *cv, int64_t x, int64_t y, const char *s, int64_t x_lo, int64_t x_hi) {
  static const uint8_t black[3] = {0, 0, 0};
  for (size_t k = 0; s[k] && k < LABEL_MAX; k++, x += GLYPH_W) {
    const uint8_t *g = glyph(s[k]);
    for (int row = 0; row < GLYPH_H; row++)
      for (int col = 0; col < 5; col++)
        if ((g[row] >> (4 - col) & 1) && x + col >= x_lo && x + col < x_hi) put(cv, x + col, y + row, black);
  }
}

static int64_t text_width(const char *s) {
  size_t len = strnlen(s, LABEL_MAX);
  return len ? (int64_t)len * GLYPH_W - 1 : 0;
}

/* A 1-pixel grey frame around the w x h block whose interior starts at (x, y). */
static void draw_frame(canvas *cv, int64_t x, int64_t y, int64_t w, int64_t h) {
  static const uint8_t grey[3] = {FRAME_GREY, FRAME_GREY, FRAME_GREY};
  for (int64_t i = -1; i <= w; i++) put(cv, x + i, y - 1, grey), put(cv, x + i, y + h, grey);
  for (int64_t j = 0; j < h; j++) put(cv, x - 1, y + j, grey), put(cv, x + w, y + j, grey);
}

static void draw_field(canvas *cv, int64_t x0, int64_t y0, const float *f, int64_t n, int zoom, float vmax) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      uint8_t rgb[3];
      picture_colour(f[i * n + j], vmax, rgb);
      for (int a = 0; a < zoom; a++)
        for (int b = 0; b < zoom; b++) put(cv, x0 + j * zoom + b, y0 + i * zoom + a, rgb);
    }
  draw_frame(cv, x0, y0, n * zoom, n * zoom);
}

/* Colour bar from -vmax to +vmax under a column, then "+-vmax" centred below. */
static void draw_bar(canvas *cv, const layout *lo, int64_t x0, float vmax) {
  int64_t y = lo->bottom + 4;
  float span = isfinite(vmax) && vmax > 0 ? vmax : 1.0f; /* picture_colour whitens useless limits anyway */
  for (int64_t k = 0; k < lo->P; k++) {
    uint8_t rgb[3];
    picture_colour(-span + 2.0f * span * ((float)k + 0.5f) / (float)lo->P, vmax, rgb);
    for (int r = 0; r < BAR_H; r++) put(cv, x0 + k, y + r, rgb);
  }
  draw_frame(cv, x0, y, lo->P, BAR_H);
  char text[40];
  snprintf(text, sizeof text, "+-%.3g", vmax);
  int64_t tw = text_width(text), tx = tw <= lo->P ? x0 + (lo->P - tw) / 2 : x0 - 1;
  draw_text(cv, tx, lo->bottom + 16, text, x0 - 1, x0 + lo->P + 1);
}

static void draw_labels(canvas *cv, const layout *lo, int nrow, int ncol, const char *const *cl,
                        const char *const *rl) {
  for (int c = 0; cl && c < ncol; c++) {
    int64_t x0 = MARGIN + lo->L + 1 + c * lo->pitch, tw = text_width(cl[c]);
    draw_text(cv, tw <= lo->P ? x0 + (lo->P - tw) / 2 : x0 - 1, MARGIN, cl[c], x0 - 1, x0 + lo->P + 1);
  }
  for (int r = 0; rl && r < nrow; r++) {
    int64_t y0 = MARGIN + lo->T + 1 + r * lo->pitch;
    draw_text(cv, MARGIN, y0 + (lo->P - GLYPH_H) / 2, rl[r], MARGIN, MARGIN + lo->L);
  }
}

/* Total pixels at most 2^28 (768 MiB of RGB): a typo in n or zoom should fail, not swap. */
#define PIXELS_MAX ((int64_t)1 << 28)

static dist_status check_panels(const char *path, int nrow, int ncol, int64_t n, const float *const *fields,
                                const float *vmax, int zoom, const char *const *cl, const char *const *rl) {
  if (!path || !fields || !vmax)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_panels: NULL %s",
                          !path ? "path" : !fields ? "fields" : "vmax");
  if (nrow < 1 || ncol < 1 || n < 1 || zoom < 1 || zoom > 64)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT,
                          "picture_panels: '%s': nrow = %d, ncol = %d, n = %lld, zoom = %d (need nrow, ncol, n >= 1, "
                          "zoom in 1..64)", path, nrow, ncol, (long long)n, zoom);
  for (int c = 0; cl && c < ncol; c++)
    if (!cl[c])
      return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_panels: '%s': col_labels[%d] is NULL", path, c);
  for (int r = 0; rl && r < nrow; r++)
    if (!rl[r])
      return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_panels: '%s': row_labels[%d] is NULL", path, r);
  return DIST_SUCCESS;
}

/* Sizes of the picture; an error if it would be absurdly large (checked before any product can overflow). */
static dist_status plan(const char *path, int nrow, int ncol, int64_t n, int zoom, const char *const *cl,
                        const char *const *rl, layout *lo, canvas *cv) {
  if (n > SIDE_MAX || (int64_t)nrow * (n * zoom + 6) > SIDE_MAX || (int64_t)ncol * (n * zoom + 6) > SIDE_MAX)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT,
                          "picture_panels: '%s': %d x %d panels of %lld x %lld cells at zoom %d are too large "
                          "(at most %d pixels a side)", path, nrow, ncol, (long long)n, (long long)n, zoom, SIDE_MAX);
  int64_t longest = 0;
  for (int r = 0; rl && r < nrow; r++) {
    int64_t len = (int64_t)strnlen(rl[r], LABEL_MAX);
    longest = len > longest ? len : longest;
  }
  lo->P = n * zoom, lo->pitch = lo->P + 6;
  lo->T = cl ? GLYPH_H + 5 : 0;
  lo->L = rl ? GLYPH_W * longest + 4 : 0;
  lo->bottom = MARGIN + lo->T + nrow * lo->pitch - 4;
  cv->w = MARGIN + lo->L + ncol * lo->pitch - 4 + MARGIN;
  cv->h = lo->bottom + 23 + MARGIN;
  if (cv->w > SIDE_MAX || cv->h > SIDE_MAX || cv->w * cv->h > PIXELS_MAX)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_panels: '%s': picture of %lld x %lld pixels is too large "
                          "(at most %d a side, %lld in all)", path, (long long)cv->w, (long long)cv->h, SIDE_MAX,
                          (long long)PIXELS_MAX);
  return DIST_SUCCESS;
}

dist_status picture_panels(const char *path, int nrow, int ncol, int64_t n, const float *const *fields,
                           const float *vmax, int zoom, const char *const *col_labels,
                           const char *const *row_labels) {
  layout lo = {0};
  canvas cv = {0};
  dist_status st = check_panels(path, nrow, ncol, n, fields, vmax, zoom, col_labels, row_labels);
  if (st == DIST_SUCCESS) st = plan(path, nrow, ncol, n, zoom, col_labels, row_labels, &lo, &cv);
  if (st != DIST_SUCCESS) return st;
  for (int k = 0; k < nrow * ncol; k++) /* plan bounds nrow * ncol by PIXELS_MAX / 49 */
    if (!fields[k])
      return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "picture_panels: '%s': fields[%d] is NULL", path, k);
  if (!(cv.pix = malloc((size_t)(cv.w * cv.h * 3))))
    return dist_set_error(DIST_ERR_NO_MEMORY, "picture_panels: '%s': %lld x %lld pixels", path, (long long)cv.w,
                          (long long)cv.h);
  memset(cv.pix, 255, (size_t)(cv.w * cv.h * 3));
  for (int r = 0; r < nrow; r++)
    for (int c = 0; c < ncol; c++)
      draw_field(&cv, MARGIN + lo.L + 1 + c * lo.pitch, MARGIN + lo.T + 1 + r * lo.pitch, fields[r * ncol + c], n,
                 zoom, vmax[c]);
  for (int c = 0; c < ncol; c++) draw_bar(&cv, &lo, MARGIN + lo.L + 1 + c * lo.pitch, vmax[c]);
  draw_labels(&cv, &lo, nrow, ncol, col_labels, row_labels);
  static const char *const text[] = {"Software", "distmgr examples/picture.c"};
  st = picture_write_png(path, cv.w, cv.h, cv.pix, text, 1);
  free(cv.pix);
  return st;
}
