// Delete by partition key (storage/deleted_partitions.h, docs/retention.md) on a real LevelDB: the partition's items
// are gone at the delete's position for every read and every apply, writes after it are ordinary, the collector
// removes the items (and then the partition's record) only with spare request units, a second delete while draining
// covers what was written between, the refusals; and a seeded random run against a naive model, on a replica whose
// collector drains at random and one whose collector never runs: both always read exactly what the model holds.
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
#include "storage/json.h"
#include "store_fixture.h"

namespace mayfly::storage::testing {
namespace {

Command delete_partition_command(std::string pk_json) {
  Command command;
  command.type = CommandType::kDeletePartition;
  command.database = "db";
  command.container = "c";
  command.partition_key_json = std::move(pk_json);
  return command;
}

std::string item(const std::string& pk, const std::string& id, int v) {
  return R"({"id":")" + id + R"(","pk":")" + pk + R"(","v":)" + std::to_string(v) + "}";
}

// "pk/id=v" of every item a full list shows, sorted.
std::set<std::string> listed(const StateMachine& store, int64_t now, std::optional<std::string> pk = std::nullopt) {
  std::set<std::string> out;
  ListRequest request;
  request.database = "db";
  request.container = "c";
  request.partition_key_json = std::move(pk);
  request.max_items = 1000;
  for (int pages = 0; pages < 100; ++pages) {
    OpResult page = store.reader().list_items(request, now);
    EXPECT_EQ(page.http_status(), 200) << page.message;
    Result<boost::json::value> parsed = json::parse(page.body);
    EXPECT_TRUE(parsed.is_ok() && parsed->is_array());
    if (!parsed.is_ok() || !parsed->is_array()) return out;
    for (const boost::json::value& entry : parsed->as_array()) {
      const boost::json::object& object = entry.as_object();
      out.insert(std::string(object.at("pk").as_string()) + "/" + std::string(object.at("id").as_string()) + "=" +
                 std::to_string(object.at("v").as_int64()));
    }
    if (page.continuation.empty()) return out;
    request.continuation = page.continuation;
  }
  ADD_FAILURE() << "the list never ended";
  return out;
}

// The same through the query engine's reader, in key and in _ts order.
std::set<std::string> walked(const StateMachine& store, int64_t now, ItemReader::Order order) {
  std::set<std::string> out;
  Result<std::unique_ptr<ItemReader>> reader = store.reader().open_item_reader("db", "c");
  EXPECT_TRUE(reader.is_ok());
  if (!reader.is_ok()) return out;
  Status walked_all = (*reader)->walk(order, std::nullopt, "", now, [&](const ItemReader::Visit& visit) {
    Result<boost::json::value> parsed = json::parse(visit.record.json);
    const boost::json::object& object = parsed->as_object();
    out.insert(std::string(object.at("pk").as_string()) + "/" + std::string(object.at("id").as_string()) + "=" +
               std::to_string(object.at("v").as_int64()));
    return true;
  });
  EXPECT_TRUE(walked_all.is_ok()) << walked_all.to_string();
  return out;
}

// The latest-version change feed (from the _ts index on a container whose feed is off): "pk/id=v" in write order.
std::vector<std::string> latest_feed(const StateMachine& store) {
  std::vector<std::string> out;
  ChangeFeedRequest request;
  request.database = "db";
  request.container = "c";
  request.mode = ChangeFeedMode::kLatest;
  request.max_changes = 1000;
  Result<ChangeFeedPage> page = store.change_feed().read(request);
  EXPECT_TRUE(page.is_ok()) << page.status().to_string();
  if (!page.is_ok()) return out;
  for (const Change& change : page->changes) {
    Result<ItemRecord> record = decode_item(change.image);
    Result<boost::json::value> parsed = json::parse(record->json);
    out.push_back(std::string(parsed->as_object().at("pk").as_string()) + "/" + change.id + "=" +
                  std::to_string(parsed->as_object().at("v").as_int64()));
  }
  return out;
}

size_t deleted_partition_records(const StateMachine& store) {
  Result<std::vector<std::pair<std::string, std::string>>> dump = store.dump(false);
  EXPECT_TRUE(dump.is_ok());
  size_t count = 0;
  for (const auto& [key, value] : *dump) count += static_cast<uint8_t>(key[0]) == 0x12 ? 1 : 0;
  return count;
}

class DeletedPartitionsTest : public StoreFixture {
 protected:
  OpResult write(CommandType type, const std::string& pk, const std::string& id, int v, int64_t ts) {
    return apply(item_command(type, "db", "c", item(pk, id, v)), ts);
  }
  OpResult target(CommandType type, const std::string& pk, const std::string& id, int64_t ts,
                  std::string body = "") {
    return apply(target_command(type, "db", "c", "\"" + pk + "\"", id, std::move(body)), ts);
  }
};

TEST_F(DeletedPartitionsTest, ThePartitionIsGoneAtOnceForEveryReadAndApplyAndLaterWritesAreOrdinary) {
  make_container("-1");
  int64_t ts = kT0;
  for (const char* id : {"a", "b", "c"}) ASSERT_EQ(write(CommandType::kCreateItem, "p1", id, 1, ts += 10).http_status(), 201);
  ASSERT_EQ(write(CommandType::kCreateItem, "p2", "d", 1, ts += 10).http_status(), 201);
  const OpResult deleted = apply(delete_partition_command("\"p1\""), ts += 10);
  ASSERT_EQ(deleted.http_status(), 200) << deleted.message;
  EXPECT_EQ(deleted.body, R"({"partitionKey":"p1","deletedTs":1700000000})");
  EXPECT_EQ(read("\"p1\"", "a", ts).http_status(), 404);
  EXPECT_EQ(read("\"p2\"", "d", ts).http_status(), 200);
  EXPECT_EQ(listed(*store_, ts), (std::set<std::string>{"p2/d=1"}));
  EXPECT_EQ(listed(*store_, ts, "\"p1\""), (std::set<std::string>{}));
  EXPECT_EQ(walked(*store_, ts, ItemReader::Order::kKey), (std::set<std::string>{"p2/d=1"}));
  EXPECT_EQ(walked(*store_, ts, ItemReader::Order::kTsDescending), (std::set<std::string>{"p2/d=1"}));
  EXPECT_EQ(latest_feed(*store_), (std::vector<std::string>{"p2/d=1"}));
  // Applies see the items as absent: a create is a create (not a 409), replace / patch / delete are 404, an upsert
  // creates.
  EXPECT_EQ(write(CommandType::kCreateItem, "p1", "a", 2, ts += 10).http_status(), 201);
  EXPECT_EQ(write(CommandType::kReplaceItem, "p1", "b", 2, ts += 10).http_status(), 404);
  EXPECT_EQ(target(CommandType::kPatchItem, "p1", "b", ts += 10, R"([{"op":"set","path":"/v","value":3}])")
                .http_status(),
            404);
  EXPECT_EQ(target(CommandType::kDeleteItem, "p1", "c", ts += 10).http_status(), 404);
  EXPECT_EQ(write(CommandType::kUpsertItem, "p1", "c", 2, ts += 10).http_status(), 201);
  EXPECT_EQ(read("\"p1\"", "a", ts).http_status(), 200);
  EXPECT_EQ(listed(*store_, ts), (std::set<std::string>{"p1/a=2", "p1/c=2", "p2/d=1"}));
  EXPECT_EQ(walked(*store_, ts, ItemReader::Order::kTsAscending), listed(*store_, ts));
  EXPECT_EQ(latest_feed(*store_), (std::vector<std::string>{"p2/d=1", "p1/a=2", "p1/c=2"}));
  // b is still stored until the collector comes: hidden, not gone.
  EXPECT_EQ(deleted_partition_records(*store_), 1u);
  // The same answers after a restart (nothing is in memory only).
  reopen();
  EXPECT_EQ(read("\"p1\"", "b", ts).http_status(), 404);
  EXPECT_EQ(listed(*store_, ts), (std::set<std::string>{"p1/a=2", "p1/c=2", "p2/d=1"}));
}

TEST_F(DeletedPartitionsTest, RefusalsChangeNothing) {
  make_container("-1");
  ASSERT_EQ(write(CommandType::kCreateItem, "p1", "a", 1, kT0 + 10).http_status(), 201);
  Command missing = delete_partition_command("\"p1\"");
  missing.container = "nope";
  EXPECT_EQ(apply(missing, kT0 + 20).http_status(), 404);
  const OpResult bad = apply(delete_partition_command("[1,2]"), kT0 + 30);
  EXPECT_EQ(bad.http_status(), 400) << bad.message;
  Command on = set_default_ttl_command("db", "c", std::string("-1"));
  on.change_feed = ChangeFeedSettings{true, 0, 0};
  ASSERT_EQ(apply(on, kT0 + 40).http_status(), 200);
  const OpResult feed = apply(delete_partition_command("\"p1\""), kT0 + 50);
  EXPECT_EQ(feed.http_status(), 400);
  EXPECT_NE(feed.message.find("change feed is on"), std::string::npos) << feed.message;
  EXPECT_EQ(read("\"p1\"", "a", kT0 + 60).http_status(), 200);
  EXPECT_EQ(deleted_partition_records(*store_), 0u);
  EXPECT_EQ(store_->reader().find_container("db", "c", nullptr)->partitions_deleted_through_micros, 0);
}

// The collector removes a deleted partition's items only with spare RU of a provisioned container, leaves the items
// written after the delete, and drops the partition's record once it is empty of what it hid; reads never change.
TEST_F(DeletedPartitionsTest, TheCollectorDrainsWithSpareRequestUnitsOnly) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  Command container = create_container_command("db", "c", "/pk", std::string("-1"));
  container.throughput = Throughput{Throughput::Mode::kProvisioned, 400};
  ASSERT_EQ(apply(container, kT0).http_status(), 201);
  int64_t ts = kT0;
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(write(CommandType::kCreateItem, "p1", "i" + std::to_string(i), 1, ts += 10).http_status(), 201);
  }
  ASSERT_EQ(apply(delete_partition_command("\"p1\""), ts += 10).http_status(), 200);
  ASSERT_EQ(write(CommandType::kCreateItem, "p1", "after", 1, ts += 10).http_status(), 201);
  const std::set<std::string> before = listed(*store_, ts);
  EXPECT_EQ(before, (std::set<std::string>{"p1/after=1"}));
  const int64_t stored_before = store_->expiry().local_stats(store_->reader().find_container("db", "c", nullptr)->crid).items;
  EXPECT_EQ(stored_before, 31);

  ManualClock clock(ts);
  metrics::Metrics metrics(1);
  node::RequestUnitAccount account(clock, metrics);
  node::CollectorOptions options;
  options.batch_items_max = 10;
  node::Collector collector(store_->expiry(), account, metrics, clock, options);
  // Users spend the whole second's 400 RU: nothing is drained, the partition waits (its gauge says so).
  account.charge("db/c", "create", 400);
  ASSERT_TRUE(collector.run_once().is_ok());
  const uint64_t crid = store_->reader().find_container("db", "c", nullptr)->crid;
  EXPECT_EQ(store_->expiry().local_stats(crid).items, 31);
  EXPECT_NE(metrics.scrape_text().find(
                "mayfly_partition_delete_pending_partitions{container=\"db/c\",node=\"1\",reason=\"no_spare_ru\"} 1"),
            std::string::npos)
      << metrics.scrape_text();
  EXPECT_NE(metrics.scrape_text().find(
                "mayfly_partition_delete_pending_partitions{container=\"db/c\",node=\"1\",reason=\"draining\"} 0"),
            std::string::npos);
  // The next seconds have spare RU: at most 10 a pass, until the partition is empty of what it hid.
  int passes = 0;
  while (deleted_partition_records(*store_) > 0 && passes < 20) {
    clock.advance_micros(kSecond);
    ASSERT_TRUE(collector.run_once().is_ok());
    ++passes;
    EXPECT_GE(store_->expiry().local_stats(crid).items, 31 - 10 * passes);
    EXPECT_EQ(listed(*store_, ts), before) << "a drain never changes what reads see";
  }
  EXPECT_EQ(passes, 3);
  EXPECT_EQ(store_->expiry().local_stats(crid).items, 1);
  EXPECT_EQ(read("\"p1\"", "after", ts).http_status(), 200);
  EXPECT_NE(metrics.scrape_text().find("mayfly_partition_delete_drained_items_total{container=\"db/c\",node=\"1\"} 30"),
            std::string::npos)
      << metrics.scrape_text();
  for (const char* reason : metrics::kPartitionWaitReasons) {
    EXPECT_NE(metrics.scrape_text().find("mayfly_partition_delete_pending_partitions{container=\"db/c\",node=\"1\","
                                         "reason=\"" + std::string(reason) + "\"} 0"),
              std::string::npos)
        << reason;
  }
}

// A second delete of a partition while the collector is part-way through it covers the items written between the
// two, and the drain starts that partition over.
TEST_F(DeletedPartitionsTest, ASecondDeleteWhileDrainingCoversWhatWasWrittenBetween) {
  make_container("-1");
  int64_t ts = kT0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(write(CommandType::kCreateItem, "p", "k" + std::to_string(i), 1, ts += 10).http_status(), 201);
  }
  ASSERT_EQ(apply(delete_partition_command("\"p\""), ts += 10).http_status(), 200);
  const ContainerRecord record = *store_->reader().find_container("db", "c", nullptr);
  Result<PartitionDrain> first = store_->expiry().drain_deleted_partitions(record, 4);
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first->items, 4);
  EXPECT_TRUE(first->more);
  // Written between: k0 (before the drain's cursor) and z (after it).
  ASSERT_EQ(write(CommandType::kCreateItem, "p", "k0", 2, ts += 10).http_status(), 201);
  ASSERT_EQ(write(CommandType::kCreateItem, "p", "z", 2, ts += 10).http_status(), 201);
  EXPECT_EQ(listed(*store_, ts), (std::set<std::string>{"p/k0=2", "p/z=2"}));
  ASSERT_EQ(apply(delete_partition_command("\"p\""), ts += 10).http_status(), 200);
  EXPECT_EQ(listed(*store_, ts), (std::set<std::string>{}));
  const ContainerRecord again = *store_->reader().find_container("db", "c", nullptr);
  int64_t removed = 0;
  for (int call = 0; call < 10 && deleted_partition_records(*store_) > 0; ++call) {
    Result<PartitionDrain> drain = store_->expiry().drain_deleted_partitions(again, 3);
    ASSERT_TRUE(drain.is_ok());
    removed += drain->items;
  }
  EXPECT_EQ(removed, 8);  // k4..k9 of the first delete's, and k0 and z of the second's
  EXPECT_EQ(deleted_partition_records(*store_), 0u);
  EXPECT_EQ(store_->expiry().local_stats(again.crid).items, 0);
  ASSERT_EQ(write(CommandType::kCreateItem, "p", "k1", 3, ts += 10).http_status(), 201);
  EXPECT_EQ(listed(*store_, ts), (std::set<std::string>{"p/k1=3"}));
}

// Clients decide how many partitions are deleted: one drain visits a bounded number of marks (each costs a seek even
// when its partition is empty) and still reports how many are pending.
TEST_F(DeletedPartitionsTest, OneDrainVisitsABoundedNumberOfMarks) {
  make_container("-1");
  int64_t ts = kT0;
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(apply(delete_partition_command("\"k" + std::to_string(i) + "\""), ts += 10).http_status(), 200);
  }
  const ContainerRecord record = *store_->reader().find_container("db", "c", nullptr);
  Result<PartitionDrain> first = store_->expiry().drain_deleted_partitions(record, 1);
  ASSERT_TRUE(first.is_ok());
  EXPECT_TRUE(first->more);
  EXPECT_LE(first->examined, 4 * 1 + 64);
  EXPECT_EQ(deleted_partition_records(*store_), static_cast<size_t>(300 - first->examined));
  EXPECT_EQ(first->pending, 300 - first->examined);
  int calls = 1;
  while (deleted_partition_records(*store_) > 0 && calls < 20) {
    ASSERT_TRUE(store_->expiry().drain_deleted_partitions(record, 1).is_ok());
    ++calls;
  }
  EXPECT_EQ(deleted_partition_records(*store_), 0u);
  EXPECT_EQ(calls, 5);  // 68 marks a call
}

uint64_t test_seed() { return seed_from_env("MAYFLY_DELETE_PARTITION_SEED"); }

// Random creates, upserts, deletes, own ttls and deletes by partition key over four partitions, applied to two
// replicas: one drains at random points (random batch sizes), the other never. After every step both replicas'
// lists, walks and point reads are exactly the naive model's live items.
TEST(DeletedPartitionsModel, RandomRunMatchesANaiveModelWhetherOrNotTheCollectorRan) {
  const uint64_t seed = test_seed();
  std::printf("reproduce: MAYFLY_DELETE_PARTITION_SEED=%llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("MAYFLY_DELETE_PARTITION_SEED=" + std::to_string(seed));
  std::mt19937_64 prng(seed);
  TempDir dirs[2];
  std::unique_ptr<StateMachine> stores[2];
  for (int r = 0; r < 2; ++r) {
    StoreOptions options;
    options.path = dirs[r].path() + "/db";
    Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
    ASSERT_TRUE(opened.is_ok());
    stores[r] = std::move(opened).value();
  }
  uint64_t index = 0;
  auto apply_both = [&](const Command& command, int64_t ts) {
    ++index;
    Result<OpResult> a = stores[0]->apply(command, LogIndex(index), ts);
    Result<OpResult> b = stores[1]->apply(command, LogIndex(index), ts);
    EXPECT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(a->http_status(), b->http_status()) << "replicas answered differently";
    EXPECT_EQ(a->body, b->body);
    return *a;
  };
  apply_both(database_command(CommandType::kCreateDatabase, "db"), kT0);
  apply_both(create_container_command("db", "c", "/pk", std::string("-1")), kT0);
  struct Live {
    int v = 0;
    int64_t ts = 0;
    std::optional<int64_t> ttl;
  };
  std::map<std::pair<std::string, std::string>, Live> model;  // (pk, id) -> item
  int64_t ts = kT0;
  auto alive = [&](const Live& live, int64_t now) {
    return !live.ttl || now < ttl::expiry_instant_micros(live.ts, *live.ttl);
  };
  for (int step = 0; step < 500; ++step) {
    ts += static_cast<int64_t>(1 + prng() % 300'000);
    const std::string pk = "p" + std::to_string(prng() % 4);
    const std::string id = std::to_string(prng() % 8);
    const uint64_t roll = prng() % 20;
    const auto key = std::make_pair(pk, id);
    const bool exists = model.count(key) && alive(model[key], ts);
    if (roll < 9) {
      const std::optional<int64_t> ttl = prng() % 4 == 0 ? std::optional<int64_t>(1) : std::nullopt;
      std::string body = item(pk, id, step);
      if (ttl) body.insert(body.size() - 1, ",\"ttl\":" + std::to_string(*ttl));
      const bool create = prng() % 2 == 0;
      const OpResult result =
          apply_both(item_command(create ? CommandType::kCreateItem : CommandType::kUpsertItem, "db", "c", body), ts);
      if (create && exists) {
        ASSERT_EQ(result.http_status(), 409);
      } else {
        ASSERT_EQ(result.http_status(), exists ? 200 : 201) << result.message;
        model[key] = Live{step, ts, ttl};
      }
    } else if (roll < 12) {
      const OpResult result = apply_both(target_command(CommandType::kDeleteItem, "db", "c", "\"" + pk + "\"", id), ts);
      ASSERT_EQ(result.http_status(), exists ? 204 : 404);
      model.erase(key);
    } else if (roll < 14) {
      ASSERT_EQ(apply_both(delete_partition_command("\"" + pk + "\""), ts).http_status(), 200);
      for (auto it = model.begin(); it != model.end();) it = it->first.first == pk ? model.erase(it) : std::next(it);
    } else {
      const ContainerRecord record = *stores[0]->reader().find_container("db", "c", nullptr);
      ASSERT_TRUE(stores[0]->expiry().drain_deleted_partitions(record, prng() % 5).is_ok());
      if (prng() % 3 == 0) {
        ASSERT_TRUE(stores[0]->expiry().collect_expired("db", "c", stores[0]->applied().ts_micros, 3).is_ok());
      }
    }
    const int64_t now = stores[0]->applied().ts_micros;
    std::set<std::string> expected;
    for (const auto& [k, live] : model) {
      if (alive(live, now)) expected.insert(k.first + "/" + k.second + "=" + std::to_string(live.v));
    }
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(listed(*stores[r], now), expected) << "replica " << r << " at step " << step;
      ASSERT_EQ(walked(*stores[r], now, ItemReader::Order::kTsAscending), expected) << "replica " << r;
      const std::vector<std::string> feed = latest_feed(*stores[r]);
      ASSERT_EQ(std::set<std::string>(feed.begin(), feed.end()), expected) << "replica " << r;
      const bool readable = stores[r]->reader().read_item("db", "c", "\"" + pk + "\"", id, now).http_status() == 200;
      ASSERT_EQ(readable, model.count(key) > 0 && alive(model[key], now)) << pk << "/" << id;
    }
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
