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
#include "common/crc32c.h"
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

enum class RecordType : uint8_t { kEntry = 1, kHardState = 2, kSnapshot = 3, kCompact = 4, kReset = 5 };
constexpr size_t kHeaderBytes = 9;                  // crc32c | length | type
constexpr uint32_t kMaxPayloadBytes = 256u << 20;   // far above any entry (RaftConfig::max_entry_bytes is 4 MB)
constexpr std::string_view kSegmentSuffix = ".log";

uint32_t checksum(uint8_t type, std::string_view payload) {
  const char type_byte = static_cast<char>(type);
  return crc::crc32c_extend(crc::crc32c(std::string_view(&type_byte, 1)), payload);
}

void put_u32_le(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t get_u32_le(const char* p) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return value;
}

// Appends one record to `out`; returns its length (header included).
uint32_t put_record(std::string& out, RecordType type, std::string_view payload) {
  const auto type_byte = static_cast<uint8_t>(type);
  put_u32_le(out, checksum(type_byte, payload));
  put_u32_le(out, static_cast<uint32_t>(payload.size()));
  out.push_back(static_cast<char>(type_byte));
  out.append(payload);
  return static_cast<uint32_t>(kHeaderBytes + payload.size());
}

std::string encode_point(LogIndex index, Term term) {
  std::string out;
  codec::put_varint(out, index.value());
  codec::put_varint(out, term.value());
  return out;
}

Status decode_point(std::string_view bytes, LogIndex& index, Term& term) {
  codec::Reader reader(bytes);
  uint64_t i, t;
  if (!reader.get_varint(i) || !reader.get_varint(t) || !reader.done()) {
    return Status::corruption("undecodable raft compaction point");
  }
  index = LogIndex(i);
  term = Term(t);
  return Status::ok();
}

std::string text(LogIndex index) { return std::to_string(index.value()); }

// Reads of a log an earlier version kept in LevelDB check its block checksums.
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

// The sequence number of a segment file name, or nullopt for any other name.
std::optional<uint64_t> segment_sequence(const std::string& name) {
  if (name.size() != 20 + kSegmentSuffix.size() || name.substr(20) != kSegmentSuffix) return std::nullopt;
  uint64_t value = 0;
  for (size_t i = 0; i < 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return value;
}

Status read_whole_file(leveldb::Env* env, const std::string& path, std::string& out) {
  leveldb::SequentialFile* raw = nullptr;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(env->NewSequentialFile(path, &raw), "open " + path));
  std::unique_ptr<leveldb::SequentialFile> file(raw);
  out.clear();
  std::string buffer(1 << 20, '\0');
  for (;;) {
    leveldb::Slice read;
    MAYFLY_RETURN_IF_ERROR(from_leveldb(file->Read(buffer.size(), &read, buffer.data()), "read " + path));
    if (read.empty()) return Status::ok();
    out.append(read.data(), read.size());
  }
}

// Write-then-rename: `path` only ever names complete, fsync'd data — written to `<path>.tmp`, fsync'd, renamed over
// `path`, and the directory entry made durable (`sync_directory`, when given). The temporary goes on failure.
// Writes `path` as `<path>.tmp` with the bytes `produce` hands over, fsyncs and renames it, then makes the name
// durable; nothing is left under `path` unless all of it was written. Returns the bytes written.
Result<uint64_t> write_file_durably(leveldb::Env* env, const std::string& path,
                                    const RaftLogStore::SnapshotProducer& produce,
                                    const std::function<Status()>& sync_directory) {
  const std::string temporary = path + ".tmp";
  leveldb::WritableFile* raw = nullptr;
  uint64_t written = 0;
  Status status = from_leveldb(env->NewWritableFile(temporary, &raw), "create " + temporary);
  if (status.is_ok()) {
    std::unique_ptr<leveldb::WritableFile> file(raw);
    status = produce([&](std::string_view piece) {
      written += piece.size();
      return from_leveldb(file->Append(leveldb::Slice(piece.data(), piece.size())), "write " + temporary);
    });
    if (status.is_ok()) status = from_leveldb(file->Sync(), "fsync " + temporary);
    if (status.is_ok()) status = from_leveldb(file->Close(), "close " + temporary);
  }
  if (status.is_ok()) status = from_leveldb(env->RenameFile(temporary, path), "rename " + temporary);
  if (status.is_ok() && sync_directory) status = sync_directory();
  if (!status.is_ok()) {
    env->RemoveFile(temporary);
    return status;
  }
  return written;
}

Status replace_file_durably(leveldb::Env* env, const std::string& path, std::string_view data,
                            const std::function<Status()>& sync_directory) {
  return write_file_durably(
             env, path, [data](const std::function<Status(std::string_view)>& write) { return write(data); },
             sync_directory)
      .status();
}

}  // namespace

std::string wal_entry_record(const Entry& entry) {
  std::string out;
  put_record(out, RecordType::kEntry, replication::encode_entry(entry));
  return out;
}

Status sync_directory_posix(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::io_error("open directory " + path + ": " + std::strerror(errno));
  const int synced = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (synced != 0) return Status::io_error("fsync directory " + path + ": " + std::strerror(error));
  return Status::ok();
}

RaftLogStore::RaftLogStore(leveldb::DB* db, leveldb::Env* env, std::string snapshot_dir,
                           SyncDirectory sync_directory, Options options)
    : db_(db),
      env_(env != nullptr ? env : leveldb::Env::Default()),
      snapshot_dir_(std::move(snapshot_dir)),
      wal_dir_(parent_directory(snapshot_dir_) + "/wal"),
      sync_directory_(std::move(sync_directory)),
      options_(options) {}

RaftLogStore::~RaftLogStore() {
  receive_abort();
  if (active_) active_->Close();
}

Result<std::unique_ptr<RaftLogStore>> RaftLogStore::open(leveldb::DB* db, leveldb::Env* env, std::string snapshot_dir,
                                                         const replication::Membership& bootstrap,
                                                         SyncDirectory sync_directory, Options options) {
  std::unique_ptr<RaftLogStore> storage(
      new RaftLogStore(db, env, std::move(snapshot_dir), std::move(sync_directory), options));
  for (const std::string& dir : {storage->snapshot_dir_, storage->wal_dir_}) {
    const leveldb::Status created = storage->env_->CreateDir(dir);
    if (!created.ok() && !storage->env_->FileExists(dir)) return from_leveldb(created, "create directory " + dir);
    if (created.ok() && storage->sync_directory_) {
      MAYFLY_RETURN_IF_ERROR(storage->sync_directory_(parent_directory(dir)));
    }
  }
  MAYFLY_RETURN_IF_ERROR(storage->open_wal());
  // Leftovers of a crash mid-snapshot: older snapshots, `.tmp` files, incoming transfers (partial or never taken).
  storage->remove_snapshot_files_except(storage->snapshot_.index);
  std::vector<std::string> children;
  if (storage->env_->GetChildren(storage->snapshot_dir_, &children).ok()) {
    for (const std::string& child : children) {
      if (child.rfind("incoming-", 0) == 0) storage->env_->RemoveFile(storage->snapshot_dir_ + "/" + child);
    }
  }
  const bool fresh = storage->hard_state_ == HardState{} && storage->slots_.empty() &&
                     storage->snapshot_.index == LogIndex(0);
  if (fresh && (!bootstrap.voters.empty() || !bootstrap.learners.empty())) {
    MAYFLY_RETURN_IF_ERROR(storage->persist(std::nullopt, replication::bootstrap_entries(bootstrap),
                                            replication::bootstrap_hard_state(bootstrap), true));
  }
  return storage;
}

std::string RaftLogStore::segment_path(uint64_t sequence) const {
  std::string digits = std::to_string(sequence);
  return wal_dir_ + "/" + std::string(20 - std::min<size_t>(20, digits.size()), '0') + digits +
         std::string(kSegmentSuffix);
}

Status RaftLogStore::open_wal() {
  std::vector<std::string> children;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(env_->GetChildren(wal_dir_, &children), "list " + wal_dir_));
  std::vector<uint64_t> sequences;
  for (const std::string& child : children) {
    if (std::optional<uint64_t> sequence = segment_sequence(child)) {
      sequences.push_back(*sequence);
    } else if (child.size() > 4 && child.substr(child.size() - 4) == ".tmp") {
      env_->RemoveFile(wal_dir_ + "/" + child);  // a torn tail's rewrite that never completed
    }
  }
  std::sort(sequences.begin(), sequences.end());
  if (sequences.empty()) {
    MAYFLY_RETURN_IF_ERROR(migrate_from_leveldb());
  } else {
    std::optional<uint64_t> gap_floor;
    for (size_t i = 0; i < sequences.size(); ++i) {
      segments_.push_back(Segment{.sequence = sequences[i]});
      MAYFLY_RETURN_IF_ERROR(replay_segment(segments_.back(), i + 1 == sequences.size(), gap_floor));
    }
    if (gap_floor) {
      return Status::corruption("raft log has a gap: no entry before " + std::to_string(*gap_floor + 1) +
                                " is left and no compaction point covers them (" + wal_dir_ + ")");
    }
    if (snapshot_.index > last_index()) {
      return Status::corruption("raft log ends at " + text(last_index()) + ", before its snapshot at " +
                                text(snapshot_.index));
    }
    // The log now lives here: keys an interrupted migration left in LevelDB are stale.
    MAYFLY_RETURN_IF_ERROR(delete_leveldb_log());
  }
  MAYFLY_RETURN_IF_ERROR(start_segment());
  return remove_compacted_segments();
}

Status RaftLogStore::replay_segment(const Segment& segment, bool newest, std::optional<uint64_t>& gap_floor) {
  const std::string path = segment_path(segment.sequence);
  std::string data;
  MAYFLY_RETURN_IF_ERROR(read_whole_file(env_, path, data).with_context("replay raft log"));
  size_t offset = 0;
  uint64_t max_index = 0;
  while (offset < data.size()) {
    const auto where = [&path, offset] { return path + " at offset " + std::to_string(offset); };  // errors only
    bool intact = data.size() - offset >= kHeaderBytes;
    uint32_t length = 0;
    uint8_t type = 0;
    if (intact) {
      length = get_u32_le(data.data() + offset + 4);
      type = static_cast<uint8_t>(data[offset + 8]);
      intact = length <= kMaxPayloadBytes && data.size() - offset - kHeaderBytes >= length &&
               get_u32_le(data.data() + offset) ==
                   checksum(type, std::string_view(data.data() + offset + kHeaderBytes, length));
    }
    if (!intact) {
      // Only the newest segment can end in a torn write: every older one was fsync'd before the next began.
      if (!newest) return Status::corruption("raft log record unreadable in " + where());
      // Cut the tail off — the valid prefix replaces the segment — so that this segment can be left behind when a
      // new one starts without looking corrupt at the next open.
      MAYFLY_RETURN_IF_ERROR(replace_file_durably(env_, path, std::string_view(data.data(), offset),
                                                  [this] { return sync_wal_dir(); }));
      break;
    }
    const std::string_view payload(data.data() + offset + kHeaderBytes, length);
    switch (static_cast<RecordType>(type)) {
      case RecordType::kEntry: {
        Result<Entry> entry = replication::decode_entry(payload);
        if (!entry.is_ok()) return entry.status().with_context("raft log entry in " + where());
        const uint64_t index = entry->index.value();
        if (index <= base_index_.value() && !gap_floor) {
          return Status::corruption("raft log entry " + std::to_string(index) + " in " + where() +
                                    " is at or before the compaction point " + text(base_index_));
        }
        if (index > last_index().value() + 1 || index <= base_index_.value()) {
          // Entries before this one were in deleted segments (or, in a gap already open, a conflicting suffix
          // replaced entries back into it): unknown until a compaction point covers them.
          reset_to(LogIndex(index - 1), Term(0));
          gap_floor = index - 1;
        }
        // Terms never go back along a Raft log: a record that says otherwise was not written here in this order.
        const Term previous = index - 1 == base_index_.value() ? base_term_
                                                               : slots_[index - 1 - first_index().value()].term;
        if (entry->term < previous) {
          return Status::corruption("raft log entry " + std::to_string(index) + " in " + where() + " has term " +
                                    std::to_string(entry->term.value()) + ", older than the entry before it (" +
                                    std::to_string(previous.value()) + ")");
        }
        const Slot slot{entry->term, segment.sequence, offset, static_cast<uint32_t>(kHeaderBytes + length)};
        put_entry(std::move(entry).value(), slot, false);  // read back from the file when asked
        max_index = std::max(max_index, index);
        break;
      }
      case RecordType::kHardState: {
        MAYFLY_ASSIGN_OR_RETURN(hard_state_, replication::decode_hard_state(payload));
        break;
      }
      case RecordType::kSnapshot: {
        MAYFLY_ASSIGN_OR_RETURN(snapshot_, replication::decode_snapshot_metadata(payload));
        break;
      }
      case RecordType::kCompact:
      case RecordType::kReset: {
        LogIndex index;
        Term term;
        if (Status decoded = decode_point(payload, index, term); !decoded.is_ok()) return decoded.with_context(where());
        if (static_cast<RecordType>(type) == RecordType::kReset) {
          reset_to(index, term);
        } else {
          drop_through(index, term);
        }
        if (gap_floor && index.value() >= *gap_floor) gap_floor.reset();
        break;
      }
      default:
        return Status::corruption("raft log record of unknown type " + std::to_string(type) + " in " + where());
    }
    offset += kHeaderBytes + length;
  }
  segments_.back().max_index = max_index;
  return Status::ok();
}

void RaftLogStore::put_entry(Entry entry, const Slot& slot, bool cache) {
  const uint64_t index = entry.index.value();
  // An entry at an index the log holds replaces it and every later one.
  const size_t kept = index - base_index_.value() - 1;
  if (kept < slots_.size()) {
    const size_t dropped = slots_.size() - kept;
    slots_.resize(kept);
    for (size_t i = 0; i < dropped && !recent_.empty(); ++i) {
      recent_bytes_ -= recent_.back().size_bytes();
      recent_.pop_back();
    }
  }
  slots_.push_back(slot);
  if (!cache || options_.recent_entry_bytes == 0) return;
  recent_bytes_ += entry.size_bytes();
  recent_.push_back(std::move(entry));
  while (!recent_.empty() && recent_bytes_ > options_.recent_entry_bytes) {
    recent_bytes_ -= recent_.front().size_bytes();
    recent_.pop_front();
  }
}

void RaftLogStore::drop_through(LogIndex index, Term term) {
  if (index < base_index_) return;  // (at the compaction point itself: the record states its term)
  if (index >= last_index()) {
    reset_to(index, term);
    return;
  }
  const size_t dropped = index.value() - base_index_.value();
  slots_.erase(slots_.begin(), slots_.begin() + static_cast<ptrdiff_t>(dropped));
  // recent_ covers the newest entries: drop those that are no longer in the log.
  while (recent_.size() > slots_.size()) {
    recent_bytes_ -= recent_.front().size_bytes();
    recent_.pop_front();
  }
  base_index_ = index;
  base_term_ = term;
}

void RaftLogStore::reset_to(LogIndex index, Term term) {
  slots_.clear();
  recent_.clear();
  recent_bytes_ = 0;
  base_index_ = index;
  base_term_ = term;
}

std::string RaftLogStore::header_records() const {
  std::string records;
  if (hard_state_ != HardState{}) {
    put_record(records, RecordType::kHardState, replication::encode_hard_state(hard_state_));
  }
  if (snapshot_.index != LogIndex(0)) {
    put_record(records, RecordType::kSnapshot, replication::encode_snapshot_metadata(snapshot_));
  }
  put_record(records, RecordType::kCompact, encode_point(base_index_, base_term_));
  return records;
}

Status RaftLogStore::start_segment() {
  if (!failure_.is_ok()) return failure_;
  const uint64_t sequence = segments_.empty() ? 1 : segments_.back().sequence + 1;
  const std::string path = segment_path(sequence);
  // Any failure here is sticky (failure_ is checked before every use of active_, which may be gone).
  const auto failed = [this](Status status) {
    failure_ = status;
    return status;
  };
  if (active_) {
    // Sealed only once durable: only the newest segment may end in a torn write.
    Status synced = from_leveldb(active_->Sync(), "fsync " + segment_path(segments_.back().sequence));
    if (!synced.is_ok()) return failed(synced);
    active_->Close();
    active_.reset();
  }
  leveldb::WritableFile* raw = nullptr;
  Status status = from_leveldb(env_->NewWritableFile(path, &raw), "create " + path);
  if (!status.is_ok()) return failed(status);
  std::unique_ptr<leveldb::WritableFile> file(raw);
  // What the older segments said, so that they can go once the compaction point passes them.
  const std::string records = header_records();
  status = from_leveldb(file->Append(records), "write " + path);
  if (status.is_ok()) status = from_leveldb(file->Sync(), "fsync " + path);
  if (status.is_ok()) status = sync_wal_dir();
  if (!status.is_ok()) return failed(status);
  segments_.push_back(Segment{.sequence = sequence});
  active_ = std::move(file);
  active_bytes_ = records.size();
  return Status::ok();
}

Status RaftLogStore::remove_compacted_segments() {
  // Oldest first, never the active one, and only while every entry in it is compacted away.
  size_t removable = 0;
  while (removable + 1 < segments_.size() && segments_[removable].max_index <= base_index_.value()) ++removable;
  if (removable == 0) return Status::ok();
  // The compaction point that makes them unneeded must outlive them.
  MAYFLY_RETURN_IF_ERROR(append_to_active("", true));
  for (size_t i = 0; i < removable; ++i) {
    env_->RemoveFile(segment_path(segments_.front().sequence));
    segments_.pop_front();
  }
  return Status::ok();
}

Status RaftLogStore::append_to_active(const std::string& records, bool sync) {
  if (!failure_.is_ok()) return failure_;
  leveldb::Status status = records.empty() ? leveldb::Status::OK() : active_->Append(records);
  const bool appended = status.ok();
  // Flushed either way: entries() reads the file through another handle.
  if (appended) status = sync ? active_->Sync() : active_->Flush();
  if (!status.ok()) {
    // Sticky: the log's state on disk is unknown. (The path is only built here, off the write path.)
    const char* operation = appended && sync ? "fsync " : "write ";
    failure_ = from_leveldb(status, operation + segment_path(segments_.back().sequence));
    return failure_;
  }
  active_bytes_ += records.size();
  if (sync) ++syncs_;
  return Status::ok();
}

Status RaftLogStore::migrate_from_leveldb() {
  if (db_ == nullptr) return Status::ok();
  std::string value;
  bool found = false;
  leveldb::Status status = db_->Get(log_read_options(), raft_meta_key("hard"), &value);
  if (status.ok()) {
    MAYFLY_ASSIGN_OR_RETURN(hard_state_, replication::decode_hard_state(value));
    found = true;
  } else if (!status.IsNotFound()) {
    return from_leveldb(status, "read raft hard state");
  }
  status = db_->Get(log_read_options(), raft_meta_key("snap"), &value);
  if (status.ok()) {
    MAYFLY_ASSIGN_OR_RETURN(snapshot_, replication::decode_snapshot_metadata(value));
    found = true;
  } else if (!status.IsNotFound()) {
    return from_leveldb(status, "read raft snapshot record");
  }
  status = db_->Get(log_read_options(), raft_meta_key("base"), &value);
  if (status.ok()) {
    MAYFLY_RETURN_IF_ERROR(decode_point(value, base_index_, base_term_));
    found = true;
  } else if (!status.IsNotFound()) {
    return from_leveldb(status, "read raft compaction point");
  }
  // The migrated log goes to segment 1, streamed to `<segment>.tmp` (a crash midway leaves only that, which the next
  // open removes before migrating again), fsync'd and renamed, and only then are the LevelDB keys deleted.
  const uint64_t sequence = 1;
  const std::string path = segment_path(sequence);
  const std::string temporary = path + ".tmp";
  std::unique_ptr<leveldb::WritableFile> file;
  uint64_t written_bytes = 0;
  std::string records = header_records();
  const auto flush_records = [&]() -> Status {
    if (!file) {
      leveldb::WritableFile* raw = nullptr;
      MAYFLY_RETURN_IF_ERROR(from_leveldb(env_->NewWritableFile(temporary, &raw), "create " + temporary));
      file.reset(raw);
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(file->Append(records), "write " + temporary));
    written_bytes += records.size();
    records.clear();
    return Status::ok();
  };
  const std::string prefix = raft_entry_prefix();
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(log_read_options()));
  uint64_t expected = base_index_.value() + 1;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan raft log"));
    const std::string_view bytes(it->value().data(), it->value().size());
    MAYFLY_ASSIGN_OR_RETURN(Entry entry, replication::decode_entry(bytes));
    if (entry.index.value() != expected) {
      return Status::corruption("raft log has a gap: expected entry " + std::to_string(expected) + ", found " +
                                text(entry.index));
    }
    const uint64_t offset = written_bytes + records.size();
    const Slot slot{entry.term, sequence, offset, put_record(records, RecordType::kEntry, bytes)};
    put_entry(std::move(entry), slot, false);
    found = true;
    ++expected;
    if (records.size() >= (4u << 20)) MAYFLY_RETURN_IF_ERROR(flush_records());  // memory: a few MB, not the log
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan raft log"));
  it.reset();
  if (!found) return Status::ok();  // a fresh node
  MAYFLY_RETURN_IF_ERROR(flush_records());
  Status done = from_leveldb(file->Sync(), "fsync " + temporary);
  if (done.is_ok()) done = from_leveldb(file->Close(), "close " + temporary);
  if (done.is_ok()) done = from_leveldb(env_->RenameFile(temporary, path), "rename " + temporary);
  if (done.is_ok()) done = sync_wal_dir();
  MAYFLY_RETURN_IF_ERROR(done);
  segments_.push_back(Segment{.sequence = sequence, .max_index = last_index().value()});
  return delete_leveldb_log();
}

Status RaftLogStore::delete_leveldb_log() {
  if (db_ == nullptr) return Status::ok();
  leveldb::WriteBatch batch;
  bool any = false;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (const std::string& prefix : {raft_meta_key(""), raft_entry_prefix()}) {
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      batch.Delete(it->key());
      any = true;
    }
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan the LevelDB raft log"));
  it.reset();
  if (!any) return Status::ok();
  leveldb::WriteOptions options;
  options.sync = true;
  return from_leveldb(db_->Write(options, &batch), "delete the LevelDB raft log");
}

Result<Term> RaftLogStore::term(LogIndex index) const {
  if (index == base_index_) return base_term_;
  if (index < base_index_ || index > last_index()) {
    return Status::not_found("term of index " + text(index) + " outside [" + text(base_index_) + ", " +
                             text(last_index()) + "]");
  }
  return slots_[index.value() - first_index().value()].term;
}

Result<std::vector<Entry>> RaftLogStore::entries(LogIndex low, LogIndex high, uint64_t max_bytes) const {
  if (low < first_index() || high > last_index().next() || low >= high) {
    return Status::not_found("entries [" + text(low) + ", " + text(high) + ") outside [" + text(first_index()) +
                             ", " + text(last_index().next()) + ")");
  }
  Result<std::vector<Entry>> read = read_entries(low, high, max_bytes);
  // Sticky like a write error: the disk failed under the log, or its bytes are not what was written.
  if (!read.is_ok() && failure_.is_ok()) failure_ = read.status();
  return read;
}

Result<Entry> RaftLogStore::read_entry_from_disk(
    LogIndex index, std::map<uint64_t, std::unique_ptr<leveldb::RandomAccessFile>>& opened) const {
  const Slot& slot = slots_[index.value() - first_index().value()];
  const std::string path = segment_path(slot.sequence);
  const std::string what = "read raft entry " + text(index);
  auto file = opened.find(slot.sequence);
  if (file == opened.end()) {
    leveldb::RandomAccessFile* raw = nullptr;
    MAYFLY_RETURN_IF_ERROR(from_leveldb(env_->NewRandomAccessFile(path, &raw), what));
    file = opened.emplace(slot.sequence, std::unique_ptr<leveldb::RandomAccessFile>(raw)).first;
  }
  std::string buffer(slot.length, '\0');
  leveldb::Slice read;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(file->second->Read(slot.offset, slot.length, &read, buffer.data()), what));
  if (read.size() != slot.length || read.size() < kHeaderBytes ||
      static_cast<uint8_t>(read[8]) != static_cast<uint8_t>(RecordType::kEntry) ||
      get_u32_le(read.data() + 4) != slot.length - kHeaderBytes) {
    return Status::corruption(what + ": " + path + " at offset " + std::to_string(slot.offset) +
                              " does not hold its record");
  }
  const std::string_view payload(read.data() + kHeaderBytes, slot.length - kHeaderBytes);
  if (get_u32_le(read.data()) != checksum(static_cast<uint8_t>(RecordType::kEntry), payload)) {
    return Status::corruption(what + ": checksum mismatch in " + path + " at offset " + std::to_string(slot.offset));
  }
  Result<Entry> entry = replication::decode_entry(payload);
  if (!entry.is_ok()) return entry.status().with_context("raft entry " + text(index));
  return entry;
}

Result<std::vector<Entry>> RaftLogStore::read_entries(LogIndex low, LogIndex high, uint64_t max_bytes) const {
  std::vector<Entry> out;
  uint64_t total_bytes = 0;
  const uint64_t recent_first = last_index().value() + 1 - recent_.size();
  std::map<uint64_t, std::unique_ptr<leveldb::RandomAccessFile>> opened;  // this read's segment files
  for (uint64_t i = low.value(); i < high.value(); ++i) {
    Entry entry;
    if (i >= recent_first) {
      entry = recent_[i - recent_first];
    } else {
      MAYFLY_ASSIGN_OR_RETURN(entry, read_entry_from_disk(LogIndex(i), opened));
    }
    // The bytes name their own index and term: they must be the position asked for, with the term recorded (a
    // record with a valid checksum but the wrong contents is a corrupt log, not an entry to hand the core).
    if (entry.index != LogIndex(i) || entry.term != slots_[i - first_index().value()].term) {
      return Status::corruption("raft entry " + std::to_string(i) + " holds index " +
                                std::to_string(entry.index.value()) + " term " + std::to_string(entry.term.value()) +
                                ", not the stored position");
    }
    total_bytes += entry.size_bytes();
    if (!out.empty() && total_bytes > max_bytes) break;
    out.push_back(std::move(entry));
  }
  return out;
}

Result<std::string> RaftLogStore::read_snapshot_chunk(LogIndex snapshot_index, uint64_t offset,
                                                           uint64_t max_bytes) const {
  if (snapshot_index != snapshot_.index) {
    return Status::not_found("snapshot " + text(snapshot_index) + " replaced by " + text(snapshot_.index));
  }
  if (!snapshot_data_ready()) return Status::not_found("snapshot " + text(snapshot_index) + " is a checkpoint, without data");
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

std::string RaftLogStore::snapshot_path(LogIndex index) const {
  return snapshot_dir_ + "/snapshot-" + std::to_string(index.value());
}

std::string RaftLogStore::incoming_path(LogIndex index) const {
  return snapshot_dir_ + "/incoming-" + std::to_string(index.value());
}

Status RaftLogStore::sync_wal_dir() const { return sync_directory_ ? sync_directory_(wal_dir_) : Status::ok(); }

Status RaftLogStore::sync_snapshot_dir() const {
  if (!sync_directory_) return Status::ok();
  return sync_directory_(snapshot_dir_);
}

void RaftLogStore::remove_snapshot_files_except(LogIndex index) {
  std::vector<std::string> children;
  if (!env_->GetChildren(snapshot_dir_, &children).ok()) return;
  // Also a `snapshot-<n>.tmp` whose export is still running on another thread: that job then fails to rename it and
  // is dropped, as it would be anyway (a newer snapshot is being recorded).
  const std::string keep = "snapshot-" + std::to_string(index.value());
  for (const std::string& child : children) {
    if (child.rfind("snapshot-", 0) == 0 && child != keep) env_->RemoveFile(snapshot_dir_ + "/" + child);
  }
}

Status RaftLogStore::write_snapshot_data(LogIndex index, std::string_view data) const {
  // `snapshot-<index>` only ever names complete, fsync'd data.
  return replace_file_durably(env_, snapshot_path(index), data, [this] { return sync_snapshot_dir(); });
}

Result<uint64_t> RaftLogStore::write_snapshot_stream(LogIndex index, const SnapshotProducer& produce) const {
  return write_file_durably(env_, snapshot_path(index), produce, [this] { return sync_snapshot_dir(); });
}

Status RaftLogStore::receive_begin(const SnapshotMetadata& metadata) {
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

Status RaftLogStore::receive_append(std::string_view chunk) {
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

Status RaftLogStore::receive_finish() {
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

void RaftLogStore::receive_abort() {
  if (!incoming_) return;
  incoming_file_.reset();  // closes it
  env_->RemoveFile(incoming_path(incoming_->index) + ".part");
  incoming_.reset();
  incoming_bytes_ = 0;
}

Status RaftLogStore::take_staged_snapshot(const SnapshotMetadata& metadata) {
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

Status RaftLogStore::write_snapshot_file(LogIndex index, std::string_view data) {
  if (!failure_.is_ok()) return failure_;
  Status status = write_snapshot_data(index, data);
  if (!status.is_ok()) failure_ = status;
  return status;
}

Status RaftLogStore::persist(const std::optional<Snapshot>& snapshot, const std::vector<Entry>& entries,
                             const std::optional<HardState>& hard_state, bool sync) {
  if (!failure_.is_ok()) return failure_;
  // Validate everything before anything is written.
  LogIndex base_index = base_index_;
  size_t kept = slots_.size();
  if (snapshot) {
    const SnapshotMetadata& metadata = snapshot->metadata;
    if (metadata.index < snapshot_.index) return Status::invalid_argument("persist: snapshot older than current");
    if (snapshot->staged) {
      if (!snapshot->data.empty()) return Status::invalid_argument("persist: staged snapshot with data");
    } else if (metadata.size_bytes != snapshot->data.size()) {
      return Status::invalid_argument("persist: snapshot size");
    }
    base_index = metadata.index;
    kept = 0;
  }
  if (!entries.empty()) {
    const uint64_t first = entries.front().index.value();
    const uint64_t last = base_index.value() + kept;
    if (first < base_index.value() + 1 || first > last + 1) {
      return Status::invalid_argument("persist: entries at " + std::to_string(first) + " outside [" +
                                      std::to_string(base_index.value() + 1) + ", " + std::to_string(last + 1) + "]");
    }
    for (size_t k = 0; k < entries.size(); ++k) {
      if (entries[k].index.value() != first + k) return Status::invalid_argument("persist: entries not contiguous");
    }
  }
  if (snapshot) {
    // The data first: the record that points at it is only written once the file is durable.
    if (snapshot->staged) {
      MAYFLY_RETURN_IF_ERROR(take_staged_snapshot(snapshot->metadata));
    } else if (snapshot->metadata.size_bytes != 0 || snapshot->metadata.index == LogIndex(0)) {
      MAYFLY_RETURN_IF_ERROR(write_snapshot_file(snapshot->metadata.index, snapshot->data));
    }  // else a checkpoint (size 0): the state machine holds the state durably itself; there is no file to write
  }
  if (active_bytes_ >= options_.segment_bytes) MAYFLY_RETURN_IF_ERROR(start_segment());
  const uint64_t sequence = segments_.back().sequence;
  std::string records;
  if (snapshot) {
    put_record(records, RecordType::kSnapshot, replication::encode_snapshot_metadata(snapshot->metadata));
    put_record(records, RecordType::kReset, encode_point(snapshot->metadata.index, snapshot->metadata.term));
  }
  std::vector<Slot> slots;
  slots.reserve(entries.size());
  for (const Entry& entry : entries) {
    const uint64_t offset = active_bytes_ + records.size();
    slots.push_back(Slot{entry.term, sequence, offset,
                         put_record(records, RecordType::kEntry, replication::encode_entry(entry))});
  }
  if (hard_state) put_record(records, RecordType::kHardState, replication::encode_hard_state(*hard_state));
  MAYFLY_RETURN_IF_ERROR(append_to_active(records, sync));
  if (snapshot) {
    snapshot_ = snapshot->metadata;
    reset_to(snapshot_.index, snapshot_.term);
    remove_snapshot_files_except(snapshot_.index);
  }
  for (size_t k = 0; k < entries.size(); ++k) put_entry(entries[k], slots[k], true);
  if (!entries.empty()) {
    segments_.back().max_index = std::max(segments_.back().max_index, entries.back().index.value());
  }
  if (hard_state) hard_state_ = *hard_state;
  if (snapshot) MAYFLY_RETURN_IF_ERROR(remove_compacted_segments());
  return Status::ok();
}

Result<SnapshotMetadata> RaftLogStore::describe_snapshot(LogIndex index, const replication::Membership& membership,
                                                              uint64_t size_bytes) const {
  if (index < snapshot_.index) return Status::invalid_argument("snapshot at " + text(index) + " is older than current");
  if (index == snapshot_.index && index == base_index_) {
    // The log was compacted up to the current record (a checkpoint): its term and time are in the record.
    SnapshotMetadata metadata = snapshot_;
    metadata.membership = membership;
    metadata.size_bytes = size_bytes;
    return metadata;
  }
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

Status RaftLogStore::record_snapshot(const SnapshotMetadata& metadata) {
  if (!failure_.is_ok()) return failure_;
  // A snapshot with data at the index of a checkpoint replaces it (the data was produced for a follower).
  const bool fills_checkpoint = metadata.index == snapshot_.index && !snapshot_data_ready() && metadata.size_bytes != 0;
  if (metadata.index <= snapshot_.index && !fills_checkpoint) {
    if (metadata.index < snapshot_.index) env_->RemoveFile(snapshot_path(metadata.index));
    return Status::invalid_argument("snapshot at " + text(metadata.index) + " is not newer than the current one at " +
                                    text(snapshot_.index));
  }
  std::string records;
  put_record(records, RecordType::kSnapshot, replication::encode_snapshot_metadata(metadata));
  MAYFLY_RETURN_IF_ERROR(append_to_active(records, true));
  snapshot_ = metadata;
  remove_snapshot_files_except(metadata.index);
  return Status::ok();
}

void RaftLogStore::discard_snapshot_file(LogIndex index) {
  if (index == snapshot_.index && snapshot_data_ready()) return;
  env_->RemoveFile(snapshot_path(index));
}

Status RaftLogStore::create_snapshot(LogIndex index, const replication::Membership& membership,
                                          std::string_view data) {
  MAYFLY_ASSIGN_OR_RETURN(SnapshotMetadata metadata, describe_snapshot(index, membership, data.size()));
  MAYFLY_RETURN_IF_ERROR(write_snapshot_file(index, data));
  if (index == snapshot_.index) return Status::ok();  // the same snapshot again: already recorded
  return record_snapshot(metadata);
}

Status RaftLogStore::compact(LogIndex index) {
  if (index <= base_index_) return Status::ok();
  if (index > snapshot_.index) {
    return Status::invalid_argument("compact: index " + text(index) + " not covered by the snapshot at " +
                                    text(snapshot_.index));
  }
  MAYFLY_ASSIGN_OR_RETURN(Term new_base_term, term(index));
  std::string records;
  put_record(records, RecordType::kCompact, encode_point(index, new_base_term));
  // Not synced by itself (losing a compaction point in a crash only keeps more log), unless it lets segments go.
  MAYFLY_RETURN_IF_ERROR(append_to_active(records, false));
  drop_through(index, new_base_term);
  return remove_compacted_segments();
}

}  // namespace mayfly::storage
