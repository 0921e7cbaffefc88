// The change feed's storage core (storage/changefeed.h, docs/changefeed.md) on a real LevelDB: the feed of every
// operation and every TTL path, identical on stores that did and did not collect and on one that installed a
// snapshot, retention (410 and trimming), continuations stable while items expire between pages, O(1) apply work for
// a mass expiry, and a seeded randomized comparison with a naive model that evaluates every item at every position.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "common/clock.h"
#include "metrics/metrics.h"
#include "node/collector.h"
#include "node/ru_account.h"
#include "storage/changefeed.h"
#include "storage/feed_range.h"
#include "storage/json.h"
#include "storage/restore.h"
#include "store_fixture.h"

namespace mayfly::storage::testing {
namespace {

ChangeFeedFrom from_beginning() { return {}; }
ChangeFeedFrom from_token(std::string token) {
  ChangeFeedFrom from;
  from.kind = ChangeFeedFrom::Kind::kContinuation;
  from.continuation = std::move(token);
  return from;
}

std::string item_body(const std::string& id, std::optional<int64_t> ttl = std::nullopt, int version = 0) {
  std::string body = "{\"id\":\"" + id + "\",\"pk\":\"p" + id + "\",\"v\":" + std::to_string(version);
  if (ttl) body += ",\"ttl\":" + std::to_string(*ttl);
  return body + "}";
}

// The "v" of an encoded ItemRecord ("" when empty): which version of an item an image is.
std::string version_of(const std::string& encoded) {
  if (encoded.empty()) return "";
  Result<ItemRecord> record = decode_item(encoded);
  EXPECT_TRUE(record.is_ok());
  if (!record.is_ok()) return "?";
  Result<boost::json::value> parsed = json::parse(record->json);
  EXPECT_TRUE(parsed.is_ok());
  return boost::json::serialize(parsed->as_object().at("v"));
}

std::string op_name(const Change& change) {
  if (change.ttl_expired) return "expire";
  switch (change.operation) {
    case ChangeOperation::kCreate: return "create";
    case ChangeOperation::kReplace: return "replace";
    case ChangeOperation::kDelete: return "delete";
    case ChangeOperation::kWarning: return "warn";
  }
  return "?";
}

// "p<index>.<phase> op id v<image>/<previous>" per change: short, and every field a test cares about.
std::string describe(const std::vector<Change>& changes) {
  std::string out;
  for (const Change& change : changes) {
    out += std::to_string(change.position.index) + "." + std::to_string(change.position.phase) + " " +
           op_name(change) + " " + change.id + " " + version_of(change.image) + "/" + version_of(change.previous) +
           "\n";
  }
  return out;
}

// Reads the whole feed from `from` in pages of `page` changes; every page is kept (byte-for-byte comparisons).
struct FeedRead {
  std::vector<Change> changes;
  std::vector<std::string> continuations;
  Status status;
};
FeedRead read_feed(const StateMachine& store, ChangeFeedFrom from, size_t page = 1000,
                   ChangeFeedMode mode = ChangeFeedMode::kAll, bool only_expirations = false, size_t max_work = 10000,
                   bool only_warnings = false, bool warnings = true) {
  FeedRead out;
  ChangeFeedRequest request;
  request.database = "db";
  request.container = "c";
  request.from = std::move(from);
  request.mode = mode;
  request.only_expirations = only_expirations;
  request.only_warnings = only_warnings;
  request.warnings = warnings;
  request.max_changes = page;
  request.max_work = max_work;
  for (int pages = 0; pages < 100000; ++pages) {
    Result<ChangeFeedPage> result = store.change_feed().read(request);
    if (!result.is_ok()) {
      out.status = result.status();
      return out;
    }
    EXPECT_LE(result->changes.size(), page);
    for (Change& change : result->changes) out.changes.push_back(std::move(change));
    out.continuations.push_back(result->continuation);
    if (result->caught_up) return out;
    request.from = from_token(result->continuation);
  }
  ADD_FAILURE() << "the feed never caught up";
  return out;
}

Command feed_container_command(std::optional<std::string> default_ttl_json, int64_t retention_seconds = 3600) {
  Command command = create_container_command("db", "c", "/pk", std::move(default_ttl_json));
  command.change_feed = ChangeFeedSettings{true, retention_seconds, 0};
  return command;
}

Command warning_command(int64_t seconds) {
  Command command;
  command.type = CommandType::kUpdateContainer;
  command.database = "db";
  command.container = "c";
  command.expiry_warning_seconds = seconds;
  return command;
}

Command time_command() { return Command{}; }

// Replicated keys and bytes, to measure what applies write.
struct KeyFigures {
  size_t keys = 0;
  size_t bytes = 0;
};
KeyFigures replicated_figures(const StateMachine& store) {
  KeyFigures figures;
  Result<std::vector<std::pair<std::string, std::string>>> dump = store.dump(false);
  EXPECT_TRUE(dump.is_ok());
  for (const auto& [key, value] : *dump) {
    figures.keys += 1;
    figures.bytes += key.size() + value.size();
  }
  return figures;
}
size_t feed_keys(const StateMachine& store) {
  size_t count = 0;
  Result<std::vector<std::pair<std::string, std::string>>> dump = store.dump(false);
  for (const auto& [key, value] : *dump) {
    const uint8_t tag = static_cast<uint8_t>(key[0]);
    if (tag == static_cast<uint8_t>(KeyTag::kChangeFeed) || tag == static_cast<uint8_t>(KeyTag::kTimeIndex)) ++count;
  }
  return count;
}

class ChangeFeedTest : public StoreFixture {
 protected:
  void make_feed_container(std::optional<std::string> default_ttl_json, int64_t retention_seconds = 3600,
                           int64_t ts = kT0) {
    ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), ts).http_status(), 201);
    OpResult created = apply(feed_container_command(std::move(default_ttl_json), retention_seconds), ts);
    ASSERT_EQ(created.http_status(), 201) << created.message;
  }
  OpResult upsert(const std::string& id, std::optional<int64_t> ttl, int version, int64_t ts) {
    return apply(item_command(CommandType::kUpsertItem, "db", "c", item_body(id, ttl, version)), ts);
  }
  void collect_all() {
    Result<CollectResult> collected =
        store_->expiry().collect_expired("db", "c", store_->applied().ts_micros, 1'000'000);
    ASSERT_TRUE(collected.is_ok()) << collected.status().to_string();
  }
  std::string feed() { return describe(read_feed(*store_, from_beginning()).changes); }
};

TEST_F(ChangeFeedTest, EveryOperationWithItsImages) {
  make_feed_container(std::nullopt);  // positions 1, 2
  EXPECT_EQ(upsert("a", std::nullopt, 1, kT0 + 1).http_status(), 201);                    // 3 create
  EXPECT_EQ(upsert("a", std::nullopt, 2, kT0 + 2).http_status(), 200);                    // 4 replace (upsert)
  EXPECT_EQ(apply(item_command(CommandType::kReplaceItem, "db", "c", item_body("a", std::nullopt, 3)), kT0 + 3)
                .http_status(),
            200);  // 5 replace
  EXPECT_EQ(apply(target_command(CommandType::kPatchItem, "db", "c", "\"pa\"", "a",
                                 R"([{"op":"set","path":"/v","value":4}])"),
                  kT0 + 4)
                .http_status(),
            200);  // 6 patch = replace
  EXPECT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", item_body("a", std::nullopt, 9)), kT0 + 5)
                .http_status(),
            409);  // 7 refused: no change
  EXPECT_EQ(apply(target_command(CommandType::kDeleteItem, "db", "c", "\"pa\"", "a"), kT0 + 6).http_status(),
            204);  // 8 delete
  EXPECT_EQ(apply(target_command(CommandType::kDeleteItem, "db", "c", "\"pa\"", "a"), kT0 + 7).http_status(),
            404);  // 9 refused
  EXPECT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", item_body("a", std::nullopt, 5)), kT0 + 8)
                .http_status(),
            201);  // 10 create again
  EXPECT_EQ(feed(),
            "3.1 create a 1/\n"
            "4.1 replace a 2/1\n"
            "5.1 replace a 3/2\n"
            "6.1 replace a 4/3\n"
            "8.1 delete a /4\n"
            "10.1 create a 5/\n");
  const FeedRead all = read_feed(*store_, from_beginning());
  ASSERT_EQ(all.changes.size(), 6u);
  EXPECT_EQ(all.changes[1].ts_micros, kT0 + 2);
  EXPECT_EQ(all.changes[1].partition_key, "\"pa\"");
  // latest: only the current live version's create.
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 1000, ChangeFeedMode::kLatest).changes),
            "10.1 create a 5/\n");
}

// A feed scoped to a feed range (the SDKs' partition_key= and feed_range=) is the whole feed with only the changes of
// items whose partition key hashes into the range: every operation, expirations included, in the same order, paged
// with continuations; ranges that split the key space split the feed. A malformed range is a 400.
TEST_F(ChangeFeedTest, AFeedRangeScopesTheFeedToItsPartitionKeys) {
  make_feed_container("-1");
  int64_t ts = kT0;
  for (int round = 0; round < 3; ++round) {
    for (const char* id : {"a", "b", "c", "d", "e", "f"}) {
      const bool short_lived = round == 2 && (id[0] == 'b' || id[0] == 'e');
      ASSERT_LT(upsert(id, short_lived ? std::optional<int64_t>(2) : std::nullopt, round, ts += 1000).http_status(),
                300);
    }
  }
  ASSERT_EQ(apply(target_command(CommandType::kDeleteItem, "db", "c", "\"pc\"", "c"), ts += 1000).http_status(), 204);
  apply(time_command(), ts += 10 * kSecond);  // b and e expire (ttl 2 s on their last upserts)
  ASSERT_LT(upsert("b", 1, 9, ts += 1000).http_status(), 300);  // b again, for 1 s
  apply(time_command(), ts += 10 * kSecond);  // ... and it expires again
  const std::vector<Change> whole = read_feed(*store_, from_beginning()).changes;
  auto scoped = [&](const FeedRange& range, size_t page) {
    std::vector<Change> out;
    ChangeFeedRequest request;
    request.database = "db";
    request.container = "c";
    request.from = from_beginning();
    request.max_changes = page;
    request.feed_range_min = range.min;
    request.feed_range_max = range.max;
    for (int pages = 0; pages < 1000; ++pages) {
      Result<ChangeFeedPage> result = store_->change_feed().read(request);
      EXPECT_TRUE(result.is_ok()) << result.status().to_string();
      if (!result.is_ok()) break;
      for (Change& change : result->changes) out.push_back(std::move(change));
      if (result->caught_up) break;
      request.from = from_token(result->continuation);
    }
    return out;
  };
  auto in = [](const FeedRange& range, const Change& change) {
    return range.contains(effective_partition_key(change.partition_key).value());
  };
  size_t total = 0;
  for (const FeedRange& range : {FeedRange{"", "10"}, FeedRange{"10", "20"}, FeedRange{"20", "30"}, FeedRange{"30", "FF"}}) {
    std::vector<Change> expected;
    for (const Change& change : whole) {
      if (in(range, change)) expected.push_back(change);
    }
    EXPECT_EQ(describe(scoped(range, 2)), describe(expected)) << range.min << ".." << range.max;
    total += expected.size();
  }
  EXPECT_EQ(total, whole.size());
  // One partition key's range: exactly its changes (b: three upserts, its expiration, an upsert, an expiration).
  // (The EPKs of "pa".."pf" are distinct, so b's point range holds only b.)
  const FeedRange b = point_feed_range(effective_partition_key("\"pb\"").value());
  const std::vector<Change> only_b = scoped(b, 1000);
  ASSERT_FALSE(only_b.empty());
  for (const Change& change : only_b) EXPECT_EQ(change.id, "b");
  EXPECT_EQ(only_b.size(), static_cast<size_t>(std::count_if(whole.begin(), whole.end(),
                                                              [](const Change& c) { return c.id == "b"; })));
  ChangeFeedRequest bad;
  bad.database = "db";
  bad.container = "c";
  bad.from = from_beginning();
  bad.feed_range_min = "zz";
  Result<ChangeFeedPage> refused = store_->change_feed().read(bad);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ChangeFeedTest, ItemTtlExpiresAtTheFirstPositionThatReachesItsInstant) {
  make_feed_container("-1");
  upsert("a", 5, 1, kT0);                       // 3: E = T0 + 5 s
  upsert("b", 7, 1, kT0 + 1);                   // 4: E = T0 + 7 s
  upsert("n", -1, 1, kT0 + 2);                  // 5: ttl -1 never expires
  apply(time_command(), kT0 + 4 * kSecond);     // 6
  apply(time_command(), kT0 + 5 * kSecond);     // 7: a expires (E <= ts)
  apply(time_command(), kT0 + 9 * kSecond);     // 8: b
  apply(time_command(), kT0 + 900 * kSecond);   // 9: nothing
  const std::string expected =
      "3.1 create a 1/\n4.1 create b 1/\n5.1 create n 1/\n7.0 expire a /1\n8.0 expire b /1\n";
  EXPECT_EQ(feed(), expected);
  const FeedRead before = read_feed(*store_, from_beginning());
  collect_all();
  EXPECT_EQ(feed(), expected);  // the same after the collector moved both images to shadows
  EXPECT_EQ(read_feed(*store_, from_beginning()).changes, before.changes);
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 1000, ChangeFeedMode::kAll, true).changes),
            "7.0 expire a /1\n8.0 expire b /1\n");
  EXPECT_EQ(before.changes[3].ts_micros, kT0 + 5 * kSecond);
  // latest: only versions still current and live (the expired ones drop out).
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 1, ChangeFeedMode::kLatest).changes), "5.1 create n 1/\n");
}

TEST_F(ChangeFeedTest, InheritedDefaultAndItsCutExpireAtThePolicyPosition) {
  make_feed_container("100");
  for (int i = 0; i < 5; ++i) upsert("i" + std::to_string(i), std::nullopt, 1, kT0 + i * kSecond);  // 3..7
  upsert("own", 50, 1, kT0 + 10 * kSecond);                                                          // 8
  apply(time_command(), kT0 + 101 * kSecond);  // 9: i0 and i1 (ts T0, T0+1 s) expire under 100 s
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::string("10")), kT0 + 102 * kSecond).http_status(), 200);
  // 10: the cut expires i2..i4 at once; own (its own ttl, E = T0 + 60 s) expired at 9 already.
  apply(time_command(), kT0 + 200 * kSecond);  // 11
  const std::string expected =
      "3.1 create i0 1/\n4.1 create i1 1/\n5.1 create i2 1/\n6.1 create i3 1/\n7.1 create i4 1/\n"
      "8.1 create own 1/\n9.0 expire own /1\n9.0 expire i0 /1\n9.0 expire i1 /1\n10.0 expire i2 /1\n"
      "10.0 expire i3 /1\n10.0 expire i4 /1\n";
  EXPECT_EQ(feed(), expected);
  collect_all();
  EXPECT_EQ(feed(), expected);
}

TEST_F(ChangeFeedTest, TtlOffThenOnExpiresOnceAndNeverAgain) {
  make_feed_container("-1");
  upsert("early", 2, 1, kT0);                 // 3: E = T0 + 2 s
  upsert("late", 10, 1, kT0 + 1);             // 4: E = T0 + 10 s
  apply(time_command(), kT0 + 3 * kSecond);   // 5: early expires
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), kT0 + 4 * kSecond).http_status(), 200);  // 6 off
  apply(time_command(), kT0 + 20 * kSecond);  // 7: TTL off: late stays
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::string("-1")), kT0 + 30 * kSecond).http_status(),
            200);                             // 8 on: late expires here, early does not again
  apply(time_command(), kT0 + 40 * kSecond);  // 9
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), kT0 + 41 * kSecond).http_status(), 200);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::string("-1")), kT0 + 42 * kSecond).http_status(), 200);
  apply(time_command(), kT0 + 50 * kSecond);  // 12
  const std::string expected = "3.1 create early 1/\n4.1 create late 1/\n5.0 expire early /1\n8.0 expire late /1\n";
  EXPECT_EQ(feed(), expected);
  collect_all();
  EXPECT_EQ(feed(), expected);
}

TEST_F(ChangeFeedTest, OverwriteOfAnExpiredUncollectedItemServesItsExpirationThenACreate) {
  make_feed_container("-1");
  upsert("a", 5, 1, kT0);                                  // 3
  apply(time_command(), kT0 + 2 * kSecond);                // 4
  EXPECT_EQ(upsert("a", 5, 2, kT0 + 6 * kSecond).http_status(), 201);  // 5: v1 expired (uncollected): create
  EXPECT_EQ(feed(), "3.1 create a 1/\n5.0 expire a /1\n5.1 create a 2/\n");
  // The image of v1 lives on in a shadow only (the item key holds v2).
  EXPECT_EQ(feed(), describe(read_feed(*store_, from_beginning(), 1).changes));
}

TEST_F(ChangeFeedTest, ApplyWorkForAMassExpiryDoesNotGrowWithTheItems) {
  // The keys and bytes a policy cut adds are the same for 200 and for 1000 items it expires (both sizes keep the log
  // index and write sequence varints the same length).
  std::vector<KeyFigures> added;
  for (int items : {200, 1000}) {
    TempDir dir;
    StoreOptions options;
    options.path = dir.path() + "/db";
    auto store = std::move(StateMachine::open(options)).value();
    uint64_t index = 1;
    ASSERT_TRUE(store->apply(database_command(CommandType::kCreateDatabase, "db"), LogIndex(index++), kT0).is_ok());
    ASSERT_TRUE(store->apply(feed_container_command("1000"), LogIndex(index++), kT0).is_ok());
    for (int i = 0; i < items; ++i) {
      ASSERT_TRUE(store->apply(item_command(CommandType::kUpsertItem, "db", "c", item_body("i" + std::to_string(i))),
                               LogIndex(index++), kT0 + i)
                      .is_ok());
    }
    const KeyFigures before = replicated_figures(*store);
    ASSERT_EQ(store->apply(set_default_ttl_command("db", "c", std::string("10")), LogIndex(index++), kT0 + 20 * kSecond)
                  ->http_status(),
              200);
    const KeyFigures after = replicated_figures(*store);
    added.push_back({after.keys - before.keys, after.bytes - before.bytes});
    ChangeFeedRequest request;
    request.database = "db";
    request.container = "c";
    request.only_expirations = true;
    request.max_changes = 100000;
    Result<ChangeFeedPage> page = store->change_feed().read(request);
    ASSERT_TRUE(page.is_ok());
    EXPECT_EQ(page->changes.size(), static_cast<size_t>(items));  // every one, at the policy position
    EXPECT_EQ(page->changes.back().position.index, index - 1);
  }
  EXPECT_EQ(added[0].keys, added[1].keys);
  EXPECT_EQ(added[0].bytes, added[1].bytes);
  EXPECT_EQ(added[0].keys, 2u);  // policy history and time index (the container record is rewritten in place)
}

TEST_F(ChangeFeedTest, ContinuationIsStableWhileItemsExpireBetweenPages) {
  make_feed_container("-1");
  for (int i = 0; i < 30; ++i) upsert("i" + std::to_string(i), 5 + i % 3, 1, kT0 + i);  // 3..32
  apply(time_command(), kT0 + 6 * kSecond);  // 33: the ttl 5 ones (and nothing else) expire
  // Read a page of 3 at a time while more expire and the collector runs between pages.
  ChangeFeedRequest request;
  request.database = "db";
  request.container = "c";
  request.max_changes = 3;
  std::vector<Change> paged;
  int64_t ts = kT0 + 6 * kSecond;
  for (int pages = 0; pages < 200; ++pages) {
    Result<ChangeFeedPage> page = store_->change_feed().read(request);
    ASSERT_TRUE(page.is_ok()) << page.status().to_string();
    for (Change& change : page->changes) paged.push_back(std::move(change));
    request.from = from_token(page->continuation);
    if (pages % 2 == 0) {
      ts += kSecond / 2;
      apply(time_command(), ts);
    }
    if (pages % 3 == 0) collect_all();
    if (page->caught_up && ts > kT0 + 12 * kSecond) break;
  }
  const FeedRead whole = read_feed(*store_, from_beginning());
  ASSERT_EQ(whole.changes.size(), 60u);  // 30 creates, 30 expirations
  EXPECT_EQ(describe(paged), describe(whole.changes));
  EXPECT_EQ(paged, whole.changes);
  // A burst of 10 expirations at one position split across pages of 1 and of 4, and with a tiny work budget.
  EXPECT_EQ(read_feed(*store_, from_beginning(), 1).changes, whole.changes);
  EXPECT_EQ(read_feed(*store_, from_beginning(), 4).changes, whole.changes);
  EXPECT_EQ(read_feed(*store_, from_beginning(), 4, ChangeFeedMode::kAll, false, 2).changes, whole.changes);
}

TEST_F(ChangeFeedTest, RetentionRefusesOldPositionsWithGoneAndTheCollectorTrims) {
  make_feed_container("-1", 60);                   // retention 60 s
  FeedRead first = read_feed(*store_, from_beginning());
  ASSERT_TRUE(first.status.is_ok()) << first.status.to_string();
  const std::string early_token = first.continuations.back();
  for (int i = 0; i < 20; ++i) upsert("i" + std::to_string(i), 10, 1, kT0 + i * 10 * kSecond);  // 3..22
  const FeedRead recent = read_feed(*store_, from_beginning());
  ASSERT_TRUE(recent.status.is_ok());
  // Only the last 60 s: creates at ts >= now - 60 s (and the expirations after the start).
  EXPECT_EQ(recent.changes.front().id, "i13");
  FeedRead old = read_feed(*store_, from_token(early_token));
  EXPECT_EQ(old.status.code(), StatusCode::kGone) << old.status.to_string();
  EXPECT_NE(old.status.message().find("retention"), std::string::npos);
  ChangeFeedFrom at_time;
  at_time.kind = ChangeFeedFrom::Kind::kTime;
  at_time.ts_micros = kT0 + 10 * kSecond;
  EXPECT_EQ(read_feed(*store_, at_time).status.code(), StatusCode::kGone);
  at_time.ts_micros = kT0 + 150 * kSecond;
  EXPECT_EQ(describe({read_feed(*store_, at_time).changes.front()}), "18.0 expire i14 /1\n");
  // The collector trims in bounded batches; what may still be read stays byte-identical.
  collect_all();
  const size_t keys_before = feed_keys(*store_);
  int64_t trimmed = 0;
  for (int round = 0; round < 100; ++round) {
    Result<int64_t> step = store_->expiry().trim_change_feed(5);
    ASSERT_TRUE(step.is_ok()) << step.status().to_string();
    EXPECT_LE(*step, 5);
    trimmed += *step;
    if (*step == 0) break;
  }
  EXPECT_GT(trimmed, 0);
  EXPECT_EQ(feed_keys(*store_), keys_before - static_cast<size_t>(trimmed));
  EXPECT_LT(feed_keys(*store_), keys_before / 2);
  EXPECT_EQ(read_feed(*store_, from_beginning()).changes, recent.changes);
  // A feed turned off loses its keys to the collector.
  Command off = set_default_ttl_command("db", "c", std::string("-1"));
  off.change_feed = ChangeFeedSettings{};
  ASSERT_EQ(apply(off, kT0 + 300 * kSecond).http_status(), 200);
  EXPECT_EQ(read_feed(*store_, from_beginning()).status.code(), StatusCode::kInvalidArgument);
  while (*store_->expiry().trim_change_feed(7) > 0) {
  }
  EXPECT_EQ(feed_keys(*store_), 0u);
}

TEST_F(ChangeFeedTest, TheNodeCollectorTrimsPastRetentionInItsPasses) {
  make_feed_container("-1", 30);
  for (int i = 0; i < 20; ++i) upsert("i" + std::to_string(i), 5, 1, kT0 + i * 10 * kSecond);
  const FeedRead readable = read_feed(*store_, from_beginning());
  const size_t keys_before = feed_keys(*store_);
  ManualClock clock(kT0 + 190 * kSecond);
  metrics::Metrics metrics(1);
  node::RequestUnitAccount account(clock, metrics);
  node::CollectorOptions options;
  options.batch_items_max = 4;
  node::Collector collector(store_->expiry(), account, metrics, clock, options);
  for (int pass = 0; pass < 50; ++pass) ASSERT_TRUE(collector.run_once().is_ok());
  EXPECT_LT(feed_keys(*store_), keys_before / 2);
  EXPECT_EQ(read_feed(*store_, from_beginning()).changes, readable.changes);
}

TEST_F(ChangeFeedTest, ReadingBeforeTheFeedWasTurnedOnIsGone) {
  make_container("-1");  // feed off
  upsert("a", 100, 1, kT0 + 1);
  Command on = set_default_ttl_command("db", "c", std::string("-1"));
  on.change_feed = ChangeFeedSettings{true, 0, 0};  // default retention
  ASSERT_EQ(apply(on, kT0 + 2 * kSecond).http_status(), 200);  // 4
  upsert("b", 100, 1, kT0 + 3 * kSecond);                       // 5
  EXPECT_EQ(feed(), "5.1 create b 1/\n");
  ChangeFeedFrom at_time;
  at_time.kind = ChangeFeedFrom::Kind::kTime;
  at_time.ts_micros = kT0;
  const FeedRead before = read_feed(*store_, at_time);
  EXPECT_EQ(before.status.code(), StatusCode::kGone);
  EXPECT_NE(before.status.message().find("turned on"), std::string::npos) << before.status.message();
  ChangeFeedFrom now;
  now.kind = ChangeFeedFrom::Kind::kNow;
  EXPECT_TRUE(read_feed(*store_, now).changes.empty());
  EXPECT_EQ(read_feed(*store_, from_token("zz")).status.code(), StatusCode::kInvalidArgument);
}

TEST_F(ChangeFeedTest, WritePathCostWithTheFeedOnAndOff) {
  // Unit-level cost of keeping a feed: replicated keys and bytes added per upsert (new items, then overwrites).
  for (bool on : {false, true}) {
    TempDir dir;
    StoreOptions options;
    options.path = dir.path() + "/db";
    auto store = std::move(StateMachine::open(options)).value();
    uint64_t index = 1;
    ASSERT_TRUE(store->apply(database_command(CommandType::kCreateDatabase, "db"), LogIndex(index++), kT0).is_ok());
    Command create = create_container_command("db", "c", "/pk", std::string("3600"));
    if (on) create.change_feed = ChangeFeedSettings{true, 3600, 0};
    ASSERT_TRUE(store->apply(create, LogIndex(index++), kT0).is_ok());
    const std::string padding(200, 'x');
    for (int round = 0; round < 2; ++round) {
      const KeyFigures before = replicated_figures(*store);
      for (int i = 0; i < 100; ++i) {
        const std::string body = "{\"id\":\"i" + std::to_string(i) + "\",\"pk\":\"p\",\"pad\":\"" + padding + "\"}";
        const int64_t ts = kT0 + static_cast<int64_t>(index) * kSecond;
        ASSERT_EQ(store->apply(item_command(CommandType::kUpsertItem, "db", "c", body), LogIndex(index++), ts)
                      ->http_status(),
                  round == 0 ? 201 : 200);
      }
      const KeyFigures after = replicated_figures(*store);
      std::printf("feed %s, %s: %.2f keys and %.0f bytes per upsert (replicated state)\n", on ? "on " : "off",
                  round == 0 ? "creates   " : "overwrites", (after.keys - before.keys) / 100.0,
                  (static_cast<double>(after.bytes) - static_cast<double>(before.bytes)) / 100.0);
    }
  }
}

TEST_F(ChangeFeedTest, SettingsTravelInCommandsAndRecordsAndBadRetentionIsRefused) {
  Command command = feed_container_command("10", 120);
  Result<Command> decoded = decode_command(encode_command(command));
  ASSERT_TRUE(decoded.is_ok());
  ASSERT_TRUE(decoded->change_feed.has_value());
  EXPECT_EQ(*decoded->change_feed, (ChangeFeedSettings{true, 120, 0}));
  EXPECT_FALSE(decode_command(encode_command(time_command()))->change_feed.has_value());
  ContainerRecord record;
  record.change_feed = {true, 60, 42};
  EXPECT_EQ(decode_container(encode_container(record))->change_feed, record.change_feed);
  // A record without a feed has the bytes records had before feeds existed, and decodes as off; a torn tail is refused.
  const std::string plain = encode_container(ContainerRecord{});
  EXPECT_EQ(decode_container(plain)->change_feed, ChangeFeedSettings{});
  EXPECT_EQ(decode_container(plain + "\x01").status().code(), StatusCode::kCorruption);
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  const auto before = store_->dump(false);
  OpResult refused = apply(feed_container_command("10", -5), kT0);
  EXPECT_EQ(refused.http_status(), 400);
  EXPECT_NE(refused.message.find("retention"), std::string::npos);
  // Nothing but the applied position changed (no time index entry either).
  EXPECT_EQ(before->size(), store_->dump(false)->size());
  EXPECT_EQ(apply(feed_container_command("10", 0), kT0).http_status(), 201);  // 0: the default retention
  EXPECT_EQ(store_->reader().find_container("db", "c", nullptr)->change_feed.retention_seconds,
            kDefaultChangeFeedRetentionSeconds);
}

TEST_F(ChangeFeedTest, TheExpiryWarningTravelsInCommandsAndRecordsAndOlderBytesStayAsTheyWere) {
  // In a command, with or without a change feed setting beside it.
  Command only_warning = warning_command(90);
  Result<Command> decoded = decode_command(encode_command(only_warning));
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(decoded->expiry_warning_seconds, std::optional<int64_t>(90));
  EXPECT_FALSE(decoded->change_feed.has_value());
  Command both = feed_container_command("10", 120);
  both.expiry_warning_seconds = 0;
  decoded = decode_command(encode_command(both));
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(decoded->expiry_warning_seconds, std::optional<int64_t>(0));
  EXPECT_EQ(*decoded->change_feed, (ChangeFeedSettings{true, 120, 0}));
  // Commands without it keep their bytes (logs written before it existed replay the same).
  const Command plain_feed = feed_container_command("10", 120);
  EXPECT_FALSE(decode_command(encode_command(plain_feed))->expiry_warning_seconds.has_value());
  // In container records and the feed's policy history, with the floors; without it, the older bytes.
  ContainerRecord record;
  record.ttl.warning_seconds = 30;
  record.ttl.own_warned_below_micros = kT0;
  record.ttl.default_warned_below_micros = kT0 - 5;
  Result<ContainerRecord> back = decode_container(encode_container(record));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->ttl, record.ttl);
  EXPECT_EQ(back->change_feed, ChangeFeedSettings{});
  EXPECT_EQ(back->partitions_deleted_through_micros, 0);
  EXPECT_EQ(decode_ttl_state(encode_ttl_state(record.ttl)).value(), record.ttl);
  const ttl::ContainerTtlState older{ttl::DefaultTtl::of_seconds(7), 1, 2, 3};
  EXPECT_EQ(encode_ttl_state(older).size(), 6u);  // version, kind, four one-byte varints
  EXPECT_EQ(decode_ttl_state(encode_ttl_state(record.ttl) + "\x01").status().code(), StatusCode::kCorruption);
  record.ttl.warning_seconds = -4;
  EXPECT_EQ(decode_container(encode_container(record)).status().code(), StatusCode::kCorruption);
}

TEST_F(ChangeFeedTest, AWarningWindowNeedsTheFeedOnAndARefusalChangesNothing) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  Command without_feed = create_container_command("db", "c", "/pk", std::string("100"));
  without_feed.expiry_warning_seconds = 30;
  const auto before = store_->dump(false);
  const OpResult refused = apply(without_feed, kT0 + 1);
  EXPECT_EQ(refused.http_status(), 400);
  EXPECT_NE(refused.message.find("needs the container's change feed on"), std::string::npos) << refused.message;
  EXPECT_EQ(before->size(), store_->dump(false)->size());  // no container, no meta change beyond the position
  without_feed.expiry_warning_seconds = 0;  // 0 (off) is fine without a feed
  ASSERT_EQ(apply(without_feed, kT0 + 2).http_status(), 201);
  EXPECT_EQ(apply(warning_command(30), kT0 + 3).http_status(), 400);
  Command with_feed = warning_command(30);
  with_feed.change_feed = ChangeFeedSettings{true, 3600, 0};
  ASSERT_EQ(apply(with_feed, kT0 + 4).http_status(), 200);
  Result<ContainerRecord> record = store_->reader().find_container("db", "c", nullptr);
  ASSERT_TRUE(record.is_ok());
  EXPECT_EQ(record->ttl.warning_seconds, 30);
  EXPECT_TRUE(record->change_feed.enabled);
  // Turning the feed off later is allowed (its warnings are not served while it is off).
  Command feed_off = warning_command(30);
  feed_off.expiry_warning_seconds.reset();
  feed_off.change_feed = ChangeFeedSettings{};
  EXPECT_EQ(apply(feed_off, kT0 + 5).http_status(), 200);
}

TEST_F(ChangeFeedTest, DroppedContainersLoseTheirFeedAndTheTimeIndexStops) {
  make_feed_container("-1");
  upsert("a", 1, 1, kT0 + 1);
  apply(time_command(), kT0 + 5 * kSecond);
  collect_all();  // a shadow too
  EXPECT_GT(feed_keys(*store_), 3u);
  ASSERT_EQ(apply(database_command(CommandType::kDeleteDatabase, "db"), kT0 + 6 * kSecond).http_status(), 204);
  const size_t after_drop = feed_keys(*store_);
  apply(time_command(), kT0 + 7 * kSecond);
  EXPECT_EQ(feed_keys(*store_), after_drop) << "no container has a feed: no more time index entries";
  while (*store_->expiry().reclaim_dropped(3) > 0) {
  }
  while (*store_->expiry().trim_change_feed(3) > 0) {
  }
  EXPECT_EQ(feed_keys(*store_), 0u);
}

TEST_F(ChangeFeedTest, RestoreIntoANewClusterDropsTheFeedAndRestartsItAtTheRestoredPosition) {
  make_feed_container("-1");
  upsert("a", 1, 1, kT0 + 1);
  upsert("b", 1000, 1, kT0 + 2);
  apply(time_command(), kT0 + 5 * kSecond);
  collect_all();
  Result<RestoreFigures> restored = transform_for_restore(*store_, RestoreTtlMode::kPreserve, kT0 + 6 * kSecond, false);
  ASSERT_TRUE(restored.is_ok()) << restored.status().to_string();
  const uint64_t at = store_->applied().index.value();
  EXPECT_EQ(store_->reader().find_container("db", "c", nullptr)->change_feed.since_index, at);
  EXPECT_EQ(feed_keys(*store_), 2u);  // the policy and time index entries at the restored position
  const FeedRead empty = read_feed(*store_, from_beginning());
  ASSERT_TRUE(empty.status.is_ok()) << empty.status.to_string();
  EXPECT_TRUE(empty.changes.empty());
  upsert("c", std::nullopt, 1, kT0 + 7 * kSecond);
  EXPECT_EQ(feed(), std::to_string(at + 1) + ".1 create c 1/\n");
}

// ---- "expiring soon" warnings (docs/retention.md) ---------------------------------------------------------------


std::string warnings_of(const StateMachine& store, size_t page = 1000) {
  const FeedRead read = read_feed(store, from_beginning(), page, ChangeFeedMode::kAll, false, 10000, true);
  EXPECT_TRUE(read.status.is_ok()) << read.status.to_string();
  return describe(read.changes);
}

TEST_F(ChangeFeedTest, AWarningComesWhereReplicatedTimeFirstReachesTheInstantMinusTheWindow) {
  make_feed_container("-1");
  ASSERT_EQ(apply(warning_command(5), kT0).http_status(), 200);  // 3
  upsert("a", 10, 1, kT0 + 1);                  // 4: E = T0 + 10 s, warned from T0 + 5 s
  upsert("b", 3, 1, kT0 + 2);                   // 5: E = T0 + 3 s: written inside its window, never warned
  upsert("c", 20, 1, kT0 + 3);                  // 6: E = T0 + 20 s, rewritten before its warning
  upsert("d", 10, 1, kT0 + 4);                  // 7: E = T0 + 10 s, warned at 9, deleted at 10: still warned
  apply(time_command(), kT0 + 4 * kSecond);     // 8: b expires
  apply(time_command(), kT0 + 5 * kSecond);     // 9: a and d warned
  ASSERT_EQ(apply(target_command(CommandType::kDeleteItem, "db", "c", "\"pd\"", "d"), kT0 + 6 * kSecond)
                .http_status(), 204);            // 10
  upsert("c", 100, 2, kT0 + 7 * kSecond);       // 11: c's instant moves to T0 + 107 s
  apply(time_command(), kT0 + 10 * kSecond);    // 12: a expires
  apply(time_command(), kT0 + 102 * kSecond);   // 13: c warned
  apply(time_command(), kT0 + 107 * kSecond);   // 14: c expires
  const std::string all = feed();
  EXPECT_EQ(all,
            "4.1 create a 1/\n5.1 create b 1/\n6.1 create c 1/\n7.1 create d 1/\n8.0 expire b /1\n9.0 warn a 1/\n"
            "9.0 warn d 1/\n10.1 delete d /1\n11.1 replace c 2/1\n12.0 expire a /1\n13.0 warn c 2/\n"
            "14.0 expire c /2\n");
  EXPECT_EQ(warnings_of(*store_), "9.0 warn a 1/\n9.0 warn d 1/\n13.0 warn c 2/\n");
  // The warning's image is the item warned of, its time the position's.
  const FeedRead read = read_feed(*store_, from_beginning(), 1000, ChangeFeedMode::kAll, false, 10000, true);
  ASSERT_EQ(read.changes.size(), 3u);
  EXPECT_EQ(read.changes[0].ts_micros, kT0 + 5 * kSecond);
  EXPECT_EQ(read.changes[0].position.kind, 2);
  EXPECT_TRUE(read.changes[0].previous.empty());
  // The same after the collector moved the expired images to shadows, and page by page.
  collect_all();
  EXPECT_EQ(feed(), all);
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 1).changes), all);
  EXPECT_EQ(warnings_of(*store_, 1), "9.0 warn a 1/\n9.0 warn d 1/\n13.0 warn c 2/\n");
  // Left out on request (the Cosmos gateway), and not in the expirations-only or latest feeds.
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 3, ChangeFeedMode::kAll, false, 10000, false, false).changes),
            "4.1 create a 1/\n5.1 create b 1/\n6.1 create c 1/\n7.1 create d 1/\n8.0 expire b /1\n"
            "10.1 delete d /1\n11.1 replace c 2/1\n12.0 expire a /1\n14.0 expire c /2\n");
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 1000, ChangeFeedMode::kAll, true).changes),
            "8.0 expire b /1\n12.0 expire a /1\n14.0 expire c /2\n");
  ChangeFeedRequest both;
  both.database = "db";
  both.container = "c";
  both.only_expirations = true;
  both.only_warnings = true;
  EXPECT_EQ(store_->change_feed().read(both).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ChangeFeedTest, InheritedItemsAreWarnedAndAShrunkWindowNeverTakesAWarningBackOrRepeatsIt) {
  make_feed_container("100");
  ASSERT_EQ(apply(warning_command(30), kT0).http_status(), 200);  // 3
  upsert("i", std::nullopt, 1, kT0 + 1);         // 4: E = T0 + 100 s, warned from T0 + 70 s
  upsert("j", std::nullopt, 1, kT0 + 20 * kSecond);  // 5: E = T0 + 120 s
  apply(time_command(), kT0 + 75 * kSecond);     // 6: i warned
  ASSERT_EQ(apply(warning_command(10), kT0 + 80 * kSecond).http_status(), 200);  // 7: i stays warned, j not yet
  apply(time_command(), kT0 + 105 * kSecond);    // 8: i expires (and j is not warned: 120 - 10 > 105)
  apply(time_command(), kT0 + 110 * kSecond);    // 9: j warned
  ASSERT_EQ(apply(warning_command(0), kT0 + 111 * kSecond).http_status(), 200);  // 10: off
  upsert("k", std::nullopt, 1, kT0 + 112 * kSecond);  // 11
  apply(time_command(), kT0 + 212 * kSecond);    // 12: j (at 120) and k expire, k never warned
  EXPECT_EQ(warnings_of(*store_), "6.0 warn i 1/\n9.0 warn j 1/\n");
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 1000, ChangeFeedMode::kAll, true).changes),
            "8.0 expire i /1\n12.0 expire j /1\n12.0 expire k /1\n");
  // The container shows the window; the setting is validated.
  Result<ContainerRecord> record = store_->reader().find_container("db", "c", nullptr);
  ASSERT_TRUE(record.is_ok());
  EXPECT_EQ(record->ttl.warning_seconds, 0);
  ASSERT_EQ(apply(warning_command(45), kT0 + 213 * kSecond).http_status(), 200);
  EXPECT_NE(store_->reader().read_container("db", "c").body.find("\"expiryWarning\":45"), std::string::npos);
  const OpResult bad = apply(warning_command(-3), kT0 + 214 * kSecond);
  EXPECT_EQ(bad.http_status(), 400);
  EXPECT_EQ(bad.message, "expiryWarning must be 0 (off) or whole seconds from 1 to 2147483647, not -3");
}

// ---- the same log on stores that did and did not collect, and one that installed a snapshot ---------------------

// A seeded random log over a few items: upserts/creates/replaces/patches/deletes with own ttl, inherited or -1,
// time advances and defaultTtl changes (on, -1, off). Returns (command, ts) pairs after the db and container.
std::vector<std::pair<Command, int64_t>> random_log(std::mt19937_64& prng, int length, int64_t start) {
  std::vector<std::pair<Command, int64_t>> log;
  int64_t ts = start;
  int version = 0;
  auto pick = [&](int n) { return static_cast<int>(prng() % static_cast<uint64_t>(n)); };
  for (int i = 0; i < length; ++i) {
    ts += 1 + (pick(4) == 0 ? pick(6) * kSecond : pick(300'000));  // strictly increasing, as RaftCore stamps
    const std::string id = "i" + std::to_string(pick(8));
    std::optional<int64_t> ttl;
    switch (pick(4)) {
      case 0: ttl = 1 + pick(6); break;
      case 1: ttl = -1; break;
      default: break;
    }
    const int what = pick(20);
    Command command;
    if (what < 7) {
      command = item_command(CommandType::kUpsertItem, "db", "c", item_body(id, ttl, ++version));
    } else if (what < 9) {
      command = item_command(CommandType::kCreateItem, "db", "c", item_body(id, ttl, ++version));
    } else if (what < 11) {
      command = item_command(CommandType::kReplaceItem, "db", "c", item_body(id, ttl, ++version));
    } else if (what < 12) {
      command = target_command(CommandType::kPatchItem, "db", "c", "\"p" + id + "\"", id,
                               "[{\"op\":\"set\",\"path\":\"/v\",\"value\":" + std::to_string(++version) + "}]");
    } else if (what < 14) {
      command = target_command(CommandType::kDeleteItem, "db", "c", "\"p" + id + "\"", id);
    } else if (what < 15) {
      const int policy = pick(4);
      command = set_default_ttl_command(
          "db", "c",
          policy == 0 ? std::nullopt : std::optional<std::string>(policy == 1 ? "-1" : std::to_string(1 + pick(8))));
    } else {
      command = time_command();
    }
    log.emplace_back(std::move(command), ts);
  }
  return log;
}

struct Replica {
  TempDir dir;
  std::unique_ptr<StateMachine> store;
  Replica() {
    StoreOptions options;
    options.path = dir.path() + "/db";
    store = std::move(StateMachine::open(options)).value();
  }
};

uint64_t test_seed() { return seed_from_env("MAYFLY_FEED_SEED"); }

// The latest-version feed of a container whose feed is off (changefeed.h, "Latest version without the feed"), from
// the _ts index: after a seeded run of creates, upserts, patches, deletes, own ttls and collector passes, reading from
// the beginning, from "now" at earlier points, from a time, and from every earlier page's continuation, in random page
// sizes, gives exactly what a naive model says: every item alive now whose latest write is after the start, once, in
// write order, as it is now, with the write's log index and whether that write created it.
TEST_F(ChangeFeedTest, LatestVersionWithoutTheFeedMatchesANaiveModel) {
  const uint64_t seed = test_seed();
  std::printf("reproduce: MAYFLY_FEED_SEED=%llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("MAYFLY_FEED_SEED=" + std::to_string(seed));
  std::mt19937_64 prng(seed);
  make_container("-1");  // TTL on without a default; the feed off
  struct Latest {
    int64_t ts = 0;
    uint64_t index = 0;
    int version = 0;
    std::optional<int64_t> ttl;
    bool created = false;  // that write created the item
  };
  std::map<std::string, Latest> items;  // id -> its latest write (absent: deleted)
  struct Start {
    ChangeFeedFrom from;
    int64_t after_ts = 0;  // the model's start: items written after this
  };
  std::vector<Start> starts = {{from_beginning(), 0}};
  int64_t ts = kT0;
  auto alive_at = [](const Latest& latest, int64_t now) {
    return !latest.ttl || now < ttl::expiry_instant_micros(latest.ts, *latest.ttl);
  };
  auto expected_from = [&](int64_t after_ts) {
    const int64_t now = store_->applied().ts_micros;
    std::vector<std::pair<int64_t, std::string>> order;
    for (const auto& [id, latest] : items) {
      if (alive_at(latest, now) && latest.ts > after_ts) order.emplace_back(latest.ts, id);
    }
    std::sort(order.begin(), order.end());
    std::string out;
    for (const auto& [write_ts, id] : order) {
      const Latest& latest = items.at(id);
      out += std::to_string(latest.index) + ".2 " + (latest.created ? "create " : "replace ") + id + " " +
             std::to_string(latest.version) + "/\n";
    }
    return out;
  };
  auto check_all = [&] {
    for (const Start& start : starts) {
      const size_t page = 1 + prng() % 7;
      const FeedRead read = read_feed(*store_, start.from, page, ChangeFeedMode::kLatest, false, 1 + prng() % 20);
      ASSERT_TRUE(read.status.is_ok()) << read.status.to_string();
      EXPECT_EQ(describe(read.changes), expected_from(start.after_ts))
          << "page size " << page << ", start kind " << static_cast<int>(start.from.kind) << " after " << start.after_ts;
    }
  };
  for (int step = 0; step < 400; ++step) {
    ts += static_cast<int64_t>(1 + prng() % 400'000);
    const std::string id = std::to_string(prng() % 12);
    const uint64_t roll = prng() % 10;
    const uint64_t index = next_index_;
    if (roll < 5) {
      const std::optional<int64_t> ttl = prng() % 3 == 0 ? std::optional<int64_t>(1 + prng() % 3) : std::nullopt;
      const int version = step;
      const OpResult result = upsert(id, ttl, version, ts);
      ASSERT_LT(result.http_status(), 300) << result.message;
      const bool live = items.count(id) && alive_at(items[id], ts);
      items[id] = Latest{ts, index, version, ttl, !live};
    } else if (roll < 7) {
      const OpResult result = apply(target_command(CommandType::kPatchItem, "db", "c", "\"p" + id + "\"", id,
                                                   R"([{"op":"set","path":"/v","value":)" + std::to_string(step) + "}]"),
                                    ts);
      auto found = items.find(id);
      const bool live = found != items.end() && alive_at(found->second, ts);
      ASSERT_EQ(result.http_status(), live ? 200 : 404) << result.message;
      if (live) found->second = Latest{ts, index, step, found->second.ttl, false};
    } else if (roll < 8) {
      const OpResult result = apply(target_command(CommandType::kDeleteItem, "db", "c", "\"p" + id + "\"", id), ts);
      ASSERT_TRUE(result.http_status() == 204 || result.http_status() == 404) << result.message;
      items.erase(id);
    } else if (roll < 9) {
      collect_all();
    } else {
      // A reader that started now (its continuation), and one starting at a time (the model's "after" is the
      // instant just before it).
      ChangeFeedFrom now;
      now.kind = ChangeFeedFrom::Kind::kNow;
      const FeedRead from_now = read_feed(*store_, now, 5, ChangeFeedMode::kLatest);
      ASSERT_TRUE(from_now.status.is_ok());
      EXPECT_TRUE(from_now.changes.empty());
      starts.push_back({from_token(from_now.continuations.back()), store_->applied().ts_micros});
      ChangeFeedFrom at;
      at.kind = ChangeFeedFrom::Kind::kTime;
      at.ts_micros = ts - static_cast<int64_t>(prng() % 2'000'000);
      starts.push_back({at, at.ts_micros - 1});
      // And one resuming from a continuation taken now (caught up).
      const FeedRead read = read_feed(*store_, from_beginning(), 5, ChangeFeedMode::kLatest);
      ASSERT_TRUE(read.status.is_ok());
      starts.push_back({from_token(read.continuations.back()), store_->applied().ts_micros});
    }
    if (step % 50 == 49) check_all();
  }
  check_all();
  // All versions still needs the feed; a latest-version token cannot resume it, and a log-order read cannot start.
  const FeedRead read = read_feed(*store_, from_beginning(), 5, ChangeFeedMode::kLatest);
  EXPECT_EQ(read_feed(*store_, from_beginning()).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read_feed(*store_, from_token(read.continuations.back())).status.code(), StatusCode::kInvalidArgument);
}

// A latest-version reader keeps its place when the feed is turned on between its pages (its token is a write-time
// position, so it goes on in write order), and a feed range scopes it: the ranges of a split share out the items.
TEST_F(ChangeFeedTest, LatestVersionTokensSurviveTurningTheFeedOnAndAFeedRangeScopesThem) {
  make_container("-1");  // positions 1, 2
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(upsert(std::string(1, static_cast<char>('a' + i)), std::nullopt, 1, kT0 + 1 + i).http_status(), 201);
  }  // 3..8
  ChangeFeedRequest request;
  request.database = "db";
  request.container = "c";
  request.mode = ChangeFeedMode::kLatest;
  request.max_changes = 4;
  Result<ChangeFeedPage> first = store_->change_feed().read(request);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(describe(first->changes), "3.2 create a 1/\n4.2 create b 1/\n5.2 create c 1/\n6.2 create d 1/\n");
  EXPECT_FALSE(first->caught_up);
  Command on = set_default_ttl_command("db", "c", std::string("-1"));
  on.change_feed = ChangeFeedSettings{true, 0, 0};
  ASSERT_EQ(apply(on, kT0 + 10).http_status(), 200);                       // 9
  ASSERT_EQ(upsert("b", std::nullopt, 2, kT0 + 11).http_status(), 200);  // 10: b moves to the end
  const FeedRead rest = read_feed(*store_, from_token(first->continuation), 2, ChangeFeedMode::kLatest);
  ASSERT_TRUE(rest.status.is_ok()) << rest.status.to_string();
  EXPECT_EQ(describe(rest.changes), "7.2 create e 1/\n8.2 create f 1/\n10.2 replace b 2/\n");
  // With the feed on, a latest-version read from the beginning is the log-order feed (from when it was turned on).
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 100, ChangeFeedMode::kLatest).changes),
            "10.1 replace b 2/1\n");
  // Turned off again: from the beginning is every item once more, in write order; a feed range scopes it.
  Command off = set_default_ttl_command("db", "c", std::string("-1"));
  off.change_feed = ChangeFeedSettings{false, 0, 0};
  ASSERT_EQ(apply(off, kT0 + 12).http_status(), 200);  // 11
  EXPECT_EQ(describe(read_feed(*store_, from_beginning(), 100, ChangeFeedMode::kLatest).changes),
            "3.2 create a 1/\n5.2 create c 1/\n6.2 create d 1/\n7.2 create e 1/\n8.2 create f 1/\n"
            "10.2 replace b 2/\n");
  std::multiset<std::string> seen;
  for (const FeedRange& range : {FeedRange{"", "20"}, FeedRange{"20", "FF"}}) {
    ChangeFeedRequest scoped = request;
    scoped.max_changes = 1;
    scoped.feed_range_min = range.min;
    scoped.feed_range_max = range.max;
    for (int pages = 0; pages < 100; ++pages) {
      Result<ChangeFeedPage> page = store_->change_feed().read(scoped);
      ASSERT_TRUE(page.is_ok()) << page.status().to_string();
      for (const Change& change : page->changes) {
        EXPECT_TRUE(range.contains(effective_partition_key(change.partition_key).value())) << change.id;
        seen.insert(change.id);
      }
      if (page->caught_up) break;
      scoped.from = from_token(page->continuation);
    }
  }
  EXPECT_EQ(seen, (std::multiset<std::string>{"a", "b", "c", "d", "e", "f"}));
}

// A long stretch of positions without a change (an idle container's time entries) is skipped by a binary search, not
// walked: no page comes back empty unless it is caught up, whatever the page's work budget, and the expiration in the
// middle of the stretch is at the first position whose time reaches its instant.
TEST_F(ChangeFeedTest, LongStretchesWithoutChangesAreSkippedAndNoPageIsEmptyUnlessCaughtUp) {
  make_feed_container("-1");
  ASSERT_EQ(upsert("a", 60, 1, kT0 + kSecond).http_status(), 201);  // expires at +61 s
  std::vector<FeedPoint> stamped;
  for (int i = 1; i <= 12'000; ++i) {  // +1.01 s .. +121 s, every 10 ms: more positions than a page may examine
    const int64_t ts = kT0 + kSecond + i * 10'000;
    ASSERT_EQ(apply(time_command(), ts).http_status(), 200);
    stamped.push_back({store_->applied().index.value(), ts});
  }
  ASSERT_EQ(upsert("b", std::nullopt, 1, kT0 + 122 * kSecond).http_status(), 201);
  uint64_t expected_expiry = 0;
  for (const FeedPoint& point : stamped) {
    if (point.ts_micros >= kT0 + 61 * kSecond) {
      expected_expiry = point.index;
      break;
    }
  }
  for (const size_t max_work : {size_t{1}, size_t{100}, size_t{10'000}}) {
    SCOPED_TRACE("max_work " + std::to_string(max_work));
    ChangeFeedRequest request;
    request.database = "db";
    request.container = "c";
    request.max_changes = 1;
    request.max_work = max_work;
    std::vector<Change> changes;
    int pages = 0;
    for (; pages < 100; ++pages) {
      Result<ChangeFeedPage> page = store_->change_feed().read(request);
      ASSERT_TRUE(page.is_ok()) << page.status().to_string();
      // Its seeks past 12,000 positions without a change, then one step's positions (at most 4096, or the budget).
      EXPECT_LE(page->work, static_cast<int64_t>(std::min<size_t>(max_work, 4096)) + 40);
      if (page->caught_up) {
        EXPECT_TRUE(page->changes.empty() || changes.size() == 2) << "the last page";
      } else {
        EXPECT_EQ(page->changes.size(), 1u) << "page " << pages << " is empty but not caught up";
      }
      for (Change& change : page->changes) changes.push_back(std::move(change));
      if (page->caught_up) break;
      request.from = from_token(page->continuation);
    }
    EXPECT_LE(pages, 4);
    EXPECT_EQ(describe(changes), "3.1 create a 1/\n" + std::to_string(expected_expiry) + ".0 expire a /1\n" +
                                     std::to_string(stamped.back().index + 1) + ".1 create b 1/\n");
  }
  const FeedRead expirations = read_feed(*store_, from_beginning(), 1, ChangeFeedMode::kAll, true, 5);
  ASSERT_TRUE(expirations.status.is_ok());
  EXPECT_EQ(describe(expirations.changes), std::to_string(expected_expiry) + ".0 expire a /1\n");
  EXPECT_LE(expirations.continuations.size(), 2u);
  const FeedRead latest = read_feed(*store_, from_beginning(), 1, ChangeFeedMode::kLatest, false, 5);
  ASSERT_TRUE(latest.status.is_ok());
  EXPECT_EQ(describe(latest.changes), std::to_string(stamped.back().index + 1) + ".1 create b 1/\n");
}

// Where a read from a replicated time T, or from the beginning of retention, starts: found by a binary search over the
// time index (O(log n) seeks); here against a naive walk of every position's time as the applies stamped them, on a
// feed of irregularly spaced positions, before and after the collector trimmed a prefix of it.
TEST_F(ChangeFeedTest, StartsFromATimeOrTheRetentionStartWhereANaiveWalkOfTheTimeIndexWould) {
  const uint64_t seed = test_seed();
  std::printf("reproduce: MAYFLY_FEED_SEED=%llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("MAYFLY_FEED_SEED=" + std::to_string(seed));
  std::mt19937_64 prng(seed);
  constexpr int64_t kRetentionSeconds = 600;
  make_feed_container("-1", kRetentionSeconds);
  std::vector<FeedPoint> stamped{{store_->applied().index.value(), store_->applied().ts_micros}};
  int64_t ts = kT0;
  for (int i = 0; i < 400; ++i) {
    ts += 1 + static_cast<int64_t>(prng() % (5 * kSecond));
    if (i % 3 == 0) {
      upsert("i" + std::to_string(i % 50), 1 + static_cast<int64_t>(prng() % 30), i, ts);
    } else {
      apply(time_command(), ts);
    }
    stamped.push_back({store_->applied().index.value(), ts});
  }
  const int64_t now = store_->applied().ts_micros;
  const int64_t oldest = now - kRetentionSeconds * kSecond;
  auto naive_first_at_least = [&](int64_t at_least) -> std::optional<FeedPoint> {
    for (const FeedPoint& point : stamped) {
      if (point.ts_micros >= at_least) return point;
    }
    return std::nullopt;
  };
  auto from_index = [](const std::vector<Change>& changes, uint64_t first) {
    std::vector<Change> out;
    for (const Change& change : changes) {
      if (change.position.index >= first) out.push_back(change);
    }
    return out;
  };
  for (const bool trimmed : {false, true}) {
    SCOPED_TRACE(trimmed ? "after trimming" : "before trimming");
    if (trimmed) {
      collect_all();
      int64_t removed = 0;
      for (int round = 0; round < 1000; ++round) {
        Result<int64_t> step = store_->expiry().trim_change_feed(50);
        ASSERT_TRUE(step.is_ok()) << step.status().to_string();
        removed += *step;
        if (*step == 0) break;
      }
      ASSERT_GT(removed, 0);
    }
    // From the beginning: the changes after the first position whose time is inside the retention.
    const std::optional<FeedPoint> start = naive_first_at_least(oldest);
    ASSERT_TRUE(start.has_value());
    ASSERT_GT(start->index, stamped.front().index + 10);  // the retention cut the feed somewhere in the middle
    const FeedRead beginning = read_feed(*store_, from_beginning(), 7);
    ASSERT_TRUE(beginning.status.is_ok()) << beginning.status.to_string();
    ASSERT_FALSE(beginning.changes.empty());
    EXPECT_GT(beginning.changes.front().position.index, start->index);
    // From the time of the position right after that start: the same changes.
    ChangeFeedFrom after_start;
    after_start.kind = ChangeFeedFrom::Kind::kTime;
    after_start.ts_micros = stamped[static_cast<size_t>(start->index - stamped.front().index) + 1].ts_micros;
    const FeedRead at_start = read_feed(*store_, after_start);
    ASSERT_TRUE(at_start.status.is_ok()) << at_start.status.to_string();
    EXPECT_EQ(at_start.changes, beginning.changes);
    // From a time: each stamped time, one before and one after, and times before and after everything.
    std::vector<int64_t> times{kT0 - kSecond, now, now + 1, now + 3600 * kSecond};
    for (int k = 0; k < 60; ++k) {
      const int64_t at = stamped[prng() % stamped.size()].ts_micros;
      times.insert(times.end(), {at - 1, at, at + 1});
    }
    size_t served = 0;
    for (const int64_t at : times) {
      ChangeFeedFrom from;
      from.kind = ChangeFeedFrom::Kind::kTime;
      from.ts_micros = at;
      const FeedRead read = read_feed(*store_, from);
      const std::optional<FeedPoint> first = naive_first_at_least(at);
      SCOPED_TRACE("from time " + std::to_string(at) + ", naive first position " +
                   (first ? std::to_string(first->index) : std::string("none")));
      if (!first) {
        ASSERT_TRUE(read.status.is_ok()) << read.status.to_string();
        EXPECT_TRUE(read.changes.empty());
        continue;
      }
      if (first->index <= stamped.front().index) {  // the feed was turned on after T
        EXPECT_EQ(read.status.code(), StatusCode::kGone) << read.status.to_string();
        continue;
      }
      const FeedPoint& before = stamped[static_cast<size_t>(first->index - stamped.front().index) - 1];
      ASSERT_EQ(before.index + 1, first->index);
      if (before.ts_micros < oldest) {  // the position before the start is older than the retention
        EXPECT_EQ(read.status.code(), StatusCode::kGone) << read.status.to_string();
        continue;
      }
      ASSERT_TRUE(read.status.is_ok()) << read.status.to_string();
      EXPECT_EQ(read.changes, from_index(beginning.changes, first->index));
      served += read.changes.empty() ? 0 : 1;
    }
    EXPECT_GT(served, 20u);
  }
}

TEST(ChangeFeedReplicas, IdenticalFeedsWhetherTheCollectorRanOrASnapshotWasInstalled) {
  const uint64_t seed = test_seed();
  std::printf("reproduce: MAYFLY_FEED_SEED=%llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("MAYFLY_FEED_SEED=" + std::to_string(seed));
  std::mt19937_64 prng(seed);
  Replica collected, uncollected, installed;
  uint64_t index = 1;
  auto apply_all = [&](const Command& command, int64_t ts, bool to_installed) {
    Result<OpResult> a = collected.store->apply(command, LogIndex(index), ts);
    Result<OpResult> b = uncollected.store->apply(command, LogIndex(index), ts);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(a->http_status(), b->http_status());
    if (to_installed) {
      Result<OpResult> c = installed.store->apply(command, LogIndex(index), ts);
      ASSERT_TRUE(c.is_ok());
      EXPECT_EQ(a->http_status(), c->http_status());
    }
    ++index;
  };
  apply_all(database_command(CommandType::kCreateDatabase, "db"), kT0, false);
  apply_all(feed_container_command("5"), kT0, false);
  const auto log = random_log(prng, 400, kT0);
  for (size_t i = 0; i < log.size(); ++i) {
    if (i == log.size() / 2) {  // the third replica joins here from a snapshot of the collected one
      Result<std::string> blob = collected.store->export_snapshot();
      ASSERT_TRUE(blob.is_ok());
      ASSERT_TRUE(installed.store->install_snapshot(*blob).is_ok());
    }
    apply_all(log[i].first, log[i].second, i >= log.size() / 2);
    if (prng() % 3 == 0) {
      ASSERT_TRUE(collected.store->expiry()
                      .collect_expired("db", "c", collected.store->applied().ts_micros, 1 + prng() % 5)
                      .is_ok());
    }
  }
  ASSERT_TRUE(collected.store->expiry().collect_expired("db", "c", collected.store->applied().ts_micros, 100000).is_ok());
  for (size_t page : {size_t{1}, size_t{7}, size_t{1000}}) {
    const FeedRead a = read_feed(*collected.store, from_beginning(), page);
    const FeedRead b = read_feed(*uncollected.store, from_beginning(), page);
    const FeedRead c = read_feed(*installed.store, from_beginning(), page);
    ASSERT_TRUE(a.status.is_ok() && b.status.is_ok() && c.status.is_ok());
    EXPECT_EQ(describe(a.changes), describe(b.changes)) << "page " << page;
    EXPECT_EQ(a.changes, b.changes);
    EXPECT_EQ(a.continuations, b.continuations);
    EXPECT_EQ(a.changes, c.changes);
    EXPECT_EQ(a.continuations, c.continuations);
    size_t expirations = 0;
    for (const Change& change : a.changes) expirations += change.ttl_expired ? 1 : 0;
    EXPECT_GT(expirations, 10u) << "the log should expire items";
  }
}

// ---- randomized comparison with a naive model ----------------------------------------------------------------

// Evaluates every item version at every position: an expiration at p is a current version alive at p - 1 (or
// written at p - 1 or before) that is not alive at p under the ttl state after p. Explicit changes from the answers.
TEST(ChangeFeedModel, RandomOpsTimePolicyAndCollectionMatchANaiveModel) {
  const uint64_t seed = test_seed();
  std::printf("reproduce: MAYFLY_FEED_SEED=%llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("MAYFLY_FEED_SEED=" + std::to_string(seed));
  std::mt19937_64 prng(seed);
  Replica collected, uncollected;
  uint64_t index = 1;
  ASSERT_TRUE(collected.store->apply(database_command(CommandType::kCreateDatabase, "db"), LogIndex(index), kT0).is_ok());
  ASSERT_TRUE(uncollected.store->apply(database_command(CommandType::kCreateDatabase, "db"), LogIndex(index), kT0).is_ok());
  ++index;
  ASSERT_TRUE(collected.store->apply(feed_container_command("3"), LogIndex(index), kT0).is_ok());
  ASSERT_TRUE(uncollected.store->apply(feed_container_command("3"), LogIndex(index), kT0).is_ok());
  ++index;

  const uint64_t crid = uncollected.store->reader().find_container("db", "c", nullptr)->crid;
  struct Version {
    ItemRecord record;
    bool expired = false;  // its expiration was already produced
  };
  std::map<std::string, Version> items;  // id -> current version (absent: deleted)
  ttl::ContainerTtlState state;
  state.policy = ttl::DefaultTtl::of_seconds(3);
  std::string expected;
  const auto log = random_log(prng, 600, kT0);
  for (const auto& [command, ts] : log) {
    const uint64_t p = index++;
    Result<OpResult> a = collected.store->apply(command, LogIndex(p), ts);
    Result<OpResult> b = uncollected.store->apply(command, LogIndex(p), ts);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    ASSERT_EQ(a->http_status(), b->http_status());
    if (command.type == CommandType::kUpdateContainer) {
      ttl::DefaultTtl policy = ttl::DefaultTtl::off();
      if (command.default_ttl_change == DefaultTtlChange::kSet) {
        policy = command.default_ttl_json == "-1" ? ttl::DefaultTtl::no_default()
                                                  : ttl::DefaultTtl::of_seconds(std::stoll(command.default_ttl_json));
      }
      state = ttl::change_policy(state, policy, ts);
    }
    // Expirations at p, in the feed's order: own ttl by E, then inherited by write time; then pk, id.
    std::vector<std::tuple<int, int64_t, std::string, std::string>> expiring;  // kind, sort, pk, id
    for (auto& [id, version] : items) {
      if (version.expired || version.record.ttl.kind == ttl::ItemTtl::Kind::kNever) continue;
      if (ttl::alive(version.record.ttl, version.record.write_ts_micros, state, ts)) continue;
      version.expired = true;
      const bool own = version.record.ttl.kind == ttl::ItemTtl::Kind::kSeconds;
      expiring.emplace_back(own ? 0 : 1,
                            own ? ttl::expiry_instant_micros(version.record.write_ts_micros, version.record.ttl.seconds)
                                : version.record.write_ts_micros,
                            "p" + id, id);
    }
    std::sort(expiring.begin(), expiring.end());
    for (const auto& [kind, sort, pk, id] : expiring) {
      expected += std::to_string(p) + ".0 expire " + id + " /" + version_of(encode_item(items[id].record)) + "\n";
    }
    if (!a->ok() || !is_item_write(command.type)) continue;
    // The explicit change: the model takes the outcome from the answer (create/replace/delete) and the image from
    // the stored item, and checks the answer against its own view of liveness.
    const std::string id = command.type == CommandType::kDeleteItem || command.type == CommandType::kPatchItem
                               ? command.id
                               : std::string(json::parse(command.body)->as_object().at("id").as_string());
    auto current = items.find(id);
    const bool was_alive = current != items.end() && !current->second.expired;
    std::string previous = was_alive ? version_of(encode_item(current->second.record)) : "";
    if (command.type == CommandType::kDeleteItem) {
      ASSERT_TRUE(was_alive);
      expected += std::to_string(p) + ".1 delete " + id + " /" + previous + "\n";
      items.erase(id);
      continue;
    }
    Result<std::optional<ItemRecord>> stored =
        uncollected.store->reader().get_item(item_key(crid, "\"p" + id + "\"", id), nullptr);
    ASSERT_TRUE(stored.is_ok() && stored->has_value());
    const bool created = a->http_status() == 201;
    EXPECT_EQ(created, !was_alive) << "position " << p;
    expected += std::to_string(p) + ".1 " + (created ? "create " : "replace ") + id + " " +
                version_of(encode_item(**stored)) + "/" + previous + "\n";
    items[id] = Version{**stored, false};
    if (prng() % 4 == 0) {
      ASSERT_TRUE(collected.store->expiry()
                      .collect_expired("db", "c", collected.store->applied().ts_micros, 1 + prng() % 4)
                      .is_ok());
    }
  }
  size_t expirations = 0;
  for (size_t at = expected.find("expire"); at != std::string::npos; at = expected.find("expire", at + 1)) {
    ++expirations;
  }
  EXPECT_GT(expirations, 20u);
  for (size_t page : {size_t{1}, size_t{5}, size_t{1000}}) {
    EXPECT_EQ(describe(read_feed(*collected.store, from_beginning(), page).changes), expected) << "page " << page;
    EXPECT_EQ(describe(read_feed(*uncollected.store, from_beginning(), page).changes), expected) << "page " << page;
  }
}

// Expiring-soon warnings under random writes, deletes, time, defaultTtl and expiryWarning changes and collector
// passes, against a model that evaluates every surviving item version at every position: its warning is at the first
// position where some state in force put it in its window (the state at that position, or one a change at or before
// it ended, at the change's time), served when that is after its write and it is still alive there. A version
// deleted or overwritten while alive has its warning only if it came at or before that write.
TEST(ChangeFeedModel, WarningsUnderPolicyAndWindowChangesMatchANaiveModel) {
  const uint64_t seed = test_seed();
  std::printf("reproduce: MAYFLY_FEED_SEED=%llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("MAYFLY_FEED_SEED=" + std::to_string(seed));
  std::mt19937_64 prng(seed);
  Replica collected, uncollected;
  uint64_t index = 1;
  auto apply_both = [&](const Command& command, int64_t ts) {
    Result<OpResult> a = collected.store->apply(command, LogIndex(index), ts);
    Result<OpResult> b = uncollected.store->apply(command, LogIndex(index), ts);
    EXPECT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(a->http_status(), b->http_status()) << "position " << index;
    ++index;
    return a.value();
  };
  apply_both(database_command(CommandType::kCreateDatabase, "db"), kT0);
  Command create = feed_container_command("3");
  create.expiry_warning_seconds = 2;
  apply_both(create, kT0);
  const uint64_t crid = uncollected.store->reader().find_container("db", "c", nullptr)->crid;

  ttl::ContainerTtlState state;
  state.policy = ttl::DefaultTtl::of_seconds(3);
  state.warning_seconds = 2;
  std::vector<int64_t> times(3, kT0);                   // position -> ts
  std::vector<ttl::ContainerTtlState> states(3, state);  // position -> the state after it
  std::vector<std::pair<uint64_t, ttl::ContainerTtlState>> ended;  // a change's position, the state it ended
  struct Version {
    std::string id;
    ItemRecord record;
    uint64_t written = 0;
    uint64_t removed_alive = 0;  // the position of the write that removed it alive (0: none did)
  };
  std::vector<Version> versions;
  std::map<std::string, size_t> current;  // id -> its version in `versions`
  auto log = random_log(prng, 800, kT0);
  for (auto& [command, ts] : log) {
    if (prng() % 12 == 0) command = warning_command(static_cast<int64_t>(prng() % 4));
  }
  for (const auto& [command, ts] : log) {
    const uint64_t p = index;
    const OpResult result = apply_both(command, ts);
    ASSERT_TRUE(result.http_status() < 500) << result.message;
    if (command.type == CommandType::kUpdateContainer && result.ok()) {
      ended.emplace_back(p, state);
      if (command.default_ttl_change != DefaultTtlChange::kKeep) {
        ttl::DefaultTtl policy = ttl::DefaultTtl::off();
        if (command.default_ttl_change == DefaultTtlChange::kSet) {
          policy = command.default_ttl_json == "-1" ? ttl::DefaultTtl::no_default()
                                                    : ttl::DefaultTtl::of_seconds(std::stoll(command.default_ttl_json));
        }
        state = ttl::change_policy(state, policy, ts);
      }
      if (command.expiry_warning_seconds && *command.expiry_warning_seconds != state.warning_seconds) {
        state = ttl::change_warning(state, *command.expiry_warning_seconds, ts);
      }
    }
    times.push_back(ts);
    states.push_back(state);
    if (result.ok() && is_item_write(command.type)) {
      const std::string id = command.type == CommandType::kDeleteItem || command.type == CommandType::kPatchItem
                                 ? command.id
                                 : std::string(json::parse(command.body)->as_object().at("id").as_string());
      if (auto it = current.find(id); it != current.end()) {
        const Version& before = versions[it->second];
        if (ttl::alive(before.record.ttl, before.record.write_ts_micros, state, ts)) {
          versions[it->second].removed_alive = p;
        }
        current.erase(it);
      }
      if (command.type != CommandType::kDeleteItem) {
        Result<std::optional<ItemRecord>> stored =
            uncollected.store->reader().get_item(item_key(crid, "\"p" + id + "\"", id), nullptr);
        ASSERT_TRUE(stored.is_ok() && stored->has_value());
        versions.push_back({id, **stored, p, 0});
        current[id] = versions.size() - 1;
      }
    }
    if (prng() % 4 == 0) {
      ASSERT_TRUE(collected.store->expiry()
                      .collect_expired("db", "c", collected.store->applied().ts_micros, 1 + prng() % 4)
                      .is_ok());
    }
  }
  // Is the version in the window of state `s` at `t`? (The rule of docs/retention.md, item by item.)
  auto in_window = [](const ItemRecord& record, const ttl::ContainerTtlState& s, int64_t t) {
    if (!ttl::alive(record.ttl, record.write_ts_micros, s, t)) return true;
    const std::optional<int64_t> effective = ttl::effective_ttl_seconds(record.ttl, s.policy);
    return effective &&
           ttl::expiry_instant_micros(record.write_ts_micros, *effective) <= t + s.warning_seconds * kSecond;
  };
  std::vector<std::tuple<uint64_t, int, int64_t, std::string, std::string>> warned;  // p, kind, sort, pk, id
  std::map<std::tuple<uint64_t, int, int64_t, std::string, std::string>, std::string> lines;
  for (const Version& version : versions) {
    if (version.record.ttl.kind == ttl::ItemTtl::Kind::kNever) continue;
    const bool own = version.record.ttl.kind == ttl::ItemTtl::Kind::kSeconds;
    const uint64_t last = version.removed_alive != 0 ? version.removed_alive : times.size() - 1;
    for (uint64_t p = 3; p <= last; ++p) {
      bool window = in_window(version.record, states[p], times[p]);
      for (const auto& [at, then] : ended) window = window || (at <= p && in_window(version.record, then, times[at]));
      if (!window) continue;
      if (p > version.written && ttl::alive(version.record.ttl, version.record.write_ts_micros, states[p], times[p])) {
        const auto key = std::make_tuple(
            p, own ? 2 : 3,
            own ? ttl::expiry_instant_micros(version.record.write_ts_micros, version.record.ttl.seconds)
                : version.record.write_ts_micros,
            "\"p" + version.id + "\"", version.id);
        lines[key] = std::to_string(p) + ".0 warn " + version.id + " " + version_of(encode_item(version.record)) +
                     "/\n";
      }
      break;
    }
  }
  std::string expected;
  for (const auto& [key, line] : lines) expected += line;
  EXPECT_GE(lines.size(), 5u) << "the log should warn of items";
  for (size_t page : {size_t{1}, size_t{4}, size_t{1000}}) {
    EXPECT_EQ(warnings_of(*collected.store, page), expected) << "page " << page;
    EXPECT_EQ(warnings_of(*uncollected.store, page), expected) << "page " << page;
    // In the whole feed, the warnings are the same ones at the same positions.
    std::string in_whole;
    for (const Change& change : read_feed(*collected.store, from_beginning(), page).changes) {
      if (change.operation == ChangeOperation::kWarning) in_whole += describe({change});
    }
    EXPECT_EQ(in_whole, expected) << "page " << page;
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
