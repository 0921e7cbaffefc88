// The on-disk layout of a node's LevelDB: key prefixes and key encodings (docs/design.md, "The state machine"). The
// values' records and their encodings are in storage/records.h.
//
//   01 "state"                                  -> MetaState (applied index and time, counters)
//   02 db                                       -> DatabaseRecord
//   03 db container                             -> ContainerRecord
//   04 crid pk id                               -> ItemRecord (header + user JSON)
//   05 crid expiry_us pk id                     -> record bytes   (items with their own ttl, by expiry instant)
//   06 crid write_ts_us pk id                   -> record bytes   (items inheriting the default, by write time)
//   07 crid                                     -> ""             (dropped container, its keys await reclaiming)
//   08 node id                                  -> HOST:PORT      (the replicated address book of members)
//   09 crid write_ts_us pk id                   -> ""             (every item by last-modified time: ORDER BY c._ts)
//   0A..0D                                      -> the exactly-once table of client write outcomes (write_dedup.h)
//   0E crid 01 index                            -> FeedRecord      (change feed: the write applied at index)
//   0E crid 02 kind sort_us pk id               -> record bytes    (change feed: shadow image of a collected item,
//                                                                    or, kinds 2|3, of one removed while warned of)
//   0E crid 03 index                            -> ContainerTtlState (change feed: ttl state from index on)
//   0F index                                    -> ts_us           (change feed: the time index, docs/changefeed.md)
//   12 crid pk                                  -> DeletedPartition (a delete by partition key whose items the
//                                                                  collector has not all removed yet)
//   13 crid set_index                           -> HoldRecord     (legal holds, active and released: holds.h)
//   14 index                                    -> HoldAuditRecord (the holds' audit trail, by log index)
//   10 "hard" | "base" | "snap"                 -> raft hard state, compaction point, snapshot record (until
//   11 index                                    -> raft log entry                   the WAL: migrated, then deleted)
//   20 crid                                     -> LocalStats     (node-local: physical items and bytes)
//   21 "installing"                             -> index (u64 BE) (node-local: a snapshot install under way, written
//                                                                  before its first batch, deleted by its last)
//
// Strings are order-preserving escaped (codec::put_ordered_string), integers big-endian, so a prefix scan of a
// container, a partition or an index walks it in order. crid is a container's internal id, allocated from a
// replicated counter, so a dropped container's keys never mix with a new container of the same name.
// Prefixes below kLocalPrefixFirst, but for the raft log's legacy 10 and 11, are replicated state (is_replicated_tag):
// byte-identical on every node that applied the same log without garbage collection. Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mayfly::storage {

enum class KeyTag : uint8_t {
  kMeta = 0x01,
  kDatabase = 0x02,
  kContainer = 0x03,
  kItem = 0x04,
  kOwnExpiryIndex = 0x05,
  kInheritExpiryIndex = 0x06,
  kDroppedContainer = 0x07,
  kMemberAddress = 0x08,
  kTsIndex = 0x09,
  kDedupClient = 0x0A,
  kDedupResult = 0x0B,
  kDedupActivity = 0x0C,
  kDedupTotals = 0x0D,
  kChangeFeed = 0x0E,
  kTimeIndex = 0x0F,
  kRaftMeta = 0x10,
  kRaftEntry = 0x11,
  kDeletedPartition = 0x12,
  kHold = 0x13,
  kHoldAudit = 0x14,
  kLocalStats = 0x20,
  kInstallMarker = 0x21,
};
inline constexpr uint8_t kLocalPrefixFirst = 0x20;
// Whether keys under `tag` are replicated state (what snapshots carry and replicas compare): every tag below
// kLocalPrefixFirst except the raft log's legacy keys (0x10, 0x11).
constexpr bool is_replicated_tag(uint8_t tag) {
  return tag >= static_cast<uint8_t>(KeyTag::kMeta) && tag < kLocalPrefixFirst &&
         tag != static_cast<uint8_t>(KeyTag::kRaftMeta) && tag != static_cast<uint8_t>(KeyTag::kRaftEntry);
}

std::string meta_key();
std::string database_key(std::string_view database);
std::string container_prefix(std::string_view database);  // all containers of a database
std::string container_key(std::string_view database, std::string_view container);
std::string item_prefix(uint64_t crid);                                   // a whole container
std::string partition_prefix(uint64_t crid, std::string_view partition_key);  // one partition
std::string item_key(uint64_t crid, std::string_view partition_key, std::string_view id);
std::string own_expiry_prefix(uint64_t crid);
std::string own_expiry_key(uint64_t crid, int64_t expiry_micros, std::string_view partition_key, std::string_view id);
std::string inherit_expiry_prefix(uint64_t crid);
std::string inherit_expiry_key(uint64_t crid, int64_t write_ts_micros, std::string_view partition_key,
                               std::string_view id);
// Every item of a container by write time (µs; unique per container, one write per log entry), for queries that
// ORDER BY c._ts. Replicated like the expiry indexes and removed with the item (also by GC).
std::string ts_index_prefix(uint64_t crid);
std::string ts_index_key(uint64_t crid, int64_t write_ts_micros, std::string_view partition_key, std::string_view id);
std::string dropped_container_key(uint64_t crid);
// Deletes by partition key (storage/deleted_partitions.h): the partition's items written at or before the delete are
// gone; the collector removes them and then this key.
std::string deleted_partition_prefix(uint64_t crid);
std::string deleted_partition_key(uint64_t crid, std::string_view partition_key);
// Legal holds (storage/holds.h): a container's holds by the log index that set them; the audit trail by log index.
std::string hold_prefix(uint64_t crid);
std::string hold_key(uint64_t crid, uint64_t set_index);
std::string hold_audit_prefix();
std::string hold_audit_key(uint64_t index);
// The change feed (storage/changefeed.h, docs/changefeed.md): everything of one container under 0E crid, in three
// sub-keyspaces; and the time index (log index -> replicated time), kept while any container has its feed on.
enum class FeedSub : uint8_t { kRecord = 0x01, kShadow = 0x02, kPolicy = 0x03 };
std::string feed_prefix(uint64_t crid);                    // all of a container's feed keys
std::string feed_sub_prefix(uint64_t crid, FeedSub sub);
std::string feed_record_key(uint64_t crid, uint64_t index);
std::string feed_policy_key(uint64_t crid, uint64_t index);
// A shadow image: the key of the expiry index entry it replaces (own: kind 0, inherit: kind 1) under the feed.
// Kinds 2 and 3: the warning shadows of items removed alive inside their warning window (own ttl, inheriting).
inline constexpr uint8_t kFeedWarningShadowKindOwn = 2;
inline constexpr uint8_t kFeedWarningShadowKindInherit = 3;
std::string feed_shadow_kind_prefix(uint64_t crid, uint8_t kind);
std::string feed_shadow_key(uint64_t crid, uint8_t kind, int64_t sort_micros, std::string_view partition_key,
                            std::string_view id);
std::string time_index_prefix();
std::string time_index_key(uint64_t index);
// The log index at the end of a feed record, policy or time index key.
Result<uint64_t> decode_trailing_index(std::string_view key);
std::string local_stats_key(uint64_t crid);
// Present while a snapshot install has begun and not finished (StateMachine::install_snapshot); its value is the
// snapshot's index, 8 bytes big-endian.
std::string install_marker_key();
std::string member_address_key(uint64_t node);
std::string raft_meta_key(std::string_view name);  // "hard", "base", "snap"
std::string raft_entry_key(uint64_t index);
std::string raft_entry_prefix();

// Decoded (crid, sort value, pk, id) of an expiry index key.
struct IndexKey {
  uint64_t crid = 0;
  int64_t sort_micros = 0;
  std::string partition_key;
  std::string id;
};
Result<IndexKey> decode_index_key(std::string_view key);
// The (pk, id) of an item key.
Status decode_item_key(std::string_view key, std::string& partition_key, std::string& id);

}  // namespace mayfly::storage
