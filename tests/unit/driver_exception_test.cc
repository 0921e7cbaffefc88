// An exception escaping a handler on the driver thread (std::bad_alloc, a kj::Exception, anything) must not end the
// process without a word: Driver::run() — what mayflyd's main runs — logs the cause (critical), stops the node as
// after a storage failure (failed(), so main exits 1) and returns; the store then closes cleanly and reopens.
#include <gtest/gtest.h>
#include <kj/exception.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

#include "common/clock.h"
#include "metrics/metrics.h"
#include "node/driver.h"
#include "node/ru_account.h"
#include "storage/replica.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::node {
namespace {

class DriverExceptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink_));
    config_.id = NodeId(1);
    config_.data_dir = dir_.path();
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }

  storage::ReplicaOptions replica_options() const {
    storage::ReplicaOptions options;
    options.data_dir = dir_.path();
    options.raft.self = NodeId(1);
    options.bootstrap.voters.insert(NodeId(1));
    options.background_snapshots = true;
    return options;
  }

  // Runs a driver whose io() has `throwing` posted; returns whether it stopped as failed.
  template <typename Throw>
  bool run_driver_that_throws(Throw throwing) {
    auto replica = storage::Replica::open(replica_options());
    EXPECT_TRUE(replica.is_ok()) << replica.status().to_string();
    if (!replica.is_ok()) return false;
    SystemClock clock;
    metrics::Metrics metrics(1);
    RequestUnitAccount request_units(clock, metrics);
    Driver driver(config_, std::move(replica).value(), clock, metrics, request_units);
    bool ran_after = false;
    boost::asio::post(driver.io(), throwing);
    boost::asio::post(driver.io(), [&] { ran_after = true; });
    driver.run();  // returns: the exception did not escape, and the loop did not go on
    EXPECT_FALSE(ran_after);
    return driver.failed();
  }  // the driver and its store close here

  void expect_store_reopens() {
    auto reopened = storage::Replica::open(replica_options());
    EXPECT_TRUE(reopened.is_ok()) << reopened.status().to_string();
  }

  storage::testing::TempDir dir_;
  NodeConfig config_;
  std::ostringstream log_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(DriverExceptionTest, BadAllocStopsTheNodeWithTheCauseInTheLog) {
  EXPECT_TRUE(run_driver_that_throws([] { throw std::bad_alloc(); }));
  EXPECT_NE(log_.str().find("uncaught exception on the driver thread"), std::string::npos) << log_.str();
  EXPECT_NE(log_.str().find("bad_alloc"), std::string::npos) << log_.str();
  EXPECT_NE(log_.str().find("critical"), std::string::npos) << log_.str();
  expect_store_reopens();
}

TEST_F(DriverExceptionTest, KjExceptionStopsTheNodeWithItsDescription) {
  EXPECT_TRUE(run_driver_that_throws([] {
    throw kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::heapString("peer stream broke"));
  }));
  EXPECT_NE(log_.str().find("kj::Exception"), std::string::npos) << log_.str();
  EXPECT_NE(log_.str().find("peer stream broke"), std::string::npos) << log_.str();
  expect_store_reopens();
}

TEST_F(DriverExceptionTest, AnythingThrownStopsTheNode) {
  EXPECT_TRUE(run_driver_that_throws([] { throw 42; }));
  EXPECT_NE(log_.str().find("unknown type"), std::string::npos) << log_.str();
  expect_store_reopens();
}

}  // namespace
}  // namespace mayfly::node
