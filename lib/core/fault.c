/* See fault.h. */
#include "core/fault.h"

const char *dist__fault_site = NULL;
int dist__fault_skip = 0;
