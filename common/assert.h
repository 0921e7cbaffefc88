// Always-on assertions. Unlike <cassert>, these stay in release builds: an invariant that does not hold means the
// process state is unknown, and continuing could corrupt replicated data. Use them in pairs where it helps (check a
// value before writing it, check it again after reading it back).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace mayfly::detail {
[[noreturn]] void assert_failed(const char* file, int line, const char* expression, const char* format, ...)
    __attribute__((format(printf, 4, 5)));
}  // namespace mayfly::detail

#define MAYFLY_ASSERT(cond)                                                     \
  do {                                                                          \
    if (__builtin_expect(!(cond), 0)) {                                         \
      ::mayfly::detail::assert_failed(__FILE__, __LINE__, #cond, "%s", "");     \
    }                                                                           \
  } while (false)

#define MAYFLY_ASSERT_MSG(cond, ...)                                            \
  do {                                                                          \
    if (__builtin_expect(!(cond), 0)) {                                         \
      ::mayfly::detail::assert_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);  \
    }                                                                           \
  } while (false)

#define MAYFLY_UNREACHABLE(...) ::mayfly::detail::assert_failed(__FILE__, __LINE__, "unreachable", __VA_ARGS__)
