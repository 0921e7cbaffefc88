#include "common/assert.h"

#include <cstdarg>

namespace mayfly::detail {

void assert_failed(const char* file, int line, const char* expression, const char* format, ...) {
  std::fprintf(stderr, "mayfly: assertion failed at %s:%d: %s", file, line, expression);
  va_list args;
  va_start(args, format);
  char message[1024];
  std::vsnprintf(message, sizeof message, format, args);
  va_end(args);
  if (message[0] != '\0') std::fprintf(stderr, ": %s", message);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

}  // namespace mayfly::detail
