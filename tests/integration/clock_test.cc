// A leader whose wall clock is an hour ahead (libfaketime) must not drag replicated time with it: items with a
// 10-minute TTL written under a correct leader stay readable on every node after leadership moves to the fast node,
// writes keep working with a _ts near the real time, and the leader reports the offset and the hold.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

constexpr size_t kFastNode = 3;
constexpr int64_t kHourSeconds = 3600;
// Cluster time may lead real time by the max offset (0.5 s) plus the skew of the real clocks (none here) and
// rounding to whole seconds; an unbounded leader would be an hour ahead.
constexpr int64_t kSlackSeconds = 5;

// Strong reads of every item pinned to every node; counts the reads that did not answer 200.
int read_everywhere(Cluster& cluster, client::Client& client, const std::vector<std::string>& ids,
                    const std::string& when) {
  int failures = 0;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    for (const std::string& id : ids) {
      Request read = item_key(Op::kReadItem, "d", "c", "p", id);
      read.options.consistency = Consistency::kStrong;
      read.endpoint = n;
      const Response response = client.execute(read);
      if (response.status != 200 && ++failures <= 5) {
        ADD_FAILURE() << when << ": item " << id << " read on node " << n << ": " << response.status << " "
                      << response.message << " (served by " << response.served_by << ")";
      }
    }
  }
  return failures;
}

TEST(IntegrationClock, LeaderClockAnHourAheadDoesNotExpireDataEarly) {
  Cluster cluster({.name = "clock", .clock_offset = {{kFastNode, "+1h"}}, .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u) << "no leader elected";
  // Write under a node with a correct clock.
  ASSERT_TRUE(cluster.transfer_leader(1));
  client::Client client(cluster.client_options());
  Request db;
  db.operation = api::make_operation(Op::kCreateDatabase);
  db.database = "d";
  ASSERT_EQ(client.execute(db).status, 201);
  // defaultTtl -1: TTL on, items expire by their own ttl (without a defaultTtl Cosmos ignores an item's ttl).
  ASSERT_EQ(client.execute(create_container("d", "c", "/pk", "-1")).status, 201);

  std::vector<std::string> ids;
  auto write = [&](const std::string& id, const std::string& when) {
    const Response created =
        client.execute(item_write(Op::kCreateItem, "d", "c", R"({"id":")" + id + R"(","pk":"p","ttl":600})"));
    EXPECT_EQ(created.status, 201) << when << ": " << created.message;
    const int64_t wall_seconds = wall_micros() / 1'000'000;
    EXPECT_LE(created.ts, wall_seconds + kSlackSeconds)
        << when << ": _ts is " << created.ts - wall_seconds << " s ahead of real time";
    EXPECT_GE(created.ts, wall_seconds - kSlackSeconds) << when;
    if (created.status == 201) ids.push_back(id);
  };
  for (int i = 0; i < 10; ++i) write("before-" + std::to_string(i), "under node 1");
  ASSERT_EQ(ids.size(), 10u);

  // The jump: the node an hour ahead leads.
  ASSERT_TRUE(cluster.transfer_leader(kFastNode));
  EXPECT_EQ(read_everywhere(cluster, client, ids, "right after the transfer"), 0);
  for (int i = 0; i < 5; ++i) write("after-" + std::to_string(i), "under the fast leader");

  // A few seconds of time entries and heartbeats from the fast leader. Its clock says every item's expiry is past:
  // it must wait for the quorum's time, not append expiry time entries back to back (idle ones come every 100 ms).
  const std::optional<NodeStatus> before_wait = cluster.status(kFastNode);
  ASSERT_TRUE(before_wait.has_value());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_EQ(cluster.wait_for_leader(milliseconds(2000)), kFastNode) << "the test needs the fast node to lead";
  const std::optional<NodeStatus> after_wait = cluster.status(kFastNode);
  ASSERT_TRUE(after_wait.has_value());
  EXPECT_LT(after_wait->commit - before_wait->commit, 100u) << "time entries back to back";
  std::printf("entries committed in 3 s under the fast leader: %llu\n",
              static_cast<unsigned long long>(after_wait->commit - before_wait->commit));
  EXPECT_EQ(read_everywhere(cluster, client, ids, "3 s after the transfer"), 0);
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const std::optional<NodeStatus> status = cluster.status(n);
    ASSERT_TRUE(status.has_value()) << "node " << n;
    EXPECT_LE(status->applied_time_micros, wall_micros() + kSlackSeconds * 1'000'000)
        << "node " << n << " applied time is " << (status->applied_time_micros - wall_micros()) / 1e6
        << " s ahead of real time";
  }
  write("last", "3 s after the transfer");

  // The leader saw it: offsets of about -1 h for both peers, held-back entries, a warning in its log.
  const std::optional<Scrape> scrape = cluster.scrape(kFastNode);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_GT(scrape->sum("mayfly_clock_held_back_total"), 0) << scrape->text();
  for (const char* peer : {"1", "2"}) {
    EXPECT_NEAR(scrape->sum("mayfly_clock_offset_seconds", {{"peer", peer}}), -static_cast<double>(kHourSeconds),
                kSlackSeconds)
        << scrape->text();
  }
  EXPECT_NE(cluster.log_text(kFastNode).find("ahead of the quorum; cluster time held at"), std::string::npos);
  EXPECT_EQ(read_everywhere(cluster, client, ids, "at the end"), 0);
}

}  // namespace
}  // namespace mayfly::it
