// Golden tests of the query language against a fixed data set in a real state machine: results and request
// charges, including Cosmos DB's undefined-vs-null rules, and one item (c2) that has expired at the query time and
// must never show up, in rows or in aggregates.
#include "tests/unit/query/query_fixture.h"

namespace mayfly::query::testing {
namespace {

constexpr int64_t kNow = kT0 + 20 * kSecond;  // c2 (written at +8 s with ttl 5) expired at +13 s

class QueryGoldenTest : public QueryFixture {
 protected:
  void SetUp() override {
    QueryFixture::SetUp();
    make_container("-1");  // TTL on, no default: items with their own ttl expire
    const std::vector<std::string> items = {
        R"({"id":"a1","pk":"p1","n":1,"s":"apple","tags":["x","y"],"o":{"k":1}})",
        R"({"id":"a2","pk":"p1","n":2.5,"s":"Banana","tags":["y"]})",
        R"({"id":"a3","pk":"p1","n":null,"s":"cherry"})",
        R"({"id":"b1","pk":"p2","n":"7","s":"date","o":{"k":2}})",
        R"({"id":"b2","pk":"p2","n":-3,"flag":true})",
        R"({"id":"b3","pk":"p2","n":10,"s":"elder","flag":false,"ttl":100})",
        R"({"id":"c1","pk":3,"n":4,"s":"fig","city":"Oslo"})",
        R"({"id":"c2","pk":3,"n":5,"s":"grape","city":"Oslo","ttl":5})",
        R"({"id":"c3","pk":3,"s":"Apple pie","city":"Rome"})",
        R"({"id":"d1","pk":null,"n":0,"city":"Rome"})",
    };
    for (size_t i = 0; i < items.size(); ++i) create(items[i], kT0 + static_cast<int64_t>(i + 1) * kSecond);
    advance_to(kNow);
  }
};

struct Golden {
  std::string sql;
  std::string parameters;
  std::string expected;
  double charge;
};

TEST_F(QueryGoldenTest, LanguageAgainstFixedData) {
  // Charges: 1 + 0.1 per item record read (10 for a container scan, c2 included: reading it was work) + 0.01 per
  // `_ts` index entry + 1 per KB returned.
  const std::vector<Golden> goldens = {
      {"SELECT VALUE c.id FROM c", "", R"(["a1","a2","a3","b1","b2","b3","c1","c3","d1"])", 2.04},
      {"select value c.id from c where c.n > 1", "", R"(["a2","b3","c1"])", 2.02},
      // Comparisons across types are undefined, so "7" is neither > 1 nor != 1; null = null is true.
      {"SELECT VALUE c.id FROM c WHERE c.n = null", "", R"(["a3"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE c.n != 1", "", R"(["a2","b2","b3","c1","d1"])", 2.03},
      {"SELECT VALUE c.id FROM c WHERE c.n <> 1 OR c.n = '7'", "", R"(["a2","b1","b2","b3","c1","d1"])", 2.03},
      {"SELECT VALUE c.id FROM c WHERE IS_DEFINED(c.s) = false", "", R"(["b2","d1"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE NOT IS_DEFINED(c.n)", "", R"(["c3"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE c.flag", "", R"(["b2"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE NOT c.flag", "", R"(["b3"])", 2.01},
      // Three-valued logic: undefined AND false is false, so NOT(...) is true for items without s.
      {"SELECT VALUE c.id FROM c WHERE NOT (c.s = 'x' AND false)", "", R"(["a1","a2","a3","b1","b2","b3","c1","c3","d1"])", 2.04},
      {"SELECT VALUE c.id FROM c WHERE c.s LIKE 'a%'", "", R"(["a1"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE c.s LIKE '_i%' OR c.s NOT LIKE '%e%'", "", R"(["a2","c1"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE STARTSWITH(c.s, 'a', true)", "", R"(["a1","c3"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE CONTAINS(c.s, 'an')", "", R"(["a2"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE ENDSWITH(c.s, 'e')", "", R"(["a1","b1","c3"])", 2.02},
      {"SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.tags, 'y')", "", R"(["a1","a2"])", 2.01},
      {"SELECT VALUE c.id FROM c WHERE c.n IN (1, 4, '7')", "", R"(["a1","b1","c1"])", 2.02},
      {"SELECT VALUE c.id FROM c WHERE c.n BETWEEN 0 AND 4", "", R"(["a1","a2","c1","d1"])", 2.02},
      {"SELECT VALUE c.id FROM c WHERE c.n NOT BETWEEN 0 AND 4", "", R"(["b2","b3"])", 2.01},
      // Single partition: only p1's three records are read.
      {"SELECT VALUE c.n ?? 'none' FROM c WHERE c.pk = 'p1'", "", R"([1,2.5,null])", 1.31},
      {"SELECT VALUE c.missing ?? 'none' FROM c WHERE c.pk = 'p1' AND c.id = 'a3'", "", R"(["none"])", 1.11},
      {"SELECT VALUE (c.n > 3 ? 'big' : 'small') FROM c WHERE c.pk = 3", "", R"(["big","small"])", 1.31},
      {"SELECT c.id, c.n * 2 AS twice FROM c WHERE c.pk = 'p2'", "",
       R"([{"id":"b1"},{"id":"b2","twice":-6},{"id":"b3","twice":20}])", 1.36},
      {"SELECT VALUE {\"i\": c.id, l: LENGTH(c.s), \"u\": UPPER(c.s), lo: LOWER(c.s)} FROM c WHERE c.id = 'a2' AND "
       "c.pk = 'p1'", "", R"([{"i":"a2","l":6,"u":"BANANA","lo":"banana"}])", 1.14},
      {"SELECT VALUE [c.id, c.missing, ABS(c.n), FLOOR(2.7), FLOOR(-2.5), 7 / 2, 4 / 2, 7 % 3] FROM c WHERE c.id = 'b2'",
       "", R"([["b2",3,2,-3,3.5,2,1]])", 2.02},
      {"SELECT VALUE c.o.k FROM c", "", R"([1,2])", 2.0},
      {"SELECT VALUE c[\"o\"][\"k\"] + c.tags[1 - 1].length FROM c", "", R"([])", 2.0},
      {"SELECT VALUE c.tags[1] FROM c", "", R"(["y"])", 2.0},
      {"SELECT VALUE 1 = '1' FROM c WHERE c.id = 'a1'", "", R"([])", 2.0},
      {"SELECT VALUE IS_NULL(c.n) FROM c WHERE c.pk = 'p1'", "", R"([false,false,true])", 1.32},
      {"SELECT VALUE c.s || '!' FROM c WHERE c.pk = 'p1'", "", R"(["apple!","Banana!","cherry!"])", 1.33},
      {"SELECT VALUE c.ttl FROM c WHERE IS_DEFINED(c.ttl)", "", R"([100])", 2.0},
      {"SELECT VALUE c._ts - 1700000000 FROM c WHERE c.pk = 3", "", R"([7,9])", 1.3},
      // Parameters, in filters and TOP / OFFSET / LIMIT.
      {"SELECT VALUE c.id FROM c WHERE c.pk = @pk AND c.n >= @min", R"({"@pk":"p2","@min":0})", R"(["b3"])", 1.31},
      {"SELECT TOP @n VALUE c.id FROM c", R"({"@n":2})", R"(["a1","a2"])", 1.21},
      {"SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(@ids, c.id)", R"({"@ids":["c2","c3","zz"]})", R"(["c3"])", 2.01},
      // Aggregates over the visible set: c2 is expired and counts nowhere.
      {"SELECT VALUE COUNT(1) FROM c", "", R"([9])", 2.0},
      {"SELECT VALUE COUNT(c.n) FROM c", "", R"([8])", 2.0},
      {"SELECT VALUE SUM(c.n) FROM c WHERE IS_NUMBER(c.n)", "", R"([14.5])", 2.01},
      {"SELECT VALUE SUM(c.n) FROM c", "", R"([])", 2.0},  // null and "7" are not numbers: undefined
      {"SELECT VALUE AVG(c.n) FROM c WHERE IS_NUMBER(c.n)", "", R"([2.4166666666666665])", 2.02},
      {"SELECT VALUE MIN(c.n) FROM c", "", R"([null])", 2.01},
      {"SELECT VALUE MAX(c.n) FROM c", "", R"(["7"])", 2.0},
      {"SELECT VALUE MAX(c.n) FROM c WHERE c.city = 'Oslo'", "", R"([4])", 2.0},
      {"SELECT VALUE MAX(c.n) FROM c WHERE c.id = 'none'", "", R"([])", 2.0},
      {"SELECT VALUE COUNT(1) FROM c WHERE c.id = 'none'", "", R"([0])", 2.0},
      {"SELECT COUNT(1) AS n, SUM(c.n) AS total FROM c WHERE c.pk = 3", "", R"([{"n":2,"total":4}])", 1.32},
      {"SELECT c.city, COUNT(1) AS n FROM c GROUP BY c.city", "",
       R"([{"n":6},{"city":"Oslo","n":1},{"city":"Rome","n":2}])", 2.05},
      {"SELECT c.city, MIN(c.id) AS first, MAX(c._ts) - 1700000000 AS last FROM c WHERE IS_DEFINED(c.city) GROUP BY c.city",
       "", R"([{"city":"Oslo","first":"c1","last":7},{"city":"Rome","first":"c3","last":10}])", 2.08},
      // ORDER BY: undefined < null < numbers < strings; ties and everything else deterministic.
      {"SELECT VALUE c.id FROM c ORDER BY c.n DESC", "", R"(["b1","b3","c1","a2","a1","d1","b2","a3","c3"])", 2.04},
      {"SELECT VALUE c.id FROM c ORDER BY c.city, c.id DESC", "", R"(["b3","b2","b1","a3","a2","a1","c1","d1","c3"])", 2.04},
      {"SELECT TOP 2 VALUE c.id FROM c ORDER BY c._ts DESC", "", R"(["d1","c3"])", 1.23},
      {"SELECT VALUE c.id FROM c ORDER BY c._ts OFFSET 2 LIMIT 3", "", R"(["a3","b1","b2"])", 1.57},
      {"SELECT VALUE c.id FROM c WHERE c.pk = 'p2' ORDER BY c._ts DESC", "", R"(["b3","b2","b1"])", 1.32},
      {"SELECT VALUE c.id FROM c ORDER BY c.n OFFSET 7 LIMIT 100", "", R"(["b3","b1"])", 2.01},
  };
  for (const Golden& golden : goldens) {
    OpResult result = query(golden.sql, kNow, golden.parameters);
    EXPECT_EQ(result.http_status(), 200) << golden.sql << ": " << result.message;
    EXPECT_EQ(result.body, golden.expected) << golden.sql;
    EXPECT_DOUBLE_EQ(result.work_charge, golden.charge) << golden.sql << " -> " << result.body;
    EXPECT_TRUE(result.continuation.empty()) << golden.sql;
  }
}

TEST_F(QueryGoldenTest, DistinctReturnsEachRowOnceThenTopOffsetLimit) {
  EXPECT_EQ(body("SELECT DISTINCT VALUE c.city FROM c", kNow), R"(["Oslo","Rome"])");  // c2's Oslo expired
  EXPECT_EQ(body("SELECT DISTINCT VALUE c.pk FROM c", kNow), R"(["p1","p2",3,null])");
  EXPECT_EQ(body("SELECT DISTINCT c.city FROM c WHERE IS_DEFINED(c.city)", kNow), R"([{"city":"Oslo"},{"city":"Rome"}])");
  // Cosmos DB's order across types, descending: strings, numbers, null.
  EXPECT_EQ(body("SELECT DISTINCT VALUE c.pk FROM c ORDER BY c.pk DESC", kNow), R"(["p2","p1",3,null])");
  EXPECT_EQ(body("SELECT DISTINCT TOP 2 VALUE c.pk FROM c", kNow), R"(["p1","p2"])");
  EXPECT_EQ(body("SELECT TOP 2 DISTINCT VALUE c.pk FROM c", kNow), R"(["p1","p2"])");
  EXPECT_EQ(body("SELECT DISTINCT VALUE c.pk FROM c OFFSET 1 LIMIT 2", kNow), R"(["p2",3])");
  // One page, whatever the page size: a continuation cannot resume it.
  OpResult small = query("SELECT DISTINCT VALUE c.pk FROM c", kNow, "", std::nullopt, 1);
  ASSERT_EQ(small.http_status(), 200) << small.message;
  EXPECT_EQ(small.body, R"(["p1","p2",3,null])");
  EXPECT_TRUE(small.continuation.empty());
}

TEST_F(QueryGoldenTest, SelectStarIsWhatAReadReturns) {
  OpResult read_back = read("\"p1\"", "a1", kNow);
  ASSERT_EQ(read_back.http_status(), 200);
  EXPECT_EQ(body("SELECT * FROM c WHERE c.id = 'a1' AND c.pk = 'p1'", kNow), "[" + read_back.body + "]");
  EXPECT_EQ(body("SELECT * FROM root r WHERE r.id = 'a1'", kNow), "[" + read_back.body + "]");
  EXPECT_EQ(body("SELECT VALUE r FROM r WHERE r.id = 'a1'", kNow), "[" + read_back.body + "]");
  EXPECT_EQ(body("SELECT c._etag = @etag AS same FROM c WHERE c.id = 'a1'", kNow,
                 "{\"@etag\":" + json::to_json(json::parse(read_back.body)->at("_etag")) + "}"),
            R"([{"same":true}])");
}

TEST_F(QueryGoldenTest, PartitionKeyOptionNarrowsTheScan) {
  OpResult result = query("SELECT VALUE c.id FROM c", kNow, "", "3");
  ASSERT_EQ(result.http_status(), 200) << result.message;
  EXPECT_EQ(result.body, R"(["c1","c3"])");
  EXPECT_DOUBLE_EQ(result.work_charge, 1.31);  // c1, c2 (expired), c3: three records read
  // The option and the filter disagree: nothing can match, nothing is read.
  result = query("SELECT VALUE c.id FROM c WHERE c.pk = 'p1'", kNow, "", "3");
  EXPECT_EQ(result.body, "[]");
  EXPECT_DOUBLE_EQ(result.work_charge, 1.0);
  // A point read of an expired item: read, skipped, counted.
  result = query("SELECT VALUE c.id FROM c WHERE c.id = 'c2'", kNow, "", "3");
  EXPECT_EQ(result.body, "[]");
  EXPECT_EQ(result.expired_skipped, 1);
}

TEST_F(QueryGoldenTest, PagesResumeWhereTheyStopped) {
  struct Case {
    std::string sql;
    size_t page;
    std::vector<std::string> pages;
  };
  const std::vector<Case> cases = {
      {"SELECT VALUE c.id FROM c", 4, {R"(["a1","a2","a3","b1"])", R"(["b2","b3","c1","c3"])", R"(["d1"])"}},
      {"SELECT VALUE c.id FROM c ORDER BY c.n DESC", 4,
       {R"(["b1","b3","c1","a2"])", R"(["a1","d1","b2","a3"])", R"(["c3"])"}},
      {"SELECT VALUE c.id FROM c ORDER BY c._ts DESC", 4,
       {R"(["d1","c3","c1","b3"])", R"(["b2","b1","a3","a2"])", R"(["a1"])"}},
      {"SELECT VALUE c.id FROM c ORDER BY c._ts OFFSET 1 LIMIT 5", 2, {R"(["a2","a3"])", R"(["b1","b2"])", R"(["b3"])"}},
      // Strings order by UTF-8 bytes: "Apple pie" < "Banana" < "apple".
      {"SELECT TOP 5 VALUE c.id FROM c ORDER BY c.s", 3, {R"(["b2","d1","c3"])", R"(["a2","a1"])"}},
      {"SELECT VALUE c.id FROM c WHERE c.pk = 'p1'", 2, {R"(["a1","a2"])", R"(["a3"])"}},
      // A last page that is exactly full ends the query: no continuation, no empty page after it.
      {"SELECT VALUE c.id FROM c WHERE c.pk = 'p1'", 3, {R"(["a1","a2","a3"])"}},
      {"SELECT VALUE c.id FROM c ORDER BY c._ts DESC", 3,
       {R"(["d1","c3","c1"])", R"(["b3","b2","b1"])", R"(["a3","a2","a1"])"}},
      {"SELECT VALUE c.id FROM c WHERE c.n > 3", 2, {R"(["b3","c1"])"}},
  };
  for (const Case& c : cases) {
    std::string continuation;
    std::vector<std::string> got;
    for (int i = 0; i < 10; ++i) {
      OpResult result = query(c.sql, kNow, "", std::nullopt, c.page, continuation);
      ASSERT_EQ(result.http_status(), 200) << c.sql << ": " << result.message;
      got.push_back(result.body);
      continuation = result.continuation;
      if (continuation.empty()) break;
    }
    EXPECT_EQ(got, c.pages) << c.sql;
  }
}

TEST_F(QueryGoldenTest, ErrorsSayWhereAndWhat) {
  struct Case {
    std::string sql;
    std::string parameters;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {"SELECT FROM c", "", "line 1, column 8 (offset 7): expected an expression, found keyword FROM"},
      {"SELECT c.id FROM c WHERE", "", "column 25 (offset 24): expected an expression, found the end of the query"},
      {"SELECT c.id\nFROM c WHERE c.a = 'x", "", "line 2, column 20 (offset 31): unterminated string"},
      {"SELECT c.id FROM c WHERE c.a = 1 ORDER c.a", "", "expected BY, found identifier 'c'"},
      {"SELECT x.id FROM c", "", "identifier 'x' could not be resolved"},
      {"SELECT VALUE FOO(c.a) FROM c", "", "unknown function 'FOO'"},
      {"SELECT VALUE STARTSWITH(c.a) FROM c", "", "STARTSWITH takes 2 or 3 arguments, got 1"},
      {"SELECT c.id FROM c WHERE c.a = @missing", "", "parameter @missing at offset 31 has no value"},
      {"SELECT TOP @n c.id FROM c", R"({"@n":-1})", "TOP parameter @n must be a non-negative integer"},
      {"SELECT c.id FROM c", R"({"n":1})", "must start with '@'"},
      {"SELECT c.city, c.id, COUNT(1) AS n FROM c GROUP BY c.city", "", "is neither in GROUP BY nor inside an aggregate"},
      {"SELECT c.id, COUNT(1) AS n FROM c", "", "is neither in GROUP BY nor inside an aggregate"},
      {"SELECT VALUE COUNT(1) FROM c ORDER BY c.id", "", "ORDER BY cannot be combined with aggregates"},
      {"SELECT VALUE c.id FROM c WHERE COUNT(1) > 1", "", "aggregate COUNT is only allowed in the SELECT list"},
      {"SELECT VALUE c.id FROM c ORDER BY LOWER(c.id)", "", "ORDER BY takes property paths"},
      {"SELECT c.id, c.id FROM c", "", "duplicate property name 'id'"},
      {"SELECT TOP 1 c.id FROM c OFFSET 0 LIMIT 1", "", "TOP cannot be combined with OFFSET LIMIT"},
      {"SELECT c.id FROM c LIMIT 1", "", "LIMIT needs OFFSET first"},
      {"SELECT c.id FROM c JOIN t IN c.tags", "", "JOIN is not supported"},
      {"SELECT c.id FROM c WHERE c.a = #", "", "unexpected character '#'"},
      {std::string("SELECT ") + std::string(100, '(') + "1" + std::string(100, ')') + " FROM c", "",
       "nests deeper than 64 levels"},
      {"SELECT VALUE 1" + [] {
         std::string s;
         for (int i = 0; i < 300; ++i) s += "+1";
         return s;
       }() + " FROM c", "", "deeper than 256 levels"},
      {"SELECT VALUE '" + std::string(300 * 1024, 'x') + "' FROM c", "", "the limit is 262144"},
  };
  for (const Case& c : cases) {
    OpResult result = query(c.sql, kNow, c.parameters);
    EXPECT_EQ(result.http_status(), 400) << c.sql.substr(0, 200);
    EXPECT_NE(result.message.find(c.message_part), std::string::npos)
        << c.sql.substr(0, 200) << "\n  message: " << result.message << "\n  wanted: " << c.message_part;
  }
  EXPECT_EQ(query("SELECT * FROM c", kNow, "", std::nullopt, 0).http_status(), 400);
  EXPECT_EQ(query("SELECT * FROM c", kNow, "", std::nullopt, 1001).http_status(), 400);
  EXPECT_EQ(query("SELECT * FROM c", kNow, "", std::nullopt, 10, "zz").message, "continuation token is malformed");
  OpResult first = query("SELECT VALUE c.id FROM c", kNow, "", std::nullopt, 2);
  ASSERT_FALSE(first.continuation.empty());
  EXPECT_NE(query("SELECT VALUE c.n FROM c", kNow, "", std::nullopt, 2, first.continuation).message.find(
                "belongs to a different query"),
            std::string::npos);
  EXPECT_NE(query("SELECT VALUE COUNT(1) FROM c", kNow, "", std::nullopt, 2, first.continuation).message.find(
                "take no continuation"),
            std::string::npos);
  QueryRequest missing;
  missing.database = "db";
  missing.container = "nope";
  missing.sql = "SELECT * FROM c";
  EXPECT_EQ(execute_query(store_->reader(), missing, kNow).http_status(), 404);
}

TEST_F(QueryGoldenTest, WorkLimitsBoundEveryRequest) {
  EngineLimits limits;
  limits.max_items_examined_per_page = 3;
  // Streaming: a page ends early with a continuation, and the pages together are still the whole result.
  std::string continuation, all;
  int pages = 0;
  do {
    OpResult result = query("SELECT VALUE c.id FROM c WHERE c.n > 1", kNow, "", std::nullopt, 100, continuation, limits);
    ASSERT_EQ(result.http_status(), 200) << result.message;
    all += result.body;
    continuation = result.continuation;
    ++pages;
  } while (!continuation.empty() && pages < 20);
  EXPECT_EQ(all, R"(["a2"]["b3"]["c1"])");
  EXPECT_EQ(pages, 3);
  // Full scans (aggregates, sorts) are rejected past the per-request bound.
  limits.max_items_examined_per_request = 5;
  OpResult rejected = query("SELECT VALUE COUNT(1) FROM c", kNow, "", std::nullopt, 100, "", limits);
  EXPECT_EQ(rejected.http_status(), 400);
  EXPECT_NE(rejected.message.find("more than 5 items"), std::string::npos) << rejected.message;
  EXPECT_EQ(query("SELECT VALUE c.id FROM c ORDER BY c.n", kNow, "", std::nullopt, 100, "", limits).http_status(), 400);
  limits.max_items_examined_per_request = 100;
  limits.max_sorted_rows = 10;
  OpResult window = query("SELECT VALUE c.id FROM c ORDER BY c.n OFFSET 8 LIMIT 5", kNow, "", std::nullopt, 100, "", limits);
  EXPECT_EQ(window.http_status(), 400);
  EXPECT_NE(window.message.find("page with continuation tokens"), std::string::npos) << window.message;
  EXPECT_EQ(query("SELECT VALUE c.id FROM c ORDER BY c.n OFFSET 5 LIMIT 5", kNow, "", std::nullopt, 100, "", limits).http_status(),
            200);
  limits.max_groups = 1;
  EXPECT_EQ(query("SELECT VALUE COUNT(1) FROM c GROUP BY c.city", kNow, "", std::nullopt, 100, "", limits).http_status(), 400);
}

class QueryIndexingNoneTest : public QueryFixture {};

TEST_F(QueryIndexingNoneTest, ScansNeedEnableScan) {
  ASSERT_EQ(apply(storage::testing::database_command(storage::CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  storage::Command container = storage::testing::create_container_command("db", "c", "/pk");
  container.indexing = ttl::IndexingMode::kNone;
  ASSERT_EQ(apply(container, kT0).http_status(), 201);
  create(R"({"id":"a","pk":"p"})", kT0 + 1);
  OpResult scan = query("SELECT * FROM c WHERE c.pk = 'p'", kT0 + kSecond);
  EXPECT_EQ(scan.http_status(), 400);
  EXPECT_NE(scan.message.find("--enable-scan"), std::string::npos);
  // A point read needs no scan.
  EXPECT_EQ(query("SELECT VALUE c.id FROM c WHERE c.pk = 'p' AND c.id = 'a'", kT0 + kSecond).body, R"(["a"])");
  QueryRequest request;
  request.database = "db";
  request.container = "c";
  request.sql = "SELECT VALUE c.id FROM c";
  request.enable_scan = true;
  EXPECT_EQ(execute_query(store_->reader(), request, kT0 + kSecond).body, R"(["a"])");
}

}  // namespace
}  // namespace mayfly::query::testing
