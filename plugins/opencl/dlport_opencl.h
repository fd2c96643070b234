/*
 * dlport_opencl.h: the OpenCL plugin's own entry points, besides dlport_plugin_init.
 *
 * The plugin (libdlport_opencl.so) serves kDLOpenCL tensors whose `data` is a cl_mem handle
 * (opaque: `byte_offset` is kept apart, never added to it). These extra functions let a
 * program (the tests, the examples) make OpenCL buffers, run kernels on them and read the
 * plugin's counters, without linking OpenCL itself.
 *
 * What the plugin can check, before any OpenCL call touches a tensor's `data`:
 * - that `data` is a cl_mem the plugin created (allocate, dlport_opencl_iota) and OpenCL has
 *   not freed yet: the plugin keeps a registry of them. Anything else, such as a kDLOpenCL
 *   tensor over host memory or a cl_mem of another program or context, is refused with
 *   CL_INVALID_MEM_OBJECT and a message; it never reaches OpenCL, whose ICD loader would read
 *   a dispatch table through the pointer (a crash, not an error);
 * - that the device is (kDLOpenCL, 0), that the tensor lies inside its cl_mem (byte_offset
 *   and its span against CL_MEM_SIZE), and that its strides are ones OpenCL copies can
 *   express: a unit inner stride, non-negative outer strides, and no row or slice stride
 *   smaller than the row or slice it steps over (broadcast stride 0 and overlapping rows are
 *   refused), at most 3 dimensions when strided.
 * What it cannot check (the producer's promise): that a cl_mem of its registry really holds
 * the elements the tensor describes, that nobody writes it while a copy reads it, and that a
 * producer keeps it alive for as long as its DLPack deleter has not run. kDLOpenCL tensors
 * of other producers (PyOpenCL, another plugin) are refused, not trusted: the plugin shares
 * no context with them.
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

/* Copies the counters (kept by the library, across destroy and init), after the plugin's
 * queue finishes (a released cl_mem whose kernel is still queued is freed when it finishes).
 * Returns 1 while the plugin is initialised, 0 otherwise. */
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
