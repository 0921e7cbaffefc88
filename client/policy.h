// The client's decisions as pure functions and small value classes, with no I/O, so they can be tested without a
// server: endpoint parsing, where a request goes (leader discovery, round-robin), whether and when to retry, and which
// session token to send. client.cc wires them to the network.
//
// Internal to the client library (tests include it; applications use client.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/client.h"
#include "common/prng.h"
#include "common/status.h"

namespace mayfly::client {

// Checks one "host:port" ("127.0.0.1:7101", "node-1:7101", "[::1]:7101"); port 1..65535.
Status validate_endpoint(std::string_view endpoint);
// Parses "h:p,h:p" (spaces around entries are ignored; empty entries and duplicates are errors).
Result<std::vector<std::string>> parse_endpoint_list(std::string_view text);

// Where requests go. Endpoints are numbered from 0 here (1 in the public API); node id i+1 listens at endpoint i
// unless set_node_address says otherwise. Learns the leader from responses.
// Thread-safety: one thread (owned by a Client).
class Routing {
 public:
  explicit Routing(std::vector<std::string> endpoints);

  size_t endpoint_count() const { return endpoints_.size(); }
  const std::string& address(size_t endpoint) const { return endpoints_.at(endpoint); }

  // Node `id` listens at `address`; a new address becomes a new endpoint.
  void set_node_address(uint64_t id, const std::string& address);
  std::optional<size_t> endpoint_of_node(uint64_t id) const;

  // Learns from a server's answer: a non-zero leaderHint names the leader; a write that succeeded was executed by the
  // leader (servedBy); a 503 without a hint means the leader is unknown.
  void observe(const Response& response, bool write);
  // The endpoint of the believed leader failed to connect: stop sending writes there until told again.
  void forget_leader_at(size_t endpoint);
  std::optional<uint64_t> leader() const { return leader_; }

  // The first endpoint for a request. `request_endpoint` (0-based) wins; operations that change state
  // (api::changes_state: writes, membership, the clock) and strong reads go to the known leader (followers would
  // forward them there anyway); other operations go to `preferred` (0-based) or round-robin.
  size_t first_endpoint(Op op, Consistency consistency, std::optional<size_t> request_endpoint,
                        std::optional<size_t> preferred);
  // The endpoint after `current` in the fixed rotation, for retrying elsewhere.
  size_t next_endpoint(size_t current) const { return (current + 1) % endpoints_.size(); }

 private:
  size_t round_robin();

  std::vector<std::string> endpoints_;
  std::map<uint64_t, size_t> node_endpoint_;  // learned or set addresses; others follow the id = index + 1 rule
  std::optional<uint64_t> leader_;
  size_t round_robin_next_ = 0;
};

// The (id, address) pairs in a clusterStatus body ({"leader": 2, "nodes": [{"id": 1, "address": "h:p", ...}, ...]}),
// so a client can follow leader hints to members it was not configured with. Anything else in the body is ignored;
// a body that does not have this shape yields nothing.
std::vector<std::pair<uint64_t, std::string>> parse_cluster_nodes(std::string_view body);

// What came of one attempt. Thread-safety: a value.
struct Attempt {
  enum class Kind {
    kAnswered,        // the server answered: `response`
    kNotSent,         // no connection or no session: the request never left, so any request may go elsewhere
    kConnectionLost,  // the connection broke after the request was sent: a write may or may not have been applied
  };
  Kind kind = Kind::kAnswered;
  Response response;
  std::string error;  // with kNotSent/kConnectionLost: the transport's description
};

// Retries used so far by one call; each kind has its own bound. Thread-safety: a value.
struct RetryState {
  uint32_t unavailable_retries = 0;
  uint32_t throttled_retries = 0;
  // The call is a read pinned to one node (Request::endpoint or ClientOptions::preferred_endpoint): after a failed
  // connection it first reconnects to that node once before moving on, so a dropped connection does not silently
  // turn a read of that replica into a read of another.
  bool pinned_read = false;
  bool reconnected = false;
};

// What to do after an attempt. Thread-safety: a value.
struct RetryDecision {
  enum class Target {
    kSameEndpoint,  // 429: the same node, later
    kNextEndpoint,  // another node in the rotation
    kLeaderNode,    // the node named by the 503's leaderHint (`node`)
  };
  bool retry = false;
  uint32_t delay_ms = 0;
  Target target = Target::kSameEndpoint;
  uint64_t node = 0;

  bool operator==(const RetryDecision&) const = default;
};

// Exponential backoff for retry number `retry` (0-based): initial * 2^retry capped at max, with jitter drawn from
// [half, full] so that many clients retrying together spread out.
uint32_t backoff_ms(const ClientOptions& options, uint32_t retry, Prng& prng);

// Whether and how to retry after `attempt`; counts the retry in `state`. Answers other than 503/429 are final;
// 503 goes to the hinted leader (else the next endpoint) after retryAfterMs or backoff; 429 waits retryAfterMs on the
// same endpoint when retry_throttled; kNotSent goes to the next endpoint; kConnectionLost does too for reads. A write
// whose outcome is unknown (kConnectionLost, or a 503 with kSubstatusServerOutcomeUnknown) is retried like a 503 only
// when it is `deduplicated` (it carries a write id, so the cluster applies it at most once); otherwise that answer is
// final (re-sending could apply it twice). A 503 kSubstatusServerWriteRecordLost is always final. A pinned read first
// retries its own endpoint once (a fresh connection) after kNotSent/kConnectionLost.
RetryDecision decide_retry(const ClientOptions& options, RetryState& state, const Attempt& attempt, bool write,
                           Prng& prng, bool deduplicated = false);

// The Response a call ends with when its last attempt got no answer (503 with a client substatus and a message that
// says what happened and what the caller can do).
Response unanswered_response(const Attempt& attempt, bool write, std::string_view endpoint);
// The final Response of a write an earlier attempt of which may have been applied (its outcome was unknown): `last`
// itself when it is an outcome of the write's execution (2xx, or a 4xx other than 401, 403, 408 and 429 — with a
// write id, a re-send's answer from the cluster's exactly-once table), otherwise a 503 kSubstatusWriteOutcomeUnknown
// that says so, carrying `last`'s message: a later "not applied" (no leader, overloaded, throttled) speaks only for
// that attempt.
Response outcome_still_unknown(Response last);
// The Response of a call that ran out of time.
Response timeout_response(uint32_t timeout_ms, bool write, std::string_view endpoint);

// Session tokens are decimal log indexes; a larger index is newer. Anything else is compared as text after length, so
// a malformed token never beats a well-formed larger one and the ordering stays total.
bool session_token_newer(std::string_view candidate, std::string_view current);

// The highest session token the client has seen, and which one a request carries.
// Thread-safety: one thread (owned by a Client).
class SessionTokens {
 public:
  void observe(std::string_view token);
  const std::string& highest() const { return highest_; }
  // The caller's own token wins; otherwise session-consistency requests carry the highest seen; others carry none.
  std::string token_for(const Options& options, Consistency effective) const;

 private:
  std::string highest_;
};

}  // namespace mayfly::client
