// mayfly-walkthrough: what `make run` shows until the cluster exists. One node's state machine on a real LevelDB,
// driven the way the leader will drive it: every entry stamped with the wall clock, time entries once a second
// while idle, reads at the applied time, and the garbage collector reclaiming what expired.
//
//   mayfly-walkthrough [--data DIR] [--seconds N]
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "common/clock.h"
#include "storage/state_machine.h"

namespace mayfly::storage {
namespace {

class Walkthrough {
 public:
  explicit Walkthrough(std::unique_ptr<StateMachine> store) : store_(std::move(store)) {
    index_ = store_->applied().index.value() + 1;
  }

  OpResult apply(const Command& command) {
    // ts = max(wall clock, last ts + 1µs): how the leader stamps entries.
    const int64_t ts = std::max(clock_.now_micros(), store_->applied().ts_micros + 1);
    Result<OpResult> result = store_->apply(command, LogIndex(index_++), ts);
    if (!result.is_ok()) {
      std::fprintf(stderr, "apply failed: %s\n", result.status().to_string().c_str());
      std::exit(1);
    }
    return *result;
  }

  void say(const char* what, const OpResult& result) {
    std::printf("  %-52s -> %d %s\n", what, result.http_status(), result.ok() ? result.body.c_str() : result.message.c_str());
  }

  void run(int seconds) {
    Command command;
    command.type = CommandType::kCreateDatabase;
    command.database = "demo";
    say("create database demo", apply(command));
    command.type = CommandType::kCreateContainer;
    command.container = "sessions";
    command.partition_key_path = "/user";
    command.default_ttl_change = DefaultTtlChange::kSet;
    command.default_ttl_json = "5";
    say("create container sessions (/user, defaultTtl 5)", apply(command));
    const struct {
      const char* label;
      const char* body;
    } items[] = {
        {"upsert s1 (inherits defaultTtl 5)", R"({"id":"s1","user":"ana","cart":["tea"]})"},
        {"upsert s2 (ttl -1: never expires)", R"({"id":"s2","user":"ben","ttl":-1})"},
        {"upsert s3 (ttl 2)", R"({"id":"s3","user":"cy","ttl":2})"},
        {"upsert s4 (ttl 0: rejected, nothing written)", R"({"id":"s4","user":"di","ttl":0})"},
    };
    command = Command{};
    command.type = CommandType::kUpsertItem;
    command.database = "demo";
    command.container = "sessions";
    for (const auto& item : items) {
      command.body = item.body;
      say(item.label, apply(command));
    }
    std::printf("\nThe leader appends a time entry every second while idle; reads happen at the applied time.\n");
    const char* ids[] = {"s1", "s2", "s3"};
    const char* users[] = {"\"ana\"", "\"ben\"", "\"cy\""};
    for (int second = 0; second <= seconds; ++second) {
      apply(Command{});  // a time entry
      const int64_t now = store_->applied().ts_micros;
      std::printf("  applied time %lld.%06lld:", static_cast<long long>(now / kMicrosPerSecond),
                  static_cast<long long>(now % kMicrosPerSecond));
      for (int i = 0; i < 3; ++i) {
        const bool alive = store_->reader().read_item("demo", "sessions", users[i], ids[i], now).ok();
        std::printf("  %s=%s", ids[i], alive ? "alive" : "gone ");
      }
      Result<ContainerStats> stats = store_->expiry().container_stats("demo", "sessions");
      if (stats.is_ok()) {
        std::printf("  | live %lld, expired-not-deleted %lld\n", static_cast<long long>(stats->live_items),
                    static_cast<long long>(stats->backlog.items));
      }
      std::fflush(stdout);
      if (second < seconds) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    Result<CollectResult> collected =
        store_->expiry().collect_expired("demo", "sessions", store_->applied().ts_micros, 100);
    if (collected.is_ok()) {
      std::printf("\nGarbage collector: deleted %lld expired items (%lld bytes) from disk.\n",
                  static_cast<long long>(collected->items), static_cast<long long>(collected->bytes));
    }
    Result<ContainerStats> stats = store_->expiry().container_stats("demo", "sessions");
    if (stats.is_ok()) {
      std::printf("Backlog now %lld items; %lld live items stored.\n", static_cast<long long>(stats->backlog.items),
                  static_cast<long long>(stats->live_items));
    }
  }

 private:
  SystemClock clock_;
  std::unique_ptr<StateMachine> store_;
  uint64_t index_;
};

}  // namespace
}  // namespace mayfly::storage

int main(int argc, char** argv) {
  std::string data = ".mayfly-walkthrough";
  int seconds = 6;
  CLI::App app{"mayfly-walkthrough: one node's state machine on a real LevelDB, items expiring on replicated time"};
  app.add_option("--data", data, "the data directory (removed first)");
  app.add_option("--seconds", seconds, "how long to watch items expire")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  std::filesystem::remove_all(data);
  std::printf("Mayfly walkthrough: ONE node's state machine on a real LevelDB in %s (not yet a cluster:\n"
              "replication, mayflyd and the RPC API are still being built). Entries are stamped like the leader will\n"
              "stamp them; expiry is decided from that replicated time, never from a reader's clock.\n\n",
              data.c_str());
  mayfly::storage::StoreOptions options;
  options.path = data + "/db";
  auto store = mayfly::storage::StateMachine::open(options);
  if (!store.is_ok()) {
    std::fprintf(stderr, "mayfly-walkthrough: %s\n", store.status().to_string().c_str());
    return 1;
  }
  mayfly::storage::Walkthrough(std::move(store).value()).run(seconds);
  return 0;
}
