// Driver (node/driver.h), the work beside the write and read path: membership and leadership changes (admin requests,
// promoting caught-up learners), snapshot jobs (exported on a background thread, or inline on a simulated loop) and
// garbage collector passes and their pacing, and the metrics it publishes (node/driver_metrics.h). The cycle itself
// (flush, ticks, writes, reads) is in driver.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

#include "node/driver.h"
#include "node/virtual_clock.h"
#include "storage/json.h"
#include "ttl/ttl.h"

namespace mayfly::node {

using replication::Role;

void Driver::handle_admin(uint64_t request_id, const api::Request& operation) {
  replication::RaftCore& core = replica_->core();
  if (core.role() != Role::kLeader) {
    reply(request_id, not_leader("membership and leadership changes go to the leader; retry there"));
    return;
  }
  Result<replication::Proposal> proposal = Status::internal("no proposal");
  switch (operation.kind()) {
    case api::Kind::kTransferLeader: {
      const NodeId member(operation.as<api::TransferLeader>()->id);
      Status status = core.transfer_leadership(member);
      Reply result;
      if (!status.is_ok()) {
        result = Reply::error(
            status.code() == StatusCode::kInvalidArgument ? StatusCode::kInvalidArgument : StatusCode::kUnavailable,
            status.message());
      } else {
        result.result.body = "{\"transferringTo\":" + std::to_string(member.value()) + "}";
      }
      reply(request_id, std::move(result));
      return;
    }
    case api::Kind::kAddMember: {
      // The address first (a normal entry), then the learner; the leader promotes it once it has caught up.
      const api::AddMember& add = *operation.as<api::AddMember>();
      const NodeId member(add.id);
      storage::Command address;
      address.type = storage::CommandType::kSetMemberAddress;
      address.id = std::to_string(member.value());
      address.body = add.address;
      Result<replication::Proposal> recorded = replica_->propose(address, clock_.now_micros());
      if (!recorded.is_ok()) {
        reply(request_id, not_leader(recorded.status().message()));
        return;
      }
      proposal = core.propose_config_change({replication::ConfigChangeType::kAddLearner, member});
      break;
    }
    case api::Kind::kRemoveMember:
      proposal = core.propose_config_change(
          {replication::ConfigChangeType::kRemoveNode, NodeId(operation.as<api::RemoveMember>()->id)});
      break;
    default:
      reply(request_id, Reply::error(StatusCode::kInvalidArgument, "unsupported operation"));
      return;
  }
  if (!proposal.is_ok()) {
    const StatusCode code = proposal.status().code() == StatusCode::kInvalidArgument ? StatusCode::kInvalidArgument
                                                                                      : StatusCode::kUnavailable;
    reply(request_id, Reply::error(code, proposal.status().message()));
    return;
  }
  last_proposal_ms_ = steady_ms();
  pending_config_[proposal->index.value()] = request_id;
}

void Driver::handle_advance_clock(uint64_t request_id, const api::Request& operation) {
  if (!config_.virtual_clock) {
    reply(request_id, Reply::error(StatusCode::kPreconditionFailed,
                                   "this cluster runs on the real clock (mayflyd --clock real): its time follows the "
                                   "wall clock and cannot be advanced. advance-clock is for clusters whose every node "
                                   "was started with --clock virtual (docs/ttl.md, \"Virtual clock\")"));
    return;
  }
  if (replica_->core().role() != Role::kLeader) {
    reply(request_id, not_leader("advance-clock goes to the leader; retry there"));
    return;
  }
  Result<int64_t> advance = parse_clock_advance(operation.as<api::AdvanceClock>()->duration);
  if (!advance.is_ok()) {  // checked when it was decoded; a request made on the node gets the same answer
    reply(request_id, Reply::error(StatusCode::kInvalidArgument, advance.status().message()));
    return;
  }
  const int64_t advance_micros = advance.value();
  // The log's time, uncommitted entries included: the advance entry comes after them.
  const int64_t from = clock_.now_micros();
  const int64_t target = from + advance_micros;  // both bounded far below overflow (request.h)
  if (target > kMaxVirtualTimeMicros) {
    reply(request_id, Reply::error(StatusCode::kInvalidArgument,
                                   "advance-clock would move virtual time to " + std::to_string(target) +
                                       " µs, past its bound (9999-12-31T23:59:59Z, " +
                                       std::to_string(kMaxVirtualTimeMicros) + " µs); it is now " +
                                       std::to_string(from) + " µs. Nothing changed"));
    return;
  }
  Result<replication::Proposal> proposal = replica_->propose_time_entry(target);
  if (!proposal.is_ok()) {
    reply(request_id, not_leader("cannot advance the clock now: " + proposal.status().message()));
    return;
  }
  last_proposal_ms_ = steady_ms();
  spdlog::info("advancing the virtual clock by {} µs to {} µs (log index {})", advance_micros, target,
               proposal->index.value());
  pending_advances_[proposal->index.value()] =
      PendingAdvance{request_id, proposal->term.value(), target, steady_ms() + config_.request_timeout_ms};
}

void Driver::answer_advance(const storage::AppliedEntry& applied) {
  auto found = pending_advances_.find(applied.index.value());
  if (found == pending_advances_.end()) return;
  const PendingAdvance advance = found->second;
  const uint64_t index = found->first;
  pending_advances_.erase(found);
  if (applied.term.value() != advance.term) {
    reply(advance.request_id, not_leader("the clock advance was lost in a leader change (not applied); retry"));
    return;
  }
  Reply result;
  result.result.body = "{\"virtualTime\":" + std::to_string(advance.target_micros / kMicrosPerSecond) +
                       ",\"virtualTimeMicros\":" + std::to_string(advance.target_micros) +
                       ",\"index\":" + std::to_string(index) + "}";
  result.result.ts_micros = advance.target_micros;
  result.session_token = index;
  reply(advance.request_id, std::move(result));
}

void Driver::answer_advances() {
  const uint64_t applied = replica_->state().applied().index.value();
  while (!pending_advances_.empty() && pending_advances_.begin()->first <= applied) {
    Reply unknown = Reply::error(StatusCode::kUnavailable,
                                 "this node installed a snapshot past the clock advance; its outcome is unknown: "
                                 "check the applied time in `mayfly cluster status` before advancing again");
    unknown.result.substatus = kSubstatusOutcomeUnknown;
    reply(pending_advances_.begin()->second.request_id, std::move(unknown));
    pending_advances_.erase(pending_advances_.begin());
  }
}

// ---- the cycle ----------------------------------------------------------------------------------------------------

void Driver::auto_promote_learners() {
  const replication::RaftStatus status = replica_->core().status();
  for (NodeId learner : status.membership.learners) {
    auto progress = status.progress.find(learner);
    if (progress == status.progress.end() || progress->second.match < status.commit) continue;
    Result<replication::Proposal> promoted =
        replica_->core().propose_config_change({replication::ConfigChangeType::kPromoteLearner, learner});
    if (promoted.is_ok()) spdlog::info("promoting learner {} (caught up at {})", learner.value(), status.commit.value());
    return;  // one change at a time
  }
}

void Driver::maybe_start_snapshot() {
  if (snapshot_job_) return;
  snapshot_job_ = replica_->begin_snapshot();
  if (!snapshot_job_) return;
  storage::Replica::SnapshotJob* job = snapshot_job_.get();
  const storage::RaftLogStore& log = replica_->log();
  // The job (and the view of the store it holds) belongs to the driver, never to a posted task: a task still queued
  // when the loop stops is destroyed with the loop, after the store has closed.
  if (!loop_.background_threads()) {
    // A simulated loop: the export runs here, so the run stays single-threaded and reproducible.
    spdlog::info("a follower needs a snapshot: exporting the state at index {}", job->index.value());
    job->run(log);
    loop_.post([this] { finish_snapshot(); });
    return;
  }
  spdlog::info("a follower needs a snapshot: exporting the state at index {} in the background", job->index.value());
  snapshot_thread_ = std::thread([this, job, &log] {
    try {
      job->run(log);
    } catch (...) {
      // Handed to the driver thread, which stops the node with the cause in the log.
      std::string cause = describe_current_exception();
      loop_.post([this, cause = std::move(cause)] {
        if (snapshot_thread_.joinable()) snapshot_thread_.join();
        fail_on_exception("the snapshot thread", cause);
      });
      return;
    }
    loop_.post([this] { finish_snapshot(); });
  });
}

void Driver::finish_snapshot() {
  if (snapshot_thread_.joinable()) snapshot_thread_.join();
  if (stopped_ || !snapshot_job_) return;
  std::unique_ptr<storage::Replica::SnapshotJob> job = std::move(snapshot_job_);
  Status status = replica_->finish_snapshot(*job);
  if (!replica_->log().failure().is_ok()) return fatal(replica_->log().failure());
  if (!status.is_ok()) {
    spdlog::error("snapshot export at index {} failed (tried again when the follower next asks): {}",
                  job->index.value(), status.to_string());
    return;
  }
  spdlog::info("snapshot at index {} ready to send ({} bytes)", job->index.value(), job->size_bytes);
}

void Driver::publish_metrics() {
  const int64_t started = loop_.now_micros();
  Result<bool> refreshed = driver_metrics_.publish(view(), clock_.now_micros(), steady_ms(), replica_->state());
  if (!refreshed.is_ok()) return fatal(refreshed.status());
  if (*refreshed) note_driver_hold("refreshing the container metrics", started);
}

void Driver::note_foreground() {
  const uint64_t served = foreground_.total();
  const int64_t now = loop_.now_micros();
  gc_pacer_.note_foreground(now, served - foreground_ops_seen_ + item_writes_unreported_);
  foreground_ops_seen_ = served;
  item_writes_unreported_ = 0;
  metrics_.set_gc_pace(gc_pacer_.busy(now),
                       static_cast<double>(std::max<int64_t>(0, gc_pacer_.next_pass_micros() - now)) / 1e6);
}

void Driver::collect_garbage() {
  if (stopped_) return;
  note_foreground();
  const int64_t started = loop_.now_micros();
  Result<int64_t> deleted = collector_.run_once(gc_pacer_.batch_items(started));
  if (!deleted.is_ok()) return fatal(deleted.status());
  gc_items_collected_ += *deleted;
  const int64_t ended = loop_.now_micros();
  reclaim_rate_.record_pass(ended, *deleted, collector_.last_pass_saturated());
  note_driver_hold("a garbage collector pass", started);
  gc_pacer_.pass_done(started, ended, *deleted, collector_.last_pass_saturated());
  // A busy node, or one exporting a snapshot (its LevelDB snapshot would keep the tombstones), compacts later.
  Result<bool> compacting =
      gc_compactor_.poll(ended, gc_pacer_.busy(ended) || snapshot_job_ != nullptr, loop_.background_threads());
  if (!compacting.is_ok()) return fail_on_exception("the range compaction thread", compacting.status().message());
  gc_timer_->arm(std::max<int64_t>(0, gc_pacer_.next_pass_micros() - ended), [this] { collect_garbage(); });
}

void Driver::note_driver_hold(std::string_view what, int64_t started_micros) {
  const int64_t held_ms = (loop_.now_micros() - started_micros) / 1000;
  if (held_ms < kDriverHoldWarnMs) return;
  if (std::optional<uint64_t> held_back = hold_warnings_.admit(std::string(what), steady_ms())) {
    spdlog::warn("{} held the driver thread for {} ms (Raft ticks and heartbeats wait meanwhile; elections start "
                 "after {} ms of silence); {} more like it not logged",
                 what, held_ms, config_.election_timeout_ticks * config_.tick_interval_ms, *held_back);
  }
}

}  // namespace mayfly::node
