// The server side of the peer handshake — hello's nonce, then openPeer's checks — the same on the RPC host's listener
// (request links: forwarded writes, nodeStatus) and on the Raft transport (node/peer_transport.h).
//
// Thread-safety: functions of their arguments; `last_log_ms` belongs to the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "metrics/security.h"
#include "node/config.h"
#include "proto/mayfly.capnp.h"

#include <kj/async.h>

namespace mayfly::node {

// The two handshake calls as a served connection receives them.
using HelloCall = capnp::CallContext<proto::Mayfly::HelloParams, proto::Mayfly::HelloResults>;
using OpenPeerCall = capnp::CallContext<proto::Mayfly::OpenPeerParams, proto::Mayfly::OpenPeerResults>;

// What a successful openPeer established.
struct PeerOpened {
  NodeId from;                // the id the peer proved
  std::string secret_id;      // SHA-256 (hex) of the cluster secret it proved ("" on a node without one)
  std::string server_proof;   // this node's answer, proving the same secret ("" on a node without one)
};

// The nonces of one connection's handshake: hello draws them, one open (a session's or a peer's) uses them.
class HandshakeNonces {
 public:
  // hello: the client nonce must be 16 to 64 bytes; answers with a fresh random server nonce.
  kj::Promise<void> hello(HelloCall& context);
  const std::string& client() const { return client_; }
  const std::string& server() const { return server_; }  // empty: no hello since the last open
  void used() { server_.clear(); }                          // one open per hello

 private:
  std::string client_;
  std::string server_;
};

// openPeer: the peer must name this cluster, another node id, the same --clock, and prove one of `accepted_secrets`
// (each tried in constant time whether or not an earlier one matched) over the nonces of the hello before (none: it
// fails when secrets are set). On success this node's proof is set in the results. The nonces are used either way. A
// refusal is counted (auth failure "peer") and logged at most every few seconds; its message is what the peer is told.
Result<PeerOpened> open_peer(const NodeConfig& config, const std::vector<std::string>& accepted_secrets,
                             OpenPeerCall& context, HandshakeNonces& nonces, metrics::SecurityMetrics& security_metrics,
                             int64_t& last_log_ms);

}  // namespace mayfly::node
