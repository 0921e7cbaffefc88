// StateMachine's snapshots and dump (declared in storage/state_machine.h): exporting the replicated state for Raft
// from a View, installing a snapshot in place of the whole store, and dumping keys for tests and tools.
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <map>

#include "common/codec.h"
#include "storage/state_machine.h"
#include "storage/store_internal.h"

namespace mayfly::storage {

using internal::from_leveldb;
using internal::read_options;

namespace {

constexpr uint8_t kSnapshotVersion = 1;

bool is_replicated_key(const leveldb::Slice& key) {
  const uint8_t tag = static_cast<uint8_t>(key[0]);
  return tag >= static_cast<uint8_t>(KeyTag::kMeta) && tag < static_cast<uint8_t>(KeyTag::kRaftMeta);
}

bool is_state_machine_key(const leveldb::Slice& key) {
  return is_replicated_key(key) || static_cast<uint8_t>(key[0]) >= kLocalPrefixFirst;
}

}  // namespace

StateMachine::View::View(leveldb::DB* db, AppliedState applied, std::atomic<int>* open_views)
    : db_(db), snapshot_(db), applied_(applied), open_views_(open_views) {
  open_views_->fetch_add(1);
}

StateMachine::View::~View() { open_views_->fetch_sub(1); }

std::unique_ptr<StateMachine::View> StateMachine::open_view() const {
  // On the driver thread between applies, so the LevelDB snapshot is exactly the state at applied().
  MAYFLY_ASSERT_MSG(group_.empty(), "a view opened with grouped applies not yet written");
  return std::unique_ptr<View>(new View(db_.get(), applied(), &open_views_));
}

Status StateMachine::View::export_snapshot_to(const SnapshotWriter& write, size_t piece_bytes,
                                              SnapshotFigures* figures) const {
  std::string out;
  codec::put_u8(out, kSnapshotVersion);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot_)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!is_replicated_key(it->key())) continue;
    codec::put_bytes(out, std::string_view(it->key().data(), it->key().size()));
    codec::put_bytes(out, std::string_view(it->value().data(), it->value().size()));
    if (figures != nullptr && static_cast<uint8_t>(it->key()[0]) == static_cast<uint8_t>(KeyTag::kItem)) {
      figures->items += 1;
      figures->item_bytes += it->key().size() + it->value().size();
    }
    if (out.size() >= piece_bytes) {
      MAYFLY_RETURN_IF_ERROR(write(out));
      out.clear();
    }
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "export snapshot"));
  if (!out.empty()) MAYFLY_RETURN_IF_ERROR(write(out));
  return Status::ok();
}

Result<std::string> StateMachine::View::export_snapshot() const {
  std::string out;
  MAYFLY_RETURN_IF_ERROR(export_snapshot_to(
      [&out](std::string_view piece) {
        out.append(piece);
        return Status::ok();
      },
      size_t(1) << 20, nullptr));
  return out;
}

Result<std::string> StateMachine::export_snapshot() const { return open_view()->export_snapshot(); }

Status StateMachine::install_snapshot(std::string_view data) {
  MAYFLY_ASSERT_MSG(!grouping_, "snapshot installed inside an apply group");
  if (!sticky_.is_ok()) return sticky_;
  // Decode and check everything before touching the store.
  codec::Reader reader(data);
  uint8_t version;
  if (!reader.get_u8(version) || version != kSnapshotVersion) return Status::corruption("snapshot version");
  leveldb::WriteBatch batch;
  std::optional<MetaState> meta;
  std::map<uint64_t, LocalStats> stats;
  while (!reader.done()) {
    std::string_view key, value;
    if (!reader.get_bytes(key) || !reader.get_bytes(value) || key.empty() ||
        !is_replicated_key(leveldb::Slice(key.data(), key.size()))) {
      return Status::corruption("undecodable snapshot entry");
    }
    if (key == meta_key()) {
      MAYFLY_ASSIGN_OR_RETURN(meta, decode_meta(value));
    } else if (static_cast<uint8_t>(key[0]) == static_cast<uint8_t>(KeyTag::kItem)) {
      codec::Reader key_reader(key.substr(1));
      uint64_t crid;
      if (!key_reader.get_u64_be(crid)) return Status::corruption("snapshot item key");
      stats[crid].items += 1;
      stats[crid].bytes += static_cast<int64_t>(key.size() + value.size());
    }  // dropped-container markers travel too: the installing node reclaims those keys itself
    batch.Put(leveldb::Slice(key.data(), key.size()), leveldb::Slice(value.data(), value.size()));
  }
  if (!meta) return Status::corruption("snapshot without applied state");
  // Replace: delete every state-machine key (replicated and local) of the current store in the same batch. LevelDB
  // applies a batch in order, so the puts above must come after the deletes: build a second batch.
  leveldb::WriteBatch replace;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (is_state_machine_key(it->key())) replace.Delete(it->key());
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan before installing a snapshot"));
  replace.Append(batch);
  for (const auto& [crid, local] : stats) replace.Put(local_stats_key(crid), encode_local_stats(local));
  dedup_mirror_.drop();  // the snapshot's own table and containers are read on the next apply that needs them
  apply_containers_.clear();
  Status status = from_leveldb(db_->Write(leveldb::WriteOptions(), &replace), "install snapshot");
  if (!status.is_ok()) {
    sticky_ = status;
    return status;
  }
  meta_ = *meta;
  publish_applied();
  expiry_.forget_all();
  reader_.invalidate_container_list();
  return Status::ok();
}

Result<std::vector<std::pair<std::string, std::string>>> StateMachine::dump(bool include_local) const {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const uint8_t tag = static_cast<uint8_t>(it->key()[0]);
    const bool replicated = tag < 0x10;
    const bool local = tag >= kLocalPrefixFirst;
    if (replicated || (include_local && local)) out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "dump"));
  return out;
}

}  // namespace mayfly::storage
