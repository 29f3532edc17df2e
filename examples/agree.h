/* One outcome for a collective step of the example programs: every rank of
 * comm returns the same status, and on failure the message of the lowest
 * rank with the most negative status becomes everyone's, so each rank can
 * say what went wrong rather than only that something did. */
#ifndef DISTMGR_EXAMPLES_AGREE_H
#define DISTMGR_EXAMPLES_AGREE_H

#include <mpi.h>

#include <distmgr.h>

dist_status agree_status(MPI_Comm comm, dist_status st);

#endif
