/*
 * bad_plugin.c: plugins that are wrong on purpose, one per -D flag, for test_bad_plugins.c:
 *   BAD_MISSING_INIT   no dlport_plugin_init symbol
 *   BAD_WRONG_VERSION  interface_version 99
 *   BAD_WRONG_SIZE     struct_size 8
 *   BAD_INIT_FAILS     dlport_plugin_init returns 5
 *   BAD_FAILING        a working view, but copy_to_host fails (status -3, with a message)
 *   BAD_NULL_VIEW      view_create returns 0 (success) with a NULL view
 *   BAD_LEAKY          works, but view_create leaks 4096 bytes per view: the planted leak that
 *                      scripts/plugin-test.sh requires LeakSanitizer to report with
 *                      scripts/lsan.supp in force
 * The "device" (kDLExtDev) is host memory. bad_plugin_counts() says what dlport called.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlport.h"

static int views, views_destroyed, destroyed;

int bad_plugin_counts(int *views_out, int *views_destroyed_out, int *destroyed_out) {
  *views_out = views;
  *views_destroyed_out = views_destroyed;
  *destroyed_out = destroyed;
  return 0;
}

static const char *last_error(void *state) {
  (void)state;
  return "simulated failure of the bad plugin";
}

static int view_create(void *state, const DLTensor *t, void **view_out) {
  (void)state;
  ++views;
#ifdef BAD_NULL_VIEW
  (void)t;
  *view_out = NULL;
#else
  *view_out = t->data;
#endif
#ifdef BAD_LEAKY
  /* Allocated here and forgotten: no pointer to it survives the call. */
  char *lost = malloc(4096);
  if (lost != NULL) memset(lost, 0x5a, 4096);
  lost = NULL;
#endif
  return 0;
}

static void view_destroy(void *state, void *view) {
  (void)state;
  (void)view;
  ++views_destroyed;
}

static int copy_to_host(void *state, const DLTensor *src, void *dst, size_t bytes, void *stream) {
  (void)state;
  (void)stream;
#ifdef BAD_FAILING
  (void)src;
  (void)dst;
  (void)bytes;
  return -3;
#else
  memcpy(dst, (const char *)src->data + src->byte_offset, bytes);
  return 0;
#endif
}

static void destroy(void *state) {
  (void)state;
  ++destroyed;
}

static const int32_t kTypes[] = {kDLExtDev};

/* The missing-init plugin exports the same function under another name. */
#ifdef BAD_MISSING_INIT
#define INIT not_the_init_symbol
#else
#define INIT dlport_plugin_init
#endif

int INIT(uint32_t version, DlportPlugin *out, size_t size);
int INIT(uint32_t version, DlportPlugin *out, size_t size) {
  (void)version;
  (void)size;
#ifdef BAD_INIT_FAILS
  out->last_error = last_error;
  return 5;
#endif
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->interface_version = DLPORT_PLUGIN_INTERFACE_VERSION;
#ifdef BAD_WRONG_VERSION
  out->interface_version = 99;
#endif
#ifdef BAD_WRONG_SIZE
  out->struct_size = 8;
#endif
  out->name = PLUGIN_NAME;
  out->device_types = kTypes;
  out->num_device_types = 1;
  out->last_error = last_error;
  out->view_create = view_create;
  out->view_destroy = view_destroy;
  out->copy_to_host = copy_to_host;
  out->destroy = destroy;
  return 0;
}
