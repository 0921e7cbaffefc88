// `mayfly query` parsing (arguments -> Request), the wire encoding of a query request both ways, and the output:
// the page as `body` and a top-level `continuation` when there are more pages.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include "client/cli.h"
#include "client/wire.h"

namespace mayfly::client {
namespace {

CliParse parse(const std::vector<std::string>& args) { return parse_cli(args, CliEnvironment{}); }

TEST(QueryCli, EveryOptionReachesTheRequest) {
  const CliParse parsed = parse({"query", "shop", "carts", "SELECT * FROM c WHERE c.n > @min AND c.s = @s",
                                 "--param", "@min=1.5", "--param", "@s=\"a=b\"", "--pk", "ana", "--max-items", "7",
                                 "--continuation", "abc", "--enable-scan", "--consistency", "strong"});
  ASSERT_TRUE(parsed.command.has_value()) << parsed.error;
  const Request& request = parsed.command->request;
  EXPECT_EQ(request.op, Op::kQuery);
  EXPECT_EQ(request.database, "shop");
  EXPECT_EQ(request.container, "carts");
  EXPECT_EQ(request.sql, "SELECT * FROM c WHERE c.n > @min AND c.s = @s");
  EXPECT_EQ(request.parameters_json, R"({"@min":1.5,"@s":"a=b"})");
  EXPECT_EQ(request.partition_key, std::optional<std::string>("\"ana\""));
  EXPECT_EQ(request.options.max_items, 7u);
  EXPECT_EQ(request.options.continuation, "abc");
  EXPECT_TRUE(request.enable_scan);
  EXPECT_EQ(request.options.consistency, std::optional<Consistency>(Consistency::kStrong));
  EXPECT_FALSE(is_write(Op::kQuery));
  EXPECT_EQ(op_name(Op::kQuery), "query");
}

TEST(QueryCli, DefaultsAndUsageErrors) {
  const CliParse plain = parse({"query", "d", "c", "SELECT VALUE COUNT(1) FROM c"});
  ASSERT_TRUE(plain.command.has_value()) << plain.error;
  EXPECT_EQ(plain.command->request.parameters_json, "");
  EXPECT_FALSE(plain.command->request.partition_key.has_value());
  EXPECT_FALSE(plain.command->request.enable_scan);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"query", "d", "c"},                                    // no SQL
           {"query", "d", "c", "SELECT 1 FROM c", "--param", "min=1"},  // no @
           {"query", "d", "c", "SELECT 1 FROM c", "--param", "@min"},   // no =
           {"query", "d", "c", "SELECT 1 FROM c", "--param", "@min=one"},  // not JSON
           {"query", "d", "c", "SELECT 1 FROM c", "--param", "@a=1", "--param", "@a=2"},  // twice
           {"query", "d", "c", "SELECT 1 FROM c", "--max-items", "0"},
       }) {
    const CliParse parsed = parse(args);
    EXPECT_FALSE(parsed.command.has_value()) << args.back();
    EXPECT_EQ(parsed.exit_code, kExitUsage) << args.back();
    EXPECT_FALSE(parsed.error.empty()) << args.back();
  }
}

TEST(QueryCli, WireRoundTripAndOutput) {
  Request request;
  request.op = Op::kQuery;
  request.database = "d";
  request.container = "c";
  request.sql = "SELECT VALUE c.id FROM c";
  request.parameters_json = R"({"@x":[1,2]})";
  request.partition_key = "42";
  request.enable_scan = true;
  request.options.max_items = 3;
  request.options.continuation = "tok";
  capnp::MallocMessageBuilder message;
  auto wire = message.initRoot<proto::Request>();
  encode_request(request, Consistency::kEventual, "17", wire);
  EXPECT_TRUE(wire.isQuery());
  EXPECT_EQ(std::string(wire.getQuery().getPartitionKey().getValue().cStr()), "42");
  Request back = decode_request(wire.asReader());
  EXPECT_EQ(back.op, Op::kQuery);
  EXPECT_EQ(back.sql, request.sql);
  EXPECT_EQ(back.parameters_json, request.parameters_json);
  EXPECT_EQ(back.partition_key, request.partition_key);
  EXPECT_TRUE(back.enable_scan);
  EXPECT_EQ(back.options.max_items, 3u);
  EXPECT_EQ(back.options.continuation, "tok");
  request.partition_key.reset();
  capnp::MallocMessageBuilder cross;
  auto cross_wire = cross.initRoot<proto::Request>();
  encode_request(request, Consistency::kSession, "", cross_wire);
  EXPECT_TRUE(cross_wire.getQuery().getPartitionKey().isCrossPartition());

  Response response;
  response.status = 200;
  response.body = R"(["a","b"])";
  response.request_charge = 2.5;
  response.continuation = "next";
  const std::string printed = format_response(response);
  EXPECT_NE(printed.find(R"("body":["a","b"])"), std::string::npos) << printed;
  EXPECT_NE(printed.find(R"("continuation":"next")"), std::string::npos) << printed;
  EXPECT_NE(printed.find(R"("requestCharge":2.5)"), std::string::npos) << printed;
}

}  // namespace
}  // namespace mayfly::client
