#include "storage/restore.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "storage/backup_file.h"
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

}  // namespace

Result<RestoreFigures> transform_for_restore(StateMachine& machine, RestoreTtlMode mode, int64_t now_micros,
                                             bool dry_run) {
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

  // Deletes first, then puts (a batch applies in order): a shifted item's new index key may be another item's old one.
  leveldb::WriteBatch batch;
  leveldb::WriteBatch puts;
  MAYFLY_ASSIGN_OR_RETURN(std::vector<ContainerInfo> containers, machine.reader().containers());
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
        break;
    }
    // The change feed's positions are the old log's: they mean nothing in the new cluster. Its feed data is dropped
    // (below) and a feed that was on starts again at the restored position.
    if (restored.change_feed.enabled) {
      restored.change_feed.since_index = meta.applied_index;
      puts.Put(feed_policy_key(container.crid, meta.applied_index), encode_ttl_state(restored.ttl));
    }
    if (!(restored.ttl == container.ttl) || !(restored.change_feed == container.change_feed)) {
      puts.Put(container_key(info.database, info.container), encode_container(restored));
    }
    const std::string prefix = item_prefix(container.crid);
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && internal::has_prefix(it->key(), prefix); it->Next()) {
      const std::string key = it->key().ToString();
      MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(internal::view(it->value())));
      std::string partition_key, id;
      MAYFLY_RETURN_IF_ERROR(decode_item_key(key, partition_key, id));
      const uint64_t bytes = key.size() + it->value().size();
      const internal::IndexEntry old_entry = internal::index_entry_for(container.crid, partition_key, id, record);
      const std::string old_ts_key = ts_index_key(container.crid, record.write_ts_micros, partition_key, id);
      if (!ttl::alive(record.ttl, record.write_ts_micros, container.ttl, backup_ts)) {
        // Expired at the backup's time: gone for good, in every mode.
        figures.dropped_items += 1;
        figures.dropped_bytes += bytes;
        batch.Delete(key);
        batch.Delete(old_ts_key);
        if (old_entry.kind != internal::IndexKind::kNone) batch.Delete(old_entry.key);
        continue;
      }
      ItemRecord now_record = record;
      if (shift != 0) {
        now_record.write_ts_micros += shift;
        const std::string value = encode_item(now_record);
        puts.Put(key, value);
        batch.Delete(old_ts_key);
        if (old_entry.kind != internal::IndexKind::kNone) batch.Delete(old_entry.key);
        puts.Put(ts_index_key(container.crid, now_record.write_ts_micros, partition_key, id), "");
        const internal::IndexEntry entry = internal::index_entry_for(container.crid, partition_key, id, now_record);
        if (entry.kind != internal::IndexKind::kNone) {
          puts.Put(entry.key, internal::index_value(key.size() + value.size()));
        }
      }
      if (ttl::alive(now_record.ttl, now_record.write_ts_micros, restored.ttl, now_micros)) {
        figures.live_items += 1;
        figures.live_bytes += bytes;
      } else {
        figures.expire_at_once_items += 1;
        figures.expire_at_once_bytes += bytes;
      }
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan items for restore"));
  }
  // The old cluster's address book.
  {
    const std::string prefix(1, static_cast<char>(KeyTag::kMemberAddress));
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && internal::has_prefix(it->key(), prefix); it->Next()) batch.Delete(it->key());
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan member addresses for restore"));
  }
  // Every change feed key of the old cluster (feed records, shadows, policy history, time index).
  for (const KeyTag tag : {KeyTag::kChangeFeed, KeyTag::kTimeIndex}) {
    const std::string prefix(1, static_cast<char>(tag));
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && internal::has_prefix(it->key(), prefix); it->Next()) batch.Delete(it->key());
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan change feed keys for restore"));
  }
  if (dry_run) return figures;
  meta.applied_ts_micros += shift;
  if (meta.feed_containers > 0) {
    std::string ts_value;
    codec::put_varint_signed(ts_value, meta.applied_ts_micros);
    puts.Put(time_index_key(meta.applied_index), ts_value);
  }
  puts.Put(meta_key(), encode_meta(meta));
  batch.Append(puts);
  MAYFLY_RETURN_IF_ERROR(from_leveldb(db->Write(leveldb::WriteOptions(), &batch), "write restored state"));
  // Installing the result again recomputes what is derived from it (node-local stats, cached containers, the
  // applied state the reader publishes).
  MAYFLY_ASSIGN_OR_RETURN(std::string blob, machine.export_snapshot());
  MAYFLY_RETURN_IF_ERROR(machine.install_snapshot(blob));
  return figures;
}

}  // namespace mayfly::storage

namespace mayfly::storage {
namespace {

Status require_empty_dir(const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::exists(dir, error)) return Status::ok();
  if (!std::filesystem::is_directory(dir, error)) {
    return Status::invalid_argument("--data " + dir + " is not a directory");
  }
  if (!std::filesystem::is_empty(dir, error)) {
    return Status::invalid_argument("refusing to restore into " + dir +
                                    ": the data directory is not empty (a restore starts a new cluster; give an "
                                    "empty or new directory)");
  }
  return Status::ok();
}

// The backup installed into a fresh state machine at `db_path`; checks the body matches its header.
Result<std::unique_ptr<StateMachine>> install_backup(const std::string& path, const std::string& db_path,
                                                     BackupSummary* summary) {
  std::string body;
  MAYFLY_ASSIGN_OR_RETURN(*summary, read_backup_file(path, &body));
  StoreOptions options;
  options.path = db_path;
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<StateMachine> machine, StateMachine::open(options));
  MAYFLY_RETURN_IF_ERROR(machine->install_snapshot(body));
  const AppliedState applied = machine->applied();
  if (applied.index.value() != summary->header.applied_index ||
      applied.ts_micros != summary->header.applied_ts_micros) {
    return Status::corruption("backup file " + path + " refused: its header says index " +
                              std::to_string(summary->header.applied_index) + ", its state says " +
                              std::to_string(applied.index.value()));
  }
  return machine;
}

}  // namespace

Result<RestoreFigures> restore_into_data_dir(const std::string& path, const std::string& data_dir,
                                             const replication::Membership& membership, RestoreTtlMode mode,
                                             int64_t now_micros) {
  MAYFLY_RETURN_IF_ERROR(require_empty_dir(data_dir));
  if (membership.voters.empty()) return Status::invalid_argument("a restored cluster needs at least one voter");
  std::error_code error;
  std::filesystem::create_directories(data_dir, error);
  if (error) return Status::io_error("create " + data_dir + ": " + error.message());
  BackupSummary summary;
  MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<StateMachine> machine, install_backup(path, data_dir + "/db", &summary));
  MAYFLY_ASSIGN_OR_RETURN(RestoreFigures figures, transform_for_restore(*machine, mode, now_micros, false));
  MAYFLY_ASSIGN_OR_RETURN(std::string blob, machine->export_snapshot());
  {
    MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<RaftLogStore> log,
                            RaftLogStore::open(machine->leveldb(), nullptr, data_dir + "/snapshots",
                                                    replication::Membership{}, sync_directory_posix));
    replication::Snapshot snapshot;
    snapshot.metadata.index = LogIndex(summary.header.applied_index);
    snapshot.metadata.term = Term(1);
    snapshot.metadata.ts_micros = machine->applied().ts_micros;
    snapshot.metadata.membership = membership;
    snapshot.metadata.size_bytes = blob.size();
    snapshot.data = std::move(blob);
    MAYFLY_RETURN_IF_ERROR(log->persist(snapshot, {},
                                        replication::HardState{Term(1), NodeId(0), snapshot.metadata.index}, true));
  }
  MAYFLY_RETURN_IF_ERROR(sync_directory_posix(data_dir));
  return figures;
}

Result<std::vector<RestoreFigures>> dry_run_restore(const std::string& path, const std::string& scratch_parent,
                                                    int64_t now_micros) {
  std::string scratch = scratch_parent + "/mayfly-restore-dry-run-XXXXXX";
  if (::mkdtemp(scratch.data()) == nullptr) {
    return Status::io_error("cannot make a scratch directory under " + scratch_parent + ": " + std::strerror(errno));
  }
  Result<std::vector<RestoreFigures>> result = [&]() -> Result<std::vector<RestoreFigures>> {
    BackupSummary summary;
    MAYFLY_ASSIGN_OR_RETURN(std::unique_ptr<StateMachine> machine, install_backup(path, scratch + "/db", &summary));
    std::vector<RestoreFigures> all;
    for (RestoreTtlMode mode : {RestoreTtlMode::kPreserve, RestoreTtlMode::kPause, RestoreTtlMode::kRebase}) {
      MAYFLY_ASSIGN_OR_RETURN(RestoreFigures figures, transform_for_restore(*machine, mode, now_micros, true));
      all.push_back(std::move(figures));
    }
    return all;
  }();
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  return result;
}

}  // namespace mayfly::storage
