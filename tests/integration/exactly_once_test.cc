// Exactly-once writes with real processes (issue 13): client threads increment one counter and create and delete
// items of their own while the leader is SIGKILLed and restarted, again and again. The library re-sends writes whose
// outcome it does not know (lost connection, 503 "outcome unknown"), and the cluster answers a re-send with the
// first outcome: every incr is applied exactly once (the counter equals the acknowledged incrs), and no create or
// delete that succeeded comes back as a 409 or a 404.
#include <gtest/gtest.h>

#include <csignal>
#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/prng.h"
#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

Request counter_incr() {
  Request r = item_key(Op::kPatchItem, "d", "c", "counter", "counter");
  test::body_of(r) = R"([{"op":"incr","path":"/n","value":1}])";
  return r;
}

struct Tally {
  std::mutex mutex;
  int64_t incr_acked = 0;
  int64_t incr_unknown = 0;  // any answer other than 200: it may or may not have applied
  int64_t retried_writes_total = 0;
  std::vector<std::string> anomalies;
  void note(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (anomalies.size() < 20) anomalies.push_back(what);
  }
};

void writer(const Cluster& cluster, size_t thread, const std::atomic<bool>& stop, Tally& tally) {
  client::ClientOptions options = cluster.client_options();
  options.request_timeout_ms = 20000;
  options.max_retries_unavailable = 40;
  options.backoff_max_ms = 200;
  client::Client client(options);
  for (int i = 0; i < 20000 && !stop.load(); ++i) {
    const Response incr = client.execute(counter_incr());
    {
      std::lock_guard<std::mutex> lock(tally.mutex);
      (incr.status == 200 ? tally.incr_acked : tally.incr_unknown) += 1;
    }
    if (incr.status != 200) {
      tally.note("incr -> " + std::to_string(incr.status) + "/" + std::to_string(incr.substatus) + " " +
                 incr.message);
    }
    if (i % 4 != 0) continue;
    // A create and a delete of this thread's own item: nobody else touches it, so anything but 201 and 204 means
    // a re-sent write was executed again (409 for the create, 404 for the delete).
    const std::string id = "t" + std::to_string(thread) + "-" + std::to_string(i);
    const Response created =
        client.execute(item_write(Op::kCreateItem, "d", "c", R"({"id":")" + id + R"(","pk":"own"})"));
    if (created.status != 201) {
      tally.note("create " + id + " -> " + std::to_string(created.status) + "/" +
                 std::to_string(created.substatus) + " " + created.message);
      continue;
    }
    const Response deleted = client.execute(item_key(Op::kDeleteItem, "d", "c", "own", id));
    if (deleted.status != 204) {
      tally.note("delete " + id + " -> " + std::to_string(deleted.status) + "/" +
                 std::to_string(deleted.substatus) + " " + deleted.message);
    }
  }
}

TEST(ExactlyOnce, EveryIncrAppliesOnceWhileLeadersAreKilled) {
  const uint64_t seed = test_seed();
  std::cout << "seed " << seed << " (MAYFLY_IT_SEED to repeat)" << std::endl;
  Prng prng(seed);
  Cluster cluster(ClusterOptions{.name = "exactly-once", .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  {
    client::Client setup(cluster.client_options());
    ASSERT_EQ(setup.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
    ASSERT_EQ(setup.execute(create_container("d", "c", "/pk")).status, 201);
    ASSERT_EQ(setup.execute(item_write(Op::kCreateItem, "d", "c", R"({"id":"counter","pk":"counter","n":0})"))
                  .status,
              201);
  }

  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (size_t t = 0; t < 4; ++t) writers.emplace_back([&, t] { writer(cluster, t, stop, tally); });

  // Kill whoever leads, mid-stream, four times; each time wait for a new leader and restart the killed node.
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(milliseconds(300 + prng.uniform(500)));
    const uint64_t leader = cluster.wait_for_leader();
    ASSERT_NE(leader, 0u) << "no leader before kill " << round;
    cluster.kill_node(leader);
    std::cout << "round " << round << ": killed leader " << leader << std::endl;
    ASSERT_NE(cluster.wait_for_leader(), 0u) << "no new leader after kill " << round;
    std::this_thread::sleep_for(milliseconds(200 + prng.uniform(300)));
    ASSERT_TRUE(cluster.start_node(leader));
  }
  std::this_thread::sleep_for(milliseconds(500));
  stop = true;
  for (std::thread& thread : writers) thread.join();

  client::Client check(cluster.client_options());
  Request read = item_key(Op::kReadItem, "d", "c", "counter", "counter");
  read.options.consistency = Consistency::kStrong;
  const Response counter = check.execute(read);
  ASSERT_EQ(counter.status, 200) << counter.message;
  const int64_t value = parse_json(counter.body).as_object().at("n").as_int64();
  std::cout << "incrs acknowledged " << tally.incr_acked << ", not acknowledged " << tally.incr_unknown
            << ", counter " << value << std::endl;
  for (const std::string& anomaly : tally.anomalies) ADD_FAILURE() << anomaly;
  // Every acknowledged incr applied once; an unacknowledged one at most once.
  EXPECT_GE(value, tally.incr_acked);
  EXPECT_LE(value, tally.incr_acked + tally.incr_unknown);
  EXPECT_EQ(tally.incr_unknown, 0) << "with retries across leader changes every incr should be answered";
  EXPECT_GT(tally.incr_acked, 100) << "the load ran";

  // Re-sent writes were answered from the exactly-once table on some node (the kills cut writes in flight).
  double deduplicated = 0;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    if (std::optional<Scrape> scrape = cluster.scrape(n)) deduplicated += scrape->sum("mayfly_writes_deduplicated_total");
  }
  std::cout << "duplicates answered from the table (sum over nodes' applies): " << deduplicated << std::endl;
}

TEST(ExactlyOnce, AnOldClientWithoutIdsIsNeverResentAnUnknownOutcome) {
  // exactly_once off: the write carries no id, and the library hands back the outcome-unknown 503 instead of
  // re-sending. The leader is stopped (SIGSTOP) after the write is sent, so the node the client talks to (a
  // follower, forwarding) answers "outcome unknown" when its forward times out.
  Cluster cluster(ClusterOptions{.name = "no-ids", .extra_flags = {"--request-timeout-ms", "1500"}});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::ClientOptions options = cluster.client_options();
  {
    client::Client setup(options);
    ASSERT_EQ(setup.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
    ASSERT_EQ(setup.execute(create_container("d", "c", "/pk")).status, 201);
    ASSERT_EQ(setup.execute(item_write(Op::kCreateItem, "d", "c", R"({"id":"counter","pk":"counter","n":0})"))
                  .status,
              201);
  }
  const size_t follower = leader == 1 ? 2 : 1;
  options.exactly_once = false;
  options.request_timeout_ms = 8000;
  client::Client old_client(options);
  ASSERT_EQ(::kill(cluster.pid(leader), SIGSTOP), 0);
  Request incr = counter_incr();
  incr.endpoint = follower;
  const Response answer = old_client.execute(incr);
  ASSERT_EQ(::kill(cluster.pid(leader), SIGCONT), 0);
  EXPECT_EQ(answer.status, 503) << answer.message;
  EXPECT_EQ(answer.substatus, client::kSubstatusServerOutcomeUnknown) << answer.message;
}

}  // namespace
}  // namespace mayfly::it
