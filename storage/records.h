// The records stored as values in a node's LevelDB (keys: storage/layout.h) and their encodings: the applied state
// (MetaState), databases, containers (with their throughput), items, and the node-local stats of a container; and
// the etag format of a write sequence number. Encodings are versioned and decoding checks every field: an
// undecodable value is Corruption, never a default.
//
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "ttl/ttl.h"

namespace mayfly::storage {

struct MetaState {
  uint64_t applied_index = 0;
  int64_t applied_ts_micros = 0;
  uint64_t write_sequence = 0;        // one per successful write; etags and item rids come from it
  uint64_t next_container_rid = 1;
  // Containers with their change feed on: while > 0 every apply writes its time index entry (docs/changefeed.md).
  // Encoded only when > 0, so stores without a feed keep their bytes.
  uint64_t feed_containers = 0;
  bool operator==(const MetaState&) const = default;
};
std::string encode_meta(const MetaState& meta);
Result<MetaState> decode_meta(std::string_view bytes);

// A container's throughput. The default is serverless — never throttled, TTL deletes counted as consumed RU — so a
// self-hosted cluster does not throttle anyone by surprise; provision RU/s to get a budget, 429s and a collector
// that only spends what users leave over. kShared: the container has none of its own and shares its database's
// (a database created with shared throughput); request_units_per_second is the database's figure, kept in step
// when the database's throughput changes, and the budget, 429s and spare RU are the database's, counted over all
// of its sharing containers (node/ru_account.h).
struct Throughput {
  enum class Mode : uint8_t { kProvisioned, kServerless, kShared };
  Mode mode = Mode::kServerless;
  int64_t request_units_per_second = 0;  // kProvisioned and kShared only
  bool operator==(const Throughput&) const = default;
};

// A database: its resource sequence, creation time, and its shared throughput (kProvisioned; serverless: none, each
// container has its own). Records written before shared throughput existed decode as none.
struct DatabaseRecord {
  uint64_t rid = 0;
  int64_t created_ts_micros = 0;
  Throughput throughput;
  int64_t modified_ts_micros = 0;  // the last change of its throughput (encoded with it)
};
std::string encode_database(const DatabaseRecord& record);
Result<DatabaseRecord> decode_database(std::string_view bytes);
inline constexpr int64_t kMinProvisionedRequestUnits = 1;
inline constexpr int64_t kMaxProvisionedRequestUnits = 1'000'000'000;

// A container's change feed settings (storage/changefeed.h). Off by default: in mode `all` the feed keeps a full
// image and the previous image of every write for the retention period, which roughly triples the write volume of
// a container; users who want it ask for it. Records written before the feed existed decode as off.
struct ChangeFeedSettings {
  bool enabled = false;
  int64_t retention_seconds = 0;  // > 0 when enabled
  uint64_t since_index = 0;       // the log index at which it was (last) turned on: changes after it are served
  bool operator==(const ChangeFeedSettings&) const = default;
};
// Used when a command turns the feed on without a retention (the leader fills it from its --changefeed-retention
// before proposing, so this applies only to commands that reach the apply without one, e.g. in tests).
inline constexpr int64_t kDefaultChangeFeedRetentionSeconds = 4 * 3600;
inline constexpr int64_t kMaxChangeFeedRetentionSeconds = 90LL * 24 * 3600;

struct ContainerRecord {
  uint64_t crid = 0;
  std::string partition_key_path;
  ttl::ContainerTtlState ttl;
  ttl::IndexingMode indexing = ttl::IndexingMode::kConsistent;
  Throughput throughput;
  int64_t modified_ts_micros = 0;
  uint64_t etag_sequence = 0;
  ChangeFeedSettings change_feed;  // encoded only once it was ever turned on
  // The replicated time of the container's latest delete by partition key (0: none ever): an item written after it
  // cannot be hidden by one, so reads look for a deleted partition only for items written at or before it.
  int64_t partitions_deleted_through_micros = 0;  // encoded only once there was one
  // Legal holds in force on the container (storage/holds.h): while 0, no read or apply looks for one.
  uint64_t active_holds = 0;  // encoded only while > 0
};
std::string encode_container(const ContainerRecord& record);
Result<ContainerRecord> decode_container(std::string_view bytes);

// A delete by partition key (layout.h 12 crid pk): the partition's items written at or before ts_micros are gone.
struct DeletedPartition {
  int64_t ts_micros = 0;
  uint64_t index = 0;  // the log position of the delete
  bool operator==(const DeletedPartition&) const = default;
};
std::string encode_deleted_partition(const DeletedPartition& record);
Result<DeletedPartition> decode_deleted_partition(std::string_view bytes);

// An item as stored: a compact header and the user's JSON (system properties stripped, everything else as sent).
struct ItemRecord {
  int64_t write_ts_micros = 0;
  ttl::ItemTtl ttl;
  uint64_t etag_sequence = 0;
  uint64_t item_rid = 0;
  std::string json;
};
std::string encode_item(const ItemRecord& record);
Result<ItemRecord> decode_item(std::string_view bytes);

// One explicit change of the change feed: the write applied at a log index (key: layout.h feed_record_key). Images
// are encoded ItemRecords (encode_item); `previous` is empty for a create.
// kWarning is never stored: the change feed derives it (storage/changefeed.h, "Warnings").
enum class ChangeOperation : uint8_t { kCreate = 0, kReplace = 1, kDelete = 2, kWarning = 3 };
struct FeedRecord {
  ChangeOperation operation = ChangeOperation::kCreate;
  int64_t ts_micros = 0;
  std::string partition_key;
  std::string id;
  std::string image;     // the new record (create, replace); empty for delete
  std::string previous;  // the record before (replace, delete); empty for create
  bool operator==(const FeedRecord&) const = default;
};
std::string encode_feed_record(const FeedRecord& record);
Result<FeedRecord> decode_feed_record(std::string_view bytes);
// A container's ttl state, as kept in the feed's policy history.
std::string encode_ttl_state(const ttl::ContainerTtlState& state);
Result<ttl::ContainerTtlState> decode_ttl_state(std::string_view bytes);

struct LocalStats {
  int64_t items = 0;
  int64_t bytes = 0;
};
std::string encode_local_stats(const LocalStats& stats);
Result<LocalStats> decode_local_stats(std::string_view bytes);

// "\"00000000000000a3\"": the opaque, quoted etag for a write sequence number.
std::string format_etag(uint64_t sequence);

}  // namespace mayfly::storage
