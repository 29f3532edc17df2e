/* Helpers shared by the collective tests: the groups they run over, dtype
 * names and sizes, loading and storing any dtype as a complex double, and
 * seeded data that every rank can regenerate for every other rank (the
 * serial references need that). */
#ifndef DISTMGR_TESTS_COLL_VALUES_H
#define DISTMGR_TESTS_COLL_VALUES_H

#include <distmgr.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
  const char *name; /* NULL = world */
  int size, rank;
  int world[64]; /* world ranks of my copy, by group rank */
} grp;

static const char *gname(const grp *g) { return g->name ? g->name : "world(NULL)"; }

/* My copy of group `name`: size, rank and world ranks; 1 (and a message) on failure. */
static int group_info(const char *name, grp *g) {
  int count = 0;
  g->name = name;
  if (dist_group_size(name, &g->size) || dist_group_rank(name, &g->rank) ||
      dist_group_members(name, g->world, 64, &count) || count != g->size) {
    fprintf(stderr, "group %s: %s\n", name ? name : "world", dist_last_error());
    return 1;
  }
  return 0;
}



typedef struct {
  double re, im;
} cval;

static const char *const DT_NAME[] = {"f32", "f64", "bf16", "f16", "c64", "c128", "i32", "i64", "u8"};
static const size_t DT_SIZE[] = {4, 8, 2, 2, 8, 16, 4, 8, 1};
static const char *const OP_NAME[] = {"sum", "avg", "max", "min", "prod"};

static int is_complex(dist_dtype dt) { return dt == DIST_C64 || dt == DIST_C128; }
static int is_int(dist_dtype dt) { return dt == DIST_I32 || dt == DIST_I64 || dt == DIST_U8; }

static cval load(dist_dtype dt, const void *p, int64_t i) {
  cval v = {0, 0};
  switch (dt) {
  case DIST_F32: v.re = ((const float *)p)[i]; break;
  case DIST_F64: v.re = ((const double *)p)[i]; break;
  case DIST_BF16: v.re = dist_bf16_to_f32(((const uint16_t *)p)[i]); break;
  case DIST_F16: v.re = dist_f16_to_f32(((const uint16_t *)p)[i]); break;
  case DIST_C64: v.re = ((const float *)p)[2 * i], v.im = ((const float *)p)[2 * i + 1]; break;
  case DIST_C128: v.re = ((const double *)p)[2 * i], v.im = ((const double *)p)[2 * i + 1]; break;
  case DIST_I32: v.re = ((const int32_t *)p)[i]; break;
  case DIST_I64: v.re = (double)((const int64_t *)p)[i]; break;
  case DIST_U8: v.re = ((const uint8_t *)p)[i]; break;
  default: break;
  }
  return v;
}

/* Rounds to the dtype (the test ranges never overflow an integer type). */
static void store(dist_dtype dt, void *p, int64_t i, cval v) {
  switch (dt) {
  case DIST_F32: ((float *)p)[i] = (float)v.re; break;
  case DIST_F64: ((double *)p)[i] = v.re; break;
  case DIST_BF16: ((uint16_t *)p)[i] = dist_f32_to_bf16((float)v.re); break;
  case DIST_F16: ((uint16_t *)p)[i] = dist_f32_to_f16((float)v.re); break;
  case DIST_C64: ((float *)p)[2 * i] = (float)v.re, ((float *)p)[2 * i + 1] = (float)v.im; break;
  case DIST_C128: ((double *)p)[2 * i] = v.re, ((double *)p)[2 * i + 1] = v.im; break;
  case DIST_I32: ((int32_t *)p)[i] = (int32_t)llround(v.re); break;
  case DIST_I64: ((int64_t *)p)[i] = llround(v.re); break;
  case DIST_U8: ((uint8_t *)p)[i] = (uint8_t)llround(v.re); break;
  default: break;
  }
}

static uint64_t mix(uint64_t x) { /* splitmix64 finalizer */
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* Uniform in [0, 1), a pure function of (seed, owner, k). */
static double unit(uint64_t seed, int owner, int64_t k) {
  return (double)(mix(mix(seed * 1000003u + (uint64_t)owner) ^ (uint64_t)k) >> 11) * 0x1p-53;
}

#endif
