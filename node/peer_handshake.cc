#include "node/peer_handshake.h"

#include <spdlog/spdlog.h>

#include "common/auth.h"
#include "node/rpc_common.h"

namespace mayfly::node {
namespace {

constexpr size_t kMinNonceBytes = 16;
constexpr size_t kMaxNonceBytes = 64;

}  // namespace

using namespace rpc_detail;

kj::Promise<void> HandshakeNonces::hello(HelloCall& context) {
  const capnp::Data::Reader nonce = context.getParams().getClientNonce();
  if (nonce.size() < kMinNonceBytes || nonce.size() > kMaxNonceBytes) {
    return KJ_EXCEPTION(FAILED, "hello: the client nonce must be 16 to 64 random bytes");
  }
  client_ = bytes_of(nonce);
  server_ = auth::random_nonce();
  context.getResults().setServerNonce(data_of(server_));
  return kj::READY_NOW;
}

namespace {

Result<PeerOpened> check_open_peer(const NodeConfig& config, const std::vector<std::string>& accepted_secrets,
                                   proto::Mayfly::OpenPeerParams::Reader params, const std::string& client_nonce,
                                   const std::string& server_nonce, metrics::SecurityMetrics& security_metrics,
                                   int64_t& last_log_ms) {
  if (params.getCluster() != kj::StringPtr(config.cluster.c_str())) {
    return Status::invalid_argument("peer belongs to another cluster: " + std::string(params.getCluster().cStr()));
  }
  const uint64_t from = params.getFrom();
  if (from == 0 || from == config.id.value()) {
    return Status::invalid_argument("a peer must name another node of the cluster: " + std::to_string(from));
  }
  // Every member runs on the same clock (docs/ttl.md "Virtual clock"): a real-clock leader would move a virtual
  // cluster's time, and a virtual one would freeze a real cluster's.
  const std::string peer_clock = params.getClock() == kj::StringPtr("virtual") ? "virtual" : "real";
  const std::string own_clock = clock_mode_name(config.virtual_clock);
  if (peer_clock != own_clock) {
    if (log_now(last_log_ms)) {
      spdlog::error("refused node {} as a peer: it runs with --clock {}, this node with --clock {}; start every node "
                    "of a cluster with the same --clock",
                    from, peer_clock, own_clock);
    }
    return Status::invalid_argument("peer refused: it runs with --clock " + peer_clock + ", this node with --clock " +
                                    own_clock + "; every node of a cluster needs the same --clock");
  }
  PeerOpened opened{NodeId(from), std::string(), std::string()};
  if (accepted_secrets.empty()) return opened;
  // Any accepted secret (the file may hold the old and the new one while it rotates); the answer proves the one the
  // peer used.
  const std::string* matched = nullptr;
  for (const std::string& secret : accepted_secrets) {
    const bool equal =
        !server_nonce.empty() &&
        auth::constant_time_equal(auth::peer_client_proof(secret, config.cluster, from, client_nonce, server_nonce),
                                  bytes_of(params.getProof()));
    if (equal && matched == nullptr) matched = &secret;
  }
  if (matched == nullptr) {
    security_metrics.add_auth_failure("peer");
    if (log_now(last_log_ms)) {
      spdlog::warn("refused a peer connection claiming to be node {}: it did not prove it holds the cluster secret",
                   from);
    }
    return Status(StatusCode::kUnauthorized, "peer authentication failed: hello first, then prove the cluster secret");
  }
  opened.server_proof =
      auth::peer_server_proof(*matched, config.cluster, config.id.value(), client_nonce, server_nonce);
  opened.secret_id = auth::sha256_hex(*matched);
  return opened;
}

}  // namespace

Result<PeerOpened> open_peer(const NodeConfig& config, const std::vector<std::string>& accepted_secrets,
                             OpenPeerCall& context, HandshakeNonces& nonces, metrics::SecurityMetrics& security_metrics,
                             int64_t& last_log_ms) {
  Result<PeerOpened> opened = check_open_peer(config, accepted_secrets, context.getParams(), nonces.client(),
                                              nonces.server(), security_metrics, last_log_ms);
  nonces.used();
  if (opened.is_ok() && !opened->server_proof.empty()) {
    context.getResults().setServerProof(data_of(opened->server_proof));
  }
  return opened;
}

}  // namespace mayfly::node
