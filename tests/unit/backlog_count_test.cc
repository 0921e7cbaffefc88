// Bounded scans on the driver thread (issue #10): the backlog count advances a bounded step per call and resumes
// where it stopped, staying exact through removals and moving bounds; a list page stops after kMaxListExamined
// records; dropped containers are reclaimed in bounded calls that resume; the collector's pass is bounded by its work
// budget and takes containers in turn. Real LevelDB in temp dirs.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "metrics/metrics.h"
#include "node/collector.h"
#include "node/ru_account.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

using Dump = std::vector<std::pair<std::string, std::string>>;

int64_t at(int64_t seconds) { return kT0 + seconds * kSecond; }

std::string item(int i, const std::string& extra = "") {
  char id[16];
  std::snprintf(id, sizeof(id), "i%05d", i);
  std::string body = std::string(R"({"id":")") + id + R"(","pk":"p)" + std::to_string(i % 7) + "\"";
  if (!extra.empty()) body += "," + extra;
  return body + "}";
}

class BacklogCount : public StoreFixture {
 protected:
  BacklogCount() { backlog_count_step_ = 100; }

  void write(CommandType type, const std::string& body, int64_t ts) {
    OpResult result = apply(item_command(type, "db", "c", body), ts);
    ASSERT_LT(result.http_status(), 300) << result.message;
  }
  void tick(int64_t ts) { ASSERT_EQ(apply(Command{}, ts).http_status(), 200); }
  void set_default_ttl(const std::string& seconds, int64_t ts) {
    ASSERT_EQ(apply(set_default_ttl_command("db", "c", seconds), ts).http_status(), 200);
  }

  Backlog backlog(size_t max_entries) {
    Result<Backlog> result = store_->expiry().backlog("db", "c", max_entries);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? *result : Backlog{};
  }
  ContainerStats stats(size_t max_entries) {
    Result<ContainerStats> result = store_->expiry().container_stats("db", "c", max_entries);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? *result : ContainerStats{};
  }
  // Calls backlog() with the store's step until the count is complete; every call reads at most the step, and the
  // counted figures never exceed the truth (`expired`, when given) on the way.
  Backlog count_to_the_end(int* calls, int64_t expired = -1) {
    Backlog last;
    for (*calls = 0; *calls < 100000; ++*calls) {
      Result<Backlog> result = store_->expiry().backlog("db", "c");
      EXPECT_TRUE(result.is_ok()) << result.status().to_string();
      if (!result.is_ok()) return {};
      EXPECT_LE(result->entries_read, static_cast<int64_t>(backlog_count_step_));
      if (expired >= 0) {
        EXPECT_LE(result->items, expired);
      }
      last = *result;
      if (last.complete) {
        ++*calls;
        return last;
      }
    }
    ADD_FAILURE() << "the count never completed";
    return last;
  }
  // Live items at the applied time, by listing every page (an independent truth for the backlog: stored - live).
  int64_t live_by_listing() {
    int64_t live = 0;
    std::string continuation;
    for (int page = 0; page < 10000; ++page) {
      ListRequest request{"db", "c", std::nullopt, kMaxListItems, continuation};
      OpResult result = store_->reader().list_items(request, store_->applied().ts_micros);
      EXPECT_EQ(result.http_status(), 200) << result.message;
      if (!result.ok()) break;
      if (result.body != "[]") live += std::count(result.body.begin(), result.body.end(), '{');
      if (result.continuation.empty()) break;
      continuation = result.continuation;
    }
    return live;
  }
  // The same figures counted from scratch in one call: reopening drops the in-memory tracker.
  Backlog recounted_from_scratch() {
    reopen();
    Backlog fresh = backlog(std::numeric_limits<size_t>::max());
    EXPECT_TRUE(fresh.complete);
    return fresh;
  }
};

TEST_F(BacklogCount, ALargeBacklogIsCountedOverSeveralCallsToTheExactFigures) {
  make_container("100000");
  constexpr int kItems = 2345;
  int inheriting = 0;
  for (int i = 0; i < kItems; ++i) {
    // Odd items carry their own ttl (the own-ttl index), even ones inherit the default (the inheriting index).
    write(CommandType::kCreateItem, item(i, i % 2 == 1 ? "\"ttl\":2000" : ""), kT0 + i);
    inheriting += i % 2 == 0 ? 1 : 0;
  }
  ASSERT_EQ(stats(0).backlog.items, 0);
  // A defaultTtl change expires every inheriting item at once.
  set_default_ttl("1", at(5));
  Backlog first = backlog(100);
  EXPECT_FALSE(first.complete);
  EXPECT_EQ(first.items, 100);
  EXPECT_EQ(first.entries_read, 100);
  ASSERT_TRUE(first.oldest_expiry_micros.has_value());  // exact even while counting
  EXPECT_EQ(*first.oldest_expiry_micros, at(1));
  // Meanwhile the live figure is an upper bound: stored minus what is counted so far.
  const ContainerStats partial = stats(0);
  EXPECT_FALSE(partial.backlog.complete);
  EXPECT_EQ(partial.backlog.items, 100);
  EXPECT_EQ(partial.live_items, kItems - 100);
  int calls = 0;
  Backlog whole = count_to_the_end(&calls, inheriting);
  EXPECT_EQ(whole.items, inheriting);
  EXPECT_GE(calls, (inheriting - 100) / 100);
  EXPECT_LE(calls, (inheriting - 100) / 100 + 2);
  EXPECT_EQ(stats(0).live_items, kItems - inheriting);
  EXPECT_EQ(stats(0).live_items, live_by_listing());
  const Backlog fresh = recounted_from_scratch();
  EXPECT_EQ(fresh.items, whole.items);
  EXPECT_EQ(fresh.bytes, whole.bytes);

  // Time moves past every own expiry: the second index is counted the same way, after a restart of the count.
  tick(at(2000));
  Backlog restarted = backlog(100);
  EXPECT_FALSE(restarted.complete);
  whole = count_to_the_end(&calls, kItems);
  EXPECT_EQ(whole.items, kItems);
  const ContainerStats end = stats(0);
  EXPECT_TRUE(end.backlog.complete);
  EXPECT_EQ(end.backlog.bytes, end.stored_bytes);
  EXPECT_EQ(end.live_items, 0);
  EXPECT_EQ(live_by_listing(), 0);
}

TEST_F(BacklogCount, RemovalsAndNewExpiriesDuringAPartialCountKeepItExact) {
  backlog_count_step_ = 50;
  reopen();
  make_container("100000");
  constexpr int kItems = 600;
  // One second apart, so every item has its own expiry instant and the collector's oldest-first order is the key
  // order of the inheriting index (the count's order).
  for (int i = 0; i < kItems; ++i) write(CommandType::kCreateItem, item(i), at(i));
  set_default_ttl("1", at(700));
  int64_t counted = 0;
  for (int call = 0; call < 4; ++call) counted = backlog(50).items;
  ASSERT_EQ(counted, 200);  // the 200 oldest writes: the inheriting index is in write order
  // Overwrites remove expired entries on both sides of the count's position (items 0-9 counted, 590-599 not): the
  // new versions are live.
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 590, 591, 592, 593, 594, 595, 596, 597, 598, 599}) {
    write(CommandType::kUpsertItem, item(i, "\"v\":2"), at(701));
  }
  EXPECT_EQ(backlog(0).items, 190);
  // The collector deletes oldest first: 100 counted items (10-109)...
  Result<CollectResult> collected = store_->expiry().collect_expired("db", "c", store_->applied().ts_micros, 100);
  ASSERT_TRUE(collected.is_ok());
  ASSERT_EQ(collected->items, 100);
  EXPECT_EQ(backlog(0).items, 90);
  // ... then 150 more, past the position: the last 90 counted ones (110-199) and 60 not yet counted (200-259).
  collected = store_->expiry().collect_expired("db", "c", store_->applied().ts_micros, 150);
  ASSERT_TRUE(collected.is_ok());
  ASSERT_EQ(collected->items, 150);
  EXPECT_EQ(backlog(0).items, 0);
  EXPECT_FALSE(backlog(0).complete);
  EXPECT_EQ(backlog(20).items, 20);  // 260-279
  // Then the overwritten items expire too (defaultTtl 1 s): the bound moves while the count is unfinished.
  tick(at(710));
  int calls = 0;
  const Backlog whole = count_to_the_end(&calls, kItems - 250);
  const ContainerStats end = stats(0);
  EXPECT_EQ(whole.items, kItems - 250);
  EXPECT_EQ(end.stored_items, kItems - 250);
  EXPECT_EQ(end.backlog.bytes, end.stored_bytes);
  EXPECT_EQ(live_by_listing(), 0);
  const Backlog fresh = recounted_from_scratch();
  EXPECT_EQ(fresh.items, whole.items);
  EXPECT_EQ(fresh.bytes, whole.bytes);
}

TEST_F(BacklogCount, CollectingEverythingBeforeTheCountFinishesLeavesZero) {
  make_container("100000");
  for (int i = 0; i < 500; ++i) write(CommandType::kCreateItem, item(i), kT0 + i);
  set_default_ttl("1", at(5));
  EXPECT_EQ(backlog(100).items, 100);
  for (int pass = 0; pass < 10; ++pass) {
    Result<CollectResult> collected = store_->expiry().collect_expired("db", "c", store_->applied().ts_micros, 77);
    ASSERT_TRUE(collected.is_ok());
  }
  const Backlog left = backlog(0);
  EXPECT_EQ(left.items, 0);
  EXPECT_FALSE(left.complete);  // not read to the bound yet; nothing left below it either
  EXPECT_FALSE(left.oldest_expiry_micros.has_value());
  int calls = 0;
  EXPECT_EQ(count_to_the_end(&calls, 0).items, 0);
  EXPECT_EQ(stats(0).stored_items, 0);
}

// ---- list pages --------------------------------------------------------------------------------------------------

class ListCap : public StoreFixture {};

TEST_F(ListCap, APageStopsAfterTenThousandRecordsReadWithAContinuation) {
  make_container("100000");
  const int expired = static_cast<int>(kMaxListExamined) + 5;
  // Partition "a" sorts first: a run of items that will all have expired; then three in "b" that never expire.
  for (int i = 0; i < expired; ++i) {
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c",
                                 R"({"id":")" + std::to_string(100000 + i) + R"(","pk":"a"})"),
                    kT0 + i)
                  .http_status(),
              201);
  }
  for (const char* id : {"x", "y", "z"}) {
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c",
                                 std::string(R"({"id":")") + id + R"(","pk":"b","ttl":-1})"),
                    at(1))
                  .http_status(),
              201);
  }
  // While everything is alive pages are full and the cap is never what ends them.
  ListRequest alive{"db", "c", std::nullopt, kMaxListItems, ""};
  OpResult page = store_->reader().list_items(alive, at(4));
  EXPECT_EQ(std::count(page.body.begin(), page.body.end(), '{'), static_cast<long>(kMaxListItems));
  EXPECT_EQ(page.expired_skipped, 0);
  EXPECT_FALSE(page.continuation.empty());
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "1"), at(5)).http_status(), 200);
  ListRequest request{"db", "c", std::nullopt, 100, ""};
  OpResult first = store_->reader().list_items(request, at(5));
  ASSERT_EQ(first.http_status(), 200) << first.message;
  EXPECT_EQ(first.body, "[]");
  EXPECT_EQ(first.expired_skipped, static_cast<int64_t>(kMaxListExamined));
  ASSERT_FALSE(first.continuation.empty()) << "an empty page that stopped early must say where to resume";
  request.continuation = first.continuation;
  OpResult second = store_->reader().list_items(request, at(5));
  ASSERT_EQ(second.http_status(), 200) << second.message;
  EXPECT_EQ(second.expired_skipped, 5);
  EXPECT_NE(second.body.find(R"("id":"x")"), std::string::npos) << second.body;
  EXPECT_NE(second.body.find(R"("id":"z")"), std::string::npos) << second.body;
  EXPECT_TRUE(second.continuation.empty());
  // One partition: the same cap, the same resumption.
  ListRequest partition{"db", "c", std::string("\"a\""), 100, ""};
  OpResult only_a = store_->reader().list_items(partition, at(5));
  EXPECT_EQ(only_a.body, "[]");
  EXPECT_FALSE(only_a.continuation.empty());
  partition.continuation = only_a.continuation;
  OpResult rest_of_a = store_->reader().list_items(partition, at(5));
  EXPECT_EQ(rest_of_a.body, "[]");
  EXPECT_EQ(rest_of_a.expired_skipped, 5);
  EXPECT_TRUE(rest_of_a.continuation.empty());
}

// ---- reclaiming dropped containers ------------------------------------------------------------------------------

TEST_F(ListCap, ADroppedContainerIsReclaimedInBoundedCallsThatResume) {
  make_container("100000");
  for (int i = 0; i < 400; ++i) {
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", item(i, i % 3 == 0 ? "\"ttl\":50" : "")),
                    kT0 + i)
                  .http_status(),
              201);
  }
  ASSERT_EQ(apply(target_command(CommandType::kDeleteContainer, "db", "c", "", ""), at(1)).http_status(), 204);
  // Each item has three keys (the item, its expiry index entry, its `_ts` index entry).
  int64_t total = 0;
  int calls = 0;
  for (; calls < 1000; ++calls) {
    Result<int64_t> reclaimed = store_->expiry().reclaim_dropped(64);
    ASSERT_TRUE(reclaimed.is_ok()) << reclaimed.status().to_string();
    EXPECT_LE(*reclaimed, 64);
    total += *reclaimed;
    if (*reclaimed == 0) break;
  }
  EXPECT_EQ(total, 3 * 400);
  EXPECT_EQ(calls, (3 * 400 + 63) / 64);
  Result<Dump> after = store_->dump(true);
  ASSERT_TRUE(after.is_ok());
  for (const auto& [key, value] : *after) {
    const uint8_t tag = static_cast<uint8_t>(key[0]);
    EXPECT_FALSE(tag == 0x04 || tag == 0x05 || tag == 0x06 || tag == 0x07 || tag == 0x09 || tag == 0x20)
        << "left behind: key tag " << static_cast<int>(tag);
  }
}

// ---- the node's collector ----------------------------------------------------------------------------------------

class CollectorPasses : public StoreFixture {
 protected:
  CollectorPasses() : clock_(kT0), metrics_(1), account_(clock_, metrics_) {}
  ManualClock clock_;
  metrics::Metrics metrics_;
  node::RequestUnitAccount account_;
};

TEST_F(CollectorPasses, APassStaysWithinItsWorkBudgetAndEveryContainerGetsItsTurn) {
  constexpr int kContainers = 30;
  constexpr int kItems = 20;
  int64_t ts = kT0;
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), ts).http_status(), 201);
  for (int c = 0; c < kContainers; ++c) {
    const std::string name = "c" + std::to_string(100 + c);
    ASSERT_EQ(apply(create_container_command("db", name, "/pk", "10"), ++ts).http_status(), 201);
    for (int i = 0; i < kItems; ++i) {
      ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", name, item(i)), ++ts).http_status(), 201);
    }
  }
  ASSERT_EQ(apply(Command{}, at(20)).http_status(), 200);  // everything expired
  clock_.set_micros(at(20));
  node::CollectorOptions options;
  options.batch_items_max = 5;
  options.pass_work_max = 2000;
  node::Collector collector(store_->expiry(), account_, metrics_, clock_, options);
  ASSERT_EQ(collector.pass_work(), 2000u);
  auto stored = [&](int c) {
    Result<ContainerStats> stats = store_->expiry().container_stats("db", "c" + std::to_string(100 + c), 0);
    EXPECT_TRUE(stats.is_ok());
    return stats.is_ok() ? stats->stored_items : -1;
  };
  int64_t deleted = 0;
  int passes = 0;
  for (; passes < 10000 && deleted < kContainers * kItems; ++passes) {
    Result<int64_t> pass = collector.run_once();
    ASSERT_TRUE(pass.is_ok()) << pass.status().to_string();
    deleted += *pass;
    EXPECT_LE(collector.last_pass_work(), collector.pass_work());
    EXPECT_GE(collector.last_pass_visits(), 1u);
    EXPECT_LT(collector.last_pass_visits(), static_cast<size_t>(kContainers)) << "the budget bounds the visits";
    if (passes + 1 == kContainers) {
      // In turn: by now every container was visited, and each visit deletes something.
      for (int c = 0; c < kContainers; ++c) EXPECT_LT(stored(c), kItems) << "container " << c << " had no turn";
    }
  }
  EXPECT_EQ(deleted, kContainers * kItems);
  for (int c = 0; c < kContainers; ++c) EXPECT_EQ(stored(c), 0);
  std::printf("%d passes for %d containers of %d expired items\n", passes, kContainers, kItems);
}

TEST_F(CollectorPasses, ABatchLargerThanTheBudgetRaisesTheBudget) {
  node::CollectorOptions options;
  options.batch_items_max = 5000;
  node::Collector collector(store_->expiry(), account_, metrics_, clock_, options);
  EXPECT_EQ(collector.pass_work(), node::kVisitWork + 5000 * node::kDeleteWork);
}

}  // namespace
}  // namespace mayfly::storage::testing
