/* The share entries from C: a tensor in a memfd is shared over a socketpair (SCM_RIGHTS),
 * opened a second time (a second mapping: a write through one shows in the other, so no byte
 * was copied), and bad descriptors and fds are refused with a message naming the field. Both
 * ends are in this process; two real processes are in dlport-native's tests/share.rs.
 * Prints "share: N passed, N failed" and exits non-zero on failure. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dlport.h"
#include "check.h"

static int has(const char* needle) {
  const char* m = dlport_last_error();
  return m != NULL && strstr(m, needle) != NULL;
}

/* A caller-owned buffer wrapped with dlport_wrap: not a memfd. */
static int wrap_released = 0;
static int32_t wrap_data[4] = {1, 2, 3, 4};
static void wrap_release(void* ctx) {
  (void)ctx;
  wrap_released++;
}

int main(void) {
  uint64_t mapped0 = 0, unmapped0 = 0;
  dlport_share_mapping_counts(&mapped0, &unmapped0);

  /* A memfd tensor, filled by its producer. */
  int64_t shape[2] = {16, 16};
  void* mt = NULL;
  CHECK(dlport_share_alloc(kDLInt, 32, 1, shape, 2, 1, &mt) == DLPORT_OK, "alloc");
  DLManagedTensorVersioned* producer = (DLManagedTensorVersioned*)mt;
  int32_t* p = (int32_t*)producer->dl_tensor.data;
  for (int i = 0; i < 256; i++) p[i] = i;

  /* dlport_share consumes a managed tensor: give it a second owner of the same memfd (an open
   * of the tensor's own descriptor), keep the producer's for writing. */
  void* again = NULL;
  DlportShared* first = NULL;
  CHECK(dlport_share_alloc(kDLInt, 32, 1, shape, 2, 1, &again) == DLPORT_OK, "alloc 2");
  CHECK(dlport_share(again, 1, DLPORT_COPY_NEVER, 0, &first) == DLPORT_OK, "share a memfd");
  dlport_shared_free(first);

  /* Share the producer's memory through a view the ABI hands out: export it to a handle and
   * back (no copy: the view is of the memfd). */
  DlportTensor* handle = NULL;
  DlportImportOptions opts = {0, 0, 0, 0, DLPORT_COPY_NEVER, DLPORT_LAYOUT_ANY, 0, 0};
  CHECK(dlport_import(mt, 1, &opts, &handle) == DLPORT_OK, "import");
  void* exported = NULL;
  int versioned = 0;
  CHECK(dlport_export(handle, 1, 3, 0, 0, DLPORT_COPY_NEVER, &exported, &versioned) == DLPORT_OK,
        "export");
  DlportShared* shared = NULL;
  CHECK(dlport_share(exported, versioned, DLPORT_COPY_NEVER, 0, &shared) == DLPORT_OK,
        "share without a copy");

  const uint8_t* bytes = NULL;
  size_t len = 0;
  const int* fds = NULL;
  size_t nfds = 0;
  CHECK(dlport_shared_descriptor(shared, &bytes, &len) == DLPORT_OK && len == 56 + 32, "bytes %zu",
        len);
  CHECK(len <= DLPORT_SHARE_DESCRIPTOR_MAX && memcmp(bytes, "DLPS", 4) == 0, "magic");
  CHECK(dlport_shared_fds(shared, &fds, &nfds) == DLPORT_OK && nfds == 1 && fds[0] >= 0, "fds");

  /* Over a socket, and opened: the consumer's mapping shows the producer's writes. */
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
  CHECK(dlport_share_send(shared, sv[0]) == DLPORT_OK, "send");
  DlportShared* received = NULL;
  CHECK(dlport_share_recv(sv[1], &received) == DLPORT_OK, "recv");
  const uint8_t* rbytes = NULL;
  size_t rlen = 0;
  const int* rfds = NULL;
  size_t rn = 0;
  CHECK(dlport_shared_descriptor(received, &rbytes, &rlen) == DLPORT_OK && rlen == len &&
            memcmp(rbytes, bytes, len) == 0,
        "the same descriptor arrived");
  CHECK(dlport_shared_fds(received, &rfds, &rn) == DLPORT_OK && rn == 1 && rfds[0] != fds[0],
        "a new fd arrived");
  void* opened = NULL;
  CHECK(dlport_share_open(rbytes, rlen, rfds, rn, 1, &opened) == DLPORT_OK, "open");
  dlport_shared_free(received);
  DLManagedTensorVersioned* consumer = (DLManagedTensorVersioned*)opened;
  int32_t* q = (int32_t*)consumer->dl_tensor.data;
  CHECK(q != p && q[255] == 255, "a second mapping with the producer's values");
  q[7] = -7; /* the consumer writes … */
  CHECK(p[7] == -7, "… and the producer sees it: the same pages");
  CHECK((consumer->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == 0, "shared memory is never IS_COPIED");

  /* Bad descriptors: an error naming the field and value; nothing mapped. */
  uint64_t m1 = 0, u1 = 0;
  dlport_share_mapping_counts(&m1, &u1);
  void* bad = NULL;
  CHECK(dlport_share_open(bytes, len - 1, fds, 1, 1, &bad) == DLPORT_ERR_INVALID_VALUE &&
            has("descriptor length = 87"),
        "truncated");
  uint8_t future[DLPORT_SHARE_DESCRIPTOR_MAX];
  memcpy(future, bytes, len);
  future[4] = 2;
  CHECK(dlport_share_open(future, len, fds, 1, 1, &bad) == DLPORT_ERR_INVALID_VALUE &&
            has("descriptor.version = 2") && has("upgrade dlport"),
        "a version from the future");
  int pipefd[2];
  CHECK(pipe(pipefd) == 0, "pipe");
  CHECK(dlport_share_open(bytes, len, &pipefd[0], 1, 1, &bad) == DLPORT_ERR_BACKEND &&
            has("not a memfd"),
        "a pipe instead of the memfd");
  close(pipefd[0]);
  int closed = pipefd[0];
  CHECK(dlport_share_open(bytes, len, &closed, 1, 1, &bad) == DLPORT_INVALID_ARGUMENT &&
            has("is not open"),
        "a closed fd");
  close(pipefd[1]);
  CHECK(dlport_share_open(bytes, len, NULL, 0, 1, &bad) == DLPORT_ERR_INVALID_VALUE &&
            has("fd count = 0"),
        "no fd");
  uint64_t m2 = 0, u2 = 0;
  dlport_share_mapping_counts(&m2, &u2);
  CHECK(m2 == m1 && bad == NULL, "nothing was mapped by the refused opens");

  /* Memory that is not a memfd: refused under DLPORT_COPY_NEVER, copied otherwise. */
  int64_t wshape[1] = {4};
  void* wrapped = NULL;
  CHECK(dlport_wrap(wrap_data, kDLCPU, 0, kDLInt, 32, 1, 1, wshape, NULL, 0, 0, 1, wrap_release,
                    NULL, &wrapped) == DLPORT_OK,
        "wrap");
  DlportShared* nope = NULL;
  CHECK(dlport_share(wrapped, 1, DLPORT_COPY_NEVER, 0, &nope) == DLPORT_ERR_COPY_REQUIRED &&
            has("another process can map") && nope == NULL,
        "a foreign tensor under DLPORT_COPY_NEVER");
  CHECK(wrap_released == 1, "dlport_share consumed it (released once)");
  CHECK(dlport_wrap(wrap_data, kDLCPU, 0, kDLInt, 32, 1, 1, wshape, NULL, 0, 0, 1, wrap_release,
                    NULL, &wrapped) == DLPORT_OK,
        "wrap again");
  DlportShared* copy = NULL;
  CHECK(dlport_share(wrapped, 1, DLPORT_COPY_IF_NEEDED, 1, &copy) == DLPORT_OK, "share a copy");
  CHECK(wrap_released == 2, "the original is released once the copy is made");
  const uint8_t* cb = NULL;
  size_t cl = 0;
  const int* cf = NULL;
  size_t cn = 0;
  dlport_shared_descriptor(copy, &cb, &cl);
  dlport_shared_fds(copy, &cf, &cn);
  void* ro = NULL;
  CHECK(dlport_share_open(cb, cl, cf, cn, 1, &ro) == DLPORT_OK, "open the copy");
  DLManagedTensorVersioned* rov = (DLManagedTensorVersioned*)ro;
  CHECK((rov->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0 && ((int32_t*)rov->dl_tensor.data)[3] == 4,
        "a read-only copy with the values");
  dlport_release(ro, 1);
  dlport_shared_free(copy);

  /* Every release once: all mappings gone. */
  dlport_release(opened, 1);
  dlport_shared_free(shared);
  dlport_tensor_free(handle);
  close(sv[0]);
  close(sv[1]);
  uint64_t mapped = 0, unmapped = 0;
  dlport_share_mapping_counts(&mapped, &unmapped);
  CHECK(mapped - mapped0 == unmapped - unmapped0 && mapped - mapped0 == 4,
        "mappings made %llu, released %llu", (unsigned long long)(mapped - mapped0),
        (unsigned long long)(unmapped - unmapped0));

  printf("share: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
