/* Group layout math; see layout.h. */
#include "group/layout.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

dist_status dist__layout_alloc(int world, dist__layout *out) {
  memset(out, 0, sizeof *out);
  out->world = world;
  out->color = malloc(sizeof(int) * (size_t)world);
  out->key = malloc(sizeof(int) * (size_t)world);
  out->sub = malloc(sizeof(int) * (size_t)world);
  if (!out->color || !out->key || !out->sub) {
    dist__layout_free(out);
    return dist__error(DIST_ERR_NO_MEMORY, "group layout for %d ranks", world);
  }
  return DIST_SUCCESS;
}

void dist__layout_free(dist__layout *l) {
  if (!l) return;
  free(l->color);
  free(l->key);
  free(l->sub);
  l->color = l->key = l->sub = NULL;
}

dist_status dist__layout_world(int world, dist__layout *out) {
  memset(out, 0, sizeof *out); /* safe to free on every error path */
  if (world < 1) return dist__error(DIST_ERR_INVALID_ARGUMENT, "world size %d is not positive", world);
  DIST_CHECK(dist__layout_alloc(world, out));
  out->size = world;
  out->ncopies = 1;
  for (int r = 0; r < world; r++) {
    out->color[r] = 0;
    out->key[r] = r;
    out->sub[r] = 0;
  }
  return DIST_SUCCESS;
}

static dist_status require_uniform(const dist__layout *parent) {
  if (parent->size < 1)
    return dist__error(DIST_ERR_GROUP_SIZE, "the parent's copies differ in size (e.g. 'local' on uneven nodes); it cannot be subdivided");
  return DIST_SUCCESS;
}

dist_status dist__layout_axis(const dist__layout *parent, int ndims, const int *dims, int axis, dist__layout *out) {
  memset(out, 0, sizeof *out); /* safe to free on every error path */
  if (ndims < 1 || axis < 0 || axis >= ndims)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "mesh axis %d out of range for %d axes", axis, ndims);
  DIST_CHECK(require_uniform(parent));
  long prod = 1, stride = 1;
  for (int k = 0; k < ndims; k++) {
    if (dims[k] < 1) return dist__error(DIST_ERR_GROUP_SIZE, "mesh axis %d has size %d", k, dims[k]);
    prod *= dims[k];
    if (k > axis) stride *= dims[k];
    if (prod > parent->size) break;
  }
  if (prod != parent->size)
    return dist__error(DIST_ERR_GROUP_SIZE, "mesh sizes multiply to %ld, not to the parent size %d", prod,
                       parent->size);
  DIST_CHECK(dist__layout_alloc(parent->world, out));
  int d = dims[axis];
  int per_parent = parent->size / d; /* copies of the axis group in one parent copy */
  out->size = d;
  out->ncopies = parent->ncopies * per_parent;
  for (int r = 0; r < parent->world; r++) {
    if (parent->color[r] < 0) {
      out->color[r] = out->key[r] = out->sub[r] = -1;
      continue;
    }
    long p = parent->key[r];
    int c = (int)((p / stride) % d);
    int rest = (int)((p / (stride * d)) * stride + p % stride);
    out->color[r] = parent->color[r] * per_parent + rest;
    out->key[r] = c;
    out->sub[r] = rest;
  }
  return DIST_SUCCESS;
}

dist_status dist__layout_subgroup(const dist__layout *parent, int size, dist__layout *out) {
  memset(out, 0, sizeof *out); /* safe to free on every error path */
  DIST_CHECK(require_uniform(parent));
  if (size < 1) return dist__error(DIST_ERR_GROUP_SIZE, "group size %d is not positive", size);
  if (parent->size % size != 0)
    return dist__error(DIST_ERR_GROUP_SIZE, "group size %d does not divide the parent size %d", size, parent->size);
  int dims[2] = {parent->size / size, size};
  return dist__layout_axis(parent, 2, dims, 1, out);
}

dist_status dist__layout_orthogonal(const dist__layout *parent, const dist__layout *g, dist__layout *out) {
  memset(out, 0, sizeof *out); /* safe to free on every error path */
  DIST_CHECK(require_uniform(parent));
  if (g->size < 1 || parent->size % g->size != 0 || (long)g->ncopies * g->size != (long)parent->ncopies * parent->size)
    return dist__error(DIST_ERR_GROUP_SIZE, "a group of %d copies of %d ranks does not partition its parent (%d x %d)",
                       g->ncopies, g->size, parent->ncopies, parent->size);
  DIST_CHECK(dist__layout_alloc(parent->world, out));
  out->size = parent->size / g->size;
  out->ncopies = parent->ncopies * g->size;
  for (int r = 0; r < parent->world; r++) {
    if (g->color[r] < 0 || parent->color[r] < 0) {
      out->color[r] = out->key[r] = out->sub[r] = -1;
      continue;
    }
    out->color[r] = parent->color[r] * g->size + g->key[r];
    out->key[r] = g->sub[r];
    out->sub[r] = g->key[r];
  }
  return DIST_SUCCESS;
}

dist_status dist__layout_ranks(int world, int n, const int *ranks, dist__layout *out) {
  memset(out, 0, sizeof *out); /* safe to free on every error path */
  if (n < 1 || n > world) return dist__error(DIST_ERR_GROUP_SIZE, "%d ranks listed for a world of %d", n, world);
  DIST_CHECK(dist__layout_alloc(world, out));
  out->size = n;
  out->ncopies = 1;
  for (int r = 0; r < world; r++) out->color[r] = out->key[r] = out->sub[r] = -1;
  for (int i = 0; i < n; i++) {
    int r = ranks[i];
    if (r < 0 || r >= world || out->color[r] >= 0) {
      dist_status s = r < 0 || r >= world
                          ? dist__error(DIST_ERR_INVALID_ARGUMENT, "rank %d (entry %d) is not in the world of %d", r, i, world)
                          : dist__error(DIST_ERR_INVALID_ARGUMENT, "rank %d is listed twice", r);
      dist__layout_free(out);
      return s;
    }
    out->color[r] = 0;
    out->key[r] = i;
    out->sub[r] = 0;
  }
  return DIST_SUCCESS;
}

dist_status dist__layout_finish(dist__layout *l) {
  int ncopies = 0;
  for (int r = 0; r < l->world; r++)
    if (l->color[r] >= ncopies) ncopies = l->color[r] + 1;
  int *count = calloc((size_t)ncopies + 1, sizeof(int));
  if (!count) return dist__error(DIST_ERR_NO_MEMORY, "group layout counts");
  for (int r = 0; r < l->world; r++)
    if (l->color[r] >= 0) count[l->color[r]]++;
  l->ncopies = ncopies;
  l->size = ncopies > 0 ? count[0] : 0;
  for (int c = 1; c < ncopies; c++)
    if (count[c] != l->size) l->size = -1;
  free(count);
  return DIST_SUCCESS;
}

int dist__layout_members(const dist__layout *l, int r, int *members) {
  if (r < 0 || r >= l->world || l->color[r] < 0) return 0;
  int n = 0; /* `members` holds my copy's size; never write past it */
  for (int q = 0; q < l->world; q++) n += l->color[q] == l->color[r];
  for (int q = 0; q < l->world; q++)
    if (l->color[q] == l->color[r] && l->key[q] >= 0 && l->key[q] < n) members[l->key[q]] = q;
  return n;
}

dist_status dist__mesh_resolve(int ndims, const int *sizes, int total, int *resolved) {
  int wild = -1;
  long prod = 1;
  for (int k = 0; k < ndims; k++) {
    if (sizes[k] == -1) {
      if (wild >= 0) return dist__error(DIST_ERR_GROUP_SIZE, "mesh axes %d and %d are both -1; at most one may be", wild, k);
      wild = k;
    } else if (sizes[k] < 1) {
      return dist__error(DIST_ERR_GROUP_SIZE, "mesh axis %d has size %d; sizes must be >= 1 or -1", k, sizes[k]);
    } else {
      prod *= sizes[k];
      if (prod > total) break;
    }
  }
  if (wild >= 0 && (prod > total || total % prod != 0))
    return dist__error(DIST_ERR_GROUP_SIZE, "mesh axes other than %d multiply to %ld, which does not divide %d", wild,
                       prod, total);
  if (wild < 0 && prod != total)
    return dist__error(DIST_ERR_GROUP_SIZE, "mesh sizes multiply to %ld but the parent has %d ranks", prod, total);
  for (int k = 0; k < ndims; k++) resolved[k] = k == wild ? (int)(total / prod) : sizes[k];
  return DIST_SUCCESS;
}

dist_status dist__layout_nodes(int world, const int *node, const int *lrank, dist__layout *local,
                               dist__layout *cross) {
  memset(local, 0, sizeof *local);
  memset(cross, 0, sizeof *cross);
  int nnodes = 0;
  for (int r = 0; r < world; r++) {
    if (node[r] < 0 || node[r] >= world || lrank[r] < 0 || lrank[r] >= world)
      return dist__error(DIST_ERR_INTERNAL, "rank %d has node %d, local rank %d", r, node[r], lrank[r]);
    if (node[r] >= nnodes) nnodes = node[r] + 1;
  }
  /* Ranks in node order (counting sort), so that a rank's key in "cross" is
   * the number of lower-numbered nodes that also have its local rank. */
  int *start = calloc((size_t)nnodes + 1, sizeof(int)), *order = malloc(sizeof(int) * (size_t)world),
      *seen = calloc((size_t)world, sizeof(int));
  dist_status s = start && order && seen ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "node table");
  if (!s) s = dist__layout_alloc(world, local);
  if (!s) s = dist__layout_alloc(world, cross);
  if (!s) {
    for (int r = 0; r < world; r++) start[node[r] + 1]++;
    for (int n = 0; n < nnodes; n++) start[n + 1] += start[n];
    for (int r = 0; r < world; r++) order[start[node[r]]++] = r;
    for (int i = 0; i < world; i++) {
      int r = order[i];
      local->color[r] = local->sub[r] = node[r]; /* copies of "local" are nodes */
      local->key[r] = lrank[r];
      cross->color[r] = cross->sub[r] = lrank[r]; /* copies of "cross" are local ranks */
      cross->key[r] = seen[lrank[r]]++;
    }
    s = dist__layout_finish(local);
    if (!s) s = dist__layout_finish(cross);
  }
  free(start);
  free(order);
  free(seen);
  if (s) {
    dist__layout_free(local);
    dist__layout_free(cross);
  }
  return s;
}
