/* The one state of remote calls, shared by the files of lib/rpc. */
#include "rpc/rpc_internal.h"

dist__rpc_engine dist__rpc;
