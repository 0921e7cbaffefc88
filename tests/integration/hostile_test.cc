// Hostile peers against real mayflyd processes (issue #10): Raft messages forged over the peer API — a term of
// 2^64-1, entries whose timestamps go back, a garbage config entry, a rival leader — and Cap'n Proto frames and Raft
// encodings that declare far more than they carry. Every one is refused and counted; no node exits; the cluster keeps
// (or regains within an election timeout) a leader and accepts writes; memory stays bounded.
#include <arpa/inet.h>
#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/codec.h"
#include "proto/mayfly.capnp.h"
#include "replication/codec.h"
#include "common/auth.h"
#include "tests/integration/cluster_harness.h"
#include "tests/integration/proc_status.h"

namespace mayfly::it {
namespace {

using replication::Entry;
using replication::EntryType;
using replication::Message;
using replication::MessageType;

constexpr milliseconds kElectionTimeout{600};  // the harness's 30 ticks of 10 ms, randomized up to twice

// --- The one place that opens a peer connection: the Raft transport (the peer preamble, then hello and openPeer). ---
struct PeerConnection {
  PeerConnection() = default;
  PeerConnection(PeerConnection&& other) noexcept
      : fd(std::exchange(other.fd, -1)), rpc(std::move(other.rpc)), peer(std::move(other.peer)) {}
  PeerConnection& operator=(PeerConnection&&) = delete;
  ~PeerConnection() {
    peer.reset();
    rpc.reset();
    if (fd >= 0) ::close(fd);
  }
  int fd = -1;
  std::unique_ptr<capnp::EzRpcClient> rpc;
  std::unique_ptr<proto::Peer::Client> peer;
};

// Opens node n's peer API as node `from`, through the authenticated handshake with the cluster's secret (these
// tests play a member that has gone bad, or a forger who has the secret: peer authentication keeps everyone else out,
// see security_test.cc).
PeerConnection connect_as_peer(const Cluster& cluster, size_t n, uint64_t from) {
  std::ifstream secret_file(cluster.secret_file());
  std::string secret;
  secret_file >> secret;
  PeerConnection connection;
  connection.fd = connect_raft_transport(cluster.endpoint(n));
  EXPECT_GE(connection.fd, 0) << "cannot connect to node " << n;
  connection.rpc = std::make_unique<capnp::EzRpcClient>(connection.fd);
  auto& wait = connection.rpc->getWaitScope();
  proto::Mayfly::Client main = connection.rpc->getMain<proto::Mayfly>();
  const std::string client_nonce = auth::random_nonce();
  const std::string server_nonce = hello(main, wait, client_nonce);
  const std::string proof = auth::peer_client_proof(secret, "mayfly", from, client_nonce, server_nonce);
  auto request = main.openPeerRequest();
  request.setFrom(from);
  request.setCluster("mayfly");
  request.setProof(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(proof.data()), proof.size()));
  connection.peer = std::make_unique<proto::Peer::Client>(request.send().getPeer());
  return connection;
}

// Delivers raw Raft message encodings; true when the node accepted the delivery (it may still refuse each message).
bool deliver(PeerConnection& connection, const std::vector<std::string>& messages) {
  auto request = connection.peer->deliverRequest();
  auto list = request.initMessages(static_cast<unsigned>(messages.size()));
  for (size_t i = 0; i < messages.size(); ++i) {
    list.set(static_cast<unsigned>(i),
             capnp::Data::Reader(reinterpret_cast<const kj::byte*>(messages[i].data()), messages[i].size()));
  }
  try {
    request.send().wait(connection.rpc->getWaitScope());
    return true;
  } catch (const kj::Exception& e) {
    std::cerr << "deliver failed: " << e.getDescription().cStr() << "\n";
    return false;
  }
}

uint64_t other_node(uint64_t n) { return n % 3 + 1; }

double rejected(Cluster& cluster, size_t n, const std::string& reason) {
  std::optional<Scrape> scrape = cluster.scrape(n);
  return scrape ? scrape->sum("mayfly_peer_messages_rejected_total", {{"reason", reason}}) : -1;
}

void create_store(Cluster& cluster) {
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(client::Op::kCreateDatabase, "d")).status, 201);
  ASSERT_EQ(client.execute(create_container("d", "c", "/pk")).status, 201);
}

// The cluster has a leader within an election timeout (plus slack for a loaded machine), takes a write, every node
// runs, and terms are sane.
void expect_serving(Cluster& cluster, const std::string& id) {
  const uint64_t leader = cluster.wait_for_leader(kElectionTimeout * 2 + milliseconds(2000));
  ASSERT_NE(leader, 0u) << "no leader";
  client::Client client(cluster.client_options());
  const client::Response written =
      client.execute(item_write(client::Op::kUpsertItem, "d", "c", R"({"id":")" + id + R"(","pk":"p"})"));
  EXPECT_LT(written.status, 300) << written.body;
  for (size_t n = 1; n <= cluster.size(); ++n) {
    EXPECT_TRUE(cluster.running(n)) << "node " << n << " exited";
    std::optional<NodeStatus> status = cluster.status(n);
    ASSERT_TRUE(status.has_value()) << "node " << n << " does not answer";
    EXPECT_LT(status->term, 1000u) << "node " << n << " adopted a forged term";
  }
}

Message forged(MessageType type, uint64_t from, uint64_t to, uint64_t term) {
  return Message{.type = type, .from = NodeId(from), .to = NodeId(to), .term = Term(term)};
}

TEST(IntegrationHostile, ForgedMaxTermHeartbeatIsRefusedAndTheClusterKeepsALeader) {
  Cluster cluster(ClusterOptions{.name = "hostile-term", .metrics = true});
  ASSERT_TRUE(cluster.start());
  create_store(cluster);
  for (size_t n = 1; n <= 3; ++n) {
    PeerConnection peer = connect_as_peer(cluster, n, other_node(n));
    Message heartbeat = forged(MessageType::kHeartbeat, other_node(n), n, UINT64_MAX);
    heartbeat.commit = LogIndex(UINT64_MAX);
    Message vote = forged(MessageType::kVote, other_node(n), n, UINT64_MAX);
    vote.index = LogIndex(UINT64_MAX);
    vote.log_term = Term(UINT64_MAX - 1);
    ASSERT_TRUE(deliver(peer, {encode_message(heartbeat), encode_message(vote)}));
  }
  for (size_t n = 1; n <= 3; ++n) {
    EXPECT_TRUE(wait_until([&] { return rejected(cluster, n, "term_out_of_range") >= 2; }, milliseconds(5000)))
        << "node " << n;
  }
  expect_serving(cluster, "after-term");
  EXPECT_NE(cluster.log_text(1).find("term_out_of_range"), std::string::npos) << "a warn line names the reason";
}

TEST(IntegrationHostile, DecreasingTimestampsGarbageConfigAndRivalLeadersKillNoNode) {
  Cluster cluster(ClusterOptions{.name = "hostile-entries", .metrics = true});
  ASSERT_TRUE(cluster.start());
  create_store(cluster);
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  for (size_t n = 1; n <= 3; ++n) {
    std::optional<NodeStatus> status = cluster.status(n);
    ASSERT_TRUE(status.has_value());
    const uint64_t from = n == leader ? other_node(n) : leader;  // pose as the leader to followers
    PeerConnection peer = connect_as_peer(cluster, n, from);
    std::vector<std::string> messages;
    // The node's last entry is at or a little past its commit and (time entries every 100 ms) of the current term:
    // aim appends at each of those indexes so one of them matches the log and would be appended.
    for (uint64_t index = status->commit; index <= status->commit + 8; ++index) {
      const auto append = [&](std::vector<Entry> entries) {
        Message message = forged(MessageType::kAppend, from, n, status->term);
        message.index = LogIndex(index);
        message.log_term = Term(status->term);
        message.commit = LogIndex(status->commit);
        message.entries = std::move(entries);
        messages.push_back(encode_message(message));
      };
      const Term term(status->term);
      // Time going back from the node's last entry (used to abort on an assert), and among the entries.
      append({Entry{.term = term, .index = LogIndex(index + 1), .ts_micros = 1, .type = EntryType::kNormal}});
      append({Entry{.term = term, .index = LogIndex(index + 1), .ts_micros = INT64_MAX / 2},
              Entry{.term = term, .index = LogIndex(index + 2), .ts_micros = INT64_MAX / 4}});
      // A config entry that does not decode (used to abort when appended).
      append({Entry{.term = term, .index = LogIndex(index + 1), .ts_micros = INT64_MAX / 2,
                    .type = EntryType::kConfigChange, .data = "\x01garbage"}});
    }
    ASSERT_TRUE(deliver(peer, messages)) << "node " << n;
  }
  for (size_t n = 1; n <= 3; ++n) {
    EXPECT_TRUE(wait_until([&] {
      return rejected(cluster, n, "bad_entries") + rejected(cluster, n, "rival_leader") >= 1;
    }, milliseconds(5000))) << "node " << n;
    EXPECT_TRUE(cluster.running(n)) << "node " << n << " exited";
  }
  expect_serving(cluster, "after-entries");
}

// A raw TCP connection that sends `bytes`, then up to `then_zeros` more bytes (as many as the server takes before it
// closes the connection), and reports whether the server closed it within `timeout`.
bool server_closes_after(const std::string& endpoint, const std::string& bytes, size_t then_zeros,
                         milliseconds timeout) {
  const size_t colon = endpoint.rfind(':');
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &address.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  bool closed = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) {
    const std::string zeros(64 << 10, '\0');
    for (size_t sent = 0; sent < then_zeros;) {
      const ssize_t n = send(fd, zeros.data(), std::min(zeros.size(), then_zeros - sent), MSG_NOSIGNAL);
      if (n <= 0) break;  // the server closed the connection: the rest is not wanted
      sent += static_cast<size_t>(n);
    }
    const auto deadline = Clock::now() + timeout;
    while (!closed && Clock::now() < deadline) {
      pollfd poll_fd{.fd = fd, .events = POLLIN, .revents = 0};
      if (poll(&poll_fd, 1, 50) <= 0) continue;
      char buffer[256];
      const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
      closed = got <= 0;  // EOF or reset: refused
    }
  }
  close(fd);
  return closed;
}

TEST(IntegrationHostile, MessagesDeclaringFarMoreThanTheyCarryAreRefusedWithoutTheMemory) {
  Cluster cluster(ClusterOptions{.name = "hostile-size", .metrics = true});
  ASSERT_TRUE(cluster.start());
  create_store(cluster);
  const int64_t peak_before = status_kb(cluster.pid(1), "VmHWM:");
  ASSERT_GT(peak_before, 0);

  // A Cap'n Proto frame whose segment table declares one 100 MB segment: refused at once, before the node reserves
  // (or fills) 100 MB. Five connections each try to push 48 MB of it; a node that accepted the frame would buffer it.
  std::string frame;
  const uint32_t segments_minus_one = 0;
  const uint32_t words = (100u << 20) / 8;
  frame.append(reinterpret_cast<const char*>(&segments_minus_one), 4);
  frame.append(reinterpret_cast<const char*>(&words), 4);
  frame.append(8, '\0');
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(server_closes_after(cluster.endpoint(1), frame, size_t{48} << 20, milliseconds(3000)))
        << "node 1 kept waiting for a 100 MB message";
  }

  // A Raft message declaring 100k entries in a few bytes, a few hundred times: undecodable, counted.
  std::string header;
  codec::put_u8(header, 1);
  codec::put_u8(header, static_cast<uint8_t>(MessageType::kAppend));
  for (uint64_t id : {2, 1, 1, 1, 1}) codec::put_varint(header, id);  // from, to, term, log_term, index
  codec::put_varint(header, 100'000);
  PeerConnection peer = connect_as_peer(cluster, 1, 2);
  for (int round = 0; round < 4; ++round) {
    ASSERT_TRUE(deliver(peer, std::vector<std::string>(128, header)));
  }
  EXPECT_TRUE(wait_until([&] { return rejected(cluster, 1, "undecodable") >= 512; }, milliseconds(5000)));
  // A delivery of a million empty messages (8 MB of list pointers, within the traversal limit): refused whole.
  const double before_list = rejected(cluster, 1, "undecodable");
  ASSERT_TRUE(deliver(peer, std::vector<std::string>(1'000'000)));
  EXPECT_TRUE(wait_until([&] { return rejected(cluster, 1, "undecodable") >= before_list + 1; }, milliseconds(5000)));
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(rejected(cluster, 1, "undecodable"), before_list + 1) << "refused whole, not decoded one by one";

  // The peak resident size (VmHWM), so memory taken and given back in between counts too.
  const int64_t peak_after = status_kb(cluster.pid(1), "VmHWM:");
  std::cout << "node 1 peak RSS before " << peak_before << " kB, after " << peak_after << " kB\n";
  EXPECT_LT(peak_after - peak_before, 32 * 1024) << "node 1's peak RSS grew by more than 32 MiB";
  expect_serving(cluster, "after-size");
}

}  // namespace
}  // namespace mayfly::it
