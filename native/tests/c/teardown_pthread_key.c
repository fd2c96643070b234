/* dlport entries called from a pthread-key destructor of a worker thread that used dlport:
 * glibc runs the thread's TLS destructors before the key destructors. Exit status 0 and
 * "teardown ok" expected. */
#include <pthread.h>

#include "teardown_common.h"

static pthread_key_t key;
static volatile int destructor_ran = 0;

static void key_destructor(void* value) {
  (void)value;
  teardown_checks("pthread-key destructor");
  destructor_ran = 1;
}

static void* worker(void* arg) {
  (void)arg;
  pthread_setspecific(key, &key);
  use_dlport_on_this_thread();
  return NULL;
}

int main(void) {
  if (pthread_key_create(&key, key_destructor) != 0) return 2;
  pthread_t th;
  if (pthread_create(&th, NULL, worker, NULL) != 0) return 2;
  if (pthread_join(th, NULL) != 0) return 2;
  if (!destructor_ran) {
    printf("FAILED: the key destructor did not run\n");
    return 1;
  }
  /* The main thread can still use dlport afterwards. */
  char* json = NULL;
  if (dlport_describe(NULL, 1, &json) != 1 || dlport_last_error() == NULL) {
    printf("FAILED: main thread after the worker's teardown\n");
    return 1;
  }
  printf("main: the worker's key destructor ran and passed\n");
  return 0;
}
