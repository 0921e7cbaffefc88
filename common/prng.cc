#include "common/prng.h"

namespace mayfly {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Prng::Prng(uint64_t seed) : seed_(seed) {
  uint64_t x = seed;
  for (uint64_t& word : state_) word = splitmix64(x);
}

uint64_t Prng::next_u64() {
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

uint64_t Prng::uniform(uint64_t bound) {
  MAYFLY_ASSERT(bound > 0);
  // Lemire's rejection method would be faster; plain rejection on the top range is simple and unbiased.
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % bound;
}

int64_t Prng::range(int64_t low, int64_t high) {
  MAYFLY_ASSERT(low <= high);
  const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  if (span == UINT64_MAX) return static_cast<int64_t>(next_u64());
  return static_cast<int64_t>(static_cast<uint64_t>(low) + uniform(span + 1));
}

}  // namespace mayfly
