// Conditional patch's condition (node/patch_condition.h): the accepted form, the refusals, and Cosmos's three-valued
// WHERE over an item with its system properties.
#include "node/patch_condition.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mayfly::node
