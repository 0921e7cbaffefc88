// Cluster benchmark: a load generator for a running Mayfly cluster, from the client's point of view.
//   Workloads: upserts of 256 B and 1 KB items, each with its own `ttl`, into a container it creates (partition key
//   /pk, a few hundred partitions); point reads, at `strong` and at `session` consistency, of items it wrote.
//   Concurrency: 1, 50 and 1000 clients. "N clients" are simulated as N requests kept in flight with
//   Client::execute_async from one thread (one event loop), spread over a few Client instances (connections).
//   Every run stops by itself after --seconds or --max-requests requests, whichever comes first.
// Prints the command and a markdown table: throughput is the median of --runs runs, latency percentiles are over
// every sample of every run, errors are final (after the client's own retries) and counted by status.
//
//   build/bench/mayfly-bench [--start-cluster] [--endpoints H:P,...] [--seconds S] [--runs R] [--max-requests N]
//                            [--clients 1,50,1000] [--workloads upsert256,upsert1k,strong,session] ...
// With --start-cluster it launches 3 mayflyd from its own build directory on 127.0.0.1 (--base-port, fresh data in
// a temporary directory; fsync is always on), waits for a leader, runs, and stops them (SIGTERM to its own PIDs).
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
#include "client/client.h"

namespace mayfly::bench {
namespace {

using client::Client;
using client::ClientOptions;
using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

constexpr const char* kUsage =
    "usage: mayfly-bench [--start-cluster] [--endpoints H:P,H:P,H:P] [--base-port P] [--mayflyd PATH]\n"
    "                    [--keep-data] [--seconds S] [--runs R] [--max-requests N] [--clients 1,50,1000]\n"
    "                    [--connections K] [--workloads upsert256,upsert1k,strong,session] [--database NAME]\n"
    "                    [--container NAME] [--partitions P] [--ttl SECONDS] [--timeout-ms MS]\n"
    "                    [--preload upsert1k|upsert256] [--change-feed on|off]\n";

// ---- the load ----------------------------------------------------------------------------------------------------

enum class Workload { kUpsert256, kUpsert1K, kReadStrong, kReadSession };

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
  bool change_feed = false;  // the container is created with its change feed on (README "Change feed")
};

// What one run measured.
struct RunResult {
  double ops_per_second = 0;  // successful operations per second of the run's wall time
  uint64_t issued = 0;
  std::map<int, uint64_t> errors;       // status (0: exception) -> count
  std::map<int, std::string> messages;  // status -> first message seen
  std::vector<double> latencies_ms;     // successful and failed requests alike
  double wall_seconds = 0;
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
    result_.ops_per_second =
        static_cast<double>(result_.issued - errors) / std::max(result_.wall_seconds, 1e-9);
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

  Request next_request(Key& key) {
    Request request;
    request.database = settings_.database;
    request.container = settings_.container;
    if (is_write(workload_)) {
      const uint64_t n = next_item_++;
      const std::string pk = "p" + std::to_string(n % static_cast<uint64_t>(settings_.partitions));
      key.id = (workload_ == Workload::kUpsert256 ? "w256-" : "w1k-") + std::to_string(n);
      key.pk_json = "\"" + pk + "\"";
      request.op = Op::kUpsertItem;
      request.body = body(key.id, pk, padding_);
    } else {
      key = keys_[std::uniform_int_distribution<size_t>(0, keys_.size() - 1)(rng_)];
      request.op = Op::kReadItem;
      request.id = key.id;
      request.options.consistency =
          workload_ == Workload::kReadStrong ? Consistency::kStrong : Consistency::kSession;
    }
    request.partition_key = key.pk_json;
    return request;
  }

  void issue(size_t slot) {
    Key key;
    const Request request = next_request(key);
    ++result_.issued;
    const auto started = Clock::now();
    tasks_.add(clients_[slot % used_clients_]
                   ->execute_async(request)
                   .then(
                       [this, slot, started, key = std::move(key)](Response response) mutable {
                         finish(slot, started, response.status, response.message, std::move(key));
                       },
                       [this, slot, started](kj::Exception&& exception) {
                         finish(slot, started, 0, exception.getDescription().cStr(), Key{});
                       }));
  }

  void finish(size_t slot, Clock::time_point started, int status, const std::string& message, Key key) {
    last_done_ = Clock::now();
    result_.latencies_ms.push_back(std::chrono::duration<double, std::milli>(last_done_ - started).count());
    const bool ok = status > 0 && status < 400;
    if (!ok) {
      ++result_.errors[status];
      result_.messages.emplace(status, message);
    } else if (is_write(workload_)) {
      keys_.push_back(std::move(key));
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

}  // namespace
}  // namespace mayfly::bench

int main(int argc, char** argv) {
  using namespace mayfly::bench;
  Settings settings;
  bool start_cluster = false, keep_data = false;
  int base_port = 7101;
  uint32_t timeout_ms = 10000;
  std::string endpoints_flag = "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103";
  std::string clients_flag = "1,50,1000";
  std::string workloads_flag = "upsert256,upsert1k,strong,session";
  std::string mayflyd;
  // What reads read when no write workload ran before them: 2000 items written first, 1 KB each by default.
  Workload preload_workload = Workload::kUpsert1K;
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--start-cluster" || flag == "--keep-data") {
      (flag == "--start-cluster" ? start_cluster : keep_data) = true;
      command += " " + flag;
      continue;
    }
    if (i + 1 >= argc) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    const std::string value = argv[++i];
    command += " " + flag + " " + value;
    if (flag == "--endpoints") endpoints_flag = value;
    else if (flag == "--base-port") base_port = std::atoi(value.c_str());
    else if (flag == "--mayflyd") mayflyd = value;
    else if (flag == "--seconds") settings.seconds = std::atof(value.c_str());
    else if (flag == "--runs") settings.runs = std::atoi(value.c_str());
    else if (flag == "--max-requests") settings.max_requests = std::strtoull(value.c_str(), nullptr, 10);
    else if (flag == "--clients") clients_flag = value;
    else if (flag == "--connections") settings.connections = std::strtoull(value.c_str(), nullptr, 10);
    else if (flag == "--workloads") workloads_flag = value;
    else if (flag == "--database") settings.database = value;
    else if (flag == "--container") settings.container = value;
    else if (flag == "--partitions") settings.partitions = std::atoi(value.c_str());
    else if (flag == "--ttl") settings.ttl = std::atoi(value.c_str());
    else if (flag == "--timeout-ms") timeout_ms = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    else if (flag == "--change-feed" && (value == "on" || value == "off")) settings.change_feed = value == "on";
    else if (flag == "--preload" && (value == "upsert1k" || value == "upsert256"))
      preload_workload = value == "upsert1k" ? Workload::kUpsert1K : Workload::kUpsert256;
    else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
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

  std::unique_ptr<LocalCluster> cluster;
  std::vector<std::string> endpoints = split(endpoints_flag);
  if (start_cluster) {
    // This binary is <build>/bench/mayfly-bench; mayflyd is <build>/node/mayflyd.
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
  std::vector<std::unique_ptr<Client>> clients;
  for (size_t i = 0; i < settings.connections; ++i) {
    options.jitter_seed = 0x6d617966 + i;
    clients.push_back(std::make_unique<Client>(options));
  }
  {
    Request request;
    request.op = Op::kCreateDatabase;
    request.database = settings.database;
    check_setup(clients.front()->execute(request), "createDatabase " + settings.database);
    request.op = Op::kCreateContainer;
    request.container = settings.container;
    request.settings.partition_key_path = "/pk";
    // TTL on without a default (defaultTtl -1): every item's own `ttl` counts, as in Cosmos DB.
    request.settings.default_ttl = mayfly::client::ContainerSettings::DefaultTtl::kSet;
    request.settings.default_ttl_json = "-1";
    if (settings.change_feed) request.settings.change_feed = mayfly::client::ContainerSettings::ChangeFeed::kOn;
    check_setup(clients.front()->execute(request), "createContainer " + settings.container);
  }

  std::printf("command: %s\n", command.c_str());
  std::string endpoints_text;
  for (const std::string& endpoint : endpoints) endpoints_text += (endpoints_text.empty() ? "" : ",") + endpoint;
  std::printf("cluster: %s (%s; leader at start: node %llu; fsync on)\n", endpoints_text.c_str(),
              start_cluster ? "3 mayflyd started by this benchmark, fresh data" : "already running",
              static_cast<unsigned long long>(leader));
  std::printf("clients: N concurrent clients = N requests kept in flight with execute_async from one thread (one "
              "event loop), spread over min(N, %zu) Client instances; each run stops after %.1f s or %llu "
              "requests; ops/s = median of %d runs, latency percentiles over all samples; items: partition key "
              "/pk over %d partitions, ttl %d, container defaultTtl -1\n\n",
              settings.connections, settings.seconds, static_cast<unsigned long long>(settings.max_requests),
              settings.runs, settings.partitions, settings.ttl);
  std::printf("| workload | clients | ops/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|\n");
  std::fflush(stdout);

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
  for (const WorkloadInfo& info : workloads) {
    if (!is_write(info.workload) && keys.empty()) {  // reads alone: write something to read first
      Settings preload = settings;
      preload.seconds = 60;
      preload.max_requests = 2000;
      Run(clients, preload, preload_workload, 50, keys, next_item, rng).execute();
      if (keys.empty()) die("could not write any item to read back");
    }
    for (size_t concurrency : concurrencies) {
      std::vector<double> rates, latencies;
      std::map<int, uint64_t> errors;
      std::map<int, std::string> messages;
      uint64_t requests = 0;
      double wall = 0, client_cpu = 0, leader_cpu = 0, driver_cpu = 0, followers_cpu = 0;
      for (int r = 0; r < settings.runs; ++r) {
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
        RunResult result = Run(clients, settings, info.workload, concurrency, keys, next_item, rng).execute();
        client_cpu += own_cpu_seconds() - cpu_before;
        if (cluster) {
          for (size_t n = 0; n < cluster->pids().size(); ++n) {
            const double used = process_cpu_seconds(cluster->pids()[n]) - node_before[n];
            (n + 1 == leader_id ? leader_cpu : followers_cpu) += used;
          }
          if (leader_id >= 1 && leader_id <= cluster->pids().size()) {
            const pid_t pid = cluster->pids()[leader_id - 1];
            driver_cpu += process_cpu_seconds(pid, pid) - driver_before;
          }
        }
        const uint64_t leader_after = clients.front()->leader().value_or(0);
        if (leader_after != leader_id) {
          std::fprintf(stderr, "mayfly-bench: %s, %zu clients, run %d: the leader changed from node %llu to node %llu\n",
                       info.label, concurrency, r + 1, static_cast<unsigned long long>(leader_id),
                       static_cast<unsigned long long>(leader_after));
        }
        rates.push_back(result.ops_per_second);
        latencies.insert(latencies.end(), result.latencies_ms.begin(), result.latencies_ms.end());
        for (const auto& [status, count] : result.errors) errors[status] += count;
        for (const auto& [status, message] : result.messages) messages.emplace(status, message);
        requests += result.issued;
        wall += result.wall_seconds;
      }
      std::sort(latencies.begin(), latencies.end());
      std::string error_text;
      for (const auto& [status, count] : errors) {
        error_text += (error_text.empty() ? "" : ", ") + std::to_string(count) + " × " +
                      (status == 0 ? std::string("exception") : std::to_string(status));
      }
      std::printf("| %s | %zu | %.0f | %.2f | %.2f | %s |\n", info.label, concurrency, median(rates),
                  percentile(latencies, 50), percentile(latencies, 99), error_text.empty() ? "0" : error_text.c_str());
      std::fflush(stdout);
      for (const auto& [status, message] : messages) {
        std::fprintf(stderr, "mayfly-bench: %s, %zu clients: first %d: %s\n", info.label, concurrency, status,
                     message.c_str());
      }
      const double per_core = 100.0 / std::max(wall, 1e-9);
      extras.push_back({info.label, concurrency, requests, client_cpu * per_core, leader_cpu * per_core,
                        driver_cpu * per_core, followers_cpu * per_core});
    }
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
  std::printf("\nleader at the end: node %llu\n", static_cast<unsigned long long>(clients.front()->leader().value_or(0)));
  std::fflush(stdout);
  clients.clear();
  if (cluster) cluster->stop();
  set_current_cluster(nullptr);
  return 0;
}
