// A snapshot job's view of the store belongs to the driver, never to a task queued on its loop: a node that stops
// (a storage failure, a shutdown) while the job's finishing task is still queued must close its store with no view
// open. Found by the fault campaign (seed 1008): a node that hit a full disk right after a background snapshot
// finished died of SIGSEGV instead of exiting 1 — the queued task, destroyed with the loop after the store had
// closed, released its LevelDB snapshot on the closed database.
#include <gtest/gtest.h>

#include <memory>

#include "common/clock.h"
#include "metrics/metrics.h"
#include "node/driver.h"
#include "node/event_loop.h"
#include "storage/replica.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::node {
namespace {

class NullOutput final : public DriverOutput {
 public:
  void deliver(DriverBatch) override {}
};

TEST(DriverSnapshotJob, AStopWithTheJobsFinishStillQueuedLeavesNoViewOfTheStoreOpen) {
  storage::testing::TempDir dir;
  storage::ReplicaOptions options;
  options.data_dir = dir.path();
  options.raft.self = NodeId(1);
  options.bootstrap.voters.insert(NodeId(1));
  options.background_snapshots = true;  // the driver runs the jobs, as in mayflyd
  auto replica = storage::Replica::open(options);
  ASSERT_TRUE(replica.is_ok()) << replica.status().to_string();
  // A snapshot's data is produced when a follower needs it; a single voter has none, so ask for it directly.
  (*replica)->request_snapshot();

  NodeConfig config;
  config.id = NodeId(1);
  config.data_dir = dir.path();
  SystemClock clock;
  metrics::Metrics metrics(1);
  RequestUnitAccount request_units(clock, metrics);
  ManualLoop loop;  // outlives the driver, as an owned loop outlives the replica in mayflyd's driver
  {
    Driver driver(config, std::move(replica).value(), clock, metrics, request_units, &loop);
    NullOutput output;
    // Stop the loop after the first flush that applies an entry (the node has become leader): that flush starts the
    // job (on a simulated loop it exports at once) and queues the task that would finish it.
    driver.set_flush_observer([&](const storage::ReplicaOutput& flushed) {
      if (!flushed.applied.empty()) loop.quit();
    });
    driver.start(output);
    // A single voter elects itself and appends idle time entries; bounded: at most 60 s of simulated time.
    for (int step = 0; step < 600 && driver.replica().state().open_views() == 0; ++step) {
      loop.advance_to(loop.now_micros() + 100'000);
    }
    ASSERT_EQ(driver.replica().state().open_views(), 1) << "the snapshot job never started (applied index "
                                                        << driver.replica().state().applied().index.value() << ")";
    ASSERT_FALSE(loop.idle()) << "its finishing task should still be queued";
    driver.stop();  // as after a storage failure: the loop will not run the queued task
    EXPECT_EQ(driver.replica().state().open_views(), 0) << "the stopped driver left a view of its store open";
  }  // the driver and its store close here (the store asserts no view is open); the loop and its queue after
}

}  // namespace
}  // namespace mayfly::node
