/* Safetensors files: atomic writer, whole-file reader and a defensive parser.
 *
 * The parser treats the bytes as hostile: every length and product is checked
 * before use, the JSON goes through jansson with the exact header length,
 * and nothing outside [bytes, bytes + size) is ever read. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20) /* 100 MiB, as the reference reader */
#define ST_META_KEY "__metadata__"
#define ST_NAME_FMT "%.200s" /* names in messages are cut: they come from the file */

/* ---- dtypes ---------------------------------------------------------------- */

/* Every dtype of the format, with its width in bits; `dtype` < 0 marks the
 * ones distmgr recognises but does not handle. */
static const struct {
  const char *name;
  unsigned bits;
  int dtype;
} DTYPES[] = {
    {"F32", 32, DIST_F32}, {"F64", 64, DIST_F64},  {"I64", 64, DIST_I64},  {"BOOL", 8, -1},   {"U8", 8, -1},
    {"I8", 8, -1},         {"F8_E5M2", 8, -1},     {"F8_E4M3", 8, -1},     {"F8_E8M0", 8, -1}, {"I16", 16, -1},
    {"U16", 16, -1},       {"F16", 16, -1},        {"BF16", 16, -1},       {"I32", 32, -1},   {"U32", 32, -1},
    {"U64", 64, -1},       {"C64", 64, -1},        {"F4", 4, -1},          {"F6_E2M3", 6, -1}, {"F6_E3M2", 6, -1},
};
#define NDTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

static int dtype_index_by_name(const char *name) {
  for (int i = 0; i < NDTYPES; i++)
    if (strcmp(DTYPES[i].name, name) == 0) return i;
  return -1;
}

static int dtype_index_of(dist_dtype d) {
  for (int i = 0; i < NDTYPES; i++)
    if (DTYPES[i].dtype >= 0 && (dist_dtype)DTYPES[i].dtype == d) return i;
  return -1;
}

/* ---- checked arithmetic ----------------------------------------------------- */

static int mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a) return 0;
  *out = a * b;
  return 1;
}

/* Bytes of `ndim` dims of `shape` at `bits` per element: 0 on overflow or a
 * size that is not a whole number of bytes. A zero dim makes the product zero
 * whatever the other dims are. */
static int tensor_bytes(const int64_t *shape, int ndim, unsigned bits, uint64_t *out) {
  uint64_t numel = 1;
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) {
      *out = 0;
      return 1;
    }
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0 || !mul_u64(numel, (uint64_t)shape[i], &numel)) return 0;
  uint64_t total_bits;
  if (!mul_u64(numel, bits, &total_bits) || total_bits % 8 != 0) return 0;
  *out = total_bits / 8;
  return 1;
}

/* "[2, 3]" into buf (cut with "..." if it does not fit). */
static const char *shape_text(const int64_t *shape, int ndim, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i <= ndim && len < cap; i++) {
    int w = i == ndim ? snprintf(buf + len, cap - len, "]")
                      : snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "[", (long long)shape[i]);
    if (w < 0 || (size_t)w >= cap - len) {
      if (cap >= 4) memcpy(buf + cap - 4, "...", 4);
      return buf;
    }
    len += (size_t)w;
  }
  if (ndim == 0) snprintf(buf, cap, "[]");
  return buf;
}

/* Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF): jansson
 * rejects anything else in keys and strings. */
static int utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p, len, cp;
    if (c < 0x80) {
      p++;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07;
    } else {
      return 0;
    }
    for (unsigned i = 1; i < len; i++) {
      if ((p[i] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    p += len;
  }
  return 1;
}

/* ---- writer ----------------------------------------------------------------- */

/* Check the arguments and build the padded header text (*header, *len). */
static dist_status build_header(const char *path, const dist__st_tensor *t, int n, const dist__st_meta *meta,
                                int nmeta, char **header, size_t *len) {
  dist_status st = DIST_SUCCESS;
  json_t *root = json_object(), *mobj = NULL;
  char *text = NULL;
  if (!root) return dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory building the header", path);

  if (nmeta > 0) {
    mobj = json_object();
    if (!mobj || json_object_set_new(root, ST_META_KEY, mobj) != 0) {
      st = dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory building the header", path);
      goto out;
    }
    for (int i = 0; i < nmeta; i++) {
      const char *k = meta[i].key, *v = meta[i].value;
      if (!k || !v) {
        st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: metadata entry %d has a NULL %s", path, i, k ? "value" : "key");
        goto out;
      }
      if (!utf8_valid(k) || !utf8_valid(v)) {
        st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: metadata entry %d ('" ST_NAME_FMT "') is not valid UTF-8",
                            path, i, k);
        goto out;
      }
      if (json_object_get(mobj, k)) {
        st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: metadata key '" ST_NAME_FMT "' given twice", path, k);
        goto out;
      }
      if (json_object_set_new(mobj, k, json_string(v)) != 0) {
        st = dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory building the header", path);
        goto out;
      }
    }
  }

  uint64_t offset = 0;
  for (int i = 0; i < n; i++) {
    const dist__st_tensor *x = &t[i];
    if (!x->name || !x->name[0] || strcmp(x->name, ST_META_KEY) == 0) {
      st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor %d has %s name (names must be non-empty and not '%s')",
                          path, i, !x->name ? "a NULL" : !x->name[0] ? "an empty" : "a reserved", ST_META_KEY);
      goto out;
    }
    if (!utf8_valid(x->name)) {
      st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor %d's name is not valid UTF-8", path, i);
      goto out;
    }
    if (json_object_get(root, x->name)) {
      st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor name '" ST_NAME_FMT "' given twice", path, x->name);
      goto out;
    }
    int d = dtype_index_of(x->dtype);
    if (d < 0) {
      st = dist_set_error(dist_dtype_size(x->dtype) ? DIST_ERR_UNSUPPORTED : DIST_ERR_INVALID_ARGUMENT,
                          "%s: tensor '" ST_NAME_FMT "' has dtype %s (%d); only f32, f64 and i64 are written", path,
                          x->name, dist_dtype_name(x->dtype), (int)x->dtype);
      goto out;
    }
    if (x->ndim < 0 || x->ndim > DIST_TENSOR_MAX_DIMS) {
      st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor '" ST_NAME_FMT "' has ndim %d (0 to %d)", path, x->name,
                          x->ndim, DIST_TENSOR_MAX_DIMS);
      goto out;
    }
    char sbuf[160];
    uint64_t nbytes, end;
    for (int a = 0; a < x->ndim; a++)
      if (x->shape[a] < 0) {
        st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor '" ST_NAME_FMT "' has a negative dim in shape %s", path,
                            x->name, shape_text(x->shape, x->ndim, sbuf, sizeof sbuf));
        goto out;
      }
    /* offset <= INT64_MAX, so offset + nbytes cannot wrap once nbytes <= INT64_MAX */
    if (!tensor_bytes(x->shape, x->ndim, DTYPES[d].bits, &nbytes) || nbytes > SIZE_MAX || nbytes > (uint64_t)INT64_MAX ||
        (end = offset + nbytes) > (uint64_t)INT64_MAX) {
      st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor '" ST_NAME_FMT "' of shape %s is too large", path, x->name,
                          shape_text(x->shape, x->ndim, sbuf, sizeof sbuf));
      goto out;
    }
    if (nbytes > 0 && !x->data) {
      st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor '" ST_NAME_FMT "' has NULL data for %llu bytes", path,
                          x->name, (unsigned long long)nbytes);
      goto out;
    }
    json_t *e = json_object(), *shape = json_array(), *offs = json_array();
    int bad = !e || !shape || !offs;
    for (int a = 0; !bad && a < x->ndim; a++) bad |= json_array_append_new(shape, json_integer(x->shape[a])) != 0;
    if (!bad)
      bad = json_array_append_new(offs, json_integer((json_int_t)offset)) != 0 ||
            json_array_append_new(offs, json_integer((json_int_t)end)) != 0 ||
            json_object_set_new(e, "dtype", json_string(DTYPES[d].name)) != 0 ||
            json_object_set(e, "shape", shape) != 0 || json_object_set(e, "data_offsets", offs) != 0 ||
            json_object_set(root, x->name, e) != 0;
    json_decref(e);
    json_decref(shape);
    json_decref(offs);
    if (bad) {
      st = dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory building the header", path);
      goto out;
    }
    offset = end;
  }

  text = json_dumps(root, JSON_COMPACT);
  if (!text) {
    st = dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory building the header", path);
    goto out;
  }
  size_t raw = strlen(text), padded = (raw + 7) / 8 * 8;
  if ((uint64_t)padded > ST_MAX_HEADER) {
    st = dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: header of %zu bytes is over the 100 MiB limit of readers",
                        path, padded);
    goto out;
  }
  char *p = malloc(padded + 1); /* our own buffer: text belongs to jansson's allocator */
  if (!p) {
    st = dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory building the header", path);
    goto out;
  }
  memcpy(p, text, raw);
  memset(p + raw, ' ', padded - raw);
  p[padded] = '\0';
  *header = p;
  *len = padded;
out:
  free(text);
  json_decref(root);
  return st;
}

static dist_status write_all(int fd, const void *buf, size_t len, const char *tmp) {
  const char *p = buf;
  while (len > 0) {
    size_t chunk = len > ((size_t)1 << 30) ? (size_t)1 << 30 : len;
    ssize_t w = write(fd, p, chunk);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      return dist_set_error(DIST_ERR_IO, "%s: write failed: %s", tmp, w < 0 ? strerror(errno) : "no progress");
    p += w;
    len -= (size_t)w;
  }
  return DIST_SUCCESS;
}

/* fsync the directory holding `path` so the rename survives a crash. File
 * systems that cannot sync a directory (EINVAL) are accepted. */
static dist_status sync_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory", path);
  dist_status st = DIST_SUCCESS;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    st = dist_set_error(DIST_ERR_IO, "%s was written, but opening its directory %s to sync it failed: %s", path, dir,
                        strerror(errno));
  else if (fsync(fd) != 0 && errno != EINVAL)
    st = dist_set_error(DIST_ERR_IO, "%s was written, but fsync of its directory %s failed: %s", path, dir,
                        strerror(errno));
  if (fd >= 0) close(fd);
  free(dir);
  return st;
}

dist_status dist__st_write(const char *path, const dist__st_tensor *t, int n, const dist__st_meta *meta, int nmeta) {
  if (!path || !path[0]) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "safetensors write: %s path", path ? "empty" : "NULL");
  if (n < 0 || nmeta < 0)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: n = %d and nmeta = %d must be >= 0", path, n, nmeta);
  if ((n > 0 && !t) || (nmeta > 0 && !meta))
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: NULL %s array for %d entries", path, !t && n > 0 ? "tensor" : "metadata",
                          !t && n > 0 ? n : nmeta);

  char *header = NULL, *tmp = NULL;
  size_t hlen = 0;
  dist_status st = build_header(path, t, n, meta, nmeta, &header, &hlen);
  if (st != DIST_SUCCESS) return st;

  size_t cap = strlen(path) + 32;
  tmp = malloc(cap);
  if (!tmp) {
    free(header);
    return dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory", path);
  }
  snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    st = dist_set_error(DIST_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    goto out;
  }
  unsigned char prefix[8];
  for (int i = 0; i < 8; i++) prefix[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
  st = write_all(fd, prefix, sizeof prefix, tmp);
  if (st == DIST_SUCCESS) st = write_all(fd, header, hlen, tmp);
  for (int i = 0; st == DIST_SUCCESS && i < n; i++) {
    uint64_t nbytes = 0;
    tensor_bytes(t[i].shape, t[i].ndim, DTYPES[dtype_index_of(t[i].dtype)].bits, &nbytes); /* checked above */
    if (nbytes > 0) st = write_all(fd, t[i].data, (size_t)nbytes, tmp);
  }
  if (st == DIST_SUCCESS && fsync(fd) != 0)
    st = dist_set_error(DIST_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (close(fd) != 0 && st == DIST_SUCCESS) st = dist_set_error(DIST_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
  if (st == DIST_SUCCESS && rename(tmp, path) != 0)
    st = dist_set_error(DIST_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
  if (st != DIST_SUCCESS) {
    unlink(tmp);
    goto out;
  }
  st = sync_dir(path);
out:
  free(tmp);
  free(header);
  return st;
}

/* ---- reader ----------------------------------------------------------------- */

dist_status dist__st_read_file(const char *path, void **bytes, size_t *size) {
  if (!path || !bytes || !size)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "safetensors read: NULL %s", !path ? "path" : !bytes ? "bytes" : "size");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return dist_set_error(DIST_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    dist_status st = dist_set_error(DIST_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    close(fd);
    return st;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return dist_set_error(DIST_ERR_IO, "%s is not a regular file", path);
  }
  if (sb.st_size < 0 || (uint64_t)sb.st_size >= SIZE_MAX) {
    close(fd);
    return dist_set_error(DIST_ERR_NO_MEMORY, "%s: %lld bytes do not fit in memory", path, (long long)sb.st_size);
  }
  size_t want = (size_t)sb.st_size, got = 0;
  unsigned char *buf = malloc(want ? want : 1);
  if (!buf) {
    close(fd);
    return dist_set_error(DIST_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes", path, want);
  }
  while (got < want) {
    size_t chunk = want - got > ((size_t)1 << 30) ? (size_t)1 << 30 : want - got;
    ssize_t r = read(fd, buf + got, chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      dist_status st = r < 0 ? dist_set_error(DIST_ERR_IO, "read of %s failed: %s", path, strerror(errno))
                             : dist_set_error(DIST_ERR_IO, "%s shrank while being read (%zu of %zu bytes)", path, got, want);
      free(buf);
      close(fd);
      return st;
    }
    got += (size_t)r;
  }
  close(fd);
  *bytes = buf;
  *size = want;
  return DIST_SUCCESS;
}

/* ---- parser ----------------------------------------------------------------- */

typedef struct st_entry {
  char *name;
  int dt;            /* index in DTYPES */
  int ndim;
  int64_t shape[DIST_TENSOR_MAX_DIMS];
  uint64_t begin, end;
} st_entry;

struct dist__st_file {
  char *what;
  const unsigned char *data; /* start of the data area */
  size_t data_size;
  int n;
  st_entry *t;         /* sorted by (begin, end, name): data order */
  st_entry **by_name;  /* sorted by name */
  int nmeta;
  char **meta_key, **meta_value;
};

void dist__st_free(dist__st_file *f) {
  if (!f) return;
  if (f->t)
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
  for (int i = 0; i < f->nmeta; i++) {
    free(f->meta_key[i]);
    free(f->meta_value[i]);
  }
  free(f->t);
  free(f->by_name);
  free(f->meta_key);
  free(f->meta_value);
  free(f->what);
  free(f);
}

static const char *json_kind(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "object";
  case JSON_ARRAY: return "array";
  case JSON_STRING: return "string";
  case JSON_INTEGER: return "integer";
  case JSON_REAL: return "real number";
  case JSON_TRUE:
  case JSON_FALSE: return "boolean";
  case JSON_NULL: return "null";
  }
  return "value";
}

static dist_status parse_meta(dist__st_file *f, json_t *m) {
  const char *w = f->what;
  if (!json_is_object(m))
    return dist_set_error(DIST_ERR_CORRUPT, "%s: %s is a JSON %s, not an object", w, ST_META_KEY, json_kind(m));
  size_t cnt = json_object_size(m);
  if (cnt > INT_MAX) return dist_set_error(DIST_ERR_CORRUPT, "%s: %s has too many entries", w, ST_META_KEY);
  f->meta_key = calloc(cnt ? cnt : 1, sizeof *f->meta_key);
  f->meta_value = calloc(cnt ? cnt : 1, sizeof *f->meta_value);
  if (!f->meta_key || !f->meta_value) return dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory", w);
  const char *k;
  json_t *v;
  json_object_foreach(m, k, v) {
    if (!json_is_string(v))
      return dist_set_error(DIST_ERR_CORRUPT, "%s: %s value of '" ST_NAME_FMT "' is a JSON %s, not a string", w, ST_META_KEY,
                            k, json_kind(v));
    int i = f->nmeta;
    f->meta_key[i] = strdup(k);
    f->meta_value[i] = strdup(json_string_value(v));
    f->nmeta++; /* counted before the check so dist__st_free releases both */
    if (!f->meta_key[i] || !f->meta_value[i]) return dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory", w);
  }
  return DIST_SUCCESS;
}

static int get_int(json_t *v, int64_t *out) {
  if (!json_is_integer(v)) return 0;
  *out = (int64_t)json_integer_value(v);
  return 1;
}

static dist_status parse_entry(dist__st_file *f, const char *name, json_t *v, st_entry *e) {
  const char *w = f->what;
  char sbuf[160];
  if (!json_is_object(v))
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "' is a JSON %s, not an object", w, name, json_kind(v));
  json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"), *offs = json_object_get(v, "data_offsets");
  const char *missing = !dt ? "dtype" : !shape ? "shape" : !offs ? "data_offsets" : NULL;
  if (missing) return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "' has no %s", w, name, missing);
  if (!json_is_string(dt))
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "': dtype is a JSON %s, not a string", w, name,
                          json_kind(dt));
  e->dt = dtype_index_by_name(json_string_value(dt));
  if (e->dt < 0)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "' has unknown dtype '%.40s'", w, name,
                          json_string_value(dt));
  if (!json_is_array(shape))
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "': shape is a JSON %s, not an array", w, name,
                          json_kind(shape));
  size_t nd = json_array_size(shape);
  if (nd > DIST_TENSOR_MAX_DIMS)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "' has %zu dims (at most %d)", w, name, nd,
                          DIST_TENSOR_MAX_DIMS);
  e->ndim = (int)nd;
  for (int a = 0; a < e->ndim; a++) {
    json_t *x = json_array_get(shape, (size_t)a);
    if (!get_int(x, &e->shape[a]))
      return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "': shape[%d] is a JSON %s, not an integer", w,
                            name, a, json_kind(x));
    if (e->shape[a] < 0)
      return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "': shape[%d] = %lld is negative", w, name, a,
                            (long long)e->shape[a]);
  }
  int64_t b, en;
  if (!json_is_array(offs) || json_array_size(offs) != 2 || !get_int(json_array_get(offs, 0), &b) ||
      !get_int(json_array_get(offs, 1), &en))
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "': data_offsets is not an array of 2 integers", w,
                          name);
  if (b < 0 || en < b)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "': data_offsets [%lld, %lld] must satisfy 0 <= begin <= end",
                          w, name, (long long)b, (long long)en);
  e->begin = (uint64_t)b;
  e->end = (uint64_t)en;
  uint64_t nbytes;
  if (!tensor_bytes(e->shape, e->ndim, DTYPES[e->dt].bits, &nbytes))
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "': shape %s of %s is too large or not a whole number of bytes",
                          w, name, shape_text(e->shape, e->ndim, sbuf, sizeof sbuf), DTYPES[e->dt].name);
  if (e->end - e->begin != nbytes)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "' data_offsets [%lld, %lld] do not match shape %s of %s (%llu bytes)",
                          w, name, (long long)b, (long long)en, shape_text(e->shape, e->ndim, sbuf, sizeof sbuf),
                          DTYPES[e->dt].name, (unsigned long long)nbytes);
  if (e->end > (uint64_t)f->data_size)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "' data_offsets [%lld, %lld] exceed the data area (%zu bytes; file truncated?)",
                          w, name, (long long)b, (long long)en, f->data_size);
  e->name = strdup(name);
  if (!e->name) return dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory", w);
  return DIST_SUCCESS;
}

static int cmp_data_order(const void *pa, const void *pb) {
  const st_entry *a = pa, *b = pb;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  if (a->end != b->end) return a->end < b->end ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int cmp_name(const void *pa, const void *pb) {
  const st_entry *a = *(const st_entry *const *)pa, *b = *(const st_entry *const *)pb;
  return strcmp(a->name, b->name);
}

/* The tensors, in data order, must tile [0, data_size) exactly. */
static dist_status check_coverage(const dist__st_file *f) {
  const char *w = f->what;
  uint64_t pos = 0;
  for (int i = 0; i < f->n; i++) {
    const st_entry *e = &f->t[i];
    if (e->begin < pos) {
      const st_entry *p = &f->t[i - 1]; /* pos > 0 only after an entry */
      return dist_set_error(DIST_ERR_CORRUPT, "%s: tensor '" ST_NAME_FMT "' data_offsets [%llu, %llu] overlap tensor '" ST_NAME_FMT "' [%llu, %llu]",
                            w, e->name, (unsigned long long)e->begin, (unsigned long long)e->end, p->name,
                            (unsigned long long)p->begin, (unsigned long long)p->end);
    }
    if (e->begin > pos)
      return dist_set_error(DIST_ERR_CORRUPT, "%s: hole in the data area: bytes [%llu, %llu) before tensor '" ST_NAME_FMT "' belong to no tensor",
                            w, (unsigned long long)pos, (unsigned long long)e->begin, e->name);
    pos = e->end;
  }
  if (pos != (uint64_t)f->data_size)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: hole in the data area: bytes [%llu, %zu) after the last tensor belong to no tensor",
                          w, (unsigned long long)pos, f->data_size);
  return DIST_SUCCESS;
}

static dist_status parse_root(dist__st_file *f, json_t *root) {
  const char *w = f->what;
  if (!json_is_object(root))
    return dist_set_error(DIST_ERR_CORRUPT, "%s: header is a JSON %s, not an object", w, json_kind(root));
  size_t total = json_object_size(root);
  json_t *meta = json_object_get(root, ST_META_KEY);
  size_t ntensors = total - (meta ? 1 : 0);
  if (ntensors > INT_MAX) return dist_set_error(DIST_ERR_CORRUPT, "%s: header lists too many tensors", w);
  f->t = calloc(ntensors ? ntensors : 1, sizeof *f->t);
  f->by_name = calloc(ntensors ? ntensors : 1, sizeof *f->by_name);
  if (!f->t || !f->by_name) return dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory for %zu tensors", w, ntensors);
  if (meta) {
    dist_status st = parse_meta(f, meta);
    if (st != DIST_SUCCESS) return st;
  }
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    if (strcmp(k, ST_META_KEY) == 0) continue;
    if (f->n >= (int)ntensors) return dist_set_error(DIST_ERR_INTERNAL, "%s: header changed size while parsed", w);
    dist_status st = parse_entry(f, k, v, &f->t[f->n]);
    if (st != DIST_SUCCESS) return st;
    f->n++;
  }
  qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_data_order);
  dist_status st = check_coverage(f);
  if (st != DIST_SUCCESS) return st;
  for (int i = 0; i < f->n; i++) {
    if (DTYPES[f->t[i].dt].dtype < 0)
      return dist_set_error(DIST_ERR_UNSUPPORTED, "%s: tensor '" ST_NAME_FMT "' has dtype %s, which distmgr does not read (F32, F64, I64 only)",
                            w, f->t[i].name, DTYPES[f->t[i].dt].name);
    f->by_name[i] = &f->t[i];
  }
  qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
  return DIST_SUCCESS;
}

dist_status dist__st_parse(const void *bytes, size_t size, const char *what, dist__st_file **out) {
  if (!what) what = "safetensors data";
  if (!out) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: NULL output pointer", what);
  if (!bytes && size > 0) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: NULL bytes for size %zu", what, size);
  if (size < 8)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: %zu bytes are too few for the 8-byte header length (truncated?)", what, size);
  const unsigned char *b = bytes;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | b[i];
  if (hlen > (uint64_t)(size - 8))
    return dist_set_error(DIST_ERR_CORRUPT, "%s: header length %llu is larger than the %zu bytes that follow it (truncated?)",
                          what, (unsigned long long)hlen, size - 8);
  if (hlen > ST_MAX_HEADER)
    return dist_set_error(DIST_ERR_CORRUPT, "%s: header length %llu is over the 100 MiB limit", what, (unsigned long long)hlen);

  dist__st_file *f = calloc(1, sizeof *f);
  if (!f || !(f->what = strdup(what))) {
    free(f);
    return dist_set_error(DIST_ERR_NO_MEMORY, "%s: out of memory", what);
  }
  f->data = b + 8 + hlen;
  f->data_size = size - 8 - (size_t)hlen;

  json_error_t jerr;
  json_t *root = json_loadb((const char *)b + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
  dist_status st;
  if (!root)
    st = dist_set_error(DIST_ERR_CORRUPT, "%s: header is not valid JSON: %s (at byte %d of the %llu-byte header)", what,
                        jerr.text, jerr.position, (unsigned long long)hlen);
  else
    st = parse_root(f, root);
  json_decref(root);
  if (st != DIST_SUCCESS) {
    dist__st_free(f);
    return st;
  }
  *out = f;
  return DIST_SUCCESS;
}

/* ---- queries ---------------------------------------------------------------- */

int dist__st_count(const dist__st_file *f) { return f ? f->n : -1; }

static void fill(const dist__st_file *f, const st_entry *e, dist__st_tensor *t) {
  memset(t, 0, sizeof *t);
  t->name = e->name;
  t->dtype = (dist_dtype)DTYPES[e->dt].dtype;
  t->ndim = e->ndim;
  memcpy(t->shape, e->shape, sizeof e->shape);
  t->data = f->data + e->begin;
  t->nbytes = (size_t)(e->end - e->begin);
}

dist_status dist__st_at(const dist__st_file *f, int i, dist__st_tensor *t) {
  if (!f || !t) return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "safetensors: NULL %s", !f ? "file" : "tensor");
  if (i < 0 || i >= f->n)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "%s: tensor index %d outside [0, %d)", f->what, i, f->n);
  fill(f, &f->t[i], t);
  return DIST_SUCCESS;
}

dist_status dist__st_find(const dist__st_file *f, const char *name, dist__st_tensor *t) {
  if (!f || !name || !t)
    return dist_set_error(DIST_ERR_INVALID_ARGUMENT, "safetensors: NULL %s", !f ? "file" : !name ? "name" : "tensor");
  int lo = 0, hi = f->n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
    if (c == 0) {
      fill(f, f->by_name[mid], t);
      return DIST_SUCCESS;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return dist_set_error(DIST_ERR_CORRUPT, "no tensor '" ST_NAME_FMT "' in %s", name, f->what);
}

const char *dist__st_meta_get(const dist__st_file *f, const char *key) {
  if (!f || !key) return NULL;
  for (int i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta_key[i], key) == 0) return f->meta_value[i];
  return NULL;
}
