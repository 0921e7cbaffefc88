#include "node/router.h"

#include <algorithm>

#include "node/peer_admission.h"
#include "node/ttl_guard.h"

namespace mayfly::node {

namespace {

// On a follower, a session read whose token is beyond the commit index this node last heard from its leader waits at
// most this many heartbeat intervals (at least kBeyondCommitWaitMinMs) for the commit index to cover it, not the
// whole --session-wait-ms: an honest token is committed within a heartbeat or two.
constexpr int64_t kBeyondCommitWaitHeartbeats = 10;
constexpr int64_t kBeyondCommitWaitMinMs = 200;

}  // namespace

Router::Router(const NodeConfig& config) : config_(config) { view_.self = config.id; }

std::vector<uint64_t> Router::set_view(const NodeView& view) {
  view_ = view;
  std::vector<uint64_t> released;
  while (!waits_.empty() && waits_.begin()->first <= view_.applied) {
    const uint64_t id = waits_.begin()->second.id;
    unpark(id);
    released.push_back(id);
  }
  return released;
}

bool Router::leader_heard_within(int64_t steady_ms, int64_t ms) const {
  return view_.leader_contact_steady_ms && steady_ms - *view_.leader_contact_steady_ms <= ms;
}

bool Router::fresh_enough(const api::Request& operation, storage::AppliedState applied, int64_t steady_ms) const {
  switch (consistency_of(operation)) {
    case Consistency::kEventual: return true;
    case Consistency::kSession: return applied.index.value() >= session_token_of(operation);
    case Consistency::kBounded:
      return view_.leader != NodeId(0) && leader_heard_within(steady_ms, config_.bounded_staleness_ms) &&
             view_.commit <= applied.index.value() + static_cast<uint64_t>(config_.bounded_staleness_entries) &&
             view_.last_ts_micros - applied.ts_micros <= config_.bounded_staleness_ms * 1000;
    case Consistency::kStrong: return false;
  }
  return false;
}

Route Router::route(const api::Request& operation, bool forwarded, storage::AppliedState applied,
                    int64_t steady_ms) const {
  Route route;
  const Consistency consistency = consistency_of(operation);
  if (api::is_read(operation.kind())) {
    if (fresh_enough(operation, applied, steady_ms)) {
      route.kind = Route::Kind::kServe;
      return route;
    }
    if (consistency == Consistency::kSession) {
      const uint64_t required = session_token_of(operation);
      // The leader's log holds every entry ever committed (Raft's leader completeness), and a session token is an
      // index some replica had applied: one past the end of the leader's log never came from this cluster — unless
      // this node was deposed and does not know it yet (a partition). So it is answered at once, without parking,
      // but as retriable (503 substatus 3: the client library tries another node), never as a 400 that would be
      // wrong in that case.
      if (view_.role == replication::Role::kLeader && required > view_.last_index) {
        route.kind = Route::Kind::kRefuse;
        route.refusal = unavailable(
            kSubstatusReplicaBehind, 50,
            "the session token " + std::to_string(required) + " is past the end of this leader's log (" +
                std::to_string(view_.last_index) + "): it did not come from this cluster, or this node is no "
                "longer the leader and does not know it yet; nothing was done: retry on another node, or drop the "
                "token (a new session)");
        return route;
      }
      route.kind = Route::Kind::kWait;
      route.required = required;
      route.wait_ms = config_.session_wait_ms;
      // A token beyond the commit index this follower last heard from its leader waits a few heartbeats, not the
      // whole --session-wait-ms: an honest one is covered by the next heartbeat or two, a made-up one never is.
      if (required > view_.commit) {
        const int64_t heartbeat_ms = config_.heartbeat_interval_ticks * config_.tick_interval_ms;
        route.wait_ms =
            std::min(route.wait_ms, std::max(kBeyondCommitWaitMinMs, kBeyondCommitWaitHeartbeats * heartbeat_ms));
      }
      return route;
    }
    if (consistency == Consistency::kBounded) {
      // The commit index we know is only a bound on staleness while the leader keeps talking to us: a follower
      // cut off from it would otherwise serve ever older state as "bounded".
      if (!leader_heard_within(steady_ms, config_.bounded_staleness_ms)) {
        route.kind = Route::Kind::kRefuse;
        route.refusal = unavailable(kSubstatusNoLeader, 100,
                                    "no recent contact with the leader, so staleness cannot be bounded here; retry "
                                    "on another node or read at eventual consistency");
        return route;
      }
      const uint64_t slack = static_cast<uint64_t>(config_.bounded_staleness_entries);
      route.kind = Route::Kind::kWait;
      route.required = view_.commit > slack ? view_.commit - slack : 0;
      route.wait_ms = config_.session_wait_ms;
      return route;
    }
    route.kind = Route::Kind::kStrongRead;
    return route;
  }
  // Cluster status, backups (served by the node the client chose, a follower preferably) and the forecast (this
  // node's own figures: its backlog, its collector).
  if (api::is_node_local(operation.kind())) {
    route.kind = Route::Kind::kLocal;
    return route;
  }
  // Writes and admin changes go to the leader. The leader counts what a defaultTtl change would expire (on a read
  // thread, never on the driver thread) before proposing it.
  const NodeId leader = view_.leader;
  if (needs_ttl_guard(operation) && (forwarded || leader == config_.id)) {
    route.kind = Route::Kind::kGuardTtl;
    return route;
  }
  if (!forwarded && leader != NodeId(0) && leader != config_.id) {
    route.kind = Route::Kind::kForward;
    route.leader = leader;
    return route;
  }
  route.kind = Route::Kind::kDriver;
  return route;
}

std::optional<Reply> Router::parked_full(const std::string& key) const {
  const int64_t own = parked_of(key);
  const bool node_full = waits_.size() >= static_cast<size_t>(config_.max_parked_reads);
  const bool key_full = !key.empty() && own >= config_.max_parked_reads / 2;
  if (!node_full && !key_full) return std::nullopt;
  return overloaded("node " + std::to_string(config_.id.value()) + " has too many reads waiting for it to catch up" +
                    (key_full ? " from this key" : "") +
                    "; nothing was done: retry shortly, on another node, or at eventual consistency");
}

int64_t Router::parked_of(const std::string& key) const {
  auto it = parked_by_key_.find(key);
  return it == parked_by_key_.end() ? 0 : it->second;
}

uint64_t Router::park(uint64_t required, const std::string& key) {
  const uint64_t id = next_wait_id_++;
  waits_.emplace(required, Wait{id, key});
  wait_required_.emplace(id, required);
  ++parked_by_key_[key];
  return id;
}

void Router::unpark(uint64_t id) {
  auto required = wait_required_.find(id);
  if (required == wait_required_.end()) return;
  auto [first, last] = waits_.equal_range(required->second);
  for (auto it = first; it != last; ++it) {
    if (it->second.id != id) continue;
    auto count = parked_by_key_.find(it->second.key);
    if (count != parked_by_key_.end() && --count->second <= 0) parked_by_key_.erase(count);
    waits_.erase(it);
    break;
  }
  wait_required_.erase(required);
}

void Router::clear_parked() {
  waits_.clear();
  wait_required_.clear();
  parked_by_key_.clear();
}

Reply Router::behind(uint64_t required) const {
  if (required > view_.commit) {
    return unavailable(kSubstatusReplicaBehind, 50,
                       "the session token " + std::to_string(required) + " is beyond the commit index " +
                           std::to_string(view_.commit) + " this node knows of its leader; retry, or read from the "
                           "leader (a token that did not come from this cluster never becomes readable)");
  }
  return unavailable(kSubstatusReplicaBehind, 50,
                     "this replica has not caught up to the requested session/staleness yet; retry or read from "
                     "another node");
}

bool Router::over_request_limit(size_t waiting, size_t queued_reads, bool write) const {
  const auto full = static_cast<size_t>(config_.max_pending_requests);
  const size_t limit = write ? full : full - full / 4;
  return waiting >= limit || queued_reads >= limit;
}

const char* Router::peer_message_refusal(NodeId link_from, const Result<replication::Message>& message) const {
  return node::peer_message_refusal(view_, config_.id, link_from, message);
}

bool Router::may_forward(NodeId from) const {
  const bool knows_membership = !view_.voters.empty() || !view_.learners.empty();
  return !knows_membership || view_.voters.contains(from) || view_.learners.contains(from) ||
         view_.committed_members.contains(from) || view_.leader == from;
}

Reply Router::unavailable(uint32_t substatus, uint32_t retry_after_ms, std::string message) const {
  Reply reply = Reply::error(StatusCode::kUnavailable, std::move(message));
  reply.result.substatus = static_cast<int>(substatus);
  reply.retry_after_ms = retry_after_ms;
  reply.served_by = config_.id;
  reply.leader_hint = view_.leader;
  return reply;
}

Reply Router::shutting_down() const {
  Reply reply = unavailable(kSubstatusNoLeader, 100, "the node is shutting down; retry on another node");
  reply.leader_hint = view_.leader != config_.id ? view_.leader : NodeId(0);
  return reply;
}

Reply Router::overloaded(std::string message) const {
  Reply reply = unavailable(kSubstatusOverloaded, 100, std::move(message));
  reply.leader_hint = NodeId(0);
  return reply;
}

Reply Router::timed_out() const {
  return unavailable(kSubstatusOutcomeUnknown, 0,
                     "no answer from the cluster in time (the outcome of a write is unknown)");
}

Reply Router::leader_unreachable(NodeId leader, const std::string& why) const {
  Reply reply = unavailable(
      kSubstatusOutcomeUnknown, 0,
      why.empty() ? "no answer from the leader (node " + std::to_string(leader.value()) +
                        ") in time; the write's outcome is unknown (it may still apply)"
                  : "could not reach the leader (node " + std::to_string(leader.value()) + "): " + why);
  reply.leader_hint = leader;
  return reply;
}

}  // namespace mayfly::node
