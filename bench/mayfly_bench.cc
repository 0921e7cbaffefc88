// Cluster benchmark: a load generator for a running Mayfly cluster, from the client's point of view.
//   Workloads: upserts of 256 B and 1 KB items, each with its own `ttl`, into a container it creates (partition key
//   /pk, a few hundred partitions); point reads, at `strong` and at `session` consistency, of items it wrote.
//   Change feed reads (`feed`, container created with --change-feed on): each client reads the whole feed, mode all,
//   page after page with continuations, and starts again from the beginning when it is caught up.
//   Concurrency: 1, 50 and 1000 clients. "N clients" are simulated as N requests kept in flight with
//   Client::execute_async from one thread (one event loop), spread over a few Client instances (connections).
//   Every run stops by itself after --seconds or --max-requests requests, whichever comes first.
// Prints the command and a markdown table: throughput is the median of --runs runs, latency percentiles are over
// every sample of every run, errors are final (after the client's own retries) and counted by status.
// --change-feed on,off is an A/B of the write path: each write workload runs once per setting per round, interleaved
// off/on, on/off, ... for --runs rounds, each run on a new cluster (with --start-cluster; else into a fresh container),
// and one table gives both settings and their ratio.
//
//   build/bench/mayfly-bench [--start-cluster] [--endpoints H:P,...] [--seconds S] [--runs R] [--max-requests N]
//                            [--clients 1,50,1000] [--workloads upsert256,upsert1k,strong,session,feed] ...
// With --start-cluster it launches 3 mayflyd from its own build directory on 127.0.0.1 (--base-port, fresh data in
// a temporary directory; fsync is always on), waits for a leader, runs, and stops them (SIGTERM to its own PIDs).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "bench/command_line.h"
#include "client/client.h"

namespace mayfly::bench {
namespace {

using client::Client;
using client::ClientOptions;
using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

// What --help prints below the flags (CLI11 lists the flags themselves), and what a refused value is answered with.
constexpr const char* kUsage =
    "  workloads: upsert256, upsert1k (writes); strong, session (point reads of items written before, or of 2000\n"
    "    --preload items); feed (every client reads the container's change feed from the beginning, mode all,\n"
    "    --feed-page changes per page (1..1000, default 100), page after page at session consistency, and starts\n"
    "    again when caught up; ops/s = changes/s, latency per page; needs --change-feed on)\n"
    "  --change-feed on|off: the container is created with its change feed on or off (default off)\n"
    "  --change-feed on,off: A/B of the write path: each write workload once per setting per round (off, on; then\n"
    "    on, off; ...) for --runs rounds, each run on a new cluster (--start-cluster) or into a fresh container;\n"
    "    prints both medians, min-max and on/off\n"
    "    (write workloads only)\n";

// ---- the load ----------------------------------------------------------------------------------------------------

enum class Workload { kUpsert256, kUpsert1K, kReadStrong, kReadSession, kFeed };

struct WorkloadInfo {
  Workload workload;
  const char* flag;
  const char* label;
};

constexpr WorkloadInfo kWorkloads[] = {
    {Workload::kUpsert256, "upsert256", "upsert 256 B item, own ttl"},
    {Workload::kUpsert1K, "upsert1k", "upsert 1 KB item, own ttl"},
    {Workload::kReadStrong, "strong", "point read, strong"},
    {Workload::kReadSession, "session", "point read, session"},
    {Workload::kFeed, "feed", "change feed read, all, from the start (ops = changes)"},
};

bool is_write(Workload workload) { return workload == Workload::kUpsert256 || workload == Workload::kUpsert1K; }

struct Key {
  std::string pk_json;  // "\"p17\""
  std::string id;
};

struct Settings {
  std::string database = "bench";
  std::string container = "items";
  int partitions = 256;
  int ttl = 3600;
  double seconds = 5;
  int runs = 3;
  uint64_t max_requests = 200000;
  size_t connections = 4;
  uint32_t max_batch = 128;  // ClientOptions::max_batch_requests (1: one call per request)
  bool change_feed = false;  // the container is created with its change feed on (docs/changefeed.md)
  uint32_t feed_page = 100;  // feed: changes per page (max_items)
  bool per_second = false;   // print each run's successful operations second by second
};

// The status counted for a feed answer that is not a change feed page (statuses are > 0; 0 is an exception).
constexpr int kBadPage = -1;

// What one run measured.
struct RunResult {
  double ops_per_second = 0;  // successful operations per second of the run's wall time (feed: changes read)
  uint64_t issued = 0;
  // feed: pages answered with a valid page, the changes on them, and how many times a reader reached the end.
  uint64_t pages = 0, changes = 0, passes = 0;
  double pages_per_second = 0;
  std::map<int, uint64_t> errors;       // status (0: exception) -> count
  std::map<int, std::string> messages;  // status -> first message seen
  std::vector<double> latencies_ms;     // successful and failed requests alike
  double wall_seconds = 0;
  std::vector<uint64_t> per_second;     // successful operations completed in each second of the run
};

// Keeps `concurrency` requests in flight on one event loop until the time or the request budget runs out.
class Run {
 public:
  Run(std::vector<std::unique_ptr<Client>>& clients, const Settings& settings, Workload workload, size_t concurrency,
      std::vector<Key>& keys, uint64_t& next_item, std::mt19937_64& rng)
      : clients_(clients),
        settings_(settings),
        workload_(workload),
        concurrency_(concurrency),
        keys_(keys),
        next_item_(next_item),
        rng_(rng),
        used_clients_(std::min(concurrency, clients.size())),
        continuations_(concurrency),
        tasks_(errors_) {
    if (is_write(workload)) {
      const size_t target = workload == Workload::kUpsert256 ? 256 : 1024;
      // {"id":"<id>","pk":"<pk>","ttl":<ttl>,"v":"<pad>"}: the padding makes the body exactly `target` bytes for
      // the longest ids this run can produce; shorter ids give bodies a few bytes shorter.
      const std::string sample = body("w1k-99999999", "p" + std::to_string(settings.partitions - 1), "");
      padding_.assign(target > sample.size() ? target - sample.size() : 0, 'x');
    }
  }

  RunResult execute() {
    auto done = kj::newPromiseAndFulfiller<void>();
    done_ = kj::mv(done.fulfiller);
    start_ = Clock::now();
    deadline_ = start_ + std::chrono::microseconds(static_cast<int64_t>(settings_.seconds * 1e6));
    active_ = concurrency_;
    for (size_t slot = 0; slot < concurrency_; ++slot) issue(slot);
    // Bounded: no new request after the deadline or the budget, and each one in flight ends within the client's
    // request timeout (a 408 at worst).
    done.promise.wait(clients_.front()->wait_scope());
    result_.wall_seconds = std::chrono::duration<double>(last_done_ - start_).count();
    uint64_t errors = 0;
    for (const auto& [status, count] : result_.errors) errors += count;
    const double wall = std::max(result_.wall_seconds, 1e-9);
    if (workload_ == Workload::kFeed) {
      result_.ops_per_second = static_cast<double>(result_.changes) / wall;
      result_.pages_per_second = static_cast<double>(result_.pages) / wall;
    } else {
      result_.ops_per_second = static_cast<double>(result_.issued - errors) / wall;
    }
    return std::move(result_);
  }

 private:
  class Errors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override {
      std::fprintf(stderr, "mayfly-bench: unexpected task failure: %s\n", exception.getDescription().cStr());
    }
  };

  std::string body(const std::string& id, const std::string& pk, const std::string& padding) const {
    return "{\"id\":\"" + id + "\",\"pk\":\"" + pk + "\",\"ttl\":" + std::to_string(settings_.ttl) + ",\"v\":\"" +
           padding + "\"}";
  }

  Request next_request(size_t slot, Key& key) {
    Request request;
    request.database = settings_.database;
    request.container = settings_.container;
    if (workload_ == Workload::kFeed) {
      // The whole container's feed (no partition key), spread over the nodes by the client like the other reads;
      // the session token it carries keeps a continuation from going back on another node.
      client::ReadChangeFeed feed;
      feed.mode = client::ReadChangeFeed::Mode::kAll;
      feed.max_items = settings_.feed_page;
      if (continuations_[slot].empty()) {
        feed.from = client::ReadChangeFeed::From::kBeginning;
      } else {
        feed.from = client::ReadChangeFeed::From::kContinuation;
        feed.continuation = continuations_[slot];
      }
      request.operation = std::move(feed);
      request.options.consistency = Consistency::kSession;
      return request;
    }
    if (is_write(workload_)) {
      const uint64_t n = next_item_++;
      const std::string pk = "p" + std::to_string(n % static_cast<uint64_t>(settings_.partitions));
      key.id = (workload_ == Workload::kUpsert256 ? "w256-" : "w1k-") + std::to_string(n);
      key.pk_json = "\"" + pk + "\"";
      request.operation = api::UpsertItem{.body = body(key.id, pk, padding_)};
    } else {
      key = keys_[std::uniform_int_distribution<size_t>(0, keys_.size() - 1)(rng_)];
      request.operation = api::ReadItem{.partition_key = key.pk_json, .id = key.id};
      request.options.consistency =
          workload_ == Workload::kReadStrong ? Consistency::kStrong : Consistency::kSession;
    }
    return request;
  }

  void issue(size_t slot) {
    Key key;
    const Request request = next_request(slot, key);
    ++result_.issued;
    const auto started = Clock::now();
    tasks_.add(clients_[slot % used_clients_]
                   ->execute_async(request)
                   .then(
                       [this, slot, started, key = std::move(key)](Response response) mutable {
                         finish(slot, started, response.status, response.message, response.body, std::move(key));
                       },
                       [this, slot, started](kj::Exception&& exception) {
                         finish(slot, started, 0, exception.getDescription().cStr(), "", Key{});
                       }));
  }

  void finish(size_t slot, Clock::time_point started, int status, const std::string& message,
              const std::string& body, Key key) {
    last_done_ = Clock::now();
    result_.latencies_ms.push_back(std::chrono::duration<double, std::milli>(last_done_ - started).count());
    bool ok = status > 0 && status < 400;
    std::string why = message;
    if (ok && workload_ == Workload::kFeed) {
      // The page's bytes come from the network: a body that is not a feed page is an error, not zero changes.
      std::string error;
      if (const std::optional<FeedPage> page = parse_feed_page(body, error)) {
        ++result_.pages;
        result_.changes += page->changes;
        if (page->caught_up) {  // the end of the feed: read it again from the beginning
          ++result_.passes;
          continuations_[slot].clear();
        } else {
          continuations_[slot] = page->continuation;
        }
      } else {
        ok = false;
        status = kBadPage;
        why = error + ": " + body.substr(0, 200);
      }
    }
    if (!ok) {
      ++result_.errors[status];
      result_.messages.emplace(status, why);
    } else if (is_write(workload_)) {
      keys_.push_back(std::move(key));
    }
    if (ok) {
      const auto second = static_cast<size_t>(std::chrono::duration<double>(last_done_ - start_).count());
      if (result_.per_second.size() <= second) result_.per_second.resize(second + 1, 0);
      ++result_.per_second[second];
    }
    if (last_done_ < deadline_ && result_.issued < settings_.max_requests) {
      issue(slot);
    } else if (--active_ == 0) {
      done_->fulfill();
    }
  }

  std::vector<std::unique_ptr<Client>>& clients_;
  const Settings& settings_;
  Workload workload_;
  size_t concurrency_;
  std::vector<Key>& keys_;
  uint64_t& next_item_;
  std::mt19937_64& rng_;
  size_t used_clients_;
  std::string padding_;
  std::vector<std::string> continuations_;  // feed: where each client reads next (empty: from the beginning)
  Errors errors_;
  kj::TaskSet tasks_;
  kj::Own<kj::PromiseFulfiller<void>> done_;
  size_t active_ = 0;
  Clock::time_point start_, deadline_, last_done_;
  RunResult result_;
};

void check_setup(const Response& response, const std::string& what) {
  if (!response.ok() && response.status != 409) {
    die(what + " failed: " + std::to_string(response.status) + " " + response.message);
  }
}

// The database (once; 409 is fine) and the container `settings.container`, with its feed as `settings.change_feed`.
void create_container(Client& admin, const Settings& settings) {
  Request request;
  request.operation = api::CreateDatabase{};
  request.database = settings.database;
  check_setup(admin.execute(request), "createDatabase " + settings.database);
  api::CreateContainer create;
  create.settings.partition_key_path = "/pk";
  // TTL on without a default (defaultTtl -1): every item's own `ttl` counts, as in Cosmos DB.
  create.settings.default_ttl = client::ContainerSettings::DefaultTtl::kSet;
  create.settings.default_ttl_json = "-1";
  if (settings.change_feed) create.settings.change_feed = client::ContainerSettings::ChangeFeed::kOn;
  request.operation = std::move(create);
  request.container = settings.container;
  check_setup(admin.execute(request), "createContainer " + settings.container);
}

std::string format_errors(const std::map<int, uint64_t>& errors) {
  std::string text;
  for (const auto& [status, count] : errors) {
    text += (text.empty() ? "" : ", ") + std::to_string(count) + " × " +
            (status == 0 ? std::string("exception") : status == kBadPage ? std::string("bad page") : std::to_string(status));
  }
  return text.empty() ? "0" : text;
}

// One run, with the CPU seconds this benchmark used and, when it started the nodes, the leader process, its driver
// thread and the followers used during it.
struct Measured {
  RunResult result;
  double client_cpu = 0, leader_cpu = 0, driver_cpu = 0, followers_cpu = 0;
};

Measured measure(std::vector<std::unique_ptr<Client>>& clients, const Settings& settings, const WorkloadInfo& info,
                 size_t concurrency, std::vector<Key>& keys, uint64_t& next_item, std::mt19937_64& rng,
                 LocalCluster* cluster, const std::string& what) {
  Measured measured;
  if (cluster) {
    const std::string exited = cluster->exited();
    if (!exited.empty()) die(exited);
  }
  // Node CPU, by PID, when this benchmark started the nodes: the leader's process and its main (driver) thread.
  const uint64_t leader_id = clients.front()->leader().value_or(0);
  std::vector<double> node_before;
  double driver_before = 0;
  if (cluster) {
    for (pid_t pid : cluster->pids()) node_before.push_back(process_cpu_seconds(pid));
    if (leader_id >= 1 && leader_id <= cluster->pids().size()) {
      const pid_t pid = cluster->pids()[leader_id - 1];
      driver_before = process_cpu_seconds(pid, pid);
    }
  }
  const double cpu_before = own_cpu_seconds();
  measured.result = Run(clients, settings, info.workload, concurrency, keys, next_item, rng).execute();
  measured.client_cpu = own_cpu_seconds() - cpu_before;
  if (settings.per_second && !measured.result.per_second.empty()) {
    // The last second is partial (the run ended in it): left out of the figures, shown in the series.
    const std::vector<uint64_t>& series = measured.result.per_second;
    std::vector<uint64_t> whole(series.begin(), series.end() - (series.size() > 1 ? 1 : 0));
    std::vector<uint64_t> sorted = whole;
    std::sort(sorted.begin(), sorted.end());
    const uint64_t median = sorted[sorted.size() / 2];
    std::string text;
    size_t dips = 0;
    for (size_t i = 0; i < series.size(); ++i) {
      text += (i == 0 ? "" : " ") + std::to_string(series[i]);
      if (i < whole.size() && whole[i] * 2 < median) ++dips;
    }
    std::printf("per second (%s, %zu clients, %s): %s\n  min %llu, median %llu, max %llu; seconds below half the "
                "median: %zu\n",
                info.flag, concurrency, what.c_str(), text.c_str(),
                static_cast<unsigned long long>(sorted.front()), static_cast<unsigned long long>(median),
                static_cast<unsigned long long>(sorted.back()), dips);
    std::fflush(stdout);
  }
  if (cluster) {
    for (size_t n = 0; n < cluster->pids().size(); ++n) {
      const double used = process_cpu_seconds(cluster->pids()[n]) - node_before[n];
      (n + 1 == leader_id ? measured.leader_cpu : measured.followers_cpu) += used;
    }
    if (leader_id >= 1 && leader_id <= cluster->pids().size()) {
      const pid_t pid = cluster->pids()[leader_id - 1];
      measured.driver_cpu = process_cpu_seconds(pid, pid) - driver_before;
    }
  }
  const uint64_t leader_after = clients.front()->leader().value_or(0);
  if (leader_after != leader_id) {
    std::fprintf(stderr, "mayfly-bench: %s, %zu clients, %s: the leader changed from node %llu to node %llu\n",
                 info.label, concurrency, what.c_str(), static_cast<unsigned long long>(leader_id),
                 static_cast<unsigned long long>(leader_after));
  }
  return measured;
}

}  // namespace
}  // namespace mayfly::bench

int main(int argc, char** argv) {
  using namespace mayfly::bench;
  Settings settings;
  bool start_cluster = false, keep_data = false;
  bool feed_ab = false;  // --change-feed on,off
  int base_port = 7101;
  uint32_t timeout_ms = 10000;
  long feed_page = 100;
  std::string endpoints_flag = "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103";
  std::string clients_flag = "1,50,1000";
  std::string workloads_flag = "upsert256,upsert1k,strong,session";
  std::string mayflyd;
  // What reads read when no write workload ran before them: 2000 items written first, 1 KB each by default.
  Workload preload_workload = Workload::kUpsert1K;
  std::string change_feed_flag;
  std::string preload_flag = "upsert1k";
  CLI::App app{"mayfly-bench: closed-loop load against a Mayfly cluster (its own with --start-cluster)"};
  app.footer(kUsage);
  app.add_flag("--start-cluster", start_cluster, "start 3 mayflyd (fsync on) and stop them at the end");
  app.add_flag("--keep-data", keep_data, "keep the started cluster's data directories");
  app.add_option("--endpoints", endpoints_flag, "H:P,H:P,H:P of a running cluster");
  app.add_option("--base-port", base_port, "the started cluster's first port")->check(CLI::Range(1, 65533));
  app.add_option("--mayflyd", mayflyd, "the mayflyd to start (default: the build's)");
  app.add_option("--seconds", settings.seconds, "how long each run loads")->check(CLI::PositiveNumber);
  app.add_option("--runs", settings.runs, "runs per row (the median is printed)")->check(CLI::PositiveNumber);
  app.add_option("--max-requests", settings.max_requests, "at most this many requests per run")
      ->check(CLI::PositiveNumber);
  app.add_option("--clients", clients_flag, "requests in flight, one row each (comma-separated)");
  app.add_option("--connections", settings.connections, "connections shared by the clients")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-batch", settings.max_batch,
                 "requests per executeBatch call at most (1: one call per request; default 128)")
      ->check(CLI::Range(1u, mayfly::kMaxBatchRequests));
  app.add_option("--workloads", workloads_flag, "upsert256,upsert1k,strong,session,feed");
  app.add_flag("--per-second", settings.per_second,
               "print each run's successful operations second by second (dips show pauses: compactions, snapshots)");
  app.add_option("--database", settings.database, "database to write into");
  app.add_option("--container", settings.container, "container to write into");
  app.add_option("--partitions", settings.partitions, "partition key values")->check(CLI::PositiveNumber);
  app.add_option("--ttl", settings.ttl, "each item's own ttl, seconds")->check(CLI::PositiveNumber);
  app.add_option("--timeout-ms", timeout_ms, "the client's request timeout")->check(CLI::PositiveNumber);
  app.add_option("--change-feed", change_feed_flag, "on, off, or on,off (an A/B)")
      ->check(CLI::IsMember({"on", "off", "on,off", "off,on"}));
  app.add_option("--feed-page", feed_page, "changes per page of the feed workload (1..1000)");
  app.add_option("--preload", preload_flag, "what reads read when no write workload ran first")
      ->check(CLI::IsMember({"upsert1k", "upsert256"}));
  CLI11_PARSE(app, argc, argv);
  const std::string command = command_line(argc, argv);
  if (change_feed_flag == "on" || change_feed_flag == "off") settings.change_feed = change_feed_flag == "on";
  if (change_feed_flag == "on,off" || change_feed_flag == "off,on") feed_ab = true;
  preload_workload = preload_flag == "upsert1k" ? Workload::kUpsert1K : Workload::kUpsert256;
  std::vector<size_t> concurrencies;
  for (const std::string& text : split(clients_flag)) concurrencies.push_back(std::strtoull(text.c_str(), nullptr, 10));
  std::vector<WorkloadInfo> workloads;
  for (const std::string& name : split(workloads_flag)) {
    const auto* found = std::find_if(std::begin(kWorkloads), std::end(kWorkloads),
                                     [&](const WorkloadInfo& info) { return name == info.flag; });
    if (found == std::end(kWorkloads)) {
      std::fprintf(stderr, "mayfly-bench: unknown workload %s\n%s", name.c_str(), kUsage);
      return 2;
    }
    workloads.push_back(*found);
  }
  if (settings.seconds <= 0 || settings.runs < 1 || settings.max_requests < 1 || settings.connections < 1 ||
      settings.partitions < 1 || settings.ttl < 1 || timeout_ms < 1 || concurrencies.empty() || workloads.empty() ||
      std::count(concurrencies.begin(), concurrencies.end(), size_t{0}) > 0 || base_port < 1 || base_port > 65533) {
    std::fprintf(stderr, "mayfly-bench: every number must be positive\n%s", kUsage);
    return 2;
  }
  if (feed_page < 1 || feed_page > 1000) {
    std::fprintf(stderr, "mayfly-bench: --feed-page must be 1..1000 (the server's page limit)\n%s", kUsage);
    return 2;
  }
  settings.feed_page = static_cast<uint32_t>(feed_page);
  const bool reads_feed = std::any_of(workloads.begin(), workloads.end(),
                                      [](const WorkloadInfo& info) { return info.workload == Workload::kFeed; });
  if (feed_ab) {
    for (const WorkloadInfo& info : workloads) {
      if (!is_write(info.workload)) {
        std::fprintf(stderr,
                     "mayfly-bench: --change-feed on,off compares the write path: only write workloads "
                     "(upsert256, upsert1k), not %s\n%s",
                     info.flag, kUsage);
        return 2;
      }
    }
  } else if (reads_feed && !settings.change_feed) {
    std::fprintf(stderr,
                 "mayfly-bench: the feed workload reads the container's change feed, which is off by default: "
                 "add --change-feed on (the container is created with its feed on)\n%s",
                 kUsage);
    return 2;
  }

  std::unique_ptr<LocalCluster> cluster;
  std::vector<std::string> endpoints = split(endpoints_flag);
  std::vector<std::unique_ptr<Client>> clients;
  // Starts (or, with --start-cluster, starts afresh: an A/B run gets a new cluster, so every run of both settings
  // begins on an empty store) the cluster and the clients; returns the leader at start.
  auto start = [&]() -> uint64_t {
    clients.clear();
    if (start_cluster) {
      if (cluster) {
        set_current_cluster(nullptr);
        cluster->stop();
        cluster.reset();
      }
      // This binary is <build>/bench/mayfly-bench; mayflyd is <build>/mayflyd/mayflyd.
      LocalClusterOptions cluster_options;
      cluster_options.mayflyd = mayflyd.empty() ? default_mayflyd_path() : mayflyd;
      cluster_options.ports = {base_port, base_port + 1, base_port + 2};
      cluster_options.keep_data = keep_data;
      cluster = std::make_unique<LocalCluster>(std::move(cluster_options));
      set_current_cluster(cluster.get());
      endpoints = cluster->endpoints();
    }
    const uint64_t leader = wait_for_leader(endpoints, 30, cluster.get());
    ClientOptions options;
    options.endpoints = endpoints;
    options.request_timeout_ms = timeout_ms;
    options.max_batch_requests = settings.max_batch;
    for (size_t i = 0; i < settings.connections; ++i) {
      options.jitter_seed = 0x6d617966 + i;
      clients.push_back(std::make_unique<Client>(options));
    }
    return leader;
  };
  const uint64_t leader = start();
  if (!feed_ab) create_container(*clients.front(), settings);  // A/B: a fresh container for every run

  std::printf("command: %s\n", command.c_str());
  std::string endpoints_text;
  for (const std::string& endpoint : endpoints) endpoints_text += (endpoints_text.empty() ? "" : ",") + endpoint;
  std::printf("cluster: %s (%s; leader at start: node %llu; fsync on)\n", endpoints_text.c_str(),
              start_cluster ? "3 mayflyd started by this benchmark, fresh data" : "already running",
              static_cast<unsigned long long>(leader));
  std::printf("clients: N concurrent clients = N requests kept in flight with execute_async from one thread (one "
              "event loop), spread over min(N, %zu) Client instances (at most %u requests per call); each run stops after %.1f s or %llu "
              "requests; %s; items: partition key /pk over %d partitions, ttl %d, container defaultTtl -1, change "
              "feed %s\n",
              settings.connections, settings.max_batch, settings.seconds,
              static_cast<unsigned long long>(settings.max_requests),
              feed_ab ? (start_cluster ? "A/B: each run on a new cluster (fresh data), feed off then on, per round"
                                       : "A/B: each run into a fresh container, feed off then on, per round")
                      : ("ops/s = median of " + std::to_string(settings.runs) + " runs, latency percentiles over all samples")
                            .c_str(),
              settings.partitions, settings.ttl, feed_ab ? "off / on (A/B)" : settings.change_feed ? "on" : "off");
  if (reads_feed) {
    std::printf("feed: each client reads the whole container's change feed, mode all, %u changes per page, with "
                "continuations, at session consistency over every node, and starts again from the beginning when "
                "a page is caught up; ops/s = changes read per second, p50/p99 per page\n",
                settings.feed_page);
  }
  std::printf("\n");

  struct Extra {
    std::string label;
    size_t clients;
    uint64_t requests;
    double client_cpu, leader_cpu, leader_driver_cpu, followers_cpu;
  };
  std::vector<Extra> extras;
  std::vector<mayfly::bench::Key> keys;
  uint64_t next_item = 0;
  std::mt19937_64 rng(42);

  if (feed_ab) {
    std::printf("%d round(s), each: one run with the feed off and one with it on (off first in odd rounds, on "
                "first in even ones), each on a new cluster (--start-cluster) or in a fresh container; ops/s = median "
                "(min–max) over the rounds; on/off = "
                "ratio of the medians (and per round); p99 over every sample of the setting's runs\n\n",
                settings.runs);
    std::printf("| workload | clients | feed off ops/s | feed on ops/s | on/off | on/off per round | off p99 ms | on "
                "p99 ms | errors (off; on) |\n|---|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    struct CpuRow {
      std::string label;
      size_t clients;
      Spread node_us[2], client_us[2];
    };
    std::vector<CpuRow> cpu_rows;
    int container_number = 0;
    int ab_runs = 0;
    for (const WorkloadInfo& info : workloads) {
      for (size_t concurrency : concurrencies) {
        std::vector<double> rates[2], latencies[2], node_us[2], client_us[2];
        std::map<int, uint64_t> errors[2];
        std::map<int, std::string> messages[2];
        std::string per_round;
        for (int r = 0; r < settings.runs; ++r) {
          double round_rate[2] = {0, 0};
          // Off then on in odd rounds, on then off in even ones (off, on, on, off, ...): every run adds to the same
          // cluster's store, and a drift that grows with it (compactions, a warming cache) then weighs on both
          // settings alike instead of always on the second.
          for (int step = 0; step < 2; ++step) {
            const int on = r % 2 == 0 ? step : 1 - step;
            // A run on a store grown by the runs before it measures the growth (compactions) as much as the
            // setting: with --start-cluster every run starts on a new cluster (against --endpoints, a new container).
            if (start_cluster && ab_runs++ > 0) {
              start();
              keys.clear();
            }
            Settings run_settings = settings;
            run_settings.change_feed = on == 1;
            run_settings.container =
                settings.container + (on == 1 ? "-feed-on-" : "-feed-off-") + std::to_string(++container_number);
            create_container(*clients.front(), run_settings);
            const std::string what = "round " + std::to_string(r + 1) + ", feed " + (on == 1 ? "on" : "off");
            Measured m = measure(clients, run_settings, info, concurrency, keys, next_item, rng, cluster.get(), what);
            const RunResult& result = m.result;
            round_rate[on] = result.ops_per_second;
            rates[on].push_back(result.ops_per_second);
            latencies[on].insert(latencies[on].end(), result.latencies_ms.begin(), result.latencies_ms.end());
            for (const auto& [status, count] : result.errors) errors[on][status] += count;
            for (const auto& [status, message] : result.messages) messages[on].emplace(status, message);
            const double ops = result.ops_per_second * result.wall_seconds;
            if (ops > 0) {
              client_us[on].push_back(m.client_cpu * 1e6 / ops);
              if (cluster) node_us[on].push_back((m.leader_cpu + m.followers_cpu) * 1e6 / ops);
            }
          }
          const std::optional<double> round_ratio = ratio(round_rate[1], round_rate[0]);
          char text[32];
          std::snprintf(text, sizeof text, "%.2f", round_ratio.value_or(0));
          per_round += (per_round.empty() ? "" : " / ") + (round_ratio ? std::string(text) : std::string("—"));
        }
        const Spread off = spread(rates[0]), on = spread(rates[1]);
        const std::optional<double> overall = ratio(on.median, off.median);
        char overall_text[32] = "—";
        if (overall) std::snprintf(overall_text, sizeof overall_text, "**%.2f×**", *overall);
        for (auto& samples : latencies) std::sort(samples.begin(), samples.end());
        std::printf("| %s | %zu | %s | %s | %s | %s | %.2f | %.2f | %s; %s |\n", info.label, concurrency,
                    format_spread(off).c_str(), format_spread(on).c_str(), overall_text, per_round.c_str(),
                    percentile(latencies[0], 99), percentile(latencies[1], 99), format_errors(errors[0]).c_str(),
                    format_errors(errors[1]).c_str());
        std::fflush(stdout);
        for (int setting = 0; setting < 2; ++setting) {
          for (const auto& [status, message] : messages[setting]) {
            std::fprintf(stderr, "mayfly-bench: %s, %zu clients, feed %s: first %d: %s\n", info.label, concurrency,
                         setting == 1 ? "on" : "off", status, message.c_str());
          }
        }
        cpu_rows.push_back({info.label, concurrency, {spread(node_us[0]), spread(node_us[1])},
                            {spread(client_us[0]), spread(client_us[1])}});
      }
    }
    std::printf("\nCPU per successful write, in µs, median (min–max) over the rounds; nodes = leader + followers "
                "(only with --start-cluster):\n\n| workload | clients | nodes, feed off | nodes, feed on | nodes on/off "
                "| bench, feed off | bench, feed on |\n|---|---|---|---|---|---|---|\n");
    for (const CpuRow& row : cpu_rows) {
      const std::optional<double> node_ratio = ratio(row.node_us[1].median, row.node_us[0].median);
      char ratio_text[32] = "—";
      if (node_ratio) std::snprintf(ratio_text, sizeof ratio_text, "%.2f", *node_ratio);
      std::printf("| %s | %zu | %s | %s | %s | %s | %s |\n", row.label.c_str(), row.clients,
                  format_spread(row.node_us[0]).c_str(), format_spread(row.node_us[1]).c_str(), ratio_text,
                  format_spread(row.client_us[0]).c_str(), format_spread(row.client_us[1]).c_str());
    }
  } else {
    std::printf("| workload | clients | ops/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    std::vector<std::string> feed_notes;
    for (const WorkloadInfo& info : workloads) {
      if (!is_write(info.workload) && keys.empty()) {  // reads alone: write something to read first
        Settings preload = settings;
        preload.seconds = 60;
        preload.max_requests = 2000;
        Run(clients, preload, preload_workload, 50, keys, next_item, rng).execute();
        if (keys.empty()) die("could not write any item to read back");
      }
      for (size_t concurrency : concurrencies) {
        std::vector<double> rates, page_rates, latencies;
        std::map<int, uint64_t> errors;
        std::map<int, std::string> messages;
        uint64_t requests = 0, pages = 0, changes = 0, passes = 0;
        double wall = 0, client_cpu = 0, leader_cpu = 0, driver_cpu = 0, followers_cpu = 0;
        for (int r = 0; r < settings.runs; ++r) {
          Measured m = measure(clients, settings, info, concurrency, keys, next_item, rng, cluster.get(),
                               "run " + std::to_string(r + 1));
          const RunResult& result = m.result;
          client_cpu += m.client_cpu;
          leader_cpu += m.leader_cpu;
          driver_cpu += m.driver_cpu;
          followers_cpu += m.followers_cpu;
          rates.push_back(result.ops_per_second);
          page_rates.push_back(result.pages_per_second);
          latencies.insert(latencies.end(), result.latencies_ms.begin(), result.latencies_ms.end());
          for (const auto& [status, count] : result.errors) errors[status] += count;
          for (const auto& [status, message] : result.messages) messages.emplace(status, message);
          requests += result.issued;
          pages += result.pages;
          changes += result.changes;
          passes += result.passes;
          wall += result.wall_seconds;
        }
        std::sort(latencies.begin(), latencies.end());
        std::printf("| %s | %zu | %.0f | %.2f | %.2f | %s |\n", info.label, concurrency, median(rates),
                    percentile(latencies, 50), percentile(latencies, 99), format_errors(errors).c_str());
        std::fflush(stdout);
        if (info.workload == Workload::kFeed) {
          char note[512];
          std::snprintf(note, sizeof note,
                        "| %zu | %.0f | %.0f | %.1f | %llu | %llu | %.2f | %.2f |", concurrency, median(rates),
                        median(page_rates), pages > 0 ? static_cast<double>(changes) / static_cast<double>(pages) : 0.0,
                        static_cast<unsigned long long>(passes), static_cast<unsigned long long>(keys.size()),
                        percentile(latencies, 50), percentile(latencies, 99));
          feed_notes.push_back(note);
        }
        for (const auto& [status, message] : messages) {
          std::fprintf(stderr, "mayfly-bench: %s, %zu clients: first %d: %s\n", info.label, concurrency, status,
                       message.c_str());
        }
        const double per_core = 100.0 / std::max(wall, 1e-9);
        extras.push_back({info.label, concurrency, requests, client_cpu * per_core, leader_cpu * per_core,
                          driver_cpu * per_core, followers_cpu * per_core});
      }
    }
    if (!feed_notes.empty()) {
      std::printf("\nChange feed reads (mode all, %u changes per page asked; changes/s and pages/s: median of the "
                  "runs; passes: times a reader reached the end and started again, all runs; items written before "
                  "the reads: %llu, each at least one change):\n\n| clients | changes/s | pages/s | changes per page "
                  "| passes | items written | page p50 ms | page p99 ms |\n|---|---|---|---|---|---|---|---|\n",
                  settings.feed_page, static_cast<unsigned long long>(keys.size()));
      for (const std::string& note : feed_notes) std::printf("%s\n", note.c_str());
    }

    std::printf("\nCPU during the runs, in %% of one core (this machine has %u); node figures only with "
                "--start-cluster:\n\n| workload | clients | requests | bench (client) | leader process | leader "
                "driver thread | followers (2 processes) |\n|---|---|---|---|---|---|---|\n",
                std::thread::hardware_concurrency());
    for (const Extra& extra : extras) {
      if (cluster) {
        std::printf("| %s | %zu | %llu | %.0f | %.0f | %.0f | %.0f |\n", extra.label.c_str(), extra.clients,
                    static_cast<unsigned long long>(extra.requests), extra.client_cpu, extra.leader_cpu,
                    extra.leader_driver_cpu, extra.followers_cpu);
      } else {
        std::printf("| %s | %zu | %llu | %.0f | — | — | — |\n", extra.label.c_str(), extra.clients,
                    static_cast<unsigned long long>(extra.requests), extra.client_cpu);
      }
    }
  }
  std::printf("\nleader at the end: node %llu\n", static_cast<unsigned long long>(clients.front()->leader().value_or(0)));
  std::fflush(stdout);
  clients.clear();
  if (cluster) cluster->stop();
  set_current_cluster(nullptr);
  return 0;
}
