#include "metrics/security.h"

namespace mayfly::metrics {

SecurityMetrics::SecurityMetrics(Metrics& metrics)
    : node_(metrics.node_label()),
      open_(prometheus::BuildGauge()
                .Name("mayfly_security_open")
                .Help("1 while this node accepts clients without a key (what=clients) or peers without the cluster "
                      "secret (what=peers)")
                .Register(*metrics.registry())),
      auth_failures_(prometheus::BuildCounter()
                         .Name("mayfly_auth_failures_total")
                         .Help("Requests and handshakes refused: no_key and unknown_key (401), forbidden (403), peer "
                               "(a failed peer proof, or a link whose secret was removed), peer_not_member (a forward "
                               "from a non-member), replay (a gateway signature used again), replay_cache_full")
                         .Register(*metrics.registry())),
      connections_(prometheus::BuildGauge()
                       .Name("mayfly_connections")
                       .Help("Open RPC connections, by whether they have authenticated")
                       .Register(*metrics.registry())),
      connections_refused_(prometheus::BuildCounter()
                               .Name("mayfly_connections_refused_total")
                               .Help("Connections the node refused or closed: limit, evicted, handshake_timeout, "
                                     "idle, accept_error, tls, secret_removed, key_limit, client_limit, "
                                     "reply_backlog")
                               .Register(*metrics.registry())),
      shed_(prometheus::BuildCounter()
                .Name("mayfly_requests_shed_total")
                .Help("Requests answered 503 at once because too many were waiting on this node "
                      "(--max-pending-requests): kind=driver (writes, strong and catching-up reads), kind=read, "
                      "kind=forward (writes a follower would forward to the leader), kind=key "
                      "(--max-pending-per-key), kind=connection (--max-pending-per-connection), kind=parked "
                      "(--max-parked-reads)")
                .Register(*metrics.registry())),
      http_refused_(prometheus::BuildCounter()
                        .Name("mayfly_http_connections_refused_total")
                        .Help("Cosmos REST gateway connections closed or refused before a request was served: limit, "
                              "evicted, header_timeout, body_timeout, unauthorized_body")
                        .Register(*metrics.registry())),
      handoff_dropped_(prometheus::BuildCounter()
                           .Name("mayfly_handoff_messages_dropped_total")
                           .Help("Raft messages the driver produced that were dropped because the RPC thread had "
                                 "64 MiB of them queued already (Raft resends)")
                           .Register(*metrics.registry())),
      reads_stopped_(prometheus::BuildCounter()
                         .Name("mayfly_reads_stopped_total")
                         .Help("Reads (queries, lists, change feed pages, forecasts, defaultTtl dry runs) stopped on a "
                               "read thread: reason=deadline (--request-timeout-ms), cancelled (timed out or the "
                               "connection closed), over_budget (too much work for one page: 400), stopping, "
                               "sort_bytes and group_bytes (ORDER BY / GROUP BY would hold too many bytes: 400)")
                         .Register(*metrics.registry())),
      reload_failures_(prometheus::BuildCounter()
                           .Name("mayfly_secret_file_reload_failures_total")
                           .Help("Errors reading or parsing the keys file (file=keys) or the cluster secret file "
                                 "(file=cluster_secret), each distinct one counted once; the node kept the previous "
                                 "keys or secrets")
                           .Register(*metrics.registry())),
      file_stale_(prometheus::BuildGauge()
                      .Name("mayfly_secret_file_stale")
                      .Help("1 while the keys file (file=keys) or the cluster secret file (file=cluster_secret) on "
                            "disk does not parse and the node runs with the previous version")
                      .Register(*metrics.registry())) {
  for (const char* reason : {"deadline", "cancelled", "over_budget", "stopping", "sort_bytes", "group_bytes"}) {
    reads_stopped_.Add({{"node", node_}, {"reason", reason}});
  }
  for (const char* kind : {"driver", "read", "forward", "key", "connection", "parked"}) {
    shed_.Add({{"node", node_}, {"kind", kind}});
  }
  handoff_dropped_.Add({{"node", node_}});
  for (const char* file : {"keys", "cluster_secret"}) {
    reload_failures_.Add({{"node", node_}, {"file", file}});
    file_stale_.Add({{"node", node_}, {"file", file}}).Set(0);
  }
}

void SecurityMetrics::add_reload_failure(const char* file) {
  reload_failures_.Add({{"node", node_}, {"file", file}}).Increment();
}

void SecurityMetrics::set_file_stale(const char* file, bool stale) {
  file_stale_.Add({{"node", node_}, {"file", file}}).Set(stale ? 1 : 0);
}

void SecurityMetrics::add_shed(const char* kind) { shed_.Add({{"node", node_}, {"kind", kind}}).Increment(); }

void SecurityMetrics::add_http_refused(const char* reason) {
  http_refused_.Add({{"node", node_}, {"reason", reason}}).Increment();
}

void SecurityMetrics::add_handoff_dropped(uint64_t messages) {
  handoff_dropped_.Add({{"node", node_}}).Increment(static_cast<double>(messages));
}

void SecurityMetrics::add_read_stopped(const char* reason) {
  reads_stopped_.Add({{"node", node_}, {"reason", reason}}).Increment();
}

void SecurityMetrics::set_open(bool clients_open, bool peers_open) {
  open_.Add({{"node", node_}, {"what", "clients"}}).Set(clients_open ? 1 : 0);
  open_.Add({{"node", node_}, {"what", "peers"}}).Set(peers_open ? 1 : 0);
}

void SecurityMetrics::add_auth_failure(const char* reason) {
  auth_failures_.Add({{"node", node_}, {"reason", reason}}).Increment();
}

void SecurityMetrics::set_connections(int64_t authenticated, int64_t unauthenticated) {
  connections_.Add({{"node", node_}, {"state", "authenticated"}}).Set(static_cast<double>(authenticated));
  connections_.Add({{"node", node_}, {"state", "unauthenticated"}}).Set(static_cast<double>(unauthenticated));
}

void SecurityMetrics::add_connection_refused(const char* reason) {
  connections_refused_.Add({{"node", node_}, {"reason", reason}}).Increment();
}

}  // namespace mayfly::metrics
