// The client library: its pure decisions (endpoints, routing, retries, session tokens), the wire encoding of every
// op, and the Client over real sockets against a test double of the network peer.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include <capnp/ez-rpc.h>
#include <capnp/message.h>
#include <kj/async-io.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/cli.h"
#include "client/client.h"
#include "common/auth.h"
#include "client/policy.h"
#include "client/wire.h"
#include "api/codec.h"
#include "tests/request_fields.h"
#include "proto/mayfly.capnp.h"

namespace mayfly::client {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Endpoints

TEST(Endpoints, ParsesListsAndRejectsMalformedEntries) {
  auto parsed = parse_endpoint_list("127.0.0.1:7101, node-2:7102,[::1]:7103");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_EQ(*parsed, (std::vector<std::string>{"127.0.0.1:7101", "node-2:7102", "[::1]:7103"}));
  for (const char* bad : {"", "h", "h:", ":1", "h:0", "h:65536", "h:-1", "h:1x", "h:1,", "h:1,h:1", "::1:7101",
                          "a b:1"}) {
    EXPECT_FALSE(parse_endpoint_list(bad).is_ok()) << bad;
  }
  EXPECT_TRUE(validate_endpoint("localhost:65535").is_ok());
}

// ---------------------------------------------------------------------------------------------------------------
// Routing: leader discovery and endpoint choice

Response answer(uint16_t status, uint64_t served_by, uint64_t leader_hint) {
  return Response{.status = status, .served_by = served_by, .leader_hint = leader_hint};
}

TEST(Routing, ReadsRoundRobinUnlessAnEndpointIsPreferred) {
  Routing routing({"a:1", "b:1", "c:1"});
  std::vector<size_t> chosen;
  for (int i = 0; i < 4; ++i) {
    chosen.push_back(routing.first_endpoint(Op::kReadItem, Consistency::kSession, std::nullopt, std::nullopt));
  }
  EXPECT_EQ(chosen, (std::vector<size_t>{0, 1, 2, 0}));
  EXPECT_EQ(routing.first_endpoint(Op::kReadItem, Consistency::kEventual, std::nullopt, 2), 2u);
  routing.observe(answer(200, 1, 1), false);
  EXPECT_EQ(routing.first_endpoint(Op::kListItems, Consistency::kBounded, std::nullopt, 2), 2u);
}

TEST(Routing, WritesAndStrongReadsFollowTheLearnedLeader) {
  Routing routing({"a:1", "b:1", "c:1"});
  EXPECT_FALSE(routing.leader().has_value());
  EXPECT_EQ(routing.first_endpoint(Op::kCreateItem, Consistency::kSession, std::nullopt, std::nullopt), 0u);
  routing.observe(answer(201, 3, 0), true);  // a write is executed by the leader
  EXPECT_EQ(routing.leader(), 3u);
  EXPECT_EQ(routing.first_endpoint(Op::kCreateItem, Consistency::kSession, std::nullopt, std::nullopt), 2u);
  EXPECT_EQ(routing.first_endpoint(Op::kReadItem, Consistency::kStrong, std::nullopt, std::nullopt), 2u);
  // Preferred endpoints apply to reads only; the caller's explicit endpoint applies to everything.
  EXPECT_EQ(routing.first_endpoint(Op::kReadItem, Consistency::kStrong, std::nullopt, 0), 0u);
  EXPECT_EQ(routing.first_endpoint(Op::kUpsertItem, Consistency::kSession, std::nullopt, 0), 2u);
  EXPECT_EQ(routing.first_endpoint(Op::kUpsertItem, Consistency::kSession, 1, std::nullopt), 1u);

  routing.observe(answer(200, 1, 2), false);  // any response's hint moves it
  EXPECT_EQ(routing.leader(), 2u);
  routing.observe(answer(200, 1, 0), false);  // a read served by a follower says nothing about the leader
  EXPECT_EQ(routing.leader(), 2u);
  routing.observe(answer(503, 1, 0), true);  // "no leader" from a node
  EXPECT_FALSE(routing.leader().has_value());
  routing.observe(answer(503, 1, 3), true);
  EXPECT_EQ(routing.leader(), 3u);
  routing.forget_leader_at(1);  // not the leader's endpoint
  EXPECT_EQ(routing.leader(), 3u);
  routing.forget_leader_at(2);
  EXPECT_FALSE(routing.leader().has_value());
}

TEST(Routing, NodeAddressesCanBeLearned) {
  Routing routing({"a:1", "b:1"});
  EXPECT_EQ(routing.endpoint_of_node(2), 1u);
  EXPECT_FALSE(routing.endpoint_of_node(4).has_value());
  routing.set_node_address(4, "d:1");
  EXPECT_EQ(routing.endpoint_count(), 3u);
  EXPECT_EQ(routing.endpoint_of_node(4), 2u);
  EXPECT_EQ(routing.address(2), "d:1");
  routing.set_node_address(7, "a:1");  // an existing endpoint is reused, not duplicated
  EXPECT_EQ(routing.endpoint_count(), 3u);
  EXPECT_EQ(routing.endpoint_of_node(7), 0u);
  routing.observe(answer(201, 4, 4), true);
  EXPECT_EQ(routing.first_endpoint(Op::kDeleteItem, Consistency::kSession, std::nullopt, std::nullopt), 2u);
  EXPECT_EQ(routing.next_endpoint(2), 0u);
}

TEST(Routing, ClusterStatusBodiesYieldNodeAddresses) {
  const auto nodes = parse_cluster_nodes(
      R"({"leader":2,"nodes":[{"id":1,"address":"h1:7101","role":"follower"},{"id":2,"address":"h2:7101"},)"
      R"({"id":0,"address":"h0:1"},{"id":3},{"id":4,"address":"bad"},"junk"]})");
  EXPECT_EQ(nodes, (std::vector<std::pair<uint64_t, std::string>>{{1, "h1:7101"}, {2, "h2:7101"}}));
  EXPECT_TRUE(parse_cluster_nodes("not json").empty());
  EXPECT_TRUE(parse_cluster_nodes(R"({"leader":1})").empty());
}

// ---------------------------------------------------------------------------------------------------------------
// Retry policy

ClientOptions retry_options() {
  ClientOptions options;
  options.max_retries_unavailable = 3;
  options.max_retries_throttled = 2;
  options.backoff_initial_ms = 10;
  options.backoff_max_ms = 100;
  return options;
}

Attempt answered(Response response) { return Attempt{.kind = Attempt::Kind::kAnswered, .response = response}; }

TEST(RetryPolicy, BackoffDoublesIsCappedAndJitteredWithinHalfToFull) {
  const ClientOptions options = retry_options();
  Prng prng(7);
  const uint32_t full[] = {10, 20, 40, 80, 100, 100, 100};
  for (uint32_t retry = 0; retry < 7; ++retry) {
    for (int sample = 0; sample < 50; ++sample) {
      const uint32_t delay = backoff_ms(options, retry, prng);
      EXPECT_GE(delay, full[retry] / 2) << retry;
      EXPECT_LE(delay, full[retry]) << retry;
    }
  }
  // Seeded: the same seed gives the same delays.
  Prng first(99);
  Prng second(99);
  for (uint32_t retry = 0; retry < 10; ++retry) {
    EXPECT_EQ(backoff_ms(options, retry, first), backoff_ms(options, retry, second));
  }
  // Huge retry counts do not overflow.
  EXPECT_LE(backoff_ms(options, 4000000000u, first), 100u);
}

TEST(RetryPolicy, FinalAnswersAreNotRetried) {
  const ClientOptions options = retry_options();
  Prng prng(1);
  for (const uint16_t status : {200, 201, 204, 400, 404, 408, 409, 412, 413, 500}) {
    RetryState state;
    EXPECT_FALSE(decide_retry(options, state, answered(answer(status, 1, 1)), true, prng).retry) << status;
  }
}

TEST(RetryPolicy, UnavailableGoesToTheHintedLeaderThenElsewhereWithinItsBound) {
  const ClientOptions options = retry_options();
  Prng prng(1);
  RetryState state;
  const RetryDecision to_leader = decide_retry(options, state, answered(answer(503, 1, 3)), true, prng);
  EXPECT_TRUE(to_leader.retry);
  EXPECT_EQ(to_leader.target, RetryDecision::Target::kLeaderNode);
  EXPECT_EQ(to_leader.node, 3u);
  EXPECT_GE(to_leader.delay_ms, 5u);
  EXPECT_LE(to_leader.delay_ms, 10u);
  // A hint naming the node itself (it is the leader but cannot commit) or no hint: try another node.
  const RetryDecision self_hint = decide_retry(options, state, answered(answer(503, 3, 3)), true, prng);
  EXPECT_EQ(self_hint.target, RetryDecision::Target::kNextEndpoint);
  Response election = answer(503, 2, 0);
  election.retry_after_ms = 250;  // an election is under way: the server's estimate wins over backoff
  const RetryDecision next = decide_retry(options, state, answered(election), false, prng);
  EXPECT_EQ(next.target, RetryDecision::Target::kNextEndpoint);
  EXPECT_EQ(next.delay_ms, 250u);
  EXPECT_EQ(state.unavailable_retries, 3u);
  EXPECT_FALSE(decide_retry(options, state, answered(answer(503, 1, 3)), true, prng).retry);  // bound reached
}

TEST(RetryPolicy, AWriteWhoseOutcomeTheServerDoesNotKnowIsNotResent) {
  const ClientOptions options = retry_options();
  Prng prng(1);
  Response unknown = answer(503, 1, 3);
  unknown.substatus = kSubstatusServerOutcomeUnknown;
  RetryState write_state;
  EXPECT_FALSE(decide_retry(options, write_state, answered(unknown), true, prng).retry);
  // A read with the same answer is simply retried (reads apply nothing).
  RetryState read_state;
  EXPECT_TRUE(decide_retry(options, read_state, answered(unknown), false, prng).retry);
  // Other 503s of a write (no leader, overloaded: nothing was done) are retried as before.
  Response overloaded = answer(503, 1, 0);
  overloaded.substatus = kSubstatusOverloaded;
  RetryState shed_state;
  EXPECT_TRUE(decide_retry(options, shed_state, answered(overloaded), true, prng).retry);
}

TEST(RetryPolicy, ANumberedWriteWhoseOutcomeIsUnknownIsResentElsewhere) {
  const ClientOptions options = retry_options();
  Prng prng(1);
  Response unknown = answer(503, 1, 3);
  unknown.substatus = kSubstatusServerOutcomeUnknown;
  RetryState state;
  const RetryDecision to_leader = decide_retry(options, state, answered(unknown), true, prng, /*deduplicated=*/true);
  EXPECT_TRUE(to_leader.retry);
  EXPECT_EQ(to_leader.target, RetryDecision::Target::kLeaderNode);
  EXPECT_EQ(to_leader.node, 3u);
  const Attempt lost{.kind = Attempt::Kind::kConnectionLost, .error = "reset"};
  const RetryDecision elsewhere = decide_retry(options, state, lost, true, prng, true);
  EXPECT_TRUE(elsewhere.retry);
  EXPECT_EQ(elsewhere.target, RetryDecision::Target::kNextEndpoint);
  EXPECT_EQ(state.unavailable_retries, 2u) << "within the same bound as other 503s";
  // The cluster's own "cannot tell" is final, numbered or not.
  Response record_lost = answer(503, 1, 3);
  record_lost.substatus = kSubstatusServerWriteRecordLost;
  RetryState fresh;
  EXPECT_FALSE(decide_retry(options, fresh, answered(record_lost), true, prng, true).retry);
}

TEST(RetryPolicy, ThrottledWaitsRetryAfterOnTheSameEndpoint) {
  ClientOptions options = retry_options();
  Prng prng(1);
  RetryState state;
  Response throttled = answer(429, 1, 1);
  throttled.retry_after_ms = 37;
  const RetryDecision first = decide_retry(options, state, answered(throttled), true, prng);
  EXPECT_EQ(first, (RetryDecision{.retry = true, .delay_ms = 37, .target = RetryDecision::Target::kSameEndpoint}));
  EXPECT_TRUE(decide_retry(options, state, answered(throttled), true, prng).retry);
  EXPECT_FALSE(decide_retry(options, state, answered(throttled), true, prng).retry);  // max_retries_throttled = 2
  EXPECT_EQ(state.unavailable_retries, 0u);  // separate budgets

  options.retry_throttled = false;
  RetryState fresh;
  EXPECT_FALSE(decide_retry(options, fresh, answered(throttled), false, prng).retry);
}

TEST(RetryPolicy, APinnedReadReconnectsToItsNodeOnceBeforeMovingOn) {
  const ClientOptions options = retry_options();
  Prng prng(1);
  const Attempt lost{.kind = Attempt::Kind::kConnectionLost, .error = "reset"};
  const Attempt not_sent{.kind = Attempt::Kind::kNotSent, .error = "refused"};
  RetryState pinned;
  pinned.pinned_read = true;
  const RetryDecision again = decide_retry(options, pinned, lost, false, prng);
  EXPECT_TRUE(again.retry);
  EXPECT_EQ(again.target, RetryDecision::Target::kSameEndpoint) << "first a fresh connection to the same node";
  EXPECT_GT(again.delay_ms, 0u);
  EXPECT_EQ(decide_retry(options, pinned, not_sent, false, prng).target, RetryDecision::Target::kNextEndpoint)
      << "that node still does not answer: move on";
  RetryState unpinned;
  EXPECT_EQ(decide_retry(options, unpinned, lost, false, prng).target, RetryDecision::Target::kNextEndpoint);
  RetryState write;
  write.pinned_read = true;  // the caller never marks writes, but a write must not be re-sent either way
  EXPECT_FALSE(decide_retry(options, write, lost, true, prng).retry);
}

TEST(RetryPolicy, ConnectionFailures) {
  const ClientOptions options = retry_options();
  Prng prng(1);
  RetryState state;
  const Attempt not_sent{.kind = Attempt::Kind::kNotSent, .error = "refused"};
  const Attempt lost{.kind = Attempt::Kind::kConnectionLost, .error = "reset"};
  // Never sent: anything may go elsewhere, writes too.
  EXPECT_EQ(decide_retry(options, state, not_sent, true, prng).target, RetryDecision::Target::kNextEndpoint);
  EXPECT_TRUE(decide_retry(options, state, not_sent, true, prng).retry);
  // Lost after sending: reads go elsewhere, writes are not re-sent.
  EXPECT_TRUE(decide_retry(options, state, lost, false, prng).retry);
  EXPECT_FALSE(decide_retry(options, state, lost, true, prng).retry);
  EXPECT_FALSE(decide_retry(options, state, not_sent, false, prng).retry);  // bound reached (3)

  const Response unknown = unanswered_response(lost, true, "h:1");
  EXPECT_EQ(unknown.status, 503);
  EXPECT_EQ(unknown.substatus, kSubstatusWriteOutcomeUnknown);
  EXPECT_NE(unknown.message.find("outcome is unknown"), std::string::npos) << unknown.message;
  EXPECT_NE(unknown.message.find("h:1"), std::string::npos);
  EXPECT_EQ(unanswered_response(not_sent, true, "h:1").substatus, kSubstatusNoEndpointReachable);
  EXPECT_EQ(unanswered_response(lost, false, "h:1").substatus, kSubstatusReadConnectionLost);
  const Response timeout = timeout_response(250, true, "h:1");
  EXPECT_EQ(timeout.status, 408);
  EXPECT_EQ(timeout.substatus, kSubstatusTimeout);
  EXPECT_NE(timeout.message.find("timed out after 250 ms"), std::string::npos);
  EXPECT_NE(timeout.message.find("outcome is unknown"), std::string::npos);
  EXPECT_EQ(timeout_response(250, false, "h:1").message.find("outcome"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// Session tokens

TEST(SessionTokens, NumericOrderWithoutOverflow) {
  EXPECT_TRUE(session_token_newer("10", "9"));
  EXPECT_FALSE(session_token_newer("9", "10"));
  EXPECT_FALSE(session_token_newer("10", "10"));
  EXPECT_FALSE(session_token_newer("010", "10"));
  EXPECT_TRUE(session_token_newer("1", ""));
  EXPECT_FALSE(session_token_newer("", "1"));
  EXPECT_TRUE(session_token_newer("123456789012345678901234567890", "18446744073709551615"));
  EXPECT_TRUE(session_token_newer("2", "garbage"));   // well-formed beats malformed
  EXPECT_FALSE(session_token_newer("garbage", "2"));
}

TEST(SessionTokens, HighestIsCarriedOnSessionRequestsUnlessTheCallerSetsOne) {
  SessionTokens tokens;
  EXPECT_EQ(tokens.token_for({}, Consistency::kSession), "");
  tokens.observe("5");
  tokens.observe("12");
  tokens.observe("9");  // an older answer arriving late does not move it back
  tokens.observe("");
  EXPECT_EQ(tokens.highest(), "12");
  EXPECT_EQ(tokens.token_for({}, Consistency::kSession), "12");
  EXPECT_EQ(tokens.token_for({}, Consistency::kEventual), "");
  EXPECT_EQ(tokens.token_for({}, Consistency::kStrong), "");
  EXPECT_EQ(tokens.token_for(Options{.session_token = "3"}, Consistency::kSession), "3");
  EXPECT_EQ(tokens.token_for(Options{.session_token = "3"}, Consistency::kBounded), "3");
}

// ---------------------------------------------------------------------------------------------------------------
// Wire encoding: every op survives encode → decode with all of its fields.

std::vector<Request> one_request_per_op() {
  std::vector<Request> requests;
  const auto add = [&](Op op, auto fill) {
    Request request;
    request.operation = make_operation(op);
    request.options.if_match = "\"e\"";
    request.options.max_items = 3;
    request.options.continuation = "cont";
    fill(request);
    requests.push_back(request);
  };
  const auto db = [](Request& r) { r.database = "d"; };
  const auto container = [](Request& r) {
    r.database = "d";
    r.container = "c";
  };
  add(Op::kCreateDatabase, db);
  add(Op::kDeleteDatabase, db);
  add(Op::kListDatabases, [](Request&) {});
  add(Op::kCreateContainer, [&](Request& r) {
    container(r);
    test::settings_of(r) = ContainerSettings{.partition_key_path = "/k",
                                   .default_ttl = ContainerSettings::DefaultTtl::kSet,
                                   .default_ttl_json = "1.5",
                                   .indexing = ContainerSettings::Indexing::kNone,
                                   .throughput = ContainerSettings::Throughput::kProvisioned,
                                   .provisioned_ru_per_second = 700};
  });
  add(Op::kUpdateContainer, [&](Request& r) {
    container(r);
    test::settings_of(r) = ContainerSettings{.default_ttl = ContainerSettings::DefaultTtl::kRemove,
                                   .indexing = ContainerSettings::Indexing::kConsistent,
                                   .throughput = ContainerSettings::Throughput::kServerless};
  });
  add(Op::kUpdateContainer, [&](Request& r) {  // a defaultTtl change with its dry-run and force options
    container(r);
    test::settings_of(r) = ContainerSettings{.default_ttl = ContainerSettings::DefaultTtl::kSet,
                                   .default_ttl_json = "60",
                                   .dry_run = true,
                                   .force = true};
  });
  add(Op::kGetContainer, container);
  add(Op::kDeleteContainer, container);
  add(Op::kListContainers, db);
  for (const Op op : {Op::kCreateItem, Op::kUpsertItem, Op::kReplaceItem}) {
    add(op, [&](Request& r) {
      container(r);
      test::body_of(r) = R"({"id":"a","k":1})";
    });
  }
  for (const Op op : {Op::kReadItem, Op::kDeleteItem}) {
    add(op, [&](Request& r) {
      container(r);
      test::set_partition_key(r, "\"p\"");
      test::id_of(r) = "a";
    });
  }
  add(Op::kPatchItem, [&](Request& r) {
    container(r);
    test::set_partition_key(r, "42");
    test::id_of(r) = "a";
    test::body_of(r) = R"([{"op":"set","path":"/ttl","value":5}])";
  });
  add(Op::kListItems, container);
  add(Op::kListItems, [&](Request& r) {
    container(r);
    test::set_partition_key(r, "true");
  });
  add(Op::kClusterStatus, [](Request&) {});
  add(Op::kAddMember, [](Request& r) { r.operation = api::AddMember{.id = 4, .address = "h4:7101"}; });
  add(Op::kRemoveMember, [](Request& r) { r.operation = api::RemoveMember{.id = 5}; });
  add(Op::kTransferLeader, [](Request& r) { r.operation = api::TransferLeader{.id = 6}; });
  add(Op::kAdvanceClock, [](Request& r) { r.operation = api::AdvanceClock{.duration = "90s"}; });
  return requests;
}

TEST(Wire, EveryOpRoundTrips) {
  for (Request request : one_request_per_op()) {
    // As the Client sends it: the effective consistency and session token in the copy's options.
    request.options.consistency = Consistency::kBounded;
    request.options.session_token = "77";
    capnp::MallocMessageBuilder message;
    api::encode_request(request, message.initRoot<proto::Request>());
    const Result<Request> decoded = api::decode_request(message.getRoot<proto::Request>().asReader());
    ASSERT_TRUE(decoded.is_ok()) << kind_name(request.kind());
    EXPECT_EQ(decoded.value(), request) << kind_name(request.kind());
  }
}

TEST(Wire, ResponseRoundTripsEveryField) {
  const Response response{.status = 429, .substatus = 3200, .message = "m", .body = "{}", .etag = "\"e\"",
                          .ts = -5, .request_charge = 2.5, .session_token = "9", .retry_after_ms = 40,
                          .served_by = 2, .leader_hint = 3, .continuation = "c"};
  capnp::MallocMessageBuilder message;
  encode_response(response, message.initRoot<proto::Response>());
  EXPECT_EQ(decode_response(message.getRoot<proto::Response>().asReader()), response);
}

TEST(Ops, WritesAreTheStateChangingOps) {
  for (const Op op : {Op::kListDatabases, Op::kGetContainer, Op::kListContainers, Op::kReadItem, Op::kListItems,
                      Op::kClusterStatus}) {
    EXPECT_FALSE(api::changes_state(op)) << kind_name(op);
  }
  for (const Op op : {Op::kCreateDatabase, Op::kDeleteDatabase, Op::kCreateContainer, Op::kUpdateContainer,
                      Op::kDeleteContainer, Op::kCreateItem, Op::kUpsertItem, Op::kReplaceItem, Op::kDeleteItem,
                      Op::kPatchItem, Op::kAddMember, Op::kRemoveMember, Op::kTransferLeader, Op::kAdvanceClock}) {
    EXPECT_TRUE(api::changes_state(op)) << kind_name(op);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The Client over real sockets.
//
// FakeNode is a test double of the *network peer*: a tiny `Mayfly` Cap'n Proto server on 127.0.0.1 (ephemeral port)
// that answers from a handler the test writes. It exists because the real mayflyd (node/) is not buildable yet; it
// exercises the client's connections, retries, reconnects and timeouts, not the server's behaviour. Tests against
// real mayflyd processes belong in tests/integration. Server and client share this thread's EzRpc event loop.

using Handler = std::function<kj::Promise<Response>(const Request&)>;

struct NodeState {
  uint64_t id = 0;
  Handler handler;
  std::vector<Request> requests;
  std::vector<std::optional<WriteId>> stamps;  // each request's writeId, in order
  int sessions_opened = 0;
  std::string key;  // the client key this fake node holds (proves) in the handshake; empty: none
};

// capnp's generated Server classes have protected non-virtual destructors behind a virtual base; GCC warns anyway.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
class FakeSession final : public proto::Session::Server {
 public:
  explicit FakeSession(std::shared_ptr<NodeState> state) : state_(std::move(state)) {}

  kj::Promise<void> execute(ExecuteContext context) override {
    Result<Request> decoded = api::decode_request(context.getParams().getRequest());
    KJ_REQUIRE(decoded.is_ok(), decoded.status().message());
    const Request request = std::move(decoded).value();
    state_->requests.push_back(request);
    state_->stamps.push_back(request.write_id);
    return state_->handler(request).then(
        [context](Response response) mutable { encode_response(response, context.getResults().initResponse()); });
  }

 private:
  std::shared_ptr<NodeState> state_;
};

class FakeMayfly final : public proto::Mayfly::Server {
 public:
  explicit FakeMayfly(std::shared_ptr<NodeState> state) : state_(std::move(state)) {}

  kj::Promise<void> hello(HelloContext context) override {
    const capnp::Data::Reader nonce = context.getParams().getClientNonce();
    client_nonce_.assign(reinterpret_cast<const char*>(nonce.begin()), nonce.size());
    server_nonce_ = auth::random_nonce();
    context.getResults().setServerNonce(
        capnp::Data::Reader(reinterpret_cast<const kj::byte*>(server_nonce_.data()), server_nonce_.size()));
    return kj::READY_NOW;
  }

  kj::Promise<void> openSession(OpenSessionContext context) override {
    ++state_->sessions_opened;
    if (!state_->key.empty()) {
      // Like mayflyd: answer with this node's proof of the key when the client's proof matches it.
      const capnp::Data::Reader proof = context.getParams().getProof();
      if (auth::constant_time_equal(auth::session_client_proof(state_->key, client_nonce_, server_nonce_),
                                    std::string_view(reinterpret_cast<const char*>(proof.begin()), proof.size()))) {
        const std::string answer = auth::session_server_proof(state_->key, client_nonce_, server_nonce_);
        context.getResults().setServerProof(
            capnp::Data::Reader(reinterpret_cast<const kj::byte*>(answer.data()), answer.size()));
      }
    }
    context.getResults().setSession(kj::heap<FakeSession>(state_));
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<NodeState> state_;
  std::string client_nonce_, server_nonce_;
};

#pragma GCC diagnostic pop

class FakeNode {
 public:
  FakeNode(uint64_t id, Handler handler) : state_(std::make_shared<NodeState>()) {
    state_->id = id;
    state_->handler = std::move(handler);
    start();
  }

  // Binds the same port again after stop() (the first start picks an ephemeral one).
  void start() {
    server_ = kj::heap<capnp::EzRpcServer>(kj::heap<FakeMayfly>(state_), "127.0.0.1", port_);
    port_ = server_->getPort().wait(server_->getWaitScope());
  }
  // Closes the listener and every connection, like a crashed process.
  void stop() { server_ = nullptr; }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  NodeState& state() { return *state_; }
  const std::vector<Request>& requests() const { return state_->requests; }
  void set_handler(Handler handler) { state_->handler = std::move(handler); }

 private:
  std::shared_ptr<NodeState> state_;
  kj::Own<capnp::EzRpcServer> server_;
  unsigned port_ = 0;
};

Handler answers(uint16_t status, uint64_t node, uint64_t leader_hint = 0) {
  return [=](const Request&) {
    return kj::Promise<Response>(Response{.status = status, .served_by = node, .leader_hint = leader_hint});
  };
}

ClientOptions options_for(const std::vector<FakeNode*>& nodes) {
  ClientOptions options;
  options.endpoints.clear();
  for (const FakeNode* node : nodes) {
    options.endpoints.push_back(node->address());
  }
  options.backoff_initial_ms = 1;  // keep retried tests quick; the policy tests check the real schedule
  options.backoff_max_ms = 4;
  options.request_timeout_ms = 10000;
  return options;
}

Request write_request() {
  return Request{.database = "d", .container = "c", .operation = api::UpsertItem{.body = R"({"id":"a","k":"p"})"}};
}

Request read_request() {
  return Request{
      .database = "d", .container = "c", .operation = api::ReadItem{.partition_key = "\"p\"", .id = "a"}};
}

TEST(ClientNetwork, ExecutesOverARealSocketAndCarriesEveryField) {
  FakeNode node(1, [](const Request& request) {
    return kj::Promise<Response>(Response{.status = 200, .message = std::string(kind_name(request.kind())),
                                          .body = R"({"id":"a"})", .etag = "\"e\"", .ts = 17,
                                          .request_charge = 1.25, .session_token = "8", .served_by = 1,
                                          .leader_hint = 1});
  });
  Client client(options_for({&node}));
  const Response response = client.execute(read_request());
  EXPECT_EQ(response, (Response{.status = 200, .message = "readItem", .body = R"({"id":"a"})", .etag = "\"e\"",
                                .ts = 17, .request_charge = 1.25, .session_token = "8", .served_by = 1,
                                .leader_hint = 1}));
  ASSERT_EQ(node.requests().size(), 1u);
  EXPECT_EQ(test::partition_key_of(node.requests()[0]), "\"p\"");
  EXPECT_EQ(node.requests()[0].options.consistency, Consistency::kSession);
  EXPECT_EQ(client.leader(), 1u);
  EXPECT_EQ(client.session_token(), "8");
  client.execute(read_request());
  EXPECT_EQ(node.state().sessions_opened, 1);  // one connection and session, reused
}

// The cluster keeps at most kWriteWindow outcomes per client from its oldest unanswered write on. One write held up
// (its node died and it is being retried) while the others go on must not push later writes past that window — the
// cluster would refuse them all with 429, the held one's retries too, until they timed out (found by it_cli_test's
// import while the leader was killed). They wait instead, and go out as soon as the held one is answered.
TEST(ClientNetwork, NumberedWritesStayWithinTheClustersWindowBehindAHeldUpWrite) {
  kj::Own<kj::PromiseFulfiller<Response>> held;
  FakeNode node(1, [&held](const Request& request) -> kj::Promise<Response> {
    if (test::body_of(request).find("\"w0\"") != std::string::npos) {
      auto waiting = kj::newPromiseAndFulfiller<Response>();
      held = kj::mv(waiting.fulfiller);
      return kj::mv(waiting.promise);
    }
    return kj::Promise<Response>(Response{.status = 200, .served_by = 1, .leader_hint = 1});
  });
  Client client(options_for({&node}));
  constexpr size_t kExtra = 6;
  std::vector<kj::Promise<Response>> answers;
  for (size_t i = 0; i < kWriteWindow + kExtra; ++i) {
    Request write = write_request();
    test::body_of(write) = R"({"id":"w)" + std::to_string(i) + R"(","k":"p"})";
    answers.push_back(client.execute_async(write));
  }
  auto run_until = [&](const std::function<bool()>& done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < give_up) {
      client.wait_scope().poll();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return done();
  };
  // w0 is held; w1..w1023 are answered; w1024.. wait, since w0 (number 1) is still unanswered.
  ASSERT_TRUE(run_until([&] { return node.requests().size() >= kWriteWindow; })) << node.requests().size();
  // Let anything that would go out past the window do so (300 ms of the loop); none may.
  const auto settle_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  run_until([&] { return std::chrono::steady_clock::now() >= settle_until; });
  EXPECT_EQ(node.requests().size(), kWriteWindow) << "writes went out past the cluster's window";
  ASSERT_TRUE(held.get() != nullptr);
  held->fulfill(Response{.status = 200, .served_by = 1, .leader_hint = 1});
  ASSERT_TRUE(run_until([&] { return node.requests().size() == kWriteWindow + kExtra; })) << node.requests().size();
  for (kj::Promise<Response>& answer : answers) EXPECT_EQ(answer.wait(client.wait_scope()).status, 200);
  for (const std::optional<WriteId>& stamp : node.state().stamps) {
    ASSERT_TRUE(stamp.has_value());
    EXPECT_LT(stamp->sequence - stamp->first_unacknowledged, kWriteWindow) << stamp->sequence;
  }
}

// A client with a key sends nothing to a node that cannot prove it holds the same key, and says so with a 401.
TEST(ClientNetwork, AKeyedClientSendsNothingToANodeThatCannotProveTheKey) {
  FakeNode node(1, [](const Request&) { return kj::Promise<Response>(Response{.status = 200, .served_by = 1}); });
  node.state().key = "the-key-the-node-holds-0123456789";
  ClientOptions options = options_for({&node});
  options.key = "another-key-0123456789abcdef";
  Client stranger(options);
  const Response refused = stranger.execute(read_request());
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.substatus, kSubstatusKeyNotProven);
  EXPECT_TRUE(node.requests().empty()) << "a request went to a node that did not prove the key";
  options.key = node.state().key;
  Client member(options);
  EXPECT_EQ(member.execute(read_request()).status, 200);
  EXPECT_EQ(node.requests().size(), 1u);
}

TEST(ClientNetwork, SessionTokenIsCarriedAutomatically) {
  int next_token = 5;
  FakeNode node(1, [&](const Request&) {
    return kj::Promise<Response>(
        Response{.status = 200, .session_token = std::to_string(next_token), .served_by = 1});
  });
  Client client(options_for({&node}));
  client.execute(write_request());  // answers "5"
  next_token = 12;
  client.execute(read_request());  // carries "5", answers "12"
  next_token = 9;                  // a lagging replica's older token must not move it back
  client.execute(read_request());
  Request eventual = read_request();
  eventual.options.consistency = Consistency::kEventual;
  client.execute(eventual);
  Request own_token = read_request();
  own_token.options.session_token = "2";
  client.execute(own_token);
  const auto& seen = node.requests();
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0].options.session_token, "");
  EXPECT_EQ(seen[1].options.session_token, "5");
  EXPECT_EQ(seen[2].options.session_token, "12");
  EXPECT_EQ(seen[3].options.session_token, "");
  EXPECT_EQ(seen[3].options.consistency, Consistency::kEventual);
  EXPECT_EQ(seen[4].options.session_token, "2");
  EXPECT_EQ(client.session_token(), "12");
}

TEST(ClientNetwork, UnavailableWithLeaderHintGoesToTheLeaderAndLaterWritesGoStraightThere) {
  FakeNode node1(1, answers(503, 1, 3));
  FakeNode node2(2, answers(503, 2, 3));
  FakeNode node3(3, answers(201, 3, 3));
  Client client(options_for({&node1, &node2, &node3}));
  const Response first = client.execute(write_request());
  EXPECT_EQ(first.status, 201);
  EXPECT_EQ(first.served_by, 3u);
  EXPECT_EQ(node1.requests().size(), 1u);  // round-robin start, told "leader is 3"
  EXPECT_EQ(node2.requests().size(), 0u);
  EXPECT_EQ(node3.requests().size(), 1u);
  EXPECT_EQ(client.leader(), 3u);
  EXPECT_EQ(client.execute(write_request()).status, 201);
  EXPECT_EQ(node1.requests().size(), 1u);
  EXPECT_EQ(node3.requests().size(), 2u);
}

TEST(ClientNetwork, UnavailableEverywhereEndsWithTheServersAnswerAfterTheBound) {
  FakeNode node1(1, answers(503, 1));
  FakeNode node2(2, answers(503, 2));
  ClientOptions options = options_for({&node1, &node2});
  options.max_retries_unavailable = 3;
  Client client(options);
  const Response response = client.execute(write_request());
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(node1.requests().size() + node2.requests().size(), 4u);  // 1 + 3 retries, alternating
  EXPECT_EQ(node1.requests().size(), 2u);
}

TEST(ClientNetwork, ThrottledRequestsWaitRetryAfterThenSucceed) {
  int throttles_left = 2;
  FakeNode node(1, [&](const Request&) {
    if (throttles_left > 0) {
      --throttles_left;
      return kj::Promise<Response>(Response{.status = 429, .retry_after_ms = 3, .served_by = 1});
    }
    return kj::Promise<Response>(Response{.status = 200, .served_by = 1});
  });
  Client client(options_for({&node}));
  EXPECT_EQ(client.execute(read_request()).status, 200);
  EXPECT_EQ(node.requests().size(), 3u);

  ClientOptions no_retry = options_for({&node});
  no_retry.retry_throttled = false;
  Client impatient(no_retry);
  throttles_left = 1;
  const Response throttled = impatient.execute(read_request());
  EXPECT_EQ(throttled.status, 429);
  EXPECT_EQ(throttled.retry_after_ms, 3u);
  EXPECT_EQ(node.requests().size(), 4u);
}

TEST(ClientNetwork, ThrottleLongerThanTheTimeoutReturnsThe429) {
  FakeNode node(1, [](const Request&) {
    return kj::Promise<Response>(Response{.status = 429, .retry_after_ms = 60000, .served_by = 1});
  });
  ClientOptions options = options_for({&node});
  options.request_timeout_ms = 1000;
  Client client(options);
  EXPECT_EQ(client.execute(read_request()).status, 429);  // at once: waiting could not help
  EXPECT_EQ(node.requests().size(), 1u);
}

unsigned unused_port() {
  FakeNode probe(99, answers(200, 99));
  const std::string address = probe.address();
  return static_cast<unsigned>(std::stoul(address.substr(address.rfind(':') + 1)));
}

TEST(ClientNetwork, ConnectionRefusedMovesReadsAndWritesToAnotherEndpoint) {
  FakeNode live(2, answers(201, 2));
  ClientOptions options = options_for({&live});
  options.endpoints.insert(options.endpoints.begin(), "127.0.0.1:" + std::to_string(unused_port()));
  options.preferred_endpoint = 1;
  Client client(options);
  EXPECT_EQ(client.execute(read_request()).status, 201);
  EXPECT_EQ(client.execute(write_request()).status, 201);  // never sent to the dead node, so safe to move
  EXPECT_EQ(live.requests().size(), 2u);
}

TEST(ClientNetwork, NoReachableEndpointIsA503WithAMessage) {
  FakeNode anchor(1, answers(200, 1));  // keeps this thread's event loop alive; not one of the client's endpoints
  ClientOptions options;
  options.endpoints = {"127.0.0.1:" + std::to_string(unused_port())};
  options.max_retries_unavailable = 2;
  options.backoff_initial_ms = 1;
  options.backoff_max_ms = 2;
  Client client(options);
  const Response response = client.execute(write_request());
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.substatus, kSubstatusNoEndpointReachable);
  EXPECT_NE(response.message.find("could not reach"), std::string::npos) << response.message;
  EXPECT_EQ(format_response(response).find("\"status\":503"), 1u);
}

TEST(ClientNetwork, ReadsReconnectAfterTheServerRestarts) {
  FakeNode node(1, answers(200, 1));
  Client client(options_for({&node}));
  EXPECT_EQ(client.execute(read_request()).status, 200);
  node.stop();
  node.start();
  EXPECT_EQ(client.execute(read_request()).status, 200);
  EXPECT_EQ(node.state().sessions_opened, 2);
  EXPECT_EQ(node.requests().size(), 2u);
}

TEST(ClientNetwork, WriteOnAConnectionLostMeanwhileIsNotResentButAnIdleProbeAvoidsThat) {
  FakeNode node(1, answers(201, 1));
  ClientOptions options = options_for({&node});
  options.write_probe_idle_ms = 3600 * 1000;  // never probe: the write goes out on the dead connection
  options.exactly_once = false;               // and, unnumbered, it is not re-sent once it may have applied
  Client client(options);
  EXPECT_EQ(client.execute(write_request()).status, 201);
  node.stop();
  node.start();
  const Response unknown = client.execute(write_request());
  EXPECT_EQ(unknown.status, 503);
  EXPECT_EQ(unknown.substatus, kSubstatusWriteOutcomeUnknown);
  EXPECT_NE(unknown.message.find("outcome is unknown"), std::string::npos) << unknown.message;
  EXPECT_EQ(node.requests().size(), 1u);  // not blindly re-sent

  ClientOptions probing = options_for({&node});
  probing.write_probe_idle_ms = 0;  // always re-open the session before a write on an existing connection
  Client careful(probing);
  EXPECT_EQ(careful.execute(write_request()).status, 201);
  node.stop();
  node.start();
  EXPECT_EQ(careful.execute(write_request()).status, 201);  // the probe failed, not the write: moved safely
  EXPECT_EQ(node.requests().size(), 3u);
}

TEST(ClientNetwork, WriteLostInFlightReportsUnknownOutcome) {
  auto received = kj::newPromiseAndFulfiller<void>();
  FakeNode node(1, [&](const Request&) {
    received.fulfiller->fulfill();
    return kj::Promise<Response>(kj::NEVER_DONE);  // the node "crashes" before answering
  });
  ClientOptions options = options_for({&node});
  options.exactly_once = false;  // an unnumbered write is never re-sent after it may have been applied
  Client client(options);
  kj::Promise<Response> pending = client.execute_async(write_request());
  received.promise.wait(client.wait_scope());
  node.stop();
  const Response response = pending.wait(client.wait_scope());
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.substatus, kSubstatusWriteOutcomeUnknown);
  EXPECT_EQ(node.requests().size(), 1u);
  ASSERT_EQ(node.state().stamps.size(), 1u);
  EXPECT_FALSE(node.state().stamps[0].has_value());
}

TEST(ClientNetwork, ANumberedWriteLostInFlightIsResentWithItsId) {
  auto received = kj::newPromiseAndFulfiller<void>();
  FakeNode crashing(1, [&](const Request&) {
    received.fulfiller->fulfill();
    return kj::Promise<Response>(kj::NEVER_DONE);
  });
  FakeNode other(2, answers(201, 2));
  ClientOptions options = options_for({&crashing, &other});
  options.client_id = 77;
  Client client(options);
  kj::Promise<Response> pending = client.execute_async(write_request());
  received.promise.wait(client.wait_scope());
  crashing.stop();
  const Response response = pending.wait(client.wait_scope());
  EXPECT_EQ(response.status, 201) << response.message;
  ASSERT_EQ(crashing.state().stamps.size(), 1u);
  ASSERT_TRUE(crashing.state().stamps[0].has_value());
  EXPECT_EQ(crashing.state().stamps[0]->client, 77u);
  EXPECT_EQ(crashing.state().stamps[0]->sequence, 1u);
  EXPECT_EQ(crashing.state().stamps[0]->first_unacknowledged, 1u);
  EXPECT_FALSE(crashing.state().stamps[0]->retry);
  ASSERT_EQ(other.state().stamps.size(), 1u);
  ASSERT_TRUE(other.state().stamps[0].has_value());
  EXPECT_EQ(other.state().stamps[0]->sequence, 1u) << "the same write, the same number";
  EXPECT_TRUE(other.state().stamps[0]->retry);
  // The next write is number 2, and says number 1 was answered. Reads carry no id.
  EXPECT_EQ(client.execute(Request{.database = "d", .container = "c", .operation = api::UpsertItem{.body = "{}"},
                                   .endpoint = 2}).status, 201);
  ASSERT_EQ(other.state().stamps.size(), 2u);
  EXPECT_EQ(other.state().stamps[1]->sequence, 2u);
  EXPECT_EQ(other.state().stamps[1]->first_unacknowledged, 2u);
  other.set_handler(answers(200, 2));
  Request read = read_request();
  read.endpoint = 2;
  EXPECT_EQ(client.execute(read).status, 200);
  EXPECT_FALSE(other.state().stamps.back().has_value());
}

TEST(ClientNetwork, RetriesOfAWriteThatMayHaveAppliedNeverEndInANotApplied) {
  // The first attempt is lost in flight (it may have applied); every re-send then meets "no leader, not applied".
  // That answer speaks for the re-sends only: the call ends "outcome unknown", not in a 503 the caller would take for
  // "nothing happened" (the chaos campaign found a delete reported so that had deleted the item).
  auto received = kj::newPromiseAndFulfiller<void>();
  FakeNode crashing(1, [&](const Request&) {
    received.fulfiller->fulfill();
    return kj::Promise<Response>(kj::NEVER_DONE);
  });
  FakeNode leaderless(2, [](const Request&) {
    return kj::Promise<Response>(Response{.status = 503, .substatus = 1, .message = "no leader", .served_by = 2});
  });
  ClientOptions options = options_for({&crashing, &leaderless});
  options.max_retries_unavailable = 3;
  Client client(options);
  kj::Promise<Response> pending = client.execute_async(write_request());
  received.promise.wait(client.wait_scope());
  crashing.stop();
  const Response response = pending.wait(client.wait_scope());
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.substatus, kSubstatusWriteOutcomeUnknown) << response.message;
  EXPECT_NE(response.message.find("earlier attempt may have been applied"), std::string::npos) << response.message;
  EXPECT_GE(leaderless.requests().size(), 1u);
  // A write whose every attempt was refused before it could apply keeps its plain 503.
  FakeNode refusing(3, [](const Request&) {
    return kj::Promise<Response>(Response{.status = 503, .substatus = 1, .message = "no leader", .served_by = 3});
  });
  ClientOptions plain = options_for({&refusing});
  plain.max_retries_unavailable = 2;
  Client careful(plain);
  const Response refused = careful.execute(write_request());
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.substatus, 1u);
}

TEST(ClientNetwork, TimeoutIs408AndAHungConnectionIsReplaced) {
  bool hang = true;
  FakeNode node(1, [&](const Request&) {
    return hang ? kj::Promise<Response>(kj::NEVER_DONE) : kj::Promise<Response>(Response{.status = 200});
  });
  ClientOptions options = options_for({&node});
  options.request_timeout_ms = 30;
  Client client(options);
  const Response timed_out = client.execute(read_request());
  EXPECT_EQ(timed_out.status, 408);
  EXPECT_EQ(timed_out.substatus, kSubstatusTimeout);
  EXPECT_NE(timed_out.message.find("timed out after 30 ms"), std::string::npos) << timed_out.message;
  hang = false;
  EXPECT_EQ(client.execute(read_request()).status, 200);
  EXPECT_EQ(node.state().sessions_opened, 2);  // nothing came back on the first connection: it was reopened
}

TEST(ClientNetwork, TimeSpentAwayFromTheEventLoopDoesNotEatTheNextTimeout) {
  FakeNode node(1, [](const Request&) { return kj::Promise<Response>(Response{.status = 200}); });
  ClientOptions options = options_for({&node});
  options.request_timeout_ms = 100;
  Client client(options);
  EXPECT_EQ(client.execute(read_request()).status, 200);
  // The caller does something else for longer than the timeout (the event loop's clock is not read meanwhile).
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const Response after = client.execute(read_request());
  EXPECT_EQ(after.status, 200) << "the timeout must count from the call, not from the loop's last turn: "
                               << after.message;
}

TEST(ClientNetwork, ManyRequestsAreInFlightAtOnce) {
  // The node answers nothing until all of them have arrived, so this completes only if they are concurrent.
  constexpr size_t kRequests = 1000;
  std::vector<kj::Own<kj::PromiseFulfiller<Response>>> waiting;
  FakeNode node(1, [&](const Request& request) {
    auto pending = kj::newPromiseAndFulfiller<Response>();
    waiting.push_back(kj::mv(pending.fulfiller));
    if (waiting.size() == kRequests) {
      for (size_t i = 0; i < waiting.size(); ++i) {
        waiting[i]->fulfill(Response{.status = 200, .body = "{}", .served_by = 1});
      }
    }
    (void)request;
    return kj::mv(pending.promise);
  });
  ClientOptions options = options_for({&node});
  options.request_timeout_ms = 20000;
  Client client(options);
  std::vector<Request> requests;
  for (size_t i = 0; i < kRequests; ++i) {
    Request request = read_request();
    test::id_of(request) = "item-" + std::to_string(i);
    requests.push_back(request);
  }
  const std::vector<Response> responses = client.execute_all(requests);
  ASSERT_EQ(responses.size(), kRequests);
  for (const Response& response : responses) {
    EXPECT_EQ(response.status, 200);
  }
  EXPECT_EQ(node.requests().size(), kRequests);
  EXPECT_EQ(node.state().sessions_opened, 1);
}

TEST(ClientNetwork, ClusterStatusTeachesMemberAddresses) {
  FakeNode node4(4, answers(201, 4, 4));
  const std::string body = R"({"leader":4,"nodes":[{"id":4,"address":")" + node4.address() + R"("}]})";
  FakeNode node1(1, [&](const Request& request) {
    if (request.kind() == Op::kClusterStatus) {
      return kj::Promise<Response>(Response{.status = 200, .body = body, .served_by = 1, .leader_hint = 4});
    }
    return kj::Promise<Response>(Response{.status = 503, .served_by = 1, .leader_hint = 4});
  });
  Client client(options_for({&node1}));
  EXPECT_EQ(client.execute(Request{.operation = api::ClusterStatus{}}).status, 200);
  EXPECT_EQ(client.execute(write_request()).status, 201);  // straight to node 4, learned from the status body
  EXPECT_EQ(node4.requests().size(), 1u);
  EXPECT_EQ(node1.requests().size(), 1u);
}

TEST(ClientNetwork, RequestEndpointPinsTheFirstAttempt) {
  FakeNode node1(1, answers(200, 1));
  FakeNode node2(2, answers(200, 2));
  Client client(options_for({&node1, &node2}));
  Request pinned = read_request();
  pinned.endpoint = 2;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(client.execute(pinned).served_by, 2u);
  }
  pinned.endpoint = 3;
  EXPECT_EQ(client.execute(pinned).status, 400);
  EXPECT_EQ(node1.requests().size(), 0u);
}

TEST(ClientNetwork, CommandLineEndToEnd) {
  FakeNode node(1, [](const Request& request) {
    EXPECT_EQ(request.kind(), Op::kClusterStatus);
    return kj::Promise<Response>(
        Response{.status = 200, .body = R"({"leader": 1, "nodes": [ ]})", .request_charge = 1, .served_by = 1});
  });
  const CliParse parsed = parse_cli({"--endpoints", node.address(), "cluster", "status"}, {});
  ASSERT_TRUE(parsed.command.has_value());
  Client client(parsed.command->options);
  const Response response = client.execute(parsed.command->request);
  EXPECT_EQ(format_response(response), R"({"status":200,"substatus":0,"message":"","requestCharge":1,)"
                                       R"("sessionToken":"","etag":"","servedBy":1,"body":{"leader":1,"nodes":[]}})");
  EXPECT_EQ(exit_code_for(response), kExitOk);
}

}  // namespace
}  // namespace mayfly::client
