// Test knobs from the environment (seeds, iteration counts, long modes), shared by the randomized and fuzz tests;
// and the time scale of timed tests in a sanitized build.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace mayfly::testing_env {

// The unsigned number in $name (decimal, or 0x... hex), or `fallback` when it is unset or empty.
inline uint64_t env_or(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::strtoull(value, nullptr, 0);
}

// Whether this build runs under AddressSanitizer (make sanitize: Debug, -fsanitize=address,undefined). GCC defines
// __SANITIZE_ADDRESS__; clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// How many times longer the waits and timing bounds of timed tests are in this build: $MAYFLY_TEST_TIME_SCALE if
// set, else 4 in a sanitized build (an unoptimised build with ASan's checks runs mayflyd 2-10x slower, and its
// processes start slower), else 1 — the normal build's bounds are exactly as written. The one place that knows.
inline int64_t time_scale() {
  static const int64_t scale = [] {
    const uint64_t given = env_or("MAYFLY_TEST_TIME_SCALE", kSanitized ? 4 : 1);
    return given == 0 ? int64_t{1} : static_cast<int64_t>(given);
  }();
  return scale;
}

// A wait or bound of a timed test, scaled for this build (see time_scale).
template <typename Rep, typename Period>
std::chrono::duration<Rep, Period> scaled(std::chrono::duration<Rep, Period> duration) {
  return duration * time_scale();
}
inline double scaled(double value) { return value * static_cast<double>(time_scale()); }
inline int64_t scaled(int64_t value) { return value * time_scale(); }

// A size of a heavy test: `normal`, or `sanitized` in a sanitized build (each test prints what it used and the
// knob that overrides it).
inline uint64_t size_for_build(uint64_t normal, uint64_t sanitized) { return kSanitized ? sanitized : normal; }

}  // namespace mayfly::testing_env
