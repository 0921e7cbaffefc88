// Installing a Raft snapshot streamed, in bounded batches, crash-safe (issue #31; StateMachine::install_snapshot):
//   - a snapshot fed in pieces of any size (1 byte, 7 bytes, a few KB) and written in batches of any size gives
//     exactly the store one piece gives, and the exporting store's replicated keys;
//   - an install stopped after any batch (a test hook standing in for the process dying) leaves a store that answers
//     every read with Unavailable, does not claim the snapshot's index, and is made whole by installing again — by
//     hand, and by Replica::open from the raft log's snapshot file, even when the applied index looks current;
//   - on the simulator's FaultEnv, a crash keeps only synced bytes: the marker and the last write are synced; a crash
//     after any batch reopens with the marker (and no claim to the snapshot's index) or as the snapshot, never a mix;
//   - readers on other threads see the old state, the new one, or Unavailable — never a mix;
//   - truncated, garbage and ill-formed snapshots are Corruption, never a crash, and change nothing when refused
//     before the first write.
// Real LevelDB (on disk, or on FaultEnv's memory); deterministic (the content seed is printed).
#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/codec.h"
#include "common/prng.h"
#include "storage/replica.h"
#include "tests/sim/fault_env.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

using Dump = std::vector<std::pair<std::string, std::string>>;

constexpr uint64_t kContentSeed = 3107;

Dump dump_of(const StateMachine& store, bool include_local) {
  Result<Dump> dumped = store.dump(include_local);
  EXPECT_TRUE(dumped.is_ok()) << dumped.status().to_string();
  return dumped.is_ok() ? std::move(dumped).value() : Dump{};
}

std::unique_ptr<StateMachine> open_store(const std::string& path, leveldb::Env* env = nullptr,
                                         size_t install_batch_bytes = 4 << 20,
                                         std::function<Status(int)> after_install_batch = nullptr) {
  StoreOptions options;
  options.path = path;
  options.env = env;
  options.sync_applies = env != nullptr;  // on FaultEnv, what a test sets up must survive its crashes
  options.install_batch_bytes = install_batch_bytes;
  options.after_install_batch = std::move(after_install_batch);
  Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
  return opened.is_ok() ? std::move(opened).value() : nullptr;
}

// Applies `command` at the store's next index; the answer's HTTP status.
int apply_next(StateMachine& store, const Command& command, int64_t ts) {
  Result<OpResult> result = store.apply(command, LogIndex(store.applied().index.value() + 1), ts);
  EXPECT_TRUE(result.is_ok()) << result.status().to_string();
  return result.is_ok() ? result->http_status() : 0;
}

// A store with some of everything a snapshot carries: two databases, containers with and without TTL, one with its
// change feed on, items with their own ttl, inherited and none (sizes up to a few KB, so records straddle any
// piece), replaces, deletes, a dropped container, the exactly-once table and the address book.
void fill_source(StateMachine& store) {
  std::printf("snapshot content seed %llu\n", static_cast<unsigned long long>(kContentSeed));
  Prng prng(kContentSeed);
  int64_t ts = kT0;
  ASSERT_EQ(apply_next(store, database_command(CommandType::kCreateDatabase, "db"), ts), 201);
  ASSERT_EQ(apply_next(store, database_command(CommandType::kCreateDatabase, "other"), ts), 201);
  Command feed = create_container_command("db", "c", "/pk", "3600");
  feed.change_feed = ChangeFeedSettings{true, 3600, 0};
  ASSERT_EQ(apply_next(store, feed, ts), 201);
  ASSERT_EQ(apply_next(store, create_container_command("db", "plain", "/pk"), ts), 201);
  ASSERT_EQ(apply_next(store, create_container_command("other", "gone", "/pk", "60"), ts), 201);
  Command address;
  address.type = CommandType::kSetMemberAddress;
  address.id = "3";
  address.body = "node3.example:7100";
  ASSERT_EQ(apply_next(store, address, ts), 200);
  for (int i = 0; i < 240; ++i) {
    ts += 1000;
    const char* container = i % 3 == 0 ? "plain" : (i % 3 == 1 ? "c" : "gone");
    const std::string database = i % 3 == 2 ? "other" : "db";
    const std::string id = "item" + std::to_string(prng.uniform(60));
    const std::string ttl = prng.chance(1, 3) ? ",\"ttl\":" + std::to_string(prng.range(1, 100000)) : "";
    const std::string body = "{\"id\":\"" + id + "\",\"pk\":\"p" + std::to_string(prng.uniform(4)) + "\"" + ttl +
                             ",\"pad\":\"" + std::string(prng.uniform(3000), 'x') + "\"}";
    Command command;
    if (prng.chance(1, 6)) {
      command = target_command(CommandType::kDeleteItem, database, container, "\"p0\"", id);
    } else {
      command = item_command(CommandType::kUpsertItem, database, container, body);
    }
    if (prng.chance(1, 4)) {
      const uint64_t sequence = 1 + static_cast<uint64_t>(i);  // rising for every client
      command.write_id = WriteId{1 + prng.uniform(3), sequence, sequence};
    }
    const int status = apply_next(store, command, ts);
    ASSERT_TRUE(status == 200 || status == 201 || status == 204 || status == 404 || status == 400) << status;
  }
  Command drop;
  drop.type = CommandType::kDeleteContainer;
  drop.database = "other";
  drop.container = "gone";
  ASSERT_EQ(apply_next(store, drop, ts + 1000), 204);
  ASSERT_EQ(apply_next(store, Command{}, ts + 2 * kSecond), 200);  // a time entry
}

// What a receiving node had before: a different database, items, node-local stats of a container id the snapshot
// also uses — all of it must go.
void fill_old_state(StateMachine& store) {
  ASSERT_EQ(apply_next(store, database_command(CommandType::kCreateDatabase, "old"), kT0), 201);
  ASSERT_EQ(apply_next(store, create_container_command("old", "c", "/pk", "10"), kT0), 201);
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(apply_next(store, item_command(CommandType::kCreateItem, "old", "c",
                                             "{\"id\":\"o" + std::to_string(i) + "\",\"pk\":\"q\"}"),
                         kT0 + i),
              201);
  }
}

// A source handing out `piece` bytes per call, whatever the decoder asks for.
StateMachine::SnapshotSource pieces_of(const std::string& blob, size_t piece) {
  auto offset = std::make_shared<size_t>(0);
  return [&blob, piece, offset](size_t) -> Result<std::string> {
    const std::string out = blob.substr(*offset, piece);
    *offset += out.size();
    return out;
  };
}

// Every read other threads make answers Unavailable (503).
void expect_reads_unavailable(const StateMachine& store, const std::string& when) {
  SCOPED_TRACE(when);
  const StoreReader& reader = store.reader();
  const int64_t now = kT0 + 10 * kSecond;
  EXPECT_EQ(reader.read_item("db", "c", "\"p1\"", "item1", now).http_status(), 503);
  ListRequest list;
  list.database = "db";
  list.container = "c";
  EXPECT_EQ(reader.list_items(list, now).http_status(), 503);
  EXPECT_EQ(reader.read_database("db").http_status(), 503);
  EXPECT_EQ(reader.list_databases().http_status(), 503);
  const OpResult databases = reader.list_databases();
  EXPECT_NE(databases.message.find("installing a snapshot"), std::string::npos) << databases.message;
  EXPECT_EQ(reader.read_container("db", "c").http_status(), 503);
  EXPECT_EQ(reader.list_containers("db").http_status(), 503);
  EXPECT_FALSE(reader.container_record("db", "c").has_value());
  EXPECT_EQ(reader.container_list().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(reader.containers().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(reader.open_item_reader("db", "c").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(reader.dedup_totals().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(reader.expiring_soon({kSecond}).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(reader.forecast_expiry("db", "c", 100).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(reader.preview_default_ttl("db", "c", ttl::DefaultTtl::off()).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(reader.member_addresses().empty());
  ChangeFeedRequest feed;
  feed.database = "db";
  feed.container = "c";
  EXPECT_EQ(store.change_feed().read(feed).status().code(), StatusCode::kUnavailable);
}

// The applied index the store's LevelDB holds now (0 when its meta key is gone).
uint64_t stored_applied_index(StateMachine& store) {
  std::string bytes;
  leveldb::Status got = store.leveldb()->Get(leveldb::ReadOptions(), meta_key(), &bytes);
  if (got.IsNotFound()) return 0;
  EXPECT_TRUE(got.ok()) << got.ToString();
  Result<MetaState> meta = decode_meta(bytes);
  EXPECT_TRUE(meta.is_ok());
  return meta.is_ok() ? meta->applied_index : 0;
}

class SnapshotInstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = open_store(source_dir_.path() + "/db");
    ASSERT_NE(source_, nullptr);
    ASSERT_NO_FATAL_FAILURE(fill_source(*source_));
    Result<std::string> blob = source_->export_snapshot();
    ASSERT_TRUE(blob.is_ok()) << blob.status().to_string();
    blob_ = std::move(blob).value();
    index_ = source_->applied().index;
    // The reference: the whole blob in one piece into an empty store.
    std::unique_ptr<StateMachine> reference = open_store(reference_dir_.path() + "/db");
    ASSERT_TRUE(reference->install_snapshot(blob_).is_ok());
    reference_ = dump_of(*reference, true);
    ASSERT_EQ(dump_of(*reference, false), dump_of(*source_, false)) << "the snapshot is the source's replicated state";
    ASSERT_GT(blob_.size(), 100'000u);
  }

  // A receiving store with old state, opened with the given batch size and hook.
  std::unique_ptr<StateMachine> old_store(const std::string& path, size_t batch_bytes,
                                          std::function<Status(int)> hook = nullptr, leveldb::Env* env = nullptr) {
    std::unique_ptr<StateMachine> store = open_store(path, env, batch_bytes, std::move(hook));
    if (store != nullptr) fill_old_state(*store);
    return store;
  }

  // The store is exactly the snapshot's state, and works.
  void expect_installed(StateMachine& store) {
    EXPECT_FALSE(store.unfinished_install().has_value());
    EXPECT_EQ(store.applied().index, index_);
    EXPECT_EQ(dump_of(store, true), reference_);
    EXPECT_EQ(store.reader().read_database("old").http_status(), 404);
    EXPECT_EQ(store.reader().list_databases().body, "[\"db\",\"other\"]");
    ASSERT_EQ(apply_next(store, item_command(CommandType::kCreateItem, "db", "plain", R"({"id":"new","pk":"p"})"),
                         kT0 + 100 * kSecond),
              201);
    EXPECT_EQ(store.reader().read_item("db", "plain", "\"p\"", "new", kT0 + 100 * kSecond).http_status(), 200);
  }

  TempDir source_dir_, reference_dir_;
  std::unique_ptr<StateMachine> source_;
  std::string blob_;
  LogIndex index_;
  Dump reference_;
};

TEST_F(SnapshotInstallTest, PiecesOfAnySizeAndBatchesOfAnySizeInstallTheSameStore) {
  struct Case {
    size_t piece;
    size_t batch_bytes;
  };
  for (const Case c : {Case{1, 4 << 20}, Case{7, 1000}, Case{4096, 1}, Case{3001, 64 << 10}, Case{blob_.size(), 300}}) {
    SCOPED_TRACE("pieces of " + std::to_string(c.piece) + " bytes, batches of " + std::to_string(c.batch_bytes));
    TempDir dir;
    int batches = 0;
    std::unique_ptr<StateMachine> store = old_store(dir.path() + "/db", c.batch_bytes, [&](int batch) {
      EXPECT_EQ(batch, batches + 1);
      batches = batch;
      return Status::ok();
    });
    ASSERT_NE(store, nullptr);
    Status installed = store->install_snapshot(pieces_of(blob_, c.piece), index_);
    ASSERT_TRUE(installed.is_ok()) << installed.to_string();
    ASSERT_NO_FATAL_FAILURE(expect_installed(*store));
    if (c.batch_bytes <= 1000) {
      EXPECT_GT(batches, 100) << "small batches: many writes";
    }
    if (c.batch_bytes == 4 << 20) {
      EXPECT_EQ(batches, 1) << "the marker, then everything in the last write";
    }
  }
}

TEST_F(SnapshotInstallTest, AnInstallStoppedAfterAnyBatchIsUnreadableAndAnotherInstallMakesItWhole) {
  constexpr size_t kBatchBytes = 16 << 10;
  int batches = 0;  // how many batches come before the last one
  {
    TempDir dir;
    std::unique_ptr<StateMachine> counted = old_store(dir.path() + "/db", kBatchBytes, [&](int batch) {
      batches = batch;
      return Status::ok();
    });
    ASSERT_TRUE(counted->install_snapshot(blob_).is_ok());
  }
  ASSERT_GT(batches, 10);
  std::vector<int> stops = {1, 2, 3, batches / 2, batches - 1, batches};
  for (const int stop : stops) {
    SCOPED_TRACE("stopped after batch " + std::to_string(stop) + " of " + std::to_string(batches + 1));
    TempDir dir;
    const std::string path = dir.path() + "/db";
    {
      StateMachine* hooked = nullptr;
      std::unique_ptr<StateMachine> store = old_store(path, kBatchBytes, [&hooked, this, stop](int batch) -> Status {
        // Until the last write, the store does not hold the snapshot's applied state: the swap comes last.
        EXPECT_NE(stored_applied_index(*hooked), index_.value()) << "after batch " << batch;
        if (batch != stop) return Status::ok();
        expect_reads_unavailable(*hooked, "in the middle of the install");
        return Status::io_error("injected: the process dies after batch " + std::to_string(batch));
      });
      ASSERT_NE(store, nullptr);
      const LogIndex old_index = store->applied().index;
      ASSERT_EQ(store->reader().read_database("old").http_status(), 200);
      hooked = store.get();
      Status installed = store->install_snapshot(pieces_of(blob_, 5000), index_);
      ASSERT_EQ(installed.code(), StatusCode::kIoError) << installed.to_string();
      EXPECT_EQ(store->unfinished_install(), index_);
      EXPECT_EQ(store->applied().index, old_index) << "nothing published";
      expect_reads_unavailable(*store, "after the install stopped");
      EXPECT_FALSE(store->apply(Command{}, LogIndex(index_.value() + 1), kT0 + 50 * kSecond).is_ok())
          << "a half-installed store applies nothing";
      EXPECT_FALSE(store->install_snapshot(blob_).is_ok()) << "stopped, like after any failed write";
    }
    // The next open finds the marker: unreadable, not claiming the snapshot's index, until the install is redone.
    std::unique_ptr<StateMachine> reopened = open_store(path);
    ASSERT_NE(reopened, nullptr);
    EXPECT_EQ(reopened->unfinished_install(), index_);
    EXPECT_NE(reopened->applied().index, index_);
    EXPECT_NE(stored_applied_index(*reopened), index_.value());
    expect_reads_unavailable(*reopened, "reopened");
    Result<OpResult> refused = reopened->apply(Command{}, LogIndex(index_.value() + 1), kT0 + 50 * kSecond);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().to_string();
    Status other = reopened->install_snapshot(blob_, LogIndex(index_.value() + 1));
    EXPECT_EQ(other.code(), StatusCode::kCorruption) << "an index the snapshot does not have";
    EXPECT_EQ(reopened->unfinished_install(), index_) << "refused before writing: still waiting for the redo";
    Status redone = reopened->install_snapshot(pieces_of(blob_, 777), index_);
    ASSERT_TRUE(redone.is_ok()) << redone.to_string();
    ASSERT_NO_FATAL_FAILURE(expect_installed(*reopened));
    const Dump installed_and_written = dump_of(*reopened, true);
    reopened.reset();
    std::unique_ptr<StateMachine> again = open_store(path);
    EXPECT_FALSE(again->unfinished_install().has_value());
    EXPECT_EQ(dump_of(*again, true), installed_and_written);
  }
}

TEST_F(SnapshotInstallTest, OnFaultEnvACrashKeepsTheSyncedMarkerAndTheSyncedLastWrite) {
  constexpr size_t kBatchBytes = 32 << 10;
  for (const int stop : {1, 2, 7, 0}) {  // 0: no stop, the crash comes right after the install
    SCOPED_TRACE("crash after batch " + std::to_string(stop));
    sim::FaultEnv env;
    const std::string path = "/node/db";
    {
      std::unique_ptr<StateMachine> store = old_store(
          path, kBatchBytes,
          [stop](int batch) { return batch == stop ? Status::io_error("injected crash") : Status::ok(); }, &env);
      ASSERT_NE(store, nullptr);
      Status installed = store->install_snapshot(blob_, index_);
      EXPECT_EQ(installed.is_ok(), stop == 0) << installed.to_string();
    }
    std::unique_ptr<sim::FaultEnv> crashed = env.crash_copy();
    std::unique_ptr<StateMachine> reopened = open_store(path, crashed.get());
    ASSERT_NE(reopened, nullptr);
    if (stop == 0) {
      EXPECT_FALSE(reopened->unfinished_install().has_value());
      EXPECT_EQ(reopened->applied().index, index_) << "the last write was synced";
      EXPECT_EQ(dump_of(*reopened, true), reference_);
      continue;
    }
    EXPECT_EQ(reopened->unfinished_install(), index_) << "the marker was synced before the first delete";
    EXPECT_NE(reopened->applied().index, index_);
    expect_reads_unavailable(*reopened, "after the crash");
    ASSERT_TRUE(reopened->install_snapshot(blob_, index_).is_ok());
    ASSERT_NO_FATAL_FAILURE(expect_installed(*reopened));
  }
}

// A crash right after any batch of an install — the disk as it is at that moment, taken inside the install with the
// store open, as the simulator does — reopens as one of two stores and nothing else: the old state with the marker
// (unreadable, not claiming the snapshot's index; installing again makes it the snapshot) or, after the last write,
// exactly the snapshot. Never a mix: a store without the marker holds every key of the snapshot and no other.
TEST_F(SnapshotInstallTest, ACrashAfterAnyBatchReopensWithTheMarkerOrAsTheSnapshotNeverAMix) {
  constexpr size_t kBatchBytes = 8 << 10;
  int batches = 0;  // hooked: every write but the last
  {
    sim::FaultEnv env;
    std::unique_ptr<StateMachine> counted = old_store("/count/db", kBatchBytes, [&](int batch) {
      batches = batch;
      return Status::ok();
    }, &env);
    ASSERT_TRUE(counted->install_snapshot(blob_, index_).is_ok());
  }
  ASSERT_GT(batches, 10);
  for (int crash = 1; crash <= batches + 1; ++crash) {  // batches + 1: right after the last write
    SCOPED_TRACE("crash after batch " + std::to_string(crash) + " of " + std::to_string(batches + 1));
    sim::FaultEnv env;
    std::unique_ptr<sim::FaultEnv> image;
    {
      std::unique_ptr<StateMachine> store = old_store("/node/db", kBatchBytes, [&](int batch) -> Status {
        if (batch != crash) return Status::ok();
        image = env.crash_copy();
        return Status::io_error("injected: the machine dies after batch " + std::to_string(batch));
      }, &env);
      ASSERT_NE(store, nullptr);
      Status installed = store->install_snapshot(pieces_of(blob_, 3000), index_);
      ASSERT_EQ(installed.is_ok(), crash > batches) << installed.to_string();
      if (crash > batches) image = env.crash_copy();
    }
    ASSERT_NE(image, nullptr);
    std::unique_ptr<StateMachine> reopened = open_store("/node/db", image.get());
    ASSERT_NE(reopened, nullptr);
    if (!reopened->unfinished_install()) {
      EXPECT_GT(crash, batches) << "the marker is gone before the last write";
      EXPECT_EQ(reopened->applied().index, index_);
      EXPECT_EQ(dump_of(*reopened, true), reference_) << "no marker: the store must be the snapshot, whole";
      continue;
    }
    EXPECT_EQ(reopened->unfinished_install(), index_);
    EXPECT_NE(reopened->applied().index, index_);
    EXPECT_NE(stored_applied_index(*reopened), index_.value()) << "the applied state comes with the last write";
    expect_reads_unavailable(*reopened, "reopened after the crash");
    ASSERT_TRUE(reopened->install_snapshot(pieces_of(blob_, 4096), index_).is_ok());
    ASSERT_NO_FATAL_FAILURE(expect_installed(*reopened));
  }
}

TEST_F(SnapshotInstallTest, ReadersOnOtherThreadsSeeTheOldStateTheNewStateOrUnavailable) {
  TempDir dir;
  std::unique_ptr<StateMachine> store = old_store(dir.path() + "/db", 2048, [](int) {
    std::this_thread::yield();
    return Status::ok();
  });
  ASSERT_NE(store, nullptr);
  std::atomic<bool> done{false};
  std::atomic<int> old_seen{0}, new_seen{0}, unavailable{0}, mixed{0};
  std::string bad;
  std::thread reader([&] {
    while (!done.load()) {
      const OpResult databases = store->reader().list_databases();
      const OpResult old_item = store->reader().read_item("old", "c", "\"q\"", "o3", kT0 + kSecond);
      if (databases.http_status() == 503 || old_item.http_status() == 503) {
        unavailable += 1;
      } else if (databases.body == "[\"old\"]" && old_item.http_status() == 200) {
        old_seen += 1;
      } else if (databases.body == "[\"db\",\"other\"]" && old_item.http_status() == 404) {
        new_seen += 1;
      } else {
        mixed += 1;  // the two reads were two calls: a pair may straddle the end of the install, nothing else
        if (!(databases.body == "[\"old\"]" || databases.body == "[\"db\",\"other\"]")) bad = databases.body;
      }
    }
  });
  for (int i = 0; i < 5000 && old_seen.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Status installed = store->install_snapshot(pieces_of(blob_, 1000), index_);
  for (int i = 0; i < 200; ++i) (void)store->reader().list_databases();  // let the reader see the new state too
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  done = true;
  reader.join();
  ASSERT_TRUE(installed.is_ok()) << installed.to_string();
  EXPECT_EQ(bad, "") << "a list of databases from a half-installed state";
  EXPECT_GT(old_seen.load(), 0);
  EXPECT_LE(mixed.load(), 2);
  std::printf("reads: %d old, %d new, %d unavailable, %d straddling\n", old_seen.load(), new_seen.load(),
              unavailable.load(), mixed.load());
  ASSERT_NO_FATAL_FAILURE(expect_installed(*store));
}

// The byte offsets at which records of `blob` end (after the version byte).
std::vector<size_t> record_ends(const std::string& blob) {
  std::vector<size_t> ends;
  codec::Reader reader(std::string_view(blob).substr(1));
  std::string_view key, value;
  while (!reader.done()) {
    if (!reader.get_bytes(key) || !reader.get_bytes(value)) break;
    ends.push_back(blob.size() - reader.rest().size());
  }
  return ends;
}

TEST_F(SnapshotInstallTest, TruncatedGarbageAndIllFormedSnapshotsAreCorruption) {
  const std::vector<size_t> ends = record_ends(blob_);
  ASSERT_EQ(ends.back(), blob_.size());
  const size_t first_end = ends.front();  // the applied state's record
  std::string meta_record;
  codec::put_u8(meta_record, 1);
  meta_record += blob_.substr(1, first_end - 1);
  auto with_record = [&](std::string_view key, std::string_view value) {
    std::string out = meta_record;
    codec::put_bytes(out, key);
    codec::put_bytes(out, value);
    return out;
  };
  struct Bad {
    std::string name;
    std::string bytes;
    bool before_any_write;
  };
  std::vector<Bad> bad = {
      {"empty", "", true},
      {"garbage", "garbage", true},
      {"version only", std::string(1, '\x01'), true},
      {"version 2", std::string(1, '\x02') + blob_.substr(1), true},
      {"a first record that is not the applied state", [] {
         std::string out(1, '\x01');
         codec::put_bytes(out, database_key("x"));
         codec::put_bytes(out, "");
         return out;
       }(), true},
      {"the applied state cut short", blob_.substr(0, first_end - 1), true},
      {"a length of 2^42", meta_record + "\x80\x80\x80\x80\x80\x80\x01", false},
      {"a varint of 11 bytes", meta_record + std::string(11, '\xff'), false},
      {"an empty key", with_record("", "v"), false},
      {"a node-local key", with_record(local_stats_key(1), "v"), false},
      {"a raft key", with_record(raft_meta_key("hard"), "v"), false},
      {"a second applied state", with_record(meta_key(), blob_.substr(1, first_end - 1)), false},
      {"an item key without a container id", with_record(std::string(1, '\x04'), "v"), false},
  };
  // Cuts inside records: every byte of the first few records, then spread over the rest.
  for (size_t cut = 1; cut < blob_.size(); cut += cut < ends[4] ? 1 : 4099) {
    if (std::binary_search(ends.begin(), ends.end(), cut)) continue;  // a whole, shorter snapshot: not detectable
    bad.push_back({"cut at " + std::to_string(cut), blob_.substr(0, cut), cut < first_end});
  }
  Prng prng(kContentSeed);
  for (int i = 0; i < 20; ++i) {  // random bytes after a valid beginning
    std::string noise = blob_.substr(0, ends[3]);
    for (size_t n = prng.range(1, 64); n > 0; --n) noise.push_back(static_cast<char>(prng.uniform(256)));
    bad.push_back({"noise " + std::to_string(i), noise, false});
  }
  int checked = 0;
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    sim::FaultEnv env;
    std::unique_ptr<StateMachine> store = old_store("/node/db", 4096, nullptr, &env);
    ASSERT_NE(store, nullptr);
    const Dump before = dump_of(*store, true);
    Status installed = store->install_snapshot(pieces_of(b.bytes, 13));
    if (b.name.rfind("noise", 0) == 0 && installed.is_ok()) continue;  // noise can happen to be records
    ASSERT_EQ(installed.code(), StatusCode::kCorruption) << installed.to_string();
    if (b.before_any_write) {
      EXPECT_FALSE(store->unfinished_install().has_value());
      EXPECT_EQ(dump_of(*store, true), before) << "refused before the first write: nothing changed";
      EXPECT_EQ(store->reader().read_database("old").http_status(), 200);
      EXPECT_EQ(apply_next(*store, Command{}, kT0 + kSecond), 200);
    } else {
      EXPECT_EQ(store->unfinished_install(), index_) << "half-installed: the marker stays";
      EXPECT_EQ(store->reader().read_database("old").http_status(), 503);
      EXPECT_FALSE(store->apply(Command{}, LogIndex(index_.value() + 1), kT0 + 50 * kSecond).is_ok());
      if (checked++ % 8 == 0) {  // reopened: redone from a good copy (as Replica::open does from its file)
        store.reset();
        store = open_store("/node/db", &env);
        ASSERT_EQ(store->unfinished_install(), index_);
        ASSERT_TRUE(store->install_snapshot(blob_, index_).is_ok());
        ASSERT_NO_FATAL_FAILURE(expect_installed(*store));
      }
    }
  }
  EXPECT_GT(checked, 50);
}

// ---- through Replica: the install from the raft log's snapshot file, redone at open ---------------------------

using replication::ConfigChange;
using replication::ConfigChangeType;
using replication::Message;

// Node 1 leads a one-voter cluster with its log compacted; node 2 joins as a learner and installs the snapshot node 1
// produces for it, on FaultEnv.
class ReplicaInstallTest : public ::testing::Test {
 protected:
  ReplicaOptions options_for(NodeId id, leveldb::Env* env) {
    ReplicaOptions options;
    options.data_dir = "/node" + std::to_string(id.value());
    options.env = env;
    options.raft.self = id;
    options.raft.election_timeout_ticks = 10;
    options.raft.heartbeat_interval_ticks = 2;
    options.raft.snapshot_chunk_bytes = 4096;
    options.raft.max_inflight_messages = 4;
    options.seed = 7 + id.value();
    options.checkpoint_interval_entries = 50;
    options.log_entries_kept_after_checkpoint = 5;
    options.block_cache_bytes = 1 << 20;
    options.install_batch_bytes = 2 << 10;
    return options;
  }

  Result<std::unique_ptr<Replica>> open_follower(std::function<Status(int)> hook = nullptr) {
    ReplicaOptions options = options_for(NodeId(2), follower_env_.get());
    options.after_install_batch = std::move(hook);
    return Replica::open(options);
  }

  // One tick for both, then messages until quiet. A follower whose process_ready fails is dropped, as a node that
  // stops on a storage failure would be: `follower_failure_` says why.
  void round() {
    now_ += 10'000;
    leader_->tick(now_);
    if (follower_) follower_->tick(now_);
    for (int hop = 0; hop < 1000; ++hop) {
      std::vector<Message> queue;
      for (Replica* r : {leader_.get(), follower_.get()}) {
        if (r == nullptr) continue;
        Result<ReplicaOutput> output = r->process_ready();
        if (!output.is_ok() && r == follower_.get()) {
          follower_failure_ = output.status();
          follower_.reset();
          continue;
        }
        ASSERT_TRUE(output.is_ok()) << output.status().to_string();
        for (Message& m : output->messages) queue.push_back(std::move(m));
      }
      if (queue.empty()) return;
      for (const Message& m : queue) {
        Replica* to = m.to == NodeId(1) ? leader_.get() : follower_.get();
        if (to != nullptr) (void)to->step(m);
      }
    }
    FAIL() << "messages did not settle";
  }

  void rounds_until(const std::function<bool()>& done, int max_rounds, const std::string& what) {
    for (int i = 0; i < max_rounds && !done(); ++i) ASSERT_NO_FATAL_FAILURE(round());
    ASSERT_TRUE(done()) << what << " not reached within " << max_rounds << " rounds";
  }

  void SetUp() override {
    auto opened = [&] {
      ReplicaOptions options = options_for(NodeId(1), &leader_env_);
      options.bootstrap.voters.insert(NodeId(1));
      return Replica::open(options);
    }();
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    leader_ = std::move(opened).value();
    ASSERT_NO_FATAL_FAILURE(rounds_until([&] { return leader_->core().role() == replication::Role::kLeader; }, 100,
                                         "leadership"));
    auto propose = [&](const Command& command) {
      ASSERT_TRUE(leader_->propose(command, now_).is_ok());
      ASSERT_NO_FATAL_FAILURE(round());
    };
    ASSERT_NO_FATAL_FAILURE(propose(database_command(CommandType::kCreateDatabase, "db")));
    ASSERT_NO_FATAL_FAILURE(propose(create_container_command("db", "c", "/pk")));
    for (int i = 0; i < 120; ++i) {
      ASSERT_NO_FATAL_FAILURE(propose(item_command(CommandType::kCreateItem, "db", "c",
                                                   "{\"id\":\"i" + std::to_string(i) + "\",\"pk\":\"p\",\"pad\":\"" +
                                                       std::string(300 + i, 'x') + "\"}")));
    }
    ASSERT_GT(leader_->log().first_index(), LogIndex(2)) << "compacted: a learner needs the snapshot";
  }

  // Adds node 2 with `hook`, and runs until its install stopped (the hook failed) — the follower is gone then.
  void install_until_stopped(int stop_after_batch) {
    auto opened = open_follower([stop_after_batch](int batch) {
      return batch == stop_after_batch ? Status::io_error("injected: the process dies mid-install") : Status::ok();
    });
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    follower_ = std::move(opened).value();
    ASSERT_TRUE(leader_->propose_config_change(ConfigChange{ConfigChangeType::kAddLearner, NodeId(2)}).is_ok());
    ASSERT_NO_FATAL_FAILURE(rounds_until([&] { return follower_ == nullptr; }, 300, "the stopped install"));
    ASSERT_EQ(follower_failure_.code(), StatusCode::kIoError) << follower_failure_.to_string();
  }

  // The state the snapshot file holds, installed into a fresh store.
  Dump snapshot_state(Replica& replica) {
    const replication::SnapshotMetadata snapshot = replica.log().snapshot_metadata();
    Result<std::string> bytes = replica.log().read_snapshot_chunk(snapshot.index, 0, snapshot.size_bytes);
    EXPECT_TRUE(bytes.is_ok());
    sim::FaultEnv env;
    std::unique_ptr<StateMachine> fresh = open_store("/fresh/db", &env);
    EXPECT_TRUE(fresh->install_snapshot(*bytes, snapshot.index).is_ok());
    return dump_of(*fresh, true);
  }

  void redo_after_crash(int stop, bool forge_applied_index);

  sim::FaultEnv leader_env_;
  std::unique_ptr<sim::FaultEnv> follower_env_ = std::make_unique<sim::FaultEnv>();
  std::unique_ptr<Replica> leader_;
  std::unique_ptr<Replica> follower_;
  Status follower_failure_;
  int64_t now_ = kT0;
};

// Stops the follower's install after batch `stop`, crashes it (only synced bytes kept) and reopens it as a Replica.
void ReplicaInstallTest::redo_after_crash(int stop, bool forge_applied_index) {
  ASSERT_NO_FATAL_FAILURE(install_until_stopped(stop));
  // The snapshot the leader produced for the learner (its log was compacted by checkpoint, without one).
  ASSERT_TRUE(leader_->log().snapshot_data_ready());
  const LogIndex snapshot = leader_->log().snapshot_metadata().index;
  follower_env_ = follower_env_->crash_copy();
  {
    // What the crash left, opened as a bare store: the marker, no claim to the snapshot's index, no reads.
    std::unique_ptr<StateMachine> store = open_store("/node2/db", follower_env_.get());
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->unfinished_install(), snapshot);
    EXPECT_NE(store->applied().index, snapshot);
    EXPECT_EQ(store->reader().read_item("db", "c", "\"p\"", "i1", now_).http_status(), 503);
    if (forge_applied_index) {
      // As if the applied state had been written early: open must still redo the install.
      MetaState meta;
      meta.applied_index = snapshot.value();
      leveldb::WriteOptions sync;
      sync.sync = true;
      ASSERT_TRUE(store->leveldb()->Put(sync, meta_key(), encode_meta(meta)).ok());
    }
  }
  auto reopened = open_follower();
  ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
  follower_ = std::move(reopened).value();
  EXPECT_FALSE(follower_->state().unfinished_install().has_value());
  EXPECT_EQ(follower_->state().applied().index, snapshot);
  EXPECT_EQ(dump_of(follower_->state(), true), snapshot_state(*follower_));
  EXPECT_EQ(follower_->state().reader().read_item("db", "c", "\"p\"", "i1", now_).http_status(), 200);
  // And it catches up with the leader from there.
  ASSERT_NO_FATAL_FAILURE(rounds_until(
      [&] { return follower_->state().applied().index == leader_->state().applied().index; }, 300, "catch-up"));
  EXPECT_EQ(dump_of(follower_->state(), false), dump_of(leader_->state(), false));
}

TEST_F(ReplicaInstallTest, OpenRedoesAnInstallACrashStopped) { redo_after_crash(4, false); }

TEST_F(ReplicaInstallTest, OpenRedoesAnInstallEvenWhenTheAppliedIndexLooksCurrent) { redo_after_crash(20, true); }

TEST_F(ReplicaInstallTest, AMarkerForAnotherSnapshotThanTheLogsIsCorruptionThatSaysWhatToDo) {
  ASSERT_NO_FATAL_FAILURE(install_until_stopped(3));
  const LogIndex snapshot = leader_->log().snapshot_metadata().index;
  {
    std::unique_ptr<StateMachine> store = open_store("/node2/db", follower_env_.get());
    ASSERT_EQ(store->unfinished_install(), snapshot);
    std::string other;
    codec::put_u64_be(other, snapshot.value() + 17);
    ASSERT_TRUE(store->leveldb()->Put(leveldb::WriteOptions(), install_marker_key(), other).ok());
  }
  auto reopened = open_follower();
  ASSERT_FALSE(reopened.is_ok());
  EXPECT_EQ(reopened.status().code(), StatusCode::kCorruption);
  EXPECT_NE(reopened.status().message().find("empty its data directory"), std::string::npos)
      << reopened.status().to_string();
}

TEST_F(ReplicaInstallTest, ASnapshotFileThatCannotBeInstalledStopsTheStartWithWhatToDo) {
  ASSERT_NO_FATAL_FAILURE(install_until_stopped(3));
  const replication::SnapshotMetadata snapshot = leader_->log().snapshot_metadata();
  // Same size, garbage after the first record: the redo meets it half-way, at every start.
  const std::string file = "/node2/snapshots/snapshot-" + std::to_string(snapshot.index.value());
  std::string bytes;
  ASSERT_TRUE(leveldb::ReadFileToString(follower_env_.get(), file, &bytes).ok());
  ASSERT_EQ(bytes.size(), snapshot.size_bytes);
  const size_t first_end = record_ends(bytes).front();
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(first_end) + 100, bytes.end(), '\xff');
  ASSERT_TRUE(leveldb::WriteStringToFile(follower_env_.get(), bytes, file).ok());
  for (int start = 0; start < 2; ++start) {
    auto reopened = open_follower();
    ASSERT_FALSE(reopened.is_ok());
    EXPECT_EQ(reopened.status().code(), StatusCode::kCorruption);
    EXPECT_NE(reopened.status().message().find("undecodable snapshot entry"), std::string::npos)
        << reopened.status().to_string();
    EXPECT_NE(reopened.status().message().find("empty its data directory"), std::string::npos)
        << reopened.status().to_string();
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
