// dlport entries called from the destructor of a C++ static object (registered with
// __cxa_atexit), after main has used dlport and returned. Exit status 0 and "teardown ok".
#include <cstdio>

#include "teardown_common.h"

namespace {
struct AtShutdown {
  AtShutdown() = default;
  AtShutdown(const AtShutdown&) = delete;
  AtShutdown& operator=(const AtShutdown&) = delete;
  ~AtShutdown() { teardown_checks("C++ static destructor"); }
};
AtShutdown at_shutdown;
}  // namespace

int main() {
  use_dlport_on_this_thread();
  std::printf("main: returning, the static destructor runs next\n");
  return 0;
}
