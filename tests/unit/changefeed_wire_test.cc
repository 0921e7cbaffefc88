// The change feed's wire (issue #15, docs/changefeed.md): readChangeFeed and the container setting decoded from
// proto requests (with their refusals), and a page rendered as JSON from a real store: operation types, positions
// that resume right after a change, images with their system properties, previous images, expirations and 410.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <capnp/message.h>

#include "node/request.h"
#include "store_fixture.h"

namespace mayfly::storage::testing {
namespace {

namespace bj = boost::json;

Result<api::Request> decode(const std::function<void(proto::Request::Builder)>& fill) {
  capnp::MallocMessageBuilder message;
  auto request = message.initRoot<proto::Request>();
  request.setDatabase("db");
  request.setContainer("c");
  fill(request);
  return node::decode_request(request.asReader());
}

TEST(ChangeFeedWire, ReadChangeFeedDecodes) {
  Result<api::Request> op = decode([](proto::Request::Builder request) {
    auto feed = request.initReadChangeFeed();
    feed.setMode(proto::ReadChangeFeed::Mode::LATEST);
    feed.getFrom().setTime(1'700'000'000'500'000);
    feed.setOnlyExpirations(true);
    feed.setMaxItems(7);
    feed.setWaitMs(60'000);
  });
  ASSERT_TRUE(op.is_ok()) << op.status().to_string();
  EXPECT_EQ(op->kind(), api::Kind::kReadChangeFeed);
  EXPECT_TRUE(node::is_read(*op));
  EXPECT_EQ(node::op_name(*op), "change_feed");
  const ChangeFeedRequest feed = node::change_feed_request(*op);
  EXPECT_EQ(feed.database, "db");
  EXPECT_EQ(feed.container, "c");
  EXPECT_EQ(feed.mode, ChangeFeedMode::kLatest);
  EXPECT_EQ(feed.from.kind, ChangeFeedFrom::Kind::kTime);
  EXPECT_EQ(feed.from.ts_micros, 1'700'000'000'500'000);
  EXPECT_TRUE(feed.only_expirations);
  EXPECT_EQ(feed.max_changes, 7u);
  EXPECT_EQ(node::change_feed_wait_ms(*op), node::kMaxChangeFeedWaitMs) << "the long-poll is capped";

  // Defaults: mode all, from the beginning, 100 changes, no wait.
  op = decode([](proto::Request::Builder request) { request.initReadChangeFeed(); });
  ASSERT_TRUE(op.is_ok());
  EXPECT_EQ(node::change_feed_request(*op).mode, ChangeFeedMode::kAll);
  EXPECT_EQ(node::change_feed_request(*op).from.kind, ChangeFeedFrom::Kind::kBeginning);
  EXPECT_EQ(node::change_feed_request(*op).max_changes, 100u);
  EXPECT_EQ(node::change_feed_wait_ms(*op), 0u);

  op = decode([](proto::Request::Builder request) {
    request.initReadChangeFeed().getFrom().setContinuation("00ab");
  });
  ASSERT_TRUE(op.is_ok());
  EXPECT_EQ(node::change_feed_request(*op).from.kind, ChangeFeedFrom::Kind::kContinuation);
  EXPECT_EQ(node::change_feed_request(*op).from.continuation, "00ab");
}

TEST(ChangeFeedWire, BadReadsAre400) {
  Result<api::Request> op = decode([](proto::Request::Builder request) {
    request.initReadChangeFeed().setMaxItems(1001);
  });
  ASSERT_FALSE(op.is_ok());
  EXPECT_EQ(op.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(op.status().message().find("at most 1000"), std::string::npos);
  op = decode([](proto::Request::Builder request) {
    request.initReadChangeFeed().getFrom().setContinuation("");
  });
  ASSERT_FALSE(op.is_ok());
  EXPECT_EQ(op.status().code(), StatusCode::kInvalidArgument);
  op = decode([](proto::Request::Builder request) {
    request.setContainer("");
    request.initReadChangeFeed();
  });
  ASSERT_FALSE(op.is_ok());
  EXPECT_EQ(op.status().code(), StatusCode::kInvalidArgument);
}

TEST(ChangeFeedWire, ContainerSettingTurnsTheFeedOnAndOff) {
  Result<api::Request> on = decode([](proto::Request::Builder request) {
    auto settings = request.initCreateContainer();
    settings.setPartitionKeyPath("/pk");
    settings.getChangeFeed().setOn(600);
  });
  // The leader's --changefeed-retention (777 here) fills in only a feed turned on without one.
  constexpr int64_t kLeaderRetention = 777;
  ASSERT_TRUE(on.is_ok());
  const Command on_command = node::to_command(*on, kLeaderRetention);
  ASSERT_TRUE(on_command.change_feed.has_value());
  EXPECT_TRUE(on_command.change_feed->enabled);
  EXPECT_EQ(on_command.change_feed->retention_seconds, 600);
  Result<api::Request> default_retention = decode([](proto::Request::Builder request) {
    request.initUpdateContainer().getChangeFeed().setOn(0);
  });
  ASSERT_TRUE(default_retention.is_ok());
  const Command default_command = node::to_command(*default_retention, kLeaderRetention);
  ASSERT_TRUE(default_command.change_feed.has_value());
  EXPECT_EQ(default_command.change_feed->retention_seconds, kLeaderRetention);
  Result<api::Request> off = decode([](proto::Request::Builder request) {
    request.initUpdateContainer().getChangeFeed().setOff();
  });
  ASSERT_TRUE(off.is_ok());
  const Command off_command = node::to_command(*off, kLeaderRetention);
  ASSERT_TRUE(off_command.change_feed.has_value());
  EXPECT_FALSE(off_command.change_feed->enabled);
  Result<api::Request> unchanged = decode([](proto::Request::Builder request) {
    request.initUpdateContainer().getIndexing().setNone();
  });
  ASSERT_TRUE(unchanged.is_ok());
  EXPECT_FALSE(node::to_command(*unchanged, kLeaderRetention).change_feed.has_value());
}

class ChangeFeedJsonTest : public StoreFixture {};

TEST_F(ChangeFeedJsonTest, APageAsJson) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  Command create = create_container_command("db", "c", "/pk", "-1");  // TTL on, no default: item ttls count
  create.change_feed = ChangeFeedSettings{true, 3600, 0};
  ASSERT_EQ(apply(create, kT0).http_status(), 201);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p","v":1,"ttl":10})"),
                  kT0 + kSecond)
                .http_status(),
            201);
  ASSERT_EQ(apply(item_command(CommandType::kReplaceItem, "db", "c", R"({"id":"a","pk":"p","v":2,"ttl":10})"),
                  kT0 + 2 * kSecond)
                .http_status(),
            200);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"b","pk":"p","v":1})"), kT0 + 3 * kSecond)
                .http_status(),
            201);
  ASSERT_EQ(apply(target_command(CommandType::kDeleteItem, "db", "c", "\"p\"", "b"), kT0 + 4 * kSecond).http_status(),
            204);
  ASSERT_EQ(apply(Command{}, kT0 + 30 * kSecond).http_status(), 200);  // a time entry: `a` expires here (position 7)

  ChangeFeedRequest request;
  request.database = "db";
  request.container = "c";
  bool idle = true;
  OpResult page = node::execute_change_feed(store_->change_feed(), request, &idle);
  ASSERT_TRUE(page.ok()) << page.message;
  EXPECT_FALSE(idle);
  const bj::object body = bj::parse(page.body).as_object();
  EXPECT_TRUE(body.at("caughtUp").as_bool());
  EXPECT_EQ(body.at("continuation").as_string(), page.continuation);
  const bj::array& changes = body.at("changes").as_array();
  ASSERT_EQ(changes.size(), 5u) << page.body;
  auto field = [&](size_t i, const char* name) { return bj::serialize(changes[i].as_object().at(name)); };
  EXPECT_EQ(field(0, "operationType"), "\"create\"");
  EXPECT_EQ(field(1, "operationType"), "\"replace\"");
  EXPECT_EQ(field(2, "operationType"), "\"create\"");
  EXPECT_EQ(field(3, "operationType"), "\"delete\"");
  EXPECT_EQ(field(4, "operationType"), "\"delete\"");
  EXPECT_EQ(field(4, "timeToLiveExpired"), "true");
  EXPECT_FALSE(changes[3].as_object().contains("timeToLiveExpired"));
  EXPECT_EQ(field(0, "previous"), "null");
  EXPECT_EQ(field(3, "current"), "null");
  EXPECT_EQ(field(4, "current"), "null");
  EXPECT_EQ(changes[1].at("previous").at("v").as_int64(), 1);
  EXPECT_EQ(changes[1].at("current").at("v").as_int64(), 2);
  EXPECT_EQ(changes[4].at("previous").at("v").as_int64(), 2) << "the expired version's image";
  EXPECT_EQ(changes[4].at("previous").at("_expiresAt").as_int64(), (kT0 + 2 * kSecond) / kSecond + 10);
  EXPECT_EQ(changes[1].at("current").at("_ts").as_int64(), (kT0 + 2 * kSecond) / kSecond);
  EXPECT_EQ(field(0, "partitionKey"), "\"p\"");
  EXPECT_EQ(field(0, "id"), "\"a\"");
  EXPECT_EQ(changes[0].at("ts").as_int64(), (kT0 + kSecond) / kSecond);
  EXPECT_EQ(changes[0].at("tsMicros").as_int64(), kT0 + kSecond);
  EXPECT_EQ(changes[4].at("lsn").as_int64(), 7);
  EXPECT_EQ(changes[4].at("ts").as_int64(), (kT0 + 30 * kSecond) / kSecond);

  // A change's position resumes right after it.
  request.from.kind = ChangeFeedFrom::Kind::kContinuation;
  request.from.continuation = std::string(changes[2].at("position").as_string());
  OpResult rest = node::execute_change_feed(store_->change_feed(), request, &idle);
  ASSERT_TRUE(rest.ok()) << rest.message;
  const bj::value rest_body = bj::parse(rest.body);
  const bj::array& after = rest_body.at("changes").as_array();
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].at("position"), changes[3].at("position"));
  EXPECT_EQ(after[1].at("position"), changes[4].at("position"));

  // Caught up with nothing new: a long-poll would wait.
  request.from.continuation = page.continuation;
  OpResult empty = node::execute_change_feed(store_->change_feed(), request, &idle);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(idle);
  EXPECT_EQ(empty.body, "{\"changes\":[],\"partitionKeyPath\":\"/pk\",\"continuation\":\"" + page.continuation +
                            "\",\"caughtUp\":true}");

  // A start before the feed was turned on: 410 with the storage core's message.
  request.from.kind = ChangeFeedFrom::Kind::kTime;
  request.from.ts_micros = kT0 - kSecond;
  OpResult gone = node::execute_change_feed(store_->change_feed(), request, &idle);
  EXPECT_EQ(gone.http_status(), 410) << gone.message;
  EXPECT_NE(gone.message.find("turned on after the time asked for"), std::string::npos) << gone.message;
  EXPECT_FALSE(idle);
}

// An image's _expiresAt is rendered under the defaultTtl in force at the change's position: the expiration a
// defaultTtl cut caused says when the cut made it expire, however the policy changed afterwards.
TEST_F(ChangeFeedJsonTest, ImagesExpireUnderThePolicyAtTheirPosition) {
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0).http_status(), 201);
  Command create = create_container_command("db", "c", "/pk", "100");
  create.change_feed = ChangeFeedSettings{true, 3600, 0};
  ASSERT_EQ(apply(create, kT0).http_status(), 201);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p"})"), kT0 + kSecond)
                .http_status(),
            201);
  // The cut to 10 s at +50 s expires `a` (written at +1 s) at that position; later the default grows to 1000 s.
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::string("10")), kT0 + 50 * kSecond).http_status(), 200);
  ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::string("1000")), kT0 + 60 * kSecond).http_status(), 200);
  ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"b","pk":"p"})"), kT0 + 70 * kSecond)
                .http_status(),
            201);
  ChangeFeedRequest request;
  request.database = "db";
  request.container = "c";
  OpResult page = node::execute_change_feed(store_->change_feed(), request, nullptr);
  ASSERT_TRUE(page.ok()) << page.message;
  const bj::value body = bj::parse(page.body);
  const bj::array& changes = body.at("changes").as_array();
  ASSERT_EQ(changes.size(), 3u) << page.body;
  const int64_t t0 = kT0 / kSecond;
  EXPECT_EQ(changes[0].at("current").at("_expiresAt").as_int64(), t0 + 1 + 100) << page.body;
  EXPECT_EQ(changes[1].at("timeToLiveExpired").as_bool(), true) << page.body;
  EXPECT_EQ(changes[1].at("previous").at("_expiresAt").as_int64(), t0 + 1 + 10) << page.body;
  EXPECT_EQ(changes[2].at("current").at("_expiresAt").as_int64(), t0 + 70 + 1000) << page.body;
}

}  // namespace
}  // namespace mayfly::storage::testing
