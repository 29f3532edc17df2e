/* Public option structs that grow without breaking callers (README, "Option
 * structs"): the caller's struct_size says how much of the struct its header
 * had; the library reads that much and fills in the rest. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

/* A struct_size above this is garbage (an uninitialized struct), not a size. */
#define OPTIONS_MAX_BYTES 4096

static size_t struct_size_of(const unsigned char *in) {
  size_t n;
  memcpy(&n, in, sizeof n);
  return n;
}

/* Check the caller's struct `in` of kind `k`, and copy it into `out` unless
 * out is NULL (out already holds the defaults). `label` names it in messages
 * ("dist_daso_options.local"). */
static dist_status copy(const dist__options_kind *k, const char *label, const unsigned char *in, unsigned char *out,
                        const char *what) {
  size_t n = struct_size_of(in);
  if (n == 0)
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "%s: %s.struct_size is 0: initialize the struct with %s, then set the fields to change "
                       "(a zeroed struct has no size)", what, label, k->init);
  if (n < k->min_size || n > OPTIONS_MAX_BYTES)
    return dist__error(DIST_ERR_INVALID_ARGUMENT,
                       "%s: %s.struct_size = %zu is not the size of any %s (this library's is %zu): initialize the "
                       "struct with %s", what, label, n, k->name, k->size, k->init);
  /* The part after the embedded member, if any (else the whole struct):
   * from in_at in the caller's struct, to out_at in ours. */
  size_t in_at = 0, out_at = 0;
  if (k->member && n > k->member_offset) {
    size_t off = k->member_offset;
    char inner[128];
    snprintf(inner, sizeof inner, "%s.%s", label, k->member_name);
    if (n - off < sizeof(size_t))
      return dist__error(DIST_ERR_INVALID_ARGUMENT,
                         "%s: %s.struct_size = %zu ends inside %s (at byte %zu): initialize the struct with %s", what,
                         label, n, inner, off, k->init);
    size_t m = struct_size_of(in + off);
    if (m > n - off)
      return dist__error(DIST_ERR_INVALID_ARGUMENT,
                         "%s: %s.struct_size = %zu ends inside %s (%zu bytes from byte %zu): initialize the struct "
                         "with %s", what, label, n, inner, m, off, k->init);
    DIST_CHECK(copy(k->member, inner, in + off, out ? out + off : NULL, what));
    if (out) memcpy(out, in, off);
    in_at = off + m;
    out_at = off + k->member->size;
  }
  size_t have = n - in_at, room = k->size - out_at;
  for (size_t i = room; i < have; i++)
    if (in[in_at + i])
      return dist__error(DIST_ERR_INVALID_ARGUMENT,
                         "%s: byte %zu of %s (struct_size %zu) is not zero, but this library's %s ends at byte %zu: "
                         "it belongs to a field of a newer distmgr header. Link the distmgr whose headers the "
                         "program was built with, or leave that field at its default", what, in_at + i, label, n,
                         k->name, in_at + room);
  if (out) {
    memcpy(out + out_at, in + in_at, have < room ? have : room);
    memcpy(out, &k->size, sizeof k->size); /* the copy is a whole struct of this library */
  }
  return DIST_SUCCESS;
}

dist_status dist__options_copy(const dist__options_kind *kind, const void *in, void *out, const char *what) {
  if (in) DIST_CHECK(copy(kind, kind->name, in, NULL, what)); /* nothing written on failure */
  memcpy(out, kind->defaults, kind->size);
  return in ? copy(kind, kind->name, in, out, what) : DIST_SUCCESS;
}
