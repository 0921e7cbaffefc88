// Online backup files (storage/backup_file.h) and restore transformations (storage/restore.h) on real LevelDB state
// machines: the file round trip, refusal of truncated and corrupted files, and what each TTL mode does.
#include <filesystem>
#include <fstream>

#include "replication/types.h"
#include "storage/backup_file.h"
#include "storage/replica.h"
#include "storage/restore.h"
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

}  // namespace
}  // namespace mayfly::storage::testing
