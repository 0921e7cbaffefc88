// The collector's reclaim capacity for the TTL forecast (node/forecast.h ReclaimRate): measured from the passes of
// the last minute that left expired items behind, else estimated from the configuration; capped per container by its
// batch ceiling and, provisioned, its RU/s.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "node/collector.h"
#include "node/forecast.h"
#include "node/ru_account.h"
#include "tests/unit/store_fixture.h"
#include "ttl/request_units.h"

namespace mayfly::node {
namespace {

constexpr int64_t kMs = 1000;

ReclaimSettings settings() {
  ReclaimSettings s;
  s.gc_interval_ms = 200;
  s.batch_items_max = 1000;
  s.ru_share = 0.5;
  s.pass_work = 150'000;  // 500 deletes a pass
  return s;
}

TEST(ReclaimRate, ConfiguredUntilAPassHadMoreWorkThanItCouldDo) {
  ReclaimRate rate(settings());
  ReclaimCapacity capacity = rate.node_capacity();
  EXPECT_FALSE(capacity.measured);
  EXPECT_DOUBLE_EQ(capacity.items_per_second, 500.0 * 5);  // 500 deletes a pass, 5 passes a second
  // Passes that emptied their backlog (not saturated) say nothing about capacity.
  for (int i = 1; i <= 10; ++i) rate.record_pass(i * 200 * kMs, 7, false);
  EXPECT_FALSE(rate.node_capacity().measured);
  // Saturated passes: 300 items in each 200 ms -> 1500/s, 400 in one 400 ms gap -> (300*2+400)/(0.2*2+0.4) = 1250/s.
  rate.record_pass(2200 * kMs, 300, true);
  rate.record_pass(2400 * kMs, 300, true);
  rate.record_pass(2800 * kMs, 400, true);
  capacity = rate.node_capacity();
  EXPECT_TRUE(capacity.measured);
  EXPECT_DOUBLE_EQ(capacity.items_per_second, 1250);
  // A minute later without saturated passes: back to the configured estimate.
  rate.record_pass(2800 * kMs + ReclaimRate::kWindowMicros + 1, 5, false);
  EXPECT_FALSE(rate.node_capacity().measured);
}

TEST(ReclaimRate, ContainerCapacityIsCappedByItsBatchAndRequestUnits) {
  ReclaimRate rate(settings());
  storage::ContainerRecord serverless;
  EXPECT_DOUBLE_EQ(rate.container_capacity(serverless, 500).items_per_second, 2500);  // the node's work budget
  ReclaimSettings small = settings();
  small.batch_items_max = 100;  // 500 a second at 5 passes a second
  EXPECT_DOUBLE_EQ(ReclaimRate(small).container_capacity(serverless, 500).items_per_second, 500);
  storage::ContainerRecord provisioned;
  provisioned.throughput.mode = storage::Throughput::Mode::kProvisioned;
  provisioned.throughput.request_units_per_second = 400;
  // 400 RU/s × 0.5 share ÷ 5 RU a delete of a 500-byte item = 40 a second.
  EXPECT_DOUBLE_EQ(rate.container_capacity(provisioned, 500).items_per_second,
                   400 * 0.5 / ttl::ttl_delete_charge(500));
  EXPECT_DOUBLE_EQ(rate.container_capacity(provisioned, 500).items_per_second, 40);
}

// A pass is saturated exactly when it leaves expired items behind; its deletes then measure the capacity.
class CollectorSaturation : public storage::testing::StoreFixture {
 protected:
  CollectorSaturation() : clock_(storage::testing::kT0), metrics_(1), account_(clock_, metrics_) {}
  ManualClock clock_;
  metrics::Metrics metrics_;
  RequestUnitAccount account_;
};

TEST_F(CollectorSaturation, OnlyPassesThatLeaveExpiredItemsBehindAreSaturated) {
  using namespace storage;
  using namespace storage::testing;
  make_container("10");
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c",
                                 "{\"id\":\"i" + std::to_string(i) + "\",\"pk\":\"p\"}"),
                    kT0 + 1 + i)
                  .http_status(),
              201);
  }
  ASSERT_EQ(apply(Command{}, kT0 + 20 * kSecond).http_status(), 200);  // all 50 expired
  clock_.set_micros(kT0 + 20 * kSecond);
  CollectorOptions options;
  options.batch_items_max = 20;
  Collector collector(store_->expiry(), account_, metrics_, clock_, options);
  ReclaimSettings settings{200, options.batch_items_max, options.ru_share, collector.pass_work()};
  ReclaimRate rate(settings);
  const std::vector<std::pair<int64_t, bool>> expected = {{20, true}, {20, true}, {10, false}, {0, false}};
  for (size_t pass = 0; pass < expected.size(); ++pass) {
    Result<int64_t> deleted = collector.run_once();
    ASSERT_TRUE(deleted.is_ok()) << deleted.status().to_string();
    EXPECT_EQ(*deleted, expected[pass].first) << "pass " << pass;
    EXPECT_EQ(collector.last_pass_saturated(), expected[pass].second) << "pass " << pass;
    rate.record_pass(static_cast<int64_t>(pass + 1) * 200 * kMs, *deleted, collector.last_pass_saturated());
  }
  // Two saturated passes of 20 deletes, 200 ms each: 100 a second, measured.
  const ReclaimCapacity capacity = rate.node_capacity();
  EXPECT_TRUE(capacity.measured);
  EXPECT_DOUBLE_EQ(capacity.items_per_second, 100);
}

}  // namespace
}  // namespace mayfly::node
