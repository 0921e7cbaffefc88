// Queries end to end against a real 3-node cluster: the `mayfly query` CLI (its JSON output, the top-level
// continuation, parameters, errors and exit codes) and the client library's page iterator, on every node and at
// every consistency level; and items that expire while a client is paging never come back, on any node.
#include <gtest/gtest.h>

#include <set>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Consistency;
using client::Op;
using client::Request;

Request query_req(const std::string& sql, std::optional<Consistency> consistency = std::nullopt,
                  uint32_t max_items = 0) {
  Request r = container_req(Op::kQuery, "d", "c");
  test::operation_of<api::Query>(r).sql = sql;
  r.options.consistency = consistency;
  r.options.max_items = max_items;
  return r;
}

std::vector<std::string> ids_of(const boost::json::value& body) {
  std::vector<std::string> out;
  if (!body.is_array()) return out;
  for (const boost::json::value& v : body.get_array()) {
    if (v.is_string()) out.emplace_back(v.get_string());
  }
  return out;
}

TEST(IntegrationQuery, CliAndLibraryOnEveryNodeAndExpiryWhilePaging) {
  Cluster cluster({.name = "query"});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u) << "no leader elected";
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
  ASSERT_EQ(client.execute(create_container("d", "c", "/pk", "-1")).status, 201);
  // 12 lasting items and 8 that expire 3 s after their write, interleaved in key order and in _ts order. The 3 s
  // are scaled in a sanitized build (tests/env.h): the counts below on every node must all come before the first
  // deadline or after the last, and a slower build takes longer to get there.
  const int64_t short_ttl_s = testing_env::scaled(int64_t{3});
  std::set<std::string> lasting, short_lived;
  for (int i = 0; i < 20; ++i) {
    const std::string id = "i" + std::string(i < 10 ? "0" : "") + std::to_string(i);
    const bool expires = i % 5 == 1 || i % 5 == 3;
    const std::string ttl = expires ? ",\"ttl\":" + std::to_string(short_ttl_s) : "";
    const std::string json = "{\"id\":\"" + id + "\",\"pk\":\"p" + std::to_string(i % 2) + "\",\"n\":" +
                             std::to_string(i) + ttl + "}";
    ASSERT_EQ(client.execute(item_write(Op::kCreateItem, "d", "c", json)).status, 201);
    (expires ? short_lived : lasting).insert(id);
  }

  // The CLI on every node: the body is the array of results, the charge is the work.
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const CliResult count = cluster.cli({"--consistency", "strong", "query", "d", "c", "SELECT VALUE COUNT(1) FROM c"}, n);
    ASSERT_EQ(count.status(), 200) << count.describe();
    // Strong on any node: 20 unless the short-lived ones have already gone (3 s is long, but the machine is shared).
    const int64_t counted = count.body()->at(0).as_int64();
    EXPECT_TRUE(counted == 20 || counted == 12) << count.describe();
  }
  const CliResult paged = cluster.cli({"query", "d", "c", "SELECT VALUE c.id FROM c WHERE c.n >= @min",
                                       "--param", "@min=0", "--max-items", "5"});
  ASSERT_EQ(paged.status(), 200) << paged.describe();
  ASSERT_TRUE(paged.json.as_object().contains("continuation")) << paged.describe();
  const std::string token(paged.json.at("continuation").as_string());
  const CliResult second = cluster.cli({"query", "d", "c", "SELECT VALUE c.id FROM c WHERE c.n >= @min", "--param",
                                        "@min=0", "--max-items", "5", "--continuation", token});
  EXPECT_EQ(second.status(), 200) << second.describe();
  const CliResult partition = cluster.cli({"query", "d", "c", "SELECT VALUE c.n FROM c WHERE c.n < 4", "--pk", "p0"});
  EXPECT_EQ(partition.status(), 200) << partition.describe();
  EXPECT_EQ(boost::json::serialize(*partition.body()), "[0,2]") << partition.describe();

  // Errors: a syntax error is a 400 with where and what (exit 1); a malformed --param is a usage error (exit 2).
  const CliResult syntax = cluster.cli({"query", "d", "c", "SELECT VALUE c.id FROM c WHERE c.n >"});
  EXPECT_EQ(syntax.status(), 400) << syntax.describe();
  EXPECT_EQ(syntax.exit_code, 1);
  EXPECT_NE(syntax.message().find("line 1, column 37"), std::string::npos) << syntax.describe();
  EXPECT_EQ(cluster.cli({"query", "d", "c", "SELECT * FROM c", "--param", "min=1"}).exit_code, 2);
  EXPECT_EQ(cluster.cli({"query", "d", "c", "SELECT * FROM c", "--param", "@min=notjson"}).exit_code, 2);

  // The library's page iterator, on every node: pages of 3 in _ts order. Between pages the short-lived items
  // expire; whatever a page returns was alive when that page was served, nothing comes twice, nothing lasting is
  // missing, and once a strong COUNT has seen them gone, no later page or count on any node shows them.
  bool saw_them_gone = false;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    Request pinned = query_req("SELECT VALUE c.id FROM c ORDER BY c._ts", Consistency::kSession, 3);
    pinned.endpoint = n;
    client::PageIterator pages = client::query_pages(client, pinned);
    std::vector<std::string> seen;
    int page_number = 0;
    while (pages.has_more()) {
      const client::Response page = pages.next();
      ASSERT_EQ(page.status, 200) << page.message;
      EXPECT_GE(page.request_charge, 1.0);  // 1 RU per query, more for the items read
      for (const std::string& id : ids_of(parse_json(page.body))) {
        EXPECT_FALSE(saw_them_gone && short_lived.count(id) > 0) << id << " came back on node " << n;
        seen.push_back(id);
      }
      if (++page_number == 2 && !saw_them_gone) {
        // Wait (bounded) until a strong count no longer includes the short-lived items.
        saw_them_gone = wait_until(
            [&] {
              const client::Response count =
                  client.execute(query_req("SELECT VALUE COUNT(1) FROM c", Consistency::kStrong));
              return count.status == 200 && count.body == "[12]";
            },
            std::chrono::milliseconds(15000), std::chrono::milliseconds(50));
        ASSERT_TRUE(saw_them_gone) << "short-lived items never expired";
      }
    }
    EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size()) << "duplicates on node " << n;
    for (const std::string& id : lasting) {
      EXPECT_NE(std::find(seen.begin(), seen.end(), id), seen.end()) << id << " missing on node " << n;
    }
    std::vector<std::string> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, seen) << "ids were written in order, so _ts order is id order";
  }
  ASSERT_TRUE(saw_them_gone);
  // After that, on every node and at every level that has seen the strong read (session carries the token):
  // counts, sums and groups are over the 12 lasting items only.
  for (size_t n = 1; n <= cluster.size(); ++n) {
    for (Consistency level : {Consistency::kSession, Consistency::kStrong}) {
      for (const auto& [sql, expected] : std::vector<std::pair<std::string, std::string>>{
               {"SELECT VALUE COUNT(1) FROM c", "[12]"},
               {"SELECT VALUE SUM(c.n) FROM c", "[114]"},
               {"SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk", R"([{"pk":"p0","n":6},{"pk":"p1","n":6}])"},
               {"SELECT TOP 2 VALUE c.id FROM c ORDER BY c._ts DESC", R"(["i19","i17"])"},
           }) {
        Request r = query_req(sql, level);
        r.endpoint = n;
        const client::Response response = client.execute(r);
        EXPECT_EQ(response.status, 200) << response.message;
        EXPECT_EQ(response.body, expected) << sql << " on node " << n << " at " << client::consistency_name(level);
      }
    }
    // A strong query pays twice what the same query pays at session consistency on the same state.
    Request session = query_req("SELECT VALUE COUNT(1) FROM c", Consistency::kSession);
    Request strong = query_req("SELECT VALUE COUNT(1) FROM c", Consistency::kStrong);
    session.endpoint = strong.endpoint = n;
    const double session_charge = client.execute(session).request_charge;
    const double strong_charge = client.execute(strong).request_charge;
    EXPECT_GT(session_charge, 1.0);
    EXPECT_GE(strong_charge, 2 * session_charge - 0.5) << "node " << n;
  }
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.running(n)) << "node " << n << " died";
}

}  // namespace
}  // namespace mayfly::it
