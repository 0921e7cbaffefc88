// Work limits in work, not rows (issue #28, findings 1, 3 and 6; ctest -L hostile), against real mayflyd processes:
//  - a readonly key's LIKE and CONTAINS over a long text with a long parameter pattern cannot hold the read threads:
//    lists and queries on the same node keep answering, and a runaway read (LIKE with '_' runs, no work limit) does
//    not keep the node from stopping on SIGTERM;
//  - change feed pages stop at 4 MiB of images (at least one change each), so a reader of a 1.9 MB item's versions
//    moves on;
//  - ORDER BY and GROUP BY over big documents hold a bounded number of bytes: the node's RSS stays bounded, GROUP BY
//    past its bytes is a 400 that says what to do;
//  - one key's queued reads do not hold another key's behind them (the read threads' lanes, node/read_queue.h).
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include "tests/integration/cluster_harness.h"
#include "tests/integration/proc_status.h"

namespace mayfly::it {
namespace {

namespace bj = boost::json;
using client::Op;
using client::Request;
using client::Response;

// Readers see the node's own answers (no retries); writers retry as applications do (a write may meet an election).
client::ClientOptions with_key(const Cluster& cluster, const std::string& key, uint32_t timeout_ms,
                               bool retries = false) {
  client::ClientOptions options = cluster.client_options();
  options.key = key;
  options.request_timeout_ms = timeout_ms;
  if (!retries) options.max_retries_unavailable = 0;
  return options;
}

Request query_on(size_t node, const std::string& sql, const std::string& parameters = "") {
  Request query;
  query.operation = api::make_operation(Op::kQuery);
  query.database = "w";
  query.container = "c";
  test::operation_of<api::Query>(query).sql = sql;
  test::operation_of<api::Query>(query).parameters = parameters;
  query.endpoint = node;
  query.options.consistency = client::Consistency::kEventual;
  return query;
}

Request list_on(size_t node) {
  Request list;
  list.operation = api::make_operation(Op::kListItems);
  list.database = "w";
  list.container = "c";
  list.endpoint = node;
  list.options.consistency = client::Consistency::kEventual;
  return list;
}

// Finding 1: two readonly LIKE / CONTAINS queries (a 262,144-character text, a 120,001-character parameter pattern)
// took ~44 s each with the quadratic matchers, holding both read threads: lists and queries on that node got 503s,
// and SIGTERM waited. Now they are linear (answered at once), and a read that does run long stops at SIGTERM.
TEST(WorkLimits, PathologicalLikeAndContainsDoNotStarveReadsAndSigtermIsPrompt) {
  // No step limit to speak of and a long request timeout: only the shutdown can stop the runaway read below.
  ClusterOptions options{.name = "like"};
  options.extra_flags = {"--max-read-work", "1000000000000", "--request-timeout-ms", "60000"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t node = leader % 3 + 1;  // a follower: the attacked node
  client::Client writer(with_key(cluster, cluster.readwrite_key(), 20000, true));
  {
    client::Client admin(cluster.client_options());
    ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "w")).status, 201);
    ASSERT_EQ(admin.execute(create_container("w", "c", "/pk")).status, 201);
  }
  const Response written = writer.execute(item_write(
      Op::kUpsertItem, "w", "c", R"({"id":"long","pk":"p","t":")" + std::string(262144, 'a') + R"("})"));
  ASSERT_LT(written.status, 300) << written.message;
  for (int i = 0; i < 5; ++i) {
    ASSERT_LT(writer.execute(item_write(Op::kUpsertItem, "w", "c", R"({"id":"s)" + std::to_string(i) +
                                                                       R"(","pk":"p","t":"short"})"))
                  .status,
              300);
  }
  ASSERT_TRUE(wait_until(
      [&] {
        const Response listed = writer.execute(list_on(node));
        return listed.status == 200 && bj::parse(listed.body).as_array().size() == 6;
      },
      milliseconds(10000)));

  const std::string pattern = std::string(120000, 'a') + "b";
  const std::string like_parameters = R"({"@p":"%)" + pattern + R"(%"})";
  const std::string contains_parameters = R"({"@q":")" + pattern + R"("})";
  std::atomic<bool> attacking{true};
  std::atomic<int> attacks_answered{0};
  std::atomic<int> attacks_failed{0};
  std::thread attacker([&] {
    client::Client readonly(with_key(cluster, cluster.readonly_key(), 30000));
    const std::vector<Request> attack = {
        query_on(node, "SELECT VALUE c.id FROM c WHERE c.t LIKE @p", like_parameters),
        query_on(node, "SELECT VALUE c.id FROM c WHERE CONTAINS(c.t, @q)", contains_parameters)};
    const auto started = Clock::now();
    for (int round = 0; round < 40 && attacking && Clock::now() - started < milliseconds(8000); ++round) {
      for (const Response& answer : readonly.execute_all(attack)) {
        if (answer.status == 200 && answer.body == "[]") {
          ++attacks_answered;
        } else {
          ++attacks_failed;
          std::printf("attack answered %u: %s\n", answer.status, answer.message.c_str());
        }
      }
    }
  });
  // Meanwhile, on the same node: lists and queries answer, each in a few seconds at most.
  std::this_thread::sleep_for(milliseconds(300));
  client::Client victim(with_key(cluster, cluster.readwrite_key(), 20000));
  int served = 0;
  for (int i = 0; i < 5; ++i) {
    for (const Request& read : {list_on(node), query_on(node, "SELECT VALUE c.id FROM c WHERE c.t = 'short'")}) {
      const auto started = Clock::now();
      const Response answer = victim.execute(read);
      const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
      EXPECT_EQ(answer.status, 200) << answer.message;
      EXPECT_LT(took, milliseconds(5000)) << "a read on the attacked node took " << took.count() << " ms";
      if (answer.status == 200) ++served;
    }
  }
  attacking = false;
  attacker.join();
  std::printf("%d victim reads served, %d attack queries answered, %d failed\n", served, attacks_answered.load(),
              attacks_failed.load());
  EXPECT_EQ(served, 10);
  EXPECT_GE(attacks_answered.load(), 2);
  EXPECT_EQ(attacks_failed.load(), 0);

  // A read that does run long: LIKE with a run of 100,000 '_' tries every position (charged, and here unlimited).
  // Both read threads take one; SIGTERM must not wait for them.
  const std::string runaway = R"({"@u":"%)" + std::string(100000, '_') + R"(b%"})";
  std::thread runaways([&] {
    client::Client readonly(with_key(cluster, cluster.readonly_key(), 4000));
    const Request slow = query_on(node, "SELECT VALUE c.id FROM c WHERE c.t LIKE @u", runaway);
    const std::vector<Response> answers = readonly.execute_all({slow, slow});
    for (const Response& answer : answers) EXPECT_NE(answer.status, 200) << "the runaway LIKE finished";
  });
  std::this_thread::sleep_for(milliseconds(1500));  // both are running by now
  const auto stopping = Clock::now();
  EXPECT_TRUE(cluster.stop_node(node));
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - stopping);
  std::printf("node %zu stopped %lld ms after SIGTERM\n", node, static_cast<long long>(took.count()));
  EXPECT_LT(took, milliseconds(5000)) << "SIGTERM waited for the running reads";
  runaways.join();
  EXPECT_NE(cluster.log_text(node).find("a read was stopped (stopping)"), std::string::npos)
      << "no read was stopped by the shutdown";
}

// Fair share of the read threads (node/read_queue.h): a readonly key keeps 48 reads queued that each run to the read
// work limit (about 300 ms here), again as soon as they are answered: about seven seconds of work for the two read
// threads. Another key's lists on that node start at the next free read thread, not behind the 48, so each is
// answered well within the 4 s its client waits. Mutation check: with one lane for every key (ReadQueue::submit
// ignoring `lane`), the victim's lists wait behind the attacker's queue and its client gives up (408).
TEST(WorkLimits, AKeysQueuedReadsDoNotHoldAnotherKeysReadsBehindThem) {
  ClusterOptions options{.name = "read-share"};
  options.extra_flags = {"--request-timeout-ms", "30000"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t node = leader % 3 + 1;
  client::Client writer(with_key(cluster, cluster.readwrite_key(), 20000, true));
  {
    client::Client admin(cluster.client_options());
    ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "w")).status, 201);
    ASSERT_EQ(admin.execute(create_container("w", "c", "/pk")).status, 201);
  }
  ASSERT_LT(writer.execute(item_write(Op::kUpsertItem, "w", "c",
                                      R"({"id":"long","pk":"p","t":")" + std::string(262144, 'a') + R"("})"))
                .status,
            300);
  ASSERT_TRUE(wait_until([&] { return writer.execute(list_on(node)).status == 200; }, milliseconds(10000)));

  // Each tries every position of the long text with a run of 100,000 '_': stopped at --max-read-work (400).
  const Request slow = query_on(node, "SELECT VALUE c.id FROM c WHERE c.t LIKE @u",
                                R"({"@u":"%)" + std::string(100000, '_') + R"(b%"})");
  std::atomic<bool> attacking{true};
  std::atomic<int> attack_rounds{0};
  std::thread attacker([&] {
    client::Client readonly(with_key(cluster, cluster.readonly_key(), 60000));
    const auto started = Clock::now();
    while (attacking && Clock::now() - started < milliseconds(30000)) {
      readonly.execute_all(std::vector<Request>(48, slow));
      ++attack_rounds;
    }
  });
  std::this_thread::sleep_for(milliseconds(1000));  // the attacker's reads are queued
  client::Client victim(with_key(cluster, cluster.readwrite_key(), 4000));
  int served = 0;
  std::vector<std::string> failures;
  for (int i = 0; i < 6; ++i) {
    const Response answer = victim.execute(list_on(node));
    if (answer.status == 200) {
      ++served;
    } else {
      failures.push_back(std::to_string(answer.status) + " " + answer.message);
    }
    std::this_thread::sleep_for(milliseconds(300));
  }
  attacking = false;
  attacker.join();
  std::printf("%d of 6 victim lists served during %d attack rounds of 48 slow queries\n", served,
              attack_rounds.load());
  EXPECT_EQ(served, 6) << "first failure: " << (failures.empty() ? "" : failures.front());
}

// Finding 3: 20 versions of a 1.9 MB item make 20 changes of ~3.8 MB (image and previous). A page of 100 changes
// was ~74 MB (past the client's 64 MiB: the reader could never move on); pages now stop at 4 MiB of images.
TEST(WorkLimits, ChangeFeedPagesStopAtTheByteLimitAndTheReaderMovesOn) {
  Cluster cluster({.name = "feedbytes"});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client writer(with_key(cluster, cluster.readwrite_key(), 30000, true));
  {
    client::Client admin(cluster.client_options());
    ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "w")).status, 201);
    Request create = create_container("w", "c", "/pk");
    test::settings_of(create).change_feed = client::ContainerSettings::ChangeFeed::kOn;
    test::settings_of(create).change_feed_retention_seconds = 3600;
    ASSERT_EQ(admin.execute(create).status, 201);
  }
  constexpr int kVersions = 20;
  for (int i = 0; i < kVersions; ++i) {
    const Response written = writer.execute(item_write(
        Op::kUpsertItem, "w", "c",
        R"({"id":"big","pk":"p","n":)" + std::to_string(i) + R"(,"t":")" + std::string(1900000, 'x') + R"("})"));
    ASSERT_LT(written.status, 300) << written.message;
  }
  const size_t node = leader % 3 + 1;
  const std::optional<NodeStatus> leader_status = cluster.status(leader);
  ASSERT_TRUE(leader_status.has_value());
  ASSERT_TRUE(cluster.wait_applied(node, leader_status->commit));

  client::Client reader(with_key(cluster, cluster.readonly_key(), 30000));
  Request read;
  read.operation = api::make_operation(Op::kReadChangeFeed);
  read.database = "w";
  read.container = "c";
  read.endpoint = node;
  read.options.consistency = client::Consistency::kEventual;
  test::operation_of<api::ReadChangeFeed>(read).max_items = 100;
  std::vector<int64_t> versions;
  size_t largest = 0;
  bool caught_up = false;
  for (int page = 0; page < 3 * kVersions && !caught_up; ++page) {
    const Response answer = reader.execute(read);
    ASSERT_EQ(answer.status, 200) << answer.message;
    largest = std::max(largest, answer.body.size());
    EXPECT_LE(answer.body.size(), (4u << 20) + (64u << 10)) << "page " << page;
    const bj::object body = bj::parse(answer.body).as_object();
    const bj::array& changes = body.at("changes").as_array();
    caught_up = body.at("caughtUp").as_bool();
    if (!caught_up) {
      EXPECT_FALSE(changes.empty()) << "a page that is not caught up brought no change";
    }
    for (const bj::value& change : changes) versions.push_back(change.at("current").at("n").as_int64());
    test::operation_of<api::ReadChangeFeed>(read).from = client::ReadChangeFeed::From::kContinuation;
    test::operation_of<api::ReadChangeFeed>(read).continuation = std::string(body.at("continuation").as_string());
  }
  std::printf("%zu changes, largest page %zu bytes\n", versions.size(), largest);
  EXPECT_TRUE(caught_up);
  ASSERT_EQ(versions.size(), static_cast<size_t>(kVersions));
  for (int i = 0; i < kVersions; ++i) EXPECT_EQ(versions[static_cast<size_t>(i)], i);
}

// Finding 6: ORDER BY kept OFFSET + page size whole documents (up to 20,000) and GROUP BY one document per group (up
// to 10,000), whatever their size. 24 items of ~1.8 MB, each an array of 900,000 small numbers (~15 MB parsed):
// two readonly ORDER BY queries held ~700 MB each. Now a page keeps at most 64 MiB of documents (fewer rows, with a
// continuation), GROUP BY past 64 MiB is a 400, and the node's RSS stays bounded.
TEST(WorkLimits, OrderByAndGroupByOverBigDocumentsAreBoundedInBytes) {
  Cluster cluster({.name = "sortbytes", .metrics = true});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client writer(with_key(cluster, cluster.readwrite_key(), 30000, true));
  {
    client::Client admin(cluster.client_options());
    ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "w")).status, 201);
    ASSERT_EQ(admin.execute(create_container("w", "c", "/pk")).status, 201);
  }
  std::string values;
  values.reserve(1800000);
  for (int i = 0; i < 900000; ++i) values += i == 0 ? "0" : (i % 2 ? ",1" : ",0");
  constexpr int kItems = 24;
  for (int i = 0; i < kItems; ++i) {
    const Response written = writer.execute(item_write(
        Op::kUpsertItem, "w", "c",
        R"({"id":"big)" + std::to_string(i) + R"(","pk":"p","n":)" + std::to_string(i) + R"(,"v":[)" + values + "]}"));
    ASSERT_LT(written.status, 300) << written.message;
  }
  const size_t node = leader % 3 + 1;
  const std::optional<NodeStatus> leader_status = cluster.status(leader);
  ASSERT_TRUE(leader_status.has_value());
  ASSERT_TRUE(cluster.wait_applied(node, leader_status->commit));
  const pid_t pid = cluster.pid(node);
  const int64_t baseline_kb = status_kb(pid, "VmRSS:");
  ASSERT_GT(baseline_kb, 0);

  std::atomic<bool> sampling{true};
  std::atomic<int64_t> peak_kb{baseline_kb};
  std::thread sampler([&] {
    while (sampling) {
      const int64_t now = status_kb(pid, "VmRSS:");
      if (now > peak_kb) peak_kb = now;
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  // Two readonly clients page through ORDER BY c.n DESC (every page reads every item) at the same time.
  std::vector<std::vector<int64_t>> orders(2);
  std::vector<std::thread> readers;
  for (size_t r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      client::Client readonly(with_key(cluster, cluster.readonly_key(), 60000));
      Request query = query_on(node, "SELECT c.id, c.n FROM c ORDER BY c.n DESC");
      for (int page = 0; page < 2 * kItems; ++page) {
        const Response answer = readonly.execute(query);
        EXPECT_EQ(answer.status, 200) << answer.message;
        if (answer.status != 200) return;
        const bj::value rows = bj::parse(answer.body);
        for (const bj::value& row : rows.as_array()) orders[r].push_back(row.at("n").as_int64());
        if (answer.continuation.empty()) return;
        query.options.continuation = answer.continuation;
      }
    });
  }
  for (std::thread& reader : readers) reader.join();
  // GROUP BY one group per item: 24 documents of ~15 MB to keep.
  client::Client readonly(with_key(cluster, cluster.readonly_key(), 60000));
  const Response grouped = readonly.execute(query_on(node, "SELECT c.id, COUNT(1) AS n FROM c GROUP BY c.id"));
  sampling = false;
  sampler.join();
  const int64_t grew_mb = (peak_kb - baseline_kb) / 1024;
  std::printf("node %zu RSS %lld MB before, peak %lld MB during the queries (+%lld MB)\n", node,
              static_cast<long long>(baseline_kb / 1024), static_cast<long long>(peak_kb / 1024),
              static_cast<long long>(grew_mb));
  // Two queries at 64 MiB of kept documents each, plus the ones being parsed, the allocator's slack and LevelDB's
  // block cache (~370 MB measured); before the limit, each query kept all 24 documents (~360 MB parsed) at once.
  EXPECT_LT(grew_mb, 550) << "the node's RSS grew past the bound";
  for (const std::vector<int64_t>& order : orders) {
    ASSERT_EQ(order.size(), static_cast<size_t>(kItems));
    for (int i = 0; i < kItems; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], kItems - 1 - i);
  }
  EXPECT_EQ(grouped.status, 400) << grouped.message;
  EXPECT_NE(grouped.message.find("GROUP BY would hold more than"), std::string::npos) << grouped.message;
  // An OFFSET whose rows alone are past the bytes is refused too, with what to do instead.
  const Response offset = readonly.execute(query_on(node, "SELECT c.id FROM c ORDER BY c.n OFFSET 20 LIMIT 1"));
  EXPECT_EQ(offset.status, 400) << offset.message;
  EXPECT_NE(offset.message.find("continuation tokens"), std::string::npos) << offset.message;
  // The node still serves its other readers and writers.
  EXPECT_LT(writer.execute(item_write(Op::kUpsertItem, "w", "c", R"({"id":"small","pk":"p","n":-1})")).status, 300);
  const Response listed = readonly.execute(list_on(node));
  EXPECT_EQ(listed.status, 200) << listed.message;
  std::optional<Scrape> scrape = cluster.scrape(node);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_GE(scrape->sum("mayfly_reads_stopped_total", {{"reason", "group_bytes"}}), 1.0) << scrape->text();
  EXPECT_GE(scrape->sum("mayfly_reads_stopped_total", {{"reason", "sort_bytes"}}), 1.0) << scrape->text();
}

}  // namespace
}  // namespace mayfly::it
