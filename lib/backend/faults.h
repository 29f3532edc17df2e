/* The fault channel: a duplicate of the world communicator on which a rank
 * tells every other rank that it will not take part in what they may be
 * waiting for: a collective it rejected before any group check (unknown
 * group, not a member), finalize, exit without finalize, or a wait it gave
 * up. Each notice carries the sender's call count on every group, so a
 * waiting rank can tell whether the sender already took part in its call
 * (then the notice does not concern it). Point-to-point sends only, never a
 * collective: a notice can never hang the sender. */
#ifndef DISTMGR_FAULTS_H
#define DISTMGR_FAULTS_H

#include "backend/engine.h"
#include "backend/agree.h"

typedef enum {
  DIST__FAULT_PRECHECK, /* rejected a collective before its group could take part */
  DIST__FAULT_FINALIZE, /* entered dist_manager_finalize */
  DIST__FAULT_EXIT,     /* exiting without dist_manager_finalize */
  DIST__FAULT_BROKEN,   /* abandoned a wait: takes part in nothing any more */
  DIST__FAULT_TYPES
} dist__fault_type;

dist_status dist__faults_open(void); /* collective over the world; returns the local outcome: the caller agrees on it */
void dist__faults_close(void);       /* local */
/* Tell every other rank. `key` identifies a PRECHECK failure ("call\0group")
 * so that ranks that failed the same way do not count it as a fault. */
void dist__faults_announce(dist__fault_type type, const char *key, const char *text);
/* Receive pending notices; if one means the current call (dist__engine.cur)
 * can never complete, write the error and return it. Local. */
dist_status dist__faults_check(void);
/* Keep MPI progressing for `seconds` so that notices just sent leave this
 * process before it ends. Local. */
void dist__faults_flush(double seconds);
/* Orderly finalize, after its collective round: receive every notice still
 * on its way, which ends with each other rank's FINALIZE notice (an MPI
 * leaves unreceived messages in a freed communicator's queue, and UCX warns
 * "unexpected tag-receive descriptor was not matched" for each at exit).
 * Gives up after `seconds`. */
void dist__faults_drain(double seconds);
/* Append to buf what world rank `r` has announced, if anything ("; rank 1
 * announced: ..."), for mismatch messages. Local. */
void dist__faults_note(int r, char *buf, size_t n);

#endif
