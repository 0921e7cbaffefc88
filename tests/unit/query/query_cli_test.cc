// `mayfly query` parsing (arguments -> Request), the wire encoding of a query request both ways, and the output:
// the page as `body` and a top-level `continuation` when there are more pages.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include "api/codec.h"
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
  EXPECT_EQ(request.kind(), Op::kQuery);
  ASSERT_NE(request.as<api::Query>(), nullptr);
  const api::Query& query = *request.as<api::Query>();
  EXPECT_EQ(request.database, "shop");
  EXPECT_EQ(request.container, "carts");
  EXPECT_EQ(query.sql, "SELECT * FROM c WHERE c.n > @min AND c.s = @s");
  EXPECT_EQ(query.parameters, R"({"@min":1.5,"@s":"a=b"})");
  EXPECT_EQ(query.partition_key, std::optional<std::string>("\"ana\""));
  EXPECT_EQ(request.options.max_items, 7u);
  EXPECT_EQ(request.options.continuation, "abc");
  EXPECT_TRUE(query.enable_scan);
  EXPECT_EQ(request.options.consistency, std::optional<Consistency>(Consistency::kStrong));
  EXPECT_FALSE(api::changes_state(Op::kQuery));
  EXPECT_EQ(kind_name(Op::kQuery), "query");
}

TEST(QueryCli, DefaultsAndUsageErrors) {
  const CliParse plain = parse({"query", "d", "c", "SELECT VALUE COUNT(1) FROM c"});
  ASSERT_TRUE(plain.command.has_value()) << plain.error;
  ASSERT_NE(plain.command->request.as<api::Query>(), nullptr);
  const api::Query& query = *plain.command->request.as<api::Query>();
  EXPECT_EQ(query.parameters, "");
  EXPECT_FALSE(query.partition_key.has_value());
  EXPECT_FALSE(query.enable_scan);
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
  request.database = "d";
  request.container = "c";
  request.operation = api::Query{
      .sql = "SELECT VALUE c.id FROM c", .parameters = R"({"@x":[1,2]})", .partition_key = "42", .enable_scan = true};
  request.options.max_items = 3;
  request.options.continuation = "tok";
  // As the Client sends it: the effective consistency and session token in the copy's options.
  Request sent = request;
  sent.options.consistency = Consistency::kEventual;
  sent.options.session_token = "17";
  capnp::MallocMessageBuilder message;
  auto wire = message.initRoot<proto::Request>();
  api::encode_request(sent, wire);
  EXPECT_TRUE(wire.isQuery());
  EXPECT_EQ(std::string(wire.getQuery().getPartitionKey().getValue().cStr()), "42");
  Result<Request> decoded = api::decode_request(wire.asReader());
  ASSERT_TRUE(decoded.is_ok());
  const Request& back = decoded.value();
  EXPECT_EQ(back.kind(), Op::kQuery);
  ASSERT_NE(back.as<api::Query>(), nullptr);
  EXPECT_EQ(back.as<api::Query>()->sql, request.as<api::Query>()->sql);
  EXPECT_EQ(back.as<api::Query>()->parameters, request.as<api::Query>()->parameters);
  EXPECT_EQ(back.as<api::Query>()->partition_key, request.as<api::Query>()->partition_key);
  EXPECT_TRUE(back.as<api::Query>()->enable_scan);
  EXPECT_EQ(back.options.max_items, 3u);
  EXPECT_EQ(back.options.continuation, "tok");
  request.as<api::Query>()->partition_key.reset();
  request.options.consistency = Consistency::kSession;
  capnp::MallocMessageBuilder cross;
  auto cross_wire = cross.initRoot<proto::Request>();
  api::encode_request(request, cross_wire);
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
