// Delete by partition key (docs/retention.md): one replicated command makes every item of one logical partition
// written at or before it gone at its log position, on every replica at once, and leaves them to the collector,
// which removes them with spare request units (ExpiryKeeper::drain_deleted_partitions) and then the partition's
// record. Until then the items are still stored, so every read and every apply asks PartitionDeletes whether an
// item is hidden:
//   - layout.h `12 crid pk -> DeletedPartition{ts, index}`: the partition's latest delete (a second delete before the
//     collector is done moves it forward);
//   - ContainerRecord::partitions_deleted_through_micros: the container's latest delete, so an item written after
//     it (every item of a container that never had one) needs no lookup at all.
// Whether an item is hidden depends only on replicated state (its write time and the delete's), so every replica
// answers alike whether or not its collector has removed it; a write after the delete is an ordinary create.
//
// Thread-safety: a PartitionDeletes is used by one thread, for one read (at one LevelDB snapshot) or one apply.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "storage/records.h"

namespace leveldb {
class DB;
class Snapshot;
}  // namespace leveldb

namespace mayfly::storage {

class PartitionDeletes {
 public:
  // Reads a key: its value, or nullopt when there is none.
  using Lookup = std::function<Result<std::optional<std::string>>(const std::string& key)>;
  PartitionDeletes(const ContainerRecord& container, Lookup lookup)
      : crid_(container.crid), through_(container.partitions_deleted_through_micros), lookup_(std::move(lookup)) {}
  // Reads at `snapshot` (nullptr: the live DB).
  static PartitionDeletes at(leveldb::DB* db, const leveldb::Snapshot* snapshot, const ContainerRecord& container);

  // Whether the item of `partition_key` (canonical text) written at `write_ts_micros` was deleted with its partition.
  Result<bool> hides(std::string_view partition_key, int64_t write_ts_micros);
  // The partition's delete, if it has one not yet drained.
  Result<std::optional<DeletedPartition>> of(std::string_view partition_key);

 private:
  uint64_t crid_;
  int64_t through_;
  Lookup lookup_;
  // The last partition asked about (scans visit one partition's items one after another).
  bool cached_ = false;
  std::string cached_key_;
  std::optional<DeletedPartition> cached_delete_;
};

}  // namespace mayfly::storage
