// The `_ts` index that ORDER BY c._ts walks (storage/layout.h, prefix 09): one entry per stored item, moved by every
// write, removed by deletes, by the garbage collector and with a dropped container, carried by snapshots — so the
// index path and the scan path of a query always agree.
#include "tests/unit/query/query_fixture.h"

namespace mayfly::query::testing {
namespace {

using storage::CommandType;
using storage::testing::item_command;
using storage::testing::target_command;

class QueryStorageTest : public QueryFixture {
 protected:
  // The keys of the `_ts` index, in order.
  std::vector<std::string> ts_index_keys(storage::StateMachine& store) {
    std::vector<std::string> out;
    auto dump = store.dump(false);
    EXPECT_TRUE(dump.is_ok());
    for (const auto& [key, value] : *dump) {
      if (static_cast<uint8_t>(key[0]) == static_cast<uint8_t>(storage::KeyTag::kTsIndex)) out.push_back(key);
    }
    return out;
  }
  size_t stored_items(storage::StateMachine& store) {
    size_t count = 0;
    auto dump = store.dump(false);
    for (const auto& [key, value] : *dump) count += static_cast<uint8_t>(key[0]) == 0x04;
    return count;
  }
  // ORDER BY c._ts through the index must equal ORDER BY c._ts on one partition at a time (scan + sort), merged.
  void expect_index_agrees_with_scan(int64_t now) {
    const std::string by_index = body("SELECT VALUE c.id FROM c ORDER BY c._ts DESC", now);
    std::vector<std::pair<int64_t, std::string>> merged;
    for (const char* pk : {"\"a\"", "\"b\""}) {
      OpResult part = query("SELECT VALUE [c._ts, c.id] FROM c ORDER BY c._ts DESC", now, "", pk);
      for (const boost::json::value& row : elements(part.body)) {
        merged.emplace_back(row.as_array()[0].as_int64(), std::string(row.as_array()[1].as_string()));
      }
    }
    std::string expected = "[";
    // Same seconds are broken by exact write time, which these tests make coincide with id order.
    std::sort(merged.begin(), merged.end(), [](const auto& x, const auto& y) { return x > y; });
    for (const auto& [ts, id] : merged) expected += (expected.size() > 1 ? ",\"" : "\"") + id + "\"";
    EXPECT_EQ(by_index, expected + "]");
  }
};

TEST_F(QueryStorageTest, WritesMoveEntriesDeletesAndCollectorRemoveThem) {
  make_container("-1");
  int64_t t = kT0 + kSecond;
  for (int i = 0; i < 6; ++i) {
    create("{\"id\":\"i" + std::to_string(i) + "\",\"pk\":\"" + (i % 2 ? "b" : "a") + "\"" + (i == 4 ? ",\"ttl\":1" : "") +
               "}",
           t += kSecond);
  }
  EXPECT_EQ(ts_index_keys(*store_).size(), 6u);
  // Replacing i0 moves it to the newest position; deleting i1 removes its entry.
  ASSERT_EQ(apply(item_command(CommandType::kUpsertItem, "db", "c", R"({"id":"i0","pk":"a","v":2})"), t += kSecond).http_status(), 200);
  ASSERT_EQ(apply(target_command(CommandType::kDeleteItem, "db", "c", "\"b\"", "i1"), t += kSecond).http_status(), 204);
  EXPECT_EQ(ts_index_keys(*store_).size(), stored_items(*store_));
  EXPECT_EQ(body("SELECT VALUE c.id FROM c ORDER BY c._ts DESC", t), R"(["i0","i5","i3","i2"])");  // i4 expired
  expect_index_agrees_with_scan(t);
  // The collector deletes i4 and its index entry.
  Result<storage::CollectResult> collected = store_->expiry().collect_expired("db", "c", t, 100);
  ASSERT_TRUE(collected.is_ok());
  EXPECT_EQ(collected->items, 1);
  EXPECT_EQ(ts_index_keys(*store_).size(), 4u);
  EXPECT_EQ(body("SELECT VALUE c.id FROM c ORDER BY c._ts", t), R"(["i2","i3","i5","i0"])");
}

TEST_F(QueryStorageTest, SnapshotsCarryTheIndexAndDroppedContainersLoseIt) {
  make_container("-1");
  int64_t t = kT0 + kSecond;
  for (int i = 0; i < 8; ++i) {
    create("{\"id\":\"i" + std::to_string(i) + "\",\"pk\":\"" + (i % 2 ? "b" : "a") + "\"}", t += kSecond / 3);
  }
  Result<std::string> snapshot = store_->export_snapshot();
  ASSERT_TRUE(snapshot.is_ok());
  storage::testing::TempDir other_dir;
  storage::StoreOptions options;
  options.path = other_dir.path() + "/db";
  Result<std::unique_ptr<storage::StateMachine>> other = storage::StateMachine::open(options);
  ASSERT_TRUE(other.is_ok());
  ASSERT_TRUE((*other)->install_snapshot(*snapshot).is_ok());
  EXPECT_EQ(ts_index_keys(**other), ts_index_keys(*store_));
  QueryRequest request;
  request.database = "db";
  request.container = "c";
  request.sql = "SELECT VALUE c.id FROM c ORDER BY c._ts DESC";
  EXPECT_EQ(execute_query((*other)->reader(), request, t).body, body(request.sql, t));
  expect_index_agrees_with_scan(t);
  // Dropping the container and reclaiming its keys removes the index too.
  ASSERT_EQ(apply(target_command(CommandType::kDeleteContainer, "db", "c", "", ""), t += kSecond).http_status(), 204);
  Result<int64_t> reclaimed = store_->expiry().reclaim_dropped(1000);
  ASSERT_TRUE(reclaimed.is_ok());
  EXPECT_TRUE(ts_index_keys(*store_).empty());
}

}  // namespace
}  // namespace mayfly::query::testing
