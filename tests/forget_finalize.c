/* A program that initializes distmgr, creates a group and exits without
 * dist_manager_finalize(): it must still exit cleanly with status 0. */
#include <distmgr.h>
#include <stdio.h>

int main(void) {
  int size = 0;
  if (dist_manager_initialize() != DIST_SUCCESS || dist_manager_world_size(&size) != DIST_SUCCESS ||
      dist_group_create_subgroup("solo", 1, NULL) != DIST_SUCCESS) {
    fprintf(stderr, "forget_finalize: %s\n", dist_last_error());
    return 1;
  }
  printf("forget_finalize: %d rank(s) up, leaving without finalize\n", size);
  return 0;
}
