// Tests for the TTL contract (docs/ttl.md) as implemented by the pure module ttl/ttl.h:
//  §2 validation (from real JSON text, through json::parse and json::ttl_literal), the indexing rule,
//  §3 the effective-TTL matrix and the whole-second expiry instant,
//  §4/§6 "once expired, always expired" across defaultTtl changes (ContainerTtlState, change_policy, alive),
//  expired_bounds (consistent with alive, monotone),
//  and a property test of alive() against a deliberately naive model that keeps the whole history.
//
// Property test knobs (environment): MAYFLY_TTL_PROPERTY_SEQUENCES (default 10000) raises the number of random
// sequences for a long run; MAYFLY_TTL_PROPERTY_SEED replays from a given base seed (the failing sequence's seed is
// printed, and running with that seed and MAYFLY_TTL_PROPERTY_SEQUENCES=1 replays exactly that sequence).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/prng.h"
#include "common/status.h"
#include "storage/json.h"
#include "tests/env.h"
#include "ttl/ttl.h"

namespace mayfly::ttl {
namespace {

constexpr int64_t kSec = kMicrosPerSecond;

// ---------------------------------------------------------------------------------------------------------------
// Helpers for §2: validate the `ttl` / `defaultTtl` member of a real JSON document.

// The contract's item message (docs/ttl.md §2), written out here independently of invalid_item_ttl_message.
std::string spec_item_message(const std::string& value_text) {
  return "The input ttl '" + value_text +
         "' is invalid. Ensure to provide a nonzero positive integer less than or equal to '2147483647', or '-1' "
         "which means never expire.";
}

// Parses `document` (a JSON object) and returns the TtlLiteral of its member `member` (absent when missing).
TtlLiteral literal_of_member(const std::string& document, const char* member) {
  Result<boost::json::value> parsed = json::parse(document);
  EXPECT_TRUE(parsed.is_ok()) << document << ": " << parsed.status().to_string();
  if (!parsed.is_ok()) return TtlLiteral::absent();
  const boost::json::object& object = parsed->as_object();
  return json::ttl_literal(object.if_contains(member));
}

Result<ItemTtl> validate_item_json(const std::string& ttl_json) {
  return validate_item_ttl(literal_of_member(R"({"id":"a","pk":"p","ttl":)" + ttl_json + "}", "ttl"));
}

Result<DefaultTtl> validate_default_json(const std::string& ttl_json) {
  return validate_default_ttl(literal_of_member(R"({"id":"c","defaultTtl":)" + ttl_json + "}", "defaultTtl"));
}

// A JSON value the contract rejects, and how it must read in the item error message.
struct InvalidValue {
  std::string json;
  std::string message_text;
};

const std::vector<InvalidValue>& invalid_values() {
  static const std::vector<InvalidValue> values = {
      {"null", "null"},
      {"0", "0"},
      {"-0", "0"},
      {"-2", "-2"},
      {"-3", "-3"},
      {"-2147483647", "-2147483647"},
      {"-2147483648", "-2147483648"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"2147483648", "2147483648"},
      {"4294967295", "4294967295"},
      {"4294967297", "4294967297"},  // 2^32 + 1: would read as 1 if truncated to 32 bits
      {"9223372036854775807", "9223372036854775807"},
      {"9223372036854775808", "9223372036854775808"},    // > INT64_MAX: uint64 in Boost.JSON
      {"18446744073709551615", "18446744073709551615"},  // UINT64_MAX
      // > UINT64_MAX: Boost.JSON can only hold it as a double, which reads back as the writer prints doubles.
      {"18446744073709551616", "18446744073709551616.0"},
      {"18446744073709551617", "18446744073709551616.0"},
      {"-9223372036854775809", "-9223372036854775808.0"},
      {"1.5", "1.5"},
      {"-1.5", "-1.5"},
      {"0.5", "0.5"},
      {"1.0", "1.0"},
      {"-1.0", "-1.0"},
      {"5.0", "5.0"},
      {"1e3", "1000.0"},  // an exponent makes it a JSON float, even when integral
      {"1E0", "1.0"},
      {R"("5")", "5"},
      {R"("-1")", "-1"},
      {R"("")", ""},
      {R"("abc")", "abc"},
      {"true", "true"},
      {"false", "false"},
      {"{}", "{}"},
      {R"({"a":1})", R"({"a":1})"},
      {"[]", "[]"},
      {"[1]", "[1]"},
      {"[-1]", "[-1]"},
  };
  return values;
}

// ---------------------------------------------------------------------------------------------------------------
// §2 item `ttl`

TEST(TtlValidation, ItemTtlAbsentInheritsTheContainerDefault) {
  Result<ItemTtl> result = validate_item_ttl(literal_of_member(R"({"id":"a","pk":"p"})", "ttl"));
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(*result, ItemTtl::inherit());
  Result<ItemTtl> direct = validate_item_ttl(TtlLiteral::absent());
  ASSERT_TRUE(direct.is_ok());
  EXPECT_EQ(*direct, ItemTtl::inherit());
}

TEST(TtlValidation, ItemTtlMinusOneNeverExpires) {
  Result<ItemTtl> result = validate_item_json("-1");
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(*result, ItemTtl::never());
  EXPECT_EQ(result->json_value(), -1);  // stored and returned exactly as written
}

TEST(TtlValidation, ItemTtlPositiveIntegersFromOneToInt32MaxAreSeconds) {
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{60}, int64_t{86400}, int64_t{2147483646}, int64_t{2147483647}}) {
    SCOPED_TRACE(n);
    Result<ItemTtl> result = validate_item_json(std::to_string(n));
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    EXPECT_EQ(*result, ItemTtl::of_seconds(n));
    EXPECT_EQ(result->json_value(), n);
  }
  EXPECT_EQ(kMaxTtlSeconds, 2147483647);
}

TEST(TtlValidation, ItemTtlInvalidValuesAre400WithTheSpecMessageAndValue) {
  for (const InvalidValue& value : invalid_values()) {
    SCOPED_TRACE("ttl: " + value.json);
    Result<ItemTtl> result = validate_item_json(value.json);
    ASSERT_FALSE(result.is_ok()) << "accepted as kind " << static_cast<int>(result->kind) << " seconds "
                                 << result->seconds;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(result.status().message(), spec_item_message(value.message_text));
  }
}

TEST(TtlValidation, ItemTtlSpecExamplesReadExactly) {
  // The brief's examples, spelled out in full.
  Result<ItemTtl> fractional = validate_item_json("1.5");
  ASSERT_FALSE(fractional.is_ok());
  EXPECT_EQ(fractional.status().message(),
            "The input ttl '1.5' is invalid. Ensure to provide a nonzero positive integer less than or equal to "
            "'2147483647', or '-1' which means never expire.");
  Result<ItemTtl> string = validate_item_json(R"("5")");
  ASSERT_FALSE(string.is_ok());
  EXPECT_EQ(string.status().message(),
            "The input ttl '5' is invalid. Ensure to provide a nonzero positive integer less than or equal to "
            "'2147483647', or '-1' which means never expire.");
  Result<ItemTtl> null = validate_item_json("null");
  ASSERT_FALSE(null.is_ok());
  EXPECT_EQ(null.status().message(),
            "The input ttl 'null' is invalid. Ensure to provide a nonzero positive integer less than or equal to "
            "'2147483647', or '-1' which means never expire.");
  EXPECT_EQ(invalid_item_ttl_message("x"), spec_item_message("x"));
}

TEST(TtlValidation, ItemTtlHugeIntegerIsRejectedWhateverItsLowBitsSay) {
  // An integer that does not fit in int64 must be rejected even if `integer` happens to hold a valid value.
  for (int64_t low : {int64_t{-1}, int64_t{1}, int64_t{5}}) {
    TtlLiteral literal;
    literal.kind = TtlLiteral::Kind::kInteger;
    literal.integer = low;
    literal.integer_fits = false;
    literal.text = "99999999999999999999";
    Result<ItemTtl> result = validate_item_ttl(literal);
    ASSERT_FALSE(result.is_ok());
    EXPECT_EQ(result.status().message(), spec_item_message("99999999999999999999"));
  }
  for (int64_t extreme : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                          int64_t{-2}, int64_t{0}, kMaxTtlSeconds + 1}) {
    Result<ItemTtl> result = validate_item_ttl(TtlLiteral::of_integer(extreme));
    ASSERT_FALSE(result.is_ok()) << extreme;
    EXPECT_EQ(result.status().message(), spec_item_message(std::to_string(extreme)));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// §2 container `defaultTtl`

TEST(TtlValidation, DefaultTtlAbsentTurnsTtlOff) {
  Result<DefaultTtl> result = validate_default_ttl(literal_of_member(R"({"id":"c"})", "defaultTtl"));
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(*result, DefaultTtl::off());
  EXPECT_FALSE(result->is_on());
}

TEST(TtlValidation, DefaultTtlMinusOneIsOnWithoutDefaultExpiry) {
  Result<DefaultTtl> result = validate_default_json("-1");
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(*result, DefaultTtl::no_default());
  EXPECT_TRUE(result->is_on());
}

TEST(TtlValidation, DefaultTtlPositiveIntegersFromOneToInt32MaxAreOnWithThatDefault) {
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3600}, int64_t{2147483646}, int64_t{2147483647}}) {
    SCOPED_TRACE(n);
    Result<DefaultTtl> result = validate_default_json(std::to_string(n));
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    EXPECT_EQ(*result, DefaultTtl::of_seconds(n));
    EXPECT_TRUE(result->is_on());
  }
}

TEST(TtlValidation, DefaultTtlInvalidValuesAre400NamingTheValue) {
  for (const InvalidValue& value : invalid_values()) {
    SCOPED_TRACE("defaultTtl: " + value.json);
    Result<DefaultTtl> result = validate_default_json(value.json);
    ASSERT_FALSE(result.is_ok()) << "accepted as kind " << static_cast<int>(result->kind) << " seconds "
                                 << result->seconds;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find("'" + value.message_text + "'"), std::string::npos)
        << result.status().message();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// §2 indexing rule

TEST(TtlValidation, DefaultTtlWithIndexingNoneIsRejectedWithTheExactMessage) {
  for (DefaultTtl policy : {DefaultTtl::no_default(), DefaultTtl::of_seconds(1), DefaultTtl::of_seconds(kMaxTtlSeconds)}) {
    Status status = validate_indexing(policy, IndexingMode::kNone);
    ASSERT_FALSE(status.is_ok());
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "Indexing mode value cannot be 'none' when 'defaultTtl' is specified in the collection");
    EXPECT_TRUE(validate_indexing(policy, IndexingMode::kConsistent).is_ok());
  }
}

TEST(TtlValidation, TtlOffWithIndexingNoneIsFine) {
  EXPECT_TRUE(validate_indexing(DefaultTtl::off(), IndexingMode::kNone).is_ok());
  EXPECT_TRUE(validate_indexing(DefaultTtl::off(), IndexingMode::kConsistent).is_ok());
}

// ---------------------------------------------------------------------------------------------------------------
// §3 effective TTL matrix

TEST(EffectiveTtl, ItemAbsentInContainerOffNeverExpires) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::inherit(), DefaultTtl::off()), std::nullopt);
}
TEST(EffectiveTtl, ItemAbsentInContainerMinusOneNeverExpires) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::inherit(), DefaultTtl::no_default()), std::nullopt);
}
TEST(EffectiveTtl, ItemAbsentInContainerNUsesN) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::inherit(), DefaultTtl::of_seconds(30)), std::optional<int64_t>(30));
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::inherit(), DefaultTtl::of_seconds(kMaxTtlSeconds)),
            std::optional<int64_t>(kMaxTtlSeconds));
}
TEST(EffectiveTtl, ItemMinusOneInContainerOffNeverExpires) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::never(), DefaultTtl::off()), std::nullopt);
}
TEST(EffectiveTtl, ItemMinusOneInContainerMinusOneNeverExpires) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::never(), DefaultTtl::no_default()), std::nullopt);
}
TEST(EffectiveTtl, ItemMinusOneInContainerNNeverExpires) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::never(), DefaultTtl::of_seconds(30)), std::nullopt);
}
TEST(EffectiveTtl, ItemMInContainerOffIsIgnored) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::of_seconds(7), DefaultTtl::off()), std::nullopt);
}
TEST(EffectiveTtl, ItemMInContainerMinusOneUsesM) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::of_seconds(7), DefaultTtl::no_default()), std::optional<int64_t>(7));
}
TEST(EffectiveTtl, ItemMInContainerNUsesMWhetherShorterOrLonger) {
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::of_seconds(7), DefaultTtl::of_seconds(30)), std::optional<int64_t>(7));
  EXPECT_EQ(effective_ttl_seconds(ItemTtl::of_seconds(70), DefaultTtl::of_seconds(30)), std::optional<int64_t>(70));
}

TEST(EffectiveTtl, MatrixHoldsForVisibilityToo) {
  // The same 3x3 matrix through alive(): written at 100 s, probed at 100 s + 10^9 s and just before/at the instant.
  const int64_t ts = 100 * kSec;
  const int64_t far = (100 + 1'000'000'000) * kSec;
  const ContainerTtlState off{DefaultTtl::off()};
  const ContainerTtlState minus_one{DefaultTtl::no_default()};
  const ContainerTtlState n30{DefaultTtl::of_seconds(30)};
  EXPECT_TRUE(alive(ItemTtl::inherit(), ts, off, far));
  EXPECT_TRUE(alive(ItemTtl::inherit(), ts, minus_one, far));
  EXPECT_TRUE(alive(ItemTtl::inherit(), ts, n30, 130 * kSec - 1));
  EXPECT_FALSE(alive(ItemTtl::inherit(), ts, n30, 130 * kSec));
  EXPECT_TRUE(alive(ItemTtl::never(), ts, off, far));
  EXPECT_TRUE(alive(ItemTtl::never(), ts, minus_one, far));
  EXPECT_TRUE(alive(ItemTtl::never(), ts, n30, far));
  EXPECT_TRUE(alive(ItemTtl::of_seconds(7), ts, off, far));
  EXPECT_TRUE(alive(ItemTtl::of_seconds(7), ts, minus_one, 107 * kSec - 1));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(7), ts, minus_one, 107 * kSec));
  EXPECT_TRUE(alive(ItemTtl::of_seconds(7), ts, n30, 107 * kSec - 1));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(7), ts, n30, 107 * kSec));
  EXPECT_TRUE(alive(ItemTtl::of_seconds(70), ts, n30, 170 * kSec - 1));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(70), ts, n30, 170 * kSec));
}

// ---------------------------------------------------------------------------------------------------------------
// §3 expiry instant: E = (floor(ts) + e) s, expired at T iff T >= E

TEST(ExpiryInstant, UsesTheWholeSecondTsUsersSee) {
  EXPECT_EQ(ts_seconds(10'999'999), 10);
  EXPECT_EQ(ts_seconds(11'000'000), 11);
  EXPECT_EQ(expiry_instant_micros(10'000'000, 1), 11'000'000);
  EXPECT_EQ(expiry_instant_micros(10'000'001, 1), 11'000'000);
  EXPECT_EQ(expiry_instant_micros(10'999'999, 1), 11'000'000);
  EXPECT_EQ(expiry_instant_micros(11'000'000, 1), 12'000'000);
  EXPECT_EQ(expiry_instant_micros(0, 1), 1'000'000);
  EXPECT_EQ(expiry_instant_micros(999'999, 60), 60'000'000);
}

TEST(ExpiryInstant, AliveOneMicrosecondBeforeAndExpiredExactlyAtTheInstant) {
  const int64_t ts = 10'999'999;  // _ts = 10, ttl 1: E = 11 s, one microsecond after the write
  const int64_t expiry = 11 * kSec;
  for (const ContainerTtlState& state : {ContainerTtlState{DefaultTtl::no_default()},
                                         ContainerTtlState{DefaultTtl::of_seconds(1)},
                                         ContainerTtlState{DefaultTtl::of_seconds(100)}}) {
    EXPECT_TRUE(alive(ItemTtl::of_seconds(1), ts, state, ts));
    EXPECT_TRUE(alive(ItemTtl::of_seconds(1), ts, state, expiry - 1));
    EXPECT_FALSE(alive(ItemTtl::of_seconds(1), ts, state, expiry));
    EXPECT_FALSE(alive(ItemTtl::of_seconds(1), ts, state, expiry + 1));
  }
  const ContainerTtlState inherit1{DefaultTtl::of_seconds(1)};
  EXPECT_TRUE(alive(ItemTtl::inherit(), ts, inherit1, ts));
  EXPECT_TRUE(alive(ItemTtl::inherit(), ts, inherit1, expiry - 1));
  EXPECT_FALSE(alive(ItemTtl::inherit(), ts, inherit1, expiry));
  // Written at an exact second: the full n seconds.
  EXPECT_TRUE(alive(ItemTtl::inherit(), 10 * kSec, inherit1, 11 * kSec - 1));
  EXPECT_FALSE(alive(ItemTtl::inherit(), 10 * kSec, inherit1, 11 * kSec));
}

TEST(ExpiryInstant, LargestTtlNearTodayIs64BitWithoutOverflow) {
  const int64_t ts = 1'700'000'000 * kSec + 123'456;  // Nov 2023
  const int64_t expiry = (int64_t{1'700'000'000} + kMaxTtlSeconds) * kSec;
  EXPECT_EQ(expiry, 3'847'483'647'000'000);
  EXPECT_EQ(expiry_instant_micros(ts, kMaxTtlSeconds), expiry);
  const ContainerTtlState max_default{DefaultTtl::of_seconds(kMaxTtlSeconds)};
  const ContainerTtlState minus_one{DefaultTtl::no_default()};
  EXPECT_TRUE(alive(ItemTtl::of_seconds(kMaxTtlSeconds), ts, minus_one, expiry - 1));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(kMaxTtlSeconds), ts, minus_one, expiry));
  EXPECT_TRUE(alive(ItemTtl::inherit(), ts, max_default, expiry - 1));
  EXPECT_FALSE(alive(ItemTtl::inherit(), ts, max_default, expiry));
  // Past the 32-bit epoch rollover (2038).
  const int64_t ts2038 = int64_t{2147483647} * kSec + 500'000;
  EXPECT_EQ(expiry_instant_micros(ts2038, kMaxTtlSeconds), int64_t{4294967294} * kSec);
  EXPECT_TRUE(alive(ItemTtl::inherit(), ts2038, max_default, int64_t{4294967294} * kSec - 1));
  EXPECT_FALSE(alive(ItemTtl::inherit(), ts2038, max_default, int64_t{4294967294} * kSec));
}

TEST(ExpiryInstant, LargestTtlFarInTheFutureIs64BitWithoutOverflow) {
  // 9e12 s after the epoch (~285,000 years), close to the end of int64 microseconds.
  const int64_t ts = int64_t{9'000'000'000'000} * kSec + 999'999;
  const int64_t expiry = (int64_t{9'000'000'000'000} + kMaxTtlSeconds) * kSec;
  EXPECT_EQ(expiry, 9'002'147'483'647'000'000);
  EXPECT_EQ(expiry_instant_micros(ts, kMaxTtlSeconds), expiry);
  const ContainerTtlState max_default{DefaultTtl::of_seconds(kMaxTtlSeconds)};
  const ContainerTtlState minus_one{DefaultTtl::no_default()};
  EXPECT_TRUE(alive(ItemTtl::of_seconds(kMaxTtlSeconds), ts, minus_one, expiry - 1));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(kMaxTtlSeconds), ts, minus_one, expiry));
  EXPECT_TRUE(alive(ItemTtl::inherit(), ts, max_default, expiry - 1));
  EXPECT_FALSE(alive(ItemTtl::inherit(), ts, max_default, expiry));
  const ExpiredBounds at_expiry = expired_bounds(max_default, expiry);
  EXPECT_EQ(at_expiry.own_expiry_below_micros, expiry + 1);
  EXPECT_EQ(at_expiry.default_ts_below_micros, int64_t{9'000'000'000'001} * kSec);  // ts 9e12 s expired, 9e12+1 not
  const ExpiredBounds before = expired_bounds(max_default, expiry - 1);
  EXPECT_EQ(before.default_ts_below_micros, int64_t{9'000'000'000'000} * kSec);
}

// ---------------------------------------------------------------------------------------------------------------
// An independent model of the rules (policy/ttl as plain integers: policy 0 = off, -1 = no default, n = seconds;
// item ttl 0 = absent, -1, n = seconds).

DefaultTtl to_policy(int64_t code) {
  if (code == 0) return DefaultTtl::off();
  if (code == -1) return DefaultTtl::no_default();
  return DefaultTtl::of_seconds(code);
}

ItemTtl to_item_ttl(int64_t code) {
  if (code == 0) return ItemTtl::inherit();
  if (code == -1) return ItemTtl::never();
  return ItemTtl::of_seconds(code);
}

std::string policy_name(int64_t code) {
  if (code == 0) return "off";
  return std::to_string(code);
}

std::string ttl_name(int64_t code) {
  if (code == 0) return "absent";
  return std::to_string(code);
}

// Is an item (written at write_ts with ttl code) expired at `at` if `policy` had always been in force?
bool model_expired_under(int64_t policy, int64_t item_ttl, int64_t write_ts, int64_t at) {
  if (policy == 0) return false;                      // TTL off: nothing expires
  if (item_ttl == -1) return false;                   // opted out
  int64_t effective = item_ttl > 0 ? item_ttl : policy;  // own ttl wins; else the default
  if (effective == -1) return false;                  // inheriting from -1: no default expiry
  const int64_t whole_seconds = write_ts / 1'000'000;  // write_ts >= 0 here
  return at >= (whole_seconds + effective) * 1'000'000;
}

struct ModelChange {
  int64_t ts;
  int64_t policy_before;
  int64_t policy_after;
};

struct ModelItem {
  int64_t write_ts;
  int64_t ttl;
};

// Visible at T iff not expired at T under the current policy, and not expired at any change made after its write
// (write_ts < ts_c <= T) under the policy in force just before that change.
bool model_visible(const ModelItem& item, int64_t current_policy, const std::vector<ModelChange>& changes, int64_t at) {
  if (model_expired_under(current_policy, item.ttl, item.write_ts, at)) return false;
  for (const ModelChange& change : changes) {
    if (item.write_ts < change.ts && change.ts <= at &&
        model_expired_under(change.policy_before, item.ttl, item.write_ts, change.ts)) {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// §4/§6 policy changes, hand-written scenarios

TEST(PolicyChange, SettingDefaultTtlReevaluatesEveryItemImmediately) {
  ContainerTtlState state{DefaultTtl::off()};
  // Under TTL off nothing expires, whatever the item says.
  EXPECT_TRUE(alive(ItemTtl::inherit(), 0, state, 49 * kSec));
  EXPECT_TRUE(alive(ItemTtl::of_seconds(20), 0, state, 49 * kSec));
  state = change_policy(state, DefaultTtl::of_seconds(10), 50 * kSec);
  EXPECT_FALSE(alive(ItemTtl::inherit(), 0, state, 50 * kSec));            // 0 + 10 <= 50: gone at once
  EXPECT_FALSE(alive(ItemTtl::inherit(), 40 * kSec, state, 50 * kSec));    // 40 + 10 <= 50: gone at once
  EXPECT_FALSE(alive(ItemTtl::inherit(), 40 * kSec + 1, state, 50 * kSec));  // same whole second 40
  EXPECT_TRUE(alive(ItemTtl::inherit(), 41 * kSec, state, 50 * kSec));     // 41 + 10 > 50
  EXPECT_FALSE(alive(ItemTtl::inherit(), 41 * kSec, state, 51 * kSec));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(20), 0, state, 50 * kSec));       // own ttl applies again: 20 <= 50
  EXPECT_TRUE(alive(ItemTtl::of_seconds(100), 0, state, 99 * kSec));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(100), 0, state, 100 * kSec));
  EXPECT_TRUE(alive(ItemTtl::never(), 0, state, 1'000'000 * kSec));
  // Setting -1 turns own ttls back on too, and inheriting items stay.
  ContainerTtlState minus_one = change_policy(ContainerTtlState{DefaultTtl::off()}, DefaultTtl::no_default(), 50 * kSec);
  EXPECT_FALSE(alive(ItemTtl::of_seconds(20), 0, minus_one, 50 * kSec));
  EXPECT_TRUE(alive(ItemTtl::inherit(), 0, minus_one, 1'000'000 * kSec));
}

TEST(PolicyChange, ShorteningTheDefaultKillsOlderItemsAtOnce) {
  ContainerTtlState state{DefaultTtl::of_seconds(100)};
  EXPECT_TRUE(alive(ItemTtl::inherit(), 0, state, 60 * kSec));
  state = change_policy(state, DefaultTtl::of_seconds(30), 60 * kSec + 500'000);
  EXPECT_FALSE(alive(ItemTtl::inherit(), 0, state, 60 * kSec + 500'000));
  EXPECT_FALSE(alive(ItemTtl::inherit(), 30 * kSec + 999'999, state, 60 * kSec + 500'000));  // _ts 30: E = 60
  EXPECT_TRUE(alive(ItemTtl::inherit(), 31 * kSec, state, 60 * kSec + 500'000));
  EXPECT_TRUE(alive(ItemTtl::of_seconds(90), 0, state, 89 * kSec));  // own ttl unaffected
}

TEST(PolicyChange, RemovingDefaultTtlStopsExpiryButNeverResurrects) {
  ContainerTtlState state{DefaultTtl::of_seconds(10)};
  const ModelItem inherit_dead{0, 0};            // E = 10
  const ModelItem inherit_alive{5 * kSec, 0};    // E = 15
  const ModelItem own_dead{0, 3};                // E = 3
  const ModelItem own_alive{0, 20};              // E = 20
  const ModelItem own_boundary{2 * kSec, 10};    // E = 12: expired exactly at the change
  const ModelItem never{0, -1};
  const int64_t change = 12 * kSec;
  state = change_policy(state, DefaultTtl::off(), change);
  for (int64_t at : {change, 15 * kSec, 20 * kSec, 21 * kSec, 1'000'000 * kSec}) {
    SCOPED_TRACE(at);
    EXPECT_FALSE(alive(to_item_ttl(inherit_dead.ttl), inherit_dead.write_ts, state, at));
    EXPECT_TRUE(alive(to_item_ttl(inherit_alive.ttl), inherit_alive.write_ts, state, at));
    EXPECT_FALSE(alive(to_item_ttl(own_dead.ttl), own_dead.write_ts, state, at));
    EXPECT_TRUE(alive(to_item_ttl(own_alive.ttl), own_alive.write_ts, state, at));  // even its own ttl stops
    EXPECT_FALSE(alive(to_item_ttl(own_boundary.ttl), own_boundary.write_ts, state, at));
    EXPECT_TRUE(alive(to_item_ttl(never.ttl), never.write_ts, state, at));
  }
  // Turning TTL back on later re-evaluates the survivors but still never resurrects the dead.
  ContainerTtlState again = change_policy(state, DefaultTtl::of_seconds(1'000'000), 30 * kSec);
  EXPECT_FALSE(alive(ItemTtl::inherit(), 0, again, 30 * kSec));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(3), 0, again, 30 * kSec));
  EXPECT_TRUE(alive(ItemTtl::inherit(), 5 * kSec, again, 30 * kSec));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(20), 0, again, 30 * kSec));  // own ttl 20 <= 30 under TTL on
  ContainerTtlState minus_one = change_policy(state, DefaultTtl::no_default(), 30 * kSec);
  EXPECT_FALSE(alive(ItemTtl::inherit(), 0, minus_one, 30 * kSec));
  EXPECT_TRUE(alive(ItemTtl::inherit(), 5 * kSec, minus_one, 1'000'000 * kSec));
}

TEST(PolicyChange, MinusOneKeepsOwnTtlItemsExpiring) {
  ContainerTtlState state{DefaultTtl::of_seconds(10)};
  state = change_policy(state, DefaultTtl::no_default(), 5 * kSec);
  EXPECT_TRUE(alive(ItemTtl::of_seconds(20), 0, state, 20 * kSec - 1));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(20), 0, state, 20 * kSec));
  EXPECT_TRUE(alive(ItemTtl::inherit(), 0, state, 1'000'000 * kSec));  // was alive at the change: never expires now
  EXPECT_TRUE(alive(ItemTtl::of_seconds(1), 6 * kSec, state, 7 * kSec - 1));
  EXPECT_FALSE(alive(ItemTtl::of_seconds(1), 6 * kSec, state, 7 * kSec));  // written after the change
}

TEST(PolicyChange, OnceExpiredAlwaysExpiredForEveryTransition) {
  // Policies {off, -1, n=10, m=20}: every ordered pair (n<m and m<n both included), every item kind.
  const std::vector<int64_t> policies = {0, -1, 10, 20};
  const std::vector<int64_t> item_ttls = {0, -1, 1, 5, 12, 13, 30};
  const std::vector<int64_t> write_times = {0, 500'000, 2 * kSec, 2 * kSec + 999'999, 3 * kSec, 9 * kSec};
  const int64_t change = 12 * kSec + 500'000;
  const std::vector<int64_t> probes = {change,       change + 1,   13 * kSec - 1, 13 * kSec, 15 * kSec,
                                       22 * kSec,    23 * kSec,    29 * kSec,     30 * kSec, 1'000'000 * kSec};
  for (int64_t from : policies) {
    for (int64_t to : policies) {
      const ContainerTtlState before{to_policy(from)};
      const ContainerTtlState after = change_policy(before, to_policy(to), change);
      EXPECT_EQ(after.policy, to_policy(to));
      for (int64_t ttl : item_ttls) {
        for (int64_t write_ts : write_times) {
          SCOPED_TRACE(policy_name(from) + " -> " + policy_name(to) + " ttl " + ttl_name(ttl) + " written at " +
                       std::to_string(write_ts));
          const bool expired_at_change = model_expired_under(from, ttl, write_ts, change);
          EXPECT_EQ(alive(to_item_ttl(ttl), write_ts, before, change), !expired_at_change);
          for (int64_t at : probes) {
            const bool expected = !expired_at_change && !model_expired_under(to, ttl, write_ts, at);
            EXPECT_EQ(alive(to_item_ttl(ttl), write_ts, after, at), expected) << "at " << at;
            if (expired_at_change) {
              EXPECT_FALSE(alive(to_item_ttl(ttl), write_ts, after, at)) << "resurrected";
            }
          }
          // And through a second change back and forth: still dead.
          const ContainerTtlState back = change_policy(after, to_policy(from), 40 * kSec);
          const ContainerTtlState off = change_policy(back, DefaultTtl::off(), 41 * kSec);
          if (expired_at_change) {
            EXPECT_FALSE(alive(to_item_ttl(ttl), write_ts, back, 40 * kSec));
            EXPECT_FALSE(alive(to_item_ttl(ttl), write_ts, off, 1'000'000 * kSec));
          }
        }
      }
    }
  }
}

TEST(PolicyChange, ItemsWrittenAfterAChangeAreNeverKilledByIt) {
  const std::vector<int64_t> policies = {0, -1, 1, 2, 10};
  for (int64_t from : policies) {
    for (int64_t to : policies) {
      // A change at an instant with a sub-second part and one exactly on a second.
      for (int64_t change : {10 * kSec + 999'999, 11 * kSec}) {
        const ContainerTtlState after = change_policy(ContainerTtlState{to_policy(from)}, to_policy(to), change);
        for (int64_t ttl : {int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{2}}) {
          for (int64_t write_ts : {change, change + 1, change + kSec}) {
            SCOPED_TRACE(policy_name(from) + " -> " + policy_name(to) + " at " + std::to_string(change) + " ttl " +
                         ttl_name(ttl) + " written at " + std::to_string(write_ts));
            EXPECT_TRUE(alive(to_item_ttl(ttl), write_ts, after, write_ts));
            for (int64_t at : {write_ts, write_ts + kSec - 1, write_ts + kSec, write_ts + 5 * kSec}) {
              EXPECT_EQ(alive(to_item_ttl(ttl), write_ts, after, at), !model_expired_under(to, ttl, write_ts, at))
                  << "at " << at;
            }
          }
        }
      }
    }
  }
}

TEST(PolicyChange, ExpiryExactlyAtTheChangeInstantIsFinal) {
  // ttl 1 default, written at 10.5 s: E = 11 s. Removing TTL at exactly 11 s: it had expired, so it stays gone;
  // an item written at 11 s (after the change, same instant) is not affected.
  ContainerTtlState state = change_policy(ContainerTtlState{DefaultTtl::of_seconds(1)}, DefaultTtl::off(), 11 * kSec);
  EXPECT_FALSE(alive(ItemTtl::inherit(), 10 * kSec + 500'000, state, 11 * kSec));
  EXPECT_FALSE(alive(ItemTtl::inherit(), 10 * kSec + 500'000, state, 100 * kSec));
  EXPECT_TRUE(alive(ItemTtl::inherit(), 11 * kSec, state, 100 * kSec));
  // One microsecond earlier it had not expired yet, so TTL off keeps it forever.
  ContainerTtlState early =
      change_policy(ContainerTtlState{DefaultTtl::of_seconds(1)}, DefaultTtl::off(), 11 * kSec - 1);
  EXPECT_TRUE(alive(ItemTtl::inherit(), 10 * kSec + 500'000, early, 100 * kSec));
  // Same for own ttl under -1.
  ContainerTtlState own = change_policy(ContainerTtlState{DefaultTtl::no_default()}, DefaultTtl::off(), 11 * kSec);
  EXPECT_FALSE(alive(ItemTtl::of_seconds(1), 10 * kSec + 500'000, own, 100 * kSec));
  EXPECT_TRUE(alive(ItemTtl::of_seconds(1), 11 * kSec, own, 100 * kSec));
  ContainerTtlState own_early =
      change_policy(ContainerTtlState{DefaultTtl::no_default()}, DefaultTtl::off(), 11 * kSec - 1);
  EXPECT_TRUE(alive(ItemTtl::of_seconds(1), 10 * kSec + 500'000, own_early, 100 * kSec));
}

// ---------------------------------------------------------------------------------------------------------------
// expired_bounds

TEST(ExpiredBounds, MatchTheExpiryRuleAtAKnownInstant) {
  const ContainerTtlState state{DefaultTtl::of_seconds(10)};
  const int64_t now = 25 * kSec + 500'000;
  const ExpiredBounds bounds = expired_bounds(state, now);
  EXPECT_EQ(bounds.own_expiry_below_micros, now + 1);     // expiry <= now
  EXPECT_EQ(bounds.default_ts_below_micros, 16 * kSec);   // _ts 15 + 10 <= 25.5; _ts 16 + 10 > 25.5
  EXPECT_FALSE(alive(ItemTtl::inherit(), 16 * kSec - 1, state, now));
  EXPECT_TRUE(alive(ItemTtl::inherit(), 16 * kSec, state, now));
  // TTL off with no history: nothing is below either bound.
  const ExpiredBounds off = expired_bounds(ContainerTtlState{DefaultTtl::off()}, now);
  EXPECT_LE(off.own_expiry_below_micros, 0 + kSec);  // no own expiry instant (>= 1 s) is below it
  EXPECT_LE(off.default_ts_below_micros, 0);
  // -1: own-ttl items expire, inheriting ones do not.
  const ExpiredBounds minus_one = expired_bounds(ContainerTtlState{DefaultTtl::no_default()}, now);
  EXPECT_EQ(minus_one.own_expiry_below_micros, now + 1);
  EXPECT_LE(minus_one.default_ts_below_micros, 0);
}

TEST(ExpiredBounds, AreMonotoneInTimeForEveryPolicy) {
  for (int64_t policy : {int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{7}, kMaxTtlSeconds}) {
    SCOPED_TRACE(policy_name(policy));
    // Some history so the watermarks are non-zero.
    const ContainerTtlState state = change_policy(ContainerTtlState{DefaultTtl::of_seconds(3)}, to_policy(policy), 20 * kSec + 250'000);
    ExpiredBounds last = expired_bounds(state, 20 * kSec + 250'000);
    for (int64_t at = 20 * kSec + 250'000; at < 40 * kSec; at += 137'131) {
      const ExpiredBounds bounds = expired_bounds(state, at);
      EXPECT_GE(bounds.own_expiry_below_micros, last.own_expiry_below_micros) << at;
      EXPECT_GE(bounds.default_ts_below_micros, last.default_ts_below_micros) << at;
      last = bounds;
    }
  }
}

TEST(ExpiredBounds, NeverDecreaseAcrossAPolicyChange) {
  const std::vector<int64_t> policies = {0, -1, 1, 10, 20};
  for (int64_t first : policies) {
    for (int64_t second : policies) {
      for (int64_t third : policies) {
        SCOPED_TRACE(policy_name(first) + " -> " + policy_name(second) + " -> " + policy_name(third));
        ContainerTtlState state{to_policy(first)};
        ExpiredBounds last = expired_bounds(state, 0);
        int64_t at = 0;
        for (auto [policy, change] : {std::pair{second, 30 * kSec + 1}, std::pair{third, 45 * kSec + 999'999}}) {
          for (; at <= change; at += 700'001) {
            const ExpiredBounds bounds = expired_bounds(state, at);
            EXPECT_GE(bounds.own_expiry_below_micros, last.own_expiry_below_micros);
            EXPECT_GE(bounds.default_ts_below_micros, last.default_ts_below_micros);
            last = bounds;
          }
          const ExpiredBounds before = expired_bounds(state, change);
          state = change_policy(state, to_policy(policy), change);
          const ExpiredBounds after = expired_bounds(state, change);
          EXPECT_GE(after.own_expiry_below_micros, before.own_expiry_below_micros);
          EXPECT_GE(after.default_ts_below_micros, before.default_ts_below_micros);
          last = after;
          at = change;
        }
        const ExpiredBounds later = expired_bounds(state, 100 * kSec);
        EXPECT_GE(later.own_expiry_below_micros, last.own_expiry_below_micros);
        EXPECT_GE(later.default_ts_below_micros, last.default_ts_below_micros);
      }
    }
  }
}

// Checks that expired_bounds(state, at) and alive() agree about one item written at write_ts <= at.
void expect_bounds_agree_with_alive(const ContainerTtlState& state, int64_t ttl, int64_t write_ts, int64_t at) {
  const bool is_alive = alive(to_item_ttl(ttl), write_ts, state, at);
  const ExpiredBounds bounds = expired_bounds(state, at);
  if (ttl == -1) {
    EXPECT_TRUE(is_alive) << "ttl -1 item expired, written at " << write_ts << " probed at " << at;
  } else if (ttl > 0) {
    const int64_t expiry = expiry_instant_micros(write_ts, ttl);
    EXPECT_EQ(expiry < bounds.own_expiry_below_micros, !is_alive)
        << "own ttl " << ttl << " written at " << write_ts << " (E " << expiry << ") probed at " << at
        << ", bound " << bounds.own_expiry_below_micros << ", alive " << is_alive;
  } else {
    EXPECT_EQ(write_ts < bounds.default_ts_below_micros, !is_alive)
        << "inheriting, written at " << write_ts << " probed at " << at << ", bound "
        << bounds.default_ts_below_micros << ", alive " << is_alive;
  }
}

int64_t random_policy(Prng& rng) {
  const uint64_t pick = rng.uniform(6);
  if (pick < 2) return 0;
  if (pick == 2) return -1;
  return rng.range(1, 6);
}

int64_t random_item_ttl(Prng& rng) {
  const uint64_t pick = rng.uniform(6);
  if (pick < 2) return 0;
  if (pick == 2) return -1;
  return rng.range(1, 6);
}

// A step forward in time: sometimes none, sometimes onto a whole second or just before one, usually sub-second.
int64_t random_step(Prng& rng) {
  const uint64_t pick = rng.uniform(8);
  if (pick == 0) return 0;
  if (pick == 1) return rng.range(1, 3);
  return rng.range(1, 2'500'000);
}

int64_t snap(Prng& rng, int64_t at) {
  const uint64_t pick = rng.uniform(6);
  const int64_t next_second = (at / kSec + 1) * kSec;
  if (pick == 0) return next_second;
  if (pick == 1) return next_second - 1;
  return at;
}

TEST(ExpiredBounds, AgreeWithAliveForRandomItemsAndStates) {
  const uint64_t seed = 0x7717'b0d5;
  Prng rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int round = 0; round < 2000 && !HasFailure(); ++round) {
    ContainerTtlState state{to_policy(random_policy(rng))};
    int64_t now = rng.range(0, 3 * kSec);
    const int changes = static_cast<int>(rng.range(0, 4));
    for (int i = 0; i < changes; ++i) {
      now = snap(rng, now + rng.range(1, 4 * kSec));
      state = change_policy(state, to_policy(random_policy(rng)), now);
    }
    const int64_t at = snap(rng, now + rng.range(0, 8 * kSec));
    for (int i = 0; i < 20; ++i) {
      const int64_t write_ts = snap(rng, rng.range(0, at));
      expect_bounds_agree_with_alive(state, random_item_ttl(rng), std::min(write_ts, at), at);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Property test: alive() against the naive history model, on random sequences of writes, changes and probes.

using testing_env::env_or;

struct PropertyItem {
  ModelItem model;
  std::string id;
};

// Runs one random sequence; returns false (after reporting) on the first disagreement.
bool run_property_sequence(uint64_t seed) {
  Prng rng(seed);
  std::string log;  // the sequence so far, printed on failure
  const int64_t initial_policy = random_policy(rng);
  ContainerTtlState state{to_policy(initial_policy)};
  int64_t current_policy = initial_policy;
  std::vector<ModelChange> changes;
  std::vector<PropertyItem> items;
  int64_t now = rng.range(0, 5) * kSec + (rng.chance(1, 2) ? rng.range(0, 999'999) : 0);
  int64_t last_change_ts = -1;
  ExpiredBounds last_bounds = expired_bounds(state, now);
  log += "initial policy " + policy_name(initial_policy) + "\n";

  auto check_bounds_monotone = [&](const ExpiredBounds& bounds, const char* where) {
    if (bounds.own_expiry_below_micros < last_bounds.own_expiry_below_micros ||
        bounds.default_ts_below_micros < last_bounds.default_ts_below_micros) {
      ADD_FAILURE() << "expired_bounds went down " << where << " at " << now << ": own "
                    << last_bounds.own_expiry_below_micros << " -> " << bounds.own_expiry_below_micros
                    << ", default " << last_bounds.default_ts_below_micros << " -> "
                    << bounds.default_ts_below_micros << "\n" << log;
      return false;
    }
    last_bounds = bounds;
    return true;
  };

  auto probe = [&](int64_t at) {
    log += "probe at " + std::to_string(at) + "\n";
    const ExpiredBounds bounds = expired_bounds(state, at);
    if (!check_bounds_monotone(bounds, "over time")) return false;
    for (const PropertyItem& item : items) {
      const bool expected = model_visible(item.model, current_policy, changes, at);
      const bool actual = alive(to_item_ttl(item.model.ttl), item.model.write_ts, state, at);
      if (expected != actual) {
        ADD_FAILURE() << "item " << item.id << " (ttl " << ttl_name(item.model.ttl) << ", written at "
                      << item.model.write_ts << ") at " << at << ": alive() says " << actual << ", model says "
                      << expected << "\nsequence:\n" << log;
        return false;
      }
      expect_bounds_agree_with_alive(state, item.model.ttl, item.model.write_ts, at);
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "sequence:\n" << log;
        return false;
      }
    }
    return true;
  };

  const int events = static_cast<int>(rng.range(4, 40));
  for (int event = 0; event < events; ++event) {
    now = snap(rng, now + random_step(rng));
    const uint64_t kind = rng.uniform(10);
    if (kind < 5) {  // write: a new item, or a rewrite of an existing one (resets its clock and ttl)
      const int64_t ttl = random_item_ttl(rng);
      if (!items.empty() && rng.chance(1, 5)) {
        PropertyItem& item = items[rng.uniform(items.size())];
        item.model = {now, ttl};
        log += "rewrite " + item.id + " ttl " + ttl_name(ttl) + " at " + std::to_string(now) + "\n";
      } else {
        items.push_back({{now, ttl}, "i" + std::to_string(items.size())});
        log += "write " + items.back().id + " ttl " + ttl_name(ttl) + " at " + std::to_string(now) + "\n";
      }
    } else if (kind < 7) {  // policy change, strictly after the previous one
      if (now <= last_change_ts) now = last_change_ts + 1;
      const int64_t policy = random_policy(rng);
      log += "change " + policy_name(current_policy) + " -> " + policy_name(policy) + " at " + std::to_string(now) +
             "\n";
      const ExpiredBounds before = expired_bounds(state, now);
      if (!check_bounds_monotone(before, "before a change")) return false;
      state = change_policy(state, to_policy(policy), now);
      if (!check_bounds_monotone(expired_bounds(state, now), "across a change")) return false;
      changes.push_back({now, current_policy, policy});
      current_policy = policy;
      last_change_ts = now;
    } else {  // probe now, or at a boundary instant of some item
      if (!items.empty() && rng.chance(1, 2)) {
        const PropertyItem& item = items[rng.uniform(items.size())];
        const int64_t seconds = item.model.write_ts / kSec + rng.range(1, 6);
        const int64_t target = seconds * kSec + rng.range(-1, 0);
        if (target > now) now = target;
      }
      if (!probe(now)) return false;
    }
  }
  // A final sweep: every item at several later instants.
  for (int64_t later : {int64_t{0}, int64_t{1}, kSec - 1, kSec, 3 * kSec, 7 * kSec, 1'000 * kSec}) {
    now += later;
    if (!probe(now)) return false;
  }
  return true;
}

TEST(TtlProperty, AliveMatchesTheNaiveHistoryModel) {
  const int64_t sequences = std::max<int64_t>(1, static_cast<int64_t>(env_or("MAYFLY_TTL_PROPERTY_SEQUENCES", 10000)));
  const uint64_t base_seed = env_or("MAYFLY_TTL_PROPERTY_SEED", 0x7717'0001);
  for (int64_t i = 0; i < sequences; ++i) {
    const uint64_t seed = base_seed + static_cast<uint64_t>(i);
    SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: MAYFLY_TTL_PROPERTY_SEED=" + std::to_string(seed) +
                 " MAYFLY_TTL_PROPERTY_SEQUENCES=1)");
    if (!run_property_sequence(seed)) break;
  }
}

// The model itself must be able to fail: a few facts it has to get right, checked by hand.
TEST(TtlProperty, NaiveModelAgreesWithHandComputedCases) {
  // off -> n=10 at 50 s: inherit item written at 0 vanishes at 50 s.
  const std::vector<ModelChange> set_ttl = {{50 * kSec, 0, 10}};
  EXPECT_TRUE(model_visible({0, 0}, 0, {}, 49 * kSec));
  EXPECT_FALSE(model_visible({0, 0}, 10, set_ttl, 50 * kSec));
  // n=10 -> off at 12 s: expired item stays gone; alive one lives forever.
  const std::vector<ModelChange> remove = {{12 * kSec, 10, 0}};
  EXPECT_FALSE(model_visible({0, 0}, 0, remove, 1'000 * kSec));
  EXPECT_TRUE(model_visible({5 * kSec, 0}, 0, remove, 1'000 * kSec));
  // Whole-second _ts.
  EXPECT_TRUE(model_visible({10'999'999, 1}, -1, {}, 11 * kSec - 1));
  EXPECT_FALSE(model_visible({10'999'999, 1}, -1, {}, 11 * kSec));
}

// ---------------------------------------------------------------------------------------------------------------
// warning_bounds ("expiring soon", docs/retention.md)

// An item as the two expiry indexes see it: own ttl (E is its key) or inheriting (its write time is).
struct ProbeItem {
  bool own;
  int64_t write_ts;
  int64_t ttl;  // own only
};

// Naively: is `item` within the warning window of state `s` at instant `t`? Dead by a watermark, or its instant under
// the policy at most warning_seconds away.
bool naive_in_window(const ProbeItem& item, const ContainerTtlState& s, int64_t t) {
  const int64_t horizon = t + s.warning_seconds * kSec;
  if (item.own) {
    const int64_t instant = expiry_instant_micros(item.write_ts, item.ttl);
    return instant < s.own_dead_below_micros || (s.policy.is_on() && instant <= horizon);
  }
  if (item.write_ts < s.default_dead_below_micros) return true;
  return s.policy.kind == DefaultTtl::Kind::kSeconds &&
         expiry_instant_micros(item.write_ts, s.policy.seconds) <= horizon;
}

TEST(WarningBounds, AreEveryStateEverInForceAndNeverBelowTheExpiredBounds) {
  // Random histories of defaultTtl and expiryWarning changes: an item is below the warning bounds now iff some state
  // in force put it in its window (each state at the last instant it was in force: at the change that ended it, or
  // now). So the bounds never fall, across changes included, and a warning is never taken back.
  const uint64_t base_seed = env_or("MAYFLY_TTL_WARNING_SEED", 0x3a11'0001);
  const auto policy_of = [](uint64_t pick) {
    switch (pick % 4) {
      case 0: return DefaultTtl::off();
      case 1: return DefaultTtl::no_default();
      default: return DefaultTtl::of_seconds(static_cast<int64_t>(1 + pick % 9));
    }
  };
  for (uint64_t i = 0; i < 2000; ++i) {
    const uint64_t seed = base_seed + i;
    SCOPED_TRACE("MAYFLY_TTL_WARNING_SEED=" + std::to_string(seed));
    Prng prng(seed);
    ContainerTtlState state{policy_of(prng.uniform(100))};
    state.warning_seconds = static_cast<int64_t>(prng.uniform(4));  // a container created with it
    std::vector<std::pair<int64_t, ContainerTtlState>> ended;  // states that ended, at their last instant
    int64_t now = 100 * kSec;
    std::vector<ProbeItem> items;
    for (int w = 0; w < 40; ++w) {
      const int64_t write_ts = 90 * kSec + static_cast<int64_t>(prng.uniform(40 * kSec));
      items.push_back({prng.uniform(2) == 0, write_ts, static_cast<int64_t>(1 + prng.uniform(8))});
    }
    ExpiredBounds previous{0, 0};
    for (int step = 0; step < 12; ++step) {
      now += 2 + static_cast<int64_t>(prng.uniform(3 * kSec));
      for (const int64_t at : {now, now + 1}) {
        const ExpiredBounds warned = warning_bounds(state, at);
        const ExpiredBounds expired = expired_bounds(state, at);
        ASSERT_GE(warned.own_expiry_below_micros, expired.own_expiry_below_micros);
        ASSERT_GE(warned.default_ts_below_micros, expired.default_ts_below_micros);
        ASSERT_GE(warned.own_expiry_below_micros, previous.own_expiry_below_micros) << "step " << step;
        ASSERT_GE(warned.default_ts_below_micros, previous.default_ts_below_micros) << "step " << step;
        previous = warned;
        for (const ProbeItem& item : items) {
          bool expected = naive_in_window(item, state, at);
          for (const auto& [when, then] : ended) expected = expected || naive_in_window(item, then, when);
          const bool below = item.own ? expiry_instant_micros(item.write_ts, item.ttl) < warned.own_expiry_below_micros
                                      : item.write_ts < warned.default_ts_below_micros;
          ASSERT_EQ(below, expected) << "step " << step << (item.own ? " own ttl " : " inheriting, written ")
                                     << item.write_ts << " ttl " << item.ttl;
        }
      }
      ended.emplace_back(now + 1, state);
      if (prng.uniform(2) == 0) {
        state = change_policy(state, policy_of(prng.uniform(100)), now + 1);
      } else {
        state = change_warning(state, static_cast<int64_t>(prng.uniform(5)), now + 1);
      }
    }
  }
}

TEST(WarningBounds, NeverOnMeansTheExpiredBoundsAndValidationNamesTheRange) {
  ContainerTtlState state{DefaultTtl::of_seconds(10)};
  state = change_policy(state, DefaultTtl::of_seconds(3), 20 * kSec);
  EXPECT_FALSE(state.has_warnings());
  for (int64_t at : {int64_t{0}, 20 * kSec, 31 * kSec + 7}) {
    EXPECT_EQ(warning_bounds(state, at).own_expiry_below_micros, expired_bounds(state, at).own_expiry_below_micros);
    EXPECT_EQ(warning_bounds(state, at).default_ts_below_micros, expired_bounds(state, at).default_ts_below_micros);
  }
  // 5 s window: an own-ttl item expiring at 40 s is warned of from 35 s on; one inheriting 3 s, written at 30.2 s
  // (E = 33 s), from 28 s on.
  state = change_warning(state, 5, 21 * kSec);
  EXPECT_TRUE(state.has_warnings());
  EXPECT_EQ(warning_bounds(state, 35 * kSec - 1).own_expiry_below_micros, 40 * kSec);
  EXPECT_EQ(warning_bounds(state, 35 * kSec).own_expiry_below_micros, 40 * kSec + 1);
  EXPECT_EQ(warning_bounds(state, 28 * kSec).default_ts_below_micros, 31 * kSec);
  // Turned off again: what was in the window stays in it.
  const ContainerTtlState off = change_warning(state, 0, 36 * kSec);
  EXPECT_EQ(warning_bounds(off, 36 * kSec).own_expiry_below_micros, 41 * kSec + 1);
  EXPECT_EQ(expired_bounds(off, 36 * kSec).own_expiry_below_micros, 36 * kSec + 1);
  EXPECT_TRUE(validate_expiry_warning(0).is_ok());
  EXPECT_TRUE(validate_expiry_warning(kMaxTtlSeconds).is_ok());
  EXPECT_EQ(validate_expiry_warning(-1).message(),
            "expiryWarning must be 0 (off) or whole seconds from 1 to 2147483647, not -1");
  EXPECT_FALSE(validate_expiry_warning(kMaxTtlSeconds + 1).is_ok());
}

}  // namespace
}  // namespace mayfly::ttl
