// A large expired backlog against real mayflyd processes (issue #10, ctest -L hostile): every scan on the driver
// thread (backlog count, collector pass, container metrics) is bounded by work done, so expiring a whole container
// at once, restarting a node over it and collecting it move no leader.
//
// A 3-node cluster with the default Raft timing (elections after 300–600 ms of silence) and one container with a
// long defaultTtl is filled with small items that inherit it (MAYFLY_IT_SCAN_ITEMS, default 300,000). Then:
//   1. defaultTtl 1: every item expires at once. The collector is held off (a provisioned container and
//      --gc-ru-share 0), so the count alone runs: every node's backlog gauge reaches the full count and says it is
//      complete (mayfly_ttl_gc_backlog_counting 0).
//   2. A follower restarts and counts the whole backlog again from scratch.
//   3. The container becomes serverless: every node's collector drains it to 0, deleting every item.
// Throughout, every node is scraped every ~100 ms: the same leader and term everywhere, no leader change counted.
// Printed: the fill rate, how long each count and the drain took, and any "held the driver thread" warning a node
// logged (it logs any collector pass or metrics refresh that held its driver for 100 ms or more).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/env.h"
#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;
using client::Response;

constexpr char kDb[] = "scan";
constexpr char kContainer[] = "c";
const std::map<std::string, std::string> kLabel = {{"container", "scan/c"}};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Writes items [first, first + count) with `threads` clients, each keeping a batch of `window` requests in flight.
// Upserts, so a retry after an unknown outcome is harmless. Returns how many were acknowledged.
int64_t fill(const Cluster& cluster, int64_t first, int64_t count, int threads, int window) {
  std::atomic<int64_t> next{first};
  std::atomic<int64_t> acknowledged{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([&] {
      client::Client client(cluster.client_options());
      std::vector<Request> batch;
      while (true) {
        const int64_t start = next.fetch_add(window);
        if (start >= first + count) return;
        const int64_t end = std::min<int64_t>(start + window, first + count);
        batch.clear();
        for (int64_t i = start; i < end; ++i) {
          batch.push_back(item_write(Op::kUpsertItem, kDb, kContainer,
                                     R"({"id":")" + std::to_string(i) + R"(","pk":"p)" + std::to_string(i % 1000) +
                                         R"("})"));
        }
        for (int attempt = 0; attempt < 5 && !batch.empty(); ++attempt) {
          std::vector<Response> responses = client.execute_all(batch);
          std::vector<Request> again;
          for (size_t i = 0; i < responses.size(); ++i) {
            if (responses[i].ok()) {
              acknowledged.fetch_add(1);
            } else {
              again.push_back(batch[i]);
            }
          }
          batch = std::move(again);
        }
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  return acknowledged.load();
}

// Scrapes every node every ~100 ms on its own thread and records any departure from the leader and term seen at the
// start, and the backlog figures of each node over time.
class Watch {
 public:
  Watch(const Cluster& cluster, uint64_t leader, uint64_t term) : cluster_(cluster), leader_(leader), term_(term) {
    thread_ = std::thread([this] { run(); });
  }
  ~Watch() { stop(); }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Nodes not to judge (while one restarts: it starts with no leader known).
  void skip(size_t n, bool skip) { skipped_[n - 1].store(skip); }
  std::vector<std::string> violations() {
    std::lock_guard<std::mutex> lock(mutex_);
    return violations_;
  }
  int64_t scrapes() const { return scrapes_.load(); }

 private:
  void run() {
    while (!stop_.load()) {
      for (size_t n = 1; n <= cluster_.size(); ++n) {
        if (skipped_[n - 1].load()) continue;
        std::optional<Scrape> scrape = cluster_.scrape(n);
        if (!scrape) continue;  // a restarting node; a dead one fails elsewhere
        scrapes_.fetch_add(1);
        const double term = scrape->sum("mayfly_raft_term");
        const double leader = scrape->sum("mayfly_raft_leader");
        if (term != static_cast<double>(term_) || leader != static_cast<double>(leader_)) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (violations_.size() < 20) {
            violations_.push_back("node " + std::to_string(n) + " at +" + std::to_string(seconds_since(start_)) +
                                  " s: term " + std::to_string(static_cast<uint64_t>(term)) + ", leader " +
                                  std::to_string(static_cast<uint64_t>(leader)));
          }
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
  }

  const Cluster& cluster_;
  const uint64_t leader_;
  const uint64_t term_;
  const Clock::time_point start_ = Clock::now();
  std::array<std::atomic<bool>, 3> skipped_{};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> scrapes_{0};
  std::mutex mutex_;
  std::vector<std::string> violations_;
  std::thread thread_;
};

// Waits until node n's backlog gauge is complete and equals `items`; returns the seconds it took (or -1).
double wait_counted(const Cluster& cluster, size_t n, int64_t items, milliseconds timeout, std::string* last) {
  const Clock::time_point start = Clock::now();
  const bool done = wait_until(
      [&] {
        std::optional<Scrape> scrape = cluster.scrape(n);
        if (!scrape) return false;
        *last = "backlog " + std::to_string(scrape->sum("mayfly_ttl_gc_backlog_items", kLabel)) + ", counting " +
                std::to_string(scrape->sum("mayfly_ttl_gc_backlog_counting", kLabel)) + ", deleted " +
                std::to_string(scrape->sum("mayfly_ttl_gc_deleted_items_total", kLabel));
        return scrape->has("mayfly_ttl_gc_backlog_counting", kLabel) &&
               scrape->sum("mayfly_ttl_gc_backlog_counting", kLabel) == 0 &&
               scrape->sum("mayfly_ttl_gc_backlog_items", kLabel) == static_cast<double>(items);
      },
      timeout, milliseconds(50));
  return done ? seconds_since(start) : -1;
}

// Lines of node n's log that report a long hold of its driver thread.
std::vector<std::string> hold_warnings(const Cluster& cluster, size_t n) {
  std::istringstream log(cluster.log_text(n));
  std::vector<std::string> out;
  for (std::string line; std::getline(log, line);) {
    if (line.find("held the driver thread") != std::string::npos) out.push_back(line);
  }
  return out;
}

TEST(Scans, ExpiringRestartingAndCollectingALargeBacklogMovesNoLeader) {
  // 300,000 items; 50,000 in a sanitized build, which fills, counts and collects them several times slower (the
  // same work on the driver thread takes as long as the normal build's 300,000).
  const int64_t items = static_cast<int64_t>(
      testing_env::env_or("MAYFLY_IT_SCAN_ITEMS", testing_env::size_for_build(300000, 50000)));
  std::printf("%lld items (MAYFLY_IT_SCAN_ITEMS%s)\n", static_cast<long long>(items),
              testing_env::kSanitized ? "; sanitized build" : "");
  ClusterOptions options;
  options.name = "scan";
  options.metrics = true;
  // The collector never touches provisioned containers (phase 1). Otherwise the defaults (node/gc_pacer.h): an idle
  // node runs passes of at most 1,000 deletes per container back to back (phase 3 drains 30–40k items/s per node).
  options.extra_flags = {"--gc-ru-share", "0"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client admin(cluster.client_options());
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, kDb)).status, 201);
  Request create = create_container(kDb, kContainer, "/pk", "86400");
  test::settings_of(create).throughput = client::ContainerSettings::Throughput::kProvisioned;
  test::settings_of(create).provisioned_ru_per_second = 1'000'000'000;
  ASSERT_EQ(admin.execute(create).status, 201);

  const Clock::time_point fill_start = Clock::now();
  const int64_t written = fill(cluster, 0, items, 2, 500);
  const double fill_seconds = seconds_since(fill_start);
  std::printf("filled %lld items in %.1f s (%.0f writes/s)\n", static_cast<long long>(written), fill_seconds,
              static_cast<double>(written) / fill_seconds);
  ASSERT_EQ(written, items);

  // The leader and term everyone agrees on now; none of what follows may change them.
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  std::optional<NodeStatus> leader_status = cluster.status(leader);
  ASSERT_TRUE(leader_status.has_value());
  const uint64_t term = leader_status->term;
  std::vector<double> changes_before;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    std::optional<Scrape> scrape = cluster.scrape(n);
    ASSERT_TRUE(scrape.has_value());
    changes_before.push_back(scrape->sum("mayfly_raft_leader_changes_total"));
  }
  Watch watch(cluster, leader, term);

  // 1. Every item expires at once (the newest a second after its write). Only the count runs.
  Request expire = container_req(Op::kUpdateContainer, kDb, kContainer);
  test::settings_of(expire).default_ttl = client::ContainerSettings::DefaultTtl::kSet;
  test::settings_of(expire).default_ttl_json = "1";
  test::settings_of(expire).force = true;  // it expires the whole container on purpose (the guard would refuse it)
  const Response changed = admin.execute(expire);
  ASSERT_TRUE(changed.ok()) << changed.status << " " << changed.message;
  const Clock::time_point change_at = Clock::now();
  for (size_t n = 1; n <= cluster.size(); ++n) {
    std::string last;
    const double took = wait_counted(cluster, n, items, milliseconds(120000), &last);
    EXPECT_GE(took, 0) << "node " << n << " never reported the whole backlog counted: " << last;
    std::printf("node %zu: backlog of %lld counted and complete %.1f s after the change\n", n,
                static_cast<long long>(items), seconds_since(change_at));
  }

  // 2. A follower restarts over the expired backlog and counts it again from scratch.
  const size_t follower = leader == 1 ? 2 : 1;
  watch.skip(follower, true);
  ASSERT_TRUE(cluster.stop_node(follower));
  ASSERT_TRUE(cluster.start_node(follower));
  const Clock::time_point restarted_at = Clock::now();
  std::string last;
  const double recount = wait_counted(cluster, follower, items, milliseconds(120000), &last);
  EXPECT_GE(recount, 0) << "node " << follower << " never recounted the backlog after its restart: " << last;
  std::printf("node %zu restarted: backlog recounted %.1f s after its start\n", follower, seconds_since(restarted_at));
  ASSERT_TRUE(wait_until(
      [&] {
        std::optional<NodeStatus> status = cluster.status(follower);
        return status && status->leader == leader && status->term == term;
      },
      milliseconds(10000)))
      << "the restarted follower does not follow the same leader in the same term";
  watch.skip(follower, false);

  // 3. Serverless: the collectors drain it.
  Request serverless = container_req(Op::kUpdateContainer, kDb, kContainer);
  test::settings_of(serverless).throughput = client::ContainerSettings::Throughput::kServerless;
  const Response drained = admin.execute(serverless);
  ASSERT_TRUE(drained.ok()) << drained.status << " " << drained.message;
  const Clock::time_point drain_at = Clock::now();
  for (size_t n = 1; n <= cluster.size(); ++n) {
    std::string state;
    const bool done = wait_until(
        [&] {
          std::optional<Scrape> scrape = cluster.scrape(n);
          if (!scrape) return false;
          state = "backlog " + std::to_string(scrape->sum("mayfly_ttl_gc_backlog_items", kLabel)) + ", deleted " +
                  std::to_string(scrape->sum("mayfly_ttl_gc_deleted_items_total", kLabel)) + ", live " +
                  std::to_string(scrape->sum("mayfly_storage_live_items", kLabel));
          return scrape->sum("mayfly_ttl_gc_backlog_items", kLabel) == 0 &&
                 scrape->sum("mayfly_ttl_gc_backlog_counting", kLabel) == 0 &&
                 scrape->sum("mayfly_ttl_gc_deleted_items_total", kLabel) == static_cast<double>(items);
        },
        milliseconds(std::max<int64_t>(300000, items / 2)), milliseconds(200));
    EXPECT_TRUE(done) << "node " << n << " did not collect the backlog: " << state;
    std::printf("node %zu: collected %.1f s after the container went serverless\n", n, seconds_since(drain_at));
  }

  watch.stop();
  std::printf("%lld scrapes while watching\n", static_cast<long long>(watch.scrapes()));
  EXPECT_GT(watch.scrapes(), 30);
  for (const std::string& violation : watch.violations()) ADD_FAILURE() << "leader change: " << violation;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    std::optional<Scrape> scrape = cluster.scrape(n);
    ASSERT_TRUE(scrape.has_value());
    // The restarted follower's counter starts again at 0.
    if (n != follower) {
      EXPECT_EQ(scrape->sum("mayfly_raft_leader_changes_total"), changes_before[n - 1]) << "node " << n;
    }
    EXPECT_EQ(scrape->sum("mayfly_raft_term"), static_cast<double>(term)) << "node " << n;
    for (const std::string& line : hold_warnings(cluster, n)) std::printf("node %zu: %s\n", n, line.c_str());
  }
}

}  // namespace
}  // namespace mayfly::it
