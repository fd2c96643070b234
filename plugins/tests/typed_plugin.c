/*
 * typed_plugin.c: the smallest plugin, serving the one device type PLUGIN_TYPE under the name
 * PLUGIN_NAME (both -D flags), for the tests of which device types a plugin may take
 * (python/tests/test_plugin_guarantees.py builds one per type). It has no callbacks but
 * last_error and destroy: registration is all it is for.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dlport.h"

static const int32_t kTypes[] = {PLUGIN_TYPE};

static const char *last_error(void *state) {
  (void)state;
  return "";
}

static void destroy(void *state) { (void)state; }

int dlport_plugin_init(uint32_t version, DlportPlugin *out, size_t size);
int dlport_plugin_init(uint32_t version, DlportPlugin *out, size_t size) {
  (void)version;
  (void)size;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->interface_version = DLPORT_PLUGIN_INTERFACE_VERSION;
  out->name = PLUGIN_NAME;
  out->device_types = kTypes;
  out->num_device_types = 1;
  out->last_error = last_error;
  out->destroy = destroy;
  return 0;
}
