// Failover and catch-up with real processes: the leader killed with SIGKILL under write load (no acknowledged write
// lost, a new leader within seconds, the old leader catches up after a restart), and a wiped node catching up by
// snapshot (InstallSnapshot across processes).
#include <gtest/gtest.h>
#include <kj/async.h>
#include <kj/vector.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <mutex>
#include <thread>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

Request upsert(const std::string& id, int64_t seq) {
  Request r;
  r.database = "d";
  r.container = "c";
  r.operation = api::UpsertItem{.body = R"({"id":")" + id + R"(","pk":"p)" + std::to_string(seq % 16) + R"(","seq":)" +
                                        std::to_string(seq) + "}"};
  return r;
}
Request read(const std::string& id, int64_t seq, Consistency consistency) {
  Request r;
  r.database = "d";
  r.container = "c";
  r.operation = api::ReadItem{.partition_key = "\"p" + std::to_string(seq % 16) + "\"", .id = id};
  r.options.consistency = consistency;
  return r;
}
int64_t seq_of(const Response& response) {
  const boost::json::value body = parse_json(response.body);
  if (!body.is_object()) return -1;
  const boost::json::value* seq = body.as_object().if_contains("seq");
  return seq != nullptr && seq->is_int64() ? seq->as_int64() : -1;
}

void setup(client::Client& c) {
  Request db;
  db.operation = api::make_operation(Op::kCreateDatabase);
  db.database = "d";
  ASSERT_EQ(c.execute(db).status, 201);
  Request container;
  container.database = "d";
  container.container = "c";
  container.operation = api::CreateContainer{.settings = {.partition_key_path = "/pk"}};
  ASSERT_EQ(c.execute(container).status, 201);
}

// Reads every (id, seq) and checks it is there with its seq; `node` pins the reads (and checks servedBy).
void expect_all_readable(client::Client& c, const std::vector<std::pair<std::string, int64_t>>& items,
                         Consistency consistency, std::optional<size_t> node, const std::string& what) {
  size_t missing = 0;
  for (size_t from = 0; from < items.size(); from += 64) {
    std::vector<Request> batch;
    for (size_t i = from; i < std::min(items.size(), from + 64); ++i) {
      batch.push_back(read(items[i].first, items[i].second, consistency));
      batch.back().endpoint = node;
    }
    const std::vector<Response> responses = c.execute_all(batch);
    for (size_t i = 0; i < responses.size(); ++i) {
      const auto& [id, seq] = items[from + i];
      const bool ok = responses[i].status == 200 && seq_of(responses[i]) == seq &&
                      (!node || responses[i].served_by == *node);
      if (!ok && ++missing <= 10) {
        ADD_FAILURE() << what << ": " << id << " (seq " << seq << ") -> " << responses[i].status << " "
                      << responses[i].message << " body " << responses[i].body << " servedBy "
                      << responses[i].served_by;
      }
    }
  }
  EXPECT_EQ(missing, 0u) << what << ": " << missing << " of " << items.size() << " items not readable";
}

// Upserts items `<prefix>from` .. `<prefix>to-1` (seq = the number) in batches of 100 and appends every acknowledged
// one to `items`; a write that is not acknowledged fails the test.
void write_items(client::Client& c, const std::string& prefix, int64_t from, int64_t to,
                 std::vector<std::pair<std::string, int64_t>>& items) {
  for (int64_t start = from; start < to; start += 100) {
    std::vector<Request> batch;
    for (int64_t s = start; s < std::min(to, start + 100); ++s) batch.push_back(upsert(prefix + std::to_string(s), s));
    const std::vector<Response> responses = c.execute_all(batch);
    for (size_t i = 0; i < responses.size(); ++i) {
      const int64_t s = start + static_cast<int64_t>(i);
      if (responses[i].ok()) {
        items.emplace_back(prefix + std::to_string(s), s);
      } else {
        ADD_FAILURE() << "write " << prefix << s << ": " << responses[i].status << " " << responses[i].message;
      }
    }
  }
}

struct WriteRecord {
  std::string id;
  int64_t seq;
  int status;
  uint32_t substatus;
  uint64_t served_by;
  Clock::time_point done;
};

TEST(IntegrationFailover, LeaderKilledUnderWriteLoadLosesNoAcknowledgedWrite) {
  Cluster cluster({.name = "failover"});
  ASSERT_TRUE(cluster.start());
  const uint64_t old_leader = cluster.wait_for_leader();
  ASSERT_NE(old_leader, 0u) << "no leader elected";
  client::Client main_client(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(setup(main_client));

  std::mutex mutex;
  std::vector<WriteRecord> records;  // guarded by mutex
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    client::ClientOptions options = cluster.client_options();
    client::Client c(options);
    int64_t seq = 0;
    const auto give_up = Clock::now() + std::chrono::seconds(90);
    while (!stop.load() && Clock::now() < give_up) {
      std::vector<Request> batch;
      for (int i = 0; i < 8; ++i, ++seq) batch.push_back(upsert("w" + std::to_string(seq), seq));
      const std::vector<Response> responses = c.execute_all(batch);
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(mutex);
      for (size_t i = 0; i < batch.size(); ++i) {
        const int64_t s = seq - static_cast<int64_t>(batch.size()) + static_cast<int64_t>(i);
        records.push_back({"w" + std::to_string(s), s, responses[i].status, responses[i].substatus,
                           responses[i].served_by, now});
      }
    }
  });
  auto acked_count = [&](std::optional<Clock::time_point> after, std::optional<uint64_t> not_by) {
    std::lock_guard<std::mutex> lock(mutex);
    size_t count = 0;
    for (const WriteRecord& r : records) {
      if (r.status >= 200 && r.status < 300 && (!after || r.done > *after) && (!not_by || r.served_by != *not_by)) {
        ++count;
      }
    }
    return count;
  };

  // Some load first, then kill -9 the leader.
  const bool loaded = wait_until([&] { return acked_count({}, {}) >= 200; }, milliseconds(30000));
  const size_t acked_before = acked_count({}, {});
  std::cerr << "[failover] " << acked_before << " writes acknowledged before the kill\n";
  ASSERT_TRUE(loaded || acked_before > 0) << "the writer made no progress";
  const auto killed_at = Clock::now();
  cluster.kill_node(old_leader);
  std::cerr << "[failover] killed leader node " << old_leader << " with SIGKILL\n";

  // A new leader serves writes within a few seconds.
  const bool recovered = wait_until([&] { return acked_count(killed_at, old_leader) > 0; }, milliseconds(15000),
                                    milliseconds(5));
  Clock::time_point first_ack_after = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const WriteRecord& r : records) {
      if (r.status >= 200 && r.status < 300 && r.done > killed_at && r.served_by != old_leader) {
        first_ack_after = std::min(first_ack_after, r.done);
      }
    }
  }
  const double failover_ms = std::chrono::duration<double, std::milli>(first_ack_after - killed_at).count();
  std::cerr << "[failover] first write acknowledged by the new leader " << failover_ms << " ms after the kill\n";
  EXPECT_TRUE(recovered) << "no write was acknowledged within 15 s of killing the leader";
  EXPECT_LT(failover_ms, testing_env::scaled(5000.0)) << "the new leader took too long to serve writes";
  const uint64_t new_leader = cluster.wait_for_leader();
  ASSERT_NE(new_leader, 0u);
  ASSERT_NE(new_leader, old_leader);
  std::cerr << "[failover] new leader: node " << new_leader << "\n";
  // Keep writing a little under the new leader, then stop the writer.
  wait_until([&] { return acked_count(killed_at, old_leader) >= 200; }, milliseconds(10000));
  stop = true;
  writer.join();

  std::vector<std::pair<std::string, int64_t>> acked;
  size_t unknown = 0, failed = 0;
  for (const WriteRecord& r : records) {
    if (r.status >= 200 && r.status < 300) {
      acked.emplace_back(r.id, r.seq);
    } else if (r.status == 503 || r.status == 408) {
      ++unknown;
    } else {
      ++failed;
      if (failed <= 5) ADD_FAILURE() << "write " << r.id << " failed with " << r.status << "/" << r.substatus;
    }
  }
  std::cerr << "[failover] writes: " << records.size() << " sent, " << acked.size() << " acknowledged, " << unknown
            << " outcome unknown/unavailable (503/408), " << failed << " failed otherwise\n";
  // Every acknowledged write is there, read with strong consistency.
  expect_all_readable(main_client, acked, Consistency::kStrong, std::nullopt, "strong read after failover");

  // The old leader restarts with its data, catches up, and serves the data itself.
  ASSERT_TRUE(cluster.start_node(old_leader));
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const std::optional<NodeStatus> leader_status = cluster.status(leader);
  ASSERT_TRUE(leader_status.has_value());
  const auto restarted_at = Clock::now();
  ASSERT_TRUE(cluster.wait_applied(old_leader, leader_status->commit));
  std::cerr << "[failover] restarted node " << old_leader << " applied the leader's commit index "
            << leader_status->commit << " "
            << std::chrono::duration<double, std::milli>(Clock::now() - restarted_at).count() << " ms after restart\n";
  expect_all_readable(main_client, acked, Consistency::kEventual, old_leader, "eventual read on the restarted node");
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

TEST(IntegrationFailover, WipedNodeCatchesUpBySnapshot) {
  Cluster cluster({.name = "snapshot", .extra_flags = {"--checkpoint-interval-entries", "200"}});
  ASSERT_TRUE(cluster.start());
  uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u) << "no leader elected";
  client::Client c(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(setup(c));

  // The log keeps 2000 entries behind a snapshot (log_entries_kept_after_checkpoint, not a flag): write well past
  // that so the leader has compacted away the beginning of the log.
  std::vector<std::pair<std::string, int64_t>> items;
  const auto t0 = Clock::now();
  write_items(c, "s", 0, 2400, items);
  std::cerr << "[snapshot] wrote 2400 items in "
            << std::chrono::duration<double, std::milli>(Clock::now() - t0).count() << " ms\n";
  leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  std::optional<NodeStatus> before = cluster.status(leader);
  ASSERT_TRUE(before.has_value());
  ASSERT_GT(before->applied, 2200u) << "not enough entries for the leader to have compacted its log";
  const size_t follower = leader == 1 ? 2 : 1;

  ASSERT_TRUE(cluster.stop_node(follower));
  cluster.wipe_node(follower);
  write_items(c, "s", 2400, 2700, items);  // the cluster moves on while the node is gone
  std::cerr << "[snapshot] node " << follower << " stopped and wiped; restarting it with the same flags\n";
  ASSERT_TRUE(cluster.start_node(follower));
  leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  std::optional<NodeStatus> target = cluster.status(leader);
  ASSERT_TRUE(target.has_value());
  const auto restarted = Clock::now();
  const bool caught_up = cluster.wait_applied(follower, target->commit, milliseconds(10000));
  if (!caught_up) {
    const std::optional<NodeStatus> seen = cluster.status(follower);
    ADD_FAILURE() << "wiped node " << follower << " did not catch up: it reports "
                  << (seen ? "role " + seen->role + " term " + std::to_string(seen->term) + " commit " +
                                 std::to_string(seen->commit) + " applied " + std::to_string(seen->applied) +
                                 " leader " + std::to_string(seen->leader)
                           : std::string("nothing"))
                  << "; leader " << leader << " commit " << target->commit
                  << ". (A wiped node keeps its id but has lost entries the leader's progress says it has; the "
                     "leader must believe its rejection hint, see Progress::maybe_decrease_to.)";
    return;
  }
  std::cerr << "[snapshot] wiped node " << follower << " reached applied index " << target->commit << " in "
            << std::chrono::duration<double, std::milli>(Clock::now() - restarted).count() << " ms\n";
  // A fresh client: `c`'s connection to the restarted node is stale, and a read whose connection fails moves on to
  // another node by design — this check needs the answer from the wiped node itself.
  client::Client fresh(cluster.client_options());
  expect_all_readable(fresh, items, Consistency::kEventual, follower, "eventual read on the wiped node");
  // And it takes part in replication again: a new write is applied there too.
  write_items(c, "s", 2700, 2710, items);
  std::optional<NodeStatus> after = cluster.status(leader);
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE(cluster.wait_applied(follower, after->commit));
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

// The supported way to replace a node's disk: remove the member, wipe it, start it with --join, add it back. It
// comes back as a learner that needs entries the leader has compacted, so it must be sent the snapshot.
TEST(IntegrationFailover, WipedNodeRejoinedByMembershipChangeInstallsSnapshot) {
  Cluster cluster({.name = "rejoin", .extra_flags = {"--checkpoint-interval-entries", "200"}});
  ASSERT_TRUE(cluster.start());
  uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u) << "no leader elected";
  client::Client c(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(setup(c));
  std::vector<std::pair<std::string, int64_t>> items;
  write_items(c, "r", 0, 2400, items);
  leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t node = leader == 3 ? 2 : 3;
  ASSERT_TRUE(cluster.stop_node(node));
  cluster.wipe_node(node);
  const CliResult removed = cluster.cli({"cluster", "remove-member", std::to_string(node)});
  ASSERT_EQ(removed.exit_code, 0) << removed.describe();
  cluster.set_node_flags(node, {"--join"});
  ASSERT_TRUE(cluster.start_node(node));
  const CliResult added = cluster.cli({"cluster", "add-member", std::to_string(node), cluster.endpoint(node)});
  ASSERT_EQ(added.exit_code, 0) << added.describe();
  leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const std::optional<NodeStatus> target = cluster.status(leader);
  ASSERT_TRUE(target.has_value());
  const auto t0 = Clock::now();
  ASSERT_TRUE(cluster.wait_applied(node, target->commit, milliseconds(20000)));
  std::cerr << "[rejoin] node " << node << " (wiped, re-added) reached applied index " << target->commit << " in "
            << std::chrono::duration<double, std::milli>(Clock::now() - t0).count() << " ms\n";
  expect_all_readable(c, items, Consistency::kEventual, node, "eventual read on the re-added node");
  // It is a voter again: the cluster status lists it as a follower of the leader.
  const std::optional<NodeStatus> rejoined = cluster.status(node);
  ASSERT_TRUE(rejoined.has_value());
  EXPECT_EQ(rejoined->leader, leader);
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}


// `bounded` reads promise bounded staleness; a follower that no longer hears from any leader cannot keep that
// promise and must say so (503, the client tries another node) instead of serving ever older state. Eventual reads go
// on. Both other nodes are frozen with SIGSTOP (our own processes), so no new leader can reach the isolated node.
TEST(IntegrationFailover, BoundedReadsNeedRecentLeaderContact) {
  ClusterOptions options;
  options.name = "bounded";
  options.extra_flags = {"--bounded-staleness-ms", "300"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client c(cluster.client_options());
  setup(c);
  ASSERT_EQ(c.execute(upsert("b", 1)).status, 201);
  const size_t isolated = leader == 3 ? 1 : 3;
  ASSERT_TRUE(cluster.wait_applied(isolated, cluster.status(leader)->commit));
  client::ClientOptions pinned = cluster.client_options();
  pinned.max_retries_unavailable = 0;  // see the isolated node's own answer
  pinned.request_timeout_ms = 3000;
  client::Client one(pinned);
  auto read_on_isolated = [&](Consistency consistency) {
    Request r = read("b", 1, consistency);
    r.endpoint = isolated;
    return one.execute(r);
  };
  EXPECT_EQ(read_on_isolated(Consistency::kBounded).status, 200);

  std::vector<size_t> frozen;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    if (n != isolated) frozen.push_back(n);
  }
  struct Thaw {
    Cluster& cluster;
    std::vector<size_t>& frozen;
    ~Thaw() {
      for (size_t n : frozen) ::kill(cluster.pid(n), SIGCONT);
    }
  } thaw{cluster, frozen};
  for (size_t n : frozen) ASSERT_EQ(::kill(cluster.pid(n), SIGSTOP), 0);

  Response last;
  EXPECT_TRUE(wait_until(
      [&] {
        last = read_on_isolated(Consistency::kBounded);
        return last.status == 503;
      },
      milliseconds(5000), milliseconds(50)))
      << "a bounded read was still served without leader contact: " << last.status << " " << last.message;
  EXPECT_NE(last.message.find("leader"), std::string::npos) << last.message;
  EXPECT_EQ(read_on_isolated(Consistency::kEventual).status, 200) << "eventual reads need no leader";

  for (size_t n : frozen) ::kill(cluster.pid(n), SIGCONT);
  frozen.clear();
  EXPECT_TRUE(wait_until([&] { return read_on_isolated(Consistency::kBounded).status == 200; }, milliseconds(10000),
                         milliseconds(50)))
      << "bounded reads did not come back once the leader was heard again";
}


// A follower stopped (SIGTERM) while it forwards writes to the leader answers every write it had received — the
// leader's outcome, or a 503 "shutting down" for what came in after — instead of cutting connections under writes
// whose outcome the client then cannot know. Every acknowledged write is on the leader.
TEST(IntegrationFailover, AFollowerStoppingAnswersTheWritesItWasForwarding) {
  ClusterOptions options;
  options.name = "stop-forward";
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client c(cluster.client_options());
  setup(c);
  const size_t follower = leader == 1 ? 2 : 1;
  client::ClientOptions pinned = cluster.client_options();
  pinned.max_retries_unavailable = 0;  // see the follower's own answers
  client::Client writer(pinned);
  kj::WaitScope& wait_scope = writer.wait_scope();
  // A steady stream: 100 writes kept in flight through the follower (each answer issues the next), so whenever the
  // stop comes, some are being forwarded. Bounded: at most kMaxWrites, and 10 s.
  constexpr int kInFlight = 100;
  constexpr int kAnsweredBeforeStop = 200;
  constexpr int kMaxWrites = 5000;
  std::vector<Response> responses(kMaxWrites);
  int issued = 0, answered = 0;
  kj::Vector<kj::Promise<void>> calls;
  auto issue = [&] {
    const int i = issued++;
    Request r = upsert("f" + std::to_string(i), i);
    r.endpoint = follower;
    calls.add(writer.execute_async(r)
                  .then([&, i](Response response) {
                    responses[i] = std::move(response);
                    ++answered;
                  })
                  .eagerlyEvaluate(nullptr));  // kj promises are lazy: run them while we poll
  };
  ASSERT_TRUE(wait_until(
      [&] {
        while (issued - answered < kInFlight && issued < kMaxWrites) issue();
        wait_scope.poll();
        return answered >= kAnsweredBeforeStop;
      },
      milliseconds(10000), milliseconds(1)));
  // The refills leave for the follower before it is told to stop. poll() runs the loop for as long as answers keep
  // arriving, so on a fast cluster it may see every refill answered: refill again then (bounded).
  int in_flight = 0;
  for (int attempt = 0; attempt < 50 && in_flight == 0 && issued < kMaxWrites; ++attempt) {
    while (issued - answered < kInFlight && issued < kMaxWrites) issue();
    wait_scope.poll();
    in_flight = issued - answered;
  }
  ASSERT_GT(in_flight, 0) << "nothing was in flight at the stop";
  ASSERT_EQ(::kill(cluster.pid(follower), SIGTERM), 0);
  kj::joinPromises(calls.releaseAsArray()).wait(wait_scope);
  const int kWrites = issued;
  int acknowledged = 0, shutting_down = 0;
  std::vector<std::pair<std::string, int64_t>> acked;
  for (int i = 0; i < kWrites; ++i) {
    const Response& response = responses[i];
    if (response.ok()) {
      ++acknowledged;
      acked.emplace_back("f" + std::to_string(i), i);
      continue;
    }
    EXPECT_EQ(response.status, 503) << i << ": " << response.message;
    EXPECT_NE(response.substatus, client::kSubstatusWriteOutcomeUnknown)
        << "write " << i << " was cut off mid-flight: " << response.message;
    if (response.served_by == follower) ++shutting_down;
  }
  std::cerr << "[stop-forward] " << in_flight << " in flight at the stop; " << acknowledged << " acknowledged, "
            << shutting_down << " answered 'shutting down' by the follower, " << kWrites - acknowledged - shutting_down
            << " never reached it (connection refused)\n";
  EXPECT_GT(acknowledged, 0);
  expect_all_readable(c, acked, Consistency::kStrong, std::nullopt, "acknowledged through the stopping follower");
}

}  // namespace
}  // namespace mayfly::it

namespace mayfly::it {
namespace {

// A node's request links (node/peer_link.h: forwarded writes, cluster status) reconnect after the peer they lead to
// restarts. Raft messages travel on links of their own (the Raft transport), so nothing else would notice a request
// link to a restarted node going dead. Mutation check: with PeerLink::drop_later doing nothing, node 1's status keeps
// showing the restarted node unreachable, and writes it forwards to that node (the leader) keep failing.
TEST(IntegrationFailover, RequestLinksReconnectAfterThePeerRestarts) {
  ClusterOptions options;
  options.name = "request-links";
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_TRUE(cluster.transfer_leader(2));
  client::Client admin(cluster.client_options());
  setup(admin);
  client::ClientOptions pinned = cluster.client_options();
  pinned.max_retries_unavailable = 0;  // node 1's own answers
  client::Client through_one(pinned);
  auto status_through_one = [&] {
    Request status;
    status.operation = api::make_operation(Op::kClusterStatus);
    status.endpoint = 1;
    return through_one.execute(status);
  };
  auto reachable_from_one = [&](uint64_t node) {
    const Response status = status_through_one();
    if (!status.ok()) return false;
    const boost::json::value body = boost::json::parse(status.body);
    for (const boost::json::value& entry : body.at("nodes").as_array()) {
      const boost::json::object& n = entry.as_object();
      if (n.at("id").to_number<uint64_t>() == node) return n.at("reachable").as_bool();
    }
    return false;
  };
  // Node 1's links to node 2 carry a status call and a forwarded write.
  ASSERT_TRUE(wait_until([&] { return reachable_from_one(2); }, milliseconds(10000)));
  Request write = upsert("before", 1);
  write.endpoint = 1;
  ASSERT_TRUE(through_one.execute(write).ok());

  // Node 2, the leader, restarts on the same address; it is made leader again.
  ASSERT_TRUE(cluster.stop_node(2));
  ASSERT_TRUE(cluster.start_node(2));
  ASSERT_TRUE(wait_until([&] { return cluster.transfer_leader(2); }, milliseconds(30000), milliseconds(500)));

  // Node 1 sees node 2 again and forwards to it.
  EXPECT_TRUE(wait_until([&] { return reachable_from_one(2); }, milliseconds(10000), milliseconds(200)))
      << "node 1's request link to the restarted node 2 stayed dead";
  bool forwarded = false;
  EXPECT_TRUE(wait_until(
      [&] {
        Request again = upsert("after", 2);
        again.endpoint = 1;
        const Response response = through_one.execute(again);
        forwarded = response.ok() && response.served_by == 2;
        return forwarded;
      },
      milliseconds(10000), milliseconds(200)))
      << "node 1 could not forward a write to the restarted leader";
}

}  // namespace
}  // namespace mayfly::it
