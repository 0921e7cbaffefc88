// Expired items never appear in a query: not in results, COUNT, SUM, ORDER BY, GROUP BY, TOP, OFFSET/LIMIT, nor in
// any continuation page — including items that expire between pages, while the replicated time moves on and the
// garbage collector physically deletes them under the paging client's feet.
//
// The data: 36 items in 3 partitions, written 0.25 s apart from +1 s to +9.75 s; two thirds carry their own ttl
// (6..14 s, so they expire between +7 s and +23 s, in no particular order), one third never expire. A model computes
// what is alive at any time (docs/ttl.md §3: expired iff T >= _ts + ttl, in whole seconds). Queries run at or after the
// last write (a read is never evaluated at a time older than the state it reads).
#include <algorithm>
#include <map>
#include <set>

#include "tests/unit/query/query_fixture.h"

namespace mayfly::query::testing {
namespace {

struct ModelItem {
  std::string id;
  std::string pk;
  int64_t n = 0;
  int64_t write_ts = 0;
  std::optional<int64_t> ttl;
  bool alive_at(int64_t now) const {
    return !ttl || now < (write_ts / kSecond + *ttl) * kSecond;
  }
};

class QueryExpiryTest : public QueryFixture {
 protected:
  void SetUp() override {
    QueryFixture::SetUp();
    make_container("-1");
    for (int i = 0; i < 36; ++i) {
      ModelItem item;
      item.id = "i" + std::string(i < 10 ? "0" : "") + std::to_string(i);
      item.pk = "p" + std::to_string(i % 3);
      item.n = i;
      item.write_ts = kT0 + kSecond + i * (kSecond / 4);
      if (i % 3 != 2) item.ttl = 6 + (i * 7) % 9;  // expiries spread over +6 s .. +14 s, in no particular order
      std::string json = "{\"id\":\"" + item.id + "\",\"pk\":\"" + item.pk + "\",\"n\":" + std::to_string(item.n);
      if (item.ttl) json += ",\"ttl\":" + std::to_string(*item.ttl);
      create(json + "}", item.write_ts);
      model_.push_back(item);
    }
  }

  std::vector<const ModelItem*> alive(int64_t now) const {
    std::vector<const ModelItem*> out;
    for (const ModelItem& item : model_) {
      if (item.alive_at(now)) out.push_back(&item);
    }
    return out;
  }
  const ModelItem& item(const std::string& id) const {
    return *std::find_if(model_.begin(), model_.end(), [&](const ModelItem& m) { return m.id == id; });
  }

  struct Paged {
    std::vector<std::string> ids;  // in the order returned
    int moved_on = 0;              // items alive when paging started that expired before their page was served
  };

  // Runs every page of `sql`, page k at time start + k * step. Between pages the applied time moves (a time entry)
  // and the collector deletes what has expired, every other page. Checks each page against the model.
  Paged page_through(const std::string& sql, size_t page_size, int64_t start, int64_t step,
                     bool returns_every_lasting_item = true) {
    Paged paged;
    std::string continuation;
    const std::vector<const ModelItem*> alive_at_start = alive(start);
    std::set<std::string> returned;
    int64_t now = start;
    for (int page = 0; page < 100; ++page) {
      if (now > store_->applied().ts_micros) advance_to(now);
      if (page % 2 == 1) {
        Result<storage::CollectResult> collected = store_->expiry().collect_expired("db", "c", now, 1000);
        EXPECT_TRUE(collected.is_ok());
      }
      OpResult result = query(sql, now, "", std::nullopt, page_size, continuation);
      EXPECT_EQ(result.http_status(), 200) << sql << ": " << result.message;
      for (const boost::json::value& v : elements(result.body)) {
        const std::string id(v.as_string());
        EXPECT_TRUE(item(id).alive_at(now)) << sql << ": page " << page << " returned " << id
                                            << ", expired at that page's time";
        EXPECT_TRUE(returned.insert(id).second) << sql << ": " << id << " returned twice";
        paged.ids.push_back(id);
      }
      continuation = result.continuation;
      if (continuation.empty()) break;
      now += step;
    }
    EXPECT_TRUE(continuation.empty()) << sql << ": paging did not finish";
    for (const ModelItem& m : model_) {
      if (!m.ttl && returns_every_lasting_item) {
        EXPECT_TRUE(returned.count(m.id) > 0) << sql << ": " << m.id << " never expires but was not returned";
      }
    }
    for (const ModelItem* m : alive_at_start) {
      if (returned.count(m->id) == 0) ++paged.moved_on;
    }
    return paged;
  }

  std::vector<ModelItem> model_;
};

TEST_F(QueryExpiryTest, ResultPagesInKeyOrder) {
  const Paged paged = page_through("SELECT VALUE c.id FROM c", 4, kT0 + 10 * kSecond, kSecond);
  EXPECT_TRUE(std::is_sorted(paged.ids.begin(), paged.ids.end(), [&](const std::string& a, const std::string& b) {
    return std::make_pair(item(a).pk, a) < std::make_pair(item(b).pk, b);
  }));
  EXPECT_GT(paged.moved_on, 0) << "the test must see items expire between pages";
}

TEST_F(QueryExpiryTest, OrderByPagesSortedAndIndexed) {
  // ORDER BY a property: scan + sort on every page, resuming after the last (value, key).
  Paged paged = page_through("SELECT VALUE c.id FROM c ORDER BY c.n DESC", 5, kT0 + 10 * kSecond, kSecond);
  EXPECT_TRUE(std::is_sorted(paged.ids.begin(), paged.ids.end(),
                             [&](const std::string& a, const std::string& b) { return item(a).n > item(b).n; }));
  EXPECT_GT(paged.moved_on, 0);
  // ORDER BY c._ts: the `_ts` index, both directions.
  for (const char* direction : {"ASC", "DESC"}) {
    paged = page_through(std::string("SELECT VALUE c.id FROM c ORDER BY c._ts ") + direction, 3, kT0 + 10 * kSecond,
                         kSecond);
    std::vector<std::string> sorted = paged.ids;
    std::sort(sorted.begin(), sorted.end());
    if (std::string(direction) == "DESC") std::reverse(sorted.begin(), sorted.end());
    EXPECT_EQ(paged.ids, sorted) << direction;  // ids were written in order
    EXPECT_GT(paged.moved_on, 0) << direction;
  }
}

TEST_F(QueryExpiryTest, OffsetLimitAndTopPages) {
  const int64_t start = kT0 + 10 * kSecond;
  // At a fixed time, OFFSET/LIMIT and TOP count only visible items.
  for (int64_t t = start; t <= kT0 + 24 * kSecond; t += kSecond) {
    std::vector<std::string> visible;
    for (const ModelItem* m : alive(t)) visible.push_back(m->id);
    std::sort(visible.begin(), visible.end(), [&](const std::string& a, const std::string& b) {
      return std::make_pair(item(a).pk, a) < std::make_pair(item(b).pk, b);
    });
    std::vector<std::string> expected(visible.begin() + std::min<size_t>(3, visible.size()),
                                      visible.begin() + std::min<size_t>(8, visible.size()));
    std::vector<std::string> got;
    for (const boost::json::value& v : elements(query("SELECT VALUE c.id FROM c OFFSET 3 LIMIT 5", t).body)) {
      got.emplace_back(v.as_string());
    }
    EXPECT_EQ(got, expected) << "at +" << (t - kT0) / kSecond << " s";
    std::vector<std::string> by_ts;
    for (const ModelItem* m : alive(t)) by_ts.push_back(m->id);  // model order is write order
    by_ts.resize(std::min<size_t>(by_ts.size(), 4));
    got.clear();
    for (const boost::json::value& v : elements(query("SELECT TOP 4 VALUE c.id FROM c ORDER BY c._ts", t).body)) {
      got.emplace_back(v.as_string());
    }
    EXPECT_EQ(got, by_ts) << "at +" << (t - kT0) / kSecond << " s";
  }
  // Paged while items expire: OFFSET is spent on the first page, LIMIT across pages, nothing expired comes back.
  const Paged paged = page_through("SELECT VALUE c.id FROM c ORDER BY c._ts OFFSET 2 LIMIT 20", 3, start, kSecond,
                                     false);
  EXPECT_LE(paged.ids.size(), 20u);
  const Paged top = page_through("SELECT TOP 30 VALUE c.id FROM c WHERE c.n >= 0", 4, start, kSecond);
  EXPECT_LE(top.ids.size(), 30u);
}

TEST_F(QueryExpiryTest, AggregatesAndGroupsCountOnlyTheLiving) {
  for (int64_t t = kT0 + 10 * kSecond; t <= kT0 + 24 * kSecond; t += kSecond / 2) {
    const std::vector<const ModelItem*> living = alive(t);
    int64_t sum = 0;
    std::map<std::string, int64_t> per_partition;
    std::optional<int64_t> max_n;
    for (const ModelItem* m : living) {
      sum += m->n;
      ++per_partition[m->pk];
      max_n = std::max(max_n.value_or(INT64_MIN), m->n);
    }
    const std::string at = "at +" + std::to_string(static_cast<double>(t - kT0) / kSecond) + " s";
    EXPECT_EQ(body("SELECT VALUE COUNT(1) FROM c", t), "[" + std::to_string(living.size()) + "]") << at;
    EXPECT_EQ(body("SELECT VALUE SUM(c.n) FROM c", t), "[" + std::to_string(sum) + "]") << at;
    EXPECT_EQ(body("SELECT VALUE MAX(c.n) FROM c", t), max_n ? "[" + std::to_string(*max_n) + "]" : "[]") << at;
    std::string groups = "[";
    for (const auto& [pk, count] : per_partition) {
      if (groups.size() > 1) groups += ",";
      groups += "{\"pk\":\"" + pk + "\",\"n\":" + std::to_string(count) + "}";
    }
    EXPECT_EQ(body("SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk", t), groups + "]") << at;
    // One partition, by the option and by the filter.
    OpResult one = query("SELECT VALUE COUNT(1) FROM c", t, "", "\"p0\"");
    EXPECT_EQ(one.body, "[" + std::to_string(per_partition["p0"]) + "]") << at;
    EXPECT_EQ(body("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'p1'", t),
              "[" + std::to_string(per_partition["p1"]) + "]") << at;
  }
}

TEST_F(QueryExpiryTest, ExpiredPointReadAndExpiredSkippedCounter) {
  // i27 (ttl 6 + 189 % 9 = 6, written at +7.75 s, so _ts = +7 s) expires at +13 s exactly.
  ASSERT_EQ(*item("i27").ttl, 6);
  EXPECT_EQ(body("SELECT VALUE c.id FROM c WHERE c.pk = 'p0' AND c.id = 'i27'", kT0 + 13 * kSecond - 1), R"(["i27"])");
  OpResult gone = query("SELECT VALUE c.id FROM c WHERE c.pk = 'p0' AND c.id = 'i27'", kT0 + 13 * kSecond);
  EXPECT_EQ(gone.body, "[]");
  EXPECT_EQ(gone.expired_skipped, 1);
  OpResult all = query("SELECT VALUE c.id FROM c", kT0 + 30 * kSecond);
  EXPECT_EQ(elements(all.body).size(), 12u);
  EXPECT_EQ(all.expired_skipped, 24);
}

}  // namespace
}  // namespace mayfly::query::testing
