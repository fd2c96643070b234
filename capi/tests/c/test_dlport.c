/* The C test program: includes dlport.h, compiles with -Wall -Werror, links the cdylib, and
 * checks the ABI end to end. Prints "N passed, N failed" and exits non-zero on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlport.h"
#include "check.h"


/* A producer: a legacy tensor over a static buffer, counting deleter calls. */
static int deleted = 0;
static float data[6] = {1, 2, 3, 4, 5, 6};
static int64_t shape[2] = {2, 3};
static int64_t strides[2] = {3, 1};
static int64_t bad_shape[2] = {2, -3};

static void count_deleter(DLManagedTensor* self) {
  (void)self;
  deleted++;
}
static void count_deleter_v(DLManagedTensorVersioned* self) {
  (void)self;
  deleted++;
}

static DLManagedTensor legacy(int64_t* shp) {
  DLManagedTensor m;
  memset(&m, 0, sizeof m);
  m.dl_tensor.data = data;
  m.dl_tensor.device.device_type = 1;
  m.dl_tensor.ndim = 2;
  m.dl_tensor.dtype.code = 2;
  m.dl_tensor.dtype.bits = 32;
  m.dl_tensor.dtype.lanes = 1;
  m.dl_tensor.shape = shp;
  m.dl_tensor.strides = strides;
  m.deleter = count_deleter;
  return m;
}

int main(void) {
  char* json = NULL;
  CHECK(strcmp(dlport_version(), "0.1.0") == 0, "version %s", dlport_version());

  /* describe: borrowed, no deleter call */
  DLManagedTensor m = legacy(shape);
  CHECK(dlport_describe(&m, 0, &json) == DLPORT_OK, "describe");
  CHECK(json && strstr(json, "\"shape\":[2,3]") && strstr(json, "\"dtype\":\"float32\""), "json %s", json);
  dlport_string_free(json);
  CHECK(deleted == 0, "describe must not release");

  /* bad input: an error code and a message naming the field, no crash */
  DLManagedTensor bad = legacy(bad_shape);
  CHECK(dlport_describe(&bad, 0, &json) == 8, "negative extent code");
  CHECK(strstr(dlport_last_error(), "shape[1] = -3 is negative") != NULL, "message");
  CHECK(dlport_describe(NULL, 1, &json) == 1, "NULL tensor");
  CHECK(dlport_describe(&m, 0, NULL) == DLPORT_INVALID_ARGUMENT, "NULL out");

  /* import (consuming) then export and release: the producer's deleter runs once */
  DlportTensor* t = NULL;
  DlportImportOptions opts = {0, 0, 0, 0, DLPORT_COPY_NEVER, DLPORT_LAYOUT_ANY, 0, 0};
  CHECK(dlport_import(&m, 0, &opts, &t) == DLPORT_OK, "import");
  void* p = NULL;
  uint64_t off = 1;
  CHECK(dlport_tensor_data(t, &p, &off) == DLPORT_OK && p == (void*)data && off == 0, "zero-copy view");
  void* out = NULL;
  int versioned = -1;
  CHECK(dlport_export(t, 1, 3, 0, 0, DLPORT_COPY_IF_NEEDED, &out, &versioned) == DLPORT_OK, "export");
  CHECK(versioned == 1, "max_version 1.3 gives versioned");
  DLManagedTensorVersioned* v = (DLManagedTensorVersioned*)out;
  CHECK(v->version.major == 1 && v->dl_tensor.data == (void*)data && v->dl_tensor.ndim == 2, "export fields");
  dlport_tensor_free(t);
  CHECK(deleted == 0, "the export keeps the producer alive");
  CHECK(dlport_release(out, 1) == DLPORT_OK, "release");
  CHECK(deleted == 1, "released exactly once (deleted = %d)", deleted);
  /* A buggy second release of a dlport export is detected, not executed. */
  CHECK(dlport_release(out, 1) == DLPORT_INVALID_ARGUMENT, "double release detected");
  CHECK(strstr(dlport_last_error(), "already released") != NULL, "double release message");
  CHECK(deleted == 1, "no second deleter call (deleted = %d)", deleted);

  /* a refused import releases the input too */
  bad = legacy(bad_shape);
  CHECK(dlport_import(&bad, 0, NULL, &t) == 8, "refused import");
  CHECK(deleted == 2, "refusal released the input (deleted = %d)", deleted);

  /* version 2.0 is released and refused */
  DLManagedTensorVersioned v2;
  memset(&v2, 0, sizeof v2);
  v2.version.major = 2;
  v2.deleter = count_deleter_v;
  CHECK(dlport_import(&v2, 1, NULL, &t) == 2, "version 2 refused");
  CHECK(strstr(dlport_last_error(), "version = 2.0") != NULL, "version message");
  CHECK(deleted == 3, "version 2 released (deleted = %d)", deleted);

  /* convert legacy -> versioned, compact a transposed view */
  m = legacy(shape);
  CHECK(dlport_convert(&m, 0, 1, &out) == DLPORT_OK, "convert");
  CHECK(((DLManagedTensorVersioned*)out)->dl_tensor.data == (void*)data, "convert keeps the address");
  int64_t tshape[2] = {3, 2};
  int64_t tstrides[2] = {1, 3};
  DLManagedTensorVersioned* cv = (DLManagedTensorVersioned*)out;
  cv->dl_tensor.shape = tshape; /* a transposed view of the same data */
  cv->dl_tensor.strides = tstrides;
  void* compact = NULL;
  CHECK(dlport_compact(out, 1, 1, DLPORT_COPY_IF_NEEDED, &compact) == DLPORT_OK, "compact");
  DLManagedTensorVersioned* c = (DLManagedTensorVersioned*)compact;
  const float* cf = (const float*)c->dl_tensor.data;
  CHECK(cf[0] == 1 && cf[1] == 4 && cf[2] == 2 && cf[3] == 5 && cf[4] == 3 && cf[5] == 6, "transposed values");
  CHECK(((uintptr_t)cf) % 64 == 0, "64-byte aligned");
  CHECK(c->flags & DLPACK_FLAG_BITMASK_IS_COPIED, "IS_COPIED");
  CHECK(deleted == 4, "the source was released after the copy (deleted = %d)", deleted);
  dlport_release(compact, 1);

  /* allocate, describe */
  int64_t ashape[1] = {1000};
  CHECK(dlport_alloc(NULL, 1, 0, 0, 64, 1, ashape, 1, &t) == DLPORT_OK, "alloc");
  CHECK(dlport_tensor_describe(t, &json) == DLPORT_OK && strstr(json, "\"dtype\":\"int64\""), "describe %s", json);
  dlport_string_free(json);
  dlport_tensor_free(t);
  CHECK(dlport_alloc("nope", 1, 0, 2, 32, 1, ashape, 1, &t) == DLPORT_INVALID_ARGUMENT, "unknown backend");
  CHECK(strstr(dlport_last_error(), "registered: cpu, pinned") != NULL, "names the backends");

  /* the stream hand-off and compaction of the registry: host memory takes stream NULL or -1 */
  int64_t no_sync = -1, legacy_stream = 1;
  CHECK(dlport_alloc(NULL, 1, 0, 2, 32, 1, ashape, 1, &t) == DLPORT_OK, "alloc float32");
  CHECK(dlport_export_stream(t, 1, 3, 0, 0, DLPORT_COPY_IF_NEEDED, NULL, &out, &versioned) == DLPORT_OK,
        "export, stream NULL");
  dlport_release(out, versioned);
  CHECK(dlport_export_stream(t, 1, 3, 0, 0, DLPORT_COPY_IF_NEEDED, &no_sync, &out, &versioned) == DLPORT_OK,
        "export, stream -1");
  dlport_release(out, versioned);
  out = NULL;
  CHECK(dlport_export_stream(t, 1, 3, 0, 0, DLPORT_COPY_IF_NEEDED, &legacy_stream, &out, &versioned) ==
                DLPORT_ERR_INVALID_STREAM &&
            out == NULL,
        "host memory refuses stream 1");
  DlportTensor* tc = NULL;
  void *p1 = NULL, *p2 = NULL;
  CHECK(dlport_tensor_compact(t, 0, DLPORT_COPY_NEVER, 0, &tc) == DLPORT_OK, "compact and aligned already");
  CHECK(dlport_tensor_data(t, &p1, &off) == DLPORT_OK && dlport_tensor_data(tc, &p2, &off) == DLPORT_OK && p1 == p2,
        "compaction gives the same memory");
  dlport_tensor_free(tc);
  tc = NULL;
  CHECK(dlport_tensor_compact(t, 48, DLPORT_COPY_IF_NEEDED, 0, &tc) == DLPORT_ERR_INVALID_OPTION && tc == NULL,
        "alignment 48 refused");
  dlport_tensor_free(t);

  /* host view of "pinned" memory advertised the PyTorch way */
  m = legacy(shape);
  CHECK(dlport_host_view(&m, 0, 3, 0, 0, &out) == DLPORT_OK, "host view");
  DLManagedTensor* hv = (DLManagedTensor*)out;
  CHECK(hv->dl_tensor.data == (void*)data && hv->dl_tensor.device.device_type == 1, "same address, kDLCPU");
  dlport_release(out, 0);
  CHECK(deleted == 5, "original released once (deleted = %d)", deleted);

  uint64_t exported = 0, released = 0;
  dlport_export_counts(&exported, &released);
  CHECK(exported == released && exported >= 4, "export counts %llu/%llu", (unsigned long long)exported,
        (unsigned long long)released);

  /* the capsule destructor is a no-op outside Python */
  dlport_capsule_destructor(NULL);

  printf("c: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
