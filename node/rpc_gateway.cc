// RpcHost's door for the Cosmos DB REST gateway (gateway/server.h).
//
// Why in-process dispatch through the kj executor rather than a loopback Cap'n Proto client: the gateway's calls
// then run exactly the code a Session.execute runs (decode_request, the role check, handle → route: reads here or
// on the read threads, session waits, the driver, forwarding to the leader), with no second connection, handshake,
// serialisation round trip or connection slot per HTTP client, and the keyring stays on the one thread that owns it.
// The HTTP threads block only while the kj thread accepts the call (executeSync of a function that queues a task),
// never while it executes; the answer comes back through `done`, which posts to the HTTP connection's executor.
#include <spdlog/spdlog.h>

#include <chrono>

#include "node/rpc_internal.h"
#include "storage/write_dedup.h"

namespace mayfly::node {
void RpcHost::execute_gateway(GatewayCall call, std::function<void(Reply)> done) {
  auto shared = std::make_shared<GatewayCall>(std::move(call));
  auto answered = std::make_shared<bool>(false);  // kj thread only, once the call is queued
  auto start = [this, shared, done, answered] {
    if (tasks_.get() == nullptr) {  // the host is past its last tasks (stopping)
      done(router_.shutting_down());
      return;
    }
    tasks_->add(run_gateway(*shared)
                    .catch_([this](kj::Exception&& exception) {
                      spdlog::warn("gateway request failed: {}", exception.getDescription().cStr());
                      return router_.unavailable(kSubstatusNoLeader, 100, "the request failed on this node; retry");
                    })
                    .then([shared, done, answered](Reply reply) {
                      *answered = true;
                      done(std::move(reply));
                    })
                    .attach(kj::defer([this, done, answered] {
                      // Dropped unanswered (the loop is stopping): the client still gets an answer.
                      if (!*answered) done(router_.shutting_down());
                    })));
  };
  bool queued = false;
  if (const kj::Executor* executor = loop_.executor()) {
    KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] {
                  executor->executeSync(start);
                  queued = true;
                })) {
      (void)exception;  // the kj loop has exited (the node is stopping)
    }
  }
  if (!queued) {
    Reply reply = Reply::error(StatusCode::kUnavailable, "the node is shutting down; retry on another node");
    reply.served_by = config_.id;
    done(std::move(reply));
  }
}

kj::Promise<Reply> RpcHost::run_gateway(GatewayCall& call) {
  owner_.check();
  auto refuse = [this](StatusCode code, std::string message) {
    Reply reply = Reply::error(code, std::move(message));
    reply.served_by = config_.id;
    reply.leader_hint = router_.view().leader;
    return reply;
  };
  Role role = Role::kAdmin;  // open: like a session on a node without keys (docs/security.md)
  std::optional<std::string> key_name;  // who signed (exactly-once owner); nullopt: open
  std::string key_id;                   // the signing key's id, for its budgets ("": open)
  if (!keyring_.open()) {
    if (!call.authorization.is_ok()) {
      security_metrics_.add_auth_failure("no_key");
      return refuse(StatusCode::kUnauthorized, call.authorization.message());
    }
    std::optional<Keyring::Match> match = keyring_.match_signature(call.signed_text, call.signature);
    role = match ? match->role : Role::kNone;
    if (match) {
      key_name = match->name;
      key_id = match->key_id;
    }
    if (!match && call.emulator_key && config_.http_emulator_key) {
      role = Role::kReadWrite;
      key_name = std::string("\x01the Cosmos DB emulator key");  // a name no keys file line can give
      key_id = "\x01emulator";                                    // nor an id
    }
    if (role == Role::kNone) {
      security_metrics_.add_auth_failure("unknown_key");
      return refuse(StatusCode::kUnauthorized,
                    "the authorization signature does not match any key of node " +
                        std::to_string(config_.id.value()) +
                        ": sign with the Cosmos key of a Mayfly key K, which is base64(K) (docs/cosmos.md, \"Use your Cosmos "
                        "DB SDK\"), and send the x-ms-date you signed");
    }
  }
  if (!call.request.has_value()) {
    Reply reply;
    reply.served_by = config_.id;
    reply.leader_hint = router_.view().leader;
    return reply;
  }
  api::Request& operation = *call.request;
  const Role needed = required_role(operation.kind());
  if (!role_allows(role, needed)) {
    security_metrics_.add_auth_failure("forbidden");
    return refuse(StatusCode::kForbidden, "this key has role " + std::string(role_name(role)) +
                                              "; the operation needs " + std::string(role_name(needed)) +
                                              " (the Cosmos primary key of a readwrite or admin key)");
  }
  if (Status checked = check_request(operation); !checked.is_ok()) return refuse(checked.code(), checked.message());
  std::optional<api::WriteId>& write_id = operation.write_id;
  if (write_id) write_id->owner = key_name ? storage::dedup_owner_of(*key_name) : 0;
  set_hold_actor(operation, key_name.value_or(""));
  if (!keyring_.open() && call.replay_guarded) {
    // A signature does not cover the body: each one of a database or container write, or of a forced TTL change,
    // is good for one request on this node (node/replay_cache.h).
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    switch (gateway_replays_.use(call.signature, call.valid_until_seconds, now)) {
      case ReplayCache::Outcome::kFirstUse: break;
      case ReplayCache::Outcome::kReplayed:
        security_metrics_.add_auth_failure("replay");
        return refuse(StatusCode::kUnauthorized,
                      "this signature was already used for a database or container change (or a forced TTL change) "
                      "on node " + std::to_string(config_.id.value()) +
                          ": each such request is accepted once per signature. Resend it signed with a fresh "
                          "x-ms-date (a new second)");
      case ReplayCache::Outcome::kFull: {
        security_metrics_.add_auth_failure("replay_cache_full");
        Reply busy = router_.unavailable(kSubstatusOverloaded, 1000,
                                 "node " + std::to_string(config_.id.value()) + " has " +
                                     std::to_string(ReplayCache::kMaxEntries) +
                                     " database or container changes signed in the last 30 minutes; retry later");
        return busy;
      }
    }
  }
  // The key's budgets, as for a session's calls: --max-pending-per-key in flight, its parked reads, its read-thread
  // lane (node/read_queue.h).
  if (std::optional<Reply> refused = key_call_started(key_id)) return kj::mv(*refused);
  auto counted = kj::defer([this, key_id] { key_call_finished(key_id); });
  if (keyring_.open() || !call.replay_guarded) {
    return handle(std::move(operation), false, key_id).attach(kj::mv(counted));
  }
  // Refused with nothing done (4xx): the signature may be used again, e.g. for the same replace with the
  // x-mayfly-force-ttl-change header a 412 asked for, sent within the same second.
  return handle(std::move(operation), false, key_id)
      .attach(kj::mv(counted))
      .then([this, signature = call.signature, valid_until = call.valid_until_seconds](Reply reply) {
        const int status = reply.result.http_status();
        if (status >= 400 && status < 500) gateway_replays_.release(signature, valid_until);
        return reply;
      });
}

}  // namespace mayfly::node
