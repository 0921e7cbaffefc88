// The Cap'n Proto interfaces a connection of RpcHost (node/rpc.h) serves: the bootstrap object with the handshake
// (hello, then openSession with a client key's proof or openPeer with the cluster secret's), a client Session (its
// key's role re-checked on every request: 401/403), and the Peer API of an authenticated node's request link
// (forwarded requests, nodeStatus; its Raft messages come over node/peer_transport.h).
#include <spdlog/spdlog.h>

#include "api/codec.h"
#include "common/auth.h"
#include "node/peer_handshake.h"
#include "node/rpc_internal.h"
#include "storage/write_dedup.h"

namespace mayfly::node {
namespace {

using namespace rpc_detail;

}  // namespace

Role required_role(std::optional<api::Kind> kind) {
  if (!kind) return Role::kReadWrite;
  switch (*kind) {
    case api::Kind::kListDatabases:
    case api::Kind::kListOffers:  // throughput figures, like getContainer
    case api::Kind::kGetContainer:
    case api::Kind::kListContainers:
    case api::Kind::kReadItem:
    case api::Kind::kListItems:
    case api::Kind::kQuery:
    case api::Kind::kReadChangeFeed:  // item images, like listItems
    case api::Kind::kClusterStatus:
    case api::Kind::kContainerForecast:  // counts and sizes only, like getContainer and cluster status
      return Role::kReadOnly;
    case api::Kind::kAddMember:
    case api::Kind::kRemoveMember:
    case api::Kind::kTransferLeader:
    case api::Kind::kAdvanceClock:
    case api::Kind::kBackupOpen:
    case api::Kind::kBackupRead:
      return Role::kAdmin;
    case api::Kind::kCreateDatabase:
    case api::Kind::kDeleteDatabase:
    case api::Kind::kUpdateDatabase:
    case api::Kind::kCreateContainer:
    case api::Kind::kUpdateContainer:
    case api::Kind::kDeleteContainer:
    case api::Kind::kCreateItem:
    case api::Kind::kUpsertItem:
    case api::Kind::kReplaceItem:
    case api::Kind::kDeleteItem:
    case api::Kind::kPatchItem:
    case api::Kind::kExecuteBatch:
    case api::Kind::kDeletePartition:
      return Role::kReadWrite;
    case api::Kind::kSetHold:
    case api::Kind::kReleaseHold:
    case api::Kind::kListHolds:
    case api::Kind::kListHoldAudit:
      return Role::kCompliance;
  }
  return Role::kReadWrite;
}

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
    return serve(context.getParams().getRequest()).then([context](Reply reply) mutable {
      encode_reply(reply, context.getResults(reply_size_hint(reply)).initResponse());
    });
  }

  // Each request of the batch is served as if it came alone (admitted against the connection's and the key's
  // budgets, authorized, decoded, routed), in list order, so the writes of one batch reach the driver in one hand-off
  // (RpcHost::to_driver) and their answers leave in one message.
  kj::Promise<void> executeBatch(ExecuteBatchContext context) override {
    auto requests = context.getParams().getRequests();
    if (requests.size() > kMaxBatchRequests) {
      Reply refused = Reply::error(StatusCode::kInvalidArgument,
                                   "a batch holds at most " + std::to_string(kMaxBatchRequests) + " requests, this one " +
                                       std::to_string(requests.size()) + "; nothing in it was done: send fewer");
      refused.served_by = host_.config().id;
      auto responses = context.getResults().initResponses(requests.size());
      for (auto response : responses) encode_reply(refused, response);
      return kj::READY_NOW;
    }
    auto replies = kj::heapArrayBuilder<kj::Promise<Reply>>(requests.size());
    for (proto::Request::Reader request : requests) {
      // One request failing inside the node (its promise broken) must not take the others' answers with it; its own
      // outcome is unknown to this node, as for a write the node stopped during.
      replies.add(serve(request).catch_([id = host_.config().id](kj::Exception&& exception) {
        Reply failed = Reply::error(StatusCode::kUnavailable,
                                    "the node failed while serving this request (" +
                                        std::string(exception.getDescription().cStr()) +
                                        "); a write's outcome is unknown: read, or re-send it with its write id");
        failed.result.substatus = static_cast<int>(kSubstatusOutcomeUnknown);
        failed.served_by = id;
        return failed;
      }));
    }
    return kj::joinPromises(replies.finish()).then([context](kj::Array<Reply> answers) mutable {
      capnp::MessageSize hint{8, 0};
      for (const Reply& answer : answers) hint.wordCount += reply_size_hint(answer).wordCount;
      auto responses = context.getResults(hint).initResponses(answers.size());
      for (size_t i = 0; i < answers.size(); ++i) encode_reply(answers[i], responses[i]);
    });
  }

 private:
  // One request: refused before anything is decoded or executed when the key's or the connection's budget is spent,
  // then authorized, decoded and handed to the host. `request` is read before the first suspension only.
  kj::Promise<Reply> serve(proto::Request::Reader request) {
    if (std::optional<Reply> refused = host_.call_started(connection_, key_id_)) return kj::mv(*refused);
    return run(request).attach(kj::defer([host = &host_, connection = connection_, key = key_id_] {
      host->call_finished(connection, key);
    }));
  }

  kj::Promise<Reply> run(proto::Request::Reader request) {
    if (std::optional<Reply> refused = authorize(request)) {
      refused->served_by = host_.config().id;
      return kj::mv(*refused);
    }
    Result<api::Request> operation = decode_request(request);
    if (!operation.is_ok()) {
      Reply reply{storage::OpResult::error(operation.status())};
      reply.served_by = host_.config().id;
      return reply;
    }
    // The write is the key's: its exactly-once record lives apart from every other key's (storage/write_dedup.h).
    // An open node's sessions are all the anonymous owner.
    std::optional<api::WriteId>& write_id = operation.value().write_id;
    if (write_id && !host_.keyring().open()) write_id->owner = storage::dedup_owner_of(key_name_);
    set_hold_actor(operation.value(), host_.keyring().open() ? std::string() : key_name_);
    return host_.handle(std::move(operation.value()), false, key_id_);
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
      return Reply::error(StatusCode::kUnauthorized, std::move(message));
    }
    const Role needed = required_role(api::kind_of(request.which()));
    if (!role_allows(role, needed)) {
      host_.security_metrics().add_auth_failure("forbidden");
      return Reply::error(StatusCode::kForbidden, "the key '" + key_name_ + "' has role " +
                                                      std::string(role_name(role)) + "; this operation needs " +
                                                      std::string(role_name(needed)) +
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

// The peer API for one authenticated node on the RPC host's listener (its request link): it speaks only as `from`,
// the id it proved. Raft messages are refused here (they come over the Raft transport); a forwarded request is
// executed only for a member (or the leader this node follows, or any peer before this node knows its membership); and
// nothing runs once the secret the link proved has been removed from the file (the reload closes the connection too;
// this covers the second before it).
class PeerImpl final : public proto::Peer::Server {
 public:
  PeerImpl(RpcHost& host, NodeId from, std::string secret_id)
      : host_(host), from_(from), secret_id_(std::move(secret_id)) {}

  // Raft messages go over the Raft transport only (node/peer_transport.h), never the thread that serves clients.
  kj::Promise<void> deliver(DeliverContext) override {
    return KJ_EXCEPTION(FAILED, "Raft messages are taken only on the Raft transport: a connection that begins with the "
                                "peer preamble (common/peer_preamble.h); a node that sends them here runs an older "
                                "Mayfly");
  }

  kj::Promise<void> forward(ForwardContext context) override {
    if (!proved_secret_still_held()) return secret_removed();
    if (!host_.may_forward(from_)) {
      host_.security_metrics().add_auth_failure("peer_not_member");
      if (log_now(last_refusal_log_ms_)) {
        spdlog::warn("refused a request forwarded by node {}: it is not a member of this node's cluster", from_.value());
      }
      Reply refused = Reply::error(StatusCode::kForbidden, "node " + std::to_string(from_.value()) +
                                                               " is not a member: it may not forward requests");
      refused.served_by = host_.config().id;
      encode_reply(refused, context.getResults(reply_size_hint(refused)).initResponse());
      return kj::READY_NOW;
    }
    auto request = context.getParams().getRequest();
    Result<api::Request> operation = decode_request(request);
    if (!operation.is_ok()) {
      encode_reply(Reply{storage::OpResult::error(operation.status())}, context.getResults().initResponse());
      return kj::READY_NOW;
    }
    // The owner of a forwarded write is the one the forwarding node authenticated, trusted only from a peer that
    // proved the cluster secret; from any other, the write is anonymous (storage/write_dedup.h).
    std::optional<api::WriteId>& write_id = operation.value().write_id;
    if (write_id && !secret_id_.empty() && request.hasWriteId()) write_id->owner = request.getWriteId().getOwner();
    if (!secret_id_.empty()) {
      if (request.isSetHold()) set_hold_actor(operation.value(), request.getSetHold().getActor());
      if (request.isReleaseHold()) set_hold_actor(operation.value(), request.getReleaseHold().getActor());
    }
    return host_.handle(std::move(operation.value()), true).then([context](Reply reply) mutable {
      encode_reply(reply, context.getResults(reply_size_hint(reply)).initResponse());
    });
  }

  kj::Promise<void> nodeStatus(NodeStatusContext context) override {
    if (!proved_secret_still_held()) return secret_removed();
    context.getResults().setStatus(host_.own_status_json());
    return kj::READY_NOW;
  }

 private:
  bool proved_secret_still_held() const { return secret_id_.empty() || host_.secret_accepted(secret_id_); }
  kj::Promise<void> secret_removed() {
    host_.security_metrics().add_auth_failure("peer");
    return KJ_EXCEPTION(DISCONNECTED, "the cluster secret this peer link proved is no longer accepted; reconnect");
  }

  RpcHost& host_;
  NodeId from_;
  const std::string secret_id_;  // SHA-256 (hex) of the secret proved; "" on a node without one
  static inline int64_t last_refusal_log_ms_ = 0;  // kj thread only
};

// The bootstrap object of one connection: the handshake (hello, then openSession or openPeer).
class MayflyImpl final : public proto::Mayfly::Server {
 public:
  MayflyImpl(RpcHost& host, uint64_t connection) : host_(host), connection_(connection) {}

  kj::Promise<void> hello(HelloContext context) override { return nonces_.hello(context); }

  kj::Promise<void> openSession(OpenSessionContext context) override {
    host_.refresh_keys();
    Keyring& keyring = host_.keyring();
    auto results = context.getResults();
    if (keyring.open()) {
      if (std::optional<std::string> refused = host_.mark_authenticated(connection_, false, std::string())) {
        return kj::Exception(kj::Exception::Type::OVERLOADED, __FILE__, __LINE__, kj::str(refused->c_str()));
      }
      results.setSession(kj::heap<SessionImpl>(host_, connection_, std::string(), "open", nullptr));
      return kj::READY_NOW;
    }
    const capnp::Data::Reader proof = context.getParams().getProof();
    std::optional<Keyring::Match> match;
    if (!nonces_.server().empty() && proof.size() > 0) {
      match = keyring.match(nonces_.client(), nonces_.server(), bytes_of(proof));
    }
    const bool had_proof = proof.size() > 0;
    nonces_.used();  // one open per hello
    if (!match) {
      // Still a session, so the caller gets a 401 with a message rather than a broken connection.
      results.setSession(
          kj::heap<SessionImpl>(host_, connection_, std::string(), std::string(), had_proof ? "unknown_key" : "no_key"));
      return kj::READY_NOW;
    }
    if (std::optional<std::string> refused = host_.mark_authenticated(connection_, false, match->key_id)) {
      return kj::Exception(kj::Exception::Type::OVERLOADED, __FILE__, __LINE__, kj::str(refused->c_str()));
    }
    results.setServerProof(data_of(match->server_proof));
    results.setSession(kj::heap<SessionImpl>(host_, connection_, match->key_id, match->name, nullptr));
    return kj::READY_NOW;
  }

  kj::Promise<void> openPeer(OpenPeerContext context) override {
    Result<PeerOpened> opened = open_peer(host_.config(), host_.accepted_cluster_secrets(), context, nonces_,
                                          host_.security_metrics(), last_refusal_log_ms_);
    if (!opened.is_ok()) return KJ_EXCEPTION(FAILED, opened.status().message());
    auto results = context.getResults();
    host_.mark_authenticated(connection_, true, std::string());
    host_.set_peer_proof(connection_, opened->secret_id);
    results.setPeer(kj::heap<PeerImpl>(host_, opened->from, std::move(opened->secret_id)));
    return kj::READY_NOW;
  }

 private:
  RpcHost& host_;
  const uint64_t connection_;
  HandshakeNonces nonces_;
  static inline int64_t last_refusal_log_ms_ = 0;  // kj thread only
};

}  // namespace

capnp::Capability::Client make_bootstrap(RpcHost& host, uint64_t connection) {
  return kj::heap<MayflyImpl>(host, connection);
}

}  // namespace mayfly::node
