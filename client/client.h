// The Mayfly C++ client library: the project's request vocabulary (api/operation.h, re-exported below), a plain
// Response, and a Client that talks Cap'n Proto RPC to a cluster.
//
// A Client knows the cluster's endpoints, finds the leader from the responses it gets (`leaderHint`, `servedBy`) and
// sends writes straight to it, spreads reads over the endpoints (or pins them to one), carries session tokens so
// session reads see the client's own writes, and retries what is safe to retry — 503 (no leader / leadership
// changing), 429 (throttled, after retryAfterMs), and connection failures before a request was sent — a bounded number
// of times with backoff. Writes are exactly-once by default: each carries the client's id and a sequence number, so
// a write whose outcome is unknown (timeout on the server, lost connection, leader crash) is re-sent too, and the
// cluster applies it at most once (ClientOptions::exactly_once). Business outcomes (404, 409, 412, ...) are values in Response, never exceptions; so are the
// client's own failures (408 timeout, 503 with a client substatus when no endpoint answers).
//
// Only this header (and api/operation.h, which it includes) is needed to use the library; the wire types
// (proto/mayfly.capnp.h, api/codec.h) stay inside the library.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <kj/async.h>

#include "api/operation.h"
#include "common/wire.h"

namespace mayfly::client {

using mayfly::Consistency;  // how fresh a read must be (common/wire.h)

// The request vocabulary is the project's one (api/operation.h), re-exported here for library users: the same types,
// not copies. A Request names its database and container and carries one Operation, a struct per operation of the
// client API (api::CreateItem{body}, api::ReadItem{partition_key, id}, api::Query{sql, parameters, ...}, ...).
// Op names the alternatives (Request::kind()); api::make_operation(kind) makes a default one to fill.
using Request = api::Request;
using Op = api::Kind;
using api::ContainerSettings;
using api::Operation;
using api::Options;
using api::ReadChangeFeed;
using api::WriteId;
using api::consistency_name;  // "session", "strong", ...
using api::kind_name;         // "createItem", as in the schema
using api::make_operation;
// Which operations change state (go to the leader, are never blindly re-sent after a lost connection):
// api::changes_state. Which carry a write id (deduplicated by the cluster): api::is_write.

// The server's 503 substatus for a write whose fate it does not know (it timed out waiting for its commit, its
// forwarding to the leader failed, or the node stopped while it was in flight): it may or may not have been applied.
// With ClientOptions::exactly_once (the default) the library re-sends it with the same write id, and the cluster
// answers with the first execution's outcome if there was one; without, it is never re-sent (a retried patch `incr`
// would apply twice) and the caller reads to find out.
inline constexpr uint32_t kSubstatusServerOutcomeUnknown = kSubstatusOutcomeUnknown;  // common/wire.h
// The 503 substatus for a re-sent write the cluster will not apply because it cannot tell whether the first attempt
// was applied (its exactly-once record was evicted: more clients than the table holds). The outcome is unknown.
inline constexpr uint32_t kSubstatusServerWriteRecordLost = kSubstatusWriteRecordLost;
// Exactly-once retries of a write stop this long after it was first sent, well inside the cluster's 10-minute
// window for idle clients (docs/tests.md, "Exactly-once writes").
inline constexpr uint32_t kExactlyOnceRetryHorizonMs = 5 * 60 * 1000;
// At most this many numbered writes between a client's oldest unanswered one and its newest: the cluster keeps that
// many outcomes per client (storage/write_dedup.h kDedupMaxUnacknowledged) and refuses more with 429; a write that
// would go past it waits for the oldest to be answered.
inline constexpr uint64_t kWriteWindow = 1024;

// Client-made substatuses (the server's own are < 20000), for statuses the client produces without a server answer.
inline constexpr uint32_t kSubstatusNoEndpointReachable = 20001;  // 503: every attempt failed to connect
inline constexpr uint32_t kSubstatusWriteOutcomeUnknown = 20002;  // 503: connection lost after a write was sent
inline constexpr uint32_t kSubstatusReadConnectionLost = 20003;   // 503: connection lost on every read attempt
inline constexpr uint32_t kSubstatusTimeout = 20004;              // 408: ClientOptions::request_timeout_ms ran out
inline constexpr uint32_t kSubstatusKeyNotProven = 20005;         // 401: the node did not prove it holds the key

// One response: every field of proto Response. Thread-safety: a value.
struct Response {
  uint16_t status = 0;  // HTTP-style: 200, 201, 204, 400, 404, 408, 409, 412, 413, 429, 503, ...
  uint32_t substatus = 0;
  std::string message;  // for errors: what went wrong and what to do
  std::string body;     // JSON text; empty when there is none
  std::string etag;
  int64_t ts = 0;  // `_ts` of the item or container (Unix seconds); 0 otherwise
  double request_charge = 0;
  std::string session_token;
  uint32_t retry_after_ms = 0;
  uint64_t served_by = 0;    // node id that executed the request; 0 when the client made the response itself
  uint64_t leader_hint = 0;  // the leader as the serving node knew it; 0: unknown
  std::string continuation;  // listItems / query: non-empty when there are more pages
  std::string data;          // backupRead: bytes of the backup file

  bool ok() const { return status < 400; }
  bool operator==(const Response&) const = default;
};

// How a Client behaves. Every retry loop is bounded by these numbers and by request_timeout_ms.
// Thread-safety: a value.
struct ClientOptions {
  std::vector<std::string> endpoints = {"127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"};  // node i+1 is [i]
  Consistency default_consistency = Consistency::kSession;
  uint32_t request_timeout_ms = 10000;  // whole call, retries and backoff included; then 408
  uint32_t max_retries_unavailable = 8;  // 503 answers and failures to connect
  uint32_t max_retries_throttled = 8;    // 429 answers
  bool retry_throttled = true;           // false: hand a 429 straight back to the caller
  uint32_t backoff_initial_ms = 20;      // 503/connection backoff: initial * 2^retry, capped, jittered
  uint32_t backoff_max_ms = 1000;
  std::optional<size_t> preferred_endpoint;  // reads go to this endpoint (1..N) first; unset: round-robin
  // A write about to go out on a connection that has been quiet this long first re-opens its session (one round
  // trip): a connection whose peer restarted meanwhile then fails *before* the write is sent, so the write can safely
  // go elsewhere instead of ending as "outcome unknown".
  uint32_t write_probe_idle_ms = 1000;
  uint64_t jitter_seed = 0x6d617966;          // seeds the backoff jitter (reproducible runs)
  // Exactly-once writes (docs/tests.md, "Exactly-once writes"): every write carries this client's id and a sequence
  // number, and the cluster answers a re-sent write with the outcome of its first execution instead of applying it
  // again. So a write whose outcome is unknown (a 503 with kSubstatusServerOutcomeUnknown, or a connection lost after
  // it was sent) is retried, on any node, within request_timeout_ms. false: writes carry no id, and such a write is
  // never re-sent (the caller gets the 503 and must read to find out).
  bool exactly_once = true;
  // The id writes carry with exactly_once; 0: a random one drawn when the Client is made. Two live Clients must never
  // share an id (their sequence numbers would collide): set it only to tell clients apart in a test's history.
  uint64_t client_id = 0;
  // The client key (docs/security.md); empty: none, for a cluster that runs without keys. The key never crosses the
  // wire: each connection proves it holds it (and checks that the node holds it too, refusing a node that cannot).
  std::string key;
  // A PEM file with the CA that signed the nodes' certificates (docs/security.md); empty: plaintext. When set, every
  // connection is TLS, trusting only this CA (not the system store), and the node's certificate must name the host
  // of the endpoint dialled (for 127.0.0.1, a DNS SAN "127.0.0.1": deploy/make-certs.sh writes DNS and IP SANs).
  std::string tls_ca;
  // Item writes and point reads issued together (in one turn of the event loop) on one connection go to the node as
  // one executeBatch call of at most this many requests: one message and one answer instead of one each. Each keeps
  // its own timeout, retries and write id. 1: one call per request; more than kMaxBatchRequests (common/wire.h, what
  // a node takes in one call) counts as that many.
  uint32_t max_batch_requests = 128;
};

// A connection to a Mayfly cluster that runs its Cap'n Proto event loop on the calling thread (via capnp::EzRpcClient:
// several Clients, and EzRpcClients/EzRpcServers, in one thread share one event loop). It opens one connection per
// endpoint lazily and reopens it after a disconnect.
//
// Thread-safety: one thread. Create, use and destroy a Client on the same thread; promises from execute_async must be
// waited on (or dropped) on that thread and must not outlive the Client.
class Client {
 public:
  // Fails (kj::Exception) only on an empty or malformed endpoint list or an unusable tls_ca; connections are opened
  // on first use.
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `request` and waits for the outcome, running the event loop meanwhile. Never throws for server or network
  // trouble: those come back as Responses (503, 408, ...).
  Response execute(const Request& request);
  // The same without waiting: many of these can be in flight at once on one connection per endpoint. Wait on the
  // promise with wait_scope(), or combine them (kj::joinPromises).
  kj::Promise<Response> execute_async(const Request& request);
  // Issues every request concurrently and waits for all; responses are in request order.
  std::vector<Response> execute_all(const std::vector<Request>& requests);

  // The event loop's wait scope, for waiting on execute_async promises. The loop lives with the client's connections,
  // so this opens the first endpoint's connection if none is open yet.
  kj::WaitScope& wait_scope();

  // What the client has learned, for tools and tests.
  std::optional<uint64_t> leader() const;         // the leader's node id, if known
  std::string session_token() const;              // the highest session token seen so far; empty: none
  // Tells the client where node `id` listens (e.g. after adding a member), so a leader hint naming it can be followed.
  void set_node_address(uint64_t id, const std::string& address);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The pages of a query or a list, one request per page: each next() sends the request with the previous page's
// continuation (and, through the Client, its session token, so a session-consistent paging never goes back in time).
// Iteration ends after the page that carries no continuation, or after an error response (returned as the page).
// Thread-safety: one thread, like the Client it borrows (which must outlive it).
class PageIterator {
 public:
  PageIterator(Client& client, Request request) : client_(client), request_(std::move(request)) {}
  bool has_more() const { return more_; }
  Response next();

 private:
  Client& client_;
  Request request_;
  bool more_ = true;
};

// A query's pages: `request` carries an api::Query (sql, parameters, partition key; page size in options.max_items).
inline PageIterator query_pages(Client& client, Request request) { return PageIterator(client, std::move(request)); }

}  // namespace mayfly::client
