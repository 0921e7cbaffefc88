// Raft log read faults (issue #10, "Disk faults"): a log entry that cannot be read back — EIO from the disk, or bytes
// that are not what was written — must stop the node cleanly with the cause in its log, never abort it.
//
// The real log (RaftLogStore, its WAL segments under wal/) on the real file system, through an IoFaultEnv that fails
// reads of the WAL's files (the state machine's LevelDB reads fine): the store returns the error naming the entry and
// the file, and keeps it (sticky); the Raft core throws StorageFailure out of the call that
// needed the read (RaftCore::create returns it as a Status); the node's driver catches it, answers what is pending
// with 503 and stops as failed (mayflyd then exits 1). Only a read outside the stored range — the core's own bug —
// still asserts. Deterministic: fixed Raft seeds, a fixed seed for the incompressible entry data.
#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/prng.h"
#include "metrics/metrics.h"
#include "node/driver.h"
#include "node/ru_account.h"
#include "replication/codec.h"
#include "replication/raft_core.h"
#include "storage/layout.h"
#include "storage/raft_log_store.h"
#include "storage/replica.h"
#include "tests/sim/fault_env.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage {
namespace {

using replication::Entry;
using replication::EntryType;
using replication::HardState;
using replication::Membership;
using replication::StorageFailure;
using testing::kT0;
using testing::TempDir;

constexpr uint64_t kLastIndex = 400;
constexpr uint64_t kLastRandom = 200;
constexpr uint64_t kDataSeed = 20261124;  // the random bytes of entries 2..kLastRandom

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class LogReadFaultTest : public ::testing::Test {
 protected:
  Membership one_voter() const {
    Membership membership;
    membership.voters.insert(NodeId(1));
    return membership;
  }

  void open_store() {
    log_.reset();
    state_.reset();
    StoreOptions options;
    options.path = dir_.path() + "/db";
    options.env = &env_;
    auto state = StateMachine::open(options);
    ASSERT_TRUE(state.is_ok()) << state.status().to_string();
    state_ = std::move(state).value();
  }

  Result<std::unique_ptr<RaftLogStore>> open_log() {
    return RaftLogStore::open(state_->leveldb(), &env_, dir_.path() + "/snapshots", one_voter());
  }

  // A one-voter log: the bootstrap entry, entries 2..kLastRandom with 1000 random bytes each (easy to find in the
  // segment file), then empty time entries up to kLastIndex; all committed, none applied. The log is then reopened,
  // so that entries() reads them from the segment file, not from the entries it keeps of its own writes.
  void write_log() {
    ASSERT_NO_FATAL_FAILURE(open_store());
    auto log = open_log();
    ASSERT_TRUE(log.is_ok()) << log.status().to_string();
    log_ = std::move(log).value();
    Prng prng(kDataSeed);
    std::vector<Entry> entries;
    for (uint64_t i = 2; i <= kLastIndex; ++i) {
      Entry entry{Term(1), LogIndex(i), kT0 + static_cast<int64_t>(i), EntryType::kEmpty, ""};
      if (i <= kLastRandom) {
        entry.type = EntryType::kNormal;
        entry.data.resize(1000);
        for (char& c : entry.data) c = static_cast<char>(prng.uniform(256));
      }
      entries.push_back(std::move(entry));
    }
    random_data_ = entries[10].data;  // entry 12
    Status persisted = log_->persist(std::nullopt, entries, HardState{Term(1), NodeId(0), LogIndex(kLastIndex)}, true);
    ASSERT_TRUE(persisted.is_ok()) << persisted.to_string();
    log_.reset();
    auto reopened = open_log();
    ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
    log_ = std::move(reopened).value();
  }

  void fail_log_reads() { env_.fail_reads_matching("/wal/"); }
  void heal() { env_.fail_reads_matching(""); }

  // Every WAL segment file.
  std::vector<std::filesystem::path> segments() const {
    std::vector<std::filesystem::path> out;
    for (const auto& file : std::filesystem::directory_iterator(dir_.path() + "/wal")) out.push_back(file.path());
    return out;
  }

  replication::RaftConfig raft_config() const {
    replication::RaftConfig config;
    config.self = NodeId(1);
    return config;
  }

  TempDir dir_;
  sim::IoFaultEnv env_;
  std::unique_ptr<StateMachine> state_;
  std::unique_ptr<RaftLogStore> log_;
  std::string random_data_;  // entry 12's
};

TEST(StorageReadFailed, DiskErrorsThrowWithTheOperationAndNotFoundStillAsserts) {
  try {
    replication::storage_read_failed(Status::io_error("read raft entry 7: IO error: 000005.ldb: Input/output error"),
                                     "Raft log entries [7, 9)");
    FAIL() << "no exception";
  } catch (const StorageFailure& failure) {
    EXPECT_EQ(failure.status().code(), StatusCode::kIoError);
    EXPECT_EQ(failure.status().message(),
              "Raft log entries [7, 9): read raft entry 7: IO error: 000005.ldb: Input/output error");
    EXPECT_EQ(std::string(failure.what()), failure.status().to_string());
  }
  EXPECT_THROW(replication::storage_read_failed(Status::corruption("raft entry 3 missing"), "Raft log entries"),
               StorageFailure);
  // NotFound: the core read outside what the storage holds, which it checks first — a bug, not the disk.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      replication::storage_read_failed(Status::not_found("entries [9, 10) outside [1, 8)"), "Raft log entries"),
      "log storage, Raft log entries: NotFound");
}

TEST_F(LogReadFaultTest, EntriesReadEioIsAnIoErrorNamingTheEntryAndTheFileAndIsSticky) {
  ASSERT_NO_FATAL_FAILURE(write_log());
  fail_log_reads();
  Result<std::vector<Entry>> read = log_->entries(LogIndex(1), LogIndex(kLastIndex + 1), UINT64_MAX);
  ASSERT_FALSE(read.is_ok());
  EXPECT_EQ(read.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(contains(read.status().message(), "read raft entry ")) << read.status().to_string();
  EXPECT_TRUE(contains(read.status().message(), ".log: Input/output error")) << read.status().to_string();
  EXPECT_GT(env_.injected_faults(), 0u);
  // The time entries fail the same way.
  Result<std::vector<Entry>> compressed =
      log_->entries(LogIndex(kLastRandom + 1), LogIndex(kLastIndex + 1), UINT64_MAX);
  ASSERT_FALSE(compressed.is_ok());
  EXPECT_TRUE(contains(compressed.status().message(), "read raft entry ")) << compressed.status().to_string();
  // The rest of the store reads fine: the fault is the log's files only.
  EXPECT_TRUE(state_->reader().containers().is_ok());
  // Sticky: the log on disk is in doubt, so nothing more is written to it.
  EXPECT_EQ(log_->failure().to_string(), read.status().to_string());
  const Entry next{Term(1), LogIndex(kLastIndex + 1), kT0 + static_cast<int64_t>(kLastIndex) + 1, EntryType::kEmpty,
                   ""};
  Status persisted = log_->persist(std::nullopt, {next}, std::nullopt, true);
  EXPECT_EQ(persisted.to_string(), read.status().to_string());
  // A snapshot needs the entry's term and time from the log: refused with the same error.
  EXPECT_FALSE(log_->describe_snapshot(LogIndex(kLastIndex), one_voter(), 0).is_ok());
}

TEST_F(LogReadFaultTest, AnEntryWhoseBytesNameAnotherPositionIsCorruptionNotAnEntry) {
  ASSERT_NO_FATAL_FAILURE(write_log());
  // Intact checksums, wrong contents: entry 12's record now holds an entry that says it is entry 13, and entry 14's
  // one of another term (what a misdirected write or a restored file mix-up would leave). Same lengths, valid CRCs.
  auto crafted = [](uint64_t index, uint64_t term, const std::string& data) {
    return wal_entry_record(Entry{Term(term), LogIndex(index), kT0 + static_cast<int64_t>(index), EntryType::kNormal,
                                  data});
  };
  Prng prng(kDataSeed);
  std::vector<std::string> data(kLastRandom + 1);
  for (uint64_t i = 2; i <= kLastRandom; ++i) {
    data[i].resize(1000);
    for (char& c : data[i]) c = static_cast<char>(prng.uniform(256));
  }
  int rewritten = 0;
  for (const auto& path : segments()) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    for (const auto& [index, replacement] : {std::pair{12, crafted(13, 1, data[12])}, {14, crafted(14, 7, data[14])}}) {
      const size_t at = bytes.find(crafted(index, 1, data[index]));
      if (at == std::string::npos) continue;
      file.clear();
      file.seekp(static_cast<std::streamoff>(at));
      file.write(replacement.data(), static_cast<std::streamsize>(replacement.size()));
      ++rewritten;
    }
  }
  ASSERT_EQ(rewritten, 2) << "entries 12 and 14 are not in the segments (data seed " << kDataSeed << ")";
  // Read while open: the record at the entry's position does not hold that entry.
  for (const uint64_t index : {12, 14}) {
    Result<std::vector<Entry>> read = log_->entries(LogIndex(index), LogIndex(index + 1), UINT64_MAX);
    ASSERT_FALSE(read.is_ok()) << "entry " << index << " was handed out";
    EXPECT_EQ(read.status().code(), StatusCode::kCorruption);
    EXPECT_TRUE(contains(read.status().message(), "not the stored position")) << read.status().to_string();
  }
  // Replayed at open: the log these records describe has a gap and a term going back.
  log_.reset();
  auto reopened = open_log();
  ASSERT_FALSE(reopened.is_ok()) << "a log with misplaced entries opened";
  EXPECT_EQ(reopened.status().code(), StatusCode::kCorruption) << reopened.status().to_string();
}

TEST_F(LogReadFaultTest, OpenReturnsTheLogScanError) {
  ASSERT_NO_FATAL_FAILURE(write_log());
  log_.reset();
  fail_log_reads();
  auto reopened = open_log();
  ASSERT_FALSE(reopened.is_ok());
  EXPECT_EQ(reopened.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(contains(reopened.status().message(), "replay raft log")) << reopened.status().to_string();
  EXPECT_TRUE(contains(reopened.status().message(), "Input/output error")) << reopened.status().to_string();
  heal();
  auto healthy = open_log();
  ASSERT_TRUE(healthy.is_ok()) << healthy.status().to_string();
  EXPECT_EQ((*healthy)->last_index(), LogIndex(kLastIndex));
}

// A flipped bit in a log entry's bytes in a sealed segment: every record carries a CRC-32C, so it is Corruption at
// open, not an entry quietly decoded with other bytes (only the newest segment may end in a torn write).
TEST_F(LogReadFaultTest, CorruptLogBlockIsCorruptionAtOpen) {
  ASSERT_NO_FATAL_FAILURE(write_log());
  log_.reset();
  state_.reset();
  const std::string& victim = random_data_;
  bool flipped = false;
  for (const auto& path : segments()) {
    std::fstream table(path, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(table)), std::istreambuf_iterator<char>());
    const size_t at = bytes.find(victim);
    if (at == std::string::npos) continue;
    table.clear();  // reading to the end set eof
    table.seekp(static_cast<std::streamoff>(at + 100));
    table.put(static_cast<char>(bytes[at + 100] ^ 0x01));
    flipped = true;
  }
  ASSERT_TRUE(flipped) << "entry 12's bytes are not in any segment (data seed " << kDataSeed << ")";
  ASSERT_NO_FATAL_FAILURE(open_store());
  auto reopened = open_log();
  ASSERT_FALSE(reopened.is_ok()) << "a corrupt log entry was read as if intact";
  EXPECT_EQ(reopened.status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(contains(reopened.status().message(), "raft log record unreadable in ")) << reopened.status().to_string();
  EXPECT_TRUE(contains(reopened.status().message(), "/wal/")) << reopened.status().to_string();
}

TEST_F(LogReadFaultTest, CoreThrowsStorageFailureNamingTheReadAndTheDiskError) {
  ASSERT_NO_FATAL_FAILURE(write_log());
  auto core = replication::RaftCore::create(raft_config(), *log_, Prng(1), LogIndex(0), log_.get());
  ASSERT_TRUE(core.is_ok()) << core.status().to_string();
  ASSERT_TRUE((*core)->has_ready());  // 400 committed entries to apply, read from the log
  fail_log_reads();
  try {
    (void)(*core)->ready();
    FAIL() << "the core read entries the disk could not give";
  } catch (const StorageFailure& failure) {
    EXPECT_EQ(failure.status().code(), StatusCode::kIoError);
    const std::string& message = failure.status().message();
    EXPECT_EQ(message.rfind("Raft log entries [1, 401): read raft entry ", 0), 0u) << message;
    EXPECT_TRUE(contains(message, ".log: Input/output error")) << message;
  }
}

TEST_F(LogReadFaultTest, CoreCreateReturnsTheReadErrorAsAStatus) {
  ASSERT_NO_FATAL_FAILURE(write_log());
  fail_log_reads();
  auto core = replication::RaftCore::create(raft_config(), *log_, Prng(1), LogIndex(0), log_.get());
  ASSERT_FALSE(core.is_ok());
  EXPECT_EQ(core.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(contains(core.status().message(), "Raft log ")) << core.status().to_string();
  EXPECT_TRUE(contains(core.status().message(), "Input/output error")) << core.status().to_string();
}

// What a driver hands to the RPC side.
class CollectingOutput final : public node::DriverOutput {
 public:
  void deliver(node::DriverBatch batch) override {
    for (auto& reply : batch.replies) replies.push_back(std::move(reply));
  }
  std::vector<std::pair<uint64_t, node::Reply>> replies;
};

TEST_F(LogReadFaultTest, DriverStopsCleanlyWithTheCauseWhenTheLogCannotBeRead) {
  ASSERT_NO_FATAL_FAILURE(write_log());
  log_.reset();
  state_.reset();
  std::ostringstream log_text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_text);
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));

  ReplicaOptions options;
  options.data_dir = dir_.path();
  options.env = &env_;
  options.raft.self = NodeId(1);
  options.bootstrap = one_voter();
  options.background_snapshots = true;
  auto replica = Replica::open(options);  // reads the log (membership, last entry's time) while the disk is fine
  ASSERT_TRUE(replica.is_ok()) << replica.status().to_string();
  fail_log_reads();
  {
    node::NodeConfig config;
    config.id = NodeId(1);
    config.data_dir = dir_.path();
    SystemClock clock;
    metrics::Metrics metrics(1);
    node::RequestUnitAccount request_units(clock, metrics);
    node::Driver driver(config, std::move(replica).value(), clock, metrics, request_units);
    CollectingOutput output;
    // A strong read handed to the driver as it fails (the only reads that wait in the driver): it must be answered.
    api::Request read{.database = "db", .container = "c", .operation = api::ReadItem{"\"p\"", "a"}};
    read.options.consistency = node::Consistency::kStrong;
    boost::asio::post(driver.io(), [&driver, read] { driver.on_request(77, read); });
    // Bounded: a driver that never hits the fault is stopped (not failed) after 10 s.
    boost::asio::steady_timer guard(driver.io(), std::chrono::seconds(10));
    guard.async_wait([&driver](const boost::system::error_code& error) {
      if (!error) driver.stop();
    });
    driver.start(output);
    driver.run();  // the first flush applies the committed entries: the read fails, the driver stops
    guard.cancel();
    EXPECT_TRUE(driver.failed());
    bool answered = false;
    for (const auto& [id, reply] : output.replies) answered = answered || (id == 77 && reply.result.http_status() == 503);
    EXPECT_TRUE(answered) << "the waiting read got no 503";
  }
  spdlog::set_default_logger(previous);
  const std::string text = log_text.str();
  EXPECT_TRUE(
      contains(text, "storage failure, stopping this node: IoError: Raft log entries [1, 401): read raft entry "))
      << text;
  EXPECT_TRUE(contains(text, ".log: Input/output error")) << text;
  EXPECT_TRUE(contains(text, "critical")) << text;
  EXPECT_FALSE(contains(text, "uncaught exception")) << text;
  // The disk is healthy again: the store reopens and the node starts from it.
  heal();
  auto reopened = Replica::open(options);
  EXPECT_TRUE(reopened.is_ok()) << reopened.status().to_string();
}

}  // namespace
}  // namespace mayfly::storage
