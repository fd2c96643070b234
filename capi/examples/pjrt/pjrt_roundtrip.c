/* A PJRT plugin as a DLPack device, from C: load the plugin by its path, list its devices,
 * import a C array into PJRT without a copy, export the PJRT buffer back to DLPack without a
 * copy, run a StableHLO program on the imported view, and check that the array's deleter runs
 * exactly once, on the success path and on a refusal. Prints the addresses both ways.
 *
 *   cc pjrt_roundtrip.c -Icapi/include -Ltarget/debug -ldlport -o pjrt_roundtrip
 *   ./pjrt_roundtrip /path/to/xla_cpu_pjrt.so      (or DLPORT_PJRT_PLUGIN=...)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlport.h"

static int released = 0;

static const char AFFINE[] =
    "module @affine {\n"
    "  func.func public @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
    "    %two = stablehlo.constant dense<2.0> : tensor<2x3xf32>\n"
    "    %one = stablehlo.constant dense<1.0> : tensor<2x3xf32>\n"
    "    %m = stablehlo.multiply %x, %two : tensor<2x3xf32>\n"
    "    %r = stablehlo.add %m, %one : tensor<2x3xf32>\n"
    "    return %r : tensor<2x3xf32>\n"
    "  }\n"
    "}\n";
static int64_t shape[2] = {2, 3};

static void deleter(DLManagedTensorVersioned *self) {
  released += 1;
  free(self->dl_tensor.data);
  free(self);
}

/* For tensors whose data the test does not own (an empty one at an arbitrary address). */
static void free_struct(DLManagedTensorVersioned *self) {
  released += 1;
  free(self);
}

/* An n-element tensor of `code`/`bits` over `data` (not freed by its deleter). */
static DLManagedTensorVersioned *borrowed(void *data, uint8_t code, uint8_t bits, int64_t *dims,
                                          int ndim) {
  DLManagedTensorVersioned *t = calloc(1, sizeof *t);
  t->version.major = 1;
  t->deleter = free_struct;
  t->dl_tensor.data = data;
  t->dl_tensor.device.device_type = kDLCPU;
  t->dl_tensor.ndim = ndim;
  t->dl_tensor.dtype.code = code;
  t->dl_tensor.dtype.bits = bits;
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.shape = dims;
  return t;
}

/* A 2x3 float32 host tensor, its data 64-byte aligned plus `offset` bytes. */
static DLManagedTensorVersioned *make_tensor(size_t offset, float **data_out) {
  DLManagedTensorVersioned *t = calloc(1, sizeof *t);
  char *base = aligned_alloc(64, 128);
  float *data = (float *)(base + offset);
  for (int i = 0; i < 6; i++) data[i] = (float)i;
  t->version.major = 1;
  t->version.minor = 0;
  t->deleter = deleter;
  t->dl_tensor.data = base;
  t->dl_tensor.byte_offset = offset;
  t->dl_tensor.device.device_type = kDLCPU;
  t->dl_tensor.device.device_id = 0;
  t->dl_tensor.ndim = 2;
  t->dl_tensor.dtype.code = kDLFloat;
  t->dl_tensor.dtype.bits = 32;
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.shape = shape;
  *data_out = data;
  return t;
}

#define CHECK(cond, what)                                                          \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "FAILED: %s (%s)\n", what, dlport_last_error());           \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : getenv("DLPORT_PJRT_PLUGIN");
  if (path == NULL || path[0] == '\0') {
    printf("SKIP: no plugin path (argument 1 or DLPORT_PJRT_PLUGIN)\n");
    return 0;
  }
  DlportPjrtClient *client = NULL;
  CHECK(dlport_pjrt_load(path, 0, &client) == DLPORT_OK, "dlport_pjrt_load");
  char platform[32];
  CHECK(dlport_pjrt_platform(client, platform, sizeof platform) == DLPORT_OK, "platform");
  /* Loading registered the client in the registry the C ABI works on. */
  char *json = NULL;
  CHECK(dlport_backends(&json) == DLPORT_OK, "dlport_backends");
  char want[160];
  snprintf(want, sizeof want, "\"name\":\"pjrt:%s\",\"kind\":\"pjrt\"", platform);
  printf("backends: %s\n", json);
  CHECK(strstr(json, want) != NULL, "the client is a backend of the registry");
  dlport_string_free(json);
  DLDevice devices[16];
  size_t n = 0;
  CHECK(dlport_pjrt_devices(client, devices, 16, &n) == DLPORT_OK && n > 0, "devices");
  printf("plugin %s: platform \"%s\", %zu devices, device 0 = (%d, %d)\n", path, platform, n,
         devices[0].device_type, devices[0].device_id);

  /* Import: a view of the C array (the plugin needs 64-byte alignment). */
  float *data = NULL;
  DLManagedTensorVersioned *t = make_tensor(0, &data);
  DlportPjrtBuffer *buffer = NULL;
  CHECK(dlport_pjrt_import(client, t, 1, DLPORT_COPY_NEVER, -1, &buffer) == DLPORT_OK, "import");
  printf("C array        -> PJRT buffer %p: producer's data at %p\n",
         dlport_pjrt_buffer_raw(buffer), (void *)data);

  /* Export: the PJRT buffer's memory, as DLPack. */
  void *out = NULL;
  CHECK(dlport_pjrt_export(buffer, 1, &out) == DLPORT_OK, "export");
  DLManagedTensorVersioned *m = out;
  const float *seen = (const float *)((char *)m->dl_tensor.data + m->dl_tensor.byte_offset);
  printf("PJRT buffer    -> DLPack tensor: data at %p (%s), values %g %g ... %g\n",
         (const void *)seen, seen == data ? "the same address, no copy" : "A COPY",
         seen[0], seen[1], seen[5]);
  CHECK(seen == data, "the export is the producer's memory");
  CHECK(seen[5] == 5.0f, "the values");
  CHECK(released == 0, "not released while viewed");
  CHECK(dlport_release(out, 1) == DLPORT_OK, "release the export");

  /* StableHLO on the view: 2 * x + 1, computed by XLA in the C array's memory. */
  DlportPjrtExecutable *exe = NULL;
  CHECK(dlport_pjrt_compile(client, AFFINE, strlen(AFFINE), &exe) == DLPORT_OK, "compile");
  const DlportPjrtBuffer *args[1] = {buffer};
  DlportPjrtBuffer *result = NULL;
  size_t n_out = 0;
  CHECK(dlport_pjrt_execute(exe, args, 1, &result, 1, &n_out) == DLPORT_OK && n_out == 1,
        "execute");
  CHECK(dlport_pjrt_export(result, 1, &out) == DLPORT_OK, "export the result");
  m = out;
  const float *r = (const float *)((char *)m->dl_tensor.data + m->dl_tensor.byte_offset);
  printf("StableHLO 2x+1 -> DLPack tensor: data at %p (the result buffer's), values %g %g ... %g\n",
         (const void *)r, r[0], r[1], r[5]);
  CHECK(r[0] == 1.0f && r[5] == 11.0f, "the program's values");
  CHECK(dlport_release(out, 1) == DLPORT_OK, "release the result's export");
  dlport_pjrt_buffer_free(result);
  dlport_pjrt_executable_free(exe);
  CHECK(released == 0, "not released while the input buffer lives");
  CHECK(released == 0, "not released while the buffer lives");
  dlport_pjrt_buffer_free(buffer);
  CHECK(released == 1, "released once when the buffer and its exports are gone");

  /* A refusal: misaligned memory under DLPORT_COPY_NEVER; the tensor is released once. */
  t = make_tensor(4, &data);
  buffer = NULL;
  int status = dlport_pjrt_import(client, t, 1, DLPORT_COPY_NEVER, -1, &buffer);
  printf("misaligned, COPY_NEVER: status %d: %s\n", status, dlport_last_error());
  CHECK(status == DLPORT_ERR_COPY_REQUIRED && buffer == NULL, "refused");
  CHECK(released == 2, "released once on refusal");
  /* The same under DLPORT_COPY_IF_NEEDED: a copy, the tensor released on return. */
  t = make_tensor(4, &data);
  CHECK(dlport_pjrt_import(client, t, 1, DLPORT_COPY_IF_NEEDED, -1, &buffer) == DLPORT_OK,
        "copy");
  CHECK(released == 3, "released on return from a copy");
  CHECK(dlport_pjrt_export(buffer, 0, &out) == DLPORT_OK, "legacy export");
  DLManagedTensor *legacy = out;
  printf("copied         -> DLPack (legacy): data at %p, producer's was %p\n",
         legacy->dl_tensor.data, (void *)data);
  CHECK(((float *)legacy->dl_tensor.data)[4] == 4.0f, "copied values");
  CHECK(dlport_release(out, 0) == DLPORT_OK, "release the legacy export");
  dlport_pjrt_buffer_free(buffer);
  /* The registry's allocation limit holds for a PJRT copy: 24 bytes over a limit of 16. */
  dlport_set_alloc_limit(16);
  t = make_tensor(4, &data);
  status = dlport_pjrt_import(client, t, 1, DLPORT_COPY_IF_NEEDED, -1, &buffer);
  dlport_set_alloc_limit(0);
  printf("a copy over the limit: status %d: %s\n", status, dlport_last_error());
  CHECK(status == DLPORT_ERR_ALLOCATION_LIMIT, "the copy refused by the limit");
  CHECK(released == 4, "released once on refusal");

  /* What an attack tried (issue #54). A device type that is no DLPack type is refused. */
  DlportPjrtClient *other = NULL;
  CHECK(dlport_pjrt_load(path, -7, &other) != DLPORT_OK && other == NULL &&
            strstr(dlport_last_error(), "device_type = -7") != NULL,
        "device type -7 refused");
  /* An executable refuses a buffer of another client. */
  CHECK(dlport_pjrt_load(path, 0, &other) == DLPORT_OK, "a second client");
  CHECK(dlport_pjrt_compile(client, AFFINE, strlen(AFFINE), &exe) == DLPORT_OK, "compile");
  t = make_tensor(0, &data);
  CHECK(dlport_pjrt_import(other, t, 1, DLPORT_COPY_IF_NEEDED, -1, &buffer) == DLPORT_OK,
        "import into the second client");
  args[0] = buffer;
  CHECK(dlport_pjrt_execute(exe, args, 1, &result, 1, &n_out) != DLPORT_OK &&
            strstr(dlport_last_error(), "another client") != NULL,
        "a foreign buffer refused");
  dlport_pjrt_buffer_free(buffer);
  dlport_pjrt_executable_free(exe);
  dlport_pjrt_client_free(other);
  CHECK(released == 5, "the second client's tensor released once");
  /* An empty tensor at an unaligned address imports under COPY_IF_NEEDED. */
  int64_t empty[2] = {0, 3};
  t = borrowed((void *)0x1001, kDLFloat, 32, empty, 2);
  CHECK(dlport_pjrt_import(client, t, 1, DLPORT_COPY_IF_NEEDED, -1, &buffer) == DLPORT_OK,
        "an empty tensor");
  dlport_pjrt_buffer_free(buffer);
  CHECK(released == 6, "the empty tensor released once");
  /* Six int4 packed as 21 43 65, then bytes the tensor does not own: copied by value, on
   * PJRT device 1 where there is one, and exported as host memory (kDLCPU 0). */
  static unsigned char packed[8] = {0x21, 0x43, 0x65, 0x77, 0x88, 0x99};
  int64_t six[1] = {6};
  t = borrowed(packed, kDLInt, 4, six, 1);
  CHECK(dlport_pjrt_import(client, t, 1, DLPORT_COPY_ALWAYS, n > 1 ? 1 : 0, &buffer) ==
            DLPORT_OK,
        "an int4 copy");
  CHECK(dlport_pjrt_export(buffer, 1, &out) == DLPORT_OK, "export the int4 copy");
  m = out;
  const unsigned char *nibbles = m->dl_tensor.data;
  printf("int4 21 43 65  -> PJRT copy -> DLPack: %02x %02x %02x on (%d, %d)\n", nibbles[0],
         nibbles[1], nibbles[2], m->dl_tensor.device.device_type, m->dl_tensor.device.device_id);
  CHECK(nibbles[0] == 0x21 && nibbles[1] == 0x43 && nibbles[2] == 0x65, "int4 values kept");
  CHECK(m->dl_tensor.device.device_type == kDLCPU && m->dl_tensor.device.device_id == 0,
        "host memory exports as kDLCPU 0");
  CHECK(dlport_release(out, 1) == DLPORT_OK, "release the int4 export");
  dlport_pjrt_buffer_free(buffer);
  CHECK(released == 7, "the int4 tensor released once");
  dlport_pjrt_client_free(client);
  printf("pjrt_roundtrip: OK (7 tensors, each released once)\n");
  return 0;
}
