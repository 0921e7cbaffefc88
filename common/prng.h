// Prng: a small, seeded, platform-independent pseudo-random generator (xoshiro256**, seeded by splitmix64).
// Every random choice in Mayfly (election timeouts, simulator faults, property tests) comes from one of these, built
// from a seed that is printed, so any run can be replayed. The std:: distributions are deliberately not used: their
// output differs between standard libraries, which would make seeds non-portable.
// Not thread-safe: one Prng per owner.
#pragma once

#include <cstdint>

#include "common/assert.h"

namespace mayfly {

class Prng {
 public:
  explicit Prng(uint64_t seed);

  uint64_t seed() const { return seed_; }
  uint64_t next_u64();
  // Uniform in [0, bound), bound > 0, without modulo bias.
  uint64_t uniform(uint64_t bound);
  // Uniform in [low, high], low <= high.
  int64_t range(int64_t low, int64_t high);
  // True with probability numerator/denominator.
  bool chance(uint64_t numerator, uint64_t denominator) { return uniform(denominator) < numerator; }
  // A new generator whose stream is independent of this one (for handing to a sub-component).
  Prng fork() { return Prng(next_u64()); }

 private:
  uint64_t seed_;
  uint64_t state_[4];
};

}  // namespace mayfly
