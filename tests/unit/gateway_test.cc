// The Cosmos DB gateway's pure parts: the master-key signature (against a vector computed independently with
// Python's hmac, as the azure-cosmos SDK does), path parsing and routing, request headers, and the translation of
// malformed or unsupported calls into 4xx/501 answers that never reach the node.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <iostream>

#include "common/prng.h"
#include "gateway/protocol.h"
#include "gateway/translate.h"
#include "storage/json.h"

namespace mayfly::gateway {
namespace {

constexpr std::string_view kEmulatorKey = kEmulatorKeyBase64;

TEST(GatewaySignature, MatchesTheSdksAlgorithm) {
  const std::string text =
      string_to_sign("GET", "docs", "dbs/shop/colls/carts/docs/c1", "Tue, 24 Nov 2026 11:00:00 GMT");
  EXPECT_EQ(text, "get\ndocs\ndbs/shop/colls/carts/docs/c1\ntue, 24 nov 2026 11:00:00 gmt\n\n");
  Result<std::string> key = base64_decode(kEmulatorKey);
  ASSERT_TRUE(key.is_ok());
  EXPECT_EQ(key->size(), 64u);
  // base64(HMAC-SHA256(base64decode(key), text)), computed with Python's hmac module.
  EXPECT_EQ(sign(*key, text), "3qTeifIgGV8neIVH9lodRdslMeGc/WV7ADFKLh7mi4Y=");
  EXPECT_TRUE(signed_with_emulator_key(text, *base64_decode("3qTeifIgGV8neIVH9lodRdslMeGc/WV7ADFKLh7mi4Y=")));
  EXPECT_FALSE(signed_with_emulator_key(text + "x", *base64_decode("3qTeifIgGV8neIVH9lodRdslMeGc/WV7ADFKLh7mi4Y=")));
}

TEST(GatewaySignature, ParsesTheUrlEncodedHeader) {
  Result<Authorization> parsed =
      parse_authorization("type%3Dmaster%26ver%3D1.0%26sig%3D3qTeifIgGV8neIVH9lodRdslMeGc%2FWV7ADFKLh7mi4Y%3D");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  EXPECT_EQ(parsed->type, "master");
  EXPECT_EQ(parsed->version, "1.0");
  EXPECT_EQ(base64_encode(parsed->signature), "3qTeifIgGV8neIVH9lodRdslMeGc/WV7ADFKLh7mi4Y=");
  // '+' is part of base64 and must not become a space.
  Result<Authorization> plus = parse_authorization("type=master&ver=1.0&sig=ab+/");
  ASSERT_TRUE(plus.is_ok());
  EXPECT_EQ(base64_encode(plus->signature), "ab+/");
}

TEST(GatewaySignature, RefusesMalformedHeadersAs401) {
  for (const char* header : {"", "type=resource&ver=1.0&sig=abcd", "type=master&ver=1.0", "type=master&sig=%zz",
                             "type=master&ver=1.0&sig=not*base64", "type=master&ver=1.0&sig=abc",
                             "type=aad&ver=1.0&sig=abcd", "%", "type=master&ver=1.0&sig=a=bc"}) {
    Result<Authorization> parsed = parse_authorization(header);
    ASSERT_FALSE(parsed.is_ok()) << header;
    EXPECT_EQ(parsed.status().code(), StatusCode::kUnauthorized) << header;
  }
  EXPECT_FALSE(parse_authorization(std::string(2000, 'a')).is_ok());
}

TEST(GatewaySignature, TheSignedDateMustBeWithinFifteenMinutes) {
  EXPECT_EQ(*parse_http_date("Tue, 24 Nov 2026 11:00:00 GMT"), 1795518000);
  EXPECT_EQ(*parse_http_date("thu, 29 feb 2024 23:59:59 gmt"), 1709251199);
  for (const char* bad : {"", "yesterday", "Tue, 24 Nov 2026 11:00:00 UTC", "Tue, 24 Foo 2026 11:00:00 GMT",
                          "Tue, 24 Nov 2026 25:00:00 GMT", "Tue, 2x Nov 2026 11:00:00 GMT",
                          "Tue, 24 Nov 2026 11:00:00 GMT extra"}) {
    EXPECT_FALSE(parse_http_date(bad).is_ok()) << bad;
  }
  const int64_t signed_at = 1795518000;
  EXPECT_TRUE(check_signed_date("Tue, 24 Nov 2026 11:00:00 GMT", signed_at + 899).is_ok());
  EXPECT_TRUE(check_signed_date("Tue, 24 Nov 2026 11:00:00 GMT", signed_at - 899).is_ok());
  for (int64_t now : {signed_at + 901, signed_at - 901}) {
    Status late = check_signed_date("Tue, 24 Nov 2026 11:00:00 GMT", now);
    EXPECT_EQ(late.code(), StatusCode::kUnauthorized);
    EXPECT_NE(late.message().find("15 minutes"), std::string::npos);
  }
  EXPECT_EQ(check_signed_date("", signed_at).code(), StatusCode::kUnauthorized);
}

TEST(GatewaySignature, DatabaseAndContainerWritesAndForcedTtlChangesAreReplayGuarded) {
  using Kind = Route::Kind;
  for (const char* verb : {"PUT", "DELETE", "PATCH"}) {
    for (Kind kind : {Kind::kDatabase, Kind::kContainer}) {
      EXPECT_TRUE(replay_guarded(verb, kind, false)) << verb << " " << static_cast<int>(kind);
    }
  }
  // Creates (and POST queries of databases or containers) are not: an SDK creating two containers in one second
  // signs both with the same date.
  for (Kind kind : {Kind::kDatabases, Kind::kContainers}) EXPECT_FALSE(replay_guarded("POST", kind, false));
  for (const char* verb : {"POST", "PUT", "DELETE", "PATCH"}) {
    // Item writes are not: two honest upserts in one second carry the same signature.
    EXPECT_FALSE(replay_guarded(verb, Kind::kItems, false)) << verb;
    EXPECT_FALSE(replay_guarded(verb, Kind::kItem, false)) << verb;
  }
  for (Kind kind : {Kind::kDatabase, Kind::kContainer, Kind::kItems}) {
    EXPECT_FALSE(replay_guarded("GET", kind, false));
    EXPECT_FALSE(replay_guarded("HEAD", kind, false));
  }
  EXPECT_TRUE(replay_guarded("PUT", Kind::kItem, true));
  EXPECT_TRUE(replay_guarded("GET", Kind::kContainer, true));
}

TEST(GatewayBase64, RoundTripsAndRefusesJunk) {
  for (std::string bytes : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                            std::string("\0\xff\x10", 3)}) {
    Result<std::string> back = base64_decode(base64_encode(bytes));
    ASSERT_TRUE(back.is_ok());
    EXPECT_EQ(*back, bytes);
  }
  for (const char* junk : {"a", "ab=c", "====", "ab c", "abc\n"}) EXPECT_FALSE(base64_decode(junk).is_ok()) << junk;
}

TEST(GatewayRoute, FeedsAndResourcesSignTheirTypeAndLink) {
  struct Case {
    const char* target;
    Route::Kind kind;
    const char* type;
    const char* link;
  };
  const Case cases[] = {
      {"/", Route::Kind::kAccount, "", ""},
      {"/dbs", Route::Kind::kDatabases, "dbs", ""},
      {"/dbs/", Route::Kind::kDatabases, "dbs", ""},
      {"/dbs/shop", Route::Kind::kDatabase, "dbs", "dbs/shop"},
      {"/dbs/shop/colls/", Route::Kind::kContainers, "colls", "dbs/shop"},
      {"/dbs/shop/colls/carts", Route::Kind::kContainer, "colls", "dbs/shop/colls/carts"},
      {"/dbs/shop/colls/carts/pkranges", Route::Kind::kPartitionKeyRanges, "pkranges", "dbs/shop/colls/carts"},
      {"/dbs/shop/colls/carts/docs", Route::Kind::kItems, "docs", "dbs/shop/colls/carts"},
      {"/dbs/shop/colls/carts/docs/c1/", Route::Kind::kItem, "docs", "dbs/shop/colls/carts/docs/c1"},
      {"/dbs/shop/colls/carts/docs/a%20b?x=1", Route::Kind::kItem, "docs", "dbs/shop/colls/carts/docs/a b"},
      {"/dbs/Shop/colls/Carts/docs/ID", Route::Kind::kItem, "docs", "dbs/Shop/colls/Carts/docs/ID"},
      // Delete by partition key: signed as the container (the Python SDK sends "colls", not "partitionkey").
      {"/dbs/shop/colls/carts/operations/partitionkeydelete", Route::Kind::kPartitionKeyDelete, "colls",
       "dbs/shop/colls/carts"},
      {"/dbs/shop/colls/carts/conflicts", Route::Kind::kConflicts, "conflicts", "dbs/shop/colls/carts"},
      {"/dbs/shop/colls/carts/conflicts/x", Route::Kind::kConflict, "conflicts", "dbs/shop/colls/carts/conflicts/x"},
      // Mayfly's legal holds: a feed and its entries, like docs.
      {"/dbs/shop/colls/carts/holds", Route::Kind::kHolds, "holds", "dbs/shop/colls/carts"},
      {"/dbs/shop/colls/carts/holds/case%2017", Route::Kind::kHold, "holds", "dbs/shop/colls/carts/holds/case 17"},
  };
  for (const Case& c : cases) {
    Result<Route> route = parse_route(c.target);
    ASSERT_TRUE(route.is_ok()) << c.target << ": " << route.status().message();
    EXPECT_EQ(route->kind, c.kind) << c.target;
    EXPECT_EQ(route->resource_type, c.type) << c.target;
    EXPECT_EQ(route->resource_link, c.link) << c.target;
  }
  Result<Route> item = parse_route("/dbs/a%2Fb/colls/c/docs/x%2By");
  ASSERT_TRUE(item.is_ok());
  EXPECT_EQ(item->database, "a/b");
  EXPECT_EQ(item->id, "x+y");
}

TEST(GatewayRoute, UnsupportedResourcesAreNamedAndJunkIsRefused) {
  for (const char* target : {"/dbs/d/colls/c/sprocs", "/dbs/d/users/u", "/dbs/d/colls/c/udfs/f",
                             "/dbs/d/colls/c/docs/i/attachments"}) {
    Result<Route> route = parse_route(target);
    ASSERT_TRUE(route.is_ok()) << target;
    EXPECT_EQ(route->kind, Route::Kind::kUnsupported) << target;
    EXPECT_FALSE(route->feature.empty());
  }
  for (const char* target : {"", "dbs", "/x", "/dbs/d/tables", "/dbs/d/colls/c/docs/i/x/y", "/dbs//colls",
                             "/dbs/a%zz", "/dbs/a%2", "/dbs/a%00b", "/dbs/d/colls/c/things", "/offers/a/b"}) {
    EXPECT_FALSE(parse_route(target).is_ok()) << target;
  }
}

TEST(GatewayHeaders, PartitionKey) {
  EXPECT_EQ(*parse_partition_key_header("[\"a\"]"), "\"a\"");
  EXPECT_EQ(*parse_partition_key_header("[5]"), "5");
  EXPECT_EQ(*parse_partition_key_header("[true]"), "true");
  EXPECT_EQ(*parse_partition_key_header("[null]"), "null");
  // A hierarchical key's value: the array, as the node reads it.
  EXPECT_EQ(*parse_partition_key_header("[\"a\", 5]"), "[\"a\",5]");
  // {}: no value at the path (PartitionKey.None), the undefined partition.
  EXPECT_EQ(*parse_partition_key_header("[{}]"), "{}");
  EXPECT_EQ(*parse_partition_key_header("[\"a\",{}]"), "[\"a\",{}]");
  for (const char* bad : {"", "a", "\"a\"", "[]", "[1,2,3,4]", "[{\"x\":1}]", "[[1]]", "[\"a\"", "{\"a\":1}"}) {
    Result<std::string> parsed = parse_partition_key_header(bad);
    ASSERT_FALSE(parsed.is_ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(GatewayHeaders, SessionTokenConsistencyAndPageSize) {
  EXPECT_EQ(*parse_session_token_header(""), 0u);
  EXPECT_EQ(*parse_session_token_header("0:1#42"), 42u);
  EXPECT_EQ(*parse_session_token_header("0:-1#42#1=7"), 42u);
  EXPECT_EQ(*parse_session_token_header("0:1#42,1:1#50"), 50u);
  EXPECT_EQ(*parse_session_token_header("17"), 17u);
  EXPECT_EQ(*parse_session_token_header(format_session_token(99)), 99u);
  for (const char* bad : {"0:1#", "0:1#x", "abc", "0:1#-5", ",", "0:1#99999999999999999999999"}) {
    EXPECT_FALSE(parse_session_token_header(bad).is_ok()) << bad;
  }
  EXPECT_EQ(*parse_consistency_header("None"), std::nullopt);
  EXPECT_EQ(*parse_consistency_header("strong"), Consistency::kStrong);
  EXPECT_EQ(*parse_consistency_header("BoundedStaleness"), Consistency::kBounded);
  EXPECT_EQ(*parse_consistency_header("ConsistentPrefix"), Consistency::kEventual);
  EXPECT_FALSE(parse_consistency_header("linearizable").is_ok());
  EXPECT_EQ(*parse_max_item_count("", 100), 100u);
  EXPECT_EQ(*parse_max_item_count("-1", 100), 100u);
  EXPECT_EQ(*parse_max_item_count("7", 100), 7u);
  EXPECT_EQ(*parse_max_item_count("5000", 100), 1000u);
  for (const char* bad : {"0", "-2", "x", "1x", "99999999999999999999"}) {
    EXPECT_FALSE(parse_max_item_count(bad, 100).is_ok()) << bad;
  }
  EXPECT_TRUE(header_flag("True"));
  EXPECT_TRUE(header_flag("true"));
  EXPECT_FALSE(header_flag("1"));
}

HttpRequest request(std::string method, std::string target, std::string body = "",
                    std::map<std::string, std::string> headers = {}) {
  return HttpRequest{std::move(method), std::move(target), std::move(headers), std::move(body)};
}

int answered_status(const Plan& plan) { return plan.answer ? plan.answer->status : 0; }

TEST(GatewayTranslate, BadAndUnsupportedCallsAreAnsweredWithoutTheNode) {
  const std::map<std::string, std::string> pk = {{"x-ms-documentdb-partitionkey", "[\"a\"]"}};
  EXPECT_EQ(answered_status(plan_request(request("GET", "/nope"))), 400);
  EXPECT_EQ(answered_status(plan_request(request("POST", "/"))), 405);
  EXPECT_EQ(answered_status(plan_request(request("GET", "/dbs/d/colls/c/sprocs"))), 501);
  EXPECT_EQ(answered_status(plan_request(request("POST", "/dbs", "{not json"))), 400);
  EXPECT_EQ(answered_status(plan_request(request("POST", "/dbs", "{\"name\":\"x\"}"))), 400);
  EXPECT_EQ(answered_status(plan_request(request("POST", "/dbs/d/colls", "{\"id\":\"c\"}"))), 400);  // no pk
  EXPECT_EQ(answered_status(plan_request(request(
                "POST", "/dbs/d/colls", R"({"id":"c","partitionKey":{"paths":["/a","/b"],"kind":"Hash"}})"))),
            400);  // two paths need kind MultiHash
  EXPECT_EQ(answered_status(plan_request(request(
                "POST", "/dbs/d/colls", R"({"id":"c","partitionKey":{"paths":["/a"],"kind":"Range"}})"))),
            501);  // a kind Mayfly does not have, named
  EXPECT_EQ(answered_status(plan_request(request(
                "POST", "/dbs/d/colls",
                R"({"id":"c","partitionKey":{"paths":["/a"]},"uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/x"]}]}})"))),
            501);
  EXPECT_EQ(answered_status(plan_request(request("GET", "/dbs/d/colls/c/docs/i"))), 400);  // no partition key
  EXPECT_EQ(answered_status(plan_request(request("GET", "/dbs/d/colls/c/docs/i", "",
                                                 {{"x-ms-documentdb-partitionkey", "[{\"x\":1}]"}}))),
            400);
  EXPECT_EQ(answered_status(plan_request(request("PUT", "/dbs/d/colls/c/docs/i", "{\"id\":\"j\"}", pk))), 400);
  // A conditional patch's condition goes to the node (which decides it); one that is not a string is a 400 here.
  {
    Plan plan = plan_request(
        request("PATCH", "/dbs/d/colls/c/docs/i", R"({"operations":[],"condition":"from c where c.x"})", pk));
    ASSERT_FALSE(plan.answer);
    const api::PatchItem* patch = plan.call.request ? plan.call.request->as<api::PatchItem>() : nullptr;
    ASSERT_NE(patch, nullptr);
    EXPECT_EQ(patch->condition, "from c where c.x");
  }
  EXPECT_EQ(answered_status(plan_request(
                request("PATCH", "/dbs/d/colls/c/docs/i", R"({"operations":[],"condition":7})", pk))),
            400);
  EXPECT_EQ(answered_status(plan_request(request("POST", "/dbs/d/colls/c/docs", "{\"q\":1}",
                                                 {{"x-ms-documentdb-isquery", "True"}}))),
            400);
  EXPECT_EQ(answered_status(plan_request(request("GET", "/dbs/d/colls/c/docs", "", {{"x-ms-max-item-count", "0"}}))),
            400);
  EXPECT_EQ(answered_status(plan_request(request("GET", "/dbs", "", {{"x-ms-session-token", "garbage"}}))), 400);
  // The change feed: every malformed or unsupported header is named.
  auto feed_status = [](std::map<std::string, std::string> headers) {
    Plan plan = plan_request(request("GET", "/dbs/d/colls/c/docs", "", std::move(headers)));
    return plan.answer ? plan.answer->status : 0;
  };
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}}), 0);
  EXPECT_EQ(feed_status({{"a-im", "Full-Fidelity Feed"}, {"x-ms-cosmos-changefeed-wire-format-version", "2021-09-15"}}),
            0);
  EXPECT_EQ(feed_status({{"a-im", "Full-Fidelity Feed"}, {"x-ms-cosmos-changefeed-wire-format-version", "1999"}}), 501);
  EXPECT_EQ(feed_status({{"a-im", "Full-Fidelity Feed"}}), 501);
  EXPECT_EQ(feed_status({{"a-im", "bogus"}}), 400);
  EXPECT_EQ(feed_status({{"x-ms-cosmos-changefeed-wire-format-version", "2021-09-15"}}), 400);
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"if-none-match", "\"not-hex\""}}), 400);
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"if-modified-since", "yesterday"}}), 400);
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"x-ms-max-item-count", "-5"}}), 400);
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"x-ms-documentdb-partitionkeyrangeid", "3"}}), 400);
  // A feed range or one partition key scopes the feed (both at once, or a malformed one: 400).
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"x-ms-start-epk", "05C1"}, {"x-ms-end-epk", "05C2"}}), 0);
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"x-ms-documentdb-partitionkey", "[\"a\"]"}}), 0);
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"x-ms-documentdb-partitionkey", "[\"a\"]"},
                         {"x-ms-start-epk", "05C1"}, {"x-ms-end-epk", "05C2"}}), 400);
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"x-ms-start-epk", "05C2"}, {"x-ms-end-epk", "05C1"}}), 400);
  EXPECT_EQ(feed_status({{"a-im", "Incremental feed"}, {"x-ms-start-epk", "zz"}}), 400);
}

TEST(GatewayTranslate, ChangeFeedHeadersBecomeReadChangeFeed) {
  auto feed_of = [](std::map<std::string, std::string> headers) {
    Plan plan = plan_request(request("GET", "/dbs/d/colls/c/docs", "", std::move(headers)));
    EXPECT_FALSE(plan.answer);
    EXPECT_EQ(plan.spec.shape, RenderSpec::Shape::kChangeFeed);
    EXPECT_TRUE(plan.call.request.has_value());
    const api::ReadChangeFeed* feed = plan.call.request ? plan.call.request->as<api::ReadChangeFeed>() : nullptr;
    EXPECT_NE(feed, nullptr);
    api::ReadChangeFeed wire = feed != nullptr ? *feed : api::ReadChangeFeed{};
    return std::make_pair(std::move(plan), wire);
  };
  {
    auto [plan, wire] = feed_of({{"a-im", "Incremental feed"}, {"x-ms-documentdb-partitionkeyrangeid", "0"}});
    EXPECT_EQ(wire.mode, api::ReadChangeFeed::Mode::kLatest);
    EXPECT_EQ(wire.from, api::ReadChangeFeed::From::kBeginning);
    EXPECT_EQ(wire.max_items, 100u);
    EXPECT_FALSE(plan.spec.all_versions);
  }
  {
    auto [plan, wire] = feed_of({{"a-im", "Full-Fidelity Feed"},
                                 {"x-ms-cosmos-changefeed-wire-format-version", "2021-09-15"},
                                 {"if-none-match", "*"},
                                 {"x-ms-max-item-count", "7"}});
    EXPECT_EQ(wire.mode, api::ReadChangeFeed::Mode::kAll);
    EXPECT_EQ(wire.from, api::ReadChangeFeed::From::kNow);
    EXPECT_EQ(wire.max_items, 7u);
    EXPECT_TRUE(plan.spec.all_versions);
    // Cosmos DB's feed has no expiring-soon warnings (docs/retention.md): the gateway never asks for them.
    EXPECT_TRUE(wire.no_warnings);
    EXPECT_FALSE(wire.only_warnings);
  }
  {
    // The continuation wins over the start time (the SDK sends both after the first page).
    auto [plan, wire] = feed_of({{"a-im", "incremental feed"}, {"if-none-match", "\"01ab\""},
                                 {"if-modified-since", "Tue, 24 Nov 2026 11:00:00 GMT"}});
    ASSERT_EQ(wire.from, api::ReadChangeFeed::From::kContinuation);
    EXPECT_EQ(wire.continuation, "01ab");
  }
  {
    auto [plan, wire] = feed_of({{"a-im", "Incremental feed"}, {"if-modified-since", "Tue, 24 Nov 2026 11:00:00 GMT"}});
    ASSERT_EQ(wire.from, api::ReadChangeFeed::From::kTime);
    EXPECT_EQ(wire.time_micros, int64_t{1795518000} * 1'000'000);
  }
}

TEST(GatewayRender, ChangeFeedPages) {
  RenderSpec spec;
  spec.shape = RenderSpec::Shape::kChangeFeed;
  spec.route.database = "d";
  spec.route.container = "c";
  auto header = [](const HttpResponse& response, const std::string& name) {
    for (const auto& [key, value] : response.headers) {
      if (key == name) return value;
    }
    return std::string();
  };
  node::Reply reply;
  reply.result.body =
      R"({"changes":[{"operationType":"create","position":"aa","lsn":7,"ts":100,"tsMicros":100000000,)"
      R"("partitionKey":"t","id":"x","current":{"id":"x","k":"t","_rid":"1.2","_etag":"\"3\"","_ts":100},)"
      R"("previous":null},{"operationType":"delete","position":"bb","lsn":9,"ts":101,"tsMicros":101000000,)"
      R"("partitionKey":"t","id":"x","current":null,"previous":{"id":"x","k":"t","_rid":"1.2","_etag":"\"3\"",)"
      R"("_ts":100},"timeToLiveExpired":true}],"partitionKeyPath":"/k","continuation":"0bb","caughtUp":true})";
  // Latest version: the images, like item reads, with _lsn. (The node sends no delete in this mode; one is skipped.)
  HttpResponse latest = render_reply(spec, reply);
  EXPECT_EQ(latest.status, 200);
  EXPECT_EQ(header(latest, "etag"), "\"0bb\"");
  Result<boost::json::value> body = json::parse(latest.body);
  ASSERT_TRUE(body.is_ok()) << latest.body;
  ASSERT_EQ(body->at("Documents").as_array().size(), 1u);
  EXPECT_EQ(body->at("Documents").at(0).at("_lsn").to_number<uint64_t>(), 7u);
  EXPECT_EQ(body->at("Documents").at(0).at("_self").as_string(), "dbs/d/colls/c/docs/x/");
  EXPECT_EQ(body->at("_count").as_int64(), 1);
  // All versions and deletes: current / previous / metadata, an expiration as a delete with timeToLiveExpired.
  spec.all_versions = true;
  HttpResponse all = render_reply(spec, reply);
  body = json::parse(all.body);
  ASSERT_TRUE(body.is_ok()) << all.body;
  const auto& documents = body->at("Documents").as_array();
  ASSERT_EQ(documents.size(), 2u);
  EXPECT_EQ(documents[0].at("metadata").at("operationType").as_string(), "create");
  EXPECT_FALSE(documents[0].as_object().contains("previous"));
  const auto& expired = documents[1].at("metadata");
  EXPECT_EQ(expired.at("operationType").as_string(), "delete");
  EXPECT_TRUE(expired.at("timeToLiveExpired").as_bool());
  EXPECT_EQ(expired.at("lsn").to_number<uint64_t>(), 9u);
  EXPECT_EQ(expired.at("id").as_string(), "x");
  EXPECT_EQ(expired.at("partitionKey").at("k").as_string(), "t");
  EXPECT_EQ(documents[1].at("previous").at("id").as_string(), "x");
  EXPECT_TRUE(documents[1].at("current").as_object().empty());
  // Caught up and nothing new: 304 with the etag to resume from; not caught up: an empty 200 page.
  reply.result.body = R"({"changes":[],"continuation":"0cc","caughtUp":true})";
  HttpResponse idle = render_reply(spec, reply);
  EXPECT_EQ(idle.status, 304);
  EXPECT_EQ(header(idle, "etag"), "\"0cc\"");
  EXPECT_TRUE(idle.body.empty());
  reply.result.body = R"({"changes":[],"continuation":"0dd","caughtUp":false})";
  HttpResponse partial = render_reply(spec, reply);
  EXPECT_EQ(partial.status, 200);
  EXPECT_EQ(header(partial, "etag"), "\"0dd\"");
  // A body that is not a page is a 500 naming it, never a crash.
  reply.result.body = R"({"changes":[1],"continuation":"0ee","caughtUp":true})";
  EXPECT_EQ(render_reply(spec, reply).status, 500);
}

TEST(GatewayTranslate, CallsBecomeTheRequestsOfTheApi) {
  Plan account = plan_request(request("GET", "/"));
  EXPECT_FALSE(account.answer);
  EXPECT_FALSE(account.call.request.has_value());  // authenticate only

  Plan query = plan_request(request(
      "POST", "/dbs/d/colls/c/docs", R"({"query":"SELECT * FROM c WHERE c.n = @n","parameters":[{"name":"@n","value":3}]})",
      {{"x-ms-documentdb-isquery", "True"}, {"x-ms-max-item-count", "2"}, {"x-ms-continuation", "abc"},
       {"x-ms-session-token", "0:1#12"}, {"x-ms-consistency-level", "Strong"}}));
  ASSERT_FALSE(query.answer);
  ASSERT_TRUE(query.call.request.has_value());
  const api::Request& wire = *query.call.request;
  ASSERT_NE(wire.as<api::Query>(), nullptr);
  EXPECT_EQ(wire.as<api::Query>()->sql, "SELECT * FROM c WHERE c.n = @n");
  EXPECT_EQ(wire.as<api::Query>()->parameters, "{\"@n\":3}");
  EXPECT_FALSE(wire.as<api::Query>()->partition_key.has_value());
  EXPECT_EQ(wire.options.max_items, 2u);
  EXPECT_EQ(wire.options.continuation, "abc");
  EXPECT_EQ(wire.options.session_token, "12");
  EXPECT_EQ(wire.options.consistency, Consistency::kStrong);
  EXPECT_EQ(wire.database, "d");
  EXPECT_EQ(wire.container, "c");

  Plan replace = plan_request(request("PUT", "/dbs/d/colls/c", R"({"id":"c","partitionKey":{"paths":["/a"]}})"));
  ASSERT_FALSE(replace.answer);
  ASSERT_TRUE(replace.call.request.has_value());
  const api::UpdateContainer* update = replace.call.request->as<api::UpdateContainer>();
  ASSERT_NE(update, nullptr);
  // PUT without defaultTtl turns TTL off
  EXPECT_EQ(update->settings.default_ttl, api::ContainerSettings::DefaultTtl::kRemove);

  Plan create = plan_request(request("POST", "/dbs/d/colls", R"({"id":"c","partitionKey":{"paths":["/a"]},"defaultTtl":10})",
                                     {{"x-ms-offer-throughput", "400"}}));
  ASSERT_FALSE(create.answer);
  ASSERT_TRUE(create.call.request.has_value());
  ASSERT_NE(create.call.request->as<api::CreateContainer>(), nullptr);
  const api::ContainerSettings& settings = create.call.request->as<api::CreateContainer>()->settings;
  EXPECT_EQ(settings.default_ttl, api::ContainerSettings::DefaultTtl::kSet);
  EXPECT_EQ(settings.default_ttl_json, "10");
  EXPECT_EQ(settings.throughput, api::ContainerSettings::Throughput::kProvisioned);
  EXPECT_EQ(settings.provisioned_ru_per_second, 400u);
  EXPECT_EQ(create.call.request->container, "c");
}

TEST(GatewayTranslate, HierarchicalKeysAndSharedThroughput) {
  Plan hierarchical = plan_request(request(
      "POST", "/dbs/d/colls", R"({"id":"c","partitionKey":{"paths":["/tenant","/user"],"kind":"MultiHash"}})"));
  ASSERT_FALSE(hierarchical.answer);
  EXPECT_EQ(hierarchical.call.request->as<api::CreateContainer>()->settings.partition_key_path,
            R"(["/tenant","/user"])");
  Plan database = plan_request(request("POST", "/dbs", R"({"id":"d"})", {{"x-ms-offer-throughput", "1000"}}));
  ASSERT_FALSE(database.answer);
  ASSERT_NE(database.call.request->as<api::CreateDatabase>(), nullptr);
  EXPECT_EQ(database.call.request->as<api::CreateDatabase>()->shared_ru_per_second, 1000u);
  EXPECT_EQ(answered_status(plan_request(request("POST", "/dbs", R"({"id":"d"})", {{"x-ms-offer-throughput", "x"}}))),
            400);
  EXPECT_EQ(answered_status(plan_request(request("POST", "/dbs", R"({"id":"d"})",
                                                 {{"x-ms-cosmos-offer-autopilot-settings", "{}"}}))),
            400);
}

TEST(GatewayTranslate, OffersAreListedAndReplacedThroughTheirResource) {
  Plan list = plan_request(request("GET", "/offers"));
  ASSERT_FALSE(list.answer);
  EXPECT_NE(list.call.request->as<api::ListOffers>(), nullptr);
  Plan query = plan_request(request("POST", "/offers", R"({"query":"SELECT * FROM root r WHERE r.resource=@link",)"
                                                       R"("parameters":[{"name":"@link","value":"dbs/d/"}]})",
                                    {{"x-ms-documentdb-isquery", "True"}, {"content-type", "application/query+json"}}));
  ASSERT_FALSE(query.answer) << query.answer->body;
  EXPECT_EQ(query.spec.shape, RenderSpec::Shape::kOffers);

  const std::string id = offer_id("dbs/d/colls/c");
  EXPECT_EQ(id.size(), 8u);
  EXPECT_NE(id, offer_id("dbs/d"));
  Plan replace = plan_request(request(
      "PUT", "/offers/" + id,
      R"({"id":")" + id + R"(","resource":"dbs/d/colls/c/","content":{"offerThroughput":700}})"));
  ASSERT_FALSE(replace.answer) << replace.answer->body;
  const api::UpdateContainer* update = replace.call.request->as<api::UpdateContainer>();
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(replace.call.request->database, "d");
  EXPECT_EQ(replace.call.request->container, "c");
  EXPECT_EQ(update->settings.throughput, api::ContainerSettings::Throughput::kProvisioned);
  EXPECT_EQ(update->settings.provisioned_ru_per_second, 700u);
  EXPECT_EQ(update->settings.default_ttl, api::ContainerSettings::DefaultTtl::kUnchanged);  // only the throughput
  // The render names the container; the signature covers the offer, by its id lower-cased as the SDKs sign it.
  EXPECT_EQ(replace.spec.route.container, "c");
  EXPECT_EQ(replace.spec.route.resource_type, "offers");
  std::string signed_id = id;
  for (char& c : signed_id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(replace.spec.route.resource_link, signed_id);

  const std::string database_id = offer_id("dbs/d");
  Plan database = plan_request(request(
      "PUT", "/offers/" + database_id, R"({"resource":"dbs/d/","content":{"offerThroughput":900}})"));
  ASSERT_FALSE(database.answer);
  ASSERT_NE(database.call.request->as<api::UpdateDatabase>(), nullptr);
  EXPECT_EQ(database.call.request->as<api::UpdateDatabase>()->shared_ru_per_second, 900u);

  // The id must be the resource's offer; the throughput a positive number; no autoscale.
  EXPECT_EQ(answered_status(plan_request(request(
                "PUT", "/offers/" + database_id, R"({"resource":"dbs/d/colls/c/","content":{"offerThroughput":9}})"))),
            400);
  EXPECT_EQ(answered_status(plan_request(request(
                "PUT", "/offers/" + database_id, R"({"resource":"dbs/d/","content":{"offerThroughput":0}})"))),
            400);
  EXPECT_EQ(answered_status(plan_request(request(
                "PUT", "/offers/" + database_id,
                R"({"resource":"dbs/d/","content":{"offerThroughput":400,"offerAutopilotSettings":{"maxThroughput":4000}}})"))),
            501);
  EXPECT_EQ(answered_status(plan_request(request("DELETE", "/offers/" + database_id))), 405);
}

TEST(GatewayRender, OffersFromTheNodesList) {
  node::Reply reply;
  reply.result.body = R"([{"database":"d","rid":"AbCdEg==","throughput":1000,"ts":5},)"
                      R"({"database":"d","container":"c","rid":"AbCdEgAAAAE=","throughput":400,"ts":6}])";
  RenderSpec spec;
  spec.shape = RenderSpec::Shape::kOffers;
  HttpResponse all = render_reply(spec, reply);
  ASSERT_EQ(all.status, 200) << all.body;
  Result<boost::json::value> parsed = json::parse(all.body);
  ASSERT_TRUE(parsed.is_ok());
  const boost::json::array& offers = parsed->as_object().at("Offers").as_array();
  ASSERT_EQ(offers.size(), 2u);
  EXPECT_EQ(offers[1].as_object().at("resource"), "dbs/d/colls/c/");
  EXPECT_EQ(offers[1].as_object().at("offerResourceId"), "AbCdEgAAAAE=");
  EXPECT_EQ(offers[1].as_object().at("id").as_string(), offer_id("dbs/d/colls/c"));
  EXPECT_EQ(offers[1].as_object().at("content").as_object().at("offerThroughput"), 400);
  // query_offers as the SDKs' get_throughput sends it: by the resource's _self.
  spec.query = RenderSpec::MetadataQuery{"SELECT * FROM root r WHERE r.resource=@link", R"({"@link":"dbs/d/"})"};
  HttpResponse one = render_reply(spec, reply);
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_NE(one.body.find(R"("offerThroughput":1000)"), std::string::npos) << one.body;
  EXPECT_EQ(one.body.find(R"("offerThroughput":400)"), std::string::npos) << one.body;
  spec.query.reset();
  spec.shape = RenderSpec::Shape::kOffer;
  spec.route.id = "nope";
  EXPECT_EQ(render_reply(spec, reply).status, 404);
  spec.route.id = offer_id("dbs/d");
  EXPECT_NE(render_reply(spec, reply).body.find(R"("resource":"dbs/d/")"), std::string::npos);
}

TEST(GatewayRender, AContainerReadReportsItsIndexUpToDate) {
  node::Reply reply;
  reply.result.body = R"({"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash"}})";
  RenderSpec spec;
  spec.shape = RenderSpec::Shape::kContainer;
  spec.route.database = "d";
  spec.route.container = "c";
  const HttpResponse response = render_reply(spec, reply);
  ASSERT_EQ(response.status, 200) << response.body;
  bool found = false;
  for (const auto& [name, value] : response.headers) {
    if (name == "x-ms-documentdb-collection-index-transformation-progress") found = value == "100";
  }
  EXPECT_TRUE(found);
}

TEST(GatewayRender, ErrorsAndPartitionKeyRanges) {
  node::Reply missing = node::Reply::error(StatusCode::kNotFound, "item 'x' does not exist");
  missing.retry_after_ms = 0;
  RenderSpec spec;
  spec.shape = RenderSpec::Shape::kItem;
  HttpResponse response = render_reply(spec, missing);
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(response.body, R"({"code":"NotFound","message":"item 'x' does not exist"})");

  node::Reply throttled = node::throttled_reply(250);
  response = render_reply(spec, throttled);
  EXPECT_EQ(response.status, 429);
  bool retry_after = false;
  for (const auto& [name, value] : response.headers) retry_after |= name == "x-ms-retry-after-ms" && value == "250";
  EXPECT_TRUE(retry_after);

  RenderSpec ranges;
  ranges.shape = RenderSpec::Shape::kPartitionKeyRanges;
  node::Reply found;
  response = render_reply(ranges, found);
  EXPECT_EQ(response.status, 200);
  std::string etag;
  for (const auto& [name, value] : response.headers) {
    if (name == "etag") etag = value;
  }
  ASSERT_FALSE(etag.empty());
  ranges.if_none_match = etag;
  EXPECT_EQ(render_reply(ranges, found).status, 304);  // else the SDK asks again forever
}

// query_databases / query_containers: a POST with x-ms-documentdb-isquery on /dbs or /dbs/{db}/colls is a query over
// the list, not a create (which answered 400 "the database definition needs an id").
TEST(GatewayTranslate, DatabaseAndContainerQueriesAreQueriesNotCreates) {
  const std::map<std::string, std::string> is_query = {{"x-ms-documentdb-isquery", "True"},
                                                       {"content-type", "application/query+json"}};
  const std::string body = R"({"query":"SELECT * FROM root r WHERE r.id=@id","parameters":[{"name":"@id","value":"b"}]})";
  Plan databases = plan_request(request("POST", "/dbs", body, is_query));
  ASSERT_FALSE(databases.answer) << databases.answer->body;
  ASSERT_TRUE(databases.call.request.has_value());
  EXPECT_NE(databases.call.request->as<api::ListDatabases>(), nullptr);
  ASSERT_TRUE(databases.spec.query.has_value());
  EXPECT_EQ(databases.spec.query->parameters, R"({"@id":"b"})");

  node::Reply names;
  names.result.body = R"(["a","b","c"])";
  HttpResponse page = render_reply(databases.spec, names);
  EXPECT_EQ(page.status, 200) << page.body;
  Result<boost::json::value> parsed = json::parse(page.body);
  ASSERT_TRUE(parsed.is_ok()) << page.body;
  const boost::json::array& found = parsed->as_object().at("Databases").as_array();
  ASSERT_EQ(found.size(), 1u) << page.body;
  EXPECT_EQ(found[0].as_object().at("id").as_string(), "b");
  EXPECT_EQ(parsed->as_object().at("_count").as_int64(), 1);

  Plan containers = plan_request(request("POST", "/dbs/d/colls", R"({"query":"SELECT VALUE COUNT(1) FROM c"})", is_query));
  ASSERT_FALSE(containers.answer);
  ASSERT_NE(containers.call.request->as<api::ListContainers>(), nullptr);
  node::Reply list;
  list.result.body = R"([{"id":"x","partitionKey":{"paths":["/a"],"kind":"Hash"}},{"id":"y"}])";
  page = render_reply(containers.spec, list);
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(json::to_json(json::parse(page.body)->as_object().at("DocumentCollections")), "[2]");

  // A bad query is the query engine's 400; a partition key has no meaning here.
  Plan bad = plan_request(request("POST", "/dbs", R"({"query":"SELECT FROM"})", is_query));
  ASSERT_FALSE(bad.answer);
  EXPECT_EQ(render_reply(bad.spec, names).status, 400);
  Plan keyed = plan_request(request("POST", "/dbs", body, {{"x-ms-documentdb-isquery", "True"},
                                                          {"x-ms-documentdb-partitionkey", "[\"a\"]"}}));
  EXPECT_EQ(answered_status(keyed), 400);
  // A create is still a create.
  Plan create = plan_request(request("POST", "/dbs", R"({"id":"n"})"));
  ASSERT_FALSE(create.answer);
  EXPECT_NE(create.call.request->as<api::CreateDatabase>(), nullptr);
}

// A transactional batch (a JSON array with x-ms-cosmos-is-batch-request) was taken for a create: 400 "item body must
// be a JSON object". It is one request to the node, on the partition in the header; bulk (non-atomic) is refused.
TEST(GatewayTranslate, TransactionalBatchIsOneRequestNotACreate) {
  const std::string operations = R"([{"operationType":"Create","resourceBody":{"id":"a","pk":"p"}}])";
  Plan batch = plan_request(request("POST", "/dbs/d/colls/c/docs", operations,
                                    {{"x-ms-cosmos-is-batch-request", "True"}, {"x-ms-cosmos-batch-atomic", "True"},
                                     {"x-ms-documentdb-partitionkey", "[\"p\"]"}}));
  ASSERT_FALSE(batch.answer) << batch.answer->body;
  const api::ExecuteBatch* call = batch.call.request->as<api::ExecuteBatch>();
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->partition_key, "\"p\"");
  EXPECT_EQ(call->operations, operations);
  EXPECT_EQ(batch.spec.shape, RenderSpec::Shape::kBatch);
  Plan bulk = plan_request(request("POST", "/dbs/d/colls/c/docs", operations,
                                   {{"x-ms-cosmos-is-batch-request", "True"}, {"x-ms-cosmos-batch-atomic", "False"},
                                    {"x-ms-documentdb-partitionkey", "[\"p\"]"}}));
  EXPECT_EQ(answered_status(bulk), 501);
  Plan keyless = plan_request(request("POST", "/dbs/d/colls/c/docs", operations,
                                      {{"x-ms-cosmos-is-batch-request", "True"}}));
  EXPECT_EQ(answered_status(keyless), 400);
  // The node's answer goes out as it is, with its status (207 for a batch that failed as a whole).
  node::Reply reply;
  reply.result.done = Done::kMultiStatus;
  reply.result.body = R"([{"statusCode":409,"requestCharge":1.00},{"statusCode":424,"requestCharge":0.00}])";
  HttpResponse response = render_reply(batch.spec, reply);
  EXPECT_EQ(response.status, 207);
  EXPECT_EQ(response.body, reply.result.body);
}

// Cosmos binary JSON bodies (0x80 first) get a 400 that says how to turn it off, not "malformed JSON at byte 0".
TEST(GatewayTranslate, BinaryJsonBodiesAreRefusedByName) {
  Plan binary = plan_request(request("POST", "/dbs/d/colls/c/docs", std::string("\x80\x01\x02", 3),
                                     {{"x-ms-documentdb-partitionkey", "[\"p\"]"}}));
  ASSERT_TRUE(binary.answer);
  EXPECT_EQ(binary.answer->status, 400);
  EXPECT_NE(binary.answer->body.find("binary JSON"), std::string::npos) << binary.answer->body;
}

// The account lists one region, the node's own address as the client reached it; Prefer: return=minimal answers an
// item write without its body (and a read with it).
TEST(GatewayRender, AccountLocationsAndMinimalWrites) {
  Plan account = plan_request(request("GET", "/", "", {{"host", "127.0.0.1:8081"}}));
  ASSERT_FALSE(account.answer);
  account.spec.https = true;
  HttpResponse body = render_reply(account.spec, node::Reply{});
  Result<boost::json::value> parsed = json::parse(body.body);
  ASSERT_TRUE(parsed.is_ok()) << body.body;
  EXPECT_EQ(json::to_json(parsed->as_object().at("writableLocations")),
            R"([{"name":"local","databaseAccountEndpoint":"https://127.0.0.1:8081/"}])");
  EXPECT_EQ(parsed->as_object().at("readableLocations"), parsed->as_object().at("writableLocations"));

  const std::map<std::string, std::string> minimal = {{"prefer", "return=minimal"},
                                                      {"x-ms-documentdb-partitionkey", "[\"p\"]"}};
  node::Reply written;
  written.result.body = R"({"id":"a","pk":"p","_rid":"x","_etag":"\"1\"","_ts":1})";
  Plan create = plan_request(request("POST", "/dbs/d/colls/c/docs", R"({"id":"a","pk":"p"})", minimal));
  ASSERT_FALSE(create.answer);
  EXPECT_TRUE(create.spec.minimal);
  EXPECT_EQ(render_reply(create.spec, written).body, "");
  Plan read = plan_request(request("GET", "/dbs/d/colls/c/docs/a", "", minimal));
  ASSERT_FALSE(read.answer);
  EXPECT_FALSE(read.spec.minimal);
  EXPECT_NE(render_reply(read.spec, written).body, "");
  Plan loud = plan_request(request("POST", "/dbs/d/colls/c/docs", R"({"id":"a","pk":"p"})"));
  EXPECT_NE(render_reply(loud.spec, written).body, "");
}

// query_items(feed_range=...) sends x-ms-start-epk / x-ms-end-epk: they reach the node as the query's feed range
// (they were ignored, and every partition key's items came back).
TEST(GatewayTranslate, QueryFeedRangesReachTheNode) {
  std::map<std::string, std::string> headers = {{"x-ms-documentdb-isquery", "True"},
                                                {"x-ms-start-epk", "1EC0C2CBE45DBC919CF2B65D399C2673"},
                                                {"x-ms-end-epk", "1EC0C2CBE45DBC919CF2B65D399C2674"}};
  Plan ranged = plan_request(request("POST", "/dbs/d/colls/c/docs", R"({"query":"SELECT * FROM c"})", headers));
  ASSERT_FALSE(ranged.answer);
  const api::Query* query = ranged.call.request->as<api::Query>();
  ASSERT_NE(query, nullptr);
  EXPECT_EQ(query->feed_range_min, "1EC0C2CBE45DBC919CF2B65D399C2673");
  EXPECT_EQ(query->feed_range_max, "1EC0C2CBE45DBC919CF2B65D399C2674");
  headers["x-ms-start-epk"] = "";
  headers["x-ms-end-epk"] = "FF";
  Plan whole = plan_request(request("POST", "/dbs/d/colls/c/docs", R"({"query":"SELECT * FROM c"})", headers));
  ASSERT_FALSE(whole.answer);
  EXPECT_TRUE(whole.call.request->as<api::Query>()->feed_range_min.empty());
  EXPECT_TRUE(whole.call.request->as<api::Query>()->feed_range_max.empty());
  headers["x-ms-start-epk"] = "not-hex";
  EXPECT_EQ(answered_status(plan_request(request("POST", "/dbs/d/colls/c/docs", R"({"query":"SELECT * FROM c"})",
                                                 headers))), 400);
}

// Seeded random mutations of real requests through every parser and the planner: each input is either accepted or
// refused with a 4xx/501, never a crash or an assertion ($MAYFLY_GATEWAY_SEED replays a run).
TEST(GatewayTranslate, RandomlyMutatedRequestsAreRefusedCleanly) {
  const char* env = std::getenv("MAYFLY_GATEWAY_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261124;
  std::cout << "seed " << seed << " (MAYFLY_GATEWAY_SEED=" << seed << " replays it)\n";
  Prng random(seed);
  const std::vector<std::string> targets = {"/", "/dbs/", "/dbs/d", "/dbs/d/colls/c", "/dbs/d/colls/c/docs/i%20x",
                                            "/dbs/d/colls/c/pkranges", "/dbs/d/colls/c/docs"};
  const std::vector<std::string> bodies = {R"({"id":"c","partitionKey":{"paths":["/a"]},"defaultTtl":10})",
                                           R"({"query":"SELECT * FROM c WHERE c.a = @a","parameters":[{"name":"@a","value":1}]})",
                                           R"({"operations":[{"op":"set","path":"/a","value":1}]})", R"({"id":"i"})"};
  const std::vector<std::string> methods = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "get", ""};
  auto mutate = [&](std::string text) {
    const uint64_t edits = random.uniform(4);
    for (uint64_t e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = random.uniform(text.size());
      switch (random.uniform(3)) {
        case 0: text[at] = static_cast<char>(random.uniform(256)); break;
        case 1: text.erase(at, 1 + random.uniform(4)); break;
        default: text.insert(at, 1, "%/[]{}\"#,:"[random.uniform(10)]); break;
      }
    }
    return text;
  };
  for (int i = 0; i < 20000; ++i) {
    HttpRequest http;
    http.method = methods[random.uniform(methods.size())];
    http.target = mutate(targets[random.uniform(targets.size())]);
    http.body = mutate(bodies[random.uniform(bodies.size())]);
    http.headers["x-ms-documentdb-partitionkey"] = mutate("[\"a\"]");
    http.headers["x-ms-session-token"] = mutate("0:1#42");
    http.headers["x-ms-max-item-count"] = mutate("10");
    http.headers["x-ms-consistency-level"] = mutate("Session");
    if (random.chance(1, 2)) http.headers["x-ms-documentdb-isquery"] = "True";
    Plan plan = plan_request(http);
    if (plan.answer) {
      EXPECT_TRUE(plan.answer->status == 400 || plan.answer->status == 405 || plan.answer->status == 501)
          << plan.answer->status << " for " << http.method << " " << http.target;
    }
    Result<Authorization> authorization = parse_authorization(mutate("type%3Dmaster%26ver%3D1.0%26sig%3DYWJjZA%3D%3D"));
    if (!authorization.is_ok()) {
      EXPECT_EQ(authorization.status().code(), StatusCode::kUnauthorized);
    }
    (void)parse_http_date(mutate("Tue, 24 Nov 2026 11:00:00 GMT"));
  }
}

}  // namespace
}  // namespace mayfly::gateway
