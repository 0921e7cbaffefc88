#include "storage/apply_group.h"

#include "common/assert.h"

namespace mayfly::storage {
namespace {

// Records each key's last write in a batch, pointing into the batch's own bytes.
class Indexer : public leveldb::WriteBatch::Handler {
 public:
  explicit Indexer(std::unordered_map<std::string_view, std::optional<std::string_view>>& latest)
      : latest_(latest) {}
  void Put(const leveldb::Slice& key, const leveldb::Slice& value) override {
    latest_[std::string_view(key.data(), key.size())] = std::string_view(value.data(), value.size());
  }
  void Delete(const leveldb::Slice& key) override {
    latest_[std::string_view(key.data(), key.size())] = std::nullopt;
  }

 private:
  std::unordered_map<std::string_view, std::optional<std::string_view>>& latest_;
};

}  // namespace

void ApplyGroup::add(std::unique_ptr<leveldb::WriteBatch> batch) {
  Indexer indexer(latest_);
  // A batch built in this process always parses (Iterate's Status only reports malformed bytes).
  const leveldb::Status indexed = batch->Iterate(&indexer);
  MAYFLY_ASSERT_MSG(indexed.ok(), "apply batch does not parse: %s", indexed.ToString().c_str());
  batches_.push_back(std::move(batch));
}

const std::optional<std::string_view>* ApplyGroup::find(std::string_view key) const {
  auto it = latest_.find(key);
  return it == latest_.end() ? nullptr : &it->second;
}

leveldb::WriteBatch ApplyGroup::combined() const {
  // Each key once, with what the group's last write to it left. Every apply rewrites the meta record, the local
  // stats, the exactly-once totals and its client's record; appending the batches would insert each version into
  // LevelDB's log and memtable only for the next to shadow it. One batch is applied atomically (one log record), so
  // the order of its keys changes nothing a reader or a crash can see.
  leveldb::WriteBatch out;
  for (const auto& [key, value] : latest_) {
    if (value) {
      out.Put(leveldb::Slice(key.data(), key.size()), leveldb::Slice(value->data(), value->size()));
    } else {
      out.Delete(leveldb::Slice(key.data(), key.size()));
    }
  }
  return out;
}

void ApplyGroup::clear() {
  latest_.clear();
  batches_.clear();
}

}  // namespace mayfly::storage
