// The Cosmos DB REST gateway: `mayflyd --http HOST:PORT` serves the Cosmos DB REST API over HTTP/1.1 (HTTPS on a node
// with --tls-cert/--tls-key: the same certificate, Boost.Asio SSL over OpenSSL, plain HTTP refused) with
// Boost.Beast (Boost 1.81, Debian's libboost1.81-dev: already in the stack for the driver's Boost.Asio, so no new
// dependency; a complete, well-kept HTTP/1.1 parser with header and body limits).
//
// One execution path: every call becomes the proto::Request the Cap'n Proto API carries (gateway/translate.h) and is
// executed by RpcHost::execute_gateway (node/rpc.h), the same code as Session.execute, so the TTL contract,
// consistency levels, RU charges and 429, forwarding to the leader and key roles hold unchanged.
//
// Bounds (flags in node/config.h, docs/operations.md, "Limits"): open connections (--http-max-connections, and
// --http-max-connections-per-address from one client address; when full, the connection that has waited longest for
// a request is closed to make room, and a new one is closed only when every other is serving a request), request
// line + headers (--http-max-header-bytes: 431; --http-header-timeout-ms from the first byte: closed), body
// (--http-max-body-bytes: 413; --http-body-timeout-ms: closed), idle connections (--http-idle-timeout-ms before a
// request's first byte: closed). On a node with keys a request's signature is checked before its body is read: a bad
// one gets 401 and the body is never read nor parsed. A request that is not valid HTTP gets 400 and the connection is
// closed; bytes from the socket are validated, never asserted on. Refusals are counted in
// mayfly_http_connections_refused_total. One request at a time per connection (HTTP/1.1
// keep-alive, no pipelining of answers), and the node's own --request-timeout-ms bounds each answer.
//
// Thread-safety: start/stop from the main thread; the connections run on --http-threads Boost.Asio threads.
#pragma once

#include <memory>

#include "common/status.h"
#include "node/config.h"
#include "node/rpc.h"

namespace mayfly::gateway {

class Server {
 public:
  // Binds config.http and starts serving; fails (nothing started) when the address cannot be bound.
  static Result<std::unique_ptr<Server>> start(const node::NodeConfig& config, node::RpcHost& host);
  ~Server();
  // Stops accepting, closes the connections and joins the threads. Idempotent.
  void stop();

  class Impl;

 private:
  explicit Server(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace mayfly::gateway
