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

#include "api/operation.h"
#include "node/peer_link.h"
#include "node/rpc.h"
#include "node/rpc_common.h"

namespace mayfly::node {

// One accepted connection: its stream, network and RPC system (members are destroyed in reverse order: the RPC
// system before the network before the stream), and what the handshake established.
struct ServedConnection {
  ServedConnection(kj::Own<kj::AsyncIoStream> accepted, capnp::Capability::Client bootstrap)
      : stream(kj::mv(accepted)),
        messages(*stream),
        network(messages, capnp::rpc::twoparty::Side::SERVER, rpc_detail::reader_options()),
        rpc(capnp::makeRpcServer(network, kj::mv(bootstrap))) {
    rpc.setFlowLimit(rpc_detail::kFlowLimitWords);
  }

  kj::Own<kj::AsyncIoStream> stream;
  BufferedMessageStream messages;  // the messages on `stream`, read and written in bulk (common/message_stream.h)
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

// The least role an operation needs (node/keyring.h): the same for a session and a gateway call (rpc_services.cc).
// One this build does not know (nullopt) needs readwrite; its decode refuses it.
Role required_role(std::optional<api::Kind> kind);

// The bootstrap object of connection `connection`: the handshake (hello, then openSession or openPeer;
// rpc_services.cc).
capnp::Capability::Client make_bootstrap(RpcHost& host, uint64_t connection);

}  // namespace mayfly::node
