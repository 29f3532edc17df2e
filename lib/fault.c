/* See fault.h. */
#include "fault.h"

const char *dist__fault_site = NULL;
