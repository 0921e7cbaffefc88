// ReadService (node/read_service.h): reads of the applied state, and the read threads that run the long ones.
#include "node/read_service.h"

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "node/rpc_common.h"
#include "node/ttl_guard.h"
#include "ttl/request_units.h"

namespace mayfly::node {

ReadService::ReadService(const NodeConfig& config, const storage::StoreReader& state,
                         const storage::ChangeFeedReader& feed, const ReclaimRate& reclaim_rate,
                         metrics::Metrics& metrics, metrics::SecurityMetrics& security_metrics,
                         RequestUnitAccount& request_units, Mailbox& answers)
    : config_(config),
      state_(state),
      feed_(feed),
      reclaim_rate_(reclaim_rate),
      metrics_(metrics),
      security_metrics_(security_metrics),
      request_units_(request_units),
      answers_(answers),
      pool_(static_cast<size_t>(config.read_threads)) {}

ReadService::~ReadService() { stop(); }

Reply serve_read(const storage::StoreReader& state, const storage::ChangeFeedReader& feed,
                 RequestUnitAccount& request_units, NodeId self, const api::Request& operation, NodeId leader_hint) {
  const std::string container = operation.database + "/" + operation.container;
  // Meters and metric series exist only for containers that exist: reads of made-up names create neither.
  bool container_exists = false;
  if (!operation.container.empty()) {
    if (std::optional<storage::ContainerRecord> record =
            state.container_record(operation.database, operation.container)) {
      container_exists = true;
      const int64_t wait_ms = request_units.throttle_ms(container, record->throughput, ttl::read_charge(0, false));
      if (wait_ms > 0) {
        Reply throttled = throttled_reply(wait_ms);
        throttled.served_by = self;
        throttled.leader_hint = leader_hint;
        return throttled;
      }
    }
  }
  const storage::AppliedState applied = state.applied();
  Reply reply;
  if (operation.kind() == api::Kind::kReadChangeFeed) {
    // The page is read on its own snapshot, at or after `applied`: the session token below never claims more.
    reply.result = execute_change_feed(feed, change_feed_request(operation), &reply.feed_idle, &reply.feed_warnings);
  } else {
    reply.result = execute_read(state, operation, applied.ts_micros);
  }
  reply.session_token = std::max(applied.index.value(), session_token_of(operation));
  reply.served_by = self;
  reply.leader_hint = leader_hint;
  reply.request_charge = ttl::read_request_charge(reply.result.ok(), reply.result.work_charge, reply.result.body.size(),
                                                 consistency_of(operation) == Consistency::kStrong);
  if (container_exists) request_units.charge(container, op_name(operation), reply.request_charge);
  return reply;
}

Reply ReadService::serve(const api::Request& operation, NodeId leader_hint) const {
  Reply reply = serve_read(state_, feed_, request_units_, config_.id, operation, leader_hint);
  if (reply.feed_warnings > 0) {
    metrics_.add_changefeed_warnings(operation.database + "/" + operation.container, reply.feed_warnings);
  }
  return reply;
}

Reply ReadService::ttl_verdict(const api::Request& operation) const { return ttl_change_verdict(state_, operation); }

Reply ReadService::forecast(const api::Request& operation, NodeId leader_hint, const std::string& container,
                            bool exists) const {
  Reply reply = forecast_reply(state_, reclaim_rate_, operation,
                               static_cast<size_t>(config_.forecast_max_entries), config_.id);
  reply.served_by = config_.id;
  reply.leader_hint = leader_hint;
  if (exists && reply.result.ok()) request_units_.charge(container, op_name(operation), reply.request_charge);
  return reply;
}

void ReadService::run(uint64_t id, std::shared_ptr<std::atomic<bool>> cancel, WorkBudget::Clock::time_point deadline,
                      std::function<Reply()> work) {
  ++queued_;
  boost::asio::post(pool_, [this, id, cancel = std::move(cancel), deadline, work = std::move(work)] {
    WorkBudget budget(config_.max_read_work, deadline, cancel.get(), &stop_);
    DriverBatch answer;
    if (budget.check()) {
      ScopedWorkBudget scoped(budget);
      answer.replies.emplace_back(id, work());
    } else {
      answer.replies.emplace_back(id, Reply::error(budget.status().code(), budget.status().message()));
    }
    if (*budget.refusal() != '\0') security_metrics_.add_read_stopped(budget.refusal());
    if (budget.stopped()) {
      security_metrics_.add_read_stopped(budget.reason_name());
      static std::atomic<int64_t> last_log_ms{0};
      int64_t last = last_log_ms.load();
      const int64_t now = rpc_detail::steady_ms();
      if (now - last >= 1000 && last_log_ms.compare_exchange_strong(last, now)) {
        spdlog::warn("a read was stopped ({}) after {} steps of work: {}", budget.reason_name(), budget.steps(),
                     budget.status().message());
      }
    }
    --queued_;
    answers_.post(std::move(answer));
  });
}

void ReadService::refresh_forecasts() {
  if (stop_ || forecast_running_.exchange(true)) return;
  boost::asio::post(pool_, [this] {
    // No deadline (it is nobody's request), but it stops at shutdown, in the middle of a container too.
    WorkBudget budget(std::numeric_limits<int64_t>::max(), WorkBudget::Clock::time_point::max(), nullptr, &stop_);
    ScopedWorkBudget scoped(budget);
    metrics_.set_forecast_figures(forecast_figures(state_, reclaim_rate_,
                                                   static_cast<size_t>(config_.forecast_max_entries),
                                                   &forecast_cancel_));
    metrics_.set_changefeed_figures(changefeed_figures(state_, feed_));
    forecast_running_ = false;
  });
}

void ReadService::interrupt() {
  stop_ = true;  // a read running on a read thread stops within a millisecond (common/work_budget.h)
  forecast_cancel_ = true;
}

void ReadService::stop() {
  if (stopped_) return;
  stopped_ = true;
  interrupt();
  pool_.stop();  // reads not started are dropped (their callers were answered 503 by the RPC thread)
  pool_.join();
}

}  // namespace mayfly::node
