// Garbage-collector benchmark (issue #5): 3-node clusters of mayflyd that this benchmark starts (a fresh one per
// phase; each node with --metrics, scraped over HTTP), driven through the C++ client library.
//
//   1. Mass expiry: --mass-items items that all expire in the same second E (E = _ts + ttl in whole seconds; each
//      item is written with ttl = E − its expected _ts, then every response's ts + ttl is checked and the items that
//      crossed a second boundary are written again, in bounded rounds, until all share E; E is chosen from the write
//      rate measured on a first slice so that loading ends ≥ 3 s before it). Per node: when the items became
//      invisible (the node's applied time passed E — from cluster status — confirmed by 200 eventual reads pinned to
//      the node, all 404, and an empty listItems), and when they were reclaimed (mayfly_ttl_gc_deleted_items_total ==
//      N and mayfly_ttl_gc_backlog_items == 0 for the container); the drain rate N / (reclaimed − invisible); the
//      driver thread's CPU per 1000 deletions. Repeated --runs times (a fresh container each time); medians.
//   2. Foreground latency with and without a backlog draining: 50 in-flight 256 B upserts into another (serverless)
//      container plus 50 in-flight session point reads, in --runs windows of --fg-seconds (each also bounded by
//      --fg-max-requests): idle before the backlog exists, right after --backlog-items items expired at once (while
//      every node drains them), and after the drain finished. Drain rate per node from the metrics during and after
//      the loaded windows; mean fsync latency and CPU per node per phase.
//   3. Expiry lateness (--phases lateness, not run by default): each replica's mayfly_ttl_expiry_lateness_seconds over
//      the distinct expiry instants (whole seconds) of --lateness-seconds of writes, on an idle cluster and under 50
//      in-flight upserts (a fresh cluster each).
//
//   build-bench/bench/mayfly-gc-bench [--mayflyd PATH] [--base-port P] [--mass-items N] [--backlog-items B]
//                                     [--fg-seconds S] [--runs R] [--gc-flags "..."]
//                                     [--phases mass,foreground,lateness] [--lateness-seconds S (60)]
//                                     [--keep-data]
// Every load loop is bounded by time and by count; the benchmark stops only the nodes it started (by PID).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "bench/command_line.h"
#include "client/client.h"
#include "metrics/scrape.h"

namespace mayfly::bench {
namespace {

using client::Client;
using client::ClientOptions;
using client::Consistency;
using client::Op;
using client::Request;
using client::Response;
using metrics::Scrape;

// What --help prints below the flags (CLI11 lists the flags themselves), and what a refused value is answered with.
constexpr const char* kUsage =
    "  --base-port P: nodes listen on P..P+2 and serve metrics on P+3..P+5 (default: ports the OS picks)\n"
    "  --runs R: mass-expiry runs (medians), and foreground windows per phase (pooled percentiles)\n"
    "  each phase (mass, foreground; lateness: idle, then under load) runs on a fresh cluster; lateness is not in the\n"
    "  default --phases\n";

constexpr char kDatabase[] = "gcbench";
constexpr int kPartitions = 256;
constexpr size_t kNodes = 3;

struct Settings {
  std::string mayflyd;
  int base_port = 0;
  uint64_t mass_items = 100000;
  uint64_t backlog_items = 1000000;
  double fg_seconds = 10;
  uint64_t fg_max_requests = 5000000;
  size_t fg_writers = 50;
  size_t fg_readers = 50;
  int runs = 3;
  std::string gc_flags;
  bool mass = true;
  bool foreground = true;
  bool lateness = false;
  double lateness_seconds = 60;  // per lateness setting
  size_t load_in_flight = 256;
  bool keep_data = false;
  // The collector's pace as the nodes run it (from --gc-flags, else mayflyd's defaults), for the notes.
  uint64_t gc_batch_items_max = 1000;
  uint64_t gc_interval_ms = 200;
};

int64_t unix_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
int64_t unix_seconds() { return unix_micros() / 1000000; }
// Seconds from the instant `unix_s` (whole Unix seconds) to now; negative before it.
double seconds_after(int64_t unix_s) { return static_cast<double>(unix_micros() - unix_s * 1000000) / 1e6; }

void sleep_until_unix_micros(int64_t target) {
  for (int i = 0; i < 100000; ++i) {  // bounded; each step sleeps at most 50 ms
    const int64_t left = target - unix_micros();
    if (left <= 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(std::min<int64_t>(left, 50000)));
  }
}

std::string json_string(const std::string& text) { return "\"" + text + "\""; }  // our ids and keys need no escapes

// ---- many requests in flight on one event loop --------------------------------------------------------------------

// Keeps up to `in_flight` requests going on the clients' shared event loop: `next(slot)` supplies the next request
// for a slot (nullopt: that slot is finished), `done` sees every outcome. Bounded: no request is issued after the
// deadline or once `max_requests` were issued, and each one in flight ends within the client's request timeout.
class Pump {
 public:
  using Next = std::function<std::optional<Request>(size_t slot)>;
  using Done = std::function<void(size_t slot, const Request& request, const Response& response, double latency_ms)>;

  Pump(std::vector<std::unique_ptr<Client>>& clients, size_t in_flight, Clock::time_point deadline,
       uint64_t max_requests, Next next, Done done)
      : clients_(clients),
        in_flight_(in_flight),
        deadline_(deadline),
        max_requests_(max_requests),
        next_(std::move(next)),
        done_(std::move(done)),
        tasks_(errors_) {}

  // Returns the number of requests issued.
  uint64_t run() {
    clients_.front()->wait_scope().poll();  // see refresh_event_loop
    auto finished = kj::newPromiseAndFulfiller<void>();
    finished_ = kj::mv(finished.fulfiller);
    active_ = in_flight_;
    for (size_t slot = 0; slot < in_flight_; ++slot) issue(slot);
    if (active_ > 0) finished.promise.wait(clients_.front()->wait_scope());
    return issued_;
  }

 private:
  class Errors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override {
      std::fprintf(stderr, "mayfly-gc-bench: unexpected task failure: %s\n", exception.getDescription().cStr());
    }
  };

  void issue(size_t slot) {
    std::optional<Request> request;
    if (Clock::now() < deadline_ && issued_ < max_requests_) request = next_(slot);
    if (!request) {
      if (--active_ == 0 && finished_) finished_->fulfill();
      return;
    }
    ++issued_;
    const auto started = Clock::now();
    auto shared = std::make_shared<Request>(std::move(*request));
    tasks_.add(clients_[slot % clients_.size()]
                   ->execute_async(*shared)
                   .then([this, slot, started, shared](Response response) { finish(slot, started, *shared, response); },
                         [this, slot, started, shared](kj::Exception&& exception) {
                           Response failed;
                           failed.status = 0;
                           failed.message = exception.getDescription().cStr();
                           finish(slot, started, *shared, failed);
                         }));
  }

  void finish(size_t slot, Clock::time_point started, const Request& request, const Response& response) {
    done_(slot, request, response, std::chrono::duration<double, std::milli>(Clock::now() - started).count());
    issue(slot);
  }

  std::vector<std::unique_ptr<Client>>& clients_;
  size_t in_flight_;
  Clock::time_point deadline_;
  uint64_t max_requests_;
  Next next_;
  Done done_;
  Errors errors_;
  kj::TaskSet tasks_;
  kj::Own<kj::PromiseFulfiller<void>> finished_;
  size_t active_ = 0;
  uint64_t issued_ = 0;
};

// ---- the benchmark's view of the cluster ---------------------------------------------------------------------------

struct Env {
  Settings settings;
  LocalCluster* cluster = nullptr;
  std::vector<std::unique_ptr<Client>> clients;  // load connections; all share this thread's event loop
  std::unique_ptr<Client> probe;                 // status polls and pinned reads
};

// Turns the clients' event loop once. The client library computes each request's deadline from the loop's timer,
// which only advances while the loop runs: after this thread spent longer than the request timeout outside the loop
// (sleeping, scraping), the next execute() would otherwise answer 408 at once.
void refresh_event_loop(Env& env) { env.clients.front()->wait_scope().poll(); }

Scrape scrape_node(Env& env, size_t node) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::optional<Scrape> scraped = Scrape::fetch(env.cluster->metrics_endpoints().at(node - 1));
    if (scraped) return *scraped;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  die("node " + std::to_string(node) + " did not serve /metrics");
}

// Node `node`'s applied replicated time in µs, from cluster status asked of that node (0: no answer).
int64_t applied_time_micros(Env& env, size_t node) {
  Request request;
  request.operation = api::ClusterStatus{};
  request.endpoint = node;
  refresh_event_loop(env);
  const Response response = env.probe->execute(request);
  if (!response.ok()) return 0;
  const size_t entry = response.body.find("{\"id\":" + std::to_string(node) + ",");
  if (entry == std::string::npos) return 0;
  const size_t field = response.body.find("\"appliedTime\":", entry);
  if (field == std::string::npos) return 0;
  return std::strtoll(response.body.c_str() + field + 14, nullptr, 10);
}

double leader_changes(Env& env) {
  double total = 0;
  for (size_t node = 1; node <= kNodes; ++node) total += scrape_node(env, node).sum("mayfly_raft_leader_changes_total");
  return total;
}

void check_alive(Env& env) {
  const std::string exited = env.cluster->exited();
  if (!exited.empty()) die(exited);
}

void create_container(Env& env, const std::string& container) {
  Request request;
  request.database = kDatabase;
  request.container = container;
  api::CreateContainer create;
  create.settings.partition_key_path = "/pk";
  // TTL on without a default: every item's own `ttl` counts. Serverless (no throughput): no RU limit, so the
  // collector runs at the pace of node/gc_pacer.h on every node.
  create.settings.default_ttl = client::ContainerSettings::DefaultTtl::kSet;
  create.settings.default_ttl_json = "-1";
  request.operation = std::move(create);
  // A 408/503 leaves the outcome unknown: ask again (bounded); 409 then means an earlier attempt created it.
  const auto started = Clock::now();
  Response response;
  for (int attempt = 0; attempt < 6; ++attempt) {
    refresh_event_loop(env);
    response = env.clients.front()->execute(request);
    if (response.status != 408 && response.status != 503) break;
    std::fprintf(stderr, "mayfly-gc-bench: createContainer %s: %d after %.1f s (%s); asking again\n",
                 container.c_str(), response.status, seconds_since(started), response.message.c_str());
  }
  if (!response.ok() && !(response.status == 409 && seconds_since(started) > 1)) {
    die("createContainer " + container + ": " + std::to_string(response.status) + " " + response.message);
  }
  if (seconds_since(started) > 1) {
    std::fprintf(stderr, "mayfly-gc-bench: createContainer %s took %.1f s\n", container.c_str(), seconds_since(started));
  }
}

std::string item_id(const std::string& prefix, uint64_t index) { return prefix + "-" + std::to_string(index); }
std::string item_pk(uint64_t index) { return "p" + std::to_string(index % kPartitions); }

// ---- loading items that all expire in the same second ---------------------------------------------------------------

struct LoadResult {
  int64_t expiry_s = 0;  // E, Unix seconds: every item's _ts + ttl
  double seconds = 0;    // loading, first write to last confirmation
  uint64_t writes = 0;   // upserts sent, re-writes included
  int rounds = 0;
  int retargets = 0;
  std::map<int, uint64_t> errors;  // final statuses of failed upserts (0: exception); those items were re-written
};

// Writes `count` items "<prefix>-<i>" (~128 B) into `container`, each with its own ttl, until every one of them has
// _ts + ttl == E for one second E that lies ≥ 3 s after the last write. Dies if that cannot be reached in bounded
// rounds and re-targets.
LoadResult load_expiring_together(Env& env, const std::string& container, const std::string& prefix,
                                  uint64_t count) {
  constexpr int kMaxRounds = 40;
  constexpr int kMaxRetargets = 3;
  constexpr double kMarginSeconds = 3;
  std::vector<uint8_t> confirmed(count, 0);
  std::vector<int64_t> sent_ttl(count, 0);
  const std::string sample = R"({"id":")" + item_id(prefix, count) + R"(","pk":"p255","ttl":1000000,"v":""})";
  const std::string padding(sample.size() < 128 ? 128 - sample.size() : 0, 'x');

  LoadResult result;
  const auto started = Clock::now();
  // A first guess at E from an optimistic rate; the first round (a probe of the rate) re-targets if it is too soon.
  double rate = 8000;
  result.expiry_s = unix_seconds() + static_cast<int64_t>(std::ceil(static_cast<double>(count) / rate)) + 5;
  uint64_t confirmed_count = 0;
  auto last_progress = Clock::now();
  auto retarget = [&](const char* why) {
    if (++result.retargets > kMaxRetargets) die("could not load the items in time for one common expiry second");
    // Every item is written again for the new E: at 60% of the measured rate, plus the margin and a second.
    result.expiry_s = unix_seconds() + static_cast<int64_t>(std::ceil(static_cast<double>(count) / (0.6 * rate))) +
                      static_cast<int64_t>(kMarginSeconds) + 2;
    std::fill(confirmed.begin(), confirmed.end(), 0);
    confirmed_count = 0;
    std::fprintf(stderr, "mayfly-gc-bench: %s: %s; new expiry second E = now + %" PRId64 " s (%.0f writes/s measured)\n",
                 container.c_str(), why, result.expiry_s - unix_seconds(), rate);
  };

  for (int round = 0; round < kMaxRounds; ++round) {
    check_alive(env);
    std::vector<uint64_t> pending;
    for (uint64_t i = 0; i < count; ++i) {
      if (!confirmed[i]) pending.push_back(i);
    }
    if (pending.empty()) break;
    const bool probe = round == 0 && count > 20000;
    if (probe) pending.resize(std::clamp<uint64_t>(count / 10, 5000, 50000));
    const double left_s = static_cast<double>(result.expiry_s) - kMarginSeconds -
                          static_cast<double>(unix_micros()) / 1e6;
    if (round > 0 && left_s < static_cast<double>(pending.size()) / (0.8 * rate)) {
      retarget("not enough time left before the expiry second");
      continue;
    }
    ++result.rounds;
    const int64_t deadline_micros = (result.expiry_s - static_cast<int64_t>(kMarginSeconds)) * 1000000;
    const auto deadline = Clock::now() + std::chrono::microseconds(std::max<int64_t>(0, deadline_micros - unix_micros()));
    size_t cursor = 0;
    uint64_t round_confirmed = 0;
    const auto round_started = Clock::now();
    // The item each slot has in flight (a slot sends its next request only after the last one's answer).
    std::vector<uint64_t> slot_index(env.settings.load_in_flight);
    Pump pump(
        env.clients, env.settings.load_in_flight, deadline, pending.size(),
        [&](size_t slot) -> std::optional<Request> {
          if (cursor >= pending.size()) return std::nullopt;
          const int64_t ttl = result.expiry_s - unix_seconds();
          if (ttl < static_cast<int64_t>(kMarginSeconds)) return std::nullopt;
          const uint64_t index = pending[cursor++];
          sent_ttl[index] = ttl;
          slot_index[slot] = index;  // tells `done` which item this was
          Request request;
          request.database = kDatabase;
          request.container = container;
          request.operation = api::UpsertItem{.body = R"({"id":")" + item_id(prefix, index) + R"(","pk":")" +
                                                      item_pk(index) + R"(","ttl":)" + std::to_string(ttl) +
                                                      R"(,"v":")" + padding + "\"}"};
          return request;
        },
        [&](size_t slot, const Request&, const Response& response, double) {
          const uint64_t index = slot_index[slot];
          if (!response.ok()) {
            ++result.errors[response.status];
          } else if (response.ts + sent_ttl[index] == result.expiry_s && !confirmed[index]) {
            confirmed[index] = 1;
            ++confirmed_count;
            ++round_confirmed;
          }
          if (seconds_since(last_progress) >= 5) {
            last_progress = Clock::now();
            std::fprintf(stderr, "mayfly-gc-bench: loading %s: %" PRIu64 " of %" PRIu64 " confirmed, E in %.1f s\n",
                         container.c_str(), confirmed_count, count, -seconds_after(result.expiry_s));
          }
        });
    result.writes += pump.run();
    const double round_seconds = seconds_since(round_started);
    if ((probe || round == 1) && cursor >= 1000) rate = std::max(100.0, static_cast<double>(cursor) / std::max(round_seconds, 1e-3));
    if (probe) {
      // E must leave time for the rest at the rate just measured (60% of it, on a noisy machine).
      const double needed = static_cast<double>(count - confirmed_count) / (0.6 * rate) + kMarginSeconds + 1;
      if (static_cast<double>(result.expiry_s) - static_cast<double>(unix_micros()) / 1e6 < needed) {
        retarget("the first guess at E is too soon");
      }
    }
  }
  if (confirmed_count != count) die("items still without the common expiry second after the bounded rounds");
  result.seconds = seconds_since(started);
  if (seconds_after(result.expiry_s) > -kMarginSeconds) die("loading ended less than 3 s before E");
  return result;
}

// ---- phase 1: mass expiry -------------------------------------------------------------------------------------------

struct NodeExpiry {
  double invisible_ms = -1;  // E → applied time observed ≥ E on this node
  double confirmed_ms = -1;  // E → 200 pinned eventual reads all 404 and an empty listItems
  uint64_t visible_after = 0;  // sample reads that still answered 200 (must be 0)
  uint64_t not_pinned = 0;     // sample reads that another node served (a retry moved them)
  bool list_empty = false;
  double first_delete_s = -1;  // E → first scrape with deleted > 0
  double deleted_all_s = -1;   // E → deleted_total == N
  double reclaimed_s = -1;     // E → deleted_total == N and backlog gauge == 0
  double drain_rate = 0;       // N / (reclaimed − invisible)
  double lag_mean_s = 0;       // deletion-lag histogram: sum / count
  double driver_cpu_s = 0;     // driver (main) thread CPU from E to reclaimed
  double driver_idle_cpu_s = 0;  // what the driver would have used idle over that time (rate before E)
};

struct MassRun {
  LoadResult load;
  std::vector<NodeExpiry> nodes;
  double leader_changes = 0;
};

MassRun mass_expiry_run(Env& env, int run) {
  const uint64_t n = env.settings.mass_items;
  const std::string name = "mass" + std::to_string(run);
  const std::string label = std::string(kDatabase) + "/" + name;
  create_container(env, name);
  const double changes_before = leader_changes(env);
  MassRun result;
  result.load = load_expiring_together(env, name, "m", n);
  const int64_t e = result.load.expiry_s;
  std::fprintf(stderr,
               "mayfly-gc-bench: run %d: %" PRIu64 " items loaded in %.1f s (%" PRIu64 " writes, %d rounds), all expire "
               "at E = %" PRId64 ", in %.1f s\n",
               run, n, result.load.seconds, result.load.writes, result.load.rounds, e, -seconds_after(e));
  std::mt19937_64 rng(0x6763 + static_cast<uint64_t>(run));
  std::vector<uint64_t> sample;
  for (int i = 0; i < 200; ++i) sample.push_back(std::uniform_int_distribution<uint64_t>(0, n - 1)(rng));

  // The drivers' CPU while idle (between the end of loading and E), to net it out of the drain's figure.
  std::vector<double> driver_cpu_loaded(kNodes, 0), driver_cpu_at_e(kNodes, 0), driver_idle_rate(kNodes, 0);
  for (size_t node = 1; node <= kNodes; ++node) {
    const pid_t pid = env.cluster->pids()[node - 1];
    driver_cpu_loaded[node - 1] = process_cpu_seconds(pid, pid);
  }
  const auto idle_started = Clock::now();
  sleep_until_unix_micros(e * 1000000 - 300000);
  const double idle_seconds = seconds_since(idle_started);
  result.nodes.assign(kNodes, NodeExpiry{});
  for (size_t node = 1; node <= kNodes; ++node) {
    const pid_t pid = env.cluster->pids()[node - 1];
    driver_cpu_at_e[node - 1] = process_cpu_seconds(pid, pid);
    driver_idle_rate[node - 1] = (driver_cpu_at_e[node - 1] - driver_cpu_loaded[node - 1]) / std::max(idle_seconds, 1e-3);
  }
  const std::map<std::string, std::string> match = {{"container", label}};
  // Bounded: the slowest pace the default collector could plausibly have (200 items/s) plus a minute.
  const double limit_s = 60 + static_cast<double>(n) / 200;
  for (int iteration = 0; iteration < 1000000 && seconds_after(e) < limit_s; ++iteration) {
    check_alive(env);
    bool all_done = true;
    // First every node's applied time (so one node's confirmation reads do not delay the next node's figure), then
    // the confirmation of the nodes that just passed E, then the metrics.
    std::vector<size_t> passed;
    for (size_t node = 1; node <= kNodes; ++node) {
      NodeExpiry& figures = result.nodes[node - 1];
      if (figures.invisible_ms < 0 && applied_time_micros(env, node) >= e * 1000000) {
        figures.invisible_ms = seconds_after(e) * 1000;
        passed.push_back(node);
      }
    }
    for (size_t node = 1; node <= kNodes; ++node) {
      NodeExpiry& figures = result.nodes[node - 1];
      if (figures.invisible_ms < 0) all_done = false;
      if (std::find(passed.begin(), passed.end(), node) != passed.end()) {
        std::vector<Request> reads;
        for (uint64_t index : sample) {
          Request read;
          read.database = kDatabase;
          read.container = name;
          read.operation = api::ReadItem{.partition_key = json_string(item_pk(index)), .id = item_id("m", index)};
          read.endpoint = node;
          read.options.consistency = Consistency::kEventual;
          reads.push_back(std::move(read));
        }
        refresh_event_loop(env);
        for (const Response& response : env.probe->execute_all(reads)) {
          if (response.status != 404) ++figures.visible_after;
          if (response.served_by != node) ++figures.not_pinned;
        }
        Request list;
        list.operation = api::ListItems{};
        list.database = kDatabase;
        list.container = name;
        list.endpoint = node;
        list.options.consistency = Consistency::kEventual;
        list.options.max_items = 1;
        // A page that scanned its budget of expired entries comes back empty with a continuation: follow it to the
        // end (bounded), every page must be empty.
        figures.list_empty = true;
        for (int page = 0; page < 10'000; ++page) {
          const Response listed = env.probe->execute(list);
          if (listed.status != 200 || listed.body != "[]") {
            figures.list_empty = false;
            std::fprintf(stderr, "mayfly-gc-bench: node %zu list page %d: status %d, body %.200s\n", node, page,
                         listed.status, listed.body.c_str());
            break;
          }
          if (listed.continuation.empty()) break;
          list.options.continuation = listed.continuation;
        }
        figures.confirmed_ms = seconds_after(e) * 1000;
      }
      if (figures.reclaimed_s < 0) {
        all_done = false;
        const Scrape scrape = scrape_node(env, node);
        const double deleted = scrape.sum("mayfly_ttl_gc_deleted_items_total", match);
        const double backlog = scrape.sum("mayfly_ttl_gc_backlog_items", match);
        if (deleted > 0 && figures.first_delete_s < 0) figures.first_delete_s = seconds_after(e);
        if (deleted >= static_cast<double>(n) && figures.deleted_all_s < 0) figures.deleted_all_s = seconds_after(e);
        if (figures.deleted_all_s >= 0 && backlog == 0) {
          figures.reclaimed_s = seconds_after(e);
          const pid_t pid = env.cluster->pids()[node - 1];
          figures.driver_cpu_s = process_cpu_seconds(pid, pid) - driver_cpu_at_e[node - 1];
          figures.driver_idle_cpu_s = driver_idle_rate[node - 1] * (figures.reclaimed_s + 0.3);
          const double lag_count = scrape.sum("mayfly_ttl_gc_deletion_lag_seconds_count", match);
          if (lag_count > 0) figures.lag_mean_s = scrape.sum("mayfly_ttl_gc_deletion_lag_seconds_sum", match) / lag_count;
        }
      }
    }
    if (all_done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(seconds_after(e) < 2 ? 5 : 50));
  }
  for (size_t node = 1; node <= kNodes; ++node) {
    NodeExpiry& figures = result.nodes[node - 1];
    if (figures.invisible_ms < 0 || figures.reclaimed_s < 0) {
      die("run " + std::to_string(run) + ": node " + std::to_string(node) + " did not " +
          (figures.invisible_ms < 0 ? "pass E" : "reclaim the items") + " within " + std::to_string(limit_s) + " s");
    }
    figures.drain_rate = static_cast<double>(n) / std::max(1e-3, figures.reclaimed_s - figures.invisible_ms / 1000);
  }
  result.leader_changes = leader_changes(env) - changes_before;
  return result;
}

std::string describe_run(const MassRun& run, size_t number) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "run %zu: loaded in %.1f s (%" PRIu64 " upserts in %d rounds, %d re-targets", number,
                run.load.seconds, run.load.writes, run.load.rounds, run.load.retargets);
  std::string text = buffer;
  for (const auto& [status, count] : run.load.errors) {
    text += ", " + std::to_string(count) + " × " + std::to_string(status) + " re-written";
  }
  std::snprintf(buffer, sizeof buffer, "); leader changes %.0f;", run.leader_changes);
  text += buffer;
  for (size_t i = 0; i < run.nodes.size(); ++i) {
    const NodeExpiry& node = run.nodes[i];
    std::snprintf(buffer, sizeof buffer,
                  " node %zu: invisible %.0f ms, confirmed %.0f ms (%" PRIu64 " of 200 still visible, %" PRIu64
                  " not pinned, list %s), first delete %.2f s, all deleted %.2f s, reclaimed %.2f s, driver CPU %.2f s (idle share %.2f s);",
                  i + 1, node.invisible_ms, node.confirmed_ms, node.visible_after, node.not_pinned,
                  node.list_empty ? "empty" : "NOT EMPTY", node.first_delete_s, node.deleted_all_s, node.reclaimed_s,
                  node.driver_cpu_s, node.driver_idle_cpu_s);
    text += buffer;
  }
  return text;
}

void print_mass_expiry(const Settings& settings, const std::vector<MassRun>& runs) {
  std::printf("\n### Mass expiry: %" PRIu64 " items, one expiry second E, median of %zu runs\n\n", settings.mass_items,
              runs.size());
  for (size_t r = 0; r < runs.size(); ++r) std::printf("%s\n", describe_run(runs[r], r + 1).c_str());
  std::printf("\n| node | invisible after E, ms | confirmed (200 reads 404, list empty), ms | first delete after E, s | "
              "all deleted + backlog 0 after E, s | drain items/s = N / (reclaimed − invisible) | deleting items/s = N / "
              "(all deleted − first delete) | mean deletion lag, s | driver CPU per 1000 deletes (net of idle), ms |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  for (size_t node = 0; node < kNodes; ++node) {
    std::vector<double> invisible, confirmed, first, reclaimed, rate, deleting, lag, cpu;
    for (const MassRun& run : runs) {
      const NodeExpiry& figures = run.nodes[node];
      invisible.push_back(figures.invisible_ms);
      confirmed.push_back(figures.confirmed_ms);
      first.push_back(figures.first_delete_s);
      reclaimed.push_back(figures.reclaimed_s);
      rate.push_back(figures.drain_rate);
      const double span = figures.deleted_all_s - figures.first_delete_s;
      deleting.push_back(span > 0 ? static_cast<double>(settings.mass_items) / span : 0);
      lag.push_back(figures.lag_mean_s);
      cpu.push_back((figures.driver_cpu_s - figures.driver_idle_cpu_s) * 1000 /
                    static_cast<double>(settings.mass_items) * 1000);
    }
    std::printf("| %zu | %.0f | %.0f | %.2f | %.2f | %.0f | %.0f | %.2f | %.0f |\n", node + 1, median(invisible),
                median(confirmed), median(first), median(reclaimed), median(rate), median(deleting), median(lag),
                median(cpu));
  }
  std::vector<double> slowest;
  for (const MassRun& run : runs) {
    double worst = 0;
    for (const NodeExpiry& figures : run.nodes) worst = std::max(worst, figures.reclaimed_s);
    slowest.push_back(worst);
  }
  std::printf("\nnotes: the collector's pace (node/gc_pacer.h): with nothing else to do a node runs passes of "
              "%" PRIu64 " items per container back to back, within --gc-driver-share of its driver thread; while it "
              "serves more than 200 operations a second, one pass of at most 100 items per %" PRIu64 " ms. "
              "Invisible = the node's applied replicated time was seen ≥ E "
              "(cluster status polled every ~5 ms); reclaimed = every item physically deleted on that node "
              "(mayfly_ttl_gc_deleted_items_total == N) and the backlog gauge (refreshed every 1 s) at 0; the last "
              "node reclaimed %.2f s after E (median). Driver CPU is the node's main (driver) thread from E to "
              "reclaimed, less what it used per second while idle between loading and E (ticks, time entries, metrics), "
              "per 1000 items deleted: an estimate of one collector pass of 1000 items.\n",
              settings.gc_batch_items_max, settings.gc_interval_ms, median(slowest));
  std::printf("etcd reference (given by issue #5 for this machine, NOT run here): etcd revokes about 1,000 expired "
              "leases per second, so 20k leases take 11–13 s after the last deadline to disappear. Here the items "
              "stop being visible when the replicated time passes E (no per-item revocation before that); "
              "physical deletion afterwards runs at the drain rate above on every node.\n");
  std::fflush(stdout);
}

// ---- phase 2: foreground load with and without a draining backlog ---------------------------------------------------

struct ForegroundResult {
  std::string phase;
  double seconds = 0;
  uint64_t writes = 0, reads = 0;
  std::vector<double> write_ms, read_ms;
  std::vector<double> write_p99_windows, read_p99_windows;  // p99 of each window
  std::vector<double> fsync_ms;                             // per node, mean synced log write during the phase
  std::map<int, uint64_t> errors;
  std::vector<double> drain_rate;      // per node, backlog container items deleted per second during the run
  std::vector<double> backlog_after;   // per node, backlog gauge at the end
  std::vector<double> node_cpu_pct;    // per node, whole process
  std::vector<double> driver_cpu_pct;  // per node, driver (main) thread
  double bench_cpu_pct = 0;            // this process (the client side of the load)
  std::string load_average;            // /proc/loadavg (1, 5, 15 min) at the end of the run
  double leader_changes = 0;
};

std::string load_average() {
  std::FILE* file = std::fopen("/proc/loadavg", "r");
  if (file == nullptr) return "?";
  double one = 0, five = 0, fifteen = 0;
  const int got = std::fscanf(file, "%lf %lf %lf", &one, &five, &fifteen);
  std::fclose(file);
  if (got != 3) return "?";
  char text[64];
  std::snprintf(text, sizeof text, "%.1f %.1f %.1f", one, five, fifteen);
  return text;
}

struct ReadSet {
  std::vector<uint64_t> indexes;
};

// Runs the foreground load for `windows` consecutive windows of --fg-seconds each (percentiles pooled, and per
// window); node figures (backlog deleted, CPU, fsync latency) cover the whole phase.
ForegroundResult foreground_run(Env& env, const std::string& phase, int windows, const std::string& backlog_label,
                                uint64_t& next_write, const ReadSet& reads, std::mt19937_64& rng) {
  const Settings& settings = env.settings;
  ForegroundResult result;
  result.phase = phase;
  const std::map<std::string, std::string> match = {{"container", backlog_label}};
  std::vector<double> deleted_before(kNodes), cpu_before(kNodes), driver_before(kNodes), fsync_sum_before(kNodes),
      fsync_count_before(kNodes);
  const double changes_before = leader_changes(env);
  for (size_t node = 1; node <= kNodes; ++node) {
    const Scrape scrape = scrape_node(env, node);
    deleted_before[node - 1] = scrape.sum("mayfly_ttl_gc_deleted_items_total", match);
    fsync_sum_before[node - 1] = scrape.sum("mayfly_raft_fsync_latency_seconds_sum");
    fsync_count_before[node - 1] = scrape.sum("mayfly_raft_fsync_latency_seconds_count");
    const pid_t pid = env.cluster->pids()[node - 1];
    cpu_before[node - 1] = process_cpu_seconds(pid);
    driver_before[node - 1] = process_cpu_seconds(pid, pid);
  }
  const std::string padding(256 - std::string(R"({"id":"fg-99999999","pk":"p255","ttl":86400,"v":""})").size(), 'x');
  const double bench_cpu_before = own_cpu_seconds();
  const auto started = Clock::now();
  for (int window = 0; window < windows; ++window) {
    check_alive(env);
    std::vector<double> window_write_ms, window_read_ms;
    const auto deadline = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(settings.fg_seconds * 1e6));
    Pump pump(
        env.clients, settings.fg_writers + settings.fg_readers, deadline, settings.fg_max_requests,
        [&](size_t slot) -> std::optional<Request> {
          Request request;
          request.database = kDatabase;
          request.container = "fg";
          if (slot < settings.fg_writers) {
            const uint64_t index = next_write++;
            request.operation = api::UpsertItem{.body = R"({"id":")" + item_id("fg", index) + R"(","pk":")" +
                                                        item_pk(index) + R"(","ttl":86400,"v":")" + padding + "\"}"};
          } else {
            const uint64_t index =
                reads.indexes[std::uniform_int_distribution<size_t>(0, reads.indexes.size() - 1)(rng)];
            request.operation = api::ReadItem{.partition_key = json_string(item_pk(index)), .id = item_id("fg", index)};
            request.options.consistency = Consistency::kSession;
          }
          return request;
        },
        [&](size_t, const Request& request, const Response& response, double latency_ms) {
          const bool write = request.kind() == Op::kUpsertItem;
          (write ? window_write_ms : window_read_ms).push_back(latency_ms);
          if (!response.ok()) {
            ++result.errors[response.status];
          } else {
            ++(write ? result.writes : result.reads);
          }
        });
    pump.run();
    std::sort(window_write_ms.begin(), window_write_ms.end());
    std::sort(window_read_ms.begin(), window_read_ms.end());
    result.write_p99_windows.push_back(percentile(window_write_ms, 99));
    result.read_p99_windows.push_back(percentile(window_read_ms, 99));
    result.write_ms.insert(result.write_ms.end(), window_write_ms.begin(), window_write_ms.end());
    result.read_ms.insert(result.read_ms.end(), window_read_ms.begin(), window_read_ms.end());
  }
  result.seconds = seconds_since(started);
  result.bench_cpu_pct = (own_cpu_seconds() - bench_cpu_before) * 100 / result.seconds;
  result.load_average = load_average();
  for (size_t node = 1; node <= kNodes; ++node) {
    const Scrape scrape = scrape_node(env, node);
    result.drain_rate.push_back((scrape.sum("mayfly_ttl_gc_deleted_items_total", match) - deleted_before[node - 1]) /
                                result.seconds);
    result.backlog_after.push_back(scrape.sum("mayfly_ttl_gc_backlog_items", match));
    const double fsyncs = scrape.sum("mayfly_raft_fsync_latency_seconds_count") - fsync_count_before[node - 1];
    result.fsync_ms.push_back(
        fsyncs > 0 ? (scrape.sum("mayfly_raft_fsync_latency_seconds_sum") - fsync_sum_before[node - 1]) * 1000 / fsyncs
                   : 0);
    const pid_t pid = env.cluster->pids()[node - 1];
    result.node_cpu_pct.push_back((process_cpu_seconds(pid) - cpu_before[node - 1]) * 100 / result.seconds);
    result.driver_cpu_pct.push_back((process_cpu_seconds(pid, pid) - driver_before[node - 1]) * 100 / result.seconds);
  }
  result.leader_changes = leader_changes(env) - changes_before;
  std::sort(result.write_ms.begin(), result.write_ms.end());
  std::sort(result.read_ms.begin(), result.read_ms.end());
  return result;
}

// Items the session reads of the foreground load pick from (written once, ttl one day).
ReadSet seed_reads(Env& env, uint64_t& next_write) {
  ReadSet set;
  std::vector<Request> writes;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t index = next_write++;
    Request request;
    request.database = kDatabase;
    request.container = "fg";
    request.operation = api::UpsertItem{.body = R"({"id":")" + item_id("fg", index) + R"(","pk":")" + item_pk(index) +
                                                R"(","ttl":86400})"};
    writes.push_back(std::move(request));
    set.indexes.push_back(index);
  }
  refresh_event_loop(env);
  for (const Response& response : env.clients.front()->execute_all(writes)) {
    if (!response.ok()) die("seeding the read set: " + std::to_string(response.status) + " " + response.message);
  }
  return set;
}

struct DrainTail {
  std::vector<double> reclaimed_after_e_s;  // per node; -1: not within the bound
  std::vector<double> rate_after_fg;        // per node, items/s from the end of the loaded window to reclaimed
};

// After the loaded window: waits (bounded) until every node has deleted all `count` items and its gauge shows 0.
DrainTail wait_for_drain(Env& env, const std::string& label, uint64_t count, int64_t e) {
  DrainTail tail;
  tail.reclaimed_after_e_s.assign(kNodes, -1);
  tail.rate_after_fg.assign(kNodes, 0);
  const std::map<std::string, std::string> match = {{"container", label}};
  std::vector<double> start_deleted(kNodes);
  const auto start = Clock::now();
  for (size_t node = 1; node <= kNodes; ++node) {
    start_deleted[node - 1] = scrape_node(env, node).sum("mayfly_ttl_gc_deleted_items_total", match);
  }
  const double limit_s = 120 + static_cast<double>(count) / 200;
  auto last_progress = Clock::now();
  for (int iteration = 0; iteration < 1000000 && seconds_since(start) < limit_s; ++iteration) {
    check_alive(env);
    bool all = true;
    std::string progress;
    for (size_t node = 1; node <= kNodes; ++node) {
      if (tail.reclaimed_after_e_s[node - 1] >= 0) continue;
      const Scrape scrape = scrape_node(env, node);
      const double deleted = scrape.sum("mayfly_ttl_gc_deleted_items_total", match);
      progress += " node " + std::to_string(node) + ": " + std::to_string(static_cast<uint64_t>(deleted));
      if (deleted >= static_cast<double>(count) && scrape.sum("mayfly_ttl_gc_backlog_items", match) == 0) {
        tail.reclaimed_after_e_s[node - 1] = seconds_after(e);
        tail.rate_after_fg[node - 1] = (deleted - start_deleted[node - 1]) / std::max(1e-3, seconds_since(start));
      } else {
        all = false;
      }
    }
    if (all) break;
    if (seconds_since(last_progress) >= 10) {
      last_progress = Clock::now();
      std::fprintf(stderr, "mayfly-gc-bench: draining %s, deleted so far:%s (of %" PRIu64 ")\n", label.c_str(),
                   progress.c_str(), count);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return tail;
}

std::string errors_text(const std::map<int, uint64_t>& errors) {
  std::string text;
  for (const auto& [status, count] : errors) {
    text += (text.empty() ? "" : ", ") + std::to_string(count) + " × " +
            (status == 0 ? std::string("exception") : std::to_string(status));
  }
  return text.empty() ? "0" : text;
}

std::string per_node(const std::vector<double>& values, const char* format) {
  std::string text;
  char buffer[64];
  for (double value : values) {
    std::snprintf(buffer, sizeof buffer, format, value);
    text += (text.empty() ? "" : " / ") + std::string(buffer);
  }
  return text;
}

void foreground_phase(Env& env) {
  const Settings& settings = env.settings;
  create_container(env, "fg");
  create_container(env, "backlog");
  const std::string backlog_label = std::string(kDatabase) + "/backlog";
  uint64_t next_write = 0;
  std::mt19937_64 rng(0x6667);
  const ReadSet reads = seed_reads(env, next_write);

  std::vector<ForegroundResult> results;
  const int windows = settings.runs;
  std::fprintf(stderr, "mayfly-gc-bench: foreground load, no backlog (%d × %.0f s)\n", windows, settings.fg_seconds);
  results.push_back(foreground_run(env, "idle, no backlog", windows, backlog_label, next_write, reads, rng));

  const LoadResult load = load_expiring_together(env, "backlog", "b", settings.backlog_items);
  const int64_t e = load.expiry_s;
  std::fprintf(stderr,
               "mayfly-gc-bench: backlog of %" PRIu64 " items loaded in %.1f s (%" PRIu64 " writes, %d rounds, %d "
               "re-targets); all expire at E = %" PRId64 ", in %.1f s\n",
               settings.backlog_items, load.seconds, load.writes, load.rounds, load.retargets, e, -seconds_after(e));
  // The loaded window starts once every node has applied past E: the whole backlog is then expired everywhere.
  sleep_until_unix_micros(e * 1000000);
  for (size_t node = 1; node <= kNodes; ++node) {
    for (int attempt = 0; attempt < 2000 && applied_time_micros(env, node) < e * 1000000; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  const double fg_start_after_e = seconds_after(e);
  std::fprintf(stderr, "mayfly-gc-bench: foreground load while the backlog drains (%d × %.0f s), starting %.2f s after E\n",
               windows, settings.fg_seconds, fg_start_after_e);
  results.push_back(foreground_run(env, "backlog draining", windows, backlog_label, next_write, reads, rng));
  std::fprintf(stderr, "mayfly-gc-bench: waiting for every node to reclaim the backlog\n");
  const DrainTail tail = wait_for_drain(env, backlog_label, settings.backlog_items, e);
  std::fprintf(stderr, "mayfly-gc-bench: foreground load after the drain (%d × %.0f s)\n", windows, settings.fg_seconds);
  results.push_back(foreground_run(env, "idle, after the drain", windows, backlog_label, next_write, reads, rng));

  std::printf("\n### Foreground load with and without a draining backlog\n\n");
  std::printf("backlog: %" PRIu64 " items (~128 B) expiring in one second E, loaded in %.1f s (%" PRIu64
              " upserts, %d rounds, %d re-targets, load errors re-written: %s); the loaded window began %.2f s after E. "
              "Foreground: %zu in-flight 256 B upserts (own ttl 1 day) into another serverless container plus %zu "
              "in-flight session point reads of 2000 items written beforehand; each phase is %d windows of %.0f s (or "
              "%" PRIu64 " requests), back to back.\n\n",
              settings.backlog_items, load.seconds, load.writes, load.rounds, load.retargets,
              errors_text(load.errors).c_str(), fg_start_after_e, settings.fg_writers, settings.fg_readers, windows,
              settings.fg_seconds, settings.fg_max_requests);
  std::printf("| phase | writes/s | write p50 ms | write p99 ms (per window) | reads/s | read p50 ms | "
              "read p99 ms (per window) | errors | backlog deleted/s per node (1 / 2 / 3) | backlog left at end per node "
              "| mean fsync ms per node |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (ForegroundResult& result : results) {
    std::printf("| %s | %.0f | %.2f | %.2f (%s) | %.0f | %.2f | %.2f (%s) | %s | %s | %s | %s |\n",
                result.phase.c_str(), static_cast<double>(result.writes) / result.seconds,
                percentile(result.write_ms, 50), percentile(result.write_ms, 99),
                per_node(result.write_p99_windows, "%.0f").c_str(), static_cast<double>(result.reads) / result.seconds,
                percentile(result.read_ms, 50), percentile(result.read_ms, 99),
                per_node(result.read_p99_windows, "%.0f").c_str(), errors_text(result.errors).c_str(),
                per_node(result.drain_rate, "%.0f").c_str(), per_node(result.backlog_after, "%.0f").c_str(),
                per_node(result.fsync_ms, "%.1f").c_str());
  }
  ForegroundResult& idle = results[0];
  ForegroundResult& draining = results[1];
  const double write_ratio = percentile(draining.write_ms, 99) / std::max(1e-9, percentile(idle.write_ms, 99));
  const double read_ratio = percentile(draining.read_ms, 99) / std::max(1e-9, percentile(idle.read_ms, 99));
  ForegroundResult& after = results[2];
  std::printf("\np99(draining) / p99(idle, no backlog): writes %.2f×, reads %.2f×; p99(draining) / p99(idle, after the "
              "drain): writes %.2f×, reads %.2f×; throughput draining / idle (no backlog): writes %.2f×, reads %.2f×\n",
              write_ratio, read_ratio,
              percentile(draining.write_ms, 99) / std::max(1e-9, percentile(after.write_ms, 99)),
              percentile(draining.read_ms, 99) / std::max(1e-9, percentile(after.read_ms, 99)),
              static_cast<double>(draining.writes) / draining.seconds /
                  std::max(1e-9, static_cast<double>(idle.writes) / idle.seconds),
              static_cast<double>(draining.reads) / draining.seconds /
                  std::max(1e-9, static_cast<double>(idle.reads) / idle.seconds));
  std::printf("backlog reclaimed on every node at %s s after E (per node); drain rate after the loaded window "
              "(no foreground load): %s items/s per node\n",
              per_node(tail.reclaimed_after_e_s, "%.1f").c_str(), per_node(tail.rate_after_fg, "%.0f").c_str());
  std::printf("\nCPU per phase, %% of one core (machine: %u cores), per node 1 / 2 / 3:\n\n| phase | node process | "
              "node driver thread | benchmark process | load average at end | leader changes |\n"
              "|---|---|---|---|---|---|\n",
              std::thread::hardware_concurrency());
  for (const ForegroundResult& result : results) {
    std::printf("| %s | %s | %s | %.0f | %s | %.0f |\n", result.phase.c_str(),
                per_node(result.node_cpu_pct, "%.0f").c_str(), per_node(result.driver_cpu_pct, "%.0f").c_str(),
                result.bench_cpu_pct, result.load_average.c_str(), result.leader_changes);
  }
  bool drained_whole_window = true;
  for (double left : draining.backlog_after) drained_whole_window = drained_whole_window && left > 0;
  if (!drained_whole_window) {
    std::printf("\nnote: some node finished its backlog before the loaded window ended (backlog left 0): use a larger "
                "--backlog-items for a window that is draining throughout\n");
  }
  std::fflush(stdout);
}

// ---- phase 3: expiry lateness -----------------------------------------------------------------------------------
// Issue #14 target 3, measured where it happens: each node's mayfly_ttl_expiry_lateness_seconds (the wall time at which
// its applied replicated time first reached an expiry instant, minus the instant; one sample per distinct instant),
// on a fresh cluster per setting so the histograms hold nothing else. Items carry ttl 2 s; an item expires at its
// whole-second _ts + ttl (spec), so --lateness-seconds S gives about S − 3 instants per setting.
struct LatenessResult {
  std::string setting;
  uint64_t expiring = 0;      // items written to expire (instants)
  uint64_t writes = 0;        // all writes (the load's included)
  std::vector<double> count, p50_ms, p99_ms, max_ms;  // per node; max = the highest bucket bound reached
};

LatenessResult lateness_run(Env& env, bool loaded) {
  create_container(env, "late");
  LatenessResult result;
  result.setting = loaded ? "50 in-flight 256 B upserts (1 in 20 expiring)" : "idle: one write every 50 ms";
  const std::string padding(200, 'x');
  auto make = [&](uint64_t index, bool expiring) {
    Request request;
    request.database = kDatabase;
    request.container = "late";
    request.operation = api::UpsertItem{.body = R"({"id":")" + item_id("l", index) + R"(","pk":")" + item_pk(index) +
                                                R"(","ttl":)" + (expiring ? "2" : "86400") + R"(,"v":")" + padding +
                                                "\"}"};
    return request;
  };
  const double seconds = env.settings.lateness_seconds;  // >= 10 (checked in main)
  if (!loaded) {
    // A write every 50 ms, nothing else running: the floor of the path (timer, time entry, commit, apply).
    const auto started = Clock::now();
    for (uint64_t i = 0; i < 1'000'000 && seconds_since(started) < seconds - 3; ++i) {
      const Response response = env.clients.front()->execute(make(i, true));
      ++result.writes;
      if (response.ok()) ++result.expiring;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } else {
    // Expiring writes only in the first seconds − 3 s, so every instant falls while the load still runs.
    const auto started = Clock::now();
    uint64_t next = 0;
    Pump pump(
        env.clients, 50, started + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)),
        env.settings.fg_max_requests,
        [&](size_t) -> std::optional<Request> {
          const uint64_t index = next++;
          return make(index, index % 20 == 0 && seconds_since(started) < seconds - 3);
        },
        [&](size_t, const Request& request, const Response& response, double) {
          ++result.writes;
          if (response.ok() && request.as<api::UpsertItem>()->body.find(R"("ttl":2,)") != std::string::npos) {
            ++result.expiring;
          }
        });
    pump.run();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the last instants pass
  for (size_t node = 1; node <= kNodes; ++node) {
    const Scrape scrape = scrape_node(env, node);
    const std::string name = "mayfly_ttl_expiry_lateness_seconds";
    result.count.push_back(scrape.sum(name + "_count"));
    result.p50_ms.push_back(scrape.histogram_quantile(name, 0.5).value_or(-0.001) * 1000);
    result.p99_ms.push_back(scrape.histogram_quantile(name, 0.99).value_or(-0.001) * 1000);
    result.max_ms.push_back(scrape.histogram_quantile(name, 1.0).value_or(-0.001) * 1000);
  }
  return result;
}

void print_lateness(const std::vector<LatenessResult>& results) {
  std::printf("\n### Expiry lateness per replica (mayfly_ttl_expiry_lateness_seconds; buckets interpolated)\n\n"
              "| load | items expiring (instants) | writes | instants counted per node | p50 ms per node | p99 ms per "
              "node | max ms per node (bucket bound) |\n|---|---|---|---|---|---|---|\n");
  for (const LatenessResult& result : results) {
    std::printf("| %s | %" PRIu64 " | %" PRIu64 " | %s | %s | %s | %s |\n", result.setting.c_str(), result.expiring,
                result.writes, per_node(result.count, "%.0f").c_str(), per_node(result.p50_ms, "%.1f").c_str(),
                per_node(result.p99_ms, "%.1f").c_str(), per_node(result.max_ms, "%.1f").c_str());
  }
  std::printf("\nnotes: an instant is counted once per replica, when its applied time first reaches it; the leader "
              "schedules a time entry for each next instant, so lateness = timer + time entry's commit round trip "
              "(fsync on leader and followers) + apply. The client-observed figure (first 404 − instant) is printed "
              "by tests/integration/expiry_test.cc.\n");
  std::fflush(stdout);
}

// The value of `flag` in a space-separated flag list, if present.
std::optional<uint64_t> flag_value(const std::vector<std::string>& flags, const std::string& flag) {
  for (size_t i = 0; i + 1 < flags.size(); ++i) {
    if (flags[i] == flag) return std::strtoull(flags[i + 1].c_str(), nullptr, 10);
  }
  return std::nullopt;
}

}  // namespace
}  // namespace mayfly::bench

int main(int argc, char** argv) {
  using namespace mayfly::bench;
  set_program_name("mayfly-gc-bench");
  Settings settings;
  std::string phases = "mass,foreground";
  CLI::App app{"mayfly-gc-bench: the garbage collector on a 3-node cluster it starts (mass expiry, foreground load, "
               "expiry lateness)"};
  app.footer(kUsage);
  app.add_flag("--keep-data", settings.keep_data, "keep the cluster's data directories");
  app.add_option("--mayflyd", settings.mayflyd, "the mayflyd to start (default: the build's)");
  app.add_option("--base-port", settings.base_port, "the cluster's first port")->check(CLI::Range(0, 65530));
  app.add_option("--mass-items", settings.mass_items, "items expiring at once (>= 200)")
      ->check(CLI::Range(uint64_t{200}, uint64_t{100000000}));
  app.add_option("--backlog-items", settings.backlog_items, "expired items left as a backlog")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}));
  app.add_option("--fg-seconds", settings.fg_seconds, "the foreground phase's length")->check(CLI::PositiveNumber);
  app.add_option("--lateness-seconds", settings.lateness_seconds, "the lateness phase's length (10..3600)")
      ->check(CLI::Range(10.0, 3600.0));
  app.add_option("--fg-max-requests", settings.fg_max_requests, "at most this many foreground requests")
      ->check(CLI::PositiveNumber);
  app.add_option("--runs", settings.runs, "runs per figure (the median is printed)")->check(CLI::PositiveNumber);
  app.add_option("--gc-flags", settings.gc_flags, "extra mayflyd flags for the collector");
  app.add_option("--phases", phases, "mass,foreground,lateness");
  app.add_option("--load-in-flight", settings.load_in_flight, "requests in flight during the lateness phase")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const std::string command = command_line(argc, argv);
  settings.mass = settings.foreground = settings.lateness = false;
  for (const std::string& phase : split(phases)) {
    if (phase == "mass") settings.mass = true;
    else if (phase == "foreground") settings.foreground = true;
    else if (phase == "lateness") settings.lateness = true;
    else {
      std::fprintf(stderr, "mayfly-gc-bench: unknown phase %s\n%s", phase.c_str(), kUsage);
      return 2;
    }
  }
  if (settings.mass_items < 200 || settings.backlog_items < 1 || settings.fg_seconds <= 0 ||
      settings.lateness_seconds < 10 || settings.lateness_seconds > 3600 ||
      settings.fg_max_requests < 1 || settings.runs < 1 || settings.load_in_flight < 1 ||
      settings.base_port < 0 || settings.base_port > 65530 ||
      (!settings.mass && !settings.foreground && !settings.lateness) ||
      settings.mass_items > 100000000 || settings.backlog_items > 100000000) {
    std::fprintf(stderr, "mayfly-gc-bench: --mass-items ≥ 200, other numbers positive, a phase to run\n%s", kUsage);
    return 2;
  }
  const std::vector<std::string> gc_flags = split(settings.gc_flags, ' ');
  settings.gc_batch_items_max = flag_value(gc_flags, "--gc-batch-items-max").value_or(1000);
  settings.gc_interval_ms = std::max<uint64_t>(1, flag_value(gc_flags, "--gc-interval-ms").value_or(200));

  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("command: %s\n", command.c_str());
  std::printf("date: %s; machine: %u cores; each phase on a fresh cluster of 3 mayflyd started by this benchmark on "
              "127.0.0.1 (fsync on); node flags: %s\n",
              date, std::thread::hardware_concurrency(),
              settings.gc_flags.empty() ? "(defaults: --gc-interval-ms 200 --gc-batch-items-max 1000)"
                                        : settings.gc_flags.c_str());
  std::fflush(stdout);

  // One fresh cluster per phase, so that neither phase measures the other's leftovers (LevelDB compacting away a
  // drained backlog, for one).
  auto with_cluster = [&](const std::function<void(Env&)>& phase) {
    LocalClusterOptions cluster_options;
    cluster_options.mayflyd = settings.mayflyd.empty() ? default_mayflyd_path() : settings.mayflyd;
    if (settings.base_port == 0) {
      const std::vector<int> ports = free_ports(2 * kNodes);
      cluster_options.ports.assign(ports.begin(), ports.begin() + kNodes);
      cluster_options.metrics_ports.assign(ports.begin() + kNodes, ports.end());
    } else {
      for (size_t i = 0; i < 2 * kNodes; ++i) {
        const int port = settings.base_port + static_cast<int>(i);
        for (int attempt = 0; attempt < 100 && !port_is_free(port); ++attempt) {  // the previous phase's, closing
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (!port_is_free(port)) die("port " + std::to_string(port) + " is in use; pick another --base-port");
        (i < kNodes ? cluster_options.ports : cluster_options.metrics_ports).push_back(port);
      }
    }
    cluster_options.extra_flags = gc_flags;
    cluster_options.keep_data = settings.keep_data;
    cluster_options.temp_prefix = "mayfly-gc-bench";
    LocalCluster cluster(std::move(cluster_options));
    set_current_cluster(&cluster);
    const uint64_t leader = wait_for_leader(cluster.endpoints(), 30, &cluster);
    std::fprintf(stderr, "mayfly-gc-bench: cluster on ports %s (metrics %s), leader node %" PRIu64 "\n",
                 split(cluster.endpoints().front(), ':').back().c_str(),
                 split(cluster.metrics_endpoints().front(), ':').back().c_str(), leader);
    Env env;
    env.settings = settings;
    env.cluster = &cluster;
    ClientOptions options;
    options.endpoints = cluster.endpoints();
    for (size_t i = 0; i < 4; ++i) {
      options.jitter_seed = 0x6763 + i;
      env.clients.push_back(std::make_unique<Client>(options));
    }
    options.request_timeout_ms = 3000;
    env.probe = std::make_unique<Client>(options);
    Request request;
    request.operation = mayfly::api::CreateDatabase{};
    request.database = kDatabase;
    const Response response = env.clients.front()->execute(request);
    if (!response.ok()) die("createDatabase: " + std::to_string(response.status) + " " + response.message);
    phase(env);
    env.probe.reset();
    env.clients.clear();
    cluster.stop();
    set_current_cluster(nullptr);
  };

  if (settings.mass) {
    with_cluster([&](Env& env) {
      std::vector<MassRun> runs;
      for (int run = 1; run <= settings.runs; ++run) {
        runs.push_back(mass_expiry_run(env, run));
        std::fprintf(stderr, "mayfly-gc-bench: %s\n", describe_run(runs.back(), runs.size()).c_str());
      }
      print_mass_expiry(settings, runs);
    });
  }
  if (settings.foreground) with_cluster([](Env& env) { foreground_phase(env); });
  if (settings.lateness) {
    std::vector<LatenessResult> results;
    for (const bool loaded : {false, true}) {
      std::fprintf(stderr, "mayfly-gc-bench: expiry lateness, %s\n", loaded ? "under load" : "idle");
      with_cluster([&](Env& env) { results.push_back(lateness_run(env, loaded)); });
    }
    print_lateness(results);
  }
  return 0;
}
