// Disk faults against real mayflyd processes (label `hostile`), injected by a test-only LD_PRELOAD library
// (eio_shim.c, never part of mayflyd) while a trigger file exists in the node's data directory:
// - snapshot reads fail with EIO: a wiped follower needs the leader's snapshot; the leader must not abort (it did: an
//   always-on assert that every snapshot read error is NotFound), must log and count the failure, and the follower
//   must get the snapshot once the fault clears;
// - LevelDB fsyncs fail with EIO: the node stops cleanly — the cause in its log, exit status 1, no abort — the rest
//   of the cluster goes on, and the node restarts fine once the disk is healthy.
// - Raft log reads fail with EIO (opening the WAL's segment files for reading fails): the leader, sending a restarted follower the entries it missed, must stop cleanly with
//   the read and the error in its log (it aborted: an always-on assert on every log read error), answer what was
//   pending, and the other two go on with a leader of their own.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "common/prng.h"

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;
using client::Response;

void setup(client::Client& c) {
  ASSERT_EQ(c.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
  ASSERT_EQ(c.execute(create_container("d", "c", "/pk")).status, 201);
}

void write_items(client::Client& c, int64_t from, int64_t to) {
  for (int64_t start = from; start < to; start += 100) {
    std::vector<Request> batch;
    for (int64_t s = start; s < std::min(to, start + 100); ++s) {
      Request r;
      r.operation = api::make_operation(Op::kUpsertItem);
      r.database = "d";
      r.container = "c";
      test::body_of(r) = R"({"id":"i)" + std::to_string(s) + R"(","pk":"p","seq":)" + std::to_string(s) + "}";
      batch.push_back(std::move(r));
    }
    const std::vector<Response> responses = c.execute_all(batch);
    for (size_t i = 0; i < responses.size(); ++i) {
      ASSERT_TRUE(responses[i].ok()) << "write " << start + static_cast<int64_t>(i) << ": " << responses[i].status
                                     << " " << responses[i].message;
    }
  }
}

TEST(HostileDiskFaults, LeaderSurvivesSnapshotReadEioAndTheFollowerGetsItAfterwards) {
  Cluster cluster({.name = "eio",
                   .extra_flags = {"--checkpoint-interval-entries", "200"},
                   .extra_env = {std::string("LD_PRELOAD=") + MAYFLY_IT_EIO_SHIM},
                   .metrics = true});
  ASSERT_TRUE(cluster.start());
  uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client c(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(setup(c));
  // Past the 2000 entries kept behind a snapshot, so the leader's log no longer starts at 1.
  ASSERT_NO_FATAL_FAILURE(write_items(c, 0, 2400));
  leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t follower = leader == 1 ? 2 : 1;
  ASSERT_TRUE(cluster.stop_node(follower));
  cluster.wipe_node(follower);
  // Every node but the wiped one cannot read its snapshot files (whichever of them leads).
  for (size_t n = 1; n <= cluster.size(); ++n) {
    if (n != follower) std::ofstream(cluster.data_dir(n) + "/fail-snapshot-reads") << "test\n";
  }
  ASSERT_TRUE(cluster.start_node(follower));

  // The leader tries, fails, counts and logs — and keeps running and serving writes.
  const bool counted = wait_until(
      [&] {
        std::optional<Scrape> scrape = cluster.scrape(leader);
        return scrape && scrape->sum("mayfly_raft_snapshot_errors_total", {{"kind", "read"}}) >= 3;
      },
      milliseconds(10000), milliseconds(100));
  if (!counted) cluster.dump_logs(40);
  ASSERT_TRUE(counted) << "the leader did not count failed snapshot reads";
  EXPECT_NE(cluster.log_text(leader).find("snapshot transfer failed"), std::string::npos);
  EXPECT_NE(cluster.log_text(leader).find("Input/output error"), std::string::npos);
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.running(n)) << "node " << n << " exited";
  ASSERT_NO_FATAL_FAILURE(write_items(c, 2400, 2500));
  // The wiped node (restarted with the bootstrap flags) has at most its bootstrap entries: no snapshot.
  std::optional<Scrape> stuck = cluster.scrape(follower);
  ASSERT_TRUE(stuck.has_value());
  EXPECT_LT(stuck->sum("mayfly_raft_applied_index"), 100) << "the follower cannot have the snapshot yet";

  // The disk recovers: the next retry sends the snapshot.
  for (size_t n = 1; n <= cluster.size(); ++n) std::filesystem::remove(cluster.data_dir(n) + "/fail-snapshot-reads");
  leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  std::optional<NodeStatus> target = cluster.status(leader);
  ASSERT_TRUE(target.has_value());
  const bool caught_up = cluster.wait_applied(follower, target->commit, milliseconds(15000));
  if (!caught_up) cluster.dump_logs(40);
  EXPECT_TRUE(caught_up) << "the follower did not get the snapshot after the fault cleared";
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n)) << "node " << n;
}

TEST(HostileDiskFaults, LogFsyncEioStopsTheNodeCleanlyWithTheCause) {
  Cluster cluster({.name = "fsync", .extra_env = {std::string("LD_PRELOAD=") + MAYFLY_IT_EIO_SHIM}});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client c(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(setup(c));
  ASSERT_NO_FATAL_FAILURE(write_items(c, 0, 100));

  std::ofstream(cluster.data_dir(leader) + "/fail-db-syncs") << "test\n";
  // The next log write on the leader fails its fdatasync: the node must stop by itself.
  const bool stopped = wait_until(
      [&] {
        Request r;
        r.operation = api::make_operation(Op::kUpsertItem);
        r.database = "d";
        r.container = "c";
        test::body_of(r) = R"({"id":"late","pk":"p"})";
        (void)c.execute(r);  // its outcome may be unknown (503): the leader dies while writing it
        return !cluster.running(leader);
      },
      milliseconds(15000), milliseconds(50));
  ASSERT_TRUE(stopped) << "the leader kept running with a failing disk";
  const std::optional<int> status = cluster.exit_status(leader);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status) << " (an abort is not a clean stop)";
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  const std::string log = cluster.log_text(leader);
  EXPECT_NE(log.find("storage failure, stopping this node"), std::string::npos) << log;
  EXPECT_NE(log.find("Input/output error"), std::string::npos);
  EXPECT_NE(log.find("closing the store"), std::string::npos);
  EXPECT_EQ(log.find("assertion failed"), std::string::npos);

  // The others carry on; the node comes back once its disk is healthy (no abort loop) and catches up.
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_NO_FATAL_FAILURE(write_items(c, 100, 200));
  std::filesystem::remove(cluster.data_dir(leader) + "/fail-db-syncs");
  ASSERT_TRUE(cluster.start_node(leader));
  const uint64_t now_leading = cluster.wait_for_leader();
  ASSERT_NE(now_leading, 0u);
  std::optional<NodeStatus> target = cluster.status(now_leading);
  ASSERT_TRUE(target.has_value());
  EXPECT_TRUE(cluster.wait_applied(leader, target->commit, milliseconds(15000)));
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n)) << "node " << n;
}

// An item of ~32 KB of random base64 (seeded).
std::string random_item(const std::string& id, Prng& prng) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string blob(32 * 1024, 'A');
  for (char& c : blob) c = kAlphabet[prng.uniform(64)];
  return R"({"id":")" + id + R"(","pk":"p","blob":")" + blob + R"("})";
}

TEST(HostileDiskFaults, LogReadEioStopsTheLeaderCleanlyAndTheOthersGoOn) {
  const uint64_t seed = test_seed();
  std::cout << "seed " << seed << " (replay: MAYFLY_IT_SEED=" << seed
            << " ctest -R LogReadEioStopsTheLeaderCleanlyAndTheOthersGoOn)" << std::endl;
  Prng prng(seed);
  Cluster cluster({.name = "logread",
                   .extra_flags = {"--log-cache-bytes", "0"},
                   .extra_env = {std::string("LD_PRELOAD=") + MAYFLY_IT_EIO_SHIM}});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client c(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(setup(c));

  // A follower misses what comes next. The leader runs with --log-cache-bytes 0: it keeps none of its newest entries
  // in memory, so sending them to the follower reads them from its WAL's segment files.
  const size_t follower = leader == 1 ? 2 : 1;
  ASSERT_TRUE(cluster.stop_node(follower));
  constexpr int64_t kWritten = 64;
  for (int64_t written = 0; written < kWritten; written += 16) {
    std::vector<Request> batch;
    for (int i = 0; i < 16; ++i) {
      batch.push_back(item_write(Op::kUpsertItem, "d", "c", random_item("big" + std::to_string(written + i), prng)));
    }
    for (const Response& response : c.execute_all(batch)) {
      EXPECT_TRUE(response.ok()) << response.status << " " << response.message;
    }
  }
  std::cout << kWritten << " items of 32 KB written while node " << follower << " was down" << std::endl;
  // Everything applied on the leader, so what reads its log next is the follower's catch-up.
  std::optional<NodeStatus> before = cluster.status(leader);
  ASSERT_TRUE(before.has_value());
  ASSERT_TRUE(cluster.wait_applied(leader, before->commit));

  // The leader's disk can no longer read its log's segments — which it reads to send the follower what it missed (at
  // its next probe of the follower, down or back).
  std::ofstream(cluster.data_dir(leader) + "/fail-log-reads") << "test\n";
  std::atomic<bool> stop_writing{false};
  std::vector<std::pair<uint16_t, int64_t>> pinned;  // status, ms: writes sent to the failing leader only
  std::map<uint16_t, std::string> pinned_messages;    // the first message per status
  std::thread writer([&] {
    client::ClientOptions options = cluster.client_options();
    options.endpoints = {cluster.endpoint(leader)};
    options.max_retries_unavailable = 0;
    client::Client to_leader(options);
    for (int i = 0; !stop_writing.load() && i < 100000; ++i) {
      const auto started = Clock::now();
      const Response response = to_leader.execute(
          item_write(Op::kUpsertItem, "d", "c", R"({"id":"w)" + std::to_string(i) + R"(","pk":"p"})"));
      pinned.emplace_back(response.status, std::chrono::duration_cast<milliseconds>(Clock::now() - started).count());
      pinned_messages.emplace(response.status, response.message);
      if (!response.ok()) std::this_thread::sleep_for(milliseconds(5));  // the node is going or gone: do not spin
    }
  });
  ASSERT_TRUE(cluster.start_node(follower));
  const bool stopped = wait_until([&] { return !cluster.running(leader); }, milliseconds(20000), milliseconds(50));
  std::this_thread::sleep_for(milliseconds(300));  // a few more writes see the node gone, not hanging
  stop_writing = true;
  writer.join();
  if (!stopped) cluster.dump_logs(40);
  ASSERT_TRUE(stopped) << "the leader kept running although it could not read its log";
  const std::optional<int> status = cluster.exit_status(leader);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status) << " (an abort is not a clean stop)";
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  const std::string log = cluster.log_text(leader);
  EXPECT_NE(log.find("storage failure, stopping this node: IoError: Raft log entries ["), std::string::npos) << log;
  EXPECT_NE(log.find("/wal/"), std::string::npos) << log;
  EXPECT_NE(log.find("Input/output error"), std::string::npos) << log;
  EXPECT_NE(log.find("closing the store"), std::string::npos);
  EXPECT_EQ(log.find("assertion failed"), std::string::npos);

  // Every write sent to the failing leader was answered — before, or with 503 as it stopped, or refused once it was
  // gone — none waited for the client's timeout (408).
  int64_t slowest = 0;
  std::map<uint16_t, int> by_status;
  for (const auto& [answer, ms] : pinned) {
    ++by_status[answer];
    slowest = std::max(slowest, ms);
  }
  std::cout << pinned.size() << " writes pinned to the failing leader; slowest " << slowest << " ms; statuses:";
  for (const auto& [answer, count] : by_status) std::cout << " " << answer << "x" << count;
  std::cout << std::endl;
  for (const auto& [answer, message] : pinned_messages) {
    std::cout << "  first " << answer << ": " << message << std::endl;
  }
  EXPECT_EQ(by_status.count(408), 0u);
  EXPECT_LT(slowest, 5000);

  // The two others elect a leader (the follower catches up from it) and take writes. (A new client: `c`'s connection
  // to the stopped node would make its next write's outcome unknown.)
  const uint64_t now_leading = cluster.wait_for_leader();
  ASSERT_NE(now_leading, 0u);
  EXPECT_NE(now_leading, leader);
  client::Client after(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(write_items(after, 0, 100));
  Request read = item_key(Op::kReadItem, "d", "c", "p", "big0");
  read.options.consistency = client::Consistency::kStrong;
  EXPECT_EQ(after.execute(read).status, 200) << "a write acknowledged before the fault is gone";
  std::optional<NodeStatus> target = cluster.status(now_leading);
  ASSERT_TRUE(target.has_value());
  EXPECT_TRUE(cluster.wait_applied(follower, target->commit, milliseconds(30000)));

  // The disk recovers: the node restarts (no abort loop) and catches up.
  std::filesystem::remove(cluster.data_dir(leader) + "/fail-log-reads");
  ASSERT_TRUE(cluster.start_node(leader));
  EXPECT_TRUE(cluster.wait_applied(leader, target->commit, milliseconds(30000)));
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n)) << "node " << n;
}

}  // namespace
}  // namespace mayfly::it
