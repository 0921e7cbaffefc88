// The virtual clock (docs/ttl.md, "Virtual clock") on real mayflyd processes: replicated time stands still until
// `mayfly cluster advance-clock`, an advance expires exactly the items whose instants it passed on every node, writes
// are stamped with the virtual time, advance-clock is refused on a real-clock cluster and with a bad duration, and a
// node whose --clock disagrees with its data directory or with its peers is refused. Legal holds too: held items outlive
// their instants on every node until the release (LegalHolds).
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

namespace bj = boost::json;
using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

constexpr int64_t kSecond = 1'000'000;

// Starts every node with --clock virtual (per-node flags, so a test can later start one node otherwise).
bool start_virtual(Cluster& cluster) {
  for (size_t n = 1; n <= cluster.size(); ++n) cluster.set_node_flags(n, {"--clock", "virtual"});
  return cluster.start();
}

// Runs mayflyd as node n of `cluster` with `flags` in the foreground (it is expected to refuse to start); returns its
// exit status and output.
std::pair<int, std::string> run_refused_node(Cluster& cluster, size_t n, const std::string& flags) {
  std::string peers;
  for (size_t i = 1; i <= cluster.size(); ++i) {
    peers += (peers.empty() ? "" : ",") + std::to_string(i) + "=" + cluster.endpoint(i);
  }
  const std::string command = std::string("timeout 20 ") + default_mayflyd() + " --id " + std::to_string(n) +
                              " --listen " + cluster.endpoint(n) + " --peers " + peers + " --data " +
                              cluster.data_dir(n) + " " + flags + " 2>&1";
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, got);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

Request item_write(const std::string& body) {
  Request request;
  request.operation = api::make_operation(Op::kCreateItem);
  request.database = "vdb";
  request.container = "c";
  test::body_of(request) = body;
  return request;
}

Request item_read(const std::string& id, size_t node, const std::string& session_token) {
  Request request;
  request.operation = api::make_operation(Op::kReadItem);
  request.database = "vdb";
  request.container = "c";
  test::set_partition_key(request, "\"p\"");
  test::id_of(request) = id;
  request.endpoint = node;
  request.options.consistency = Consistency::kSession;
  request.options.session_token = session_token;
  return request;
}

struct Written {
  std::string id;
  int64_t ts = 0;
  std::optional<int64_t> expires_at;  // seconds; absent: never expires
};

// advance-clock through the CLI; returns the virtual time (µs) it reached and its session token.
std::pair<int64_t, std::string> advance(Cluster& cluster, const std::string& duration) {
  const CliResult r = cluster.cli({"cluster", "advance-clock", duration});
  EXPECT_EQ(r.status(), 200) << r.describe();
  if (r.body() == nullptr || !r.body()->is_object()) return {0, ""};
  return {r.body()->as_object().at("virtualTimeMicros").as_int64(), r.session_token()};
}

// Every node's answer for every item, at the given session token: alive exactly when its instant lies after `now`.
void expect_alive_exactly_before_expiry(Cluster& cluster, client::Client& reader, const std::vector<Written>& items,
                                        int64_t now_micros, const std::string& token, const std::string& when) {
  for (size_t node = 1; node <= cluster.size(); ++node) {
    for (const Written& item : items) {
      const bool alive = !item.expires_at || *item.expires_at * kSecond > now_micros;
      const Response read = reader.execute(item_read(item.id, node, token));
      EXPECT_EQ(read.status, alive ? 200 : 404)
          << when << ": item " << item.id << " on node " << node << " (expiresAt "
          << (item.expires_at ? std::to_string(*item.expires_at) : "never") << ", virtual now " << now_micros
          << " µs): " << read.message;
    }
  }
}

TEST(VirtualClock, AdvanceExpiresExactlyThePassedItemsOnEveryNode) {
  Cluster cluster({.name = "vclock"});
  ASSERT_TRUE(start_virtual(cluster));
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "vdb"}).status(), 201);
  ASSERT_EQ(cluster.cli({"container", "create", "vdb", "c", "--pk", "/pk", "--default-ttl", "100"}).status(), 201);

  client::Client writer(cluster.client_options());
  // Instants at +30, +60, +90, +91 (own ttl), +100 (inherited), never (-1).
  std::vector<Written> items;
  std::string token;
  for (const auto& [id, ttl] : std::vector<std::pair<std::string, std::string>>{
           {"t30", ",\"ttl\":30"}, {"t60", ",\"ttl\":60"}, {"t90", ",\"ttl\":90"}, {"t91", ",\"ttl\":91"},
           {"inherit", ""}, {"never", ",\"ttl\":-1"}}) {
    const Response created = writer.execute(item_write("{\"id\":\"" + id + "\",\"pk\":\"p\"" + ttl + "}"));
    ASSERT_EQ(created.status, 201) << created.message;
    const bj::object body = bj::parse(created.body).as_object();
    Written item{id, body.at("_ts").as_int64(), std::nullopt};
    if (const bj::value* e = body.if_contains("_expiresAt")) item.expires_at = e->as_int64();
    items.push_back(item);
    token = created.session_token;
  }
  ASSERT_EQ(items[0].expires_at, items[0].ts + 30);
  ASSERT_EQ(items[4].expires_at, items[4].ts + 100);
  ASSERT_FALSE(items[5].expires_at.has_value());

  // Frozen: real time passes (200 ms at a time, bounded), replicated time does not (beyond 1 µs per entry).
  const uint64_t leader = cluster.wait_for_leader();
  const std::optional<NodeStatus> before = cluster.status(leader);
  ASSERT_TRUE(before.has_value());
  const int64_t wall_before = wall_micros();
  ASSERT_TRUE(wait_until([&] { return wall_micros() - wall_before >= 1'500'000; }, milliseconds(5000),
                         milliseconds(200)));
  const std::optional<NodeStatus> after = cluster.status(leader);
  ASSERT_TRUE(after.has_value());
  EXPECT_LE(after->applied_time_micros - before->applied_time_micros, 1000)
      << "replicated time moved by itself on a virtual clock";
  EXPECT_LE(after->applied - before->applied, 10u) << "a virtual clock leader appended idle time entries";
  expect_alive_exactly_before_expiry(cluster, writer, items, before->applied_time_micros, token, "before any advance");
  for (const Written& item : items) {
    EXPECT_EQ(writer.execute(item_read(item.id, 1, token)).status, 200) << item.id << " expired without an advance";
  }

  // +60 s: t30 and t60 are gone everywhere (E = _ts + 60 s lies below the new time), the rest alive.
  const auto [t1, token1] = advance(cluster, "60s");
  ASSERT_GE(t1, after->applied_time_micros + 60 * kSecond);
  ASSERT_LT(t1, after->applied_time_micros + 60 * kSecond + 1000);
  expect_alive_exactly_before_expiry(cluster, writer, items, t1, token1, "after +60s");
  EXPECT_EQ(writer.execute(item_read("t60", 2, token1)).status, 404);
  EXPECT_EQ(writer.execute(item_read("t90", 3, token1)).status, 200);

  // A write is stamped with the virtual time.
  const Response fresh = writer.execute(item_write("{\"id\":\"fresh\",\"pk\":\"p\",\"ttl\":5}"));
  ASSERT_EQ(fresh.status, 201) << fresh.message;
  const int64_t fresh_ts = bj::parse(fresh.body).as_object().at("_ts").as_int64();
  EXPECT_GE(fresh_ts * kSecond + kSecond, t1 + 1) << "_ts must be the virtual time";
  EXPECT_LE(fresh_ts * kSecond, t1 + 1000) << "_ts must be the virtual time";
  items.push_back(Written{"fresh", fresh_ts, fresh_ts + 5});

  // 31000ms more (91 s in all): t90 and t91 gone, the inherited one (+100) and `never` alive; fresh (+5 s) gone.
  const auto [t2, token2] = advance(cluster, "31000ms");
  ASSERT_GE(t2, t1 + 31 * kSecond);
  expect_alive_exactly_before_expiry(cluster, writer, items, t2, token2, "after +91s");
  EXPECT_EQ(writer.execute(item_read("t91", 1, token2)).status, 404);
  EXPECT_EQ(writer.execute(item_read("inherit", 1, token2)).status, 200);

  // A day: only `never` is left, on every node, also in the read feed.
  const auto [t3, token3] = advance(cluster, "1d");
  expect_alive_exactly_before_expiry(cluster, writer, items, t3, token3, "after +1d");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    const CliResult list = cluster.cli({"--consistency", "session", "--session-token", token3, "item", "list", "vdb",
                                        "c"},
                                       node);
    ASSERT_EQ(list.status(), 200) << list.describe();
    ASSERT_TRUE(list.body() != nullptr && list.body()->is_array()) << list.describe();
    ASSERT_EQ(list.body()->as_array().size(), 1u) << list.describe();
    EXPECT_EQ(list.body()->as_array()[0].as_object().at("id").as_string(), "never");
  }

  // Queries see `_expiresAt` and the same expiry: nothing with an instant at or before t3 is left, and the one
  // item left has none.
  for (size_t node = 1; node <= cluster.size(); ++node) {
    const CliResult due = cluster.cli({"--session-token", token3, "query", "vdb", "c",
                                       "SELECT VALUE c.id FROM c WHERE c._expiresAt <= @t", "--param",
                                       "@t=" + std::to_string(t3 / kSecond)},
                                      node);
    ASSERT_EQ(due.status(), 200) << due.describe();
    EXPECT_TRUE(due.body()->as_array().empty()) << due.describe();
    const CliResult forever = cluster.cli({"--session-token", token3, "query", "vdb", "c",
                                           "SELECT VALUE c.id FROM c WHERE NOT IS_DEFINED(c._expiresAt)"},
                                          node);
    ASSERT_EQ(forever.status(), 200) << forever.describe();
    EXPECT_EQ(bj::serialize(*forever.body()), "[\"never\"]") << forever.describe();
  }

  // A new leader keeps the virtual time: it stamps after the log's time, never with its wall clock.
  const uint64_t old_leader = cluster.wait_for_leader();
  const uint64_t next_leader = old_leader == 1 ? 2 : 1;
  ASSERT_TRUE(cluster.transfer_leader(next_leader));
  const Response after_failover = writer.execute(item_write("{\"id\":\"late\",\"pk\":\"p\",\"ttl\":30}"));
  ASSERT_EQ(after_failover.status, 201) << after_failover.message;
  const int64_t late_ts = bj::parse(after_failover.body).as_object().at("_ts").as_int64();
  EXPECT_LE(late_ts * kSecond, t3 + 1000) << "the new leader stamped its wall clock";
  EXPECT_GE(late_ts * kSecond + kSecond, t3 + 1);
  const auto [t4, token4] = advance(cluster, "30s");
  EXPECT_GE(t4, t3 + 30 * kSecond);
  EXPECT_EQ(writer.execute(item_read("late", 3, token4)).status, 404);
  EXPECT_EQ(writer.execute(item_read("never", 3, token4)).status, 200);
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_TRUE(cluster.stop_node(n));
}

TEST(VirtualClock, BadDurationsAre400AndChangeNothing) {
  Cluster cluster({.name = "vclock-bad"});
  ASSERT_TRUE(start_virtual(cluster));
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const std::optional<NodeStatus> before = cluster.status(leader);
  ASSERT_TRUE(before.has_value());
  for (const std::string bad : {"0s", "0", "-5s", "-1", "abc", "5x", "1.5s", "", "s", "9999999999999s", "90 s"}) {
    const CliResult r = cluster.cli({"cluster", "advance-clock", bad});
    EXPECT_EQ(r.status(), 400) << "'" << bad << "': " << r.describe();
    EXPECT_NE(r.message().find("positive duration"), std::string::npos) << r.describe();
  }
  // Admin only.
  const std::string readwrite = cluster.write_file("rw.key", cluster.readwrite_key() + "\n");
  const CliResult refused = cluster.cli({"--key-file", readwrite, "cluster", "advance-clock", "90s"});
  EXPECT_EQ(refused.status(), 403) << refused.describe();
  const std::optional<NodeStatus> after = cluster.status(leader);
  ASSERT_TRUE(after.has_value());
  EXPECT_LT(after->applied_time_micros - before->applied_time_micros, kSecond) << "a refused advance moved time";
  // From a follower: forwarded to the leader like other admin requests.
  const size_t follower = leader == 1 ? 2 : 1;
  const CliResult forwarded = cluster.cli({"cluster", "advance-clock", "2s"}, follower);
  EXPECT_EQ(forwarded.status(), 200) << forwarded.describe();
  const std::optional<NodeStatus> moved = cluster.status(leader);
  ASSERT_TRUE(moved.has_value());
  EXPECT_GE(moved->applied_time_micros - after->applied_time_micros, 2 * kSecond);
}

TEST(VirtualClock, RefusedOnARealClockCluster) {
  Cluster cluster({.name = "vclock-real"});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  for (size_t node = 1; node <= cluster.size(); ++node) {
    const CliResult r = cluster.cli({"cluster", "advance-clock", "90s"}, node);
    EXPECT_EQ(r.status(), 412) << r.describe();
    EXPECT_NE(r.message().find("real clock"), std::string::npos) << r.describe();
  }
  // Time goes on with the wall clock (not 90 s ahead of it).
  const std::optional<NodeStatus> status = cluster.status(leader);
  ASSERT_TRUE(status.has_value());
  EXPECT_LT(status->applied_time_micros, wall_micros() + 5 * kSecond);
}

TEST(VirtualClock, ANodeWhoseClockDisagreesIsRefused) {
  Cluster cluster({.name = "vclock-mixed"});
  ASSERT_TRUE(start_virtual(cluster));
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"cluster", "advance-clock", "10s"}).status(), 200);

  // Its data directory remembers virtual: a restart with --clock real stops at once with the fix in the log.
  const uint64_t leader = cluster.wait_for_leader();
  const size_t restarted = leader == 3 ? 2 : 3;
  ASSERT_TRUE(cluster.stop_node(restarted));
  const auto [exit_code, output] = run_refused_node(cluster, restarted, "--clock real");
  EXPECT_EQ(exit_code, 2) << output;
  EXPECT_NE(output.find("was created with --clock virtual"), std::string::npos) << output;
  // The default (real) too.
  EXPECT_EQ(run_refused_node(cluster, restarted, "").first, 2);
  cluster.set_node_flags(restarted, {"--clock", "real"});

  // A fresh node with --clock real (its own new data directory) is refused by the virtual peers, and says so.
  cluster.wipe_node(restarted);
  ASSERT_TRUE(cluster.start_node(restarted));
  // (wait_for_leader wants every running node to agree, and the refused one knows no leader.)
  uint64_t now_leader = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        for (size_t n = 1; n <= cluster.size(); ++n) {
          if (n == restarted) continue;
          const std::optional<NodeStatus> seen = cluster.status(n);
          if (seen && seen->role == "leader") now_leader = n;
        }
        return now_leader != 0;
      },
      milliseconds(10000)));
  EXPECT_TRUE(wait_until(
      [&] {
        return cluster.log_text(now_leader).find("runs with --clock real, this node with --clock virtual") !=
                   std::string::npos ||
               cluster.log_text(restarted).find("--clock") != std::string::npos;
      },
      milliseconds(10000)))
      << "no node said why the real-clock node was refused";
  // The cluster still works on its two virtual nodes, and the refused node never applies their entries.
  const CliResult created = cluster.cli({"db", "create", "after"});
  ASSERT_EQ(created.status(), 201) << created.describe();
  const std::optional<NodeStatus> refused = cluster.status(restarted);
  ASSERT_TRUE(refused.has_value());
  EXPECT_LT(refused->applied, std::stoull(created.session_token()));
  EXPECT_EQ(cluster.cli({"cluster", "advance-clock", "1s"}, now_leader).status(), 200);
  const std::optional<NodeStatus> refused_view = cluster.status(restarted);
  ASSERT_TRUE(refused_view.has_value());
  EXPECT_NE(refused_view->role, "leader");
}

// The dry-run and the guard of a defaultTtl change (docs/ttl.md, "Containers"), on a virtual clock so that the figures
// and the change are at the same replicated time: the dry-run's figures are what the change then does on every node,
// the guard refuses (412, nothing changed) above 10 % expired at once, and the forced change applies.
TEST(TtlChangeGuard, DryRunEqualsTheChangeAndTheGuardRefusesUnlessForced) {
  Cluster cluster({.name = "ttl-guard"});
  ASSERT_TRUE(start_virtual(cluster));
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(cluster.cli({"db", "create", "vdb"}).status(), 201);
  ASSERT_EQ(cluster.cli({"container", "create", "vdb", "c", "--pk", "/pk", "--default-ttl", "-1"}).status(), 201);
  client::Client writer(cluster.client_options());
  std::vector<Written> items;
  auto write = [&](const std::string& id, const std::string& extra) {
    const Response created = writer.execute(item_write("{\"id\":\"" + id + "\",\"pk\":\"p\"" + extra + "}"));
    ASSERT_EQ(created.status, 201) << created.message;
    items.push_back(Written{id, bj::parse(created.body).as_object().at("_ts").as_int64(), std::nullopt});
  };
  for (int i = 0; i < 20; ++i) write("old" + std::to_string(i), "");
  write("oldnever", ",\"ttl\":-1");
  write("oldown", ",\"ttl\":7200");  // own ttl: a defaultTtl change does not move it
  advance(cluster, "3600s");
  for (int i = 0; i < 5; ++i) write("new" + std::to_string(i), "");

  // Dry run, counted by hand: 20 old inheriting, 1 never, 1 own ttl, 5 new inheriting = 27 live.
  const CliResult dry = cluster.cli({"container", "set", "vdb", "c", "--default-ttl", "1800", "--dry-run"});
  ASSERT_EQ(dry.status(), 200) << dry.describe();
  const bj::object& figures = dry.body()->as_object();
  auto count = [&](const char* name) { return figures.at(name).as_object().at("items").as_int64(); };
  EXPECT_EQ(count("live"), 27);
  EXPECT_EQ(count("expiredAtOnce"), 20);      // inherited, written an hour ago: 30 min is past
  EXPECT_EQ(count("expiredWithinHour"), 26);  // + the 5 new ones (30 min) + oldown (2 h after its write)
  EXPECT_EQ(count("expiredWithinDay"), 26);   // oldnever never
  EXPECT_GT(figures.at("expiredAtOnce").as_object().at("bytes").as_int64(), 0);
  // A dry run changes nothing.
  const CliResult unchanged = cluster.cli({"container", "get", "vdb", "c"});
  EXPECT_EQ(unchanged.body()->as_object().at("defaultTtl").as_int64(), -1) << unchanged.describe();

  // The guard: 20 of 27 at once is over 10 %: 412 with the figures, nothing changed.
  const CliResult refused = cluster.cli({"container", "set", "vdb", "c", "--default-ttl", "1800"});
  EXPECT_EQ(refused.status(), 412) << refused.describe();
  EXPECT_NE(refused.message().find("expire 20 of the container's 27 live items"), std::string::npos)
      << refused.describe();
  EXPECT_NE(refused.message().find("--force"), std::string::npos) << refused.describe();
  const CliResult still = cluster.cli({"container", "get", "vdb", "c"});
  EXPECT_EQ(still.body()->as_object().at("defaultTtl").as_int64(), -1) << still.describe();
  EXPECT_EQ(writer.execute(item_read("old0", 2, "")).status, 200);

  // Forced: applies, and expires exactly what the dry run said, on every node.
  const CliResult forced = cluster.cli({"container", "set", "vdb", "c", "--default-ttl", "1800", "--force"});
  ASSERT_EQ(forced.status(), 200) << forced.describe();
  auto alive_everywhere = [&](const std::string& token) {
    int64_t alive_count = -1;
    for (size_t node = 1; node <= cluster.size(); ++node) {
      int64_t here = 0;
      for (const Written& item : items) here += writer.execute(item_read(item.id, node, token)).status == 200;
      if (alive_count >= 0) {
        EXPECT_EQ(here, alive_count) << "node " << node << " disagrees";
      }
      alive_count = here;
    }
    return alive_count;
  };
  EXPECT_EQ(27 - alive_everywhere(forced.session_token()), count("expiredAtOnce"));
  const auto [t1, token1] = advance(cluster, "3600s");
  EXPECT_EQ(27 - alive_everywhere(token1), count("expiredWithinHour"));
  const auto [t2, token2] = advance(cluster, "23h");
  EXPECT_EQ(27 - alive_everywhere(token2), count("expiredWithinDay"));

  // Below the guard: 1 of 11 live (9 %) goes through without --force.
  ASSERT_EQ(cluster.cli({"container", "create", "vdb", "small", "--pk", "/pk", "--default-ttl", "-1"}).status(), 201);
  Request old_one = item_write(R"({"id":"o","pk":"p"})");
  old_one.container = "small";
  ASSERT_EQ(writer.execute(old_one).status, 201);
  advance(cluster, "100s");
  for (int i = 0; i < 10; ++i) {
    Request young = item_write("{\"id\":\"y" + std::to_string(i) + "\",\"pk\":\"p\"}");
    young.container = "small";
    ASSERT_EQ(writer.execute(young).status, 201);
  }
  const CliResult small = cluster.cli({"container", "set", "vdb", "small", "--default-ttl", "50"});
  EXPECT_EQ(small.status(), 200) << small.describe();
  // Bad input to a dry run: 400, as for the change itself.
  EXPECT_EQ(cluster.cli({"container", "set", "vdb", "c", "--default-ttl", "0", "--dry-run"}).status(), 400);
  EXPECT_EQ(cluster.cli({"container", "set", "vdb", "c", "--dry-run"}).status(), 400);
  EXPECT_EQ(cluster.cli({"container", "set", "vdb", "nope", "--default-ttl", "5", "--dry-run"}).status(), 404);
}

// Legal holds on real processes (docs/retention.md, "Legal holds"): only a compliance key (or admin) sets and
// releases them, the held item outlives its instant on every node while the one beside it expires, a readwrite key's
// delete is refused naming the hold, the release expires it on every node, and the audit names the compliance key
// even when the request went through a follower.
TEST(LegalHolds, AComplianceKeyHoldsAnItemPastItsInstantOnEveryNodeUntilItReleasesIt) {
  Cluster cluster({.name = "holds"});
  ASSERT_TRUE(start_virtual(cluster));
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  const std::string compliance_key = "compliance-key-0123456789abcdef0123";
  {
    // Add a compliance key named "legal" (the nodes re-read the file).
    const std::string staged = cluster.keys_file() + ".new";
    std::ifstream in(cluster.keys_file());
    std::stringstream text;
    text << in.rdbuf() << "compliance " << compliance_key << " legal\n";
    std::ofstream(staged, std::ios::trunc) << text.str();
    std::filesystem::permissions(staged, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::replace);
    std::filesystem::rename(staged, cluster.keys_file());
  }
  const std::string compliance_file = cluster.write_file("legal.key", compliance_key + "\n");
  const std::string readwrite_file = cluster.write_file("rw.key", cluster.readwrite_key() + "\n");
  for (const std::string& file : {compliance_file, readwrite_file}) {
    std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::replace);
  }
  ASSERT_EQ(cluster.cli({"db", "create", "vdb"}).status(), 201);
  ASSERT_EQ(cluster.cli({"container", "create", "vdb", "c", "--pk", "/pk", "--default-ttl", "60"}).status(), 201);
  client::Client writer(cluster.client_options());
  for (const std::string id : {"held", "free"}) {
    ASSERT_EQ(writer.execute(item_write("{\"id\":\"" + id + "\",\"pk\":\"p\"}")).status, 201);
  }
  const std::vector<std::string> hold_item = {"hold", "set", "vdb", "c", "--id", "case-17", "--pk", "p",
                                              "--item", "held", "--reason", "Smith v. Acme"};
  // A readwrite key may not set a hold; the compliance key may (through node 2, whichever node leads), once the
  // nodes have read the new keys file.
  std::vector<std::string> args = {"--key-file", readwrite_file};
  args.insert(args.end(), hold_item.begin(), hold_item.end());
  const CliResult refused = cluster.cli(args);
  EXPECT_EQ(refused.status(), 403) << refused.describe();
  args = {"--key-file", compliance_file};
  args.insert(args.end(), hold_item.begin(), hold_item.end());
  CliResult held;
  ASSERT_TRUE(wait_until([&] { return (held = cluster.cli(args, 2)).status() != 401; }, milliseconds(5000)));
  ASSERT_EQ(held.status(), 201) << held.describe();
  // The compliance key cannot write items; the readwrite key cannot delete the held one.
  EXPECT_EQ(cluster.cli({"--key-file", compliance_file, "item", "upsert", "vdb", "c", R"({"id":"x","pk":"p"})"})
                .status(),
            403);
  const CliResult delete_held =
      cluster.cli({"--key-file", readwrite_file, "item", "delete", "vdb", "c", "--pk", "p", "--id", "held"});
  EXPECT_EQ(delete_held.status(), 409) << delete_held.describe();
  EXPECT_NE(delete_held.message().find("case-17"), std::string::npos) << delete_held.describe();

  // Past both instants: the held item is there on every node, with its would-be instant and the hold.
  auto [now, token] = advance(cluster, "120s");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    const Response held_read = writer.execute(item_read("held", node, token));
    ASSERT_EQ(held_read.status, 200) << "node " << node << ": " << held_read.message;
    const bj::object body = bj::parse(held_read.body).as_object();
    EXPECT_EQ(bj::serialize(body.at("_hold")), R"(["case-17"])");
    EXPECT_LT(body.at("_expiresAt").as_int64() * kSecond, now);
    EXPECT_EQ(writer.execute(item_read("free", node, token)).status, 404) << "node " << node;
  }
  // The container's defaultTtl cannot change while the hold is on (the same one again is accepted).
  const CliResult ttl_change = cluster.cli({"container", "set", "vdb", "c", "--default-ttl", "30"});
  EXPECT_EQ(ttl_change.status(), 409) << ttl_change.describe();
  EXPECT_NE(ttl_change.message().find("case-17"), std::string::npos) << ttl_change.describe();
  EXPECT_EQ(cluster.cli({"container", "set", "vdb", "c", "--default-ttl", "60"}).status(), 200);
  // Queries show the hold too (the query engine's reader), and a filter on it works like any property.
  const CliResult queried = cluster.cli({"--consistency", "strong", "-o", "json", "query", "vdb", "c",
                                         "SELECT c.id, c._hold FROM c WHERE IS_DEFINED(c._hold)"});
  ASSERT_EQ(queried.status(), 200) << queried.describe();
  ASSERT_TRUE(queried.body() != nullptr) << queried.describe();
  EXPECT_EQ(bj::serialize(*queried.body()), R"([{"id":"held","_hold":["case-17"]}])") << queried.describe();
  const CliResult listed = cluster.cli({"--key-file", compliance_file, "-o", "json", "hold", "list"});
  ASSERT_EQ(listed.status(), 200) << listed.describe();
  ASSERT_TRUE(listed.body() != nullptr && listed.body()->is_array() && listed.body()->as_array().size() == 1)
      << listed.describe();
  EXPECT_EQ(listed.body()->as_array()[0].as_object().at("setBy").as_string(), "legal");

  // Released through node 3: gone on every node from the release on.
  const CliResult released = cluster.cli(
      {"--key-file", compliance_file, "hold", "release", "vdb", "c", "case-17", "--reason", "settled"}, 3);
  ASSERT_EQ(released.status(), 200) << released.describe();
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_EQ(writer.execute(item_read("held", node, released.session_token())).status, 404) << "node " << node;
  }
  const CliResult audit = cluster.cli({"--key-file", compliance_file, "-o", "json", "hold", "audit"});
  ASSERT_EQ(audit.status(), 200) << audit.describe();
  ASSERT_TRUE(audit.body() != nullptr && audit.body()->is_array() && audit.body()->as_array().size() == 2)
      << audit.describe();
  for (const bj::value& entry : audit.body()->as_array()) {
    EXPECT_EQ(entry.as_object().at("actor").as_string(), "legal") << bj::serialize(entry);
  }
  EXPECT_EQ(audit.body()->as_array()[1].as_object().at("reason").as_string(), "settled");
  // A readwrite key may not read the audit either.
  EXPECT_EQ(cluster.cli({"--key-file", readwrite_file, "hold", "audit"}).status(), 403);
}

}  // namespace
}  // namespace mayfly::it
