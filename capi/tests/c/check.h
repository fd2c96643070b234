/* The C test programs' check macro: counts passed and failed checks and prints what failed,
 * with dlport_last_error(). Each program prints "N passed, N failed" from these counters. */
#ifndef DLPORT_TEST_CHECK_H_
#define DLPORT_TEST_CHECK_H_

#include <stdio.h>

#include "dlport.h"

static int passed = 0, failed = 0;

#define CHECK(cond, ...)                                                                  \
  do {                                                                                    \
    if (cond) {                                                                           \
      passed++;                                                                           \
    } else {                                                                              \
      failed++;                                                                           \
      printf("FAILED %s:%d: ", __FILE__, __LINE__);                                       \
      printf(__VA_ARGS__);                                                                \
      printf(" (last error: %s)\n", dlport_last_error() ? dlport_last_error() : "none"); \
    }                                                                                     \
  } while (0)

#endif /* DLPORT_TEST_CHECK_H_ */
