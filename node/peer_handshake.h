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

namespace mayfly::node {

// What a successful openPeer established.
struct PeerOpened {
  NodeId from;                // the id the peer proved
  std::string secret_id;      // SHA-256 (hex) of the cluster secret it proved ("" on a node without one)
  std::string server_proof;   // this node's answer, proving the same secret ("" on a node without one)
};

// hello: the client nonce must be 16 to 64 bytes. nullptr when it is; otherwise why not.
const char* hello_nonce_refusal(size_t nonce_bytes);

// openPeer: the peer must name this cluster, another node id, the same --clock, and prove one of `accepted_secrets`
// (each tried in constant time whether or not an earlier one matched) over the nonces of the hello before
// (`server_nonce` empty: no hello, which fails when secrets are set). A refusal is counted (auth failure "peer") and
// logged at most every few seconds; its message is what the peer is told.
Result<PeerOpened> check_open_peer(const NodeConfig& config, const std::vector<std::string>& accepted_secrets,
                                   proto::Mayfly::OpenPeerParams::Reader params, const std::string& client_nonce,
                                   const std::string& server_nonce, metrics::SecurityMetrics& security_metrics,
                                   int64_t& last_log_ms);

}  // namespace mayfly::node
