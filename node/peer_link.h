// PeerLink: one outgoing connection from this node to a peer, reconnected with exponential backoff after any failure.
// Two kinds, each owned by one event-loop thread:
//  - a Raft link (node/peer_transport.h, on the Raft thread) begins with kPeerPreamble (common/peer_preamble.h) and
//    delivers this node's Raft messages in order and in batches, one delivery in flight at a time;
//  - a request link (node/rpc.h, on the RPC thread) carries client writes forwarded to the leader and nodeStatus
//    calls, beside the clients on the peer's listener.
// Either runs the same handshake: TLS when the node has it (the peer's certificate must chain to --tls-ca and name
// the host dialled), then hello and openPeer with this node's proof of the cluster secret; the peer's own proof is
// checked before anything else is sent, so nothing goes to a process without the secret.
//
// Thread-safety: a PeerLink and its LinkContext are used on the one kj thread that made them.
#pragma once

#include <kj/async-io.h>
#include <kj/async.h>
#include <kj/timer.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/tls.h"
#include "metrics/security.h"
#include "node/config.h"
#include "node/request.h"
#include "node/rpc_common.h"
#include "proto/mayfly.capnp.h"
#include "storage/store_reader.h"

namespace mayfly::node {

// What a link needs of the thread that owns it.
class LinkContext {
 public:
  virtual ~LinkContext() = default;
  virtual const NodeConfig& config() const = 0;
  virtual kj::Timer& timer() = 0;
  virtual kj::Network& network() = 0;
  // The TLS context to dial with; nullptr: plaintext.
  virtual tls::Context* tls() = 0;
  // The cluster secret this node proves with ("" when none), as the owning thread knows it now.
  virtual std::string cluster_secret() const = 0;
  // Whether the secret with this SHA-256 (hex) is still accepted.
  virtual bool secret_accepted(const std::string& secret_id) const = 0;
  virtual metrics::SecurityMetrics& security_metrics() = 0;
};

// The TLS context one of the node's kj threads serves and dials with (its certificate and key, trusting --tls-ca;
// handshakes served time out after --handshake-timeout-ms on `timer`); nullptr when the node speaks plaintext.
Result<std::unique_ptr<tls::Context>> node_tls(const NodeConfig& config, kj::Timer& timer);

// Where to dial `peer`: its --peers address, else the one the membership records (nullopt, logged: none known).
std::optional<std::string> peer_address(const NodeConfig& config, const storage::StoreReader& state, NodeId peer);

class PeerLink {
 public:
  enum class Kind { kRaft, kRequests };

  PeerLink(LinkContext& context, Kind kind, NodeId peer, std::string address)
      : context_(context), kind_(kind), peer_(peer), address_(std::move(address)),
        tasks_(kj::heap<kj::TaskSet>(errors_)) {}

  // kRaft: queues Raft messages (bounded by kMaxQueuedBytesPerPeer: past it the oldest are dropped; Raft resends).
  void send(std::vector<std::string>& messages);
  // kRequests: a request forwarded to this peer (the leader), encoded by api/codec.h. Its write id's owner is the one
  // this node authenticated (0: anonymous), which the leader takes from a peer that proved the cluster secret.
  kj::Promise<Reply> forward(const api::Request& request);
  kj::Promise<std::string> node_status();
  // Connects now if it is not connected (a request link connects on its first call otherwise).
  void warm();
  const std::string& address() const { return address_; }
  // After a cluster secret reload: when the link was proved with a secret no longer accepted, drops the connection
  // (the next call reconnects, proving the current secret) and returns true.
  bool drop_if_secret_removed();

 private:
  class Errors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override;
  };

  // The peer's capability; calls made before the handshake is done wait for it (and fail with it).
  proto::Peer::Client capability();
  // Connects (a Raft link: the preamble first) and runs the handshake.
  kj::Promise<proto::Peer::Client> connect();
  void pump();
  void on_failure(const kj::Exception& exception);
  // Drops the connection of `generation` (if still current) on the next turn of the loop; the next call reconnects.
  void drop_later(uint64_t generation);

  LinkContext& context_;
  const Kind kind_;
  NodeId peer_;
  std::string address_;
  Errors errors_;
  kj::Own<rpc_detail::OutgoingConnection> connection_;
  kj::Own<proto::Peer::Client> peer_capability_;
  std::string proved_secret_id_;  // SHA-256 (hex) of the secret the current connection was proved with ("": none)
  uint64_t generation_ = 0;       // bumped each time the connection is dropped
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

// After a cluster secret reload: the incoming connections of `connections` (id -> connection) that proved a secret
// `context` no longer accepts are closed through `close(id)` (`proved_secret(connection)`: the SHA-256 (hex) of the
// secret it proved, "" when none or not a peer), and the outgoing `links` proved with one are dropped (the next call
// reconnects with the proving secret). Logged when it closed anything; `kind` names the links ("peer", "Raft").
template <typename Connections, typename ProvedSecret, typename Close>
void close_links_of_removed_secrets(const LinkContext& context, const char* kind, const Connections& connections,
                                    std::map<NodeId, std::unique_ptr<PeerLink>>& links, ProvedSecret proved_secret,
                                    Close close) {
  std::vector<uint64_t> stale;
  for (const auto& [id, connection] : connections) {
    const std::string& secret_id = proved_secret(*connection);
    if (!secret_id.empty() && !context.secret_accepted(secret_id)) stale.push_back(id);
  }
  for (uint64_t id : stale) close(id);
  size_t dropped = 0;
  for (auto& [peer, peer_link] : links) {
    if (peer_link->drop_if_secret_removed()) ++dropped;
  }
  if (!stale.empty() || dropped > 0) {
    spdlog::info("closed {} incoming and {} outgoing {} link(s) proved with a cluster secret no longer in {}",
                 stale.size(), dropped, kind, context.config().cluster_secret_file);
  }
}

}  // namespace mayfly::node
