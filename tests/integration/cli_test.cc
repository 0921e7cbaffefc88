// The `mayfly` CLI against a real 3-node cluster: `item export` and `item import` round-trip a container item by item
// (every partition, field by field), import's failure summary and exit code, an import with --create while the
// leader is SIGKILLed (exactly-once: no item fails, none is a 409), and the tables of `cluster status -o table` (every
// member, the leader, an unreachable one) and `item list -o table`.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;

// Every item of a container, read with strong consistency, by id, without the server-assigned properties.
std::map<std::string, boost::json::object> items_of(client::Client& client, const std::string& container) {
  Request list = container_req(Op::kListItems, "d", container);
  list.options.consistency = client::Consistency::kStrong;
  list.options.max_items = 100;
  client::PageIterator pages(client, list);
  std::map<std::string, boost::json::object> out;
  for (int page = 0; pages.has_more() && page < 1000; ++page) {
    const client::Response response = pages.next();
    EXPECT_EQ(response.status, 200) << response.message;
    const boost::json::value body = parse_json(response.body);
    if (!body.is_array()) break;
    for (const boost::json::value& item : body.as_array()) {
      boost::json::object fields = item.as_object();
      for (const char* system : {"_rid", "_etag", "_ts", "_expiresAt"}) fields.erase(system);
      out[std::string(fields.at("id").as_string())] = std::move(fields);
    }
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

TEST(IntegrationCli, ExportImportRoundTripAndFailureSummary) {
  Cluster cluster({.name = "cli-transfer"});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u) << "no leader elected";
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
  ASSERT_EQ(client.execute(create_container("d", "src", "/user", "-1")).status, 201);
  ASSERT_EQ(client.execute(create_container("d", "dst", "/user", "-1")).status, 201);

  const uint64_t seed = test_seed();
  std::cerr << "seed " << seed << " (MAYFLY_IT_SEED)\n";
  std::mt19937_64 random(seed);
  constexpr int kItems = 1200;  // more than one export page (1000)
  std::vector<Request> writes;
  for (int i = 0; i < kItems; ++i) {
    const std::string user = "u" + std::to_string(random() % 37);
    std::string json = "{\"id\":\"item-" + std::to_string(i) + "\",\"user\":\"" + user + "\",\"price\":" +
                       std::to_string(random() % 1000) + ".50,\"name\":\"caf\xC3\xA9 \\\"" + std::to_string(i) +
                       "\\\"\",\"tags\":[\"a\",{\"n\":" + std::to_string(i) + "}]";
    if (i % 7 == 0) json += ",\"ttl\":86400";
    writes.push_back(item_write(Op::kCreateItem, "d", "src", json + "}"));
  }
  for (size_t begin = 0; begin < writes.size(); begin += 100) {
    const std::vector<Request> batch(writes.begin() + begin, writes.begin() + std::min(begin + 100, writes.size()));
    for (const client::Response& response : client.execute_all(batch)) ASSERT_EQ(response.status, 201) << response.message;
  }

  // Export to a file: one line per item, system properties kept.
  const std::string exported = cluster.dir() + "/src.jsonl";
  const CliResult export_run = cluster.cli({"item", "export", "d", "src", "--out", exported});
  ASSERT_EQ(export_run.exit_code, 0) << export_run.describe();
  EXPECT_NE(export_run.err.find("exported 1200 items from d/src to " + exported), std::string::npos)
      << export_run.describe();
  EXPECT_FALSE(std::ifstream(exported + ".partial").good()) << "the partial file must be renamed";
  std::ifstream file(exported);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::vector<std::string> lines = lines_of(text);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kItems));
  EXPECT_NE(lines[0].find("\"_etag\""), std::string::npos) << lines[0];
  // Every line is one stored item, field by field (escapes and UTF-8 intact).
  const auto source = items_of(client, "src");
  ASSERT_EQ(source.size(), static_cast<size_t>(kItems));
  for (const std::string& line : lines) {
    boost::json::value parsed = parse_json(line);
    ASSERT_TRUE(parsed.is_object()) << line;
    for (const char* system : {"_rid", "_etag", "_ts"}) EXPECT_TRUE(parsed.as_object().erase(system)) << line;
    parsed.as_object().erase("_expiresAt");  // on items with a ttl: _ts + ttl, so it differs after the import
    const auto found = source.find(std::string(parsed.as_object().at("id").as_string()));
    ASSERT_NE(found, source.end()) << line;
    EXPECT_EQ(parsed.as_object(), found->second) << line;
  }

  // Import into another container, 8 at a time: every item arrives, equal field by field.
  const CliResult import_run = cluster.cli({"item", "import", "d", "dst", exported, "--concurrency", "8"});
  ASSERT_EQ(import_run.exit_code, 0) << import_run.describe();
  ASSERT_TRUE(import_run.json.is_object()) << import_run.describe();
  EXPECT_EQ(import_run.json.at("imported"), kItems) << import_run.describe();
  EXPECT_EQ(import_run.json.at("failed"), 0) << import_run.describe();
  const auto copy = items_of(client, "dst");
  ASSERT_EQ(copy.size(), source.size());
  for (const auto& [id, fields] : source) {
    const auto found = copy.find(id);
    ASSERT_NE(found, copy.end()) << id << " was not imported";
    EXPECT_EQ(found->second, fields) << id;
  }

  // Again with --create: every line is a 409, summed up by status, exit 1, nothing changed.
  const CliResult again = cluster.cli({"item", "import", "d", "dst", exported, "--create"});
  EXPECT_EQ(again.exit_code, 1) << again.describe();
  ASSERT_TRUE(again.json.is_object()) << again.describe();
  EXPECT_EQ(again.json.at("imported"), 0);
  EXPECT_EQ(again.json.at("failed"), kItems);
  EXPECT_EQ(again.json.at("failuresByStatus").at("409"), kItems) << again.describe();
  EXPECT_NE(again.err.find("409 conflict"), std::string::npos) << again.describe();

  // Standard input, stripped export lines, a bad line and a write the server refuses: the good ones land.
  const CliResult stripped = cluster.cli({"item", "export", "d", "src", "--strip-system", "--quiet"});
  ASSERT_EQ(stripped.exit_code, 0) << stripped.describe();
  const std::vector<std::string> stripped_lines = lines_of(stripped.out);
  ASSERT_EQ(stripped_lines.size(), static_cast<size_t>(kItems));
  EXPECT_EQ(stripped.out.find("\"_rid\""), std::string::npos);
  const std::string input = stripped_lines[0] + "\nnot json\n{\"id\":\"bad/id\",\"user\":\"u\"}\n" +
                            "{\"id\":\"fresh\",\"user\":\"u1\"}\n";
  const CliResult mixed = cluster.cli({"item", "import", "d", "dst", "-"}, std::nullopt, input);
  EXPECT_EQ(mixed.exit_code, 1) << mixed.describe();
  EXPECT_EQ(mixed.json.at("imported"), 2) << mixed.describe();
  EXPECT_EQ(mixed.json.at("failuresByStatus").at("invalid"), 1) << mixed.describe();
  EXPECT_EQ(mixed.json.at("failuresByStatus").at("400"), 1) << mixed.describe();
  EXPECT_NE(mixed.err.find("line 2: invalid"), std::string::npos) << mixed.describe();
  EXPECT_NE(mixed.err.find("line 3: 400 bad request"), std::string::npos) << mixed.describe();
  EXPECT_EQ(items_of(client, "dst").size(), static_cast<size_t>(kItems + 1));

  // The table of a page of items names the partition key.
  const CliResult table = cluster.cli({"item", "list", "d", "dst", "--max-items", "5", "-o", "table"});
  EXPECT_EQ(table.exit_code, 0) << table.describe();
  EXPECT_NE(table.out.find("| PARTITION KEY |"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("5 items,"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("more: --continuation "), std::string::npos) << table.out;
}

// `item import --create` runs while the leader is killed: every write whose outcome the kill made unknown is re-sent
// by the exactly-once client and answered with its first outcome, so no line fails and none comes back as a 409.
TEST(IntegrationCli, ImportWithCreateSurvivesALeaderKill) {
  Cluster cluster({.name = "cli-import-kill"});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u) << "no leader elected";
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
  ASSERT_EQ(client.execute(create_container("d", "c", "/user")).status, 201);
  constexpr int kItems = 4000;
  std::string lines;
  for (int i = 0; i < kItems; ++i) {
    lines += "{\"id\":\"i" + std::to_string(i) + "\",\"user\":\"u" + std::to_string(i % 13) + "\"}\n";
  }
  const std::string input = cluster.write_file("items.jsonl", lines);
  const std::string output = cluster.dir() + "/import.out";
  const std::string errors = cluster.dir() + "/import.err";

  std::vector<std::string> argv = {MAYFLY_IT_CLI_PATH, "--endpoints", cluster.endpoints_csv(), "--key-file",
                                   cluster.admin_key_file(), "--timeout-ms", "30000", "item", "import", "d", "c",
                                   input, "--create", "--concurrency", "16"};
  const pid_t pid = spawn_to_files(argv, output, errors);
  ASSERT_GT(pid, 0) << "cannot start " << argv[0];

  // Kill the leader once a fifth of the items are in (the import is then in full flow), and bring it back.
  auto count = [&] {
    Request query = container_req(Op::kQuery, "d", "c");
    test::operation_of<api::Query>(query).sql = "SELECT VALUE COUNT(1) FROM c";
    query.options.consistency = client::Consistency::kEventual;
    query.endpoint = leader == 1 ? 2 : 1;
    const client::Response response = client.execute(query);
    const boost::json::value body = parse_json(response.body);
    return body.is_array() && !body.as_array().empty() && body.as_array()[0].is_int64() ? body.as_array()[0].as_int64()
                                                                                      : int64_t{0};
  };
  EXPECT_TRUE(wait_until([&] { return count() >= kItems / 5; }, milliseconds(60000), milliseconds(20)))
      << "the import did not get going";
  cluster.kill_node(leader);
  std::cerr << "killed leader " << leader << " at " << count() << " items\n";
  EXPECT_NE(cluster.wait_for_leader(), 0u) << "no new leader";
  ASSERT_TRUE(cluster.start_node(leader));

  int status = 0;
  const bool done = wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, milliseconds(120000));
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(done) << "the import did not finish within 120 s";
  std::ifstream out_file(output), err_file(errors);
  const std::string out((std::istreambuf_iterator<char>(out_file)), std::istreambuf_iterator<char>());
  const std::string err((std::istreambuf_iterator<char>(err_file)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out << err;
  const boost::json::value summary = parse_json(out);
  ASSERT_TRUE(summary.is_object()) << out << err;
  EXPECT_EQ(summary.at("imported"), kItems) << out << err;
  EXPECT_EQ(summary.at("failed"), 0) << out << err;
  EXPECT_EQ(items_of(client, "c").size(), static_cast<size_t>(kItems));
}

TEST(IntegrationCli, ClusterStatusTableListsEveryMember) {
  Cluster cluster({.name = "cli-status"});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u) << "no leader elected";
  auto row_of = [](const std::string& out, const std::string& endpoint) {
    const size_t at = out.find("| " + endpoint + " ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  const CliResult status = cluster.cli({"cluster", "status", "-o", "table"}, leader);
  ASSERT_EQ(status.exit_code, 0) << status.describe();
  EXPECT_NE(status.out.find("IS LEADER"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("APPLIED LAG"), std::string::npos) << status.out;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const std::string row = row_of(status.out, cluster.endpoint(n));
    ASSERT_FALSE(row.empty()) << "node " << n << " missing:\n" << status.out;
    EXPECT_NE(row.find(n == leader ? "| true " : "| false "), std::string::npos) << row;
    EXPECT_NE(row.find(n == leader ? "| leader " : "| follower "), std::string::npos) << row;
  }
  EXPECT_NE(status.out.find("3 members"), std::string::npos) << status.out;

  // A stopped follower is still listed, as unreachable.
  const size_t follower = leader == 1 ? 2 : 1;
  ASSERT_TRUE(cluster.stop_node(follower));
  const CliResult degraded = cluster.cli({"cluster", "status", "-o", "table"}, leader);
  ASSERT_EQ(degraded.exit_code, 0) << degraded.describe();
  const std::string row = row_of(degraded.out, cluster.endpoint(follower));
  ASSERT_FALSE(row.empty()) << degraded.out;
  EXPECT_NE(row.find("unreachable"), std::string::npos) << row;
}

}  // namespace
}  // namespace mayfly::it
