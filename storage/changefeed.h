// The change feed of a container (issue #15, docs/changefeed.md): every create, replace and delete in log order, and
// every TTL expiration at its logical position — the first log position whose replicated time (and ttl state)
// expires the item — identical on every replica, whether or not its collector ran, and after a snapshot install.
//
// What is stored (storage/layout.h, 0E and 0F), all written by the deterministic apply or moved by the collector:
//   - a feed record per item write (operation, ts, pk, id, new image, previous image) at its log index;
//   - the time index (log index -> replicated time) while any container has its feed on;
//   - the policy history (log index -> ContainerTtlState) at each defaultTtl change while the feed is on;
//   - shadow images: an expired item that the collector (or a user write over it) removes while the feed is on
//     keeps its image under the key of its expiry index entry.
// Expirations are never written by the apply: the reader derives them. With B(p) = ttl::expired_bounds(S_p, ts(p))
// (monotone in p), an expiry index (or shadow) entry with sort key k expires at the first p with B(p) > k, so the
// expirations at positions in (a, b] are exactly the entries in [B(a), B(b)).
//
// Warnings ("expiring soon", docs/retention.md) are derived the same way from the warning bounds
// W(p) = ttl::warning_bounds(S_p, ts(p)) >= B(p): an entry's warning is at the first p with W(p) > k, served only when
// that p is after the item's write (ts(p) > its write time: an item written inside its window gets none) and the
// item is still alive there (B(p) <= k: one that expires at that very position gets its expiration instead). Both
// conditions depend only on the entry, so a position never gains a warning later; an item rewritten or deleted
// before it expires takes its warning out of the history with its index entry (its instant moved).
//
// Positions: (log index, phase, kind, sort key, pk, id). Phase 0 is the expirations and warnings at that index, which
// come before phase 1, the entry's own write (which already sees them). Within phase 0, kind 0 is the expirations of
// items with their own ttl, by expiry instant E (their index sort key), kind 1 those of items inheriting the
// default, by write time (E is monotone in it), kinds 2 and 3 the warnings of the same two indexes; ties by pk, then
// id. So every page boundary is an exact seek in one index: continuation tokens hold the last change's full
// position, and positions already applied never gain changes later.
//
// Latest version without the feed (docs/changefeed.md, "Latest version on every container"): mode kLatest on a
// container whose feed is off reads the `_ts` index instead (09 crid write_ts pk id -> the write's log index), which
// holds one entry per item at its latest write: every live item written after the start, once, as it is now, in
// write-time order. Its positions are phase 2 (right after the entry sort_micros = write ts, pk, id) and phase 3 (at
// the first entry whose write ts is >= sort_micros); a token holding one keeps that order whatever the feed's state.
//
// Thread-safety: ChangeFeedReader is const and reads on one LevelDB snapshot per call: any thread, concurrently with
// applies. The free functions read at the given snapshot (nullptr: the live DB).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/records.h"
#include "storage/store_reader.h"
#include "ttl/ttl.h"

namespace leveldb {
class DB;
}  // namespace leveldb

namespace mayfly::storage {

enum class ChangeFeedMode : uint8_t {
  kLatest,  // creates and replaces whose version is still the current, live one
  kAll,     // every create, replace and delete, expirations included
};

inline constexpr size_t kMaxChangeFeedPageBytes = 4 << 20;

struct ChangeFeedFrom {
  enum class Kind : uint8_t { kBeginning, kNow, kTime, kContinuation };
  Kind kind = Kind::kBeginning;
  int64_t ts_micros = 0;     // kTime: changes at positions whose replicated time is >= this
  std::string continuation;  // kContinuation: a page's continuation
};

struct ChangeFeedRequest {
  std::string database;
  std::string container;
  ChangeFeedFrom from;
  ChangeFeedMode mode = ChangeFeedMode::kAll;
  bool only_expirations = false;
  bool only_warnings = false;  // only warnings (any mode); not with only_expirations
  bool warnings = true;        // false: leave warnings out (the Cosmos gateway)
  size_t max_changes = 100;  // >= 1
  // Log positions plus index, shadow and feed entries examined per page at most (at least one position is).
  // Positions without a change are skipped by a binary search, so a page comes back empty with a continuation only
  // in kLatest, when every version it examined was overwritten since.
  size_t max_work = 10'000;
  // The images (new and previous) of the changes on one page, in bytes, like a list page: a page stops before the
  // change that would take it past this, but always holds at least one change, so a reader always moves on.
  size_t max_bytes = kMaxChangeFeedPageBytes;
  // A feed range (storage/feed_range.h), as sent (hex; both empty: the whole container): only changes to items whose
  // partition key's effective partition key is in it. Positions advance as without it, so a page may be short (or,
  // not caught up, empty) and the next resumes where it stopped.
  std::string feed_range_min;
  std::string feed_range_max;
};

// Where a change is in the feed (see the header comment). For an explicit change phase is 1 and the rest is zero;
// phases 2 and 3 are write-time positions (index: the write's log index, 0 when unknown).
struct ChangePosition {
  uint64_t index = 0;
  uint8_t phase = 1;
  uint8_t kind = 0;  // phase 0: 0 own ttl, 1 inherited default; 2 and 3 their warnings
  int64_t sort_micros = 0;
  std::string partition_key;
  std::string id;
  bool operator==(const ChangePosition&) const = default;
  auto operator<=>(const ChangePosition&) const = default;
};

struct Change {
  ChangeOperation operation = ChangeOperation::kCreate;
  ChangePosition position;
  int64_t ts_micros = 0;  // the replicated time of the position
  std::string partition_key;
  std::string id;
  std::string image;     // encoded ItemRecord (storage/records.h); empty for deletes
  std::string previous;  // encoded ItemRecord before the change (replace, delete, expiration); empty for creates
                         // and warnings (whose image is the item warned of)
  bool ttl_expired = false;
  // The container's defaultTtl in force at the position: what the images' _expiresAt are rendered with, so an
  // expiration's previous image says when it expired under the policy that expired it, whatever changed since.
  ttl::DefaultTtl default_ttl;
  bool operator==(const Change&) const = default;
};

struct ChangeFeedPage {
  std::vector<Change> changes;
  std::string continuation;  // always set: where the next page starts
  bool caught_up = false;    // the page reached the applied position
  int64_t work = 0;          // positions and entries examined
  uint64_t crid = 0;         // the container read (its continuation tokens name it)
  std::string partition_key_path;  // that container's, e.g. "/pk"
};

// What a container's feed holds on this node, for the metrics (docs/metrics.md): LevelDB's approximate on-disk size
// of its feed keys (0E crid: records, shadows, policy history; the memtable not counted) and the oldest position a
// reader may start from now (the retention's start) with its replicated time, and the applied time.
struct ChangeFeedUsage {
  uint64_t approximate_bytes = 0;
  uint64_t oldest_index = 0;
  int64_t oldest_ts_micros = 0;
  int64_t applied_ts_micros = 0;
};

class ChangeFeedReader {
 public:
  // `gate` (the store's, storage/store_reader.h): both reads answer Unavailable while a snapshot is being installed.
  ChangeFeedReader(leveldb::DB* db, const InstallGate& gate) : db_(db), gate_(gate) {}
  // kGone (410) for a start before the retention window or before the feed was turned on; kNotFound for a missing
  // container; kInvalidArgument for mode kAll (or only_expirations) on a feed that is off, or a bad continuation.
  // Items deleted with their partition (storage/deleted_partitions.h) are never changes of any kind.
  Result<ChangeFeedPage> read(const ChangeFeedRequest& request) const;
  // What `container`'s feed holds on this node (ChangeFeedUsage above); kInvalidArgument for a feed that is off.
  Result<ChangeFeedUsage> usage(const ContainerRecord& container) const;

 private:
  leveldb::DB* db_;
  const InstallGate& gate_;
};

// The continuation token that resumes right after `position` of container `crid` (a change's "position" on the wire).
std::string change_feed_token(uint64_t crid, const ChangePosition& position);

// Shared with the collector's retention (ExpiryKeeper::trim_change_feed).
struct FeedPoint {
  uint64_t index = 0;
  int64_t ts_micros = 0;
};
struct FeedPolicy {
  uint64_t index = 0;
  ttl::ContainerTtlState state;
};
// ts(index) from the time index; nullopt when it is not there (trimmed, or written while no feed was on).
Result<std::optional<int64_t>> feed_time_at(leveldb::DB* db, const ReadSnapshot* snapshot, uint64_t index);
// The oldest start a reader may use now: the first position >= since_index whose ts >= now - retention.
Result<FeedPoint> feed_retention_start(leveldb::DB* db, const ReadSnapshot* snapshot, const ChangeFeedSettings& feed,
                                       int64_t now_micros);
// The ttl state in force at `index`: the last policy history entry at or before it.
Result<FeedPolicy> feed_policy_at(leveldb::DB* db, const ReadSnapshot* snapshot, uint64_t crid, uint64_t index);

}  // namespace mayfly::storage
