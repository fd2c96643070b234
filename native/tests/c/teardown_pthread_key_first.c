/* dlport's first use on a worker thread comes from one of its pthread-key destructors, after
 * glibc ran the thread's TLS destructors: whatever dlport keeps per thread (its spare blocks)
 * must still be given back (valgrind and LeakSanitizer see any block lost). Exit status 0 and
 * "teardown ok" expected. */
#include <pthread.h>

#include "teardown_common.h"

static pthread_key_t key;
static volatile int destructor_ran = 0;

static void key_destructor(void* value) {
  (void)value;
  teardown_checks("first use in a pthread-key destructor");
  destructor_ran = 1;
}

static void* worker(void* arg) {
  (void)arg;
  pthread_setspecific(key, &key); /* no dlport call on this thread before its teardown */
  return NULL;
}

int main(void) {
  (void)use_dlport_on_this_thread; /* shared helper, not used here */
  if (pthread_key_create(&key, key_destructor) != 0) return 2;
  pthread_t th;
  if (pthread_create(&th, NULL, worker, NULL) != 0) return 2;
  if (pthread_join(th, NULL) != 0) return 2;
  if (!destructor_ran) {
    printf("FAILED: the key destructor did not run\n");
    return 1;
  }
  printf("main: the worker's key destructor ran and passed\n");
  return 0;
}
