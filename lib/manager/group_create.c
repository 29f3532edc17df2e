/* Creating groups: subgroup, orthogonal, explicit ranks, tree and mesh.
 * Each creation checks call order across ranks first (one all-reduce of a
 * hash of its arguments), then validates identically on every rank, so an
 * error is returned by all ranks alike and nobody waits in MPI_Comm_split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manager/coll_call.h"

#define TREE_MAX_NODES 1024
#define TREE_MAX_DEPTH 32

static uint64_t hash_str(uint64_t h, const char *s) {
  return s ? dist__hash(h, s, strlen(s) + 1) : dist__hash(h, "\x01null", 6);
}
static uint64_t hash_int(uint64_t h, int v) { return dist__hash(h, &v, sizeof v); }

static void describe_args(const dist__sig *s, char *buf, size_t n) {
  snprintf(buf, n, "arguments #%016llx", (unsigned long long)s->sizes);
}

/* A creation is a collective call on the world: numbered and checked like
 * the others (same creation, same arguments, same position on every rank). */
static dist_status begin(const char *what, uint64_t hash) {
  dist__call c;
  DIST_CHECK(dist__call_begin(&c, what, NULL));
  c.sig.sizes = hash;
  c.describe = describe_args;
  dist_status s = dist__call_verify_always(&c, DIST_SUCCESS);
  if (s == DIST_ERR_MISMATCH) {
    char msg[768];
    snprintf(msg, sizeof msg, "%s", dist_last_error());
    return dist__error(s, "%s (creations are collective over the world: the same arguments in the same order on "
                          "every rank)", msg);
  }
  return s;
}


/* Create `name` from `layout` (`local`: its computation failed here; the
 * creation still meets the other ranks, which may have succeeded, and every
 * rank returns the error). The layout is released either way. */
static dist_status add(const char *name, int parent, dist__layout *layout, dist_status local) {
  dist_status s = dist__group_add_all(1, &name, parent, layout, local);
  dist__layout_free(layout);
  return s;
}

dist_status dist_group_create_subgroup(const char *name, int size, const char *parent) {
  uint64_t h = hash_int(hash_str(hash_str(DIST__HASH_SEED, "subgroup"), name), size);
  DIST_CHECK(begin("dist_group_create_subgroup", hash_str(h, parent)));
  dist__group *p;
  DIST_CHECK(dist__group_check_new_name(name));
  DIST_CHECK(dist__group_find(parent, &p));
  dist__layout l = {0}; /* (freeable whatever the layout call did) */
  dist_status s = dist__layout_subgroup(&p->layout, size, &l);
  if (s) s = dist__error_context(s, "subgroup '%s' of '%s'", name, p->name);
  return add(name, p->index, &l, s);
}

dist_status dist_group_create_orthogonal(const char *name, const char *of) {
  uint64_t h = hash_str(hash_str(hash_str(DIST__HASH_SEED, "orthogonal"), name), of);
  DIST_CHECK(begin("dist_group_create_orthogonal", h));
  dist__group *g;
  DIST_CHECK(dist__group_check_new_name(name));
  if (!of) return dist__error(DIST_ERR_INVALID_ARGUMENT, "orthogonal group '%s': source group name is NULL", name);
  DIST_CHECK(dist__group_find(of, &g));
  if (g->parent < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "orthogonal group '%s': 'world' has no parent to be orthogonal in", name);
  dist__layout l = {0}; /* (freeable whatever the layout call did) */
  dist_status s = dist__layout_orthogonal(&dist__groups.groups[g->parent]->layout, &g->layout, &l);
  if (s) s = dist__error_context(s, "orthogonal group '%s' of '%s'", name, of);
  return add(name, g->parent, &l, s);
}

dist_status dist_group_create_ranks(const char *name, int n, const int *ranks) {
  uint64_t h = hash_int(hash_str(hash_str(DIST__HASH_SEED, "ranks"), name), n);
  if (ranks && n > 0) h = dist__hash(h, ranks, sizeof(int) * (size_t)n);
  DIST_CHECK(begin("dist_group_create_ranks", h));
  DIST_CHECK(dist__group_check_new_name(name));
  if (!ranks) return dist__error(DIST_ERR_INVALID_ARGUMENT, "group '%s': rank list is NULL", name);
  dist__layout l = {0}; /* (freeable whatever the layout call did) */
  dist_status s = dist__layout_ranks(dist__groups.size, n, ranks, &l);
  if (s) s = dist__error_context(s, "group '%s'", name);
  return add(name, 0, &l, s);
}

/* ---- mesh ------------------------------------------------------------------ */

/* Create one group per axis of `dims` over parent `p`; names[k] for axis k. */
static dist_status create_axes(dist__group *p, int ndims, const int *dims, const char *const *names) {
  dist__layout *l = calloc((size_t)ndims, sizeof *l);
  dist_status s = l ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "layouts of %d groups", ndims);
  for (int k = 0; !s && k < ndims; k++) s = dist__layout_axis(&p->layout, ndims, dims, k, &l[k]);
  /* All axes in one agreement; a layout that failed here (or no room for
   * the layouts: l NULL) still splits (as a non-member) so that no rank waits. */
  s = dist__group_add_all(ndims, names, p->index, l, s);
  for (int k = 0; l && k < ndims; k++) dist__layout_free(&l[k]); /* no-ops for layouts the table took over */
  free(l);
  return s;
}

static dist_status check_names(int n, const char *const *names) {
  for (int k = 0; k < n; k++) {
    DIST_CHECK(dist__group_check_new_name(names[k]));
    for (int j = 0; j < k; j++)
      if (strcmp(names[j], names[k]) == 0)
        return dist__error(DIST_ERR_DUPLICATE_GROUP, "group name '%s' is given twice", names[k]);
  }
  return DIST_SUCCESS;
}

dist_status dist_group_create_mesh(const char *parent, int ndims, const int *sizes, const char *const *names) {
  uint64_t h = hash_int(hash_str(hash_str(DIST__HASH_SEED, "mesh"), parent), ndims);
  for (int k = 0; sizes && names && k < ndims && k < 64; k++) h = hash_str(hash_int(h, sizes[k]), names[k]);
  DIST_CHECK(begin("dist_group_create_mesh", h));
  if (ndims < 1 || ndims > 64 || !sizes || !names)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "mesh: need 1 to 64 axes with sizes and names (got %d%s%s)", ndims,
                       sizes ? "" : ", sizes NULL", names ? "" : ", names NULL");
  DIST_CHECK(check_names(ndims, names));
  dist__group *p;
  DIST_CHECK(dist__group_find(parent, &p));
  int dims[64];
  if (p->layout.size < 1)
    return dist__error(DIST_ERR_GROUP_SIZE, "mesh: the copies of '%s' differ in size; it cannot hold a mesh", p->name);
  dist_status s = dist__mesh_resolve(ndims, sizes, p->layout.size, dims);
  if (s) return dist__error_context(s, "mesh over '%s'", p->name);
  return create_axes(p, ndims, dims, names);
}

/* ---- tree ------------------------------------------------------------------ */

typedef struct tree_walk {
  const dist_group_node *node[TREE_MAX_NODES]; /* breadth-first order */
  int size[TREE_MAX_NODES];
  int first_child[TREE_MAX_NODES]; /* index of node i's first child in node[] */
  int n;
} tree_walk;

/* Resolve sizes bottom-up (leaf sizes multiply into parents). */
static dist_status tree_size(const dist_group_node *node, int depth, int *budget, int *size) {
  if (--*budget < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "group tree has more than %d nodes (a cycle?)", TREE_MAX_NODES);
  if (!node->name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "group tree: a node has a NULL name");
  if (depth > TREE_MAX_DEPTH) return dist__error(DIST_ERR_INVALID_ARGUMENT, "group tree deeper than %d at '%s'", TREE_MAX_DEPTH, node->name);
  if (node->nchildren < 0 || (node->nchildren > 0 && !node->children))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "group tree node '%s': %d children%s", node->name, node->nchildren,
                       node->children ? "" : " but children is NULL");
  if (node->nchildren == 0) {
    if (node->size < 1) return dist__error(DIST_ERR_GROUP_SIZE, "group tree leaf '%s' has size %d", node->name, node->size);
    *size = node->size;
    return DIST_SUCCESS;
  }
  long prod = 1;
  for (int i = 0; i < node->nchildren; i++) {
    int cs;
    DIST_CHECK(tree_size(&node->children[i], depth + 1, budget, &cs));
    prod *= cs;
    if (prod > (1L << 30)) return dist__error(DIST_ERR_GROUP_SIZE, "group tree node '%s' is too large", node->name);
  }
  if (node->size != 0 && node->size != prod)
    return dist__error(DIST_ERR_GROUP_SIZE, "group tree node '%s' has size %d but its children multiply to %ld",
                       node->name, node->size, prod);
  *size = (int)prod;
  return DIST_SUCCESS;
}

static dist_status tree_walk_bfs(const dist_group_node *root, tree_walk *w) {
  w->n = 0;
  w->node[w->n++] = root;
  for (int i = 0; i < w->n; i++) {
    int budget = TREE_MAX_NODES;
    DIST_CHECK(tree_size(w->node[i], 0, &budget, &w->size[i]));
    w->first_child[i] = w->n;
    for (int c = 0; c < w->node[i]->nchildren; c++) {
      if (w->n == TREE_MAX_NODES) return dist__error(DIST_ERR_INVALID_ARGUMENT, "group tree has more than %d nodes", TREE_MAX_NODES);
      w->node[w->n++] = &w->node[i]->children[c];
    }
  }
  return DIST_SUCCESS;
}

static uint64_t hash_tree(uint64_t h, const dist_group_node *n, int depth, int *budget) {
  if (!n || depth > TREE_MAX_DEPTH || --*budget < 0) return hash_str(h, NULL);
  h = hash_int(hash_int(hash_str(h, n->name), n->size), n->nchildren);
  for (int i = 0; n->children && i < n->nchildren && *budget >= 0; i++) h = hash_tree(h, &n->children[i], depth + 1, budget);
  return h;
}

static dist_status tree_check_names(const tree_walk *w, int root_exists) {
  for (int i = root_exists ? 1 : 0; i < w->n; i++) {
    DIST_CHECK(dist__group_check_new_name(w->node[i]->name));
    for (int j = 0; j < i; j++)
      if (strcmp(w->node[j]->name, w->node[i]->name) == 0)
        return dist__error(DIST_ERR_DUPLICATE_GROUP, "group tree names '%s' twice", w->node[i]->name);
  }
  return DIST_SUCCESS;
}

dist_status dist_group_create_tree(const dist_group_node *root) {
  int budget = TREE_MAX_NODES;
  DIST_CHECK(begin("dist_group_create_tree", hash_tree(hash_str(DIST__HASH_SEED, "tree"), root, 0, &budget)));
  if (!root) return dist__error(DIST_ERR_INVALID_ARGUMENT, "group tree root is NULL");
  tree_walk walk, *w = &walk; /* (16 KiB; on the stack: a rank that failed to allocate it would leave the others waiting) */
  dist__group *g;
  dist_status s = tree_walk_bfs(root, w);
  int root_exists = !s && dist__group_find(root->name, &g) == DIST_SUCCESS;
  if (!s) s = tree_check_names(w, root_exists);
  if (!s && root_exists && g->layout.size != w->size[0])
    s = dist__error(DIST_ERR_GROUP_SIZE, "group tree root '%s' has %d ranks per copy but its leaves multiply to %d",
                    root->name, g->layout.size, w->size[0]);
  if (!s && !root_exists) s = dist_group_create_subgroup(root->name, w->size[0], NULL);
  for (int i = 0; !s && i < w->n; i++) {
    const dist_group_node *node = w->node[i];
    if (node->nchildren == 0) continue;
    /* Children as a mesh of the parent with the first child fastest: reverse order. */
    int m = node->nchildren, dims[TREE_MAX_NODES];
    const char *names[TREE_MAX_NODES];
    for (int c = 0; c < m; c++) {
      dims[m - 1 - c] = w->size[w->first_child[i] + c];
      names[m - 1 - c] = node->children[c].name;
    }
    s = dist__group_find(node->name, &g);
    if (!s) s = create_axes(g, m, dims, names);
  }
  return s;
}
