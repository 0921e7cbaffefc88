// Online backup files (storage/backup_file.h) and restore transformations (storage/restore.h) on real LevelDB state
// machines: the file round trip, refusal of truncated and corrupted files, what each TTL mode does; and the bounded
// restore: small batches restore item for item what the source held, the directory starts as a checkpoint whose
// leader serves a joining follower, and a failure at any step leaves neither data directory nor staging directory.
#include <leveldb/db.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/codec.h"
#include "replication/types.h"
#include "storage/backup_file.h"
#include "storage/replica.h"
#include "storage/restore.h"
#include "storage/store_internal.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

constexpr int64_t kBackupTs = kT0 + 50 * kSecond;  // B
constexpr int64_t kNow = kT0 + 80 * kSecond;       // the restore

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class BackupTest : public StoreFixture {
 protected:
  // db/c: defaultTtl 100. dead: ttl 10 at T0 (expired at B); inh: inherits, written at T0 (E = T0+100); short: ttl 60
  // at T0+1 s (E = T0+61: alive at B, expired at the restore's now); never: ttl -1. db/off: TTL off, one item.
  void SetUp() override {
    StoreFixture::SetUp();
    make_container("100");
    ASSERT_EQ(apply(create_container_command("db", "off", "/pk"), kT0).http_status(), 201);
    write("c", R"({"id":"dead","pk":"p","ttl":10})", kT0);
    write("c", R"({"id":"inh","pk":"p"})", kT0 + 1);
    write("c", R"({"id":"short","pk":"p","ttl":60})", kT0 + kSecond);
    write("c", R"({"id":"never","pk":"p","ttl":-1})", kT0 + kSecond + 1);
    write("off", R"({"id":"plain","pk":"p","ttl":5})", kT0 + kSecond + 2);
    ASSERT_EQ(apply(Command{}, kBackupTs).http_status(), 200);  // a time entry: B
    backup_path_ = dir_.path() + "/backup.mfb";
    std::unique_ptr<StateMachine::View> view = store_->open_view();
    Result<BackupSummary> written = write_backup_file(*view, 7, kNow, backup_path_, 64);  // tiny pieces
    ASSERT_TRUE(written.is_ok()) << written.status().to_string();
    summary_ = *written;
  }
  void write(const std::string& container, const std::string& body, int64_t ts) {
    OpResult result = apply(item_command(CommandType::kUpsertItem, "db", container, body), ts);
    ASSERT_EQ(result.http_status(), 201) << result.message;
  }
  // Restores into a fresh directory and opens its state machine.
  std::unique_ptr<StateMachine> restore(RestoreTtlMode mode, RestoreFigures* figures) {
    const std::string data = restore_dir_.path() + "/" + restore_ttl_mode_name(mode);
    Result<RestoreFigures> restored =
        restore_into_data_dir(backup_path_, data, replication::Membership{{NodeId(1)}, {}}, mode, kNow);
    EXPECT_TRUE(restored.is_ok()) << restored.status().to_string();
    if (!restored.is_ok()) return nullptr;
    *figures = *restored;
    StoreOptions options;
    options.path = data + "/db";
    Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
    EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
    return opened.is_ok() ? std::move(opened).value() : nullptr;
  }
  static int status_of(const StateMachine& machine, const std::string& container, const std::string& id,
                       int64_t now) {
    return machine.reader().read_item("db", container, "\"p\"", id, now).http_status();
  }
  static bool has_item_key(const StateMachine& machine, const std::string& id) {
    auto dump = machine.dump(false);
    EXPECT_TRUE(dump.is_ok());
    for (const auto& [key, value] : *dump) {
      if (key[0] == static_cast<char>(KeyTag::kItem) && key.find(id) != std::string::npos) return true;
    }
    return false;
  }
  static std::string ts_of(const StateMachine& machine, const std::string& id, int64_t now) {
    const std::string body = machine.reader().read_item("db", "c", "\"p\"", id, now).body;
    const size_t at = body.find("\"_ts\":");
    return at == std::string::npos ? "" : body.substr(at + 6, 10);
  }

  std::string backup_path_;
  BackupSummary summary_;
  TempDir restore_dir_;
};

TEST_F(BackupTest, FileRoundTripKeepsIndexTimeItemsAndTheExactState) {
  std::string body;
  Result<BackupSummary> read = read_backup_file(backup_path_, &body);
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(read->header.applied_index, store_->applied().index.value());
  EXPECT_EQ(read->header.applied_ts_micros, kBackupTs);
  EXPECT_EQ(read->header.source_node, 7u);
  EXPECT_EQ(read->items, 5u);  // "dead" is still stored (not yet collected): the backup is the state as it is
  EXPECT_EQ(read->items, summary_.items);
  EXPECT_EQ(read->sha256_hex, summary_.sha256_hex);
  EXPECT_EQ(read->file_bytes, std::filesystem::file_size(backup_path_));
  // The body is the Raft snapshot export, byte for byte.
  Result<std::string> exported = store_->export_snapshot();
  ASSERT_TRUE(exported.is_ok());
  EXPECT_EQ(body, *exported);
}

TEST_F(BackupTest, TruncatedPaddedOrCorruptedFilesAreRefused) {
  const std::string good = read_all(backup_path_);
  const std::string bad = dir_.path() + "/bad.mfb";
  auto refused = [&](const std::string& bytes, StatusCode code, const std::string& says) {
    write_all(bad, bytes);
    Result<BackupSummary> read = read_backup_file(bad);
    EXPECT_FALSE(read.is_ok()) << "accepted a file of " << bytes.size() << " bytes (" << says << ")";
    if (read.is_ok()) return;
    EXPECT_EQ(read.status().code(), code) << read.status().to_string();
    EXPECT_NE(read.status().message().find(says), std::string::npos) << read.status().to_string();
  };
  refused("", StatusCode::kInvalidArgument, "truncated");
  refused(good.substr(0, kBackupHeaderBytes), StatusCode::kInvalidArgument, "truncated");
  refused(good.substr(0, good.size() - 1), StatusCode::kInvalidArgument, "truncated");
  refused(good.substr(0, good.size() - kBackupTrailerBytes), StatusCode::kInvalidArgument, "truncated");
  refused(good.substr(0, good.size() / 2) + good.substr(good.size() - kBackupTrailerBytes),
          StatusCode::kInvalidArgument, "truncated or padded");
  refused(good + "x", StatusCode::kInvalidArgument, "truncated");
  refused("NOTABACKUP" + good.substr(10), StatusCode::kInvalidArgument, "not a Mayfly backup");
  for (size_t at : {kBackupHeaderBytes - 20, kBackupHeaderBytes + 3, good.size() / 2,
                    good.size() - kBackupTrailerBytes - 1, good.size() - 1}) {
    std::string flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x01);
    refused(flipped, StatusCode::kCorruption, "checksum mismatch");
  }
  // A refused file restores nothing.
  const std::string data = restore_dir_.path() + "/refused";
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x01;
  write_all(bad, flipped);
  EXPECT_FALSE(restore_into_data_dir(bad, data, replication::Membership{{NodeId(1)}, {}},
                                     RestoreTtlMode::kPreserve, kNow)
                   .is_ok());
  EXPECT_TRUE(!std::filesystem::exists(data) || std::filesystem::is_empty(data));
}

TEST_F(BackupTest, PreserveContinuesFromTheBackupTimeAndStartsAReplica) {
  RestoreFigures figures;
  std::unique_ptr<StateMachine> machine = restore(RestoreTtlMode::kPreserve, &figures);
  ASSERT_TRUE(machine);
  EXPECT_EQ(figures.dropped_items, 1u);         // dead
  EXPECT_EQ(figures.expire_at_once_items, 1u);  // short: expired while the backup sat on disk
  EXPECT_EQ(figures.live_items, 3u);
  EXPECT_EQ(machine->applied().ts_micros, kBackupTs);
  EXPECT_FALSE(has_item_key(*machine, "dead"));
  EXPECT_EQ(status_of(*machine, "c", "dead", kT0 + kSecond), 404);  // never back, even read before its expiry
  EXPECT_EQ(status_of(*machine, "c", "short", kBackupTs), 200);
  EXPECT_EQ(status_of(*machine, "c", "short", kNow), 404);
  EXPECT_EQ(status_of(*machine, "c", "inh", kT0 + 100 * kSecond - 1), 200);
  EXPECT_EQ(status_of(*machine, "c", "inh", kT0 + 100 * kSecond), 404);
  EXPECT_EQ(status_of(*machine, "c", "never", kNow * 2), 200);
  EXPECT_EQ(status_of(*machine, "off", "plain", kNow * 2), 200);
  EXPECT_EQ(ts_of(*machine, "inh", kNow), "1700000000");
  EXPECT_TRUE(machine->reader().member_addresses().empty());
  // The directory opens as a node of a new cluster at the backup's index.
  const uint64_t index = summary_.header.applied_index;
  machine.reset();
  ReplicaOptions options;
  options.data_dir = restore_dir_.path() + "/preserve";
  options.raft.self = NodeId(1);
  options.bootstrap.voters = {NodeId(1)};
  Result<std::unique_ptr<Replica>> replica = Replica::open(options);
  ASSERT_TRUE(replica.is_ok()) << replica.status().to_string();
  EXPECT_EQ((*replica)->state().applied().index.value(), index);
  EXPECT_EQ((*replica)->log().snapshot_metadata().index.value(), index);
  EXPECT_EQ((*replica)->log().first_index().value(), index + 1);
}

TEST_F(BackupTest, PauseTurnsTtlOffAndReportsThePreviousDefault) {
  RestoreFigures figures;
  std::unique_ptr<StateMachine> machine = restore(RestoreTtlMode::kPause, &figures);
  ASSERT_TRUE(machine);
  EXPECT_EQ(figures.dropped_items, 1u);
  EXPECT_EQ(figures.expire_at_once_items, 0u);
  EXPECT_EQ(figures.live_items, 4u);
  ASSERT_EQ(figures.paused.size(), 1u);  // db/off had TTL off already
  EXPECT_EQ(figures.paused[0].container, "c");
  EXPECT_EQ(figures.paused[0].previous_default_ttl, "100");
  EXPECT_NE(figures.to_json().find("\"previousDefaultTtl\":100"), std::string::npos);
  EXPECT_FALSE(machine->reader().container_record("db", "c")->ttl.policy.is_on());
  EXPECT_FALSE(has_item_key(*machine, "dead"));
  EXPECT_EQ(status_of(*machine, "c", "dead", kNow), 404);
  for (const char* id : {"inh", "short", "never"}) EXPECT_EQ(status_of(*machine, "c", id, kNow * 2), 200) << id;
  EXPECT_EQ(ts_of(*machine, "short", kNow), "1700000001");  // _ts kept
}

TEST_F(BackupTest, RebaseKeepsEachItemsRemainingLifetime) {
  RestoreFigures figures;
  std::unique_ptr<StateMachine> machine = restore(RestoreTtlMode::kRebase, &figures);
  ASSERT_TRUE(machine);
  EXPECT_EQ(figures.shift_seconds, 30);
  EXPECT_EQ(figures.dropped_items, 1u);
  EXPECT_EQ(figures.expire_at_once_items, 0u);
  EXPECT_EQ(figures.live_items, 4u);
  EXPECT_EQ(machine->applied().ts_micros, kBackupTs + 30 * kSecond);
  EXPECT_FALSE(has_item_key(*machine, "dead"));
  EXPECT_EQ(status_of(*machine, "c", "dead", kT0 + kSecond), 404);
  // short had 11 s left at B: it expires 11 s after now; inh had 50 s left.
  EXPECT_EQ(status_of(*machine, "c", "short", kNow + 11 * kSecond - 1), 200);
  EXPECT_EQ(status_of(*machine, "c", "short", kNow + 11 * kSecond), 404);
  EXPECT_EQ(status_of(*machine, "c", "inh", kNow + 50 * kSecond - 1), 200);
  EXPECT_EQ(status_of(*machine, "c", "inh", kNow + 50 * kSecond), 404);
  EXPECT_EQ(status_of(*machine, "c", "never", kNow * 2), 200);
  EXPECT_EQ(ts_of(*machine, "short", kNow), "1700000031");
  // The expiry indexes moved with the items: the collector finds exactly the expired ones at their new instants.
  Result<std::optional<int64_t>> next = machine->expiry().next_expiry_after(kNow);
  ASSERT_TRUE(next.is_ok()) << next.status().to_string();
  EXPECT_EQ(next->value_or(0), kT0 + 91 * kSecond);
}

TEST_F(BackupTest, DryRunCountsEveryModeAndChangesNothing) {
  Result<std::vector<RestoreFigures>> dry = dry_run_restore(backup_path_, restore_dir_.path(), kNow);
  ASSERT_TRUE(dry.is_ok()) << dry.status().to_string();
  ASSERT_EQ(dry->size(), 3u);
  for (RestoreTtlMode mode : {RestoreTtlMode::kPreserve, RestoreTtlMode::kPause, RestoreTtlMode::kRebase}) {
    const RestoreFigures& counted = (*dry)[static_cast<size_t>(mode)];
    RestoreFigures real;
    ASSERT_TRUE(restore(mode, &real));
    EXPECT_EQ(counted.to_json(), real.to_json()) << restore_ttl_mode_name(mode);
  }
  EXPECT_EQ(std::filesystem::file_size(backup_path_), summary_.file_bytes);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(restore_dir_.path()), {}), 3);  // scratch removed
}

TEST_F(BackupTest, RefusesANonEmptyDataDirectory) {
  const std::string data = restore_dir_.path() + "/used";
  std::filesystem::create_directories(data);
  write_all(data + "/something", "x");
  Result<RestoreFigures> restored = restore_into_data_dir(backup_path_, data, replication::Membership{{NodeId(1)}, {}},
                                                          RestoreTtlMode::kPreserve, kNow);
  ASSERT_FALSE(restored.is_ok());
  EXPECT_NE(restored.status().message().find("not empty"), std::string::npos);
  EXPECT_EQ(read_all(data + "/something"), "x");
}

// ---- the bounded restore ----------------------------------------------------------------------------------------

using KeyValues = std::map<std::string, std::string>;

// Entries of `dir` whose name has ".restoring-" in it (a staging directory left behind).
std::vector<std::string> staging_leftovers(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().filename().string().find(".restoring-") != std::string::npos) out.push_back(entry.path());
  }
  return out;
}

// A larger backup: db/c (defaultTtl 100) gets an item every second from T0 to T0+44 s — own ttl 10 (most expired at
// B), inheriting, own ttl 40 or -1 — so rebase's 30 s shift moves items onto the write times of others (the time
// component of their index keys); db/off (TTL off) one item in five seconds. Each item is padded to ~300 bytes and a
// batch is kBatch bytes, so a restore writes many batches, in every pass.
class BoundedRestoreTest : public StoreFixture {
 protected:
  static constexpr size_t kBatch = 256;
  static constexpr int kItems = 45;

  void SetUp() override {
    StoreFixture::SetUp();
    ASSERT_NO_FATAL_FAILURE(make_container("100"));
    ASSERT_EQ(apply(create_container_command("db", "off", "/pk"), kT0).http_status(), 201);
    const std::string pad = ",\"pad\":\"" + std::string(250, 'x') + "\"";
    for (int k = 0; k < kItems; ++k) {
      const std::string ttl = k % 3 == 0 ? ",\"ttl\":10" : k % 3 == 1 ? "" : k % 2 == 0 ? ",\"ttl\":40" : ",\"ttl\":-1";
      write("c", "{\"id\":\"c" + std::to_string(k) + "\",\"pk\":\"p" + std::to_string(k % 4) + "\"" + ttl + pad + "}",
            kT0 + k * kSecond);
      if (k % 5 == 0) {
        write("off", "{\"id\":\"o" + std::to_string(k) + "\",\"pk\":\"p\",\"ttl\":5" + pad + "}",
              kT0 + k * kSecond + 1);
      }
    }
    ASSERT_EQ(apply(Command{}, kBackupTs).http_status(), 200);
    backup_path_ = dir_.path() + "/big.mfb";
    std::unique_ptr<StateMachine::View> view = store_->open_view();
    Result<BackupSummary> written = write_backup_file(*view, 7, kNow, backup_path_, 100);
    ASSERT_TRUE(written.is_ok()) << written.status().to_string();
    summary_ = *written;
  }

  void write(const std::string& container, const std::string& body, int64_t ts) {
    OpResult result = apply(item_command(CommandType::kUpsertItem, "db", container, body), ts);
    ASSERT_EQ(result.http_status(), 201) << result.message;
  }

  // Small batches and pieces; counts the progress reports of each step.
  RestoreOptions small_batches() {
    RestoreOptions options;
    options.batch_bytes = kBatch;
    options.piece_bytes = 512;
    options.progress = [this](const RestoreProgress& progress) {
      reports_[progress.step] += 1;
      return Status::ok();
    };
    return options;
  }

  replication::Membership membership() const { return replication::Membership{{NodeId(1)}, {}}; }

  // What restoring the source in `mode` must leave, derived from the source's own items and the definitions rather
  // than from the transformation: the items alive at B (rebase: `_ts` + S), each with its `_ts` index key and its
  // expiry index entry — the 04, 05, 06 and 09 keys with their values — and each container's items and bytes.
  KeyValues expected_items(RestoreTtlMode mode, int64_t shift, std::map<uint64_t, LocalStats>& stats) {
    KeyValues out;
    Result<std::vector<ContainerInfo>> containers = store_->reader().containers();
    EXPECT_TRUE(containers.is_ok());
    for (const ContainerInfo& info : *containers) {
      const uint64_t crid = info.record.crid;
      const std::string prefix = item_prefix(crid);
      std::unique_ptr<leveldb::Iterator> it(store_->leveldb()->NewIterator(leveldb::ReadOptions()));
      for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
        const std::string key = it->key().ToString();
        Result<ItemRecord> record = decode_item(internal::view(it->value()));
        std::string pk, id;
        EXPECT_TRUE(record.is_ok() && decode_item_key(key, pk, id).is_ok());
        if (!ttl::alive(record->ttl, record->write_ts_micros, info.record.ttl, kBackupTs)) continue;
        std::string value = it->value().ToString();
        if (mode == RestoreTtlMode::kRebase) {
          record->write_ts_micros += shift;
          value = encode_item(*record);
        }
        out[key] = value;
        out[ts_index_key(crid, record->write_ts_micros, pk, id)] = "";
        const internal::IndexEntry entry = internal::index_entry_for(crid, pk, id, *record);
        if (entry.kind != internal::IndexKind::kNone) out[entry.key] = internal::index_value(key.size() + value.size());
        stats[crid].items += 1;
        stats[crid].bytes += static_cast<int64_t>(key.size() + value.size());
      }
    }
    return out;
  }

  static KeyValues item_keys(const StateMachine& machine) {
    KeyValues out;
    auto dump = machine.dump(false);
    EXPECT_TRUE(dump.is_ok());
    for (const auto& [key, value] : *dump) {
      const auto tag = static_cast<KeyTag>(key[0]);
      if (tag == KeyTag::kItem || tag == KeyTag::kOwnExpiryIndex || tag == KeyTag::kInheritExpiryIndex ||
          tag == KeyTag::kTsIndex) {
        out[key] = value;
      }
    }
    return out;
  }

  static std::map<uint64_t, LocalStats> stored_stats(const StateMachine& machine) {
    std::map<uint64_t, LocalStats> out;
    auto dump = machine.dump(true);
    EXPECT_TRUE(dump.is_ok());
    for (const auto& [key, value] : *dump) {
      if (static_cast<KeyTag>(key[0]) != KeyTag::kLocalStats) continue;
      codec::Reader reader(std::string_view(key).substr(1));
      uint64_t crid = 0;
      EXPECT_TRUE(reader.get_u64_be(crid));
      Result<LocalStats> stats = decode_local_stats(value);
      EXPECT_TRUE(stats.is_ok());
      out[crid] = *stats;
    }
    return out;
  }

  static std::unique_ptr<StateMachine> open_machine(const std::string& data) {
    StoreOptions options;
    options.path = data + "/db";
    Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
    EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
    return opened.is_ok() ? std::move(opened).value() : nullptr;
  }

  std::string backup_path_;
  BackupSummary summary_;
  TempDir restore_dir_;
  std::map<RestoreProgress::Step, int> reports_;
};

TEST_F(BoundedRestoreTest, EveryModeInSmallBatchesRestoresItemForItemWhatTheSourceHeld) {
  Result<std::vector<RestoreFigures>> dry = dry_run_restore(backup_path_, restore_dir_.path(), kNow, small_batches());
  ASSERT_TRUE(dry.is_ok()) << dry.status().to_string();
  for (RestoreTtlMode mode : {RestoreTtlMode::kPreserve, RestoreTtlMode::kPause, RestoreTtlMode::kRebase}) {
    SCOPED_TRACE(restore_ttl_mode_name(mode));
    reports_.clear();
    const std::string data = restore_dir_.path() + "/" + restore_ttl_mode_name(mode);
    Result<RestoreFigures> figures = restore_into_data_dir(backup_path_, data, membership(), mode, kNow, small_batches());
    ASSERT_TRUE(figures.is_ok()) << figures.status().to_string();
    // Many pieces and batches, each reported.
    EXPECT_GE(reports_[RestoreProgress::Step::kInstall], 10);
    EXPECT_GE(reports_[RestoreProgress::Step::kTransform], 3);
    EXPECT_EQ(reports_[RestoreProgress::Step::kRecord], 1);
    if (mode == RestoreTtlMode::kRebase) {
      EXPECT_GE(reports_[RestoreProgress::Step::kRebase], 10);
    }
    EXPECT_EQ(figures->to_json(), (*dry)[static_cast<size_t>(mode)].to_json()) << "the dry run counts the same";
    const int64_t shift = figures->shift_seconds * kSecond;
    EXPECT_EQ(shift, mode == RestoreTtlMode::kRebase ? 30 * kSecond : 0);

    std::map<uint64_t, LocalStats> want_stats;
    const KeyValues want = expected_items(mode, shift, want_stats);
    std::unique_ptr<StateMachine> machine = open_machine(data);
    ASSERT_TRUE(machine);
    const KeyValues got = item_keys(*machine);
    EXPECT_EQ(got.size(), want.size());
    for (const auto& [key, value] : want) {
      auto found = got.find(key);
      EXPECT_TRUE(found != got.end() && found->second == value) << "key " << internal::view(leveldb::Slice(key));
    }
    for (const auto& [key, value] : got) EXPECT_TRUE(want.count(key)) << "stray key (an old index entry?)";
    uint64_t items = 0;
    for (const auto& [crid, stats] : want_stats) items += static_cast<uint64_t>(stats.items);
    EXPECT_EQ(items, figures->live_items + figures->expire_at_once_items);
    EXPECT_EQ(summary_.items - items, figures->dropped_items);
    // The node-local figures were recomputed for the restored items (stale ones would count the dropped items).
    const std::map<uint64_t, LocalStats> stats = stored_stats(*machine);
    ASSERT_EQ(stats.size(), want_stats.size());
    for (const auto& [crid, local] : want_stats) {
      EXPECT_EQ(stats.at(crid).items, local.items) << crid;
      EXPECT_EQ(stats.at(crid).bytes, local.bytes) << crid;
    }
    EXPECT_EQ(machine->applied().index.value(), summary_.header.applied_index);
    EXPECT_EQ(machine->applied().ts_micros, kBackupTs + shift);
    if (mode == RestoreTtlMode::kRebase) {
      // The shift moved items onto other items' old write times (c1 now has the `_ts` c31 had), and the key sets
      // above say each item has exactly its own new entries and none of the old ones.
      auto ts_seconds = [](const OpResult& read) {
        const size_t at = read.body.find("\"_ts\":");
        return at == std::string::npos ? std::string() : read.body.substr(at + 6, 10);
      };
      EXPECT_EQ(ts_seconds(store_->reader().read_item("db", "c", "\"p3\"", "c31", kBackupTs)), "1700000031");
      EXPECT_EQ(ts_seconds(machine->reader().read_item("db", "c", "\"p1\"", "c1", kNow)), "1700000031");
      EXPECT_EQ(ts_seconds(machine->reader().read_item("db", "c", "\"p3\"", "c31", kNow)), "1700000061");
    }
  }
  EXPECT_TRUE(staging_leftovers(restore_dir_.path()).empty());
}

// The restored directory opens as a node whose log starts at a checkpoint (no snapshot file), and a member that joins
// gets a snapshot its leader produces from the restored state, then the same state.
TEST_F(BoundedRestoreTest, TheRestoredDirectoryStartsAtACheckpointAndItsLeaderServesAJoiningFollower) {
  const std::string data = restore_dir_.path() + "/node1";
  Result<RestoreFigures> figures =
      restore_into_data_dir(backup_path_, data, membership(), RestoreTtlMode::kRebase, kNow, small_batches());
  ASSERT_TRUE(figures.is_ok()) << figures.status().to_string();
  EXPECT_TRUE(std::filesystem::is_empty(data + "/snapshots")) << "a checkpoint, no snapshot file";
  const uint64_t index = summary_.header.applied_index;

  auto options_for = [](NodeId id, const std::string& dir) {
    ReplicaOptions options;
    options.data_dir = dir;
    options.raft.self = id;
    options.raft.election_timeout_ticks = 10;
    options.raft.heartbeat_interval_ticks = 2;
    options.raft.snapshot_chunk_bytes = 4096;
    options.seed = 7 + id.value();
    options.block_cache_bytes = 1 << 20;
    options.install_batch_bytes = 2 << 10;
    return options;
  };
  ReplicaOptions leader_options = options_for(NodeId(1), data);
  leader_options.bootstrap.voters = {NodeId(1)};  // (ignored: the log is not fresh)
  Result<std::unique_ptr<Replica>> opened = Replica::open(leader_options);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  std::unique_ptr<Replica> leader = std::move(opened).value();
  EXPECT_EQ(leader->state().applied().index.value(), index);
  EXPECT_EQ(leader->state().applied().ts_micros, kBackupTs + 30 * kSecond);
  const replication::SnapshotMetadata checkpoint = leader->log().snapshot_metadata();
  EXPECT_EQ(checkpoint.index.value(), index);
  EXPECT_EQ(checkpoint.term, Term(1));
  EXPECT_EQ(checkpoint.size_bytes, 0u);
  EXPECT_EQ(checkpoint.membership, membership());
  EXPECT_FALSE(leader->log().snapshot_data_ready()) << "a checkpoint: data is produced when a follower needs it";
  EXPECT_EQ(leader->log().hard_state(), (replication::HardState{Term(1), NodeId(0), LogIndex(index)}));
  EXPECT_EQ(leader->log().first_index().value(), index + 1);

  TempDir follower_dir;
  opened = Replica::open(options_for(NodeId(2), follower_dir.path() + "/node2"));
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  std::unique_ptr<Replica> follower = std::move(opened).value();
  int64_t now = kNow;
  auto round = [&]() {
    now += 10'000;
    leader->tick(now);
    follower->tick(now);
    for (int hop = 0; hop < 1000; ++hop) {
      std::vector<replication::Message> queue;
      for (Replica* r : {leader.get(), follower.get()}) {
        Result<ReplicaOutput> output = r->process_ready();
        ASSERT_TRUE(output.is_ok()) << output.status().to_string();
        for (replication::Message& m : output->messages) queue.push_back(std::move(m));
      }
      if (queue.empty()) return;
      for (const replication::Message& m : queue) (void)(m.to == NodeId(1) ? leader : follower)->step(m);
    }
    FAIL() << "messages did not settle";
  };
  for (int i = 0; i < 100 && leader->core().role() != replication::Role::kLeader; ++i) ASSERT_NO_FATAL_FAILURE(round());
  ASSERT_EQ(leader->core().role(), replication::Role::kLeader);
  ASSERT_TRUE(leader->propose_config_change({replication::ConfigChangeType::kAddLearner, NodeId(2)}).is_ok());
  for (int i = 0; i < 300 && follower->state().applied().index != leader->state().applied().index; ++i) {
    ASSERT_NO_FATAL_FAILURE(round());
  }
  ASSERT_EQ(follower->state().applied().index, leader->state().applied().index);
  EXPECT_GE(leader->snapshots_produced(), 1u) << "the joining member needed the restored state as a snapshot";
  EXPECT_GE(follower->log().snapshot_metadata().index.value(), index);
  auto leader_dump = leader->state().dump(false);
  auto follower_dump = follower->state().dump(false);
  ASSERT_TRUE(leader_dump.is_ok() && follower_dump.is_ok());
  EXPECT_EQ(*follower_dump, *leader_dump);
  EXPECT_EQ(follower->state().reader().read_item("db", "c", "\"p1\"", "c1", kNow).http_status(), 200);
}

// A failure at any step — injected through the progress hook — returns the error and leaves data_dir as it was
// (absent, or empty) with no staging directory, beside it or inside it; the next restore into it works.
TEST_F(BoundedRestoreTest, AFailureAtAnyStepLeavesNeitherDataDirectoryNorStagingDirectory) {
  int case_number = 0;
  for (const bool inside : {false, true}) {
    for (const bool existing : {false, true}) {
      for (RestoreProgress::Step step : {RestoreProgress::Step::kInstall, RestoreProgress::Step::kTransform,
                                         RestoreProgress::Step::kRebase, RestoreProgress::Step::kRecord}) {
        SCOPED_TRACE(restore_step_name(step) + (existing ? " into an empty directory" : " into an absent one") +
                     (inside ? ", staged inside" : ""));
        const std::string data = restore_dir_.path() + "/fail" + std::to_string(case_number++);
        if (existing) std::filesystem::create_directories(data);
        RestoreOptions options = small_batches();
        options.stage_inside_data_dir = inside;
        int seen = 0;
        options.progress = [&](const RestoreProgress& progress) {
          // The step's second report: part of it is written.
          if (progress.step == step && ++seen == (step == RestoreProgress::Step::kRecord ? 1 : 2)) {
            return Status::io_error("injected failure");
          }
          return Status::ok();
        };
        Result<RestoreFigures> restored =
            restore_into_data_dir(backup_path_, data, membership(), RestoreTtlMode::kRebase, kNow, options);
        ASSERT_FALSE(restored.is_ok());
        EXPECT_NE(restored.status().message().find("injected failure"), std::string::npos)
            << restored.status().to_string();
        if (existing || inside) {  // (staged inside: data_dir is made for the staging directory)
          EXPECT_TRUE(std::filesystem::is_directory(data) && std::filesystem::is_empty(data));
        } else {
          EXPECT_FALSE(std::filesystem::exists(data));
        }
        EXPECT_EQ(staging_leftovers(restore_dir_.path()), std::vector<std::string>{});
      }
    }
  }
  // The same directory, restored for real afterwards (staged beside it, and inside it).
  for (const bool inside : {false, true}) {
    RestoreOptions options = small_batches();
    options.stage_inside_data_dir = inside;
    const std::string data = restore_dir_.path() + (inside ? "/fail4" : "/fail0");
    Result<RestoreFigures> restored =
        restore_into_data_dir(backup_path_, data, membership(), RestoreTtlMode::kPreserve, kNow, options);
    ASSERT_TRUE(restored.is_ok()) << restored.status().to_string();
    std::unique_ptr<StateMachine> machine = open_machine(data);
    ASSERT_TRUE(machine);
    EXPECT_EQ(machine->applied().index.value(), summary_.header.applied_index);
    EXPECT_EQ(staging_leftovers(restore_dir_.path()), std::vector<std::string>{});
  }
}

// A staging directory that a crash left behind (beside data_dir, or inside an otherwise empty one) does not make a
// restore refuse the directory, and goes; a partial move of a restore staged inside data_dir (its log moved, not yet
// its state) is refused by a node, not started as a node.
TEST_F(BoundedRestoreTest, WhatACrashLeavesIsRemovedByTheNextRestoreOrRefusedByANode) {
  const std::string beside = restore_dir_.path() + "/beside";
  std::filesystem::create_directories(beside + ".restoring-abc123/db");
  write_all(beside + ".restoring-abc123/db/CURRENT", "half a restore");
  const std::string inside = restore_dir_.path() + "/inside";
  std::filesystem::create_directories(inside + "/.restoring-xyz789/wal");
  for (const std::string& data : {beside, inside}) {
    RestoreOptions options = small_batches();
    options.stage_inside_data_dir = data == inside;
    Result<RestoreFigures> restored =
        restore_into_data_dir(backup_path_, data, membership(), RestoreTtlMode::kPreserve, kNow, options);
    ASSERT_TRUE(restored.is_ok()) << restored.status().to_string();
  }
  EXPECT_EQ(staging_leftovers(restore_dir_.path()), std::vector<std::string>{});
  // A crash between moving `wal/` and `db/` up (staged inside): the log's checkpoint is ahead of an empty state.
  std::filesystem::remove_all(inside + "/db");
  ReplicaOptions options;
  options.data_dir = inside;
  options.raft.self = NodeId(1);
  options.bootstrap.voters = {NodeId(1)};
  Result<std::unique_ptr<Replica>> opened = Replica::open(options);
  ASSERT_FALSE(opened.is_ok()) << "a half-moved restore started as a node";
  EXPECT_EQ(opened.status().code(), StatusCode::kCorruption) << opened.status().to_string();
}

// A backup checked intact and then changed while it is being installed: the install fails at the end of the body
// (the second hash), before its last write, and nothing is left.
TEST_F(BoundedRestoreTest, ABackupChangedAfterItsCheckIsRefusedBeforeTheInstallEnds) {
  const std::string data = restore_dir_.path() + "/changed";
  const std::string original = read_all(backup_path_);
  // A byte of padding near the end of the body: still decodable, so only the checksum can tell.
  const size_t at = original.rfind(std::string(16, 'x'), original.size() - kBackupTrailerBytes);
  ASSERT_NE(at, std::string::npos);
  ASSERT_GT(at, original.size() / 2);
  RestoreOptions options = small_batches();
  bool changed = false;
  options.progress = [&](const RestoreProgress& progress) {
    if (progress.step == RestoreProgress::Step::kInstall && !changed) {
      std::fstream file(backup_path_, std::ios::in | std::ios::out | std::ios::binary);
      file.seekp(static_cast<std::streamoff>(at));
      file.put('y');
      changed = true;
    }
    return Status::ok();
  };
  Result<RestoreFigures> restored =
      restore_into_data_dir(backup_path_, data, membership(), RestoreTtlMode::kPreserve, kNow, options);
  ASSERT_TRUE(changed);
  ASSERT_FALSE(restored.is_ok());
  EXPECT_EQ(restored.status().code(), StatusCode::kCorruption) << restored.status().to_string();
  EXPECT_NE(restored.status().message().find("changed while it was being restored"), std::string::npos)
      << restored.status().to_string();
  EXPECT_FALSE(std::filesystem::exists(data));
  EXPECT_EQ(staging_leftovers(restore_dir_.path()), std::vector<std::string>{});
}

}  // namespace
}  // namespace mayfly::storage::testing
