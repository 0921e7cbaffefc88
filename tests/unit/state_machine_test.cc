#include "tests/unit/store_fixture.h"

#include "storage/document.h"
#include "storage/json.h"

namespace mayfly::storage::testing {
namespace {

class StateMachineTest : public StoreFixture {};

TEST_F(StateMachineTest, CreateReadExpire) {
  make_container("10");
  OpResult created = apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p","x":1.5})"),
                           kT0 + 1);
  ASSERT_EQ(created.http_status(), 201) << created.message;
  OpResult read_back = read("\"p\"", "a", kT0 + 5 * kSecond);
  ASSERT_EQ(read_back.http_status(), 200) << read_back.message;
  // _expiresAt = _ts + the inherited defaultTtl (10 s).
  EXPECT_EQ(read_back.body,
            R"({"id":"a","pk":"p","x":1.5,"_rid":"VxzGwwAAAAEAAAAAAAAAAw==","_etag":"\"0000000000000003\"","_ts":1700000000,"_expiresAt":1700000010})");
  EXPECT_EQ(read("\"p\"", "a", kT0 + 10 * kSecond - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", kT0 + 10 * kSecond).http_status(), 404);
}

// Resource ids laid out as Cosmos DB's (base64, '-' for '/'): a database's 4 bytes, a container's 8 starting with its
// database's, an item's 16 starting with its container's. The Rust SDK takes a container's database from its first 4
// bytes and refused Mayfly's container `_rid` "1".
std::string rid_bytes(std::string_view rid) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : rid) {
    if (c == '=') break;
    const size_t value = kAlphabet.find(c);
    EXPECT_NE(value, std::string_view::npos) << rid;
    bits = (bits << 6) | static_cast<uint32_t>(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  EXPECT_EQ(rid.size() % 4, 0u) << rid;
  return out;
}

std::string string_member(const std::string& body, const char* name) {
  Result<boost::json::value> parsed = json::parse(body);
  EXPECT_TRUE(parsed.is_ok() && parsed->is_object()) << body;
  if (!parsed.is_ok() || !parsed->is_object() || !parsed->as_object().contains(name)) return {};
  return std::string(parsed->as_object().at(name).as_string());
}

TEST_F(StateMachineTest, ResourceIdsNestLikeCosmosDbs) {
  make_container(std::nullopt);
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "other"), kT0).http_status(), 201);
  ASSERT_EQ(apply(create_container_command("other", "c", "/pk", std::nullopt), kT0).http_status(), 201);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p"})"), kT0 + 1).http_status(),
            201);
  const std::string database = rid_bytes(format_database_rid("db"));
  ASSERT_EQ(database.size(), 4u);
  const std::string container = rid_bytes(string_member(store_->reader().read_container("db", "c").body, "_rid"));
  ASSERT_EQ(container.size(), 8u);
  EXPECT_EQ(container.substr(0, 4), database);
  const std::string item = rid_bytes(string_member(read("\"p\"", "a", kT0 + 2).body, "_rid"));
  ASSERT_EQ(item.size(), 16u);
  EXPECT_EQ(item.substr(0, 8), container);
  // Another database's container of the same name has another database part and another container part.
  const std::string other = rid_bytes(string_member(store_->reader().read_container("other", "c").body, "_rid"));
  ASSERT_EQ(other.size(), 8u);
  EXPECT_NE(other.substr(0, 4), database);
  EXPECT_NE(other.substr(4), container.substr(4));
  EXPECT_EQ(rid_bytes(format_database_rid("other")), other.substr(0, 4));
}

TEST_F(StateMachineTest, AnItemWithoutAPartitionKeyValueIsInTheUndefinedPartition) {
  make_container(std::nullopt);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","x":1})"), kT0 + 1).http_status(),
            201);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":null})"), kT0 + 1).http_status(),
            201) << "null is a value of its own, not the undefined partition";
  EXPECT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a"})"), kT0 + 2).http_status(), 409);
  OpResult undefined = read("{}", "a", kT0 + 3);
  ASSERT_EQ(undefined.http_status(), 200) << undefined.message;
  EXPECT_NE(undefined.body.find(R"("x":1)"), std::string::npos) << undefined.body;
  EXPECT_EQ(read("null", "a", kT0 + 3).body.find(R"("x":1)"), std::string::npos);
  EXPECT_EQ(apply(target_command(CommandType::kDeleteItem, "db", "c", "{}", "a"), kT0 + 4).http_status(), 204);
  EXPECT_EQ(read("{}", "a", kT0 + 5).http_status(), 404);
  EXPECT_EQ(read("null", "a", kT0 + 5).http_status(), 200);
  // A value that is an object is still not a partition key value.
  EXPECT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"b","pk":{"k":1}})"), kT0 + 6).http_status(),
            400);
}

TEST(DatabaseRecordCodec, SharedThroughputIsATailOldRecordsDoNotHave) {
  DatabaseRecord plain{7, kT0};
  const std::string old_bytes = encode_database(plain);
  Result<DatabaseRecord> decoded = decode_database(old_bytes);
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(decoded->throughput, Throughput{});
  DatabaseRecord shared{7, kT0, Throughput{Throughput::Mode::kProvisioned, 1000}, kT0 + 5};
  decoded = decode_database(encode_database(shared));
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(decoded->throughput, shared.throughput);
  EXPECT_EQ(decoded->modified_ts_micros, kT0 + 5);
  EXPECT_EQ(decode_database(old_bytes + "\x01").status().code(), StatusCode::kCorruption);  // a torn tail
  ContainerRecord container;
  container.throughput = Throughput{Throughput::Mode::kShared, 1000};
  EXPECT_EQ(decode_container(encode_container(container))->throughput, container.throughput);
}

TEST_F(StateMachineTest, ContainersWithoutThroughputShareTheirDatabases) {
  Command database = database_command(CommandType::kCreateDatabase, "shared");
  database.throughput = Throughput{Throughput::Mode::kProvisioned, 1000};
  ASSERT_EQ(apply(database, kT0).http_status(), 201);
  ASSERT_EQ(apply(create_container_command("shared", "a", "/pk"), kT0).http_status(), 201);
  Command own = create_container_command("shared", "own", "/pk");
  own.throughput = Throughput{Throughput::Mode::kProvisioned, 400};
  ASSERT_EQ(apply(own, kT0).http_status(), 201);
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "plain"), kT0).http_status(), 201);
  ASSERT_EQ(apply(create_container_command("plain", "b", "/pk"), kT0).http_status(), 201);
  auto throughput_of = [&](const std::string& db, const std::string& container) {
    return store_->reader().container_record(db, container).value().throughput;
  };
  EXPECT_EQ(throughput_of("shared", "a"), (Throughput{Throughput::Mode::kShared, 1000}));
  EXPECT_EQ(throughput_of("shared", "own"), (Throughput{Throughput::Mode::kProvisioned, 400}));
  EXPECT_EQ(throughput_of("plain", "b"), Throughput{});  // serverless, as before
  EXPECT_NE(store_->reader().read_container("shared", "a").body.find(R"("mode":"shared","requestUnitsPerSecond":1000)"),
            std::string::npos);
  EXPECT_EQ(store_->reader().list_offers().body,
            R"([{"database":"shared","rid":")" + format_database_rid("shared") + R"(","throughput":1000,"ts":)" +
                std::to_string(ttl::ts_seconds(kT0)) + R"(},{"database":"shared","container":"own","rid":")" +
                string_member(store_->reader().read_container("shared", "own").body, "_rid") +
                R"(","throughput":400,"ts":)" + std::to_string(ttl::ts_seconds(kT0)) + "}]");

  // The database's figure changes for every sharing container in the same entry; its own stays.
  Command update = database_command(CommandType::kUpdateDatabase, "shared");
  update.throughput = Throughput{Throughput::Mode::kProvisioned, 2500};
  OpResult updated = apply(update, kT0 + 1);
  ASSERT_EQ(updated.http_status(), 200) << updated.message;
  EXPECT_EQ(throughput_of("shared", "a"), (Throughput{Throughput::Mode::kShared, 2500}));
  EXPECT_EQ(throughput_of("shared", "own"), (Throughput{Throughput::Mode::kProvisioned, 400}));
  // A container created afterwards shares the new figure.
  ASSERT_EQ(apply(create_container_command("shared", "later", "/pk"), kT0 + 2).http_status(), 201);
  EXPECT_EQ(throughput_of("shared", "later"), (Throughput{Throughput::Mode::kShared, 2500}));

  // Refused, changing nothing: a database without shared throughput, a figure out of range, a sharing container
  // given its own.
  update.database = "plain";
  EXPECT_EQ(apply(update, kT0 + 3).http_status(), 400);
  update.database = "shared";
  update.throughput->request_units_per_second = 0;
  EXPECT_EQ(apply(update, kT0 + 3).http_status(), 400);
  update.database = "missing";
  update.throughput->request_units_per_second = 10;
  EXPECT_EQ(apply(update, kT0 + 3).http_status(), 404);
  Command give_own;
  give_own.type = CommandType::kUpdateContainer;
  give_own.database = "shared";
  give_own.container = "a";
  give_own.throughput = Throughput{Throughput::Mode::kProvisioned, 100};
  EXPECT_EQ(apply(give_own, kT0 + 3).http_status(), 400);
  EXPECT_EQ(throughput_of("shared", "a"), (Throughput{Throughput::Mode::kShared, 2500}));
  // The dedicated one can change.
  give_own.container = "own";
  EXPECT_EQ(apply(give_own, kT0 + 3).http_status(), 200);
  EXPECT_EQ(throughput_of("shared", "own"), (Throughput{Throughput::Mode::kProvisioned, 100}));
}

}  // namespace
}  // namespace mayfly::storage::testing

namespace mayfly::storage::testing {
namespace {

TEST_F(StateMachineTest, SnapshotInstallsTheSameStateElsewhere) {
  make_container("10");
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c",
                                 "{\"id\":\"" + std::to_string(i) + "\",\"pk\":\"p\",\"ttl\":" +
                                     std::to_string(1 + i % 3) + "}"),
                    kT0 + i)
                  .http_status(),
              201);
  }
  ASSERT_EQ(apply(Command{}, kT0 + 2 * kSecond).http_status(), 200);  // time: items with ttl 1 and 2 expired
  auto data = store_->export_snapshot();
  ASSERT_TRUE(data.is_ok()) << data.status().to_string();

  TempDir other_dir;
  StoreOptions options;
  options.path = other_dir.path() + "/db";
  auto other = StateMachine::open(options);
  ASSERT_TRUE(other.is_ok());
  // The receiving node already had some other state: it is replaced entirely.
  ASSERT_TRUE((*other)->apply(database_command(CommandType::kCreateDatabase, "old"), LogIndex(1), kT0).is_ok());
  ASSERT_TRUE((*other)->install_snapshot(*data).is_ok());
  EXPECT_EQ((*other)->applied().index, store_->applied().index);
  EXPECT_EQ((*other)->applied().ts_micros, store_->applied().ts_micros);
  EXPECT_EQ(*(*other)->dump(false), *store_->dump(false));
  EXPECT_EQ((*other)->reader().read_database("old").http_status(), 404);
  auto stats = (*other)->expiry().container_stats("db", "c");
  auto original = store_->expiry().container_stats("db", "c");
  ASSERT_TRUE(stats.is_ok() && original.is_ok());
  EXPECT_EQ(stats->stored_items, 20);
  EXPECT_EQ(stats->live_items, original->live_items);
  EXPECT_EQ(stats->backlog.items, original->backlog.items);
  EXPECT_GT(stats->backlog.items, 0);
  EXPECT_FALSE((*other)->install_snapshot("garbage").is_ok());
  EXPECT_EQ(*(*other)->dump(false), *store_->dump(false)) << "a bad snapshot must change nothing";
}

}  // namespace
}  // namespace mayfly::storage::testing

namespace mayfly::storage::testing {
namespace {

TEST_F(StateMachineTest, NextExpiryIsTheEarliestFutureDeadlineOfEitherIndex) {
  make_container("10");  // written at kT0: inheriting items written at kT0 + x expire at kT0 + 10 s
  auto next = store_->expiry().next_expiry_after(kT0);
  ASSERT_TRUE(next.is_ok());
  EXPECT_FALSE(next->has_value()) << "no items, nothing to schedule";
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p"})"), kT0 + 500).http_status(), 201);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"b","pk":"p","ttl":3})"), kT0 + 600)
                .http_status(),
            201);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"c","pk":"p","ttl":-1})"), kT0 + 700)
                .http_status(),
            201);
  EXPECT_EQ(**store_->expiry().next_expiry_after(kT0 + 700), kT0 + 3 * kSecond);            // b, own ttl
  EXPECT_EQ(**store_->expiry().next_expiry_after(kT0 + 3 * kSecond), kT0 + 10 * kSecond);   // then a, inherited
  EXPECT_FALSE(store_->expiry().next_expiry_after(kT0 + 10 * kSecond)->has_value());       // c never expires
  // TTL off: nothing is scheduled although items keep their own ttl.
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), kT0 + kSecond).http_status(), 200);
  EXPECT_FALSE(store_->expiry().next_expiry_after(kT0 + kSecond)->has_value());
}


TEST_F(StateMachineTest, ExpiringSoonCountsLiveItemsByWindowFromBothIndexes) {
  make_container("10");  // inheriting items written at kT0 + x expire at kT0 + 10 s
  const std::vector<int64_t> windows = {5 * kSecond, 60 * kSecond, 3600 * kSecond};
  auto write = [&](const char* body, int64_t ts) {
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", body), ts).http_status(), 201) << body;
  };
  write(R"({"id":"a","pk":"p"})", kT0 + 500);               // expires kT0 + 10 s (inherited)
  write(R"({"id":"b","pk":"p","ttl":3})", kT0 + 600);       // kT0 + 3 s
  write(R"({"id":"c","pk":"p","ttl":-1})", kT0 + 700);      // never
  write(R"({"id":"d","pk":"p","ttl":120})", kT0 + 800);     // kT0 + 120 s
  write(R"({"id":"e","pk":"p","ttl":7200})", kT0 + 900);    // kT0 + 2 h: beyond every window
  write(R"({"id":"f","pk":"q","ttl":63})", kT0 + 950);      // kT0 + 63 s: exactly at the end of the 60 s window below
  auto counts = [&] {
    Result<std::vector<ExpiringSoon>> soon = store_->reader().expiring_soon(windows);
    EXPECT_TRUE(soon.is_ok()) << soon.status().to_string();
    EXPECT_EQ(soon->size(), 1u);
    if (soon->size() != 1) return std::vector<int64_t>{};
    EXPECT_EQ((*soon)[0].database, "db");
    EXPECT_EQ((*soon)[0].container, "c");
    return (*soon)[0].counts;
  };
  EXPECT_EQ(counts(), (std::vector<int64_t>{1, 2, 4})) << "at kT0 + 950 µs: b | a b | a b d f (e beyond, c never)";
  {
    // A cap of 2 index entries per container: counts are lower bounds, and the answer says it was cut.
    Result<std::vector<ExpiringSoon>> capped = store_->reader().expiring_soon(windows, 2);
    ASSERT_TRUE(capped.is_ok());
    ASSERT_EQ(capped->size(), 1u);
    EXPECT_TRUE((*capped)[0].truncated);
    EXPECT_EQ((*capped)[0].counts[2], 2) << "two entries read of four";
    Result<std::vector<ExpiringSoon>> exact = store_->reader().expiring_soon(windows, 4);
    ASSERT_TRUE(exact.is_ok());
    EXPECT_FALSE((*exact)[0].truncated);
    EXPECT_EQ((*exact)[0].counts, (std::vector<int64_t>{1, 2, 4}));
  }
  ASSERT_EQ(apply(Command{}, kT0 + 3 * kSecond).http_status(), 200);  // a time entry: b has expired
  EXPECT_EQ(counts(), (std::vector<int64_t>{0, 2, 3})) << "b is expired, not expiring; f's deadline is exactly now + 60 s";
  // Lowering the default kills `a` at once (written more than 1 s ago): it leaves every window.
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "1"), kT0 + 4 * kSecond).http_status(), 200);
  EXPECT_EQ(counts(), (std::vector<int64_t>{0, 1, 2}));
  // TTL off: nothing expires, the container is not reported.
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), kT0 + 5 * kSecond).http_status(), 200);
  Result<std::vector<ExpiringSoon>> off = store_->reader().expiring_soon(windows);
  ASSERT_TRUE(off.is_ok());
  EXPECT_TRUE(off->empty());
}

}  // namespace
}  // namespace mayfly::storage::testing

#include <leveldb/db.h>

#include "storage/layout.h"

namespace mayfly::storage::testing {
namespace {

// Whether apply stops is decided by the answer's code, not by an HTTP number: a refusal of the API (409 here) is a
// verdict and the store goes on; a stored record that does not decode is a failure of the store, which this replica
// alone meets, so apply stops — sticky, the applied position unchanged — instead of answering anything.
TEST_F(StateMachineTest, ARefusalIsAVerdictButACorruptRecordStopsApplyForGood) {
  make_container(std::nullopt);
  const Command create = item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p"})");
  ASSERT_EQ(apply(create, kT0 + kSecond).http_status(), 201);
  const OpResult again = apply(create, kT0 + 2 * kSecond);
  EXPECT_EQ(again.code, StatusCode::kConflict);
  EXPECT_EQ(again.http_status(), 409);
  EXPECT_EQ(apply(Command{}, kT0 + 3 * kSecond).http_status(), 200);  // still applying

  store_.reset();
  {
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), dir_.path() + "/db", &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), container_key("db", "c"), "not a container record").ok());
  }
  reopen();
  const uint64_t applied = store_->applied().index.value();
  const Command upsert = item_command(CommandType::kUpsertItem, "db", "c", R"({"id":"b","pk":"p"})");
  Result<OpResult> failed = store_->apply(upsert, LogIndex(next_index_++), kT0 + 4 * kSecond);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_TRUE(is_storage_failure(failed.status().code())) << failed.status().to_string();
  Result<OpResult> later = store_->apply(Command{}, LogIndex(next_index_++), kT0 + 5 * kSecond);
  ASSERT_FALSE(later.is_ok());
  EXPECT_EQ(later.status().to_string(), failed.status().to_string());
  EXPECT_EQ(store_->applied().index.value(), applied);
}

}  // namespace
}  // namespace mayfly::storage::testing

#include "storage/document.h"

namespace mayfly::storage::testing {
namespace {

// The leader validates an item body once and logs its parts (storage::PreparedBody): a replica applying that form
// stores exactly what it stores from the raw body, and the form survives the log's encoding.
TEST_F(StateMachineTest, APreparedBodyAppliesAsTheRawBodyDoesAndRoundTripsThroughTheLog) {
  make_container("10");
  const std::string body = R"({"id":"a","pk":"p","ttl":30,"_rid":"ignored","x":[1,2]})";
  Command raw = item_command(CommandType::kUpsertItem, "db", "c", body);
  Command prepared = raw;
  std::optional<ContainerRecord> container = store_->container_for_write("db", "c");
  ASSERT_TRUE(container.has_value());
  ASSERT_TRUE(prepare_body(prepared, *container).is_ok());
  ASSERT_TRUE(prepared.prepared.has_value());
  EXPECT_TRUE(prepared.body.empty());
  EXPECT_EQ(prepared.prepared->container_rid, container->crid);
  EXPECT_EQ(prepared.prepared->item.id, "a");
  EXPECT_EQ(prepared.prepared->item.partition_key, "\"p\"");
  EXPECT_EQ(prepared.prepared->item.ttl, ttl::ItemTtl::of_seconds(30));
  EXPECT_EQ(prepared.prepared->item.json, R"({"id":"a","pk":"p","ttl":30,"x":[1,2]})");

  Result<Command> decoded = decode_command(encode_command(prepared));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->prepared, prepared.prepared);
  EXPECT_TRUE(decoded->body.empty());
  EXPECT_EQ(decoded->write_id, prepared.write_id);
  // A raw command keeps its bytes: no prepared form appears.
  EXPECT_FALSE(decode_command(encode_command(raw))->prepared.has_value());

  const OpResult from_raw = apply(raw, kT0 + 1);
  ASSERT_EQ(from_raw.http_status(), 201) << from_raw.message;
  ASSERT_EQ(read("\"p\"", "a", kT0 + 2).http_status(), 200) << from_raw.body;
  const OpResult from_prepared = apply(*decoded, kT0 + 2);
  ASSERT_EQ(from_prepared.http_status(), 200) << from_prepared.body << " after " << from_raw.body;
  // The same item either way, but for its system properties (the second write's etag and _ts).
  const OpResult read_back = read("\"p\"", "a", kT0 + 3);
  ASSERT_EQ(read_back.http_status(), 200);
  EXPECT_EQ(read_back.body, from_prepared.body);
  EXPECT_EQ(from_raw.body.substr(0, from_raw.body.find("\"_rid\"")),
            from_prepared.body.substr(0, from_prepared.body.find("\"_rid\"")));

  // A bad body is refused and the command left as it was.
  Command bad = item_command(CommandType::kCreateItem, "db", "c", R"({"id":"b","pk":"p","ttl":0})");
  EXPECT_EQ(prepare_body(bad, *container).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(bad.prepared.has_value());
  EXPECT_FALSE(bad.body.empty());
}

// A body validated against a container that was deleted and created again before the entry applied (another rid,
// here another partition key path) is validated afresh against the container it now applies to.
TEST_F(StateMachineTest, APreparedBodyForAReplacedContainerIsValidatedAgainstTheNewOne) {
  make_container(std::nullopt);
  std::optional<ContainerRecord> old_container = store_->container_for_write("db", "c");
  ASSERT_TRUE(old_container.has_value());
  Command by_pk = item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p","tenant":"t"})");
  ASSERT_TRUE(prepare_body(by_pk, *old_container).is_ok());
  Command no_tenant = item_command(CommandType::kCreateItem, "db", "c", R"({"id":"b","pk":"p","tenant":{"k":1}})");
  ASSERT_TRUE(prepare_body(no_tenant, *old_container).is_ok());

  Command drop;
  drop.type = CommandType::kDeleteContainer;
  drop.database = "db";
  drop.container = "c";
  ASSERT_EQ(apply(drop, kT0 + 1).http_status(), 204);
  ASSERT_EQ(apply(create_container_command("db", "c", "/tenant", std::nullopt), kT0 + 2).http_status(), 201);

  // Keyed by the new path's value, not the old key the leader extracted.
  ASSERT_EQ(apply(by_pk, kT0 + 3).http_status(), 201);
  EXPECT_EQ(store_->reader().read_item("db", "c", "\"t\"", "a", kT0 + 4).http_status(), 200);
  EXPECT_EQ(store_->reader().read_item("db", "c", "\"p\"", "a", kT0 + 4).http_status(), 404);
  // No partition key value at the new path (an object): refused, as the raw body would have been.
  const OpResult refused = apply(no_tenant, kT0 + 5);
  EXPECT_EQ(refused.http_status(), 400) << refused.message;
}

TEST(CommandCodec, AMalformedPreparedBodyIsUndecodable) {
  Command command = item_command(CommandType::kCreateItem, "db", "c", "");
  command.prepared = PreparedBody{.container_rid = 7,
                                  .item = PreparedItem{.id = "a", .partition_key = "\"p\"", .ttl = {}, .json = "{}"}};
  const std::string good = encode_command(command);
  ASSERT_TRUE(decode_command(good).is_ok());
  // The flag on a type that has no body to prepare.
  std::string wrong_type = good;
  wrong_type[1] = static_cast<char>(static_cast<uint8_t>(CommandType::kDeleteItem) | 0x80);
  EXPECT_FALSE(decode_command(wrong_type).is_ok());
  // Every truncation is refused.
  for (size_t size = 0; size < good.size(); ++size) {
    EXPECT_FALSE(decode_command(good.substr(0, size)).is_ok()) << size;
  }
  // A json that is not an object, an empty id.
  Command not_object = command;
  not_object.prepared->item.json = "[1]";
  EXPECT_FALSE(decode_command(encode_command(not_object)).is_ok());
  Command no_id = command;
  no_id.prepared->item.id.clear();
  EXPECT_FALSE(decode_command(encode_command(no_id)).is_ok());
}

}  // namespace
}  // namespace mayfly::storage::testing
