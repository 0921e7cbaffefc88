// Query benchmark: queries per second and latency percentiles of the query engine over a real state machine on this
// machine's disk — what one replica does to serve a query (RPC not included): a single-partition filter, a
// cross-partition COUNT, ORDER BY c._ts TOP 100 through the `_ts` index (both directions), and for contrast an
// ORDER BY on a plain property (scan + sort). Prints the figures and the command that produced them.
//
//   build/bench/mayfly-query-bench [--items N] [--partitions P] [--expired-percent X] [--runs R] [--seconds S]
//                                  [--dir PATH] [--cluster 1]
//
// With --cluster 1 the same data and queries go end to end instead: 3 mayflyd (fsync on) started by the benchmark on
// free ports, items loaded through the client library, queries sent by one client (session consistency, spread over
// the nodes) back to back; the nodes' garbage collectors are slowed to one item a minute so the expired items stay on
// disk, as in the storage mode.
//
// Items are ~200 B; X% of them (every k-th, spread over every partition and over time) have expired at the query
// time but are not collected, so every path must read past them. Each figure is the median of --runs runs (default
// 3) of --seconds each (at least 5 queries per run); one thread, queries back to back.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/command_line.h"
#include "bench/bench_support.h"
#include "client/client.h"
#include "common/prng.h"
#include "query/executor.h"
#include "storage/state_machine.h"

namespace mayfly::query {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000;
constexpr int64_t kSecond = 1'000'000;

struct Options {
  int64_t items = 100'000;
  int64_t partitions = 1000;
  int64_t expired_percent = 10;
  int runs = 3;
  double seconds = 2.0;
  std::string dir;
  bool cluster = false;
};

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "mayfly-query-bench: %s failed\n", what.c_str());
    std::exit(1);
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())));
  return values[index];
}

struct Workload {
  std::string name;
  std::string sql;
  bool random_partition = false;  // @pk is a random partition for each query
};

struct Figures {
  double qps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double charge = 0;
  size_t rows = 0;
};

// Item i: in partition i % P; n = 10k for the k-th item of its partition (a filter c.n >= 500 keeps half of a
// 100-item partition); every partition has its share of expiring items (ttl 1 s), spread over time.
std::string item_body(const Options& options, int64_t i) {
  const int64_t expire_every = options.expired_percent > 0 ? 100 / options.expired_percent : 0;
  const int64_t k = i / options.partitions;
  const bool expires = expire_every > 0 && (i + k) % expire_every == 0;
  return "{\"id\":\"item-" + std::to_string(i) + "\",\"pk\":\"p" + std::to_string(i % options.partitions) +
         "\",\"n\":" + std::to_string(k % 100 * 10) + ",\"category\":\"c" + std::to_string(i % 7) + "\",\"text\":\"" +
         std::string(120, static_cast<char>('a' + i % 26)) + "\"" + (expires ? ",\"ttl\":1" : "") + "}";
}

int64_t expiring_items(const Options& options) {
  const int64_t expire_every = options.expired_percent > 0 ? 100 / options.expired_percent : 0;
  int64_t count = 0;
  for (int64_t i = 0; expire_every > 0 && i < options.items; ++i) count += (i + i / options.partitions) % expire_every == 0;
  return count;
}

std::vector<Workload> workloads() {
  return {
      {"single-partition filter (page of up to 100)", "SELECT * FROM c WHERE c.pk = @pk AND c.n >= 500", true},
      {"cross-partition COUNT", "SELECT VALUE COUNT(1) FROM c", false},
      {"cross-partition COUNT with a filter (reads every document)",
       "SELECT VALUE COUNT(1) FROM c WHERE c.category = 'c3'", false},
      {"ORDER BY c._ts DESC, TOP 100 (the _ts index)", "SELECT TOP 100 * FROM c ORDER BY c._ts DESC", false},
      {"ORDER BY c._ts ASC, TOP 100 (the _ts index)", "SELECT TOP 100 * FROM c ORDER BY c._ts", false},
      {"ORDER BY c.n DESC, TOP 100 (no index: scan + sort)", "SELECT TOP 100 * FROM c ORDER BY c.n DESC", false},
  };
}

size_t rows_of(const Workload& workload, const std::string& body) {
  if (workload.sql.find("COUNT") != std::string::npos) return 1;
  return static_cast<size_t>(std::count(body.begin(), body.end(), '{'));
}

// Runs every workload --runs times for --seconds through `run_one` (which returns the body and the charge) and
// prints the table.
void measure(const Options& options, const std::function<std::pair<std::string, double>(const Workload&, Prng&)>& run_one) {
  std::printf("| query | rows | RU | queries/s | p50 ms | p99 ms |\n|---|---|---|---|---|---|\n");
  Prng prng(42);
  for (const Workload& workload : workloads()) {
    std::vector<double> qps, p50, p99;
    Figures last;
    for (int run = 0; run < options.runs; ++run) {
      std::vector<double> latencies;
      const auto run_start = std::chrono::steady_clock::now();
      double elapsed = 0;
      while (elapsed < options.seconds || latencies.size() < 5) {
        const auto start = std::chrono::steady_clock::now();
        const auto [body, charge] = run_one(workload, prng);
        const auto end = std::chrono::steady_clock::now();
        latencies.push_back(std::chrono::duration<double>(end - start).count());
        last.charge = charge;
        last.rows = rows_of(workload, body);
        elapsed = std::chrono::duration<double>(end - run_start).count();
      }
      qps.push_back(static_cast<double>(latencies.size()) / elapsed);
      p50.push_back(percentile(latencies, 0.50) * 1e3);
      p99.push_back(percentile(latencies, 0.99) * 1e3);
    }
    std::printf("| %s | %zu | %.2f | %.0f | %.3f | %.3f |\n", workload.name.c_str(), last.rows, last.charge,
                median(qps), median(p50), median(p99));
  }
}

std::string partition_parameter(const Options& options, Prng& prng) {
  return "{\"@pk\":\"p" + std::to_string(prng.uniform(static_cast<uint64_t>(options.partitions))) + "\"}";
}

int run_cluster(const Options& options, const std::string& command) {
  bench::set_program_name("mayfly-query-bench");
  bench::LocalClusterOptions cluster_options;
  cluster_options.mayflyd = bench::default_mayflyd_path();
  for (int port : bench::free_ports(3)) cluster_options.ports.push_back(port);
  // The collector at its slowest (a pass a minute, one item a pass): the expired items stay on disk.
  cluster_options.extra_flags = {"--gc-interval-ms", "60000", "--gc-batch-items-max", "1"};
  cluster_options.temp_prefix = "mayfly-query-bench";
  bench::LocalCluster cluster(std::move(cluster_options));
  bench::set_current_cluster(&cluster);
  bench::wait_for_leader(cluster.endpoints(), 30, &cluster);
  client::ClientOptions client_options;
  client_options.endpoints = cluster.endpoints();
  client_options.request_timeout_ms = 30000;
  client::Client client(client_options);
  auto setup = [&](client::Request request, const std::string& what) {
    const client::Response response = client.execute(request);
    if (!response.ok()) bench::die(what + ": " + std::to_string(response.status) + " " + response.message);
  };
  client::Request request;
  request.operation = api::CreateDatabase{};
  request.database = "db";
  setup(request, "create database");
  api::CreateContainer create_container;
  create_container.settings.partition_key_path = "/pk";
  create_container.settings.default_ttl = client::ContainerSettings::DefaultTtl::kSet;
  create_container.settings.default_ttl_json = "-1";
  request.operation = std::move(create_container);
  request.container = "c";
  setup(request, "create container");
  const auto load_start = std::chrono::steady_clock::now();
  constexpr int64_t kBatch = 256;  // creates in flight at once
  for (int64_t first = 0; first < options.items; first += kBatch) {
    std::vector<client::Request> batch;
    for (int64_t i = first; i < std::min(options.items, first + kBatch); ++i) {
      client::Request create;
      create.database = "db";
      create.container = "c";
      create.operation = api::CreateItem{.body = item_body(options, i)};
      batch.push_back(std::move(create));
    }
    for (const client::Response& response : client.execute_all(batch)) {
      if (response.status != 201) bench::die("create item: " + std::to_string(response.status) + " " + response.message);
    }
  }
  const double load_seconds = bench::seconds_since(load_start);
  // Wait until the short-lived items have expired everywhere a session read can land (strong COUNT, then session).
  const std::string visible = "[" + std::to_string(options.items - expiring_items(options)) + "]";
  client::Request count;
  count.database = "db";
  count.container = "c";
  count.operation = api::Query{.sql = "SELECT VALUE COUNT(1) FROM c"};
  count.options.consistency = client::Consistency::kStrong;
  for (int attempt = 0; client.execute(count).body != visible; ++attempt) {
    if (attempt > 600) bench::die("expired items still counted after 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("Query benchmark, end to end: 3 mayflyd on 127.0.0.1 (fsync on, garbage collectors slowed to one item a minute), %lld items "
              "(~200 B) in %lld partitions loaded through the client library in %.1f s (256 in flight), %lld%% "
              "expired and still on disk; one client, session consistency, queries back to back over the nodes.\n",
              static_cast<long long>(options.items), static_cast<long long>(options.partitions), load_seconds,
              static_cast<long long>(options.expired_percent));
  std::printf("Medians of %d runs of %.1f s.\n\n", options.runs, options.seconds);
  measure(options, [&](const Workload& workload, Prng& prng) {
    client::Request query;
    query.database = "db";
    query.container = "c";
    api::Query sql{.sql = workload.sql};
    if (workload.random_partition) sql.parameters = partition_parameter(options, prng);
    query.operation = std::move(sql);
    const client::Response response = client.execute(query);
    if (response.status != 200) bench::die(workload.name + ": " + std::to_string(response.status) + " " + response.message);
    return std::make_pair(response.body, response.request_charge);
  });
  std::printf("\ncommand: %s\n", command.c_str());
  cluster.stop();
  bench::set_current_cluster(nullptr);
  return 0;
}

}  // namespace
}  // namespace mayfly::query

int main(int argc, char** argv) {
  using namespace mayfly;
  using namespace mayfly::query;
  Options options;
  int cluster = 0;
  CLI::App app{"mayfly-query-bench: queries on the state machine (or, with --cluster 1, on a 3-node cluster)"};
  app.add_option("--items", options.items, "items in the container")->check(CLI::PositiveNumber);
  app.add_option("--partitions", options.partitions, "partition key values")->check(CLI::PositiveNumber);
  app.add_option("--expired-percent", options.expired_percent, "share of the items expired")->check(CLI::Range(0, 99));
  app.add_option("--runs", options.runs, "measurements per row (the median is printed)")->check(CLI::PositiveNumber);
  app.add_option("--seconds", options.seconds, "how long each measurement runs")->check(CLI::PositiveNumber);
  app.add_option("--dir", options.dir, "where the store goes (default: a new directory under the temp dir)");
  app.add_option("--cluster", cluster, "1: run the queries against a 3-node cluster it starts")
      ->check(CLI::Range(0, 1));
  CLI11_PARSE(app, argc, argv);
  options.cluster = cluster == 1;
  const std::string command = bench::command_line(argc, argv);
  check(options.items > 0 && options.partitions > 0 && options.runs > 0 && options.expired_percent >= 0 &&
            options.expired_percent < 100,
        "flag validation");
  if (options.cluster) return run_cluster(options, command);
  if (options.dir.empty()) {
    options.dir = (std::filesystem::temp_directory_path() / ("mayfly-query-bench-" + std::to_string(getpid()))).string();
  }
  std::filesystem::remove_all(options.dir);

  storage::StoreOptions store_options;
  store_options.path = options.dir;
  Result<std::unique_ptr<storage::StateMachine>> opened = storage::StateMachine::open(store_options);
  check(opened.is_ok(), "open store");
  storage::StateMachine& store = **opened;
  uint64_t index = 1;
  int64_t now = kT0;
  auto apply = [&](const storage::Command& c) {
    Result<storage::OpResult> result = store.apply(c, LogIndex(index++), now);
    now += 10;  // 10 µs between writes, as a busy leader would stamp them
    check(result.is_ok(), "apply");
    return *result;
  };
  storage::Command db;
  db.type = storage::CommandType::kCreateDatabase;
  db.database = "db";
  check(apply(db).http_status() == 201, "create database");
  storage::Command container;
  container.type = storage::CommandType::kCreateContainer;
  container.database = "db";
  container.container = "c";
  container.partition_key_path = "/pk";
  container.default_ttl_change = storage::DefaultTtlChange::kSet;
  container.default_ttl_json = "-1";
  check(apply(container).http_status() == 201, "create container");

  // Every k-th item has ttl 1 s (expired at the query time, 100 s later); the others never expire.
  const auto load_start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < options.items; ++i) {
    storage::Command item;
    item.type = storage::CommandType::kCreateItem;
    item.database = "db";
    item.container = "c";
    item.body = item_body(options, i);
    check(apply(item).http_status() == 201, "create item");
  }
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const int64_t query_time = now + 100 * kSecond;

  std::printf("Query benchmark: %lld items (~200 B) in %lld partitions, %lld%% expired at the query time and not "
              "collected; one thread on one replica's state machine (real LevelDB, %s); loaded in %.1f s.\n",
              static_cast<long long>(options.items), static_cast<long long>(options.partitions),
              static_cast<long long>(options.expired_percent), options.dir.c_str(), load_seconds);
  std::printf("Medians of %d runs of %.1f s.\n\n", options.runs, options.seconds);
  measure(options, [&](const Workload& workload, Prng& prng) {
    QueryRequest request;
    request.database = "db";
    request.container = "c";
    request.sql = workload.sql;
    if (workload.random_partition) request.parameters_json = partition_parameter(options, prng);
    storage::OpResult result = execute_query(store.reader(), request, query_time);
    check(result.http_status() == 200, workload.name + ": " + result.message);
    return std::make_pair(std::move(result.body), result.work_charge);
  });
  std::printf("\ncommand: %s\n", command.c_str());
  opened.value().reset();
  std::filesystem::remove_all(options.dir);
  return 0;
}
