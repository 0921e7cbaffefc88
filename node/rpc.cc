// RpcHost (node/rpc.h), its requests: the Router's decisions (node/router.h) carried out — reads served here or on a
// read thread, session and bounded reads parked for the applied index, strong reads, writes and admin changes to the
// driver or forwarded to the leader — load shedding, and the cluster status. The connections are in
// rpc_connections.cc, the interfaces they serve in rpc_services.cc, peer links and deliveries in rpc_peers.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "common/work_budget.h"
#include "node/rpc_internal.h"
#include "node/forecast.h"
#include "node/ttl_guard.h"
#include "storage/json.h"
#include "ttl/request_units.h"

namespace mayfly::node {

using namespace rpc_detail;

namespace {

// The read-thread lane of defaultTtl guards (node/read_queue.h): a name no key id has (they are hex digests).
const std::string kGuardLane = "\x01guard";

std::string role_text(replication::Role role) { return std::string(replication::role_name(role)); }

}  // namespace

std::optional<Reply> RpcHost::shed_if_full(const char* kind, bool write) {
  // Writes forwarded to the leader count too: a leader that is paused or slow must not let them pile up unbounded.
  // Parked reads do not (they hold no thread; --max-parked-reads bounds them).
  const size_t waiting = pending_.size() + forwards_in_flight_;
  if (!router_.over_request_limit(waiting, static_cast<size_t>(reads_.queued()), write)) return std::nullopt;
  static int64_t last_log_ms = 0;
  security_metrics_.add_shed(kind);
  if (log_now(last_log_ms)) {
    spdlog::warn("shedding load: {} requests are waiting on this node (--max-pending-requests {})", waiting,
                 config_.max_pending_requests);
  }
  return router_.overloaded("node " + std::to_string(config_.id.value()) +
                            " is overloaded (too many requests waiting); nothing was done: retry shortly or on "
                            "another node");
}

std::optional<Reply> RpcHost::shed_if_parked_full(const std::string& key) {
  std::optional<Reply> full = router_.parked_full(key);
  if (!full) return std::nullopt;
  static int64_t last_log_ms = 0;
  security_metrics_.add_shed("parked");
  if (log_now(last_log_ms)) {
    spdlog::warn("refusing reads that would wait for this replica: {} are waiting ({} of one key; --max-parked-reads "
                 "{}, a key half of it)",
                 router_.parked(), router_.parked_of(key), config_.max_parked_reads);
  }
  return full;
}

uint64_t RpcHost::park(uint64_t required, const std::string& key, kj::Own<kj::PromiseFulfiller<bool>> ready) {
  const uint64_t id = router_.park(required, key);
  parked_.emplace(id, kj::mv(ready));
  return id;
}

void RpcHost::unpark(uint64_t id) {
  router_.unpark(id);
  parked_.erase(id);
}

void RpcHost::forget_key_if_unused(std::map<std::string, KeyUse>::iterator it) {
  if (it->second.sessions <= 0 && it->second.calls <= 0) key_use_.erase(it);
}

kj::Promise<Reply> RpcHost::to_driver(api::Request operation) {
  if (stopping_) return router_.shutting_down();  // the driver has stopped: nothing would answer
  if (std::optional<Reply> shed = shed_if_full("driver", !is_read(operation))) {
    return kj::mv(*shed);
  }
  const uint64_t id = next_request_id_++;
  auto reply = kj::newPromiseAndFulfiller<Reply>();
  pending_.emplace(id, kj::mv(reply.fulfiller));
  if (!is_read(operation)) pending_writes_.insert(id);
  to_post_.emplace_back(id, std::move(operation));
  if (to_post_.size() == 1 && tasks_.get() != nullptr) tasks_->add(kj::evalLast([this] { post_to_driver(); }));
  return await_reply(id, kj::mv(reply.promise));
}

void RpcHost::post_to_driver() {
  owner_.check();
  if (to_post_.empty() || stopping_) return;  // stopping: stop() answered everything in pending_
  auto requests = std::make_shared<std::vector<std::pair<uint64_t, api::Request>>>(std::move(to_post_));
  to_post_.clear();
  driver_.post([this, requests] {
    for (auto& [id, operation] : *requests) driver_.on_request(id, std::move(operation));
  });
}

kj::Promise<Reply> RpcHost::on_read_thread(std::function<Reply()> work, const std::string& lane, bool write) {
  owner_.check();
  if (stopping_) return router_.shutting_down();
  if (std::optional<Reply> shed = shed_if_full("read", write)) return kj::mv(*shed);
  const uint64_t id = next_request_id_++;
  auto reply = kj::newPromiseAndFulfiller<Reply>();
  pending_.emplace(id, kj::mv(reply.fulfiller));
  // The work stops (common/work_budget.h) at the request's deadline, once nobody waits for it (it timed out, or the
  // call was cancelled because its connection closed: the promise below is dropped either way), or at shutdown. The
  // deadline runs from now: a job that waited in its lane past it is not started.
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  const auto deadline = WorkBudget::Clock::now() + std::chrono::milliseconds(config_.request_timeout_ms);
  read_jobs_.insert(id);
  read_queue_.submit(lane, [this, id, cancel, deadline, work = std::move(work)]() mutable {
    reads_.run(id, std::move(cancel), deadline, std::move(work));
  });
  return await_reply(id, kj::mv(reply.promise)).attach(kj::defer([cancel] { cancel->store(true); }));
}

kj::Promise<Reply> RpcHost::read_async(api::Request operation, const std::string& key) {
  return on_read_thread(
      [service = &reads_, leader = router_.view().leader, operation = std::move(operation)] {
        return service->serve(operation, leader);
      },
      key);
}

kj::Promise<Reply> RpcHost::guard_ttl_change(api::Request operation) {
  return on_read_thread([service = &reads_, operation] { return service->ttl_verdict(operation); }, kGuardLane, true)
      .then([this, operation = std::move(operation)](Reply reply) mutable -> kj::Promise<Reply> {
        if (!reply.serve_here) {
          reply.served_by = config_.id;
          reply.leader_hint = router_.view().leader;
          return kj::mv(reply);
        }
        operation.as<api::UpdateContainer>()->settings.force = true;  // checked: the driver proposes it as it is
        return to_driver(std::move(operation));
      });
}

kj::Promise<Reply> RpcHost::container_forecast(api::Request operation, const std::string& key) {
  const std::string container = operation.database + "/" + operation.container;
  std::optional<storage::ContainerRecord> record = state_.container_record(operation.database, operation.container);
  if (record) {
    // Priced like a scan of the entries it may read, checked against what is left of this second's RU/s.
    const int64_t wait_ms = request_units_.throttle_ms(container, record->throughput, 1.0);
    if (wait_ms > 0) {
      Reply throttled = throttled_reply(wait_ms);
      throttled.served_by = config_.id;
      throttled.leader_hint = router_.view().leader;
      return throttled;
    }
  }
  return on_read_thread(
      [service = &reads_, leader = router_.view().leader, operation = std::move(operation), container,
       exists = record.has_value()] { return service->forecast(operation, leader, container, exists); },
      key);
}

kj::Promise<void> RpcHost::forecast_loop(int64_t delay_ms) {
  return timer_->afterDelay(delay_ms * kj::MILLISECONDS).then([this] {
    if (!stopping_) reads_.refresh_forecasts();
    return forecast_loop(config_.forecast_interval_ms);
  });
}

kj::Promise<Reply> RpcHost::serve_read_here_or_async(api::Request operation, const std::string& key) {
  // A point read, one database or container record, or the lists of databases and containers is small, bounded work
  // (one LevelDB lookup, an item of at most 2 MB): here, without two thread hops. Lists of items and queries may read
  // thousands of records: on a read thread.
  const api::Kind kind = operation.kind();
  if (kind == api::Kind::kReadChangeFeed) {
    const kj::TimePoint deadline = timer_->now() + change_feed_wait_ms(operation) * kj::MILLISECONDS;
    return read_change_feed(std::move(operation), deadline, key);
  }
  if (kind == api::Kind::kListItems || kind == api::Kind::kQuery) return read_async(std::move(operation), key);
  return reads_.serve(operation, router_.view().leader);
}

kj::Promise<Reply> RpcHost::read_change_feed(api::Request operation, kj::TimePoint deadline, std::string key) {
  // Like a list of items: pages may read many records, so on a read thread.
  return read_async(operation, key).then([this, operation, deadline, key = kj::mv(key)](Reply reply) mutable
                                    -> kj::Promise<Reply> {
    const kj::TimePoint now = timer_->now();
    if (!reply.feed_idle || stopping_ || now >= deadline) return kj::mv(reply);
    // Nothing new up to the applied index served (the reply's session token): wait, without a read thread, until a
    // later position is applied, then read again from where this page ended. Time entries advance the index too, and
    // may expire items; an advance that brings no change just waits again, until the deadline.
    api::ReadChangeFeed& feed = *operation.as<api::ReadChangeFeed>();
    feed.from = api::ReadChangeFeed::From::kContinuation;
    feed.continuation = reply.result.continuation;
    operation.options.session_token = std::to_string(reply.session_token);
    return applied_reaches(reply.session_token + 1, deadline - now, key)
        .then([this, operation = kj::mv(operation), deadline, reply = kj::mv(reply), key = kj::mv(key)](bool go) mutable
              -> kj::Promise<Reply> {
          if (!go) return kj::mv(reply);
          return read_change_feed(kj::mv(operation), deadline, kj::mv(key));
        });
  });
}

kj::Promise<bool> RpcHost::applied_reaches(uint64_t required, kj::Duration timeout, const std::string& key) {
  if (stopping_) return false;
  if (router_.view().applied >= required) return true;
  // A long-poll beyond --max-parked-reads (or its key's half) answers its empty page at once.
  if (shed_if_parked_full(key)) return false;
  auto ready = kj::newPromiseAndFulfiller<bool>();
  const uint64_t id = park(required, key, kj::mv(ready.fulfiller));
  return ready.promise.exclusiveJoin(timer_->afterDelay(timeout).then([this, id] {
    unpark(id);
    return false;
  }));
}

kj::Promise<Reply> RpcHost::await_reply(uint64_t id, kj::Promise<Reply> reply) {
  const int64_t timeout_ms = config_.request_timeout_ms;
  return reply.exclusiveJoin(timer_->afterDelay(timeout_ms * kj::MILLISECONDS).then([this, id] {
    pending_.erase(id);
    pending_writes_.erase(id);
    return router_.timed_out();
  }));
}

kj::Promise<Reply> RpcHost::wait_for_applied(api::Request operation, uint64_t required, int64_t wait_ms,
                                             const std::string& key) {
  if (stopping_) return router_.shutting_down();
  if (std::optional<Reply> shed = shed_if_parked_full(key)) return kj::mv(*shed);
  auto ready = kj::newPromiseAndFulfiller<bool>();
  const uint64_t id = park(required, key, kj::mv(ready.fulfiller));
  auto served = ready.promise.then([this, operation = kj::mv(operation), key](bool go) mutable -> kj::Promise<Reply> {
    if (!go) return router_.shutting_down();
    return serve_read_here_or_async(kj::mv(operation), key);
  });
  auto behind = timer_->afterDelay(wait_ms * kj::MILLISECONDS).then([this, required, id] {
    unpark(id);
    return router_.behind(required);
  });
  return served.exclusiveJoin(kj::mv(behind));
}

kj::Promise<Reply> RpcHost::handle(api::Request operation, bool forwarded, const std::string& key) {
  owner_.check();
  const auto started = std::chrono::steady_clock::now();
  std::string op = op_name(operation);
  if (is_read(operation) || is_write(operation)) {
    driver_.foreground().add(1);
  }
  return route(std::move(operation), forwarded, key).then([this, started, op = std::move(op)](Reply reply) {
    metrics_.observe_request(op, reply.result.http_status(),
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    metrics_.add_expired_skipped(reply.result.expired_skipped);
    return reply;
  });
}

kj::Promise<Reply> RpcHost::route(api::Request operation, bool forwarded, const std::string& key) {
  const Route route = router_.route(operation, forwarded, state_.applied(), steady_ms());
  switch (route.kind) {
    case Route::Kind::kServe:
      return serve_read_here_or_async(std::move(operation), key);
    case Route::Kind::kWait:
      return wait_for_applied(std::move(operation), route.required, route.wait_ms, key);
    case Route::Kind::kRefuse:
      return route.refusal;
    case Route::Kind::kStrongRead: {
      // The driver confirms leadership (ReadIndex) and says when this node has applied that far.
      api::Request read = operation;
      return to_driver(std::move(operation)).then([this, read = std::move(read), key](Reply reply) mutable {
        return reply.serve_here ? serve_read_here_or_async(std::move(read), key) : kj::Promise<Reply>(kj::mv(reply));
      });
    }
    case Route::Kind::kLocal:
      switch (operation.kind()) {
        case api::Kind::kClusterStatus: return cluster_status();
        case api::Kind::kBackupOpen: return backups_->open();
        case api::Kind::kBackupRead: {
          const api::BackupRead& read = *operation.as<api::BackupRead>();
          return backups_->read(read.backup, read.offset, read.max_bytes);
        }
        default: return container_forecast(std::move(operation), key);
      }
    case Route::Kind::kGuardTtl:
      return guard_ttl_change(std::move(operation));
    case Route::Kind::kForward:
      if (stopping_) return router_.shutting_down();
      // No address for the leader (not in --peers nor in the replicated membership yet): the driver answers with
      // the leader's hint.
      if (PeerLink* leader_link = link(route.leader)) return forward(route.leader, *leader_link, operation);
      return to_driver(std::move(operation));
    case Route::Kind::kDriver:
      return to_driver(std::move(operation));
  }
  return to_driver(std::move(operation));
}

kj::Promise<Reply> RpcHost::forward(NodeId leader, PeerLink& leader_link, const api::Request& operation) {
  if (std::optional<Reply> shed = shed_if_full("forward", true)) return kj::mv(*shed);
  ++forwards_in_flight_;
  auto answered = leader_link.forward(operation).attach(kj::defer([this] { --forwards_in_flight_; }));
  auto reached = answered.catch_([this, leader](kj::Exception&& exception) {
    return router_.leader_unreachable(leader, exception.getDescription().cStr());
  });
  // A leader that is stopped or cut off answers nothing and may keep the connection: bound the wait like a request
  // of our own (the forwarded call is cancelled with it).
  return reached.exclusiveJoin(timer_->afterDelay(config_.request_timeout_ms * kj::MILLISECONDS).then([this, leader] {
    return router_.leader_unreachable(leader, "");
  }));
}

std::string RpcHost::own_status_json() const {
  std::string out = "{\"id\":" + std::to_string(config_.id.value()) + ",\"address\":";
  json::write_json_string(advertised_address(config_), out);
  out += ",\"role\":";
  json::write_json_string(role_text(router_.view().role), out);
  out += ",\"term\":" + std::to_string(router_.view().term) + ",\"commit\":" + std::to_string(router_.view().commit) +
         ",\"applied\":" + std::to_string(router_.view().applied) +
         ",\"appliedTime\":" + std::to_string(router_.view().applied_ts_micros) +
         ",\"leader\":" + std::to_string(router_.view().leader.value()) + "}";
  return out;
}

kj::Promise<Reply> RpcHost::cluster_status() {
  std::set<NodeId> members(router_.view().voters.begin(), router_.view().voters.end());
  members.insert(router_.view().learners.begin(), router_.view().learners.end());
  for (const auto& [id, address] : config_.peers) members.insert(id);
  members.insert(config_.id);
  kj::Vector<kj::Promise<std::string>> statuses;
  for (NodeId member : members) {
    if (member == config_.id) {
      const std::string own = own_status_json();
      statuses.add(own.substr(0, own.size() - 1) + ",\"reachable\":true}");
      continue;
    }
    PeerLink* peer_link = link(member);
    const std::string address = peer_link != nullptr ? peer_link->address() : std::string();
    auto unreachable = [member, address]() {
      std::string out = "{\"id\":" + std::to_string(member.value()) + ",\"address\":";
      json::write_json_string(address, out);
      return out + ",\"reachable\":false}";
    };
    if (peer_link == nullptr) {
      statuses.add(unreachable());
      continue;
    }
    statuses.add(peer_link->node_status()
                     .then([](std::string status) { return status.substr(0, status.size() - 1) + ",\"reachable\":true}"; })
                     .catch_([unreachable](kj::Exception&&) { return unreachable(); })
                     // A copy: kj's then() keeps an lvalue callback by reference, and `unreachable` dies with
                     // this iteration (before the timer fires).
                     .exclusiveJoin(timer_->afterDelay(1 * kj::SECONDS).then(kj::cp(unreachable))));
  }
  return kj::joinPromises(statuses.releaseAsArray()).then([this](kj::Array<std::string> nodes) {
    Reply reply;
    std::string body = "{\"leader\":" + std::to_string(router_.view().leader.value()) + ",\"nodes\":[";
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i > 0) body += ",";
      body += nodes[i];
    }
    body += "]}";
    reply.result.body = std::move(body);
    reply.served_by = config_.id;
    reply.leader_hint = router_.view().leader;
    return reply;
  });
}

}  // namespace mayfly::node
