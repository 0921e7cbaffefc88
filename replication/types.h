// The values the Raft core reads, persists and hands out: log entries, hard state, membership, snapshots and
// ReadIndex results. Everything here is a plain value with no behaviour beyond small helpers.
//
// Thread-safety: values; safe to copy and move between threads.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "common/status.h"

namespace mayfly::replication {

// The largest term a node adopts or campaigns in (2^63 - 1). A message carrying a higher term is malformed and
// refused, so a forged term near 2^64 - 1 is never adopted and Term::next() never has to wrap. A node whose term
// reached kMaxTerm (only possible through a hostile, in-range term: ~9.2e18 honest elections are out of reach) can
// no longer campaign and logs that loudly; it still follows and votes. Keeping forged messages out altogether is
// the job of peer authentication, not of this bound.
inline constexpr Term kMaxTerm{(uint64_t{1} << 63) - 1};

// Entry and snapshot timestamps lie in [0, kMaxTimestampMicros] (2^62 µs, about the year 148,000), so `ts + 1` and
// TTL arithmetic on them never overflow; a message carrying one outside is malformed.
inline constexpr int64_t kMaxTimestampMicros = int64_t{1} << 62;

enum class EntryType : uint8_t {
  kNormal = 0,        // a state-machine command; `data` is opaque to Raft
  kConfigChange = 1,  // `data` is an encoded ConfigChange (see codec.h)
  kEmpty = 2,         // no command: the leader's no-op on election, or a time entry that only advances cluster time
};
constexpr uint8_t kMaxEntryType = 2;
std::string_view entry_type_name(EntryType type);

// One log entry. `ts_micros` is cluster time stamped by the leader that created the entry; it increases strictly
// along every log (see RaftCore::propose), so applying an entry may use it as "now" deterministically.
struct Entry {
  Term term;
  LogIndex index;
  int64_t ts_micros = 0;
  EntryType type = EntryType::kNormal;
  std::string data;

  // What an entry costs against byte limits (message size, uncommitted bytes): the payload plus a fixed overhead,
  // so empty entries are not free.
  uint64_t size_bytes() const { return data.size() + kOverheadBytes; }
  static constexpr uint64_t kOverheadBytes = 32;

  bool operator==(const Entry&) const = default;
};

// What must survive a crash besides the log: the current term, whom this node voted for in it, and the commit index
// (the commit index is an optimisation on restart, not needed for safety). `leader` is for liveness only: the leader
// this node accepted in `term`, so that after a restart it still hears that leader even when its own membership
// leaves the leader out (node/peer_admission.h); Raft itself never reads it back.
struct HardState {
  Term term;
  NodeId vote;  // NodeId(0): no vote in `term`
  LogIndex commit;
  NodeId leader;  // NodeId(0): no leader known in `term`

  bool operator==(const HardState&) const = default;
};

// The cluster configuration: voters elect leaders and form quorums; learners receive the log but never vote.
// A node is in at most one of the two sets.
struct Membership {
  std::set<NodeId> voters;
  std::set<NodeId> learners;

  bool is_voter(NodeId node) const { return voters.contains(node); }
  bool is_learner(NodeId node) const { return learners.contains(node); }
  bool contains(NodeId node) const { return is_voter(node) || is_learner(node); }
  size_t quorum_size() const { return voters.size() / 2 + 1; }
  std::string to_string() const;  // "voters={1,2,3} learners={4}"

  bool operator==(const Membership&) const = default;
};

// One single-server membership change (Raft thesis §4.1). A new server joins as a learner, catches up, and is then
// promoted, so a slow new voter never stalls commits.
enum class ConfigChangeType : uint8_t {
  kAddLearner = 0,      // node must not be in the configuration
  kPromoteLearner = 1,  // node must be a learner
  kRemoveNode = 2,      // node must be a voter or learner; the last voter cannot be removed
  // node must not be in the configuration. Only in bootstrap entries (see bootstrap_entries): a running cluster
  // adds voters as learners first, so a new voter never holds up commits while it catches up.
  kAddVoter = 3,
};
constexpr uint8_t kMaxConfigChangeType = 3;

struct ConfigChange {
  ConfigChangeType type = ConfigChangeType::kAddLearner;
  NodeId node;

  bool operator==(const ConfigChange&) const = default;
};

// Applies `change` to `membership` in place, or says why it cannot apply (and leaves `membership` unchanged). The
// state machine may use this to follow membership itself: the membership at log index i is the snapshot's membership
// with every config-change entry up to i applied in order.
Status apply_config_change(const ConfigChange& change, Membership& membership);

// Describes a snapshot: the state machine's state after applying every entry up to `index`.
struct SnapshotMetadata {
  LogIndex index;            // last entry the snapshot covers; 0 means "no snapshot"
  Term term;                 // term of that entry
  int64_t ts_micros = 0;     // ts of that entry, so time keeps increasing after compaction
  Membership membership;     // membership in effect at `index`
  uint64_t size_bytes = 0;   // size of the snapshot data

  bool operator==(const SnapshotMetadata&) const = default;
};

// A complete snapshot as handed to the driver for installing: metadata plus the state machine's opaque bytes.
// `staged`: the bytes are not in `data` (empty) but in the file the core's SnapshotSink assembled and fsync'd (a
// follower streaming a leader's snapshot to disk); the driver's storage takes that file.
struct Snapshot {
  SnapshotMetadata metadata;
  std::string data;
  bool staged = false;

  bool operator==(const Snapshot&) const = default;
};

// The answer to a ReadIndex request: a linearizable read with `context` may be served once the state machine has
// applied at least `index`.
struct ReadState {
  LogIndex index;
  std::string context;

  bool operator==(const ReadState&) const = default;
};

}  // namespace mayfly::replication
