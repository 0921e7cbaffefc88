// The node's request-unit account: throttling decisions for provisioned containers, none for serverless ones, and
// the collector's budget — what users leave over, minus what the collector already spent.
#include <gtest/gtest.h>

#include <cmath>

#include "common/clock.h"
#include "node/ru_account.h"

namespace mayfly::node {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000;
const storage::Throughput kProvisioned100{storage::Throughput::Mode::kProvisioned, 100};
const storage::Throughput kServerless{storage::Throughput::Mode::kServerless, 0};

TEST(RequestUnitAccount, ThrottlesAProvisionedContainerOverItsBudget) {
  ManualClock clock(kT0);
  metrics::Metrics metrics(1);
  RequestUnitAccount account(clock, metrics);
  EXPECT_EQ(account.throttle_ms("db/c", kProvisioned100, 5), 0);
  account.charge("db/c", "create", 95);
  EXPECT_EQ(account.throttle_ms("db/c", kProvisioned100, 5), 0) << "exactly the budget still fits";
  account.charge("db/c", "create", 5);
  const int64_t wait = account.throttle_ms("db/c", kProvisioned100, 5);
  EXPECT_GT(wait, 0);
  EXPECT_LE(wait, 1000);
  clock.advance_micros(wait * 1000);
  EXPECT_EQ(account.throttle_ms("db/c", kProvisioned100, 5), 0) << "after the retry-after it fits";
  EXPECT_NE(metrics.scrape_text().find("mayfly_requests_throttled_total{container=\"db/c\",node=\"1\"} 1"),
            std::string::npos);
}

TEST(RequestUnitAccount, ContainersSharingADatabasesThroughputShareOneBudget) {
  ManualClock clock(kT0);
  metrics::Metrics metrics(1);
  RequestUnitAccount account(clock, metrics);
  const storage::Throughput shared{storage::Throughput::Mode::kShared, 100};
  EXPECT_EQ(account.throttle_ms("db/a", shared, 5), 0);
  EXPECT_EQ(account.throttle_ms("db/b", shared, 5), 0);
  account.charge("db/a", "create", 60);
  account.charge("db/b", "create", 35);
  account.charge("other/a", "create", 1000);  // another database's container with the same name: not in the pool
  EXPECT_EQ(account.throttle_ms("db/b", shared, 5), 0) << "95 + 5 is the database's budget exactly";
  account.charge("db/a", "create", 5);
  EXPECT_GT(account.throttle_ms("db/b", shared, 5), 0) << "a used the pool up for b too";
  EXPECT_GT(account.throttle_ms("db/a", shared, 5), 0);
  EXPECT_EQ(account.collector_budget("db/b", shared), 0) << "users wanted more than the pool: nothing is spare";
  // A container with its own throughput in the same database is not in the pool.
  EXPECT_EQ(account.throttle_ms("db/own", kProvisioned100, 5), 0);
  clock.advance_micros(2'000'000);
  account.charge("db/a", "read", 30);
  EXPECT_EQ(account.collector_budget("db/b", shared), 70) << "the pool's spare, whichever container asks";
  account.collector_spent("db/b", shared, 20);
  EXPECT_EQ(account.collector_budget("db/a", shared), 50);
  // Dropping every sharing container drops the pool.
  account.retain({"db/own"});
  EXPECT_EQ(account.meter_count(), 1u);
}

TEST(RequestUnitAccount, ServerlessIsNeverThrottled) {
  ManualClock clock(kT0);
  metrics::Metrics metrics(1);
  RequestUnitAccount account(clock, metrics);
  account.charge("db/s", "create", 1e9);
  EXPECT_EQ(account.throttle_ms("db/s", kServerless, 5), 0);
}

TEST(RequestUnitAccount, ARequestBiggerThanTheBudgetPassesWhenTheSecondIsEmpty) {
  ManualClock clock(kT0);
  metrics::Metrics metrics(1);
  RequestUnitAccount account(clock, metrics);
  EXPECT_EQ(account.throttle_ms("db/c", kProvisioned100, 500), 0) << "a 100 KB write on 100 RU/s must not starve";
}

TEST(RequestUnitAccount, CollectorGetsOnlyTheSpareUnits) {
  ManualClock clock(kT0);
  metrics::Metrics metrics(1);
  RequestUnitAccount account(clock, metrics);
  account.charge("db/c", "read", 60);
  EXPECT_EQ(account.collector_budget("db/c", kProvisioned100), 40);
  account.collector_spent("db/c", kProvisioned100, 30);
  EXPECT_EQ(account.collector_budget("db/c", kProvisioned100), 10);
  EXPECT_EQ(account.throttle_ms("db/c", kProvisioned100, 40), 0)
      << "the collector's spending never throttles users: 60 + 40 fits although it spent 30";
  account.charge("db/c", "read", 40);
  EXPECT_EQ(account.collector_budget("db/c", kProvisioned100), 0) << "under full load the collector waits";
  clock.advance_micros(1'000'000);
  EXPECT_EQ(account.collector_budget("db/c", kProvisioned100), 100);
  const std::string text = metrics.scrape_text();
  EXPECT_NE(text.find("mayfly_ttl_gc_ru_spent_total{container=\"db/c\",node=\"1\"} 30"), std::string::npos) << text;
  EXPECT_EQ(text.find("op=\"ttl_delete\""), std::string::npos) << "free for provisioned containers";
}

TEST(RequestUnitAccount, ThrottledDemandLeavesTheCollectorNothingForAWholeWindow) {
  ManualClock clock(kT0);
  metrics::Metrics metrics(1);
  RequestUnitAccount account(clock, metrics);
  account.charge("db/c", "write", 95);
  EXPECT_EQ(account.collector_budget("db/c", kProvisioned100), 5);
  EXPECT_GT(account.throttle_ms("db/c", kProvisioned100, 10), 0) << "95 + 10 is over 100";
  EXPECT_EQ(account.collector_budget("db/c", kProvisioned100), 0)
      << "users asked for more than the budget: the 5 RU the meter shows are not spare";
  clock.advance_micros(999'999);
  EXPECT_EQ(account.collector_budget("db/c", kProvisioned100), 0) << "still within the second of the 429";
  clock.advance_micros(1);
  EXPECT_EQ(account.collector_budget("db/c", kProvisioned100), 100) << "a quiet second later everything is spare";
  EXPECT_EQ(account.collector_budget("db/other", kProvisioned100), 100) << "throttling is per container";
}

TEST(RequestUnitAccount, ServerlessTtlDeletesCountAsConsumed) {
  ManualClock clock(kT0);
  metrics::Metrics metrics(1);
  RequestUnitAccount account(clock, metrics);
  EXPECT_TRUE(std::isinf(account.collector_budget("db/s", kServerless)));
  account.collector_spent("db/s", kServerless, 25);
  EXPECT_NE(metrics.scrape_text().find("mayfly_ru_consumed_total{container=\"db/s\",node=\"1\",op=\"ttl_delete\"} 25"),
            std::string::npos);
}

}  // namespace
}  // namespace mayfly::node
