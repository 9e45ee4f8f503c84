// Assertion failure reporting for SNIP_ASSERT.
#include "snip/error.h"

#include <cstdio>
#include <cstdlib>

namespace snip {

void assert_fail(const char* condition, const char* file, int line, const char* message) {
  std::fprintf(stderr, "internal error: assertion `%s` failed at %s:%d%s%s\n", condition, file, line,
               message ? ": " : "", message ? message : "");
  std::abort();
}

}  // namespace snip
