// Randomized: random items (numbers, strings, null and missing values, random ttls) in a real state machine, random
// queries from a small generator, each checked against a naive evaluator written here from the rules (Cosmos DB's
// undefined/null semantics, the ORDER BY type order, the visible set at the query time) — not from query/.
// Results are compared page by page concatenated, at random page sizes and with and without --pk.
//
// Seeded: MAYFLY_QUERY_SEED (default printed), MAYFLY_QUERY_ROUNDS (data sets) and MAYFLY_QUERY_QUERIES (per set).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "common/prng.h"
#include "tests/env.h"
#include "tests/unit/query/query_fixture.h"

namespace mayfly::query::testing {
namespace {

using testing_env::env_or;

// A property value as the naive evaluator sees it.
struct V {
  enum Kind { kUndefined, kNull, kNumber, kString } kind = kUndefined;
  double number = 0;
  std::string text;
  static V num(double x) { return V{kNumber, x, ""}; }
  static V str(std::string s) { return V{kString, 0, std::move(s)}; }
  static V null() { return V{kNull, 0, ""}; }
};

// Total order: undefined < null < numbers < strings.
int compare(const V& a, const V& b) {
  if (a.kind != b.kind) return a.kind < b.kind ? -1 : 1;
  if (a.kind == V::kNumber) return a.number < b.number ? -1 : a.number > b.number ? 1 : 0;
  if (a.kind == V::kString) return a.text < b.text ? -1 : a.text > b.text ? 1 : 0;
  return 0;
}

std::string json_of(const V& v) {
  switch (v.kind) {
    case V::kNull: return "null";
    case V::kNumber: {
      if (std::floor(v.number) == v.number) return std::to_string(static_cast<int64_t>(v.number));
      std::string out;
      json::write_json(boost::json::value(v.number), out);
      return out;
    }
    case V::kString: {
      std::string out;
      json::write_json_string(v.text, out);
      return out;
    }
    case V::kUndefined: break;
  }
  return "";
}

struct Item {
  std::string id;
  std::string pk;
  V n, s;
  int64_t write_ts = 0;
  std::optional<int64_t> ttl;
  bool alive_at(int64_t now) const { return !ttl || now < (write_ts / kSecond + *ttl) * kSecond; }
  const V& field(char name) const { return name == 'n' ? n : s; }
};

using Truth = std::optional<bool>;  // nullopt: undefined
struct Predicate {
  std::string sql;
  std::function<Truth(const Item&)> eval;
};

Truth compare_op(const V& a, const V& b, const std::string& op) {
  if (a.kind == V::kUndefined || b.kind == V::kUndefined || a.kind != b.kind) return std::nullopt;
  const int c = compare(a, b);
  if (op == "=") return c == 0;
  if (op == "!=") return c != 0;
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

class Generator {
 public:
  explicit Generator(Prng& prng) : prng_(prng) {}

  V random_n() {
    switch (prng_.uniform(6)) {
      case 0: return V{};
      case 1: return V::null();
      case 2: return V::str(std::to_string(prng_.range(0, 9)));
      case 3: return V::num(static_cast<double>(prng_.range(-10, 10)) + 0.5);
      default: return V::num(static_cast<double>(prng_.range(-10, 10)));
    }
  }
  V random_s() {
    static const std::vector<std::string> words = {"apple", "apricot", "banana", "Berry", "cherry", "", "b", "a_b"};
    switch (prng_.uniform(5)) {
      case 0: return V{};
      case 1: return V::null();
      default: return V::str(words[prng_.uniform(words.size())]);
    }
  }
  V literal_for(char field) {
    if (field == 'n') {
      if (prng_.chance(1, 5)) return V::str(std::to_string(prng_.range(0, 9)));
      if (prng_.chance(1, 8)) return V::null();
      return V::num(static_cast<double>(prng_.range(-10, 10)) + (prng_.chance(1, 4) ? 0.5 : 0));
    }
    if (prng_.chance(1, 8)) return V::num(1);
    static const std::vector<std::string> words = {"apple", "b", "banana", "Berry", "c", ""};
    return V::str(words[prng_.uniform(words.size())]);
  }
  static std::string sql_of(const V& v) {
    if (v.kind == V::kString) return "'" + v.text + "'";  // the word list has no quotes or backslashes
    return json_of(v);
  }

  Predicate predicate(int depth) {
    const uint64_t choice = prng_.uniform(depth > 0 ? 11 : 8);
    const char field = prng_.chance(1, 2) ? 'n' : 's';
    const std::string path = std::string("c.") + field;
    switch (choice) {
      case 0:
      case 1: {
        static const std::vector<std::string> ops = {"=", "!=", "<", "<=", ">", ">="};
        const std::string op = ops[prng_.uniform(ops.size())];
        const V literal = literal_for(field);
        return {path + " " + (op == "!=" && prng_.chance(1, 2) ? "<>" : op) + " " + sql_of(literal),
                [=](const Item& item) { return compare_op(item.field(field), literal, op); }};
      }
      case 2: {
        static const std::vector<std::string> functions = {"IS_DEFINED", "IS_NULL", "IS_NUMBER", "IS_STRING"};
        const size_t f = prng_.uniform(functions.size());
        return {functions[f] + "(" + path + ")", [=](const Item& item) -> Truth {
                  const V& v = item.field(field);
                  if (f == 0) return v.kind != V::kUndefined;
                  if (f == 1) return v.kind == V::kNull;
                  if (f == 2) return v.kind == V::kNumber;
                  return v.kind == V::kString;
                }};
      }
      case 3: {
        std::vector<V> list = {literal_for(field), literal_for(field), literal_for('n')};
        std::string sql = path + (prng_.chance(1, 3) ? " NOT IN (" : " IN (");
        const bool negated = sql.find("NOT") != std::string::npos;
        for (size_t i = 0; i < list.size(); ++i) sql += (i ? ", " : "") + sql_of(list[i]);
        return {sql + ")", [=](const Item& item) -> Truth {
                  const V& v = item.field(field);
                  if (v.kind == V::kUndefined) return std::nullopt;
                  bool found = false;
                  for (const V& candidate : list) found = found || (candidate.kind == v.kind && compare(candidate, v) == 0);
                  return found != negated;
                }};
      }
      case 4: {
        V low = literal_for(field), high = literal_for(field);
        return {path + " BETWEEN " + sql_of(low) + " AND " + sql_of(high), [=](const Item& item) -> Truth {
                  const V& v = item.field(field);
                  if (v.kind == V::kUndefined || v.kind != low.kind || v.kind != high.kind) return std::nullopt;
                  return compare(v, low) >= 0 && compare(v, high) <= 0;
                }};
      }
      case 5: {
        static const std::vector<std::string> prefixes = {"a", "ap", "b", "B", ""};
        const std::string prefix = prefixes[prng_.uniform(prefixes.size())];
        return {"STARTSWITH(c.s, '" + prefix + "')", [=](const Item& item) -> Truth {
                  if (item.s.kind != V::kString) return std::nullopt;
                  return item.s.text.compare(0, prefix.size(), prefix) == 0;
                }};
      }
      case 6: {
        const std::string pk = "p" + std::to_string(prng_.uniform(3));
        return {"c.pk = '" + pk + "'", [=](const Item& item) -> Truth { return item.pk == pk; }};
      }
      case 7: {
        const std::string id = "i" + std::to_string(prng_.uniform(40));
        return {"c.id = '" + id + "'", [=](const Item& item) -> Truth { return item.id == id; }};
      }
      case 8: {
        Predicate inner = predicate(depth - 1);
        return {"NOT (" + inner.sql + ")", [=](const Item& item) -> Truth {
                  const Truth t = inner.eval(item);
                  if (!t) return std::nullopt;
                  return !*t;
                }};
      }
      default: {
        Predicate left = predicate(depth - 1), right = predicate(depth - 1);
        const bool is_and = choice == 9;
        return {"(" + left.sql + (is_and ? " AND " : " OR ") + right.sql + ")", [=](const Item& item) -> Truth {
                  const Truth a = left.eval(item), b = right.eval(item);
                  if (is_and) {
                    if (a == false || b == false) return false;
                    if (a == true && b == true) return true;
                    return std::nullopt;
                  }
                  if (a == true || b == true) return true;
                  if (a == false && b == false) return false;
                  return std::nullopt;
                }};
      }
    }
  }

 private:
  Prng& prng_;
};

struct Expected {
  std::string body;  // the whole result, as one JSON array
  bool paged = true;  // aggregates come back in one page
};

// The key position order of the store: canonical partition key text ("\"p0\"" ...), then id (bytes).
bool key_less(const Item* a, const Item* b) { return std::make_pair(a->pk, a->id) < std::make_pair(b->pk, b->id); }

class QueryRandomTest : public QueryFixture {};

TEST_F(QueryRandomTest, MatchesANaiveEvaluatorOverTheVisibleSet) {
  const uint64_t seed = env_or("MAYFLY_QUERY_SEED", 20261121);
  const uint64_t rounds = env_or("MAYFLY_QUERY_ROUNDS", 4);
  const uint64_t queries = env_or("MAYFLY_QUERY_QUERIES", 150);
  std::printf("query random test: seed %llu (replay: MAYFLY_QUERY_SEED=%llu MAYFLY_QUERY_ROUNDS=%llu "
              "MAYFLY_QUERY_QUERIES=%llu %s)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(queries),
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Prng prng(seed);
  Generator generator(prng);
  int64_t time = kT0;
  int compared = 0, nonempty = 0;
  for (uint64_t round = 0; round < rounds; ++round) {
    const std::string container = "c";
    if (round == 0) {
      make_container("-1");
    } else {
      ASSERT_EQ(apply(storage::testing::target_command(storage::CommandType::kDeleteContainer, "db", "c", "", ""), time).http_status(), 204);
      ASSERT_EQ(apply(storage::testing::create_container_command("db", "c", "/pk", std::string("-1")), time).http_status(), 201);
    }
    std::vector<Item> items;
    const int count = static_cast<int>(prng.range(10, 40));
    for (int i = 0; i < count; ++i) {
      Item item;
      item.id = "i" + std::to_string(i);
      item.pk = "p" + std::to_string(prng.uniform(3));
      item.n = generator.random_n();
      item.s = generator.random_s();
      if (prng.chance(1, 2)) item.ttl = prng.range(1, 8);
      time += prng.range(1, kSecond);
      item.write_ts = time;
      std::string json = "{\"id\":\"" + item.id + "\",\"pk\":\"" + item.pk + "\"";
      if (item.n.kind != V::kUndefined) json += ",\"n\":" + json_of(item.n);
      if (item.s.kind != V::kUndefined) json += ",\"s\":" + json_of(item.s);
      if (item.ttl) json += ",\"ttl\":" + std::to_string(*item.ttl);
      create(json + "}", item.write_ts);
      items.push_back(item);
    }
    for (uint64_t q = 0; q < queries; ++q) {
      const int64_t now = time + prng.range(0, 6 * kSecond);
      std::vector<const Item*> visible;
      for (const Item& item : items) {
        if (item.alive_at(now)) visible.push_back(&item);
      }
      std::sort(visible.begin(), visible.end(), key_less);
      std::optional<std::string> pk_option;
      if (prng.chance(1, 4)) pk_option = "p" + std::to_string(prng.uniform(3));
      std::optional<Predicate> where;
      if (prng.chance(4, 5)) where = generator.predicate(2);
      std::vector<const Item*> matching;
      for (const Item* item : visible) {
        if (pk_option && item->pk != *pk_option) continue;
        if (where && where->eval(*item) != true) continue;
        matching.push_back(item);
      }
      std::string sql;
      Expected expected;
      const uint64_t shape = prng.uniform(6);
      const std::string where_sql = where ? " WHERE " + where->sql : "";
      if (shape == 0) {  // aggregates
        expected.paged = false;
        const uint64_t aggregate = prng.uniform(4);
        if (aggregate == 0) {
          sql = "SELECT VALUE COUNT(1) FROM c" + where_sql;
          expected.body = "[" + std::to_string(matching.size()) + "]";
        } else if (aggregate == 1) {
          sql = "SELECT VALUE COUNT(c.n) FROM c" + where_sql;
          expected.body = "[" + std::to_string(std::count_if(matching.begin(), matching.end(), [](const Item* i) {
                            return i->n.kind != V::kUndefined;
                          })) + "]";
        } else if (aggregate == 2) {
          sql = "SELECT VALUE SUM(c.n) FROM c" + where_sql;
          double sum = 0;
          bool numbers = true;
          for (const Item* i : matching) {
            if (i->n.kind == V::kNumber) sum += i->n.number;
            if (i->n.kind == V::kNull || i->n.kind == V::kString) numbers = false;
          }
          expected.body = numbers ? "[" + json_of(V::num(sum)) + "]" : "[]";
        } else {
          sql = "SELECT c.pk, COUNT(1) AS n FROM c" + where_sql + " GROUP BY c.pk";
          std::map<std::string, int> groups;
          for (const Item* i : matching) ++groups[i->pk];
          expected.body = "[";
          for (const auto& [pk, n] : groups) {
            if (expected.body.size() > 1) expected.body += ",";
            expected.body += "{\"pk\":\"" + pk + "\",\"n\":" + std::to_string(n) + "}";
          }
          expected.body += "]";
        }
      } else {
        // Rows: an ORDER BY (or key order), then OFFSET/LIMIT or TOP, then the projection.
        std::vector<const Item*> rows = matching;
        std::string order_sql;
        const uint64_t order = prng.uniform(5);
        const bool descending = prng.chance(1, 2);
        if (order > 0) {
          const char* keys[] = {"", "c.n", "c.s", "c._ts", "c.id"};
          order_sql = std::string(" ORDER BY ") + keys[order] + (descending ? " DESC" : (prng.chance(1, 2) ? " ASC" : ""));
          std::stable_sort(rows.begin(), rows.end(), [&](const Item* a, const Item* b) {
            int c = 0;
            if (order == 1) c = compare(a->n, b->n);
            if (order == 2) c = compare(a->s, b->s);
            if (order == 3) c = a->write_ts < b->write_ts ? -1 : a->write_ts > b->write_ts ? 1 : 0;
            if (order == 4) c = a->id < b->id ? -1 : a->id > b->id ? 1 : 0;
            if (descending) c = -c;
            if (c != 0) return c < 0;
            return key_less(a, b);
          });
        }
        std::string head = "SELECT ", tail;
        const uint64_t window = prng.uniform(3);
        if (window == 1) {
          const size_t top = prng.uniform(8);
          head += "TOP " + std::to_string(top) + " ";
          rows.resize(std::min(rows.size(), top));
        } else if (window == 2) {
          const size_t offset = prng.uniform(6), limit = prng.uniform(10);
          tail = " OFFSET " + std::to_string(offset) + " LIMIT " + std::to_string(limit);
          rows.erase(rows.begin(), rows.begin() + static_cast<long>(std::min(offset, rows.size())));
          rows.resize(std::min(rows.size(), limit));
        }
        const uint64_t projection = prng.uniform(3);
        expected.body = "[";
        auto add = [&](const std::string& row) {
          if (expected.body.size() > 1) expected.body += ",";
          expected.body += row;
        };
        if (projection == 0) {
          head += "VALUE c.id";
          for (const Item* i : rows) add("\"" + i->id + "\"");
        } else if (projection == 1) {
          head += "c.id, c.n";
          for (const Item* i : rows) {
            add("{\"id\":\"" + i->id + "\"" + (i->n.kind != V::kUndefined ? ",\"n\":" + json_of(i->n) : "") + "}");
          }
        } else {
          head += "VALUE c.s";  // undefined values yield no row (after TOP / OFFSET / LIMIT)
          for (const Item* i : rows) {
            if (i->s.kind != V::kUndefined) add(json_of(i->s));
          }
        }
        expected.body += "]";
        sql = head + " FROM c" + where_sql + order_sql + tail;
      }
      // Run it: all pages at the same time, concatenated.
      const size_t page_size = expected.paged ? static_cast<size_t>(prng.range(1, 7)) : 100;
      std::string continuation, got = "[";
      for (int page = 0; page < 100; ++page) {
        OpResult result = query(sql, now, "", pk_option ? std::optional<std::string>("\"" + *pk_option + "\"") : std::nullopt,
                                page_size, continuation);
        ASSERT_EQ(result.http_status(), 200) << "seed " << seed << " round " << round << " query " << q << ": " << sql << ": "
                                      << result.message;
        const std::string& page_body = result.body;
        if (page_body.size() > 2) {
          if (got.size() > 1) got += ",";
          got += page_body.substr(1, page_body.size() - 2);
        }
        continuation = result.continuation;
        if (continuation.empty()) break;
      }
      got += "]";
      EXPECT_EQ(got, expected.body) << "seed " << seed << " round " << round << " query " << q << " at +"
                                    << (now - kT0) << " µs, page size " << page_size
                                    << (pk_option ? ", --pk " + *pk_option : "") << ":\n  " << sql;
      ++compared;
      if (expected.body.size() > 2) ++nonempty;
      if (::testing::Test::HasFailure()) return;  // one replayable failure is enough
    }
  }
  std::printf("compared %d queries (%d with non-empty results)\n", compared, nonempty);
  EXPECT_GT(nonempty, compared / 3) << "the generator should mostly produce queries that return something";
}

}  // namespace
}  // namespace mayfly::query::testing
