// Load limits against real mayflyd processes (ctest -L hostile): more requests than --max-pending-requests are shed
// at once with a 503 that applies nothing, and client connections idle past --idle-timeout-ms are closed while the
// peers' links stay up and clients reconnect transparently.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstdio>
#include <set>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;


TEST(Load, RequestsBeyondThePendingLimitAreShedWithA503AndApplyNothing) {
  ClusterOptions options{.name = "shed", .metrics = true};
  options.extra_flags = {"--max-pending-requests", "16"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::ClientOptions client_options = cluster.client_options();
  client_options.max_retries_unavailable = 0;  // see the 503s themselves
  client_options.request_timeout_ms = 10000;
  client::Client client(client_options);
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "shed")).status, 201);
  ASSERT_EQ(client.execute(create_container("shed", "c", "/pk")).status, 201);

  // 600 writes at once to the leader: each waits for its commit, so far more than 16 wait together.
  std::vector<Request> writes;
  for (int i = 0; i < 600; ++i) {
    Request write = item_write(Op::kCreateItem, "shed", "c", R"({"id":"w)" + std::to_string(i) + R"(","pk":"p"})");
    write.endpoint = leader;
    writes.push_back(std::move(write));
  }
  const std::vector<client::Response> answers = client.execute_all(writes);
  std::set<std::string> created;
  size_t shed = 0;
  for (size_t i = 0; i < answers.size(); ++i) {
    const client::Response& answer = answers[i];
    if (answer.status == 201) {
      created.insert("w" + std::to_string(i));
      continue;
    }
    ASSERT_EQ(answer.status, 503) << answer.message;
    ASSERT_EQ(answer.substatus, kSubstatusOverloaded) << answer.message;
    EXPECT_NE(answer.message.find("overloaded"), std::string::npos) << answer.message;
    ++shed;
  }
  std::printf("%zu created, %zu shed\n", created.size(), shed);
  EXPECT_GT(shed, 0u) << "600 concurrent writes never exceeded 16 pending";
  EXPECT_GT(created.size(), 0u);
  // Exactly the answered writes exist: a shed write changed nothing.
  std::vector<Request> reads;
  for (int i = 0; i < 600; ++i) {
    Request read = item_key(Op::kReadItem, "shed", "c", "p", "w" + std::to_string(i));
    read.options.consistency = client::Consistency::kStrong;
    reads.push_back(std::move(read));
  }
  client::ClientOptions patient = cluster.client_options();  // retries the sheds of its own reads
  client::Client reader(patient);
  std::vector<client::Response> found;
  for (size_t start = 0; start < reads.size(); start += 10) {
    std::vector<Request> slice(reads.begin() + static_cast<long>(start), reads.begin() + static_cast<long>(start + 10));
    for (client::Response& response : reader.execute_all(slice)) found.push_back(std::move(response));
  }
  for (size_t i = 0; i < found.size(); ++i) {
    const bool expected = created.contains("w" + std::to_string(i));
    EXPECT_EQ(found[i].status, expected ? 200 : 404) << "w" << i << ": " << found[i].message;
  }
  std::optional<Scrape> scrape = cluster.scrape(leader);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_EQ(scrape->sum("mayfly_requests_shed_total", {{"kind", "driver"}}), static_cast<double>(shed))
      << scrape->text();
  // The node keeps serving once the burst is over.
  EXPECT_EQ(client.execute(item_write(Op::kUpsertItem, "shed", "c", R"({"id":"after","pk":"p"})")).status, 201);
}

TEST(Load, IdleClientConnectionsAreClosedPeersStayAndClientsReconnect) {
  ClusterOptions options{.name = "idle", .metrics = true};
  options.extra_flags = {"--idle-timeout-ms", "2000"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const std::optional<NodeStatus> before = cluster.status(leader);
  ASSERT_TRUE(before.has_value());
  client::Client client(cluster.client_options());  // writes re-open their session after 1 s of quiet (the default)
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "idle")).status, 201);
  ASSERT_EQ(client.execute(create_container("idle", "c", "/pk")).status, 201);
  // Connections closed for being idle, on every node.
  const auto idle_closed = [&] {
    double total = 0;
    for (size_t node = 1; node <= cluster.size(); ++node) {
      std::optional<Scrape> scrape = cluster.scrape(node);
      if (!scrape) return -1.0;
      total += scrape->sum("mayfly_connections_refused_total", {{"reason", "idle"}});
    }
    return total;
  };
  for (int round = 0; round < 2; ++round) {
    // Quiet for longer than the timeout: the node closes the client's connection ...
    const double closed_before = idle_closed();
    ASSERT_GE(closed_before, 0);
    EXPECT_TRUE(wait_until([&] { return idle_closed() > closed_before; }, milliseconds(8000)));
    // ... and the next write goes through exactly once on a new one.
    const std::string id = "after-idle-" + std::to_string(round);
    const client::Response write =
        client.execute(item_write(Op::kCreateItem, "idle", "c", R"({"id":")" + id + R"(","pk":"p"})"));
    EXPECT_EQ(write.status, 201) << write.message;
    Request read = item_key(Op::kReadItem, "idle", "c", "p", id);
    EXPECT_EQ(client.execute(read).status, 200);
  }
  // The peers' links were never closed for being idle: no election happened meanwhile, and every node still has
  // its two peers connected.
  const std::optional<NodeStatus> after = cluster.status(leader);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->term, before->term);
  EXPECT_EQ(after->leader, leader);
  for (size_t node = 1; node <= cluster.size(); ++node) {
    std::optional<Scrape> scrape = cluster.scrape(node);
    ASSERT_TRUE(scrape.has_value());
    EXPECT_GE(scrape->sum("mayfly_connections", {{"state", "authenticated"}}), 2) << "node " << node;
  }
}

}  // namespace
}  // namespace mayfly::it

namespace mayfly::it {
namespace {

// Queries run on the read threads, not on the RPC thread that also carries the leader's heartbeats: a burst of
// long queries on the leader does not cost it its leadership.
TEST(Load, LongQueriesOnTheLeaderDoNotDelayItsHeartbeats) {
  Cluster cluster({.name = "queries"});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::ClientOptions options = cluster.client_options();
  options.request_timeout_ms = 30000;
  client::Client client(options);
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "q")).status, 201);
  ASSERT_EQ(client.execute(create_container("q", "c", "/pk")).status, 201);
  // 48 items of ~1.5 MB, each a long array of small objects: every query below parses all of them (~70 MB).
  std::string values;
  for (int i = 0; i < 60000; ++i) values += std::string(i == 0 ? "" : ",") + R"({"a":)" + std::to_string(i) + "}";
  for (int i = 0; i < 48; ++i) {
    const client::Response written = client.execute(item_write(
        Op::kUpsertItem, "q", "c", R"({"id":"big)" + std::to_string(i) + R"(","pk":"p","v":[)" + values + "]}"));
    ASSERT_TRUE(written.ok()) << written.status << " " << written.message;
  }
  const std::optional<NodeStatus> before = cluster.status(leader);
  ASSERT_TRUE(before.has_value());
  Request query;
  query.operation = api::make_operation(Op::kQuery);
  query.database = "q";
  query.container = "c";
  test::operation_of<api::Query>(query).sql = "SELECT VALUE COUNT(1) FROM c WHERE ARRAY_LENGTH(c.v) = 7";
  query.endpoint = leader;
  query.options.consistency = client::Consistency::kEventual;
  const auto started = Clock::now();
  int answered = 0;
  while (Clock::now() - started < milliseconds(4000)) {
    for (const client::Response& response : client.execute_all(std::vector<Request>(6, query))) {
      ASSERT_EQ(response.status, 200) << response.message;
      ++answered;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("%d queries in %.2f s on the leader (%.0f ms each on average, 2 read threads)\n", answered, seconds,
              seconds * 1000 / answered);
  const std::optional<NodeStatus> after = cluster.status(leader);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->term, before->term) << "an election happened while the leader answered queries";
  EXPECT_EQ(after->leader, leader);
}

}  // namespace
}  // namespace mayfly::it

namespace mayfly::it {
namespace {

// Writes a follower forwards to the leader count against --max-pending-requests too: with the leader paused
// (SIGSTOP: it keeps its connections and answers nothing), a burst to a follower is shed at once past the limit
// instead of piling up until each one times out — and a shed write changes nothing.
TEST(Load, WritesForwardedToAPausedLeaderCountAgainstThePendingLimit) {
  ClusterOptions options{.name = "shedfwd", .metrics = true};
  // A longer election timeout (2-4 s) keeps the paused node leader while the burst is answered.
  options.election_timeout_ticks = 200;
  options.extra_flags = {"--max-pending-requests", "16"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const uint64_t follower = leader == 1 ? 2 : 1;
  client::ClientOptions client_options = cluster.client_options();
  client_options.max_retries_unavailable = 0;  // see the 503s themselves
  client_options.request_timeout_ms = 30000;
  client::Client client(client_options);
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "shed")).status, 201);
  ASSERT_EQ(client.execute(create_container("shed", "c", "/pk")).status, 201);
  // Every node has applied the container (the follower forwards, but the test reads from it afterwards).
  ASSERT_TRUE(wait_until([&] {
    const std::optional<NodeStatus> lead = cluster.status(leader);
    const std::optional<NodeStatus> other = cluster.status(follower);
    return lead && other && other->applied >= lead->commit;
  }, milliseconds(10000)));

  ASSERT_EQ(::kill(cluster.pid(leader), SIGSTOP), 0);
  std::vector<Request> writes;
  for (int i = 0; i < 100; ++i) {
    Request write = item_write(Op::kCreateItem, "shed", "c", R"({"id":"f)" + std::to_string(i) + R"(","pk":"p"})");
    write.endpoint = follower;
    writes.push_back(std::move(write));
  }
  // Answered when each write is either shed (at once) or times out on the follower (--request-timeout-ms, 10 s).
  const std::vector<client::Response> answers = client.execute_all(writes);
  ASSERT_EQ(::kill(cluster.pid(leader), SIGCONT), 0);
  std::vector<std::string> shed_ids;
  for (size_t i = 0; i < answers.size(); ++i) {
    if (answers[i].status == 503 && answers[i].substatus == kSubstatusOverloaded) {
      EXPECT_NE(answers[i].message.find("overloaded"), std::string::npos) << answers[i].message;
      shed_ids.push_back("f" + std::to_string(i));
    }
  }
  std::printf("%zu of %zu forwarded writes shed\n", shed_ids.size(), answers.size());
  EXPECT_GE(shed_ids.size(), answers.size() - 16) << "forwards waiting on a paused leader were not bounded";
  std::optional<Scrape> scrape = cluster.scrape(follower);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_EQ(scrape->sum("mayfly_requests_shed_total", {{"kind", "forward"}}), static_cast<double>(shed_ids.size()))
      << scrape->text();
  // Once the leader runs again, none of the shed writes exists.
  client::Client reader(cluster.client_options());
  for (const std::string& id : shed_ids) {
    Request read = item_key(Op::kReadItem, "shed", "c", "p", id);
    read.options.consistency = client::Consistency::kStrong;
    EXPECT_EQ(reader.execute(read).status, 404) << id;
  }
}

}  // namespace
}  // namespace mayfly::it
