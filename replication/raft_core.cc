#include "replication/raft_core.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/assert.h"
#include "replication/codec.h"

namespace mayfly::replication {
namespace {

std::string id_text(uint64_t value) { return std::to_string(value); }

unsigned long long as_ull(uint64_t value) { return static_cast<unsigned long long>(value); }

// Messages whose meaning depends on local state being durable: an ack of entries, a vote, a vote request (the
// candidate's own vote). They wait for the fsync of the Ready that carries that state.
bool must_wait_for_persist(MessageType type) {
  switch (type) {
    case MessageType::kAppendResponse:
    case MessageType::kVote:
    case MessageType::kVoteResponse:
      return true;
    default:
      return false;
  }
}

// Responses report the sender's clock to a leader or candidate (RaftCore's replicated-time ceiling).
bool reports_clock(MessageType type) { return is_response(type) && type != MessageType::kReadIndexResponse; }

constexpr int64_t kNoCeiling = std::numeric_limits<int64_t>::max();

// a + b for b >= 0, saturating at INT64_MAX (clock reports come from the network).
int64_t add_saturating(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}

}  // namespace

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kFollower:
      return "follower";
    case Role::kPreCandidate:
      return "pre-candidate";
    case Role::kCandidate:
      return "candidate";
    case Role::kLeader:
      return "leader";
  }
  return "unknown";
}

std::string_view reject_reason_name(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kWrongSender:
      return "wrong_sender";
    case RejectReason::kWrongRecipient:
      return "wrong_recipient";
    case RejectReason::kTermOutOfRange:
      return "term_out_of_range";
    case RejectReason::kBadEntries:
      return "bad_entries";
    case RejectReason::kBadConfig:
      return "bad_config";
    case RejectReason::kBadSnapshot:
      return "bad_snapshot";
    case RejectReason::kBadResponse:
      return "bad_response";
    case RejectReason::kRivalLeader:
      return "rival_leader";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------------------------
// Construction

Result<std::unique_ptr<RaftCore>> RaftCore::create(const RaftConfig& config, const LogStorage& storage, Prng prng,
                                                   LogIndex applied, SnapshotSink* sink) {
  MAYFLY_RETURN_IF_ERROR(config.validate());
  const HardState hard_state = storage.hard_state();
  const SnapshotMetadata snapshot = storage.snapshot_metadata();
  const LogIndex first = storage.first_index();
  const LogIndex last = storage.last_index();
  if (first.prev() > snapshot.index || snapshot.index > last) {
    return Status::corruption("log storage: snapshot " + id_text(snapshot.index.value()) + " outside [" +
                              id_text(first.value() - 1) + ", " + id_text(last.value()) + "]");
  }
  if (hard_state.commit > last) {
    return Status::corruption("log storage: commit " + id_text(hard_state.commit.value()) + " past last index " +
                              id_text(last.value()));
  }
  const LogIndex committed = std::max(hard_state.commit, snapshot.index);
  applied = std::max(applied, snapshot.index);
  if (applied > committed) {
    return Status::invalid_argument("applied " + id_text(applied.value()) + " past commit " +
                                    id_text(committed.value()));
  }
  // Both read the log (the last entry's time, every entry since the snapshot for the membership): a read error there
  // is a Status for the caller, which cannot start the node.
  try {
    std::unique_ptr<RaftCore> core(new RaftCore(config, storage, std::move(prng), committed, applied, sink));
    core->load_membership();
    return core;
  } catch (const StorageFailure& failure) {
    return failure.status();
  }
}

RaftCore::RaftCore(const RaftConfig& config, const LogStorage& storage, Prng prng, LogIndex committed,
                   LogIndex applied, SnapshotSink* sink)
    : config_(config), storage_(storage), prng_(std::move(prng)), log_(storage, committed, applied), sink_(sink) {
  const HardState hard_state = storage.hard_state();
  persisted_hard_state_ = hard_state;
  become_follower(hard_state.term, NodeId(0));
  vote_ = hard_state.vote;
  term_leader_ = hard_state.leader;
}

void RaftCore::load_membership() {
  const SnapshotMetadata snapshot = storage_.snapshot_metadata();
  base_membership_ = snapshot.membership;
  base_membership_index_ = snapshot.index;
  membership_changes_.clear();
  // Config entries take effect when appended, so every one in the log counts, committed or not.
  LogIndex next = snapshot.index.next();
  while (next <= log_.last_index()) {
    std::vector<Entry> page = log_.slice(next, log_.last_index().next(), config_.max_message_bytes);
    note_appended_entries(page);
    next = page.back().index.next();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Roles

void RaftCore::reset(Term term) {
  if (term_ != term) {
    term_ = term;
    vote_ = NodeId(0);
    term_leader_ = NodeId(0);
    drop_incoming_snapshot();
  }
  leader_ = NodeId(0);
  election_elapsed_ticks_ = 0;
  heartbeat_elapsed_ticks_ = 0;
  reset_randomized_election_timeout();
  transfer_target_ = NodeId(0);
  votes_.clear();
  progress_.clear();
  uncommitted_entries_.clear();
  uncommitted_bytes_ = 0;
  pending_reads_.clear();
  reads_before_commit_.clear();
}

void RaftCore::become_follower(Term term, NodeId leader) {
  reset(term);
  set_leader(leader);
  role_ = Role::kFollower;
}

void RaftCore::set_leader(NodeId leader) {
  leader_ = leader;
  if (leader != NodeId(0)) term_leader_ = leader;
}

void RaftCore::become_pre_candidate() {
  // A pre-election changes neither term nor vote: losing it leaves no trace.
  MAYFLY_ASSERT(role_ != Role::kLeader);
  role_ = Role::kPreCandidate;
  votes_.clear();
  leader_ = NodeId(0);
}

void RaftCore::become_candidate() {
  MAYFLY_ASSERT(role_ != Role::kLeader);
  reset(term_.next());
  vote_ = config_.self;
  role_ = Role::kCandidate;
}

void RaftCore::become_leader() {
  MAYFLY_ASSERT(role_ == Role::kCandidate);
  reset(term_);
  set_leader(config_.self);
  role_ = Role::kLeader;
  sync_progress_with_membership();
  leader_since_tick_ = ticks_;
  leader_start_ts_micros_ = log_.last_ts_micros();
  // Bootstrap entries are stamped with their index: such a log carries no cluster time yet.
  leader_start_time_established_ = log_.last_ts_micros() > static_cast<int64_t>(log_.last_index().value());
  // Raft §8: a new leader commits an entry of its own term, which commits everything before it. It also carries
  // cluster time forward from the last entry.
  const int64_t ts = stamp(now_micros_);
  append_as_leader(Entry{.term = term_,
                         .index = log_.last_index().next(),
                         .ts_micros = ts,
                         .type = EntryType::kEmpty,
                         .data = {}});
  broadcast_append(/*send_if_empty=*/true);
}

bool RaftCore::promotable() const {
  return membership().is_voter(config_.self) && !log_.pending_snapshot().has_value();
}

void RaftCore::campaign(CampaignKind kind, bool leadership_transfer) {
  if (!promotable()) return;
  // Campaigning needs term_.next() within kMaxTerm; a node there stays a follower (the driver logs it loudly).
  if (term_exhausted()) return;
  Term vote_term;
  MessageType request;
  if (kind == CampaignKind::kPreElection) {
    become_pre_candidate();
    vote_term = term_.next();
    request = MessageType::kPreVote;
  } else {
    become_candidate();
    vote_term = term_;
    request = MessageType::kVote;
  }
  votes_[config_.self] = true;
  const int outcome = tally_votes();
  if (outcome > 0) {  // a single voter wins alone
    if (kind == CampaignKind::kPreElection) {
      campaign(CampaignKind::kElection, leadership_transfer);
    } else {
      become_leader();
    }
    return;
  }
  for (NodeId voter : membership().voters) {
    if (voter == config_.self) continue;
    send(Message{.type = request,
                 .to = voter,
                 .term = vote_term,
                 .log_term = log_.last_term(),
                 .index = log_.last_index(),
                 .leadership_transfer = leadership_transfer});
  }
}

int RaftCore::tally_votes() const {
  const Membership& members = membership();
  size_t granted = 0;
  size_t rejected = 0;
  for (const auto& [voter, vote] : votes_) {
    if (!members.is_voter(voter)) continue;
    (vote ? granted : rejected) += 1;
  }
  if (granted >= members.quorum_size()) return 1;
  if (rejected > members.voters.size() - members.quorum_size()) return -1;
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Ticks

void RaftCore::tick(int64_t now_micros) {
  assert_no_ready_in_flight();
  now_micros_ = now_micros;
  ++ticks_;
  if (role_ == Role::kLeader) {
    tick_heartbeat();
  } else {
    tick_election();
  }
}

void RaftCore::tick_election() {
  ++election_elapsed_ticks_;
  if (promotable() && election_elapsed_ticks_ >= randomized_election_timeout_ticks_) {
    election_elapsed_ticks_ = 0;
    campaign(config_.pre_vote ? CampaignKind::kPreElection : CampaignKind::kElection, false);
  }
}

void RaftCore::tick_heartbeat() {
  ++heartbeat_elapsed_ticks_;
  ++election_elapsed_ticks_;
  if (election_elapsed_ticks_ >= config_.election_timeout_ticks) {
    election_elapsed_ticks_ = 0;
    if (config_.check_quorum) {
      if (!quorum_active()) {
        become_follower(term_, NodeId(0));
        return;
      }
      for (auto& [id, progress] : progress_) progress.recent_active = id == config_.self;
    }
    transfer_target_ = NodeId(0);  // a transfer that did not finish within an election timeout is abandoned
  }
  if (heartbeat_elapsed_ticks_ >= config_.heartbeat_interval_ticks) {
    heartbeat_elapsed_ticks_ = 0;
    broadcast_heartbeat();
    // Snapshot chunks travel without retransmission of their own: when acks stop for two heartbeat intervals,
    // resume from the last acknowledged offset.
    // A transfer stopped by a failed read of the snapshot file is retried here, once per heartbeat interval.
    for (auto& [id, progress] : progress_) {
      if (progress.state != ProgressState::kSnapshot || !progress.recent_active) continue;
      if (progress.snapshot_read_failed) {
        progress.snapshot_read_failed = false;
        send_snapshot_chunks(id, progress);
        continue;
      }
      if (progress.snapshot_chunks_in_flight == 0) continue;
      if (++progress.snapshot_stalled_heartbeats >= 2) {
        progress.rewind_snapshot(progress.snapshot_acked_offset);
        send_snapshot_chunks(id, progress);
      }
    }
  }
}

bool RaftCore::quorum_active() const {
  const Membership& members = membership();
  size_t active = 0;
  for (NodeId voter : members.voters) {
    if (voter == config_.self) {
      ++active;
      continue;
    }
    auto it = progress_.find(voter);
    if (it != progress_.end() && it->second.recent_active) ++active;
  }
  return active >= members.quorum_size();
}

// ---------------------------------------------------------------------------------------------------------------
// Step

Status RaftCore::step(const Message& message) {
  assert_no_ready_in_flight();
  last_rejection_ = RejectReason::kNone;
  if (std::optional<Refusal> refusal = validate(message)) {
    last_rejection_ = refusal->reason;
    return Status::invalid_argument(std::string(reject_reason_name(refusal->reason)) + ": " + refusal->what);
  }
  note_clock_report(message);

  if (message.term > term_) {
    if (is_vote_request(message.type)) {
      // Check-quorum lease: while we hear from a leader, a node that wants an election is the one partitioned away
      // (or removed); ignoring it keeps it from deposing a healthy leader.
      const bool in_lease = config_.check_quorum && leader_ != NodeId(0) &&
                            election_elapsed_ticks_ < config_.election_timeout_ticks;
      if (in_lease && !message.leadership_transfer) return Status::ok();
    }
    if (message.type == MessageType::kPreVote) {
      // A pre-vote does not change our term.
    } else if (message.type == MessageType::kPreVoteResponse && !message.reject) {
      // Granted pre-votes carry the term the candidate will campaign in; our term does not move yet.
    } else {
      const bool from_leader = message.type == MessageType::kAppend || message.type == MessageType::kHeartbeat ||
                               message.type == MessageType::kSnapshot;
      become_follower(message.term, from_leader ? message.from : NodeId(0));
    }
  } else if (message.term < term_) {
    if ((config_.check_quorum || config_.pre_vote) &&
        (message.type == MessageType::kAppend || message.type == MessageType::kHeartbeat)) {
      // A stale leader (e.g. back from a partition) learns our term from this and steps down. Without it, with
      // pre-vote a node at a higher term could never be heard by it.
      send(Message{.type = MessageType::kAppendResponse, .to = message.from, .term = term_});
    } else if (message.type == MessageType::kPreVote) {
      send(Message{.type = MessageType::kPreVoteResponse,
                   .to = message.from,
                   .term = term_,
                   .reject = true,
                   .leader = term_leader_});
    }
    return Status::ok();
  }
  if (is_vote_response(message.type) && message.reject && message.term == term_ && message.leader != NodeId(0) &&
      message.leader != config_.self && role_ != Role::kLeader && term_leader_ == NodeId(0)) {
    // A voter names the leader it follows in our term: one we may not have heard yet — its entries may be the ones
    // that make it a member in our eyes (node/peer_admission.h). Only remembered: Raft still waits to hear from it.
    term_leader_ = message.leader;
  }

  if (is_vote_request(message.type)) {
    handle_vote_request(message);
    return Status::ok();
  }
  switch (role_) {
    case Role::kLeader:
      step_leader(message);
      break;
    case Role::kPreCandidate:
    case Role::kCandidate:
      step_candidate(message);
      break;
    case Role::kFollower:
      step_follower(message);
      break;
  }
  return Status::ok();
}

std::optional<RaftCore::Refusal> RaftCore::validate(const Message& message) const {
  if (message.to != config_.self) {
    return Refusal{RejectReason::kWrongRecipient, "message for node " + id_text(message.to.value()) +
                                                      " stepped into node " + id_text(config_.self.value())};
  }
  if (message.from == NodeId(0) || message.from == config_.self) {
    return Refusal{RejectReason::kWrongSender, "message from invalid sender " + id_text(message.from.value())};
  }
  if (message.term > kMaxTerm || message.log_term > kMaxTerm || message.snapshot.term > kMaxTerm) {
    return Refusal{RejectReason::kTermOutOfRange, "term " + id_text(message.term.value()) + " (log term " +
                                                      id_text(message.log_term.value()) + ") above the maximum " +
                                                      id_text(kMaxTerm.value())};
  }
  if (message.type == MessageType::kAppend) {
    if (std::optional<Refusal> refusal = validate_append(message)) return refusal;
  }
  if (message.type == MessageType::kSnapshot) {
    if (std::optional<Refusal> refusal = validate_snapshot(message)) return refusal;
  }
  // What follows checks content against local state; a message from an older term is only answered, never acted
  // on, so it is not checked (an old leader's entries may well conflict with what is committed now).
  if (message.term < term_) return std::nullopt;
  const bool from_leader = message.type == MessageType::kAppend || message.type == MessageType::kHeartbeat ||
                           message.type == MessageType::kSnapshot;
  if (role_ == Role::kLeader && message.term == term_) {
    if (from_leader) {
      // Election safety says this cannot come from a correct peer: refuse it rather than follow a second leader.
      return Refusal{RejectReason::kRivalLeader, "node " + id_text(config_.self.value()) + " leads term " +
                                                     id_text(term_.value()) + " but got " + message.describe()};
    }
    if (message.type == MessageType::kAppendResponse && !message.reject && message.index > log_.last_index()) {
      return Refusal{RejectReason::kBadResponse, "acknowledges index " + id_text(message.index.value()) +
                                                     " past the last index " + id_text(log_.last_index().value())};
    }
    if (message.type == MessageType::kHeartbeatResponse && message.read_round > read_round_) {
      return Refusal{RejectReason::kBadResponse, "acknowledges read round " + id_text(message.read_round) +
                                                     " never sent (latest " + id_text(read_round_) + ")"};
    }
  }
  if (message.type == MessageType::kAppend) return validate_append_against_log(message);
  if (message.type == MessageType::kSnapshot && message.snapshot.index > log_.committed() &&
      message.snapshot.ts_micros <= log_.ts_at(log_.committed())) {
    return Refusal{RejectReason::kBadSnapshot, "snapshot time " + std::to_string(message.snapshot.ts_micros) +
                                                   " not after the committed entry's"};
  }
  return std::nullopt;
}

std::optional<RaftCore::Refusal> RaftCore::validate_append(const Message& message) const {
  const auto bad = [](std::string what) { return Refusal{RejectReason::kBadEntries, "append: " + std::move(what)}; };
  if (message.log_term > message.term) return bad("log_term above the leader's term");
  if (message.index.value() > UINT64_MAX - message.entries.size()) return bad("entry indexes overflow");
  LogIndex expected = message.index.next();
  Term previous_term = message.log_term;
  const Entry* previous = nullptr;
  for (const Entry& entry : message.entries) {
    if (entry.index != expected) return bad("entries not contiguous");
    if (entry.term < previous_term || entry.term > message.term) return bad("entry terms out of order");
    if (entry.ts_micros < 0 || entry.ts_micros > kMaxTimestampMicros) {
      return bad("entry " + id_text(entry.index.value()) + " has ts " + std::to_string(entry.ts_micros) +
                 " outside [0, 2^62]");
    }
    if (previous != nullptr && entry.ts_micros <= previous->ts_micros) {
      return bad("entry " + id_text(entry.index.value()) + " does not advance time");
    }
    expected = expected.next();
    previous_term = entry.term;
    previous = &entry;
  }
  return std::nullopt;
}

std::optional<RaftCore::Refusal> RaftCore::validate_append_against_log(const Message& message) const {
  // Mirrors handle_append: only entries that would be appended are checked.
  if (message.index < log_.committed() || !log_.match_term(message.index, message.log_term)) return std::nullopt;
  const LogIndex conflict = log_.find_conflict(message.entries);
  if (conflict == LogIndex(0)) return std::nullopt;
  if (conflict <= log_.committed()) {
    return Refusal{RejectReason::kBadEntries, "append: entry " + id_text(conflict.value()) +
                                                  " conflicts with a committed entry (commit " +
                                                  id_text(log_.committed().value()) + ")"};
  }
  // Entries before `conflict` match ours (same index and term: the same entry), so the first fresh one must come
  // after our entry before it in time, as every entry of a log does.
  const size_t first_fresh = conflict.value() - message.index.value() - 1;
  const Entry& fresh = message.entries[first_fresh];
  if (fresh.ts_micros <= log_.ts_at(conflict.prev())) {
    return Refusal{RejectReason::kBadEntries, "append: entry " + id_text(conflict.value()) + " at ts " +
                                                  std::to_string(fresh.ts_micros) + " does not advance time"};
  }
  // Config changes take effect when appended: each must decode and apply to the membership before it.
  Membership members = membership_at(conflict.prev());
  for (size_t i = first_fresh; i < message.entries.size(); ++i) {
    const Entry& entry = message.entries[i];
    if (entry.type != EntryType::kConfigChange) continue;
    Result<ConfigChange> change = decode_config_change(entry.data);
    if (!change.is_ok()) {
      return Refusal{RejectReason::kBadConfig, "config entry " + id_text(entry.index.value()) + ": " +
                                                   change.status().to_string()};
    }
    const Status applied = apply_config_change(*change, members);
    if (!applied.is_ok()) {
      return Refusal{RejectReason::kBadConfig, "config entry " + id_text(entry.index.value()) + ": " +
                                                   applied.to_string()};
    }
  }
  return std::nullopt;
}

std::optional<RaftCore::Refusal> RaftCore::validate_snapshot(const Message& message) const {
  const SnapshotMetadata& metadata = message.snapshot;
  const auto bad = [](std::string what) {
    return Refusal{RejectReason::kBadSnapshot, "snapshot: " + std::move(what)};
  };
  if (metadata.term > message.term) return bad("term above the leader's");
  if (metadata.index == LogIndex(0) || metadata.term == Term(0)) return bad("no index or term");
  if (metadata.membership.voters.empty()) return bad("no voters");
  if (metadata.ts_micros < 0 || metadata.ts_micros > kMaxTimestampMicros) return bad("ts outside [0, 2^62]");
  if (message.snapshot_offset > metadata.size_bytes ||
      message.snapshot_chunk.size() > metadata.size_bytes - message.snapshot_offset) {
    return bad("chunk outside the snapshot");
  }
  return std::nullopt;
}

void RaftCore::handle_vote_request(const Message& message) {
  const bool pre = message.type == MessageType::kPreVote;
  const MessageType response = pre ? MessageType::kPreVoteResponse : MessageType::kVoteResponse;
  // We may vote for the same candidate again (a retransmission), for anyone if we have neither voted nor follow a
  // leader in this term, and pre-vote for anyone asking about a later term.
  const bool can_vote = vote_ == message.from || (vote_ == NodeId(0) && leader_ == NodeId(0)) ||
                        (pre && message.term > term_);
  if (can_vote && log_.is_up_to_date(message.index, message.log_term)) {
    send(Message{.type = response, .to = message.from, .term = message.term});
    if (!pre) {
      election_elapsed_ticks_ = 0;
      vote_ = message.from;
    }
  } else {
    send(Message{.type = response, .to = message.from, .term = term_, .reject = true, .leader = term_leader_});
  }
}

void RaftCore::step_follower(const Message& message) {
  switch (message.type) {
    case MessageType::kAppend:
      election_elapsed_ticks_ = 0;
      set_leader(message.from);
      handle_append(message);
      break;
    case MessageType::kHeartbeat:
      election_elapsed_ticks_ = 0;
      set_leader(message.from);
      handle_heartbeat(message);
      break;
    case MessageType::kSnapshot:
      election_elapsed_ticks_ = 0;
      set_leader(message.from);
      handle_snapshot(message);
      break;
    case MessageType::kTimeoutNow:
      // The leader hands over: campaign now, without pre-vote, telling voters to ignore their lease.
      campaign(CampaignKind::kElection, /*leadership_transfer=*/true);
      break;
    case MessageType::kReadIndexResponse:
      read_states_.push_back(ReadState{message.index, message.context});
      break;
    default:
      break;  // responses meant for an earlier role, or a ReadIndex sent to a former leader: dropped
  }
}

void RaftCore::step_candidate(const Message& message) {
  switch (message.type) {
    case MessageType::kAppend:
      become_follower(term_, message.from);
      handle_append(message);
      return;
    case MessageType::kHeartbeat:
      become_follower(term_, message.from);
      handle_heartbeat(message);
      return;
    case MessageType::kSnapshot:
      become_follower(term_, message.from);
      handle_snapshot(message);
      return;
    case MessageType::kPreVoteResponse:
    case MessageType::kVoteResponse: {
      const bool expected = (role_ == Role::kPreCandidate) == (message.type == MessageType::kPreVoteResponse);
      if (!expected) return;
      votes_.emplace(message.from, !message.reject);
      const int outcome = tally_votes();
      if (outcome > 0) {
        if (role_ == Role::kPreCandidate) {
          campaign(CampaignKind::kElection, false);
        } else {
          become_leader();
        }
      } else if (outcome < 0) {
        become_follower(term_, NodeId(0));
      }
      return;
    }
    default:
      return;
  }
}

void RaftCore::step_leader(const Message& message) {
  switch (message.type) {
    case MessageType::kAppend:
    case MessageType::kHeartbeat:
    case MessageType::kSnapshot:
      // validate() refuses these (kRivalLeader); reaching here is a bug in the core.
      MAYFLY_UNREACHABLE("election safety: node %llu leads term %llu but got %s from node %llu",
                         as_ull(config_.self.value()), as_ull(term_.value()), message.describe().c_str(),
                         as_ull(message.from.value()));
    case MessageType::kReadIndex:
      (void)handle_read_request(message.from, message.context);  // refused reads are dropped; the sender retries
      return;
    default:
      break;
  }
  auto it = progress_.find(message.from);
  if (it == progress_.end()) return;  // not (or no longer) a member
  Progress& progress = it->second;
  switch (message.type) {
    case MessageType::kAppendResponse:
      progress.recent_active = true;
      handle_append_response(message, progress);
      break;
    case MessageType::kHeartbeatResponse:
      progress.recent_active = true;
      handle_heartbeat_response(message, progress);
      break;
    case MessageType::kSnapshotResponse:
      progress.recent_active = true;
      handle_snapshot_response(message, progress);
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Follower side of replication

void RaftCore::handle_append(const Message& message) {
  if (message.index < log_.committed()) {
    // Everything up to our commit is known to match; say so, and the leader continues from there.
    send(Message{.type = MessageType::kAppendResponse, .to = message.from, .term = term_, .index = log_.committed()});
    return;
  }
  if (!log_.match_term(message.index, message.log_term)) {
    // Fast backtracking: name our highest entry that may match, so the leader skips a whole term per round trip.
    const LogIndex hint =
        log_.find_conflict_by_term(std::min(message.index, log_.last_index()), message.log_term);
    send(Message{.type = MessageType::kAppendResponse,
                 .to = message.from,
                 .term = term_,
                 .log_term = log_.term(hint).value_or(Term(0)),
                 .index = message.index,
                 .reject = true,
                 .reject_hint = hint});
    return;
  }
  const LogIndex last_new = LogIndex(message.index.value() + message.entries.size());
  const LogIndex conflict = log_.find_conflict(message.entries);
  if (conflict != LogIndex(0)) {
    // validate_append_against_log refused anything these two asserts check; they guard the core's own logic.
    MAYFLY_ASSERT_MSG(conflict > log_.committed(), "leader %llu conflicts with committed entry %llu",
                      as_ull(message.from.value()), as_ull(conflict.value()));
    if (conflict <= log_.last_index()) note_truncation(conflict);
    std::vector<Entry> fresh(message.entries.begin() + static_cast<ptrdiff_t>(conflict.value() -
                                                                              message.index.value() - 1),
                             message.entries.end());
    MAYFLY_ASSERT_MSG(fresh.front().ts_micros > log_.ts_at(conflict.prev()),
                      "leader's entry %llu does not advance time", as_ull(conflict.value()));
    log_.append(fresh);
    note_appended_entries(fresh);
  }
  log_.commit_to(std::min(message.commit, last_new));
  send(Message{.type = MessageType::kAppendResponse, .to = message.from, .term = term_, .index = last_new});
}

void RaftCore::handle_heartbeat(const Message& message) {
  // The leader caps the commit it sends at what it knows we have, so this never passes our matching prefix.
  log_.commit_to(std::min(message.commit, log_.last_index()));
  send(Message{.type = MessageType::kHeartbeatResponse,
               .to = message.from,
               .term = term_,
               .read_round = message.read_round});
}

void RaftCore::handle_snapshot(const Message& message) {
  const SnapshotMetadata& metadata = message.snapshot;
  if (metadata.index <= log_.committed()) {
    // Already have it (e.g. a retransmitted chunk after we installed it): tell the leader where we are.
    drop_incoming_snapshot();
    send(Message{.type = MessageType::kAppendResponse, .to = message.from, .term = term_, .index = log_.committed()});
    return;
  }
  if (metadata.size_bytes > config_.max_snapshot_bytes) {
    // Refuse: the leader keeps retrying, and an operator sees the follower stuck (and the count).
    drop_incoming_snapshot();
    ++snapshot_receive_errors_;
    last_snapshot_error_ = "refused a snapshot declaring " + std::to_string(metadata.size_bytes) +
                           " bytes (max_snapshot_bytes " + std::to_string(config_.max_snapshot_bytes) + ")";
    return;
  }
  if (message.snapshot_offset == 0) {
    drop_incoming_snapshot();
    if (sink_ != nullptr) {
      if (Status begun = sink_->receive_begin(metadata); !begun.is_ok()) {
        ++snapshot_receive_errors_;
        last_snapshot_error_ = "cannot receive the snapshot at " + id_text(metadata.index.value()) + ": " +
                               begun.to_string();
        return;  // like a refused size: the leader retries
      }
    }
    incoming_snapshot_ = Snapshot{.metadata = metadata, .data = {}, .staged = sink_ != nullptr};
    incoming_received_ = 0;
  }
  const bool same_snapshot = incoming_snapshot_.has_value() && incoming_snapshot_->metadata == metadata;
  if (!same_snapshot || message.snapshot_offset != incoming_received_ ||
      message.snapshot_offset + message.snapshot_chunk.size() > metadata.size_bytes ||
      (message.snapshot_done && message.snapshot_offset + message.snapshot_chunk.size() != metadata.size_bytes)) {
    // Out of order (a lost or reordered chunk) or a different snapshot: ask for what we can use.
    reject_snapshot_chunk(message, same_snapshot ? incoming_received_ : 0);
    return;
  }
  if (sink_ != nullptr) {
    if (Status written = sink_->receive_append(message.snapshot_chunk); !written.is_ok()) {
      ++snapshot_receive_errors_;
      last_snapshot_error_ = "cannot write the incoming snapshot: " + written.to_string();
      // No answer: the leader resends after two silent heartbeats and is then told to start over, so a disk that
      // keeps failing costs one attempt per two heartbeats, not a storm of retransmissions.
      drop_incoming_snapshot();
      return;
    }
  } else {
    incoming_snapshot_->data += message.snapshot_chunk;
  }
  incoming_received_ += message.snapshot_chunk.size();
  if (!message.snapshot_done) {
    send(Message{.type = MessageType::kSnapshotResponse,
                 .to = message.from,
                 .term = term_,
                 .index = metadata.index,
                 .snapshot = metadata,
                 .snapshot_offset = incoming_received_});
    return;
  }
  if (log_.match_term(metadata.index, metadata.term)) {
    // Our log already has the snapshot's last entry: everything up to it is committed, keep the log (Raft §7).
    drop_incoming_snapshot();
    log_.commit_to(metadata.index);
    send(Message{.type = MessageType::kAppendResponse, .to = message.from, .term = term_, .index = log_.committed()});
    return;
  }
  if (sink_ != nullptr) {
    if (Status finished = sink_->receive_finish(); !finished.is_ok()) {
      ++snapshot_receive_errors_;
      last_snapshot_error_ = "cannot write the incoming snapshot: " + finished.to_string();
      drop_incoming_snapshot();  // no answer, as above
      return;
    }
  }
  Snapshot snapshot = std::move(*incoming_snapshot_);
  incoming_snapshot_.reset();
  incoming_received_ = 0;
  base_membership_ = metadata.membership;
  base_membership_index_ = metadata.index;
  membership_changes_.clear();
  log_.restore(std::move(snapshot));
  send(Message{.type = MessageType::kAppendResponse, .to = message.from, .term = term_, .index = log_.last_index()});
}

void RaftCore::drop_incoming_snapshot() {
  if (incoming_snapshot_.has_value() && sink_ != nullptr) sink_->receive_abort();
  incoming_snapshot_.reset();
  incoming_received_ = 0;
}

void RaftCore::reject_snapshot_chunk(const Message& message, uint64_t offset) {
  send(Message{.type = MessageType::kSnapshotResponse,
               .to = message.from,
               .term = term_,
               .index = message.snapshot.index,
               .reject = true,
               .snapshot = message.snapshot,
               .snapshot_offset = offset});
}

// ---------------------------------------------------------------------------------------------------------------
// Replicated time

void RaftCore::note_clock_report(const Message& message) {
  // Only members' reports are kept (the map stays bounded); a stale or delayed report only underestimates.
  if (!reports_clock(message.type) || message.clock_micros <= 0 || !membership().contains(message.from)) return;
  clock_reports_[message.from] = ClockReport{message.clock_micros, ticks_};
}

std::optional<int64_t> RaftCore::quorum_clock_estimate(int64_t now_micros) const {
  const Membership& members = membership();
  std::vector<int64_t> clocks;
  for (NodeId voter : members.voters) {
    if (voter == config_.self) {
      clocks.push_back(now_micros);
      continue;
    }
    if (std::optional<int64_t> clock = clock_estimate(voter)) clocks.push_back(*clock);
  }
  // Voters that never reported count as unknown; with fewer than a quorum known there is no estimate. Taking the
  // quorum-th highest of the known ones can only underestimate (an unknown clock might have been higher).
  if (members.voters.empty() || clocks.size() < members.quorum_size()) return std::nullopt;
  std::sort(clocks.begin(), clocks.end(), std::greater<>());
  return clocks[members.quorum_size() - 1];
}

int64_t RaftCore::time_ceiling_micros(int64_t now_micros) const {
  if (role_ != Role::kLeader || config_.max_clock_offset_micros == kNoClockOffsetLimit) return kNoCeiling;
  if (std::optional<int64_t> quorum = quorum_clock_estimate(now_micros)) {
    return add_saturating(*quorum, config_.max_clock_offset_micros);
  }
  if (!leader_start_time_established_) return kNoCeiling;
  // No quorum of reports yet: time moves no faster than our ticks since the election.
  return add_saturating(leader_start_ts_micros_, micros_since_tick(leader_since_tick_));
}

int64_t RaftCore::micros_since_tick(int64_t tick) const {
  const int64_t elapsed_ticks = std::max<int64_t>(0, ticks_ - tick);
  const int64_t max_ticks = std::numeric_limits<int64_t>::max() / config_.tick_interval_micros;
  return std::min(elapsed_ticks, max_ticks) * config_.tick_interval_micros;
}

std::optional<int64_t> RaftCore::clock_estimate(NodeId member) const {
  auto it = clock_reports_.find(member);
  if (it == clock_reports_.end()) return std::nullopt;
  return add_saturating(it->second.clock_micros, micros_since_tick(it->second.at_tick));
}

int64_t RaftCore::stamp(int64_t now_micros) {
  const int64_t ceiling = time_ceiling_micros(now_micros);
  const int64_t ts = std::max(std::min(now_micros, ceiling), log_.last_ts_micros() + 1);
  if (ts < now_micros) {  // only the ceiling makes ts fall below our clock
    ++clock_holds_;
    last_clock_hold_ahead_micros_ = now_micros - ts;
    last_clock_hold_ts_micros_ = ts;
  }
  return ts;
}

// ---------------------------------------------------------------------------------------------------------------
// Leader side of replication

Result<Proposal> RaftCore::propose(std::string data) {
  return propose_entry(EntryType::kNormal, std::move(data), now_micros_);
}

Result<Proposal> RaftCore::propose(std::string data, int64_t now_micros) {
  return propose_entry(EntryType::kNormal, std::move(data), now_micros);
}

Result<Proposal> RaftCore::propose_time_entry() { return propose_entry(EntryType::kEmpty, {}, now_micros_); }

Result<Proposal> RaftCore::propose_time_entry(int64_t now_micros) {
  return propose_entry(EntryType::kEmpty, {}, now_micros);
}

Result<Proposal> RaftCore::propose_config_change(const ConfigChange& change) {
  if (role_ != Role::kLeader) return Status::unavailable("not leader");
  if (!committed_in_current_term()) {
    return Status::unavailable("leader has not committed an entry of its term yet");
  }
  if (change.type == ConfigChangeType::kAddVoter) {
    return Status::invalid_argument("add the node as a learner, then promote it once it has caught up");
  }
  if (config_change_pending()) return Status::unavailable("another membership change is not committed yet");
  Membership next = membership();
  MAYFLY_RETURN_IF_ERROR(apply_config_change(change, next));
  if (change.type == ConfigChangeType::kPromoteLearner) {
    // A voter that lags would hold up commits (it counts toward every quorum); promote only a caught-up learner.
    auto it = progress_.find(change.node);
    if (it == progress_.end() || it->second.match < log_.committed()) {
      return Status::unavailable("learner " + id_text(change.node.value()) + " has not caught up yet");
    }
  }
  return propose_entry(EntryType::kConfigChange, encode_config_change(change), now_micros_);
}

Result<Proposal> RaftCore::propose_entry(EntryType type, std::string data, int64_t now_micros) {
  assert_no_ready_in_flight();
  if (role_ != Role::kLeader) {
    return Status::unavailable("not leader; leader is node " + id_text(leader_.value()));
  }
  if (transfer_target_ != NodeId(0)) return Status::unavailable("leadership transfer in progress");
  if (data.size() > config_.max_entry_bytes) {
    return Status::invalid_argument("entry of " + id_text(data.size()) + " bytes over max_entry_bytes");
  }
  const uint64_t bytes = data.size() + Entry::kOverheadBytes;
  if (uncommitted_bytes_ > 0 && uncommitted_bytes_ + bytes > config_.max_uncommitted_bytes) {
    return Status::unavailable("too many uncommitted bytes; retry later");
  }
  now_micros_ = now_micros;
  Entry entry{.term = term_,
              .index = log_.last_index().next(),
              .ts_micros = stamp(now_micros),
              .type = type,
              .data = std::move(data)};
  const Proposal proposal{entry.index, entry.term, entry.ts_micros};
  append_as_leader(std::move(entry));
  // Appends go out when the driver asks for the next Ready, so proposals made in one batch share messages.
  return proposal;
}

void RaftCore::append_as_leader(Entry entry) {
  uncommitted_entries_.push_back(UncommittedEntry{entry.index, entry.size_bytes()});
  uncommitted_bytes_ += entry.size_bytes();
  std::vector<Entry> entries;
  entries.push_back(std::move(entry));
  log_.append(entries);
  note_appended_entries(entries);
}

bool RaftCore::send_append(NodeId to, bool send_if_empty) {
  auto it = progress_.find(to);
  MAYFLY_ASSERT(it != progress_.end());
  Progress& progress = it->second;
  if (progress.is_paused()) return false;
  const LogIndex previous = progress.next.prev();
  const std::optional<Term> previous_term = log_.term(previous);
  if (!previous_term.has_value() || progress.next < log_.first_index()) return start_snapshot(to, progress);
  std::vector<Entry> entries;
  if (progress.next <= log_.last_index()) {
    entries = log_.slice(progress.next, log_.last_index().next(), config_.max_message_bytes);
  }
  if (entries.empty() && !send_if_empty) return false;
  if (!entries.empty()) {
    if (progress.state == ProgressState::kReplicate) {
      // Pipelining: assume it arrives and continue after it; a rejection rewinds.
      progress.next = entries.back().index.next();
      uint64_t bytes = 0;
      for (const Entry& entry : entries) bytes += entry.size_bytes();
      progress.inflights.add(entries.back().index, bytes);
    }
  }
  if (progress.state == ProgressState::kProbe) progress.probe_sent = true;
  send(Message{.type = MessageType::kAppend,
               .to = to,
               .term = term_,
               .log_term = *previous_term,
               .index = previous,
               .entries = std::move(entries),
               .commit = log_.committed()});
  return true;
}

bool RaftCore::start_snapshot(NodeId to, Progress& progress) {
  // A node we have not heard from lately may be down; a snapshot is expensive, so wait until it answers.
  if (!progress.recent_active) return false;
  if (!storage_.snapshot_data_ready()) {
    // The storage checkpoints without exporting: ask for the data; the next heartbeat's probe comes back here.
    snapshot_wanted_ = true;
    return false;
  }
  const SnapshotMetadata snapshot = storage_.snapshot_metadata();
  MAYFLY_ASSERT_MSG(snapshot.index.next() >= log_.first_index(), "compacted entries must be covered by a snapshot");
  progress.become_snapshot(snapshot);
  progress.snapshot_heard_tick = ticks_;
  send_snapshot_chunks(to, progress);
  return true;
}

void RaftCore::send_snapshot_chunks(NodeId to, Progress& progress) {
  const int64_t max_chunks = std::clamp<int64_t>(
      static_cast<int64_t>(config_.max_snapshot_bytes_in_flight / std::max<uint64_t>(config_.snapshot_chunk_bytes, 1)),
      1, config_.max_inflight_messages);
  while (!progress.snapshot_done_sent && progress.snapshot_chunks_in_flight < max_chunks) {
    const SnapshotMetadata& snapshot = progress.snapshot;
    const uint64_t offset = progress.snapshot_sent_offset;
    Result<std::string> chunk = storage_.read_snapshot_chunk(snapshot.index, offset, config_.snapshot_chunk_bytes);
    if (!chunk.is_ok()) {
      if (chunk.status().code() != StatusCode::kNotFound) {
        // The file could not be read (EIO, EMFILE, ...): the node's state is intact, only this transfer stalls.
        // Count it and try again at the next heartbeat; the follower keeps asking meanwhile.
        ++snapshot_read_errors_;
        last_snapshot_error_ = "read snapshot " + id_text(snapshot.index.value()) + " for node " +
                               id_text(to.value()) + ": " + chunk.status().to_string();
        progress.snapshot_read_failed = true;
        return;
      }
      // The snapshot was replaced by a newer one: start over with it. (The same one again would loop forever.)
      const LogIndex gone = snapshot.index;
      if (!storage_.snapshot_data_ready()) {
        // Replaced by a checkpoint without data: probe again; the probe asks for the data (start_snapshot).
        progress.abandon_snapshot();
        snapshot_wanted_ = true;
        return;
      }
      progress.become_snapshot(storage_.snapshot_metadata());
      MAYFLY_ASSERT_MSG(progress.snapshot.index != gone, "storage reports snapshot %llu gone but still offers it",
                        static_cast<unsigned long long>(gone.value()));
      continue;
    }
    MAYFLY_ASSERT(offset + chunk->size() <= snapshot.size_bytes);
    MAYFLY_ASSERT_MSG(!chunk->empty() || offset == snapshot.size_bytes, "empty snapshot chunk before the end");
    const bool done = offset + chunk->size() == snapshot.size_bytes;
    progress.snapshot_sent_offset += chunk->size();
    progress.snapshot_done_sent = done;
    if (done) progress.snapshot_done_sent_tick = ticks_;
    ++progress.snapshot_chunks_in_flight;
    send(Message{.type = MessageType::kSnapshot,
                 .to = to,
                 .term = term_,
                 .commit = log_.committed(),
                 .snapshot = snapshot,
                 .snapshot_offset = offset,
                 .snapshot_chunk = std::move(chunk).value(),
                 .snapshot_done = done});
  }
}

void RaftCore::broadcast_append(bool send_if_empty) {
  for (auto& [id, progress] : progress_) {
    if (id != config_.self) send_append(id, send_if_empty);
  }
}

void RaftCore::broadcast_heartbeat() {
  for (const auto& [id, progress] : progress_) {
    if (id == config_.self) continue;
    send(Message{.type = MessageType::kHeartbeat,
                 .to = id,
                 .term = term_,
                 .commit = std::min(progress.match, log_.committed()),
                 .read_round = read_round_});
  }
}

void RaftCore::send_timeout_now(NodeId to) {
  send(Message{.type = MessageType::kTimeoutNow, .to = to, .term = term_});
}

void RaftCore::handle_append_response(const Message& message, Progress& progress) {
  if (message.reject) {
    // The follower named its highest entry that may match (reject_hint, with its term in log_term); skip to our
    // highest entry at or below it whose term is not above that.
    LogIndex match_hint = message.reject_hint;
    if (message.log_term > Term(0)) match_hint = log_.find_conflict_by_term(message.reject_hint, message.log_term);
    if (progress.maybe_decrease_to(message.index, match_hint)) {
      if (progress.state == ProgressState::kReplicate) progress.become_probe();
      send_append(message.from, /*send_if_empty=*/true);
    }
    return;
  }
  const bool was_paused = progress.is_paused();
  if (!progress.maybe_update(message.index)) return;
  switch (progress.state) {
    case ProgressState::kProbe:
      progress.become_replicate();
      break;
    case ProgressState::kSnapshot:
      if (progress.match >= progress.snapshot.index || progress.match.next() >= log_.first_index()) {
        progress.become_probe();
        progress.become_replicate();
      }
      break;
    case ProgressState::kReplicate:
      progress.inflights.free_up_to(message.index);
      break;
  }
  if (maybe_commit()) {
    on_leader_commit_advanced();
    if (role_ != Role::kLeader) return;
    broadcast_append(/*send_if_empty=*/true);
  } else if (was_paused) {
    send_append(message.from, /*send_if_empty=*/true);
  }
  while (send_append(message.from, /*send_if_empty=*/false)) {
  }
  if (message.from == transfer_target_ && progress.match == log_.last_index()) send_timeout_now(message.from);
}

void RaftCore::handle_heartbeat_response(const Message& message, Progress& progress) {
  progress.probe_sent = false;
  if (progress.state == ProgressState::kReplicate && progress.inflights.full()) progress.inflights.free_first_one();
  if (progress.match < log_.last_index()) send_append(message.from, /*send_if_empty=*/true);
  if (message.read_round > progress.read_round_acked) {
    progress.read_round_acked = message.read_round;
    advance_reads();
  }
}

void RaftCore::handle_snapshot_response(const Message& message, Progress& progress) {
  if (progress.state != ProgressState::kSnapshot || message.index != progress.snapshot.index) return;  // stale
  if (message.reject) {
    progress.rewind_snapshot(message.snapshot_offset);
  } else if (message.snapshot_offset > progress.snapshot_acked_offset) {
    progress.snapshot_acked_offset = std::min(message.snapshot_offset, progress.snapshot_sent_offset);
    progress.snapshot_stalled_heartbeats = 0;
    progress.snapshot_heard_tick = ticks_;
    const uint64_t unacked = progress.snapshot_sent_offset - progress.snapshot_acked_offset;
    progress.snapshot_chunks_in_flight = static_cast<int64_t>(
        (unacked + config_.snapshot_chunk_bytes - 1) / config_.snapshot_chunk_bytes + (progress.snapshot_done_sent &&
                                                                                       unacked == 0 ? 1 : 0));
  }
  send_snapshot_chunks(message.from, progress);
}

bool RaftCore::maybe_commit() {
  const Membership& members = membership();
  if (members.voters.empty()) return false;
  std::vector<LogIndex> matches;
  for (NodeId voter : members.voters) {
    if (voter == config_.self) {
      matches.push_back(log_.stable_last_index());  // only what our own disk holds counts
      continue;
    }
    auto it = progress_.find(voter);
    matches.push_back(it == progress_.end() ? LogIndex(0) : it->second.match);
  }
  std::sort(matches.begin(), matches.end(), std::greater<>());
  const LogIndex quorum_index = matches[members.quorum_size() - 1];
  // Raft §5.4.2 (Figure 8): only an entry of the current term is committed by counting replicas.
  if (quorum_index <= log_.committed() || log_.term(quorum_index) != term_) return false;
  log_.commit_to(quorum_index);
  return true;
}

void RaftCore::on_leader_commit_advanced() {
  while (!uncommitted_entries_.empty() && uncommitted_entries_.front().index <= log_.committed()) {
    uncommitted_bytes_ -= uncommitted_entries_.front().bytes;
    uncommitted_entries_.pop_front();
  }
  if (!reads_before_commit_.empty() && committed_in_current_term()) {
    start_reads(std::exchange(reads_before_commit_, {}));
  }
  if (!membership().is_voter(config_.self) && !config_change_pending()) {
    // Our removal is committed: step down, and let the most up-to-date remaining voter campaign at once instead of
    // waiting for an election timeout.
    NodeId successor;
    for (NodeId voter : membership().voters) {
      auto it = progress_.find(voter);
      if (it != progress_.end() && it->second.match == log_.last_index()) successor = voter;
    }
    if (successor != NodeId(0)) send_timeout_now(successor);
    become_follower(term_, NodeId(0));
  }
}

bool RaftCore::committed_in_current_term() const { return log_.term(log_.committed()) == term_; }

// ---------------------------------------------------------------------------------------------------------------
// Membership

const Membership& RaftCore::membership() const {
  return membership_changes_.empty() ? base_membership_ : membership_changes_.back().second;
}

Membership RaftCore::membership_at(LogIndex index) const {
  MAYFLY_ASSERT_MSG(index >= base_membership_index_, "membership at %llu is before the snapshot at %llu",
                    as_ull(index.value()), as_ull(base_membership_index_.value()));
  Membership result = base_membership_;
  for (const auto& [change_index, members] : membership_changes_) {
    if (change_index > index) break;
    result = members;
  }
  return result;
}

bool RaftCore::config_change_pending() const {
  return !membership_changes_.empty() && membership_changes_.back().first > log_.committed();
}

void RaftCore::note_appended_entries(const std::vector<Entry>& entries) {
  bool changed = false;
  for (const Entry& entry : entries) {
    if (entry.type != EntryType::kConfigChange) continue;
    Result<ConfigChange> change = decode_config_change(entry.data);
    MAYFLY_ASSERT_MSG(change.is_ok(), "config entry %llu: %s", as_ull(entry.index.value()),
                      change.status().to_string().c_str());
    Membership next = membership();
    const Status applied = apply_config_change(*change, next);
    // The leader validated the change against the same log prefix (and a follower's validate_append_against_log
    // checked it again on arrival), so it applies here too.
    MAYFLY_ASSERT_MSG(applied.is_ok(), "config entry %llu: %s", as_ull(entry.index.value()),
                      applied.to_string().c_str());
    membership_changes_.emplace_back(entry.index, std::move(next));
    changed = true;
  }
  if (changed && role_ == Role::kLeader) sync_progress_with_membership();
}

void RaftCore::note_truncation(LogIndex from) {
  MAYFLY_ASSERT(role_ != Role::kLeader);  // a leader never truncates its log (Leader Append-Only)
  while (!membership_changes_.empty() && membership_changes_.back().first >= from) membership_changes_.pop_back();
}

void RaftCore::sync_progress_with_membership() {
  const Membership& members = membership();
  for (auto it = progress_.begin(); it != progress_.end();) {
    it = members.contains(it->first) ? std::next(it) : progress_.erase(it);
  }
  for (NodeId id : members.voters) {
    progress_.try_emplace(id, config_.max_inflight_messages, config_.max_inflight_bytes);
  }
  for (NodeId id : members.learners) {
    progress_.try_emplace(id, config_.max_inflight_messages, config_.max_inflight_bytes);
  }
  for (auto& [id, progress] : progress_) {
    progress.is_learner = members.is_learner(id);
    if (progress.next == LogIndex(0)) {  // new: probe from the end of our log
      progress.next = log_.last_index().next();
      progress.recent_active = true;
    }
  }
  update_self_progress();
  if (transfer_target_ != NodeId(0) && !members.is_voter(transfer_target_)) transfer_target_ = NodeId(0);
}

void RaftCore::update_self_progress() {
  auto it = progress_.find(config_.self);
  if (it == progress_.end()) return;  // a leader being removed
  it->second.match = log_.stable_last_index();
  it->second.next = log_.last_index().next();
  it->second.state = ProgressState::kReplicate;
}

// ---------------------------------------------------------------------------------------------------------------
// ReadIndex and leadership transfer

Status RaftCore::read_index(std::string context) {
  assert_no_ready_in_flight();
  if (role_ == Role::kLeader) return handle_read_request(config_.self, std::move(context));
  if (role_ == Role::kFollower && leader_ != NodeId(0)) {
    send(Message{.type = MessageType::kReadIndex, .to = leader_, .term = term_, .context = std::move(context)});
    return Status::ok();
  }
  return Status::unavailable("no leader known");
}

Status RaftCore::handle_read_request(NodeId from, std::string context) {
  const size_t pending = pending_reads_.size() + reads_before_commit_.size();
  if (static_cast<int64_t>(pending) >= config_.max_pending_read_requests) {
    return Status::unavailable("too many pending reads");
  }
  std::vector<std::pair<NodeId, std::string>> request;
  request.emplace_back(from, std::move(context));
  if (!committed_in_current_term()) {
    // Our commit index may lag the previous leader's until an entry of our term commits (thesis §6.4).
    reads_before_commit_.push_back(std::move(request.front()));
    return Status::ok();
  }
  start_reads(std::move(request));
  return Status::ok();
}

void RaftCore::start_reads(std::vector<std::pair<NodeId, std::string>> requests) {
  const uint64_t round = ++read_round_;
  for (auto& [from, context] : requests) {
    pending_reads_.push_back(PendingRead{round, log_.committed(), from, std::move(context)});
  }
  advance_reads();  // a single voter confirms itself
  if (!pending_reads_.empty()) broadcast_heartbeat();
}

void RaftCore::advance_reads() {
  const Membership& members = membership();
  std::vector<uint64_t> acked;
  for (NodeId voter : members.voters) {
    if (voter == config_.self) {
      acked.push_back(read_round_);
      continue;
    }
    auto it = progress_.find(voter);
    acked.push_back(it == progress_.end() ? 0 : it->second.read_round_acked);
  }
  if (acked.empty()) return;
  std::sort(acked.begin(), acked.end(), std::greater<>());
  const uint64_t confirmed_round = acked[members.quorum_size() - 1];
  while (!pending_reads_.empty() && pending_reads_.front().round <= confirmed_round) {
    release_read(std::move(pending_reads_.front()));
    pending_reads_.pop_front();
  }
}

void RaftCore::release_read(PendingRead read) {
  if (read.from == config_.self) {
    read_states_.push_back(ReadState{read.index, std::move(read.context)});
    return;
  }
  send(Message{.type = MessageType::kReadIndexResponse,
               .to = read.from,
               .term = term_,
               .index = read.index,
               .context = std::move(read.context)});
}

Status RaftCore::transfer_leadership(NodeId target) {
  assert_no_ready_in_flight();
  if (role_ != Role::kLeader) return Status::unavailable("not leader");
  if (target == config_.self) return Status::ok();
  if (!membership().is_voter(target)) {
    return Status::invalid_argument("node " + id_text(target.value()) + " is not a voter");
  }
  if (transfer_target_ == target) return Status::ok();
  transfer_target_ = target;
  election_elapsed_ticks_ = 0;  // the transfer gets one election timeout
  Progress& progress = progress_.at(target);
  if (progress.match == log_.last_index()) {
    send_timeout_now(target);
  } else {
    send_append(target, /*send_if_empty=*/true);
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------------------
// Ready / advance

bool RaftCore::has_ready() const {
  if (ready_in_flight_) return false;
  if (hard_state() != persisted_hard_state_) return true;
  if (log_.pending_snapshot() || !log_.unstable_entries().empty()) return true;
  if (!messages_.empty() || !read_states_.empty()) return true;
  return log_.has_entries_to_apply();
}

Ready RaftCore::ready() {
  assert_no_ready_in_flight();
  // Batching: entries proposed since the last Ready go out together, one append per follower.
  if (role_ == Role::kLeader) broadcast_append(/*send_if_empty=*/false);

  Ready ready;
  ReadyInFlight in_flight;
  const HardState current = hard_state();
  if (current != persisted_hard_state_) ready.hard_state = in_flight.hard_state = current;
  if (log_.pending_snapshot()) {
    ready.snapshot = *log_.pending_snapshot();
    in_flight.snapshot_index = ready.snapshot->metadata.index;
  }
  ready.entries = log_.unstable_entries();
  if (!ready.entries.empty()) in_flight.last_entry.emplace(ready.entries.back().index, ready.entries.back().term);
  ready.committed_entries = log_.entries_to_apply(config_.max_committed_bytes_per_ready);
  if (!ready.committed_entries.empty()) in_flight.last_committed = ready.committed_entries.back().index;

  const bool term_or_vote_changing =
      current.term != persisted_hard_state_.term || current.vote != persisted_hard_state_.vote;
  ready.must_sync = ready.snapshot.has_value() || !ready.entries.empty() || term_or_vote_changing;
  for (Message& message : messages_) {
    message.from = config_.self;
    if (term_or_vote_changing || must_wait_for_persist(message.type)) {
      ready.messages_after_persist.push_back(std::move(message));
    } else {
      ready.messages.push_back(std::move(message));
    }
  }
  messages_.clear();
  ready.read_states = std::exchange(read_states_, {});
  ready_in_flight_ = std::move(in_flight);
  return ready;
}

void RaftCore::advance(const Ready& ready) {
  MAYFLY_ASSERT_MSG(ready_in_flight_.has_value(), "advance without a Ready");
  const ReadyInFlight in_flight = std::move(*ready_in_flight_);
  ready_in_flight_.reset();
  MAYFLY_ASSERT_MSG(in_flight.hard_state == ready.hard_state, "advance with a different Ready");
  MAYFLY_ASSERT_MSG(ready.entries.empty() || in_flight.last_entry ==
                        std::make_pair(ready.entries.back().index, ready.entries.back().term),
                    "advance with a different Ready");
  if (in_flight.hard_state) persisted_hard_state_ = *in_flight.hard_state;
  if (in_flight.snapshot_index) {
    log_.stable_snapshot_to(*in_flight.snapshot_index);
    MAYFLY_ASSERT_MSG(storage_.snapshot_metadata().index >= *in_flight.snapshot_index,
                      "the driver did not persist the Ready's snapshot");
    log_.applied_to(std::max(log_.applied(), *in_flight.snapshot_index));
  }
  if (in_flight.last_entry) log_.stable_entries_to(in_flight.last_entry->first, in_flight.last_entry->second);
  // Read back what the driver claims to have persisted (an assertion pair with the Ready that handed it out).
  const LogIndex stable_last = log_.stable_last_index();
  MAYFLY_ASSERT_MSG(storage_.last_index() == stable_last, "storage last index %llu, expected %llu",
                    as_ull(storage_.last_index().value()), as_ull(stable_last.value()));
  if (in_flight.last_entry) {
    Result<Term> stored_term = storage_.term(stable_last);
    if (!stored_term.is_ok()) {
      storage_read_failed(stored_term.status(), "Raft log term of entry " + id_text(stable_last.value()));
    }
    MAYFLY_ASSERT_MSG(*stored_term == in_flight.last_entry->second, "storage does not hold the persisted entries");
  }
  if (in_flight.last_committed) log_.applied_to(*in_flight.last_committed);

  if (role_ == Role::kLeader) {
    update_self_progress();
    if (maybe_commit()) {
      on_leader_commit_advanced();
      if (role_ == Role::kLeader) broadcast_append(/*send_if_empty=*/true);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Observing

bool RaftCore::sending_snapshot() const {
  if (role_ != Role::kLeader) return false;
  for (const auto& [id, progress] : progress_) {
    if (progress.state != ProgressState::kSnapshot) continue;
    // recent_active starts over at every election timeout (check-quorum) and a follower writing chunks to disk may
    // not answer in the moment after: a checkpoint right then would delete the snapshot in mid-transfer and make the
    // transfer start over with a new export. So the last acknowledgement counts for two election timeouts too.
    if (progress.recent_active || ticks_ - progress.snapshot_heard_tick <= 2 * config_.election_timeout_ticks) {
      return true;
    }
  }
  return false;
}

std::optional<LogIndex> RaftCore::snapshot_install_pin() const {
  if (role_ != Role::kLeader) return std::nullopt;
  std::optional<LogIndex> pin;
  for (const auto& [id, progress] : progress_) {
    if (progress.state != ProgressState::kSnapshot || !progress.snapshot_done_sent) continue;
    if (ticks_ - progress.snapshot_done_sent_tick > config_.snapshot_install_wait_ticks) continue;
    if (!pin || progress.snapshot.index < *pin) pin = progress.snapshot.index;
  }
  return pin;
}

RaftStatus RaftCore::status() const {
  RaftStatus status;
  status.id = config_.self;
  status.role = role_;
  status.term = term_;
  status.vote = vote_;
  status.leader = leader_;
  status.term_leader = term_leader_;
  status.first_index = log_.first_index();
  status.last_index = log_.last_index();
  status.last_term = log_.last_term();
  status.commit = log_.committed();
  status.applied = log_.applied();
  status.last_ts_micros = log_.last_ts_micros();
  if (role_ == Role::kLeader) {
    status.ticks_since_leader_contact = 0;
  } else if (leader_ != NodeId(0)) {
    status.ticks_since_leader_contact = election_elapsed_ticks_;
  }
  status.membership = membership();
  status.transfer_target = transfer_target_;
  if (role_ == Role::kLeader) {
    for (NodeId voter : membership().voters) {
      const std::optional<int64_t> estimate = voter == config_.self ? std::nullopt : clock_estimate(voter);
      if (!estimate) continue;
      int64_t offset = 0;
      if (__builtin_sub_overflow(*estimate, now_micros_, &offset)) offset = kNoCeiling;
      status.clock_offsets_micros[voter] = offset;
    }
  }
  status.clock_holds = clock_holds_;
  status.last_clock_hold_ahead_micros = last_clock_hold_ahead_micros_;
  status.last_clock_hold_ts_micros = last_clock_hold_ts_micros_;
  for (const auto& [id, progress] : progress_) {
    status.progress[id] = RaftStatus::FollowerProgress{progress.match, progress.next, progress.state,
                                                       progress.recent_active};
  }
  status.snapshot_read_errors = snapshot_read_errors_;
  status.snapshot_receive_errors = snapshot_receive_errors_;
  status.last_snapshot_error = last_snapshot_error_;
  return status;
}

void RaftCore::check_invariants() const {
  log_.check_invariants();
  MAYFLY_ASSERT_MSG(log_.last_term() <= term_, "log term %llu above current term %llu",
                    as_ull(log_.last_term().value()), as_ull(term_.value()));
  MAYFLY_ASSERT(persisted_hard_state_.term <= term_);
  MAYFLY_ASSERT(persisted_hard_state_.commit <= log_.committed());
  MAYFLY_ASSERT(election_elapsed_ticks_ >= 0 && heartbeat_elapsed_ticks_ >= 0);
  MAYFLY_ASSERT(randomized_election_timeout_ticks_ >= config_.election_timeout_ticks &&
                randomized_election_timeout_ticks_ < 2 * config_.election_timeout_ticks);
  // Membership steps are in log order, after the base, and within the log.
  LogIndex previous = base_membership_index_;
  for (const auto& [index, members] : membership_changes_) {
    MAYFLY_ASSERT(index > previous);
    MAYFLY_ASSERT(index <= log_.last_index());
    MAYFLY_ASSERT(!members.voters.empty());
    previous = index;
  }
  switch (role_) {
    case Role::kLeader: {
      MAYFLY_ASSERT(leader_ == config_.self && vote_ == config_.self);
      MAYFLY_ASSERT_MSG(membership().is_voter(config_.self) || config_change_pending(),
                        "a leader outside the voters must be waiting for its removal to commit");
      const Membership& members = membership();
      MAYFLY_ASSERT(progress_.size() == members.voters.size() + members.learners.size());
      for (const auto& [id, progress] : progress_) {
        MAYFLY_ASSERT(members.contains(id));
        MAYFLY_ASSERT_MSG(progress.match < progress.next, "progress of %llu: match %llu, next %llu",
                          as_ull(id.value()), as_ull(progress.match.value()), as_ull(progress.next.value()));
        MAYFLY_ASSERT(progress.next <= log_.last_index().next());
        MAYFLY_ASSERT(progress.inflights.count() <= config_.max_inflight_messages);
        MAYFLY_ASSERT(progress.inflights.within_bound());
        MAYFLY_ASSERT(progress.read_round_acked <= read_round_);
      }
      uint64_t uncommitted = 0;
      for (const UncommittedEntry& entry : uncommitted_entries_) {
        MAYFLY_ASSERT(entry.index > log_.committed());
        uncommitted += entry.bytes;
      }
      MAYFLY_ASSERT(uncommitted == uncommitted_bytes_);
      uint64_t previous_round = 0;
      for (const PendingRead& read : pending_reads_) {
        MAYFLY_ASSERT(read.round >= previous_round && read.round <= read_round_);
        MAYFLY_ASSERT(read.index <= log_.committed());
        previous_round = read.round;
      }
      break;
    }
    case Role::kCandidate:
      MAYFLY_ASSERT(vote_ == config_.self);
      [[fallthrough]];
    case Role::kPreCandidate:
      MAYFLY_ASSERT(leader_ == NodeId(0));
      [[fallthrough]];
    case Role::kFollower:
      MAYFLY_ASSERT(progress_.empty());
      MAYFLY_ASSERT(pending_reads_.empty() && reads_before_commit_.empty());
      MAYFLY_ASSERT(transfer_target_ == NodeId(0));
      MAYFLY_ASSERT(uncommitted_bytes_ == 0);
      break;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers

void RaftCore::send(Message message) {
  message.from = config_.self;
  if (reports_clock(message.type)) message.clock_micros = now_micros_;
  messages_.push_back(std::move(message));
}

void RaftCore::reset_randomized_election_timeout() {
  randomized_election_timeout_ticks_ =
      prng_.range(config_.election_timeout_ticks, 2 * config_.election_timeout_ticks - 1);
}

void RaftCore::assert_no_ready_in_flight() const {
  MAYFLY_ASSERT_MSG(!ready_in_flight_.has_value(), "the core was called between ready() and advance()");
}

}  // namespace mayfly::replication
