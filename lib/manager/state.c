/* The manager's state itself (state.h), and the check every public call
 * makes first. */
#include "manager/state.h"

dist__manager dist__state;
int dist__finalized_once;

dist_status dist__require_initialized(const char *what) {
  if (dist__state.initialized) return DIST_SUCCESS;
  if (dist__finalized_once)
    return dist__error(DIST_ERR_NOT_INITIALIZED,
                       "%s called after dist_manager_finalize() (call dist_manager_initialize() again first)", what);
  return dist__error(DIST_ERR_NOT_INITIALIZED, "%s called before dist_manager_initialize()", what);
}
