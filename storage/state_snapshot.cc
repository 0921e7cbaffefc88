// StateMachine's snapshots and dump (declared in storage/state_machine.h): exporting the replicated state for Raft
// from a View, installing a snapshot in place of the whole store, and dumping keys for tests and tools.
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <map>

#include "common/codec.h"
#include "storage/state_machine.h"
#include "storage/store_internal.h"

namespace mayfly::storage {

using internal::from_leveldb;
using internal::read_options;

namespace {

constexpr uint8_t kSnapshotVersion = 1;

bool is_replicated_key(const leveldb::Slice& key) { return is_replicated_tag(static_cast<uint8_t>(key[0])); }

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
  leveldb::ReadOptions read = read_options(&snapshot_);
  read.fill_cache = false;  // one pass over the whole store: keep the block cache for the reads it would evict
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read));
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

// ---- installing ---------------------------------------------------------------------------------------------

namespace {

// The longest key or value a snapshot record may declare. The store writes none near it (an item is at most 2 MB, a
// feed record holds two images): a longer one is corrupt framing, refused before the decoder reads that far.
constexpr uint64_t kMaxSnapshotFieldBytes = 64 << 20;
// How much the decoder asks its source for at a time.
constexpr size_t kSnapshotReadBytes = 4 << 20;
// A varint's longest encoding.
constexpr size_t kMaxVarintBytes = 10;

}  // namespace

// The records of a snapshot read from a SnapshotSource: the buffer holds the record being decoded plus what is left
// of the last piece read, so a record may straddle any number of pieces and memory stays at a piece and a record.
class StateMachine::SnapshotDecoder {
 public:
  explicit SnapshotDecoder(const SnapshotSource& source) : source_(source) {}

  Status read_version() {
    MAYFLY_ASSIGN_OR_RETURN(size_t available, fill(1));
    if (available < 1 || static_cast<uint8_t>(buffer_[pos_]) != kSnapshotVersion) {
      return Status::corruption("snapshot version");
    }
    pos_ += 1;
    return Status::ok();
  }

  // The next record; false at the end of the data. The views are valid until the next call.
  Result<bool> next(std::string_view& key, std::string_view& value) {
    MAYFLY_ASSIGN_OR_RETURN(size_t available, fill(1));
    if (available == 0) return false;
    // Nothing is consumed until the whole record is in the buffer, so offsets from pos_ stay valid across fills.
    uint64_t key_size = 0, value_size = 0;
    size_t key_header = 0, value_header = 0;
    MAYFLY_RETURN_IF_ERROR(length_at(0, key_size, key_header));
    MAYFLY_RETURN_IF_ERROR(length_at(key_header + key_size, value_size, value_header));
    const size_t total = key_header + key_size + value_header + value_size;
    MAYFLY_ASSIGN_OR_RETURN(available, fill(total));
    if (available < total) return truncated();
    key = std::string_view(buffer_).substr(pos_ + key_header, key_size);
    value = std::string_view(buffer_).substr(pos_ + key_header + key_size + value_header, value_size);
    pos_ += total;
    return true;
  }

  // Where the next record starts in the snapshot (error messages).
  uint64_t offset() const { return dropped_ + pos_; }

 private:
  // Reads until `bytes` bytes from pos_ on are in the buffer or the data ends; returns how many there are.
  Result<size_t> fill(size_t bytes) {
    while (buffer_.size() - pos_ < bytes && !ended_) {
      dropped_ += pos_;
      buffer_.erase(0, pos_);  // what is decoded goes: the buffer never grows past a record and a piece
      pos_ = 0;
      MAYFLY_ASSIGN_OR_RETURN(std::string piece, source_(std::max(kSnapshotReadBytes, bytes - buffer_.size())));
      if (piece.empty()) {
        ended_ = true;
      } else if (buffer_.empty()) {
        buffer_ = std::move(piece);
      } else {
        buffer_.append(piece);
      }
    }
    return buffer_.size() - pos_;
  }

  // The varint length at pos_ + at, and how many bytes it takes.
  Status length_at(size_t at, uint64_t& length, size_t& header) {
    MAYFLY_ASSIGN_OR_RETURN(size_t available, fill(at + kMaxVarintBytes));
    if (available <= at) return truncated();
    const std::string_view bytes = std::string_view(buffer_).substr(pos_ + at, kMaxVarintBytes);
    codec::Reader reader(bytes);
    if (!reader.get_varint(length)) {
      return available < at + kMaxVarintBytes ? truncated() : corrupt("undecodable length");
    }
    if (length > kMaxSnapshotFieldBytes) {
      return corrupt("a field of " + std::to_string(length) + " bytes (at most " +
                     std::to_string(kMaxSnapshotFieldBytes) + ")");
    }
    header = bytes.size() - reader.rest().size();
    return Status::ok();
  }

  Status truncated() const { return corrupt("the data ends inside a record"); }
  Status corrupt(const std::string& what) const {
    return Status::corruption("undecodable snapshot entry at byte " + std::to_string(offset()) + ": " + what);
  }

  const SnapshotSource& source_;
  std::string buffer_;
  size_t pos_ = 0;        // the next record's first byte in buffer_
  uint64_t dropped_ = 0;  // bytes of the snapshot before buffer_[0]
  bool ended_ = false;
};

Status StateMachine::install_snapshot(std::string_view data, std::optional<LogIndex> expect_index) {
  size_t offset = 0;
  return install_snapshot(
      [data, &offset](size_t max_bytes) -> Result<std::string> {
        const std::string_view piece = data.substr(offset, max_bytes);
        offset += piece.size();
        return std::string(piece);
      },
      expect_index);
}

Status StateMachine::install_snapshot(const SnapshotSource& source, std::optional<LogIndex> expect_index) {
  MAYFLY_ASSERT_MSG(!grouping_, "snapshot installed inside an apply group");
  // A stopped store stays stopped, except one opened with an unfinished install: redoing it is what it waits for.
  if (!sticky_.is_ok() && !redo_install_) return sticky_;
  // Checked before anything is written: a snapshot refused here leaves the store as it was.
  SnapshotDecoder decoder(source);
  MAYFLY_RETURN_IF_ERROR(decoder.read_version());
  std::string_view key, value;
  MAYFLY_ASSIGN_OR_RETURN(const bool any, decoder.next(key, value));
  // The export walks the store in key order, and the applied state (01 "state") is its first replicated key.
  if (!any || key != meta_key()) return Status::corruption("snapshot without applied state");
  const std::string meta_bytes(value);
  MAYFLY_ASSIGN_OR_RETURN(const MetaState meta, decode_meta(meta_bytes));
  if (expect_index && meta.applied_index != expect_index->value()) {
    return Status::corruption("snapshot applies index " + std::to_string(meta.applied_index) + ", its record says " +
                              std::to_string(expect_index->value()));
  }
  if (unfinished_install_ && meta.applied_index != unfinished_install_->value()) {
    return Status::invalid_argument("the store holds an unfinished install of the snapshot at index " +
                                    std::to_string(unfinished_install_->value()) + ": that one must be installed, not " +
                                    std::to_string(meta.applied_index));
  }
  if (!install_gate_.installing()) install_gate_.close();  // closed already when opened with an unfinished install
  Status written = write_snapshot(decoder, meta, meta_bytes);
  dedup_mirror_.drop();  // the snapshot's own table and containers are read on the next apply that needs them
  apply_containers_.clear();
  apply_holds_.clear();
  redo_install_ = false;
  if (!written.is_ok()) {
    // Half a state, or the marker's write itself failed: stopped, unreadable; the next open redoes the install (from
    // the raft log's snapshot file) if the marker reached the disk, or finds the old state whole if it did not.
    sticky_ = written;
    unfinished_install_ = LogIndex(meta.applied_index);
    return written;
  }
  sticky_ = Status::ok();  // (an unfinished install from an earlier run is finished now)
  unfinished_install_.reset();
  meta_ = meta;
  expiry_.forget_all();
  reader_.invalidate_container_list();
  publish_applied();
  install_gate_.open();
  return Status::ok();
}

Status StateMachine::write_snapshot(SnapshotDecoder& decoder, const MetaState& meta, const std::string& meta_bytes) {
  leveldb::WriteBatch batch;
  int batches = 0;
  // Every batch synced (install_snapshot says why); the test hook may stop the install after any but the last.
  auto write = [&](bool last) -> Status {
    leveldb::WriteOptions options;
    options.sync = true;
    MAYFLY_RETURN_IF_ERROR(from_leveldb(db_->Write(options, &batch), "install snapshot"));
    batch.Clear();
    ++batches;
    if (!last && options_.after_install_batch) return options_.after_install_batch(batches);
    return Status::ok();
  };
  const size_t batch_bytes = std::max<size_t>(options_.install_batch_bytes, 1);
  const std::string marker_key = install_marker_key();

  // 1. The marker: from here on an open finds the install unfinished and redoes it.
  std::string marker;
  codec::put_u64_be(marker, meta.applied_index);
  batch.Put(marker_key, marker);
  MAYFLY_RETURN_IF_ERROR(write(false));

  // 2. Every state-machine key of the current store (replicated and local, the applied state too), but the marker.
  // A redo deletes the keys the first attempt had put as well. The iterator reads the store as it was when it was
  // made: the deletes do not disturb it.
  {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (!is_state_machine_key(it->key()) || it->key() == leveldb::Slice(marker_key)) continue;
      batch.Delete(it->key());
      if (batch.ApproximateSize() >= batch_bytes) MAYFLY_RETURN_IF_ERROR(write(false));
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan before installing a snapshot"));
  }

  // 3. The snapshot's records, each checked as it comes; the applied state is held back for the last write.
  std::map<uint64_t, LocalStats> stats;
  std::string_view key, value;
  for (;;) {
    const uint64_t at = decoder.offset();
    MAYFLY_ASSIGN_OR_RETURN(const bool more, decoder.next(key, value));
    if (!more) break;
    if (key.empty() || !is_replicated_key(leveldb::Slice(key.data(), key.size())) || key == meta_key()) {
      return Status::corruption("undecodable snapshot entry at byte " + std::to_string(at) +
                                (key == meta_key() ? ": a second applied state" : ": not a replicated key"));
    }
    if (static_cast<uint8_t>(key[0]) == static_cast<uint8_t>(KeyTag::kItem)) {
      codec::Reader key_reader(key.substr(1));
      uint64_t crid;
      if (!key_reader.get_u64_be(crid)) {
        return Status::corruption("undecodable snapshot entry at byte " + std::to_string(at) + ": item key");
      }
      stats[crid].items += 1;
      stats[crid].bytes += static_cast<int64_t>(key.size() + value.size());
    }  // dropped-container markers travel too: the installing node reclaims those keys itself
    batch.Put(leveldb::Slice(key.data(), key.size()), leveldb::Slice(value.data(), value.size()));
    if (batch.ApproximateSize() >= batch_bytes) MAYFLY_RETURN_IF_ERROR(write(false));
  }

  // 4. The swap: node-local figures, the applied state and the marker's removal in one synced write. Until it is
  // durable the store does not claim the snapshot's index; once it is, the marker is gone with it.
  for (const auto& [crid, local] : stats) batch.Put(local_stats_key(crid), encode_local_stats(local));
  batch.Put(meta_key(), meta_bytes);
  batch.Delete(marker_key);
  return write(true);
}

Status StateMachine::recompute_local_state() {
  MAYFLY_ASSERT_MSG(!grouping_, "local state recomputed inside an apply group");
  if (!sticky_.is_ok()) return sticky_;
  std::string meta_bytes;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(db_->Get(leveldb::ReadOptions(), meta_key(), &meta_bytes), "read applied state"));
  MAYFLY_ASSIGN_OR_RETURN(const MetaState meta, decode_meta(meta_bytes));
  // What step 4 of an install writes, counted the same way: every item key under its container's crid.
  std::map<uint64_t, LocalStats> stats;
  leveldb::WriteBatch batch;
  {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    const std::string items(1, static_cast<char>(KeyTag::kItem));
    for (it->Seek(items); it->Valid() && internal::has_prefix(it->key(), items); it->Next()) {
      codec::Reader key_reader(internal::view(it->key()).substr(1));
      uint64_t crid;
      if (!key_reader.get_u64_be(crid)) return Status::corruption("undecodable item key while recomputing stats");
      stats[crid].items += 1;
      stats[crid].bytes += static_cast<int64_t>(it->key().size() + it->value().size());
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan items to recompute local stats"));
    // The stored figures go, those of containers without items too (an install leaves none for them either).
    const std::string local(1, static_cast<char>(KeyTag::kLocalStats));
    for (it->Seek(local); it->Valid() && internal::has_prefix(it->key(), local); it->Next()) batch.Delete(it->key());
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan local stats"));
  }
  for (const auto& [crid, local] : stats) batch.Put(local_stats_key(crid), encode_local_stats(local));
  leveldb::WriteOptions options;
  options.sync = true;
  Status written = from_leveldb(db_->Write(options, &batch), "write recomputed local stats");
  dedup_mirror_.drop();
  apply_containers_.clear();
  apply_holds_.clear();
  if (!written.is_ok()) {
    sticky_ = written;
    return written;
  }
  meta_ = meta;
  expiry_.forget_all();
  reader_.invalidate_container_list();
  publish_applied();
  return Status::ok();
}

Result<std::vector<std::pair<std::string, std::string>>> StateMachine::dump(bool include_local) const {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const uint8_t tag = static_cast<uint8_t>(it->key()[0]);
    const bool replicated = is_replicated_tag(tag);
    const bool local = tag >= kLocalPrefixFirst;
    if (replicated || (include_local && local)) out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "dump"));
  return out;
}

}  // namespace mayfly::storage
