// RpcHost: the node's Cap'n Proto side for clients, on its own kj event-loop thread (the RPC thread). It owns the
// node's listener and serves the client API (Mayfly -> Session.execute) and the request side of the peer API
// (Peer.forward / nodeStatus), keeps one request link per peer (node/peer_link.h) to forward writes from this follower
// to the leader, and serves eventual/session/bounded reads straight from the state machine when this replica is fresh
// enough; everything else goes to the Driver. Where each request goes is decided by the Router (node/router.h), a
// pure type the simulator runs too; this class carries its decisions out with kj promises. Raft messages never pass
// through this thread: a connection that begins with the peer preamble is handed, unread, to the Raft transport
// (node/peer_transport.h), which this host starts and stops, and which delivers and receives every Raft message on a
// thread of its own.
//
// The trust boundary (docs/security.md) is here: every connection gets its own bootstrap object, which runs the
// challenge-response handshake (common/auth.h). A session carries the role of the key that opened it, re-checked
// against the keyring (node/keyring.h) on every request, so a removed key stops working at once; a peer connection is
// bound to the node id it proved. The listener caps open connections (--max-connections; the oldest unauthenticated
// one, or handshake in progress, is evicted first, so peers and established clients keep their slots), closes
// connections that do not authenticate in time, and limits the calls in flight per connection (Cap'n Proto's flow
// limit) and per key.
//
// Threads (README "Threads"): the RPC thread runs this class and never waits on the others; the driver thread
// (Boost.Asio) runs Raft and applies; the read threads (node/read_service.h) execute lists of items, queries and
// other long reads on the state machine's thread-safe readers, in each key's turn (node/read_queue.h), so a large
// query never delays a heartbeat nor another key's reads (point reads, bounded and small, are served on the RPC
// thread); the Raft thread is the transport's. RPC -> driver by boost::asio::post, RPC -> read threads through the
// ReadService, whose jobs capture it and never this class; back to the RPC thread through the Mailbox
// (node/mailbox.h), which never blocks the sender. What waits is bounded: requests waiting on the driver or the read
// threads by --max-pending-requests (beyond: 503 at once), replies queued for the RPC thread by the mailbox.
//
// Files: rpc.cc (carrying out the router's decisions: reads, waits, the driver, forwarding, shedding),
// rpc_connections.cc (start/stop, listener, the preamble check, TLS, admission, idle connections, key reloads),
// rpc_services.cc (handshake, client session, peer API), rpc_peers.cc (the driver's batches, request links);
// rpc_internal.h holds what they share.
//
// Thread-safety: start/stop from the main thread; deliver from the driver thread; execute_gateway and clients_open
// from any thread; everything else on the RPC thread (checked in debug builds: ThreadOwner, common/thread_owner.h).
#pragma once

#include <capnp/message.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/async.h>
#include <kj/timer.h>

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>

#include "common/thread_owner.h"
#include "common/tls.h"
#include "metrics/security.h"
#include "node/backup_service.h"
#include "node/config.h"
#include "node/driver.h"
#include "node/keyring.h"
#include "node/kj_thread.h"
#include "common/work_budget.h"
#include "node/mailbox.h"
#include "node/peer_link.h"
#include "node/peer_transport.h"
#include "node/read_queue.h"
#include "node/read_service.h"
#include "node/replay_cache.h"
#include "node/router.h"
#include "node/request.h"
#include "node/warn_limiter.h"
#include "proto/mayfly.capnp.h"

namespace mayfly::node {

struct ServedConnection;

// A request from the Cosmos DB REST gateway (gateway/server.h), authenticated by a master-key signature rather than
// a session handshake. The gateway builds the same api::Request a session's call decodes to (api/operation.h), so it
// runs through the same check_request → handle path (consistency, TTL, RU and 429, forwarding to the leader) and the
// same role check as Session.execute.
struct GatewayCall {
  Status authorization;        // not OK: the authorization header was missing or malformed (401 with its message)
  std::string signed_text;     // the string the signature covers (gateway/protocol.h string_to_sign)
  std::string signature;       // the raw HMAC-SHA256 bytes from the header
  bool emulator_key = false;   // signed with the Cosmos emulator's well-known key (checked by the gateway; honoured
                               // only with --emulator-key)
  bool replay_guarded = false; // each signature of this request may be used once (node/replay_cache.h)
  int64_t valid_until_seconds = 0;  // with replay_guarded: when its x-ms-date leaves the window (Unix seconds)
  std::optional<api::Request> request;  // unset: authenticate only (GET /)
};

class RpcHost final : public DriverOutput, public LinkContext {
 public:
  // `keyring` holds the client keys (open when --keys-file is not set); `cluster_secrets` is empty when
  // --cluster-secret-file is not set (peers are then not authenticated).
  RpcHost(const NodeConfig& config, Driver& driver, metrics::Metrics& metrics, RequestUnitAccount& request_units,
          Keyring keyring, ClusterSecrets cluster_secrets);
  ~RpcHost() noexcept override;

  // Starts the kj thread and binds the listener; returns once it listens (or why it could not).
  Status start();
  // Stops the loop and joins the thread. Idempotent.
  void stop();

  // DriverOutput (driver thread, read threads): Raft messages and deliveries taken to the Raft transport, replies and
  // the view to the RPC thread; never waits for either.
  void deliver(DriverBatch batch) override;

  // --- kj thread ---
  // Executes a client (or forwarded) request and records it in the request metrics.
  // `key`: the client key it came with ("" forwarded, gateway or open), whose parked-read budget it counts against.
  kj::Promise<Reply> handle(api::Request operation, bool forwarded, const std::string& key = std::string());
  std::string own_status_json() const;
  // LinkContext (the request links).
  const NodeConfig& config() const override { return config_; }
  kj::Timer& timer() override { return *timer_; }
  kj::Network& network() override { return *network_; }
  // The cluster secret this node proves with ("" when none), and every one it accepts from peers.
  std::string cluster_secret() const override { return cluster_secrets_.proving(); }
  const std::vector<std::string>& accepted_cluster_secrets() const { return cluster_secrets_.accepted(); }
  Keyring& keyring() { return keyring_; }
  // The TLS context (--tls-cert/--tls-key/--tls-ca); nullptr when the node speaks plaintext.
  tls::Context* tls() override { return tls_.get(); }
  metrics::SecurityMetrics& security_metrics() override { return security_metrics_; }
  // The connection `id` has authenticated (as a client session with `key`, "" on an open node, or a peer): it is no
  // longer evicted first nor closed by the handshake timeout. A client session is refused (the message says why, and
  // the connection is closed) when its key holds --max-connections-per-key sessions already, or when client
  // sessions would take one of the --reserved-peer-connections slots.
  std::optional<std::string> mark_authenticated(uint64_t connection_id, bool peer, const std::string& key);
  // A call of `key` ("" unknown or open) on client connection `connection_id` starts / ends (for --idle-timeout-ms
  // and the budgets per key and per connection). A call refused at its start (the Reply to answer: the key or the
  // connection has its --max-pending-per-key / --max-pending-per-connection in flight, or the connection has
  // kMaxReplyBacklogBytes of replies queued) is not counted and must not be finished.
  std::optional<Reply> call_started(uint64_t connection_id, const std::string& key);
  void call_finished(uint64_t connection_id, const std::string& key);
  // The per-key part of those: a call of `key` ("" counts nowhere) starts (refused: the Reply to answer, nothing
  // counted) / ends.
  std::optional<Reply> key_call_started(const std::string& key);
  void key_call_finished(const std::string& key);
  // Any thread: runs a gateway call on the kj thread (handed over with the kj executor, which blocks the caller only
  // while the call is queued, never while it executes) and calls `done` with the answer on the kj thread. `done`
  // must not block; it is called exactly once, also when the node is stopping (503).
  void execute_gateway(GatewayCall call, std::function<void(Reply)> done);
  // Any thread: true when the node takes clients without a key (no --keys-file; fixed at start).
  bool clients_open() const { return keyring_.open(); }
  // Reads the keys file again if it changed (every session opened and every second), logging what changed.
  void refresh_keys();
  // The same for the cluster secret file (every second; peer handshakes are checked against what it held then).
  // When its secrets changed, peer links proved with one it no longer holds are closed, incoming and outgoing.
  void refresh_cluster_secrets();
  // Incoming peer connection `connection_id` proved the cluster secret whose SHA-256 (hex) is `secret_id`.
  void set_peer_proof(uint64_t connection_id, std::string secret_id);
  // Whether the secret with this SHA-256 (hex) is one the file holds now.
  bool secret_accepted(const std::string& secret_id) const override;
  // Whether the node that link `from` proved may use the peer API's forward now: a voter or learner of this node's
  // membership, or any authenticated peer before this node knows one (a --join node), or the leader it follows
  // (node/peer_admission.h).
  bool may_forward(NodeId from) const;

 private:
  // On the RPC thread (node/kj_thread.h): the listener, TLS and the loop's tasks; then, once stopped, the orderly end.
  Status set_up(kj::AsyncIoContext& io);
  void tear_down(kj::AsyncIoContext& io);
  kj::Promise<void> accept_loop();
  // Every accepted connection: its first bytes peeked (an entry of tls_handshakes_ meanwhile). The peer preamble: the
  // descriptor goes to the Raft transport; anything else: secure() with TLS, else admit().
  void classify(kj::Own<kj::AsyncIoStream> stream);
  // With TLS: the handshake first (a failure is refused as "tls"), then admit.
  void secure(kj::Own<kj::AsyncIoStream> stream);
  void admit(kj::Own<kj::AsyncIoStream> stream);
  // Ends the entry `id` of tls_handshakes_ (its preamble check or TLS handshake is over): true the first time only.
  bool finish_handshake(uint64_t id);
  // The table (connections and TLS handshakes in progress) is full: the oldest that has not authenticated (a
  // handshake in progress or a connection) is closed to make room; false if every entry has authenticated.
  bool make_room();
  void close_connection(uint64_t id, const char* reason);
  // Closes connection `id` on the next turn of the loop (never from inside one of its own calls), or after
  // `delay_ms` (so that a refusal sent on it reaches the client first).
  void close_connection_later(uint64_t id, const char* reason, int64_t delay_ms = 0);
  // True (and the connection is being closed, `reply_backlog`) when more than kMaxReplyBacklogBytes of replies are
  // queued for it and not yet written to its socket: a client that does not read its answers.
  bool reply_backlog_exceeded(uint64_t id, ServedConnection& connection);
  void publish_connection_counts();
  void apply_batch(DriverBatch& batch);
  kj::Promise<void> drain_mailbox();
  kj::Promise<void> sweep_idle_connections();
  // Waits for the reply to request `id` (registered in pending_), or answers 503 after --request-timeout-ms.
  kj::Promise<Reply> await_reply(uint64_t id, kj::Promise<Reply> reply);
  // A read executed on a read thread, in `key`'s lane.
  kj::Promise<Reply> read_async(api::Request operation, const std::string& key);
  // A read this replica may serve now: small bounded ones here, lists of items and queries on a read thread.
  kj::Promise<Reply> serve_read_here_or_async(api::Request operation, const std::string& key);
  // 503 (kSubstatusOverloaded) when --max-pending-requests are waiting; counted under `kind`. A read is refused
  // already at three quarters of them: the last quarter is kept for writes (and forwarded writes).
  std::optional<Reply> shed_if_full(const char* kind, bool write);
  // 503 (kSubstatusOverloaded, shed kind "parked") when --max-parked-reads are parked, or half of them for `key`.
  std::optional<Reply> shed_if_parked_full(const std::string& key);
  // Parks a read of `key` until the applied index reaches `required` (Router::park): `ready` is fulfilled with true
  // then, with false at shutdown. Returns the wait's id, for unpark().
  uint64_t park(uint64_t required, const std::string& key, kj::Own<kj::PromiseFulfiller<bool>> ready);
  // Forgets the wait `id` (timed out); no-op when it was released already.
  void unpark(uint64_t id);
  // Carries out the Router's decision (node/router.h) for the request.
  kj::Promise<Reply> route(api::Request operation, bool forwarded, const std::string& key);
  kj::Promise<Reply> forward(NodeId leader, PeerLink& leader_link, const api::Request& operation);
  // Registers the request in pending_ and queues it for the driver; the queue goes over in one post at the end of
  // the event loop's turn (post_to_driver), so the requests of one socket read or one batch are one hand-off.
  kj::Promise<Reply> to_driver(api::Request operation);
  void post_to_driver();
  // A session or bounded read this replica is not fresh enough for: it waits here (not on the driver) until the
  // applied index the driver reports reaches `required`, then is served; 503 (replica behind) after
  // --session-wait-ms.
  kj::Promise<Reply> wait_for_applied(api::Request operation, uint64_t required, int64_t wait_ms,
                                      const std::string& key);
  // Resolves true once this node's applied index reaches `required`, false after `timeout` or at shutdown. Holds no
  // read thread (the wait is the router's, parked_ holds what to wake).
  kj::Promise<bool> applied_reaches(uint64_t required, kj::Duration timeout, const std::string& key);
  // readChangeFeed on a read thread; with a long-poll (waitMs), a caught-up empty page waits for the applied index to
  // pass the page's position and reads again from its continuation, until `deadline`.
  kj::Promise<Reply> read_change_feed(api::Request operation, kj::TimePoint deadline, std::string key);
  // Runs `work` on a read thread (--read-threads) when `lane` (the client key; node/read_queue.h) has its turn, and
  // answers with its Reply, within the request timeout. `write`: the work is part of a write (a defaultTtl change's
  // guard), which may use the quarter kept for writes.
  kj::Promise<Reply> on_read_thread(std::function<Reply()> work, const std::string& lane, bool write = false);
  // A defaultTtl change's dry run or guard (node/ttl_guard.h) on a read thread; then, if it may go ahead, the driver.
  kj::Promise<Reply> guard_ttl_change(api::Request operation);
  kj::Promise<Reply> cluster_status();
  // containerForecast (node/forecast.h) on a read thread, from this node's applied state; charged like a scan.
  kj::Promise<Reply> container_forecast(api::Request operation, const std::string& key);
  // Every --forecast-interval-ms: the forecast metrics of every container, recomputed on a read thread.
  kj::Promise<void> forecast_loop(int64_t delay_ms);
  // kj thread: the signature and role check of a gateway call (401/403, like a session's), then handle().
  kj::Promise<Reply> run_gateway(GatewayCall& call);
  PeerLink* link(NodeId peer);
  void close_links_of_removed_secrets();

  NodeConfig config_;
  Driver& driver_;
  std::unique_ptr<BackupService> backups_;  // online backups served by this node (node/backup_service.h)
  metrics::Metrics& metrics_;
  RequestUnitAccount& request_units_;
  const storage::StoreReader& state_;
  Keyring keyring_;
  ClusterSecrets cluster_secrets_;
  std::string keys_error_;     // kj thread: why the keys file on disk does not parse ("" while it does)
  std::string secrets_error_;  // the same for the cluster secret file
  ReplayCache gateway_replays_;  // kj thread: signatures of guarded gateway requests already used
  metrics::SecurityMetrics security_metrics_;
  KjThread loop_{"RPC"};  // the RPC thread
  Mailbox mailbox_;                       // driver and read threads -> kj thread
  ReadService reads_;                     // the read threads and the reads of the applied state
  std::unique_ptr<PeerTransport> transport_;  // the Raft thread (started before the RPC thread, stopped after)

  // RPC thread only (bound when its loop runs; checked by the methods that touch what follows).
  ThreadOwner owner_{"RpcHost"};
  kj::Timer* timer_ = nullptr;
  kj::Network* network_ = nullptr;
  kj::UnixEventPort* event_port_ = nullptr;  // for the preamble check's FdObserver
  kj::Own<kj::ConnectionReceiver> listener_;
  std::unique_ptr<tls::Context> tls_;
  // Accepted streams in their preamble check or TLS handshake, by connection id (the same ids as connections_: the
  // oldest first). They count against --max-connections with the connections and are evicted like unauthenticated
  // ones.
  struct TlsHandshake {
    kj::Promise<void> handshake = nullptr;  // destroyed: the handshake is cancelled and the stream closed
    bool finished = false;                  // done or failed; erased on the next turn of the loop
  };
  std::map<uint64_t, TlsHandshake> tls_handshakes_;
  size_t tls_handshakes_open_ = 0;  // the entries of tls_handshakes_ not finished
  uint64_t next_connection_id_ = 1;
  std::map<uint64_t, kj::Own<ServedConnection>> connections_;  // ordered by id: the oldest first
  size_t authenticated_connections_ = 0;
  size_t client_sessions_ = 0;  // authenticated client connections (peers not counted)
  // What each client key holds on this node (kj thread): sessions open, calls in flight (its parked reads are the
  // router's). An entry goes when both are 0.
  struct KeyUse {
    int64_t sessions = 0;
    int64_t calls = 0;
  };
  std::map<std::string, KeyUse> key_use_;
  void forget_key_if_unused(std::map<std::string, KeyUse>::iterator it);
  WarnLimiter refused_warnings_{1000};  // one line per sender per second
  // Where requests go, the node's view and the parked reads' bookkeeping (node/router.h).
  Router router_;
  uint64_t next_request_id_ = 1;
  std::map<uint64_t, kj::Own<kj::PromiseFulfiller<Reply>>> pending_;  // waiting on the driver or a read thread
  std::set<uint64_t> pending_writes_;  // the writes among them: at shutdown, their outcome is unknown
  std::vector<std::pair<uint64_t, api::Request>> to_post_;  // for the driver at the end of this turn (in pending_)
  ReadQueue read_queue_;               // the read threads' turns, by key
  std::set<uint64_t> read_jobs_;       // reads started on the pool whose answer has not come back
  std::map<uint64_t, kj::Own<kj::PromiseFulfiller<bool>>> parked_;  // the router's wait id -> what to wake
  bool stopping_ = false;           // shutting down: no new work for the driver or the leader
  size_t forwards_in_flight_ = 0;  // writes forwarded to the leader, not answered yet
  std::map<NodeId, std::unique_ptr<PeerLink>> links_;
  class TaskErrors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override;
  };
  TaskErrors task_errors_;
  kj::Own<kj::TaskSet> tasks_;
};

}  // namespace mayfly::node
