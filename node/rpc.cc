#include "node/rpc.h"

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <deque>

#include "replication/codec.h"
#include "storage/json.h"
#include "ttl/request_units.h"

namespace mayfly::node {
namespace {

constexpr size_t kMaxMessagesPerDelivery = 512;
constexpr size_t kMaxBytesPerDelivery = 8 << 20;
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

}  // namespace

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

  proto::Peer::Client capability() {
    if (peer_capability_.get() == nullptr) {
      client_ = kj::heap<capnp::EzRpcClient>(address_, 0, reader_options());
      auto request = client_->getMain<proto::Mayfly>().openPeerRequest();
      request.setFrom(host_.config().id.value());
      request.setCluster(host_.config().cluster);
      peer_capability_ = kj::heap<proto::Peer::Client>(request.send().getPeer());
    }
    return *peer_capability_;
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
    client_ = nullptr;
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
  kj::Own<capnp::EzRpcClient> client_;
  kj::Own<proto::Peer::Client> peer_capability_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  bool sending_ = false;
  bool waiting_to_reconnect_ = false;
  int64_t backoff_ms_ = 50;
  kj::Own<kj::TaskSet> tasks_;  // last: destroyed first, cancelling callbacks that use the members above
};

namespace {

class SessionImpl final : public proto::Session::Server {
 public:
  explicit SessionImpl(RpcHost& host) : host_(host) {}

  kj::Promise<void> execute(ExecuteContext context) override {
    auto request = context.getParams().getRequest();
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

 private:
  RpcHost& host_;
};

class PeerImpl final : public proto::Peer::Server {
 public:
  PeerImpl(RpcHost& host, NodeId from) : host_(host), from_(from) {}

  kj::Promise<void> deliver(DeliverContext context) override {
    host_.receive(from_, context.getParams().getMessages());
    return kj::READY_NOW;
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

class MayflyImpl final : public proto::Mayfly::Server {
 public:
  explicit MayflyImpl(RpcHost& host) : host_(host) {}

  kj::Promise<void> openSession(OpenSessionContext context) override {
    context.getResults().setSession(kj::heap<SessionImpl>(host_));
    return kj::READY_NOW;
  }

  kj::Promise<void> openPeer(OpenPeerContext context) override {
    auto params = context.getParams();
    if (params.getCluster() != kj::StringPtr(host_.config().cluster.c_str())) {
      return KJ_EXCEPTION(FAILED, "peer belongs to another cluster", params.getCluster());
    }
    context.getResults().setPeer(kj::heap<PeerImpl>(host_, NodeId(params.getFrom())));
    return kj::READY_NOW;
  }

 private:
  RpcHost& host_;
};

}  // namespace

RpcHost::RpcHost(const NodeConfig& config, Driver& driver, metrics::Metrics& metrics,
                 RequestUnitAccount& request_units)
    : config_(config), driver_(driver), metrics_(metrics), request_units_(request_units), state_(driver.state()) {
  view_.self = config.id;
}

RpcHost::~RpcHost() noexcept { stop(); }

Status RpcHost::start() {
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
  kj::Maybe<kj::Own<capnp::EzRpcServer>> maybe_server;
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] {
    maybe_server = kj::heap<capnp::EzRpcServer>(kj::heap<MayflyImpl>(*this), config_.listen, 0, reader_options());
  })) {
    started.set_value(Status::unavailable("cannot listen on " + config_.listen + ": " +
                                          exception->getDescription().cStr()));
    return;
  }
  capnp::EzRpcServer& server = *KJ_ASSERT_NONNULL(maybe_server);
  kj::WaitScope& wait_scope = server.getWaitScope();
  timer_ = &server.getIoProvider().getTimer();
  tasks_ = kj::heap<kj::TaskSet>(task_errors_);
  executor_ = kj::getCurrentThreadExecutor().addRef();
  auto shutdown = kj::newPromiseAndFulfiller<void>();
  shutdown_ = kj::mv(shutdown.fulfiller);
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] { server.getPort().wait(wait_scope); })) {
    started.set_value(Status::unavailable("cannot listen on " + config_.listen + ": " +
                                          exception->getDescription().cStr()));
    return;
  }
  spdlog::info("node {} listening on {}", config_.id.value(), config_.listen);
  started.set_value(Status::ok());
  shutdown.promise.wait(wait_scope);
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
  for (auto& [id, fulfiller] : pending_) fulfiller->fulfill(shutting_down());
  pending_.clear();
  timer_->afterDelay(kShutdownFlushMs * kj::MILLISECONDS).wait(wait_scope);
  links_.clear();
  tasks_ = nullptr;
}

void RpcHost::stop() {
  if (!running_) return;
  running_ = false;
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] { executor_->executeSync([this] { shutdown_->fulfill(); }); })) {
    spdlog::warn("stopping the RPC loop: {}", exception->getDescription().cStr());
  }
  thread_.join();
}

void RpcHost::TaskErrors::taskFailed(kj::Exception&& exception) {
  spdlog::warn("rpc task failed: {}", exception.getDescription().cStr());
}

void RpcHost::deliver(DriverBatch batch) {
  if (!running_) return;
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] { executor_->executeSync([&] { apply_batch(batch); }); })) {
    spdlog::warn("driver output lost (RPC loop gone): {}", exception->getDescription().cStr());
  }
}

void RpcHost::apply_batch(DriverBatch& batch) {
  if (batch.view) view_ = *batch.view;
  for (auto& [id, reply] : batch.replies) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;  // timed out already
    it->second->fulfill(kj::mv(reply));
    pending_.erase(it);
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

void RpcHost::receive(NodeId from, capnp::List<capnp::Data>::Reader messages) {
  const auto refuse = [&](const std::string& why) {
    metrics_.add_peer_message_rejected("undecodable");
    if (std::optional<uint64_t> held_back = undecodable_warnings_.admit(std::to_string(from.value()), steady_ms())) {
      spdlog::warn("refused a message from node {} (undecodable): {}; {} more like it not logged", from.value(), why,
                   *held_back);
    }
  };
  // A sender never puts more than kMaxMessagesPerDelivery in one delivery; a list of millions of empty elements fits
  // in the traversal limit (8 bytes each) but is not decoded, nor is room reserved for it.
  if (messages.size() > kMaxMessagesPerDelivery) {
    refuse("a delivery of " + std::to_string(messages.size()) + " messages (at most " +
           std::to_string(kMaxMessagesPerDelivery) + ")");
    return;
  }
  std::vector<replication::Message> decoded;
  decoded.reserve(messages.size());
  for (capnp::Data::Reader bytes : messages) {
    Result<replication::Message> message =
        replication::decode_message(std::string_view(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
    if (!message.is_ok()) {
      refuse(message.status().to_string());
      continue;
    }
    decoded.push_back(std::move(message).value());
  }
  boost::asio::post(driver_.io(), [this, decoded = std::move(decoded)]() mutable {
    driver_.on_messages(std::move(decoded));
  });
}

Reply RpcHost::shutting_down() const {
  Reply reply = Reply::error(503, "the node is shutting down; retry on another node");
  reply.result.substatus = kSubstatusNoLeader;
  reply.retry_after_ms = 100;
  reply.served_by = config_.id;
  reply.leader_hint = view_.leader != config_.id ? view_.leader : NodeId(0);
  return reply;
}

kj::Promise<Reply> RpcHost::to_driver(Operation operation) {
  if (stopping_) return shutting_down();  // the driver has stopped: nothing would answer
  const uint64_t id = next_request_id_++;
  auto reply = kj::newPromiseAndFulfiller<Reply>();
  pending_.emplace(id, kj::mv(reply.fulfiller));
  boost::asio::post(driver_.io(), [this, id, operation = std::move(operation)]() mutable {
    driver_.on_request(id, std::move(operation));
  });
  const int64_t timeout_ms = config_.request_timeout_ms;
  return reply.promise.exclusiveJoin(timer_->afterDelay(timeout_ms * kj::MILLISECONDS).then([this, id] {
    pending_.erase(id);
    Reply timed_out = Reply::error(503, "no answer from the cluster in time (the outcome of a write is unknown)");
    timed_out.result.substatus = kSubstatusOutcomeUnknown;
    timed_out.served_by = config_.id;
    timed_out.leader_hint = view_.leader;
    return timed_out;
  }));
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

Reply RpcHost::serve_read(const Operation& operation) {
  const ReadQuery& query = operation.read;
  const std::string container = query.database + "/" + query.container;
  if (!query.container.empty()) {
    if (std::optional<storage::ContainerRecord> record = state_.container_record(query.database, query.container)) {
      const int64_t wait_ms = request_units_.throttle_ms(container, record->throughput, ttl::read_charge(0, false));
      if (wait_ms > 0) {
        Reply throttled = throttled_reply(wait_ms);
        throttled.served_by = config_.id;
        throttled.leader_hint = view_.leader;
        return throttled;
      }
    }
  }
  const storage::AppliedState applied = state_.applied();
  Reply reply{execute_read(state_, query, applied.ts_micros)};
  reply.session_token = std::max(applied.index.value(), operation.session_token);
  reply.served_by = config_.id;
  reply.leader_hint = view_.leader;
  reply.request_charge = read_request_charge(reply.result, operation.consistency == Consistency::kStrong);
  if (!query.container.empty()) request_units_.charge(container, op_name(operation), reply.request_charge);
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
      if (fresh_enough(operation)) return serve_read(operation);
      Operation read = operation;
      return to_driver(std::move(operation)).then([this, read = std::move(read)](Reply reply) {
        return reply.serve_here ? serve_read(read) : reply;
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
      return answered.catch_([this, leader](kj::Exception&& exception) {
        Reply failed = Reply::error(503, "could not reach the leader (node " + std::to_string(leader.value()) +
                                             "): " + exception.getDescription().cStr());
        failed.result.substatus = kSubstatusOutcomeUnknown;
        failed.served_by = config_.id;
        failed.leader_hint = leader;
        return failed;
      });
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
