// The garbage collector, request units and throttling against real mayflyd processes, checked through what an
// operator sees: every node's Prometheus endpoint, scraped over HTTP, with values asserted.
//
// - Under a load that wants more than a provisioned container's budget on every node, the collector deletes nothing,
//   and each node's backlog metric equals the number of expired items; when the load stops, every node drains to 0,
//   the deletion-lag histogram holds every deleted item, and the deletes cost users nothing (provisioned).
// - Serverless: TTL deletes are reported as consumed request units (op="ttl_delete").
// - Over-budget requests are answered 429 with a retry-after and apply nothing; the client library's retries succeed.
// - The collector's pace (node/gc_pacer.h): back to back on an idle node, one short pass per interval on a busy one.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <thread>

#include "tests/env.h"
#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

constexpr char kDb[] = "gcdb";

// Scrapes every node; records a failure for a node that does not answer.
std::vector<Scrape> scrape_all(const Cluster& cluster) {
  std::vector<Scrape> out;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    std::optional<Scrape> scraped = cluster.scrape(n);
    EXPECT_TRUE(scraped.has_value()) << "node " << n << " did not serve /metrics";
    out.push_back(scraped.value_or(Scrape{}));
  }
  return out;
}

// Waits until `condition` holds for the scrape of every node.
bool wait_every_node(const Cluster& cluster, const std::function<bool(const Scrape&)>& condition,
                     milliseconds timeout) {
  return wait_until(
      [&] {
        for (size_t n = 1; n <= cluster.size(); ++n) {
          std::optional<Scrape> scraped = cluster.scrape(n);
          if (!scraped || !condition(*scraped)) return false;
        }
        return true;
      },
      timeout, milliseconds(100));
}

std::string describe(const std::vector<Scrape>& scrapes, const std::string& container) {
  std::string out;
  for (size_t i = 0; i < scrapes.size(); ++i) {
    const std::map<std::string, std::string> c = {{"container", container}};
    out += "node " + std::to_string(i + 1) +
           ": backlog=" + std::to_string(scrapes[i].sum("mayfly_ttl_gc_backlog_items", c)) +
           " deleted=" + std::to_string(scrapes[i].sum("mayfly_ttl_gc_deleted_items_total", c)) +
           " spare=" + std::to_string(scrapes[i].sum("mayfly_ttl_gc_spare_ru", c)) +
           " throttled=" + std::to_string(scrapes[i].sum("mayfly_requests_throttled_total", c)) + "\n";
  }
  return out;
}

// Writes `count` items "<prefix>-<i>" with their own ttl through the library (its retries absorb 429s), pipelined in
// batches of 500. With `latest_deadline_s`, the latest deadline (Unix seconds) from the responses' _ts.
void write_items(client::Client& client, const std::string& container, const std::string& prefix, int count, int ttl,
                 int64_t* latest_deadline_s = nullptr) {
  constexpr int kBatch = 500;
  for (int start = 0; start < count; start += kBatch) {
    std::vector<Request> writes;
    for (int i = start; i < std::min(count, start + kBatch); ++i) {
      writes.push_back(item_write(Op::kCreateItem, kDb, container,
                                  R"({"id":")" + prefix + "-" + std::to_string(i) + R"(","pk":"p","ttl":)" +
                                      std::to_string(ttl) + R"(,"pad":"0123456789"})"));
    }
    for (const Response& response : client.execute_all(writes)) {
      ASSERT_EQ(response.status, 201) << response.message;
      if (latest_deadline_s != nullptr) *latest_deadline_s = std::max(*latest_deadline_s, response.ts + ttl);
    }
  }
}

// The latest deadline (Unix seconds) among items written with `ttl`, from their _ts, read back strongly.
int64_t latest_deadline(client::Client& client, const std::string& container, const std::string& prefix, int count,
                        int ttl) {
  int64_t latest = 0;
  for (int i = 0; i < count; ++i) {
    Request read = item_key(Op::kReadItem, kDb, container, "p", prefix + "-" + std::to_string(i));
    read.options.consistency = Consistency::kStrong;
    const Response response = client.execute(read);
    EXPECT_EQ(response.status, 200) << response.message;
    latest = std::max(latest, response.ts + ttl);
  }
  return latest;
}

// Node n's applied replicated time, in microseconds (0 if it did not answer).
int64_t applied_time(Cluster& cluster, size_t n) {
  std::optional<NodeStatus> status = cluster.status(n);
  return status ? status->applied_time_micros : 0;
}

// Whether every node's applied replicated time passes `deadline_s` within `timeout`.
bool replicated_time_passed(Cluster& cluster, int64_t deadline_s, milliseconds timeout) {
  return wait_until(
      [&] {
        for (size_t n = 1; n <= cluster.size(); ++n) {
          if (applied_time(cluster, n) < deadline_s * 1'000'000) return false;
        }
        return true;
      },
      timeout, milliseconds(50));
}

// A cluster whose nodes serve metrics, with the collector's --gc-interval-ms.
ClusterOptions metrics_cluster(const std::string& name, const std::string& gc_interval_ms) {
  ClusterOptions options;
  options.name = name;
  options.metrics = true;
  options.extra_flags = {"--gc-interval-ms", gc_interval_ms};
  return options;
}

TEST(IntegrationGc, FullLoadStarvesTheCollectorOnEveryNodeThenTheBacklogDrains) {
  Cluster cluster(metrics_cluster("gc-starve", "50"));
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client client(cluster.client_options());
  const std::string container = std::string(kDb) + "/busy";
  const std::map<std::string, std::string> label = {{"container", container}};

  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, kDb)).status, 201);
  Request create = create_container(kDb, "busy", "/pk", "-1");  // TTL on; items bring their own ttl
  test::settings_of(create).throughput = client::ContainerSettings::Throughput::kProvisioned;
  // A sanitized node answers several times more slowly: there the budget is smaller (100 RU/s: the writes below take
  // ~2 s, retried on 429) and the items live longer, so its readers still outrun the budget every second.
  const uint32_t budget = static_cast<uint32_t>(testing_env::size_for_build(400, 100));
  test::settings_of(create).provisioned_ru_per_second = budget;
  ASSERT_EQ(client.execute(create).status, 201);
  constexpr int kItems = 40;  // 200 RU of writes: within one second's budget (normal build)
  const int kTtl = static_cast<int>(testing_env::size_for_build(3, 12));  // the load is on before any expires
  write_items(client, "busy", "doomed", kItems, kTtl);
  const int64_t deadline_s = latest_deadline(client, "busy", "doomed", kItems, kTtl);

  // The load: every node is asked for more than 400 RU/s of reads, served locally; 429s show the demand exceeded
  // the budget, and the collector may not take what is left. Bounded: it stops by itself after 60 s.
  std::atomic<bool> stop{false};
  std::vector<std::atomic<int64_t>> throttled(cluster.size());
  std::vector<std::atomic<int64_t>> served(cluster.size());
  std::vector<std::thread> load;
  // One closed-loop reader per node outruns 400 RU/s in a normal build; a sanitized node answers several times more
  // slowly, so there each node gets three (and the smaller budget), or seconds with spare RU let the collector in.
  const size_t readers_per_node = testing_env::size_for_build(1, 3);
  std::printf("%zu closed-loop readers per node, %u RU/s, ttl %d s\n", readers_per_node, budget, kTtl);
  for (size_t reader_index = 0; reader_index < cluster.size() * readers_per_node; ++reader_index) {
    const size_t n = reader_index % cluster.size() + 1;
    load.emplace_back([&, n] {
      client::ClientOptions pinned = cluster.client_options();
      pinned.retry_throttled = false;
      pinned.preferred_endpoint = n;
      client::Client reader(pinned);
      Request read = item_key(Op::kReadItem, kDb, "busy", "p", "absent");
      read.options.consistency = Consistency::kEventual;
      read.endpoint = n;
      const auto until = Clock::now() + std::chrono::seconds(60);
      while (!stop.load() && Clock::now() < until) {
        const Response response = reader.execute(read);
        (response.status == 429 ? throttled : served)[n - 1].fetch_add(1);
      }
    });
  }
  struct StopLoad {
    std::atomic<bool>& stop;
    std::vector<std::thread>& load;
    ~StopLoad() {
      stop = true;
      for (std::thread& thread : load) thread.join();
    }
  } stop_load{stop, load};

  // Every item expires (replicated time passes the last deadline on every node), and every node's backlog metric
  // shows all of them while the load goes on.
  ASSERT_TRUE(replicated_time_passed(cluster, deadline_s, milliseconds(15000)))
      << "replicated time did not pass the last deadline " << deadline_s;
  EXPECT_TRUE(wait_every_node(
      cluster, [&](const Scrape& s) { return s.sum("mayfly_ttl_gc_backlog_items", label) == kItems; },
      milliseconds(10000)))
      << describe(scrape_all(cluster), container);
  // Hold the load a little longer, and look again: still nothing deleted anywhere, nothing spare.
  const auto held_until = Clock::now() + std::chrono::milliseconds(1500);
  while (Clock::now() < held_until) {
    for (const Scrape& s : scrape_all(cluster)) {
      EXPECT_EQ(s.sum("mayfly_ttl_gc_deleted_items_total", label), 0) << describe(scrape_all(cluster), container);
      EXPECT_EQ(s.sum("mayfly_ttl_gc_spare_ru", label), 0);
      EXPECT_EQ(s.sum("mayfly_ttl_gc_backlog_items", label), kItems);
      EXPECT_GT(s.sum("mayfly_ttl_gc_backlog_bytes", label), kItems * 10);
    }
    std::this_thread::sleep_for(milliseconds(250));  // a sampling interval, not a synchronisation
  }
  stop = true;
  for (std::thread& thread : load) thread.join();
  load.clear();
  for (size_t n = 1; n <= cluster.size(); ++n) {
    std::cerr << "[gc] node " << n << ": load served " << served[n - 1] << ", throttled " << throttled[n - 1] << "\n";
    EXPECT_GT(throttled[n - 1].load(), 0) << "the load never exceeded the budget on node " << n;
  }
  // Expired items are invisible on every node, deleted yet or not.
  client::ClientOptions patient = cluster.client_options();
  patient.max_retries_throttled = 100;
  client::Client one(patient);
  for (size_t n = 1; n <= cluster.size(); ++n) {
    Request read = item_key(Op::kReadItem, kDb, "busy", "p", "doomed-0");
    read.options.consistency = Consistency::kEventual;
    read.endpoint = n;
    EXPECT_EQ(one.execute(read).status, 404) << "node " << n;
  }

  // Load gone: every node drains its own copy, and reports it.
  EXPECT_TRUE(wait_every_node(
      cluster,
      [&](const Scrape& s) {
        return s.sum("mayfly_ttl_gc_backlog_items", label) == 0 &&
               s.sum("mayfly_ttl_gc_deleted_items_total", label) == kItems;
      },
      milliseconds(20000)))
      << describe(scrape_all(cluster), container);
  for (const Scrape& s : scrape_all(cluster)) {
    EXPECT_EQ(s.sum("mayfly_ttl_gc_deletion_lag_seconds_count", label), kItems) << s.text();
    // The items waited at least the starved second and a half: the mean lag is well above 1 s.
    EXPECT_GT(s.sum("mayfly_ttl_gc_deletion_lag_seconds_sum", label), 1.0 * kItems);
    EXPECT_GT(s.sum("mayfly_ttl_gc_ru_spent_total", label), 0);
    EXPECT_EQ(s.sum("mayfly_ttl_gc_backlog_bytes", label), 0);
    EXPECT_EQ(s.sum("mayfly_ttl_gc_oldest_expired_age_seconds", label), 0);
    EXPECT_FALSE(s.has("mayfly_ru_consumed_total", {{"container", container}, {"op", "ttl_delete"}}))
        << "TTL deletes are free for provisioned containers";
    EXPECT_EQ(s.sum("mayfly_storage_live_items", label), 0);
  }
}

TEST(IntegrationGc, ServerlessTtlDeletesAreConsumedRequestUnitsAndExpiringSoonIsReported) {
  ClusterOptions options;
  options.name = "gc-serverless";
  options.metrics = true;
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client client(cluster.client_options());
  const std::string container = std::string(kDb) + "/free";
  const std::map<std::string, std::string> label = {{"container", container}};
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, kDb)).status, 201);
  ASSERT_EQ(client.execute(create_container(kDb, "free", "/pk", "-1")).status, 201);  // serverless by default
  constexpr int kShort = 20;
  constexpr int kMinute = 7;  // expire within the minute, after the test
  constexpr int kHour = 5;    // within the hour
  write_items(client, "free", "short", kShort, 1);
  write_items(client, "free", "minute", kMinute, 50);
  write_items(client, "free", "hour", kHour, 3000);
  write_items(client, "free", "never", 3, -1);

  // Every figure at once, on every node (the expiring-soon counts are refreshed at most every 5 s, so wait).
  const std::map<std::string, std::string> ttl_deletes = {{"container", container}, {"op", "ttl_delete"}};
  auto settled = [&](const Scrape& s) {
    return s.sum("mayfly_ttl_gc_deleted_items_total", label) == kShort &&
           s.sum("mayfly_ttl_gc_backlog_items", label) == 0 &&
           // Every item body is under 1 KB: 5 RU per delete, on every node (each node reclaims its own copy).
           s.sum("mayfly_ru_consumed_total", ttl_deletes) == kShort * 5 &&
           s.sum("mayfly_ttl_gc_ru_spent_total", label) == kShort * 5 &&
           s.sum("mayfly_ttl_items_expiring", {{"container", container}, {"window", "1m"}}) == kMinute &&
           s.sum("mayfly_ttl_items_expiring", {{"container", container}, {"window", "10m"}}) == kMinute &&
           s.sum("mayfly_ttl_items_expiring", {{"container", container}, {"window", "1h"}}) == kMinute + kHour &&
           s.sum("mayfly_storage_live_items", label) == kMinute + kHour + 3;
  };
  EXPECT_TRUE(wait_every_node(cluster, settled, milliseconds(20000)));
  for (const Scrape& s : scrape_all(cluster)) {
    EXPECT_TRUE(settled(s)) << "deleted " << s.sum("mayfly_ttl_gc_deleted_items_total", label) << ", ttl_delete RU "
                            << s.sum("mayfly_ru_consumed_total", ttl_deletes) << ", expiring 1m/10m/1h "
                            << s.sum("mayfly_ttl_items_expiring", {{"container", container}, {"window", "1m"}}) << "/"
                            << s.sum("mayfly_ttl_items_expiring", {{"container", container}, {"window", "10m"}}) << "/"
                            << s.sum("mayfly_ttl_items_expiring", {{"container", container}, {"window", "1h"}})
                            << ", live " << s.sum("mayfly_storage_live_items", label) << "\n"
                            << s.text();
  }
}

TEST(IntegrationGc, OverBudgetRequestsAre429WithRetryAfterApplyNothingAndClientRetriesSucceed) {
  ClusterOptions options;
  options.name = "gc-throttle";
  options.metrics = true;
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, kDb)).status, 201);
  Request create = create_container(kDb, "tight", "/pk");
  test::settings_of(create).throughput = client::ContainerSettings::Throughput::kProvisioned;
  test::settings_of(create).provisioned_ru_per_second = 50;  // ten 1 KB writes a second
  ASSERT_EQ(client.execute(create).status, 201);

  // Without retries: write until the budget runs out; the 429 says when to come back, and its item is not written.
  client::ClientOptions impatient = cluster.client_options();
  impatient.retry_throttled = false;
  client::Client raw(impatient);
  std::optional<std::string> rejected_id;
  Response rejected;
  for (int i = 0; i < 200 && !rejected_id; ++i) {
    const std::string id = "raw-" + std::to_string(i);
    Response response =
        raw.execute(item_write(Op::kCreateItem, kDb, "tight", R"({"id":")" + id + R"(","pk":"p"})"));
    if (response.status == 429) {
      rejected_id = id;
      rejected = response;
    } else {
      ASSERT_EQ(response.status, 201) << response.message;
    }
  }
  ASSERT_TRUE(rejected_id.has_value()) << "200 writes never exceeded 50 RU/s";
  EXPECT_GT(rejected.retry_after_ms, 0u);
  EXPECT_LE(rejected.retry_after_ms, 1000u);
  EXPECT_FALSE(rejected.message.empty());
  // Nothing of it was applied: a strong read (after the window has passed, so it is not throttled itself) is a 404.
  client::ClientOptions patient = cluster.client_options();
  patient.max_retries_throttled = 100;
  client::Client reader(patient);
  Request read = item_key(Op::kReadItem, kDb, "tight", "p", *rejected_id);
  read.options.consistency = Consistency::kStrong;
  EXPECT_EQ(reader.execute(read).status, 404) << "a throttled create must apply nothing";

  // With the library's retries (the default), 30 writes — three seconds of budget — all succeed.
  std::vector<Request> writes;
  for (int i = 0; i < 30; ++i) {
    writes.push_back(item_write(Op::kCreateItem, kDb, "tight", R"({"id":"retried-)" + std::to_string(i) +
                                                                   R"(","pk":"p"})"));
  }
  client::ClientOptions retrying = cluster.client_options();
  retrying.max_retries_throttled = 100;
  retrying.request_timeout_ms = 30000;
  client::Client writer(retrying);
  for (const Request& write : writes) {
    const Response response = writer.execute(write);
    EXPECT_EQ(response.status, 201) << test::body_of(write) << ": " << response.message;
  }
  std::optional<Scrape> on_leader = cluster.scrape(leader);
  ASSERT_TRUE(on_leader.has_value());
  EXPECT_GT(on_leader->sum("mayfly_requests_throttled_total", {{"container", std::string(kDb) + "/tight"}}), 0)
      << on_leader->text();
  EXPECT_GT(on_leader->sum("mayfly_requests_total", {{"status", "429"}}), 0);
}

// The collector's two paces (node/gc_pacer.h), with --gc-interval-ms 5000: one pass of at most 1,000 items per
// container every 5 s took 15 s to delete 6,000 that expired over the seconds they were written (the fixed pace,
// measured by taking the idle pace out). An idle node runs its passes back to back and deletes them all within 10 s
// (2.6–3.2 s measured); the same backlog while a writer keeps every node busy loses at most 100 items per pass, one
// pass per interval; when the writer stops, it drains at the idle pace.
TEST(IntegrationGc, AnIdleNodeCollectsInPassesBackToBackABusyOneInShortPassesEveryInterval) {
  Cluster cluster(metrics_cluster("gc-pace", "5000"));
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, kDb)).status, 201);
  for (const char* name : {"idle", "busy", "load"}) {
    ASSERT_EQ(client.execute(create_container(kDb, name, "/pk", "-1")).status, 201);
  }
  constexpr int kItems = 6000;
  const int ttl = static_cast<int>(testing_env::size_for_build(3, 10));
  const std::map<std::string, std::string> idle = {{"container", std::string(kDb) + "/idle"}};
  const std::map<std::string, std::string> busy = {{"container", std::string(kDb) + "/busy"}};

  // Idle: nothing but the collector once the items expired.
  int64_t idle_deadline = 0;
  write_items(client, "idle", "i", kItems, ttl, &idle_deadline);
  ASSERT_TRUE(replicated_time_passed(cluster, idle_deadline, milliseconds(30000)));
  const auto expired_at = Clock::now();
  EXPECT_TRUE(wait_every_node(
      cluster,
      [&](const Scrape& s) {
        return s.sum("mayfly_ttl_gc_deleted_items_total", idle) == kItems &&
               s.sum("mayfly_ttl_gc_backlog_items", idle) == 0;
      },
      milliseconds(10000)))
      << describe(scrape_all(cluster), std::string(kDb) + "/idle");
  std::printf("[gc-pace] idle: %d items deleted on every node %.1f s after they expired\n", kItems,
              std::chrono::duration<double>(Clock::now() - expired_at).count());
  for (const Scrape& s : scrape_all(cluster)) EXPECT_EQ(s.sum("mayfly_ttl_gc_busy", {}), 0) << s.text();

  // Busy: a writer keeps every node applying writes while the second backlog expires. Bounded: it stops after 120 s.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> load_writes{0};
  std::thread writer([&] {
    client::Client load(cluster.client_options());
    const auto until = Clock::now() + std::chrono::seconds(120);
    for (int round = 0; !stop.load() && Clock::now() < until; ++round) {
      std::vector<Request> writes;
      for (int i = 0; i < 50; ++i) {
        writes.push_back(item_write(Op::kUpsertItem, kDb, "load",
                                    R"({"id":"w-)" + std::to_string(i) + R"(","pk":"p","round":)" +
                                        std::to_string(round) + "}"));
      }
      for (const Response& response : load.execute_all(writes)) {
        if (response.status == 200 || response.status == 201) load_writes.fetch_add(1);
      }
    }
  });
  StopAndJoin stop_writer{stop, writer};
  int64_t busy_deadline = 0;
  write_items(client, "busy", "b", kItems, ttl, &busy_deadline);
  ASSERT_TRUE(replicated_time_passed(cluster, busy_deadline, milliseconds(30000)));
  EXPECT_TRUE(wait_every_node(
      cluster, [&](const Scrape& s) { return s.sum("mayfly_ttl_gc_busy", {}) == 1; }, milliseconds(5000)))
      << "the collector did not switch to its busy pace";
  const std::vector<Scrape> before = scrape_all(cluster);
  std::this_thread::sleep_for(milliseconds(6000));  // the window measured: at most two passes of 100
  const std::vector<Scrape> after = scrape_all(cluster);
  for (size_t n = 0; n < cluster.size(); ++n) {
    const double deleted = after[n].sum("mayfly_ttl_gc_deleted_items_total", busy) -
                           before[n].sum("mayfly_ttl_gc_deleted_items_total", busy);
    std::printf("[gc-pace] busy: node %zu deleted %.0f items in 6 s (backlog %.0f)\n", n + 1, deleted,
                after[n].sum("mayfly_ttl_gc_backlog_items", busy));
    EXPECT_LE(deleted, 200) << "node " << n + 1 << " did not yield to the writer";
    EXPECT_GT(after[n].sum("mayfly_ttl_gc_backlog_items", busy), kItems - 500);
    EXPECT_EQ(after[n].sum("mayfly_ttl_gc_busy", {}), 1);
  }
  stop = true;
  writer.join();
  std::printf("[gc-pace] the writer applied %lld writes\n", static_cast<long long>(load_writes.load()));
  EXPECT_TRUE(wait_every_node(
      cluster,
      [&](const Scrape& s) {
        return s.sum("mayfly_ttl_gc_deleted_items_total", busy) == kItems &&
               s.sum("mayfly_ttl_gc_backlog_items", busy) == 0 && s.sum("mayfly_ttl_gc_busy", {}) == 0;
      },
      milliseconds(15000)))
      << describe(scrape_all(cluster), std::string(kDb) + "/busy");
}

// What the collector drained is compacted on every node (node/gc_compactor.h), by mayflyd's own compaction thread:
// with --gc-compact-min-deletes 1000, the 4,000 items' key ranges (items, own-ttl index, ts index: 12,000 keys) are
// compacted once they are deleted, but for what is left of a range below the threshold (at most 999 keys in each).
TEST(IntegrationGc, EveryNodeCompactsTheRangesItsCollectorDrained) {
  ClusterOptions options = metrics_cluster("gc-compact", "200");
  options.extra_flags.insert(options.extra_flags.end(),
                             {"--gc-compact-min-deletes", "1000", "--gc-compact-interval-ms", "100"});
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, kDb)).status, 201);
  ASSERT_EQ(client.execute(create_container(kDb, "drained", "/pk", "-1")).status, 201);
  constexpr int kItems = 4000;
  const std::map<std::string, std::string> label = {{"container", std::string(kDb) + "/drained"}};
  int64_t deadline = 0;
  write_items(client, "drained", "d", kItems, 2, &deadline);
  ASSERT_TRUE(replicated_time_passed(cluster, deadline, milliseconds(30000)));
  EXPECT_TRUE(wait_every_node(
      cluster,
      [&](const Scrape& s) {
        return s.sum("mayfly_ttl_gc_deleted_items_total", label) == kItems &&
               s.sum("mayfly_ttl_gc_compacted_keys_total", {}) >= 3 * kItems - 3 * 999;
      },
      milliseconds(30000)))
      << describe(scrape_all(cluster), std::string(kDb) + "/drained");
  for (const Scrape& s : scrape_all(cluster)) {
    EXPECT_GE(s.sum("mayfly_ttl_gc_compactions_total", {}), 3) << s.text();
    EXPECT_LE(s.sum("mayfly_ttl_gc_compacted_keys_total", {}), 3 * kItems) << s.text();
    EXPECT_GT(s.sum("mayfly_ttl_gc_compaction_seconds_total", {}), 0) << s.text();
    std::printf("[gc-compact] %.0f range compactions, %.0f keys, %.3f s\n",
                s.sum("mayfly_ttl_gc_compactions_total", {}), s.sum("mayfly_ttl_gc_compacted_keys_total", {}),
                s.sum("mayfly_ttl_gc_compaction_seconds_total", {}));
  }
}

}  // namespace
}  // namespace mayfly::it
