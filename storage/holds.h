// Legal holds (docs/retention.md, "Legal holds"): a hold on a whole container, on one partition key value, or on one
// item keeps what it covers from expiring and from every deletion path until it is released. Holds are replicated
// commands (CommandType::kSetHold, kReleaseHold); what they change depends only on the log, so every replica keeps
// and releases the same items at the same positions.
//
// The rule. An item is covered at a log position when some active hold's scope contains it. Its *held stretch* is the
// longest run of positions, ending now, during which it was covered without a gap (by one hold or by several that
// overlapped — a partition hold set while a container hold was on, the container hold released later). Let a be the
// position where that stretch began and ts(a) its replicated time. The item is alive at time now when
//     ttl::alive(item, now)  or  (it is covered now and ttl::alive(item, ts(a))),
// i.e. an item that was alive when the hold took it stays alive while it is held, whatever its instant; one that had
// expired before is not brought back. When the last covering hold is released (position r), the first rule alone
// applies again, so an item whose instant passed during the hold expires at r, on every replica at once. Its
// `_expiresAt` keeps showing the instant it would have had; `_hold` lists the active holds covering it.
// The second rule reads the container's ttl state as it is now, which is the state it had at a: a container's
// defaultTtl cannot change while any hold in it is active (every change may raise the container's watermarks, which
// would expire a held item), and a stretch is a run of positions during which some hold was active.
//
// What is stored (storage/layout.h): `13 crid set_index -> HoldRecord`, every hold of the container, released ones
// included (a stretch may begin at a released hold that overlapped an active one; they are small and few), and
// `14 index -> HoldAuditRecord`, one per set and release, kept after the container is gone: who, when, what, why.
// ContainerRecord::active_holds counts the active ones, so a container that has none costs reads nothing.
//
// Thread-safety: values; a HoldSet is read-only once loaded (any thread).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "storage/records.h"

namespace leveldb {
class DB;
class Snapshot;
}  // namespace leveldb

namespace mayfly::storage {

enum class HoldScope : uint8_t { kContainer = 0, kPartition = 1, kItem = 2 };
std::string_view hold_scope_name(HoldScope scope);  // "container", "partition", "item"

inline constexpr size_t kMaxHoldIdBytes = 255;
inline constexpr size_t kMaxHoldReasonBytes = 1024;
// Active holds per container at most: each read of a held container looks at them, and a legal team's holds are few.
inline constexpr uint64_t kMaxActiveHoldsPerContainer = 1000;

struct HoldRecord {
  std::string id;
  HoldScope scope = HoldScope::kContainer;
  std::string partition_key;  // canonical JSON text: kPartition and kItem
  std::string item_id;        // kItem
  std::string reason;
  std::string set_by;         // the key name of the client that set it ("" on a node without keys)
  uint64_t set_index = 0;
  int64_t set_ts_micros = 0;
  uint64_t released_index = 0;  // 0: active
  int64_t released_ts_micros = 0;
  std::string released_by;
  std::string release_reason;
  bool active() const { return released_index == 0; }
  // Whether the hold's scope contains the item (pk, id).
  bool covers(std::string_view partition_key, std::string_view id) const;
  bool operator==(const HoldRecord&) const = default;
};
std::string encode_hold(const HoldRecord& record);
Result<HoldRecord> decode_hold(std::string_view bytes);

// One entry of the audit trail: a hold set or released.
struct HoldAuditRecord {
  enum class Action : uint8_t { kSet = 0, kRelease = 1 };
  Action action = Action::kSet;
  uint64_t index = 0;
  int64_t ts_micros = 0;
  std::string database;
  std::string container;
  std::string hold_id;
  HoldScope scope = HoldScope::kContainer;
  std::string partition_key;
  std::string item_id;
  std::string actor;   // key name
  std::string reason;  // the hold's reason (set) or the release's (release)
  bool operator==(const HoldAuditRecord&) const = default;
};
std::string encode_hold_audit(const HoldAuditRecord& record);
Result<HoldAuditRecord> decode_hold_audit(std::string_view bytes);

// JSON renderings (the API's bodies): a hold {"id","scope","partitionKey"?,"itemId"?,"reason","setBy","setTs",
// "setIndex","active","releasedTs"?,"releasedIndex"?,"releasedBy"?,"releaseReason"?} and an audit entry
// {"action","index","ts","database","container","hold","scope","partitionKey"?,"itemId"?,"actor","reason"}.
// `database`/`container` are added to a hold when not empty (lists across containers).
void render_hold(const HoldRecord& hold, std::string_view database, std::string_view container, std::string& out);
void render_hold_audit(const HoldAuditRecord& record, std::string& out);

// Every hold of one container, as stored at one LevelDB snapshot (or the live DB).
class HoldSet {
 public:
  HoldSet() = default;
  explicit HoldSet(std::vector<HoldRecord> holds);
  static Result<HoldSet> load(leveldb::DB* db, const leveldb::Snapshot* snapshot, uint64_t crid);
  // The container's holds when it has an active one; nullopt (and no read) when it has none.
  static Result<std::optional<HoldSet>> load_if_held(leveldb::DB* db, const leveldb::Snapshot* snapshot,
                                                     const ContainerRecord& container);

  const std::vector<HoldRecord>& all() const { return holds_; }
  bool any_active() const { return active_ > 0; }
  // Every active hold, in the order they were set.
  std::vector<const HoldRecord*> active() const;
  // The active hold with this id, if any.
  const HoldRecord* active_by_id(std::string_view id) const;
  // The active holds covering the item, in the order they were set.
  std::vector<const HoldRecord*> active_covering(std::string_view partition_key, std::string_view id) const;
  // The active holds that cover some item of the partition: the container's, the partition's, and item holds in it.
  std::vector<const HoldRecord*> active_in_partition(std::string_view partition_key) const;
  // When the item is covered now: the replicated time at which its held stretch began (see the header comment).
  std::optional<int64_t> held_since(std::string_view partition_key, std::string_view id) const;
  // Whether the item is alive at now_micros under the rule above (`since`: held_since's answer).
  static bool alive(const ItemRecord& record, const ttl::ContainerTtlState& state, int64_t now_micros,
                    std::optional<int64_t> since);
  bool alive(std::string_view partition_key, std::string_view id, const ItemRecord& record,
             const ttl::ContainerTtlState& state, int64_t now_micros) const;
  // `_hold`'s JSON value for the item: the ids of the active holds covering it (["case-1",...]); "" when none.
  std::string hold_json(std::string_view partition_key, std::string_view id) const;

 private:
  std::vector<HoldRecord> holds_;  // by set_index
  size_t active_ = 0;
  std::vector<size_t> container_;                                   // container-scope holds
  std::map<std::string, std::vector<size_t>, std::less<>> partition_;  // pk -> partition holds
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> item_;  // (pk, id) -> item holds
  std::map<std::string, std::vector<size_t>, std::less<>> items_in_partition_;  // pk -> item holds in it
};

// A refusal naming the holds: "... is under legal hold 'a' (partition \"x\", set by 'legal': reason) ...".
std::string describe_holds(const std::vector<const HoldRecord*>& holds);

}  // namespace mayfly::storage
