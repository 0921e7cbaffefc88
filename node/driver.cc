// Driver (node/driver.h), its cycle: flush, ticks, peer messages, client writes and strong reads, request deadlines,
// expiry deadlines, stopping. Admin changes, snapshot jobs, GC passes and metrics are in driver_upkeep.cc.
#include "node/driver.h"

#include "node/patch_condition.h"

#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <tuple>
#include <typeinfo>

#include "common/assert.h"
#include "node/ttl_guard.h"
#include "node/virtual_clock.h"
#include "replication/codec.h"
#include "storage/document.h"
#include "ttl/request_units.h"

namespace mayfly::node {

using replication::Role;

std::string Driver::describe_current_exception() {
  try {
    throw;
  } catch (const kj::Exception& exception) {
    return "kj::Exception: " + std::string(kj::str(exception).cStr());
  } catch (const std::exception& exception) {
    return std::string(typeid(exception).name()) + ": " + exception.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

Driver::Driver(const NodeConfig& config, std::unique_ptr<storage::Replica> replica, Clock& clock,
               metrics::Metrics& metrics, RequestUnitAccount& request_units, EventLoop* loop)
    : own_loop_(loop == nullptr ? std::make_unique<AsioLoop>() : nullptr),
      loop_(loop != nullptr ? *loop : *own_loop_),
      config_(config),
      replica_(std::move(replica)),
      virtual_clock_(config.virtual_clock
                         ? std::make_unique<VirtualClock>([this] { return replica_->core().last_ts_micros(); }, clock)
                         : nullptr),
      clock_(config.virtual_clock ? *virtual_clock_ : clock),
      metrics_(metrics),
      request_units_(request_units),
      collector_(replica_->state().expiry(), request_units, metrics, clock_,
                 CollectorOptions{config.gc_batch_items_max, config.gc_ru_share}),
      reclaim_rate_(ReclaimSettings{config.gc_interval_ms, config.gc_batch_items_max, config.gc_ru_share,
                                    collector_.pass_work()}),
      gc_pacer_(GcPaceOptions{config.gc_interval_ms * 1000, config.gc_batch_items_max, config.gc_driver_share,
                              config.tick_interval_ms * 1000}),
      gc_compactor_(replica_->state().expiry(), metrics,
                    GcCompactOptions{config.gc_compact_interval_ms * 1000,
                                     static_cast<int64_t>(config.gc_compact_min_deletes)}),
      driver_metrics_(config, metrics, request_units),
      tick_timer_(loop_.make_timer()),
      deadline_timer_(loop_.make_timer()),
      gc_timer_(loop_.make_timer()),
      read_context_prefix_("r" + std::to_string(replica_->seed()) + ".") {}

Driver::~Driver() {
  if (snapshot_job_) snapshot_job_->cancelled = true;
  if (snapshot_thread_.joinable()) snapshot_thread_.join();
  gc_compactor_.join();
  snapshot_job_.reset();  // members go in reverse order: the replica (and its store) before an owned loop
}

int64_t Driver::steady_ms() const { return loop_.now_ms(); }

boost::asio::io_context& Driver::io() {
  MAYFLY_ASSERT_MSG(own_loop_ != nullptr, "io() of a driver on an injected event loop");
  return own_loop_->io();
}

void Driver::start(DriverOutput& output) {
  output_ = &output;
  last_proposal_ms_ = steady_ms();
  foreground_ops_seen_ = foreground_.total();
  const replication::RaftStatus status = replica_->core().status();
  replay_ = Replay{.from = replica_->state().applied().index.value(), .until = status.commit.value(),
                   .started_ms = steady_ms(), .reported = status.commit <= replica_->state().applied().index};
  if (!replay_.reported) {
    spdlog::info("replaying the log's committed entries {}..{} (after the state's applied index)", replay_.from + 1,
                 replay_.until);
  }
  gc_timer_->arm(config_.gc_interval_ms * 1000, [this] { collect_garbage(); });
  loop_.post([this] { on_tick(); });
}

void Driver::run() {
  owner_.bind();
  struct Release {
    ThreadOwner& owner;
    ~Release() { owner.release(); }
  } release{owner_};
  try {
    loop_.run();
  } catch (const replication::StorageFailure& failure) {
    // The core could not read its log (replication/log_storage.h): the words of a failed write (fatal), the stop of
    // an exception (the core gave up half-way through a call).
    spdlog::critical("storage failure, stopping this node: {}", failure.status().to_string());
    stop_after_failure();
  } catch (...) {
    fail_on_exception("the driver thread", describe_current_exception());
  }
}

void Driver::fail_on_exception(std::string_view where, const std::string& cause) {
  spdlog::critical("uncaught exception on {}, stopping this node: {}", where, cause);
  stop_after_failure();
}

void Driver::stop_after_failure() {
  failed_ = true;
  try {
    stop();  // answers what is pending with 503
  } catch (...) {
    spdlog::critical("another exception while stopping: {}", describe_current_exception());
  }
  loop_.quit();
  spdlog::default_logger()->flush();
}

void Driver::stop() {
  if (stopped_) return;
  stopped_ = true;
  tick_timer_->cancel();
  gc_timer_->cancel();
  deadline_timer_->cancel();
  if (snapshot_job_) snapshot_job_->cancelled = true;  // an export stops at its next piece
  if (snapshot_thread_.joinable()) snapshot_thread_.join();  // its result is dropped: the next start takes another
  snapshot_job_.reset();  // and its view of the store with it, before the store closes
  for (auto& [index, write] : pending_writes_) {
    Reply unknown = Reply::error(StatusCode::kUnavailable,
                                 "the node is shutting down; the write's outcome is unknown (it may still apply): "
                                 "read it back before retrying");
    unknown.result.substatus = kSubstatusOutcomeUnknown;
    reply(write.request_id, std::move(unknown));
  }
  const Reply stopping = Reply::error(StatusCode::kUnavailable, "the node is shutting down");
  for (auto& [context, read] : pending_strong_) reply(read.request_id, stopping);
  for (auto& [index, read] : waiting_reads_) reply(read.request_id, stopping);
  for (auto& [index, request] : pending_config_) reply(request, stopping);
  for (auto& [index, advance] : pending_advances_) reply(advance.request_id, stopping);
  pending_advances_.clear();
  pending_writes_.clear();
  pending_strong_.clear();
  waiting_reads_.clear();
  pending_config_.clear();
  if (output_ != nullptr) output_->deliver(std::move(batch_));
  batch_ = DriverBatch{};
  // A range compaction under way cannot be interrupted: the one to wait for, once the pending requests are answered.
  gc_compactor_.join();
  loop_.release();
}

void Driver::stop_gracefully() {
  if (stopped_ || stop_deadline_ms_) return;
  const replication::RaftStatus status = replica_->core().status();
  NodeId best;
  LogIndex best_match;
  for (const auto& [peer, progress] : status.progress) {
    if (peer != config_.id && status.membership.is_voter(peer) && (best == NodeId(0) || progress.match > best_match)) {
      best = peer;
      best_match = progress.match;
    }
  }
  if (status.role != Role::kLeader || best == NodeId(0) || !replica_->transfer_leadership(best).is_ok()) {
    stop();
    return;
  }
  spdlog::info("handing leadership to node {} before stopping", best.value());
  stop_deadline_ms_ = steady_ms() + 2 * config_.election_timeout_ticks * config_.tick_interval_ms;
  schedule_flush();
}

void Driver::fatal(const Status& status) {
  // The disk failed (or data is corrupt): the log's state is unknown. Stop serving rather than risk divergence.
  spdlog::critical("storage failure, stopping this node: {}", status.to_string());
  failed_ = true;
  stop();
  loop_.quit();
}

NodeView Driver::view() const {
  const replication::RaftStatus status = replica_->core().status();
  NodeView view;
  view.self = config_.id;
  view.leader = status.leader;
  view.term_leader = status.term_leader;
  view.role = status.role;
  view.term = status.term.value();
  view.commit = status.commit.value();
  view.applied = replica_->state().applied().index.value();
  view.last_index = status.last_index.value();
  view.applied_ts_micros = replica_->state().applied().ts_micros;
  view.last_ts_micros = status.last_ts_micros;
  if (status.ticks_since_leader_contact >= 0) {
    view.leader_contact_steady_ms = steady_ms() - status.ticks_since_leader_contact * config_.tick_interval_ms;
  }
  view.voters = status.membership.voters;
  view.learners = status.membership.learners;
  // A membership change appended but not committed may still be undone by the next leader, which may be a node it
  // removes: the members of the committed membership are heard too until it commits (node/peer_admission.h).
  if (replica_->core().config_change_pending()) {
    const replication::Membership committed = replica_->core().membership_at(status.commit);
    if (committed != status.membership) {
      view.committed_members = committed.voters;
      view.committed_members.insert(committed.learners.begin(), committed.learners.end());
    }
  }
  return view;
}

Reply Driver::not_leader(std::string what) const {
  Reply result = Reply::error(StatusCode::kUnavailable, std::move(what));
  result.result.substatus = kSubstatusNoLeader;
  result.retry_after_ms = 100;
  return result;
}

void Driver::reply(uint64_t request_id, Reply reply) {
  reply.served_by = config_.id;
  reply.leader_hint = replica_->core().leader();
  batch_.replies.emplace_back(request_id, std::move(reply));
}

void Driver::schedule_flush() {
  if (flush_scheduled_ || stopped_) return;
  flush_scheduled_ = true;
  loop_.post([this] { flush(); });
}

// ---- inputs -----------------------------------------------------------------------------------------------------

void Driver::on_messages(std::vector<replication::Message> messages, uint64_t delivery) {
  owner_.check();
  for (const replication::Message& message : messages) {
    if (stopped_) break;
    Status status = replica_->step(message);
    if (status.is_ok()) continue;
    // Refused: the core changed nothing. Count it by reason and say so (rate-limited per sender and reason).
    ++messages_refused_;
    const std::string reason(replication::reject_reason_name(replica_->core().last_rejection()));
    metrics_.add_peer_message_rejected(reason);
    if (std::optional<uint64_t> held_back =
            rejected_warnings_.admit(std::to_string(message.from.value()) + "/" + reason, steady_ms())) {
      spdlog::warn("refused a message from node {} ({}): {}; {} more like it not logged", message.from.value(),
                   reason, status.to_string(), *held_back);
    }
  }
  // Acknowledged with this flush's output (one hand-off for everything, not one per delivery).
  if (delivery != 0) batch_.deliveries_taken.push_back(delivery);
  if (stopped_ && output_ != nullptr) {
    output_->deliver(std::move(batch_));
    batch_ = DriverBatch{};
  }
  schedule_flush();
}

void Driver::on_request(uint64_t request_id, api::Request operation) {
  owner_.check();
  if (stopped_) {
    reply(request_id, Reply::error(StatusCode::kUnavailable, "the node is shutting down"));
    return;
  }
  if (is_write(operation)) {
    handle_write(request_id, operation);
  } else if (is_read(operation)) {
    handle_read(request_id, operation);
  } else if (operation.kind() == api::Kind::kAdvanceClock) {
    handle_advance_clock(request_id, operation);
  } else {
    handle_admin(request_id, operation);
  }
  schedule_flush();
}

void Driver::handle_write(uint64_t request_id, const api::Request& operation) {
  if (replica_->core().role() != Role::kLeader) {
    reply(request_id, not_leader("this node is not the leader and could not forward the write; retry"));
    return;
  }
  // The one place a client write becomes the replicated command; a change feed turned on without a retention gets this
  // leader's --changefeed-retention (the command carries the number, so no replica applies its own flag).
  storage::Command command = to_command(operation, config_.changefeed_retention_seconds);
  // A re-sent write whose container is gone still goes to the log: its first attempt may have applied, and only
  // apply knows that outcome (answering 404 here would replace it). Throttling and the body check apply to it as to
  // any write: the retry flag buys nothing else.
  const bool resent = command.write_id && command.write_id->retry;
  std::optional<storage::ContainerRecord> container;
  if (storage::is_item_write(command.type)) {
    // One container lookup serves every check before anything reaches the log.
    container = replica_->state().container_for_write(command.database, command.container);
    if (!container && !resent) {
      // No such container (or database): read_container gives the 404.
      reply(request_id, Reply{replica_->state().reader().read_container(command.database, command.container)});
      return;
    }
  }
  if (container) {
    // Over the container's RU/s: 429 and nothing is proposed (docs/ttl.md §8).
    const int64_t wait_ms = request_units_.throttle_ms(command.database + "/" + command.container,
                                                       container->throughput, ttl::write_charge(command.body.size()));
    if (wait_ms > 0) {
      reply(request_id, throttled_reply(wait_ms));
      return;
    }
    // A conditional patch is decided here and pinned to the etag it was decided on (node/patch_condition.h).
    if (const api::PatchItem* patch = operation.as<api::PatchItem>(); patch != nullptr && !patch->condition.empty()) {
      if (std::optional<storage::OpResult> refused =
              decide_patch_condition(replica_->state().reader(), patch->condition, resent, command)) {
        reply(request_id, Reply{std::move(*refused)});
        return;
      }
    }
    // Bad item bodies are refused here, and good ones go to the log validated (storage::PreparedBody): no replica
    // parses the body again.
    if (Status prepared = storage::prepare_body(command, *container); !prepared.is_ok()) {
      reply(request_id, Reply{storage::OpResult::error(prepared)});
      return;
    }
  }
  // The RPC host ran the dry run and the guard of a defaultTtl change on a read thread (node/ttl_guard.h) and marked
  // what it let through as forced; one not looked at got here past a leadership change: nothing applied, retry.
  if (needs_ttl_guard(operation)) {
    reply(request_id, not_leader("the defaultTtl change was not checked on this leader; nothing was applied"));
    return;
  }
  Result<replication::Proposal> proposal = replica_->propose(command, clock_.now_micros());
  if (!proposal.is_ok()) {
    if (proposal.status().code() == StatusCode::kInvalidArgument) {
      reply(request_id, Reply::error(StatusCode::kTooLarge,
                                     "request too large for one log entry: " + proposal.status().message()));
    } else {
      reply(request_id, not_leader("cannot propose now: " + proposal.status().message()));
    }
    return;
  }
  last_proposal_ms_ = steady_ms();
  pending_writes_[proposal->index.value()] = PendingWrite{request_id, proposal->term.value(),
                                                          steady_ms() + config_.request_timeout_ms, steady_ms() * 1000};
}

void Driver::handle_read(uint64_t request_id, const api::Request& operation) {
  // Only a strong read needs the driver: the core confirms leadership (ReadIndex), and the read waits here until this
  // node has applied that far. Session and bounded reads wait on the RPC side for the applied index it is sent.
  if (consistency_of(operation) != Consistency::kStrong) {
    reply(request_id, Reply::error(StatusCode::kInvalidArgument,
                                   "only strong reads go through the driver; session, bounded and eventual "
                                   "reads are served by the RPC side"));
    return;
  }
  // The context names this process too: a leader's answer to a read of an earlier incarnation of this node (asked
  // before a restart, answered after it) must never release a read asked now, which may follow later writes.
  const std::string context = read_context_prefix_ + std::to_string(next_read_context_++);
  Status status = replica_->read_index(context);
  if (!status.is_ok()) {
    reply(request_id, not_leader("no leader to confirm a strong read: " + status.message()));
    return;
  }
  pending_strong_[context] = PendingStrongRead{request_id, steady_ms() + config_.request_timeout_ms};
}

void Driver::flush() {
  owner_.check();
  flush_scheduled_ = false;
  if (stopped_) return;
  // A leader's appends go out before its own fsync, so the followers' fsyncs overlap it.
  Result<storage::ReplicaOutput> output = replica_->process_ready([this](std::vector<replication::Message>&& early) {
    DriverBatch appends;
    for (const replication::Message& message : early) {
      appends.messages[message.to].push_back(replication::encode_message(message));
    }
    output_->deliver(std::move(appends));
  });
  if (!output.is_ok()) return fatal(output.status());
  if (flush_observer_) flush_observer_(*output);
  if (!replay_.reported && replica_->state().applied().index.value() >= replay_.until) {
    replay_.reported = true;
    spdlog::info("replayed {} entries in {} ms", replay_.until - replay_.from, steady_ms() - replay_.started_ms);
  }
  if (output->snapshot_installed) {
    spdlog::info("installed the leader's snapshot at index {} ({} bytes) in {:.0f} ms",
                 output->snapshot_installed->index.value(), output->snapshot_installed->size_bytes,
                 output->snapshot_install_seconds * 1000);
  }
  for (double seconds : output->persist_seconds) metrics_.observe_fsync(seconds);
  for (const replication::Message& message : output->messages) {
    batch_.messages[message.to].push_back(replication::encode_message(message));
  }
  for (const storage::AppliedEntry& applied : output->applied) {
    if (applied.result.duplicate) metrics_.add_writes_deduplicated(1);
    if (applied.result.dedup_refusal != nullptr) metrics_.add_dedup_refused(applied.result.dedup_refusal);
    if (storage::is_item_write(applied.command_type)) ++item_writes_unreported_;
    auto write = pending_writes_.find(applied.index.value());
    if (write != pending_writes_.end() && write->second.term == applied.term.value()) {
      metrics_.observe_proposal(static_cast<double>(steady_ms() * 1000 - write->second.proposed_at_micros) / 1e6);
      Reply result{applied.result};
      result.session_token = applied.index.value();
      charge_applied(applied, &result);
      reply(write->second.request_id, std::move(result));
      pending_writes_.erase(write);
    } else {
      charge_applied(applied, nullptr);  // every node counts the writes it applies (docs/design.md, "Request units")
      if (write != pending_writes_.end()) {
        reply(write->second.request_id, not_leader("the write was not applied (lost in a leader change); retry"));
        pending_writes_.erase(write);
      }
    }
    answer_advance(applied);
    auto change = pending_config_.find(applied.index.value());
    if (change != pending_config_.end()) {
      Reply result;
      result.result.body = "{\"membership\":\"" + replica_->core().membership().to_string() + "\"}";
      result.session_token = applied.index.value();
      reply(change->second, std::move(result));
      pending_config_.erase(change);
    }
  }
  for (const replication::ReadState& read : output->read_states) {
    auto pending = pending_strong_.find(read.context);
    if (pending == pending_strong_.end()) continue;
    waiting_reads_.emplace(read.index.value(), WaitingRead{pending->second.request_id, pending->second.deadline_ms});
    pending_strong_.erase(pending);
  }
  serve_waiting_reads();
  answer_advances();
  watch_expiry();
  if (stopped_) return;
  maybe_start_snapshot();
  if (replica_->core().role() == Role::kLeader) {
    auto_promote_learners();
    schedule_expiry_entry();
    if (replica_->has_ready()) schedule_flush();  // proposals made just now
  }
  driver_metrics_.note_snapshot_errors(replica_->core().status(), steady_ms());
  driver_metrics_.note_state_persists(replica_->checkpoints(), replica_->snapshots_produced());
  batch_.view = view();
  output_->deliver(std::move(batch_));
  batch_ = DriverBatch{};
}

void Driver::serve_waiting_reads() {
  const storage::AppliedState applied = replica_->state().applied();
  while (!waiting_reads_.empty() && waiting_reads_.begin()->first <= applied.index.value()) {
    const uint64_t request_id = waiting_reads_.begin()->second.request_id;
    waiting_reads_.erase(waiting_reads_.begin());
    Reply go_ahead;
    go_ahead.serve_here = true;  // the RPC thread runs it on an applied state at least this recent
    reply(request_id, std::move(go_ahead));
  }
}

void Driver::expire_requests() {
  const int64_t now = steady_ms();
  for (auto it = pending_writes_.begin(); it != pending_writes_.end();) {
    if (it->second.deadline_ms > now) {
      ++it;
      continue;
    }
    Reply result = Reply::error(StatusCode::kUnavailable,
                                "the write was not confirmed in time; its outcome is unknown (it may still "
                                "apply): read it back before retrying");
    result.result.substatus = kSubstatusOutcomeUnknown;
    reply(it->second.request_id, std::move(result));
    it = pending_writes_.erase(it);
  }
  for (auto it = pending_advances_.begin(); it != pending_advances_.end();) {
    if (it->second.deadline_ms > now) {
      ++it;
      continue;
    }
    Reply result = Reply::error(StatusCode::kUnavailable,
                                "the clock advance was not confirmed in time; its outcome is unknown: check the "
                                "applied time in `mayfly cluster status` before advancing again");
    result.result.substatus = kSubstatusOutcomeUnknown;
    reply(it->second.request_id, std::move(result));
    it = pending_advances_.erase(it);
  }
  for (auto it = pending_strong_.begin(); it != pending_strong_.end();) {
    if (it->second.deadline_ms > now) {
      ++it;
      continue;
    }
    reply(it->second.request_id, not_leader("leadership could not be confirmed for a strong read in time; retry"));
    it = pending_strong_.erase(it);
  }
  for (auto it = waiting_reads_.begin(); it != waiting_reads_.end();) {
    if (it->second.deadline_ms > now) {
      ++it;
      continue;
    }
    Reply result = Reply::error(StatusCode::kUnavailable,
                                "this replica has not applied up to the strong read's confirmed index in time; "
                                "retry or read from another node");
    result.result.substatus = kSubstatusReplicaBehind;
    result.retry_after_ms = 50;
    reply(it->second.request_id, std::move(result));
    it = waiting_reads_.erase(it);
  }
}

void Driver::on_tick() {
  if (stopped_) return;
  if (stop_deadline_ms_ && (replica_->core().role() != Role::kLeader || steady_ms() >= *stop_deadline_ms_)) {
    stop();
    return;
  }
  replica_->tick(clock_.now_micros());
  const int64_t now = steady_ms();
  if (replica_->core().term_exhausted() && term_warnings_.admit("term", now)) {
    spdlog::error("term {} reached the maximum {}: this node can no longer campaign (a hostile peer sent a huge "
                  "term; it still follows and votes)",
                  replica_->core().term().value(), replication::kMaxTerm.value());
  }
  // A virtual clock stands still: no idle time entries (each would move it by a microsecond).
  if (!config_.virtual_clock && replica_->core().role() == Role::kLeader &&
      now - last_proposal_ms_ >= config_.time_entry_interval_ms) {
    if (replica_->propose_time_entry(clock_.now_micros()).is_ok()) last_proposal_ms_ = now;
  }
  note_foreground();
  expire_requests();
  publish_metrics();
  driver_metrics_.publish_clock(replica_->core().status(), steady_ms());
  schedule_flush();
  tick_timer_->arm(config_.tick_interval_ms * 1000, [this] { on_tick(); });
}

void Driver::charge_applied(const storage::AppliedEntry& applied, Reply* reply) {
  if (!storage::is_item_write(applied.command_type)) return;
  const double charge =
      ttl::write_request_charge(applied.result.ok(), applied.command_bytes, applied.result.body.size());
  request_units_.charge(applied.database + "/" + applied.container,
                        std::string(storage::command_type_name(applied.command_type)), charge);
  if (reply != nullptr) reply->request_charge = charge;
}

void Driver::watch_expiry() {
  std::vector<double> lateness;
  Status watched =
      expiry_watch_.on_applied(replica_->state().expiry(), replica_->state().applied(), clock_.now_micros(), &lateness);
  if (!watched.is_ok()) return fatal(watched);
  for (double seconds : lateness) metrics_.observe_expiry_lateness(seconds);
}

void Driver::schedule_expiry_entry() {
  // A virtual clock reaches an expiry instant only through an advance-clock entry: nothing to schedule.
  if (config_.virtual_clock) return;
  const storage::AppliedState applied = replica_->state().applied();
  if (applied.index.value() == expiry_checked_at_applied_ && scheduled_expiry_micros_) return;
  expiry_checked_at_applied_ = applied.index.value();
  // watch_expiry looked up the next instant after this applied time earlier in the same flush.
  if (expiry_watch_.looked_at_index() != applied.index.value()) {
    watch_expiry();
    if (stopped_) return;
  }
  const std::optional<int64_t> next = expiry_watch_.next();
  if (!next || (scheduled_expiry_micros_ && *scheduled_expiry_micros_ == *next)) return;
  // An entry stamped at or after the deadline is in the log already: its commit will apply it.
  if (replica_->core().status().last_ts_micros >= *next) return;
  scheduled_expiry_micros_ = *next;
  // A leader held back by --max-clock-offset can stamp no further than its ceiling: wait for that to reach the
  // expiry too, or a leader whose clock ran ahead would append time entries back to back.
  const int64_t now = std::min(clock_.now_micros(), replica_->core().time_ceiling_micros());
  int64_t wait_micros = std::max<int64_t>(0, *next - now);
  // A deadline that fired without moving the log (its time entry was refused: a leadership transfer under way) is
  // tried again a tick later, not at once: never a busy loop on the driver thread.
  if (wait_micros == 0 && last_deadline_fired_micros_ &&
      loop_.now_micros() - *last_deadline_fired_micros_ < config_.tick_interval_ms * 1000) {
    wait_micros = config_.tick_interval_ms * 1000;
  }
  deadline_timer_->arm(wait_micros, [this] { on_deadline_timer(); });
}

void Driver::on_deadline_timer() {
  if (stopped_) return;
  last_deadline_fired_micros_ = loop_.now_micros();
  scheduled_expiry_micros_.reset();
  expiry_checked_at_applied_ = 0;
  if (replica_->core().role() == Role::kLeader) {
    if (replica_->propose_time_entry(clock_.now_micros()).is_ok()) last_proposal_ms_ = steady_ms();
  }
  schedule_flush();
}

}  // namespace mayfly::node
