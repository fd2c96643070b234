/*
 * dlport_opencl.c: a dlport device plugin for OpenCL, written as a vendor would write one.
 *
 * - Device type kDLOpenCL (4); device ids are OpenCL device indices on the first platform that
 *   has a device (id 0 here).
 * - A tensor's `data` is a cl_mem handle, opaque: `byte_offset` stays apart and becomes the
 *   buffer offset of each OpenCL call.
 * - Streams are command queues (cl_command_queue); NULL is the plugin's own queue. Copies are
 *   blocking; `wait` is clFinish on the queue.
 * - Copies: clEnqueueReadBuffer / clEnqueueWriteBuffer for compact tensors, the Rect variants
 *   for strided tensors of up to 3 dimensions with positive strides and a unit inner stride.
 * - Import retains the cl_mem (view_create) and releases it (view_destroy); export retains it
 *   for the consumer (acquire) and releases it (release).
 * - The plugin knows its cl_mem's: a registry of the buffers it created (allocate,
 *   dlport_opencl_iota), each removed when OpenCL frees it. A tensor's `data` is looked up
 *   there before any OpenCL call touches it, so a kDLOpenCL tensor whose `data` is not one of
 *   them (host memory, another program's cl_mem) is refused with an error, never passed to
 *   clGetMemObjectInfo (the ICD loader reads a dispatch table through any pointer it is given:
 *   OpenCL itself cannot tell a cl_mem from other memory). What it can and cannot check is
 *   listed in dlport_opencl.h and README.md.
 * - Strides: a row or slice stride smaller than the row or slice it steps over (broadcast
 *   stride 0, overlapping rows) is refused; OpenCL rect copies cannot express it.
 *
 * Every callback is thread-safe (OpenCL calls are; the counters are atomic) and returns 0 or
 * an OpenCL error code, with a message for last_error in a thread-local buffer.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlport.h"
#include "dlport_opencl.h"

typedef struct {
  cl_platform_id platform;
  cl_device_id device;
  cl_context context;
  cl_command_queue queue;
  cl_program program;
  char device_name[256];
} Plugin;

/* The counters outlive the plugin state (a program reads them after destroy). */
static struct {
  atomic_uint_fast64_t buffers_created, buffers_freed, views_created, views_destroyed,
      refs_acquired, refs_released, allocations, deallocations, producer_deleters,
      copies_to_host, copies_from_host, waits, inits, destroys;
} g_counts;

/* One plugin state per process: made by dlport_plugin_init, freed by destroy. */
static Plugin *g_plugin;
static _Thread_local char g_message[512];

static int fail(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_message, sizeof g_message, fmt, ap);
  va_end(ap);
  return status;
}

static const char *last_error(void *state) {
  (void)state;
  return g_message;
}

const char *dlport_opencl_last_error(void) { return g_message; }

const char *dlport_opencl_device_name(void) { return g_plugin ? g_plugin->device_name : ""; }

/* The registry of the cl_mem's the plugin created and OpenCL has not freed yet (see the top). */
static pthread_mutex_t g_known_lock = PTHREAD_MUTEX_INITIALIZER;
static cl_mem *g_known;
static size_t g_known_len, g_known_cap;

static int remember(cl_mem mem) {
  int ok = 1;
  pthread_mutex_lock(&g_known_lock);
  if (g_known_len == g_known_cap) {
    size_t cap = g_known_cap ? 2 * g_known_cap : 64;
    cl_mem *grown = realloc(g_known, cap * sizeof *grown);
    if (grown == NULL) {
      ok = 0;
    } else {
      g_known = grown;
      g_known_cap = cap;
    }
  }
  if (ok) g_known[g_known_len++] = mem;
  pthread_mutex_unlock(&g_known_lock);
  return ok;
}

static void forget(cl_mem mem) {
  pthread_mutex_lock(&g_known_lock);
  for (size_t i = 0; i < g_known_len; ++i) {
    if (g_known[i] == mem) {
      g_known[i] = g_known[--g_known_len];
      break;
    }
  }
  if (g_known_len == 0) {
    free(g_known);
    g_known = NULL;
    g_known_cap = 0;
  }
  pthread_mutex_unlock(&g_known_lock);
}

/* Whether `data` is a live cl_mem this plugin created: 0, or an error saying it is not. */
static int known(const void *data) {
  int found = 0;
  pthread_mutex_lock(&g_known_lock);
  for (size_t i = 0; i < g_known_len && !found; ++i) found = (const void *)g_known[i] == data;
  pthread_mutex_unlock(&g_known_lock);
  if (found) return 0;
  return fail(CL_INVALID_MEM_OBJECT,
              "data %p is not a cl_mem this plugin created (it knows only the buffers it made "
              "with allocate or dlport_opencl_iota and OpenCL has not freed): a kDLOpenCL "
              "tensor over host memory or another program's cl_mem is refused",
              data);
}

static const char *kSource =
    "__kernel void iota(__global float *x, float start) {\n"
    "  size_t i = get_global_id(0); x[i] = start + (float)i;\n"
    "}\n"
    "__kernel void sum(__global const float *x, ulong first, ulong n, __global float *out) {\n"
    "  float s = 0.0f; for (ulong i = 0; i < n; ++i) s += x[first + i]; out[0] = s;\n"
    "}\n";

/* OpenCL calls this when a cl_mem the plugin created is really freed (refcount 0). */
static void CL_CALLBACK on_freed(cl_mem mem, void *user) {
  (void)user;
  forget(mem);
  atomic_fetch_add(&g_counts.buffers_freed, 1);
}

static cl_mem create_buffer(Plugin *p, size_t bytes, cl_int *err) {
  /* OpenCL has no empty buffers: 0 bytes get 1 (never read). */
  cl_mem mem = clCreateBuffer(p->context, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, err);
  if (mem == NULL) return NULL;
  if (!remember(mem)) {
    clReleaseMemObject(mem);
    *err = CL_OUT_OF_HOST_MEMORY;
    return NULL;
  }
  atomic_fetch_add(&g_counts.buffers_created, 1);
  *err = clSetMemObjectDestructorCallback(mem, on_freed, NULL);
  if (*err != CL_SUCCESS) {
    /* Without the callback the registry would keep the handle after OpenCL frees it. */
    forget(mem);
    clReleaseMemObject(mem);
    return NULL;
  }
  return mem;
}

/* The element size in bytes of a dtype OpenCL can copy (whole bytes only). */
static size_t elem_bytes(DLDataType t) { return ((size_t)t.bits * t.lanes + 7) / 8; }

/*
 * The copy geometry of a tensor: an OpenCL rect (row pitch, slice pitch and region in bytes) or
 * a plain contiguous range. Returns 0, or an error for layouts OpenCL rects cannot express.
 */
typedef struct {
  int contiguous;
  size_t bytes;      /* compact size */
  size_t region[3];  /* x in bytes, rows, slices */
  size_t row_pitch;  /* bytes between rows in the buffer */
  size_t slice_pitch;
} Geometry;

static int geometry(const DLTensor *t, Geometry *g) {
  size_t es = elem_bytes(t->dtype);
  if ((t->dtype.bits * t->dtype.lanes) % 8 != 0)
    return fail(CL_INVALID_VALUE, "sub-byte dtype (%u bits x %u lanes) is not supported",
                t->dtype.bits, t->dtype.lanes);
  size_t numel = 1;
  for (int i = 0; i < t->ndim; ++i) numel *= (size_t)t->shape[i];
  g->bytes = numel * es;
  /* Contiguous when the strides are the compact row-major ones (extent-1 axes ignored). */
  int contiguous = 1;
  if (t->strides != NULL) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (t->shape[i] != 1 && t->strides[i] != expect) contiguous = 0;
      expect *= t->shape[i];
    }
  }
  g->contiguous = contiguous || numel == 0;
  if (g->contiguous) return 0;
  if (t->ndim > 3)
    return fail(CL_INVALID_VALUE,
                "a strided tensor of %d dimensions: OpenCL rect copies take at most 3", t->ndim);
  int64_t shape[3] = {1, 1, 1}, strides[3] = {0, 0, 0};
  for (int i = 0; i < t->ndim; ++i) {
    shape[3 - t->ndim + i] = t->shape[i];
    strides[3 - t->ndim + i] = t->strides[i];
  }
  if (strides[2] != 1 || strides[1] < 0 || strides[0] < 0)
    return fail(CL_INVALID_VALUE,
                "strides (%lld, %lld, %lld): OpenCL rect copies need a unit inner stride and "
                "non-negative outer strides",
                (long long)strides[0], (long long)strides[1], (long long)strides[2]);
  g->region[0] = (size_t)shape[2] * es;
  g->region[1] = (size_t)shape[1];
  g->region[2] = (size_t)shape[0];
  g->row_pitch = (size_t)strides[1] * es;
  g->slice_pitch = (size_t)strides[0] * es;
  /* A row (slice) stride smaller than the row (slice) it steps over makes rows overlap, or
   * repeats one (stride 0, a broadcast): OpenCL rects cannot express it, and copying such a
   * tensor as compact rows would move the wrong elements. Refused; a single row or slice has
   * no stride to honour. */
  if (g->region[1] == 1) g->row_pitch = g->region[0];
  if (g->region[2] == 1) g->slice_pitch = g->row_pitch * g->region[1];
  if (g->row_pitch < g->region[0] || g->slice_pitch < g->row_pitch * g->region[1])
    return fail(CL_INVALID_VALUE,
                "strides (%lld, %lld, %lld) for shape (%lld, %lld, %lld): a row or slice stride "
                "smaller than the row or slice it steps over (a broadcast stride 0, or "
                "overlapping rows) is not supported; copy the tensor to a compact one first",
                (long long)strides[0], (long long)strides[1], (long long)strides[2],
                (long long)shape[0], (long long)shape[1], (long long)shape[2]);
  return 0;
}

static cl_command_queue queue_of(Plugin *p, void *stream) {
  return stream != NULL ? (cl_command_queue)stream : p->queue;
}

static int copy(Plugin *p, const DLTensor *dev, void *host, size_t host_bytes, void *stream,
                int to_host) {
  const char *what = to_host ? "clEnqueueReadBuffer" : "clEnqueueWriteBuffer";
  if (dev->device.device_type != kDLOpenCL || dev->device.device_id != 0)
    return fail(CL_INVALID_DEVICE, "device (%d, %d) is not this plugin's (kDLOpenCL, 0)",
                dev->device.device_type, dev->device.device_id);
  Geometry g;
  int st = geometry(dev, &g);
  if (st != 0) return st;
  st = known(dev->data);
  if (st != 0) return st;
  if (g.bytes != host_bytes)
    return fail(CL_INVALID_VALUE, "host buffer of %zu bytes for a tensor of %zu", host_bytes,
                g.bytes);
  if (g.bytes == 0) return 0;
  cl_mem mem = (cl_mem)dev->data;
  cl_int err;
  if (g.contiguous) {
    err = to_host ? clEnqueueReadBuffer(queue_of(p, stream), mem, CL_TRUE, dev->byte_offset,
                                        g.bytes, host, 0, NULL, NULL)
                  : clEnqueueWriteBuffer(queue_of(p, stream), mem, CL_TRUE, dev->byte_offset,
                                         g.bytes, host, 0, NULL, NULL);
  } else {
    size_t origin[3] = {(size_t)dev->byte_offset, 0, 0}, zero[3] = {0, 0, 0};
    size_t host_row = g.region[0], host_slice = g.region[0] * g.region[1];
    err = to_host ? clEnqueueReadBufferRect(queue_of(p, stream), mem, CL_TRUE, origin, zero,
                                            g.region, g.row_pitch, g.slice_pitch, host_row,
                                            host_slice, host, 0, NULL, NULL)
                  : clEnqueueWriteBufferRect(queue_of(p, stream), mem, CL_TRUE, origin, zero,
                                             g.region, g.row_pitch, g.slice_pitch, host_row,
                                             host_slice, host, 0, NULL, NULL);
    what = to_host ? "clEnqueueReadBufferRect" : "clEnqueueWriteBufferRect";
  }
  if (err != CL_SUCCESS) return fail(err, "%s failed with %d", what, err);
  atomic_fetch_add(to_host ? &g_counts.copies_to_host : &g_counts.copies_from_host, 1);
  return 0;
}

static int copy_to_host(void *state, const DLTensor *src, void *dst, size_t dst_bytes,
                        void *stream) {
  return copy((Plugin *)state, src, dst, dst_bytes, stream, 1);
}

static int copy_from_host(void *state, const void *src, size_t src_bytes, const DLTensor *dst,
                          void *stream) {
  return copy((Plugin *)state, dst, (void *)src, src_bytes, stream, 0);
}

/* Checks that `t`'s cl_mem is of this context and holds byte_offset + its span. */
static int check_memory(Plugin *p, const DLTensor *t) {
  /* Only a cl_mem of the registry reaches OpenCL (see the top). */
  int st = known(t->data);
  if (st != 0) return st;
  cl_mem mem = (cl_mem)t->data;
  cl_context ctx = NULL;
  size_t size = 0;
  cl_int err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof ctx, &ctx, NULL);
  if (err != CL_SUCCESS)
    return fail(err, "data %p is not a cl_mem (clGetMemObjectInfo: %d)", t->data, err);
  if (ctx != p->context)
    return fail(CL_INVALID_CONTEXT, "cl_mem %p belongs to another OpenCL context", t->data);
  clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
  /* The highest byte touched: byte_offset + sum of (extent - 1) * stride * elem + elem. */
  size_t es = elem_bytes(t->dtype), end = (size_t)t->byte_offset;
  int empty = 0;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] == 0) empty = 1;
    int64_t stride = t->strides ? t->strides[i] : 1;
    if (stride < 0)
      return fail(CL_INVALID_VALUE, "negative stride %lld on axis %d", (long long)stride, i);
  }
  if (!empty) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      int64_t stride = t->strides ? t->strides[i] : expect;
      end += (size_t)(t->shape[i] - 1) * (size_t)stride * es;
      expect *= t->shape[i];
    }
    end += es;
  }
  if (end > size)
    return fail(CL_INVALID_BUFFER_SIZE, "the tensor reaches byte %zu of a cl_mem of %zu bytes",
                end, size);
  return 0;
}

static int view_create(void *state, const DLTensor *t, void **view_out) {
  Plugin *p = state;
  int st = check_memory(p, t);
  if (st != 0) return st;
  cl_int err = clRetainMemObject((cl_mem)t->data);
  if (err != CL_SUCCESS) return fail(err, "clRetainMemObject failed with %d", err);
  atomic_fetch_add(&g_counts.views_created, 1);
  *view_out = t->data;
  return 0;
}

static void view_destroy(void *state, void *view) {
  (void)state;
  atomic_fetch_add(&g_counts.views_destroyed, 1);
  clReleaseMemObject((cl_mem)view);
}

static int acquire(void *state, const DLTensor *t, void **ref_out) {
  (void)state;
  int st = known(t->data);
  if (st != 0) return st;
  cl_int err = clRetainMemObject((cl_mem)t->data);
  if (err != CL_SUCCESS) return fail(err, "clRetainMemObject failed with %d", err);
  atomic_fetch_add(&g_counts.refs_acquired, 1);
  *ref_out = t->data;
  return 0;
}

static void release(void *state, void *ref) {
  (void)state;
  atomic_fetch_add(&g_counts.refs_released, 1);
  clReleaseMemObject((cl_mem)ref);
}

static int wait_stream(void *state, int32_t device_type, int32_t device_id, void *stream) {
  Plugin *p = state;
  (void)device_type;
  (void)device_id;
  atomic_fetch_add(&g_counts.waits, 1);
  cl_int err = clFinish(queue_of(p, stream));
  return err == CL_SUCCESS ? 0 : fail(err, "clFinish failed with %d", err);
}

static int allocate(void *state, int32_t device_type, int32_t device_id, size_t bytes,
                    void **handle_out) {
  Plugin *p = state;
  if (device_type != kDLOpenCL || device_id != 0)
    return fail(CL_INVALID_DEVICE, "device (%d, %d): this plugin has kDLOpenCL device 0 only",
                device_type, device_id);
  cl_int err;
  cl_mem mem = create_buffer(p, bytes, &err);
  if (mem == NULL) return fail(err, "clCreateBuffer(%zu bytes) failed with %d", bytes, err);
  if (bytes > 0) {
    const unsigned char zero = 0;
    err = clEnqueueFillBuffer(p->queue, mem, &zero, 1, 0, bytes, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(p->queue);
    if (err != CL_SUCCESS) {
      clReleaseMemObject(mem);
      return fail(err, "clEnqueueFillBuffer failed with %d", err);
    }
  }
  atomic_fetch_add(&g_counts.allocations, 1);
  *handle_out = mem;
  return 0;
}

static void deallocate(void *state, int32_t device_type, int32_t device_id, void *handle) {
  (void)state;
  (void)device_type;
  (void)device_id;
  atomic_fetch_add(&g_counts.deallocations, 1);
  clReleaseMemObject((cl_mem)handle);
}

static void destroy(void *state) {
  Plugin *p = state;
  /* Work still queued (a producer's kernel nobody waited for) finishes before the queue goes. */
  if (p->queue) clFinish(p->queue);
  if (p->program) clReleaseProgram(p->program);
  if (p->queue) clReleaseCommandQueue(p->queue);
  if (p->context) clReleaseContext(p->context);
  if (g_plugin == p) {
    g_plugin = NULL;
    atomic_fetch_add(&g_counts.destroys, 1);
  }
  free(p);
}

static int setup(Plugin *p) {
  cl_uint n = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &n);
  if (err != CL_SUCCESS || n == 0)
    return fail(err ? err : CL_DEVICE_NOT_FOUND,
                "no OpenCL platform (clGetPlatformIDs: %d, %u platforms): install an ICD such "
                "as pocl-opencl-icd",
                err, n);
  cl_platform_id platforms[8];
  if (n > 8) n = 8;
  clGetPlatformIDs(n, platforms, NULL);
  for (cl_uint i = 0; i < n && p->device == NULL; ++i) {
    if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &p->device, NULL) == CL_SUCCESS)
      p->platform = platforms[i];
    else
      p->device = NULL;
  }
  if (p->device == NULL)
    return fail(CL_DEVICE_NOT_FOUND, "no OpenCL device on %u platform(s)", n);
  clGetDeviceInfo(p->device, CL_DEVICE_NAME, sizeof p->device_name - 1, p->device_name, NULL);
  p->context = clCreateContext(NULL, 1, &p->device, NULL, NULL, &err);
  if (p->context == NULL) return fail(err, "no usable OpenCL device: clCreateContext failed with %d", err);
  p->queue = clCreateCommandQueue(p->context, p->device, 0, &err);
  if (p->queue == NULL) return fail(err, "no usable OpenCL device: clCreateCommandQueue failed with %d", err);
  p->program = clCreateProgramWithSource(p->context, 1, &kSource, NULL, &err);
  if (p->program == NULL) return fail(err, "clCreateProgramWithSource failed with %d", err);
  err = clBuildProgram(p->program, 1, &p->device, "", NULL, NULL);
  if (err != CL_SUCCESS) return fail(err, "clBuildProgram failed with %d", err);
  return 0;
}

static const int32_t kTypes[] = {kDLOpenCL};

int dlport_plugin_init(uint32_t interface_version, DlportPlugin *out, size_t size) {
  if (interface_version != DLPORT_PLUGIN_INTERFACE_VERSION || size < sizeof(DlportPlugin))
    return fail(  /* dlport cannot read this plugin's struct: no message reaches it */-1, "dlport implements plugin interface %u (struct of %zu bytes); this plugin "
                    "was built for %u (%zu bytes)",
                interface_version, size, DLPORT_PLUGIN_INTERFACE_VERSION, sizeof(DlportPlugin));
  /* dlport asks last_error for the message of a failed init: set before any failure below. */
  out->last_error = last_error;
  if (g_plugin != NULL)
    return fail(-1,
                "the OpenCL plugin is already initialised in this process (one state per "
                "process, registered as \"opencl\"): use that one, or unregister it "
                "(dlport_unregister_backend) and release its tensors before loading it again");
  Plugin *p = calloc(1, sizeof *p);
  if (p == NULL) return fail(-1, "out of memory");
  int st = setup(p);
  if (st != 0) {
    destroy(p);
    return st;
  }
  g_plugin = p;
  atomic_fetch_add(&g_counts.inits, 1);
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->interface_version = DLPORT_PLUGIN_INTERFACE_VERSION;
  out->name = "opencl";
  out->device_types = kTypes;
  out->num_device_types = 1;
  out->state = p;
  out->last_error = last_error;
  out->view_create = view_create;
  out->view_destroy = view_destroy;
  out->acquire = acquire;
  out->release = release;
  out->wait = wait_stream;
  out->copy_to_host = copy_to_host;
  out->copy_from_host = copy_from_host;
  out->allocate = allocate;
  out->deallocate = deallocate;
  out->destroy = destroy;
  return 0;
}

int dlport_opencl_counts(DlportOpenclCounts *out) {
  /* A released cl_mem whose kernel is still queued is freed when the kernel finishes (PoCL:
   * on its worker thread): finish the queue first, so that the counts are settled. */
  if (g_plugin != NULL) clFinish(g_plugin->queue);
  out->buffers_created = atomic_load(&g_counts.buffers_created);
  out->buffers_freed = atomic_load(&g_counts.buffers_freed);
  out->views_created = atomic_load(&g_counts.views_created);
  out->views_destroyed = atomic_load(&g_counts.views_destroyed);
  out->refs_acquired = atomic_load(&g_counts.refs_acquired);
  out->refs_released = atomic_load(&g_counts.refs_released);
  out->allocations = atomic_load(&g_counts.allocations);
  out->deallocations = atomic_load(&g_counts.deallocations);
  out->producer_deleters = atomic_load(&g_counts.producer_deleters);
  out->copies_to_host = atomic_load(&g_counts.copies_to_host);
  out->copies_from_host = atomic_load(&g_counts.copies_from_host);
  out->waits = atomic_load(&g_counts.waits);
  out->inits = atomic_load(&g_counts.inits);
  out->destroys = atomic_load(&g_counts.destroys);
  return g_plugin != NULL ? 1 : 0;
}

/* The producer's tensor: the managed struct, its shape, and the cl_mem it holds. */
typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[1];
  int64_t strides[1];
} Produced;

static void produced_deleter(DLManagedTensorVersioned *self) {
  Produced *t = (Produced *)self->manager_ctx;
  atomic_fetch_add(&g_counts.producer_deleters, 1);
  clReleaseMemObject((cl_mem)t->managed.dl_tensor.data);
  free(t);
}

void *dlport_opencl_iota(float start, int64_t n) {
  Plugin *p = g_plugin;
  if (p == NULL) {
    fail(-1, "the OpenCL plugin is not initialised (load it with dlport_load_plugin first)");
    return NULL;
  }
  if (n <= 0) {
    fail(CL_INVALID_VALUE, "n = %lld: give at least one element", (long long)n);
    return NULL;
  }
  cl_int err;
  cl_mem mem = create_buffer(p, (size_t)n * sizeof(float), &err);
  if (mem == NULL) {
    fail(err, "clCreateBuffer failed with %d", err);
    return NULL;
  }
  cl_kernel k = clCreateKernel(p->program, "iota", &err);
  if (k == NULL) {
    clReleaseMemObject(mem);
    fail(err, "clCreateKernel(iota) failed with %d", err);
    return NULL;
  }
  size_t global = (size_t)n;
  err = clSetKernelArg(k, 0, sizeof mem, &mem);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof start, &start);
  if (err == CL_SUCCESS)
    err = clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &global, NULL, 0, NULL, NULL);
  /* The kernel runs on the plugin's queue; the consumer's wait (or a copy on the same
   * in-order queue) orders after it. */
  clReleaseKernel(k);
  Produced *t = calloc(1, sizeof *t);
  if (err != CL_SUCCESS || t == NULL) {
    free(t);
    clReleaseMemObject(mem);
    fail(err, "running the iota kernel failed with %d", err);
    return NULL;
  }
  t->shape[0] = n;
  t->managed.version.major = 1;
  t->managed.version.minor = 3;
  t->managed.manager_ctx = t;
  t->managed.deleter = produced_deleter;
  t->managed.dl_tensor.data = mem;
  t->managed.dl_tensor.device.device_type = kDLOpenCL;
  t->managed.dl_tensor.device.device_id = 0;
  t->managed.dl_tensor.ndim = 1;
  t->managed.dl_tensor.dtype.code = kDLFloat;
  t->managed.dl_tensor.dtype.bits = 32;
  t->managed.dl_tensor.dtype.lanes = 1;
  t->managed.dl_tensor.shape = t->shape;
  t->strides[0] = 1; /* DLPack >= 1.2 producers send explicit strides */
  t->managed.dl_tensor.strides = t->strides;
  return &t->managed;
}

int dlport_opencl_sum(const void *dl_tensor, double *sum_out) {
  Plugin *p = g_plugin;
  const DLTensor *t = dl_tensor;
  if (p == NULL) return fail(-1, "the OpenCL plugin is not initialised");
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1)
    return fail(CL_INVALID_VALUE, "dlport_opencl_sum takes float32 tensors");
  int st = check_memory(p, t);
  if (st != 0) return st;
  Geometry g;
  st = geometry(t, &g);
  if (st != 0) return st;
  if (!g.contiguous) return fail(CL_INVALID_VALUE, "dlport_opencl_sum takes compact tensors");
  if (t->byte_offset % sizeof(float) != 0)
    return fail(CL_INVALID_VALUE, "byte_offset %llu is not a multiple of 4",
                (unsigned long long)t->byte_offset);
  cl_int err;
  cl_mem out = clCreateBuffer(p->context, CL_MEM_READ_WRITE, sizeof(float), NULL, &err);
  if (out == NULL) return fail(err, "clCreateBuffer failed with %d", err);
  cl_kernel k = clCreateKernel(p->program, "sum", &err);
  if (k == NULL) {
    clReleaseMemObject(out);
    return fail(err, "clCreateKernel(sum) failed with %d", err);
  }
  cl_mem x = (cl_mem)t->data;
  cl_ulong first = t->byte_offset / sizeof(float), n = g.bytes / sizeof(float);
  float s = 0;
  size_t one = 1;
  err = clSetKernelArg(k, 0, sizeof x, &x);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof first, &first);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 2, sizeof n, &n);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 3, sizeof out, &out);
  if (err == CL_SUCCESS)
    err = clEnqueueNDRangeKernel(p->queue, k, 1, NULL, &one, NULL, 0, NULL, NULL);
  if (err == CL_SUCCESS)
    err = clEnqueueReadBuffer(p->queue, out, CL_TRUE, 0, sizeof s, &s, 0, NULL, NULL);
  clReleaseKernel(k);
  clReleaseMemObject(out);
  if (err != CL_SUCCESS) return fail(err, "running the sum kernel failed with %d", err);
  *sum_out = s;
  return 0;
}
