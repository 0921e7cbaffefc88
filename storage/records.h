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
  bool operator==(const MetaState&) const = default;
};
std::string encode_meta(const MetaState& meta);
Result<MetaState> decode_meta(std::string_view bytes);

struct DatabaseRecord {
  uint64_t rid = 0;
  int64_t created_ts_micros = 0;
};
std::string encode_database(const DatabaseRecord& record);
Result<DatabaseRecord> decode_database(std::string_view bytes);

// A container's throughput. The default is serverless — never throttled, TTL deletes counted as consumed RU — so a
// self-hosted cluster does not throttle anyone by surprise; provision RU/s to get a budget, 429s and a collector
// that only spends what users leave over.
struct Throughput {
  enum class Mode : uint8_t { kProvisioned, kServerless };
  Mode mode = Mode::kServerless;
  int64_t request_units_per_second = 0;  // kProvisioned only
  bool operator==(const Throughput&) const = default;
};
inline constexpr int64_t kMinProvisionedRequestUnits = 1;
inline constexpr int64_t kMaxProvisionedRequestUnits = 1'000'000'000;

struct ContainerRecord {
  uint64_t crid = 0;
  std::string partition_key_path;
  ttl::ContainerTtlState ttl;
  ttl::IndexingMode indexing = ttl::IndexingMode::kConsistent;
  Throughput throughput;
  int64_t modified_ts_micros = 0;
  uint64_t etag_sequence = 0;
};
std::string encode_container(const ContainerRecord& record);
Result<ContainerRecord> decode_container(std::string_view bytes);

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

struct LocalStats {
  int64_t items = 0;
  int64_t bytes = 0;
};
std::string encode_local_stats(const LocalStats& stats);
Result<LocalStats> decode_local_stats(std::string_view bytes);

// "\"00000000000000a3\"": the opaque, quoted etag for a write sequence number.
std::string format_etag(uint64_t sequence);

}  // namespace mayfly::storage
