// ExpiryWatch over a real store: which expiry instants a replica's applied time reached in a flush, and how late by
// the node's wall clock (mayfly_ttl_expiry_lateness_seconds).
#include "node/expiry_watch.h"

#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

class ExpiryWatchTest : public StoreFixture {
 protected:
  // One "flush": looks at the store's applied state with the wall clock at wall_micros; returns the samples.
  std::vector<double> look(int64_t wall_micros) {
    std::vector<double> lateness;
    Status watched = watch_.on_applied(store_->expiry(), store_->applied(), wall_micros, &lateness);
    EXPECT_TRUE(watched.is_ok()) << watched.to_string();
    return lateness;
  }
  void write(const std::string& body, int64_t ts) {
    ASSERT_EQ(apply(item_command(CommandType::kUpsertItem, "db", "c", body), ts).http_status() < 300, true) << body;
  }

  node::ExpiryWatch watch_;
};

TEST_F(ExpiryWatchTest, SamplesEachInstantTheAppliedTimeReachesOnceWithItsLateness) {
  make_container("10");  // inheriting items written at kT0 + x expire at kT0 + x + 10 s
  write(R"({"id":"a","pk":"p","ttl":2})", kT0 + 100);  // expires kT0 + 2 s (instants are whole seconds)
  write(R"({"id":"b","pk":"p","ttl":2})", kT0 + 200);  // the same instant: one sample
  write(R"({"id":"c","pk":"p","ttl":5})", kT0 + 300);  // kT0 + 5 s
  EXPECT_TRUE(look(kT0 + 400).empty()) << "the first look only learns where the applied time is";
  EXPECT_EQ(watch_.next(), kT0 + 2 * kSecond);

  apply(Command{}, kT0 + 2 * kSecond - 1);  // a time entry just before the instant
  EXPECT_TRUE(look(kT0 + 2 * kSecond).empty());
  apply(Command{}, kT0 + 2 * kSecond + 3000);  // reached, 3 ms after the instant by the leader's stamp
  std::vector<double> samples = look(kT0 + 2 * kSecond + 4500);  // this node applied it 4.5 ms after the instant
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0], 0.0045);
  EXPECT_EQ(watch_.next(), kT0 + 5 * kSecond);
  EXPECT_TRUE(look(kT0 + 3 * kSecond).empty()) << "the same applied index: nothing new";

  // A write with a shorter ttl brings an earlier instant; one flush that passes two instants samples both.
  write(R"({"id":"d","pk":"p","ttl":1})", kT0 + 3 * kSecond);  // expires kT0 + 4 s
  EXPECT_TRUE(look(kT0 + 3 * kSecond).empty());
  EXPECT_EQ(watch_.next(), kT0 + 4 * kSecond);
  apply(Command{}, kT0 + 6 * kSecond);
  samples = look(kT0 + 6 * kSecond + 1000);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_DOUBLE_EQ(samples[0], 2.001);  // kT0 + 4 s
  EXPECT_DOUBLE_EQ(samples[1], 1.001);  // kT0 + 5 s
  EXPECT_FALSE(watch_.next().has_value()) << "nothing else will expire";

  // A leader's clock slightly ahead of this node's is on time, not early.
  write(R"({"id":"e","pk":"p","ttl":1})", kT0 + 7 * kSecond);
  EXPECT_TRUE(look(kT0 + 7 * kSecond).empty());
  apply(Command{}, kT0 + 8 * kSecond);
  samples = look(kT0 + 8 * kSecond - 2000);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0], 0.0);
}

TEST_F(ExpiryWatchTest, InheritedExpiryAndDefaultTtlChangesMoveTheNextInstant) {
  make_container("10");
  write(R"({"id":"a","pk":"p"})", kT0 + kSecond);  // inherits 10 s: kT0 + 11 s
  EXPECT_TRUE(look(kT0 + kSecond).empty());
  EXPECT_EQ(watch_.next(), kT0 + 11 * kSecond);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "3"), kT0 + 2 * kSecond).http_status(), 200);  // now kT0 + 4 s
  EXPECT_TRUE(look(kT0 + 2 * kSecond).empty());
  EXPECT_EQ(watch_.next(), kT0 + 4 * kSecond);
  apply(Command{}, kT0 + 4 * kSecond);
  const std::vector<double> samples = look(kT0 + 4 * kSecond + 700);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0], 0.0007);
}

}  // namespace
}  // namespace mayfly::storage::testing
