/* Registered functions: names, functions and VJPs, and the collective check
 * that every rank registered the same. */
#include <stdio.h>
#include <string.h>

#include "core/hash.h"
#include "backend/agree.h"
#include "distmgr/coll.h"
#include "distmgr/manager.h"
#include "group/group.h"
#include "rpc/rpc_internal.h"

#define REGISTRY_MAX 256
static dist__rpc_fn_entry registry[REGISTRY_MAX];
static unsigned char lens[REGISTRY_MAX]; /* each name's length: no strlen per entry on every call */
/* Entries are only appended, each published by the release store of the
 * count: lookups (one a call) take no lock. Registrations take this spin
 * lock among themselves. */
static atomic_int registered;
static atomic_int registry_mu;

static dist_status check_name(const char *name, const char *what) {
  if (!name || !*name) return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: no function name", what);
  if (strlen(name) > DIST_RPC_MAX_NAME)
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "%s: name '%.20s...' is longer than %d bytes", what, name,
                       DIST_RPC_MAX_NAME);
  return DIST_SUCCESS;
}

static int find(const char *name, size_t len) {
  int n = atomic_load_explicit(&registered, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (lens[i] == len && !memcmp(registry[i].name, name, len)) return i;
  return -1;
}

dist_status dist_rpc_register(const char *name, dist_rpc_fn fn, void *user) {
  DIST_CHECK(check_name(name, "dist_rpc_register"));
  if (!fn) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register: '%s' has no function", name);
  dist_status s = DIST_SUCCESS;
  dist__rpc_spin_lock(&registry_mu);
  if (find(name, strlen(name)) >= 0)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register: '%s' is registered already", name);
  else if (atomic_load(&registered) == REGISTRY_MAX)
    s = dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register: more than %d functions", REGISTRY_MAX);
  else {
    int i = atomic_load(&registered);
    dist__rpc_fn_entry *e = &registry[i];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->fn = fn;
    e->user = user;
    lens[i] = (unsigned char)strlen(e->name);
    atomic_store_explicit(&registered, i + 1, memory_order_release);
  }
  dist__rpc_spin_unlock(&registry_mu);
  return s;
}

dist_status dist_rpc_register_vjp(const char *name, dist_rpc_fn vjp, void *user) {
  DIST_CHECK(check_name(name, "dist_rpc_register_vjp"));
  if (!vjp) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register_vjp: '%s' has no function", name);
  dist__rpc_spin_lock(&registry_mu);
  int i = find(name, strlen(name)), had = i >= 0 && registry[i].vjp;
  if (i >= 0 && !had) { /* its user first: a lookup that sees the VJP sees its user */
    registry[i].vjp_user = user;
    __atomic_store_n(&registry[i].vjp, vjp, __ATOMIC_RELEASE);
  }
  dist__rpc_spin_unlock(&registry_mu);
  if (i < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register_vjp: register '%s' first", name);
  /* Once, as the function itself: lookups take no lock, and a second pair
   * could be read half old, half new by a call running meanwhile. */
  if (had) return dist__error(DIST_ERR_INVALID_ARGUMENT, "dist_rpc_register_vjp: '%s' has a VJP already", name);
  return DIST_SUCCESS;
}

dist_status dist__rpc_lookup(const char *name, size_t len, const dist__rpc_fn_entry **out) {
  int i = find(name, len);
  if (i < 0) return dist__error(DIST_ERR_INVALID_ARGUMENT, "no function '%.*s' is registered", (int)len, name);
  *out = &registry[i]; /* entries never move */
  return DIST_SUCCESS;
}

int dist__rpc_fn_index(const char *name, size_t len) { return find(name, len); }

const dist__rpc_fn_entry *dist__rpc_entry_at(int i, size_t *name_len) {
  if (i < 0 || i >= atomic_load_explicit(&registered, memory_order_acquire)) return NULL;
  *name_len = lens[i];
  return &registry[i];
}

/* The first DIST__RPC_TINY_FNS names in the order of registration, as one
 * hash (tiny calls name a function by its index: dist_rpc_init agrees on it). */
uint64_t dist__rpc_registry_order(int *count) {
  dist__rpc_spin_lock(&registry_mu);
  int n = atomic_load(&registered);
  if (n > DIST__RPC_TINY_FNS) n = DIST__RPC_TINY_FNS;
  uint64_t h = dist__hash(DIST__HASH_SEED, &n, sizeof n);
  for (int i = 0; i < n; i++) h = dist__hash(h, registry[i].name, lens[i] + 1u); /* the NUL separates names */
  dist__rpc_spin_unlock(&registry_mu);
  *count = n;
  return h;
}

/* Names (with whether each has a VJP) in a hash that does not depend on the
 * order of registration: a sum of per-name hashes. */
static uint64_t entry_hash(const dist__rpc_fn_entry *e) {
  uint64_t h = dist__hash(DIST__HASH_SEED, e->name, strlen(e->name));
  return e->vjp ? h * 31 + 7 : h;
}

dist_status dist_rpc_check_registry(void) {
  dist__rpc_spin_lock(&registry_mu);
  int64_t mine[2] = {registered, 0};
  for (int i = 0; i < registered; i++) mine[1] = (int64_t)((uint64_t)mine[1] + entry_hash(&registry[i]));
  dist__rpc_spin_unlock(&registry_mu);
  /* The control round on the world compares everyone's (count, names) hash. */
  dist__group *world = NULL;
  int differs = 0, me = 0;
  DIST_CHECK(dist__group_find(NULL, &world));
  DIST_CHECK(dist_manager_rank(&me));
  dist_status s = dist__agree_status_hash_group(world, DIST_SUCCESS, dist__hash(DIST__HASH_SEED, mine, sizeof mine),
                                                "dist_rpc_check_registry", &differs);
  if (!differs) return s;
  /* Which rank differs from rank 0: the lowest whose (count, hash) is not rank 0's. */
  int64_t ref[2] = {mine[0], mine[1]}, two = 2;
  dist_tensor r = dist_tensor_host(ref, DIST_I64, 1, &two);
  DIST_CHECK(dist_broadcast(NULL, &r, 0));
  int64_t who = (mine[0] != ref[0] || mine[1] != ref[1]) ? me : INT64_MAX;
  dist_tensor w = dist_tensor_host(&who, DIST_I64, 0, NULL);
  DIST_CHECK(dist_all_reduce(NULL, &w, DIST_MIN));
  return dist__error(DIST_ERR_MISMATCH,
                     "remote calls: worker%lld registered other functions than worker0 (worker0 has %lld; or other "
                     "names, or other VJPs)",
                     (long long)who, (long long)ref[0]);
}

