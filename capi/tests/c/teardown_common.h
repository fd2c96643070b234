/* Shared by the teardown tests: dlport entries called while the process or a thread shuts
 * down (an atexit handler, a C++ static destructor, a pthread-key destructor). By then the
 * thread's TLS destructors have run (glibc calls __call_tls_dtors first), so every entry must
 * still work without them. On the first failed check this prints what failed and _exit(1)s
 * (exit() from inside exit() is undefined); on success it prints "teardown ok (<where>)". */
#ifndef TEARDOWN_COMMON_H_
#define TEARDOWN_COMMON_H_

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlport.h"

static int td_checks = 0;

#define TD_CHECK(where, cond, what)                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      const char* td_e = dlport_last_error();                                           \
      printf("teardown FAILED (%s) %s:%d: %s (last error: %s)\n", where, __FILE__,      \
             __LINE__, what, td_e ? td_e : "none");                                     \
      fflush(stdout);                                                                   \
      _exit(1);                                                                         \
    }                                                                                   \
    td_checks++;                                                                        \
  } while (0)

/* Exercises the entries a shutting-down caller may need: alloc, export, release, a refused
 * second release with its message, a refused describe with its message, tensor_free, the
 * export counts, and the capsule destructor. */
static void teardown_checks(const char* where) {
  uint64_t exported0 = 0, released0 = 0, exported1 = 0, released1 = 0;
  dlport_export_counts(&exported0, &released0);

  int64_t shape[1] = {16};
  DlportTensor* t = NULL;
  TD_CHECK(where, dlport_alloc(NULL, 1, 0, 2, 32, 1, shape, 1, &t) == DLPORT_OK && t, "alloc");
  TD_CHECK(where, dlport_last_error() == NULL, "no error after a success");
  void* out = NULL;
  int versioned = -1;
  TD_CHECK(where, dlport_export(t, 1, 3, 0, 0, DLPORT_COPY_NEVER, &out, &versioned) == DLPORT_OK && out,
           "export");
  TD_CHECK(where, versioned == 1, "versioned export");
  dlport_tensor_free(t); /* the export keeps the buffer alive */
  TD_CHECK(where, ((DLManagedTensorVersioned*)out)->dl_tensor.shape[0] == 16, "export readable after tensor_free");
  TD_CHECK(where, dlport_release(out, 1) == DLPORT_OK, "release");

  /* A refused call: its message must be available during teardown too. */
  TD_CHECK(where, dlport_release(out, 1) == DLPORT_INVALID_ARGUMENT, "second release refused");
  const char* e = dlport_last_error();
  TD_CHECK(where, e != NULL, "dlport_last_error() after a failed call is not NULL");
  TD_CHECK(where, strstr(e, "already released") != NULL, "the message names the problem");
  char addr[32];
  snprintf(addr, sizeof addr, "%p", out);
  TD_CHECK(where, strstr(e, addr) != NULL, "the message names the tensor's address");

  int64_t bad_shape[2] = {2, -3};
  int64_t strides[2] = {3, 1};
  float data[6] = {0};
  DLManagedTensor bad;
  memset(&bad, 0, sizeof bad);
  bad.dl_tensor.data = data;
  bad.dl_tensor.device.device_type = 1;
  bad.dl_tensor.ndim = 2;
  bad.dl_tensor.dtype.code = 2;
  bad.dl_tensor.dtype.bits = 32;
  bad.dl_tensor.dtype.lanes = 1;
  bad.dl_tensor.shape = bad_shape;
  bad.dl_tensor.strides = strides;
  char* json = NULL;
  TD_CHECK(where, dlport_describe(&bad, 0, &json) == 8, "describe of a negative extent refused");
  e = dlport_last_error();
  TD_CHECK(where, e != NULL && strstr(e, "shape[1] = -3 is negative") != NULL, "describe message names the field");

  dlport_tensor_free(NULL);
  dlport_capsule_destructor(NULL);
  dlport_export_counts(&exported1, &released1);
  TD_CHECK(where, exported1 == exported0 + 1 && released1 == released0 + 1, "export counts exact");
  printf("teardown ok (%s): %d checks passed\n", where, td_checks);
  fflush(stdout);
}

/* Leaves dlport's per-thread error state initialised (a failed call), so that the thread's TLS
 * destructors have something to destroy before the teardown code runs. */
static void use_dlport_on_this_thread(void) {
  char* json = NULL;
  (void)dlport_describe(NULL, 1, &json);
  (void)dlport_last_error();
}

#endif /* TEARDOWN_COMMON_H_ */
