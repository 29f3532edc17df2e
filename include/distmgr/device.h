/* The compute device a rank was assigned. */
#ifndef DISTMGR_DEVICE_H
#define DISTMGR_DEVICE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dist_device_kind { DIST_DEVICE_CPU = 0, DIST_DEVICE_CUDA = 1 } dist_device_kind;

typedef struct dist_device {
  dist_device_kind kind;
  int index; /* CUDA device ordinal among the visible ones; 0 for the CPU */
} dist_device;

/* "cpu" or "cuda". Local. */
const char *dist_device_kind_name(dist_device_kind kind);

#ifdef __cplusplus
}
#endif
#endif
