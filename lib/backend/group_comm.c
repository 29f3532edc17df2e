/* Groups with their MPI communicators: made by splitting the world (or
 * from a communicator the caller made) and added to the group table with
 * one agreement; freed with every engine's handle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/round_shm.h"
#include "core/check.h"
#include "core/fault.h"
#include "core/reserve.h"
#ifdef HAVE_GLOO
#include "backend/backend_shm.h"
#include "backend/gloo.h"
#include "store/rendezvous.h"
#endif

static void free_group(dist__group *g);

/* The group `g` into the table, in `kept` (allocated by the caller); the
 * table takes `layout` over. */
static void insert(dist__group *g, dist__group *kept, dist__layout *layout) {
  g->layout = *layout;
  memset(layout, 0, sizeof *layout);
  g->index = dist__groups.ngroups;
  *kept = *g;
  dist__groups.groups[dist__groups.ngroups++] = kept;
  dist_log(DIST_LOG_DEBUG, "group '%s': size %d, my rank %d, %d copies", g->name, g->size, g->rank,
           g->layout.ncopies);
}

/* g's MPI part: takes comm over (MPI_COMM_NULL: not a member, nothing kept;
 * on failure comm is freed). */
static dist_status attach(dist__group *g, MPI_Comm comm) {
  g->mpi = NULL;
  if (comm == MPI_COMM_NULL) return DIST_SUCCESS;
  g->mpi = malloc(sizeof *g->mpi);
  if (!g->mpi) {
    DIST_WARN_CALL(MPI_Comm_free(&comm));
    return dist__error(DIST_ERR_NO_MEMORY, "group '%s': its MPI part", g->name);
  }
  g->mpi->comm = comm;
  return DIST_SUCCESS;
}

static void detach(dist__group *g) {
  if (!g->mpi) return;
  int finalized = 0;
  DIST_WARN_CALL(MPI_Finalized(&finalized));
  if (!finalized && g->mpi->comm != MPI_COMM_NULL) DIST_WARN_CALL(MPI_Comm_free(&g->mpi->comm));
  free(g->mpi);
  g->mpi = NULL;
}

dist_status dist__group_keep(const char *name, int parent, dist__layout *layout, MPI_Comm comm) {
  dist__group g, *kept;
  memset(&g, 0, sizeof g);
  snprintf(g.name, sizeof g.name, "%s", name);
  g.parent = parent;
  g.rank = -1;
  dist_status s = dist__group_reserve();
  kept = s ? NULL : malloc(sizeof *kept);
  if (!s && !kept) s = dist__error(DIST_ERR_NO_MEMORY, "group '%s'", name);
  if (!s && comm != MPI_COMM_NULL) {
    int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm, &g.rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &g.size);
    g.members = rc == MPI_SUCCESS ? malloc(sizeof(int) * (size_t)g.size) : NULL;
    if (rc != MPI_SUCCESS) s = dist__mpi_error(rc, "MPI_Comm_rank/size (new group)");
    else if (!g.members) s = dist__error(DIST_ERR_NO_MEMORY, "member list of group '%s'", name);
    else dist__layout_members(layout, dist__groups.rank, g.members);
  } else {
    g.size = layout->size;
  }
  if (!s) {
    s = attach(&g, comm); /* takes comm over, frees it on failure */
    comm = MPI_COMM_NULL;
  }
  if (s) {
    free(kept);
    free(g.members);
    if (comm != MPI_COMM_NULL) DIST_WARN_CALL(MPI_Comm_free(&comm));
    return s;
  }
  insert(&g, kept, layout);
  return DIST_SUCCESS;
}

#ifdef HAVE_GLOO
/* The Gloo context of my copy of a group: the copy's members meet under a
 * key prefix naming the connect (counted: the same count on every rank, and
 * a retry after a failed creation never reads the old addresses) and the
 * copy. A member that fails in it, or will not make it, says so on the
 * copy's gave-up key, which the others watch meanwhile: they stop waiting for
 * it at once, and copies without it go on. */
static dist_status gloo_connect(const dist__layout *l, int color, const char *prefix, const char *gave_up,
                                dist__gloo **ctx) {
  *ctx = NULL;
  int me = dist__groups.rank;
  if (color < 0) return DIST_SUCCESS;
  /* room for the world: copies may differ in size (l->size is then -1);
   * from the reserve: the copy's others are on their way to the connect */
  int *members = dist__reserve_alloc(sizeof *members * (size_t)dist__groups.size, 0), rank = -1;
  if (!members) return dist__error(DIST_ERR_NO_MEMORY, "members of a group's copy");
  int n = dist__layout_members(l, me, members);
  for (int i = 0; i < n; i++)
    if (members[i] == me) rank = i;
  dist__reserve_free(members);
  dist__store_client *c = dist__rdzv_client(dist__engine.rdzv);
  dist__store_watch(c, 1, gave_up);
  dist_status s = dist__gloo_connect(c, prefix, rank, n, dist__engine.gloo_timeout, ctx);
  dist__store_watch(c, 1, NULL);
  return s;
}

dist_status dist__group_keep_gloo(const char *name, int parent, dist__layout *layout, dist_status local) {
  dist__gloo *ctx = NULL;
  /* Not after a failure here, nor after a rank failed to arrive: said on my
   * copy's key instead (gloo_connect). */
  dist_status s = local ? local : dist__rdzv_still_there(dist__engine.rdzv, "connecting a group's Gloo context");
  int color = layout->color ? layout->color[dist__groups.rank] : -1;
  char prefix[256], gave_up[300];
  snprintf(prefix, sizeof prefix, "%sgroup/%lu/%d/", dist__rdzv_prefix(dist__engine.rdzv), dist__engine.gloo_connects++,
           color);
  snprintf(gave_up, sizeof gave_up, "%sgave_up", prefix);
  if (!s && dist__fault("gloo_connect")) s = dist__error(DIST_ERR_NO_MEMORY, "injected fault (gloo_connect)"); /* tests */
  if (!s) s = gloo_connect(layout, color, prefix, gave_up, &ctx);
  if (s) {
    if (color >= 0) dist__rdzv_give_up_on(dist__engine.rdzv, gave_up, s, dist_last_error()); /* the first message is kept */
    return s;
  }
  dist__group g, *kept;
  memset(&g, 0, sizeof g);
  snprintf(g.name, sizeof g.name, "%s", name);
  g.parent = parent;
  g.rank = -1;
  g.size = layout->size;
  s = dist__group_reserve();
  kept = s ? NULL : malloc(sizeof *kept);
  if (!s && !kept) s = dist__error(DIST_ERR_NO_MEMORY, "group '%s'", name);
  if (!s && ctx) {
    g.size = dist__gloo_size(ctx); /* my copy's: copies may differ in size */
    g.members = malloc(sizeof(int) * (size_t)g.size);
    if (!g.members) s = dist__error(DIST_ERR_NO_MEMORY, "member list of group '%s'", name);
    else dist__layout_members(layout, dist__groups.rank, g.members);
    g.rank = dist__gloo_rank(ctx);
  }
  if (s) {
    free(kept);
    free(g.members);
    dist__gloo_free(ctx);
    return s;
  }
  g.gloo = ctx;
  insert(&g, kept, layout);
  return DIST_SUCCESS;
}
#endif

dist_status dist__group_add_all(int n, const char *const *names, int parent, dist__layout *layouts, dist_status local) {
  int before = dist__groups.ngroups;
  dist_status s = local;
  dist__layout none; /* for every group when layouts is NULL (local failed) */
  memset(&none, 0, sizeof none);
#define LAYOUT(k) (layouts ? &layouts[k] : &none)
#ifdef HAVE_GLOO
  if (dist__engine.rdzv) {
    /* A connect waits for every member of the copy: a rank whose layouts
     * failed must not leave its copies' others waiting there until Gloo's
     * limit. So agree first (MPI's split needs no such round: a rank that
     * splits off with MPI_UNDEFINED joins nothing). */
    const char *what = n > 1 ? "creating process groups" : "creating a process group";
    const dist_status laid = dist__agree_group(dist__groups.groups[0], s, what);
    s = laid;
    for (int k = 0; !laid && k < n; k++) {
      dist_status r = dist__group_keep_gloo(names[k], parent, LAYOUT(k), s);
      if (!s) s = r;
    }
    if (!laid) s = dist__agree_group(dist__groups.groups[0], s, what);
    if (!s) s = dist__groups_open_rounds(before);
    while (s && dist__groups.ngroups > before) free_group(dist__groups.groups[--dist__groups.ngroups]);
    return s;
  }
#endif
  for (int k = 0; k < n; k++) {
    /* Split on every rank even after a local failure: the others are in it. */
    MPI_Comm comm = MPI_COMM_NULL;
    int color = s || !LAYOUT(k)->color ? -1 : LAYOUT(k)->color[dist__groups.rank];
    int rc = MPI_Comm_split(dist__engine.world, color >= 0 ? color : MPI_UNDEFINED, color >= 0 ? LAYOUT(k)->key[dist__groups.rank] : 0, &comm);
    if (!s) s = rc != MPI_SUCCESS ? dist__mpi_error(rc, "MPI_Comm_split") : dist__group_keep(names[k], parent, LAYOUT(k), comm);
    else if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  /* Every rank must add the groups, or the tables would diverge. */
  s = dist__agree(dist__engine.world, s, n > 1 ? "creating process groups" : "creating a process group");
  if (!s) s = dist__groups_open_rounds(before);
  while (s && dist__groups.ngroups > before) free_group(dist__groups.groups[--dist__groups.ngroups]); /* kept here, failed elsewhere */
  return s;
#undef LAYOUT
}

dist_status dist__groups_open_rounds(int from) {
  dist_status s = DIST_SUCCESS;
  for (int i = from; i < dist__groups.ngroups; i++) { /* the same order on every rank: each a collective over its members */
    dist_status r = dist__round_shm_open(dist__groups.groups[i]);
    if (!s) s = r;
#ifdef HAVE_GLOO
    dist__shm_data_init(dist__groups.groups[i]);
#endif
  }
  return s;
}

static void free_group(dist__group *g) {
  dist__backend_release_group(g);
  dist__round_shm_close(g);
#ifdef HAVE_GLOO
  dist__shm_data_close(g);
  dist__gloo_free(g->gloo);
  g->gloo = NULL;
#endif
  detach(g);
  free(g->members);
  dist__layout_free(&g->layout);
  free(g);
}

void dist__groups_free(void) {
  for (int i = dist__groups.ngroups - 1; i >= 0; i--) free_group(dist__groups.groups[i]);
  free(dist__groups.groups);
  dist__groups.groups = NULL;
  dist__groups.ngroups = dist__groups.capacity = 0;
}

/* ---- private groups ------------------------------------------------------- */

/* A private group around `comm` (taken over; MPI_COMM_NULL: not a member):
 * my rank, the size and the world ranks of the members. */
static dist_status private_fill(const char *name, MPI_Comm comm, dist__group *out) {
  dist__group_private_clear(out);
  snprintf(out->name, sizeof out->name, "%s", name);
  DIST_CHECK(attach(out, comm));
  if (!out->mpi) return DIST_SUCCESS;
  int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm, &out->rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &out->size);
  if (rc != MPI_SUCCESS) {
    dist__group_private_free(out);
    return dist__mpi_error(rc, "MPI_Comm_rank/size (private group)");
  }
  out->members = malloc(sizeof(int) * (size_t)out->size);
  int *mine = malloc(sizeof(int) * (size_t)out->size);
  MPI_Group own, world;
  rc = out->members && mine ? MPI_Comm_group(comm, &own) : MPI_ERR_NO_MEM;
  if (rc == MPI_SUCCESS) {
    for (int i = 0; i < out->size; i++) mine[i] = i;
    rc = MPI_Comm_group(dist__engine.world, &world);
    if (rc == MPI_SUCCESS) rc = MPI_Group_translate_ranks(own, out->size, mine, world, out->members);
    if (rc == MPI_SUCCESS) DIST_WARN_CALL(MPI_Group_free(&world));
    DIST_WARN_CALL(MPI_Group_free(&own));
  }
  free(mine);
  if (rc == MPI_SUCCESS) return DIST_SUCCESS;
  dist__group_private_free(out);
  return rc == MPI_ERR_NO_MEM ? dist__error(DIST_ERR_NO_MEMORY, "members of %s", name)
                              : dist__mpi_error(rc, "MPI_Group_translate_ranks");
}

#ifdef HAVE_GLOO
/* A private group on Gloo: its members (world ranks, in group order; NULL:
 * not a member) meet under a key prefix naming the how-manieth private group
 * this is (every rank makes them in the same order, as MPI's would need too)
 * and its first member, so that the copies of a split stay apart. */
static dist_status private_gloo(const char *name, const int *members, int size, dist__group *out) {
  unsigned long seq = dist__engine.private_seq++;
  dist__group_private_clear(out);
  snprintf(out->name, sizeof out->name, "%s", name);
  if (!members) return DIST_SUCCESS;
  out->members = malloc(sizeof(int) * (size_t)size);
  if (!out->members) return dist__error(DIST_ERR_NO_MEMORY, "members of %s", name);
  memcpy(out->members, members, sizeof(int) * (size_t)size);
  for (int i = 0; i < size; i++)
    if (members[i] == dist__groups.rank) out->rank = i;
  out->size = size;
  char prefix[256];
  snprintf(prefix, sizeof prefix, "%sprivate/%lu/%d/", dist__rdzv_prefix(dist__engine.rdzv), seq, members[0]);
  dist_status s = dist__gloo_connect(dist__rdzv_client(dist__engine.rdzv), prefix, out->rank, size,
                                     dist__engine.gloo_timeout, &out->gloo);
  if (s) dist__group_private_free(out);
  return s;
}

/* MPI_Comm_split's grouping from everyone's (color, key), gathered over the
 * world's Gloo context: my color's ranks by key, then world rank. */
static dist_status split_gloo(const char *name, int color, int key, dist__group *out) {
  int P = dist__groups.size, n = 0;
  int32_t mine[2] = {color, key}, *all = malloc(sizeof *all * 2 * (size_t)P);
  int *members = malloc(sizeof *members * (size_t)P);
  size_t *bytes = calloc((size_t)P, sizeof *bytes);
  dist_status s = all && members && bytes ? DIST_SUCCESS : dist__error(DIST_ERR_NO_MEMORY, "splitting %s", name);
  for (int q = 0; !s && q < P; q++) bytes[q] = sizeof mine;
  if (!s) s = dist__gloo_all_gather_v(dist__groups.groups[0]->gloo, mine, all, bytes);
  for (int q = 0; !s && color >= 0 && q < P; q++) {
    if (all[2 * q] != color) continue;
    int at = n++; /* insertion by (key, rank): q rises, so ties keep rank order */
    while (at > 0 && all[2 * members[at - 1] + 1] > all[2 * q + 1]) members[at] = members[at - 1], at--;
    members[at] = q;
  }
  if (!s) s = private_gloo(name, color >= 0 ? members : NULL, n, out);
  else dist__group_private_clear(out);
  free(all), free(members), free(bytes);
  return s;
}
#endif

dist_status dist__group_split_private(const char *name, int color, int key, dist__group *out) {
#ifdef HAVE_GLOO
  if (dist__engine.rdzv) return split_gloo(name, color, key, out);
#endif
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_split(dist__engine.world, color >= 0 ? color : MPI_UNDEFINED, key, &comm);
  if (rc != MPI_SUCCESS) {
    private_fill(name, MPI_COMM_NULL, out);
    return dist__mpi_error(rc, "MPI_Comm_split");
  }
  return private_fill(name, comm, out);
}

dist_status dist__group_copy_private(const char *name, const dist__group *of, dist__group *out) {
#ifdef HAVE_GLOO
  if (dist__engine.rdzv) return private_gloo(name, of->members, of->size, out);
#endif
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Group world, members;
  int rc = MPI_Comm_group(dist__engine.world, &world);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Group_incl(world, of->size, of->members, &members);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(dist__engine.world, members, 0x0da5, &comm);
    if (rc == MPI_SUCCESS) DIST_WARN_CALL(MPI_Group_free(&members));
    DIST_WARN_CALL(MPI_Group_free(&world));
  }
  if (rc != MPI_SUCCESS) {
    private_fill(name, MPI_COMM_NULL, out);
    return dist__mpi_error(rc, "MPI_Comm_create_group");
  }
  return private_fill(name, comm, out);
}

void dist__group_private_free(dist__group *g) {
  dist__backend_release_group(g);
#ifdef HAVE_GLOO
  dist__gloo_free(g->gloo);
  g->gloo = NULL;
#endif
  detach(g);
  free(g->members);
  g->members = NULL;
}

void dist__group_private_clear(dist__group *g) {
  memset(g, 0, sizeof *g);
  g->parent = g->index = g->rank = -1;
}
