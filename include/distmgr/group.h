/* Named process groups.
 *
 * A group name refers to one "copy" per rank: e.g. a subgroup of size 2 of an
 * 8-rank world has 4 copies [0,1] [2,3] [4,5] [6,7], and on rank 5 the name
 * means [4,5]. Ranks are world ranks (of the manager's world, which may be an
 * adopted communicator). NULL as a name means "world".
 *
 * Built-in: "world"; "local" (the ranks on my node); "cross" (one rank per
 * node, those with my local rank; my rank in it is my node index); "self"
 * (every rank alone, size 1).
 *
 * Ordering rule: every creation call is collective over the whole world: all
 * ranks call the same creations, with the same arguments, in the same order
 * (also ranks that end up in no copy of the group). Each creation first checks
 * this with one small all-reduce; ranks that disagree all get
 * DIST_ERR_MISMATCH instead of a hang. Lookups are local. */
#ifndef DISTMGR_GROUP_H
#define DISTMGR_GROUP_H

#include "distmgr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_GROUP_NAME_MAX 63 /* characters, not counting the terminator */

/* Consecutive slices of `size` ranks of each copy of `parent` (NULL = world).
 * `size` must divide the parent's size. Collective over the world. */
dist_status dist_group_create_subgroup(const char *name, int size, const char *parent);

/* The orthogonal group of `of`: within each copy of of's parent, the ranks at
 * the same position of the copies of `of`. Of a subgroup of size s of an
 * 8-rank world this is the stride-s groups ([[0,1],[2,3],...] gives
 * [[0,2,4,6],[1,3,5,7]]). Of a group nested deeper, it stays inside the
 * parent's copy (PhysicsNeMo zips over the whole world instead, which for
 * nested groups mixes parents). Collective over the world. */
dist_status dist_group_create_orthogonal(const char *name, const char *of);

/* One group of the listed world ranks, in that order; other ranks are not
 * members (their lookups of size and members work, rank returns
 * DIST_ERR_NOT_MEMBER). Collective over the world. */
dist_status dist_group_create_ranks(const char *name, int n, const int *world_ranks);

/* A group tree. A leaf gives its size; an inner node's size is 0 (the product
 * of its children) or that product. The root names an existing group (usually
 * "world") or a new subgroup of the world. For each inner node the first child
 * takes consecutive ranks and each later child is strided over the ones before
 * it: the children form a mesh of the parent with the first child fastest, so
 * with two children the second is the orthogonal group of the first. Example:
 * world(8) -> {model_parallel 2, data_parallel 4}. Nodes are created
 * breadth-first. Collective over the world. */
typedef struct dist_group_node {
  const char *name;
  int size;
  int nchildren;
  const struct dist_group_node *children;
} dist_group_node;

dist_status dist_group_create_tree(const dist_group_node *root);

/* An N-d mesh over `parent` (NULL = world) with one named group per axis,
 * row-major as torch's DeviceMesh (the last axis takes consecutive ranks). One
 * size may be -1 (filled in); the product must equal the parent's size.
 * Collective over the world. */
dist_status dist_group_create_mesh(const char *parent, int ndims, const int *sizes, const char *const *names);

/* Lookups (local). Unknown names give DIST_ERR_UNKNOWN_GROUP. Names returned
 * by parent/name_at/name_of stay valid until dist_manager_finalize(). */
dist_status dist_group_exists(const char *name, int *exists);
dist_status dist_group_size(const char *name, int *size);   /* size of my copy (of the group for non-members) */
dist_status dist_group_rank(const char *name, int *rank);   /* DIST_ERR_NOT_MEMBER if not a member */
dist_status dist_group_is_member(const char *name, int *is_member);
/* World ranks of my copy in group-rank order; `capacity` entries at most
 * (DIST_ERR_BUFFER_TOO_SMALL, with *count set, if it is too small). */
dist_status dist_group_members(const char *name, int *ranks, int capacity, int *count);
dist_status dist_group_parent(const char *name, const char **parent); /* NULL for world */
dist_status dist_group_count(int *count);
dist_status dist_group_name_at(int index, const char **name); /* creation order, world first */

#ifdef __cplusplus
}
#endif
#endif
