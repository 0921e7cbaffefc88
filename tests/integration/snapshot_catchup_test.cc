// A wiped follower catches up from a streamed snapshot while writes go on (issue #31), on real processes: it is
// killed in the middle of installing the snapshot, restarted, finishes the install from the snapshot file, catches up
// from the log, and then holds exactly the leader's replicated state — backups of the two nodes at the same applied
// index are equal byte for byte (every replicated key: items, indexes, the exactly-once table, feed records).
//
// ctest -L integration loads 100,000 1 KB items (about 110 MB of snapshot); MAYFLY_IT_CATCHUP_ITEMS sets the size, e.g.
// 1000000 for the full run of docs/tests.md. The kill comes a few milliseconds after the node's snapshot file appears
// (the install starts right after it is persisted), and the restart's log says whether it redid an install that had
// begun; when the kill came before the install began or after it ended, the node is wiped and the attempt repeated
// with another delay (at most eight attempts).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;
using client::Response;

constexpr const char* kDb = "catchup";

bool has_snapshot_file(const std::string& data_dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir + "/snapshots", error)) {
    if (entry.path().filename().string().rfind("snapshot-", 0) == 0) return true;
  }
  return false;
}

// The body of a backup file (between its 48-byte header and 64-byte trailer: storage/backup_file.h), compared
// piecewise; an empty string when they are equal, else where they first differ.
std::string compare_backup_bodies(const std::string& a, const std::string& b) {
  const uint64_t size_a = std::filesystem::file_size(a);
  const uint64_t size_b = std::filesystem::file_size(b);
  if (size_a != size_b) return "sizes differ: " + std::to_string(size_a) + " and " + std::to_string(size_b);
  std::ifstream in_a(a, std::ios::binary), in_b(b, std::ios::binary);
  in_a.seekg(48);
  in_b.seekg(48);
  std::string piece_a(1 << 20, '\0'), piece_b(1 << 20, '\0');
  uint64_t offset = 48;
  while (offset < size_a - 64) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece_a.size(), size_a - 64 - offset));
    in_a.read(piece_a.data(), static_cast<std::streamsize>(n));
    in_b.read(piece_b.data(), static_cast<std::streamsize>(n));
    if (!in_a || !in_b) return "read failed at offset " + std::to_string(offset);
    if (std::memcmp(piece_a.data(), piece_b.data(), n) != 0) {
      return "bodies differ in the MB at offset " + std::to_string(offset);
    }
    offset += n;
  }
  return "";
}

TEST(SnapshotCatchUp, AWipedFollowerKilledMidInstallFinishesItAndThenEqualsTheLeader) {
  const uint64_t items = testing_env::env_or("MAYFLY_IT_CATCHUP_ITEMS", testing_env::size_for_build(100'000, 20'000));
  const uint64_t seed = test_seed();
  std::cerr << "[catchup] seed " << seed << " (MAYFLY_IT_SEED), " << items << " items of 1 KB\n";
  ClusterOptions options{.name = "catchup"};
  // No idle time entries (the leader appends one every 100 ms by default), so the log comes to rest when the writes
  // stop and two nodes' backups can be taken at the same index.
  options.extra_flags = {"--checkpoint-interval-entries", "5000", "--time-entry-ms", "3600000"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client c(cluster.client_options());
  ASSERT_EQ(c.execute(db_req(Op::kCreateDatabase, kDb)).status, 201);
  ASSERT_EQ(c.execute(create_container(kDb, "items", "/pk")).status, 201);
  ASSERT_EQ(c.execute(create_container(kDb, "during", "/pk")).status, 201);

  // The load: 1 KB items, 256 requests at a time.
  const std::string padding(960, 'x');
  const auto load_started = Clock::now();
  for (uint64_t next = 0; next < items;) {
    std::vector<Request> batch;
    for (; next < items && batch.size() < 256; ++next) {
      batch.push_back(item_write(Op::kUpsertItem, kDb, "items",
                                 "{\"id\":\"i" + std::to_string(next) + "\",\"pk\":\"p" + std::to_string(next % 97) +
                                     "\",\"pad\":\"" + padding + "\"}"));
    }
    for (const Response& r : c.execute_all(batch)) ASSERT_TRUE(r.ok()) << r.status << " " << r.body;
  }
  std::cerr << "[catchup] loaded " << items << " items in "
            << std::chrono::duration<double>(Clock::now() - load_started).count() << " s\n";

  leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t follower = leader == 3 ? 2 : 3;
  const size_t other = 6 - leader - follower;
  // Writes go on through the whole catch-up, to the two nodes that stay (bounded: 2,000,000 writes at most).
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {
    client::ClientOptions two = cluster.client_options();
    two.endpoints = {cluster.endpoint(leader), cluster.endpoint(other)};
    client::Client load(two);
    for (uint64_t v = 0; !stop.load() && v < 2'000'000; ++v) {
      const Response r = load.execute(item_write(Op::kUpsertItem, kDb, "during",
                                                 "{\"id\":\"d" + std::to_string(v % 5000) + "\",\"pk\":\"p\",\"v\":" +
                                                     std::to_string(v) + "}"));
      if (r.ok()) written.fetch_add(1);
    }
  });
  StopAndJoin stop_writer{stop, writer};

  bool redone = false;
  const int delays_ms[] = {20, 60, 120, 200, 40, 90, 160, 300};
  for (int attempt = 1; attempt <= 8 && !redone; ++attempt) {
    ASSERT_TRUE(cluster.stop_node(follower));
    cluster.wipe_node(follower);
    ASSERT_TRUE(cluster.start_node(follower));
    const auto started = Clock::now();
    // The snapshot file appears when the follower has persisted the whole snapshot; the install begins at once.
    ASSERT_TRUE(wait_until([&] { return has_snapshot_file(cluster.data_dir(follower)); }, milliseconds(600'000),
                           milliseconds(2)))
        << "node " << follower << " never received a snapshot";
    const double received = std::chrono::duration<double>(Clock::now() - started).count();
    std::this_thread::sleep_for(milliseconds(delays_ms[attempt - 1]));
    cluster.kill_node(follower);
    std::cerr << "[catchup] attempt " << attempt << ": node " << follower << " received the snapshot in " << received
              << " s and was killed (SIGKILL) " << delays_ms[attempt - 1] << " ms later\n";
    const size_t log_bytes = cluster.log_text(follower).size();
    ASSERT_TRUE(cluster.start_node(follower));
    const std::string restart_log = cluster.log_text(follower).substr(log_bytes);
    redone = restart_log.find("redid the install of the snapshot") != std::string::npos;
    const bool before = restart_log.find("did the install of the snapshot") != std::string::npos;
    std::cerr << "[catchup] the restart "
              << (redone   ? "redid the install the kill interrupted"
                  : before ? "did the install the kill came before"
                           : "found the install done")
              << "\n";
  }
  ASSERT_TRUE(redone) << "no kill landed in the middle of an install in eight attempts (the install was too quick "
                         "to catch: raise MAYFLY_IT_CATCHUP_ITEMS)";

  // It catches up while writes go on, then the writes stop and every node reaches the same applied index.
  const auto restarted = Clock::now();
  std::optional<NodeStatus> target = cluster.status(leader);
  ASSERT_TRUE(target.has_value());
  ASSERT_TRUE(cluster.wait_applied(follower, target->commit, milliseconds(600'000)));
  std::cerr << "[catchup] node " << follower << " reached index " << target->commit << " "
            << std::chrono::duration<double>(Clock::now() - restarted).count() << " s after its restart; "
            << written.load() << " writes during the catch-up\n";
  stop = true;
  writer.join();
  EXPECT_GT(written.load(), 0u);
  leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  // Quiet: the leader's commit index no longer moves and both nodes applied it.
  uint64_t commit = 0;
  std::string seen;
  ASSERT_TRUE(wait_until(
      [&] {
        const std::optional<NodeStatus> now = cluster.status(leader);
        const std::optional<NodeStatus> there = cluster.status(follower);
        if (!now || !there) return false;
        seen = "leader commit " + std::to_string(now->commit) + " applied " + std::to_string(now->applied) +
               ", follower applied " + std::to_string(there->applied);
        const bool still = now->commit == commit;
        commit = now->commit;
        return still && there->applied == commit && now->applied == commit;
      },
      milliseconds(60'000), milliseconds(500)))
      << "the cluster did not come to rest: " << seen;

  // Both nodes' replicated state at that index, as backups.
  const std::string from_leader = cluster.dir() + "/leader.mfb";
  const std::string from_follower = cluster.dir() + "/follower.mfb";
  const CliResult a = cluster.cli({"backup", "create", "--out", from_leader, "--node", std::to_string(leader)});
  const CliResult b = cluster.cli({"backup", "create", "--out", from_follower, "--node", std::to_string(follower)});
  ASSERT_EQ(a.exit_code, 0) << a.describe();
  ASSERT_EQ(b.exit_code, 0) << b.describe();
  ASSERT_NE(a.body(), nullptr);
  ASSERT_NE(b.body(), nullptr);
  EXPECT_EQ(a.body()->at("appliedIndex").to_number<uint64_t>(), b.body()->at("appliedIndex").to_number<uint64_t>());
  EXPECT_EQ(a.body()->at("items").to_number<uint64_t>(), b.body()->at("items").to_number<uint64_t>());
  EXPECT_GE(a.body()->at("items").to_number<uint64_t>(), items);
  EXPECT_EQ(compare_backup_bodies(from_leader, from_follower), "");
  std::cerr << "[catchup] backups of nodes " << leader << " and " << follower << " at index "
            << a.body()->at("appliedIndex").to_number<uint64_t>() << ": "
            << a.body()->at("items").to_number<uint64_t>() << " items, equal byte for byte\n";
  size_t exports = 0;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const std::string text = cluster.log_text(n);
    for (size_t at = text.find("needs a snapshot: exporting"); at != std::string::npos;
         at = text.find("needs a snapshot: exporting", at + 1)) {
      ++exports;
    }
  }
  std::cerr << "[catchup] snapshots exported for the follower: " << exports << "\n";
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

}  // namespace
}  // namespace mayfly::it
