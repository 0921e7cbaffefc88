// The fault campaign's workload: N threads, each with its own client::Client (a Client is single-threaded) and its
// own seeded random choices, doing reads at every consistency level (some pinned to one node), creates, upserts,
// If-Match replaces, deletes and `incr` patches over a few item keys, increments of counter keys, and (thread 0)
// defaultTtl changes; every operation is recorded in the History with its invocation and completion times.
// With exactly_once off the threads behave like an application without exactly-once writes that must get its writes
// done: a write whose outcome is unknown is sent again (at most 5 times, backing off) and recorded as one operation.
//
// Thread-safety: start() and stop() from one thread; the workload threads only share the History and an atomic flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "tests/chaos/history.h"

namespace mayfly::chaos {

struct WorkloadOptions {
  uint64_t seed = 1;
  size_t threads = 4;
  std::string database, container;
  std::vector<std::string> keys;          // ordinary items (pk == id)
  std::vector<std::string> counter_keys;  // items only ever incremented (made before the workload starts)
  std::vector<int64_t> policies;          // defaultTtl values thread 0 switches between
  std::vector<int64_t> item_ttls;         // own ttls items get (kTtlAbsent: inherit)
  client::ClientOptions client;           // endpoints, key; client_id and exactly_once are set per thread
  bool exactly_once = true;
  size_t nodes = 3;
  int64_t max_ops_per_thread = 1'000'000;
};

// The history's clock: steady microseconds since `origin`.
int64_t micros_since(std::chrono::steady_clock::time_point origin);

// Records one finished request: fills outcome, status, served_by, and for reads what was found.
void classify(Op& op, const client::Response& response);

// The id a workload thread's client gets (seed-derived, so a history names its clients).
uint64_t client_id_for(uint64_t seed, size_t thread);

class Workload {
 public:
  Workload(WorkloadOptions options, History& history, std::chrono::steady_clock::time_point origin)
      : options_(std::move(options)), history_(history), origin_(origin) {}
  ~Workload() { stop(); }
  void start();
  void stop();  // joins the threads

 private:
  void run(size_t thread);

  WorkloadOptions options_;
  History& history_;
  std::chrono::steady_clock::time_point origin_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
};

}  // namespace mayfly::chaos
