// Test helpers for queries: a real state machine (LevelDB in a temp dir, tests/unit/store_fixture.h) and short ways
// to run a query, or every page of one, at an explicit replicated time.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "query/executor.h"
#include "storage/json.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::query::testing {

using storage::OpResult;
using storage::testing::kSecond;
using storage::testing::kT0;

class QueryFixture : public storage::testing::StoreFixture {
 protected:
  OpResult query(const std::string& sql, int64_t now, const std::string& parameters = "",
                 std::optional<std::string> pk = std::nullopt, size_t max_items = 100, std::string continuation = "",
                 const EngineLimits& limits = {}) {
    QueryRequest request;
    request.database = "db";
    request.container = "c";
    request.sql = sql;
    request.parameters_json = parameters;
    request.partition_key_json = std::move(pk);
    request.max_items = max_items;
    request.continuation = std::move(continuation);
    return execute_query(store_->reader(), request, now, limits);
  }

  // The body of a successful query (fails the test otherwise).
  std::string body(const std::string& sql, int64_t now, const std::string& parameters = "") {
    OpResult result = query(sql, now, parameters);
    EXPECT_EQ(result.http_status(), 200) << sql << ": " << result.message;
    EXPECT_TRUE(result.continuation.empty()) << sql;
    return result.body;
  }

  OpResult create(const std::string& item_json, int64_t ts) {
    OpResult result = apply(storage::testing::item_command(storage::CommandType::kCreateItem, "db", "c", item_json), ts);
    EXPECT_EQ(result.http_status(), 201) << item_json << ": " << result.message;
    return result;
  }

  // Advances replicated time (a time entry), as the leader does when idle.
  void advance_to(int64_t ts) { ASSERT_EQ(apply(storage::Command{}, ts).http_status(), 200); }
};

// The elements of a JSON array body.
inline std::vector<boost::json::value> elements(const std::string& body) {
  Result<boost::json::value> parsed = json::parse(body);
  EXPECT_TRUE(parsed.is_ok() && parsed->is_array()) << body;
  if (!parsed.is_ok() || !parsed->is_array()) return {};
  return std::vector<boost::json::value>(parsed->get_array().begin(), parsed->get_array().end());
}

}  // namespace mayfly::query::testing
