/* One outcome for a collective step of the example programs: every rank of
 * the group returns the same status, and on failure the message of the
 * lowest rank with the most negative status becomes everyone's, so each rank
 * can say what went wrong rather than only that something did. Through
 * distmgr's own collectives, so it works on either engine (MPI, or Gloo
 * under torchrun, where no MPI call may be made). */
#ifndef DISTMGR_EXAMPLES_AGREE_H
#define DISTMGR_EXAMPLES_AGREE_H

#include <distmgr.h>

/* Collective over `group` (NULL = the world). */
dist_status agree_status(const char *group, dist_status st);

#endif
