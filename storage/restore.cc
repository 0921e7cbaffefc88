#include "storage/restore.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "storage/backup_file.h"
#include "storage/deleted_partitions.h"
#include "storage/holds.h"
#include "storage/json.h"
#include "storage/raft_log_store.h"
#include "storage/store_internal.h"

namespace mayfly::storage {

using internal::from_leveldb;

Result<RestoreTtlMode> parse_restore_ttl_mode(std::string_view text) {
  if (text == "preserve") return RestoreTtlMode::kPreserve;
  if (text == "pause") return RestoreTtlMode::kPause;
  if (text == "rebase") return RestoreTtlMode::kRebase;
  return Status::invalid_argument("--ttl must be preserve, pause or rebase (got '" + std::string(text) + "')");
}

std::string restore_ttl_mode_name(RestoreTtlMode mode) {
  switch (mode) {
    case RestoreTtlMode::kPreserve: return "preserve";
    case RestoreTtlMode::kPause: return "pause";
    case RestoreTtlMode::kRebase: return "rebase";
  }
  return "?";
}

std::string restore_step_name(RestoreProgress::Step step) {
  switch (step) {
    case RestoreProgress::Step::kInstall: return "install";
    case RestoreProgress::Step::kTransform: return "transform";
    case RestoreProgress::Step::kRebase: return "rebase";
    case RestoreProgress::Step::kRecord: return "record";
  }
  return "?";
}

std::string RestoreFigures::to_json() const {
  std::string out = "{\"mode\":\"" + restore_ttl_mode_name(mode) + "\",\"backupIndex\":" + std::to_string(backup_index) +
                    ",\"backupTime\":" + std::to_string(backup_ts_micros) + ",\"now\":" + std::to_string(now_micros) +
                    ",\"shiftSeconds\":" + std::to_string(shift_seconds) +
                    ",\"droppedExpiredAtBackup\":{\"items\":" + std::to_string(dropped_items) +
                    ",\"bytes\":" + std::to_string(dropped_bytes) + "},\"expireAtOnce\":{\"items\":" +
                    std::to_string(expire_at_once_items) + ",\"bytes\":" + std::to_string(expire_at_once_bytes) +
                    "},\"live\":{\"items\":" + std::to_string(live_items) + ",\"bytes\":" + std::to_string(live_bytes) +
                    "},\"paused\":[";
  for (size_t i = 0; i < paused.size(); ++i) {
    if (i > 0) out += ",";
    out += "{\"database\":";
    json::write_json_string(paused[i].database, out);
    out += ",\"container\":";
    json::write_json_string(paused[i].container, out);
    out += ",\"previousDefaultTtl\":" + paused[i].previous_default_ttl + "}";
  }
  return out + "]}";
}

namespace {

std::string default_ttl_json(const ttl::DefaultTtl& policy) {
  return policy.kind == ttl::DefaultTtl::Kind::kSeconds ? std::to_string(policy.seconds) : "-1";
}

int64_t shifted(int64_t micros, int64_t shift_micros) { return micros == 0 ? 0 : micros + shift_micros; }

// The transformation reports progress at least every this many items.
constexpr uint64_t kProgressItems = 1 << 16;

// The transformation's writes, in batches of about `batch_bytes`; none in a dry run. Each batch is a synced write:
// LevelDB fsyncs only its current log file, and one it closed at a memtable switch is never fsync'd, so a synced last
// write alone would not make earlier unsynced batches durable.
class BatchWriter {
 public:
  BatchWriter(leveldb::DB* db, size_t batch_bytes, bool dry_run)
      : db_(db), batch_bytes_(std::max<size_t>(batch_bytes, 1)), dry_run_(dry_run) {}
  void put(const leveldb::Slice& key, const leveldb::Slice& value) {
    batch_.Put(key, value);
    pending_ = true;
  }
  void remove(const leveldb::Slice& key) {
    batch_.Delete(key);
    pending_ = true;
  }
  bool full() const { return batch_.ApproximateSize() >= batch_bytes_; }
  Status flush() {
    if (!dry_run_ && pending_) {
      leveldb::WriteOptions options;
      options.sync = true;
      MAYFLY_RETURN_IF_ERROR(from_leveldb(db_->Write(options, &batch_), "write restored state"));
    }
    batch_.Clear();
    pending_ = false;
    return Status::ok();
  }

 private:
  leveldb::DB* db_;
  size_t batch_bytes_;
  bool dry_run_;
  leveldb::WriteBatch batch_;
  bool pending_ = false;
};

// Calls visit(key, value_bytes, record, partition_key, id) for each item of container crid in key order, from an
// iterator made now (it does not see later writes), and stops at the first error.
template <typename Visit>
Status for_each_item(leveldb::DB& db, uint64_t crid, const char* what, Visit visit) {
  const std::string prefix = item_prefix(crid);
  leveldb::ReadOptions read;
  read.fill_cache = false;  // one pass over every item: keep the block cache for the reads after it
  std::unique_ptr<leveldb::Iterator> it(db.NewIterator(read));
  for (it->Seek(prefix); it->Valid() && internal::has_prefix(it->key(), prefix); it->Next()) {
    const std::string key = it->key().ToString();
    MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(internal::view(it->value())));
    std::string partition_key, id;
    MAYFLY_RETURN_IF_ERROR(decode_item_key(key, partition_key, id));
    MAYFLY_RETURN_IF_ERROR(visit(key, it->value().size(), record, partition_key, id));
  }
  return from_leveldb(it->status(), what);
}

}  // namespace

Result<RestoreFigures> transform_for_restore(StateMachine& machine, RestoreTtlMode mode, int64_t now_micros,
                                             bool dry_run, const RestoreOptions& options) {
  leveldb::DB* db = machine.leveldb();
  std::string meta_bytes;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(db->Get(leveldb::ReadOptions(), meta_key(), &meta_bytes), "read applied state"));
  MAYFLY_ASSIGN_OR_RETURN(MetaState meta, decode_meta(meta_bytes));
  RestoreFigures figures;
  figures.mode = mode;
  figures.backup_index = meta.applied_index;
  figures.backup_ts_micros = meta.applied_ts_micros;
  figures.now_micros = now_micros;
  const int64_t backup_ts = meta.applied_ts_micros;
  if (mode == RestoreTtlMode::kRebase && now_micros > backup_ts) {
    figures.shift_seconds = (now_micros - backup_ts + kMicrosPerSecond - 1) / kMicrosPerSecond;
  }
  const int64_t shift = figures.shift_seconds * kMicrosPerSecond;
  const auto report = [&options](RestoreProgress::Step step, uint64_t done, uint64_t total) -> Status {
    return options.progress ? options.progress(RestoreProgress{step, done, total}) : Status::ok();
  };
  BatchWriter writer(db, options.batch_bytes, dry_run);
  uint64_t seen = 0;
  // Writes the batch once it is full; reports progress then, and every so many items (a pass may write nothing).
  const auto maybe_flush = [&](RestoreProgress::Step step, uint64_t total) -> Status {
    if (writer.full()) {
      MAYFLY_RETURN_IF_ERROR(writer.flush());
      return report(step, seen, total);
    }
    return seen % kProgressItems == 0 ? report(step, seen, total) : Status::ok();
  };

  // Pass 1, the deletes, all written (batch by batch) before pass 2 puts anything, so no delete can undo a put,
  // whichever batches they land in — the rule one whole-store batch kept by putting its deletes first. (Index keys
  // carry the item's partition key and id, so two items never share one today; the order does not rely on that.) The
  // iterators read the store as it was when each was made: this pass's own deletes do not disturb them.
  MAYFLY_ASSIGN_OR_RETURN(std::vector<ContainerInfo> containers, machine.reader().containers());
  std::vector<ContainerRecord> restored_records;  // one per container, for pass 2
  restored_records.reserve(containers.size());
  for (const ContainerInfo& info : containers) {
    const ContainerRecord& container = info.record;
    ContainerRecord restored = container;
    switch (mode) {
      case RestoreTtlMode::kPreserve: break;
      case RestoreTtlMode::kPause:
        if (container.ttl.policy.is_on()) {
          figures.paused.push_back({info.database, info.container, default_ttl_json(container.ttl.policy)});
          restored.ttl = ttl::change_policy(container.ttl, ttl::DefaultTtl::off(), backup_ts);
        }
        break;
      case RestoreTtlMode::kRebase:
        restored.ttl.own_dead_below_micros = shifted(container.ttl.own_dead_below_micros, shift);
        restored.ttl.default_dead_below_micros = shifted(container.ttl.default_dead_below_micros, shift);
        restored.ttl.default_dead_since_micros = shifted(container.ttl.default_dead_since_micros, shift);
        restored.ttl.own_warned_below_micros = shifted(container.ttl.own_warned_below_micros, shift);
        restored.ttl.default_warned_below_micros = shifted(container.ttl.default_warned_below_micros, shift);
        break;
    }
    // The change feed's positions are the old log's: they mean nothing in the new cluster. Its feed data is dropped
    // (below) and a feed that was on starts again at the restored position (pass 2).
    if (restored.change_feed.enabled) restored.change_feed.since_index = meta.applied_index;
    // Items deleted with their partition (not yet removed by the source's collector) are gone for good, like expired
    // ones; the partitions' records go with the feed keys below.
    PartitionDeletes deletes = PartitionDeletes::at(db, nullptr, container);
    restored.partitions_deleted_through_micros = 0;
    // Legal holds (storage/holds.h) come back with the backup and keep their items: a held item is alive at B
    // whatever its instant. Pausing TTL is a defaultTtl change, which would expire held items: refused.
    MAYFLY_ASSIGN_OR_RETURN(std::optional<HoldSet> holds, HoldSet::load_if_held(db, nullptr, container));
    if (holds && mode == RestoreTtlMode::kPause && container.ttl.policy.is_on()) {
      return Status::conflict("restore --ttl pause would turn TTL off on container '" + info.database + "/" +
                              info.container + "', which holds items under legal hold " +
                              describe_holds(holds->active()) +
                              " (a defaultTtl change would expire them); restore with --ttl preserve or rebase, "
                              "which keep the holds and their items");
    }
    // Rebase moves the holds' times with the items' (their "held since" instants).
    const auto hold_shift = [shift](std::optional<int64_t> since) -> std::optional<int64_t> {
      if (since) return *since + shift;
      return since;
    };
    MAYFLY_RETURN_IF_ERROR(for_each_item(
        *db, container.crid, "scan items for restore",
        [&](const std::string& key, size_t value_bytes, const ItemRecord& record, const std::string& partition_key,
            const std::string& id) -> Status {
          const uint64_t bytes = key.size() + value_bytes;
          const internal::IndexEntry old_entry = internal::index_entry_for(container.crid, partition_key, id, record);
          const std::string old_ts_key = ts_index_key(container.crid, record.write_ts_micros, partition_key, id);
          ++seen;
          MAYFLY_ASSIGN_OR_RETURN(bool deleted, deletes.hides(partition_key, record.write_ts_micros));
          const std::optional<int64_t> since = holds ? holds->held_since(partition_key, id) : std::nullopt;
          if (deleted || !HoldSet::alive(record, container.ttl, backup_ts, since)) {
            // Expired at the backup's time (or deleted with its partition): gone for good, in every mode.
            figures.dropped_items += 1;
            figures.dropped_bytes += bytes;
            writer.remove(key);
            writer.remove(old_ts_key);
            if (old_entry.kind != internal::IndexKind::kNone) writer.remove(old_entry.key);
          } else {
            ItemRecord now_record = record;
            if (shift != 0) {
              // Its new entries are written in pass 2; the item itself is overwritten there.
              now_record.write_ts_micros += shift;
              writer.remove(old_ts_key);
              if (old_entry.kind != internal::IndexKind::kNone) writer.remove(old_entry.key);
            } else {
              // The _ts index entry's value is the write's log index in the old cluster: meaningless in the new one.
              writer.put(old_ts_key, "");
            }
            if (HoldSet::alive(now_record, restored.ttl, now_micros, hold_shift(since))) {
              figures.live_items += 1;
              figures.live_bytes += bytes;
            } else {
              figures.expire_at_once_items += 1;
              figures.expire_at_once_bytes += bytes;
            }
          }
          return maybe_flush(RestoreProgress::Step::kTransform, 0);
        }));
    restored_records.push_back(std::move(restored));
  }
  // The old cluster's address book, and every change feed key of the old cluster (feed records, shadows, policy
  // history, time index).
  for (const KeyTag tag : {KeyTag::kMemberAddress, KeyTag::kChangeFeed, KeyTag::kTimeIndex, KeyTag::kDeletedPartition}) {
    const std::string prefix(1, static_cast<char>(tag));
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && internal::has_prefix(it->key(), prefix); it->Next()) {
      writer.remove(it->key());
      MAYFLY_RETURN_IF_ERROR(maybe_flush(RestoreProgress::Step::kTransform, 0));
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), tag == KeyTag::kMemberAddress
                                                          ? "scan member addresses for restore"
                                                          : "scan change feed keys for restore"));
  }
  MAYFLY_RETURN_IF_ERROR(writer.flush());
  MAYFLY_RETURN_IF_ERROR(report(RestoreProgress::Step::kTransform, seen, 0));
  if (dry_run) return figures;

  // Pass 2, the puts, on a store the deletes are all written to.
  const uint64_t kept = figures.live_items + figures.expire_at_once_items;
  seen = 0;
  for (size_t c = 0; c < containers.size(); ++c) {
    const ContainerInfo& info = containers[c];
    const ContainerRecord& container = info.record;
    const ContainerRecord& restored = restored_records[c];
    if (restored.change_feed.enabled) {
      writer.put(feed_policy_key(container.crid, meta.applied_index), encode_ttl_state(restored.ttl));
    }
    if (!(restored.ttl == container.ttl) || !(restored.change_feed == container.change_feed) ||
        restored.partitions_deleted_through_micros != container.partitions_deleted_through_micros) {
      writer.put(container_key(info.database, info.container), encode_container(restored));
    }
    if (shift == 0) continue;
    {
      MAYFLY_ASSIGN_OR_RETURN(HoldSet holds, HoldSet::load(db, nullptr, container.crid));
      for (HoldRecord hold : holds.all()) {
        hold.set_ts_micros += shift;
        if (!hold.active()) hold.released_ts_micros += shift;
        writer.put(hold_key(container.crid, hold.set_index), encode_hold(hold));
      }
    }
    // Every item left in the container is alive at B (pass 1 deleted the others): each moves by the shift.
    MAYFLY_RETURN_IF_ERROR(for_each_item(
        *db, container.crid, "scan items to rebase",
        [&](const std::string& key, size_t, const ItemRecord& old_record, const std::string& partition_key,
            const std::string& id) -> Status {
          ItemRecord record = old_record;
          record.write_ts_micros += shift;
          const std::string value = encode_item(record);
          writer.put(key, value);
          writer.put(ts_index_key(container.crid, record.write_ts_micros, partition_key, id), "");
          const internal::IndexEntry entry = internal::index_entry_for(container.crid, partition_key, id, record);
          if (entry.kind != internal::IndexKind::kNone) {
            writer.put(entry.key, internal::index_value(key.size() + value.size()));
          }
          ++seen;
          return maybe_flush(RestoreProgress::Step::kRebase, kept);
        }));
  }
  meta.applied_ts_micros += shift;
  if (meta.feed_containers > 0) {
    std::string ts_value;
    codec::put_varint_signed(ts_value, meta.applied_ts_micros);
    writer.put(time_index_key(meta.applied_index), ts_value);
  }
  writer.put(meta_key(), encode_meta(meta));
  MAYFLY_RETURN_IF_ERROR(writer.flush());
  if (shift != 0) MAYFLY_RETURN_IF_ERROR(report(RestoreProgress::Step::kRebase, seen, kept));
  // What is derived from the result (node-local stats, cached containers, the applied state the reader publishes),
  // recomputed by a scan of the store, as an install's last step would.
  MAYFLY_RETURN_IF_ERROR(machine.recompute_local_state());
  return figures;
}

}  // namespace mayfly::storage

namespace mayfly::storage {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kStagingInfix = ".restoring-";  // <data_dir>.restoring-XXXXXX, <data_dir>/.restoring-XXXXXX

bool is_staging_leftover(const std::string& name) { return name.rfind(kStagingInfix, 0) == 0; }

// The names in `dir` (an error if it cannot be listed; none if it does not exist).
Result<std::vector<std::string>> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code error;
  if (!fs::exists(dir, error)) return names;
  fs::directory_iterator it(dir, error);
  for (; !error && it != fs::directory_iterator(); it.increment(error)) names.push_back(it->path().filename().string());
  if (error) return Status::io_error("list " + dir.string() + ": " + error.message());
  return names;
}

// Absent or empty; a staging directory an interrupted restore left inside it (see restore_into_data_dir) does not
// count.
Status require_empty_dir(const std::string& dir) {
  std::error_code error;
  if (!fs::exists(dir, error)) return Status::ok();
  if (!fs::is_directory(dir, error)) {
    return Status::invalid_argument("--data " + dir + " is not a directory");
  }
  MAYFLY_ASSIGN_OR_RETURN(const std::vector<std::string> names, names_in(dir));
  for (const std::string& name : names) {
    if (!is_staging_leftover(name)) {
      return Status::invalid_argument("refusing to restore into " + dir +
                                      ": the data directory is not empty (a restore starts a new cluster; give an "
                                      "empty or new directory)");
    }
  }
  return Status::ok();
}

Status errno_error(const std::string& what) { return Status::io_error(what + ": " + std::strerror(errno)); }

// Where a restore writes until it is complete (restore_into_data_dir says why and how).
class Staging {
 public:
  // Makes the staging directory for `data_dir` (absent, or empty but for leftovers), removing the leftovers of
  // interrupted restores into it first.
  static Result<Staging> make(const std::string& data_dir, bool inside) {
    std::error_code error;
    fs::path target = fs::absolute(fs::path(data_dir), error).lexically_normal();
    if (error) return Status::io_error("resolve " + data_dir + ": " + error.message());
    if (!target.has_filename()) target = target.parent_path();  // "dir/"
    if (fs::exists(target, error)) {
      target = fs::canonical(target, error);  // a symlink's directory is the one replaced
      if (error) return Status::io_error("resolve " + data_dir + ": " + error.message());
    }
    const fs::path parent = target.parent_path();
    const std::string name = target.filename().string();
    fs::create_directories(parent, error);
    if (error) return Status::io_error("create " + parent.string() + ": " + error.message());
    for (const fs::path& dir : {parent, target}) {
      MAYFLY_ASSIGN_OR_RETURN(const std::vector<std::string> children, names_in(dir));
      for (const std::string& child : children) {
        const bool leftover = dir == parent ? child.rfind(name + std::string(kStagingInfix), 0) == 0
                                            : is_staging_leftover(child);
        std::error_code ignored;
        if (leftover) fs::remove_all(dir / child, ignored);
      }
    }
    Staging staging;
    staging.target_ = target.string();
    struct stat target_stat {}, parent_stat {};
    const bool target_exists = ::stat(target.c_str(), &target_stat) == 0;
    if (::stat(parent.c_str(), &parent_stat) != 0) return errno_error("stat " + parent.string());
    if (!inside && (!target_exists || target_stat.st_dev == parent_stat.st_dev)) {
      std::string path = (parent / (name + std::string(kStagingInfix) + "XXXXXX")).string();
      if (::mkdtemp(path.data()) != nullptr) {
        staging.path_ = path;
        // The permissions data_dir has (or a new directory would get), not mkdtemp's 0700.
        const mode_t mask = ::umask(0);
        ::umask(mask);
        const mode_t mode = target_exists ? (target_stat.st_mode & 07777) : (0777 & ~mask);
        if (::chmod(path.c_str(), mode) != 0) {
          Status failed = errno_error("chmod " + path);
          staging.discard();
          return failed;
        }
        return staging;
      }
      if (errno != EACCES && errno != EPERM && errno != EROFS) return errno_error("create " + path);
    }
    // data_dir is a mount point (a container's volume), or its parent is not ours to write: stage inside it.
    fs::create_directories(target, error);
    if (error) return Status::io_error("create " + target.string() + ": " + error.message());
    std::string path = (target / (std::string(kStagingInfix) + "XXXXXX")).string();
    if (::mkdtemp(path.data()) == nullptr) return errno_error("create " + path);
    staging.path_ = path;
    staging.inside_ = true;
    return staging;
  }

  const std::string& path() const { return path_; }

  // Moves the complete result into place, durably.
  Status commit() {
    MAYFLY_RETURN_IF_ERROR(sync_directory_posix(path_));
    if (!inside_) {
      // An empty data_dir is replaced by the rename, atomically; one written to meanwhile makes it fail (ENOTEMPTY).
      std::error_code error;
      const bool in_target = fs::current_path(error) == fs::path(target_);
      if (::rename(path_.c_str(), target_.c_str()) != 0) {
        return errno_error("rename " + path_ + " to " + target_);
      }
      moved_ = true;
      // A process working in the empty directory it replaced (`--data .`) works in the new one from now on.
      if (in_target && ::chdir(target_.c_str()) != 0) return errno_error("chdir " + target_);
      return sync_directory_posix(fs::path(target_).parent_path().string());
    }
    // The log first, the state last: a crash in between leaves a checkpoint ahead of an empty state, which a node
    // refuses to start on — never a state without its log (a fresh log would bootstrap a new cluster over it).
    for (const char* child : {"wal", "snapshots", "db"}) {
      const std::string from = path_ + "/" + child;
      const std::string to = target_ + "/" + child;
      if (::rename(from.c_str(), to.c_str()) != 0) return errno_error("rename " + from + " to " + to);
      if (std::string_view(child) == "db") {
        moved_ = true;
      } else {
        moved_children_.push_back(to);
      }
      MAYFLY_RETURN_IF_ERROR(sync_directory_posix(target_));
    }
    std::error_code ignored;
    fs::remove_all(path_, ignored);  // empty now
    return sync_directory_posix(target_);
  }

  // Removes what was staged (after a failure).
  void discard() {
    if (moved_ || path_.empty()) return;
    std::error_code ignored;
    for (const std::string& child : moved_children_) fs::remove_all(child, ignored);
    fs::remove_all(path_, ignored);
  }

 private:
  std::string target_;
  std::string path_;
  bool inside_ = false;
  bool moved_ = false;                        // the result is in place
  std::vector<std::string> moved_children_;  // inside: what was moved up before the state (removed on failure)
};

// The backup at `path` (checked end to end first) installed into a fresh state machine at `db_path`, a piece at a
// time; checks the state matches the header.
Result<std::unique_ptr<StateMachine>> install_backup(const std::string& path, const StateMachine::SnapshotSource& body,
                                                     const BackupSummary& summary, const std::string& db_path,
                                                     const RestoreOptions& options) {
  StoreOptions store_options;
  store_options.path = db_path;
  store_options.install_batch_bytes = options.batch_bytes;
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<StateMachine> machine, StateMachine::open(store_options));
  uint64_t installed = 0;
  const StateMachine::SnapshotSource reported = [&](size_t max_bytes) -> Result<std::string> {
    MAYFLY_ASSIGN_OR_RETURN(std::string piece, body(max_bytes));
    installed += piece.size();
    if (options.progress && !piece.empty()) {
      MAYFLY_RETURN_IF_ERROR(
          options.progress(RestoreProgress{RestoreProgress::Step::kInstall, installed, summary.body_bytes}));
    }
    return piece;
  };
  MAYFLY_RETURN_IF_ERROR(machine->install_snapshot(reported));
  const AppliedState applied = machine->applied();
  if (applied.index.value() != summary.header.applied_index ||
      applied.ts_micros != summary.header.applied_ts_micros) {
    return Status::corruption("backup file " + path + " refused: its header says index " +
                              std::to_string(summary.header.applied_index) + ", its state says " +
                              std::to_string(applied.index.value()));
  }
  return machine;
}

// The restore proper, into `dir` (the staging directory).
Result<RestoreFigures> restore_into(const std::string& path, const StateMachine::SnapshotSource& body,
                                    const BackupSummary& summary, const std::string& dir,
                                    const replication::Membership& membership, RestoreTtlMode mode,
                                    int64_t now_micros, const RestoreOptions& options) {
  RestoreOptions transform_options = options;
  if (options.progress) {
    // The first pass sees every item of the backup: its trailer says how many.
    transform_options.progress = [&options, &summary](const RestoreProgress& progress) {
      RestoreProgress filled = progress;
      if (filled.step == RestoreProgress::Step::kTransform && filled.total == 0) filled.total = summary.items;
      return options.progress(filled);
    };
  }
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<StateMachine> machine,
                          install_backup(path, body, summary, dir + "/db", options));
  MAYFLY_ASSIGN_OR_RETURN(RestoreFigures figures,
                          transform_for_restore(*machine, mode, now_micros, false, transform_options));
  // Durable before the log says so (as Replica::maybe_checkpoint does: the state, then the record).
  MAYFLY_RETURN_IF_ERROR(machine->checkpoint());
  {
    MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<RaftLogStore> log,
                            RaftLogStore::open(machine->leveldb(), nullptr, dir + "/snapshots",
                                               replication::Membership{}, sync_directory_posix));
    replication::Snapshot checkpoint;  // size 0, no data: a checkpoint (RaftLogStore::persist)
    checkpoint.metadata.index = LogIndex(summary.header.applied_index);
    checkpoint.metadata.term = Term(1);
    checkpoint.metadata.ts_micros = machine->applied().ts_micros;
    checkpoint.metadata.membership = membership;
    checkpoint.metadata.size_bytes = 0;
    MAYFLY_RETURN_IF_ERROR(log->persist(checkpoint, {},
                                        replication::HardState{Term(1), NodeId(0), checkpoint.metadata.index}, true));
  }
  machine.reset();  // closed before the directory moves
  if (options.progress) {
    MAYFLY_RETURN_IF_ERROR(options.progress(RestoreProgress{RestoreProgress::Step::kRecord, 1, 1}));
  }
  return figures;
}

}  // namespace

Result<RestoreFigures> restore_into_data_dir(const std::string& path, const std::string& data_dir,
                                             const replication::Membership& membership, RestoreTtlMode mode,
                                             int64_t now_micros, const RestoreOptions& options) {
  MAYFLY_RETURN_IF_ERROR(require_empty_dir(data_dir));
  if (membership.voters.empty()) return Status::invalid_argument("a restored cluster needs at least one voter");
  // Checked end to end before anything is created.
  BackupSummary summary;
  MAYFLY_ASSIGN_OR_RETURN(StateMachine::SnapshotSource body, open_backup_body(path, &summary, options.piece_bytes));
  MAYFLY_ASSIGN_OR_RETURN(Staging staging, Staging::make(data_dir, options.stage_inside_data_dir));
  Result<RestoreFigures> result =
      restore_into(path, body, summary, staging.path(), membership, mode, now_micros, options);
  if (result.is_ok()) {
    Status moved = staging.commit();
    if (!moved.is_ok()) result = moved;
  }
  if (!result.is_ok()) staging.discard();
  return result;
}

Result<std::vector<RestoreFigures>> dry_run_restore(const std::string& path, const std::string& scratch_parent,
                                                    int64_t now_micros, const RestoreOptions& options) {
  BackupSummary summary;
  MAYFLY_ASSIGN_OR_RETURN(StateMachine::SnapshotSource body, open_backup_body(path, &summary, options.piece_bytes));
  std::string scratch = scratch_parent + "/mayfly-restore-dry-run-XXXXXX";
  if (::mkdtemp(scratch.data()) == nullptr) {
    return Status::io_error("cannot make a scratch directory under " + scratch_parent + ": " + std::strerror(errno));
  }
  Result<std::vector<RestoreFigures>> result = [&]() -> Result<std::vector<RestoreFigures>> {
    MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<StateMachine> machine,
                            install_backup(path, body, summary, scratch + "/db", options));
    std::vector<RestoreFigures> all;
    for (RestoreTtlMode mode : {RestoreTtlMode::kPreserve, RestoreTtlMode::kPause, RestoreTtlMode::kRebase}) {
      MAYFLY_ASSIGN_OR_RETURN(RestoreFigures figures, transform_for_restore(*machine, mode, now_micros, true, options));
      all.push_back(std::move(figures));
    }
    return all;
  }();
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  return result;
}

}  // namespace mayfly::storage
