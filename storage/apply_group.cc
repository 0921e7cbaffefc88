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
  leveldb::WriteBatch out;
  for (const std::unique_ptr<leveldb::WriteBatch>& batch : batches_) out.Append(*batch);
  return out;
}

void ApplyGroup::clear() {
  latest_.clear();
  batches_.clear();
}

}  // namespace mayfly::storage
