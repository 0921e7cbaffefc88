// The operation vocabulary and its one wire codec (api/operation.h, api/codec.h): every operation, with every field
// set to something other than its default, survives encode → decode unchanged; the kind tables agree with the
// variant.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <set>

#include "api/codec.h"

namespace mayfly::api {
namespace {

Request round_trip(const Request& request) {
  capnp::MallocMessageBuilder message;
  encode_request(request, message.initRoot<proto::Request>());
  Result<Request> decoded = decode_request(message.getRoot<proto::Request>().asReader());
  EXPECT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  return decoded.is_ok() ? decoded.value() : Request{};
}

// One request of each kind with its fields filled (strings with an embedded NUL and non-ASCII bytes, so nothing is
// cut short).
Request sample(Kind kind) {
  Request request;
  request.database = std::string("db\0x", 4);
  request.container = "c\xc3\xa9";
  request.operation = make_operation(kind);
  request.options = Options{Consistency::kBounded, "42", "\"etag-1\"", 7, "cont-1"};
  request.write_id = WriteId{9, 12, 10, true, 77};
  ContainerSettings settings;
  settings.partition_key_path = "/tenant";
  settings.default_ttl = ContainerSettings::DefaultTtl::kSet;
  settings.default_ttl_json = "1.5";
  settings.indexing = ContainerSettings::Indexing::kNone;
  settings.throughput = ContainerSettings::Throughput::kProvisioned;
  settings.provisioned_ru_per_second = 400;
  settings.dry_run = true;
  settings.force = true;
  settings.change_feed = ContainerSettings::ChangeFeed::kOn;
  settings.change_feed_retention_seconds = 3600;
  settings.expiry_warning_seconds = 600;
  std::visit(
      [&](auto& op) {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, CreateContainer> || std::is_same_v<T, UpdateContainer>) op.settings = settings;
        if constexpr (std::is_same_v<T, CreateItem> || std::is_same_v<T, UpsertItem> ||
                      std::is_same_v<T, ReplaceItem>) {
          op.body = R"({"id":"a","tenant":"t","ttl":10})";
        }
        if constexpr (std::is_same_v<T, ReadItem> || std::is_same_v<T, DeleteItem> || std::is_same_v<T, PatchItem>) {
          op.partition_key = "\"t\"";
          op.id = "a";
        }
        if constexpr (std::is_same_v<T, PatchItem>) op.operations = R"([{"op":"incr","path":"/n","value":1}])";
        if constexpr (std::is_same_v<T, ListItems>) op.partition_key = "42";
        if constexpr (std::is_same_v<T, AddMember>) op = AddMember{4, "10.0.0.4:7101"};
        if constexpr (std::is_same_v<T, RemoveMember>) op.id = 3;
        if constexpr (std::is_same_v<T, TransferLeader>) op.id = 2;
        if constexpr (std::is_same_v<T, Query>) op = Query{"SELECT * FROM c WHERE c.n > @n", R"({"@n":1})", "\"t\"", true, "1E", "2F"};
        if constexpr (std::is_same_v<T, AdvanceClock>) op.duration = "90s";
        if constexpr (std::is_same_v<T, BackupRead>) op = BackupRead{5, 1 << 20, 4096};
        if constexpr (std::is_same_v<T, ReadChangeFeed>) {
          op = ReadChangeFeed{ReadChangeFeed::Mode::kLatest, ReadChangeFeed::From::kContinuation, 0, "pos-9", true, 50,
                              1000};
          op.only_warnings = true;
          op.no_warnings = true;
        }
      },
      request.operation);
  return request;
}

TEST(ApiCodec, EveryOperationSurvivesTheWireUnchanged) {
  for (size_t i = 0; i < kKindCount; ++i) {
    const Kind kind = static_cast<Kind>(i);
    const Request request = sample(kind);
    EXPECT_EQ(request.kind(), kind);
    EXPECT_EQ(round_trip(request), request) << kind_name(kind);
  }
}

TEST(ApiCodec, EveryChangeFeedStartAndOptionalSurvives) {
  for (ReadChangeFeed::From from : {ReadChangeFeed::From::kBeginning, ReadChangeFeed::From::kNow,
                                    ReadChangeFeed::From::kTime, ReadChangeFeed::From::kContinuation}) {
    Request request{.database = "d", .container = "c", .operation = ReadChangeFeed{}};
    request.options.consistency = Consistency::kSession;
    ReadChangeFeed& feed = *request.as<ReadChangeFeed>();
    feed.from = from;
    if (from == ReadChangeFeed::From::kTime) feed.time_micros = -5;  // before the epoch: still a value
    if (from == ReadChangeFeed::From::kContinuation) feed.continuation = "x";
    EXPECT_EQ(round_trip(request), request);
  }
  // Absent partition keys and write ids stay absent; an unset consistency goes out as session.
  Request list{.database = "d", .container = "c", .operation = ListItems{}};
  Request query{.database = "d", .container = "c", .operation = Query{.sql = "SELECT * FROM c"}};
  for (Request request : {list, query}) {
    Request back = round_trip(request);
    EXPECT_FALSE(back.write_id.has_value());
    EXPECT_EQ(back.options.consistency, Consistency::kSession);
    request.options.consistency = Consistency::kSession;
    EXPECT_EQ(back, request);
  }
  // The endpoint is the client's: it never travels.
  Request pinned{.operation = ClusterStatus{}, .endpoint = 2};
  EXPECT_FALSE(round_trip(pinned).endpoint.has_value());
}

TEST(ApiKinds, TheTablesAgreeWithTheSchema) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < kKindCount; ++i) {
    const Kind kind = static_cast<Kind>(i);
    EXPECT_EQ(kind_of(make_operation(kind)), kind);
    names.insert(kind_name(kind));
    // Each operation is exactly one of: a data write, a read, node-local, or a cluster change at the leader.
    const int classes = int(is_write(kind)) + int(is_read(kind)) + int(is_node_local(kind));
    EXPECT_LE(classes, 1) << kind_name(kind);
    EXPECT_EQ(changes_state(kind), !is_read(kind) && !is_node_local(kind)) << kind_name(kind);
  }
  EXPECT_EQ(names.size(), kKindCount);
  EXPECT_EQ(kind_name(Kind::kUpsertItem), "upsertItem");
  EXPECT_TRUE(is_write(Kind::kPatchItem));
  EXPECT_FALSE(is_write(Kind::kAddMember));
  EXPECT_TRUE(changes_state(Kind::kAddMember));
  EXPECT_TRUE(is_read(Kind::kReadChangeFeed));
  EXPECT_TRUE(is_node_local(Kind::kContainerForecast));
}

}  // namespace
}  // namespace mayfly::api

namespace mayfly::api {
namespace {

TEST(ApiCodec, TheWireNamesTheKindBeforeItIsDecoded) {
  for (size_t i = 0; i < kKindCount; ++i) {
    const Kind kind = static_cast<Kind>(i);
    capnp::MallocMessageBuilder message;
    encode_request(Request{.operation = make_operation(kind)}, message.initRoot<proto::Request>());
    EXPECT_EQ(kind_of(message.getRoot<proto::Request>().which()), kind) << kind_name(kind);
  }
  EXPECT_EQ(kind_of(static_cast<proto::Request::Which>(kKindCount)), std::nullopt);
}

}  // namespace
}  // namespace mayfly::api
