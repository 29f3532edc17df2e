/* png_check FILE [--min-width W] [--min-height H] [--min-colours K]
 *
 * For CI: decode FILE with picture_read_png, print "FILE: WxH, K distinct
 * colours", exit 0 if it decodes and meets the minimums, 1 otherwise. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picture.h"

static int usage(void) {
  fprintf(stderr, "usage: png_check FILE [--min-width W] [--min-height H] [--min-colours K]\n");
  return 1;
}

/* A whole non-negative decimal number, nothing else. */
static int parse_count(const char *flag, const char *text, long long *out) {
  char *end;
  errno = 0;
  long long v = text ? strtoll(text, &end, 10) : -1;
  if (!text || errno || end == text || *end || v < 0) {
    fprintf(stderr, "png_check: %s needs a non-negative integer, got '%s'\n", flag, text ? text : "(nothing)");
    return -1;
  }
  *out = v;
  return 0;
}

/* Distinct 24-bit colours, with a 2 MiB bitmap of all of them. */
static long long count_colours(const uint8_t *rgb, int64_t pixels) {
  uint8_t *seen = calloc((size_t)1 << 21, 1);
  if (!seen) return -1;
  long long k = 0;
  for (int64_t i = 0; i < pixels; i++) {
    uint32_t c = (uint32_t)rgb[3 * i] << 16 | (uint32_t)rgb[3 * i + 1] << 8 | rgb[3 * i + 2];
    if (!(seen[c >> 3] & (1u << (c & 7)))) seen[c >> 3] |= (uint8_t)(1u << (c & 7)), k++;
  }
  free(seen);
  return k;
}

int main(int argc, char **argv) {
  const char *file = NULL;
  long long min_w = 0, min_h = 0, min_k = 0;
  for (int i = 1; i < argc; i++) {
    long long *dst = !strcmp(argv[i], "--min-width")    ? &min_w
                     : !strcmp(argv[i], "--min-height") ? &min_h
                     : !strcmp(argv[i], "--min-colours") ? &min_k
                                                          : NULL;
    if (dst) {
      if (parse_count(argv[i], argv[i + 1], dst) != 0) return 1;
      i++;
    } else if (argv[i][0] == '-' || file) {
      fprintf(stderr, "png_check: unexpected argument '%s'\n", argv[i]);
      return usage();
    } else
      file = argv[i];
  }
  if (!file) return usage();
  int64_t w, h;
  uint8_t *rgb;
  if (picture_read_png(file, &w, &h, &rgb) != DIST_SUCCESS) {
    fprintf(stderr, "png_check: %s\n", dist_last_error());
    return 1;
  }
  long long k = count_colours(rgb, w * h);
  free(rgb);
  if (k < 0) {
    fprintf(stderr, "png_check: out of memory\n");
    return 1;
  }
  printf("%s: %lldx%lld, %lld distinct colours\n", file, (long long)w, (long long)h, k);
  int ok = 1;
  if (w < min_w) ok = 0, fprintf(stderr, "png_check: %s: width %lld < %lld\n", file, (long long)w, min_w);
  if (h < min_h) ok = 0, fprintf(stderr, "png_check: %s: height %lld < %lld\n", file, (long long)h, min_h);
  if (k < min_k) ok = 0, fprintf(stderr, "png_check: %s: %lld distinct colours < %lld\n", file, k, min_k);
  return ok ? 0 : 1;
}
