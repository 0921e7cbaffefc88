// The change feed (issue #15, docs/changefeed.md) on real 3-node clusters with a virtual clock: turned on through
// the CLI (the leader fills in its --changefeed-retention), writes, replaces, deletes and expirations read from EACH
// node give the same sequence byte for byte (expirations at the same positions, previous images present), 410 for a
// start before the feed was on, a `changefeed --follow` reader sees an expiration after advance-clock and ends cleanly
// on SIGINT, and a reader's continuation taken on the leader goes on on another node after a leader change with no gap
// and no duplicate. And on the real clock: a `--follow` reader on each node prints the same expirations, each once,
// within the expiry-lateness bound of its instant by this host's wall clock; after a long-poll that ended empty it asks
// again at once.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

namespace bj = boost::json;
using client::Op;
using client::Request;
using client::Response;

bool start_virtual(Cluster& cluster) {
  for (size_t n = 1; n <= cluster.size(); ++n) {
    cluster.set_node_flags(n, {"--clock", "virtual", "--changefeed-retention", "7200"});
  }
  return cluster.start();
}

std::string advance(Cluster& cluster, const std::string& duration) {
  const CliResult r = cluster.cli({"cluster", "advance-clock", duration});
  EXPECT_EQ(r.status(), 200) << r.describe();
  return r.session_token();
}

std::string write(Cluster& cluster, const std::vector<std::string>& args, int status) {
  const CliResult r = cluster.cli(args);
  EXPECT_EQ(r.status(), status) << r.describe();
  return r.session_token();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// "create a1", "expire a5", ... for a JSON Lines feed.
std::vector<std::string> summary(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& line : lines) {
    const bj::object change = bj::parse(line).as_object();
    const bool expired = change.contains("timeToLiveExpired");
    out.push_back(std::string(expired ? "expire" : change.at("operationType").as_string().c_str()) + " " +
                  std::string(change.at("id").as_string()));
  }
  return out;
}

TEST(ChangeFeed, EveryNodeServesTheSameFeedWithExpirationsAtTheSamePositions) {
  Cluster cluster({.name = "feed"});
  ASSERT_TRUE(start_virtual(cluster));
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  const CliResult created =
      cluster.cli({"container", "create", "fdb", "c", "--pk", "/pk", "--default-ttl", "100", "--change-feed", "on"});
  ASSERT_EQ(created.status(), 201) << created.describe();
  // The leader filled in its --changefeed-retention: the replicated record says 7200 on every node.
  for (size_t node = 1; node <= cluster.size(); ++node) {
    const CliResult got = cluster.cli({"--session-token", created.session_token(), "container", "get", "fdb", "c"},
                                      node);
    ASSERT_EQ(got.status(), 200) << got.describe();
    EXPECT_TRUE(got.body()->at("changeFeed").at("enabled").as_bool()) << got.describe();
    EXPECT_EQ(got.body()->at("changeFeed").at("retentionSeconds").as_int64(), 7200) << got.describe();
  }
  const CliResult table = cluster.cli({"-o", "table", "container", "get", "fdb", "c"});
  EXPECT_NE(table.out.find("on, 7200 s"), std::string::npos) << table.out;
  // Retention without "on" is a usage error; a retention past 90 days too.
  EXPECT_EQ(cluster.cli({"container", "set", "fdb", "c", "--change-feed-retention", "60"}).exit_code, 2);
  EXPECT_EQ(cluster.cli({"container", "set", "fdb", "c", "--change-feed", "on", "--change-feed-retention",
                         "7776001"}).exit_code,
            2);

  write(cluster, {"item", "create", "fdb", "c", R"({"id":"a1","pk":"p","ttl":30})"}, 201);
  write(cluster, {"item", "create", "fdb", "c", R"({"id":"a2","pk":"p","v":1})"}, 201);
  write(cluster, {"item", "create", "fdb", "c", R"({"id":"a3","pk":"q","ttl":-1,"v":1})"}, 201);
  write(cluster, {"item", "replace", "fdb", "c", R"({"id":"a3","pk":"q","ttl":-1,"v":2})"}, 200);
  write(cluster, {"item", "upsert", "fdb", "c", R"({"id":"a4","pk":"q","ttl":-1})"}, 201);
  write(cluster, {"item", "delete", "fdb", "c", "--pk", "q", "--id", "a4"}, 204);
  write(cluster, {"item", "create", "fdb", "c", R"({"id":"a5","pk":"p","ttl":60})"}, 201);
  advance(cluster, "65s");  // a1 (+30) and a5 (+60) expire; a2 (+100) does not
  write(cluster, {"item", "replace", "fdb", "c", R"({"id":"a2","pk":"p","v":2})"}, 200);
  write(cluster, {"item", "create", "fdb", "c", R"({"id":"a6","pk":"p"})"}, 201);
  // a2 and a6 (inherited, +100 from about +65 s, by write time) expire; all of it stays within the 2 h retention.
  const std::string token = advance(cluster, "200s");

  const std::vector<std::string> expected = {"create a1", "create a2",  "create a3",  "replace a3", "create a4",
                                             "delete a4", "create a5",  "expire a1",  "expire a5",  "replace a2",
                                             "create a6", "expire a2",  "expire a6"};
  std::vector<std::vector<std::string>> feeds;
  for (size_t node = 1; node <= cluster.size(); ++node) {
    // Pages of 3, at the session token of the last advance, from this node alone.
    const CliResult read = cluster.cli({"--session-token", token, "changefeed", "fdb", "c", "--max-items", "3"}, node);
    ASSERT_EQ(read.exit_code, 0) << read.describe();
    EXPECT_NE(read.err.find("continuation: "), std::string::npos) << read.err;
    feeds.push_back(lines_of(read.out));
    EXPECT_EQ(summary(feeds.back()), expected) << "node " << node << ":\n" << read.out;
  }
  EXPECT_EQ(feeds[0], feeds[1]) << "nodes 1 and 2 serve different feeds";
  EXPECT_EQ(feeds[0], feeds[2]) << "nodes 1 and 3 serve different feeds";
  ASSERT_EQ(feeds[0].size(), expected.size());
  for (size_t i = 0; i < feeds[0].size(); ++i) {
    const bj::object change = bj::parse(feeds[0][i]).as_object();
    const bool creates = expected[i].rfind("create", 0) == 0;
    EXPECT_EQ(change.at("previous").is_object(), !creates) << feeds[0][i];
    EXPECT_EQ(change.at("current").is_object(), creates || expected[i].rfind("replace", 0) == 0) << feeds[0][i];
    if (expected[i].rfind("expire", 0) == 0) {
      EXPECT_EQ(change.at("operationType").as_string(), "delete");
      EXPECT_EQ(change.at("previous").at("id").as_string(), change.at("id").as_string());
    }
  }
  // Expirations of one advance share its position (the time entry), after the writes before it.
  const bj::object a1 = bj::parse(feeds[0][7]).as_object();
  const bj::object a5 = bj::parse(feeds[0][8]).as_object();
  EXPECT_EQ(a1.at("lsn"), a5.at("lsn"));
  EXPECT_GT(a1.at("lsn").as_int64(), bj::parse(feeds[0][6]).at("lsn").as_int64());

  // A read-only key may read the feed (it holds item images, like item lists).
  const std::string readonly = cluster.write_file("ro.key", cluster.readonly_key() + "\n");
  const CliResult as_reader = cluster.cli({"--key-file", readonly, "--session-token", token, "changefeed", "fdb", "c"});
  EXPECT_EQ(as_reader.exit_code, 0) << as_reader.describe();
  EXPECT_EQ(lines_of(as_reader.out), feeds[0]);

  // Only expirations; mode latest (creates and replaces still current and alive: a3's second version only).
  const CliResult expirations =
      cluster.cli({"--session-token", token, "changefeed", "fdb", "c", "--only-expirations"}, 2);
  ASSERT_EQ(expirations.exit_code, 0) << expirations.describe();
  EXPECT_EQ(summary(lines_of(expirations.out)),
            (std::vector<std::string>{"expire a1", "expire a5", "expire a2", "expire a6"}));
  const CliResult latest = cluster.cli({"--session-token", token, "changefeed", "fdb", "c", "--mode", "latest"}, 3);
  ASSERT_EQ(latest.exit_code, 0) << latest.describe();
  EXPECT_EQ(summary(lines_of(latest.out)), (std::vector<std::string>{"replace a3"}));

  // A start before the feed was on: 410, and the CLI exits 1 with the answer on stderr.
  const CliResult before = cluster.cli({"changefeed", "fdb", "c", "--from", "1"}, 1);
  EXPECT_EQ(before.exit_code, 1) << before.describe();
  EXPECT_NE(before.err.find("\"status\":410"), std::string::npos) << before.err;
  EXPECT_NE(before.err.find("turned on after the time asked for"), std::string::npos) << before.err;
  // A continuation from before the feed was turned off and on again: 410 too.
  const std::string old_position(bj::parse(feeds[0][2]).at("position").as_string());
  write(cluster, {"container", "set", "fdb", "c", "--change-feed", "off"}, 200);
  const std::string on_again = write(cluster, {"container", "set", "fdb", "c", "--change-feed", "on",
                                               "--change-feed-retention", "600"}, 200);
  const CliResult stale = cluster.cli({"--session-token", on_again, "changefeed", "fdb", "c", "--continuation",
                                       old_position}, 3);
  EXPECT_EQ(stale.exit_code, 1) << stale.describe();
  EXPECT_NE(stale.err.find("\"status\":410"), std::string::npos) << stale.err;
  EXPECT_NE(stale.err.find("before the change feed"), std::string::npos) << stale.err;
  const CliResult got = cluster.cli({"--session-token", on_again, "container", "get", "fdb", "c"}, 3);
  EXPECT_EQ(got.body()->at("changeFeed").at("retentionSeconds").as_int64(), 600) << got.describe();
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

// Expiring-soon warnings (docs/retention.md) on real processes under the virtual clock: every node serves them at
// the same positions, an item written inside its window gets none, the CLI reads only them, and each node counts
// what it served.
TEST(ChangeFeed, WarningsComeAtTheSamePositionsOnEveryNodeAndAreCounted) {
  Cluster cluster({.name = "feed-warnings", .metrics = true});
  ASSERT_TRUE(start_virtual(cluster));
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  const CliResult created = cluster.cli({"container", "create", "fdb", "c", "--pk", "/pk", "--default-ttl", "100",
                                         "--change-feed", "on", "--expiry-warning", "30"});
  ASSERT_EQ(created.status(), 201) << created.describe();
  EXPECT_EQ(created.body()->at("expiryWarning").as_int64(), 30) << created.describe();
  const CliResult table = cluster.cli({"-o", "table", "container", "get", "fdb", "c"});
  EXPECT_NE(table.out.find("on, 7200 s, warns 30 s ahead"), std::string::npos) << table.out;
  EXPECT_EQ(cluster.cli({"container", "set", "fdb", "c", "--expiry-warning", "-1"}).exit_code, 2);
  write(cluster, {"item", "create", "fdb", "c", R"({"id":"w1","pk":"p","ttl":60})"}, 201);
  write(cluster, {"item", "create", "fdb", "c", R"({"id":"w2","pk":"p","ttl":20})"}, 201);  // inside its window
  write(cluster, {"item", "create", "fdb", "c", R"({"id":"w3","pk":"q"})"}, 201);           // inherits 100 s
  advance(cluster, "35s");  // w2 expires; w1 (60 - 30) is warned of
  const std::string token = advance(cluster, "40s");  // w1 expires; w3 (100 - 30) is warned of

  std::vector<std::vector<std::string>> warnings;
  for (size_t node = 1; node <= cluster.size(); ++node) {
    const CliResult read =
        cluster.cli({"--session-token", token, "changefeed", "fdb", "c", "--only-warnings", "--max-items", "1"}, node);
    ASSERT_EQ(read.exit_code, 0) << read.describe();
    warnings.push_back(lines_of(read.out));
    EXPECT_EQ(summary(warnings.back()), (std::vector<std::string>{"warning w1", "warning w3"})) << read.out;
  }
  EXPECT_EQ(warnings[0], warnings[1]);
  EXPECT_EQ(warnings[0], warnings[2]);
  ASSERT_EQ(warnings[0].size(), 2u);
  const bj::object w1 = bj::parse(warnings[0][0]).as_object();
  EXPECT_TRUE(w1.at("previous").is_null()) << warnings[0][0];
  EXPECT_EQ(w1.at("current").at("id").as_string(), "w1") << warnings[0][0];
  EXPECT_EQ(w1.at("current").at("_expiresAt").as_int64(), w1.at("current").at("_ts").as_int64() + 60);
  const CliResult all = cluster.cli({"--session-token", token, "changefeed", "fdb", "c"}, 2);
  ASSERT_EQ(all.exit_code, 0) << all.describe();
  EXPECT_EQ(summary(lines_of(all.out)),
            (std::vector<std::string>{"create w1", "create w2", "create w3", "expire w2", "warning w1", "expire w1",
                                      "warning w3"}))
      << all.out;
  EXPECT_EQ(cluster.cli({"changefeed", "fdb", "c", "--only-warnings", "--only-expirations"}).exit_code, 2);
  // Three nodes served two warnings each, and node 2 two more in the whole feed.
  double served = 0;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const std::optional<Scrape> scrape = cluster.scrape(n);
    ASSERT_TRUE(scrape.has_value());
    served += scrape->sum("mayfly_changefeed_warnings_total", {{"container", "fdb/c"}});
  }
  EXPECT_EQ(served, 8);
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

TEST(ChangeFeed, FollowSeesAnExpirationAfterAdvanceClockAndEndsOnSigint) {
  Cluster cluster({.name = "feed-follow"});
  ASSERT_TRUE(start_virtual(cluster));
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  ASSERT_EQ(cluster.cli({"container", "create", "fdb", "c", "--pk", "/pk", "--default-ttl", "-1", "--change-feed",
                         "on"}).status(),
            201);

  const std::string output = cluster.dir() + "/follow.out";
  const std::string errors = cluster.dir() + "/follow.err";
  // Where the feed is now (an empty read's continuation, on stderr): the follower starts there, so the write below
  // comes after its start whenever its first request arrives.
  const CliResult now = cluster.cli({"changefeed", "fdb", "c", "--from", "now"});
  ASSERT_EQ(now.exit_code, 0) << now.describe();
  ASSERT_TRUE(now.out.empty()) << now.describe();
  const size_t at = now.err.find("continuation: ");
  ASSERT_NE(at, std::string::npos) << now.err;
  const std::string start = now.err.substr(at + 14, now.err.find('\n', at) - at - 14);
  std::vector<std::string> argv = {MAYFLY_IT_CLI_PATH, "--endpoints", cluster.endpoint(2), "--key-file",
                                   cluster.admin_key_file(), "changefeed", "fdb", "c", "--continuation", start,
                                   "--follow"};
  const pid_t pid = spawn_to_files(argv, output, errors);
  ASSERT_GT(pid, 0) << "cannot start " << argv[0];
  auto text_of = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };

  write(cluster, {"item", "create", "fdb", "c", R"({"id":"x","pk":"p","ttl":10})"}, 201);
  EXPECT_TRUE(wait_until([&] { return summary(lines_of(text_of(output))) ==
                                      std::vector<std::string>{"create x"}; },
                         milliseconds(20000), milliseconds(50)))
      << text_of(output) << text_of(errors);
  advance(cluster, "20s");
  EXPECT_TRUE(wait_until([&] { return summary(lines_of(text_of(output))) ==
                                      std::vector<std::string>{"create x", "expire x"}; },
                         milliseconds(20000), milliseconds(50)))
      << text_of(output) << text_of(errors);

  // Ctrl-C ends it cleanly: exit 0, its continuation on stderr.
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  bool done = false;
  EXPECT_TRUE(wait_until([&] { return done = ::waitpid(pid, &status, WNOHANG) == pid; }, milliseconds(10000)));
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << text_of(errors);
  EXPECT_NE(text_of(errors).find("continuation: "), std::string::npos) << text_of(errors);
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

// mayfly_changefeed_*: the oldest position a reader may start from (it moves with the retention as replicated time
// passes), its age and the feed's size on every node; the series go away when the feed is turned off.
TEST(ChangeFeed, MetricsFollowTheRetentionAndGoAwayWhenTheFeedIsOff) {
  Cluster cluster({.name = "feed-metrics", .metrics = true});
  for (size_t n = 1; n <= cluster.size(); ++n) {
    cluster.set_node_flags(n, {"--clock", "virtual", "--changefeed-retention", "60", "--forecast-interval-ms", "200"});
  }
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  const CliResult created = cluster.cli({"container", "create", "fdb", "c", "--pk", "/pk", "--change-feed", "on"});
  ASSERT_EQ(created.status(), 201) << created.describe();
  const double since = static_cast<double>(created.body()->at("changeFeed").at("sinceIndex").as_int64());
  write(cluster, {"item", "create", "fdb", "c", R"({"id":"a","pk":"p"})"}, 201);
  const std::map<std::string, std::string> feed = {{"container", "fdb/c"}};
  auto wait_for = [&](const std::function<bool(const Scrape&)>& holds, const std::string& what) {
    for (size_t n = 1; n <= cluster.size(); ++n) {
      std::string last;
      EXPECT_TRUE(wait_until(
          [&] {
            std::optional<Scrape> scrape = cluster.scrape(n);
            if (!scrape) return false;
            last = scrape->text();
            return holds(*scrape);
          },
          milliseconds(15000), milliseconds(100)))
          << what << " on node " << n << "\n" << last.substr(0, 4000);
    }
  };
  wait_for([&](const Scrape& s) {
    return s.sum("mayfly_changefeed_oldest_position", feed) == since && s.has("mayfly_changefeed_bytes", feed) &&
           s.sum("mayfly_changefeed_oldest_age_seconds", feed) < 1;
  }, "the feed's start as the oldest position");

  // 120 s later the 60 s retention starts at the advance's own position.
  const CliResult advanced = cluster.cli({"cluster", "advance-clock", "120s"});
  ASSERT_EQ(advanced.status(), 200) << advanced.describe();
  const double advance_index = static_cast<double>(advanced.body()->at("index").as_int64());
  ASSERT_GT(advance_index, since);
  wait_for([&](const Scrape& s) {
    return s.sum("mayfly_changefeed_oldest_position", feed) == advance_index &&
           s.sum("mayfly_changefeed_oldest_age_seconds", feed) < 1;
  }, "the oldest position moved with the retention");

  write(cluster, {"container", "set", "fdb", "c", "--change-feed", "off"}, 200);
  wait_for([&](const Scrape& s) {
    return !s.has("mayfly_changefeed_bytes", feed) && !s.has("mayfly_changefeed_oldest_position", feed) &&
           s.has("mayfly_ttl_forecast_drain_seconds", feed);
  }, "no feed series once it is off");
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

// The library: pages on the leader, a leader change, the rest from another node with the continuation.
TEST(ChangeFeed, AReaderSurvivesALeaderChangeWithNoGapOrDuplicate) {
  Cluster cluster({.name = "feed-failover"});
  ASSERT_TRUE(start_virtual(cluster));
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client client(cluster.client_options());
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  Request create;
  create.database = "fdb";
  create.container = "c";
  client::ContainerSettings& settings = create.operation.emplace<api::CreateContainer>().settings;
  settings.partition_key_path = "/pk";
  settings.default_ttl = client::ContainerSettings::DefaultTtl::kSet;  // TTL on, no default: item ttls count
  settings.default_ttl_json = "-1";
  settings.change_feed = client::ContainerSettings::ChangeFeed::kOn;
  settings.change_feed_retention_seconds = 3600;
  ASSERT_EQ(client.execute(create).status, 201);
  auto upsert = [&](int i) {
    Request request;
    request.database = "fdb";
    request.container = "c";
    request.operation = api::UpsertItem{.body = "{\"id\":\"i" + std::to_string(i % 7) + "\",\"pk\":\"p\",\"n\":" +
                                                std::to_string(i) + (i % 5 == 0 ? ",\"ttl\":5" : "") + "}"};
    const Response response = client.execute(request);
    EXPECT_LT(response.status, 300) << response.message;
  };
  for (int i = 0; i < 20; ++i) upsert(i);
  advance(cluster, "10s");

  auto read_page = [&](size_t node, Request& request) {
    request.endpoint = node;
    const Response page = client.execute(request);
    EXPECT_EQ(page.status, 200) << page.message;
    EXPECT_EQ(page.served_by, node);
    return page.status == 200 ? bj::parse(page.body).as_object() : bj::object();
  };
  Request read;
  read.operation = api::make_operation(Op::kReadChangeFeed);
  read.database = "fdb";
  read.container = "c";
  test::operation_of<api::ReadChangeFeed>(read).max_items = 4;
  std::vector<std::string> positions;
  std::vector<std::string> seen;
  // Two pages on the leader.
  for (int page = 0; page < 2; ++page) {
    const bj::object body = read_page(leader, read);
    ASSERT_FALSE(body.empty());
    for (const bj::value& change : body.at("changes").as_array()) {
      positions.emplace_back(change.at("position").as_string());
      seen.push_back(bj::serialize(change));
    }
    test::operation_of<api::ReadChangeFeed>(read).from = client::ReadChangeFeed::From::kContinuation;
    test::operation_of<api::ReadChangeFeed>(read).continuation = std::string(body.at("continuation").as_string());
  }
  ASSERT_EQ(positions.size(), 8u);
  const uint64_t next = leader == 1 ? 2 : 1;
  ASSERT_TRUE(cluster.transfer_leader(next));
  for (int i = 20; i < 30; ++i) upsert(i);
  advance(cluster, "10s");
  const size_t other = 6 - leader - next;  // neither the old nor the new leader
  for (int page = 0; page < 100; ++page) {
    const bj::object body = read_page(page % 2 == 0 ? other : next, read);
    ASSERT_FALSE(body.empty());
    for (const bj::value& change : body.at("changes").as_array()) {
      positions.emplace_back(change.at("position").as_string());
      seen.push_back(bj::serialize(change));
    }
    test::operation_of<api::ReadChangeFeed>(read).continuation = std::string(body.at("continuation").as_string());
    if (body.at("caughtUp").as_bool()) break;
  }
  // The whole feed in one page from the old leader, at the client's session token.
  Request whole;
  whole.operation = api::make_operation(Op::kReadChangeFeed);
  whole.database = "fdb";
  whole.container = "c";
  test::operation_of<api::ReadChangeFeed>(whole).max_items = 1000;
  const bj::object all = read_page(leader, whole);
  ASSERT_FALSE(all.empty());
  std::vector<std::string> expected;
  for (const bj::value& change : all.at("changes").as_array()) expected.push_back(bj::serialize(change));
  EXPECT_EQ(seen, expected) << "a gap or a duplicate across the leader change";
  // 30 writes, and two expirations: i1 (its version of n 15 has ttl 5) at the first advance, i4 (n 25) at the second.
  EXPECT_EQ(expected.size(), 32u);
  EXPECT_EQ(std::count_if(expected.begin(), expected.end(),
                          [](const std::string& change) { return change.find("timeToLiveExpired") != std::string::npos; }),
            2);

  // The long-poll: a caught-up read with waitMs waits on the node for the next position instead of answering an
  // empty page. It is sent (and reaches the node: another request runs the event loop meanwhile) before the write.
  Request poll = read;
  poll.endpoint = other;
  test::operation_of<api::ReadChangeFeed>(poll).wait_ms = 5000;
  kj::Promise<Response> pending = client.execute_async(poll);
  client::Client writer(cluster.client_options());
  Request status;
  status.operation = api::make_operation(Op::kClusterStatus);
  status.endpoint = other;
  ASSERT_EQ(writer.execute(status).status, 200);
  Request late;
  late.operation = api::make_operation(Op::kCreateItem);
  late.database = "fdb";
  late.container = "c";
  test::body_of(late) = R"({"id":"late","pk":"p"})";
  ASSERT_EQ(writer.execute(late).status, 201);
  const Response polled = pending.wait(client.wait_scope());
  ASSERT_EQ(polled.status, 200) << polled.message;
  const bj::value polled_body = bj::parse(polled.body);
  ASSERT_EQ(polled_body.at("changes").as_array().size(), 1u) << polled.body;
  EXPECT_EQ(polled_body.at("changes").as_array()[0].at("id").as_string(), "late");
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

// ---- real clock: --follow readers on every node, expirations against wall time --------------------------------------

// One `mayfly changefeed ... --follow` process, its stdout read line by line on a thread of its own and each line
// stamped with this host's wall clock (system_clock, wall_micros) when it arrived: the time a user of the feed would
// see the change. The pipe is opened close-on-exec, so the nodes and CLI runs the test starts meanwhile do not hold its
// write end (the reader sees EOF when this process exits). Only the PID it started is ever signalled.
class FollowReader {
 public:
  struct Line {
    std::string text;
    int64_t arrived_us = 0;
  };

  FollowReader(const std::vector<std::string>& argv, const std::string& err_path) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);  // dup2 clears close-on-exec on the child's stdout
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_ = spawn_with(argv, &actions);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (pid_ < 0) {
      ::close(fds[0]);
      return;
    }
    const int fd = fds[0];
    thread_ = std::thread([this, fd] {
      std::string partial;
      char buffer[8192];
      for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;  // EOF: the process exited (or a read error: nothing more will come)
        const int64_t now = wall_micros();
        partial.append(buffer, static_cast<size_t>(got));
        size_t start = 0;
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t end; (end = partial.find('\n', start)) != std::string::npos; start = end + 1) {
          if (end > start) lines_.push_back({partial.substr(start, end - start), now});
        }
        partial.erase(0, start);
      }
      ::close(fd);
    });
  }
  ~FollowReader() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (thread_.joinable()) thread_.join();
  }
  FollowReader(const FollowReader&) = delete;
  FollowReader& operator=(const FollowReader&) = delete;

  bool started() const { return pid_ > 0; }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_.size();
  }
  // SIGINT (Ctrl-C), then waits up to `timeout` (scaled, as every wait_until) for the exit and for the last line;
  // the exit's wait status, or nullopt when it had to be killed.
  std::optional<int> interrupt(milliseconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    std::optional<int> result;
    int status = 0;
    if (::kill(pid_, SIGINT) == 0 &&
        wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout, milliseconds(10))) {
      result = status;
    } else {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    if (thread_.joinable()) thread_.join();
    return result;
  }
  // Every line it printed (after interrupt(): all of them).
  std::vector<Line> lines() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  pid_t pid_ = -1;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<Line> lines_;
};

// Nearest-rank percentile (p in 0..100) of `values`; NAN when empty.
double percentile(std::vector<double> values, double p) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// Issue #15: "a --follow reader on each of three nodes sees the same expirations, each within the expiry-lateness
// bound of its instant". Real clocks (the harness's nodes share this host's clock), idle time entries only once a
// second, so an expiration reaches a reader on time only if the leader appends a time entry at its instant AND the
// reader's parked long-poll is woken by that time-only apply and answered at once.
//
// The bound: an expiration's feed position is the time entry the leader schedules at its instant E, the entry that
// makes item reads answer 404 (expiry_test.cc bounds that lateness: p99 <= kLatenessBoundMs, scaled 250 ms). A follow
// reader's request is parked on its node until an apply passes its position, then reads the page at once and answers:
// one page read and one reply later than a point read could see the expiration. So the same bound holds for p99. The
// max may be hit by a one-off stall of this 2-core machine, so it gets 1000 ms (scaled) — still below what a reader
// that misses the wake shows: it waits out its long-poll (waitMs 1000) or the next idle time entry (1000 ms), and its
// lateness spreads uniformly over that second, far past 250 ms at p99. Below 100 expirations a nearest-rank p99 is
// the max of a node; so the p99 is taken over the three nodes' expirations together, and each node's max is bounded.
TEST(ChangeFeed, FollowReadersOnEveryNodeSeeEachExpirationOnceWithinTheLatenessBound) {
  const double bound_p99_ms = testing_env::scaled(250.0);
  const double bound_max_ms = testing_env::scaled(1000.0);
  constexpr double kClockSlackMs = 2;  // one host clock: an arrival can only precede E by a clock adjustment
  const int64_t idle_time_entry_ms = testing_env::scaled(int64_t{1000});
  Cluster cluster({.name = "feed-lateness",
                   .extra_flags = {"--time-entry-ms", std::to_string(idle_time_entry_ms)},
                   .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  const uint64_t seed = test_seed();
  std::cerr << "[feed-lateness] seed " << seed << " (rerun with MAYFLY_IT_SEED=" << seed << ")\n";
  std::mt19937_64 prng(seed);
  constexpr int64_t kDefaultTtl = 3;
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  const CliResult created = cluster.cli({"container", "create", "fdb", "c", "--pk", "/pk", "--default-ttl",
                                         std::to_string(kDefaultTtl), "--change-feed", "on"});
  ASSERT_EQ(created.status(), 201) << created.describe();

  // One reader per node, started before any item is written: `--from now` starts each at its node's applied index
  // when its first request is served. That request ends (and is counted in mayfly_requests_total{op="change_feed"})
  // after its start was fixed: wait for that on every node, then write, so no reader can start after an expiration.
  std::vector<std::unique_ptr<FollowReader>> readers;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    readers.push_back(std::make_unique<FollowReader>(
        std::vector<std::string>{MAYFLY_IT_CLI_PATH, "--endpoints", cluster.endpoint(n), "--key-file",
                                 cluster.admin_key_file(), "changefeed", "fdb", "c", "--mode", "all",
                                 "--only-expirations", "--from", "now", "--follow"},
        cluster.dir() + "/follow" + std::to_string(n) + ".err"));
    ASSERT_TRUE(readers.back()->started()) << "cannot start " << MAYFLY_IT_CLI_PATH;
  }
  auto errors_of = [&](size_t n) {
    std::ifstream in(cluster.dir() + "/follow" + std::to_string(n) + ".err");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  for (size_t n = 1; n <= cluster.size(); ++n) {
    ASSERT_TRUE(wait_until(
        [&] {
          const std::optional<Scrape> scrape = cluster.scrape(n);
          return scrape && scrape->sum("mayfly_requests_total", {{"op", "change_feed"}}) >= 1;
        },
        milliseconds(15000), milliseconds(50)))
        << "node " << n << " never answered its reader's first request\n" << errors_of(n);
  }

  // Items that expire during the test, with staggered instants: own ttls of 2..6 s and some inheriting the default
  // (3 s), written in 4 waves 400 ms apart, so E = _ts + ttl spreads over several whole seconds. Controls that must
  // not expire: ttl -1 (beats the default), a long own ttl, and an item whose ttl-6 version is replaced by a ttl -1
  // one right away (only an item's current version can expire).
  struct Expected {
    int64_t ts = 0;          // _ts of the (last) write, from its reply
    int64_t ttl = 0;         // effective ttl (s)
    int64_t instant_s = 0;   // E = _ts + ttl
  };
  std::map<std::string, Expected> expected;
  std::set<std::string> controls;
  client::Client client(cluster.client_options());
  auto create = [&](const std::string& id, const std::string& ttl_field) {
    const Response r = client.execute(item_write(Op::kCreateItem, "fdb", "c",
                                                 R"({"id":")" + id + R"(","pk":"p)" + id.substr(id.size() - 1) +
                                                     "\"" + ttl_field + "}"));
    EXPECT_EQ(r.status, 201) << id << ": " << r.message;
    return r;
  };
  constexpr size_t kItems = 48, kWaves = 4;
  for (size_t wave = 0; wave < kWaves; ++wave) {
    const auto wave_start = Clock::now();
    for (size_t i = wave * kItems / kWaves; i < (wave + 1) * kItems / kWaves; ++i) {
      const std::string id = "e" + std::to_string(i);
      const bool inherits = prng() % 4 == 0;
      const int64_t ttl = inherits ? kDefaultTtl : 2 + static_cast<int64_t>(prng() % 5);
      const Response r = create(id, inherits ? "" : ",\"ttl\":" + std::to_string(ttl));
      if (r.status == 201) expected[id] = {r.ts, ttl, r.ts + ttl};
    }
    if (wave == 0) {
      for (const std::string id : {"keep0", "keep1", "keep2"}) {
        create(id, ",\"ttl\":-1");
        controls.insert(id);
      }
      create("long0", ",\"ttl\":3600");
      controls.insert("long0");
      create("saved", ",\"ttl\":6");
      const Response replaced =
          client.execute(item_write(Op::kReplaceItem, "fdb", "c", R"({"id":"saved","pk":"pd","ttl":-1})"));
      EXPECT_EQ(replaced.status, 200) << replaced.message;
      controls.insert("saved");
    }
    std::this_thread::sleep_until(wave_start + milliseconds(400));
  }
  ASSERT_EQ(expected.size(), kItems);
  int64_t last_instant_s = 0;
  std::set<int64_t> instants;
  for (const auto& [id, item] : expected) {
    last_instant_s = std::max(last_instant_s, item.instant_s);
    instants.insert(item.instant_s);
  }
  std::cerr << "[feed-lateness] " << kItems << " items expiring at " << instants.size()
            << " distinct instants, the last " << (last_instant_s * 1000000 - wall_micros()) / 1000
            << " ms from now; " << controls.size() << " controls\n";

  // Until every reader printed every expiration (bounded: 10 s past the last instant), then Ctrl-C: each exits 0 with
  // its continuation.
  // (wait_until scales the wait in a sanitized build.)
  EXPECT_TRUE(wait_until(
      [&] {
        return std::all_of(readers.begin(), readers.end(), [&](const auto& r) { return r->count() >= kItems; });
      },
      milliseconds(std::max<int64_t>(0, (last_instant_s * 1000000 - wall_micros()) / 1000) + 10000),
      milliseconds(20)))
      << "not every reader saw every expiration in time: " << readers[0]->count() << ", " << readers[1]->count()
      << ", " << readers[2]->count() << " of " << kItems;
  // Then two more answered requests from every reader (each node serves only its own reader): a reader asked again
  // after its last expiration arrived, so a duplicate or a control's expiration the node would serve is printed.
  auto answered = [&](size_t n) {
    const std::optional<Scrape> scrape = cluster.scrape(n);
    return scrape ? scrape->sum("mayfly_requests_total", {{"op", "change_feed"}}) : -1.0;
  };
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const double before = answered(n);
    EXPECT_TRUE(wait_until([&] { return answered(n) >= before + 2; }, milliseconds(10000), milliseconds(50)))
        << "node " << n << "'s reader asked no more after its last expiration\n" << errors_of(n);
  }
  std::vector<std::vector<FollowReader::Line>> seen;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const std::optional<int> status = readers[n - 1]->interrupt(milliseconds(10000));
    ASSERT_TRUE(status.has_value()) << "node " << n << "'s reader did not end on SIGINT\n" << errors_of(n);
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "node " << n << ": wait status " << *status
                                                                    << "\n" << errors_of(n);
    EXPECT_NE(errors_of(n).find("continuation: "), std::string::npos) << errors_of(n);
    seen.push_back(readers[n - 1]->lines());
  }

  // The same feed on every node, byte for byte: the same expirations, at the same positions, in the same order.
  for (size_t n = 2; n <= cluster.size(); ++n) {
    ASSERT_EQ(seen[n - 1].size(), seen[0].size()) << "nodes 1 and " << n << " printed different numbers of changes";
    for (size_t i = 0; i < seen[0].size(); ++i) {
      EXPECT_EQ(seen[n - 1][i].text, seen[0][i].text) << "change " << i << " differs between nodes 1 and " << n;
    }
  }
  std::fprintf(stderr,
               "[feed-lateness] per node, ms: lateness = line arrived (wall clock) - E; position = the expiration's "
               "replicated time (tsMicros) - E\n  %-4s %7s %7s %7s %7s | %9s %9s %9s\n",
               "node", "count", "p50", "p99", "max", "pos p50", "pos p99", "pos max");
  std::vector<double> all_lateness;
  std::map<int64_t, std::map<size_t, double>> worst_at;  // instant -> node -> its latest arrival there (ms)
  for (size_t n = 1; n <= cluster.size(); ++n) {
    std::set<std::string> ids;
    std::vector<double> lateness, position_lateness;
    int64_t last_lsn = 0;
    for (const FollowReader::Line& line : seen[n - 1]) {
      boost::system::error_code error;
      const bj::value parsed = bj::parse(line.text, error);
      ASSERT_FALSE(error) << "node " << n << " printed a line that is not JSON: " << line.text;
      const bj::object& change = parsed.as_object();
      const std::string id(change.at("id").as_string());
      EXPECT_EQ(change.at("operationType").as_string(), "delete") << line.text;
      EXPECT_TRUE(change.contains("timeToLiveExpired") && change.at("timeToLiveExpired").as_bool()) << line.text;
      EXPECT_FALSE(controls.contains(id)) << "node " << n << ": control item " << id << " expired: " << line.text;
      EXPECT_TRUE(ids.insert(id).second) << "node " << n << ": " << id << " expired twice";
      const int64_t lsn = change.at("lsn").as_int64();
      EXPECT_GE(lsn, last_lsn) << "node " << n << ": positions out of order at " << id;
      last_lsn = lsn;
      auto found = expected.find(id);
      if (found == expected.end()) {
        ADD_FAILURE() << "node " << n << ": an expiration of an item the test did not expect: " << line.text;
        continue;
      }
      const Expected& item = found->second;
      // The previous image is the version that expired: its _ts and _expiresAt are the test's E.
      const bj::object& previous = change.at("previous").as_object();
      EXPECT_EQ(previous.at("_ts").as_int64(), item.ts) << line.text;
      EXPECT_EQ(previous.at("_expiresAt").as_int64(), item.instant_s) << line.text;
      const int64_t instant_us = item.instant_s * 1000000;
      // The position's replicated time has reached E (the item is gone from E on, at T >= E), exactly.
      EXPECT_GE(change.at("tsMicros").as_int64(), instant_us) << "node " << n << ": expired before its instant: "
                                                              << line.text;
      position_lateness.push_back(static_cast<double>(change.at("tsMicros").as_int64() - instant_us) / 1000.0);
      const double late_ms = static_cast<double>(line.arrived_us - instant_us) / 1000.0;
      EXPECT_GE(late_ms, -kClockSlackMs) << "node " << n << ": " << id << " arrived before its instant E "
                                         << item.instant_s;
      lateness.push_back(late_ms);
      all_lateness.push_back(late_ms);
      auto [at, first] = worst_at[item.instant_s].emplace(n, late_ms);
      if (!first) at->second = std::max(at->second, late_ms);
    }
    for (const auto& [id, item] : expected) {
      EXPECT_TRUE(ids.contains(id)) << "node " << n << "'s reader never printed the expiration of " << id
                                    << " (E " << item.instant_s << ")";
    }
    const double max = percentile(lateness, 100);
    std::fprintf(stderr, "  %-4zu %7zu %7.1f %7.1f %7.1f | %9.1f %9.1f %9.1f\n", n, lateness.size(),
                 percentile(lateness, 50), percentile(lateness, 99), max, percentile(position_lateness, 50),
                 percentile(position_lateness, 99), percentile(position_lateness, 100));
    EXPECT_LE(max, bound_max_ms) << "node " << n << ": an expiration reached its follow reader late";
  }
  // Per instant: a systematic delay shows at some instant on every node, a stall of this machine at one instant on one
  // node. (How the CLI's 200 ms pause after a long-poll that ended just before an instant's time entry showed: ~205 ms
  // at one or two instants of every run, on every node — under the bound, but plain here.)
  for (const auto& [instant, nodes] : worst_at) {
    std::fprintf(stderr, "  instant %" PRId64 ": latest arrival", instant);
    for (const auto& [n, worst] : nodes) std::fprintf(stderr, " node %zu %.1f ms", n, worst);
    std::fprintf(stderr, "\n");
  }
  const double p99 = percentile(all_lateness, 99);
  std::fprintf(stderr, "[feed-lateness] all nodes: %zu expirations, p50 %.1f ms, p99 %.1f ms (bound %.0f), max %.1f ms "
               "(bound %.0f)\n", all_lateness.size(), percentile(all_lateness, 50), p99, bound_p99_ms,
               percentile(all_lateness, 100), bound_max_ms);
  EXPECT_LE(p99, bound_p99_ms) << "follow readers see expirations later than the expiry-lateness bound";
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

// The --follow loop asks again at once after a page the node held for its whole long-poll (nothing was applied
// meanwhile: here, an idle cluster whose leader appends idle time entries only once a minute). Each round waits for
// the end of a long-poll on node 2 (its mayfly_requests_total{op="change_feed"} grows when the request is answered),
// writes an item at once, and measures from the write's acknowledgement to the line's arrival: a reader that pauses
// after an empty held page (it did, 200 ms) shows the write only after its pause; one that asks again at once, a few
// ms after the follower applied it. The median of 5 rounds, so a one-off stall of the machine does not decide.
TEST(ChangeFeed, FollowAsksAgainAtOnceAfterALongPollThatEndedEmpty) {
  Cluster cluster({.name = "feed-repoll", .extra_flags = {"--time-entry-ms", "60000"}, .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "fdb"}).status(), 201);
  ASSERT_EQ(cluster.cli({"container", "create", "fdb", "c", "--pk", "/pk", "--change-feed", "on"}).status(), 201);
  const std::string errors = cluster.dir() + "/repoll.err";
  FollowReader reader({MAYFLY_IT_CLI_PATH, "--endpoints", cluster.endpoint(2), "--key-file", cluster.admin_key_file(),
                       "changefeed", "fdb", "c", "--from", "now", "--follow"},
                      errors);
  ASSERT_TRUE(reader.started()) << "cannot start " << MAYFLY_IT_CLI_PATH;
  auto answered = [&] {
    const std::optional<Scrape> scrape = cluster.scrape(2);
    return scrape ? scrape->sum("mayfly_requests_total", {{"op", "change_feed"}}) : -1.0;
  };
  client::Client client(cluster.client_options());
  std::vector<double> delays;
  for (int round = 0; round < 5; ++round) {
    const double before = answered();
    ASSERT_TRUE(wait_until([&] { return answered() > before; }, milliseconds(5000), milliseconds(1)))
        << "no long-poll of the reader ended on node 2 within 5 s";
    const std::string id = "r" + std::to_string(round);
    const Response written = client.execute(item_write(Op::kCreateItem, "fdb", "c", R"({"id":")" + id +
                                                                                       R"(","pk":"p"})"));
    const int64_t acknowledged = wall_micros();
    ASSERT_EQ(written.status, 201) << written.message;
    ASSERT_TRUE(wait_until([&] { return reader.count() > static_cast<size_t>(round); }, milliseconds(5000),
                           milliseconds(1)))
        << "the reader never printed " << id;
    const FollowReader::Line line = reader.lines().back();
    EXPECT_EQ(bj::parse(line.text).at("id").as_string(), id) << line.text;
    delays.push_back(static_cast<double>(line.arrived_us - acknowledged) / 1000.0);
  }
  const double median = percentile(delays, 50);
  std::fprintf(stderr, "[feed-repoll] write acknowledged -> line arrived, ms:");
  for (double delay : delays) std::fprintf(stderr, " %.1f", delay);
  std::fprintf(stderr, " (median %.1f)\n", median);
  EXPECT_LE(median, testing_env::scaled(100.0)) << "the reader paused after a long-poll that ended empty";
  const std::optional<int> status = reader.interrupt(milliseconds(10000));
  ASSERT_TRUE(status.has_value()) << "the reader did not end on SIGINT";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "wait status " << *status;
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

}  // namespace
}  // namespace mayfly::it
