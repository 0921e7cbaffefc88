// RpcHost's peer side (node/rpc.h): the outgoing link to each peer (PeerLink), peer deliveries coming in (checked,
// then handed to the driver with backpressure), and the driver's batches coming back through the mailbox.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/auth.h"
#include "node/peer_admission.h"
#include "node/rpc_internal.h"
#include "replication/codec.h"

namespace mayfly::node {

using namespace rpc_detail;

// ---- PeerLink ------------------------------------------------------------------------------------------------------

void PeerLink::send(std::vector<std::string>& messages) {
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

kj::Promise<Reply> PeerLink::forward(proto::Request::Reader request, uint64_t owner) {
  auto call = capability().forwardRequest();
  call.setRequest(request);
  if (request.hasWriteId()) call.getRequest().getWriteId().setOwner(owner);
  return call.send().then([](capnp::Response<proto::Peer::ForwardResults> response) {
    return decode_reply(response.getResponse());
  });
}

kj::Promise<std::string> PeerLink::node_status() {
  return capability().nodeStatusRequest().send().then(
      [](capnp::Response<proto::Peer::NodeStatusResults> response) { return std::string(response.getStatus()); });
}

void PeerLink::Errors::taskFailed(kj::Exception&& exception) {
  spdlog::debug("peer link task failed: {}", exception.getDescription().cStr());
}

proto::Peer::Client PeerLink::capability() {
  if (peer_capability_.get() == nullptr) {
    peer_capability_ = kj::heap<proto::Peer::Client>(connect());
  }
  return *peer_capability_;
}

kj::Promise<proto::Peer::Client> PeerLink::connect() {
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
          open.setClock(clock_mode_name(config.virtual_clock));
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
              // The file may have been re-read during the handshake: a link never outlives its secret.
              std::string secret_id = auth::sha256_hex(shared);
              if (!host_.secret_accepted(secret_id)) {
                return proto::Peer::Client(KJ_EXCEPTION(
                    FAILED, "the cluster secret this link proved was removed from the file meanwhile", address_));
              }
              proved_secret_id_ = std::move(secret_id);
            }
            return opened.getPeer();
          });
        });
      });
}

void PeerLink::pump() {
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

void PeerLink::on_failure(const kj::Exception& exception) {
  if (waiting_to_reconnect_) return;
  if (std::string_view(exception.getDescription().cStr()).find("--clock") != std::string_view::npos &&
      log_now(clock_refusal_log_ms_)) {
    spdlog::error("node {} at {} refuses this node: {}", peer_.value(), address_, exception.getDescription().cStr());
  }
  spdlog::debug("link to node {} at {} failed ({}); retrying in {} ms", peer_.value(), address_,
                exception.getDescription().cStr(), backoff_ms_);
  peer_capability_ = nullptr;
  connection_ = nullptr;
  proved_secret_id_.clear();
  waiting_to_reconnect_ = true;
  // Messages queued meanwhile stay queued (bounded); Raft tolerates the loss of those dropped.
  tasks_->add(host_.timer().afterDelay(backoff_ms_ * kj::MILLISECONDS).then([this] {
    waiting_to_reconnect_ = false;
    pump();
  }));
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
}

bool PeerLink::drop_if_secret_removed() {
  if (proved_secret_id_.empty() || host_.secret_accepted(proved_secret_id_)) return false;
  // A send or forward in flight on it fails (on_failure reconnects; a forwarded write answers "outcome unknown").
  proved_secret_id_.clear();
  peer_capability_ = nullptr;
  connection_ = nullptr;
  return true;
}

// ---- RpcHost: the driver's output, peer links, peer deliveries ----------------------------------------------------

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

bool RpcHost::may_forward(NodeId from) const {
  const bool knows_membership = !view_.voters.empty() || !view_.learners.empty();
  return !knows_membership || view_.voters.contains(from) || view_.learners.contains(from) || view_.leader == from;
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

}  // namespace mayfly::node
