// RaftCore: the whole Raft algorithm as a deterministic state machine with no I/O, threads or clock reads, in the
// spirit of etcd's RawNode. Inputs: step (a message from a peer), tick (time passes; the driver passes its wall
// clock), propose / read_index / transfer_leadership / propose_config_change (requests). Output: Ready — what to
// persist, send and apply — which the driver handles in order and then acknowledges with advance.
//
// Driver loop (one thread):
//   every tick interval:      core.tick(wall_clock_micros)
//   on a peer message:        core.step(message)
//   on a client request:      core.propose(data, wall_clock_micros) / core.read_index(context)
//   while core.has_ready():   Ready ready = core.ready();
//                             send ready.messages                      (may go before the fsync)
//                             persist ready.snapshot, ready.entries, ready.hard_state in one synced write
//                             send ready.messages_after_persist
//                             install ready.snapshot, apply ready.committed_entries in order, serve read_states
//                             core.advance(ready)
// Between ready() and advance() the core must not be called (except status/has_ready/check_invariants): queue
// incoming messages and requests, they form the next batch (group commit).
//
// Design choices:
// - Membership changes take effect when the config-change entry is *appended* to a log (Raft thesis §4.1), on every
//   node, and are undone if that entry is truncated. Safety needs one change at a time, so a leader refuses a new
//   change while the latest config entry is uncommitted, and until it has committed an entry of its own term (the
//   fix for the single-server-change bug, thesis erratum 2015). A leader removed from the voters keeps leading until
//   that change commits (without counting itself), then steps down.
// - The leader counts itself toward a commit quorum only for entries the driver has persisted (advance), so a
//   leader crash can never lose an entry its followers were told is committed.
// - Replicated time: every entry carries ts_micros = max(min(driver's now, ceiling), previous entry's ts + 1),
//   stamped by the leader. Because each entry is stamped after its predecessor in the leader's log, ts increases
//   strictly along every log, across leader changes too. The ceiling keeps a leader whose clock jumped forward from
//   dragging cluster time (and expiry) with it: followers report their clocks in their responses
//   (Message::clock_micros); the leader estimates each voter's clock as its last report plus the leader's own ticks
//   since then × tick_interval_micros (ticks, not the leader's wall clock, measure elapsed time), and the ceiling is
//   the clock a quorum of voters (itself included) has at least, plus max_clock_offset_micros. A leader without a
//   quorum of reports (peers that never ticked, or of an older version) caps at the log's time when it was elected
//   plus its ticks since; a log still at bootstrap time (entries stamped with their index) has no time to protect
//   and takes the leader's clock. A single voter is its own quorum: nothing bounds its clock.
// - Errors from LogStorage reads are fatal: a read outside the stored range asserts (a bug of the core); a disk
//   error (I/O, corruption) throws StorageFailure out of the call that needed the read (create() returns it as a
//   Status), after which this core must not be used — the node stops, and a restart rebuilds the core from the log.
//   Except the snapshot file: a leader that cannot read it (EIO, EMFILE) counts the error
//   (RaftStatus::snapshot_read_errors) and retries the transfer at the next heartbeat; the follower keeps waiting.
//
// Thread-safety: not thread-safe. One RaftCore belongs to one thread (the driver's).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/prng.h"
#include "common/status.h"
#include "replication/config.h"
#include "replication/log_storage.h"
#include "replication/message.h"
#include "replication/progress.h"
#include "replication/raft_log.h"
#include "replication/types.h"

namespace mayfly::replication {

enum class Role : uint8_t { kFollower, kPreCandidate, kCandidate, kLeader };
std::string_view role_name(Role role);

// Why RaftCore::step refused a message. Everything in a message is checked before it changes any state, so a refused
// message changed nothing; the driver counts it (the name is the `reason` label of
// mayfly_peer_messages_rejected_total) and logs it with the sender.
enum class RejectReason : uint8_t {
  kNone = 0,
  kWrongSender,      // from is 0 or this node itself
  kWrongRecipient,   // to is another node
  kTermOutOfRange,   // a term (message, log_term, snapshot) above kMaxTerm
  kBadEntries,       // append: entries not contiguous after `index`, terms not within [log_term, term], timestamps
                     // outside [0, kMaxTimestampMicros] or not strictly increasing (among themselves and after the
                     // entry before them), or overwriting a committed entry
  kBadConfig,        // append: a config-change entry whose data does not decode or does not apply
  kBadSnapshot,      // snapshot metadata or chunk inconsistent (term above the message's, no voters, time going back
                     // or out of range)
  kBadResponse,      // a response acknowledging what this leader never sent (an index past its log, a future round)
  kRivalLeader,      // an append, heartbeat or snapshot in this leader's own term from another node
};
inline constexpr size_t kRejectReasonCount = 9;
std::string_view reject_reason_name(RejectReason reason);

// Everything the driver must do after one batch of inputs, in this order (see the driver loop above).
// A value; the driver may hand its parts to other threads (e.g. messages to the transport).
struct Ready {
  // (1) Persist, in one synced write, before sending messages_after_persist or applying:
  //   - snapshot: if set, it replaces the whole log (drop every entry, record the snapshot) and must be installed
  //     into the state machine (in step 3) before applying committed_entries.
  //   - entries: append them; every persisted entry at index >= entries.front().index must be deleted first (a
  //     follower's conflicting suffix is truncated this way). Contiguous, ascending.
  //   - hard_state: if set, the new term/vote/commit.
  std::optional<Snapshot> snapshot;
  std::vector<Entry> entries;
  std::optional<HardState> hard_state;
  // Whether (1) must be fsynced before (2) and (3): true when it writes entries, a snapshot, or a new term or vote.
  // A Ready that only moves the commit index may skip the fsync (commit is recomputed after a crash).
  bool must_sync = false;

  // (0) Messages that may be sent at once, even while (1) is still being written: a leader's appends,
  // heartbeats and snapshot chunks (the thesis §10.2.1 parallel write).
  std::vector<Message> messages;
  // (2) Messages that may only be sent after (1) is durable: acks of entries, votes, and anything sent in a term or
  // vote this Ready is persisting.
  std::vector<Message> messages_after_persist;

  // (3) Apply, in order, after (1): these entries are committed. Config-change entries already took effect inside
  // the core; the state machine may still record them.
  std::vector<Entry> committed_entries;
  // (3) ReadIndex answers: serve the read with this context once the state machine has applied `index`.
  std::vector<ReadState> read_states;

  bool empty() const {
    return !snapshot && entries.empty() && !hard_state && messages.empty() && messages_after_persist.empty() &&
           committed_entries.empty() && read_states.empty();
  }
};

// What propose returns (a value): where the entry went. The entry is committed once the driver sees it in
// Ready::committed_entries with the same index *and term*; a different term there means it was lost.
struct Proposal {
  LogIndex index;
  Term term;
  int64_t ts_micros = 0;
};

// A copy of the core's state for metrics, logs and tests (a value; safe to hand to another thread).
struct RaftStatus {
  NodeId id;
  Role role = Role::kFollower;
  Term term;
  NodeId vote;
  NodeId leader;  // 0: unknown
  NodeId term_leader;  // the leader known in `term`, also after a restart (HardState::leader); 0: none
  LogIndex first_index;
  LogIndex last_index;
  Term last_term;
  LogIndex commit;
  LogIndex applied;
  int64_t last_ts_micros = 0;
  // Ticks since this node last heard from the leader of its term (0 on the leader itself; -1 when it knows no
  // leader). Bounded-staleness reads are served only while this is recent.
  int64_t ticks_since_leader_contact = -1;
  Membership membership;
  NodeId transfer_target;  // leader only: 0 unless a transfer is in progress
  // Leader only: each other voter's estimated clock minus ours at the last tick (positive: it is ahead), for the
  // voters that reported one.
  std::map<NodeId, int64_t> clock_offsets_micros;
  // Entries this node stamped below its own clock because of the max-clock-offset ceiling (since it started), and
  // the latest such entry: how far our clock was ahead of its ts, and the ts.
  uint64_t clock_holds = 0;
  int64_t last_clock_hold_ahead_micros = 0;
  int64_t last_clock_hold_ts_micros = 0;
  struct FollowerProgress {
    LogIndex match;
    LogIndex next;
    ProgressState state = ProgressState::kProbe;
    bool recent_active = false;
  };
  std::map<NodeId, FollowerProgress> progress;  // leader only
  // Snapshot transfers that went wrong locally, since the core was created. Leader: reads of its snapshot file that
  // failed (other than "replaced by a newer one"); the transfer is retried at the next heartbeat. Follower: incoming
  // snapshots refused (declared size over max_snapshot_bytes or what the sink can hold) or whose sink failed.
  uint64_t snapshot_read_errors = 0;
  uint64_t snapshot_receive_errors = 0;
  std::string last_snapshot_error;  // the latest of either, for the log
};

class RaftCore {
 public:
  // Builds a core from what `storage` holds (which outlives the core). `applied` is the index the state machine has
  // already applied (0: the storage's snapshot index), so a restart does not re-apply entries.
  // With a `sink` (not owned; outlives the core), a follower streams incoming snapshots into it and hands them out
  // staged (Snapshot::staged); without one it assembles them in memory.
  static Result<std::unique_ptr<RaftCore>> create(const RaftConfig& config, const LogStorage& storage, Prng prng,
                                                  LogIndex applied = LogIndex(0), SnapshotSink* sink = nullptr);

  RaftCore(const RaftCore&) = delete;
  RaftCore& operator=(const RaftCore&) = delete;

  // --- Inputs ---
  // One message from a peer. InvalidArgument for a message not meant for this node or malformed (dropped; nothing
  // changed); last_rejection() then says why. No content of a message can trip an assert.
  Status step(const Message& message);
  // Time passes by one tick; `now_micros` is the driver's wall clock, remembered for stamping entries and reported
  // in this node's responses. Call it every config.tick_interval_micros: a leader counts ticks to estimate how far
  // its voters' clocks moved since they reported them.
  void tick(int64_t now_micros);
  // Appends a command to the log (leader only). Unavailable when not leader, during a leadership transfer, or over
  // max_uncommitted_bytes (retry later); InvalidArgument over max_entry_bytes. The first form stamps with the
  // `now` of the last tick; the second with `now_micros` (and remembers it) — each capped by the max-clock-offset
  // ceiling and never below the previous entry's ts + 1.
  Result<Proposal> propose(std::string data);
  Result<Proposal> propose(std::string data, int64_t now_micros);
  // Appends an empty entry that only advances replicated time.
  Result<Proposal> propose_time_entry();
  Result<Proposal> propose_time_entry(int64_t now_micros);
  // One membership change (leader only); Unavailable while another change is uncommitted, before this leader
  // committed an entry of its term, or when promoting a learner that has not replicated up to the commit index;
  // InvalidArgument when the change does not apply to the current membership (or is kAddVoter: add a learner,
  // then promote it).
  Result<Proposal> propose_config_change(const ConfigChange& change);
  // Asks for a linearizable read point; the answer arrives as a ReadState with `context` in a later Ready (leader:
  // after a quorum confirmed leadership; follower: forwarded to the leader). No answer if leadership changes
  // meanwhile: retry after a timeout with a new context. Unavailable without a known leader or when too many reads
  // are pending.
  Status read_index(std::string context);
  // Hands leadership to `target` (a voter): once it has the whole log it is told to campaign at once. Proposals are
  // refused meanwhile; abandoned after an election timeout. Leader only.
  Status transfer_leadership(NodeId target);

  // --- Outputs ---
  bool has_ready() const;
  Ready ready();
  void advance(const Ready& ready);

  // --- Observing ---
  RaftStatus status() const;
  const Membership& membership() const;
  // Membership in effect at `index` (applied index <= index <= last index), for the snapshot metadata.
  Membership membership_at(LogIndex index) const;
  // A membership change is appended to the log but not committed (this node's commit index).
  bool config_change_pending() const;
  NodeId id() const { return config_.self; }
  Role role() const { return role_; }
  Term term() const { return term_; }
  NodeId leader() const { return leader_; }
  // Why the latest step refused its message (kNone after a step that returned OK).
  RejectReason last_rejection() const { return last_rejection_; }
  // True once the term reached kMaxTerm: this node can no longer campaign (it still follows and votes).
  bool term_exhausted() const { return term_ >= kMaxTerm; }
  // Leader: the highest ts it may stamp now (see "Replicated time" above; INT64_MAX when nothing bounds it). A
  // driver that waits for replicated time to reach an instant should wait for this, not only its own clock, to
  // reach it. Not leader: INT64_MAX.
  int64_t time_ceiling_micros() const { return time_ceiling_micros(now_micros_); }
  // Leader: a follower needs a snapshot whose data the storage has not produced yet (LogStorage::snapshot_data_ready
  // is false). Returns true once per such request since the last call; the driver then produces the data and records
  // the snapshot, and the transfer starts at the next heartbeat.
  bool take_snapshot_request() { return std::exchange(snapshot_wanted_, false); }
  // Leader: a snapshot is being sent to a follower that answered within the current election timeout, or acknowledged
  // a chunk within the last two. While this
  // holds, the storage should keep that snapshot's data and the entries after it (the follower needs them next).
  bool sending_snapshot() const;
  // Leader: the lowest index of a snapshot sent whole to a follower that has not moved on from it yet — it is
  // installing it, silent while it does — within config.snapshot_install_wait_ticks of its last chunk. The storage
  // keeps the log after it (Replica::maybe_checkpoint): compacted past it, the follower would need another snapshot
  // as soon as it answers, and on a store whose install outlasts the log's retention, again and again.
  std::optional<LogIndex> snapshot_install_pin() const;
  // The ts of the last entry in this node's log (of its snapshot when the log is empty).
  int64_t last_ts_micros() const { return log_.last_ts_micros(); }
  // Always-on checks of the core's invariants; aborts the process when one does not hold.
  void check_invariants() const;

 private:
  enum class CampaignKind : uint8_t { kPreElection, kElection };
  struct PendingRead {
    uint64_t round;
    LogIndex index;
    NodeId from;
    std::string context;
  };
  struct UncommittedEntry {
    LogIndex index;
    uint64_t bytes;
  };
  struct ReadyInFlight {
    std::optional<HardState> hard_state;
    std::optional<LogIndex> snapshot_index;
    std::optional<std::pair<LogIndex, Term>> last_entry;
    std::optional<LogIndex> last_committed;
  };

  RaftCore(const RaftConfig& config, const LogStorage& storage, Prng prng, LogIndex committed, LogIndex applied,
           SnapshotSink* sink);
  void load_membership();

  // Roles.
  void reset(Term term);
  void become_follower(Term term, NodeId leader);
  void become_pre_candidate();
  void become_candidate();
  void become_leader();
  bool promotable() const;
  void campaign(CampaignKind kind, bool leadership_transfer);
  // Counts (pre-)votes; returns +1 won, -1 lost, 0 pending.
  int tally_votes() const;

  // Ticks.
  void tick_election();
  void tick_heartbeat();
  bool quorum_active() const;

  // Step by role.
  void step_leader(const Message& message);
  void step_candidate(const Message& message);
  void step_follower(const Message& message);
  void handle_vote_request(const Message& message);
  void handle_append(const Message& message);
  void handle_heartbeat(const Message& message);
  void handle_snapshot(const Message& message);
  // Follower: drops the incoming snapshot transfer, if any (and the sink's partial file).
  void drop_incoming_snapshot();
  // Follower: asks the leader to resend the snapshot `metadata` from `offset`.
  void reject_snapshot_chunk(const Message& message, uint64_t offset);
  void handle_append_response(const Message& message, Progress& progress);
  void handle_heartbeat_response(const Message& message, Progress& progress);
  void handle_snapshot_response(const Message& message, Progress& progress);
  struct Refusal {
    RejectReason reason;
    std::string what;
  };
  // Checks of a message before it may change anything: its own consistency, then (for what would be acted on)
  // against the log.
  std::optional<Refusal> validate(const Message& message) const;
  std::optional<Refusal> validate_append(const Message& message) const;
  std::optional<Refusal> validate_append_against_log(const Message& message) const;
  std::optional<Refusal> validate_snapshot(const Message& message) const;

  // Replicated time.
  void note_clock_report(const Message& message);
  // Wall-clock time our ticks since `tick` stand for (saturating).
  int64_t micros_since_tick(int64_t tick) const;
  // A member's clock now: its last report plus our ticks since; nullopt if it never reported.
  std::optional<int64_t> clock_estimate(NodeId member) const;
  std::optional<int64_t> quorum_clock_estimate(int64_t now_micros) const;
  int64_t time_ceiling_micros(int64_t now_micros) const;
  // The ts of the next entry the leader appends (counts holds).
  int64_t stamp(int64_t now_micros);

  // Leader replication.
  Result<Proposal> propose_entry(EntryType type, std::string data, int64_t now_micros);
  void append_as_leader(Entry entry);
  bool send_append(NodeId to, bool send_if_empty);
  bool start_snapshot(NodeId to, Progress& progress);
  void send_snapshot_chunks(NodeId to, Progress& progress);
  void broadcast_append(bool send_if_empty);
  void broadcast_heartbeat();
  void send_timeout_now(NodeId to);
  bool maybe_commit();
  void on_leader_commit_advanced();
  bool committed_in_current_term() const;

  // Membership.
  void note_appended_entries(const std::vector<Entry>& entries);
  void note_truncation(LogIndex from);
  void sync_progress_with_membership();
  // The leader's own entry in progress_ follows what its disk holds.
  void update_self_progress();

  // ReadIndex.
  Status handle_read_request(NodeId from, std::string context);
  void start_reads(std::vector<std::pair<NodeId, std::string>> requests);
  void advance_reads();
  void release_read(PendingRead read);

  void send(Message message);
  HardState hard_state() const { return HardState{term_, vote_, log_.committed(), term_leader_}; }
  // leader_ = leader; a known leader is also remembered as the term's leader (at most one per term).
  void set_leader(NodeId leader);
  void reset_randomized_election_timeout();
  void assert_no_ready_in_flight() const;

  const RaftConfig config_;
  const LogStorage& storage_;
  Prng prng_;
  RaftLog log_;

  Role role_ = Role::kFollower;
  Term term_;
  NodeId vote_;
  NodeId leader_;
  // The leader this node knew in term_, kept when leader_ is forgotten (a pre-election) and across restarts
  // (HardState::leader): peer admission hears it (node/peer_admission.h).
  NodeId term_leader_;
  HardState persisted_hard_state_;

  int64_t election_elapsed_ticks_ = 0;
  int64_t heartbeat_elapsed_ticks_ = 0;
  int64_t randomized_election_timeout_ticks_ = 0;
  int64_t now_micros_ = 0;
  int64_t ticks_ = 0;  // every tick since this core was created (its monotonic measure of elapsed time)

  // The clock each member last reported (Message::clock_micros) and ticks_ when it arrived. Kept across roles: a
  // report plus the ticks since is an estimate whenever it is used.
  struct ClockReport {
    int64_t clock_micros;
    int64_t at_tick;
  };
  std::map<NodeId, ClockReport> clock_reports_;
  // Leader: ticks_ and the log's last ts when it was elected, and whether that log had any time to protect.
  int64_t leader_since_tick_ = 0;
  int64_t leader_start_ts_micros_ = 0;
  bool leader_start_time_established_ = false;
  uint64_t clock_holds_ = 0;
  int64_t last_clock_hold_ahead_micros_ = 0;
  int64_t last_clock_hold_ts_micros_ = 0;

  std::map<NodeId, bool> votes_;         // candidate: who granted (true) or refused (false)
  std::map<NodeId, Progress> progress_;  // leader: every member, self included

  // Membership: `base_membership_` is in effect at `base_membership_index_` (a snapshot or the bootstrap); each
  // config entry after it adds a step, in log order.
  Membership base_membership_;
  LogIndex base_membership_index_;
  std::vector<std::pair<LogIndex, Membership>> membership_changes_;

  NodeId transfer_target_;
  std::deque<UncommittedEntry> uncommitted_entries_;  // leader: own-term entries above commit
  uint64_t uncommitted_bytes_ = 0;

  uint64_t read_round_ = 0;
  std::deque<PendingRead> pending_reads_;                            // leader: waiting for a quorum
  std::vector<std::pair<NodeId, std::string>> reads_before_commit_;  // leader: waiting for a commit in its term
  std::vector<ReadState> read_states_;

  // Follower: the snapshot transfer under way — its bytes so far in `data`, or (staged) in sink_ — and their count.
  SnapshotSink* sink_;
  std::optional<Snapshot> incoming_snapshot_;
  uint64_t incoming_received_ = 0;
  bool snapshot_wanted_ = false;  // see take_snapshot_request
  uint64_t snapshot_read_errors_ = 0;
  uint64_t snapshot_receive_errors_ = 0;
  std::string last_snapshot_error_;

  std::vector<Message> messages_;
  std::optional<ReadyInFlight> ready_in_flight_;
  RejectReason last_rejection_ = RejectReason::kNone;
};

}  // namespace mayfly::replication
