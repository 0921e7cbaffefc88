// The pure pieces of the cluster benchmark (bench/bench_support.h): the median, spread and ratio its A/B tables print,
// and the parsing of a change feed page it reads from the network (a page that is not one must be an error, never
// zero changes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/bench_support.h"

namespace mayfly::bench {
namespace {

TEST(BenchStats, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({7}), 7);
  EXPECT_EQ(median({9, 1, 5}), 5);
  // Two runs per setting: the mean of both, not the better one.
  EXPECT_EQ(median({6000, 9000}), 7500);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(BenchStats, SpreadIsMedianMinMax) {
  const Spread none = spread({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_EQ(format_spread(none), "—");
  const Spread one = spread({8366.4});
  EXPECT_EQ(one.count, 1u);
  EXPECT_EQ(format_spread(one), "8366");
  const Spread three = spread({9443, 6437, 8366});
  EXPECT_EQ(three.median, 8366);
  EXPECT_EQ(three.min, 6437);
  EXPECT_EQ(three.max, 9443);
  EXPECT_EQ(format_spread(three), "8366 (6437–9443)");
  EXPECT_EQ(format_spread(spread({1.25, 2.5}), 2), "1.88 (1.25–2.50)");
}

TEST(BenchStats, RatioNeedsAPositiveDenominator) {
  ASSERT_TRUE(ratio(7500, 10000).has_value());
  EXPECT_DOUBLE_EQ(*ratio(7500, 10000), 0.75);
  EXPECT_FALSE(ratio(7500, 0).has_value());
  EXPECT_FALSE(ratio(7500, -1).has_value());
}

TEST(BenchFeedPage, ParsesCountContinuationAndEnd) {
  std::string error;
  auto page = parse_feed_page(
      R"({"changes":[{"operationType":"create","id":"a"},{"operationType":"delete","id":"b"}],)"
      R"("continuation":"0100ab","caughtUp":false})",
      error);
  ASSERT_TRUE(page.has_value()) << error;
  EXPECT_EQ(page->changes, 2u);
  EXPECT_EQ(page->continuation, "0100ab");
  EXPECT_FALSE(page->caught_up);

  page = parse_feed_page(R"({"changes":[],"continuation":"","caughtUp":true})", error);
  ASSERT_TRUE(page.has_value()) << error;
  EXPECT_EQ(page->changes, 0u);
  EXPECT_TRUE(page->caught_up);
}

TEST(BenchFeedPage, RefusesWhatIsNotAPage) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not JSON"},
      {"{\"changes\":[", "not JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"continuation":"01","caughtUp":false})", "no \"changes\" array"},
      {R"({"changes":{},"continuation":"01","caughtUp":false})", "no \"changes\" array"},
      {R"({"changes":[],"caughtUp":false})", "no string \"continuation\""},
      {R"({"changes":[],"continuation":7,"caughtUp":false})", "no string \"continuation\""},
      {R"({"changes":[],"continuation":"01"})", "no bool \"caughtUp\""},
      {R"({"changes":[],"continuation":"01","caughtUp":"yes"})", "no bool \"caughtUp\""},
      {R"({"changes":[],"continuation":"","caughtUp":false})", "an empty continuation"},
  };
  for (const auto& [body, why] : cases) {
    std::string error;
    EXPECT_FALSE(parse_feed_page(body, error).has_value()) << body;
    EXPECT_NE(error.find(why), std::string::npos) << body << " -> " << error;
  }
}

}  // namespace
}  // namespace mayfly::bench
