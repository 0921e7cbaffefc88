// ApplyGroup: the applies of one Raft Ready written to LevelDB as one batch instead of one write each (each LevelDB
// write costs a WAL record, a write(2) and the writer queue's lock hand-off). The group keeps each apply's finished
// batch and answers point reads through them, so a later apply in the group reads what the earlier ones wrote, as
// it would have read it from the store; iterators see only LevelDB, so a caller writes the group out before any
// scan (StateMachine does). Writing the group is one atomic batch holding each key once, as the group's last apply
// left it (the meta state among them): after a crash the store is exactly the state after some applied index, as
// with one write per apply.
//
// Thread-safety: driver thread only (owned by the StateMachine).
#pragma once

#include <leveldb/write_batch.h>

#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mayfly::storage {

class ApplyGroup {
 public:
  // Adds one apply's batch. It is not changed again: the group's reads point into its bytes.
  void add(std::unique_ptr<leveldb::WriteBatch> batch);
  bool empty() const { return batches_.empty(); }
  size_t size() const { return batches_.size(); }
  // The value the group's applies left for `key`: nullptr when none of them wrote it; otherwise the value, or
  // nullopt when the last of them deleted it. Valid until the group is cleared.
  const std::optional<std::string_view>* find(std::string_view key) const;
  // The applies' writes as one batch, each key once with its last value (or its deletion).
  leveldb::WriteBatch combined() const;
  void clear();

 private:
  std::vector<std::unique_ptr<leveldb::WriteBatch>> batches_;
  std::unordered_map<std::string_view, std::optional<std::string_view>> latest_;
};

}  // namespace mayfly::storage
