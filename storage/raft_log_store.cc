#include "storage/raft_log_store.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/write_batch.h>

#include "common/codec.h"
#include "replication/codec.h"
#include "storage/layout.h"
#include "storage/store_internal.h"

namespace mayfly::storage {
namespace {

using internal::from_leveldb;
using replication::Entry;
using replication::HardState;
using replication::Snapshot;
using replication::SnapshotMetadata;

std::string encode_base(LogIndex index, Term term) {
  std::string out;
  codec::put_varint(out, index.value());
  codec::put_varint(out, term.value());
  return out;
}

std::string text(LogIndex index) { return std::to_string(index.value()); }

// Reads of the log check LevelDB's block checksums: a flipped bit on disk is reported (Corruption) instead of being
// decoded into an entry, applied or sent to a follower.
leveldb::ReadOptions log_read_options() {
  leveldb::ReadOptions options;
  options.verify_checksums = true;
  return options;
}

std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status sync_directory_posix(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::io_error("open directory " + path + ": " + std::strerror(errno));
  const int synced = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (synced != 0) return Status::io_error("fsync directory " + path + ": " + std::strerror(error));
  return Status::ok();
}

LevelDbLogStorage::LevelDbLogStorage(leveldb::DB* db, leveldb::Env* env, std::string snapshot_dir,
                                     SyncDirectory sync_directory)
    : db_(db),
      env_(env != nullptr ? env : leveldb::Env::Default()),
      snapshot_dir_(std::move(snapshot_dir)),
      sync_directory_(std::move(sync_directory)) {}

LevelDbLogStorage::~LevelDbLogStorage() { receive_abort(); }

Result<std::unique_ptr<LevelDbLogStorage>> LevelDbLogStorage::open(leveldb::DB* db, leveldb::Env* env,
                                                                   std::string snapshot_dir,
                                                                   const replication::Membership& bootstrap,
                                                                   SyncDirectory sync_directory) {
  std::unique_ptr<LevelDbLogStorage> storage(
      new LevelDbLogStorage(db, env, std::move(snapshot_dir), std::move(sync_directory)));
  const leveldb::Status created = storage->env_->CreateDir(storage->snapshot_dir_);
  if (!created.ok() && !storage->env_->FileExists(storage->snapshot_dir_)) {
    return from_leveldb(created, "create snapshot directory " + storage->snapshot_dir_);
  }
  if (created.ok() && storage->sync_directory_) {
    MAYFLY_RETURN_IF_ERROR(storage->sync_directory_(parent_directory(storage->snapshot_dir_)));
  }
  MAYFLY_RETURN_IF_ERROR(storage->load());
  // Leftovers of a crash mid-snapshot: older snapshots, `.tmp` files, incoming transfers (partial or never taken).
  storage->remove_snapshot_files_except(storage->snapshot_.index);
  std::vector<std::string> children;
  if (storage->env_->GetChildren(storage->snapshot_dir_, &children).ok()) {
    for (const std::string& child : children) {
      if (child.rfind("incoming-", 0) == 0) storage->env_->RemoveFile(storage->snapshot_dir_ + "/" + child);
    }
  }
  const bool fresh = storage->hard_state_ == HardState{} && storage->terms_.empty() &&
                     storage->snapshot_.index == LogIndex(0);
  if (fresh && (!bootstrap.voters.empty() || !bootstrap.learners.empty())) {
    MAYFLY_RETURN_IF_ERROR(storage->persist(std::nullopt, replication::bootstrap_entries(bootstrap),
                                            replication::bootstrap_hard_state(bootstrap), true));
  }
  return storage;
}

Status LevelDbLogStorage::load() {
  std::string value;
  leveldb::Status status = db_->Get(leveldb::ReadOptions(), raft_meta_key("hard"), &value);
  if (status.ok()) {
    MAYFLY_ASSIGN_OR_RETURN(hard_state_, replication::decode_hard_state(value));
  } else if (!status.IsNotFound()) {
    return from_leveldb(status, "read raft hard state");
  }
  status = db_->Get(leveldb::ReadOptions(), raft_meta_key("snap"), &value);
  if (status.ok()) {
    MAYFLY_ASSIGN_OR_RETURN(snapshot_, replication::decode_snapshot_metadata(value));
  } else if (!status.IsNotFound()) {
    return from_leveldb(status, "read raft snapshot record");
  }
  status = db_->Get(leveldb::ReadOptions(), raft_meta_key("base"), &value);
  if (status.ok()) {
    codec::Reader reader(value);
    uint64_t index, term;
    if (!reader.get_varint(index) || !reader.get_varint(term) || !reader.done()) {
      return Status::corruption("undecodable raft compaction point");
    }
    base_index_ = LogIndex(index);
    base_term_ = Term(term);
  } else if (!status.IsNotFound()) {
    return from_leveldb(status, "read raft compaction point");
  }
  const std::string prefix = raft_entry_prefix();
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(log_read_options()));
  uint64_t expected = base_index_.value() + 1;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    // A block LevelDB could not read (EIO, a checksum mismatch) is skipped by its iterator, its error kept in
    // status(): stop at it, before the next block's entries look like a gap.
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan raft log"));
    MAYFLY_ASSIGN_OR_RETURN(Entry entry,
                            replication::decode_entry(std::string_view(it->value().data(), it->value().size())));
    if (entry.index.value() != expected) {
      return Status::corruption("raft log has a gap: expected entry " + std::to_string(expected) + ", found " +
                                text(entry.index));
    }
    terms_.push_back(entry.term);
    ++expected;
  }
  return from_leveldb(it->status(), "scan raft log");
}

Result<Term> LevelDbLogStorage::term(LogIndex index) const {
  if (index == base_index_) return base_term_;
  if (index < base_index_ || index > last_index()) {
    return Status::not_found("term of index " + text(index) + " outside [" + text(base_index_) + ", " +
                             text(last_index()) + "]");
  }
  return terms_[index.value() - first_index().value()];
}

Result<std::vector<Entry>> LevelDbLogStorage::entries(LogIndex low, LogIndex high, uint64_t max_bytes) const {
  if (low < first_index() || high > last_index().next() || low >= high) {
    return Status::not_found("entries [" + text(low) + ", " + text(high) + ") outside [" + text(first_index()) +
                             ", " + text(last_index().next()) + ")");
  }
  Result<std::vector<Entry>> read = read_entries(low, high, max_bytes);
  // Sticky like a write error: the disk failed under the log, or its bytes are not what was written.
  if (!read.is_ok() && failure_.is_ok()) failure_ = read.status();
  return read;
}

Result<std::vector<Entry>> LevelDbLogStorage::read_entries(LogIndex low, LogIndex high, uint64_t max_bytes) const {
  std::vector<Entry> out;
  uint64_t total_bytes = 0;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(log_read_options()));
  it->Seek(raft_entry_key(low.value()));
  for (uint64_t i = low.value(); i < high.value(); ++i, it->Next()) {
    // status() first: LevelDB's iterator steps over a block it could not read and keeps the error there.
    if (!it->status().ok()) return from_leveldb(it->status(), "read raft entry " + std::to_string(i));
    if (!it->Valid() || it->key() != leveldb::Slice(raft_entry_key(i))) {
      return Status::corruption("raft entry " + std::to_string(i) + " missing");
    }
    Result<Entry> entry = replication::decode_entry(std::string_view(it->value().data(), it->value().size()));
    if (!entry.is_ok()) return entry.status().with_context("raft entry " + std::to_string(i));
    // The bytes name their own index and term: they must be the ones stored under this key and recorded at open
    // (a block with a valid checksum but the wrong contents is a corrupt log, not an entry to hand the core).
    if (entry->index != LogIndex(i) || entry->term != terms_[i - first_index().value()]) {
      return Status::corruption("raft entry " + std::to_string(i) + " holds index " +
                                std::to_string(entry->index.value()) + " term " + std::to_string(entry->term.value()) +
                                ", not the stored position");
    }
    total_bytes += entry->size_bytes();
    if (!out.empty() && total_bytes > max_bytes) break;
    out.push_back(std::move(entry).value());
  }
  return out;
}

Result<std::string> LevelDbLogStorage::read_snapshot_chunk(LogIndex snapshot_index, uint64_t offset,
                                                           uint64_t max_bytes) const {
  if (snapshot_index != snapshot_.index) {
    return Status::not_found("snapshot " + text(snapshot_index) + " replaced by " + text(snapshot_.index));
  }
  if (offset > snapshot_.size_bytes) return Status::invalid_argument("snapshot chunk offset past the end");
  if (snapshot_.size_bytes == 0) return std::string();  // no snapshot yet (index 0): empty, like the in-memory log
  leveldb::RandomAccessFile* raw = nullptr;
  const std::string path = snapshot_path(snapshot_index);
  MAYFLY_RETURN_IF_ERROR(from_leveldb(env_->NewRandomAccessFile(path, &raw), "open " + path));
  std::unique_ptr<leveldb::RandomAccessFile> file(raw);
  const size_t wanted = std::min<uint64_t>(max_bytes, snapshot_.size_bytes - offset);
  std::string chunk(wanted, '\0');
  leveldb::Slice read;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(file->Read(offset, wanted, &read, chunk.data()), "read " + path));
  if (read.size() != wanted) return Status::corruption("snapshot file " + path + " is shorter than its record");
  if (read.data() != chunk.data()) chunk.assign(read.data(), read.size());  // some Envs return their own buffer
  return chunk;
}

std::string LevelDbLogStorage::snapshot_path(LogIndex index) const {
  return snapshot_dir_ + "/snapshot-" + std::to_string(index.value());
}

std::string LevelDbLogStorage::incoming_path(LogIndex index) const {
  return snapshot_dir_ + "/incoming-" + std::to_string(index.value());
}

Status LevelDbLogStorage::sync_snapshot_dir() const {
  if (!sync_directory_) return Status::ok();
  return sync_directory_(snapshot_dir_);
}

void LevelDbLogStorage::remove_snapshot_files_except(LogIndex index) {
  std::vector<std::string> children;
  if (!env_->GetChildren(snapshot_dir_, &children).ok()) return;
  // Also a `snapshot-<n>.tmp` whose export is still running on another thread: that job then fails to rename it and
  // is dropped, as it would be anyway (a newer snapshot is being recorded).
  const std::string keep = "snapshot-" + std::to_string(index.value());
  for (const std::string& child : children) {
    if (child.rfind("snapshot-", 0) == 0 && child != keep) env_->RemoveFile(snapshot_dir_ + "/" + child);
  }
}

Status LevelDbLogStorage::write_batch(void* batch, bool sync) {
  if (!failure_.is_ok()) return failure_;
  leveldb::WriteOptions options;
  options.sync = sync;
  Status status = from_leveldb(db_->Write(options, static_cast<leveldb::WriteBatch*>(batch)), "write raft log");
  if (!status.is_ok()) {
    failure_ = status;  // sticky: the log's state on disk is unknown
    return status;
  }
  if (sync) ++syncs_;
  return Status::ok();
}

Status LevelDbLogStorage::write_snapshot_data(LogIndex index, std::string_view data) const {
  // Write-then-rename: `snapshot-<index>` only ever names complete, fsync'd data.
  const std::string path = snapshot_path(index);
  const std::string temporary = path + ".tmp";
  leveldb::WritableFile* raw = nullptr;
  Status status = from_leveldb(env_->NewWritableFile(temporary, &raw), "create " + temporary);
  if (status.is_ok()) {
    std::unique_ptr<leveldb::WritableFile> file(raw);
    status = from_leveldb(file->Append(leveldb::Slice(data.data(), data.size())), "write " + temporary);
    if (status.is_ok()) status = from_leveldb(file->Sync(), "fsync " + temporary);
    if (status.is_ok()) status = from_leveldb(file->Close(), "close " + temporary);
  }
  if (status.is_ok()) status = from_leveldb(env_->RenameFile(temporary, path), "rename " + temporary);
  if (status.is_ok()) status = sync_snapshot_dir();
  if (!status.is_ok()) env_->RemoveFile(temporary);
  return status;
}

Status LevelDbLogStorage::receive_begin(const SnapshotMetadata& metadata) {
  receive_abort();
  if (!failure_.is_ok()) return failure_;
  struct statvfs fs {};
  if (::statvfs(snapshot_dir_.c_str(), &fs) == 0) {  // not on a real file system (the simulator's Env): no bound
    const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (metadata.size_bytes > available / 2) {
      return Status::invalid_argument("snapshot at " + text(metadata.index) + " declares " +
                                      std::to_string(metadata.size_bytes) + " bytes; " + snapshot_dir_ + " has " +
                                      std::to_string(available) + " free (twice the size is needed)");
    }
  }
  const std::string path = incoming_path(metadata.index) + ".part";
  leveldb::WritableFile* raw = nullptr;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(env_->NewWritableFile(path, &raw), "create " + path));
  incoming_file_.reset(raw);
  incoming_ = metadata;
  incoming_bytes_ = 0;
  return Status::ok();
}

Status LevelDbLogStorage::receive_append(std::string_view chunk) {
  if (!incoming_) return Status::internal("no incoming snapshot");
  const std::string path = incoming_path(incoming_->index) + ".part";
  if (incoming_bytes_ + chunk.size() > incoming_->size_bytes) {
    receive_abort();
    return Status::invalid_argument("incoming snapshot longer than declared");
  }
  Status status = from_leveldb(incoming_file_->Append(leveldb::Slice(chunk.data(), chunk.size())), "write " + path);
  // Flush: what was acknowledged to the leader is in the file, not in a buffer that grows (durability comes with
  // receive_finish's fsync; a crash before it leaves only a .part file, removed at the next open).
  if (status.is_ok()) status = from_leveldb(incoming_file_->Flush(), "write " + path);
  if (!status.is_ok()) {
    receive_abort();
    return status;
  }
  incoming_bytes_ += chunk.size();
  return Status::ok();
}

Status LevelDbLogStorage::receive_finish() {
  if (!incoming_) return Status::internal("no incoming snapshot");
  const std::string path = incoming_path(incoming_->index);
  const std::string part = path + ".part";
  Status status = incoming_bytes_ == incoming_->size_bytes
                      ? Status::ok()
                      : Status::invalid_argument("incoming snapshot shorter than declared");
  if (status.is_ok()) status = from_leveldb(incoming_file_->Sync(), "fsync " + part);
  if (status.is_ok()) status = from_leveldb(incoming_file_->Close(), "close " + part);
  if (status.is_ok()) status = from_leveldb(env_->RenameFile(part, path), "rename " + part);
  if (status.is_ok()) status = sync_snapshot_dir();
  if (!status.is_ok()) {
    receive_abort();
    env_->RemoveFile(path);
    return status;
  }
  incoming_file_.reset();
  incoming_.reset();
  incoming_bytes_ = 0;
  return Status::ok();
}

void LevelDbLogStorage::receive_abort() {
  if (!incoming_) return;
  incoming_file_.reset();  // closes it
  env_->RemoveFile(incoming_path(incoming_->index) + ".part");
  incoming_.reset();
  incoming_bytes_ = 0;
}

Status LevelDbLogStorage::take_staged_snapshot(const SnapshotMetadata& metadata) {
  if (!failure_.is_ok()) return failure_;
  const std::string from = incoming_path(metadata.index);
  const std::string to = snapshot_path(metadata.index);
  uint64_t size = 0;
  Status status = from_leveldb(env_->GetFileSize(from, &size), "size of " + from);
  if (status.is_ok() && size != metadata.size_bytes) {
    return Status::invalid_argument("persist: staged snapshot " + from + " has " + std::to_string(size) +
                                    " bytes, its record " + std::to_string(metadata.size_bytes));
  }
  if (status.is_ok()) status = from_leveldb(env_->RenameFile(from, to), "rename " + from);
  if (status.is_ok()) status = sync_snapshot_dir();
  if (!status.is_ok()) failure_ = status;
  return status;
}

Status LevelDbLogStorage::write_snapshot_file(LogIndex index, std::string_view data) {
  if (!failure_.is_ok()) return failure_;
  Status status = write_snapshot_data(index, data);
  if (!status.is_ok()) failure_ = status;
  return status;
}

Status LevelDbLogStorage::persist(const std::optional<Snapshot>& snapshot, const std::vector<Entry>& entries,
                                  const std::optional<HardState>& hard_state, bool sync) {
  if (!failure_.is_ok()) return failure_;
  leveldb::WriteBatch batch;
  LogIndex base_index = base_index_;
  Term base_term = base_term_;
  // What terms_ becomes once the batch is written: its first `kept_terms` (all of them unless a snapshot or a
  // conflicting suffix replaces them), then the new entries' terms. Not a copy of terms_: that is the whole log's
  // terms (tens of thousands), and persist runs on every Ready.
  size_t kept_terms = terms_.size();
  if (snapshot) {
    const SnapshotMetadata& metadata = snapshot->metadata;
    if (metadata.index < snapshot_.index) return Status::invalid_argument("persist: snapshot older than current");
    // The data first: the record that points at it is only written once the file is durable.
    if (snapshot->staged) {
      if (!snapshot->data.empty()) return Status::invalid_argument("persist: staged snapshot with data");
      MAYFLY_RETURN_IF_ERROR(take_staged_snapshot(metadata));
    } else {
      if (metadata.size_bytes != snapshot->data.size()) return Status::invalid_argument("persist: snapshot size");
      MAYFLY_RETURN_IF_ERROR(write_snapshot_file(metadata.index, snapshot->data));
    }
    for (uint64_t i = first_index().value(); i <= last_index().value(); ++i) batch.Delete(raft_entry_key(i));
    batch.Put(raft_meta_key("snap"), replication::encode_snapshot_metadata(metadata));
    base_index = metadata.index;
    base_term = metadata.term;
    batch.Put(raft_meta_key("base"), encode_base(base_index, base_term));
    kept_terms = 0;
  }
  if (!entries.empty()) {
    const uint64_t first = entries.front().index.value();
    const uint64_t last = base_index.value() + kept_terms;
    if (first < base_index.value() + 1 || first > last + 1) {
      return Status::invalid_argument("persist: entries at " + std::to_string(first) + " outside [" +
                                      std::to_string(base_index.value() + 1) + ", " + std::to_string(last + 1) + "]");
    }
    for (uint64_t i = first; i <= last; ++i) batch.Delete(raft_entry_key(i));  // conflicting suffix
    kept_terms = first - base_index.value() - 1;
    for (size_t k = 0; k < entries.size(); ++k) {
      const Entry& entry = entries[k];
      if (entry.index.value() != first + k) return Status::invalid_argument("persist: entries not contiguous");
      batch.Put(raft_entry_key(entry.index.value()), replication::encode_entry(entry));
    }
  }
  if (hard_state) batch.Put(raft_meta_key("hard"), replication::encode_hard_state(*hard_state));
  MAYFLY_RETURN_IF_ERROR(write_batch(&batch, sync));
  if (snapshot) {
    snapshot_ = snapshot->metadata;
    remove_snapshot_files_except(snapshot_.index);
  }
  if (hard_state) hard_state_ = *hard_state;
  base_index_ = base_index;
  base_term_ = base_term;
  terms_.resize(kept_terms);
  for (const Entry& entry : entries) terms_.push_back(entry.term);
  return Status::ok();
}

Result<SnapshotMetadata> LevelDbLogStorage::describe_snapshot(LogIndex index, const replication::Membership& membership,
                                                              uint64_t size_bytes) const {
  if (index < snapshot_.index) return Status::invalid_argument("snapshot at " + text(index) + " is older than current");
  if (index < first_index() || index > last_index()) {
    return Status::invalid_argument("snapshot index " + text(index) + " not in the log");
  }
  MAYFLY_ASSIGN_OR_RETURN(std::vector<Entry> entry, entries(index, index.next(), UINT64_MAX));
  return SnapshotMetadata{.index = index,
                          .term = entry.front().term,
                          .ts_micros = entry.front().ts_micros,
                          .membership = membership,
                          .size_bytes = size_bytes};
}

Status LevelDbLogStorage::record_snapshot(const SnapshotMetadata& metadata) {
  if (!failure_.is_ok()) return failure_;
  if (metadata.index <= snapshot_.index) {
    if (metadata.index < snapshot_.index) env_->RemoveFile(snapshot_path(metadata.index));
    return Status::invalid_argument("snapshot at " + text(metadata.index) + " is not newer than the current one at " +
                                    text(snapshot_.index));
  }
  leveldb::WriteBatch batch;
  batch.Put(raft_meta_key("snap"), replication::encode_snapshot_metadata(metadata));
  MAYFLY_RETURN_IF_ERROR(write_batch(&batch, true));
  snapshot_ = metadata;
  remove_snapshot_files_except(metadata.index);
  return Status::ok();
}

Status LevelDbLogStorage::create_snapshot(LogIndex index, const replication::Membership& membership,
                                          std::string_view data) {
  MAYFLY_ASSIGN_OR_RETURN(SnapshotMetadata metadata, describe_snapshot(index, membership, data.size()));
  MAYFLY_RETURN_IF_ERROR(write_snapshot_file(index, data));
  if (index == snapshot_.index) return Status::ok();  // the same snapshot again: already recorded
  return record_snapshot(metadata);
}

Status LevelDbLogStorage::compact(LogIndex index) {
  if (index <= base_index_) return Status::ok();
  if (index > snapshot_.index) {
    return Status::invalid_argument("compact: index " + text(index) + " not covered by the snapshot at " +
                                    text(snapshot_.index));
  }
  MAYFLY_ASSIGN_OR_RETURN(Term new_base_term, term(index));
  leveldb::WriteBatch batch;
  for (uint64_t i = first_index().value(); i <= index.value(); ++i) batch.Delete(raft_entry_key(i));
  batch.Put(raft_meta_key("base"), encode_base(index, new_base_term));
  MAYFLY_RETURN_IF_ERROR(write_batch(&batch, false));  // losing a compaction in a crash only keeps more log
  terms_.erase(terms_.begin(), terms_.begin() + static_cast<ptrdiff_t>(index.value() - base_index_.value()));
  base_index_ = index;
  base_term_ = new_base_term;
  return Status::ok();
}

}  // namespace mayfly::storage
