/* Group layout math (pure, no MPI): which world ranks form each copy of a
 * group, and in what order.
 *
 * A layout assigns every world rank r a copy index color[r] (-1: not a
 * member), its rank key[r] inside that copy, and sub[r], the index of its copy
 * among the copies that share one copy of the parent. Every group except an
 * explicit rank list partitions its parent into equal copies. */
#ifndef DISTMGR_LAYOUT_H
#define DISTMGR_LAYOUT_H

#include "distmgr/status.h"

typedef struct dist__layout {
  int world;   /* number of world ranks */
  int size;    /* members per copy */
  int ncopies; /* number of copies */
  int *color;  /* [world] */
  int *key;    /* [world] */
  int *sub;    /* [world] */
} dist__layout;

/* Allocate the arrays for `world` ranks (contents undefined). */
dist_status dist__layout_alloc(int world, dist__layout *out);
void dist__layout_free(dist__layout *l);

/* The world: one copy, key = rank. */
dist_status dist__layout_world(int world, dist__layout *out);

/* Split each copy of `parent` (a mesh of `ndims` axes, row-major: the last
 * axis varies fastest over consecutive parent ranks) and keep the groups along
 * `axis`: ranks whose coordinates differ only in that axis. The product of
 * dims must equal parent->size. */
dist_status dist__layout_axis(const dist__layout *parent, int ndims, const int *dims, int axis, dist__layout *out);

/* Consecutive slices of `size` ranks of each parent copy (PhysicsNeMo's
 * subgroup): axis 1 of the mesh (parent->size / size, size). */
dist_status dist__layout_subgroup(const dist__layout *parent, int size, dist__layout *out);

/* Within each copy of `parent`, the i-th members of the copies of `g`
 * (g must be a partition of `parent` into copies of equal size). */
dist_status dist__layout_orthogonal(const dist__layout *parent, const dist__layout *g, dist__layout *out);

/* One copy made of the listed world ranks in that order; others not members. */
dist_status dist__layout_ranks(int world, int n, const int *ranks, dist__layout *out);

/* Set ncopies and size from color[] (size -1 when copies differ in size, as
 * "local" on uneven nodes: such a layout cannot be subdivided). */
dist_status dist__layout_finish(dist__layout *l);

/* The built-in "local" (one copy per node, keyed by local rank) and "cross"
 * (one copy per local rank, keyed by node order) from each world rank's node
 * index and local rank. Nodes may hold different numbers of ranks. */
dist_status dist__layout_nodes(int world, const int *node, const int *lrank, dist__layout *local,
                               dist__layout *cross);

/* World ranks of the copy that world rank `r` belongs to, ordered by key.
 * `members` must hold l->size entries (the world's when copies differ in
 * size). Returns the copy's size, 0 if r is not a member. */
int dist__layout_members(const dist__layout *l, int r, int *members);

/* Resolve a mesh shape: at most one -1 (filled in), every other entry >= 1,
 * product equal to `total`. */
dist_status dist__mesh_resolve(int ndims, const int *sizes, int total, int *resolved);

#endif
