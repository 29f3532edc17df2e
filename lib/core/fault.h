/* Test-only fault injection: a test names a site, and the library's check
 * at that site fails once, so that error paths which need a failing device
 * copy or allocation can be exercised on any host. Never set in production:
 * the check is one pointer test. */
#ifndef DISTMGR_FAULT_H
#define DISTMGR_FAULT_H

#include <string.h>

extern const char *dist__fault_site;
extern int dist__fault_skip; /* hits of the site to let pass before the one that fails */

static inline int dist__fault(const char *site) {
  if (!dist__fault_site || strcmp(dist__fault_site, site) != 0) return 0;
  if (dist__fault_skip > 0) return dist__fault_skip--, 0;
  dist__fault_site = NULL;
  return 1;
}

#endif
