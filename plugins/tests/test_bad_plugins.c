/*
 * test_bad_plugins.c: plugins that are wrong (bad_plugin.c) give errors naming the plugin and
 * the callback or symbol, and dlport neither crashes nor leaks nor releases anything twice.
 * Built and run with ASan and UBSan by scripts/plugin-test.sh.
 *   test_bad_plugins DIR   (DIR holds libbad_*.so)
 * Prints "bad plugins: N passed, 0 failed".
 *   test_bad_plugins DIR leaky
 * Plants two leaks on purpose and exits 0; LeakSanitizer must report both at exit (the test of
 * scripts/lsan.supp): libbad_leaky.so's view_create leaks a block, and a tensor that
 * dlport_alloc made is never freed (an allocation in libdlport's own code).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlport.h"

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

/* The last error contains every one of the NULL-terminated strings. */
static int says(const char *first, ...) {
  const char *e = dlport_last_error();
  if (e == NULL) return 0;
  __builtin_va_list ap;
  __builtin_va_start(ap, first);
  int ok = 1;
  for (const char *s = first; s != NULL; s = __builtin_va_arg(ap, const char *))
    if (strstr(e, s) == NULL) ok = 0;
  __builtin_va_end(ap);
  if (ok) printf("  error: %s\n", e);
  return ok;
}

static int released;
static void on_release(void *ctx) {
  (void)ctx;
  ++released;
}

/* A host buffer labelled kDLExtDev, wrapped with a counted release. */
static void *ext_tensor(float *data) {
  int64_t shape[1] = {4};
  void *m = NULL;
  if (dlport_wrap(data, kDLExtDev, 0, kDLFloat, 32, 1, 1, shape, NULL, 0, 0, 1, on_release, NULL,
                  &m) != DLPORT_OK)
    return NULL;
  return m;
}

/* The planted leaks (see the header): returns 0 when both were made. */
static int plant_leaks(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/libbad_leaky.so", dir);
  if (dlport_load_plugin(path, NULL) != DLPORT_OK) return 1;
  static float data[4] = {1, 2, 3, 4};
  DlportTensor *t = NULL;
  if (dlport_import(ext_tensor(data), 1, NULL, &t) != DLPORT_OK) return 1;
  dlport_tensor_free(t); /* the plugin's view is destroyed; its 4096 bytes stay lost */
  int64_t shape[1] = {1024};
  DlportTensor *lost = NULL;
  if (dlport_alloc(NULL, kDLCPU, 0, kDLFloat, 32, 1, shape, 1, &lost) != DLPORT_OK) return 1;
  lost = NULL; /* never dlport_tensor_free'd */
  printf("planted leaks: made\n");
  fflush(stdout); /* LeakSanitizer ends the process at exit before stdio flushes */
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[2], "leaky") == 0) return plant_leaks(argv[1]);
  if (argc != 2) return 2;
  char path[4096];
#define PATH(name) (snprintf(path, sizeof path, "%s/libbad_%s.so", argv[1], name), path)

  check(dlport_load_plugin(PATH("missing_init"), NULL) != DLPORT_OK &&
            says("libbad_missing_init.so", "has no symbol dlport_plugin_init", NULL),
        "a missing init symbol names the path and the symbol");
  check(dlport_load_plugin(PATH("wrong_version"), NULL) == DLPORT_ERR_BACKEND &&
            says("\"bad_wrong_version\"", "interface_version = 99", "libbad_wrong_version.so",
                 NULL),
        "a wrong interface version names the plugin and the field");
  check(dlport_load_plugin(PATH("wrong_size"), NULL) == DLPORT_ERR_BACKEND &&
            says("struct_size = 8", "libbad_wrong_size.so", NULL),
        "a wrong struct size names the path and the field");
  check(dlport_load_plugin(PATH("init_fails"), NULL) == DLPORT_ERR_BACKEND &&
            says("dlport_plugin_init", "code 5", "simulated failure", "libbad_init_fails.so", NULL),
        "a failing init names the path, the symbol, its status and its message");
  check(dlport_load_plugin("/nonexistent/libbad.so", NULL) != DLPORT_OK &&
            says("/nonexistent/libbad.so", "dlopen", NULL),
        "a missing library names its path");

  /* A callback that fails. */
  float data[4] = {1, 2, 3, 4};
  char *name = NULL;
  check(dlport_load_plugin(PATH("failing"), &name) == DLPORT_OK && name &&
            strcmp(name, "bad_failing") == 0,
        "the failing plugin loads");
  dlport_string_free(name);
  int (*counts)(int *, int *, int *) =
      (int (*)(int *, int *, int *))dlsym(dlopen(path, RTLD_NOW | RTLD_NOLOAD), "bad_plugin_counts");
  check(counts != NULL, "the plugin's counters");
  DlportTensor *t = NULL;
  check(dlport_import(ext_tensor(data), 1, NULL, &t) == DLPORT_OK, "import a view on it");
  void *out = NULL;
  int versioned = 0;
  check(dlport_export(t, 1, 3, kDLCPU, 0, DLPORT_COPY_IF_NEEDED, &out, &versioned) ==
                DLPORT_ERR_BACKEND &&
            says("\"bad_failing\"", "copy_to_host", "code -3", "simulated failure", NULL),
        "a failing copy names the plugin, the callback, its code and its message");
  check(out == NULL, "nothing was handed out");
  dlport_tensor_free(t);
  int v = 0, vd = 0, d = 0;
  if (counts) counts(&v, &vd, &d);
  check(released == 1 && v == 1 && vd == 1, "the view and the producer's tensor released once");
  check(dlport_unregister_backend("bad_failing") == DLPORT_OK, "unregister it");
  if (counts) counts(&v, &vd, &d);
  check(d == 1, "destroyed once");

  /* A callback that lies: a NULL view. */
  check(dlport_load_plugin(PATH("null_view"), NULL) == DLPORT_OK, "the NULL-view plugin loads");
  counts = (int (*)(int *, int *, int *))dlsym(dlopen(path, RTLD_NOW | RTLD_NOLOAD),
                                                "bad_plugin_counts");
  t = NULL;
  check(dlport_import(ext_tensor(data), 1, NULL, &t) == DLPORT_ERR_BACKEND &&
            says("\"bad_null_view\"", "view_create", "NULL view", NULL),
        "a NULL view names the plugin and the callback");
  check(t == NULL, "no tensor");
  if (counts) counts(&v, &vd, &d);
  check(released == 2 && vd == 0, "the producer's tensor released once; no NULL view destroyed");
  check(dlport_unregister_backend("bad_null_view") == DLPORT_OK, "unregister it");

  printf("bad plugins: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
