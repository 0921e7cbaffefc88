// Internals shared by the files of RpcHost (node/rpc.h): rpc_connections.cc (listener, TLS, admission, idle
// connections, keys, start/stop), rpc_services.cc (the Cap'n Proto interfaces a connection serves: the handshake,
// client sessions, the peer API), rpc_peers.cc (outgoing peer links, incoming peer deliveries, the hand-off from the
// driver), rpc.cc (routing requests: reads here or on read threads, waiting for the applied index, the driver,
// forwarding to the leader). Not for use outside node/rpc*.cc.
// Thread-safety: everything here is used on the kj thread.
#pragma once

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <capnp/rpc.h>
#include <kj/async-io.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "node/rpc.h"

namespace mayfly::node {
namespace rpc_detail {

inline constexpr size_t kMaxMessagesPerDelivery = 512;
inline constexpr size_t kMaxBytesPerDelivery = 8 << 20;
// Waiting for the driver before a peer's deliver call waits too.
inline constexpr size_t kMaxQueuedDeliveriesPerPeer = 4;
// Beyond this a slow peer's messages are dropped (Raft resends).
inline constexpr size_t kMaxQueuedBytesPerPeer = 64 << 20;
inline constexpr int64_t kMaxBackoffMs = 2000;
inline constexpr int kShutdownForwardWaitMs = 3000;  // at most this long for the leader's answers to forwarded writes
inline constexpr int kShutdownFlushMs = 50;          // then this long for the last answers to reach the sockets

// The same clock as Driver::steady_ms, for comparing with NodeView::leader_contact_steady_ms.
inline int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Every incoming Cap'n Proto message (client requests, peer deliveries, forwarded replies) is limited to 16 MiB
// (2 Mi words). The largest honest ones: a peer delivery (kMaxBytesPerDelivery, plus at most one Raft message of
// ~4 MiB past it), a forwarded reply (a 4 MiB page plus its last 2 MB item), a write carrying a 2 MB item. Cap'n
// Proto checks a message's declared size against this limit when it reads the segment table, before allocating, so
// a frame declaring 100 MB in a few bytes is refused (the connection fails) and never reserved.
inline constexpr uint64_t kTraversalLimitWords = uint64_t{2} << 20;

inline capnp::ReaderOptions reader_options() {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = kTraversalLimitWords;
  return options;
}

// Calls in flight per connection, in words of their parameters: past this the connection is not read until answers
// go out (Cap'n Proto's flow limit). 16 MiB holds a peer's largest delivery (8 MiB) or several 2 MB items.
inline constexpr size_t kFlowLimitWords = (16u << 20) / sizeof(capnp::word);
// Replies queued for one client connection and not yet written to its socket (Cap'n Proto's write queue, which is
// otherwise unbounded): past this the connection is closed (`reply_backlog`). A client that pipelines reads of large
// items and never reads its socket holds at most this much of the node's memory; an honest client reading a few
// 4 MiB pages at once stays far below it.
inline constexpr size_t kMaxReplyBacklogBytes = size_t{64} << 20;
// On a follower, a session read whose token is beyond the commit index this node last heard from its leader waits at
// most this many heartbeat intervals (at least kBeyondCommitWaitMinMs) for the commit index to cover it, not the
// whole --session-wait-ms: an honest token is committed within a heartbeat or two.
inline constexpr int64_t kBeyondCommitWaitHeartbeats = 10;
inline constexpr int64_t kBeyondCommitWaitMinMs = 200;
inline constexpr int64_t kQuietLogMs = 5000;  // repeated warnings of one kind: one line per this long

// True at most once per kQuietLogMs for one `last` slot: repeated refusals make one log line, not a flood.
inline bool log_now(int64_t& last_ms) {
  const int64_t now = steady_ms();
  if (last_ms != 0 && now - last_ms < kQuietLogMs) return false;
  last_ms = now;
  return true;
}

inline std::string bytes_of(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

inline capnp::Data::Reader data_of(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

// One outgoing Cap'n Proto connection (a peer link's), owning its stream, network and RPC system.
struct OutgoingConnection {
  explicit OutgoingConnection(kj::Own<kj::AsyncIoStream> connected)
      : stream(kj::mv(connected)),
        network(*stream, capnp::rpc::twoparty::Side::CLIENT, reader_options()),
        rpc(capnp::makeRpcClient(network)) {
    capnp::MallocMessageBuilder message(8);
    auto vat = message.initRoot<capnp::rpc::twoparty::VatId>();
    vat.setSide(capnp::rpc::twoparty::Side::SERVER);
    bootstrap = rpc.bootstrap(vat).castAs<proto::Mayfly>();
  }

  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  proto::Mayfly::Client bootstrap = nullptr;  // last: released first
};

}  // namespace rpc_detail

// One accepted connection: its stream, network and RPC system (members are destroyed in reverse order: the RPC
// system before the network before the stream), and what the handshake established.
struct ServedConnection {
  ServedConnection(kj::Own<kj::AsyncIoStream> accepted, capnp::Capability::Client bootstrap)
      : stream(kj::mv(accepted)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER, rpc_detail::reader_options()),
        rpc(capnp::makeRpcServer(network, kj::mv(bootstrap))) {
    rpc.setFlowLimit(rpc_detail::kFlowLimitWords);
  }

  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  bool authenticated = false;
  bool peer = false;          // an authenticated peer: never closed for being idle
  std::string peer_secret_id; // a peer's: SHA-256 (hex) of the cluster secret it proved ("" on an open node)
  std::string key;            // an authenticated client session: the key id it proved ("" on an open node)
  bool closing = false;       // being closed (close_connection_later)
  int64_t calls = 0;          // client calls in flight
  int64_t last_active_ms = 0; // steady ms of the last call's start or end (or of the handshake)
  kj::Promise<void> watcher = nullptr;  // closes the connection when the other side goes away
};

// One peer, seen from here: an outgoing connection that delivers Raft messages in order and in batches, and carries
// forwarded client requests. Reconnects with exponential backoff after any failure (rpc_peers.cc).
class PeerLink {
 public:
  PeerLink(RpcHost& host, NodeId peer, std::string address)
      : host_(host), peer_(peer), address_(std::move(address)), tasks_(kj::heap<kj::TaskSet>(errors_)) {}

  void send(std::vector<std::string>& messages);
  // `owner`: the owner of the request's write id, which the leader takes from a peer that proved the cluster secret
  // (set on the forwarded copy whatever the client sent).
  kj::Promise<Reply> forward(proto::Request::Reader request, uint64_t owner);
  kj::Promise<std::string> node_status();
  const std::string& address() const { return address_; }
  // After a cluster secret reload: when the link was proved with a secret the file no longer holds, drops the
  // connection (the next message reconnects, proving the current secret) and returns true.
  bool drop_if_secret_removed();

 private:
  class Errors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override;
  };

  // The peer's capability; calls made before the handshake is done wait for it (and fail with it).
  proto::Peer::Client capability();
  // Connects and runs the handshake: hello, then openPeer with this node's proof; the peer's own proof is checked
  // before anything is sent on the link, so Raft traffic never goes to a process without the cluster secret.
  kj::Promise<proto::Peer::Client> connect();
  void pump();
  void on_failure(const kj::Exception& exception);

  RpcHost& host_;
  NodeId peer_;
  std::string address_;
  Errors errors_;
  kj::Own<rpc_detail::OutgoingConnection> connection_;
  kj::Own<proto::Peer::Client> peer_capability_;
  std::string proved_secret_id_;  // SHA-256 (hex) of the secret the current connection was proved with ("": none)
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  bool sending_ = false;
  bool waiting_to_reconnect_ = false;
  int64_t backoff_ms_ = 50;
  int64_t clock_refusal_log_ms_ = 0;  // the last "refused for its --clock" error logged
  int64_t last_tls_log_ms_ = 0;
  kj::Own<kj::TaskSet> tasks_;  // last: destroyed first, cancelling callbacks that use the members above
};

// The least role a request needs (node/keyring.h): the same for a session and a gateway call (rpc_services.cc).
Role required_role(proto::Request::Which which);

// The bootstrap object of connection `connection`: the handshake (hello, then openSession or openPeer;
// rpc_services.cc).
capnp::Capability::Client make_bootstrap(RpcHost& host, uint64_t connection);

}  // namespace mayfly::node
