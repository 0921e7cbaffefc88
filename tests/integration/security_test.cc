// The trust boundary against real mayflyd processes (docs/security.md): keys and roles (401, 403, nothing applied),
// key rotation without restarts, and the peer handshake — a connection without the cluster secret cannot deliver a
// single Raft message, and an authenticated peer cannot speak for another node. The raw peer connections are made
// with Cap'n Proto directly, as an attacker would.
#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "api/codec.h"
#include "common/auth.h"
#include "common/wire.h"
#include "proto/mayfly.capnp.h"
#include "replication/codec.h"
#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;
namespace fs = std::filesystem;

client::Response run(client::Client& client, Request request, size_t node = 1) {
  request.endpoint = node;
  return client.execute(request);
}

client::ClientOptions with_key(const Cluster& cluster, const std::string& key) {
  client::ClientOptions options = cluster.client_options();
  options.key = key;
  options.max_retries_unavailable = 2;
  options.request_timeout_ms = 5000;
  return options;
}

// Every operation of the client API, each built to succeed if it were allowed, on db "sec" / container "c" with
// item "a" (pk "p"). `member` is a node id that is not in the cluster.
std::vector<std::pair<std::string, Request>> every_write_and_admin(uint64_t member) {
  std::vector<std::pair<std::string, Request>> ops;
  ops.emplace_back("createDatabase", db_req(Op::kCreateDatabase, "other"));
  ops.emplace_back("deleteDatabase", db_req(Op::kDeleteDatabase, "sec"));
  ops.emplace_back("createContainer", create_container("sec", "c2", "/pk"));
  Request update = container_req(Op::kUpdateContainer, "sec", "c");
  test::settings_of(update).default_ttl = client::ContainerSettings::DefaultTtl::kSet;
  test::settings_of(update).default_ttl_json = "5";
  ops.emplace_back("updateContainer", update);
  ops.emplace_back("deleteContainer", container_req(Op::kDeleteContainer, "sec", "c"));
  ops.emplace_back("createItem", item_write(Op::kCreateItem, "sec", "c", R"({"id":"b","pk":"p"})"));
  ops.emplace_back("upsertItem", item_write(Op::kUpsertItem, "sec", "c", R"({"id":"a","pk":"p","v":2})"));
  ops.emplace_back("replaceItem", item_write(Op::kReplaceItem, "sec", "c", R"({"id":"a","pk":"p","v":3})"));
  Request patch = item_key(Op::kPatchItem, "sec", "c", "p", "a");
  test::body_of(patch) = R"([{"op":"set","path":"/v","value":4}])";
  ops.emplace_back("patchItem", patch);
  ops.emplace_back("deleteItem", item_key(Op::kDeleteItem, "sec", "c", "p", "a"));
  Request add;
  add.operation = api::AddMember{.id = member, .address = "127.0.0.1:9"};
  ops.emplace_back("addMember", add);
  Request remove;
  remove.operation = api::RemoveMember{.id = 2};
  ops.emplace_back("removeMember", remove);
  Request transfer;
  transfer.operation = api::TransferLeader{.id = 2};
  ops.emplace_back("transferLeader", transfer);
  return ops;
}

bool is_admin_op(Op op) { return op == Op::kAddMember || op == Op::kRemoveMember || op == Op::kTransferLeader; }

// The state every refused request must leave untouched: databases, containers, the item and its etag, membership.
struct Fingerprint {
  std::string databases, containers, item_etag, item_body;
  size_t members = 0;
  bool operator==(const Fingerprint&) const = default;
};

Fingerprint fingerprint(Cluster& cluster, client::Client& admin) {
  Fingerprint out;
  Request dbs = db_req(Op::kListDatabases, "");
  dbs.options.consistency = client::Consistency::kStrong;
  out.databases = run(admin, dbs).body;
  Request containers = db_req(Op::kListContainers, "sec");
  containers.options.consistency = client::Consistency::kStrong;
  out.containers = run(admin, containers).body;
  Request read = item_key(Op::kReadItem, "sec", "c", "p", "a");
  read.options.consistency = client::Consistency::kStrong;
  const client::Response item = run(admin, read);
  out.item_etag = item.etag;
  out.item_body = item.body;
  Request status;
  status.operation = api::make_operation(Op::kClusterStatus);
  const boost::json::value parsed = parse_json(run(admin, status).body);
  if (parsed.is_object() && parsed.as_object().contains("nodes")) out.members = parsed.at("nodes").as_array().size();
  (void)cluster;
  return out;
}

void prepare(Cluster& cluster, client::Client& admin) {
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  ASSERT_EQ(run(admin, db_req(Op::kCreateDatabase, "sec")).status, 201);
  ASSERT_EQ(run(admin, create_container("sec", "c", "/pk")).status, 201);
  const client::Response created = run(admin, item_write(Op::kCreateItem, "sec", "c", R"({"id":"a","pk":"p","v":1})"));
  ASSERT_EQ(created.status, 201);
  // Every node has applied the item, so a fresh client's read (no session token yet) finds it anywhere.
  for (size_t node = 1; node <= cluster.size(); ++node) {
    ASSERT_TRUE(cluster.wait_applied(node, std::stoull(created.session_token))) << "node " << node;
  }
}

TEST(Security, NoKeyAndUnknownKeyGet401OnEveryNodeAndChangeNothing) {
  Cluster cluster({.name = "sec-401"});
  client::Client admin(cluster.client_options());
  prepare(cluster, admin);
  const Fingerprint before = fingerprint(cluster, admin);
  for (const std::string& key : {std::string(), std::string("not-a-key-of-this-cluster-0123456789")}) {
    client::Client stranger(with_key(cluster, key));
    for (size_t node = 1; node <= cluster.size(); ++node) {
      for (auto& [name, request] : every_write_and_admin(9)) {
        const client::Response response = run(stranger, request, node);
        EXPECT_EQ(response.status, 401) << name << " on node " << node << " with key '" << key << "': "
                                        << response.message;
        EXPECT_LE(response.request_charge, 1.0);
        EXPECT_EQ(response.message.find(key.empty() ? "\x01" : key), std::string::npos) << "the key is echoed";
      }
      const client::Response read = run(stranger, item_key(Op::kReadItem, "sec", "c", "p", "a"), node);
      EXPECT_EQ(read.status, 401) << read.message;
      EXPECT_TRUE(read.body.empty()) << "a 401 leaks the item: " << read.body;
    }
  }
  EXPECT_EQ(fingerprint(cluster, admin), before);
  // The CLI says the same, and how to fix it.
  const CliResult cli = cluster.cli({"--key", "", "db", "list"});
  EXPECT_EQ(cli.exit_code, 1) << cli.describe();
  EXPECT_EQ(cli.status(), 401) << cli.describe();
  EXPECT_NE(cli.message().find("--key"), std::string::npos) << cli.describe();
}

TEST(Security, ReadOnlyKeyReadsButEveryWriteAndAdminOpIs403) {
  Cluster cluster({.name = "sec-ro"});
  client::Client admin(cluster.client_options());
  prepare(cluster, admin);
  const Fingerprint before = fingerprint(cluster, admin);
  client::Client reader(with_key(cluster, cluster.readonly_key()));
  for (size_t node = 1; node <= cluster.size(); ++node) {
    for (auto& [name, request] : every_write_and_admin(9)) {
      const client::Response response = run(reader, request, node);
      EXPECT_EQ(response.status, 403) << name << " on node " << node << ": " << response.message;
      EXPECT_NE(response.message.find("readonly"), std::string::npos) << response.message;
    }
    EXPECT_EQ(run(reader, item_key(Op::kReadItem, "sec", "c", "p", "a"), node).status, 200);
    EXPECT_EQ(run(reader, container_req(Op::kListItems, "sec", "c"), node).status, 200);
    Request query = container_req(Op::kQuery, "sec", "c");
    test::operation_of<api::Query>(query).sql = "SELECT VALUE COUNT(1) FROM c";
    EXPECT_EQ(run(reader, query, node).status, 200);
    EXPECT_EQ(run(reader, db_req(Op::kListContainers, "sec"), node).status, 200);
    EXPECT_EQ(run(reader, container_req(Op::kGetContainer, "sec", "c"), node).status, 200);
    Request status;
    status.operation = api::make_operation(Op::kClusterStatus);
    EXPECT_EQ(run(reader, status, node).status, 200);
  }
  EXPECT_EQ(fingerprint(cluster, admin), before);
}

// A raw client session on node n's listener opened with `key`, as the library opens one (hello, then openSession with
// the key's proof).
struct RawSession {
  explicit RawSession(const std::string& endpoint) : rpc(endpoint) {}
  capnp::EzRpcClient rpc;
  std::unique_ptr<proto::Session::Client> session;
};

std::unique_ptr<RawSession> open_raw_session(const std::string& endpoint, const std::string& key) {
  auto raw = std::make_unique<RawSession>(endpoint);
  auto& wait = raw->rpc.getWaitScope();
  proto::Mayfly::Client main = raw->rpc.getMain<proto::Mayfly>();
  const std::string client_nonce = auth::random_nonce();
  const std::string server_nonce = hello(main, wait, client_nonce);
  const std::string proof = auth::session_client_proof(key, client_nonce, server_nonce);
  auto open = main.openSessionRequest();
  open.setProof(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(proof.data()), proof.size()));
  raw->session = std::make_unique<proto::Session::Client>(open.send().wait(wait).getSession());
  return raw;
}

// Session.executeBatch: every request of a batch is authorized, admitted and executed on its own, in order, and
// answered in its own slot; an oversized batch runs nothing. The library batches item writes and point reads issued
// together, so a readonly key's mixed batch is the same mix of 200s and 403s as one call each.
TEST(Security, EveryRequestOfABatchIsAuthorizedAndAnsweredOnItsOwnAndAnOversizedBatchRunsNothing) {
  Cluster cluster({.name = "sec-batch"});
  client::Client admin(cluster.client_options());
  prepare(cluster, admin);
  const Fingerprint before = fingerprint(cluster, admin);
  client::Client reader(with_key(cluster, cluster.readonly_key()));
  for (size_t node = 1; node <= cluster.size(); ++node) {
    std::vector<Request> mixed = {
        item_key(Op::kReadItem, "sec", "c", "p", "a"),
        item_write(Op::kCreateItem, "sec", "c", R"({"id":"b","pk":"p"})"),
        item_key(Op::kReadItem, "sec", "c", "p", "a"),
        item_write(Op::kUpsertItem, "sec", "c", R"({"id":"a","pk":"p","v":2})"),
        item_key(Op::kDeleteItem, "sec", "c", "p", "a"),
    };
    for (Request& request : mixed) request.endpoint = node;
    const std::vector<client::Response> answers = reader.execute_all(mixed);
    ASSERT_EQ(answers.size(), mixed.size());
    const std::vector<int> expected = {200, 403, 200, 403, 403};
    for (size_t i = 0; i < answers.size(); ++i) {
      EXPECT_EQ(answers[i].status, expected[i]) << "request " << i << " on node " << node << ": " << answers[i].message;
      EXPECT_EQ(answers[i].served_by, node) << "request " << i;
    }
    EXPECT_NE(answers[0].body.find("\"id\":\"a\""), std::string::npos) << answers[0].body;
  }
  EXPECT_EQ(fingerprint(cluster, admin), before);

  std::unique_ptr<RawSession> raw = open_raw_session(cluster.endpoint(1), cluster.admin_key());
  auto& wait = raw->rpc.getWaitScope();
  // One past the limit: every slot is a 400 that says so, and the create at its head is not applied.
  {
    auto call = raw->session->executeBatchRequest();
    auto requests = call.initRequests(kMaxBatchRequests + 1);
    api::encode_request(item_write(Op::kCreateItem, "sec", "c", R"({"id":"too-many","pk":"p"})"), requests[0]);
    for (uint32_t i = 1; i <= kMaxBatchRequests; ++i) {
      api::encode_request(item_key(Op::kReadItem, "sec", "c", "p", "a"), requests[i]);
    }
    auto answered = call.send().wait(wait);
    ASSERT_EQ(answered.getResponses().size(), kMaxBatchRequests + 1);
    for (proto::Response::Reader response : answered.getResponses()) {
      EXPECT_EQ(response.getStatus(), 400u);
      EXPECT_NE(std::string(response.getMessage().cStr()).find("at most 1024"), std::string::npos)
          << response.getMessage().cStr();
    }
    Request read = item_key(Op::kReadItem, "sec", "c", "p", "too-many");
    read.options.consistency = client::Consistency::kStrong;
    EXPECT_EQ(run(admin, read).status, 404) << "a request of a refused batch was applied";
  }
  // Outcomes in request order, each its own: created, a bad body, a conflict with the create before it in the same
  // batch, a missing container, and a strong read.
  {
    std::vector<Request> batch = {
        item_write(Op::kCreateItem, "sec", "c", R"({"id":"m1","pk":"p"})"),
        item_write(Op::kCreateItem, "sec", "c", R"({"id":"m2","pk":"p","ttl":"soon"})"),
        item_write(Op::kCreateItem, "sec", "c", R"({"id":"m1","pk":"p"})"),
        item_write(Op::kUpsertItem, "sec", "nope", R"({"id":"m3","pk":"p"})"),
        item_key(Op::kReadItem, "sec", "c", "p", "a"),
    };
    batch.back().options.consistency = client::Consistency::kStrong;
    auto call = raw->session->executeBatchRequest();
    auto requests = call.initRequests(static_cast<unsigned>(batch.size()));
    for (size_t i = 0; i < batch.size(); ++i) api::encode_request(batch[i], requests[static_cast<unsigned>(i)]);
    auto answered = call.send().wait(wait);
    ASSERT_EQ(answered.getResponses().size(), batch.size());
    const std::vector<uint16_t> expected = {201, 400, 409, 404, 200};
    for (size_t i = 0; i < batch.size(); ++i) {
      proto::Response::Reader response = answered.getResponses()[static_cast<unsigned>(i)];
      EXPECT_EQ(response.getStatus(), expected[i]) << "request " << i << ": " << response.getMessage().cStr();
      EXPECT_NE(response.getServedBy(), 0u) << "request " << i;
    }
  }
}

TEST(Security, ReadWriteKeyWritesDataButCannotChangeMembership) {
  Cluster cluster({.name = "sec-rw"});
  client::Client admin(cluster.client_options());
  prepare(cluster, admin);
  client::Client writer(with_key(cluster, cluster.readwrite_key()));
  for (auto& [name, request] : every_write_and_admin(9)) {
    if (!is_admin_op(request.kind())) continue;
    const client::Response response = run(writer, request);
    EXPECT_EQ(response.status, 403) << name << ": " << response.message;
  }
  EXPECT_EQ(run(writer, item_write(Op::kUpsertItem, "sec", "c", R"({"id":"w","pk":"p"})")).status, 201);
  // As a new user would try it: `mayfly cluster remove-member 2` with a readwrite key.
  const std::string key_file = cluster.write_file("rw.key", cluster.readwrite_key() + "\n");
  fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  const CliResult cli = cluster.cli({"--key-file", key_file, "cluster", "remove-member", "2"});
  EXPECT_EQ(cli.status(), 403) << cli.describe();
  EXPECT_EQ(fingerprint(cluster, admin).members, 3u);
}

// Replaces `path` atomically with `text`, mode 0600, as an operator's write-then-`mv` would.
void replace_private_file(const std::string& path, const std::string& text) {
  const std::string staged = path + ".new";
  std::ofstream(staged, std::ios::trunc) << text;
  fs::permissions(staged, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  fs::rename(staged, path);
}

TEST(Security, KeysRotateWithoutRestartAndARemovedKeyGets401OnEveryNode) {
  Cluster cluster({.name = "sec-rotate"});
  client::Client admin(cluster.client_options());
  prepare(cluster, admin);
  const std::string old_key = cluster.readwrite_key();
  const std::string new_key = "rotated-key-0123456789abcdef0123456789";
  auto write_keys = [&](const std::string& text) { replace_private_file(cluster.keys_file(), text); };
  client::Client old_client(with_key(cluster, old_key));  // keeps its sessions open across the rotation
  for (size_t node = 1; node <= cluster.size(); ++node) {
    ASSERT_EQ(run(old_client, item_key(Op::kReadItem, "sec", "c", "p", "a"), node).status, 200);
  }
  // 1. Add the new key next to the old one: both work everywhere.
  write_keys("admin " + cluster.admin_key() + "\nreadwrite " + old_key + " old\nreadwrite " + new_key + " new\n");
  client::Client new_client(with_key(cluster, new_key));
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(wait_until([&] { return run(new_client, item_key(Op::kReadItem, "sec", "c", "p", "a"), node).status == 200; },
                           milliseconds(5000)))
        << "the new key is not accepted by node " << node;
    EXPECT_EQ(run(old_client, item_key(Op::kReadItem, "sec", "c", "p", "a"), node).status, 200);
  }
  // 2. Remove the old key: 401 on every node, on the sessions it already had open too; the new key keeps working.
  write_keys("admin " + cluster.admin_key() + "\nreadwrite " + new_key + " new\n");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(wait_until([&] { return run(old_client, item_key(Op::kReadItem, "sec", "c", "p", "a"), node).status == 401; },
                           milliseconds(5000)))
        << "node " << node << " still accepts the removed key";
    client::Client fresh(with_key(cluster, old_key));
    EXPECT_EQ(run(fresh, item_write(Op::kUpsertItem, "sec", "c", R"({"id":"x","pk":"p"})"), node).status, 401);
    EXPECT_TRUE(run(new_client, item_write(Op::kUpsertItem, "sec", "c", R"({"id":"n","pk":"p"})"), node).ok());
  }
  Request read_x = item_key(Op::kReadItem, "sec", "c", "p", "x");
  read_x.options.consistency = client::Consistency::kStrong;
  EXPECT_EQ(run(admin, read_x).status, 404) << "a write with the removed key was applied";
}

// ---- the peer API ---------------------------------------------------------------------------------------------------

uint64_t term_of(Cluster& cluster, size_t node) {
  std::optional<NodeStatus> status = cluster.status(node);
  return status ? status->term : 0;
}

// A heartbeat as node `from` would send it to `to`, in a term far ahead: adopting it would depose the leader.
std::string forged_heartbeat(uint64_t from, uint64_t to, uint64_t term) {
  replication::Message message;
  message.type = replication::MessageType::kHeartbeat;
  message.from = NodeId(from);
  message.to = NodeId(to);
  message.term = Term(term);
  return replication::encode_message(message);
}

capnp::Data::Reader data_of(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

// Opens the peer API on `endpoint` as node `from`, proving `secret` (empty: no proof, no hello), and delivers one
// message. Returns the failure's description, or "" if the node took the delivery.
// `raft_transport`: over the Raft transport, as a node's Raft link does (the peer preamble first); false: on the
// node's listener as a client connects, where no Raft message is taken at all.
std::string deliver_as_peer(const std::string& endpoint, uint64_t from, const std::string& secret,
                            const std::string& message, bool raft_transport = true) {
  std::unique_ptr<capnp::EzRpcClient> client;
  int fd = -1;
  if (raft_transport) {
    fd = connect_raft_transport(endpoint);
    if (fd < 0) return "cannot connect";
    client = std::make_unique<capnp::EzRpcClient>(fd);
  } else {
    client = std::make_unique<capnp::EzRpcClient>(endpoint);
  }
  KJ_DEFER({
    client.reset();  // before its descriptor closes
    if (fd >= 0) ::close(fd);
  });
  capnp::EzRpcClient& rpc = *client;
  auto& wait = rpc.getWaitScope();
  proto::Mayfly::Client main = rpc.getMain<proto::Mayfly>();
  std::string failure;
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] {
    auto open = main.openPeerRequest();
    open.setFrom(from);
    open.setCluster("mayfly");
    if (!secret.empty()) {
      const std::string client_nonce = auth::random_nonce();
      const std::string server_nonce = hello(main, wait, client_nonce);
      open.setProof(data_of(auth::peer_client_proof(secret, "mayfly", from, client_nonce, server_nonce)));
    }
    auto opened = open.send().wait(wait);
    auto deliver = opened.getPeer().deliverRequest();
    deliver.initMessages(1).set(0, data_of(message));
    deliver.send().wait(wait);
  })) {
    failure = exception->getDescription().cStr();
    if (failure.empty()) failure = "failed";
  }
  return failure;
}

std::string read_secret(const Cluster& cluster) {
  std::ifstream in(cluster.secret_file());
  std::string secret;
  in >> secret;
  return secret;
}

TEST(Security, APeerWithoutTheClusterSecretCannotDeliverASingleMessage) {
  Cluster cluster({.name = "sec-peer", .metrics = true});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t target = leader == 1 ? 2 : 1;
  const uint64_t term = term_of(cluster, target);
  const uint64_t claimed = leader;  // speak as the leader itself
  // No handshake at all (what a pre-authentication client would do), and a proof made with the wrong secret.
  EXPECT_NE(deliver_as_peer(cluster.endpoint(target), claimed, "", forged_heartbeat(claimed, target, term + 1000)), "");
  EXPECT_NE(deliver_as_peer(cluster.endpoint(target), claimed, "wrong-secret-0123456789abcdef",
                            forged_heartbeat(claimed, target, term + 1000)),
            "");
  // With the secret, but on the listener without the peer preamble: peers and forwarded requests are served there,
  // Raft messages are not (they run on the Raft thread only).
  const std::string refused = deliver_as_peer(cluster.endpoint(target), claimed, read_secret(cluster),
                                              forged_heartbeat(claimed, target, term + 1000), false);
  EXPECT_NE(refused.find("only on the Raft transport"), std::string::npos) << refused;
  EXPECT_EQ(term_of(cluster, target), term) << "a forged message moved the term";
  EXPECT_EQ(cluster.wait_for_leader(), leader);
  std::optional<Scrape> scrape = cluster.scrape(target);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_GE(scrape->sum("mayfly_auth_failures_total", {{"reason", "peer"}}), 2) << scrape->text();
  EXPECT_EQ(scrape->sum("mayfly_security_open"), 0) << scrape->text();
}

TEST(Security, AnAuthenticatedPeerCannotSpeakForAnotherNodeNorCanANonMember) {
  Cluster cluster({.name = "sec-sender", .metrics = true});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t target = leader == 1 ? 2 : 1;
  const uint64_t other = 6 - leader - target;  // the third node
  const uint64_t term = term_of(cluster, target);
  const std::string secret = read_secret(cluster);
  // Authenticated as `other`, but the message says it comes from the leader.
  EXPECT_EQ(deliver_as_peer(cluster.endpoint(target), other, secret, forged_heartbeat(leader, target, term + 1000)), "");
  // Authenticated as node 9, which is no member of this cluster.
  EXPECT_EQ(deliver_as_peer(cluster.endpoint(target), 9, secret, forged_heartbeat(9, target, term + 1000)), "");
  std::optional<Scrape> scrape;
  EXPECT_TRUE(wait_until(
      [&] {
        scrape = cluster.scrape(target);
        return scrape && scrape->sum("mayfly_peer_messages_rejected_total", {{"reason", "wrong_sender"}}) >= 1 &&
               scrape->sum("mayfly_peer_messages_rejected_total", {{"reason", "not_member"}}) >= 1;
      },
      milliseconds(5000)))
      << (scrape ? scrape->text() : "no scrape");
  EXPECT_EQ(term_of(cluster, target), term) << "a message with a false sender moved the term";
  EXPECT_EQ(cluster.wait_for_leader(), leader);
  // The real peers still work: a write commits.
  client::Client admin(cluster.client_options());
  EXPECT_EQ(admin.execute(db_req(Op::kCreateDatabase, "after")).status, 201);
}

TEST(Security, TheClusterSecretRotatesWithoutDowntimeAndTheOldOneIsThenRefused) {
  Cluster cluster({.name = "sec-secret"});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client admin(cluster.client_options());
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "rot")).status, 201);
  ASSERT_EQ(admin.execute(create_container("rot", "c", "/pk")).status, 201);
  const std::string old_secret = read_secret(cluster);
  const std::string new_secret = "rotated-cluster-secret-0123456789abcdef";
  auto write_secrets = [&](const std::string& text) { replace_private_file(cluster.secret_file(), text); };
  // A harmless message (a stale term): what matters is whether the handshake with `secret` lets it be delivered.
  auto accepted_by = [&](size_t node, const std::string& secret) {
    const uint64_t from = node == 1 ? 2 : 1;
    return deliver_as_peer(cluster.endpoint(node), from, secret, forged_heartbeat(from, node, 1)).empty();
  };
  // Every node restarted in turn re-runs every peer handshake with what the file says now; writes keep committing.
  int written = 0;
  auto restart_each_and_write = [&](const char* step) {
    for (size_t node = 1; node <= cluster.size(); ++node) {
      ASSERT_TRUE(cluster.stop_node(node)) << step;
      ASSERT_TRUE(cluster.start_node(node)) << step;
      ASSERT_NE(cluster.wait_for_leader(), 0u) << step << ": no leader after restarting node " << node;
      client::Client fresh(cluster.client_options());  // no connection to the process just stopped
      const client::Response write = fresh.execute(item_write(
          Op::kUpsertItem, "rot", "c", R"({"id":"w)" + std::to_string(++written) + R"(","pk":"p"})"));
      ASSERT_TRUE(write.ok()) << step << ": " << write.status << " " << write.message;
      const uint64_t leader = cluster.wait_for_leader();
      const std::optional<NodeStatus> status = cluster.status(leader);
      ASSERT_TRUE(status.has_value()) << step;
      ASSERT_TRUE(cluster.wait_applied(node, status->commit)) << step << ": node " << node << " did not catch up";
    }
  };
  // 1. The new secret next to the old: accepted everywhere, nodes still prove the old one.
  write_secrets(old_secret + "\n" + new_secret + "\n");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(wait_until([&] { return accepted_by(node, new_secret); }, milliseconds(5000))) << "node " << node;
    EXPECT_TRUE(accepted_by(node, old_secret)) << "node " << node;
  }
  ASSERT_NO_FATAL_FAILURE(restart_each_and_write("both accepted, proving the old"));
  // 2. The new one first: nodes prove it; the old is still accepted.
  write_secrets(new_secret + "\n" + old_secret + "\n");
  ASSERT_NO_FATAL_FAILURE(restart_each_and_write("proving the new"));
  // 3. The old one removed: refused on every node, while the cluster keeps working with the new one.
  write_secrets(new_secret + "\n");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(wait_until([&] { return !accepted_by(node, old_secret); }, milliseconds(5000)))
        << "node " << node << " still accepts the removed secret";
    EXPECT_TRUE(accepted_by(node, new_secret)) << "node " << node;
  }
  ASSERT_NO_FATAL_FAILURE(restart_each_and_write("the old removed"));
}

TEST(Security, MetricsWithBasicAuthRefuseScrapesWithoutTheCredentials) {
  const std::string credentials = "prometheus:scrape-password-0123456789";
  Cluster cluster({.name = "sec-metrics", .metrics = true, .metrics_auth = credentials});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(cluster.scrape(node).has_value()) << "node " << node << " refused the right credentials";
    EXPECT_FALSE(metrics::http_get(cluster.metrics_endpoint(node), "/metrics").has_value())
        << "node " << node << " served metrics without credentials";
    EXPECT_FALSE(metrics::http_get(cluster.metrics_endpoint(node), "/metrics", "prometheus:wrong-password-0000000")
                     .has_value());
    EXPECT_FALSE(metrics::http_get(cluster.metrics_endpoint(node), "/metrics", "other:scrape-password-0123456789")
                     .has_value());
  }
}

// Running open on a non-loopback address needs --insecure; the refusal says why and what to do.
TEST(Security, AnOpenNodeRefusesANonLoopbackListenerWithoutInsecure) {
  const std::string dir = (fs::temp_directory_path() / "mayfly-sec-open").string();
  const std::string out = dir + ".out";
  const std::string command = default_mayflyd() + " --id 1 --listen 0.0.0.0:1 --peers 1=127.0.0.1:1 --data " +
                              dir + " > " + out + " 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--insecure"), std::string::npos) << text;
  EXPECT_NE(text.find("--keys-file"), std::string::npos) << text;
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  fs::remove(out, ignored);
}

}  // namespace
}  // namespace mayfly::it
