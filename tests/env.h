// Test knobs from the environment (seeds, iteration counts, long modes), shared by the randomized and fuzz tests.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace mayfly::testing_env {

// The unsigned number in $name (decimal, or 0x... hex), or `fallback` when it is unset or empty.
inline uint64_t env_or(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::strtoull(value, nullptr, 0);
}

}  // namespace mayfly::testing_env
