// Storage state-machine benchmark: apply and read throughput, garbage-collection throughput, and the cost of the
// backlog figures, on a real LevelDB on this machine's disk. Prints the figures and the command that produced them.
//
//   build/bench/mayfly-storage-bench [--items N] [--gc-items N] [--live-items N] [--expired-items N] [--runs R]
//                                    [--table-block-kb 4,16] [--dir PATH]
//
// Each throughput figure is the median of --runs runs (default 3). Replicated times are synthetic (1µs apart), as a
// leader would stamp them; applies are not fsynced (the raft log is the durable record — see docs/design.md, "The state
// machine"). Applies and reads run once per --table-block-kb size (an A/B of the table block size); for each, the
// memory the open tables hold (their indexes and Bloom filters: LevelDB's table cache) is measured on a reopened
// store with a 1 MB block cache after random reads have opened every table.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/command_line.h"
#include "common/allocator.h"
#include "common/prng.h"
#include "storage/state_machine.h"

namespace mayfly::storage {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000;
constexpr int64_t kSecond = 1'000'000;

struct Options {
  int64_t items = 200'000;
  int64_t gc_items = 1'000'000;
  int64_t live_items = 1'000'000;
  int64_t expired_items = 100'000;
  int runs = 3;
  std::vector<size_t> table_block_kb{16};
  std::string dir;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "mayfly-storage-bench: %s failed\n", what);
    std::exit(1);
  }
}

// A store in a fresh directory, with database "db" and a container "c" (partition key /pk, defaultTtl given).
struct Fixture {
  std::unique_ptr<StateMachine> store;
  uint64_t index = 1;
  int64_t now = kT0;

  explicit Fixture(const StoreOptions& options) {  // an existing store
    Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
    if (!opened.is_ok()) std::fprintf(stderr, "%s\n", opened.status().to_string().c_str());
    check(opened.is_ok(), "reopen store");
    store = std::move(opened).value();
  }

  Fixture(const std::string& path, const std::string& default_ttl, size_t table_block_bytes = kDefaultTableBlockBytes) {
    std::filesystem::remove_all(path);
    StoreOptions options;
    options.path = path;
    options.table_block_bytes = table_block_bytes;
    Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
    if (!opened.is_ok()) std::fprintf(stderr, "%s\n", opened.status().to_string().c_str());
    check(opened.is_ok(), "open store");
    store = std::move(opened).value();
    Command db;
    db.type = CommandType::kCreateDatabase;
    db.database = "db";
    check(apply(db).http_status() == 201, "create database");
    Command container;
    container.type = CommandType::kCreateContainer;
    container.database = "db";
    container.container = "c";
    container.partition_key_path = "/pk";
    container.default_ttl_change = DefaultTtlChange::kSet;
    container.default_ttl_json = default_ttl;
    check(apply(container).http_status() == 201, "create container");
  }

  OpResult apply(const Command& command) {
    Result<OpResult> result = store->apply(command, LogIndex(index++), now++);
    check(result.is_ok(), "apply");
    return *result;
  }

  void create(int64_t i, int64_t ttl_seconds, size_t payload_bytes) {
    Command command;
    command.type = CommandType::kCreateItem;
    command.database = "db";
    command.container = "c";
    command.body = "{\"id\":\"item-" + std::to_string(i) + "\",\"pk\":\"p" + std::to_string(i % 1000) +
                   "\",\"ttl\":" + std::to_string(ttl_seconds) + ",\"payload\":\"" +
                   std::string(payload_bytes, 'x') + "\"}";
    check(apply(command).http_status() == 201, "create item");
  }
};

void read_random(Fixture& fixture, int64_t items, int64_t reads, uint64_t seed) {
  Prng prng(seed);
  for (int64_t r = 0; r < reads; ++r) {
    const int64_t i = static_cast<int64_t>(prng.uniform(static_cast<uint64_t>(items)));
    OpResult read = fixture.store->reader().read_item("db", "c", "\"p" + std::to_string(i % 1000) + "\"",
                                                      "item-" + std::to_string(i), fixture.now);
    check(read.http_status() == 200, "read item");
  }
}

size_t count_tables(const std::string& path) {
  size_t tables = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path)) tables += entry.path().extension() == ".ldb";
  return tables;
}

void bench_apply_and_read(const Options& options, size_t block_kb) {
  std::vector<double> apply_rates, read_rates, table_mb;
  size_t tables = 0;
  for (int run = 0; run < options.runs; ++run) {
    const std::string path = options.dir + "/apply";
    Fixture fixture(path, "-1", block_kb << 10);
    auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < options.items; ++i) fixture.create(i, 3600, 1000);  // ~1 KB items with ttl
    apply_rates.push_back(static_cast<double>(options.items) / seconds_since(start));

    start = std::chrono::steady_clock::now();
    read_random(fixture, options.items, options.items, run + 1);
    read_rates.push_back(static_cast<double>(options.items) / seconds_since(start));

    // What the open tables hold: reopen with a 1 MB block cache, open every table by reading, compare.
    const int64_t now = fixture.now;
    fixture.store.reset();
    tables = count_tables(path);
    StoreOptions reopen;
    reopen.path = path;
    reopen.block_cache_bytes = 1 << 20;
    reopen.table_block_bytes = block_kb << 10;
    const uint64_t before = allocator_figures().allocated;
    Fixture reopened(reopen);
    reopened.now = now;
    read_random(reopened, options.items, std::min<int64_t>(options.items, 20'000), run + 100);
    const uint64_t after = allocator_figures().allocated;
    table_mb.push_back((static_cast<double>(after) - static_cast<double>(before)) / (1 << 20) - 1);
  }
  std::printf("| apply: create 1 KB items with ttl, %zu KB table blocks | %lld items | %.0f applies/s |\n", block_kb,
              static_cast<long long>(options.items), median(apply_rates));
  std::printf("| point read (random, at applied time), %zu KB table blocks | %lld reads | %.0f reads/s |\n", block_kb,
              static_cast<long long>(options.items), median(read_rates));
  const double mb = median(table_mb);
  std::printf("| memory of the open tables (indexes, filters), %zu KB table blocks | %zu tables | %.1f MB, %.1f MB per "
              "million items |\n",
              block_kb, tables, mb, mb * 1e6 / static_cast<double>(options.items));
}

void bench_collect(const Options& options) {
  Fixture fixture(options.dir + "/gc", "-1");
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < options.gc_items; ++i) fixture.create(i, 1, 100);
  const double load_seconds = seconds_since(start);
  fixture.now += 10 * kSecond;  // everything has expired
  Command time_entry;
  fixture.apply(time_entry);
  start = std::chrono::steady_clock::now();
  int64_t deleted = 0;
  while (true) {
    Result<CollectResult> collected = fixture.store->expiry().collect_expired("db", "c", fixture.now - 1, 1000);
    check(collected.is_ok(), "collect_expired");
    deleted += collected->items;
    if (!collected->more) break;
  }
  const double gc_seconds = seconds_since(start);
  check(deleted == options.gc_items, "collect everything");
  std::printf("| collect_expired, batches of 1000 | %lld expired items (loaded in %.1f s) | %.0f items/s |\n",
              static_cast<long long>(deleted), load_seconds, static_cast<double>(deleted) / gc_seconds);
}

void bench_backlog(const Options& options) {
  Fixture fixture(options.dir + "/backlog", "-1");
  // Expired part: short own ttl; live part: long ttl. Interleaved so the expired items are spread over the keys.
  const int64_t total = options.live_items + options.expired_items;
  const int64_t every = std::max<int64_t>(1, total / options.expired_items);
  int64_t expired = 0;
  for (int64_t i = 0; i < total; ++i) {
    const bool expire = (i % every == 0) && expired < options.expired_items;
    expired += expire ? 1 : 0;
    fixture.create(i, expire ? 1 : 86400, 100);
  }
  fixture.now += 10 * kSecond;
  Command time_entry;
  fixture.apply(time_entry);
  // After open the expired part is counted once, kBacklogCountStep index entries per call (the node's collector
  // and metrics ask with their own limits): the calls it takes, all of them and the longest.
  auto start = std::chrono::steady_clock::now();
  Result<Backlog> first = Status::internal("not counted");
  int calls = 0;
  double longest = 0;
  do {
    const auto call = std::chrono::steady_clock::now();
    first = fixture.store->expiry().backlog("db", "c");
    longest = std::max(longest, seconds_since(call));
    ++calls;
  } while (first.is_ok() && !first->complete && calls < 1'000'000);
  const double first_seconds = seconds_since(start);
  check(first.is_ok() && first->complete && first->items == expired, "backlog count");
  // Later calls only look at what expired since the last one.
  std::vector<double> incremental;
  for (int i = 0; i < 101; ++i) {
    fixture.apply(time_entry);
    start = std::chrono::steady_clock::now();
    Result<Backlog> again = fixture.store->expiry().backlog("db", "c");
    incremental.push_back(seconds_since(start));
    check(again.is_ok() && again->items == expired, "backlog again");
  }
  std::printf("| backlog figures after open: the expired part counted once, in %d calls of at most %zu index "
              "entries | %lld live + %lld expired | %.1f ms in all, %.1f ms the longest call |\n",
              calls, kBacklogCountStep, static_cast<long long>(total - expired), static_cast<long long>(expired),
              first_seconds * 1e3, longest * 1e3);
  std::printf("| backlog figures, each later call (median of 101) | same | %.1f µs |\n", median(incremental) * 1e6);
}

}  // namespace
}  // namespace mayfly::storage

int main(int argc, char** argv) {
  mayfly::storage::Options options;
  CLI::App app{"mayfly-storage-bench: the state machine on LevelDB — applies, reads, the collector, backlog counts"};
  app.add_option("--items", options.items, "items written and read")->check(CLI::PositiveNumber);
  app.add_option("--gc-items", options.gc_items, "expired items the collector deletes")->check(CLI::PositiveNumber);
  app.add_option("--live-items", options.live_items, "live items beside them")->check(CLI::NonNegativeNumber);
  app.add_option("--expired-items", options.expired_items, "expired items the backlog count reads")
      ->check(CLI::PositiveNumber);
  app.add_option("--runs", options.runs, "measurements per row (the median is printed)")->check(CLI::PositiveNumber);
  app.add_option("--table-block-kb", options.table_block_kb, "table block sizes to compare (comma-separated KB)")
      ->delimiter(',')
      ->check(CLI::Range(size_t{1}, size_t{1024}));
  app.add_option("--dir", options.dir, "where the stores go (default: a new directory under /tmp)");
  CLI11_PARSE(app, argc, argv);
  const std::string command = mayfly::bench::command_line(argc, argv);
  const bool own_dir = options.dir.empty();
  if (own_dir) options.dir = "/tmp/mayfly-storage-bench-" + std::to_string(getpid());
  std::printf("command: %s\n", command.c_str());
  std::printf("| what | size | result |\n|---|---|---|\n");
  std::fflush(stdout);
  for (size_t block_kb : options.table_block_kb) {
    mayfly::storage::bench_apply_and_read(options, block_kb);
    std::fflush(stdout);
  }
  mayfly::storage::bench_collect(options);
  std::fflush(stdout);
  mayfly::storage::bench_backlog(options);
  if (own_dir) std::filesystem::remove_all(options.dir);
  return 0;
}
