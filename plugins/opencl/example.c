/*
 * example.c: loads the OpenCL plugin from its path and moves tensors both ways through dlport.
 *
 *   example PATH/TO/libdlport_opencl.so
 *
 * 1. host -> OpenCL: a host array, imported with target kDLOpenCL, is copied into a cl_mem by
 *    the plugin (copy_from_host); an OpenCL kernel reads it and its sum is checked.
 * 2. OpenCL -> host: a cl_mem filled by a kernel (the plugin's producer) is imported as a view
 *    (view_create) and exported to kDLCPU: one copy (copy_to_host), values checked.
 *    A strided view goes through OpenCL rect copies; a view larger than its cl_mem is refused
 *    by the plugin's view_create.
 * 3. out and back without a copy: the view is exported on its device (acquire) and imported
 *    again: the same cl_mem.
 * 4. unregister while a tensor lives: the tensor stays valid; the plugin is destroyed when it
 *    goes. Every cl_mem is released exactly once (the plugin's counters, from OpenCL's own
 *    destructor callbacks).
 *
 * Prints "opencl example: N passed, 0 failed" and exits 0 when every check holds. Exits 77
 * (skipped) with the reason when no OpenCL device can be created.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlport.h"
#include "dlport_opencl.h"

static int passed, failed;
#define CHECK(cond, what)                                                      \
  do {                                                                         \
    if (cond) {                                                                \
      ++passed;                                                                \
    } else {                                                                   \
      ++failed;                                                                \
      fprintf(stderr, "FAILED: %s (%s:%d) last error: %s\n", what, __FILE__, \
              __LINE__, dlport_last_error() ? dlport_last_error() : "-");     \
    }                                                                          \
  } while (0)

typedef int (*CountsFn)(DlportOpenclCounts *);
typedef void *(*IotaFn)(float, int64_t);
typedef int (*SumFn)(const void *, double *);

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH/TO/libdlport_opencl.so\n", argv[0]);
    return 2;
  }
  const char *path = argv[1];
  char *name = NULL;
  if (dlport_load_plugin(path, &name) != DLPORT_OK) {
    const char *why = dlport_last_error();
    if (why && strstr(why, "dlport_plugin_init") &&
        (strstr(why, "no OpenCL") != NULL || strstr(why, "no usable OpenCL") != NULL)) {
      printf("opencl example: SKIPPED: no OpenCL device: %s\n", why);
      return 77;
    }
    fprintf(stderr, "dlport_load_plugin(%s) failed: %s\n", path, why);
    return 1;
  }
  CHECK(strcmp(name, "opencl") == 0, "the plugin's name is opencl");
  dlport_string_free(name);

  /* The plugin's own helpers, from the library dlport loaded (the same handle). */
  void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  CHECK(lib != NULL, "the plugin library is loaded");
  if (lib == NULL) return 1;
  CountsFn counts = (CountsFn)dlsym(lib, "dlport_opencl_counts");
  IotaFn iota = (IotaFn)dlsym(lib, "dlport_opencl_iota");
  SumFn sum = (SumFn)dlsym(lib, "dlport_opencl_sum");
  const char *(*device_name)(void) = (const char *(*)(void))dlsym(lib, "dlport_opencl_device_name");
  if (!counts || !iota || !sum || !device_name) return 1;
  printf("OpenCL device: %s\n", device_name());

  char *json = NULL;
  CHECK(dlport_backends(&json) == DLPORT_OK, "dlport_backends");
  if (json) {
    printf("backends: %s\n", json);
    CHECK(strstr(json, "\"name\":\"opencl\"") != NULL, "the plugin is listed");
    dlport_string_free(json);
  }

  enum { N = 1000 };
  /* 1. host -> OpenCL. */
  float *host = malloc(N * sizeof(float));
  for (int i = 0; i < N; ++i) host[i] = (float)i * 0.5f;
  int64_t shape[1] = {N};
  void *wrapped = NULL;
  CHECK(dlport_wrap(host, kDLCPU, 0, kDLFloat, 32, 1, 1, shape, NULL, 0, 0, 1, NULL, NULL,
                    &wrapped) == DLPORT_OK,
        "wrap the host array");
  DlportImportOptions to_cl = {0};
  to_cl.target_device_type = kDLOpenCL;
  to_cl.copy = DLPORT_COPY_IF_NEEDED;
  DlportTensor *on_cl = NULL;
  CHECK(dlport_import(wrapped, 1, &to_cl, &on_cl) == DLPORT_OK, "import to kDLOpenCL (a copy)");
  free(host); /* the import copied it */
  if (on_cl) {
    DLTensor v;
    CHECK(dlport_tensor_view(on_cl, &v) == DLPORT_OK, "view of the OpenCL tensor");
    CHECK(v.device.device_type == kDLOpenCL, "it is on kDLOpenCL");
    double s = 0;
    CHECK(sum(&v, &s) == 0, "an OpenCL kernel reads it");
    CHECK(fabs(s - 0.5 * N * (N - 1) / 2.0) < 1.0, "the kernel's sum is right");
    dlport_tensor_free(on_cl);
  }

  /* 2. OpenCL -> host, one copy. */
  void *produced = iota(10.0f, N);
  CHECK(produced != NULL, "the producer made a cl_mem");
  void *cl_mem_handle = ((DLManagedTensorVersioned *)produced)->dl_tensor.data;
  DlportTensor *view = NULL;
  CHECK(dlport_import(produced, 1, NULL, &view) == DLPORT_OK, "import as a view on kDLOpenCL");
  DlportOpenclCounts c0;
  counts(&c0);
  void *host_out = NULL;
  int versioned = 0;
  CHECK(dlport_export(view, 1, 3, kDLCPU, 0, DLPORT_COPY_IF_NEEDED, &host_out, &versioned) ==
            DLPORT_OK,
        "export to kDLCPU (a copy through the plugin)");
  DlportOpenclCounts c1;
  counts(&c1);
  CHECK(c1.copies_to_host == c0.copies_to_host + 1, "exactly one copy to the host");
  if (host_out) {
    DLManagedTensorVersioned *m = host_out;
    const float *x = (const float *)((char *)m->dl_tensor.data + m->dl_tensor.byte_offset);
    int ok = m->dl_tensor.device.device_type == kDLCPU;
    for (int i = 0; i < N; ++i) ok = ok && x[i] == 10.0f + (float)i;
    CHECK(ok, "the host copy holds 10, 11, ...");
    dlport_release(host_out, versioned);
  }

  /* 2b. a strided view of the same cl_mem (rows of 3 out of 6, from element 1): OpenCL rect
   *     copies (clEnqueueReadBufferRect), byte_offset inside the buffer. */
  {
    int64_t sshape[2] = {4, 3}, sstrides[2] = {6, 1};
    void *strided = NULL;
    CHECK(dlport_wrap(cl_mem_handle, kDLOpenCL, 0, kDLFloat, 32, 1, 2, sshape, sstrides, 4, 0, 1,
                      NULL, NULL, &strided) == DLPORT_OK,
          "wrap a strided view of the cl_mem");
    DlportTensor *sv = NULL;
    CHECK(dlport_import(strided, 1, NULL, &sv) == DLPORT_OK, "import the strided view");
    void *sh = NULL;
    if (sv) {
      CHECK(dlport_export(sv, 1, 3, kDLCPU, 0, DLPORT_COPY_IF_NEEDED, &sh, &versioned) ==
                DLPORT_OK,
            "export the strided view to kDLCPU (a rect copy)");
      dlport_tensor_free(sv);
    }
    if (sh) {
      DLManagedTensorVersioned *m = sh;
      const float *x = (const float *)((char *)m->dl_tensor.data + m->dl_tensor.byte_offset);
      int ok = 1;
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 3; ++c) ok = ok && x[r * 3 + c] == 10.0f + 1 + 6 * r + c;
      CHECK(ok, "the rect copy holds rows of 3 from a row pitch of 6");
      dlport_release(sh, versioned);
    }
  }

  /* 2c. a tensor that claims more than its cl_mem holds: the plugin's view_create refuses it,
   *     and the error names the plugin and the callback. */
  {
    int64_t big[1] = {2 * N};
    void *lying = NULL;
    CHECK(dlport_wrap(cl_mem_handle, kDLOpenCL, 0, kDLFloat, 32, 1, 1, big, NULL, 0, 0, 1, NULL,
                      NULL, &lying) == DLPORT_OK,
          "wrap an oversized view");
    DlportTensor *bad = NULL;
    CHECK(dlport_import(lying, 1, NULL, &bad) == DLPORT_ERR_BACKEND &&
              strstr(dlport_last_error(), "\"opencl\"") &&
              strstr(dlport_last_error(), "view_create") &&
              strstr(dlport_last_error(), "of a cl_mem of 4000 bytes"),
          "an oversized view is refused by view_create, naming the plugin");
    if (bad == NULL) printf("refused: %s\n", dlport_last_error());
  }

  /* 3. out on its device and back, without a copy. */
  void *out = NULL;
  CHECK(dlport_export(view, 1, 3, 0, 0, DLPORT_COPY_NEVER, &out, &versioned) == DLPORT_OK,
        "export on kDLOpenCL without a copy");
  DlportTensor *back = NULL;
  if (out) {
    CHECK(((DLManagedTensorVersioned *)out)->dl_tensor.data == cl_mem_handle,
          "the export's data is the same cl_mem");
    DlportImportOptions never = {0};
    never.copy = DLPORT_COPY_NEVER;
    CHECK(dlport_import(out, versioned, &never, &back) == DLPORT_OK, "import it back");
    void *data = NULL;
    uint64_t off = 1;
    if (back) {
      CHECK(dlport_tensor_data(back, &data, &off) == DLPORT_OK && data == cl_mem_handle &&
                off == 0,
            "the round trip is the same cl_mem");
    }
  }
  DlportOpenclCounts c2;
  counts(&c2);
  CHECK(c2.refs_acquired == c2.refs_released + 1, "the export holds one plugin reference");

  /* 4. unregister while tensors live. */
  CHECK(dlport_unregister_backend("opencl") == DLPORT_OK, "unregister the plugin");
  CHECK(dlport_unregister_backend("opencl") != DLPORT_OK &&
            strstr(dlport_last_error(), "opencl") != NULL,
        "a second unregister names the plugin");
  CHECK(counts(&c2) == 1, "the plugin lives while its tensors do");
  dlport_tensor_free(view);
  counts(&c2);
  CHECK(c2.producer_deleters == 0, "the producer's tensor lives while the round trip holds it");
  if (back) dlport_tensor_free(back);
  DlportOpenclCounts end;
  CHECK(counts(&end) == 0 && end.destroys == 1, "the plugin was destroyed after its last tensor");
  CHECK(end.producer_deleters == 1, "the producer's deleter ran once");
  CHECK(end.views_created == 3 && end.views_destroyed == 3, "three views, each destroyed once");
  CHECK(end.refs_acquired == end.refs_released, "every external reference released once");
  CHECK(end.allocations == 1 && end.deallocations == 1, "one allocation, freed once");
  CHECK(end.buffers_created == 2 && end.buffers_freed == 2,
        "every cl_mem the plugin made was freed (OpenCL's destructor callbacks)");
  printf("counts: buffers %llu/%llu views %llu/%llu refs %llu/%llu allocations %llu/%llu\n",
         (unsigned long long)end.buffers_created, (unsigned long long)end.buffers_freed,
         (unsigned long long)end.views_created, (unsigned long long)end.views_destroyed,
         (unsigned long long)end.refs_acquired, (unsigned long long)end.refs_released,
         (unsigned long long)end.allocations, (unsigned long long)end.deallocations);
  /* `lib` stays open: the OpenCL runtime stays loaded, so that LeakSanitizer can name its
   * frames at exit (PoCL and LLVM keep caches for the life of the process). */
  (void)lib;

  printf("opencl example: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
