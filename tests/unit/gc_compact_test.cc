// Compacting what the collector drained (issue #31, node/gc_compactor.h): after a mass expiry the collector deletes
// every item, LevelDB keeps a tombstone for each key deleted (the item, its expiry index entry, its ts index entry),
// and scans that start in front of those ranges step over all of them until a compaction drops them. The ExpiryKeeper
// tracks the drained ranges and the GcCompactor compacts them, one at a time, off the driver thread, paced.
//
// The measure of "tombstones left" is LevelDB's approximate on-disk size of a drained key range, taken after a flush
// of the memtable (GetApproximateSizes counts table files only): tombstones and the values they hide occupy table
// files until a compaction drops them, and a range holding neither measures (next to) nothing. It needs no clock.
// Real LevelDB in temp dirs, the real compaction thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "metrics/metrics.h"
#include "node/collector.h"
#include "node/driver.h"
#include "node/event_loop.h"
#include "node/gc_compactor.h"
#include "node/ru_account.h"
#include "storage/replica.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

int64_t at(int64_t seconds) { return kT0 + seconds * kSecond; }

// Item i: a 200-byte payload; even ones carry their own ttl of 10 s (the own-ttl index), odd ones inherit the
// container's defaultTtl of 10 s (the inheriting index). Partition keys spread over 64 values.
std::string item(int i) {
  char id[16];
  std::snprintf(id, sizeof(id), "i%07d", i);
  std::string body = std::string(R"({"id":")") + id + R"(","pk":"p)" + std::to_string(i % 64) + R"(","v":")" +
                     std::string(200, 'x') + "\"";
  if (i % 2 == 0) body += R"(,"ttl":10)";
  return body + "}";
}

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// The four key ranges of a container the collector drains, each up to the next container's.
struct Ranges {
  explicit Ranges(uint64_t crid)
      : all{{KeyTag::kItem, {item_prefix(crid), item_prefix(crid + 1)}},
            {KeyTag::kOwnExpiryIndex, {own_expiry_prefix(crid), own_expiry_prefix(crid + 1)}},
            {KeyTag::kInheritExpiryIndex, {inherit_expiry_prefix(crid), inherit_expiry_prefix(crid + 1)}},
            {KeyTag::kTsIndex, {ts_index_prefix(crid), ts_index_prefix(crid + 1)}}} {}
  std::map<KeyTag, std::pair<std::string, std::string>> all;
};

class GcCompact : public StoreFixture {
 protected:
  GcCompact() : clock_(kT0), metrics_(1), account_(clock_, metrics_) {}

  // A container "db"/"c" with defaultTtl 10 and `count` items written one per µs from kT0, in groups of 1,000.
  void write_items(int count) {
    make_container("10");
    for (int first = 0; first < count; first += 1000) {
      store_->begin_apply_group();
      for (int i = first; i < std::min(count, first + 1000); ++i) {
        OpResult result = apply(item_command(CommandType::kCreateItem, "db", "c", item(i)), kT0 + 1 + i);
        ASSERT_EQ(result.http_status(), 201) << result.message;
      }
      ASSERT_TRUE(store_->end_apply_group().is_ok());
    }
  }
  uint64_t crid() {
    Result<ContainerRecord> found = store_->reader().find_container("db", "c", nullptr);
    EXPECT_TRUE(found.is_ok());
    return found.is_ok() ? found->crid : 0;
  }
  int64_t stored_items() {
    Result<ContainerStats> stats = store_->expiry().container_stats("db", "c", 0);
    EXPECT_TRUE(stats.is_ok());
    return stats.is_ok() ? stats->stored_items : -1;
  }
  // Moves time past every expiry and lets the collector delete everything (bounded).
  void expire_and_collect(int count) {
    ASSERT_EQ(apply(Command{}, at(3600)).http_status(), 200);
    clock_.set_micros(at(3600));
    node::CollectorOptions options;
    options.batch_items_max = 5000;
    node::Collector collector(store_->expiry(), account_, metrics_, clock_, options);
    int64_t deleted = 0;
    for (int pass = 0; pass < 10'000 && deleted < count; ++pass) {
      Result<int64_t> done = collector.run_once();
      ASSERT_TRUE(done.is_ok()) << done.status().to_string();
      deleted += *done;
    }
    ASSERT_EQ(deleted, count);
    ASSERT_EQ(stored_items(), 0);
  }
  // Flushes LevelDB's memtable to a table file and does nothing else: DB::CompactRange always begins with that flush,
  // and no key starts with 0x7F, so nothing is compacted. GetApproximateSizes then sees every tombstone.
  void flush_memtable() { store_->expiry().compact(DrainedRange{0, KeyTag::kItem, "\x7f", "\x7f"}); }
  uint64_t bytes(const std::pair<std::string, std::string>& range) {
    return store_->expiry().approximate_bytes(range.first, range.second);
  }
  // The forecast, the next-expiry lookup and the first page of a list, each timed once (ms).
  struct ScanTimes {
    double forecast = 0, next_expiry = 0, list = 0;
  };
  ScanTimes time_scans() {
    ScanTimes times;
    auto started = std::chrono::steady_clock::now();
    Result<ExpiryForecast> forecast = store_->reader().forecast_expiry("db", "c", 1'000'000);
    times.forecast = elapsed_ms(started);
    EXPECT_TRUE(forecast.is_ok());
    if (forecast.is_ok()) {
      EXPECT_EQ(forecast->backlog_items, 0);
      EXPECT_EQ(forecast->entries_read, 0);  // the tombstones are stepped over, never counted
    }
    started = std::chrono::steady_clock::now();
    Result<std::optional<int64_t>> next = store_->expiry().next_expiry_after(store_->applied().ts_micros);
    times.next_expiry = elapsed_ms(started);
    EXPECT_TRUE(next.is_ok() && !next->has_value());
    started = std::chrono::steady_clock::now();
    OpResult page = store_->reader().list_items(ListRequest{"db", "c", std::nullopt, 100, ""}, store_->applied().ts_micros);
    times.list = elapsed_ms(started);
    EXPECT_EQ(page.body, "[]");
    return times;
  }
  // The first backlog count after a restart: it reads the expiry indexes from their start (ms).
  double time_first_count_after_restart() {
    reopen();
    const auto started = std::chrono::steady_clock::now();
    Result<Backlog> backlog = store_->expiry().backlog("db", "c", std::numeric_limits<size_t>::max());
    const double ms = elapsed_ms(started);
    EXPECT_TRUE(backlog.is_ok() && backlog->items == 0 && backlog->complete);
    return ms;
  }

  ManualClock clock_;
  metrics::Metrics metrics_;
  node::RequestUnitAccount account_;
};

// Scraped value of a node-labelled series (-1: absent).
double scraped(const metrics::Metrics& metrics, const std::string& name) {
  const std::string text = metrics.scrape_text();
  const std::string series = name + "{node=\"1\"} ";
  const size_t found = text.find(series);
  return found == std::string::npos ? -1 : std::stod(text.substr(found + series.size()));
}

TEST_F(GcCompact, AMassExpiryIsCompactedOffTheDriverThreadAndItsRangesEmpty) {
  constexpr int kItems = 50'000;
  write_items(kItems);
  const Ranges ranges(crid());
  expire_and_collect(kItems);

  // The collector drained four ranges: every item, both expiry indexes (half the items each) and the ts index.
  std::map<KeyTag, int64_t> drained;
  for (const DrainedRange& range : store_->expiry().drained_ranges()) drained[range.tag] = range.deleted;
  EXPECT_EQ(drained, (std::map<KeyTag, int64_t>{{KeyTag::kItem, kItems},
                                                 {KeyTag::kOwnExpiryIndex, kItems / 2},
                                                 {KeyTag::kInheritExpiryIndex, kItems / 2},
                                                 {KeyTag::kTsIndex, kItems}}));
  flush_memtable();
  std::map<KeyTag, uint64_t> before;
  for (const auto& [tag, range] : ranges.all) before[tag] = bytes(range);
  const ScanTimes slow = time_scans();

  // The compactor, as the driver runs it after each collector pass: one range at a time on its thread.
  node::GcCompactor compactor(store_->expiry(), metrics_, node::GcCompactOptions{1000, 10'000});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int64_t loop_micros = 0;
  int started = 0;
  while (compactor.compactions() < 4 && std::chrono::steady_clock::now() < deadline) {
    Result<bool> poll = compactor.poll(loop_micros, /*busy=*/false, /*background=*/true);
    ASSERT_TRUE(poll.is_ok()) << poll.status().to_string();
    started += *poll ? 1 : 0;
    EXPECT_LE(started, static_cast<int>(compactor.compactions()) + 1) << "one range at a time";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // waiting, not measuring
    loop_micros += 5000;
  }
  compactor.join();
  ASSERT_EQ(compactor.compactions(), 4u) << "the drained ranges were not compacted within 120 s";
  EXPECT_EQ(compactor.compacted_keys(), 3 * kItems);
  EXPECT_TRUE(store_->expiry().drained_ranges().empty());
  EXPECT_EQ(scraped(metrics_, "mayfly_ttl_gc_compactions_total"), 4);
  EXPECT_EQ(scraped(metrics_, "mayfly_ttl_gc_compacted_keys_total"), 3 * kItems);
  EXPECT_GT(scraped(metrics_, "mayfly_ttl_gc_compaction_seconds_total"), 0);
  std::printf("4 range compactions took %.3f s on the compaction thread\n",
              scraped(metrics_, "mayfly_ttl_gc_compaction_seconds_total"));

  flush_memtable();
  for (const auto& [tag, range] : ranges.all) {
    const uint64_t after = bytes(range);
    std::printf("%-20s %9llu bytes of tombstones and hidden values before, %6llu after\n", drained_range_name(tag),
                static_cast<unsigned long long>(before[tag]), static_cast<unsigned long long>(after));
    EXPECT_GE(before[tag], 100'000u) << drained_range_name(tag) << ": the measure saw no tombstones at all";
    EXPECT_LE(after, 16'384u) << drained_range_name(tag) << ": tombstones left after the compaction";
  }
  const ScanTimes fast = time_scans();
  std::printf("after %d expired items: forecast %.2f ms -> %.2f ms, next expiry %.3f ms -> %.3f ms, "
              "first list page %.2f ms -> %.2f ms (before -> after the compactions)\n",
              kItems, slow.forecast, fast.forecast, slow.next_expiry, fast.next_expiry, slow.list, fast.list);
}

TEST_F(GcCompact, OneRangeAtATimeAtMostOncePerIntervalNeverWhileBusyNorBelowTheThreshold) {
  constexpr int kItems = 400;
  write_items(kItems);
  expire_and_collect(kItems);
  // 200 deletes in each expiry index, 400 in the ts index and the items: a threshold of 300 leaves the indexes out.
  {
    node::GcCompactor compactor(store_->expiry(), metrics_, node::GcCompactOptions{1'000'000, 300});
    Result<bool> poll = compactor.poll(0, /*busy=*/true, /*background=*/false);
    ASSERT_TRUE(poll.is_ok());
    EXPECT_FALSE(*poll) << "never while the node is busy";
    for (int64_t t : {int64_t{0}, int64_t{999'999}, int64_t{1'000'000}, int64_t{2'000'000}}) {
      poll = compactor.poll(t, false, false);
      ASSERT_TRUE(poll.is_ok());
      EXPECT_EQ(*poll, t == 0 || t == 1'000'000) << "at " << t << " µs";
    }
    EXPECT_EQ(compactor.compactions(), 2u);
    EXPECT_EQ(compactor.compacted_keys(), 2 * kItems);  // the items and the ts index, 400 keys each
    std::vector<KeyTag> left;
    for (const DrainedRange& range : store_->expiry().drained_ranges()) left.push_back(range.tag);
    EXPECT_EQ(left, (std::vector<KeyTag>{KeyTag::kOwnExpiryIndex, KeyTag::kInheritExpiryIndex}));
  }
  {
    node::GcCompactor off(store_->expiry(), metrics_, node::GcCompactOptions{0, 1});
    Result<bool> poll = off.poll(0, false, false);
    ASSERT_TRUE(poll.is_ok());
    EXPECT_FALSE(*poll) << "an interval of 0 turns compaction off";
  }
  // On the thread: its end is noted by the first poll after it, and the next one waits the interval from then.
  node::GcCompactor threaded(store_->expiry(), metrics_, node::GcCompactOptions{1000, 1});
  Result<bool> poll = threaded.poll(0, false, true);
  ASSERT_TRUE(poll.is_ok() && *poll);
  threaded.join();  // what the driver's stop does: wait for the one under way
  EXPECT_FALSE(threaded.running());
  EXPECT_EQ(threaded.compactions(), 1u);
  for (int64_t t : {int64_t{10'000}, int64_t{10'999}, int64_t{11'000}}) {
    poll = threaded.poll(t, false, true);
    ASSERT_TRUE(poll.is_ok());
    EXPECT_EQ(*poll, t == 11'000) << "at " << t << " µs";
    if (t < 11'000) {
      EXPECT_FALSE(threaded.running());
    }
  }
  threaded.join();
  EXPECT_EQ(threaded.compactions(), 2u);
  EXPECT_TRUE(store_->expiry().drained_ranges().empty());
}

TEST_F(GcCompact, AnItemRangeWaitsUntilAtLeastHalfOfItIsGone) {
  // 400 items, then 1,000 more that outlive the collection (no ttl of their own, defaultTtl 10 s: written at 3600 s).
  constexpr int kItems = 400;
  write_items(kItems);
  expire_and_collect(kItems);
  store_->begin_apply_group();
  for (int i = kItems; i < kItems + 1000; ++i) {
    std::string body = item(i + 1);  // odd: inheriting
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", body), at(3600) + i).http_status(), 201);
  }
  ASSERT_TRUE(store_->end_apply_group().is_ok());
  ASSERT_EQ(stored_items(), 1000);
  // 400 item keys deleted, 1,000 stored: the item range is not worth it, the index ranges are.
  std::vector<KeyTag> taken;
  while (std::optional<DrainedRange> range = store_->expiry().take_drained_range(100)) taken.push_back(range->tag);
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(taken, (std::vector<KeyTag>{KeyTag::kOwnExpiryIndex, KeyTag::kInheritExpiryIndex, KeyTag::kTsIndex}));
  ASSERT_EQ(store_->expiry().drained_ranges().size(), 1u);
  EXPECT_EQ(store_->expiry().drained_ranges()[0].tag, KeyTag::kItem);
}

TEST_F(GcCompact, ADroppedContainersKeysAreADrainedRangeToo) {
  constexpr int kItems = 300;
  write_items(kItems);
  ASSERT_EQ(apply(target_command(CommandType::kDeleteContainer, "db", "c", "", ""), at(1)).http_status(), 204);
  int64_t reclaimed = 0;
  for (int call = 0; call < 100; ++call) {
    Result<int64_t> done = store_->expiry().reclaim_dropped(100);
    ASSERT_TRUE(done.is_ok());
    if (*done == 0) break;
    reclaimed += *done;
  }
  EXPECT_EQ(reclaimed, 3 * kItems);  // each item, its expiry index entry and its ts index entry
  std::map<KeyTag, int64_t> drained;
  for (const DrainedRange& range : store_->expiry().drained_ranges()) drained[range.tag] = range.deleted;
  EXPECT_EQ(drained, (std::map<KeyTag, int64_t>{{KeyTag::kItem, kItems},
                                                 {KeyTag::kOwnExpiryIndex, kItems / 2},
                                                 {KeyTag::kInheritExpiryIndex, kItems / 2},
                                                 {KeyTag::kTsIndex, kItems}}));
  std::optional<DrainedRange> first = store_->expiry().take_drained_range(kItems);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->tag == KeyTag::kItem || first->tag == KeyTag::kTsIndex) << "the dropped container's items count";
}

// Not an assertion on time: prints the first scans after a mass expiry with and without the compaction of the
// drained ranges (MAYFLY_GC_COMPACT_ITEMS sets the number of items, 50,000 by default).
TEST_F(GcCompact, FirstScansAfterAMassExpiryWithAndWithoutCompaction) {
  const char* env = std::getenv("MAYFLY_GC_COMPACT_ITEMS");
  const int items = env != nullptr ? std::atoi(env) : 50'000;
  ASSERT_GT(items, 0);
  write_items(items);
  expire_and_collect(items);
  const std::vector<DrainedRange> drained = store_->expiry().drained_ranges();
  ASSERT_EQ(drained.size(), 4u);
  flush_memtable();
  const Ranges ranges(crid());
  uint64_t before = 0;
  for (const auto& [tag, range] : ranges.all) before += bytes(range);
  const ScanTimes slow = time_scans();
  const double slow_restart = time_first_count_after_restart();
  // The same compactions the GcCompactor would run (the restart forgot the ranges it tracked).
  for (const DrainedRange& range : drained) store_->expiry().compact(range);
  const ScanTimes fast = time_scans();
  const double fast_restart = time_first_count_after_restart();
  flush_memtable();
  uint64_t after = 0;
  for (const auto& [tag, range] : ranges.all) after += bytes(range);
  std::printf("%d expired items collected; the drained ranges measure %llu bytes, %llu once compacted; without -> "
              "with their compaction:\n"
              "  forecast (its backlog part)            %8.2f ms -> %6.2f ms\n"
              "  next expiry lookup                     %8.3f ms -> %6.3f ms\n"
              "  first list page of the container       %8.2f ms -> %6.2f ms\n"
              "  first backlog count after a restart    %8.2f ms -> %6.2f ms\n",
              items, static_cast<unsigned long long>(before), static_cast<unsigned long long>(after), slow.forecast,
              fast.forecast, slow.next_expiry, fast.next_expiry, slow.list, fast.list,
              slow_restart, fast_restart);
}

}  // namespace
}  // namespace mayfly::storage::testing

namespace mayfly::node {
namespace {

using storage::testing::kT0;

class RecordingOutput final : public DriverOutput {
 public:
  void deliver(DriverBatch batch) override {
    for (auto& [id, reply] : batch.replies) statuses[id] = reply.result.http_status();
  }
  std::map<uint64_t, int> statuses;
};

// The node's side: the driver polls its compactor after every collector pass (on a simulated loop the compaction
// runs inline), spaces compactions by --gc-compact-interval-ms and waits for none once stopped.
TEST(GcCompactDriver, ADriverCompactsWhatItsCollectorDrainedOneRangePerInterval) {
  storage::testing::TempDir dir;
  storage::ReplicaOptions options;
  options.data_dir = dir.path();
  options.raft.self = NodeId(1);
  options.bootstrap.voters.insert(NodeId(1));
  auto replica = storage::Replica::open(options);
  ASSERT_TRUE(replica.is_ok()) << replica.status().to_string();
  NodeConfig config;
  config.id = NodeId(1);
  config.data_dir = dir.path();
  config.gc_compact_min_deletes = 200;
  config.gc_compact_interval_ms = 1000;
  ManualClock clock(kT0);
  metrics::Metrics metrics(1);
  RequestUnitAccount request_units(clock, metrics);
  ManualLoop loop;
  Driver driver(config, std::move(replica).value(), clock, metrics, request_units, &loop);
  RecordingOutput output;
  driver.start(output);
  auto advance = [&](int64_t micros) {
    clock.advance_micros(micros);
    loop.advance_to(loop.now_micros() + micros);
  };
  for (int step = 0; step < 100 && driver.view().role != replication::Role::kLeader; ++step) advance(10'000);
  ASSERT_EQ(driver.view().role, replication::Role::kLeader);

  uint64_t next_id = 1;
  auto write = [&](api::Request request) {
    const uint64_t id = next_id++;
    driver.on_request(id, std::move(request));
    return id;
  };
  api::ContainerSettings settings;
  settings.partition_key_path = "/pk";
  settings.default_ttl = api::ContainerSettings::DefaultTtl::kSet;
  settings.default_ttl_json = "1";
  std::vector<uint64_t> ids = {write(api::Request{.database = "db", .operation = api::CreateDatabase{}})};
  advance(10'000);
  ids.push_back(write(api::Request{.database = "db", .container = "c", .operation = api::CreateContainer{settings}}));
  advance(10'000);
  constexpr int kItems = 500;  // inheriting the defaultTtl of 1 s: the items, the inheriting index, the ts index
  for (int i = 0; i < kItems; ++i) {
    const std::string body = R"({"id":"i)" + std::to_string(i) + R"(","pk":"p)" + std::to_string(i % 8) + R"("})";
    ids.push_back(write(api::Request{.database = "db", .container = "c", .operation = api::CreateItem{body}}));
    if (i % 100 == 99) advance(10'000);
  }
  advance(10'000);
  for (uint64_t id : ids) ASSERT_LT(output.statuses[id], 300) << "request " << id;

  // Time moves on: the items expire, the collector deletes them, and the three ranges are compacted a second apart.
  std::vector<int64_t> compacted_at;
  for (int step = 0; step < 3000 && driver.gc_compactor().compactions() < 3; ++step) {
    const uint64_t before = driver.gc_compactor().compactions();
    advance(10'000);
    if (driver.gc_compactor().compactions() > before) compacted_at.push_back(loop.now_micros());
  }
  EXPECT_EQ(driver.gc_items_collected(), kItems);
  ASSERT_EQ(driver.gc_compactor().compactions(), 3u);
  EXPECT_EQ(driver.gc_compactor().compacted_keys(), 3 * kItems);
  ASSERT_EQ(compacted_at.size(), 3u);
  EXPECT_GE(compacted_at[1] - compacted_at[0], 1'000'000);
  EXPECT_GE(compacted_at[2] - compacted_at[1], 1'000'000);
  EXPECT_NE(metrics.scrape_text().find("mayfly_ttl_gc_compactions_total{node=\"1\"} 3"), std::string::npos);
  driver.stop();
}

}  // namespace
}  // namespace mayfly::node
