/* A C producer: hands its own buffer out as a DLPack tensor with dlport_wrap, imports it
 * without a copy (the data address proves it), views it back as a plain DLTensor, and counts
 * release callbacks: exactly 1 on success and on every error path.
 * Build: cc -std=c11 producer.c $(pkg-config --cflags --libs dlport)   (or CMake, see
 * CMakeLists.txt). */
#include <dlport.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int passed = 0, failed = 0;

static void expect(int ok, const char* what) {
  if (ok) {
    passed++;
  } else {
    failed++;
    printf("FAILED: %s (last error: %s)\n", what, dlport_last_error() ? dlport_last_error() : "none");
  }
}

/* The producer's release callback: ctx is a counter. */
static void on_release(void* ctx) { *(int*)ctx += 1; }

/* Wraps `data` (float32 [2, 3]) with the given details; returns the status, counts in *calls. */
static int wrap(void* data, uint8_t bits, int32_t ndim, const int64_t* shape, uint64_t flags,
                int to_versioned, int* calls, void** out) {
  return dlport_wrap(data, kDLCPU, 0, kDLFloat, bits, 1, ndim, shape, NULL, 0, flags, to_versioned,
                     on_release, calls, out);
}

int main(void) {
  float buffer[6] = {0, 1, 2, 3, 4, 5};
  const int64_t shape[2] = {2, 3};
  printf("dlport %s (ABI %d)\n", dlport_version(), DLPORT_ABI_VERSION_MAJOR);

  /* Success: wrap, import without a copy, view, free: one callback, after the last use. */
  int calls = 0;
  void* managed = NULL;
  expect(wrap(buffer, 32, 2, shape, 0, 1, &calls, &managed) == DLPORT_OK, "wrap succeeds");
  DlportImportOptions options;
  memset(&options, 0, sizeof options);
  options.copy = DLPORT_COPY_NEVER;
  DlportTensor* tensor = NULL;
  expect(dlport_import(managed, 1, &options, &tensor) == DLPORT_OK, "import without a copy");
  void* data = NULL;
  uint64_t offset = 1;
  expect(dlport_tensor_data(tensor, &data, &offset) == DLPORT_OK, "tensor data");
  printf("zero copy: buffer at %p, imported data at %p\n", (void*)buffer, data);
  expect(data == (void*)buffer && offset == 0, "the import is the producer's buffer");
  DLTensor view;
  expect(dlport_tensor_view(tensor, &view) == DLPORT_OK, "tensor view");
  expect(view.data == (void*)buffer && view.ndim == 2 && view.shape[0] == 2 && view.shape[1] == 3 &&
             view.strides[0] == 3 && view.strides[1] == 1 && view.dtype.code == kDLFloat &&
             view.dtype.bits == 32 && view.device.device_type == kDLCPU,
         "the view describes the buffer");
  expect(((const float*)view.data)[5] == 5.0f, "the view reads the producer's values");
  expect(calls == 0, "no callback while the tensor lives");
  dlport_tensor_free(tensor);
  printf("callbacks after success: %d\n", calls);
  expect(calls == 1, "one callback after the import is freed");

  /* Legacy form, released by dlport_release. */
  calls = 0;
  expect(wrap(buffer, 32, 2, shape, 0, 0, &calls, &managed) == DLPORT_OK, "legacy wrap succeeds");
  expect(dlport_release(managed, 0) == DLPORT_OK && calls == 1, "legacy release: one callback");

  /* Every error path: the status names the error and the callback ran exactly once. */
  struct {
    const char* what;
    uint8_t bits;
    int32_t ndim;
    const int64_t* shape;
    uint64_t flags;
    int to_versioned;
    int null_out;
    int status;
  } errors[] = {
      {"NULL out", 32, 2, shape, 0, 1, 1, DLPORT_INVALID_ARGUMENT},
      {"float of 12 bits", 12, 2, shape, 0, 1, 0, DLPORT_ERR_INVALID_BITS},
      {"ndim -1", 32, -1, shape, 0, 1, 0, DLPORT_ERR_NDIM_OUT_OF_RANGE},
      {"NULL shape", 32, 2, NULL, 0, 1, 0, DLPORT_ERR_NULL_SHAPE},
      {"unknown flag bit", 32, 2, shape, 1u << 7, 1, 0, DLPORT_ERR_UNKNOWN_FLAGS},
      {"READ_ONLY to legacy", 32, 2, shape, DLPACK_FLAG_BITMASK_READ_ONLY, 0, 0,
       DLPORT_ERR_FLAG_NOT_REPRESENTABLE},
  };
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
    calls = 0;
    managed = NULL;
    int status = wrap(buffer, errors[i].bits, errors[i].ndim, errors[i].shape, errors[i].flags,
                      errors[i].to_versioned, &calls, errors[i].null_out ? NULL : &managed);
    printf("error path %-20s status %3d, callbacks %d: %s\n", errors[i].what, status, calls,
           dlport_last_error() ? dlport_last_error() : "(no message)");
    expect(status == errors[i].status, errors[i].what);
    expect(calls == 1, "exactly one callback on the error path");
    expect(managed == NULL, "nothing written on error");
  }
  /* An address past the end of user space. */
  calls = 0;
  int status = wrap((void*)(uintptr_t)UINT64_C(0xFFFFFFFFFFFFF000), 32, 2, shape, 0, 1, &calls,
                    &managed);
  printf("error path %-20s status %3d, callbacks %d\n", "kernel address", status, calls);
  expect(status == DLPORT_ERR_ADDRESS_OVERFLOW && calls == 1, "kernel address refused, one callback");

  printf("producer (C): %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
