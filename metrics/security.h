// Metrics of the trust boundary and the connection limits (docs/security.md, docs/metrics.md), registered in the node's
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
  // Refusals: "no_key", "unknown_key", "forbidden" (a key without the needed role), "peer" (a failed peer proof, or a
  // call on a link whose secret was removed), "peer_not_member" (a forward from a non-member), "replay" (a gateway
  // signature used again), "replay_cache_full".
  void add_auth_failure(const char* reason);
  // Connections: open ones by state, and those closed or refused by the node: "limit", "evicted",
  // "handshake_timeout", "idle" (a client connection with no call for --idle-timeout-ms), "accept_error", "tls" (a
  // failed TLS handshake: plaintext, an untrusted CA, or too slow), "secret_removed" (a peer link proved with a
  // cluster secret no longer in the file), "key_limit" (--max-connections-per-key), "client_limit" (client sessions
  // would take a slot reserved for peers), "reply_backlog" (too many reply bytes queued for the connection).
  void set_connections(int64_t authenticated, int64_t unauthenticated);
  void add_connection_refused(const char* reason);
  // Load shedding (docs/operations.md, "Limits"): a request refused because --max-pending-requests were waiting
  // ("driver", "read" or "forward"), its key's or its connection's budget was spent ("key", "connection"), or too many
  // reads were parked ("parked"); and Raft messages dropped between the driver and the RPC thread.
  void add_shed(const char* kind);
  // The Cosmos REST gateway's connections closed or refused before a request was served (docs/operations.md, "Limits"):
  // "limit" (full, and no connection waiting for a request to close instead), "evicted" (a connection waiting for a
  // request, closed to make room), "header_timeout", "body_timeout", "unauthorized_body" (401 before its body was
  // read).
  void add_http_refused(const char* reason);
  void add_handoff_dropped(uint64_t messages);
  // Reads stopped on a read thread (docs/operations.md, "Limits"; common/work_budget.h): "deadline" (past
  // --request-timeout-ms), "cancelled" (the request timed out or its connection closed), "over_budget" (more steps of
  // work than one page may take: a 400), "stopping" (the node shuts down), "sort_bytes" / "group_bytes" (ORDER BY /
  // GROUP BY would hold more than their bytes in memory: a 400).
  void add_read_stopped(const char* reason);
  // The keys file (file="keys") or the cluster secret file (file="cluster_secret") changed and no longer reads or
  // parses: counted once per distinct error, and `stale` is 1 until a version parses again (the node
  // keeps what it had before meanwhile: docs/security.md).
  void add_reload_failure(const char* file);
  void set_file_stale(const char* file, bool stale);

 private:
  std::string node_;
  prometheus::Family<prometheus::Gauge>& open_;
  prometheus::Family<prometheus::Counter>& auth_failures_;
  prometheus::Family<prometheus::Gauge>& connections_;
  prometheus::Family<prometheus::Counter>& connections_refused_;
  prometheus::Family<prometheus::Counter>& shed_;
  prometheus::Family<prometheus::Counter>& http_refused_;
  prometheus::Family<prometheus::Counter>& handoff_dropped_;
  prometheus::Family<prometheus::Counter>& reads_stopped_;
  prometheus::Family<prometheus::Counter>& reload_failures_;
  prometheus::Family<prometheus::Gauge>& file_stale_;
};

}  // namespace mayfly::metrics
