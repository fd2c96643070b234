/*
 * dlport_opencl.h: the OpenCL plugin's own entry points, besides dlport_plugin_init.
 *
 * The plugin (libdlport_opencl.so) serves kDLOpenCL tensors whose `data` is a cl_mem handle
 * (opaque: `byte_offset` is kept apart, never added to it). These extra functions let a
 * program (the tests, the examples) make OpenCL buffers, run kernels on them and read the
 * plugin's counters, without linking OpenCL itself.
 */
#ifndef DLPORT_OPENCL_H_
#define DLPORT_OPENCL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the plugin has done since it was initialised (all counters only grow). */
typedef struct {
  uint64_t buffers_created;   /* cl_mem objects created by the plugin (allocate, iota) */
  uint64_t buffers_freed;     /* of those, freed by OpenCL (their destructor callback ran) */
  uint64_t views_created;     /* view_create calls that succeeded */
  uint64_t views_destroyed;   /* view_destroy calls */
  uint64_t refs_acquired;     /* acquire calls that succeeded */
  uint64_t refs_released;     /* release calls */
  uint64_t allocations;       /* allocate calls that succeeded */
  uint64_t deallocations;     /* deallocate calls */
  uint64_t producer_deleters; /* deleters of dlport_opencl_iota's tensors that ran */
  uint64_t copies_to_host;    /* copy_to_host calls that succeeded */
  uint64_t copies_from_host;  /* copy_from_host calls that succeeded */
  uint64_t waits;             /* wait calls */
  uint64_t inits;             /* successful dlport_plugin_init calls */
  uint64_t destroys;          /* destroy calls (dlport's, after the plugin's last use) */
} DlportOpenclCounts;

/* Copies the counters (kept by the library, across destroy and init). Returns 1 while the
 * plugin is initialised, 0 otherwise. */
int dlport_opencl_counts(DlportOpenclCounts *out);

/*
 * A producer: a new float32 buffer of `n` elements filled by an OpenCL kernel with
 * start, start + 1, ..., as a DLPack 1.3 tensor on kDLOpenCL device 0 (`data` is the cl_mem).
 * Its deleter releases the buffer (once). Returns a DLManagedTensorVersioned* as void*, or
 * NULL on error (dlport_opencl_last_error() says why).
 */
void *dlport_opencl_iota(float start, int64_t n);

/*
 * A consumer: sums the float32 elements of a compact kDLOpenCL tensor with an OpenCL kernel
 * (`data` a cl_mem of this plugin's context, `byte_offset` honoured). Returns 0 and writes the
 * sum, or a non-zero status.
 */
int dlport_opencl_sum(const void *dl_tensor, double *sum_out);

/* The message of the last failure on this thread ("" for none). */
const char *dlport_opencl_last_error(void);

/* The OpenCL device's name (for logs), or "" before initialisation. */
const char *dlport_opencl_device_name(void);

#ifdef __cplusplus
}
#endif

#endif /* DLPORT_OPENCL_H_ */
