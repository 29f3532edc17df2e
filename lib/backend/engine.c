/* The engines' state (engine.h). */
#include <string.h>

#include "backend/engine.h"

dist__engine_state dist__engine = {.world = MPI_COMM_NULL, .faults = MPI_COMM_NULL};

void dist__engine_reset(void) {
  memset(&dist__engine, 0, sizeof dist__engine);
  dist__engine.world = dist__engine.faults = MPI_COMM_NULL;
}
