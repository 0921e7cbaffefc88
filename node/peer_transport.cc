// PeerTransport (node/peer_transport.h): the Raft thread, its connections (preamble, TLS, handshake, eviction), the
// Raft links out, and deliveries in.
#include "node/peer_transport.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "common/auth.h"
#include "common/peer_preamble.h"
#include "node/peer_admission.h"
#include "node/peer_handshake.h"
#include "node/rpc_common.h"
#include "replication/codec.h"

namespace mayfly::node {

using namespace rpc_detail;

// One served connection of the Raft transport: its stream, network and RPC system (destroyed in reverse order), and
// what its handshake proved.
struct RaftConnection {
  RaftConnection(kj::Own<kj::AsyncIoStream> accepted, capnp::Capability::Client bootstrap)
      : stream(kj::mv(accepted)),
        messages(*stream),
        network(messages, capnp::rpc::twoparty::Side::SERVER, reader_options()),
        rpc(capnp::makeRpcServer(network, kj::mv(bootstrap))) {
    rpc.setFlowLimit(kFlowLimitWords);
  }

  kj::Own<kj::AsyncIoStream> stream;
  BufferedMessageStream messages;  // the messages on `stream`, read and written in bulk (common/message_stream.h)
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  bool authenticated = false;
  NodeId from;
  std::string secret_id;  // SHA-256 (hex) of the cluster secret it proved ("" on a node without one)
  kj::Promise<void> watcher = nullptr;  // closes the connection when the other side goes away
};

namespace {

constexpr const char* kRequestsElsewhere =
    "the Raft transport takes Raft messages only; forwarded requests and nodeStatus go to the node's listener "
    "without the peer preamble";

// The peer API on the Raft transport: deliver, as the node the link proved.
class RaftPeer final : public proto::Peer::Server {
 public:
  RaftPeer(PeerTransport& transport, NodeId from, std::string secret_id)
      : transport_(transport), from_(from), secret_id_(std::move(secret_id)) {}

  kj::Promise<void> deliver(DeliverContext context) override {
    // The reload closes the connection too; this covers the moment before.
    if (!secret_id_.empty() && !transport_.secret_accepted(secret_id_)) {
      transport_.security_metrics().add_auth_failure("peer");
      return KJ_EXCEPTION(DISCONNECTED, "the cluster secret this peer link proved is no longer accepted; reconnect");
    }
    return transport_.receive(from_, context.getParams().getMessages());
  }
  kj::Promise<void> forward(ForwardContext) override { return KJ_EXCEPTION(FAILED, kRequestsElsewhere); }
  kj::Promise<void> nodeStatus(NodeStatusContext) override { return KJ_EXCEPTION(FAILED, kRequestsElsewhere); }

 private:
  PeerTransport& transport_;
  const NodeId from_;
  const std::string secret_id_;
};

// The bootstrap object of a Raft transport connection: hello, then openPeer (node/peer_handshake.h).
class RaftGate final : public proto::Mayfly::Server {
 public:
  RaftGate(PeerTransport& transport, uint64_t connection) : transport_(transport), connection_(connection) {}

  kj::Promise<void> hello(HelloContext context) override { return nonces_.hello(context); }

  kj::Promise<void> openSession(OpenSessionContext) override {
    return KJ_EXCEPTION(FAILED, "this connection began with the Raft transport's preamble: it serves peers only; "
                                "clients connect without it");
  }

  kj::Promise<void> openPeer(OpenPeerContext context) override {
    Result<PeerOpened> opened = open_peer(transport_.config(), transport_.accepted_secrets(), context, nonces_,
                                          transport_.security_metrics(), last_refusal_log_ms_);
    if (!opened.is_ok()) return KJ_EXCEPTION(FAILED, opened.status().message());
    auto results = context.getResults();
    if (!transport_.authenticate(connection_, opened->from, opened->secret_id)) {
      return KJ_EXCEPTION(OVERLOADED, "this node holds as many peer connections as it admits; retry later");
    }
    results.setPeer(kj::heap<RaftPeer>(transport_, opened->from, std::move(opened->secret_id)));
    return kj::READY_NOW;
  }

 private:
  PeerTransport& transport_;
  const uint64_t connection_;
  HandshakeNonces nonces_;
  static inline int64_t last_refusal_log_ms_ = 0;  // Raft thread only
};

}  // namespace

PeerTransport::PeerTransport(const NodeConfig& config, Driver& driver, metrics::Metrics& metrics,
                             metrics::SecurityMetrics& security_metrics, const storage::StoreReader& state,
                             std::string proving, std::vector<std::string> accepted)
    : config_(config),
      driver_(driver),
      metrics_(metrics),
      security_metrics_(security_metrics),
      state_(state),
      proving_(std::move(proving)),
      accepted_(std::move(accepted)) {
  for (const std::string& secret : accepted_) accepted_ids_.push_back(auth::sha256_hex(secret));
  view_.self = config.id;
}

PeerTransport::~PeerTransport() noexcept { stop(); }

Status PeerTransport::start() {
  return loop_.start([this](kj::AsyncIoContext& io) { return set_up(io); },
                     [this](kj::AsyncIoContext&) { tear_down(); });
}

Status PeerTransport::set_up(kj::AsyncIoContext& io) {
  owner_.bind();
  timer_ = &io.provider->getTimer();
  network_ = &io.provider->getNetwork();
  low_level_ = io.lowLevelProvider.get();
  Result<std::unique_ptr<tls::Context>> loaded = node_tls(config_, *timer_);
  if (!loaded.is_ok()) return loaded.status();
  tls_ = std::move(loaded).value();
  tasks_ = kj::heap<kj::TaskSet>(task_errors_);
  tasks_->add(drain_mailbox());
  return Status::ok();
}

void PeerTransport::tear_down() {
  stopping_ = true;
  // Calls waiting for the driver (which has stopped) return; then links, connections and handshakes go, here.
  for (auto& [id, queued] : deliveries_) {
    if (queued.waiting.get() != nullptr) queued.waiting->fulfill();
  }
  deliveries_.clear();
  queued_deliveries_.clear();
  tasks_ = nullptr;
  links_.clear();
  handshakes_.clear();
  connections_of_.clear();
  authenticated_ = 0;
  connections_.clear();
  tls_ = nullptr;
}

void PeerTransport::stop() {
  if (!loop_.running()) return;
  loop_.stop();
  mailbox_.close();
}

kj::Promise<void> PeerTransport::adopt(kj::AutoCloseFd fd) {
  const kj::Executor* executor = loop_.executor();
  if (executor == nullptr) return kj::READY_NOW;  // not started: `fd` is closed
  return executor->executeAsync([this, fd = kj::mv(fd)]() mutable { accept(kj::mv(fd)); });
}

kj::Promise<void> PeerTransport::update_secrets(std::string proving, std::vector<std::string> accepted) {
  const kj::Executor* executor = loop_.executor();
  if (executor == nullptr) return kj::READY_NOW;
  return executor->executeAsync([this, proving = std::move(proving), accepted = std::move(accepted)]() mutable {
    proving_ = std::move(proving);
    accepted_ = std::move(accepted);
    accepted_ids_.clear();
    for (const std::string& secret : accepted_) accepted_ids_.push_back(auth::sha256_hex(secret));
    close_removed_secrets();
  });
}

uint64_t PeerTransport::deliver(DriverBatch batch) {
  batch.replies.clear();
  uint64_t dropped = 0;
  mailbox_.post(std::move(batch), &dropped);
  return dropped;
}

bool PeerTransport::secret_accepted(const std::string& secret_id) const {
  for (const std::string& accepted : accepted_ids_) {
    if (accepted == secret_id) return true;
  }
  return false;
}

// ---- Connections in ------------------------------------------------------------------------------------------------

size_t PeerTransport::unauthenticated() const {
  size_t count = 0;
  for (const auto& [id, handshake] : handshakes_) {
    if (!handshake.finished) ++count;
  }
  for (const auto& [id, connection] : connections_) {
    if (!connection->authenticated) ++count;
  }
  return count;
}

void PeerTransport::accept(kj::AutoCloseFd fd) {
  owner_.check();
  if (stopping_) return;
  if (unauthenticated() >= kMaxPeerHandshakes && !make_room()) {
    security_metrics_.add_connection_refused("limit");
    return;  // `fd` goes out of scope: closed
  }
  const uint64_t id = next_connection_id_++;
  kj::Own<kj::AsyncIoStream> stream = low_level_->wrapSocketFd(
      kj::mv(fd), kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC | kj::LowLevelAsyncIoProvider::ALREADY_NONBLOCK);
  kj::AsyncIoStream& raw = *stream;
  auto preamble = kj::heapArray<kj::byte>(kPeerPreamble.size());
  kj::byte* preamble_bytes = preamble.begin();
  // Ends the entry once: on the next turn of the loop (never from inside its own promise).
  auto finish = [this, id](const char* refusal) {
    auto it = handshakes_.find(id);
    if (it == handshakes_.end() || it->second.finished) return false;
    it->second.finished = true;
    tasks_->add(kj::evalLater([this, id] { handshakes_.erase(id); }));
    if (refusal != nullptr) security_metrics_.add_connection_refused(refusal);
    return true;
  };
  kj::Promise<void> handshake =
      raw.read(preamble_bytes, kPeerPreamble.size())
          .then([this, preamble = kj::mv(preamble), stream = kj::mv(stream)]() mutable
                -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
            // Peeked by the RPC host already; checked again, as every byte from a socket is.
            if (std::memcmp(preamble.begin(), kPeerPreamble.data(), kPeerPreamble.size()) != 0) {
              return KJ_EXCEPTION(FAILED, "the connection does not begin with the peer preamble");
            }
            if (tls_ == nullptr) return kj::mv(stream);
            return tls_->wrap_server(kj::mv(stream));
          })
          .then(
              [this, id, finish](kj::Own<kj::AsyncIoStream> ready) {
                if (finish(nullptr)) serve(id, kj::mv(ready));
              },
              [this, finish](kj::Exception&& exception) {
                if (!finish(tls_ != nullptr ? "tls" : "handshake_failed")) return;
                if (log_now(last_handshake_log_ms_)) {
                  spdlog::warn("refused a Raft transport connection: {}", exception.getDescription().cStr());
                }
              })
          .exclusiveJoin(timer_->afterDelay(config_.handshake_timeout_ms * kj::MILLISECONDS).then([finish] {
            finish("handshake_timeout");
          }))
          .eagerlyEvaluate(nullptr);
  handshakes_.emplace(id, Handshake{kj::mv(handshake), false});
}

void PeerTransport::serve(uint64_t id, kj::Own<kj::AsyncIoStream> stream) {
  if (stopping_) return;
  auto connection = kj::heap<RaftConnection>(kj::mv(stream), kj::heap<RaftGate>(*this, id));
  connection->watcher = connection->network.onDisconnect()
                            .then([this, id] {
                              tasks_->add(kj::evalLater([this, id] { close_connection(id, nullptr); }));
                            })
                            .eagerlyEvaluate(nullptr);
  connections_.emplace(id, kj::mv(connection));
  tasks_->add(timer_->afterDelay(config_.handshake_timeout_ms * kj::MILLISECONDS).then([this, id] {
    auto it = connections_.find(id);
    if (it != connections_.end() && !it->second->authenticated) close_connection(id, "handshake_timeout");
  }));
}

bool PeerTransport::make_room() {
  std::optional<uint64_t> handshake;
  for (const auto& [id, entry] : handshakes_) {
    if (!entry.finished) {
      handshake = id;
      break;
    }
  }
  std::optional<uint64_t> connection;
  for (const auto& [id, entry] : connections_) {
    if (!entry->authenticated) {
      connection = id;
      break;
    }
  }
  if (handshake && (!connection || *handshake < *connection)) {
    handshakes_.erase(*handshake);  // cancels it and closes its stream
    security_metrics_.add_connection_refused("evicted");
    return true;
  }
  if (connection) {
    close_connection(*connection, "evicted");
    return true;
  }
  return false;
}

bool PeerTransport::authenticate(uint64_t connection, NodeId from, const std::string& secret_id) {
  owner_.check();
  auto it = connections_.find(connection);
  if (it == connections_.end() || it->second->authenticated) return false;
  if (authenticated_ >= kMaxPeerConnections) {
    tasks_->add(kj::evalLater([this, connection] { close_connection(connection, "limit"); }));
    return false;
  }
  it->second->authenticated = true;
  it->second->from = from;
  it->second->secret_id = secret_id;
  ++authenticated_;
  std::vector<uint64_t>& same = connections_of_[from];
  same.push_back(connection);
  if (same.size() > kMaxConnectionsPerPeer) {
    const uint64_t oldest = same.front();
    tasks_->add(kj::evalLater([this, oldest] { close_connection(oldest, "replaced"); }));
  }
  return true;
}

void PeerTransport::close_connection(uint64_t id, const char* reason) {
  owner_.check();
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (it->second->authenticated) {
    --authenticated_;
    auto same = connections_of_.find(it->second->from);
    if (same != connections_of_.end()) {
      std::erase(same->second, id);
      if (same->second.empty()) connections_of_.erase(same);
    }
  }
  kj::Own<RaftConnection> closing = kj::mv(it->second);
  connections_.erase(it);
  if (reason != nullptr) security_metrics_.add_connection_refused(reason);
  closing = nullptr;
}

void PeerTransport::close_removed_secrets() {
  owner_.check();
  close_links_of_removed_secrets(
      *this, "Raft", connections_, links_,
      [](const RaftConnection& connection) -> const std::string& { return connection.secret_id; },
      [this](uint64_t id) { close_connection(id, "secret_removed"); });
}

// ---- Deliveries in -------------------------------------------------------------------------------------------------

kj::Promise<void> PeerTransport::receive(NodeId from, capnp::List<capnp::Data>::Reader messages) {
  owner_.check();
  // A sender never puts more than kMaxMessagesPerDelivery in one delivery; a list of millions of empty elements fits
  // in the traversal limit (8 bytes each) but is not decoded, nor is room reserved for it.
  if (messages.size() > kMaxMessagesPerDelivery) {
    metrics_.add_peer_message_rejected("undecodable");
    if (std::optional<uint64_t> held_back = refused_warnings_.admit(std::to_string(from.value()), steady_ms())) {
      spdlog::warn("refused a delivery of {} messages from node {} (at most {}); {} more like it not logged",
                   messages.size(), from.value(), kMaxMessagesPerDelivery, *held_back);
    }
    return kj::READY_NOW;
  }
  // Who is heard: node/peer_admission.h.
  std::vector<replication::Message> decoded;
  decoded.reserve(messages.size());
  for (capnp::Data::Reader bytes : messages) {
    Result<replication::Message> message =
        replication::decode_message(std::string_view(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
    const char* refusal = peer_message_refusal(view_, config_.id, from, message);
    if (refusal != nullptr) {
      metrics_.add_peer_message_rejected(refusal);
      if (std::optional<uint64_t> held_back =
              refused_warnings_.admit(std::to_string(from.value()) + "/" + refusal, steady_ms())) {
        spdlog::warn("refused a Raft message on node {}'s link ({}): {}; {} more like it not logged", from.value(),
                     refusal, message.is_ok() ? message->describe() : message.status().to_string(), *held_back);
      }
      continue;
    }
    decoded.push_back(std::move(message).value());
  }
  if (decoded.empty() || stopping_) return kj::READY_NOW;
  // Backpressure: a peer's link sends one delivery at a time and waits for the call to return. The first few of a
  // peer's deliveries waiting for the driver return at once (pipelining: the next append is already here when the
  // driver finishes an fsync); past kMaxQueuedDeliveriesPerPeer the call returns only when the driver has taken this
  // one, so however slow this node is, a peer has at most that many in the driver's queue.
  const uint64_t delivery = next_delivery_id_++;
  const size_t queued = ++queued_deliveries_[from];
  driver_.post([this, delivery, decoded = std::move(decoded)]() mutable {
    driver_.on_messages(std::move(decoded), delivery);
  });
  if (queued <= kMaxQueuedDeliveriesPerPeer) {
    deliveries_.emplace(delivery, QueuedDelivery{from, kj::Own<kj::PromiseFulfiller<void>>()});
    return kj::READY_NOW;
  }
  auto taken = kj::newPromiseAndFulfiller<void>();
  deliveries_.emplace(delivery, QueuedDelivery{from, kj::mv(taken.fulfiller)});
  return kj::mv(taken.promise);
}

// ---- The driver's output: messages out ------------------------------------------------------------------------------

kj::Promise<void> PeerTransport::drain_mailbox() {
  return mailbox_.next().then([this](std::vector<DriverBatch> batches) {
    for (DriverBatch& batch : batches) apply(batch);
    return drain_mailbox();
  });
}

void PeerTransport::apply(DriverBatch& batch) {
  owner_.check();
  if (batch.view) view_ = *batch.view;
  for (uint64_t delivery : batch.deliveries_taken) {
    auto it = deliveries_.find(delivery);
    if (it == deliveries_.end()) continue;
    if (--queued_deliveries_[it->second.from] == 0) queued_deliveries_.erase(it->second.from);
    if (it->second.waiting.get() != nullptr) it->second.waiting->fulfill();
    deliveries_.erase(it);
  }
  for (auto& [peer, messages] : batch.messages) {
    if (PeerLink* peer_link = link(peer)) peer_link->send(messages);
  }
}

PeerLink* PeerTransport::link(NodeId peer) {
  auto it = links_.find(peer);
  if (it != links_.end()) return it->second.get();
  std::optional<std::string> address = peer_address(config_, state_, peer);
  if (!address) return nullptr;
  auto created = std::make_unique<PeerLink>(*this, PeerLink::Kind::kRaft, peer, *address);
  PeerLink* raw = created.get();
  links_.emplace(peer, std::move(created));
  return raw;
}

void PeerTransport::TaskErrors::taskFailed(kj::Exception&& exception) {
  spdlog::warn("Raft transport task failed: {}", exception.getDescription().cStr());
}

}  // namespace mayfly::node
