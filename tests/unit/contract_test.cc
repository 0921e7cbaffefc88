// The TTL contract (docs/ttl.md §2–§7, §9) at the state-machine level: every rule is exercised end to end
// through StateMachine::apply / read_item / list_items / collect_expired / backlog on a real LevelDB, at explicit
// replicated timestamps (no clocks, no sleeps). Each test is named after the rule it checks.
#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <tuple>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/document.h"
#include "storage/json.h"
#include "storage/patch.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

using Dump = std::vector<std::pair<std::string, std::string>>;

// kT0 + s seconds.
constexpr int64_t at(int64_t seconds) { return kT0 + seconds * kSecond; }
constexpr int64_t kT0Seconds = kT0 / kSecond;
constexpr int64_t kMaxTtl = 2147483647;

std::string item_ttl_message(const std::string& value_text) {
  return "The input ttl '" + value_text +
         "' is invalid. Ensure to provide a nonzero positive integer less than or equal to '2147483647', or '-1' "
         "which means never expire.";
}
const std::string kIndexingNoneMessage =
    "Indexing mode value cannot be 'none' when 'defaultTtl' is specified in the collection";

// Invalid ttl / defaultTtl values (docs/ttl.md §2) as JSON text, and how they read inside the error message.
struct BadTtl {
  std::string json;
  std::string text;
};
const std::vector<BadTtl>& bad_ttls() {
  static const std::vector<BadTtl> values = {
      {"null", "null"}, {"0", "0"},     {"-2", "-2"}, {"2147483648", "2147483648"}, {"1.5", "1.5"},
      {"\"5\"", "5"},   {"true", "true"}, {"{}", "{}"}, {"[]", "[]"},                 {"-9223372036854775808", "-9223372036854775808"},
      {"18446744073709551615", "18446744073709551615"},
  };
  return values;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

size_t count_of(const std::string& haystack, const std::string& needle) {
  size_t count = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++count;
  return count;
}

boost::json::object parse_object(const std::string& body) {
  Result<boost::json::value> parsed = json::parse(body);
  EXPECT_TRUE(parsed.is_ok()) << body;
  if (!parsed.is_ok() || !parsed->is_object()) {
    ADD_FAILURE() << "not a JSON object: " << body;
    return {};
  }
  return parsed->get_object();
}

std::string string_field(const std::string& body, std::string_view name) {
  boost::json::object object = parse_object(body);
  const boost::json::value* value = object.if_contains(name);
  if (value == nullptr || !value->is_string()) return "<missing " + std::string(name) + ">";
  return std::string(value->get_string());
}

std::optional<int64_t> int_field(const std::string& body, std::string_view name) {
  boost::json::object object = parse_object(body);
  const boost::json::value* value = object.if_contains(name);
  if (value == nullptr || !value->is_int64()) return std::nullopt;
  return value->get_int64();
}

// The ids of a list_items body (a JSON array of items).
std::vector<std::string> ids_of(const std::string& list_body) {
  std::vector<std::string> ids;
  Result<boost::json::value> parsed = json::parse(list_body);
  EXPECT_TRUE(parsed.is_ok() && parsed->is_array()) << list_body;
  if (!parsed.is_ok() || !parsed->is_array()) return ids;
  for (const boost::json::value& item : parsed->get_array()) {
    ids.emplace_back(item.get_object().at("id").get_string());
  }
  return ids;
}

std::string item_body(const std::string& id, const std::string& pk, const std::string& extra = "") {
  std::string body = R"({"id":")" + id + R"(","pk":")" + pk + "\"";
  if (!extra.empty()) body += "," + extra;
  return body + "}";
}

std::unique_ptr<StateMachine> open_store(const std::string& path) {
  StoreOptions options;
  options.path = path;
  Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
  if (!opened.is_ok()) return nullptr;
  return std::move(opened).value();
}

class Contract : public StoreFixture {
 public:  // public so that lambdas in tests can call them through a Contract&
  OpResult create(const std::string& body, int64_t ts, const std::string& container = "c") {
    return apply(item_command(CommandType::kCreateItem, "db", container, body), ts);
  }
  OpResult replace(const std::string& body, int64_t ts, std::optional<std::string> if_match = std::nullopt,
                   const std::string& container = "c") {
    return apply(item_command(CommandType::kReplaceItem, "db", container, body, std::move(if_match)), ts);
  }
  OpResult upsert(const std::string& body, int64_t ts, std::optional<std::string> if_match = std::nullopt,
                  const std::string& container = "c") {
    return apply(item_command(CommandType::kUpsertItem, "db", container, body, std::move(if_match)), ts);
  }
  OpResult patch(const std::string& pk_json, const std::string& id, const std::string& operations, int64_t ts,
                 std::optional<std::string> if_match = std::nullopt, const std::string& container = "c") {
    return apply(target_command(CommandType::kPatchItem, "db", container, pk_json, id, operations,
                                std::move(if_match)),
                 ts);
  }
  OpResult remove(const std::string& pk_json, const std::string& id, int64_t ts,
                  std::optional<std::string> if_match = std::nullopt, const std::string& container = "c") {
    return apply(target_command(CommandType::kDeleteItem, "db", container, pk_json, id, "", std::move(if_match)),
                 ts);
  }
  // Advances the replicated time with a leader time entry.
  void tick(int64_t ts) { ASSERT_EQ(apply(Command{}, ts).http_status(), 200); }

  OpResult read_in(const std::string& container, const std::string& pk_json, const std::string& id, int64_t now) {
    return store_->reader().read_item("db", container, pk_json, id, now);
  }
  OpResult list(std::optional<std::string> pk_json, int64_t now, size_t max_items = 100,
                const std::string& continuation = "", const std::string& container = "c") {
    ListRequest request;
    request.database = "db";
    request.container = container;
    request.partition_key_json = std::move(pk_json);
    request.max_items = max_items;
    request.continuation = continuation;
    return store_->reader().list_items(request, now);
  }
  // All pages of a listing.
  std::vector<std::string> list_all_ids(std::optional<std::string> pk_json, int64_t now, size_t page_size,
                                        int64_t* skipped = nullptr, const std::string& container = "c") {
    std::vector<std::string> ids;
    std::string continuation;
    for (int page = 0; page < 1000; ++page) {
      OpResult result = list(pk_json, now, page_size, continuation, container);
      EXPECT_EQ(result.http_status(), 200) << result.message;
      if (!result.ok()) break;
      std::vector<std::string> page_ids = ids_of(result.body);
      EXPECT_LE(page_ids.size(), page_size);
      ids.insert(ids.end(), page_ids.begin(), page_ids.end());
      if (skipped != nullptr) *skipped += result.expired_skipped;
      if (result.continuation.empty()) break;
      continuation = result.continuation;
    }
    return ids;
  }

  void add_container(const std::string& name, std::optional<std::string> default_ttl_json, int64_t ts = kT0) {
    OpResult created = apply(create_container_command("db", name, "/pk", std::move(default_ttl_json)), ts);
    ASSERT_EQ(created.http_status(), 201) << created.message;
  }

  // Everything in the store (replicated and local) except the meta key, which records the applied position.
  Dump dump_without_meta() {
    Result<Dump> dumped = store_->dump(true);
    EXPECT_TRUE(dumped.is_ok()) << dumped.status().to_string();
    if (!dumped.is_ok()) return {};
    Dump out;
    for (auto& entry : *dumped) {
      if (entry.first != meta_key()) out.push_back(std::move(entry));
    }
    return out;
  }

  ContainerStats stats(const std::string& container = "c") {
    Result<ContainerStats> result = store_->expiry().container_stats("db", container);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? *result : ContainerStats{};
  }
  Backlog backlog(const std::string& container = "c") {
    Result<Backlog> result = store_->expiry().backlog("db", container);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? *result : Backlog{};
  }
  CollectResult collect(int64_t up_to, size_t max_items = 1000, const std::string& container = "c") {
    Result<CollectResult> result = store_->expiry().collect_expired("db", container, up_to, max_items);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    return result.is_ok() ? *result : CollectResult{};
  }
};

// ===== §2 Validation =================================================================================================

TEST_F(Contract, InvalidItemTtlIs400WithExactMessageAndNothingWrittenOnCreate) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  add_container("off", std::nullopt);  // TTL off: the item ttl is validated anyway
  add_container("minus1", "-1");
  add_container("n10", "10");
  for (const std::string container : {"off", "minus1", "n10"}) {
    SCOPED_TRACE("container " + container);
    for (const BadTtl& bad : bad_ttls()) {
      SCOPED_TRACE("ttl " + bad.json);
      const Dump before = dump_without_meta();
      OpResult created = create(item_body("a", "p", "\"ttl\":" + bad.json), at(1), container);
      EXPECT_EQ(created.http_status(), 400);
      EXPECT_EQ(created.message, item_ttl_message(bad.text));
      EXPECT_EQ(dump_without_meta(), before);
      EXPECT_EQ(read_in(container, "\"p\"", "a", at(1)).http_status(), 404);
    }
  }
}

TEST_F(Contract, InvalidItemTtlIs400AndLeavesTheItemUnchangedOnReplaceUpsertAndPatch) {
  make_container("-1");
  OpResult created = create(item_body("a", "p", "\"ttl\":100,\"v\":1"), at(1));
  ASSERT_EQ(created.http_status(), 201);
  for (const BadTtl& bad : bad_ttls()) {
    SCOPED_TRACE("ttl " + bad.json);
    const Dump before = dump_without_meta();
    OpResult replaced = replace(item_body("a", "p", "\"ttl\":" + bad.json + ",\"v\":2"), at(2));
    EXPECT_EQ(replaced.http_status(), 400);
    EXPECT_EQ(replaced.message, item_ttl_message(bad.text));
    OpResult upserted = upsert(item_body("a", "p", "\"ttl\":" + bad.json + ",\"v\":2"), at(2));
    EXPECT_EQ(upserted.http_status(), 400);
    EXPECT_EQ(upserted.message, item_ttl_message(bad.text));
    OpResult upserted_new = upsert(item_body("new", "p", "\"ttl\":" + bad.json), at(2));
    EXPECT_EQ(upserted_new.http_status(), 400);
    EXPECT_EQ(upserted_new.message, item_ttl_message(bad.text));
    OpResult patched = patch("\"p\"", "a", R"([{"op":"set","path":"/ttl","value":)" + bad.json + "}]", at(2));
    EXPECT_EQ(patched.http_status(), 400);
    EXPECT_EQ(patched.message, item_ttl_message(bad.text));
    EXPECT_EQ(dump_without_meta(), before);
    OpResult read_back = read("\"p\"", "a", at(2));
    ASSERT_EQ(read_back.http_status(), 200);
    EXPECT_EQ(read_back.body, created.body);
    EXPECT_EQ(read("\"p\"", "new", at(2)).http_status(), 404);
  }
}

TEST_F(Contract, ValidItemTtlBoundaryValuesAreAcceptedAndReturnedAsWritten) {
  make_container("-1");
  for (const char* value : {"-1", "1", "2147483647"}) {
    SCOPED_TRACE(value);
    const std::string id = std::string("i") + value;
    OpResult created = create(item_body(id, "p", std::string("\"ttl\":") + value), kT0);
    ASSERT_EQ(created.http_status(), 201) << created.message;
    EXPECT_EQ(int_field(created.body, "ttl"), std::stoll(value));
    OpResult read_back = read("\"p\"", id, kT0);
    ASSERT_EQ(read_back.http_status(), 200);
    EXPECT_EQ(int_field(read_back.body, "ttl"), std::stoll(value));
  }
}

TEST_F(Contract, InvalidContainerDefaultTtlOnCreateIs400AndNothingWritten) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  for (const BadTtl& bad : bad_ttls()) {
    SCOPED_TRACE("defaultTtl " + bad.json);
    const Dump before = dump_without_meta();
    OpResult created = apply(create_container_command("db", "c", "/pk", bad.json), at(1));
    EXPECT_EQ(created.http_status(), 400);
    EXPECT_TRUE(contains(created.message, "defaultTtl")) << created.message;
    EXPECT_TRUE(contains(created.message, "'" + bad.text + "'")) << created.message;
    EXPECT_EQ(dump_without_meta(), before);
    EXPECT_EQ(store_->reader().read_container("db", "c").http_status(), 404);
  }
}

TEST_F(Contract, InvalidContainerDefaultTtlOnUpdateIs400AndContainerUnchanged) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  const std::string container_before = store_->reader().read_container("db", "c").body;
  for (const BadTtl& bad : bad_ttls()) {
    SCOPED_TRACE("defaultTtl " + bad.json);
    const Dump before = dump_without_meta();
    OpResult updated = apply(set_default_ttl_command("db", "c", bad.json), at(1));
    EXPECT_EQ(updated.http_status(), 400);
    EXPECT_TRUE(contains(updated.message, "'" + bad.text + "'")) << updated.message;
    EXPECT_EQ(dump_without_meta(), before);
    EXPECT_EQ(store_->reader().read_container("db", "c").body, container_before);
  }
  // The old policy still governs the item.
  EXPECT_EQ(read("\"p\"", "a", at(10) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(10)).http_status(), 404);
}

TEST_F(Contract, ValidContainerDefaultTtlBoundaryValuesAreAccepted) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  for (const char* value : {"-1", "1", "2147483647"}) {
    SCOPED_TRACE(value);
    const std::string name = std::string("c") + value;
    OpResult created = apply(create_container_command("db", name, "/pk", std::string(value)), kT0);
    ASSERT_EQ(created.http_status(), 201) << created.message;
    EXPECT_EQ(int_field(created.body, "defaultTtl"), std::stoll(value));
    EXPECT_EQ(int_field(store_->reader().read_container("db", name).body, "defaultTtl"), std::stoll(value));
  }
  add_container("u", std::nullopt);
  for (const char* value : {"-1", "1", "2147483647"}) {
    SCOPED_TRACE(value);
    OpResult updated = apply(set_default_ttl_command("db", "u", std::string(value)), at(1));
    ASSERT_EQ(updated.http_status(), 200) << updated.message;
    EXPECT_EQ(int_field(store_->reader().read_container("db", "u").body, "defaultTtl"), std::stoll(value));
  }
  // Absent defaultTtl: TTL off, no defaultTtl property.
  OpResult removed = apply(set_default_ttl_command("db", "u", std::nullopt), at(2));
  ASSERT_EQ(removed.http_status(), 200);
  EXPECT_FALSE(parse_object(store_->reader().read_container("db", "u").body).contains("defaultTtl"));
}

TEST_F(Contract, DefaultTtlWithIndexingNoneIs400OnCreate) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  for (const char* value : {"-1", "10"}) {
    SCOPED_TRACE(value);
    Command command = create_container_command("db", "c", "/pk", std::string(value));
    command.indexing = ttl::IndexingMode::kNone;
    const Dump before = dump_without_meta();
    OpResult created = apply(command, kT0);
    EXPECT_EQ(created.http_status(), 400);
    EXPECT_EQ(created.message, kIndexingNoneMessage);
    EXPECT_EQ(dump_without_meta(), before);
  }
  Command no_ttl = create_container_command("db", "c", "/pk");
  no_ttl.indexing = ttl::IndexingMode::kNone;
  EXPECT_EQ(apply(no_ttl, kT0).http_status(), 201);
}

TEST_F(Contract, SwitchingIndexingToNoneWithDefaultTtlIs400) {
  make_container("-1");
  Command command;
  command.type = CommandType::kUpdateContainer;
  command.database = "db";
  command.container = "c";
  command.indexing = ttl::IndexingMode::kNone;
  const Dump before = dump_without_meta();
  OpResult updated = apply(command, at(1));
  EXPECT_EQ(updated.http_status(), 400);
  EXPECT_EQ(updated.message, kIndexingNoneMessage);
  EXPECT_EQ(dump_without_meta(), before);
  // Removing the defaultTtl in the same update makes it valid.
  command.default_ttl_change = DefaultTtlChange::kRemove;
  EXPECT_EQ(apply(command, at(2)).http_status(), 200);
  // And setting a defaultTtl on a container with indexing none is the same 400.
  OpResult set = apply(set_default_ttl_command("db", "c", "10"), at(3));
  EXPECT_EQ(set.http_status(), 400);
  EXPECT_EQ(set.message, kIndexingNoneMessage);
}

TEST_F(Contract, OnlyLowercaseTopLevelTtlIsSpecial) {
  make_container("-1");
  // Values that would be invalid as `ttl` are fine in other properties.
  int n = 0;
  for (const std::string extra :
       {R"("TTL":0)", R"("TimeToLive":"5")", R"("a":{"ttl":0})", R"("Ttl":null)", R"("TTL":1)", R"("a":{"ttl":1})"}) {
    SCOPED_TRACE(extra);
    const std::string id = "i" + std::to_string(n++);
    OpResult created = create(item_body(id, "p", extra), kT0);
    ASSERT_EQ(created.http_status(), 201) << created.message;
    // Container -1, no own ttl: never expires (the TTL:1 / a.ttl:1 look-alikes must not make it expire).
    EXPECT_EQ(read("\"p\"", id, at(1000000)).http_status(), 200);
  }
  // In a container with a default, look-alikes don't override the default either.
  add_container("d", "10");
  ASSERT_EQ(create(item_body("x", "p", R"("TTL":1000,"a":{"ttl":1000})"), kT0, "d").http_status(), 201);
  EXPECT_EQ(read_in("d", "\"p\"", "x", at(10) - 1).http_status(), 200);
  EXPECT_EQ(read_in("d", "\"p\"", "x", at(10)).http_status(), 404);
}

TEST_F(Contract, TtlIsStoredAndReturnedExactlyAsWritten) {
  make_container("10");
  OpResult created = create(R"({"id":"a","pk":"p","ttl":7,"z":[1,2.5,"x"],"n":null})", kT0);
  ASSERT_EQ(created.http_status(), 201);
  OpResult read_back = read("\"p\"", "a", kT0);
  ASSERT_EQ(read_back.http_status(), 200);
  const std::string prefix = R"({"id":"a","pk":"p","ttl":7,"z":[1,2.5,"x"],"n":null,"_rid":)";
  EXPECT_EQ(read_back.body.substr(0, prefix.size()), prefix) << read_back.body;
  EXPECT_EQ(created.body, read_back.body);
}

TEST_F(Contract, InheritedDefaultTtlIsNotCopiedIntoTheItem) {
  make_container("10");
  OpResult created = create(item_body("a", "p"), kT0);
  ASSERT_EQ(created.http_status(), 201);
  EXPECT_FALSE(parse_object(created.body).contains("ttl")) << created.body;
  OpResult read_back = read("\"p\"", "a", kT0);
  ASSERT_EQ(read_back.http_status(), 200);
  EXPECT_FALSE(parse_object(read_back.body).contains("ttl")) << read_back.body;
  // After the default changes the item follows the new default (it was never frozen into the item).
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "100"), at(5)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(50)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(100)).http_status(), 404);
}

TEST_F(Contract, ClientSystemPropertiesAreIgnoredAndOverwritten) {
  make_container("-1");
  const std::string body = R"({"id":"a","pk":"p","_ts":1,"_etag":"\"fake\"","_rid":"fake","ttl":5})";
  OpResult created = create(body, kT0 + 300'000);
  ASSERT_EQ(created.http_status(), 201) << created.message;
  OpResult read_back = read("\"p\"", "a", kT0 + 300'000);
  ASSERT_EQ(read_back.http_status(), 200);
  for (const OpResult& result : {created, read_back}) {
    EXPECT_EQ(count_of(result.body, "\"_ts\""), 1u) << result.body;
    EXPECT_EQ(count_of(result.body, "\"_etag\""), 1u) << result.body;
    EXPECT_EQ(count_of(result.body, "\"_rid\""), 1u) << result.body;
    EXPECT_EQ(int_field(result.body, "_ts"), kT0Seconds);
    EXPECT_EQ(string_field(result.body, "_etag"), created.etag);
    EXPECT_NE(string_field(result.body, "_rid"), "fake");
  }
  // A client `_ts` does not move the expiry: E = real _ts + ttl.
  EXPECT_EQ(read("\"p\"", "a", at(5) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(5)).http_status(), 404);
  // Replace with system properties: still the server's.
  OpResult replaced = replace(R"({"id":"a2","pk":"p","_ts":99999999999})", at(1));
  EXPECT_EQ(replaced.http_status(), 404);
  ASSERT_EQ(create(R"({"id":"b","pk":"p"})", at(1)).http_status(), 201);
  replaced = replace(R"({"id":"b","pk":"p","_ts":99999999999,"_etag":"x"})", at(2));
  ASSERT_EQ(replaced.http_status(), 200);
  EXPECT_EQ(int_field(replaced.body, "_ts"), kT0Seconds + 2);
  EXPECT_EQ(string_field(replaced.body, "_etag"), replaced.etag);
}

TEST_F(Contract, ItemTtlArithmeticIs64BitWithoutOverflowDate) {
  make_container("-1");
  add_container("d", std::to_string(kMaxTtl));
  ASSERT_EQ(create(item_body("a", "p", "\"ttl\":2147483647"), kT0 + 999'999).http_status(), 201);
  ASSERT_EQ(create(item_body("a", "p"), kT0 + 999'999, "d").http_status(), 201);
  const int64_t expiry = (kT0Seconds + kMaxTtl) * kSecond;  // year 2091: past 2^31 seconds since the epoch
  for (const std::string container : {"c", "d"}) {
    SCOPED_TRACE(container);
    EXPECT_EQ(read_in(container, "\"p\"", "a", expiry - 1).http_status(), 200);
    EXPECT_EQ(read_in(container, "\"p\"", "a", expiry).http_status(), 404);
  }
}

// ===== §3 Effective TTL matrix =======================================================================================

TEST_F(Contract, EffectiveTtlMatrixEndToEnd) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  struct Column {
    std::string name;
    std::optional<std::string> default_ttl;
  };
  const std::vector<Column> columns = {{"off", std::nullopt}, {"minus1", "-1"}, {"n10", "10"}};
  for (const Column& column : columns) add_container(column.name, column.default_ttl);
  struct Cell {
    std::string container;
    std::string item_ttl;              // "" absent
    std::optional<int64_t> effective;  // nullopt never
  };
  const std::vector<Cell> cells = {
      {"off", "", std::nullopt},     {"minus1", "", std::nullopt},   {"n10", "", 10},
      {"off", "-1", std::nullopt},   {"minus1", "-1", std::nullopt}, {"n10", "-1", std::nullopt},
      {"off", "20", std::nullopt},   {"minus1", "20", 20},           {"n10", "20", 20},
      {"off", "5", std::nullopt},    {"minus1", "5", 5},             {"n10", "5", 5},
  };
  // Written at a fractional time: _ts is the whole second, E = _ts + e exactly.
  const int64_t write_ts = kT0 + 700'000;
  int n = 0;
  std::vector<std::string> ids;
  for (const Cell& cell : cells) {
    const std::string id = "i" + std::to_string(n++);
    ids.push_back(id);
    OpResult created =
        create(item_body(id, "p", cell.item_ttl.empty() ? "" : "\"ttl\":" + cell.item_ttl), write_ts, cell.container);
    ASSERT_EQ(created.http_status(), 201) << created.message;
    EXPECT_EQ(int_field(created.body, "_ts"), kT0Seconds);
    if (!cell.item_ttl.empty()) {
      EXPECT_EQ(int_field(created.body, "ttl"), std::stoll(cell.item_ttl));
    }
  }
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& cell = cells[i];
    SCOPED_TRACE("container " + cell.container + ", item ttl '" + cell.item_ttl + "'");
    if (cell.effective) {
      const int64_t expiry = at(*cell.effective);
      EXPECT_EQ(read_in(cell.container, "\"p\"", ids[i], expiry - 1).http_status(), 200);
      EXPECT_EQ(read_in(cell.container, "\"p\"", ids[i], expiry).http_status(), 404);
      EXPECT_EQ(read_in(cell.container, "\"p\"", ids[i], expiry + 1).http_status(), 404);
    } else {
      EXPECT_EQ(read_in(cell.container, "\"p\"", ids[i], at(30)).http_status(), 200);
      EXPECT_EQ(read_in(cell.container, "\"p\"", ids[i], (kT0Seconds + kMaxTtl + 10) * kSecond).http_status(), 200);
    }
  }
  // The same verdicts through writes at the expiry instant (apply decides at the entry's ts).
  tick(at(10));
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& cell = cells[i];
    SCOPED_TRACE("write at E: container " + cell.container + ", item ttl '" + cell.item_ttl + "'");
    const bool expired = cell.effective && *cell.effective <= 10;
    OpResult patched = patch("\"p\"", ids[i], R"([{"op":"set","path":"/w","value":1}])", at(10), std::nullopt,
                             cell.container);
    EXPECT_EQ(patched.http_status(), expired ? 404 : 200) << patched.message;
  }
}

// ===== §4 Expired means gone, everywhere, at once ====================================================================

class ExpiredItem : public Contract {
 protected:
  // Item "a" in partition "p" with ttl 10 written at kT0 + 0.4 s: E = kT0 + 10 s.
  void SetUp() override {
    Contract::SetUp();
    make_container("-1");
    OpResult created = create(item_body("a", "p", "\"ttl\":10,\"v\":1"), kT0 + 400'000);
    ASSERT_EQ(created.http_status(), 201);
    old_ = created;
    expiry_ = at(10);
  }
  OpResult old_;
  int64_t expiry_ = 0;
};

TEST_F(ExpiredItem, ReadIs404FromTheExpiryInstant) {
  EXPECT_EQ(read("\"p\"", "a", expiry_ - 1).http_status(), 200);
  OpResult gone = read("\"p\"", "a", expiry_);
  EXPECT_EQ(gone.http_status(), 404);
  EXPECT_EQ(gone.expired_skipped, 1);
  EXPECT_EQ(read("\"p\"", "a", expiry_ + 1000 * kSecond).http_status(), 404);
}

TEST_F(ExpiredItem, ReplaceJustBeforeExpirySucceeds) {
  EXPECT_EQ(replace(item_body("a", "p", "\"ttl\":10"), expiry_ - 1).http_status(), 200);
}

TEST_F(ExpiredItem, ReplaceIs404) {
  const Dump before = dump_without_meta();
  EXPECT_EQ(replace(item_body("a", "p", "\"ttl\":10"), expiry_).http_status(), 404);
  EXPECT_EQ(dump_without_meta(), before);
}

TEST_F(ExpiredItem, PatchIs404) {
  const Dump before = dump_without_meta();
  EXPECT_EQ(patch("\"p\"", "a", R"([{"op":"set","path":"/v","value":2}])", expiry_).http_status(), 404);
  // Even an invalid patch: the item is gone before the operations matter.
  EXPECT_EQ(patch("\"p\"", "a", R"([{"op":"bogus","path":"/v"}])", expiry_).http_status(), 404);
  EXPECT_EQ(dump_without_meta(), before);
}

TEST_F(ExpiredItem, DeleteIs404) {
  const Dump before = dump_without_meta();
  EXPECT_EQ(remove("\"p\"", "a", expiry_).http_status(), 404);
  EXPECT_EQ(dump_without_meta(), before);
}

TEST_F(ExpiredItem, ConditionalWritesWithTheOldEtagAre404NotPreconditionFailed) {
  const Dump before = dump_without_meta();
  EXPECT_EQ(replace(item_body("a", "p"), expiry_, old_.etag).http_status(), 404);
  EXPECT_EQ(patch("\"p\"", "a", R"([{"op":"set","path":"/v","value":2}])", expiry_, old_.etag).http_status(), 404);
  EXPECT_EQ(remove("\"p\"", "a", expiry_, old_.etag).http_status(), 404);
  EXPECT_EQ(upsert(item_body("a", "p"), expiry_, old_.etag).http_status(), 404);
  // A wrong etag on an expired item is 404 too (existence is checked first).
  EXPECT_EQ(replace(item_body("a", "p"), expiry_, std::string("\"0000000000000999\"")).http_status(), 404);
  EXPECT_EQ(dump_without_meta(), before);
}

TEST_F(ExpiredItem, CreateAfterExpiryIs201WithAFreshItem) {
  EXPECT_EQ(create(item_body("a", "p"), expiry_ - 1).http_status(), 409);
  OpResult fresh = create(item_body("a", "p", "\"w\":2"), expiry_);
  ASSERT_EQ(fresh.http_status(), 201) << fresh.message;
  EXPECT_NE(string_field(fresh.body, "_rid"), string_field(old_.body, "_rid"));
  EXPECT_NE(fresh.etag, old_.etag);
  EXPECT_EQ(int_field(fresh.body, "_ts"), kT0Seconds + 10);
  boost::json::object object = parse_object(fresh.body);
  EXPECT_FALSE(object.contains("v")) << fresh.body;  // nothing of the old item survives
  EXPECT_FALSE(object.contains("ttl")) << fresh.body;
  OpResult read_back = read("\"p\"", "a", at(1000000));
  ASSERT_EQ(read_back.http_status(), 200);  // container -1, no own ttl: never expires
  EXPECT_EQ(read_back.body, fresh.body);
  // The old etag does not address the fresh item.
  EXPECT_EQ(replace(item_body("a", "p"), at(11), old_.etag).http_status(), 412);
}

TEST_F(ExpiredItem, UpsertAfterExpiryIs201WithAFreshItem) {
  OpResult fresh = upsert(item_body("a", "p", "\"w\":2"), expiry_);
  ASSERT_EQ(fresh.http_status(), 201) << fresh.message;
  EXPECT_NE(string_field(fresh.body, "_rid"), string_field(old_.body, "_rid"));
  EXPECT_NE(fresh.etag, old_.etag);
  EXPECT_FALSE(parse_object(fresh.body).contains("v"));
  EXPECT_EQ(upsert(item_body("a", "p", "\"w\":3"), expiry_ + 1).http_status(), 200);
}

TEST_F(ExpiredItem, CreateAfterExpiryAndCollectionReplacesTheStoredCopy) {
  tick(expiry_);
  EXPECT_EQ(backlog().items, 1);
  ASSERT_EQ(create(item_body("a", "p"), expiry_).http_status(), 201);
  // The expired copy was overwritten: one stored item, alive, nothing left to collect.
  ContainerStats after = stats();
  EXPECT_EQ(after.stored_items, 1);
  EXPECT_EQ(after.live_items, 1);
  EXPECT_EQ(after.backlog.items, 0);
  EXPECT_EQ(after.backlog.bytes, 0);
  EXPECT_EQ(collect(expiry_).items, 0);
  EXPECT_EQ(read("\"p\"", "a", expiry_).http_status(), 200);
}

TEST_F(Contract, ExpiredItemsAreLeftOutOfListsAndCountedAsSkipped) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p", "\"ttl\":-1"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("c", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("d", "q", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("e", "q"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("f", "q", "\"ttl\":50"), kT0).http_status(), 201);

  OpResult before = list(std::nullopt, at(5) - 1);
  ASSERT_EQ(before.http_status(), 200);
  EXPECT_EQ(ids_of(before.body).size(), 6u);
  EXPECT_EQ(before.expired_skipped, 0);

  OpResult whole = list(std::nullopt, at(5));
  ASSERT_EQ(whole.http_status(), 200);
  std::vector<std::string> ids = ids_of(whole.body);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"b", "e", "f"}));
  EXPECT_EQ(whole.expired_skipped, 3);

  OpResult partition = list(std::string("\"p\""), at(5));
  ASSERT_EQ(partition.http_status(), 200);
  EXPECT_EQ(ids_of(partition.body), (std::vector<std::string>{"b"}));
  EXPECT_EQ(partition.expired_skipped, 2);

  // Paging: expired items never show up on any page and never cost a slot of one.
  for (size_t page_size : {1u, 2u, 3u}) {
    SCOPED_TRACE(page_size);
    int64_t skipped = 0;
    std::vector<std::string> paged = list_all_ids(std::nullopt, at(5), page_size, &skipped);
    std::sort(paged.begin(), paged.end());
    EXPECT_EQ(paged, (std::vector<std::string>{"b", "e", "f"}));
    EXPECT_EQ(skipped, 3);
  }
  EXPECT_EQ(list_all_ids(std::nullopt, at(50), 1), (std::vector<std::string>{"b", "e"}));
}

TEST_F(Contract, ExpiredItemsAreNotCountedInLiveItemsOrBytes) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);                  // E = +10
  ASSERT_EQ(create(item_body("b", "p", "\"ttl\":-1"), kT0).http_status(), 201);    // never
  ASSERT_EQ(create(item_body("c", "p", "\"ttl\":3"), kT0).http_status(), 201);     // E = +3
  ASSERT_EQ(create(item_body("d", "p", "\"ttl\":100"), kT0).http_status(), 201);   // E = +100
  const ContainerStats all = stats();
  EXPECT_EQ(all.stored_items, 4);
  EXPECT_EQ(all.live_items, 4);
  EXPECT_EQ(all.live_bytes, all.stored_bytes);
  EXPECT_GT(all.stored_bytes, 0);

  tick(at(3));
  ContainerStats three = stats();
  EXPECT_EQ(three.stored_items, 4);
  EXPECT_EQ(three.live_items, 3);
  EXPECT_EQ(three.backlog.items, 1);
  EXPECT_EQ(three.live_bytes + three.backlog.bytes, three.stored_bytes);
  EXPECT_LT(three.live_bytes, all.live_bytes);

  tick(at(10));
  ContainerStats ten = stats();
  EXPECT_EQ(ten.live_items, 2);
  EXPECT_EQ(ten.backlog.items, 2);
  EXPECT_EQ(ten.live_bytes + ten.backlog.bytes, ten.stored_bytes);

  // GC does not change the live figures, only the stored ones.
  CollectResult collected = collect(at(10));
  EXPECT_EQ(collected.items, 2);
  ContainerStats after = stats();
  EXPECT_EQ(after.live_items, ten.live_items);
  EXPECT_EQ(after.live_bytes, ten.live_bytes);
  EXPECT_EQ(after.stored_items, 2);
  EXPECT_EQ(after.stored_bytes, ten.stored_bytes - collected.bytes);
  EXPECT_EQ(after.backlog.items, 0);
}

// "Once expired, always expired": a defaultTtl change never revives an item already expired at the change, whether
// or not it was collected, and a restart doesn't either.
struct Revival {
  std::string name;
  std::string initial_default;  // container defaultTtl at creation
  std::string item_extra;       // the item's ttl property ("" inherits)
  int64_t expiry_seconds;       // E - kT0
  std::optional<std::string> new_default;  // nullopt: remove defaultTtl
};

class OnceExpired : public Contract, public ::testing::WithParamInterface<std::tuple<Revival, bool>> {};

TEST_P(OnceExpired, ContainerTtlChangeNeverBringsBackAnExpiredItem) {
  const auto& [scenario, collect_first] = GetParam();
  make_container(scenario.initial_default);
  ASSERT_EQ(create(item_body("a", "p", scenario.item_extra), kT0 + 500'000).http_status(), 201);
  // A companion written long after, still alive at the change: the new policy governs it.
  ASSERT_EQ(create(item_body("z", "p", scenario.item_extra), at(scenario.expiry_seconds)).http_status(), 201);
  const int64_t change = at(scenario.expiry_seconds + 3);
  tick(change);
  EXPECT_EQ(read("\"p\"", "a", change).http_status(), 404);
  if (collect_first) {
    EXPECT_EQ(collect(change).items, 1);
  }
  OpResult changed = apply(set_default_ttl_command("db", "c", scenario.new_default), change);
  ASSERT_EQ(changed.http_status(), 200) << changed.message;
  for (int64_t later : {change, change + 1, at(scenario.expiry_seconds + 1000), at(100000000)}) {
    EXPECT_EQ(read("\"p\"", "a", later).http_status(), 404) << later;
  }
  EXPECT_EQ(read("\"p\"", "z", change).http_status(), 200);
  EXPECT_EQ(ids_of(list(std::nullopt, change + 1).body), (std::vector<std::string>{"z"}));
  EXPECT_EQ(replace(item_body("a", "p"), change + 1).http_status(), 404);
  EXPECT_EQ(remove("\"p\"", "a", change + 1).http_status(), 404);
  EXPECT_EQ(stats().live_items, 1);
  // A second change (back to the original, then off) does not revive it either.
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", scenario.initial_default), change + 2).http_status(), 200);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), change + 3).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", change + 3).http_status(), 404);
  // Nor does a restart.
  reopen();
  EXPECT_EQ(read("\"p\"", "a", change + 3).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "a", at(100000000)).http_status(), 404);
  EXPECT_EQ(ids_of(list(std::nullopt, change + 3).body), (std::vector<std::string>{"z"}));
  EXPECT_EQ(stats().live_items, 1);
  EXPECT_EQ(upsert(item_body("a", "p"), change + 4).http_status(), 201);
}

INSTANTIATE_TEST_SUITE_P(
    Contract, OnceExpired,
    ::testing::Combine(
        ::testing::Values(Revival{"InheritedThenLongerDefault", "10", "", 10, "1000"},
                          Revival{"InheritedThenMinusOne", "10", "", 10, "-1"},
                          Revival{"InheritedThenRemoved", "10", "", 10, std::nullopt},
                          Revival{"OwnTtlThenRemoved", "-1", "\"ttl\":5", 5, std::nullopt},
                          Revival{"OwnTtlUnderDefaultThenRemoved", "10", "\"ttl\":5", 5, std::nullopt},
                          Revival{"OwnTtlThenLongerDefault", "-1", "\"ttl\":5", 5, "1000"}),
        ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Revival, bool>>& param_info) {
      return std::get<0>(param_info.param).name + (std::get<1>(param_info.param) ? "_Collected" : "_NotCollected");
    });

// The boundary of "once expired": a change at exactly E keeps the item dead; one microsecond earlier it is still
// alive at the change, so the new policy governs it (removing the default keeps it forever).
TEST_F(Contract, DefaultTtlRemovedExactlyAtExpiryKeepsTheItemExpired) {
  make_container("10");
  ASSERT_EQ(create(item_body("own", "p", "\"ttl\":7"), kT0 + 1).http_status(), 201);  // E = +7
  ASSERT_EQ(create(item_body("inh", "p"), kT0 + 999'999).http_status(), 201);       // E = +10
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), at(7)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "own", at(7)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "own", at(100000)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "inh", at(100000)).http_status(), 200);  // not expired at the change: TTL is off now
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "10"), at(10)).http_status(), 200);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), at(10)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "inh", at(10)).http_status(), 404);  // re-enabled at its E: expired at once, and stays so
  EXPECT_EQ(read("\"p\"", "inh", at(100000)).http_status(), 404);
  reopen();
  EXPECT_EQ(read("\"p\"", "inh", at(100000)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "own", at(100000)).http_status(), 404);
}

TEST_F(Contract, DefaultTtlRemovedOneMicrosecondBeforeExpiryKeepsTheItemAlive) {
  make_container("10");
  ASSERT_EQ(create(item_body("inh", "p"), kT0).http_status(), 201);                // E = +10
  ASSERT_EQ(create(item_body("own", "p", "\"ttl\":7"), kT0).http_status(), 201);   // E = +7
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), at(7) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "own", at(100000)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "inh", at(100000)).http_status(), 200);
  tick(at(100000));
  EXPECT_EQ(backlog().items, 0);
  EXPECT_EQ(collect(at(100000)).items, 0);
}

TEST_F(Contract, ExpiryIsDecidedAtTheEntryTimestampForWrites) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p", "\"ttl\":5"), kT0).http_status(), 201);
  // Same log time as E, different entries: all see the item expired.
  EXPECT_EQ(patch("\"p\"", "a", R"([{"op":"set","path":"/v","value":1}])", at(5)).http_status(), 404);
  EXPECT_EQ(remove("\"p\"", "a", at(5)).http_status(), 404);
  EXPECT_EQ(create(item_body("a", "p", "\"ttl\":5"), at(5)).http_status(), 201);
  EXPECT_EQ(read("\"p\"", "a", at(10) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(10)).http_status(), 404);
}

TEST_F(Contract, UndecodableCommandIs400AndChangesOnlyTheAppliedPosition) {
  make_container("-1");
  const Dump before = dump_without_meta();
  Result<OpResult> result = store_->apply_encoded("\xff\xfe garbage", LogIndex(next_index_++), at(1));
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(result->http_status(), 400);
  EXPECT_EQ(dump_without_meta(), before);
  EXPECT_EQ(store_->applied().ts_micros, at(1));
  EXPECT_EQ(store_->applied().index.value(), next_index_ - 1);
}

TEST_F(Contract, StoredFiguresSurviveAReopenAfterCollection) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p", "\"ttl\":-1"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("c", "p", "\"ttl\":3"), kT0).http_status(), 201);
  tick(at(5));
  EXPECT_EQ(collect(at(5)).items, 1);
  const ContainerStats before = stats();
  reopen();
  const ContainerStats after = stats();
  EXPECT_EQ(after.stored_items, before.stored_items);
  EXPECT_EQ(after.stored_bytes, before.stored_bytes);
  EXPECT_EQ(after.live_items, 2);
  tick(at(10));
  EXPECT_EQ(stats().live_items, 1);
  EXPECT_EQ(backlog().items, 1);
  EXPECT_EQ(collect(at(10)).items, 1);
  EXPECT_EQ(stats().stored_items, 1);
}

TEST_F(Contract, ReopeningTheStoreDoesNotReviveExpiredItems) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p", "\"ttl\":3"), kT0).http_status(), 201);
  tick(at(12));
  const Backlog before = backlog();
  EXPECT_EQ(before.items, 2);
  reopen();
  EXPECT_EQ(read("\"p\"", "a", at(12)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "b", at(12)).http_status(), 404);
  EXPECT_EQ(ids_of(list(std::nullopt, at(12)).body).size(), 0u);
  const Backlog after = backlog();
  EXPECT_EQ(after.items, before.items);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.oldest_expiry_micros, before.oldest_expiry_micros);
  EXPECT_EQ(stats().live_items, 0);
}

// ===== §5 Writes reset the clock ====================================================================================

TEST_F(Contract, EveryWriteResetsTsAndRestartsTtl) {
  make_container("-1");
  struct Writer {
    std::string name;
    std::function<OpResult(Contract&, int64_t)> write;
  };
  const std::vector<Writer> writers = {
      {"replace", [](Contract& t, int64_t ts) { return t.replace(item_body("replace", "p", "\"ttl\":10"), ts); }},
      {"upsert", [](Contract& t, int64_t ts) { return t.upsert(item_body("upsert", "p", "\"ttl\":10"), ts); }},
      {"patch",
       [](Contract& t, int64_t ts) { return t.patch("\"p\"", "patch", R"([{"op":"set","path":"/v","value":1}])", ts); }},
  };
  for (const Writer& writer : writers) {
    ASSERT_EQ(create(item_body(writer.name, "p", "\"ttl\":10"), kT0).http_status(), 201);
  }
  const int64_t write_ts = at(8) + 900'000;  // _ts = kT0 + 8 s, E = kT0 + 18 s
  for (const Writer& writer : writers) {
    SCOPED_TRACE(writer.name);
    OpResult written = writer.write(*this, write_ts);
    ASSERT_EQ(written.http_status(), 200) << written.message;
    EXPECT_EQ(int_field(written.body, "_ts"), kT0Seconds + 8);
    EXPECT_EQ(written.ts_micros, write_ts);
    EXPECT_EQ(read("\"p\"", writer.name, at(10)).http_status(), 200);  // the old expiry no longer applies
    EXPECT_EQ(read("\"p\"", writer.name, at(18) - 1).http_status(), 200);
    EXPECT_EQ(read("\"p\"", writer.name, at(18)).http_status(), 404);
    EXPECT_EQ(int_field(read("\"p\"", writer.name, at(9)).body, "_ts"), kT0Seconds + 8);
  }
}

TEST_F(Contract, InheritingItemWriteRestartsTheDefaultTtl) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(patch("\"p\"", "a", R"([{"op":"incr","path":"/n","value":1}])", at(9)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(19) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(19)).http_status(), 404);
}

TEST_F(Contract, CreateSetsTsToTheWriteSecond) {
  make_container("5");
  OpResult created = create(item_body("a", "p"), at(3) + 999'999);
  ASSERT_EQ(created.http_status(), 201);
  EXPECT_EQ(int_field(created.body, "_ts"), kT0Seconds + 3);
  EXPECT_EQ(read("\"p\"", "a", at(8) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(8)).http_status(), 404);
}

TEST_F(Contract, RemovingTtlFromAnItemFallsBackToTheContainerDefault) {
  make_container("100");
  ASSERT_EQ(create(item_body("r", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("u", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("x", "p", "\"ttl\":5"), kT0).http_status(), 201);
  OpResult replaced = replace(item_body("r", "p"), at(2));
  ASSERT_EQ(replaced.http_status(), 200);
  EXPECT_FALSE(parse_object(replaced.body).contains("ttl"));
  ASSERT_EQ(upsert(item_body("u", "p"), at(2)).http_status(), 200);
  OpResult patched = patch("\"p\"", "x", R"([{"op":"remove","path":"/ttl"}])", at(2));
  ASSERT_EQ(patched.http_status(), 200) << patched.message;
  EXPECT_FALSE(parse_object(patched.body).contains("ttl"));
  for (const char* id : {"r", "u", "x"}) {
    SCOPED_TRACE(id);
    EXPECT_EQ(read("\"p\"", id, at(5)).http_status(), 200);
    EXPECT_EQ(read("\"p\"", id, at(102) - 1).http_status(), 200);
    EXPECT_EQ(read("\"p\"", id, at(102)).http_status(), 404);
  }
}

TEST_F(Contract, RemovingTtlFromAnItemInAMinusOneContainerMeansNeverExpire) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(patch("\"p\"", "a", R"([{"op":"remove","path":"/ttl"}])", at(2)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(1000000)).http_status(), 200);
}

TEST_F(Contract, TtlMinusOneOnWriteOptsTheItemOut) {
  make_container("10");
  ASSERT_EQ(create(item_body("r", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("x", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(replace(item_body("r", "p", "\"ttl\":-1"), at(2)).http_status(), 200);
  ASSERT_EQ(patch("\"p\"", "x", R"([{"op":"set","path":"/ttl","value":-1}])", at(2)).http_status(), 200);
  ASSERT_EQ(upsert(item_body("u", "p", "\"ttl\":-1"), at(2)).http_status(), 201);
  for (const char* id : {"r", "x", "u"}) {
    SCOPED_TRACE(id);
    EXPECT_EQ(read("\"p\"", id, at(1000000)).http_status(), 200);
  }
  tick(at(1000));
  EXPECT_EQ(backlog().items, 0);
  EXPECT_EQ(stats().live_items, 3);
}

TEST_F(Contract, PatchSetTtlStartsExpiryFromThePatch) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  OpResult patched = patch("\"p\"", "a", R"([{"op":"set","path":"/ttl","value":5}])", at(2) + 10);
  ASSERT_EQ(patched.http_status(), 200) << patched.message;
  EXPECT_EQ(int_field(patched.body, "ttl"), 5);
  EXPECT_EQ(read("\"p\"", "a", at(7) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(7)).http_status(), 404);
}

TEST_F(Contract, PatchThatKeepsTheTtlRestartsIt) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p", "\"ttl\":5"), kT0).http_status(), 201);
  OpResult patched = patch("\"p\"", "a", R"([{"op":"add","path":"/v","value":[1]}])", at(4));
  ASSERT_EQ(patched.http_status(), 200);
  EXPECT_EQ(int_field(patched.body, "ttl"), 5);
  EXPECT_EQ(read("\"p\"", "a", at(9) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(9)).http_status(), 404);
}

// ===== §6 Container changes =========================================================================================

TEST_F(Contract, SettingDefaultTtlReevaluatesEveryItemImmediately) {
  make_container(std::nullopt);
  ASSERT_EQ(create(item_body("old", "p"), kT0).http_status(), 201);                  // inherits
  ASSERT_EQ(create(item_body("own", "p", "\"ttl\":5"), kT0).http_status(), 201);     // own ttl, ignored while off
  ASSERT_EQ(create(item_body("own500", "p", "\"ttl\":500"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("never", "p", "\"ttl\":-1"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("young", "p"), at(80)).http_status(), 201);             // inherits
  for (const char* id : {"old", "young", "own", "own500", "never"}) {
    EXPECT_EQ(read("\"p\"", id, at(100) - 1).http_status(), 200) << id;
  }
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "50"), at(100)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "old", at(100)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "own", at(100)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "young", at(100)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "young", at(130) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "young", at(130)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "own500", at(500) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "own500", at(500)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "never", at(100000)).http_status(), 200);
  // Writes at the change's time see it too.
  EXPECT_EQ(create(item_body("old", "p"), at(100)).http_status(), 201);
  EXPECT_EQ(replace(item_body("own", "p"), at(100)).http_status(), 404);
}

TEST_F(Contract, SettingMinusOneOnAnOffContainerExpiresOwnTtlItemsPastTheirInstant) {
  make_container(std::nullopt);
  ASSERT_EQ(create(item_body("own", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("inherit", "p"), kT0).http_status(), 201);
  EXPECT_EQ(read("\"p\"", "own", at(100)).http_status(), 200);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "-1"), at(100)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "own", at(100)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "inherit", at(100000)).http_status(), 200);
}

TEST_F(Contract, RemovingDefaultTtlStopsExpiryEvenForOwnTtlItems) {
  make_container("10");
  ASSERT_EQ(create(item_body("own3", "p", "\"ttl\":3"), kT0).http_status(), 201);     // E +3: expired at the change
  ASSERT_EQ(create(item_body("inh", "p"), kT0).http_status(), 201);                   // E +10: expired at the change
  ASSERT_EQ(create(item_body("own100", "p", "\"ttl\":100"), kT0).http_status(), 201);  // E +100: alive at the change
  ASSERT_EQ(create(item_body("inh2", "p"), at(45)).http_status(), 201);              // E +55: alive at the change
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), at(50)).http_status(), 200);
  EXPECT_FALSE(parse_object(store_->reader().read_container("db", "c").body).contains("defaultTtl"));
  for (int64_t later : {at(50), at(100), at(1000000)}) {
    EXPECT_EQ(read("\"p\"", "own3", later).http_status(), 404);
    EXPECT_EQ(read("\"p\"", "inh", later).http_status(), 404);
    EXPECT_EQ(read("\"p\"", "own100", later).http_status(), 200);
    EXPECT_EQ(read("\"p\"", "inh2", later).http_status(), 200);
  }
  // New items with their own ttl don't expire either while TTL is off.
  ASSERT_EQ(create(item_body("new", "p", "\"ttl\":1"), at(60)).http_status(), 201);
  EXPECT_EQ(read("\"p\"", "new", at(1000000)).http_status(), 200);
  EXPECT_EQ(int_field(read("\"p\"", "new", at(61)).body, "ttl"), 1);  // kept, ignored
  // The collector reclaims exactly what had expired at the change, nothing more, however late it runs.
  tick(at(2000));
  const Backlog pending = backlog();
  EXPECT_EQ(pending.items, 2);
  CollectResult collected = collect(at(2000));
  EXPECT_EQ(collected.items, 2);
  EXPECT_EQ(collected.bytes, pending.bytes);
  EXPECT_FALSE(collected.more);
  EXPECT_EQ(collect(at(2000)).items, 0);
  EXPECT_EQ(backlog().items, 0);
  EXPECT_EQ(stats().stored_items, 3);
  EXPECT_EQ(stats().live_items, 3);
  std::vector<std::string> ids = ids_of(list(std::nullopt, at(2000)).body);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"inh2", "new", "own100"}));
}

TEST_F(Contract, DefaultTtlMinusOneKeepsOwnTtlItemsExpiring) {
  make_container("10");
  ASSERT_EQ(create(item_body("inh", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("own", "p", "\"ttl\":8"), kT0).http_status(), 201);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "-1"), at(5)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "inh", at(100000)).http_status(), 200);  // inheriting items no longer expire
  EXPECT_EQ(read("\"p\"", "own", at(8) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "own", at(8)).http_status(), 404);       // own ttl still applies
  tick(at(8));
  EXPECT_EQ(backlog().items, 1);
  EXPECT_EQ(collect(at(8)).items, 1);
}

TEST_F(Contract, ShorteningDefaultTtlExpiresOlderInheritingItemsAtOnceAndLengtheningExtendsLiveOnes) {
  make_container("100");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p"), at(40)).http_status(), 201);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "50"), at(60)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(60)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "b", at(90) - 1).http_status(), 200);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "1000"), at(70)).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "a", at(70)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "b", at(1040) - 1).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "b", at(1040)).http_status(), 404);
}

// ===== §7 Garbage-collection primitives ==============================================================================

TEST_F(Contract, CollectExpiredDeletesOnlyItemsExpiredAtOrBeforeUpTo) {
  make_container("-1");
  ASSERT_EQ(create(item_body("e5", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("e10", "p", "\"ttl\":10"), kT0 + 123).http_status(), 201);
  ASSERT_EQ(create(item_body("e15", "p", "\"ttl\":15"), kT0 + 123).http_status(), 201);
  ASSERT_EQ(create(item_body("never", "p"), kT0 + 123).http_status(), 201);
  tick(at(20));
  EXPECT_EQ(collect(at(5) - 1).items, 0);
  CollectResult first = collect(at(10));
  EXPECT_EQ(first.items, 2);
  EXPECT_EQ(first.expiry_instants_micros, (std::vector<int64_t>{at(5), at(10)}));
  EXPECT_GT(first.bytes, 0);
  EXPECT_FALSE(first.more);
  // e15 is still stored and alive at times before its expiry.
  EXPECT_EQ(read("\"p\"", "e15", at(15) - 1).http_status(), 200);
  EXPECT_EQ(stats().stored_items, 2);
  CollectResult second = collect(at(20));
  EXPECT_EQ(second.items, 1);
  EXPECT_EQ(second.expiry_instants_micros, (std::vector<int64_t>{at(15)}));
  EXPECT_EQ(stats().stored_items, 1);
  EXPECT_EQ(read("\"p\"", "never", at(20)).http_status(), 200);
}

TEST_F(Contract, CollectExpiredRejectsUpToBeyondTheAppliedTime) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p", "\"ttl\":5"), kT0).http_status(), 201);
  tick(at(5));
  const Dump before = dump_without_meta();
  Result<CollectResult> beyond = store_->expiry().collect_expired("db", "c", at(5) + 1, 100);
  EXPECT_FALSE(beyond.is_ok());
  EXPECT_EQ(beyond.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dump_without_meta(), before);
  EXPECT_EQ(collect(at(5)).items, 1);
}

TEST_F(Contract, CollectExpiredOnAMissingContainerIsAnError) {
  make_container("-1");
  tick(at(1));
  EXPECT_FALSE(store_->expiry().collect_expired("db", "nope", at(1), 10).is_ok());
  EXPECT_FALSE(store_->expiry().backlog("db", "nope").is_ok());
  EXPECT_FALSE(store_->expiry().container_stats("nodb", "c").is_ok());
}

TEST_F(Contract, CollectExpiredRespectsMaxItemsOldestFirstAndReportsMore) {
  make_container("10");
  // Own-ttl and inheriting items interleaved in expiry order.
  ASSERT_EQ(create(item_body("o3", "p", "\"ttl\":3"), kT0).http_status(), 201);   // E +3
  ASSERT_EQ(create(item_body("i10", "p"), kT0).http_status(), 201);               // E +10
  ASSERT_EQ(create(item_body("i11", "q"), at(1)).http_status(), 201);             // E +11
  ASSERT_EQ(create(item_body("o7", "q", "\"ttl\":6"), at(1)).http_status(), 201);  // E +7
  ASSERT_EQ(create(item_body("o12", "p", "\"ttl\":10"), at(2)).http_status(), 201);  // E +12
  ASSERT_EQ(create(item_body("alive", "p", "\"ttl\":100"), at(2)).http_status(), 201);
  tick(at(12));
  std::vector<int64_t> instants;
  CollectResult page = collect(at(12), 2);
  EXPECT_EQ(page.items, 2);
  EXPECT_TRUE(page.more);
  instants.insert(instants.end(), page.expiry_instants_micros.begin(), page.expiry_instants_micros.end());
  page = collect(at(12), 2);
  EXPECT_EQ(page.items, 2);
  EXPECT_TRUE(page.more);
  instants.insert(instants.end(), page.expiry_instants_micros.begin(), page.expiry_instants_micros.end());
  page = collect(at(12), 2);
  EXPECT_EQ(page.items, 1);
  EXPECT_FALSE(page.more);
  instants.insert(instants.end(), page.expiry_instants_micros.begin(), page.expiry_instants_micros.end());
  EXPECT_EQ(instants, (std::vector<int64_t>{at(3), at(7), at(10), at(11), at(12)}));
  EXPECT_EQ(collect(at(12), 2).items, 0);
  EXPECT_EQ(read("\"p\"", "alive", at(12)).http_status(), 200);
}

TEST_F(Contract, CollectExpiredWithExactlyMaxItemsLeftReportsNoMore) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p", "\"ttl\":1"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p", "\"ttl\":2"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("c", "p", "\"ttl\":50"), kT0).http_status(), 201);
  tick(at(2));
  CollectResult page = collect(at(2), 2);
  EXPECT_EQ(page.items, 2);
  EXPECT_FALSE(page.more);
}

TEST_F(Contract, BacklogCountsBytesAndOldestExpiryOfExpiredNotDeletedItems) {
  make_container("10");
  ASSERT_EQ(create(item_body("o3", "p", "\"ttl\":3"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("i10", "p", "\"x\":\"" + std::string(500, 'x') + "\""), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("o20", "p", "\"ttl\":20"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("never", "p", "\"ttl\":-1"), kT0).http_status(), 201);
  const ContainerStats initial = stats();
  EXPECT_EQ(initial.backlog.items, 0);
  EXPECT_EQ(initial.backlog.bytes, 0);
  EXPECT_FALSE(initial.backlog.oldest_expiry_micros.has_value());

  tick(at(3) - 1);
  EXPECT_EQ(backlog().items, 0);
  tick(at(3));
  Backlog one = backlog();
  EXPECT_EQ(one.items, 1);
  EXPECT_EQ(one.oldest_expiry_micros, at(3));
  tick(at(10));
  Backlog two = backlog();
  EXPECT_EQ(two.items, 2);
  EXPECT_EQ(two.oldest_expiry_micros, at(3));
  EXPECT_GT(two.bytes, one.bytes + 500);

  // The bytes are exactly what collecting them frees.
  const ContainerStats before_gc = stats();
  CollectResult first = collect(at(3));  // only o3
  EXPECT_EQ(first.items, 1);
  EXPECT_EQ(first.bytes, one.bytes);
  Backlog after_first = backlog();
  EXPECT_EQ(after_first.items, 1);
  EXPECT_EQ(after_first.bytes, two.bytes - one.bytes);
  EXPECT_EQ(after_first.oldest_expiry_micros, at(10));

  tick(at(20));
  Backlog again = backlog();
  EXPECT_EQ(again.items, 2);
  EXPECT_EQ(again.oldest_expiry_micros, at(10));
  CollectResult rest = collect(at(20));
  EXPECT_EQ(rest.items, 2);
  EXPECT_EQ(rest.bytes, again.bytes);
  const ContainerStats end = stats();
  EXPECT_EQ(end.stored_bytes, before_gc.stored_bytes - first.bytes - rest.bytes);
  EXPECT_EQ(end.stored_items, 1);
  EXPECT_EQ(end.backlog.items, 0);
  EXPECT_EQ(end.backlog.bytes, 0);
  EXPECT_FALSE(end.backlog.oldest_expiry_micros.has_value());
}

TEST_F(Contract, BacklogTracksDeletesAndOverwritesOfExpiredItems) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("c", "p", "\"ttl\":2"), kT0).http_status(), 201);
  tick(at(10));
  EXPECT_EQ(backlog().items, 3);
  ASSERT_EQ(upsert(item_body("a", "p"), at(10)).http_status(), 201);  // overwrites the expired copy
  ASSERT_EQ(create(item_body("c", "p"), at(10)).http_status(), 201);
  Backlog left = backlog();
  EXPECT_EQ(left.items, 1);
  CollectResult collected = collect(at(10));
  EXPECT_EQ(collected.items, 1);
  EXPECT_EQ(collected.bytes, left.bytes);
  EXPECT_EQ(backlog().items, 0);
  EXPECT_EQ(stats().stored_items, 2);
  EXPECT_EQ(stats().live_items, 2);
}

TEST_F(Contract, BacklogSurvivesAContainerTtlChange) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p", "\"ttl\":5"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("c", "p"), at(8)).http_status(), 201);
  tick(at(12));
  Backlog before = backlog();
  EXPECT_EQ(before.items, 2);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), at(12)).http_status(), 200);
  Backlog after = backlog();
  EXPECT_EQ(after.items, 2);
  EXPECT_EQ(after.bytes, before.bytes);
  tick(at(1000));
  EXPECT_EQ(backlog().items, 2);  // "c" never expires now
  EXPECT_EQ(collect(at(1000)).items, 2);
  EXPECT_EQ(backlog().items, 0);
  EXPECT_EQ(read("\"p\"", "c", at(1000)).http_status(), 200);
}

// The expiry instant reported for an item killed by a defaultTtl change must be when it expired (no later than the
// change), not when the new default would have expired it.
TEST_F(Contract, CollectReportsAnExpiryNoLaterThanTheChangeForItemsKilledByAWatermark) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);  // E = +10 under the old default
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "100"), at(15)).http_status(), 200);
  tick(at(200));  // the new default would have expired it at +100
  Backlog pending = backlog();
  EXPECT_EQ(pending.items, 1);
  ASSERT_TRUE(pending.oldest_expiry_micros.has_value());
  EXPECT_GE(*pending.oldest_expiry_micros, at(10));
  EXPECT_LE(*pending.oldest_expiry_micros, at(15));
  CollectResult collected = collect(at(200));
  ASSERT_EQ(collected.expiry_instants_micros.size(), 1u);
  EXPECT_GE(collected.expiry_instants_micros[0], at(10));
  EXPECT_LE(collected.expiry_instants_micros[0], at(15));
}

TEST_F(Contract, CollectionNeverChangesWhatReadsAtOrAfterTheAppliedTimeSee) {
  make_container("10");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p", "\"ttl\":4"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("c", "q", "\"ttl\":30"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("d", "q", "\"ttl\":-1"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("e", "q"), at(5)).http_status(), 201);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", "100"), at(12)).http_status(), 200);
  tick(at(13));
  const std::vector<int64_t> times = {at(13), at(14), at(30), at(105), at(1000)};
  auto snapshot = [&] {
    std::vector<std::string> seen;
    for (int64_t t : times) {
      seen.push_back(list(std::nullopt, t).body);
      for (const char* pk : {"\"p\"", "\"q\""}) seen.push_back(list(std::string(pk), t).body);
      for (const auto& [pk, id] : std::vector<std::pair<std::string, std::string>>{
               {"\"p\"", "a"}, {"\"p\"", "b"}, {"\"q\"", "c"}, {"\"q\"", "d"}, {"\"q\"", "e"}}) {
        OpResult r = read(pk, id, t);
        seen.push_back(std::to_string(r.http_status()) + r.body);
      }
    }
    return seen;
  };
  const std::vector<std::string> before = snapshot();
  EXPECT_EQ(collect(at(13)).items, 2);
  EXPECT_EQ(snapshot(), before);
}

// ===== §9 Status codes ==============================================================================================

TEST_F(Contract, CreateIs201Then409WhileAlive) {
  make_container("-1");
  OpResult created = create(item_body("a", "p"), kT0);
  EXPECT_EQ(created.http_status(), 201);
  EXPECT_FALSE(created.etag.empty());
  EXPECT_EQ(string_field(created.body, "_etag"), created.etag);
  const Dump before = dump_without_meta();
  OpResult again = create(item_body("a", "p", "\"v\":2"), at(1));
  EXPECT_EQ(again.http_status(), 409);
  EXPECT_EQ(dump_without_meta(), before);
  // Same id in another partition is a different item.
  EXPECT_EQ(create(item_body("a", "q"), at(1)).http_status(), 201);
}

TEST_F(Contract, ItemOverTwoMegabytesIs413) {
  make_container("-1");
  const size_t limit = 2 * 1024 * 1024;
  auto sized = [](const std::string& id, size_t total) {
    const std::string head = R"({"id":")" + id + R"(","pk":"p","x":")";
    const std::string tail = "\"}";
    return head + std::string(total - head.size() - tail.size(), 'x') + tail;
  };
  const Dump before = dump_without_meta();
  OpResult too_big = create(sized("big", limit + 1), kT0);
  EXPECT_EQ(too_big.http_status(), 413) << too_big.message;
  EXPECT_EQ(upsert(sized("big", limit + 1), kT0).http_status(), 413);
  EXPECT_EQ(dump_without_meta(), before);
  EXPECT_EQ(read("\"p\"", "big", kT0).http_status(), 404);
  EXPECT_EQ(create(sized("big", limit), kT0).http_status(), 201);
  EXPECT_EQ(replace(sized("big", limit + 1), kT0).http_status(), 413);
  // A patch that grows an item past the limit is rejected the same way.
  ASSERT_EQ(create(sized("half", limit - 600 * 1024), kT0).http_status(), 201);
  const std::string grow = R"([{"op":"set","path":"/y","value":")" + std::string(700 * 1024, 'y') + "\"}]";
  EXPECT_EQ(patch("\"p\"", "half", grow, at(1)).http_status(), 413);
}

TEST_F(Contract, ReadIs200Or404) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  EXPECT_EQ(read("\"p\"", "a", kT0).http_status(), 200);
  EXPECT_EQ(read("\"p\"", "missing", kT0).http_status(), 404);
  EXPECT_EQ(read("\"other\"", "a", kT0).http_status(), 404);
}

TEST_F(Contract, ReplaceIs200Or404Or412) {
  make_container("-1");
  OpResult created = create(item_body("a", "p"), kT0);
  ASSERT_EQ(created.http_status(), 201);
  EXPECT_EQ(replace(item_body("missing", "p"), at(1)).http_status(), 404);
  const Dump before = dump_without_meta();
  OpResult wrong = replace(item_body("a", "p", "\"v\":1"), at(1), std::string("\"0000000000000999\""));
  EXPECT_EQ(wrong.http_status(), 412);
  EXPECT_EQ(dump_without_meta(), before);
  // Unquoted etag text does not match: if-match compares with the quoted _etag string.
  std::string unquoted = created.etag.substr(1, created.etag.size() - 2);
  EXPECT_EQ(replace(item_body("a", "p", "\"v\":1"), at(1), unquoted).http_status(), 412);
  OpResult replaced = replace(item_body("a", "p", "\"v\":1"), at(1), created.etag);
  EXPECT_EQ(replaced.http_status(), 200);
  EXPECT_NE(replaced.etag, created.etag);
  EXPECT_EQ(string_field(replaced.body, "_rid"), string_field(created.body, "_rid"));  // same item
  EXPECT_EQ(replace(item_body("a", "p", "\"v\":2"), at(2), created.etag).http_status(), 412);  // stale etag
  EXPECT_EQ(replace(item_body("a", "p", "\"v\":2"), at(2)).http_status(), 200);                // unconditional
}

TEST_F(Contract, UpsertIs201WhenCreatedAnd200WhenReplaced) {
  make_container("-1");
  OpResult created = upsert(item_body("a", "p"), kT0);
  EXPECT_EQ(created.http_status(), 201);
  OpResult replaced = upsert(item_body("a", "p", "\"v\":1"), at(1));
  EXPECT_EQ(replaced.http_status(), 200);
  EXPECT_EQ(string_field(replaced.body, "_rid"), string_field(created.body, "_rid"));
  EXPECT_EQ(upsert(item_body("a", "p", "\"v\":2"), at(2), std::string("\"0000000000000999\"")).http_status(), 412);
  EXPECT_EQ(upsert(item_body("a", "p", "\"v\":2"), at(2), replaced.etag).http_status(), 200);
}

TEST_F(Contract, DeleteIs204Or404Or412) {
  make_container("-1");
  OpResult created = create(item_body("a", "p"), kT0);
  ASSERT_EQ(created.http_status(), 201);
  EXPECT_EQ(remove("\"p\"", "missing", at(1)).http_status(), 404);
  EXPECT_EQ(remove("\"p\"", "a", at(1), std::string("\"0000000000000999\"")).http_status(), 412);
  EXPECT_EQ(read("\"p\"", "a", at(1)).http_status(), 200);
  EXPECT_EQ(remove("\"p\"", "a", at(1), created.etag).http_status(), 204);
  EXPECT_EQ(read("\"p\"", "a", at(1)).http_status(), 404);
  EXPECT_EQ(remove("\"p\"", "a", at(2)).http_status(), 404);
  EXPECT_EQ(stats().stored_items, 0);
  EXPECT_EQ(create(item_body("a", "p"), at(3)).http_status(), 201);
}

TEST_F(Contract, PatchIs200Or404Or412Or400) {
  make_container("-1");
  OpResult created = create(item_body("a", "p", "\"n\":1"), kT0);
  ASSERT_EQ(created.http_status(), 201);
  EXPECT_EQ(patch("\"p\"", "missing", R"([{"op":"set","path":"/n","value":2}])", at(1)).http_status(), 404);
  EXPECT_EQ(patch("\"p\"", "a", R"([{"op":"set","path":"/n","value":2}])", at(1),
                  std::string("\"0000000000000999\""))
                .http_status(),
            412);
  const Dump before = dump_without_meta();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"unknown op", R"([{"op":"bogus","path":"/n","value":2}])"},
      {"system property _ts", R"([{"op":"set","path":"/_ts","value":2}])"},
      {"system property _etag", R"([{"op":"set","path":"/_etag","value":"x"}])"},
      {"system property _rid", R"([{"op":"remove","path":"/_rid"}])"},
      {"id change", R"([{"op":"set","path":"/id","value":"b"}])"},
      {"partition key change", R"([{"op":"set","path":"/pk","value":"q"}])"},
      {"partition key removal", R"([{"op":"remove","path":"/pk"}])"},
      {"eleven operations",
       "[" + [] {
         std::string ops;
         for (int i = 0; i < 11; ++i) ops += std::string(i ? "," : "") + R"({"op":"incr","path":"/n","value":1})";
         return ops;
       }() + "]"},
      {"empty", "[]"},
      {"not an array", R"({"op":"set","path":"/n","value":2})"},
      {"not JSON", "[{"},
      {"invalid ttl", R"([{"op":"set","path":"/ttl","value":0})"},
      {"remove missing", R"([{"op":"remove","path":"/nothing"}])"},
  };
  for (const auto& [what, operations] : bad) {
    SCOPED_TRACE(what);
    OpResult result = patch("\"p\"", "a", operations, at(1), created.etag);
    EXPECT_EQ(result.http_status(), 400) << result.message;
    EXPECT_FALSE(result.message.empty());
  }
  EXPECT_EQ(dump_without_meta(), before);
  std::string ten;
  for (int i = 0; i < 10; ++i) ten += std::string(i ? "," : "") + R"({"op":"incr","path":"/n","value":1})";
  OpResult patched = patch("\"p\"", "a", "[" + ten + "]", at(1), created.etag);
  ASSERT_EQ(patched.http_status(), 200) << patched.message;
  EXPECT_EQ(int_field(patched.body, "n"), 11);
  EXPECT_EQ(int_field(read("\"p\"", "a", at(1)).body, "n"), 11);
}

TEST_F(Contract, MissingDatabaseOrContainerIs404NamingIt) {
  make_container("-1");
  OpResult no_container = store_->reader().read_item("db", "nope", "\"p\"", "a", kT0);
  EXPECT_EQ(no_container.http_status(), 404);
  EXPECT_TRUE(contains(no_container.message, "'nope'")) << no_container.message;
  OpResult no_database = store_->reader().read_item("nodb", "c", "\"p\"", "a", kT0);
  EXPECT_EQ(no_database.http_status(), 404);
  EXPECT_TRUE(contains(no_database.message, "'nodb'")) << no_database.message;

  const Dump before = dump_without_meta();
  for (const std::string& database : {std::string("db"), std::string("nodb")}) {
    const std::string container = database == "db" ? "nope" : "c";
    const std::string named = database == "db" ? "'nope'" : "'nodb'";
    SCOPED_TRACE(database + "/" + container);
    std::vector<OpResult> results = {
        apply(item_command(CommandType::kCreateItem, database, container, item_body("a", "p")), at(1)),
        apply(item_command(CommandType::kUpsertItem, database, container, item_body("a", "p")), at(1)),
        apply(item_command(CommandType::kReplaceItem, database, container, item_body("a", "p")), at(1)),
        apply(target_command(CommandType::kDeleteItem, database, container, "\"p\"", "a"), at(1)),
        apply(target_command(CommandType::kPatchItem, database, container, "\"p\"", "a",
                             R"([{"op":"set","path":"/n","value":1}])"),
              at(1)),
        apply(set_default_ttl_command(database, container, "10"), at(1)),
        apply(target_command(CommandType::kDeleteContainer, database, container, "", ""), at(1)),
        store_->reader().read_container(database, container),
    };
    ListRequest request;
    request.database = database;
    request.container = container;
    results.push_back(store_->reader().list_items(request, at(1)));
    for (const OpResult& result : results) {
      EXPECT_EQ(result.http_status(), 404) << result.message;
      EXPECT_TRUE(contains(result.message, named)) << result.message;
    }
  }
  OpResult container_in_missing_db = apply(create_container_command("nodb", "c", "/pk"), at(1));
  EXPECT_EQ(container_in_missing_db.http_status(), 404);
  EXPECT_TRUE(contains(container_in_missing_db.message, "'nodb'")) << container_in_missing_db.message;
  EXPECT_EQ(store_->reader().read_database("nodb").http_status(), 404);
  EXPECT_EQ(store_->reader().list_containers("nodb").http_status(), 404);
  EXPECT_EQ(dump_without_meta(), before);
}

TEST_F(Contract, DatabaseCreateIs201Or409AndDeleteIs204Or404) {
  EXPECT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  EXPECT_EQ(store_->reader().read_database("db").http_status(), 200);
  EXPECT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 409);
  EXPECT_EQ(apply(database_command(CommandType::kDeleteDatabase, "db"), at(1)).http_status(), 204);
  EXPECT_EQ(store_->reader().read_database("db").http_status(), 404);
  EXPECT_EQ(apply(database_command(CommandType::kDeleteDatabase, "db"), at(1)).http_status(), 404);
  EXPECT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), at(2)).http_status(), 201);
}

TEST_F(Contract, DeletingADatabaseDropsItsContainersAndItems) {
  make_container("-1");
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(apply(database_command(CommandType::kDeleteDatabase, "db"), at(1)).http_status(), 204);
  EXPECT_EQ(read("\"p\"", "a", at(1)).http_status(), 404);
  make_container(std::nullopt, at(2));
  EXPECT_EQ(read("\"p\"", "a", at(2)).http_status(), 404);
  EXPECT_EQ(list(std::nullopt, at(2)).body, "[]");
  EXPECT_EQ(stats().stored_items, 0);
  EXPECT_EQ(create(item_body("a", "p"), at(3)).http_status(), 201);
}

TEST_F(Contract, ContainerCreateIs201Or409AndDeleteIs204ThenItemsAreGone) {
  make_container("10");
  EXPECT_EQ(apply(create_container_command("db", "c", "/pk"), kT0).http_status(), 409);
  ASSERT_EQ(create(item_body("a", "p"), kT0).http_status(), 201);
  ASSERT_EQ(create(item_body("b", "p", "\"ttl\":-1"), kT0).http_status(), 201);
  tick(at(10));  // "a" expired, not collected
  OpResult deleted = apply(target_command(CommandType::kDeleteContainer, "db", "c", "", ""), at(10));
  EXPECT_EQ(deleted.http_status(), 204);
  EXPECT_EQ(store_->reader().read_container("db", "c").http_status(), 404);
  EXPECT_EQ(read("\"p\"", "b", at(10)).http_status(), 404);
  EXPECT_EQ(apply(target_command(CommandType::kDeleteContainer, "db", "c", "", ""), at(10)).http_status(), 404);
  // Re-created with the same name: empty, and its TTL is its own.
  add_container("c", std::nullopt, at(11));
  EXPECT_EQ(read("\"p\"", "a", at(11)).http_status(), 404);
  EXPECT_EQ(read("\"p\"", "b", at(11)).http_status(), 404);
  EXPECT_EQ(list(std::nullopt, at(11)).body, "[]");
  ContainerStats fresh = stats();
  EXPECT_EQ(fresh.stored_items, 0);
  EXPECT_EQ(fresh.stored_bytes, 0);
  EXPECT_EQ(fresh.backlog.items, 0);
  EXPECT_EQ(collect(at(11)).items, 0);
  EXPECT_EQ(create(item_body("b", "p"), at(12)).http_status(), 201);
  Result<int64_t> reclaimed = store_->expiry().reclaim_dropped(1000);
  ASSERT_TRUE(reclaimed.is_ok());
  EXPECT_GE(*reclaimed, 2);
  EXPECT_EQ(read("\"p\"", "b", at(12)).http_status(), 200);
  EXPECT_EQ(stats().stored_items, 1);
}

TEST_F(Contract, MalformedOrNonObjectBodyIs400) {
  make_container("-1");
  const Dump before = dump_without_meta();
  for (const std::string body : {"{", "", "{\"id\":\"a\",\"pk\":\"p\"", "not json", "[1,2]", "\"str\"", "42",
                                 "null", "[{\"id\":\"a\",\"pk\":\"p\"}]", "{\"id\":\"a\",\"pk\":\"p\"} x"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(create(body, kT0).http_status(), 400);
    EXPECT_EQ(upsert(body, kT0).http_status(), 400);
    EXPECT_EQ(replace(body, kT0).http_status(), 400);
  }
  EXPECT_EQ(dump_without_meta(), before);
}

TEST_F(Contract, MissingOrInvalidIdIs400) {
  make_container("-1");
  const Dump before = dump_without_meta();
  const std::vector<std::string> bodies = {
      R"({"pk":"p"})",
      R"({"id":"","pk":"p"})",
      R"({"id":5,"pk":"p"})",
      R"({"id":null,"pk":"p"})",
      R"({"id":"a/b","pk":"p"})",
      R"({"id":"a\\b","pk":"p"})",
      R"({"id":"a?b","pk":"p"})",
      R"({"id":"a#b","pk":"p"})",
      R"({"id":")" + std::string(256, 'x') + R"(","pk":"p"})",
  };
  for (const std::string& body : bodies) {
    SCOPED_TRACE(body.substr(0, 40));
    OpResult result = create(body, kT0);
    EXPECT_EQ(result.http_status(), 400);
    EXPECT_FALSE(result.message.empty());
  }
  EXPECT_EQ(dump_without_meta(), before);
  EXPECT_EQ(create(R"({"id":")" + std::string(255, 'x') + R"(","pk":"p"})", kT0).http_status(), 201);
  EXPECT_EQ(read("\"p\"", std::string(255, 'x'), kT0).http_status(), 200);
}

TEST_F(Contract, AnObjectOrArrayPartitionKeyIs400) {
  make_container("-1");
  const Dump before = dump_without_meta();
  for (const std::string body : {R"({"id":"a","pk":{}})", R"({"id":"a","pk":{"k":1}})", R"({"id":"a","pk":[1]})"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(create(body, kT0).http_status(), 400);
    EXPECT_EQ(upsert(body, kT0).http_status(), 400);
  }
  EXPECT_EQ(dump_without_meta(), before);
}

// No value at the path (property names are case-sensitive: "PK" is not "pk"): the undefined partition, as in
// Cosmos DB, read with the key {} (the SDKs' PartitionKey.None), distinct from null.
TEST_F(Contract, AMissingPartitionKeyValueIsTheUndefinedPartition) {
  make_container("-1");
  ASSERT_EQ(create(R"({"id":"a"})", kT0).http_status(), 201);
  EXPECT_EQ(create(R"({"id":"a","PK":"p"})", kT0).http_status(), 409);
  EXPECT_EQ(create(R"({"id":"a","pk":null})", kT0).http_status(), 201);
  EXPECT_EQ(read("{}", "a", kT0).http_status(), 200);
  EXPECT_EQ(read("null", "a", kT0).http_status(), 200);
}

TEST_F(Contract, NumericPartitionKeys42And42Point0AddressTheSameItem) {
  make_container("-1");
  ASSERT_EQ(create(R"({"id":"a","pk":42})", kT0).http_status(), 201);
  EXPECT_EQ(create(R"({"id":"a","pk":42.0})", kT0).http_status(), 409);
  EXPECT_EQ(read("42", "a", kT0).http_status(), 200);
  EXPECT_EQ(read("42.0", "a", kT0).http_status(), 200);
  EXPECT_EQ(read("\"42\"", "a", kT0).http_status(), 404);  // the string "42" is another partition
  EXPECT_EQ(replace(R"({"id":"a","pk":42.0,"v":1})", at(1)).http_status(), 200);
  EXPECT_EQ(patch("42.0", "a", R"([{"op":"set","path":"/w","value":1}])", at(1)).http_status(), 200);
  EXPECT_EQ(ids_of(list(std::string("42.0"), at(1)).body), (std::vector<std::string>{"a"}));
  EXPECT_EQ(remove("42.0", "a", at(2)).http_status(), 204);
  EXPECT_EQ(read("42", "a", at(2)).http_status(), 404);
}

TEST_F(Contract, NullPartitionKeyValueIsAValidKey) {
  make_container("-1");
  ASSERT_EQ(create(R"({"id":"a","pk":null})", kT0).http_status(), 201);
  EXPECT_EQ(read("null", "a", kT0).http_status(), 200);
  EXPECT_EQ(read("\"null\"", "a", kT0).http_status(), 404);
  EXPECT_EQ(create(R"({"id":"a","pk":false})", kT0).http_status(), 201);
  EXPECT_EQ(read("false", "a", kT0).http_status(), 200);
}

TEST_F(Contract, IdLengthIsCountedInCharactersNotBytes) {
  make_container("-1");
  std::string id255, id256;
  for (int i = 0; i < 255; ++i) id255 += "\xc3\xa9";  // é
  id256 = id255 + "\xc3\xa9";
  EXPECT_EQ(create(R"({"id":")" + id255 + R"(","pk":"p"})", kT0).http_status(), 201);
  EXPECT_EQ(create(R"({"id":")" + id256 + R"(","pk":"p"})", kT0).http_status(), 400);
  EXPECT_EQ(read("\"p\"", id255, kT0).http_status(), 200);
}

TEST_F(Contract, PatchCannotChangeANestedPartitionKeyOrItsParents) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  ASSERT_EQ(apply(create_container_command("db", "n", "/tenant/id", std::string("-1")), kT0).http_status(), 201);
  ASSERT_EQ(create(R"({"id":"a","tenant":{"id":"t1","name":"x"}})", kT0, "n").http_status(), 201);
  for (const std::string operations :
       {R"([{"op":"set","path":"/tenant","value":{"id":"t2"}}])", R"([{"op":"remove","path":"/tenant"}])",
        R"([{"op":"set","path":"/tenant/id","value":"t2"}])", R"([{"op":"replace","path":"/id","value":"b"}])"}) {
    SCOPED_TRACE(operations);
    EXPECT_EQ(patch("\"t1\"", "a", operations, at(1), std::nullopt, "n").http_status(), 400);
  }
  EXPECT_EQ(patch("\"t1\"", "a", R"([{"op":"set","path":"/tenant/name","value":"y"}])", at(1), std::nullopt, "n")
                .http_status(),
            200);
  EXPECT_EQ(read_in("n", "\"t1\"", "a", at(1)).http_status(), 200);
}

TEST_F(Contract, IfMatchComparesTheQuotedEtagString) {
  make_container("-1");
  OpResult created = create(item_body("a", "p"), kT0);
  ASSERT_EQ(created.http_status(), 201);
  ASSERT_GE(created.etag.size(), 2u);
  EXPECT_EQ(created.etag.front(), '"');
  EXPECT_EQ(created.etag.back(), '"');
  const std::string bare = created.etag.substr(1, created.etag.size() - 2);
  EXPECT_EQ(patch("\"p\"", "a", R"([{"op":"set","path":"/v","value":1}])", at(1), bare).http_status(), 412);
  EXPECT_EQ(remove("\"p\"", "a", at(1), bare).http_status(), 412);
  EXPECT_EQ(remove("\"p\"", "a", at(1), "W/" + created.etag).http_status(), 412);
  EXPECT_EQ(remove("\"p\"", "a", at(1), created.etag).http_status(), 204);
}

// ===== Determinism ===================================================================================================

std::vector<Command> scripted_log() {
  std::vector<Command> log;
  log.push_back(database_command(CommandType::kCreateDatabase, "db"));
  log.push_back(create_container_command("db", "c", "/pk", std::string("10")));
  log.push_back(create_container_command("db", "d", "/pk"));
  log.push_back(item_command(CommandType::kCreateItem, "db", "c", item_body("a", "p")));
  log.push_back(item_command(CommandType::kCreateItem, "db", "c", item_body("b", "p", "\"ttl\":3")));
  log.push_back(item_command(CommandType::kCreateItem, "db", "c", item_body("x", "q", "\"ttl\":-1,\"v\":1.5")));
  log.push_back(item_command(CommandType::kCreateItem, "db", "c", item_body("bad", "p", "\"ttl\":0")));  // 400
  log.push_back(item_command(CommandType::kCreateItem, "db", "d", item_body("a", "p", "\"ttl\":1")));
  log.push_back(target_command(CommandType::kPatchItem, "db", "c", "\"p\"", "a",
                               R"([{"op":"incr","path":"/n","value":1}])"));
  log.push_back(item_command(CommandType::kUpsertItem, "db", "c", item_body("b", "p")));   // after b expired: 201
  log.push_back(set_default_ttl_command("db", "c", std::string("100")));
  log.push_back(item_command(CommandType::kReplaceItem, "db", "c", item_body("a", "p")));  // a expired: 404
  log.push_back(item_command(CommandType::kCreateItem, "db", "c", item_body("a", "p", "\"ttl\":5")));
  log.push_back(target_command(CommandType::kDeleteItem, "db", "c", "\"q\"", "x"));
  log.push_back(set_default_ttl_command("db", "c", std::nullopt));
  log.push_back(target_command(CommandType::kDeleteContainer, "db", "d", "", ""));
  log.push_back(Command{});
  return log;
}

TEST(ContractDeterminism, SameLogAtSameTimesGivesIdenticalReplicatedState) {
  TempDir dir_a, dir_b;
  std::unique_ptr<StateMachine> a = open_store(dir_a.path() + "/db");
  std::unique_ptr<StateMachine> b = open_store(dir_b.path() + "/db");
  ASSERT_TRUE(a && b);
  const std::vector<Command> log = scripted_log();
  uint64_t index = 1;
  int64_t ts = kT0 + 250'000;
  for (const Command& command : log) {
    Result<OpResult> ra = a->apply(command, LogIndex(index), ts);
    Result<OpResult> rb = b->apply(command, LogIndex(index), ts);
    ASSERT_TRUE(ra.is_ok() && rb.is_ok());
    EXPECT_EQ(ra->http_status(), rb->http_status()) << index;
    EXPECT_EQ(ra->body, rb->body) << index;
    EXPECT_EQ(ra->etag, rb->etag) << index;
    EXPECT_EQ(ra->message, rb->message) << index;
    ++index;
    ts += 4 * kSecond + 1234;
  }
  Result<Dump> da = a->dump(false);
  Result<Dump> db = b->dump(false);
  ASSERT_TRUE(da.is_ok() && db.is_ok());
  EXPECT_EQ(*da, *db);
  EXPECT_GT(da->size(), 3u);
  EXPECT_EQ(a->applied().index.value(), b->applied().index.value());
  EXPECT_EQ(a->applied().ts_micros, b->applied().ts_micros);
}

// §7: local garbage collection never makes a replica disagree with another on a later log entry.
TEST(ContractDeterminism, ReplicaThatCollectsGivesTheSameResultsAsOneThatDoesNot) {
  TempDir dir_a, dir_b;
  std::unique_ptr<StateMachine> a = open_store(dir_a.path() + "/db");
  std::unique_ptr<StateMachine> b = open_store(dir_b.path() + "/db");
  ASSERT_TRUE(a && b);
  const std::vector<Command> log = scripted_log();
  uint64_t index = 1;
  int64_t ts = kT0 + 250'000;
  for (const Command& command : log) {
    Result<OpResult> ra = a->apply(command, LogIndex(index), ts);
    Result<OpResult> rb = b->apply(command, LogIndex(index), ts);
    ASSERT_TRUE(ra.is_ok() && rb.is_ok());
    EXPECT_EQ(ra->http_status(), rb->http_status()) << index;
    EXPECT_EQ(ra->body, rb->body) << index;
    EXPECT_EQ(ra->etag, rb->etag) << index;
    // Replica B collects everything it may after every entry.
    Result<std::vector<ContainerInfo>> containers = b->reader().containers();
    ASSERT_TRUE(containers.is_ok());
    for (const ContainerInfo& info : *containers) {
      Result<CollectResult> collected = b->expiry().collect_expired(info.database, info.container, ts, 1000);
      ASSERT_TRUE(collected.is_ok()) << collected.status().to_string();
    }
    for (const char* container : {"c", "d"}) {
      for (const auto& [pk, id] : std::vector<std::pair<std::string, std::string>>{
               {"\"p\"", "a"}, {"\"p\"", "b"}, {"\"q\"", "x"}}) {
        OpResult read_a = a->reader().read_item("db", container, pk, id, ts);
        OpResult read_b = b->reader().read_item("db", container, pk, id, ts);
        EXPECT_EQ(read_a.http_status(), read_b.http_status()) << index << container << id;
        EXPECT_EQ(read_a.body, read_b.body) << index << container << id;
      }
    }
    ++index;
    ts += 4 * kSecond + 1234;
  }
}

// The log carries encoded commands: a replica applying the encoded log reaches the state of one applying the
// commands directly.
TEST(ContractDeterminism, EncodedLogGivesTheSameStateAsDirectApply) {
  TempDir dir_a, dir_b;
  std::unique_ptr<StateMachine> a = open_store(dir_a.path() + "/db");
  std::unique_ptr<StateMachine> b = open_store(dir_b.path() + "/db");
  ASSERT_TRUE(a && b);
  std::vector<Command> log = scripted_log();
  Command serverless = create_container_command("db", "s", "/pk");
  serverless.indexing = ttl::IndexingMode::kNone;
  serverless.throughput = Throughput{Throughput::Mode::kServerless, 0};
  log.push_back(serverless);
  Command provisioned = create_container_command("db", "r", "/pk", std::string("7"));
  provisioned.throughput = Throughput{Throughput::Mode::kProvisioned, 1000};
  log.push_back(provisioned);
  log.push_back(item_command(CommandType::kCreateItem, "db", "r", item_body("a", "p")));
  log.push_back(item_command(CommandType::kReplaceItem, "db", "r", item_body("a", "p", "\"v\":1"),
                             std::string("\"0000000000000001\"")));  // 412
  uint64_t index = 1;
  int64_t ts = kT0 + 250'000;
  for (const Command& command : log) {
    Result<OpResult> ra = a->apply(command, LogIndex(index), ts);
    Result<OpResult> rb = b->apply_encoded(encode_command(command), LogIndex(index), ts);
    ASSERT_TRUE(ra.is_ok() && rb.is_ok());
    EXPECT_EQ(ra->http_status(), rb->http_status()) << index;
    EXPECT_EQ(ra->body, rb->body) << index;
    EXPECT_EQ(ra->message, rb->message) << index;
    ++index;
    ts += 3 * kSecond + 777;
  }
  Result<Dump> da = a->dump(false);
  Result<Dump> db = b->dump(false);
  ASSERT_TRUE(da.is_ok() && db.is_ok());
  EXPECT_EQ(*da, *db);
}

}  // namespace
}  // namespace mayfly::storage::testing
