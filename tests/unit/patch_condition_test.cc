// Conditional patch's condition (node/patch_condition.h): the accepted form, the refusals, and Cosmos's three-valued
// WHERE over an item with its system properties.
#include "node/patch_condition.h"

#include <gtest/gtest.h>

#include "storage/json.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::node {
namespace {

constexpr const char* kItem = R"({"id":"t1","pk":"a","n":3,"tags":["x"],"_etag":"\"0a\"","_ts":1700000000})";

bool holds(const char* condition) {
  Result<bool> result = patch_condition_holds(condition, kItem);
  EXPECT_TRUE(result.is_ok()) << condition << ": " << result.status().to_string();
  return result.is_ok() && *result;
}

TEST(PatchCondition, AFilterOverTheItemAsAReadShowsIt) {
  EXPECT_TRUE(holds("from c where c.n = 3"));
  EXPECT_TRUE(holds("  FROM c WHERE c.n >= 3 AND ARRAY_CONTAINS(c.tags, 'x')"));
  EXPECT_TRUE(holds("from root where root._ts > 0 and root._etag = '\"0a\"'"));
  EXPECT_TRUE(holds("from c"));  // no WHERE: every item
  EXPECT_FALSE(holds("from c where c.n > 3"));
  EXPECT_FALSE(holds("from c where c.missing = 1"));  // undefined is not true
  EXPECT_FALSE(holds("from c where c.n = '3'"));      // no conversion between types
}

TEST(PatchCondition, AnythingButFromWhereIsA400NamingTheForm) {
  for (const char* bad : {"where c.n = 3", "select * from c where c.n = 3", "from c where", "from c where c.n = 3 "
                          "order by c.id", "from c where c.n = 3 offset 0 limit 1", "", "fromc where c.n = 3"}) {
    const Status status = validate_patch_condition(bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("FROM c WHERE"), std::string::npos) << status.message();
  }
  EXPECT_TRUE(validate_patch_condition("from c where c.n = 3").is_ok());
  const std::string huge = "from c where c.n = '" + std::string(kMaxPatchConditionBytes, 'x') + "'";
  EXPECT_EQ(validate_patch_condition(huge).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(patch_condition_holds("from c where c.n = @n", kItem).status().code(), StatusCode::kInvalidArgument);
}

// The leader's decision on a real store: refused (404, 400, 412) or pinned to the version it was decided on, so a
// version written between the decision and the apply makes the pinned patch a 412 that changes nothing.
class PatchConditionDecision : public storage::testing::StoreFixture {
 protected:
  storage::Command patch_command(const std::string& operations) {
    return storage::testing::target_command(storage::CommandType::kPatchItem, "db", "c", "\"a\"", "t1", operations);
  }
  int64_t field(const char* name, int64_t now) {
    const storage::OpResult item = read("\"a\"", "t1", now);
    EXPECT_TRUE(item.ok()) << item.message;
    return json::parse(item.body)->as_object().at(name).as_int64();
  }
};

TEST_F(PatchConditionDecision, RefusedHereOrPinnedToTheVersionItWasDecidedOn) {
  using storage::testing::kT0;
  make_container(std::nullopt);
  ASSERT_EQ(apply(storage::testing::item_command(storage::CommandType::kCreateItem, "db", "c",
                                                 R"({"id":"t1","pk":"a","n":3})"),
                  kT0 + 1)
                .http_status(),
            201);
  const std::string bump = R"([{"op":"incr","path":"/n","value":1}])";

  storage::Command refused = patch_command(bump);
  std::optional<storage::OpResult> answer =
      decide_patch_condition(store_->reader(), "from c where c.n > 3", false, refused);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->http_status(), 412);
  storage::Command missing = storage::testing::target_command(storage::CommandType::kPatchItem, "db", "c", "\"a\"",
                                                              "nope", bump);
  answer = decide_patch_condition(store_->reader(), "from c where true", false, missing);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->http_status(), 404);
  answer = decide_patch_condition(store_->reader(), "where c.n = 3", false, refused);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->http_status(), 400);

  // True: pinned to the current etag. Another write lands first; the pinned patch is a 412 and changes nothing.
  storage::Command pinned = patch_command(bump);
  EXPECT_FALSE(decide_patch_condition(store_->reader(), "from c where c.n = 3", false, pinned).has_value());
  ASSERT_TRUE(pinned.if_match.has_value());
  EXPECT_EQ(*pinned.if_match, read("\"a\"", "t1", kT0 + 2).etag);
  ASSERT_EQ(apply(storage::testing::item_command(storage::CommandType::kUpsertItem, "db", "c",
                                                 R"({"id":"t1","pk":"a","n":9})"),
                  kT0 + 3)
                .http_status(),
            200);
  EXPECT_EQ(apply(pinned, kT0 + 4).http_status(), 412);
  EXPECT_EQ(field("n", kT0 + 5), 9);
  // Decided again on the new version: pinned to it and applied.
  storage::Command again = patch_command(bump);
  EXPECT_FALSE(decide_patch_condition(store_->reader(), "from c where c.n = 9", false, again).has_value());
  EXPECT_EQ(apply(again, kT0 + 6).http_status(), 200);
  EXPECT_EQ(field("n", kT0 + 7), 10);

  // A re-sent patch is never refused here; false now, it is pinned to no version (only a first attempt that applied
  // could answer otherwise, from the exactly-once table).
  storage::Command resent = patch_command(bump);
  EXPECT_FALSE(decide_patch_condition(store_->reader(), "from c where c.n = 3", true, resent).has_value());
  ASSERT_TRUE(resent.if_match.has_value());
  EXPECT_EQ(apply(resent, kT0 + 8).http_status(), 412);
  EXPECT_EQ(field("n", kT0 + 9), 10);
}

}  // namespace
}  // namespace mayfly::node
