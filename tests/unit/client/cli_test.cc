// The `mayfly` command line: every command and flag parsed into the Request the library sends, usage errors (exit 2),
// and the one-line JSON output.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/cli.h"
#include "client/forecast_cli.h"
#include "tests/request_fields.h"

namespace mayfly::client {
namespace {

CliParse parse(const std::vector<std::string>& args, CliEnvironment environment = {}) {
  return parse_cli(args, environment);
}

// Parses a command line that must be valid and returns its request.
Request request_of(const std::vector<std::string>& args, CliEnvironment environment = {}) {
  const CliParse parsed = parse_cli(args, environment);
  EXPECT_TRUE(parsed.command.has_value()) << "exit " << parsed.exit_code << ": " << parsed.error;
  return parsed.command.has_value() ? parsed.command->request : Request{};
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& mentions,
                        CliEnvironment environment = {}) {
  std::string joined;
  for (const auto& arg : args) {
    joined += arg + " ";
  }
  const CliParse parsed = parse_cli(args, environment);
  EXPECT_FALSE(parsed.command.has_value()) << joined;
  EXPECT_EQ(parsed.exit_code, kExitUsage) << joined;
  EXPECT_NE(parsed.error.find(mentions), std::string::npos) << joined << "\nstderr: " << parsed.error;
}

TEST(CliParse, ClusterCommands) {
  EXPECT_EQ(request_of({"cluster", "status"}).kind(), Op::kClusterStatus);
  const Request add = request_of({"cluster", "add-member", "4", "10.0.0.4:7101"});
  EXPECT_EQ(add.kind(), Op::kAddMember);
  EXPECT_EQ(test::operation_of<api::AddMember>(add).id, 4u);
  EXPECT_EQ(test::operation_of<api::AddMember>(add).address, "10.0.0.4:7101");
  const Request remove = request_of({"cluster", "remove-member", "2"});
  EXPECT_EQ(remove.kind(), Op::kRemoveMember);
  EXPECT_EQ(test::operation_of<api::RemoveMember>(remove).id, 2u);
  const Request transfer = request_of({"cluster", "transfer-leader", "3"});
  EXPECT_EQ(transfer.kind(), Op::kTransferLeader);
  EXPECT_EQ(test::operation_of<api::TransferLeader>(transfer).id, 3u);
}

TEST(CliParse, AdvanceClockAndTtlChangeOptions) {
  const Request advance = request_of({"cluster", "advance-clock", "90s"});
  EXPECT_EQ(advance.kind(), Op::kAdvanceClock);
  // Validated by the server (400), like defaultTtl.
  EXPECT_EQ(test::operation_of<api::AdvanceClock>(advance).duration, "90s");
  expect_usage_error({"cluster", "advance-clock"}, "DURATION");
  const Request dry = request_of({"container", "set", "shop", "carts", "--default-ttl", "60", "--dry-run"});
  EXPECT_TRUE(test::settings_of(dry).dry_run);
  EXPECT_FALSE(test::settings_of(dry).force);
  const Request forced = request_of({"container", "set", "shop", "carts", "--default-ttl", "60", "--force"});
  EXPECT_TRUE(test::settings_of(forced).force);
  EXPECT_FALSE(test::settings_of(forced).dry_run);
  const Request plain = request_of({"container", "set", "shop", "carts", "--default-ttl", "60"});
  EXPECT_FALSE(test::settings_of(plain).force || test::settings_of(plain).dry_run);
}

TEST(CliParse, BackupCreate) {
  const CliParse parsed = parse({"backup", "create", "--out", "x.mfb", "--node", "2"});
  ASSERT_TRUE(parsed.command.has_value()) << parsed.error;
  EXPECT_EQ(parsed.command->request.kind(), Op::kBackupOpen);
  EXPECT_EQ(parsed.command->backup_out, "x.mfb");
  EXPECT_EQ(parsed.command->backup_node, 2u);
  EXPECT_EQ(parse({"backup", "create", "--out", "y.mfb"}).command->backup_node, 0u);
  expect_usage_error({"backup", "create"}, "--out");
  expect_usage_error({"backup", "create", "--out", "f", "--node", "0"}, "--node");
}

TEST(CliParse, ContainerForecast) {
  const CliParse parsed = parse({"container", "forecast", "shop", "carts", "--node", "2"});
  ASSERT_TRUE(parsed.command.has_value()) << parsed.error;
  EXPECT_EQ(parsed.command->request.kind(), Op::kContainerForecast);
  EXPECT_EQ(parsed.command->request.database, "shop");
  EXPECT_EQ(parsed.command->request.container, "carts");
  EXPECT_EQ(parsed.command->forecast_node, 2u);
  EXPECT_EQ(parse({"container", "forecast", "shop", "carts"}).command->forecast_node, 0u);  // every node
  EXPECT_FALSE(api::changes_state(Op::kContainerForecast));
  expect_usage_error({"container", "forecast", "shop"}, "CONTAINER");
  expect_usage_error({"container", "forecast", "shop", "carts", "--node", "0"}, "--node");
}

TEST(CliParse, ContainerChangeFeedSetting) {
  const Request on = request_of({"container", "create", "shop", "carts", "--pk", "/user", "--change-feed", "on",
                                 "--change-feed-retention", "600"});
  EXPECT_EQ(test::settings_of(on).change_feed, ContainerSettings::ChangeFeed::kOn);
  EXPECT_EQ(test::settings_of(on).change_feed_retention_seconds, 600u);
  const Request on_default = request_of({"container", "set", "shop", "carts", "--change-feed", "on"});
  EXPECT_EQ(test::settings_of(on_default).change_feed, ContainerSettings::ChangeFeed::kOn);
  EXPECT_EQ(test::settings_of(on_default).change_feed_retention_seconds, 0u);  // the leader's --changefeed-retention
  EXPECT_EQ(test::settings_of(request_of({"container", "set", "shop", "carts", "--change-feed", "off"})).change_feed,
            ContainerSettings::ChangeFeed::kOff);
  EXPECT_EQ(test::settings_of(request_of({"container", "set", "shop", "carts", "--indexing", "none"})).change_feed,
            ContainerSettings::ChangeFeed::kUnchanged);
  expect_usage_error({"container", "set", "shop", "carts", "--change-feed", "maybe"}, "--change-feed");
  expect_usage_error({"container", "set", "shop", "carts", "--change-feed-retention", "60"}, "--change-feed on");
  expect_usage_error({"container", "set", "shop", "carts", "--change-feed", "off", "--change-feed-retention", "60"},
                     "--change-feed on");
  expect_usage_error({"container", "set", "shop", "carts", "--change-feed", "on", "--change-feed-retention", "0"},
                     "--change-feed-retention");
  expect_usage_error(
      {"container", "set", "shop", "carts", "--change-feed", "on", "--change-feed-retention", "7776001"},
      "--change-feed-retention");
}

TEST(CliParse, Changefeed) {
  const CliParse parsed = parse({"changefeed", "shop", "carts"});
  ASSERT_TRUE(parsed.command.has_value()) << parsed.error;
  const Request plain = parsed.command->request;
  EXPECT_EQ(plain.kind(), Op::kReadChangeFeed);
  EXPECT_FALSE(api::changes_state(Op::kReadChangeFeed));
  EXPECT_EQ(plain.database, "shop");
  EXPECT_EQ(plain.container, "carts");
  // All, from the beginning, the server's page size, no wait.
  EXPECT_EQ(test::operation_of<ReadChangeFeed>(plain), ReadChangeFeed{});
  EXPECT_FALSE(parsed.command->follow);

  const CliParse follow = parse({"changefeed", "shop", "carts", "--mode", "latest", "--from", "now",
                                 "--only-expirations", "--max-items", "5", "--follow"});
  ASSERT_TRUE(follow.command.has_value()) << follow.error;
  const ReadChangeFeed& read = test::operation_of<ReadChangeFeed>(follow.command->request);
  EXPECT_EQ(read.mode, ReadChangeFeed::Mode::kLatest);
  EXPECT_EQ(read.from, ReadChangeFeed::From::kNow);
  EXPECT_TRUE(read.only_expirations);
  EXPECT_EQ(read.max_items, 5u);
  EXPECT_TRUE(follow.command->follow);

  const Request at = request_of({"changefeed", "shop", "carts", "--from", "1700000000.25"});
  EXPECT_EQ(test::operation_of<ReadChangeFeed>(at).from, ReadChangeFeed::From::kTime);
  EXPECT_EQ(test::operation_of<ReadChangeFeed>(at).time_micros, 1'700'000'000'250'000);
  const Request resumed = request_of({"changefeed", "shop", "carts", "--continuation", "01ab"});
  EXPECT_EQ(test::operation_of<ReadChangeFeed>(resumed).from, ReadChangeFeed::From::kContinuation);
  EXPECT_EQ(test::operation_of<ReadChangeFeed>(resumed).continuation, "01ab");
  EXPECT_TRUE(resumed.options.continuation.empty()) << "travels in the request, not in Options";

  expect_usage_error({"changefeed", "shop", "carts", "--from", "yesterday"}, "--from");
  expect_usage_error({"changefeed", "shop", "carts", "--from", "-5"}, "--from");
  expect_usage_error({"changefeed", "shop", "carts", "--from", "now", "--continuation", "01"}, "excludes");
  expect_usage_error({"changefeed", "shop", "carts", "--mode", "some"}, "--mode");
  expect_usage_error({"changefeed", "shop", "carts", "--max-items", "1001"}, "--max-items");
  expect_usage_error({"changefeed", "shop"}, "CONTAINER");
}

TEST(CliForecast, TextShowsTheSummaryAndOnlyTheBucketsWithItems) {
  std::string minutes;
  for (int i = 0; i < 60; ++i) {
    minutes += std::string(i ? "," : "") + (i == 3 ? R"({"items":12,"bytes":1200})" : R"({"items":0,"bytes":0})");
  }
  std::string hours = R"({"items":12,"bytes":1200})";
  for (int j = 1; j < 24; ++j) hours += j == 5 ? R"(,{"items":6,"bytes":3072})" : R"(,{"items":0,"bytes":0})";
  NodeForecast answer;
  answer.node = 2;
  answer.address = "127.0.0.1:7102";
  answer.response.status = 200;
  answer.response.body =
      R"({"node":2,"appliedIndex":57,"at":1764000000,"atMicros":1764000000000000,"defaultTtl":600,)"
      R"("expiring":{"hour":{"items":12,"bytes":1200},"day":{"items":18,"bytes":4272}},)"
      R"("backlog":{"items":3,"bytes":300},"capacity":{"itemsPerSecond":0.5,"source":"measured"},)"
      R"("projection":{"peakItems":12,"peakAtSeconds":180,"drainSeconds":null},"entriesRead":21,"truncated":true,)"
      R"("minutes":[)" + minutes + R"(],"hours":[)" + hours + "]}";
  const std::string text = forecast_text(answer);
  EXPECT_NE(text.find("node 2 (127.0.0.1:7102): applied index 57"), std::string::npos) << text;
  EXPECT_NE(text.find("backlog now   3 items (300 B)"), std::string::npos) << text;
  EXPECT_NE(text.find("capacity      0.5 items/s (measured)"), std::string::npos) << text;
  EXPECT_NE(text.find("12 items (1.2 KB) within the hour, 18 (4.2 KB) within the day"), std::string::npos) << text;
  EXPECT_NE(text.find("peak backlog  12 items at +3.0 min, drained not within 24 h"), std::string::npos) << text;
  EXPECT_NE(text.find("truncated"), std::string::npos) << text;
  EXPECT_NE(text.find("+3m .. +4m"), std::string::npos) << text;
  EXPECT_NE(text.find("+5h .. +6h"), std::string::npos) << text;
  EXPECT_EQ(text.find("+4m .. +5m"), std::string::npos) << "empty minutes are left out:\n" << text;
  EXPECT_EQ(text.find("+0h .. +1h"), std::string::npos) << "hour 0 is the minutes:\n" << text;
  // An error answer is one line; JSON keeps every node's body.
  NodeForecast missing{3, "127.0.0.1:7103", Response{}};
  missing.response.status = 404;
  missing.response.message = "container not found";
  EXPECT_EQ(forecast_text(missing), "node 3 (127.0.0.1:7103): 404 container not found\n");
  ForecastAnswers answers;
  answers.nodes = {answer, missing};
  const std::string json = forecast_json(answers);
  EXPECT_NE(json.find(R"({"nodes":[{"node":2,"address":"127.0.0.1:7102","status":200,"message":"","body":{"node":2,)"),
            std::string::npos)
      << json;
  EXPECT_NE(
      json.find(R"({"node":3,"address":"127.0.0.1:7103","status":404,"message":"container not found","body":null})"),
      std::string::npos)
      << json;
}

TEST(CliParse, ClusterUsageErrors) {
  expect_usage_error({"cluster"}, "subcommand");
  expect_usage_error({"cluster", "add-member", "4"}, "ADDRESS");
  expect_usage_error({"cluster", "add-member", "4", "no-port"}, "no port");
  expect_usage_error({"cluster", "add-member", "x", "h:1"}, "ID");
  expect_usage_error({"cluster", "remove-member"}, "ID");
  expect_usage_error({"cluster", "transfer-leader", "0"}, "ID");
}

TEST(CliParse, DatabaseCommands) {
  const Request create = request_of({"db", "create", "shop"});
  EXPECT_EQ(create.kind(), Op::kCreateDatabase);
  EXPECT_EQ(create.database, "shop");
  const Request remove = request_of({"db", "delete", "shop"});
  EXPECT_EQ(remove.kind(), Op::kDeleteDatabase);
  EXPECT_EQ(remove.database, "shop");
  EXPECT_EQ(request_of({"db", "list"}).kind(), Op::kListDatabases);
  EXPECT_EQ(create.as<mayfly::api::CreateDatabase>()->shared_ru_per_second, 0u);
  const Request shared = request_of({"db", "create", "shop", "--throughput", "1000"});
  EXPECT_EQ(shared.as<mayfly::api::CreateDatabase>()->shared_ru_per_second, 1000u);
  const Request set = request_of({"db", "set", "shop", "--throughput", "2000"});
  ASSERT_EQ(set.kind(), Op::kUpdateDatabase);
  EXPECT_EQ(set.as<mayfly::api::UpdateDatabase>()->shared_ru_per_second, 2000u);
  EXPECT_EQ(request_of({"db", "offers"}).kind(), Op::kListOffers);
  expect_usage_error({"db", "set", "shop"}, "--throughput");
  expect_usage_error({"db", "create"}, "DB");
  expect_usage_error({"db", "rename", "a", "b"}, "subcommand");
}

TEST(CliParse, ContainerCreateWithEverySetting) {
  const Request request = request_of(
      {"container", "create", "shop", "carts", "--pk", "/user", "--default-ttl", "3600", "--indexing", "consistent",
       "--throughput", "1000"});
  EXPECT_EQ(request.kind(), Op::kCreateContainer);
  EXPECT_EQ(request.database, "shop");
  EXPECT_EQ(request.container, "carts");
  EXPECT_EQ(test::settings_of(request).partition_key_path, "/user");
  EXPECT_EQ(test::settings_of(request).default_ttl, ContainerSettings::DefaultTtl::kSet);
  EXPECT_EQ(test::settings_of(request).default_ttl_json, "3600");
  EXPECT_EQ(test::settings_of(request).indexing, ContainerSettings::Indexing::kConsistent);
  EXPECT_EQ(test::settings_of(request).throughput, ContainerSettings::Throughput::kProvisioned);
  EXPECT_EQ(test::settings_of(request).provisioned_ru_per_second, 1000u);
}

TEST(CliParse, ContainerCreateDefaultsLeaveSettingsAbsent) {
  const Request request = request_of({"container", "create", "shop", "carts", "--pk", "/user"});
  EXPECT_EQ(test::settings_of(request).default_ttl, ContainerSettings::DefaultTtl::kUnchanged);
  EXPECT_EQ(test::settings_of(request).indexing, ContainerSettings::Indexing::kUnchanged);
  EXPECT_EQ(test::settings_of(request).throughput, ContainerSettings::Throughput::kUnchanged);
}

TEST(CliParse, ContainerCreateServerlessNoIndexingAndMinusOne) {
  const Request request = request_of(
      {"container", "create", "shop", "carts", "--pk", "/user", "--default-ttl", "-1", "--indexing", "none",
       "--serverless"});
  EXPECT_EQ(test::settings_of(request).default_ttl_json, "-1");
  EXPECT_EQ(test::settings_of(request).indexing, ContainerSettings::Indexing::kNone);
  EXPECT_EQ(test::settings_of(request).throughput, ContainerSettings::Throughput::kServerless);
}

TEST(CliParse, DefaultTtlTextReachesTheServerAsWritten) {
  // The server owns TTL validation (and its exact Cosmos messages): the CLI must not reject or reformat values.
  for (const std::string value : {"1.5", "0", "-2", "\"5\"", "null", "2147483648"}) {
    const Request request =
        request_of({"container", "set", "shop", "carts", "--default-ttl=" + value});
    EXPECT_EQ(test::settings_of(request).default_ttl, ContainerSettings::DefaultTtl::kSet) << value;
    EXPECT_EQ(test::settings_of(request).default_ttl_json, value);
  }
}

TEST(CliParse, ContainerSet) {
  const Request off = request_of({"container", "set", "shop", "carts", "--default-ttl", "off"});
  EXPECT_EQ(off.kind(), Op::kUpdateContainer);
  EXPECT_EQ(test::settings_of(off).default_ttl, ContainerSettings::DefaultTtl::kRemove);
  EXPECT_EQ(test::settings_of(off).partition_key_path, "");
  const Request all = request_of(
      {"container", "set", "shop", "carts", "--default-ttl", "-1", "--indexing", "none", "--throughput", "500"});
  EXPECT_EQ(test::settings_of(all).default_ttl, ContainerSettings::DefaultTtl::kSet);
  EXPECT_EQ(test::settings_of(all).default_ttl_json, "-1");
  EXPECT_EQ(test::settings_of(all).indexing, ContainerSettings::Indexing::kNone);
  EXPECT_EQ(test::settings_of(all).provisioned_ru_per_second, 500u);
  const Request nothing = request_of({"container", "set", "shop", "carts"});
  EXPECT_EQ(test::settings_of(nothing), ContainerSettings{});
  // "off" on create is what an absent defaultTtl already means.
  const Request create_off = request_of({"container", "create", "s", "c", "--pk", "/k", "--default-ttl", "off"});
  EXPECT_EQ(test::settings_of(create_off).default_ttl, ContainerSettings::DefaultTtl::kUnchanged);
}

TEST(CliParse, OtherContainerCommands) {
  const Request get = request_of({"container", "get", "shop", "carts"});
  EXPECT_EQ(get.kind(), Op::kGetContainer);
  EXPECT_EQ(get.container, "carts");
  EXPECT_EQ(request_of({"container", "delete", "shop", "carts"}).kind(), Op::kDeleteContainer);
  const Request list = request_of({"container", "list", "shop"});
  EXPECT_EQ(list.kind(), Op::kListContainers);
  EXPECT_EQ(list.database, "shop");
}

TEST(CliParse, ContainerUsageErrors) {
  expect_usage_error({"container", "create", "shop", "carts"}, "--pk");
  expect_usage_error({"container", "create", "s", "c", "--pk", "/k", "--throughput", "400", "--serverless"},
                     "excludes");
  expect_usage_error({"container", "create", "s", "c", "--pk", "/k", "--indexing", "lazy"}, "lazy");
  expect_usage_error({"container", "create", "s", "c", "--pk", "/k", "--throughput", "lots"}, "lots");
  expect_usage_error({"container", "set", "s", "c", "--serverless"}, "--serverless");
  expect_usage_error({"container", "get", "shop"}, "CONTAINER is required: mayfly container get DB CONTAINER");
  expect_usage_error({"container", "list"}, "DB");
}

TEST(CliParse, ItemWritesWithInlineJson) {
  const struct {
    const char* command;
    Op op;
  } writes[] = {{"create", Op::kCreateItem}, {"upsert", Op::kUpsertItem}, {"replace", Op::kReplaceItem}};
  for (const auto& write : writes) {
    const Request request =
        request_of({"item", write.command, "shop", "carts", R"({"id":"a","user":"u1","ttl":5})", "--if-match", "\"e1\""});
    EXPECT_EQ(request.kind(), write.op) << write.command;
    EXPECT_EQ(request.database, "shop");
    EXPECT_EQ(request.container, "carts");
    EXPECT_EQ(test::body_of(request), R"({"id":"a","user":"u1","ttl":5})");
    EXPECT_EQ(request.options.if_match, "\"e1\"");
  }
}

TEST(CliParse, ItemJsonFromFileAndStdin) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("mayfly_cli_test_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream file(path);
    file << "{\"id\": \"from-file\"}\n";
  }
  EXPECT_EQ(test::body_of(request_of({"item", "create", "s", "c", "@" + path.string()})), "{\"id\": \"from-file\"}\n");
  std::filesystem::remove(path);
  expect_usage_error({"item", "create", "s", "c", "@" + path.string()}, "cannot read JSON file");

  std::istringstream input("{\"id\": \"from-stdin\"}");
  CliEnvironment environment;
  environment.standard_input = &input;
  EXPECT_EQ(test::body_of(request_of({"item", "upsert", "s", "c", "-"}, environment)), "{\"id\": \"from-stdin\"}");
  expect_usage_error({"item", "upsert", "s", "c", "-"}, "standard input");  // no stdin given

  std::istringstream operations(R"([{"op":"set","path":"/ttl","value":10}])");
  environment.standard_input = &operations;
  EXPECT_EQ(test::body_of(request_of({"item", "patch", "s", "c", "--pk", "u", "--id", "a", "-"}, environment)),
            R"([{"op":"set","path":"/ttl","value":10}])");
}

// Every JSON the command line takes may come from a file or stdin: query parameters and the SQL text too.
TEST(CliParse, QuerySqlAndParametersFromFileAndStdin) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("mayfly_cli_param_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream file(path);
    file << "[\"tea\", \"jam\"]\n";
  }
  std::istringstream sql("SELECT * FROM c WHERE ARRAY_CONTAINS(@items, c.item)");
  CliEnvironment environment;
  environment.standard_input = &sql;
  const Request request = request_of(
      {"query", "d", "c", "-", "--param", "@items=@" + path.string(), "--param", "@n=2"}, environment);
  EXPECT_EQ(test::operation_of<api::Query>(request).sql, "SELECT * FROM c WHERE ARRAY_CONTAINS(@items, c.item)");
  EXPECT_EQ(test::operation_of<api::Query>(request).parameters, "{\"@items\":[\"tea\", \"jam\"]\n,\"@n\":2}");
  std::filesystem::remove(path);
  expect_usage_error({"query", "d", "c", "SELECT 1 FROM c", "--param", "@items=@" + path.string()},
                     "cannot read JSON file");
  expect_usage_error({"query", "d", "c", "@" + path.string()}, "cannot read");
}

TEST(CliParse, ItemReadDeletePatch) {
  const Request read = request_of({"item", "read", "shop", "carts", "--pk", "u1", "--id", "a"});
  EXPECT_EQ(read.kind(), Op::kReadItem);
  EXPECT_EQ(test::partition_key_of(read), "\"u1\"");
  EXPECT_EQ(test::id_of(read), "a");
  const Request remove = request_of({"item", "delete", "shop", "carts", "--pk", "7", "--id", "a", "--if-match", "\"e\""});
  EXPECT_EQ(remove.kind(), Op::kDeleteItem);
  EXPECT_EQ(test::partition_key_of(remove), "7");
  EXPECT_EQ(remove.options.if_match, "\"e\"");
  const Request patch =
      request_of({"item", "patch", "shop", "carts", "--pk", "u1", "--id", "a", R"([{"op":"remove","path":"/ttl"}])",
                  "--if-match", "\"e2\""});
  EXPECT_EQ(patch.kind(), Op::kPatchItem);
  EXPECT_EQ(test::body_of(patch), R"([{"op":"remove","path":"/ttl"}])");
  EXPECT_EQ(test::id_of(patch), "a");
  EXPECT_EQ(patch.options.if_match, "\"e2\"");
}

TEST(CliParse, ItemUsageErrors) {
  expect_usage_error({"item", "read", "s", "c", "--id", "a"}, "--pk");
  expect_usage_error({"item", "read", "s", "c", "--pk", "u"}, "--id");
  expect_usage_error({"item", "read", "s", "c", "--pk", "u", "--id", "a", "--if-match", "\"e\""}, "--if-match");
  expect_usage_error({"item", "patch", "s", "c", "--pk", "u", "--id", "a"}, "OPS_JSON");
  expect_usage_error({"item", "create", "s", "c"}, "JSON");
  expect_usage_error({"item", "list", "s", "c", "--max-items", "0"}, "--max-items");
  expect_usage_error({"item", "list", "s", "c", "--max-items", "many"}, "many");
  expect_usage_error({"item", "query", "s", "c"}, "subcommand");
}

TEST(CliParse, PartitionKeyIsJsonWhenItParsesElseAString) {
  EXPECT_EQ(partition_key_json("42"), "42");
  EXPECT_EQ(partition_key_json("-1.5"), "-1.5");
  EXPECT_EQ(partition_key_json("true"), "true");
  EXPECT_EQ(partition_key_json("null"), "null");
  EXPECT_EQ(partition_key_json("\"x\""), "\"x\"");
  EXPECT_EQ(partition_key_json("tenant-1"), "\"tenant-1\"");
  EXPECT_EQ(partition_key_json(""), "\"\"");
  EXPECT_EQ(partition_key_json("say \"hi\"\\"), R"("say \"hi\"\\")");
  EXPECT_EQ(partition_key_json("42abc"), "\"42abc\"");
  // Through the command line, negative numbers are values, not options.
  EXPECT_EQ(test::partition_key_of(request_of({"item", "read", "s", "c", "--pk", "-3", "--id", "a"})), "-3");
}

TEST(CliParse, ItemList) {
  const Request whole = request_of({"item", "list", "shop", "carts"});
  EXPECT_EQ(whole.kind(), Op::kListItems);
  EXPECT_FALSE(test::partition_key_of(whole).has_value());
  EXPECT_EQ(whole.options.max_items, 0u);
  const Request page = request_of(
      {"item", "list", "shop", "carts", "--pk", "u1", "--max-items", "25", "--continuation", "opaque+token"});
  EXPECT_EQ(test::partition_key_of(page), "\"u1\"");
  EXPECT_EQ(page.options.max_items, 25u);
  EXPECT_EQ(page.options.continuation, "opaque+token");
}

TEST(CliParse, GlobalOptions) {
  const CliParse parsed = parse({"--endpoints", "10.0.0.1:1,10.0.0.2:2", "--consistency", "strong", "--session-token",
                                 "17", "--timeout-ms", "250", "item", "read", "s", "c", "--pk", "u", "--id", "a"});
  ASSERT_TRUE(parsed.command.has_value()) << parsed.error;
  EXPECT_EQ(parsed.command->options.endpoints, (std::vector<std::string>{"10.0.0.1:1", "10.0.0.2:2"}));
  EXPECT_EQ(parsed.command->options.request_timeout_ms, 250u);
  EXPECT_EQ(parsed.command->request.options.consistency, Consistency::kStrong);
  EXPECT_EQ(parsed.command->request.options.session_token, "17");
  for (const auto& [name, level] : {std::pair{"session", Consistency::kSession}, {"bounded", Consistency::kBounded},
                                    {"eventual", Consistency::kEventual}}) {
    EXPECT_EQ(request_of({"--consistency", name, "db", "list"}).options.consistency, level);
  }
  // Unset: the client's default applies.
  EXPECT_FALSE(request_of({"db", "list"}).options.consistency.has_value());
  // Global options are also accepted after the command.
  EXPECT_EQ(request_of({"db", "list", "--consistency", "eventual"}).options.consistency, Consistency::kEventual);
  expect_usage_error({"--consistency", "linearizable", "db", "list"}, "linearizable");
  expect_usage_error({"--timeout-ms", "0", "db", "list"}, "--timeout-ms");
  expect_usage_error({"--timeout-ms", "soon", "db", "list"}, "soon");
}

TEST(CliParse, EndpointsDefaultEnvironmentAndFlag) {
  const CliParse defaults = parse({"db", "list"});
  ASSERT_TRUE(defaults.command.has_value());
  EXPECT_EQ(defaults.command->options.endpoints,
            (std::vector<std::string>{"127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"}));
  CliEnvironment environment;
  environment.endpoints = "node-1:7101, node-2:7101";
  const CliParse from_environment = parse({"db", "list"}, environment);
  ASSERT_TRUE(from_environment.command.has_value());
  EXPECT_EQ(from_environment.command->options.endpoints, (std::vector<std::string>{"node-1:7101", "node-2:7101"}));
  const CliParse flag_wins = parse({"--endpoints", "a:1", "db", "list"}, environment);
  ASSERT_TRUE(flag_wins.command.has_value());
  EXPECT_EQ(flag_wins.command->options.endpoints, (std::vector<std::string>{"a:1"}));
  expect_usage_error({"--endpoints", "a:1,,b:2", "db", "list"}, "--endpoints: empty entry");
  expect_usage_error({"--endpoints", "a:99999", "db", "list"}, "invalid port");
  environment.endpoints = "nonsense";
  expect_usage_error({"db", "list"}, "MAYFLY_ENDPOINTS", environment);
}

TEST(CliParse, TlsCaFlagAndEnvironment) {
  const CliParse plain = parse({"db", "list"});
  ASSERT_TRUE(plain.command.has_value());
  EXPECT_EQ(plain.command->options.tls_ca, "");
  CliEnvironment environment;
  environment.tls_ca = "/etc/mayfly/ca.crt";
  const CliParse from_environment = parse({"db", "list"}, environment);
  ASSERT_TRUE(from_environment.command.has_value());
  EXPECT_EQ(from_environment.command->options.tls_ca, "/etc/mayfly/ca.crt");
  const CliParse flag_wins = parse({"--tls-ca", "other.crt", "db", "list"}, environment);
  ASSERT_TRUE(flag_wins.command.has_value());
  EXPECT_EQ(flag_wins.command->options.tls_ca, "other.crt");
}

TEST(CliParse, HelpAndMissingCommand) {
  const CliParse help = parse({"--help"});
  EXPECT_FALSE(help.command.has_value());
  EXPECT_EQ(help.exit_code, kExitOk);
  EXPECT_EQ(help.error, "");  // nothing on stderr (it used to end with a stray "mayfly: ")
  EXPECT_NE(help.output.find("-o,--output"), std::string::npos);
  EXPECT_NE(help.output.find("container"), std::string::npos);
  const CliParse item_help = parse({"item", "--help"});
  EXPECT_EQ(item_help.exit_code, kExitOk);
  EXPECT_NE(item_help.output.find("patch"), std::string::npos);
  expect_usage_error({}, "subcommand");
  expect_usage_error({"--bogus", "db", "list"}, "--bogus");
}

// A missing positional names itself and shows where it goes in the command.
TEST(CliParse, MissingPositionalNamesItAndTheCommandUsage) {
  const CliParse parsed = parse({"item", "read", "shop"});
  EXPECT_EQ(parsed.exit_code, kExitUsage);
  EXPECT_EQ(parsed.error,
            "mayfly: CONTAINER is required: mayfly item read DB CONTAINER --pk PK --id ID\n"
            "Run with --help for more information.\n");
  expect_usage_error({"item", "read"}, "DB is required: mayfly item read DB CONTAINER --pk PK --id ID");
  expect_usage_error({"item", "read", "s", "c", "--id", "a"}, "--pk is required: mayfly item read");
  expect_usage_error({"item", "create", "s", "c"}, "JSON is required: mayfly item create DB CONTAINER JSON [options]");
  expect_usage_error({"item", "import", "s", "c"}, "FILE is required: mayfly item import DB CONTAINER FILE [options]");
  expect_usage_error({"cluster", "add-member", "4"}, "ADDRESS is required: mayfly cluster add-member ID ADDRESS");
  expect_usage_error({"db"}, "A subcommand is required: mayfly db create|delete|set|list|offers ...");
}

TEST(CliParse, OutputFormatFlag) {
  EXPECT_FALSE(parse({"db", "list"}).command->output.has_value());  // chosen by the terminal at run time
  EXPECT_EQ(parse({"-o", "table", "db", "list"}).command->output, OutputFormat::kTable);
  EXPECT_EQ(parse({"db", "list", "-o", "json"}).command->output, OutputFormat::kJson);
  EXPECT_EQ(parse({"cluster", "status", "--output", "table"}).command->output, OutputFormat::kTable);
  EXPECT_EQ(parse({"query", "s", "c", "SELECT * FROM c", "-o", "table"}).command->output, OutputFormat::kTable);
  expect_usage_error({"db", "list", "-o", "yaml"}, "yaml");
}

TEST(CliParse, ImportAndExport) {
  const CliParse imported = parse({"item", "import", "shop", "carts", "carts.jsonl", "--concurrency", "4", "--create",
                                   "--quiet"});
  ASSERT_TRUE(imported.command.has_value()) << imported.error;
  EXPECT_EQ(imported.command->action, CliAction::kImport);
  EXPECT_EQ(imported.command->request.database, "shop");
  EXPECT_EQ(imported.command->request.container, "carts");
  EXPECT_EQ(imported.command->import_settings.path, "carts.jsonl");
  EXPECT_EQ(imported.command->import_settings.concurrency, 4u);
  EXPECT_TRUE(imported.command->import_settings.create_only);
  EXPECT_TRUE(imported.command->import_settings.quiet);
  const CliParse defaults = parse({"item", "import", "shop", "carts", "-"});
  ASSERT_TRUE(defaults.command.has_value()) << defaults.error;
  EXPECT_EQ(defaults.command->import_settings.concurrency, 16u);
  EXPECT_FALSE(defaults.command->import_settings.create_only);
  expect_usage_error({"item", "import", "s", "c", "f", "--concurrency", "0"}, "--concurrency");

  const CliParse exported = parse({"item", "export", "shop", "carts", "--out", "x.jsonl", "--strip-system",
                                   "--page-size", "50"});
  ASSERT_TRUE(exported.command.has_value()) << exported.error;
  EXPECT_EQ(exported.command->action, CliAction::kExport);
  EXPECT_EQ(exported.command->export_settings.out_path, "x.jsonl");
  EXPECT_TRUE(exported.command->export_settings.strip_system);
  EXPECT_EQ(exported.command->export_settings.page_items, 50u);
  EXPECT_EQ(parse({"item", "list", "s", "c"}).command->action, CliAction::kRequest);
  expect_usage_error({"item", "export", "s", "c", "--page-size", "5000"}, "--page-size");
}

TEST(CliFormat, EveryFieldOnOneLine) {
  Response response;
  response.status = 201;
  response.substatus = 0;
  response.message = "";
  response.request_charge = 5.71;
  response.session_token = "42";
  response.etag = "\"0000-1\"";
  response.served_by = 2;
  response.body = "{\n  \"id\": \"a\",\n  \"note\": \"two  spaces\\n\\\"q\\\"\",\n  \"n\": 1.5\n}";
  response.ts = 1700000000;
  EXPECT_EQ(format_response(response),
            R"({"status":201,"substatus":0,"message":"","requestCharge":5.71,"sessionToken":"42",)"
            R"("etag":"\"0000-1\"","servedBy":2,"body":{"id":"a","note":"two  spaces\n\"q\"","n":1.5}})");
  EXPECT_EQ(exit_code_for(response), kExitOk);
}

TEST(CliFormat, EmptyBodyIsNullAndContinuationOnlyWhenPresent) {
  Response response;
  response.status = 404;
  response.substatus = 1003;
  response.message = "Entity with the specified id does not exist in the system.";
  response.request_charge = 1;
  EXPECT_EQ(format_response(response),
            R"({"status":404,"substatus":1003,"message":"Entity with the specified id does not exist in the system.",)"
            R"("requestCharge":1,"sessionToken":"","etag":"","servedBy":0,"body":null})");
  EXPECT_EQ(exit_code_for(response), kExitRequestFailed);
  response.status = 200;
  response.body = "[]";
  response.continuation = "c1";
  EXPECT_TRUE(format_response(response).ends_with(R"(,"body":[],"continuation":"c1"})")) << format_response(response);
}

TEST(CliFormat, NonJsonBodyIsAStringAndControlCharactersAreEscaped) {
  Response response;
  response.status = 503;
  response.message = "tab\there";
  response.body = "not json";
  const std::string line = format_response(response);
  EXPECT_NE(line.find(R"("message":"tab\there")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("body":"not json")"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(CliFormat, ExitCodes) {
  for (const uint16_t status : {200, 201, 204, 304}) {
    EXPECT_EQ(exit_code_for(Response{.status = status}), kExitOk) << status;
  }
  for (const uint16_t status : {400, 404, 408, 409, 412, 429, 503}) {
    EXPECT_EQ(exit_code_for(Response{.status = status}), kExitRequestFailed) << status;
  }
}

}  // namespace
}  // namespace mayfly::client
