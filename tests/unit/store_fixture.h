// Test helpers for the state machine: a real LevelDB in a fresh temporary directory, and short ways to apply
// commands at explicit replicated times. Times in tests are microseconds; kT0 is a realistic epoch instant.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>

#include "storage/state_machine.h"

namespace mayfly::storage::testing {

inline constexpr int64_t kT0 = 1'700'000'000'000'000;  // 2023-11-14T22:13:20Z, a whole second
inline constexpr int64_t kSecond = 1'000'000;

// A randomized test's seed: `variable` from the environment (to reproduce a run), else a fresh one. The test prints it.
inline uint64_t seed_from_env(const char* variable) {
  if (const char* value = std::getenv(variable)) return std::strtoull(value, nullptr, 10);
  return std::random_device{}();
}

// A directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("mayfly-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Builds commands tersely.
inline Command database_command(CommandType type, std::string database) {
  Command command;
  command.type = type;
  command.database = std::move(database);
  return command;
}

inline Command create_container_command(std::string database, std::string container, std::string pk_path,
                                        std::optional<std::string> default_ttl_json = std::nullopt) {
  Command command;
  command.type = CommandType::kCreateContainer;
  command.database = std::move(database);
  command.container = std::move(container);
  command.partition_key_path = std::move(pk_path);
  if (default_ttl_json) {
    command.default_ttl_change = DefaultTtlChange::kSet;
    command.default_ttl_json = *default_ttl_json;
  }
  return command;
}

inline Command set_default_ttl_command(std::string database, std::string container,
                                       std::optional<std::string> default_ttl_json) {
  Command command;
  command.type = CommandType::kUpdateContainer;
  command.database = std::move(database);
  command.container = std::move(container);
  command.default_ttl_change = default_ttl_json ? DefaultTtlChange::kSet : DefaultTtlChange::kRemove;
  command.default_ttl_json = default_ttl_json.value_or("");
  return command;
}

inline Command item_command(CommandType type, std::string database, std::string container, std::string body,
                            std::optional<std::string> if_match = std::nullopt) {
  Command command;
  command.type = type;
  command.database = std::move(database);
  command.container = std::move(container);
  command.body = std::move(body);
  command.if_match = std::move(if_match);
  return command;
}

inline Command target_command(CommandType type, std::string database, std::string container, std::string pk_json,
                              std::string id, std::string body = "",
                              std::optional<std::string> if_match = std::nullopt) {
  Command command;
  command.type = type;
  command.database = std::move(database);
  command.container = std::move(container);
  command.partition_key_json = std::move(pk_json);
  command.id = std::move(id);
  command.body = std::move(body);
  command.if_match = std::move(if_match);
  return command;
}

// A store in a temp dir plus a log position counter: apply(command, ts) uses the next index.
class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override { reopen(); }

  void reopen() {
    store_.reset();
    StoreOptions options;
    options.path = dir_.path() + "/db";
    options.backlog_count_step = backlog_count_step_;
    Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    store_ = std::move(opened).value();
    next_index_ = store_->applied().index.value() + 1;
  }

  OpResult apply(const Command& command, int64_t ts) {
    Result<OpResult> result = store_->apply(command, LogIndex(next_index_++), ts);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? *result : OpResult::error(StatusCode::kInternal, result.status().to_string());
  }

  // A database "db" and a container "c" partitioned on /pk, with the given defaultTtl JSON (nullopt: TTL off).
  void make_container(std::optional<std::string> default_ttl_json, int64_t ts = kT0) {
    ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), ts).http_status(), 201);
    OpResult created = apply(create_container_command("db", "c", "/pk", default_ttl_json), ts);
    ASSERT_EQ(created.http_status(), 201) << created.message;
  }

  OpResult read(std::string pk_json, std::string id, int64_t now) {
    return store_->reader().read_item("db", "c", pk_json, id, now);
  }

  TempDir dir_;
  std::unique_ptr<StateMachine> store_;
  uint64_t next_index_ = 1;
  size_t backlog_count_step_ = kBacklogCountStep;  // set in a fixture's constructor to count in smaller steps
};

}  // namespace mayfly::storage::testing
