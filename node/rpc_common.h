// What the Cap'n Proto side of a node shares between its two event-loop threads, the RPC host's (node/rpc.h) and the
// Raft transport's (node/peer_transport.h): message limits, the outgoing connection type, small helpers. Nothing here
// holds state; each thread makes its own objects.
#pragma once

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <capnp/rpc.h>
#include <kj/async-io.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "common/message_stream.h"
#include "proto/mayfly.capnp.h"

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
        messages(*stream),
        network(messages, capnp::rpc::twoparty::Side::CLIENT, reader_options()),
        rpc(capnp::makeRpcClient(network)) {
    capnp::MallocMessageBuilder message(8);
    auto vat = message.initRoot<capnp::rpc::twoparty::VatId>();
    vat.setSide(capnp::rpc::twoparty::Side::SERVER);
    bootstrap = rpc.bootstrap(vat).castAs<proto::Mayfly>();
  }

  kj::Own<kj::AsyncIoStream> stream;
  BufferedMessageStream messages;  // the messages on `stream`, read and written in bulk (common/message_stream.h)
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  proto::Mayfly::Client bootstrap = nullptr;  // last: released first
};

}  // namespace rpc_detail

}  // namespace mayfly::node
