/* See fault.h. */
#include "fault.h"

const char *dist__fault_site = NULL;
int dist__fault_skip = 0;
