// Metrics of the trust boundary and the connection limits (README "Security", "Metrics"), registered in the node's
// Metrics registry. Every series has a fixed, small label set: keys and client addresses never become labels.
//
// Thread-safety: every method may be called from any thread (prometheus-cpp metrics are atomic).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>

#include <string>

#include "metrics/metrics.h"

namespace mayfly::metrics {

class SecurityMetrics {
 public:
  explicit SecurityMetrics(Metrics& metrics);

  // 1 while this node accepts any client ("clients") or any process knowing the cluster name as a peer ("peers").
  void set_open(bool clients_open, bool peers_open);
  // Refusals: "no_key", "unknown_key", "forbidden" (a key without the needed role), "peer" (a failed peer proof).
  void add_auth_failure(const char* reason);
  // Connections: open ones by state, and those closed or refused by the node: "limit", "evicted",
  // "handshake_timeout", "idle" (a client connection with no call for --idle-timeout-ms), "accept_error", "tls" (a
  // failed TLS handshake: plaintext, an untrusted CA, or too slow), "key_limit" (--max-connections-per-key),
  // "client_limit" (client sessions would take a slot reserved for peers), "reply_backlog" (too many reply bytes
  // queued for the connection).
  void set_connections(int64_t authenticated, int64_t unauthenticated);
  void add_connection_refused(const char* reason);
  // Load shedding (README "Limits"): a request refused because --max-pending-requests were waiting ("driver",
  // "read" or "forward"), its key's or its connection's budget was spent ("key", "connection"), or too many reads
  // were parked ("parked"); and Raft messages dropped between the driver and the RPC thread.
  void add_shed(const char* kind);
  void add_handoff_dropped(uint64_t messages);

 private:
  std::string node_;
  prometheus::Family<prometheus::Gauge>& open_;
  prometheus::Family<prometheus::Counter>& auth_failures_;
  prometheus::Family<prometheus::Gauge>& connections_;
  prometheus::Family<prometheus::Counter>& connections_refused_;
  prometheus::Family<prometheus::Counter>& shed_;
  prometheus::Family<prometheus::Counter>& handoff_dropped_;
};

}  // namespace mayfly::metrics
