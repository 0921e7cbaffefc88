// PartitionDeletes (storage/deleted_partitions.h).
#include "storage/deleted_partitions.h"

#include <leveldb/db.h>

#include "storage/layout.h"

namespace mayfly::storage {

PartitionDeletes PartitionDeletes::at(leveldb::DB* db, const leveldb::Snapshot* snapshot,
                                      const ContainerRecord& container) {
  return PartitionDeletes(container, [db, snapshot](const std::string& key) -> Result<std::optional<std::string>> {
    leveldb::ReadOptions options;
    options.snapshot = snapshot;
    std::string value;
    leveldb::Status status = db->Get(options, key, &value);
    if (status.IsNotFound()) return std::optional<std::string>();
    if (!status.ok()) return Status::io_error("read deleted partition: " + status.ToString());
    return std::optional<std::string>(std::move(value));
  });
}

Result<std::optional<DeletedPartition>> PartitionDeletes::of(std::string_view partition_key) {
  if (through_ == 0) return std::optional<DeletedPartition>();
  if (!cached_ || cached_key_ != partition_key) {
    MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, lookup_(deleted_partition_key(crid_, partition_key)));
    cached_delete_.reset();
    if (raw) {
      MAYFLY_ASSIGN_OR_RETURN(DeletedPartition record, decode_deleted_partition(*raw));
      cached_delete_ = record;
    }
    cached_key_.assign(partition_key);
    cached_ = true;
  }
  return cached_delete_;
}

Result<bool> PartitionDeletes::hides(std::string_view partition_key, int64_t write_ts_micros) {
  if (write_ts_micros > through_) return false;  // written after the container's latest delete (or none ever)
  MAYFLY_ASSIGN_OR_RETURN(std::optional<DeletedPartition> deleted, of(partition_key));
  return deleted && write_ts_micros <= deleted->ts_micros;
}

}  // namespace mayfly::storage
