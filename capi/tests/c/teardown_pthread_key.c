/* dlport entries called from a pthread-key destructor of a worker thread, after glibc ran the
 * thread's TLS destructors: on a worker that used dlport before, and on one whose first use of
 * dlport comes from the key destructor (what dlport keeps per thread must still be given back:
 * valgrind and LeakSanitizer see any block lost). Exit status 0 and a "teardown ok" line from
 * each expected. */
#include <pthread.h>

#include "teardown_common.h"

static pthread_key_t key;
static int used_before, first_use; /* each worker's key value: which of the two it is */
static volatile int destructors_ran = 0;

static void key_destructor(void* value) {
  teardown_checks(value == &used_before ? "pthread-key destructor"
                                        : "first use in a pthread-key destructor");
  destructors_ran++;
}

static void* worker(void* which) {
  pthread_setspecific(key, which);
  if (which == &used_before) use_dlport_on_this_thread();
  return NULL;
}

int main(void) {
  if (pthread_key_create(&key, key_destructor) != 0) return 2;
  void* workers[2] = {&used_before, &first_use};
  for (int i = 0; i < 2; i++) {
    pthread_t th;
    if (pthread_create(&th, NULL, worker, workers[i]) != 0) return 2;
    if (pthread_join(th, NULL) != 0) return 2;
  }
  if (destructors_ran != 2) {
    printf("FAILED: %d of the 2 key destructors ran\n", destructors_ran);
    return 1;
  }
  /* The main thread can still use dlport afterwards. */
  char* json = NULL;
  if (dlport_describe(NULL, 1, &json) != 1 || dlport_last_error() == NULL) {
    printf("FAILED: main thread after the workers' teardown\n");
    return 1;
  }
  printf("main: both workers' key destructors ran and passed\n");
  return 0;
}
