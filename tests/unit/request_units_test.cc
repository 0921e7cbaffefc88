// Request-unit charges (docs/ttl.md §8) and the collector's budget math (docs/ttl.md §7).
#include <gtest/gtest.h>

#include <limits>

#include "ttl/request_units.h"

namespace mayfly::ttl {
namespace {

constexpr int64_t kMs = 1000;

TEST(Charges, ReadsCostOnePerKilobyteAndStrongDoubles) {
  EXPECT_EQ(read_charge(0, false), 1);
  EXPECT_EQ(read_charge(1024, false), 1);
  EXPECT_EQ(read_charge(1025, false), 2);
  EXPECT_EQ(read_charge(10 * 1024, false), 10);
  EXPECT_EQ(read_charge(1024, true), 2);
  EXPECT_EQ(read_charge(3000, true), 6);
}

TEST(Charges, WritesCostFivePerKilobyte) {
  EXPECT_EQ(write_charge(10), 5);
  EXPECT_EQ(write_charge(1024), 5);
  EXPECT_EQ(write_charge(1025), 10);
  EXPECT_EQ(write_charge(2 * 1024 * 1024), 5 * 2048);
  EXPECT_EQ(ttl_delete_charge(500), write_charge(500));
  EXPECT_GT(kFailedRequestCharge, 0);
}

TEST(Charges, AReadRequestPaysForWhatItReturnedOrItsQueryWork) {
  EXPECT_EQ(read_request_charge(false, 40, 5000, true), kFailedRequestCharge);  // failed: 1 RU, whatever else
  EXPECT_EQ(read_request_charge(true, 0, 3000, false), 3);                     // by the body size
  EXPECT_EQ(read_request_charge(true, 0, 3000, true), 6);
  EXPECT_EQ(read_request_charge(true, 7.5, 3000, false), 7.5);  // a query: its work charge, not the body
  EXPECT_EQ(read_request_charge(true, 7.5, 3000, true), 15);
}

TEST(Charges, AnAppliedWritePaysForTheLargerOfCommandAndItem) {
  EXPECT_EQ(write_request_charge(false, 5000, 5000), kFailedRequestCharge);
  EXPECT_EQ(write_request_charge(true, 100, 3000), write_charge(3000));
  EXPECT_EQ(write_request_charge(true, 3000, 100), write_charge(3000));
}

TEST(Meter, CountsTheLastSecondOnly) {
  RequestUnitMeter meter;
  const int64_t t0 = 1'700'000'000'000'000;
  meter.add(t0, 100);
  meter.add(t0 + 500 * kMs, 50);
  EXPECT_EQ(meter.consumed(t0 + 500 * kMs), 150);
  EXPECT_EQ(meter.consumed(t0 + 999 * kMs), 150);
  EXPECT_EQ(meter.consumed(t0 + 1000 * kMs), 50) << "the first slot has left the window";
  EXPECT_EQ(meter.consumed(t0 + 1500 * kMs), 0);
  EXPECT_EQ(meter.consumed(t0 + 60'000 * kMs), 0) << "a long idle gap clears everything";
}

TEST(Meter, AClockStepBackIsCountedNotLost) {
  RequestUnitMeter meter;
  const int64_t t0 = 1'700'000'000'000'000;
  meter.add(t0, 10);
  meter.add(t0 - 5000 * kMs, 7);
  EXPECT_EQ(meter.consumed(t0), 17);
}

TEST(Meter, RetryAfterIsWhenEnoughOfTheWindowHasExpired) {
  RequestUnitMeter meter;
  const int64_t t0 = 1'700'000'000'000'000;  // a slot boundary
  meter.add(t0, 300);                      // slot 0
  meter.add(t0 + 400 * kMs, 100);          // slot 4
  // Limit 400: a request of 50 fits only when slot 0 (300 RU) expires, at t0 + 1000 ms.
  EXPECT_EQ(meter.micros_until_fits(t0 + 450 * kMs, 50, 400), 550 * kMs);
  // Asking for more than the limit allows can never fit: the whole window.
  EXPECT_EQ(meter.micros_until_fits(t0 + 450 * kMs, 500, 400), RequestUnitMeter::kWindowMicros);
  // Something that already fits: the minimum of 1 ms.
  EXPECT_EQ(meter.micros_until_fits(t0 + 450 * kMs, 0, 1000), 1 * kMs);
}

TEST(Budget, CollectorSpendsOnlyWhatUsersLeft) {
  EXPECT_EQ(spare_request_units(400, 100, 50), 250);
  EXPECT_EQ(spare_request_units(400, 400, 0), 0) << "under full load the collector gets nothing";
  EXPECT_EQ(spare_request_units(400, 500, 0), 0) << "never negative";
  EXPECT_EQ(affordable_deletes(250, 100, 1000), 50u);  // 5 RU per small item
  EXPECT_EQ(affordable_deletes(250, 100, 10), 10u);
  EXPECT_EQ(affordable_deletes(4, 100, 10), 0u);
  EXPECT_EQ(affordable_deletes(100, 3000, 10), 6u);  // 15 RU per 3 KB item
  // Serverless containers have an unlimited budget: the batch ceiling applies (this once converted infinity to an
  // integer, which is undefined and came out as 0: serverless backlogs never drained).
  EXPECT_EQ(affordable_deletes(std::numeric_limits<double>::infinity(), 100, 1000), 1000u);
  EXPECT_EQ(affordable_deletes(1e30, 100, 1000), 1000u);
  EXPECT_EQ(affordable_deletes(std::numeric_limits<double>::quiet_NaN(), 100, 1000), 0u);
}

}  // namespace
}  // namespace mayfly::ttl
