// PeerTransport: every Raft message this node sends or receives, on a kj event-loop thread of its own (the Raft
// thread). Nothing a client or a stranger does on the node's listener — connections, TLS handshakes, sessions, point
// reads, forwarded writes — runs on this thread, so none of it can delay a heartbeat or an append (README "Threads").
//
// One listener serves clients and peers. A node dialing a peer for Raft begins the connection with kPeerPreamble
// (common/peer_preamble.h); the RPC host's accept loop (node/rpc.h) peeks at the first bytes of every connection and
// hands the descriptor of one that begins so to adopt(), before any TLS or Cap'n Proto byte of it is read. Here it
// runs the preamble, TLS (the node's certificate; the peer's checked against --tls-ca on the dialing side) and the
// peer handshake (node/peer_handshake.h), then serves Peer.deliver only. Outgoing, one Raft link per peer
// (node/peer_link.h) delivers the driver's messages in order and in batches.
//
// Admission, so a stranger who sends the preamble costs this thread little: at most kMaxPeerHandshakes connections
// that have not proved the cluster secret at once (the oldest closed first to make room for a new one), each closed if
// it has not within --handshake-timeout-ms; kMaxConnectionsPerPeer per proved node id (the oldest replaced) and
// kMaxPeerConnections in all; every message
// must come from the id its link proved and from a member (node/peer_admission.h); links proved with a cluster secret
// that is removed from the file are closed. A peer's deliveries wait for the driver beyond kMaxQueuedDeliveriesPerPeer
// (backpressure), and Raft messages past the mailbox's and a link's byte bounds are dropped (Raft resends).
//
// Thread-safety: start() and stop() from the main thread; adopt() and update_secrets() from the RPC thread (each
// returns a promise of that thread, to keep until it resolves); deliver() from the driver thread; the rest of the
// class (LinkContext, receive, authenticate) on the Raft thread only.
#pragma once

#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/thread_owner.h"
#include "common/tls.h"
#include "metrics/security.h"
#include "node/config.h"
#include "node/driver.h"
#include "node/mailbox.h"
#include "node/kj_thread.h"
#include "node/peer_link.h"
#include "node/warn_limiter.h"
#include "storage/store_reader.h"

namespace mayfly::node {

struct RaftConnection;

class PeerTransport final : public LinkContext {
 public:
  // Connections on the Raft thread that have not proved the cluster secret (preamble, TLS or handshake in progress).
  static constexpr size_t kMaxPeerHandshakes = 16;
  // Authenticated connections of one node id (a node holds one Raft link to this one; more are reconnects whose old
  // connection has not been seen to close yet): past it the oldest of that id is closed.
  static constexpr size_t kMaxConnectionsPerPeer = 4;
  // Authenticated connections in all (ids are only as honest as the holders of the cluster secret): past it a new one
  // is refused.
  static constexpr size_t kMaxPeerConnections = 256;

  // `proving`/`accepted`: the cluster secrets as the RPC host read them (empty: peers are not authenticated).
  PeerTransport(const NodeConfig& config, Driver& driver, metrics::Metrics& metrics,
                metrics::SecurityMetrics& security_metrics, const storage::StoreReader& state, std::string proving,
                std::vector<std::string> accepted);
  ~PeerTransport() noexcept override;

  // Starts the Raft thread; returns once its loop runs (or why it could not: the TLS files).
  Status start();
  // Stops the loop and joins the thread; idempotent. Deliveries waiting for the driver are released.
  void stop();

  // RPC thread: a connection accepted on the node's listener whose first bytes are kPeerPreamble (still unread).
  // Owns `fd` from now on (closed if the Raft thread is gone).
  kj::Promise<void> adopt(kj::AutoCloseFd fd);
  // RPC thread: the cluster secret file changed. Links and connections proved with a secret no longer accepted are
  // closed; the next handshakes prove `proving`.
  kj::Promise<void> update_secrets(std::string proving, std::vector<std::string> accepted);
  // Driver thread: Raft messages to send, the deliveries the driver took, the node's view (replies are not read).
  // Never waits for the Raft thread. Returns how many messages were dropped by the mailbox's bound.
  uint64_t deliver(DriverBatch batch);

  // --- Raft thread ---
  // LinkContext.
  const NodeConfig& config() const override { return config_; }
  kj::Timer& timer() override { return *timer_; }
  kj::Network& network() override { return *network_; }
  tls::Context* tls() override { return tls_.get(); }
  std::string cluster_secret() const override { return proving_; }
  bool secret_accepted(const std::string& secret_id) const override;
  metrics::SecurityMetrics& security_metrics() override { return security_metrics_; }
  const std::vector<std::string>& accepted_secrets() const { return accepted_; }
  // Connection `connection` proved it is node `from` (with the secret `secret_id`): it is no longer evicted nor
  // timed out, and the oldest connection of the same node is closed past kMaxConnectionsPerPeer. False (the connection
  // is being closed) when kMaxPeerConnections are authenticated already.
  bool authenticate(uint64_t connection, NodeId from, const std::string& secret_id);
  // Raft messages from `from` (authenticated): checked, then handed to the driver. Resolves at once, or — past
  // kMaxQueuedDeliveriesPerPeer of this peer's deliveries waiting — once the driver has taken this one.
  kj::Promise<void> receive(NodeId from, capnp::List<capnp::Data>::Reader messages);

 private:
  // On the Raft thread (node/kj_thread.h): TLS and the mailbox's drain; then, once stopped, the orderly end.
  Status set_up(kj::AsyncIoContext& io);
  void tear_down();
  kj::Promise<void> drain_mailbox();
  void apply(DriverBatch& batch);
  PeerLink* link(NodeId peer);
  // The preamble, TLS, then the Cap'n Proto connection; an entry of handshakes_ until then.
  void accept(kj::AutoCloseFd fd);
  void serve(uint64_t id, kj::Own<kj::AsyncIoStream> stream);
  // Closes the oldest connection that has not authenticated (a handshake or a served connection); false if none.
  bool make_room();
  void close_connection(uint64_t id, const char* reason);
  void close_removed_secrets();
  size_t unauthenticated() const;

  const NodeConfig config_;
  Driver& driver_;
  metrics::Metrics& metrics_;
  metrics::SecurityMetrics& security_metrics_;
  const storage::StoreReader& state_;
  Mailbox mailbox_;                       // driver -> Raft thread

  // Raft thread only (bound when its loop runs; checked by the methods that touch what follows).
  ThreadOwner owner_{"PeerTransport"};
  std::string proving_;
  std::vector<std::string> accepted_;
  std::vector<std::string> accepted_ids_;  // SHA-256 (hex) of each accepted secret
  kj::Timer* timer_ = nullptr;
  kj::Network* network_ = nullptr;
  kj::LowLevelAsyncIoProvider* low_level_ = nullptr;
  std::unique_ptr<tls::Context> tls_;
  bool stopping_ = false;
  NodeView view_;
  uint64_t next_connection_id_ = 1;
  // Preamble and TLS in progress, by connection id (the oldest first); a finished one is erased on the next turn.
  struct Handshake {
    kj::Promise<void> promise = nullptr;  // destroyed: the handshake is cancelled and its stream closed
    bool finished = false;
  };
  std::map<uint64_t, Handshake> handshakes_;
  std::map<uint64_t, kj::Own<RaftConnection>> connections_;  // served, by id (oldest first)
  std::map<NodeId, std::vector<uint64_t>> connections_of_;   // authenticated: node id -> its connections, oldest first
  size_t authenticated_ = 0;
  std::map<NodeId, std::unique_ptr<PeerLink>> links_;        // outgoing Raft links
  uint64_t next_delivery_id_ = 1;
  // Peer deliveries the driver has not taken: who sent each, and (past the first few of a peer) the call waiting.
  struct QueuedDelivery {
    NodeId from;
    kj::Own<kj::PromiseFulfiller<void>> waiting;  // null: the call already returned
  };
  std::map<uint64_t, QueuedDelivery> deliveries_;
  std::map<NodeId, size_t> queued_deliveries_;  // per sender
  WarnLimiter refused_warnings_{1000};          // one line per sender per second
  int64_t last_handshake_log_ms_ = 0;           // the last failed handshake logged
  class TaskErrors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override;
  };
  TaskErrors task_errors_;
  kj::Own<kj::TaskSet> tasks_;  // last of the Raft thread's: destroyed first
  KjThread loop_{"Raft transport"};  // the Raft thread; last: stopped (joined) before any member above goes
};

}  // namespace mayfly::node
