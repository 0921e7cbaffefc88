// PeerLink (node/peer_link.h): the handshake, batched Raft deliveries, forwarded requests, reconnects.
#include "node/peer_link.h"

#include "api/codec.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/auth.h"
#include "common/peer_preamble.h"

namespace mayfly::node {

using namespace rpc_detail;

Result<std::unique_ptr<tls::Context>> node_tls(const NodeConfig& config, kj::Timer& timer) {
  if (!config.tls()) return std::unique_ptr<tls::Context>();
  return tls::Context::load(config.tls_ca_file, config.tls_cert_file, config.tls_key_file, &timer,
                            config.handshake_timeout_ms);
}

std::optional<std::string> peer_address(const NodeConfig& config, const storage::StoreReader& state, NodeId peer) {
  auto configured = config.peers.find(peer);
  if (configured != config.peers.end()) return configured->second;
  std::map<NodeId, std::string> book = state.member_addresses();
  auto recorded = book.find(peer);
  if (recorded == book.end()) {
    spdlog::warn("no address known for node {}; what is sent to it is dropped", peer.value());
    return std::nullopt;
  }
  return recorded->second;
}

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

kj::Promise<Reply> PeerLink::forward(const api::Request& request) {
  const uint64_t generation = generation_;
  auto call = capability().forwardRequest(api::size_hint(request));
  api::encode_request(request, call.initRequest());
  return call.send().then(
      [](capnp::Response<proto::Peer::ForwardResults> response) { return decode_reply(response.getResponse()); },
      [this, generation](kj::Exception&& exception) -> Reply {
        drop_later(generation);  // the next call connects again
        kj::throwFatalException(kj::mv(exception));
      });
}

kj::Promise<std::string> PeerLink::node_status() {
  const uint64_t generation = generation_;
  return capability().nodeStatusRequest().send().then(
      [](capnp::Response<proto::Peer::NodeStatusResults> response) { return std::string(response.getStatus()); },
      [this, generation](kj::Exception&& exception) -> std::string {
        drop_later(generation);
        kj::throwFatalException(kj::mv(exception));
      });
}

void PeerLink::warm() { capability(); }

void PeerLink::drop_later(uint64_t generation) {
  // Not from inside a callback of the connection being dropped: on the next turn of the loop.
  tasks_->add(kj::evalLater([this, generation] {
    if (generation != generation_) return;  // dropped (and maybe connected again) already
    ++generation_;
    peer_capability_ = nullptr;
    connection_ = nullptr;
    proved_secret_id_.clear();
  }));
}

void PeerLink::Errors::taskFailed(kj::Exception&& exception) {
  spdlog::debug("peer link task failed: {}", exception.getDescription().cStr());
}

proto::Peer::Client PeerLink::capability() {
  if (peer_capability_.get() == nullptr) {
    // A connection or handshake that fails is dropped, so the next call tries again rather than failing with it.
    peer_capability_ = kj::heap<proto::Peer::Client>(
        connect().catch_([this, generation = generation_](kj::Exception&& exception) -> proto::Peer::Client {
          drop_later(generation);
          kj::throwFatalException(kj::mv(exception));
        }));
  }
  return *peer_capability_;
}

kj::Promise<proto::Peer::Client> PeerLink::connect() {
  return context_.network()
      .parseAddress(address_)
      .then([](kj::Own<kj::NetworkAddress> address) { return address->connect(); })
      .then([this](kj::Own<kj::AsyncIoStream> stream) -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
        if (kind_ != Kind::kRaft) return kj::mv(stream);
        // A Raft link says so before anything else: the peer's listener hands it to its Raft thread.
        auto written = stream->write(kPeerPreamble.data(), kPeerPreamble.size());
        return written.then([stream = kj::mv(stream)]() mutable { return kj::mv(stream); });
      })
      .then([this](kj::Own<kj::AsyncIoStream> stream) -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
        tls::Context* tls = context_.tls();
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
        if (kind_ == Kind::kRequests) {
          // A request link sends nothing on its own: it learns of a lost connection here (a Raft link from its next
          // delivery), so the next call connects again instead of failing on the dead one.
          tasks_->add(connection_->network.onDisconnect().then([this, generation = generation_] {
            drop_later(generation);
          }));
        }
        const std::string client_nonce = auth::random_nonce();
        auto hello = connection_->bootstrap.helloRequest();
        hello.setClientNonce(data_of(client_nonce));
        return hello.send().then([this, client_nonce](capnp::Response<proto::Mayfly::HelloResults> greeted) {
          const std::string server_nonce = bytes_of(greeted.getServerNonce());
          const NodeConfig& config = context_.config();
          // The secret proved with is the one the answer is checked against (the file may be re-read meanwhile).
          std::string secret = context_.cluster_secret();
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
              const std::string expected = auth::peer_server_proof(shared, context_.config().cluster, peer_.value(),
                                                                   client_nonce, server_nonce);
              if (!auth::constant_time_equal(expected, bytes_of(opened.getServerProof()))) {
                context_.security_metrics().add_auth_failure("peer");
                return proto::Peer::Client(KJ_EXCEPTION(
                    FAILED, "the process at this address did not prove it is node " +
                                std::to_string(peer_.value()) + " of this cluster (wrong cluster secret?)",
                    address_));
              }
              // The file may have been re-read during the handshake: a link never outlives its secret.
              std::string secret_id = auth::sha256_hex(shared);
              if (!context_.secret_accepted(secret_id)) {
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
  size_t count = 0, bytes = 0;
  while (count < queue_.size() && count < kMaxMessagesPerDelivery && bytes < kMaxBytesPerDelivery) {
    bytes += queue_[count].size();
    ++count;
  }
  // The first segment sized for what it carries (Cap'n Proto starts with a zeroed 8 KiB one otherwise).
  auto request = capability().deliverRequest(capnp::MessageSize{32 + 2 * count + bytes / 8, 0});
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
  ++generation_;
  peer_capability_ = nullptr;
  connection_ = nullptr;
  proved_secret_id_.clear();
  waiting_to_reconnect_ = true;
  // Messages queued meanwhile stay queued (bounded); Raft tolerates the loss of those dropped.
  tasks_->add(context_.timer().afterDelay(backoff_ms_ * kj::MILLISECONDS).then([this] {
    waiting_to_reconnect_ = false;
    pump();
  }));
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
}

bool PeerLink::drop_if_secret_removed() {
  if (proved_secret_id_.empty() || context_.secret_accepted(proved_secret_id_)) return false;
  // A send or forward in flight on it fails (on_failure reconnects; a forwarded write answers "outcome unknown").
  proved_secret_id_.clear();
  ++generation_;
  peer_capability_ = nullptr;
  connection_ = nullptr;
  return true;
}

}  // namespace mayfly::node
