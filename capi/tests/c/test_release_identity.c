/* dlport_release tells dlport's own exports from foreign tensors by identity, not by address:
 *  (i)   a foreign tensor whose header sits at an address that malloc handed out again after
 *        a dlport export there was released is released normally (its deleter runs once);
 *  (ii)  releasing a released dlport export again (through dlport_release, its deleter, or a
 *        consuming call) is refused with an error naming it, and runs nothing;
 *  (iii) a deleter that releases the export it belongs to again while dlport runs it (nested
 *        release) is refused, never a double free.
 * Prints "N passed, N failed" and exits non-zero on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlport.h"
#include "check.h"


static float data[6] = {1, 2, 3, 4, 5, 6};
static int64_t shape[2] = {2, 3};
static int64_t strides[2] = {3, 1};

/* A foreign producer: headers live wherever the test puts them; the deleter counts. */
static int foreign_deleted = 0;
static void foreign_deleter(DLManagedTensorVersioned* self) {
  (void)self;
  foreign_deleted++;
}

static void fill_foreign(DLManagedTensorVersioned* m) {
  memset(m, 0, sizeof *m);
  m->version.major = 1;
  m->version.minor = 3;
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = 1;
  m->dl_tensor.ndim = 2;
  m->dl_tensor.dtype.code = 2;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = shape;
  m->dl_tensor.strides = strides;
  m->deleter = foreign_deleter;
}

/* A fresh dlport export (versioned) of a small CPU tensor. */
static void* export_one(void) {
  int64_t s[1] = {4};
  DlportTensor* t = NULL;
  void* out = NULL;
  int v = -1;
  if (dlport_alloc(NULL, 1, 0, 2, 32, 1, s, 1, &t) != DLPORT_OK) return NULL;
  if (dlport_export(t, 1, 3, 0, 0, DLPORT_COPY_NEVER, &out, &v) != DLPORT_OK || v != 1) out = NULL;
  dlport_tensor_free(t);
  return out;
}

enum { PROBES = 240 };

/* Asks malloc for blocks of every size from a header's size up: if the memory at `target` is
 * free, malloc hands it out again (glibc reuses the most recently freed block of a size class).
 * Returns the probe that starts at `target`, or NULL; the others are kept in `probes` to be
 * freed by the caller. */
static void* probe_for(const void* const* targets, int ntargets, void** probes) {
  void* hit = NULL;
  for (int i = 0; i < PROBES; i++) {
    probes[i] = malloc(sizeof(DLManagedTensorVersioned) + 16 * (size_t)i);
    for (int k = 0; k < ntargets && !hit; k++)
      if (probes[i] == targets[k]) hit = probes[i];
  }
  return hit;
}

static void free_probes(void** probes) {
  for (int i = 0; i < PROBES; i++) free(probes[i]);
}

/* (iii): the producer's deleter releases the dlport export that wraps it, while dlport runs it. */
static void* nested_outer = NULL;
static int nested_status = 99;
static char nested_message[512];
static int nested_deleted = 0;
static int nested_direct = 0;
static void nested_deleter(DLManagedTensorVersioned* self) {
  (void)self;
  nested_deleted++;
  if (nested_direct) {
    DLManagedTensorVersioned* o = (DLManagedTensorVersioned*)nested_outer;
    o->deleter(o); /* the export's own deleter, again, from inside it */
    nested_status = 0;
  } else {
    nested_status = dlport_release(nested_outer, 1);
  }
  const char* e = dlport_last_error();
  snprintf(nested_message, sizeof nested_message, "%s", e ? e : "(none)");
}

int main(void) {
  uint64_t exported0 = 0, released0 = 0, exported1 = 0, released1 = 0;
  dlport_export_counts(&exported0, &released0);
  int exports = 0;

  /* (i) A foreign tensor at the address of a released dlport export. */
  int staged = 0;
  for (int round = 0; round < 64; round++) {
    void* e = export_one();
    exports++;
    CHECK(e != NULL, "export");
    if (!e) break;
    CHECK(dlport_release(e, 1) == DLPORT_OK, "release of the export");
    void* probes[PROBES];
    const void* targets[1] = {e};
    void* at = probe_for(targets, 1, probes);
    DLManagedTensorVersioned fresh;
    DLManagedTensorVersioned* f = at ? (DLManagedTensorVersioned*)at : &fresh;
    staged += at != NULL;
    fill_foreign(f);
    int before = foreign_deleted;
    int status = dlport_release(f, 1);
    CHECK(status == DLPORT_OK, "round %d: foreign tensor at %p (%s) released: status %d", round, (void*)f,
          at ? "the released export's address" : "elsewhere", status);
    CHECK(foreign_deleted == before + 1, "round %d: the foreign deleter ran once (%d times)", round,
          foreign_deleted - before);
    free_probes(probes);
  }
  printf("(i) 64 rounds; malloc handed out a released export's address again in %d of them\n", staged);
  /* dlport keeps a released export's block (quarantine): its address cannot be reused while dlport
   * still recognises it as dead. */
  CHECK(staged == 0, "a released export's memory was reused while still quarantined (%d)", staged);

  /* Once 4096 later releases have pushed an export out of the quarantine, its memory is freed and
   * its address is foreign again: a tensor there is released normally. */
  enum { OLD = 64, LATER = 4096 };
  void* old[OLD];
  for (int i = 0; i < OLD; i++) {
    old[i] = export_one();
    exports++;
    CHECK(old[i] && dlport_release(old[i], 1) == DLPORT_OK, "old export %d", i);
  }
  for (int i = 0; i < LATER; i++) {
    void* e = export_one();
    exports++;
    if (!e || dlport_release(e, 1) != DLPORT_OK) {
      CHECK(0, "later export %d", i);
      break;
    }
  }
  {
    void* probes[PROBES];
    void* at = probe_for((const void* const*)old, OLD, probes);
    printf("(i) after %d later releases, an evicted export's address %s handed out again\n", LATER,
           at ? "was" : "was not");
    if (at) {
      DLManagedTensorVersioned* f = (DLManagedTensorVersioned*)at;
      fill_foreign(f);
      int before = foreign_deleted;
      CHECK(dlport_release(f, 1) == DLPORT_OK && foreign_deleted == before + 1,
            "a foreign tensor at an evicted export's address is released once");
    }
    free_probes(probes);
  }

  /* (ii) A second release of a dlport export, three ways. */
  void* e = export_one();
  exports++;
  DLManagedTensorVersioned* ev = (DLManagedTensorVersioned*)e;
  void (*deleter)(DLManagedTensorVersioned*) = ev->deleter;
  CHECK(dlport_release(e, 1) == DLPORT_OK, "first release");
  char addr[32];
  snprintf(addr, sizeof addr, "%p", e);
  CHECK(dlport_release(e, 1) == DLPORT_INVALID_ARGUMENT, "second release refused");
  CHECK(dlport_last_error() && strstr(dlport_last_error(), "already released") &&
            strstr(dlport_last_error(), addr),
        "the message names %s and says it was already released", addr);
  CHECK(dlport_release(e, 0) == DLPORT_INVALID_ARGUMENT, "refused whatever the versioned flag");
  deleter(ev); /* a consumer calling the deleter again: a no-op */
  CHECK(dlport_last_error() && strstr(dlport_last_error(), addr), "the deleter's refusal is reported");
  DlportTensor* t = NULL;
  CHECK(dlport_import(e, 1, NULL, &t) == DLPORT_INVALID_ARGUMENT && t == NULL, "import of a released export refused");
  CHECK(strstr(dlport_last_error(), "already released") != NULL, "import message");
  char* json = NULL;
  CHECK(dlport_describe(e, 1, &json) == DLPORT_INVALID_ARGUMENT && json == NULL, "describe of a released export refused");
  void* conv = NULL;
  CHECK(dlport_convert(e, 1, 0, &conv) == DLPORT_INVALID_ARGUMENT && conv == NULL, "convert of a released export refused");

  /* (iii) Nested release: the producer's deleter releases the export that wraps it. */
  for (nested_direct = 0; nested_direct < 2; nested_direct++) {
    DLManagedTensorVersioned p;
    fill_foreign(&p);
    p.deleter = nested_deleter;
    nested_deleted = 0;
    nested_status = 99;
    nested_outer = NULL;
    CHECK(dlport_convert(&p, 1, 1, &nested_outer) == DLPORT_OK, "convert");
    exports++;
    CHECK(dlport_release(nested_outer, 1) == DLPORT_OK, "outer release");
    CHECK(nested_deleted == 1, "the producer's deleter ran once (%d)", nested_deleted);
    if (!nested_direct) {
      CHECK(nested_status == DLPORT_INVALID_ARGUMENT, "nested dlport_release refused (status %d)", nested_status);
      CHECK(strstr(nested_message, "already released") != NULL, "nested message: %s", nested_message);
    } else {
      CHECK(strstr(nested_message, "already released") != NULL, "nested deleter call reported: %s", nested_message);
    }
  }

  dlport_export_counts(&exported1, &released1);
  CHECK(exported1 - exported0 == (uint64_t)exports, "exported %llu, expected %d",
        (unsigned long long)(exported1 - exported0), exports);
  CHECK(released1 - released0 == (uint64_t)exports, "released %llu, expected %d",
        (unsigned long long)(released1 - released0), exports);

  printf("release identity: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
