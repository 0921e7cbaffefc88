// The collector's reclaim capacity for the TTL forecast (node/forecast.h ReclaimRate): measured from the passes of
// the last minute that left expired items behind, else estimated from the configuration; capped per container by its
// batch ceiling and, provisioned, its RU/s.
#include <gtest/gtest.h>

#include "node/collector.h"
#include "node/forecast.h"
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

}  // namespace
}  // namespace mayfly::node
