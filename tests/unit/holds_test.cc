// Legal holds (storage/holds.h, docs/retention.md) on a real LevelDB: a held item outlives its instant and expires
// at the release; one that expired before the hold stays gone; overlapping holds make one stretch; every deletion
// path refuses a held item (one test per path: take its check out and that test fails); refusals change nothing;
// restores keep held items (pause is refused); and a seeded random run against a naive model that removes an item
// as soon as it is past its instant and not covered, on a replica whose collector runs at random.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "storage/json.h"
#include "storage/restore.h"
#include "store_fixture.h"

namespace mayfly::storage::testing {
namespace {

Command hold_command(HoldScope scope, std::string id, std::string pk_json = "", std::string item_id = "",
                     std::string reason = "case", std::string actor = "legal") {
  Command command;
  command.type = CommandType::kSetHold;
  command.database = "db";
  command.container = "c";
  command.id = std::move(id);
  command.partition_key_json = std::move(pk_json);
  command.body = std::move(reason);
  command.hold = HoldCommand{scope, std::move(item_id), std::move(actor)};
  return command;
}

Command release_command(std::string id, std::string reason = "case closed", std::string actor = "legal") {
  Command command;
  command.type = CommandType::kReleaseHold;
  command.database = "db";
  command.container = "c";
  command.id = std::move(id);
  command.body = std::move(reason);
  command.hold = HoldCommand{HoldScope::kContainer, "", std::move(actor)};
  return command;
}

Command time_command() { return Command{}; }

std::string item(const std::string& pk, const std::string& id, int v, std::optional<int> ttl = std::nullopt) {
  std::string out = R"({"id":")" + id + R"(","pk":")" + pk + R"(","v":)" + std::to_string(v);
  if (ttl) out += R"(,"ttl":)" + std::to_string(*ttl);
  return out + "}";
}

class HoldsTest : public StoreFixture {
 protected:
  // Container c (defaultTtl 10 s) with item x/a written at kT0: it expires at kT0 + 10 s.
  void SetUp() override {
    StoreFixture::SetUp();
    make_container("10");
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", item("x", "a", 1)), kT0).http_status(), 201);
  }

  int status_of(const std::string& pk, const std::string& id, int64_t now) {
    return read("\"" + pk + "\"", id, now).http_status();
  }

  // The number of items stored (collected or not).
  std::string stored_json(const std::string& pk, const std::string& id) {
    Result<std::vector<std::pair<std::string, std::string>>> all = store_->dump(false);
    EXPECT_TRUE(all.is_ok());
    const std::string key = item_key(store_->reader().container_record("db", "c")->crid, "\"" + pk + "\"", id);
    for (const auto& [k, v] : *all) {
      if (k == key) return v;
    }
    return "";
  }
};

TEST_F(HoldsTest, AHeldItemOutlivesItsInstantAndExpiresAtTheRelease) {
  OpResult set = apply(hold_command(HoldScope::kItem, "h1", "\"x\"", "a"), kT0 + 5 * kSecond);
  ASSERT_EQ(set.http_status(), 201) << set.message;
  // Past its instant (kT0 + 10 s): still there, with its would-be instant and the hold.
  OpResult read_back = read("\"x\"", "a", kT0 + 20 * kSecond);
  ASSERT_EQ(read_back.http_status(), 200) << read_back.message;
  Result<boost::json::value> body = json::parse(read_back.body);
  ASSERT_TRUE(body.is_ok());
  EXPECT_EQ(body->as_object().at("_expiresAt").as_int64(), kT0 / kSecond + 10);
  EXPECT_EQ(boost::json::serialize(body->as_object().at("_hold")), R"(["h1"])");
  ListRequest list;
  list.database = "db";
  list.container = "c";
  list.max_items = 10;
  OpResult listed = store_->reader().list_items(list, kT0 + 20 * kSecond);
  EXPECT_NE(listed.body.find(R"("_hold":["h1"])"), std::string::npos) << listed.body;
  // The query engine's reader sees it too.
  Result<std::unique_ptr<ItemReader>> reader = store_->reader().open_item_reader("db", "c");
  ASSERT_TRUE(reader.is_ok());
  Result<std::optional<ItemRecord>> looked = (*reader)->lookup("\"x\"", "a", kT0 + 20 * kSecond);
  ASSERT_TRUE(looked.is_ok());
  EXPECT_TRUE(looked->has_value());
  // Another item of the container is not held: it expires on time.
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", item("x", "b", 1)), kT0 + 6 * kSecond)
                .http_status(),
            201);
  EXPECT_EQ(status_of("x", "b", kT0 + 16 * kSecond), 404);
  // Released at kT0 + 30 s: gone from that position on.
  ASSERT_EQ(apply(release_command("h1"), kT0 + 30 * kSecond).http_status(), 200);
  EXPECT_EQ(status_of("x", "a", kT0 + 30 * kSecond), 404);
}

TEST_F(HoldsTest, AnItemThatExpiredBeforeTheHoldStaysGone) {
  ASSERT_EQ(apply(hold_command(HoldScope::kPartition, "p1", "\"x\""), kT0 + 10 * kSecond).http_status(), 201);
  EXPECT_EQ(status_of("x", "a", kT0 + 10 * kSecond), 404);  // its instant is the hold's position: expired there
  OpResult refused = apply(hold_command(HoldScope::kItem, "h1", "\"x\"", "a"), kT0 + 11 * kSecond);
  EXPECT_EQ(refused.http_status(), 404) << refused.message;
  EXPECT_NE(refused.message.find("cannot bring one back"), std::string::npos) << refused.message;
}

TEST_F(HoldsTest, OverlappingHoldsMakeOneStretch) {
  ASSERT_EQ(apply(hold_command(HoldScope::kContainer, "all"), kT0 + 5 * kSecond).http_status(), 201);
  ASSERT_EQ(apply(hold_command(HoldScope::kPartition, "px", "\"x\""), kT0 + 12 * kSecond).http_status(), 201);
  // The container hold goes at kT0 + 20 s; the partition hold, set while it was on, carries the stretch on.
  ASSERT_EQ(apply(release_command("all"), kT0 + 20 * kSecond).http_status(), 200);
  EXPECT_EQ(status_of("x", "a", kT0 + 21 * kSecond), 200);
  ASSERT_EQ(apply(release_command("px"), kT0 + 25 * kSecond).http_status(), 200);
  EXPECT_EQ(status_of("x", "a", kT0 + 25 * kSecond), 404);
  // Both are listed, released, and the audit has the four records in order.
  OpResult holds = store_->reader().list_holds("db", "c", true);
  EXPECT_NE(holds.body.find(R"("id":"all")"), std::string::npos) << holds.body;
  EXPECT_NE(holds.body.find(R"("releaseReason":"case closed")"), std::string::npos) << holds.body;
  EXPECT_EQ(store_->reader().list_holds("db", "c", false).body, "[]");
  OpResult audit = store_->reader().list_hold_audit(3, "");
  Result<boost::json::value> page = json::parse(audit.body);
  ASSERT_TRUE(page.is_ok()) << audit.body;
  ASSERT_EQ(page->as_array().size(), 3u);
  EXPECT_EQ(page->as_array()[0].as_object().at("action").as_string(), "set");
  EXPECT_EQ(page->as_array()[0].as_object().at("actor").as_string(), "legal");
  EXPECT_EQ(page->as_array()[2].as_object().at("action").as_string(), "release");
  ASSERT_FALSE(audit.continuation.empty());
  OpResult rest = store_->reader().list_hold_audit(3, audit.continuation);
  EXPECT_NE(rest.body.find(R"("hold":"px")"), std::string::npos) << rest.body;
  EXPECT_TRUE(rest.continuation.empty());
}

// ---- every deletion path, one test each ---------------------------------------------------------------------------

TEST_F(HoldsTest, DeleteOfAHeldItemIsRefused) {
  ASSERT_EQ(apply(hold_command(HoldScope::kItem, "h1", "\"x\"", "a"), kT0 + kSecond).http_status(), 201);
  OpResult refused = apply(target_command(CommandType::kDeleteItem, "db", "c", "\"x\"", "a"), kT0 + 2 * kSecond);
  EXPECT_EQ(refused.http_status(), 409) << refused.message;
  EXPECT_NE(refused.message.find("'h1'"), std::string::npos) << refused.message;
  EXPECT_EQ(status_of("x", "a", kT0 + 2 * kSecond), 200);
  // Through a transactional batch too.
  Command batch;
  batch.type = CommandType::kBatch;
  batch.database = "db";
  batch.container = "c";
  batch.partition_key_json = "\"x\"";
  batch.body = R"([{"operationType":"Delete","id":"a"}])";
  OpResult batched = apply(batch, kT0 + 3 * kSecond);
  EXPECT_EQ(batched.http_status(), 207) << batched.body;
  EXPECT_EQ(status_of("x", "a", kT0 + 3 * kSecond), 200);
}

TEST_F(HoldsTest, ReplaceUpsertAndPatchOfAHeldItemAreRefused) {
  ASSERT_EQ(apply(hold_command(HoldScope::kPartition, "p1", "\"x\""), kT0 + kSecond).http_status(), 201);
  const std::string before = stored_json("x", "a");
  for (CommandType type : {CommandType::kReplaceItem, CommandType::kUpsertItem}) {
    OpResult refused = apply(item_command(type, "db", "c", item("x", "a", 2, 1)), kT0 + 2 * kSecond);
    EXPECT_EQ(refused.http_status(), 409) << refused.message;
  }
  OpResult patched = apply(target_command(CommandType::kPatchItem, "db", "c", "\"x\"", "a",
                                          R"([{"op":"set","path":"/ttl","value":1}])"),
                           kT0 + 2 * kSecond);
  EXPECT_EQ(patched.http_status(), 409) << patched.message;
  EXPECT_EQ(stored_json("x", "a"), before);
  // A new item in the held partition is an ordinary create (and is held from then on).
  OpResult created = apply(item_command(CommandType::kCreateItem, "db", "c", item("x", "new", 1)), kT0 + 3 * kSecond);
  EXPECT_EQ(created.http_status(), 201);
  EXPECT_NE(created.body.find(R"("_hold":["p1"])"), std::string::npos) << created.body;
  EXPECT_EQ(status_of("x", "new", kT0 + 60 * kSecond), 200);
}

TEST_F(HoldsTest, DefaultTtlChangeIsRefusedWhileAHoldIsOn) {
  ASSERT_EQ(apply(hold_command(HoldScope::kItem, "h1", "\"x\"", "a"), kT0 + kSecond).http_status(), 201);
  OpResult refused = apply(set_default_ttl_command("db", "c", "5"), kT0 + 20 * kSecond);
  EXPECT_EQ(refused.http_status(), 409) << refused.message;
  EXPECT_NE(refused.message.find("'h1'"), std::string::npos) << refused.message;
  EXPECT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), kT0 + 20 * kSecond).http_status(), 409);
  // The same policy again (an SDK's replace sends the whole definition) changes nothing and is accepted.
  EXPECT_EQ(apply(set_default_ttl_command("db", "c", "10"), kT0 + 20 * kSecond).http_status(), 200);
  EXPECT_EQ(status_of("x", "a", kT0 + 20 * kSecond), 200);
  ASSERT_EQ(apply(release_command("h1"), kT0 + 21 * kSecond).http_status(), 200);
  EXPECT_EQ(apply(set_default_ttl_command("db", "c", "5"), kT0 + 22 * kSecond).http_status(), 200);
}

TEST_F(HoldsTest, DeleteByPartitionKeyIsRefusedWhenAnItemOfThePartitionIsHeld) {
  ASSERT_EQ(apply(hold_command(HoldScope::kItem, "h1", "\"x\"", "a"), kT0 + kSecond).http_status(), 201);
  Command remove;
  remove.type = CommandType::kDeletePartition;
  remove.database = "db";
  remove.container = "c";
  remove.partition_key_json = "\"x\"";
  OpResult refused = apply(remove, kT0 + 2 * kSecond);
  EXPECT_EQ(refused.http_status(), 409) << refused.message;
  EXPECT_NE(refused.message.find("'h1'"), std::string::npos) << refused.message;
  EXPECT_EQ(status_of("x", "a", kT0 + 2 * kSecond), 200);
  remove.partition_key_json = "\"y\"";  // another partition: fine
  EXPECT_EQ(apply(remove, kT0 + 3 * kSecond).http_status(), 200);
}

TEST_F(HoldsTest, ContainerDeleteIsRefusedWhileAHoldIsOn) {
  ASSERT_EQ(apply(hold_command(HoldScope::kPartition, "p1", "\"x\""), kT0 + kSecond).http_status(), 201);
  Command remove = database_command(CommandType::kDeleteContainer, "db");
  remove.container = "c";
  OpResult refused = apply(remove, kT0 + 2 * kSecond);
  EXPECT_EQ(refused.http_status(), 409) << refused.message;
  EXPECT_NE(refused.message.find("'p1'"), std::string::npos) << refused.message;
  EXPECT_EQ(status_of("x", "a", kT0 + 2 * kSecond), 200);
}

TEST_F(HoldsTest, DatabaseDeleteIsRefusedWhileAHoldIsOn) {
  ASSERT_EQ(apply(hold_command(HoldScope::kContainer, "all"), kT0 + kSecond).http_status(), 201);
  OpResult refused = apply(database_command(CommandType::kDeleteDatabase, "db"), kT0 + 2 * kSecond);
  EXPECT_EQ(refused.http_status(), 409) << refused.message;
  EXPECT_NE(refused.message.find("'all'"), std::string::npos) << refused.message;
  EXPECT_EQ(status_of("x", "a", kT0 + 2 * kSecond), 200);
  ASSERT_EQ(apply(release_command("all"), kT0 + 3 * kSecond).http_status(), 200);
  EXPECT_EQ(apply(database_command(CommandType::kDeleteDatabase, "db"), kT0 + 4 * kSecond).http_status(), 204);
}

TEST_F(HoldsTest, TheCollectorKeepsHeldItems) {
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", item("y", "b", 1)), kT0).http_status(), 201);
  ASSERT_EQ(apply(hold_command(HoldScope::kItem, "h1", "\"x\"", "a"), kT0 + kSecond).http_status(), 201);
  ASSERT_EQ(apply(time_command(), kT0 + 20 * kSecond).http_status(), 200);
  for (int pass = 0; pass < 3; ++pass) {
    Result<CollectResult> collected = store_->expiry().collect_expired("db", "c", kT0 + 20 * kSecond, 10);
    ASSERT_TRUE(collected.is_ok()) << collected.status().to_string();
  }
  EXPECT_FALSE(stored_json("x", "a").empty());  // kept
  EXPECT_TRUE(stored_json("y", "b").empty());   // not held: collected
  EXPECT_EQ(status_of("x", "a", kT0 + 20 * kSecond), 200);
  // Released: the collector starts over and takes it.
  ASSERT_EQ(apply(release_command("h1"), kT0 + 21 * kSecond).http_status(), 200);
  Result<CollectResult> collected = store_->expiry().collect_expired("db", "c", kT0 + 21 * kSecond, 10);
  ASSERT_TRUE(collected.is_ok());
  EXPECT_EQ(collected->items, 1);
  EXPECT_TRUE(stored_json("x", "a").empty());
}

TEST_F(HoldsTest, TheCollectorPassesOverAContainerHold) {
  ASSERT_EQ(apply(hold_command(HoldScope::kContainer, "all"), kT0 + kSecond).http_status(), 201);
  ASSERT_EQ(apply(time_command(), kT0 + 20 * kSecond).http_status(), 200);
  Result<CollectResult> collected = store_->expiry().collect_expired("db", "c", kT0 + 20 * kSecond, 10);
  ASSERT_TRUE(collected.is_ok());
  EXPECT_EQ(collected->items, 0);
  EXPECT_FALSE(stored_json("x", "a").empty());
}

TEST_F(HoldsTest, ARestoreKeepsHeldItemsAndPauseIsRefused) {
  ASSERT_EQ(apply(hold_command(HoldScope::kItem, "h1", "\"x\"", "a"), kT0 + kSecond).http_status(), 201);
  ASSERT_EQ(apply(time_command(), kT0 + 20 * kSecond).http_status(), 200);  // the backup's time B: past its instant
  Result<RestoreFigures> paused = transform_for_restore(*store_, RestoreTtlMode::kPause, kT0 + 40 * kSecond, true);
  ASSERT_FALSE(paused.is_ok());
  EXPECT_EQ(paused.status().code(), StatusCode::kConflict);
  EXPECT_NE(paused.status().message().find("'h1'"), std::string::npos) << paused.status().to_string();
  Result<RestoreFigures> preserved =
      transform_for_restore(*store_, RestoreTtlMode::kPreserve, kT0 + 40 * kSecond, false);
  ASSERT_TRUE(preserved.is_ok()) << preserved.status().to_string();
  EXPECT_EQ(preserved->dropped_items, 0u);
  EXPECT_EQ(status_of("x", "a", kT0 + 40 * kSecond), 200);
  EXPECT_EQ(store_->reader().list_holds("db", "c", false).body.find("\"h1\"") != std::string::npos, true);
}

TEST_F(HoldsTest, ARebaseRestoreMovesTheHoldsWithTheItems) {
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", item("x", "late", 1)), kT0 + 4 * kSecond)
                .http_status(),
            201);  // expires at kT0 + 14 s
  ASSERT_EQ(apply(hold_command(HoldScope::kPartition, "p1", "\"x\""), kT0 + 5 * kSecond).http_status(), 201);
  ASSERT_EQ(apply(time_command(), kT0 + 20 * kSecond).http_status(), 200);
  Result<RestoreFigures> rebased =
      transform_for_restore(*store_, RestoreTtlMode::kRebase, kT0 + 1020 * kSecond, false);
  ASSERT_TRUE(rebased.is_ok()) << rebased.status().to_string();
  EXPECT_EQ(rebased->dropped_items, 0u);
  const int64_t now = store_->applied().ts_micros;
  EXPECT_EQ(status_of("x", "a", now), 200);
  EXPECT_EQ(status_of("x", "late", now), 200);
  ASSERT_EQ(apply(release_command("p1"), now + kSecond).http_status(), 200);
  EXPECT_EQ(status_of("x", "a", now + kSecond), 404);
}

// ---- refusals change nothing ------------------------------------------------------------------------------------

TEST_F(HoldsTest, BadHoldRequestsAreRefusedAndChangeNothing) {
  const auto dump = [&] {
    Result<std::vector<std::pair<std::string, std::string>>> all = store_->dump(false);
    EXPECT_TRUE(all.is_ok());
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& [k, v] : *all) {
      if (k != meta_key()) out.emplace_back(k, v);
    }
    return out;
  };
  const auto before = dump();
  EXPECT_EQ(apply(hold_command(HoldScope::kItem, "h", "\"x\"", "missing"), kT0 + kSecond).http_status(), 404);
  EXPECT_EQ(apply(hold_command(HoldScope::kItem, "h", "", "a"), kT0 + kSecond).http_status(), 400);
  EXPECT_EQ(apply(hold_command(HoldScope::kItem, "h", "\"x\"", ""), kT0 + kSecond).http_status(), 400);
  EXPECT_EQ(apply(hold_command(HoldScope::kContainer, "h", "\"x\""), kT0 + kSecond).http_status(), 400);
  EXPECT_EQ(apply(hold_command(HoldScope::kPartition, "h", "{bad"), kT0 + kSecond).http_status(), 400);
  EXPECT_EQ(apply(hold_command(HoldScope::kContainer, ""), kT0 + kSecond).http_status(), 400);
  EXPECT_EQ(apply(hold_command(HoldScope::kContainer, "h", "", "", std::string(2000, 'r')), kT0 + kSecond)
                .http_status(),
            400);
  EXPECT_EQ(apply(release_command("nope"), kT0 + kSecond).http_status(), 404);
  Command other = hold_command(HoldScope::kContainer, "h");
  other.container = "missing";
  EXPECT_EQ(apply(other, kT0 + kSecond).http_status(), 404);
  EXPECT_EQ(dump(), before);
  // A second active hold with the same id is refused; after the release the id may be used again.
  ASSERT_EQ(apply(hold_command(HoldScope::kContainer, "h"), kT0 + 2 * kSecond).http_status(), 201);
  EXPECT_EQ(apply(hold_command(HoldScope::kPartition, "h", "\"x\""), kT0 + 2 * kSecond).http_status(), 409);
  ASSERT_EQ(apply(release_command("h"), kT0 + 3 * kSecond).http_status(), 200);
  EXPECT_EQ(apply(hold_command(HoldScope::kPartition, "h", "\"x\""), kT0 + 3 * kSecond).http_status(), 201);
}

TEST_F(HoldsTest, HoldsAndTheChangeFeedDoNotGoTogetherYet) {
  ASSERT_EQ(apply(hold_command(HoldScope::kContainer, "h"), kT0 + kSecond).http_status(), 201);
  Command feed_on = database_command(CommandType::kUpdateContainer, "db");
  feed_on.container = "c";
  feed_on.change_feed = ChangeFeedSettings{true, 3600, 0};
  OpResult refused = apply(feed_on, kT0 + 2 * kSecond);
  EXPECT_EQ(refused.http_status(), 400) << refused.message;
  ASSERT_EQ(apply(release_command("h"), kT0 + 3 * kSecond).http_status(), 200);
  ASSERT_EQ(apply(feed_on, kT0 + 4 * kSecond).http_status(), 200);
  OpResult held = apply(hold_command(HoldScope::kContainer, "h2"), kT0 + 5 * kSecond);
  EXPECT_EQ(held.http_status(), 400) << held.message;
  EXPECT_NE(held.message.find("change feed"), std::string::npos) << held.message;
}

TEST(HoldRecords, EncodeAndDecode) {
  HoldRecord hold{"case-1", HoldScope::kItem, "\"x\"", "a", "why", "legal", 7, kT0, 9, kT0 + kSecond, "boss", "done"};
  Result<HoldRecord> back = decode_hold(encode_hold(hold));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, hold);
  std::string bytes = encode_hold(hold);
  EXPECT_FALSE(decode_hold(bytes.substr(0, bytes.size() - 1)).is_ok());
  EXPECT_FALSE(decode_hold(bytes + "x").is_ok());
  HoldAuditRecord audit{HoldAuditRecord::Action::kRelease, 9, kT0, "db", "c", "case-1", HoldScope::kPartition,
                        "\"x\"", "", "boss", "done"};
  Result<HoldAuditRecord> audit_back = decode_hold_audit(encode_hold_audit(audit));
  ASSERT_TRUE(audit_back.is_ok());
  EXPECT_EQ(*audit_back, audit);
  // A hold command survives the log.
  Command command = hold_command(HoldScope::kItem, "h", "\"x\"", "a", "r", "k");
  Result<Command> decoded = decode_command(encode_command(command));
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(decoded->hold, command.hold);
  EXPECT_EQ(decoded->id, "h");
  EXPECT_EQ(decoded->body, "r");
}

// ---- a naive model ----------------------------------------------------------------------------------------------

// The model removes an item at the first position whose time is past its instant while no active hold covers it
// (before that position's command, and again after it: a release uncovers at its own position).
struct ModelItem {
  int64_t instant = INT64_MAX;  // INT64_MAX: never
};
struct ModelHold {
  HoldScope scope;
  std::string pk;
  std::string id;
};

TEST_F(HoldsTest, RandomHoldsReleasesWritesAndCollectionsMatchANaiveModel) {
  const uint64_t seed = seed_from_env("MAYFLY_HOLDS_SEED");
  std::printf("seed %llu (MAYFLY_HOLDS_SEED)\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 random(seed);
  const std::vector<std::string> pks = {"x", "y", "z"};
  const std::vector<std::string> ids = {"a", "b", "c", "d"};
  std::map<std::pair<std::string, std::string>, ModelItem> model;
  model[{"x", "a"}] = ModelItem{kT0 + 10 * kSecond};
  std::map<std::string, ModelHold> holds;
  int next_hold = 0;
  int64_t now = kT0;
  const auto covered = [&](const std::string& pk, const std::string& id) {
    for (const auto& [name, hold] : holds) {
      const bool in_partition = hold.pk == pk && (hold.scope == HoldScope::kPartition || hold.id == id);
      if (hold.scope == HoldScope::kContainer || in_partition) return true;
    }
    return false;
  };
  const auto sweep = [&] {
    for (auto it = model.begin(); it != model.end();) {
      if (it->second.instant <= now && !covered(it->first.first, it->first.second)) {
        it = model.erase(it);
      } else {
        ++it;
      }
    }
  };
  for (int step = 0; step < 600; ++step) {
    now += static_cast<int64_t>(random() % 4) * kSecond + static_cast<int64_t>(random() % 1000);
    sweep();
    const std::string pk = pks[random() % pks.size()];
    const std::string id = ids[random() % ids.size()];
    const bool exists = model.count({pk, id}) > 0;
    const int action = static_cast<int>(random() % 10);
    SCOPED_TRACE("step " + std::to_string(step) + " action " + std::to_string(action) + " " + pk + "/" + id);
    if (action <= 2) {  // upsert with an own ttl, the default (10 s) or -1
      const int kind = static_cast<int>(random() % 3);
      const std::optional<int> ttl = kind == 0 ? std::optional<int>(1 + static_cast<int>(random() % 8))
                                     : kind == 1 ? std::nullopt
                                                 : std::optional<int>(-1);
      OpResult result = apply(item_command(CommandType::kUpsertItem, "db", "c", item(pk, id, step, ttl)), now);
      if (exists && covered(pk, id)) {
        EXPECT_EQ(result.http_status(), 409) << result.message;
      } else {
        ASSERT_TRUE(result.ok()) << result.message;
        // Instants are whole seconds after the write's time (docs/ttl.md).
        const int64_t seconds = ttl ? *ttl : 10;
        model[{pk, id}] = ModelItem{seconds < 0 ? INT64_MAX : ttl::expiry_instant_micros(now, seconds)};
      }
    } else if (action == 3) {
      OpResult result = apply(target_command(CommandType::kDeleteItem, "db", "c", "\"" + pk + "\"", id), now);
      const int expected = !exists ? 404 : covered(pk, id) ? 409 : 204;
      EXPECT_EQ(result.http_status(), expected) << result.message;
      if (expected == 204) model.erase({pk, id});
    } else if (action <= 6) {  // a hold
      const int scope = static_cast<int>(random() % 10);
      const std::string name = "h" + std::to_string(next_hold++);
      Command command = scope == 0   ? hold_command(HoldScope::kContainer, name)
                        : scope <= 4 ? hold_command(HoldScope::kPartition, name, "\"" + pk + "\"")
                                     : hold_command(HoldScope::kItem, name, "\"" + pk + "\"", id);
      OpResult result = apply(command, now);
      if (command.hold->scope == HoldScope::kItem && !exists) {
        EXPECT_EQ(result.http_status(), 404) << result.message;
      } else {
        ASSERT_EQ(result.http_status(), 201) << result.message;
        holds[name] = ModelHold{command.hold->scope, command.hold->scope == HoldScope::kContainer ? "" : pk,
                                command.hold->item_id};
      }
    } else if (action <= 8 && !holds.empty()) {  // a release
      auto it = holds.begin();
      std::advance(it, static_cast<long>(random() % holds.size()));
      ASSERT_EQ(apply(release_command(it->first), now).http_status(), 200);
      holds.erase(it);
    } else {
      ASSERT_EQ(apply(time_command(), now).http_status(), 200);
      if (random() % 2 == 0) {
        ASSERT_TRUE(store_->expiry().collect_expired("db", "c", now, 1 + random() % 3).is_ok());
      }
    }
    sweep();
    for (const std::string& p : pks) {
      for (const std::string& i : ids) {
        ASSERT_EQ(status_of(p, i, now), model.count({p, i}) ? 200 : 404) << p << "/" << i << " at step " << step;
      }
    }
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
