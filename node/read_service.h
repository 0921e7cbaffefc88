// ReadService: the node's read threads (--read-threads, a Boost.Asio pool) and everything that runs on them — item
// lists, queries, change feed pages, forecasts, the defaultTtl dry run, the forecast metrics' refresh — plus the point
// reads the RPC thread serves itself through the same serve(). It holds only what any thread may use: the state
// machine's readers (const, thread-safe; never the LevelDB handle nor the driver), the RU account and the reclaim rate
// (their own locks and atomics), the metrics (prometheus-cpp's locks), its own atomics, and the Mailbox
// (node/mailbox.h) its answers go back through. A read thread never reaches the RPC host's state: the RPC host hands
// it a job that captures this service, never itself.
//
// Every job runs under a WorkBudget (common/work_budget.h): --max-read-work steps, the request's deadline, a cancel
// flag the RPC thread sets when nobody waits any more, and the stop flag stop() sets.
//
// Thread-safety: serve(), ttl_verdict(), forecast(), queued() and interrupt() on any thread; run() and
// refresh_forecasts() on the RPC thread; stop() on the main thread, once the RPC thread has stopped.
#pragma once

#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/work_budget.h"
#include "metrics/metrics.h"
#include "metrics/security.h"
#include "node/config.h"
#include "node/forecast.h"
#include "node/mailbox.h"
#include "node/request.h"
#include "node/ru_account.h"
#include "storage/changefeed.h"
#include "storage/store_reader.h"

namespace mayfly::node {

// The read at `state`'s applied state: a point read, a list page, a query page or a change feed page, throttled and
// charged in request units like any read, answered as node `self`. Any thread (what it reads is thread-safe).
Reply serve_read(const storage::StoreReader& state, const storage::ChangeFeedReader& feed,
                 RequestUnitAccount& request_units, NodeId self, const api::Request& operation, NodeId leader_hint);

class ReadService {
 public:
  // `state`, `feed`: the state machine's readers; `reclaim_rate`: the collector's capacity (all any-thread);
  // `answers`: where a job's Reply goes, as request id -> Reply.
  ReadService(const NodeConfig& config, const storage::StoreReader& state, const storage::ChangeFeedReader& feed,
              const ReclaimRate& reclaim_rate, metrics::Metrics& metrics, metrics::SecurityMetrics& security_metrics,
              RequestUnitAccount& request_units, Mailbox& answers);
  ~ReadService();

  // serve_read at this node's applied state.
  Reply serve(const api::Request& operation, NodeId leader_hint) const;
  // A defaultTtl change's dry run or guard (node/ttl_guard.h).
  Reply ttl_verdict(const api::Request& operation) const;
  // containerForecast (node/forecast.h) from this node's applied state; charged to `container` when it exists.
  Reply forecast(const api::Request& operation, NodeId leader_hint, const std::string& container, bool exists) const;

  // Runs `work` on a read thread under its budget (deadline, `cancel`, stop) and posts its Reply as request `id`.
  void run(uint64_t id, std::shared_ptr<std::atomic<bool>> cancel, WorkBudget::Clock::time_point deadline,
           std::function<Reply()> work);
  // Jobs handed to run() and not finished (timed-out ones included).
  int64_t queued() const { return queued_.load(); }
  // The forecast and change feed metrics of every container, recomputed on a read thread (skipped while a refresh
  // runs: a slow one is not stacked up behind).
  void refresh_forecasts();
  // Any thread: running jobs stop within a millisecond, and none starts from now on (the node is stopping).
  void interrupt();
  // interrupt(), then the threads are joined (queued jobs are dropped). Idempotent.
  void stop();

  const storage::StoreReader& state() const { return state_; }

 private:
  const NodeConfig& config_;
  const storage::StoreReader& state_;
  const storage::ChangeFeedReader& feed_;
  const ReclaimRate& reclaim_rate_;
  metrics::Metrics& metrics_;
  metrics::SecurityMetrics& security_metrics_;
  RequestUnitAccount& request_units_;
  Mailbox& answers_;
  std::atomic<int64_t> queued_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> forecast_running_{false};
  std::atomic<bool> forecast_cancel_{false};
  bool stopped_ = false;
  boost::asio::thread_pool pool_;  // last: joined first
};

}  // namespace mayfly::node
