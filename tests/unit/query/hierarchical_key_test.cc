// Hierarchical partition keys (kind MultiHash, 2 or 3 paths; storage/json.h): the definition as stored, items keyed
// by every path (undefined where they have no value), point reads, patches and deletes by the whole key (and a clear 400 for a partial one), queries
// pinned by the filter, and a key prefix as the SDKs send it — the EPK range [EPK(prefix), EPK(prefix) + "FF"), or
// the prefix itself as the request's partition key — with
// EPKs checked against values the official Python SDK (azure-cosmos 4.17.1,
// PartitionKey._get_effective_partition_key_string) computes.
#include "storage/document.h"
#include "storage/feed_range.h"
#include "storage/state_machine.h"
#include "tests/unit/query/query_fixture.h"

namespace mayfly::query::testing {
namespace {

using storage::CommandType;
using storage::testing::create_container_command;
using storage::testing::database_command;
using storage::testing::item_command;
using storage::testing::target_command;

TEST(HierarchicalEffectivePartitionKey, MatchesTheCosmosSdk) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(["a","b"])", "3A5381E1114EB8D3FCC90795045B49B7195644569A78B1E22D200348AF9416CE"},
      {R"(["a",1])", "3A5381E1114EB8D3FCC90795045B49B720CD98B339BA78A5D0CF6953B87070B0"},
      {R"([true,null])", "0E711127C5B5A8E4726AC6DD306A3E59378867E4430E67857ACE5C908374FE16"},
      {R"(["x",2.5,false])",
       "11E3F358618BE9AA5BAFF4C7C74F071631248BAF9BF5B03915BBF64AAF3A53B22FE1BE91E90A3439635E0E9E37361EF2"},
      {R"(["a"])", "3A5381E1114EB8D3FCC90795045B49B7"},  // a prefix: the SDK's range starts here
  };
  for (const auto& [value, expected] : cases) {
    Result<std::string> epk = storage::effective_partition_key(value);
    ASSERT_TRUE(epk.is_ok()) << value << ": " << epk.status().to_string();
    EXPECT_EQ(*epk, expected) << value;
  }
  EXPECT_TRUE(storage::effective_partition_key(R"([{},"a"])").is_ok());  // an undefined component
  for (const char* bad : {"[]", "[1,2,3,4]", "[[1],2]", R"([{"k":1},"a"])"}) {
    EXPECT_FALSE(storage::effective_partition_key(bad).is_ok()) << bad;
  }
}

TEST(PartitionKeyPath, QuotedSegmentsNameAnyProperty) {
  // Cosmos DB's quoted segments: a name with spaces, quotes of the other kind, symbols, even a '/'.
  const std::string path = R"x(/"level' 1*()"/"le/vel2")x";
  EXPECT_TRUE(json::validate_partition_key_path(path).is_ok());
  EXPECT_EQ(json::partition_key_path_segments(path), (std::vector<std::string>{"level' 1*()", "le/vel2"}));
  Result<storage::PreparedItem> item =
      storage::prepare_item(R"x({"id":"a","level' 1*()":{"le/vel2":"deep"}})x", path);
  ASSERT_TRUE(item.is_ok()) << item.status().to_string();
  EXPECT_EQ(item->partition_key, R"("deep")");
  for (const char* bad : {R"(/"open)", R"(/"a"b)", R"(/""/x)", "/a//b", "a", "/a/b/c/d"}) {
    EXPECT_EQ(json::validate_partition_key_path(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HierarchicalDefinition, ValidatesItsPaths) {
  EXPECT_TRUE(json::validate_partition_key_path(R"(["/tenant","/user"])").is_ok());
  EXPECT_TRUE(json::validate_partition_key_path(R"(["/a/b","/c","/d"])").is_ok());
  for (const char* bad : {R"(["/a"])", R"(["/a","/b","/c","/d"])", R"(["/a","/a"])", R"(["a","/b"])",
                          R"(["/a",1])", R"(["/a","/b")", "[]"}) {
    Status status = json::validate_partition_key_path(bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(json::partition_key_paths(R"(["/tenant","/user"])"), (std::vector<std::string>{"/tenant", "/user"}));
  EXPECT_EQ(json::partition_key_paths("/tenant"), (std::vector<std::string>{"/tenant"}));
  EXPECT_EQ(json::hierarchical_partition_key_definition({"/tenant", "/user"}), R"(["/tenant","/user"])");
}

class HierarchicalKeyTest : public QueryFixture {
 protected:
  void SetUp() override {
    QueryFixture::SetUp();
    ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
    OpResult created = apply(create_container_command("db", "c", R"(["/tenant","/user"])"), kT0);
    ASSERT_EQ(created.http_status(), 201) << created.message;
    EXPECT_NE(created.body.find(R"("partitionKey":{"paths":["/tenant","/user"],"kind":"MultiHash"})"),
              std::string::npos)
        << created.body;
    int64_t ts = kT0;
    for (const char* tenant : {"t1", "t2"}) {
      for (const char* user : {"u1", "u2"}) {
        for (int i = 0; i < 2; ++i) {
          create(std::string(R"({"id":")") + std::to_string(i) + R"(","tenant":")" + tenant + R"(","user":")" +
                     user + R"("})",
                 ts += kSecond);
        }
      }
    }
  }

  OpResult ranged(const std::string& sql, storage::FeedRange range) {
    QueryRequest request;
    request.database = "db";
    request.container = "c";
    request.sql = sql;
    request.feed_range = std::move(range);
    return execute_query(store_->reader(), request, kT0 + 100 * kSecond);
  }
};

TEST_F(HierarchicalKeyTest, ItemsAreKeyedByEveryPath) {
  // The same id under two full keys is two items; a third (same full key) is a conflict.
  OpResult conflict = apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"0","tenant":"t1","user":"u1"})"),
                            kT0 + 50 * kSecond);
  EXPECT_EQ(conflict.http_status(), 409) << conflict.message;
  OpResult read = store_->reader().read_item("db", "c", R"(["t1","u2"])", "1", kT0 + 50 * kSecond);
  ASSERT_EQ(read.http_status(), 200) << read.message;
  EXPECT_NE(read.body.find(R"("user":"u2")"), std::string::npos) << read.body;
  // A key with the wrong number of components names what the container expects.
  for (const char* partial : {R"("t1")", R"(["t1"])", R"(["t1","u1","x"])"}) {
    OpResult bad = store_->reader().read_item("db", "c", partial, "1", kT0 + 50 * kSecond);
    EXPECT_EQ(bad.http_status(), 400) << partial << ": " << bad.message;
  }
  // An item without a value at one of the paths has the undefined component there ({}), as in Cosmos DB.
  OpResult missing = apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"9","tenant":"t1"})"),
                           kT0 + 51 * kSecond);
  EXPECT_EQ(missing.http_status(), 201) << missing.message;
  EXPECT_EQ(store_->reader().read_item("db", "c", R"(["t1",{}])", "9", kT0 + 52 * kSecond).http_status(), 200);
  EXPECT_EQ(store_->reader().read_item("db", "c", R"(["t1",null])", "9", kT0 + 52 * kSecond).http_status(), 404);
}

TEST_F(HierarchicalKeyTest, PatchKeepsEveryPathAndDeleteTakesTheWholeKey) {
  OpResult patched = apply(target_command(CommandType::kPatchItem, "db", "c", R"(["t2","u1"])", "0",
                                          R"([{"op":"set","path":"/user","value":"u9"}])"),
                           kT0 + 60 * kSecond);
  EXPECT_EQ(patched.http_status(), 400) << patched.message;  // the second path is part of the key too
  patched = apply(target_command(CommandType::kPatchItem, "db", "c", R"(["t2","u1"])", "0",
                                 R"([{"op":"set","path":"/n","value":1}])"),
                  kT0 + 61 * kSecond);
  EXPECT_EQ(patched.http_status(), 200) << patched.message;
  OpResult partial = apply(target_command(CommandType::kDeleteItem, "db", "c", R"(["t2"])", "0"), kT0 + 62 * kSecond);
  EXPECT_EQ(partial.http_status(), 400) << partial.message;
  OpResult deleted =
      apply(target_command(CommandType::kDeleteItem, "db", "c", R"(["t2","u1"])", "0"), kT0 + 63 * kSecond);
  EXPECT_EQ(deleted.http_status(), 204) << deleted.message;
  EXPECT_EQ(body("SELECT VALUE COUNT(1) FROM c", kT0 + 64 * kSecond), "[7]");
}

TEST_F(HierarchicalKeyTest, QueriesByTheWholeKeyOrAPrefix) {
  // Pinned by the filter on both paths (a point read of the partition) or given as the request's key.
  EXPECT_EQ(body("SELECT VALUE c.id FROM c WHERE c.tenant = 't1' AND c.user = 'u2' AND c.id = '1'",
                 kT0 + 100 * kSecond),
            R"(["1"])");
  OpResult keyed = query("SELECT VALUE c.id FROM c", kT0 + 100 * kSecond, "", R"(["t2","u2"])");
  ASSERT_EQ(keyed.http_status(), 200) << keyed.message;
  EXPECT_EQ(keyed.body, R"(["0","1"])");
  // A prefix given as the request's key (the Rust SDK sends it so) reads that prefix; a longer key is a 400.
  OpResult by_prefix = query("SELECT VALUE c.user FROM c", kT0 + 100 * kSecond, "", R"("t2")");
  ASSERT_EQ(by_prefix.http_status(), 200) << by_prefix.message;
  EXPECT_EQ(elements(by_prefix.body).size(), 4u) << by_prefix.body;
  EXPECT_EQ(query("SELECT * FROM c", kT0 + 100 * kSecond, "", R"(["t2","u1","x"])").http_status(), 400);
  // Only one path in the filter: not a partition, every item of that tenant.
  EXPECT_EQ(body("SELECT VALUE COUNT(1) FROM c WHERE c.tenant = 't1'", kT0 + 100 * kSecond), "[4]");
  // A prefix, as the SDKs address it: query_items(partition_key=["t1"]) sends [EPK(["t1"]), EPK(["t1"]) + "FF").
  const std::string prefix = storage::effective_partition_key(R"(["t1"])").value();
  OpResult ranged_result = ranged("SELECT VALUE [c.tenant, c.user, c.id] FROM c", {prefix, prefix + "FF"});
  ASSERT_EQ(ranged_result.http_status(), 200) << ranged_result.message;
  std::vector<boost::json::value> rows = elements(ranged_result.body);
  EXPECT_EQ(rows.size(), 4u) << ranged_result.body;
  for (const auto& row : rows) EXPECT_EQ(row.as_array()[0], boost::json::value("t1")) << ranged_result.body;
  // A full key's point range holds its two items only.
  const std::string full = storage::effective_partition_key(R"(["t1","u2"])").value();
  EXPECT_EQ(ranged("SELECT VALUE c.id FROM c", storage::point_feed_range(full)).body, R"(["0","1"])");
}

TEST_F(HierarchicalKeyTest, TheDefinitionCannotChange) {
  storage::Command update;
  update.type = CommandType::kUpdateContainer;
  update.database = "db";
  update.container = "c";
  update.partition_key_path = R"(["/tenant","/other"])";
  EXPECT_EQ(apply(update, kT0 + 70 * kSecond).http_status(), 400);
  update.partition_key_path = R"(["/tenant","/user"])";
  EXPECT_EQ(apply(update, kT0 + 71 * kSecond).http_status(), 200);
  for (const char* bad : {R"(["/tenant"])", R"(["/a","/b","/c","/d"])"}) {
    OpResult refused = apply(create_container_command("db", "c2", bad), kT0 + 72 * kSecond);
    EXPECT_EQ(refused.http_status(), 400) << bad;
  }
}

}  // namespace
}  // namespace mayfly::query::testing
