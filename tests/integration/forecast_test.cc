// The TTL forecast (docs/ttl.md, "Forecast") on a 3-node cluster with --clock virtual: every node's
// forecast of a container (through the library, one request pinned to each node) says, minute by minute, exactly how
// many items then disappear on that node as replicated time is advanced a minute at a time; the forecast metrics
// carry the same figures; the CLI prints it as JSON and as tables, to a read-only key, for one node or all.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "client/forecast.h"
#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

namespace bj = boost::json;
using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

constexpr int64_t kSecond = 1'000'000;

// Live items of fdb/c on `node` at the session token (a cross-partition COUNT).
int64_t live_items(client::Client& reader, size_t node, const std::string& token) {
  Request count;
  count.operation = api::make_operation(Op::kQuery);
  count.database = "fdb";
  count.container = "c";
  test::operation_of<api::Query>(count).sql = "SELECT VALUE COUNT(1) FROM c";
  count.endpoint = node;
  count.options.consistency = Consistency::kSession;
  count.options.session_token = token;
  const Response answer = reader.execute(count);
  EXPECT_EQ(answer.status, 200) << answer.message;
  const bj::value body = parse_json(answer.body);
  if (!body.is_array() || body.as_array().size() != 1) return -1;
  return body.as_array()[0].to_number<int64_t>();
}

// The per-minute item counts of a forecast answer.
std::vector<int64_t> minute_items(const bj::object& forecast) {
  std::vector<int64_t> out;
  for (const bj::value& bucket : forecast.at("minutes").as_array()) {
    out.push_back(bucket.at("items").to_number<int64_t>());
  }
  return out;
}

TEST(Forecast, EveryNodeForecastsWhatThenExpiresMinuteByMinute) {
  Cluster cluster({.name = "forecast", .extra_flags = {"--forecast-interval-ms", "300"}, .metrics = true});
  for (size_t n = 1; n <= cluster.size(); ++n) cluster.set_node_flags(n, {"--clock", "virtual"});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  ASSERT_EQ(cluster.cli({"container", "create", "fdb", "c", "--pk", "/pk", "--default-ttl", "300"}).status(), 201);

  // Items written at one virtual instant T0 (time stands still): own ttls over the next 17 minutes, some exactly
  // whole minutes, inheriting ones (300 s), one in the second hour, and -1s.
  const uint64_t seed = test_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 prng(seed);
  client::Client writer(cluster.client_options());
  std::vector<std::string> ttls = {"60", "120", "61", "600", "3700", "", "", "-1"};
  for (int i = 0; i < 60; ++i) {
    switch (prng() % 4) {
      case 0: ttls.push_back(""); break;
      case 1: ttls.push_back("-1"); break;
      default: ttls.push_back(std::to_string(1 + prng() % 1000)); break;
    }
  }
  int64_t expiring_day = 0;  // items that expire within 24 h
  for (size_t i = 0; i < ttls.size(); ++i) {
    Request create;
    create.database = "fdb";
    create.container = "c";
    create.operation = api::CreateItem{.body = "{\"id\":\"i" + std::to_string(i) + "\",\"pk\":\"p" +
                                               std::to_string(i % 3) + "\"" +
                                               (ttls[i].empty() ? "" : ",\"ttl\":" + ttls[i]) + "}"};
    const Response created = writer.execute(create);
    ASSERT_EQ(created.status, 201) << created.message;
    if (ttls[i] != "-1") ++expiring_day;
  }
  const int64_t total = static_cast<int64_t>(ttls.size());

  // Every node's forecast, once it has applied every write.
  std::map<uint64_t, bj::object> forecasts;
  ASSERT_TRUE(wait_until(
      [&] {
        const client::ForecastAnswers answers = client::container_forecast(cluster.client_options(), "fdb", "c");
        if (!answers.error.empty() || answers.nodes.size() != cluster.size()) return false;
        forecasts.clear();
        for (const client::NodeForecast& node : answers.nodes) {
          if (node.response.status != 200) return false;
          const bj::value body = parse_json(node.response.body);
          if (body.at("expiring").at("day").at("items").to_number<int64_t>() != expiring_day) return false;
          forecasts[node.node] = body.as_object();
        }
        return true;
      },
      std::chrono::seconds(20)))
      << "the nodes' forecasts never counted all " << expiring_day << " expiring items";
  const bj::object& first = forecasts.begin()->second;
  const int64_t t0 = first.at("atMicros").as_int64();
  const std::vector<int64_t> minutes = minute_items(first);
  for (const auto& [node, forecast] : forecasts) {
    EXPECT_EQ(forecast.at("node").to_number<uint64_t>(), node);
    EXPECT_EQ(forecast.at("atMicros").as_int64(), t0) << "node " << node;  // the same replicated time everywhere
    EXPECT_EQ(minute_items(forecast), minutes) << "node " << node;
    EXPECT_EQ(forecast.at("backlog").at("items").to_number<int64_t>(), 0) << "node " << node;
    EXPECT_EQ(forecast.at("hours").as_array()[1].at("items").to_number<int64_t>(), 1) << "the 3700 s item";
    EXPECT_FALSE(forecast.at("truncated").as_bool());
    EXPECT_GT(forecast.at("capacity").at("itemsPerSecond").to_number<double>(), 0);
    EXPECT_EQ(forecast.at("defaultTtl").to_number<int64_t>(), 300);
  }

  // The forecast metrics say the same, on every node.
  for (size_t n = 1; n <= cluster.size(); ++n) {
    EXPECT_TRUE(wait_until(
        [&] {
          std::optional<Scrape> scrape = cluster.scrape(n);
          const char* expiring = "mayfly_ttl_forecast_expiring_items";
          return scrape &&
                 scrape->sum(expiring, {{"container", "fdb/c"}, {"window", "24h"}}) ==
                     static_cast<double>(expiring_day) &&
                 scrape->sum(expiring, {{"container", "fdb/c"}, {"window", "1h"}}) ==
                     static_cast<double>(expiring_day - 1) &&
                 scrape->sum("mayfly_ttl_gc_reclaim_capacity_items_per_second", {{"container", "fdb/c"}}) > 0 &&
                 scrape->has("mayfly_ttl_forecast_drain_seconds", {{"container", "fdb/c"}}) &&
                 scrape->has("mayfly_ttl_forecast_backlog_peak_items", {{"container", "fdb/c"}});
        },
        std::chrono::seconds(15)))
        << "node " << n << "'s forecast metrics";
  }

  // Advance a minute at a time: what disappears on each node in minute k is the forecast's bucket k.
  client::Client reader(cluster.client_options());
  std::map<size_t, int64_t> live;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    live[n] = live_items(reader, n, writer.session_token());
    EXPECT_EQ(live[n], total) << "node " << n;
  }
  int64_t vanished_total = 0;
  for (int k = 0; k < 17; ++k) {
    const CliResult advanced = cluster.cli({"cluster", "advance-clock", "60s"});
    ASSERT_EQ(advanced.status(), 200) << advanced.describe();
    ASSERT_EQ(advanced.body()->at("virtualTimeMicros").as_int64(), t0 + (k + 1) * 60 * kSecond);
    for (size_t n = 1; n <= cluster.size(); ++n) {
      const int64_t now_live = live_items(reader, n, advanced.session_token());
      EXPECT_EQ(live[n] - now_live, minutes[k]) << "node " << n << ", minute " << k;
      live[n] = now_live;
    }
    vanished_total += minutes[k];
  }
  EXPECT_EQ(vanished_total, expiring_day - 1);  // all but the 3700 s item

  // Later, every node forecasts from its own state: the one item left to expire, in the hour it expires.
  const client::ForecastAnswers later = client::container_forecast(cluster.client_options(), "fdb", "c", 2);
  ASSERT_TRUE(later.error.empty()) << later.error;
  ASSERT_EQ(later.nodes.size(), 1u);
  EXPECT_EQ(later.nodes[0].node, 2u);
  ASSERT_EQ(later.nodes[0].response.status, 200) << later.nodes[0].response.message;
  const bj::value body = parse_json(later.nodes[0].response.body);
  EXPECT_EQ(body.at("expiring").at("day").at("items").to_number<int64_t>(), 1);
  EXPECT_EQ(body.at("atMicros").as_int64(), t0 + 17 * 60 * kSecond);
}

TEST(Forecast, CommandLine) {
  // No forecast refreshes here: the forecast series must still exist (at 0) once a container does (the dashboard
  // queries them).
  Cluster cluster({.name = "forecast-cli", .extra_flags = {"--forecast-interval-ms", "0"}, .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  ASSERT_EQ(cluster.cli({"container", "create", "fdb", "c", "--pk", "/pk", "--default-ttl", "3600"}).status(), 201);
  for (size_t n = 1; n <= cluster.size(); ++n) {
    EXPECT_TRUE(wait_until(
        [&] {
          std::optional<Scrape> scrape = cluster.scrape(n);
          const std::map<std::string, std::string> container = {{"container", "fdb/c"}};
          const char* expiring = "mayfly_ttl_forecast_expiring_items";
          return scrape && scrape->has(expiring, {{"container", "fdb/c"}, {"window", "1h"}}) &&
                 scrape->has(expiring, {{"container", "fdb/c"}, {"window", "24h"}}) &&
                 scrape->has("mayfly_ttl_forecast_backlog_peak_items", container) &&
                 scrape->has("mayfly_ttl_forecast_drain_seconds", container) &&
                 scrape->has("mayfly_ttl_gc_reclaim_capacity_items_per_second", container);
        },
        std::chrono::seconds(10)))
        << "node " << n << " has no forecast series for fdb/c";
  }
  const CliResult created = cluster.cli({"item", "create", "fdb", "c", R"({"id":"a","pk":"p","ttl":600})"});
  ASSERT_EQ(created.status(), 201) << created.describe();
  // JSON: one object with every node's answer; the read-only key may ask.
  CliResult all;
  ASSERT_TRUE(wait_until(
      [&] {
        all = cluster.cli({"--key", cluster.readonly_key(), "-o", "json", "container", "forecast", "fdb", "c"});
        if (all.exit_code != 0 || !all.json.is_object()) return false;
        for (const bj::value& node : all.json.at("nodes").as_array()) {
          if (node.at("body").at("expiring").at("hour").at("items").to_number<int64_t>() != 1) return false;
        }
        return all.json.at("nodes").as_array().size() == cluster.size();
      },
      std::chrono::seconds(15)))
      << all.describe();
  // A table for people: the summary and the histogram's one non-empty row (minute 9 or 10 from now).
  const CliResult table = cluster.cli({"-o", "table", "container", "forecast", "fdb", "c", "--node", "3"});
  EXPECT_EQ(table.exit_code, 0) << table.describe();
  EXPECT_NE(table.out.find("node 3 ("), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("node 1 ("), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("peak backlog"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("capacity"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("m .. +"), std::string::npos) << table.out;
  // A container that does not exist: 404 from every node, exit 1.
  const CliResult missing = cluster.cli({"-o", "json", "container", "forecast", "fdb", "nope"});
  EXPECT_EQ(missing.exit_code, 1) << missing.describe();
  ASSERT_TRUE(missing.json.is_object()) << missing.describe();
  for (const bj::value& node : missing.json.at("nodes").as_array()) EXPECT_EQ(node.at("status").to_number<int>(), 404);
  // A node that is not a member: exit 1 and why.
  const CliResult stranger = cluster.cli({"-o", "table", "container", "forecast", "fdb", "c", "--node", "9"});
  EXPECT_EQ(stranger.exit_code, 1);
  EXPECT_NE(stranger.err.find("node 9 is not a member"), std::string::npos) << stranger.describe();
}

}  // namespace
}  // namespace mayfly::it
