/* dlport entries called from an atexit handler, after main has used dlport and returned: the
 * main thread's TLS destructors have already run. Exit status 0 and "teardown ok" expected. */
#include <stdlib.h>

#include "teardown_common.h"

static void at_exit(void) { teardown_checks("atexit handler"); }

int main(void) {
  if (atexit(at_exit) != 0) return 2;
  use_dlport_on_this_thread();
  printf("main: returning, the atexit handler runs next\n");
  return 0;
}
