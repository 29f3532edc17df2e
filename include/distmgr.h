/* distmgr: distributed environment manager, process groups and collectives.
 * Umbrella header; MPI-typed declarations are in distmgr/mpi.h. */
#ifndef DISTMGR_H
#define DISTMGR_H

#include "distmgr/version.h"
#include "distmgr/status.h"
#include "distmgr/log.h"
#include "distmgr/settings.h"
#include "distmgr/launch.h"
#include "distmgr/device.h"
#include "distmgr/manager.h"
#include "distmgr/group.h"
#include "distmgr/tensor.h"
#include "distmgr/coll.h"
#include "distmgr/mapping.h"
#include "distmgr/fft.h"
#include "distmgr/params.h"
#include "distmgr/optim.h"
#include "distmgr/ddp.h"
#include "distmgr/dpo.h"
#include "distmgr/daso.h"
#include "distmgr/rpc.h"

#endif
