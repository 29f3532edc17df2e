/* Pictures of the surrogate pipeline: PNG files (libpng) of 2-D fields in a
 * diverging colour map (blue < 0 < red, white at 0), laid out as a grid of
 * panels with a small label above each column and each row. */
#ifndef DISTMGR_EXAMPLES_PICTURE_H
#define DISTMGR_EXAMPLES_PICTURE_H

#include <stdint.h>

#include <distmgr.h>

/* The colour of v on the map from -vmax (dark blue) through 0 (white) to
 * +vmax (dark red); values beyond +-vmax take the end colours, NaN is black. */
void picture_colour(float v, float vmax, uint8_t rgb[3]);

/* Write an 8-bit RGB PNG (width x height pixels, row-major, 3 bytes each),
 * written to "<path>.tmp" and renamed, with tEXt chunks (key/value pairs,
 * may be NULL/0). A failed write names the path and the cause. */
dist_status picture_write_png(const char *path, int64_t width, int64_t height, const uint8_t *rgb,
                              const char *const *text_kv, int ntext);

/* Decode a PNG (any bit depth / colour type libpng can expand to 8-bit
 * RGB) into a malloc'd buffer; for checks. Bad or truncated files are an
 * error naming the path. */
dist_status picture_read_png(const char *path, int64_t *width, int64_t *height, uint8_t **rgb);

/* A grid of nrow x ncol panels, fields[r * ncol + c] is an n x n float field
 * (row-major, first index drawn downwards). Column c is coloured with the
 * limit vmax[c]; each panel is magnified `zoom` times (nearest neighbour).
 * col_labels (ncol strings) and row_labels (nrow strings) may be NULL; they
 * are drawn with a built-in 5x7 font (upper-case letters, digits and
 * " .=-+:/()%"; other characters are drawn as blanks). */
dist_status picture_panels(const char *path, int nrow, int ncol, int64_t n, const float *const *fields,
                           const float *vmax, int zoom, const char *const *col_labels,
                           const char *const *row_labels);

#endif
