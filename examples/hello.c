/* hello: initialize distmgr, build a small group tree, and print one line per
 * rank. `hello --settings` prints the table of DIST_* settings instead. */
#include <distmgr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    dist_status s_ = (call);                                                               \
    if (s_ != DIST_SUCCESS) {                                                              \
      fprintf(stderr, "hello: %s: %s (%s)\n", #call, dist_status_string(s_), dist_last_error()); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--settings") == 0) {
    dist_settings_print(stdout);
    return 0;
  }
  CHECK(dist_manager_initialize());

  int rank, size, lrank, lsize, node, nnodes;
  dist_device dev;
  const char *method;
  CHECK(dist_manager_rank(&rank));
  CHECK(dist_manager_world_size(&size));
  CHECK(dist_manager_local_rank(&lrank));
  CHECK(dist_manager_local_size(&lsize));
  CHECK(dist_manager_node(&node));
  CHECK(dist_manager_node_count(&nnodes));
  CHECK(dist_manager_device(&dev));
  CHECK(dist_manager_method_name(&method));

  /* world -> {model_parallel, data_parallel}: 2-way model parallel when the
   * world is even, the rest data parallel. */
  int mp = size % 2 == 0 ? 2 : 1;
  dist_group_node leaves[2] = {{"model_parallel", mp, 0, NULL}, {"data_parallel", size / mp, 0, NULL}};
  dist_group_node root = {"world", 0, 2, leaves};
  CHECK(dist_group_create_tree(&root));
  int mp_rank, dp_rank;
  CHECK(dist_group_rank("model_parallel", &mp_rank));
  CHECK(dist_group_rank("data_parallel", &dp_rank));

  dist_print0("distmgr %s: %d rank(s) on %d node(s)\n", DIST_VERSION_STRING, size, nnodes);
  const char *addr;
  int port;
  CHECK(dist_manager_master_address(&addr));
  CHECK(dist_manager_master_port(&port));
  printf("[%s] rank %d/%d local %d/%d node %d device %s:%d | model_parallel %d/%d data_parallel %d/%d | master %s:%d\n",
         method, rank, size, lrank, lsize, node, dist_device_kind_name(dev.kind), dev.index, mp_rank, mp, dp_rank,
         size / mp, addr, port);
  fflush(stdout);
  CHECK(dist_manager_finalize());
  return 0;
}
