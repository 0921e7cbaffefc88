#include "node/rpc.h"

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <capnp/rpc.h>
#include <kj/async-io.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <deque>

#include "common/auth.h"
#include "replication/codec.h"
#include "storage/json.h"
#include "ttl/request_units.h"

namespace mayfly::node {
namespace {

constexpr size_t kMaxMessagesPerDelivery = 512;
constexpr size_t kMaxBytesPerDelivery = 8 << 20;
constexpr size_t kMaxQueuedDeliveriesPerPeer = 4;  // waiting for the driver before a peer's deliver call waits too
constexpr size_t kMaxQueuedBytesPerPeer = 64 << 20;  // beyond this a slow peer's messages are dropped (Raft resends)
constexpr int64_t kMaxBackoffMs = 2000;
constexpr int kShutdownForwardWaitMs = 3000;  // at most this long for the leader's answers to forwarded writes
constexpr int kShutdownFlushMs = 50;          // then this long for the last answers to reach the sockets

// The same clock as Driver::steady_ms, for comparing with NodeView::leader_contact_steady_ms.
int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string role_text(replication::Role role) { return std::string(replication::role_name(role)); }

// Every incoming Cap'n Proto message (client requests, peer deliveries, forwarded replies) is limited to 16 MiB
// (2 Mi words). The largest honest ones: a peer delivery (kMaxBytesPerDelivery, plus at most one Raft message of
// ~4 MiB past it), a forwarded reply (a 4 MiB page plus its last 2 MB item), a write carrying a 2 MB item. Cap'n
// Proto checks a message's declared size against this limit when it reads the segment table, before allocating, so
// a frame declaring 100 MB in a few bytes is refused (the connection fails) and never reserved.
constexpr uint64_t kTraversalLimitWords = uint64_t{2} << 20;

capnp::ReaderOptions reader_options() {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = kTraversalLimitWords;
  return options;
}

// Calls in flight per connection, in words of their parameters: past this the connection is not read until answers
// go out (Cap'n Proto's flow limit). 16 MiB holds a peer's largest delivery (8 MiB) or several 2 MB items.
constexpr size_t kFlowLimitWords = (16u << 20) / sizeof(capnp::word);
constexpr size_t kMinNonceBytes = 16;
constexpr size_t kMaxNonceBytes = 64;
constexpr int64_t kKeysRefreshMs = 1000;  // the keys file is looked at this often (and at every session opened)
constexpr int64_t kQuietLogMs = 5000;     // repeated warnings of one kind: one line per this long

// True at most once per kQuietLogMs for one `last` slot: repeated refusals make one log line, not a flood.
bool log_now(int64_t& last_ms) {
  const int64_t now = steady_ms();
  if (last_ms != 0 && now - last_ms < kQuietLogMs) return false;
  last_ms = now;
  return true;
}

std::string bytes_of(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

capnp::Data::Reader data_of(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

// The least role a request needs (node/keyring.h).
Role required_role(proto::Request::Which which) {
  switch (which) {
    case proto::Request::LIST_DATABASES:
    case proto::Request::GET_CONTAINER:
    case proto::Request::LIST_CONTAINERS:
    case proto::Request::READ_ITEM:
    case proto::Request::LIST_ITEMS:
    case proto::Request::QUERY:
    case proto::Request::CLUSTER_STATUS:
      return Role::kReadOnly;
    case proto::Request::ADD_MEMBER:
    case proto::Request::REMOVE_MEMBER:
    case proto::Request::TRANSFER_LEADER:
      return Role::kAdmin;
    default:
      return Role::kReadWrite;
  }
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

}  // namespace

// One accepted connection: its stream, network and RPC system (members are destroyed in reverse order: the RPC
// system before the network before the stream), and what the handshake established.
struct ServedConnection {
  ServedConnection(kj::Own<kj::AsyncIoStream> accepted, capnp::Capability::Client bootstrap)
      : stream(kj::mv(accepted)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER, reader_options()),
        rpc(capnp::makeRpcServer(network, kj::mv(bootstrap))) {
    rpc.setFlowLimit(kFlowLimitWords);
  }

  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  bool authenticated = false;
  bool peer = false;          // an authenticated peer: never closed for being idle
  int64_t calls = 0;          // client calls in flight
  int64_t last_active_ms = 0; // steady ms of the last call's start or end (or of the handshake)
  kj::Promise<void> watcher = nullptr;  // closes the connection when the other side goes away
};

// One peer, seen from here: an outgoing connection that delivers Raft messages in order and in batches, and carries
// forwarded client requests. Reconnects with exponential backoff after any failure.
class PeerLink {
 public:
  PeerLink(RpcHost& host, NodeId peer, std::string address)
      : host_(host), peer_(peer), address_(std::move(address)), tasks_(kj::heap<kj::TaskSet>(errors_)) {}

  void send(std::vector<std::string>& messages) {
    for (std::string& message : messages) {
      queued_bytes_ += message.size();
      queue_.push_back(std::move(message));
    }
    while (queued_bytes_ > kMaxQueuedBytesPerPeer && !queue_.empty()) {
      queued_bytes_ -= queue_.front().size();
      queue_.pop_front();
      ++dropped_;
    }
    pump();
  }

  kj::Promise<Reply> forward(proto::Request::Reader request) {
    auto call = capability().forwardRequest();
    call.setRequest(request);
    return call.send().then([](capnp::Response<proto::Peer::ForwardResults> response) {
      return decode_reply(response.getResponse());
    });
  }

  kj::Promise<std::string> node_status() {
    return capability().nodeStatusRequest().send().then(
        [](capnp::Response<proto::Peer::NodeStatusResults> response) { return std::string(response.getStatus()); });
  }

  const std::string& address() const { return address_; }

 private:
  class Errors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override {
      spdlog::debug("peer link task failed: {}", exception.getDescription().cStr());
    }
  };

  // The peer's capability; calls made before the handshake is done wait for it (and fail with it).
  proto::Peer::Client capability() {
    if (peer_capability_.get() == nullptr) {
      peer_capability_ = kj::heap<proto::Peer::Client>(connect());
    }
    return *peer_capability_;
  }

  // Connects and runs the handshake: hello, then openPeer with this node's proof; the peer's own proof is checked
  // before anything is sent on the link, so Raft traffic never goes to a process without the cluster secret.
  kj::Promise<proto::Peer::Client> connect() {
    return host_.network()
        .parseAddress(address_)
        .then([](kj::Own<kj::NetworkAddress> address) { return address->connect(); })
        .then([this](kj::Own<kj::AsyncIoStream> stream) -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
          tls::Context* tls = host_.tls();
          if (tls == nullptr) return kj::mv(stream);
          // The peer must present a certificate signed by the cluster CA (--tls-ca) naming the host of its address.
          return tls->wrap_client(kj::mv(stream), address_).catch_([this](kj::Exception&& exception)
                                                                        -> kj::Own<kj::AsyncIoStream> {
            if (log_now(last_tls_log_ms_)) {
              spdlog::warn("TLS handshake with node {} at {} failed (is its certificate signed by --tls-ca and "
                           "issued for this address's host?): {}",
                           peer_.value(), address_, exception.getDescription().cStr());
            }
            kj::throwFatalException(kj::mv(exception));
          });
        })
        .then([this](kj::Own<kj::AsyncIoStream> stream) {
          connection_ = kj::heap<OutgoingConnection>(kj::mv(stream));
          const std::string client_nonce = auth::random_nonce();
          auto hello = connection_->bootstrap.helloRequest();
          hello.setClientNonce(data_of(client_nonce));
          return hello.send().then([this, client_nonce](capnp::Response<proto::Mayfly::HelloResults> greeted) {
            const std::string server_nonce = bytes_of(greeted.getServerNonce());
            const NodeConfig& config = host_.config();
            // The secret proved with is the one the answer is checked against (the file may be re-read meanwhile).
            std::string secret = host_.cluster_secret();
            auto open = connection_->bootstrap.openPeerRequest();
            open.setFrom(config.id.value());
            open.setCluster(config.cluster);
            if (!secret.empty()) {
              open.setProof(data_of(
                  auth::peer_client_proof(secret, config.cluster, config.id.value(), client_nonce, server_nonce)));
            }
            return open.send().then([this, client_nonce, server_nonce, shared = std::move(secret)](
                                        capnp::Response<proto::Mayfly::OpenPeerResults> opened) {
              if (!shared.empty()) {
                const std::string expected = auth::peer_server_proof(shared, host_.config().cluster, peer_.value(),
                                                                     client_nonce, server_nonce);
                if (!auth::constant_time_equal(expected, bytes_of(opened.getServerProof()))) {
                  host_.security_metrics().add_auth_failure("peer");
                  return proto::Peer::Client(KJ_EXCEPTION(
                      FAILED, "the process at this address did not prove it is node " +
                                  std::to_string(peer_.value()) + " of this cluster (wrong cluster secret?)",
                      address_));
                }
              }
              return opened.getPeer();
            });
          });
        });
  }

  void pump() {
    if (sending_ || waiting_to_reconnect_ || queue_.empty()) return;
    auto request = capability().deliverRequest();
    size_t count = 0, bytes = 0;
    while (count < queue_.size() && count < kMaxMessagesPerDelivery && bytes < kMaxBytesPerDelivery) {
      bytes += queue_[count].size();
      ++count;
    }
    auto list = request.initMessages(static_cast<unsigned>(count));
    for (size_t i = 0; i < count; ++i) {
      const std::string& message = queue_.front();
      list.set(static_cast<unsigned>(i), capnp::Data::Reader(reinterpret_cast<const kj::byte*>(message.data()),
                                                             message.size()));
      queued_bytes_ -= message.size();
      queue_.pop_front();
    }
    sending_ = true;
    tasks_->add(request.send().then(
        [this](auto&&) {
          sending_ = false;
          backoff_ms_ = 50;
          pump();
        },
        [this](kj::Exception&& exception) {
          sending_ = false;
          on_failure(exception);
        }));
  }

  void on_failure(const kj::Exception& exception) {
    if (waiting_to_reconnect_) return;
    spdlog::debug("link to node {} at {} failed ({}); retrying in {} ms", peer_.value(), address_,
                  exception.getDescription().cStr(), backoff_ms_);
    peer_capability_ = nullptr;
    connection_ = nullptr;
    waiting_to_reconnect_ = true;
    // Messages queued meanwhile stay queued (bounded); Raft tolerates the loss of those dropped.
    tasks_->add(host_.timer().afterDelay(backoff_ms_ * kj::MILLISECONDS).then([this] {
      waiting_to_reconnect_ = false;
      pump();
    }));
    backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
  }

  RpcHost& host_;
  NodeId peer_;
  std::string address_;
  Errors errors_;
  kj::Own<OutgoingConnection> connection_;
  kj::Own<proto::Peer::Client> peer_capability_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  bool sending_ = false;
  bool waiting_to_reconnect_ = false;
  int64_t backoff_ms_ = 50;
  int64_t last_tls_log_ms_ = 0;
  kj::Own<kj::TaskSet> tasks_;  // last: destroyed first, cancelling callbacks that use the members above
};

namespace {

// A client session, with the role of the key that opened it. The role is looked up again on every request (keys are
// reloaded when their file changes), so a key removed from the file stops working on open sessions too.
class SessionImpl final : public proto::Session::Server {
 public:
  // `key_id` empty: the session was opened without a (known) key; `refusal` says which ("no_key", "unknown_key").
  SessionImpl(RpcHost& host, uint64_t connection, std::string key_id, std::string key_name, const char* refusal)
      : host_(host),
        connection_(connection),
        key_id_(std::move(key_id)),
        key_name_(std::move(key_name)),
        refusal_(refusal) {}

  kj::Promise<void> execute(ExecuteContext context) override {
    host_.call_started(connection_);
    return run(context).attach(kj::defer([host = &host_, connection = connection_] {
      host->call_finished(connection);
    }));
  }

 private:
  kj::Promise<void> run(ExecuteContext& context) {
    auto request = context.getParams().getRequest();
    if (std::optional<Reply> refused = authorize(request)) {
      refused->served_by = host_.config().id;
      encode_reply(*refused, context.getResults().initResponse());
      return kj::READY_NOW;
    }
    storage::Outcome<Operation> operation = decode_request(request);
    if (!operation.ok()) {
      Reply reply{operation.error()};
      reply.served_by = host_.config().id;
      encode_reply(reply, context.getResults().initResponse());
      return kj::READY_NOW;
    }
    return host_.handle(std::move(operation.value()), request, false).then([context](Reply reply) mutable {
      encode_reply(reply, context.getResults().initResponse());
    });
  }

  // 401 without a valid key, 403 when the key's role is not enough; nothing is executed or charged then.
  std::optional<Reply> authorize(proto::Request::Reader request) {
    Keyring& keyring = host_.keyring();
    if (keyring.open()) return std::nullopt;
    const Role role = key_id_.empty() ? Role::kNone : keyring.role_of(key_id_);
    if (role == Role::kNone) {
      const char* reason = key_id_.empty() ? refusal_ : "unknown_key";
      host_.security_metrics().add_auth_failure(reason);
      std::string message =
          std::string(reason) == "no_key"
              ? "this cluster requires a key: pass --key, --key-file or $MAYFLY_KEY to the mayfly CLI "
                "(ClientOptions::key in the library)"
              : "the key is not accepted by node " + std::to_string(host_.config().id.value()) +
                    " (unknown, or removed from its keys file); check the key you pass";
      return Reply::error(401, std::move(message));
    }
    const Role needed = required_role(request.which());
    if (role < needed) {
      host_.security_metrics().add_auth_failure("forbidden");
      return Reply::error(403, "the key '" + key_name_ + "' has role " + std::string(role_name(role)) +
                                   "; this operation needs " + std::string(role_name(needed)) +
                                   (needed == Role::kAdmin ? "" : " or admin"));
    }
    return std::nullopt;
  }

  RpcHost& host_;
  const uint64_t connection_;
  const std::string key_id_;
  const std::string key_name_;
  const char* refusal_;
};

// The peer API for one authenticated node: every message delivered here must come from `from`.
class PeerImpl final : public proto::Peer::Server {
 public:
  PeerImpl(RpcHost& host, NodeId from) : host_(host), from_(from) {}

  kj::Promise<void> deliver(DeliverContext context) override {
    return host_.receive(from_, context.getParams().getMessages());
  }

  kj::Promise<void> forward(ForwardContext context) override {
    auto request = context.getParams().getRequest();
    storage::Outcome<Operation> operation = decode_request(request);
    if (!operation.ok()) {
      encode_reply(Reply{operation.error()}, context.getResults().initResponse());
      return kj::READY_NOW;
    }
    return host_.handle(std::move(operation.value()), request, true).then([context](Reply reply) mutable {
      encode_reply(reply, context.getResults().initResponse());
    });
  }

  kj::Promise<void> nodeStatus(NodeStatusContext context) override {
    context.getResults().setStatus(host_.own_status_json());
    return kj::READY_NOW;
  }

 private:
  RpcHost& host_;
  NodeId from_;
};

// The bootstrap object of one connection: the handshake (hello, then openSession or openPeer).
class MayflyImpl final : public proto::Mayfly::Server {
 public:
  MayflyImpl(RpcHost& host, uint64_t connection) : host_(host), connection_(connection) {}

  kj::Promise<void> hello(HelloContext context) override {
    const capnp::Data::Reader nonce = context.getParams().getClientNonce();
    if (nonce.size() < kMinNonceBytes || nonce.size() > kMaxNonceBytes) {
      return KJ_EXCEPTION(FAILED, "hello: the client nonce must be 16 to 64 random bytes");
    }
    client_nonce_ = bytes_of(nonce);
    server_nonce_ = auth::random_nonce();
    context.getResults().setServerNonce(data_of(server_nonce_));
    return kj::READY_NOW;
  }

  kj::Promise<void> openSession(OpenSessionContext context) override {
    host_.refresh_keys();
    Keyring& keyring = host_.keyring();
    auto results = context.getResults();
    if (keyring.open()) {
      host_.mark_authenticated(connection_, false);
      results.setSession(kj::heap<SessionImpl>(host_, connection_, std::string(), "open", nullptr));
      return kj::READY_NOW;
    }
    const capnp::Data::Reader proof = context.getParams().getProof();
    std::optional<Keyring::Match> match;
    if (!server_nonce_.empty() && proof.size() > 0) {
      match = keyring.match(client_nonce_, server_nonce_, bytes_of(proof));
    }
    const bool had_proof = proof.size() > 0;
    server_nonce_.clear();  // one open per hello
    if (!match) {
      // Still a session, so the caller gets a 401 with a message rather than a broken connection.
      results.setSession(
          kj::heap<SessionImpl>(host_, connection_, std::string(), std::string(), had_proof ? "unknown_key" : "no_key"));
      return kj::READY_NOW;
    }
    host_.mark_authenticated(connection_, false);
    results.setServerProof(data_of(match->server_proof));
    results.setSession(kj::heap<SessionImpl>(host_, connection_, match->key_id, match->name, nullptr));
    return kj::READY_NOW;
  }

  kj::Promise<void> openPeer(OpenPeerContext context) override {
    auto params = context.getParams();
    const NodeConfig& config = host_.config();
    if (params.getCluster() != kj::StringPtr(config.cluster.c_str())) {
      return KJ_EXCEPTION(FAILED, "peer belongs to another cluster", params.getCluster());
    }
    const uint64_t from = params.getFrom();
    if (from == 0 || from == config.id.value()) {
      return KJ_EXCEPTION(FAILED, "a peer must name another node of the cluster", from);
    }
    const std::vector<std::string>& secrets = host_.accepted_cluster_secrets();
    auto results = context.getResults();
    if (!secrets.empty()) {
      // Any accepted secret (the file may hold the old and the new one while it rotates); each is tried in constant
      // time whether or not an earlier one matched, and the answer proves the one the peer used.
      const std::string* matched = nullptr;
      for (const std::string& secret : secrets) {
        const bool equal =
            !server_nonce_.empty() &&
            auth::constant_time_equal(auth::peer_client_proof(secret, config.cluster, from, client_nonce_, server_nonce_),
                                      bytes_of(params.getProof()));
        if (equal && matched == nullptr) matched = &secret;
      }
      if (matched == nullptr) {
        server_nonce_.clear();
        host_.security_metrics().add_auth_failure("peer");
        if (log_now(last_refusal_log_ms_)) {
          spdlog::warn("refused a peer connection claiming to be node {}: it did not prove it holds the cluster "
                       "secret",
                       from);
        }
        return KJ_EXCEPTION(FAILED, "peer authentication failed: hello first, then prove the cluster secret");
      }
      results.setServerProof(data_of(
          auth::peer_server_proof(*matched, config.cluster, config.id.value(), client_nonce_, server_nonce_)));
      server_nonce_.clear();
    }
    host_.mark_authenticated(connection_, true);
    results.setPeer(kj::heap<PeerImpl>(host_, NodeId(from)));
    return kj::READY_NOW;
  }

 private:
  RpcHost& host_;
  const uint64_t connection_;
  std::string client_nonce_;
  std::string server_nonce_;
  static inline int64_t last_refusal_log_ms_ = 0;  // kj thread only
};

}  // namespace

RpcHost::RpcHost(const NodeConfig& config, Driver& driver, metrics::Metrics& metrics,
                 RequestUnitAccount& request_units, Keyring keyring, ClusterSecrets cluster_secrets)
    : config_(config),
      driver_(driver),
      metrics_(metrics),
      request_units_(request_units),
      state_(driver.state().reader()),
      keyring_(std::move(keyring)),
      cluster_secrets_(std::move(cluster_secrets)),
      security_metrics_(metrics),
      reads_(static_cast<size_t>(config.read_threads)) {
  view_.self = config.id;
  security_metrics_.set_open(keyring_.open(), cluster_secrets_.empty());
  security_metrics_.set_connections(0, 0);
}

RpcHost::~RpcHost() noexcept { stop(); }

Status RpcHost::start() {
  if (keyring_.open()) {
    spdlog::warn("OPEN TO EVERY CLIENT: no --keys-file, so anyone who reaches {} may read, write and change "
                 "membership (README \"Security\")",
                 config_.listen);
  }
  if (cluster_secrets_.empty()) {
    spdlog::warn("OPEN TO EVERY PEER: no --cluster-secret-file, so any process that reaches {} and knows the cluster "
                 "name may act as a member (README \"Security\")",
                 config_.listen);
  }
  // Each connection takes a descriptor: let --max-connections be reached before the process's file limit is.
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  std::promise<Status> started;
  std::future<Status> result = started.get_future();
  thread_ = std::thread([this, &started] { run(started); });
  Status status = result.get();
  if (!status.is_ok()) {
    thread_.join();
    return status;
  }
  running_ = true;
  return status;
}

void RpcHost::run(std::promise<Status>& started) {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::WaitScope& wait_scope = io.waitScope;
  timer_ = &io.provider->getTimer();
  network_ = &io.provider->getNetwork();
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] {
    listener_ = network_->parseAddress(config_.listen).wait(wait_scope)->listen();
  })) {
    started.set_value(Status::unavailable("cannot listen on " + config_.listen + ": " +
                                          exception->getDescription().cStr()));
    return;
  }
  if (config_.tls()) {
    Result<std::unique_ptr<tls::Context>> loaded =
        tls::Context::load(config_.tls_ca_file, config_.tls_cert_file, config_.tls_key_file, timer_,
                           config_.handshake_timeout_ms);
    if (!loaded.is_ok()) {
      listener_ = nullptr;
      started.set_value(loaded.status());
      return;
    }
    tls_ = std::move(loaded).value();
  }
  tasks_ = kj::heap<kj::TaskSet>(task_errors_);
  executor_ = kj::getCurrentThreadExecutor().addRef();
  auto shutdown = kj::newPromiseAndFulfiller<void>();
  shutdown_ = kj::mv(shutdown.fulfiller);
  tasks_->add(accept_loop());
  tasks_->add(drain_mailbox());
  if (config_.idle_timeout_ms > 0) tasks_->add(sweep_idle_connections());
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
  started.set_value(Status::ok());
  shutdown.promise.wait(wait_scope);
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
    Reply reply = shutting_down();
    if (pending_writes_.count(id) != 0) {
      // It may have been proposed: retrying it is safe only for a client whose writes carry ids (exactly-once).
      reply.result.message = "the node is shutting down; the write's outcome is unknown (it may still apply)";
      reply.result.substatus = kSubstatusOutcomeUnknown;
    }
    fulfiller->fulfill(kj::mv(reply));
  }
  pending_.clear();
  pending_writes_.clear();
  for (auto& [index, waiting] : waiting_reads_) waiting.second->fulfill(false);
  waiting_reads_.clear();
  for (auto& [id, queued] : deliveries_) {
    if (queued.waiting.get() != nullptr) queued.waiting->fulfill();
  }
  deliveries_.clear();
  queued_deliveries_.clear();
  timer_->afterDelay(kShutdownFlushMs * kj::MILLISECONDS).wait(wait_scope);
  tasks_ = nullptr;
  links_.clear();
  connections_.clear();
  listener_ = nullptr;
  tls_ = nullptr;
}

kj::Promise<void> RpcHost::accept_loop() {
  return listener_->accept()
      .then(
          [this](kj::Own<kj::AsyncIoStream> stream) -> kj::Promise<void> {
            if (tls_ != nullptr) {
              secure(kj::mv(stream));
            } else {
              admit(kj::mv(stream));
            }
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

void RpcHost::secure(kj::Own<kj::AsyncIoStream> stream) {
  static int64_t last_log_ms = 0;
  if (stopping_) return;
  // Handshakes in progress are bounded like connections (and by the handshake timeout, TlsContext's acceptTimeout).
  if (tls_handshakes_ >= static_cast<size_t>(config_.max_connections)) {
    security_metrics_.add_connection_refused("limit");
    return;  // `stream` goes out of scope: closed
  }
  ++tls_handshakes_;
  tasks_->add(tls_->wrap_server(kj::mv(stream))
                  .then(
                      [this](kj::Own<kj::AsyncIoStream> secured) {
                        --tls_handshakes_;
                        admit(kj::mv(secured));
                      },
                      [this](kj::Exception&& exception) {
                        // Plaintext, no TLS version or cipher in common, or no handshake within the timeout: closed.
                        // (A client that refuses our certificate does so after the handshake: it just disconnects.)
                        --tls_handshakes_;
                        security_metrics_.add_connection_refused("tls");
                        if (log_now(last_log_ms)) {
                          spdlog::warn("refused a connection: TLS handshake failed: {}",
                                       exception.getDescription().cStr());
                        }
                      }));
}

void RpcHost::admit(kj::Own<kj::AsyncIoStream> stream) {
  static int64_t last_log_ms = 0;
  if (stopping_) return;
  if (connections_.size() >= static_cast<size_t>(config_.max_connections)) {
    // Full: the oldest connection that has not authenticated makes room; peers and established sessions stay.
    std::optional<uint64_t> victim;
    for (const auto& [id, connection] : connections_) {
      if (!connection->authenticated) {
        victim = id;
        break;
      }
    }
    if (!victim) {
      security_metrics_.add_connection_refused("limit");
      if (log_now(last_log_ms)) {
        spdlog::warn("refusing connections: {} are open and authenticated (--max-connections)", connections_.size());
      }
      return;  // `stream` goes out of scope: closed
    }
    close_connection(*victim, "evicted");
  }
  const uint64_t id = next_connection_id_++;
  auto connection = kj::heap<ServedConnection>(kj::mv(stream), kj::heap<MayflyImpl>(*this, id));
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
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (it->second->authenticated) --authenticated_connections_;
  kj::Own<ServedConnection> closing = kj::mv(it->second);
  connections_.erase(it);
  if (reason != nullptr) security_metrics_.add_connection_refused(reason);
  publish_connection_counts();
  closing = nullptr;
}

void RpcHost::mark_authenticated(uint64_t connection_id, bool peer) {
  auto it = connections_.find(connection_id);
  if (it == connections_.end() || it->second->authenticated) return;
  it->second->authenticated = true;
  it->second->peer = peer;
  it->second->last_active_ms = steady_ms();
  ++authenticated_connections_;
  publish_connection_counts();
}

void RpcHost::call_started(uint64_t connection_id) {
  auto it = connections_.find(connection_id);
  if (it == connections_.end()) return;
  ++it->second->calls;
  it->second->last_active_ms = steady_ms();
}

void RpcHost::call_finished(uint64_t connection_id) {
  auto it = connections_.find(connection_id);
  if (it == connections_.end()) return;
  --it->second->calls;
  it->second->last_active_ms = steady_ms();
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
  static int64_t last_log_ms = 0;
  const uint64_t before = cluster_secrets_.generation();
  if (Status reloaded = cluster_secrets_.reload_if_changed(); !reloaded.is_ok()) {
    if (log_now(last_log_ms)) spdlog::error("keeping the previous cluster secrets: {}", reloaded.message());
  } else if (cluster_secrets_.generation() != before) {
    spdlog::info("cluster secret file {} reloaded: {} secret(s) accepted, proving with the first",
                 config_.cluster_secret_file, cluster_secrets_.accepted().size());
  }
}

void RpcHost::refresh_keys() {
  static int64_t last_log_ms = 0;
  if (keyring_.open()) return;
  const uint64_t before = keyring_.generation();
  Status reloaded = keyring_.reload_if_changed();
  if (!reloaded.is_ok()) {
    if (log_now(last_log_ms)) spdlog::error("keeping the previous keys: {}", reloaded.message());
    return;
  }
  if (keyring_.generation() != before) {
    spdlog::info("keys file {} reloaded: {} keys", config_.keys_file, keyring_.size());
  }
}

void RpcHost::stop() {
  if (!running_) return;
  running_ = false;
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] { executor_->executeSync([this] { shutdown_->fulfill(); }); })) {
    spdlog::warn("stopping the RPC loop: {}", exception->getDescription().cStr());
  }
  thread_.join();
  mailbox_.close();
  reads_.stop();  // reads not started are dropped (their callers got 503 above); running ones finish
  reads_.join();
}

void RpcHost::TaskErrors::taskFailed(kj::Exception&& exception) {
  spdlog::warn("rpc task failed: {}", exception.getDescription().cStr());
}

void RpcHost::deliver(DriverBatch batch) {
  uint64_t dropped = 0;
  mailbox_.post(std::move(batch), &dropped);
  if (dropped > 0) security_metrics_.add_handoff_dropped(dropped);
}

kj::Promise<void> RpcHost::drain_mailbox() {
  return mailbox_.next().then([this](std::vector<DriverBatch> batches) {
    for (DriverBatch& batch : batches) apply_batch(batch);
    return drain_mailbox();
  });
}

void RpcHost::apply_batch(DriverBatch& batch) {
  if (batch.view) {
    view_ = *batch.view;
    release_waiting_reads();
  }
  for (uint64_t delivery : batch.deliveries_taken) {
    auto it = deliveries_.find(delivery);
    if (it == deliveries_.end()) continue;
    if (--queued_deliveries_[it->second.from] == 0) queued_deliveries_.erase(it->second.from);
    if (it->second.waiting.get() != nullptr) it->second.waiting->fulfill();
    deliveries_.erase(it);
  }
  for (auto& [id, reply] : batch.replies) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;  // timed out already
    it->second->fulfill(kj::mv(reply));
    pending_.erase(it);
    pending_writes_.erase(id);
  }
  for (auto& [peer, messages] : batch.messages) {
    if (PeerLink* peer_link = link(peer)) peer_link->send(messages);
  }
}

PeerLink* RpcHost::link(NodeId peer) {
  auto it = links_.find(peer);
  if (it != links_.end()) return it->second.get();
  std::string address;
  auto configured = config_.peers.find(peer);
  if (configured != config_.peers.end()) {
    address = configured->second;
  } else {
    std::map<NodeId, std::string> book = state_.member_addresses();
    auto recorded = book.find(peer);
    if (recorded == book.end()) {
      spdlog::warn("no address known for node {}; its messages are dropped", peer.value());
      return nullptr;
    }
    address = recorded->second;
  }
  auto created = std::make_unique<PeerLink>(*this, peer, address);
  PeerLink* raw = created.get();
  links_.emplace(peer, std::move(created));
  return raw;
}

kj::Promise<void> RpcHost::receive(NodeId from, capnp::List<capnp::Data>::Reader messages) {
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
  // A node that is neither voter nor learner (removed, or never added) is not heard. Before this node knows any
  // membership (a --join node waiting for its first snapshot) every authenticated peer is.
  const bool member = (view_.voters.empty() && view_.learners.empty()) || view_.voters.contains(from) ||
                      view_.learners.contains(from);
  std::vector<replication::Message> decoded;
  decoded.reserve(messages.size());
  for (capnp::Data::Reader bytes : messages) {
    Result<replication::Message> message =
        replication::decode_message(std::string_view(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
    const char* refusal = nullptr;
    if (!message.is_ok()) {
      refusal = "undecodable";
    } else if (message->from != from) {
      refusal = "wrong_sender";
    } else if (message->to != config_.id) {
      refusal = "wrong_recipient";
    } else if (!member) {
      refusal = "not_member";
    }
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

Reply RpcHost::shutting_down() const {
  Reply reply = Reply::error(503, "the node is shutting down; retry on another node");
  reply.result.substatus = kSubstatusNoLeader;
  reply.retry_after_ms = 100;
  reply.served_by = config_.id;
  reply.leader_hint = view_.leader != config_.id ? view_.leader : NodeId(0);
  return reply;
}

std::optional<Reply> RpcHost::shed_if_full(const char* kind) {
  const auto limit = static_cast<size_t>(config_.max_pending_requests);
  if (pending_.size() + waiting_reads_.size() < limit && static_cast<size_t>(reads_queued_.load()) < limit) {
    return std::nullopt;
  }
  static int64_t last_log_ms = 0;
  security_metrics_.add_shed(kind);
  if (log_now(last_log_ms)) {
    spdlog::warn("shedding load: {} requests are waiting on this node (--max-pending-requests {})", pending_.size(),
                 config_.max_pending_requests);
  }
  Reply reply = Reply::error(503, "node " + std::to_string(config_.id.value()) +
                                      " is overloaded (too many requests waiting); nothing was done: retry shortly "
                                      "or on another node");
  reply.result.substatus = kSubstatusOverloaded;
  reply.retry_after_ms = 100;
  reply.served_by = config_.id;
  return reply;
}

kj::Promise<Reply> RpcHost::to_driver(Operation operation) {
  if (stopping_) return shutting_down();  // the driver has stopped: nothing would answer
  if (std::optional<Reply> shed = shed_if_full("driver")) return kj::mv(*shed);
  const uint64_t id = next_request_id_++;
  auto reply = kj::newPromiseAndFulfiller<Reply>();
  pending_.emplace(id, kj::mv(reply.fulfiller));
  if (operation.kind != Operation::Kind::kRead) pending_writes_.insert(id);
  driver_.post([this, id, operation = std::move(operation)]() mutable {
    driver_.on_request(id, std::move(operation));
  });
  return await_reply(id, kj::mv(reply.promise));
}

kj::Promise<Reply> RpcHost::read_async(Operation operation) {
  if (stopping_) return shutting_down();
  if (std::optional<Reply> shed = shed_if_full("read")) return kj::mv(*shed);
  const uint64_t id = next_request_id_++;
  auto reply = kj::newPromiseAndFulfiller<Reply>();
  pending_.emplace(id, kj::mv(reply.fulfiller));
  ++reads_queued_;
  boost::asio::post(reads_, [this, id, leader = view_.leader, operation = std::move(operation)] {
    DriverBatch answer;
    answer.replies.emplace_back(id, serve_read(operation, leader));
    --reads_queued_;
    mailbox_.post(std::move(answer));
  });
  return await_reply(id, kj::mv(reply.promise));
}

kj::Promise<Reply> RpcHost::serve_read_here_or_async(Operation operation) {
  // A point read, one database or container record, or the lists of databases and containers is small, bounded work
  // (one LevelDB lookup, an item of at most 2 MB): here, without two thread hops. Lists of items and queries may read
  // thousands of records: on a read thread.
  const ReadQuery::Kind kind = operation.read.kind;
  if (kind == ReadQuery::Kind::kItems || kind == ReadQuery::Kind::kQuery) return read_async(std::move(operation));
  return serve_read(operation, view_.leader);
}

kj::Promise<Reply> RpcHost::await_reply(uint64_t id, kj::Promise<Reply> reply) {
  const int64_t timeout_ms = config_.request_timeout_ms;
  return reply.exclusiveJoin(timer_->afterDelay(timeout_ms * kj::MILLISECONDS).then([this, id] {
    pending_.erase(id);
    pending_writes_.erase(id);
    Reply timed_out = Reply::error(503, "no answer from the cluster in time (the outcome of a write is unknown)");
    timed_out.result.substatus = kSubstatusOutcomeUnknown;
    timed_out.served_by = config_.id;
    timed_out.leader_hint = view_.leader;
    return timed_out;
  }));
}

kj::Promise<Reply> RpcHost::wait_for_applied(Operation operation, uint64_t required) {
  if (stopping_) return shutting_down();
  if (std::optional<Reply> shed = shed_if_full("read")) return kj::mv(*shed);
  auto ready = kj::newPromiseAndFulfiller<bool>();
  const uint64_t id = next_wait_id_++;
  waiting_reads_.emplace(required, std::make_pair(id, kj::mv(ready.fulfiller)));
  auto served = ready.promise.then([this, operation = kj::mv(operation)](bool go) mutable -> kj::Promise<Reply> {
    if (!go) return shutting_down();
    return serve_read_here_or_async(kj::mv(operation));
  });
  auto behind = timer_->afterDelay(config_.session_wait_ms * kj::MILLISECONDS).then([this, required, id] {
    auto [first, last] = waiting_reads_.equal_range(required);
    for (auto it = first; it != last; ++it) {
      if (it->second.first == id) {
        waiting_reads_.erase(it);
        break;
      }
    }
    return unavailable(kSubstatusReplicaBehind, 50,
                       "this replica has not caught up to the requested session/staleness yet; retry or read from "
                       "another node");
  });
  return served.exclusiveJoin(kj::mv(behind));
}

Reply RpcHost::unavailable(uint32_t substatus, uint32_t retry_after_ms, std::string message) const {
  Reply reply = Reply::error(503, std::move(message));
  reply.result.substatus = static_cast<int>(substatus);
  reply.retry_after_ms = retry_after_ms;
  reply.served_by = config_.id;
  reply.leader_hint = view_.leader;
  return reply;
}

void RpcHost::release_waiting_reads() {
  while (!waiting_reads_.empty() && waiting_reads_.begin()->first <= view_.applied) {
    waiting_reads_.begin()->second.second->fulfill(true);
    waiting_reads_.erase(waiting_reads_.begin());
  }
}

bool RpcHost::fresh_enough(const Operation& operation) const {
  const storage::AppliedState applied = state_.applied();
  switch (operation.consistency) {
    case Consistency::kEventual: return true;
    case Consistency::kSession: return applied.index.value() >= operation.session_token;
    case Consistency::kBounded:
      return view_.leader != NodeId(0) && view_.leader_contact_steady_ms &&
             steady_ms() - *view_.leader_contact_steady_ms <= config_.bounded_staleness_ms &&
             view_.commit <= applied.index.value() + static_cast<uint64_t>(config_.bounded_staleness_entries) &&
             view_.last_ts_micros - applied.ts_micros <= config_.bounded_staleness_ms * 1000;
    case Consistency::kStrong: return false;
  }
  return false;
}

Reply RpcHost::serve_read(const Operation& operation, NodeId leader_hint) {
  const ReadQuery& query = operation.read;
  const std::string container = query.database + "/" + query.container;
  // Meters and metric series exist only for containers that exist: reads of made-up names create neither.
  bool container_exists = false;
  if (!query.container.empty()) {
    if (std::optional<storage::ContainerRecord> record = state_.container_record(query.database, query.container)) {
      container_exists = true;
      const int64_t wait_ms = request_units_.throttle_ms(container, record->throughput, ttl::read_charge(0, false));
      if (wait_ms > 0) {
        Reply throttled = throttled_reply(wait_ms);
        throttled.served_by = config_.id;
        throttled.leader_hint = leader_hint;
        return throttled;
      }
    }
  }
  const storage::AppliedState applied = state_.applied();
  Reply reply{execute_read(state_, query, applied.ts_micros)};
  reply.session_token = std::max(applied.index.value(), operation.session_token);
  reply.served_by = config_.id;
  reply.leader_hint = leader_hint;
  reply.request_charge = read_request_charge(reply.result, operation.consistency == Consistency::kStrong);
  if (container_exists) request_units_.charge(container, op_name(operation), reply.request_charge);
  return reply;
}

kj::Promise<Reply> RpcHost::handle(Operation operation, proto::Request::Reader request, bool forwarded) {
  const auto started = std::chrono::steady_clock::now();
  std::string op = op_name(operation);
  return route(std::move(operation), request, forwarded).then([this, started, op = std::move(op)](Reply reply) {
    metrics_.observe_request(op, reply.result.status,
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    metrics_.add_expired_skipped(reply.result.expired_skipped);
    return reply;
  });
}

kj::Promise<Reply> RpcHost::route(Operation operation, proto::Request::Reader request, bool forwarded) {
  switch (operation.kind) {
    case Operation::Kind::kRead: {
      if (fresh_enough(operation)) return serve_read_here_or_async(std::move(operation));
      if (operation.consistency == Consistency::kSession) {
        const uint64_t required = operation.session_token;
        return wait_for_applied(std::move(operation), required);
      }
      if (operation.consistency == Consistency::kBounded) {
        // The commit index we know is only a bound on staleness while the leader keeps talking to us: a follower
        // cut off from it would otherwise serve ever older state as "bounded".
        if (!view_.leader_contact_steady_ms ||
            steady_ms() - *view_.leader_contact_steady_ms > config_.bounded_staleness_ms) {
          return unavailable(kSubstatusNoLeader, 100,
                             "no recent contact with the leader, so staleness cannot be bounded here; retry on "
                             "another node or read at eventual consistency");
        }
        const uint64_t slack = static_cast<uint64_t>(config_.bounded_staleness_entries);
        return wait_for_applied(std::move(operation), view_.commit > slack ? view_.commit - slack : 0);
      }
      // Strong: the driver confirms leadership (ReadIndex) and says when this node has applied that far.
      Operation read = operation;
      return to_driver(std::move(operation)).then([this, read = std::move(read)](Reply reply) mutable {
        return reply.serve_here ? serve_read_here_or_async(std::move(read)) : kj::Promise<Reply>(kj::mv(reply));
      });
    }
    case Operation::Kind::kClusterStatus:
      return cluster_status();
    default:
      break;
  }
  // Writes and admin changes go to the leader.
  const NodeId leader = view_.leader;
  if (!forwarded && leader != NodeId(0) && leader != config_.id) {
    if (stopping_) return shutting_down();
    if (PeerLink* leader_link = link(leader)) {
      ++forwards_in_flight_;
      auto answered = leader_link->forward(request).attach(kj::defer([this] { --forwards_in_flight_; }));
      auto reached = answered.catch_([this, leader](kj::Exception&& exception) {
        Reply failed = Reply::error(503, "could not reach the leader (node " + std::to_string(leader.value()) +
                                             "): " + exception.getDescription().cStr());
        failed.result.substatus = kSubstatusOutcomeUnknown;
        failed.served_by = config_.id;
        failed.leader_hint = leader;
        return failed;
      });
      // A leader that is stopped or cut off answers nothing and may keep the connection: bound the wait like a
      // request of our own (the forwarded call is cancelled with it).
      return reached.exclusiveJoin(
          timer_->afterDelay(config_.request_timeout_ms * kj::MILLISECONDS).then([this, leader] {
            Reply timed_out = Reply::error(503, "no answer from the leader (node " + std::to_string(leader.value()) +
                                                    ") in time; the write's outcome is unknown (it may still apply)");
            timed_out.result.substatus = kSubstatusOutcomeUnknown;
            timed_out.served_by = config_.id;
            timed_out.leader_hint = leader;
            return timed_out;
          }));
    }
  }
  return to_driver(std::move(operation));
}

std::string RpcHost::own_status_json() const {
  std::string out = "{\"id\":" + std::to_string(config_.id.value()) + ",\"address\":";
  json::write_json_string(advertised_address(config_), out);
  out += ",\"role\":";
  json::write_json_string(role_text(view_.role), out);
  out += ",\"term\":" + std::to_string(view_.term) + ",\"commit\":" + std::to_string(view_.commit) +
         ",\"applied\":" + std::to_string(view_.applied) +
         ",\"appliedTime\":" + std::to_string(view_.applied_ts_micros) +
         ",\"leader\":" + std::to_string(view_.leader.value()) + "}";
  return out;
}

kj::Promise<Reply> RpcHost::cluster_status() {
  std::set<NodeId> members(view_.voters.begin(), view_.voters.end());
  members.insert(view_.learners.begin(), view_.learners.end());
  for (const auto& [id, address] : config_.peers) members.insert(id);
  members.insert(config_.id);
  kj::Vector<kj::Promise<std::string>> statuses;
  for (NodeId member : members) {
    if (member == config_.id) {
      const std::string own = own_status_json();
      statuses.add(own.substr(0, own.size() - 1) + ",\"reachable\":true}");
      continue;
    }
    PeerLink* peer_link = link(member);
    const std::string address = peer_link != nullptr ? peer_link->address() : std::string();
    auto unreachable = [member, address]() {
      std::string out = "{\"id\":" + std::to_string(member.value()) + ",\"address\":";
      json::write_json_string(address, out);
      return out + ",\"reachable\":false}";
    };
    if (peer_link == nullptr) {
      statuses.add(unreachable());
      continue;
    }
    statuses.add(peer_link->node_status()
                     .then([](std::string status) { return status.substr(0, status.size() - 1) + ",\"reachable\":true}"; })
                     .catch_([unreachable](kj::Exception&&) { return unreachable(); })
                     .exclusiveJoin(timer_->afterDelay(1 * kj::SECONDS).then(unreachable)));
  }
  return kj::joinPromises(statuses.releaseAsArray()).then([this](kj::Array<std::string> nodes) {
    Reply reply;
    std::string body = "{\"leader\":" + std::to_string(view_.leader.value()) + ",\"nodes\":[";
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i > 0) body += ",";
      body += nodes[i];
    }
    body += "]}";
    reply.result.body = std::move(body);
    reply.served_by = config_.id;
    reply.leader_hint = view_.leader;
    return reply;
  });
}

}  // namespace mayfly::node
