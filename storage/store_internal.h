// Internal to storage/ (not for other directories): the LevelDB helpers the store's files share — status
// translation, read options on a ReadSnapshot, prefix tests, the OpResult errors of reads and applies — and what the
// apply path and the garbage collector put into one write: StoreBatch, the expiry index entry of an item.
//
// Thread-safety: pure functions and values; a StoreBatch is built and written by one thread (the driver).
#pragma once

#include <leveldb/db.h>
#include <leveldb/slice.h>
#include <leveldb/write_batch.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/codec.h"
#include "common/status.h"
#include "storage/command.h"
#include "storage/layout.h"
#include "storage/store_reader.h"

namespace mayfly::storage::internal {

inline Status from_leveldb(const leveldb::Status& status, std::string_view what) {
  if (status.ok()) return Status::ok();
  if (status.IsCorruption()) return Status::corruption(std::string(what) + ": " + status.ToString());
  return Status::io_error(std::string(what) + ": " + status.ToString());
}

// Reads at the snapshot, or (nullptr) at the live DB.
inline leveldb::ReadOptions read_options(const ReadSnapshot* snapshot) {
  leveldb::ReadOptions options;
  options.snapshot = snapshot == nullptr ? nullptr : snapshot->get();
  return options;
}

inline bool has_prefix(const leveldb::Slice& key, std::string_view prefix) {
  return key.size() >= prefix.size() && std::string_view(key.data(), prefix.size()) == prefix;
}

inline std::string_view view(const leveldb::Slice& slice) { return std::string_view(slice.data(), slice.size()); }

inline OpResult not_found(std::string message) { return OpResult::error(StatusCode::kNotFound, std::move(message)); }
inline OpResult bad_request(std::string message) {
  return OpResult::error(StatusCode::kInvalidArgument, std::move(message));
}
inline OpResult internal_error(const Status& status) { return OpResult::storage_failure(status); }

// The value of an expiry index entry: the item's record bytes (key and value), for the backlog's byte figures.
inline std::string index_value(size_t record_bytes) {
  std::string out;
  codec::put_varint(out, record_bytes);
  return out;
}

inline Result<int64_t> decode_index_value(const leveldb::Slice& value) {
  codec::Reader reader(view(value));
  uint64_t bytes;
  if (!reader.get_varint(bytes) || !reader.done()) return Status::corruption("undecodable expiry index value");
  return static_cast<int64_t>(bytes);
}

// Which expiry index, if any, holds an item: items with their own ttl by expiry instant, items inheriting the
// container's default by write time (storage/layout.h).
enum class IndexKind { kNone, kOwn, kInherit };
struct IndexEntry {
  IndexKind kind = IndexKind::kNone;
  std::string key;
  int64_t sort_micros = 0;
};

inline IndexEntry index_entry_for(uint64_t crid, std::string_view partition_key, std::string_view id,
                                  const ItemRecord& record) {
  IndexEntry entry;
  switch (record.ttl.kind) {
    case ttl::ItemTtl::Kind::kNever:
      break;
    case ttl::ItemTtl::Kind::kSeconds:
      entry.kind = IndexKind::kOwn;
      entry.sort_micros = ttl::expiry_instant_micros(record.write_ts_micros, record.ttl.seconds);
      entry.key = own_expiry_key(crid, entry.sort_micros, partition_key, id);
      break;
    case ttl::ItemTtl::Kind::kInherit:
      entry.kind = IndexKind::kInherit;
      entry.sort_micros = record.write_ts_micros;
      entry.key = inherit_expiry_key(crid, entry.sort_micros, partition_key, id);
      break;
  }
  return entry;
}

// Everything one apply (or one GC batch) changes: the LevelDB batch plus the node-local effects that become true
// only if the batch is written (ExpiryKeeper::committed applies them).
struct StoreBatch {
  leveldb::WriteBatch batch;
  std::map<uint64_t, LocalStats> stats;  // new absolute values
  struct Removal {
    uint64_t crid;
    IndexKind kind;
    std::string key;  // the expiry index entry removed
    int64_t bytes;
  };
  std::vector<Removal> removals;
  std::vector<uint64_t> dropped;
  // Containers where a legal hold was released: the collector's cursors there start over (it passed over held items).
  std::vector<uint64_t> holds_released;

  void reset() {
    batch.Clear();
    stats.clear();
    removals.clear();
    dropped.clear();
    holds_released.clear();
  }
};

}  // namespace mayfly::storage::internal
