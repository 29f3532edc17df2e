/* The progress board (DIST_TIMEOUT only): every rank publishes, in an MPI
 * one-sided window, how many calls it has begun on each group and which call
 * it is waiting in. A rank whose wait times out reads its peers' entries
 * without their cooperation (passive target) to name the ranks that did not
 * arrive and where they are instead. */
#ifndef DISTMGR_BOARD_H
#define DISTMGR_BOARD_H

#include <stddef.h>

#include "backend/engine.h"
#include "backend/agree.h"

dist_status dist__board_open(void); /* collective over the world (a no-op without DIST_TIMEOUT); local outcome: the caller agrees */
void dist__board_close(int collective);
void dist__board_arrive(const dist__group *g);
void dist__board_waiting(int on);
/* Describe the members of the current call's group that have not begun it. */
void dist__board_report(char *buf, size_t n);

#endif
