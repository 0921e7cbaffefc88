// Transactional batches (StateMachine::execute_batch): every operation applies in order as one log entry, each reading
// what the earlier ones wrote, or none does (207: the failed operation's status, 424 for the others) and the store is
// as if the batch had never been sent — no item, no index entry, no write sequence used.
#include <gtest/gtest.h>

#include "storage/command.h"
#include "storage/json.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

class BatchTest : public StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    make_container(std::nullopt);
  }

  OpResult batch(const std::string& partition_key_json, const std::string& operations, int64_t ts) {
    Command command;
    command.type = CommandType::kBatch;
    command.database = "db";
    command.container = "c";
    command.partition_key_json = partition_key_json;
    command.body = operations;
    return apply(command, ts);
  }

  static std::vector<int64_t> statuses(const OpResult& result) {
    std::vector<int64_t> out;
    Result<boost::json::value> parsed = json::parse(result.body);
    EXPECT_TRUE(parsed.is_ok() && parsed->is_array()) << result.body;
    if (!parsed.is_ok() || !parsed->is_array()) return out;
    for (const auto& entry : parsed->get_array()) out.push_back(entry.as_object().at("statusCode").as_int64());
    return out;
  }

  // The stored state without the applied position and the meta record that carries it.
  std::vector<std::pair<std::string, std::string>> state() {
    auto dumped = store_->dump(true);
    EXPECT_TRUE(dumped.is_ok());
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& [key, value] : *dumped) {
      if (key != meta_key()) out.emplace_back(key, value);
    }
    return out;
  }
};

TEST_F(BatchTest, EveryOperationAppliesInOrderSeeingTheEarlierOnes) {
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"old","pk":"p","n":1})"), kT0 + 1)
                .http_status(),
            201);
  OpResult result = batch(R"("p")",
                          R"([{"operationType":"Create","resourceBody":{"id":"a","pk":"p","n":1}},)"
                          R"({"operationType":"Read","id":"a"},)"
                          R"({"operationType":"Patch","id":"a","resourceBody":{"operations":[{"op":"incr","path":"/n","value":4}]}},)"
                          R"({"operationType":"Upsert","resourceBody":{"id":"b","pk":"p"}},)"
                          R"({"operationType":"Replace","id":"old","resourceBody":{"id":"old","pk":"p","n":2}},)"
                          R"({"operationType":"Delete","id":"b"},)"
                          R"({"operationType":"Read","id":"a"}])",
                          kT0 + 2);
  ASSERT_EQ(result.http_status(), 200) << result.message << result.body;
  EXPECT_EQ(statuses(result), (std::vector<int64_t>{201, 200, 200, 201, 200, 204, 200}));
  Result<boost::json::value> parsed = json::parse(result.body);
  const boost::json::array& entries = parsed->get_array();
  EXPECT_EQ(entries[6].as_object().at("resourceBody").as_object().at("n"), 5);  // read after the patch
  // The store holds what the operations left, with their etags.
  OpResult a = read(R"("p")", "a", kT0 + 3);
  ASSERT_EQ(a.http_status(), 200);
  EXPECT_NE(a.body.find(R"("n":5)"), std::string::npos) << a.body;
  EXPECT_EQ(entries[2].as_object().at("eTag").as_string(), a.etag);
  EXPECT_NE(read(R"("p")", "old", kT0 + 3).body.find(R"("n":2)"), std::string::npos);
  EXPECT_EQ(read(R"("p")", "b", kT0 + 3).http_status(), 404);
}

TEST_F(BatchTest, AFailedOperationLeavesTheStoreAsItWas) {
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p"})"), kT0 + 1).http_status(),
            201);
  const auto before = state();
  // Upsert c, then a create of an existing id, then a delete: 207 with 409 for the create, 424 for the others.
  OpResult failed = batch(R"("p")",
                          R"([{"operationType":"Upsert","resourceBody":{"id":"c","pk":"p","ttl":5}},)"
                          R"({"operationType":"Create","resourceBody":{"id":"a","pk":"p"}},)"
                          R"({"operationType":"Delete","id":"a"}])",
                          kT0 + 2);
  EXPECT_EQ(failed.http_status(), 207) << failed.body;
  EXPECT_EQ(statuses(failed), (std::vector<int64_t>{424, 409, 424}));
  EXPECT_EQ(state(), before) << "nothing of the batch is stored";
  EXPECT_EQ(read(R"("p")", "c", kT0 + 3).http_status(), 404);
  // Not even a write sequence: the next write's etag is the one it would have had without the batch.
  OpResult next = apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"d","pk":"p"})"), kT0 + 4);
  EXPECT_EQ(next.etag, format_etag(4));  // database 1, container 2, a 3
  // An item of another partition, an etag that does not match, a read of a missing item: each fails it too.
  EXPECT_EQ(statuses(batch(R"("p")", R"([{"operationType":"Create","resourceBody":{"id":"x","pk":"q"}}])", kT0 + 5)),
            (std::vector<int64_t>{400}));
  EXPECT_EQ(statuses(batch(R"("p")",
                           R"([{"operationType":"Upsert","resourceBody":{"id":"y","pk":"p"}},)"
                           R"({"operationType":"Replace","id":"a","ifMatch":"\"0000000000000001\"","resourceBody":{"id":"a","pk":"p"}}])",
                           kT0 + 6)),
            (std::vector<int64_t>{424, 412}));
  EXPECT_EQ(statuses(batch(R"("p")", R"([{"operationType":"Read","id":"missing"}])", kT0 + 7)),
            (std::vector<int64_t>{404}));
  EXPECT_EQ(read(R"("p")", "y", kT0 + 8).http_status(), 404);
}

TEST_F(BatchTest, MalformedBatchesAreRefusedWhole) {
  const auto before = state();
  std::string hundred_and_one = "[";
  for (int i = 0; i <= 100; ++i) {
    if (i > 0) hundred_and_one += ',';
    hundred_and_one += R"({"operationType":"Upsert","resourceBody":{"id":")" + std::to_string(i) + R"(","pk":"p"}})";
  }
  hundred_and_one += "]";
  for (const std::string& bad :
       {std::string("{}"), std::string("[]"), hundred_and_one, std::string(R"([{"operationType":"Merge","id":"a"}])"),
        std::string(R"([{"operationType":"Read"}])"), std::string(R"([{"operationType":"Create"}])"),
        std::string(R"([{"operationType":"Replace","id":"a","resourceBody":{"id":"b","pk":"p"}}])"),
        std::string(R"([{"operationType":"Patch","id":"a","resourceBody":{"operations":[],"condition":"from c"}}])"),
        std::string(R"([{"operationType":"Create","resourceBody":{"id":"a","pk":"p"},"ifNoneMatch":"*"}])")}) {
    OpResult refused = batch(R"("p")", bad, kT0 + 1);
    EXPECT_EQ(refused.http_status(), 400) << bad.substr(0, 80);
  }
  EXPECT_EQ(batch(R"(["p","q"])", R"([{"operationType":"Read","id":"a"}])", kT0 + 1).http_status(), 400);
  EXPECT_EQ(state(), before);
}

TEST_F(BatchTest, AContainerWithItsChangeFeedOnRefusesBatchesForNow) {
  Command feed;
  feed.type = CommandType::kUpdateContainer;
  feed.database = "db";
  feed.container = "c";
  feed.change_feed = ChangeFeedSettings{true, 3600, 0};
  ASSERT_EQ(apply(feed, kT0 + 1).http_status(), 200);
  OpResult refused = batch(R"("p")", R"([{"operationType":"Upsert","resourceBody":{"id":"a","pk":"p"}}])", kT0 + 2);
  EXPECT_EQ(refused.http_status(), 400);
  EXPECT_NE(refused.message.find("change feed"), std::string::npos) << refused.message;
}

TEST(BatchCommand, RoundTripsThroughTheLog) {
  Command command;
  command.type = CommandType::kBatch;
  command.database = "db";
  command.container = "c";
  command.partition_key_json = R"("p")";
  command.body = R"([{"operationType":"Read","id":"a"}])";
  Result<Command> decoded = decode_command(encode_command(command));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->type, CommandType::kBatch);
  EXPECT_EQ(decoded->partition_key_json, command.partition_key_json);
  EXPECT_EQ(decoded->body, command.body);
  EXPECT_TRUE(is_item_write(CommandType::kBatch));
}

}  // namespace
}  // namespace mayfly::storage::testing
