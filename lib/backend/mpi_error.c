/* MPI error codes as distmgr errors (agree.h). */
#include <stdio.h>

#include "backend/agree.h"

dist_status dist__mpi_error(int code, const char *call) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", code);
  return dist__error(DIST_ERR_MPI, "%s failed: %s", call, text);
}
