/*
 * test_opencl_guarantees.c: the OpenCL plugin's guarantees of issue #47, one check per class,
 * through dlport's C ABI. Built and run with ASan and UBSan by scripts/plugin-test.sh.
 *
 *   test_opencl_guarantees PATH/TO/libdlport_opencl_asan.so
 *
 * - opencl_refuses_data_that_is_not_its_cl_mem: a producer that says kDLOpenCL over host
 *   memory is refused with an error (never a SEGV in clGetMemObjectInfo), as a view and as a
 *   copy to the host, and its deleter runs once.
 * - opencl_refuses_broadcast_and_overlapping_strides: a view of the plugin's own cl_mem with
 *   shape (3, 4) and strides (0, 1) or (2, 1) is refused on its copy to the host (never copied
 *   as compact rows 0 1 ... 11).
 * - opencl_second_init_keeps_its_reason: loading the plugin again while it is initialised
 *   fails with the plugin's own reason, not "the plugin gives no message".
 * Then every cl_mem the plugin created is freed exactly once.
 *
 * Prints "opencl guarantees: N passed, 0 failed" and exits 0 when every check holds. Exits 77
 * (skipped) with the reason when no OpenCL device can be created.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "dlport.h"
#include "dlport_opencl.h"

static int passed, failed;
static void check(int ok, const char *what) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    fprintf(stderr, "FAILED: %s (last error: %s)\n", what,
            dlport_last_error() ? dlport_last_error() : "-");
  }
}

/* The last error contains `s`. */
static int says(const char *s) {
  const char *e = dlport_last_error();
  int ok = e != NULL && strstr(e, s) != NULL;
  if (ok) printf("  error: %s\n", e);
  return ok;
}

static int released;
static void on_release(void *ctx) {
  (void)ctx;
  ++released;
}

/* The iota producer's tensor, released when a wrapping tensor is. */
static void release_managed(void *ctx) {
  DLManagedTensorVersioned *m = ctx;
  m->deleter(m);
}

/* Exports `t` to the host (a copy by the plugin's copy_to_host); the status. */
static int to_host(const DlportTensor *t) {
  void *m = NULL;
  int versioned = 0;
  int st = dlport_export(t, 1, 3, kDLCPU, 0, DLPORT_COPY_IF_NEEDED, &m, &versioned);
  if (st == DLPORT_OK) dlport_release(m, versioned);
  return st;
}

static void opencl_refuses_data_that_is_not_its_cl_mem(void) {
  static float host[4] = {0, 1, 2, 3};
  int64_t shape[1] = {4};
  DlportImportOptions to_cpu = {0};
  to_cpu.target_device_type = kDLCPU;
  to_cpu.copy = DLPORT_COPY_IF_NEEDED;
  const DlportImportOptions *ways[2] = {NULL, &to_cpu};
  for (int i = 0; i < 2; ++i) {
    void *m = NULL;
    released = 0;
    int st = dlport_wrap(host, kDLOpenCL, 0, kDLFloat, 32, 1, 1, shape, NULL, 0, 0, 1, on_release,
                         NULL, &m);
    check(st == DLPORT_OK, "dlport_wrap over host memory labelled kDLOpenCL");
    if (st != DLPORT_OK) return;
    DlportTensor *t = NULL;
    st = dlport_import(m, 1, ways[i], &t);
    check(st == DLPORT_ERR_BACKEND && says("is not a cl_mem this plugin created"),
          i == 0 ? "opencl_refuses_data_that_is_not_its_cl_mem (a view)"
                 : "opencl_refuses_data_that_is_not_its_cl_mem (a copy to the host)");
    check(t == NULL && released == 1, "the producer's tensor was released once");
    if (t != NULL) dlport_tensor_free(t);
  }
}

static void opencl_refuses_broadcast_and_overlapping_strides(void *(*iota)(float, int64_t)) {
  static const int64_t strides[2][2] = {{0, 1}, {2, 1}};
  for (int i = 0; i < 2; ++i) {
    DLManagedTensorVersioned *made = iota(0.0f, 12);
    check(made != NULL, "the plugin's producer made a cl_mem of 12 floats");
    if (made == NULL) return;
    int64_t shape[2] = {3, 4};
    void *m = NULL;
    int st = dlport_wrap(made->dl_tensor.data, kDLOpenCL, 0, kDLFloat, 32, 1, 2, shape,
                         strides[i], 0, 0, 1, release_managed, made, &m);
    check(st == DLPORT_OK, "dlport_wrap of the cl_mem with strides");
    if (st != DLPORT_OK) return;
    DlportTensor *t = NULL;
    st = dlport_import(m, 1, NULL, &t);
    check(st == DLPORT_OK, "a view of the plugin's own cl_mem");
    if (st != DLPORT_OK) return;
    st = to_host(t);
    check(st == DLPORT_ERR_BACKEND && says("smaller than the row or slice it steps over"),
          i == 0 ? "opencl_refuses_broadcast_and_overlapping_strides (strides 0, 1)"
                 : "opencl_refuses_broadcast_and_overlapping_strides (strides 2, 1)");
    dlport_tensor_free(t);
  }
}

static void opencl_second_init_keeps_its_reason(const char *path) {
  char *name = NULL;
  int st = dlport_load_plugin(path, &name);
  check(st != DLPORT_OK && says("already initialised") && !says("gives no message"),
        "opencl_second_init_keeps_its_reason");
  if (st == DLPORT_OK) dlport_string_free(name);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH/TO/libdlport_opencl.so\n", argv[0]);
    return 2;
  }
  const char *path = argv[1];
  if (dlport_load_plugin(path, NULL) != DLPORT_OK) {
    const char *why = dlport_last_error();
    if (why && (strstr(why, "no OpenCL") != NULL || strstr(why, "no usable OpenCL") != NULL)) {
      printf("opencl guarantees: SKIPPED: no OpenCL device: %s\n", why);
      return 77;
    }
    fprintf(stderr, "dlport_load_plugin(%s) failed: %s\n", path, why ? why : "-");
    return 1;
  }
  void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (lib == NULL) return 1;
  void *(*iota)(float, int64_t) = (void *(*)(float, int64_t))dlsym(lib, "dlport_opencl_iota");
  int (*counts)(DlportOpenclCounts *) = (int (*)(DlportOpenclCounts *))dlsym(lib, "dlport_opencl_counts");
  if (iota == NULL || counts == NULL) return 1;

  opencl_refuses_data_that_is_not_its_cl_mem();
  opencl_refuses_broadcast_and_overlapping_strides(iota);
  opencl_second_init_keeps_its_reason(path);

  check(dlport_unregister_backend("opencl") == DLPORT_OK, "unregister opencl");
  DlportOpenclCounts c;
  check(counts(&c) == 0, "the plugin was destroyed after its last tensor");
  check(c.buffers_created == 2 && c.buffers_freed == c.buffers_created,
        "every cl_mem the plugin created was freed once");
  printf("counts: buffers %llu/%llu views %llu/%llu\n", (unsigned long long)c.buffers_created,
         (unsigned long long)c.buffers_freed, (unsigned long long)c.views_created,
         (unsigned long long)c.views_destroyed);
  /* lib stays open: LeakSanitizer symbolizes what it reports at exit. */
  printf("opencl guarantees: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
