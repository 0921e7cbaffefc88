// The `mayfly` CLI's human output: -o selection, tables (cluster status, containers, items, values, fields),
// truncation of long cells, JSON text helpers, and the @file / - body reader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/cli_body.h"
#include "client/cli_output.h"
#include "client/cli_text.h"

namespace mayfly::client {
namespace {

TEST(CliOutput, TableOnATerminalJsonOtherwiseUnlessAsked) {
  EXPECT_EQ(choose_output(std::nullopt, true), OutputFormat::kTable);
  EXPECT_EQ(choose_output(std::nullopt, false), OutputFormat::kJson);
  EXPECT_EQ(choose_output(OutputFormat::kJson, true), OutputFormat::kJson);
  EXPECT_EQ(choose_output(OutputFormat::kTable, false), OutputFormat::kTable);
}

TEST(CliText, RenderTableLikeEtcdctl) {
  const Table table{{"id", "name"}, {{"1", "ana"}, {"22", "bo"}}};
  EXPECT_EQ(render_table(table),
            "+----+------+\n"
            "| ID | NAME |\n"
            "+----+------+\n"
            "| 1  | ana  |\n"
            "| 22 | bo   |\n"
            "+----+------+\n");
  // Multi-byte characters count once; short rows are padded.
  EXPECT_EQ(render_table(Table{{"a", "b"}, {{"é"}}}),
            "+---+---+\n"
            "| A | B |\n"
            "+---+---+\n"
            "| é |   |\n"
            "+---+---+\n");
}

TEST(CliText, TruncationKeepsWholeCharactersAndMarksTheCut) {
  EXPECT_EQ(truncate_cell("short", 10), "short");
  EXPECT_EQ(truncate_cell("exactly10!", 10), "exactly10!");
  EXPECT_EQ(truncate_cell("a bit too long", 10), "a bit too…");
  EXPECT_EQ(display_width(truncate_cell("a bit too long", 10)), 10u);
  EXPECT_EQ(truncate_cell("ééééé", 3), "éé…");  // never half a UTF-8 sequence
  EXPECT_EQ(truncate_cell("anything", 0), "anything");
}

TEST(CliText, JsonSplittingKeepsNumbersAsWritten) {
  const std::string array = R"([ {"a": 1.50, "s": "x,]}\"y"}, 2, "three" , [4, [5]] ])";
  const auto elements = json_array_elements(array);
  ASSERT_EQ(elements.size(), 4u);
  EXPECT_EQ(elements[0], R"({"a": 1.50, "s": "x,]}\"y"})");
  EXPECT_EQ(elements[1], "2");
  EXPECT_EQ(elements[2], "\"three\"");
  EXPECT_EQ(elements[3], "[4, [5]]");
  EXPECT_TRUE(json_array_elements("[]").empty());
  const auto members = json_object_members(R"({"a\"b": 1.50, "n": null, "o": {"x": [1, 2]}})");
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].first, "a\"b");
  EXPECT_EQ(members[0].second, "1.50");
  EXPECT_EQ(members[1].second, "null");
  EXPECT_EQ(members[2].second, R"({"x": [1, 2]})");
  EXPECT_EQ(compact_json(R"({ "a" : [ 1.50, "x y" ] })"), R"({"a":[1.50,"x y"]})");
  EXPECT_EQ(cell_text("\"line\\nbreak\""), "line break");
  EXPECT_EQ(cell_text(R"({ "k": 1 })"), R"({"k":1})");
}

TEST(CliOutput, ClusterStatusOneRowPerMemberWithLagAndErrors) {
  const std::string body =
      R"({"leader":2,"nodes":[)"
      R"({"id":1,"address":"127.0.0.1:7101","role":"follower","term":3,"commit":40,"applied":38,)"
      R"("appliedTime":1000250000,"leader":2,"reachable":true},)"
      R"({"id":2,"address":"127.0.0.1:7102","role":"leader","term":3,"commit":40,"applied":40,)"
      R"("appliedTime":1000300000,"leader":2,"reachable":true},)"
      R"({"id":3,"address":"127.0.0.1:7103","reachable":false}]})";
  const Table table = cluster_status_table(body);
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.header[0], "endpoint");
  EXPECT_EQ(table.rows[0],
            (std::vector<std::string>{"127.0.0.1:7101", "1", "false", "follower", "3", "40", "38", "50 ms", ""}));
  EXPECT_EQ(table.rows[1],
            (std::vector<std::string>{"127.0.0.1:7102", "2", "true", "leader", "3", "40", "40", "0 ms", ""}));
  EXPECT_EQ(table.rows[2][0], "127.0.0.1:7103");
  EXPECT_EQ(table.rows[2][2], "false");
  EXPECT_EQ(table.rows[2][4], "-");
  EXPECT_NE(table.rows[2][8].find("unreachable"), std::string::npos);

  Request request;
  request.operation = make_operation(Op::kClusterStatus);
  Response response;
  response.status = 200;
  response.body = body;
  response.request_charge = 1;
  const FormattedOutput output = format_response_table(request, response, "");
  EXPECT_EQ(output.err, "");
  EXPECT_NE(output.out.find("|    ENDPOINT    | ID | IS LEADER |"), std::string::npos) << output.out;
  EXPECT_NE(output.out.find("3 members, 1.00 RU"), std::string::npos) << output.out;
}

TEST(CliOutput, ItemsTableColumnsAndTruncation) {
  const std::string body =
      R"([{"id":"a","user":"ana","note":"a note that is far too long to fit in a table cell","n":1.50,)"
      R"("_rid":"1.1","_etag":"\"1\"","_ts":1700000000},)"
      R"({"id":"b","user":"bo","ttl":30,"extra1":true,"extra2":[1],"_ts":1700000001}])";
  const Table table = items_table(body, "/user");
  EXPECT_EQ(table.header, (std::vector<std::string>{"id", "partition key", "_ts", "ttl", "note", "n", "extra1"}));
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0][0], "a");
  EXPECT_EQ(table.rows[0][1], "ana");
  EXPECT_EQ(table.rows[0][2], "1700000000");
  EXPECT_EQ(table.rows[0][3], "");  // no ttl
  EXPECT_EQ(table.rows[0][4], "a note that is far too …");
  EXPECT_EQ(display_width(table.rows[0][4]), kCellWidth);
  EXPECT_EQ(table.rows[0][5], "1.50");
  EXPECT_EQ(table.rows[1][3], "30");
  EXPECT_EQ(table.rows[1][6], "true");

  // Unknown partition key path: no such column. Nested paths and items without the key.
  EXPECT_EQ(items_table(body, "").header[1], "_ts");
  const Table nested = items_table(R"([{"id":"x","a":{"b":7}},{"id":"y"}])", "/a/b");
  EXPECT_EQ(nested.rows[0][1], "7");
  EXPECT_EQ(nested.rows[1][1], "(none)");
  EXPECT_EQ(nested.header.back(), "a");  // a nested key's parent is still a field of its own
}

TEST(CliOutput, ProjectionsWithoutIdsShowTheirOwnFields) {
  const Table table = items_table(R"([{"user":"ana","total":12.5},{"user":"bo","n":{"deep":true}}])", "/user");
  EXPECT_EQ(table.header, (std::vector<std::string>{"user", "total", "n"}));
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0], (std::vector<std::string>{"ana", "12.5", ""}));
  EXPECT_EQ(table.rows[1], (std::vector<std::string>{"bo", "", R"({"deep":true})"}));
  const Table count = items_table(R"([{"$1":42}])", "/user");
  EXPECT_EQ(count.header, (std::vector<std::string>{"$1"}));
  EXPECT_EQ(count.rows[0][0], "42");
}

TEST(CliOutput, QueryValuesAndFooterWithContinuation) {
  Request request;
  request.operation = make_operation(Op::kQuery);
  Response response;
  response.status = 200;
  response.body = R"(["a","b",3])";
  response.request_charge = 2.5;
  response.continuation = "abc";
  const FormattedOutput output = format_response_table(request, response, "/user");
  EXPECT_EQ(output.out,
            "+-------+\n"
            "| VALUE |\n"
            "+-------+\n"
            "| a     |\n"
            "| b     |\n"
            "| 3     |\n"
            "+-------+\n"
            "3 items, 2.50 RU\n"
            "more: --continuation abc\n");
}

TEST(CliOutput, ContainersDatabasesSingleItemsAndErrors) {
  const std::string container =
      R"({"id":"carts","partitionKey":{"paths":["/user"],"kind":"Hash"},"indexingPolicy":{"indexingMode":"consistent"},)"
      R"("defaultTtl":3600,"throughput":{"mode":"provisioned","requestUnitsPerSecond":400},"_rid":"7","_etag":"\"3\"",)"
      R"("changeFeed":{"enabled":true,"retentionSeconds":600,"sinceIndex":9},"_ts":1700000000})";
  const Table containers = containers_table("[" + container + "," + R"({"id":"x","throughput":{"mode":"serverless"}}])");
  ASSERT_EQ(containers.rows.size(), 2u);
  EXPECT_EQ(containers.rows[0],
            (std::vector<std::string>{"carts", "/user", "3600", "consistent", "400 RU/s", "on, 600 s", "1700000000"}));
  EXPECT_EQ(containers.rows[1][2], "off");
  EXPECT_EQ(containers.rows[1][4], "serverless");
  EXPECT_EQ(containers.rows[1][5], "off");

  Request request;
  request.operation = make_operation(Op::kListDatabases);
  Response response;
  response.status = 200;
  response.body = R"(["shop","zoo"])";
  EXPECT_NE(format_response_table(request, response, "").out.find("| zoo  |"), std::string::npos);

  request.operation = make_operation(Op::kReadItem);
  response.body = R"({"id":"a","user":"ana"})";
  response.etag = "\"5\"";
  response.served_by = 2;
  const std::string item = format_response_table(request, response, "").out;
  EXPECT_NE(item.find("| FIELD | VALUE |"), std::string::npos) << item;
  EXPECT_NE(item.find("| user  | ana   |"), std::string::npos) << item;
  EXPECT_NE(item.find("OK (200), 0.00 RU, node 2, etag \"5\""), std::string::npos) << item;

  request.operation = make_operation(Op::kDeleteItem);
  response.status = 204;
  response.body.clear();
  EXPECT_EQ(format_response_table(request, response, "").out.rfind("OK (204)", 0), 0u);

  response.status = 404;
  response.substatus = 0;
  response.message = "item 'a' does not exist";
  const FormattedOutput error = format_response_table(request, response, "");
  EXPECT_EQ(error.out, "");
  EXPECT_EQ(error.err, "mayfly: 404 (substatus 0): item 'a' does not exist [node 2]\n");
}

TEST(CliBody, InlineFileStdinAndErrors) {
  EXPECT_EQ(read_body("{\"id\":1}", nullptr).body, "{\"id\":1}");

  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("mayfly_cli_body_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream file(path, std::ios::binary);
    file << "{\"id\": \"f\"}\n";
  }
  EXPECT_EQ(read_body("@" + path.string(), nullptr).body, "{\"id\": \"f\"}\n");
  const BodyRead too_big = read_body("@" + path.string(), nullptr, 4);
  EXPECT_FALSE(too_big.body.has_value());
  EXPECT_NE(too_big.error.find("more than 4 bytes"), std::string::npos) << too_big.error;
  std::filesystem::remove(path);
  const BodyRead missing = read_body("@" + path.string(), nullptr);
  EXPECT_FALSE(missing.body.has_value());
  EXPECT_NE(missing.error.find("cannot read JSON file"), std::string::npos);
  EXPECT_NE(read_body("@", nullptr).error.find("followed by a file name"), std::string::npos);

  std::istringstream input("[1,\n2]");
  EXPECT_EQ(read_body("-", &input).body, "[1,\n2]");
  const BodyRead no_stdin = read_body("-", nullptr);
  EXPECT_FALSE(no_stdin.body.has_value());
  EXPECT_NE(no_stdin.error.find("standard input"), std::string::npos);
}

}  // namespace
}  // namespace mayfly::client
