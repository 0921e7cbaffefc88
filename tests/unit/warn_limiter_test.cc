// WarnLimiter: one line per key per interval, held-back lines counted, and a bounded number of keys however many a
// sender makes up.
#include "node/warn_limiter.h"

#include <gtest/gtest.h>

#include <string>

namespace mayfly::node {
namespace {

TEST(WarnLimiter, OneLinePerKeyPerIntervalWithTheHeldBackCount) {
  WarnLimiter limiter(1000);
  EXPECT_EQ(limiter.admit("2/bad_entries", 0), 0u);
  EXPECT_FALSE(limiter.admit("2/bad_entries", 10).has_value());
  EXPECT_FALSE(limiter.admit("2/bad_entries", 999).has_value());
  EXPECT_EQ(limiter.admit("3/bad_entries", 999), 0u) << "another key has its own interval";
  EXPECT_EQ(limiter.admit("2/bad_entries", 1000), 2u) << "two lines were held back";
  EXPECT_FALSE(limiter.admit("2/bad_entries", 1500).has_value());
}

TEST(WarnLimiter, MadeUpKeysShareOneSlotPastTheBound) {
  WarnLimiter limiter(1000);
  int logged = 0;
  for (int i = 0; i < 100'000; ++i) {
    if (limiter.admit("sender-" + std::to_string(i), 0).has_value()) ++logged;
  }
  EXPECT_LE(logged, 1025) << "past 1024 keys, new ones share one limiter slot";
  EXPECT_TRUE(limiter.admit("sender-5", 1000).has_value()) << "known keys keep their own slot";
}

}  // namespace
}  // namespace mayfly::node
