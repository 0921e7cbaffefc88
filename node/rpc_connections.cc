// RpcHost (node/rpc.h), its connections: starting and stopping the kj thread (and the Raft transport's), the listener
// and its accept loop, the peer preamble check (Raft links handed to node/peer_transport.h), TLS, admission under
// --max-connections (preamble checks and TLS handshakes in progress count; the oldest unauthenticated connection or
// handshake evicted first), the handshake timeout,
// idle client connections, and reloading the keys file and the cluster secret file.
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/auth.h"
#include "common/peer_preamble.h"
#include "node/rpc_internal.h"

namespace mayfly::node {
namespace {

constexpr int64_t kKeysRefreshMs = 1000;  // the keys file is looked at this often (and at every session opened)
constexpr int64_t kRefusalFlushMs = 100;   // a refused session's connection is closed this long after the refusal

}  // namespace

using namespace rpc_detail;

RpcHost::RpcHost(const NodeConfig& config, Driver& driver, metrics::Metrics& metrics,
                 RequestUnitAccount& request_units, Keyring keyring, ClusterSecrets cluster_secrets)
    : config_(config),
      driver_(driver),
      backups_(std::make_unique<BackupService>(config, driver)),
      metrics_(metrics),
      request_units_(request_units),
      state_(driver.state().reader()),
      keyring_(std::move(keyring)),
      cluster_secrets_(std::move(cluster_secrets)),
      security_metrics_(metrics),
      reads_(config_, driver.state().reader(), driver.state().change_feed(), driver.reclaim_rate(), metrics,
             security_metrics_, request_units, mailbox_),
      transport_(std::make_unique<PeerTransport>(config, driver, metrics, security_metrics_, state_,
                                                 cluster_secrets_.proving(), cluster_secrets_.accepted())),
      router_(config),
      read_queue_(static_cast<size_t>(config.read_threads)) {
  security_metrics_.set_open(keyring_.open(), cluster_secrets_.empty());
  security_metrics_.set_connections(0, 0);
}

RpcHost::~RpcHost() noexcept { stop(); }

Status RpcHost::start() {
  if (keyring_.open()) {
    spdlog::warn("OPEN TO EVERY CLIENT: no --keys-file, so anyone who reaches {} may read, write and change "
                 "membership (docs/security.md)",
                 config_.listen);
  }
  if (cluster_secrets_.empty()) {
    spdlog::warn("OPEN TO EVERY PEER: no --cluster-secret-file, so any process that reaches {} and knows the cluster "
                 "name may act as a member (docs/security.md)",
                 config_.listen);
  }
  // Each connection takes a descriptor: let --max-connections be reached before the process's file limit is.
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  // The Raft thread first: the listener hands it Raft links from its first connection on.
  if (Status transport = transport_->start(); !transport.is_ok()) return transport;
  Status status = loop_.start([this](kj::AsyncIoContext& io) { return set_up(io); },
                              [this](kj::AsyncIoContext& io) { tear_down(io); });
  if (!status.is_ok()) transport_->stop();
  return status;
}

Status RpcHost::set_up(kj::AsyncIoContext& io) {
  owner_.bind();
  kj::WaitScope& wait_scope = io.waitScope;
  timer_ = &io.provider->getTimer();
  network_ = &io.provider->getNetwork();
  event_port_ = &io.unixEventPort;
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] {
    listener_ = network_->parseAddress(config_.listen).wait(wait_scope)->listen();
  })) {
    return Status::unavailable("cannot listen on " + config_.listen + ": " + exception->getDescription().cStr());
  }
  Result<std::unique_ptr<tls::Context>> loaded = node_tls(config_, *timer_);
  if (!loaded.is_ok()) {
    listener_ = nullptr;  // nothing of the loop's outlives a failed set-up
    return loaded.status();
  }
  tls_ = std::move(loaded).value();
  tasks_ = kj::heap<kj::TaskSet>(task_errors_);
  tasks_->add(accept_loop());
  tasks_->add(drain_mailbox());
  if (config_.idle_timeout_ms > 0) tasks_->add(sweep_idle_connections());
  // The first forecast soon after start (its series are 0 until then), then every --forecast-interval-ms.
  if (config_.forecast_interval_ms > 0) {
    tasks_->add(forecast_loop(std::min<int64_t>(1000, config_.forecast_interval_ms)));
  }
  tasks_->add([this]() -> kj::Promise<void> {
    // The keys file and the cluster secret file are looked at every kKeysRefreshMs, so a rotation reaches open
    // sessions (and the next peer handshakes) without a restart.
    struct Refresher {
      static kj::Promise<void> loop(RpcHost& host) {
        return host.timer().afterDelay(kKeysRefreshMs * kj::MILLISECONDS).then([&host] {
          host.refresh_keys();
          host.refresh_cluster_secrets();
          return loop(host);
        });
      }
    };
    return Refresher::loop(*this);
  }());
  spdlog::info("node {} listening on {}{}", config_.id.value(), config_.listen, tls_ != nullptr ? " (TLS)" : "");
  return Status::ok();
}

void RpcHost::tear_down(kj::AsyncIoContext& io) {
  kj::WaitScope& wait_scope = io.waitScope;
  for (DriverBatch& batch : mailbox_.take()) apply_batch(batch);  // the driver's last answers (it has stopped)
  // Leaving the loop. New writes now get 503 at once. Writes already forwarded are in the leader's hands: wait
  // (bounded) for their answers, so their clients learn the outcome instead of seeing the connection cut. Then answer
  // what is still pending, give the loop a moment to write those answers out, and drop links and tasks here.
  stopping_ = true;
  for (int waited_ms = 0; forwards_in_flight_ > 0 && waited_ms < kShutdownForwardWaitMs; waited_ms += 10) {
    timer_->afterDelay(10 * kj::MILLISECONDS).wait(wait_scope);
  }
  if (forwards_in_flight_ > 0) {
    spdlog::warn("stopping with {} forwarded writes unanswered by the leader", forwards_in_flight_);
  }
  for (DriverBatch& batch : mailbox_.take()) apply_batch(batch);
  for (auto& [id, fulfiller] : pending_) {
    Reply reply = router_.shutting_down();
    if (pending_writes_.count(id) != 0) {
      // It may have been proposed: retrying it is safe only for a client whose writes carry ids (exactly-once).
      reply.result.message = "the node is shutting down; the write's outcome is unknown (it may still apply)";
      reply.result.substatus = kSubstatusOutcomeUnknown;
    }
    fulfiller->fulfill(kj::mv(reply));
  }
  pending_.clear();
  pending_writes_.clear();
  for (auto& [id, ready] : parked_) ready->fulfill(false);
  parked_.clear();
  router_.clear_parked();
  key_use_.clear();
  timer_->afterDelay(kShutdownFlushMs * kj::MILLISECONDS).wait(wait_scope);
  tasks_ = nullptr;
  links_.clear();
  tls_handshakes_.clear();
  tls_handshakes_open_ = 0;
  connections_.clear();
  listener_ = nullptr;
  tls_ = nullptr;
}

kj::Promise<void> RpcHost::accept_loop() {
  return listener_->accept()
      .then(
          [this](kj::Own<kj::AsyncIoStream> stream) -> kj::Promise<void> {
            classify(kj::mv(stream));
            return kj::READY_NOW;
          },
          [this](kj::Exception&& exception) -> kj::Promise<void> {
            // Out of descriptors (EMFILE) or memory: the node keeps serving what it has and tries again shortly.
            static int64_t last_log_ms = 0;
            security_metrics_.add_connection_refused("accept_error");
            if (log_now(last_log_ms)) {
              spdlog::warn("cannot accept connections: {}", exception.getDescription().cStr());
            }
            return timer_->afterDelay(50 * kj::MILLISECONDS);
          })
      .then([this] { return accept_loop(); });
}

namespace {

// Resolves true once the first bytes on `fd` are kPeerPreamble, false as soon as they cannot be (other bytes, end of
// stream, an error). Peeks: nothing is consumed. `observer` watches `fd` (edge-triggered: every new segment wakes it).
kj::Promise<bool> starts_with_preamble(int fd, kj::UnixEventPort::FdObserver& observer) {
  char first[kPeerPreamble.size()];
  const ssize_t got = ::recv(fd, first, sizeof first, MSG_PEEK | MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return observer.whenBecomesReadable().then([fd, &observer] { return starts_with_preamble(fd, observer); });
  }
  if (got <= 0) return false;
  if (std::memcmp(first, kPeerPreamble.data(), static_cast<size_t>(got)) != 0) return false;
  if (static_cast<size_t>(got) == kPeerPreamble.size()) return true;
  return observer.whenBecomesReadable().then([fd, &observer] { return starts_with_preamble(fd, observer); });
}

}  // namespace

void RpcHost::classify(kj::Own<kj::AsyncIoStream> stream) {
  owner_.check();
  static int64_t last_log_ms = 0;
  if (stopping_) return;
  if (connections_.size() + tls_handshakes_open_ >= static_cast<size_t>(config_.max_connections) && !make_room()) {
    security_metrics_.add_connection_refused("limit");
    return;  // `stream` goes out of scope: closed
  }
  // The check watches a duplicate of the descriptor (the stream's own is registered with the loop already). A Raft
  // link's duplicate goes to the Raft transport and the stream is dropped here; a client's is closed.
  int duplicate = -1;
  const kj::Maybe<int> own_fd = stream->getFd();
  KJ_IF_MAYBE(fd, own_fd) { duplicate = ::fcntl(*fd, F_DUPFD_CLOEXEC, 0); }
  if (duplicate < 0) {
    security_metrics_.add_connection_refused("accept_error");
    if (log_now(last_log_ms)) spdlog::warn("cannot check a new connection: {}", std::strerror(errno));
    return;
  }
  const uint64_t id = next_connection_id_++;
  auto finished = [this, id] { return finish_handshake(id); };
  struct Check {
    kj::AutoCloseFd fd;
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<kj::UnixEventPort::FdObserver> observer;
  };
  auto check = kj::heap<Check>();
  check->fd = kj::AutoCloseFd(duplicate);
  check->stream = kj::mv(stream);
  check->observer =
      kj::heap<kj::UnixEventPort::FdObserver>(*event_port_, duplicate, kj::UnixEventPort::FdObserver::OBSERVE_READ);
  Check& checked = *check;
  kj::Promise<void> classified =
      starts_with_preamble(duplicate, *checked.observer)
          .then(
              [this, finished, check = kj::mv(check)](bool peer) mutable {
                if (!finished()) return;
                check->observer = nullptr;  // off this loop before the descriptor moves
                if (peer) {
                  tasks_->add(transport_->adopt(kj::mv(check->fd)));
                  return;  // check->stream is dropped: its descriptor closes, the duplicate lives on
                }
                check->fd = nullptr;
                if (tls_ != nullptr) {
                  secure(kj::mv(check->stream));
                } else {
                  admit(kj::mv(check->stream));
                }
              },
              [this, finished](kj::Exception&& exception) {
                if (!finished()) return;
                security_metrics_.add_connection_refused("accept_error");
                if (log_now(last_log_ms)) {
                  spdlog::warn("cannot check a new connection: {}", exception.getDescription().cStr());
                }
              })
          .exclusiveJoin(timer_->afterDelay(config_.handshake_timeout_ms * kj::MILLISECONDS).then([this, finished] {
            if (finished()) security_metrics_.add_connection_refused("handshake_timeout");
          }))
          .eagerlyEvaluate(nullptr);
  ++tls_handshakes_open_;
  tls_handshakes_.emplace(id, TlsHandshake{kj::mv(classified), false});
}

void RpcHost::secure(kj::Own<kj::AsyncIoStream> stream) {
  static int64_t last_log_ms = 0;
  if (stopping_) return;
  // Handshakes in progress share the --max-connections table with the connections: when it is full the oldest entry
  // that has not authenticated (a handshake or a connection) is closed, so silent sockets cannot hold the table. A
  // handshake not done within --handshake-timeout-ms fails (TlsContext's acceptTimeout) and is refused as "tls".
  if (connections_.size() + tls_handshakes_open_ >= static_cast<size_t>(config_.max_connections) && !make_room()) {
    security_metrics_.add_connection_refused("limit");
    return;  // `stream` goes out of scope: closed
  }
  const uint64_t id = next_connection_id_++;
  auto finished = [this, id] { return finish_handshake(id); };
  kj::Promise<void> handshake =
      tls_->wrap_server(kj::mv(stream))
          .then(
              [this, finished](kj::Own<kj::AsyncIoStream> secured) {
                if (finished()) admit(kj::mv(secured));
              },
              [this, finished](kj::Exception&& exception) {
                // Plaintext, no TLS version or cipher in common, or no handshake within the timeout: closed.
                // (A client that refuses our certificate does so after the handshake: it just disconnects.)
                if (!finished()) return;
                security_metrics_.add_connection_refused("tls");
                if (log_now(last_log_ms)) {
                  spdlog::warn("refused a connection: TLS handshake failed: {}", exception.getDescription().cStr());
                }
              })
          .eagerlyEvaluate(nullptr);
  ++tls_handshakes_open_;
  tls_handshakes_.emplace(id, TlsHandshake{kj::mv(handshake), false});
}

bool RpcHost::finish_handshake(uint64_t id) {
  auto it = tls_handshakes_.find(id);
  if (it == tls_handshakes_.end() || it->second.finished) return false;
  it->second.finished = true;
  --tls_handshakes_open_;
  // Not from inside the handshake's own promise: on the next turn of the loop.
  tasks_->add(kj::evalLater([this, id] { tls_handshakes_.erase(id); }));
  return true;
}

bool RpcHost::make_room() {
  std::optional<uint64_t> connection;
  for (const auto& [id, entry] : connections_) {
    if (!entry->authenticated) {
      connection = id;
      break;
    }
  }
  std::optional<uint64_t> handshake;
  for (const auto& [id, entry] : tls_handshakes_) {
    if (!entry.finished) {
      handshake = id;
      break;
    }
  }
  if (handshake && (!connection || *handshake < *connection)) {
    --tls_handshakes_open_;
    tls_handshakes_.erase(*handshake);  // cancels the handshake and closes its stream
    security_metrics_.add_connection_refused("evicted");
    return true;
  }
  if (connection) {
    close_connection(*connection, "evicted");
    return true;
  }
  return false;
}

void RpcHost::admit(kj::Own<kj::AsyncIoStream> stream) {
  static int64_t last_log_ms = 0;
  if (stopping_) return;
  if (connections_.size() + tls_handshakes_open_ >= static_cast<size_t>(config_.max_connections) && !make_room()) {
    // Full: the oldest entry that has not authenticated made room; peers and established sessions stay.
    security_metrics_.add_connection_refused("limit");
    if (log_now(last_log_ms)) {
      spdlog::warn("refusing connections: {} are open and authenticated (--max-connections)", connections_.size());
    }
    return;  // `stream` goes out of scope: closed
  }
  const uint64_t id = next_connection_id_++;
  auto connection = kj::heap<ServedConnection>(kj::mv(stream), make_bootstrap(*this, id));
  connection->watcher = connection->network.onDisconnect()
                            .then([this, id] {
                              // Not from inside the connection's own promise: on the next turn of the loop.
                              tasks_->add(kj::evalLater([this, id] { close_connection(id, nullptr); }));
                            })
                            .eagerlyEvaluate(nullptr);
  connections_.emplace(id, kj::mv(connection));
  tasks_->add(timer_->afterDelay(config_.handshake_timeout_ms * kj::MILLISECONDS).then([this, id] {
    auto it = connections_.find(id);
    if (it != connections_.end() && !it->second->authenticated) close_connection(id, "handshake_timeout");
  }));
  publish_connection_counts();
}

void RpcHost::close_connection(uint64_t id, const char* reason) {
  owner_.check();
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (it->second->authenticated) {
    --authenticated_connections_;
    if (!it->second->peer) {
      --client_sessions_;
      auto use = key_use_.find(it->second->key);
      if (use != key_use_.end()) {
        --use->second.sessions;
        forget_key_if_unused(use);
      }
    }
  }
  kj::Own<ServedConnection> closing = kj::mv(it->second);
  connections_.erase(it);
  if (reason != nullptr) security_metrics_.add_connection_refused(reason);
  publish_connection_counts();
  closing = nullptr;
}

std::optional<std::string> RpcHost::mark_authenticated(uint64_t connection_id, bool peer, const std::string& key) {
  owner_.check();
  static int64_t last_log_ms = 0;
  auto it = connections_.find(connection_id);
  if (it == connections_.end() || it->second->authenticated) return std::nullopt;
  if (it->second->closing) return std::string("this connection is being closed");
  if (!peer) {
    // Client sessions never take the slots kept for peers, and one key never takes more than its share: a restarted
    // member can always reconnect, and another key can always open a session.
    const char* reason = nullptr;
    std::string message;
    const auto client_slots = static_cast<size_t>(config_.max_connections - config_.peer_reserve());
    auto use = key_use_.find(key);
    if (!key.empty() && use != key_use_.end() && use->second.sessions >= config_.max_connections_per_key) {
      reason = "key_limit";
      message = "this key has " + std::to_string(use->second.sessions) + " sessions open on node " +
                std::to_string(config_.id.value()) + " (--max-connections-per-key " +
                std::to_string(config_.max_connections_per_key) + "); close one or use another node";
    } else if (client_sessions_ >= client_slots) {
      reason = "client_limit";
      message = "node " + std::to_string(config_.id.value()) + " has " + std::to_string(client_sessions_) +
                " client sessions open, all it admits (--max-connections less --reserved-peer-connections); retry "
                "later or on another node";
    }
    if (reason != nullptr) {
      if (log_now(last_log_ms)) spdlog::warn("refused a client session: {}", message);
      // Counted now (the client may hang up first); the refusal goes back on the connection, then it is closed.
      security_metrics_.add_connection_refused(reason);
      close_connection_later(connection_id, nullptr, kRefusalFlushMs);
      return message;
    }
    ++client_sessions_;
    ++key_use_[key].sessions;
    it->second->key = key;
  }
  it->second->authenticated = true;
  it->second->peer = peer;
  it->second->last_active_ms = steady_ms();
  ++authenticated_connections_;
  publish_connection_counts();
  return std::nullopt;
}

void RpcHost::close_connection_later(uint64_t id, const char* reason, int64_t delay_ms) {
  auto it = connections_.find(id);
  if (it == connections_.end() || it->second->closing) return;
  it->second->closing = true;
  if (delay_ms == 0) {
    tasks_->add(kj::evalLater([this, id, reason] { close_connection(id, reason); }));
  } else {
    tasks_->add(timer_->afterDelay(delay_ms * kj::MILLISECONDS).then([this, id, reason] {
      close_connection(id, reason);
    }));
  }
}

bool RpcHost::reply_backlog_exceeded(uint64_t id, ServedConnection& connection) {
  static int64_t last_log_ms = 0;
  const size_t queued = connection.network.getCurrentQueueSize();
  if (queued <= kMaxReplyBacklogBytes) return false;
  if (log_now(last_log_ms)) {
    spdlog::warn("closing a client connection that does not read its replies: {} bytes of them are queued (at most "
                 "{})",
                 queued, kMaxReplyBacklogBytes);
  }
  close_connection_later(id, "reply_backlog");
  return true;
}

std::optional<Reply> RpcHost::call_started(uint64_t connection_id, const std::string& key) {
  owner_.check();
  auto it = connections_.find(connection_id);
  if (it == connections_.end()) return router_.shutting_down();
  ServedConnection& connection = *it->second;
  if (connection.closing) return router_.overloaded("this connection is being closed; open a new one");
  if (reply_backlog_exceeded(connection_id, connection)) {
    return router_.overloaded(
        "this connection has too many replies queued that it does not read; it is being closed");
  }
  if (connection.calls >= config_.max_pending_per_connection) {
    security_metrics_.add_shed("connection");
    return router_.overloaded("this connection has " + std::to_string(connection.calls) +
                              " requests in flight on node " + std::to_string(config_.id.value()) +
                              " (--max-pending-per-connection); nothing was done: wait for some answers first");
  }
  if (std::optional<Reply> refused = key_call_started(key)) return refused;
  ++connection.calls;
  connection.last_active_ms = steady_ms();
  return std::nullopt;
}

std::optional<Reply> RpcHost::key_call_started(const std::string& key) {
  owner_.check();
  // Only keys the node knows (on an open node every client is "", and the node-wide limits apply).
  if (key.empty()) return std::nullopt;
  KeyUse& use = key_use_[key];
  if (use.calls >= config_.max_pending_per_key) {
    security_metrics_.add_shed("key");
    return router_.overloaded("this key has " + std::to_string(use.calls) + " requests in flight on node " +
                              std::to_string(config_.id.value()) +
                              " (--max-pending-per-key); nothing was done: retry shortly");
  }
  ++use.calls;
  return std::nullopt;
}

void RpcHost::key_call_finished(const std::string& key) {
  auto use = key.empty() ? key_use_.end() : key_use_.find(key);
  if (use == key_use_.end()) return;
  --use->second.calls;
  forget_key_if_unused(use);
}

void RpcHost::call_finished(uint64_t connection_id, const std::string& key) {
  key_call_finished(key);
  auto it = connections_.find(connection_id);
  if (it == connections_.end()) return;
  --it->second->calls;
  it->second->last_active_ms = steady_ms();
  if (!it->second->closing) reply_backlog_exceeded(connection_id, *it->second);
}

kj::Promise<void> RpcHost::sweep_idle_connections() {
  const int64_t every_ms = std::clamp<int64_t>(config_.idle_timeout_ms / 4, 25, 1000);
  return timer_->afterDelay(every_ms * kj::MILLISECONDS).then([this] {
    // A client connection that has authenticated and made no call for --idle-timeout-ms is closed; a client library
    // reconnects on its next call (its writes re-open the session first after a quiet spell, so none is lost to it).
    // Peers are never closed here: a quiet link between two followers carries the next election's votes.
    const int64_t now = steady_ms();
    std::vector<uint64_t> idle;
    for (const auto& [id, connection] : connections_) {
      if (connection->authenticated && !connection->peer && connection->calls == 0 &&
          now - connection->last_active_ms >= config_.idle_timeout_ms) {
        idle.push_back(id);
      }
    }
    for (uint64_t id : idle) close_connection(id, "idle");
    return sweep_idle_connections();
  });
}

void RpcHost::publish_connection_counts() {
  security_metrics_.set_connections(static_cast<int64_t>(authenticated_connections_),
                                    static_cast<int64_t>(connections_.size() - authenticated_connections_));
}

void RpcHost::refresh_cluster_secrets() {
  owner_.check();
  static int64_t last_log_ms = 0;
  const uint64_t before = cluster_secrets_.generation();
  if (Status reloaded = cluster_secrets_.reload_if_changed(); !reloaded.is_ok()) {
    // The previous secrets stay (a half-written file must not cut every peer link); loud until the file parses.
    if (reloaded.message() != secrets_error_) {
      secrets_error_ = reloaded.message();
      security_metrics_.add_reload_failure("cluster_secret");
      security_metrics_.set_file_stale("cluster_secret", true);
      last_log_ms = steady_ms();
      spdlog::error("the cluster secret file no longer parses; KEEPING THE PREVIOUS SECRETS until it does: {}",
                    secrets_error_);
    } else if (log_now(last_log_ms)) {
      spdlog::error("still keeping the previous cluster secrets: {}", secrets_error_);
    }
    return;
  }
  if (!secrets_error_.empty()) {
    secrets_error_.clear();
    security_metrics_.set_file_stale("cluster_secret", false);
  }
  if (cluster_secrets_.generation() != before) {
    spdlog::info("cluster secret file {} reloaded: {} secret(s) accepted, proving with the first",
                 config_.cluster_secret_file, cluster_secrets_.accepted().size());
    close_links_of_removed_secrets();
    tasks_->add(transport_->update_secrets(cluster_secrets_.proving(), cluster_secrets_.accepted()));
  }
}

bool RpcHost::secret_accepted(const std::string& secret_id) const {
  for (const std::string& secret : cluster_secrets_.accepted()) {
    if (auth::sha256_hex(secret) == secret_id) return true;
  }
  return false;
}

void RpcHost::set_peer_proof(uint64_t connection_id, std::string secret_id) {
  auto it = connections_.find(connection_id);
  if (it != connections_.end()) it->second->peer_secret_id = std::move(secret_id);
}

void RpcHost::close_links_of_removed_secrets() {
  // Incoming peer connections proved with a secret the file no longer holds: closed (the peer reconnects, proving
  // what its own file says now; a process that only had the old secret cannot); outgoing request links: dropped.
  static const std::string kNone;
  node::close_links_of_removed_secrets(
      *this, "peer", connections_, links_,
      [](const ServedConnection& connection) -> const std::string& {
        return connection.peer ? connection.peer_secret_id : kNone;
      },
      [this](uint64_t id) { close_connection(id, "secret_removed"); });
}

void RpcHost::refresh_keys() {
  owner_.check();
  static int64_t last_log_ms = 0;
  if (keyring_.open()) return;
  const uint64_t before = keyring_.generation();
  Status reloaded = keyring_.reload_if_changed();
  if (!reloaded.is_ok()) {
    // The previous keys stay: a file caught half-written, or with one bad line, must not lock every client (and the
    // operator) out. But a removal that did not take effect must not go unnoticed: an error line at once (and every
    // kQuietLogMs while it lasts), mayfly_secret_file_reload_failures_total and mayfly_secret_file_stale. The
    // messages never hold a key (node/keyring.h parse_keys).
    if (reloaded.message() != keys_error_) {
      keys_error_ = reloaded.message();
      security_metrics_.add_reload_failure("keys");
      security_metrics_.set_file_stale("keys", true);
      last_log_ms = steady_ms();
      spdlog::error("the keys file no longer parses; KEEPING THE PREVIOUS KEYS (a key removed from it still "
                    "works) until it does: {}",
                    keys_error_);
    } else if (log_now(last_log_ms)) {
      spdlog::error("still keeping the previous keys (a key removed from the file still works): {}", keys_error_);
    }
    return;
  }
  if (!keys_error_.empty()) {
    keys_error_.clear();
    security_metrics_.set_file_stale("keys", false);
  }
  if (keyring_.generation() != before) {
    spdlog::info("keys file {} reloaded: {} keys", config_.keys_file, keyring_.size());
  }
}

void RpcHost::stop() {
  if (!loop_.running()) return;
  reads_.interrupt();  // a read running on a read thread stops within a millisecond (common/work_budget.h)
  loop_.stop();
  mailbox_.close();
  transport_->stop();  // after the RPC thread: the driver has stopped, and no connection is handed over any more
  reads_.stop();  // reads not started are dropped (their callers got 503 above); running ones stop at once
  backups_->stop();  // exports hold views of the store: joined before it closes
}

void RpcHost::TaskErrors::taskFailed(kj::Exception&& exception) {
  spdlog::warn("rpc task failed: {}", exception.getDescription().cStr());
}

}  // namespace mayfly::node
