// Feed ranges (storage/feed_range.h): Cosmos's effective partition key hash, checked against values the official
// Python SDK (azure-cosmos 4.17.1, PartitionKey._get_epk_range_for_partition_key) computes, and queries restricted
// to a range (the SDKs' query_items(feed_range=...)) returning exactly the items whose partition key hashes into it.
// Also the queries the SDKs' read_items builds: up to 1000 `( c.id = @i AND c.pk = @p ) OR ...` terms.
#include <set>

#include "storage/feed_range.h"
#include "tests/unit/query/query_fixture.h"

namespace mayfly::query::testing {
namespace {

TEST(EffectivePartitionKey, MatchesTheCosmosSdk) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("pk1")", "1EC0C2CBE45DBC919CF2B65D399C2673"},
      {R"("")", "32E9366E637A71B4E710384B2F4970A0"},
      {R"("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")", "3949E8F6CC53A2167265BDCE39F2CA09"},
      {"\"h\xc3\xa9llo\"", "029ACA93BF00D120BC875CAD8F9A5F01"},
      {"0", "155B95BEDAC4B1E9EC1CDC9BB0DDDE58"},
      {"1", "20CD98B339BA78A5D0CF6953B87070B0"},
      {"42", "08E6D561F6FD951DCC25E7E4EA2884B5"},
      {"-1.5", "151793206780805FF6E1DCAE6C787B6A"},
      {"1e300", "1234CB21048B20039B22F11DBB13CD7B"},
      {"true", "0E711127C5B5A8E4726AC6DD306A3E59"},
      {"false", "2FE1BE91E90A3439635E0E9E37361EF2"},
      {"null", "378867E4430E67857ACE5C908374FE16"},
      {"9007199254740993", "15335910D01122E3D99DA5DE569B065D"},  // hashed as the double 2^53, as the SDK does
  };
  for (const auto& [value, expected] : cases) {
    Result<std::string> epk = storage::effective_partition_key(value);
    ASSERT_TRUE(epk.is_ok()) << value << ": " << epk.status().to_string();
    EXPECT_EQ(*epk, expected) << value;
  }
  EXPECT_FALSE(storage::effective_partition_key("[[1]]").is_ok());
  EXPECT_FALSE(storage::effective_partition_key("{").is_ok());
}

TEST(FeedRangeHeaders, AreHexAndNonEmpty) {
  Result<storage::FeedRange> whole = storage::parse_feed_range("", "FF");
  ASSERT_TRUE(whole.is_ok());
  EXPECT_TRUE(whole->whole());
  Result<storage::FeedRange> point = storage::parse_feed_range("1ec0c2cbe45dbc919cf2b65d399c2673",
                                                               "1EC0C2CBE45DBC919CF2B65D399C2674");
  ASSERT_TRUE(point.is_ok());
  EXPECT_EQ(point->min, "1EC0C2CBE45DBC919CF2B65D399C2673");  // upper-cased, as EPKs compare
  EXPECT_TRUE(point->contains("1EC0C2CBE45DBC919CF2B65D399C2673"));
  EXPECT_FALSE(point->contains("1EC0C2CBE45DBC919CF2B65D399C2674"));
  EXPECT_TRUE(storage::parse_feed_range("", "").is_ok());  // an empty end is the container's end
  for (auto [start, end] : {std::pair{"zz", "FF"}, std::pair{"", "F F"}, std::pair{"80", "40"}, std::pair{"40", "40"}}) {
    Result<storage::FeedRange> bad = storage::parse_feed_range(start, end);
    ASSERT_FALSE(bad.is_ok()) << start << " " << end;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(storage::parse_feed_range(std::string(300, 'A'), "FF").is_ok());
  // The SDK's point range of "pk1" (normalized: max = min + 1, carrying).
  EXPECT_EQ(storage::point_feed_range("1EC0C2CBE45DBC919CF2B65D399C2673").max, "1EC0C2CBE45DBC919CF2B65D399C2674");
  EXPECT_EQ(storage::point_feed_range("0A9F").max, "0AA0");
  EXPECT_EQ(storage::point_feed_range("19FF").max, "1A00");
}

class FeedRangeQueryTest : public QueryFixture {
 protected:
  void SetUp() override {
    QueryFixture::SetUp();
    make_container(std::nullopt);
    int64_t ts = kT0;
    for (const char* pk : {R"("pk1")", R"("pk2")", R"("pk3")", "42", "true", "null"}) {
      for (int i = 0; i < 3; ++i) {
        create(R"({"id":")" + std::to_string(i) + R"(","pk":)" + pk + "}", ts += kSecond);
      }
    }
  }

  OpResult ranged(const std::string& sql, storage::FeedRange range, std::optional<std::string> pk = std::nullopt) {
    QueryRequest request;
    request.database = "db";
    request.container = "c";
    request.sql = sql;
    request.partition_key_json = std::move(pk);
    request.feed_range = std::move(range);
    return execute_query(store_->reader(), request, kT0 + 100 * kSecond);
  }

  // The point range of one partition key value, as feed_range_from_partition_key makes it: [epk, epk + 1).
  static storage::FeedRange point(const std::string& pk) {
    return storage::point_feed_range(storage::effective_partition_key(pk).value());
  }
};

TEST_F(FeedRangeQueryTest, APartitionKeysRangeReturnsOnlyItsItems) {
  for (const char* pk : {R"("pk1")", R"("pk2")", "42", "true", "null"}) {
    OpResult result = ranged("SELECT VALUE c.pk FROM c", point(pk));
    ASSERT_EQ(result.http_status(), 200) << result.message;
    std::vector<boost::json::value> rows = elements(result.body);
    EXPECT_EQ(rows.size(), 3u) << pk << ": " << result.body;
    for (const auto& row : rows) EXPECT_EQ(json::to_json(row), pk);
  }
  // Every path: aggregates, ORDER BY c._ts (the index walk), a point lookup, and --pk outside the range.
  EXPECT_EQ(ranged("SELECT VALUE COUNT(1) FROM c", point(R"("pk3")")).body, "[3]");
  EXPECT_EQ(ranged("SELECT VALUE c.id FROM c ORDER BY c._ts DESC", point("42")).body, R"(["2","1","0"])");
  EXPECT_EQ(ranged("SELECT VALUE c.id FROM c WHERE c.pk = 'pk1' AND c.id = '1'", point(R"("pk1")")).body, R"(["1"])");
  EXPECT_EQ(ranged("SELECT VALUE c.id FROM c WHERE c.pk = 'pk1' AND c.id = '1'", point(R"("pk2")")).body, "[]");
  EXPECT_EQ(ranged("SELECT VALUE c.id FROM c", point(R"("pk2")"), R"("pk1")").body, "[]");
}

TEST_F(FeedRangeQueryTest, RangesSplittingTheContainerPartitionItsItems) {
  // Four ranges covering ["", "FF") (the hash clears the top two bits, so "40".."FF" holds nothing): every item is
  // in exactly one, the one its partition key's EPK falls in.
  const std::vector<storage::FeedRange> ranges = {{"", "10"}, {"10", "20"}, {"20", "30"}, {"30", "FF"}};
  std::multiset<std::string> seen;
  for (const storage::FeedRange& range : ranges) {
    OpResult result = ranged("SELECT VALUE [c.pk, c.id] FROM c", range);
    ASSERT_EQ(result.http_status(), 200) << result.message;
    for (const auto& row : elements(result.body)) {
      const std::string pk = json::to_json(row.as_array()[0]);
      EXPECT_TRUE(range.contains(storage::effective_partition_key(pk).value())) << pk;
      seen.insert(json::to_json(row));
    }
  }
  EXPECT_EQ(seen.size(), 18u);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 18u);
}

TEST_F(FeedRangeQueryTest, ReadItemsQueriesWithAThousandTermsWork) {
  // What azure-cosmos's read_items sends for 1000 (id, pk) pairs: 2000 parameters, 1000 ORed terms.
  std::string sql = "SELECT * FROM c WHERE ( ";
  boost::json::object parameters;
  for (int i = 0; i < 1000; ++i) {
    if (i > 0) sql += " OR ";
    const std::string n = std::to_string(i);
    sql += "( c.id = @param_id" + n + " AND c.pk = @param_pk" + n + "0 )";
    parameters["@param_id" + n] = std::to_string(i % 3);
    parameters["@param_pk" + n + "0"] = i % 2 == 0 ? boost::json::value("pk1") : boost::json::value(42);
  }
  sql += " )";
  OpResult result = query(sql, kT0 + 100 * kSecond, json::to_json(parameters));
  ASSERT_EQ(result.http_status(), 200) << result.message;
  EXPECT_EQ(elements(result.body).size(), 6u) << result.body;  // ids 0..2 of pk1 and of 42
}

}  // namespace
}  // namespace mayfly::query::testing
