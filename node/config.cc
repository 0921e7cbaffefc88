#include "node/config.h"

#include <CLI/CLI.hpp>

#include <fstream>

#include "storage/records.h"

namespace mayfly::node {

std::string advertised_address(const NodeConfig& config) {
  if (!config.advertise.empty()) return config.advertise;
  const bool wildcard = config.listen.rfind("0.0.0.0:", 0) == 0 || config.listen.rfind("[::]:", 0) == 0;
  if (wildcard) {
    if (auto own = config.peers.find(config.id); own != config.peers.end()) return own->second;
  }
  return config.listen;
}

Result<std::map<NodeId, std::string>> parse_peers(const std::string& text) {
  std::map<NodeId, std::string> peers;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      const size_t equals = item.find('=');
      if (equals == std::string::npos || equals == 0 || equals + 1 == item.size()) {
        return Status::invalid_argument("peer '" + item + "' is not ID=HOST:PORT");
      }
      uint64_t id = 0;
      try {
        size_t used = 0;
        id = std::stoull(item.substr(0, equals), &used);
        if (used != equals) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        return Status::invalid_argument("peer id in '" + item + "' is not a number");
      }
      if (id == 0) return Status::invalid_argument("peer ids start at 1 ('" + item + "')");
      if (!peers.emplace(NodeId(id), item.substr(equals + 1)).second) {
        return Status::invalid_argument("peer id " + std::to_string(id) + " appears twice");
      }
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return peers;
}

Status NodeConfig::validate() const {
  auto invalid = [](const std::string& why) { return Status::invalid_argument(why); };
  if (id == NodeId(0)) return invalid("--id must be a positive number");
  if (listen.find(':') == std::string::npos) return invalid("--listen must be HOST:PORT");
  if (data_dir.empty()) return invalid("--data must name a directory");
  if (restore_file.empty() && (!restore_ttl.empty() || restore_dry_run)) {
    return invalid("--ttl and --dry-run go with --restore FILE");
  }
  if (!restore_file.empty()) {
    if (join) return invalid("--restore starts a new cluster from a backup: it cannot be combined with --join");
    if (restore_ttl != "preserve" && restore_ttl != "pause" && restore_ttl != "rebase" && !restore_dry_run) {
      return invalid("--restore needs --ttl preserve, pause or rebase (see docs/operations.md, \"Backup and restore\"), or "
                     "--dry-run to see what each would expire");
    }
  }
  if (!join && !peers.contains(id)) {
    return invalid("--peers must list this node (" + std::to_string(id.value()) + ") with the other voters");
  }
  if (tick_interval_ms < 1 || tick_interval_ms > 1000) return invalid("tick interval must be 1..1000 ms");
  if (heartbeat_interval_ticks < 1 || election_timeout_ticks <= heartbeat_interval_ticks) {
    return invalid("election timeout must be longer than the heartbeat interval");
  }
  if (time_entry_interval_ms < 1) return invalid("time entry interval must be >= 1 ms");
  if (max_clock_offset_ms < 1 || max_clock_offset_ms > 86'400'000) {
    return invalid("--max-clock-offset must be 1..86400000 ms (a day)");
  }
  if (request_timeout_ms < 100) return invalid("request timeout must be >= 100 ms");
  if (max_connections < 8 || max_connections > 1'000'000) return invalid("--max-connections must be 8..1000000");
  // Above the client library's write probe (ClientOptions::write_probe_idle_ms, 1 s): a write after a quiet spell
  // re-opens its session first, so a connection closed for being idle fails before the write is sent.
  if (idle_timeout_ms != 0 && (idle_timeout_ms < 2000 || idle_timeout_ms > 86'400'000)) {
    return invalid("--idle-timeout-ms must be 0 (never) or 2000..86400000");
  }
  if (max_pending_requests < 16 || max_pending_requests > 1'000'000) {
    return invalid("--max-pending-requests must be 16..1000000");
  }
  if (max_pending_per_key < 1 || max_pending_per_key > 1'000'000) {
    return invalid("--max-pending-per-key must be 1..1000000");
  }
  if (max_pending_per_connection < 1 || max_pending_per_connection > 1'000'000) {
    return invalid("--max-pending-per-connection must be 1..1000000");
  }
  if (max_parked_reads < 2 || max_parked_reads > 1'000'000) return invalid("--max-parked-reads must be 2..1000000");
  if (max_connections_per_key < 1 || max_connections_per_key > 1'000'000) {
    return invalid("--max-connections-per-key must be 1..1000000");
  }
  if (reserved_peer_connections < 0 || reserved_peer_connections > 1'000'000) {
    return invalid("--reserved-peer-connections must be 0..1000000");
  }
  if (read_threads < 1 || read_threads > 64) return invalid("--read-threads must be 1..64");
  if (max_read_work < 1'000'000 || max_read_work > 1'000'000'000'000) {
    return invalid("--max-read-work must be 1000000..1000000000000 steps");
  }
  if (handshake_timeout_ms < 100 || handshake_timeout_ms > 600'000) {
    return invalid("--handshake-timeout-ms must be 100..600000");
  }
  const int tls_files = int{!tls_cert_file.empty()} + int{!tls_key_file.empty()} + int{!tls_ca_file.empty()};
  if (tls_files != 0 && tls_files != 3) {
    return invalid("--tls-cert, --tls-key and --tls-ca go together: give all three (TLS) or none (plaintext)");
  }
  if ((keys_file.empty() || cluster_secret_file.empty()) && !insecure && !is_loopback_listen(listen)) {
    return invalid("--listen " + listen + " is not a loopback address, but " +
                   (keys_file.empty() ? std::string("--keys-file") : std::string("--cluster-secret-file")) +
                   " is not set: anyone who reaches the port could " +
                   (keys_file.empty() ? "read and write every item and change membership"
                                      : "act as a cluster member") +
                   ". Configure both (docs/security.md), or pass --insecure to run open anyway");
  }
  // Keys without a cluster secret would be keys in name only: any local process could open the peer API (which runs
  // no role check: a member's forwarded request is executed as the client's) and do what no key allows.
  if (!keys_file.empty() && cluster_secret_file.empty()) {
    return invalid("--keys-file is set but --cluster-secret-file is not: without a cluster secret any process that "
                   "reaches --listen " + listen + " could open the peer API and read, write or back up everything "
                   "around the keys. Give every node --cluster-secret-file too (docs/security.md)");
  }
  if (!http.empty()) {
    if (http.find(':') == std::string::npos) return invalid("--http must be HOST:PORT, not '" + http + "'");
    if (keys_file.empty() && !insecure && !is_loopback_listen(http)) {
      return invalid("--http " + http + " is not a loopback address, but --keys-file is not set: anyone who "
                     "reaches it could read and write every item. Configure keys, or pass --insecure");
    }
    // A Cosmos signature covers the verb, the resource and the date, not the body: whoever sees a signed request on
    // the wire may send another body with it for 15 minutes. Off loopback the gateway needs TLS (HTTPS).
    if (!tls() && !insecure && !is_loopback_listen(http)) {
      return invalid("--http " + http + " is not a loopback address and the node has no TLS (--tls-cert, --tls-key, "
                     "--tls-ca): plain HTTP would show every signed request to the network, and a signature "
                     "does not cover the body. Configure TLS, or pass --insecure to serve plain HTTP anyway");
    }
  }
  if (http_emulator_key && (http.empty() || !is_loopback_listen(http))) {
    return invalid("--emulator-key makes the Cosmos emulator's published key valid, so it is allowed only with "
                   "--http on a loopback address (127.0.0.1, [::1], localhost)");
  }
  if (http_max_connections < 1 || http_max_connections > 100'000) {
    return invalid("--http-max-connections must be 1..100000");
  }
  if (http_max_connections_per_address < 1 || http_max_connections_per_address > 100'000) {
    return invalid("--http-max-connections-per-address must be 1..100000");
  }
  if (http_header_timeout_ms < 100 || http_header_timeout_ms > 3'600'000) {
    return invalid("--http-header-timeout-ms must be 100..3600000");
  }
  if (http_body_timeout_ms < 100 || http_body_timeout_ms > 3'600'000) {
    return invalid("--http-body-timeout-ms must be 100..3600000");
  }
  if (metrics_threads < 1 || metrics_threads > 64) return invalid("--metrics-threads must be 1..64");
  if (metrics_request_timeout_ms < 100 || metrics_request_timeout_ms > 600'000) {
    return invalid("--metrics-request-timeout-ms must be 100..600000");
  }
  if (http_max_header_bytes < 1024 || http_max_header_bytes > 1 << 20) {
    return invalid("--http-max-header-bytes must be 1024..1048576");
  }
  if (http_max_body_bytes < 4096 || http_max_body_bytes > 64 << 20) {
    return invalid("--http-max-body-bytes must be 4096..67108864");
  }
  if (http_idle_timeout_ms < 100 || http_idle_timeout_ms > 86'400'000) {
    return invalid("--http-idle-timeout-ms must be 100..86400000");
  }
  if (http_threads < 1 || http_threads > 64) return invalid("--http-threads must be 1..64");
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  for (const char* level : kLevels) {
    if (log_level == level) return Status::ok();
  }
  return invalid("--log-level must be one of trace, debug, info, warn, error");
}

bool is_loopback_listen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  const std::string host = listen.substr(0, colon == std::string::npos ? listen.size() : colon);
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "[::1]" || host == "::1";
}

ParsedFlags parse_flags(int argc, char** argv) {
  ParsedFlags parsed;
  NodeConfig& config = parsed.config;
  CLI::App app{"mayflyd: one node of a Mayfly cluster (replicated document store with exact TTL)"};
  app.set_config("--config", "", "read these settings from a file (key = value lines)");
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error, not a setting ignored
  uint64_t id = 0;
  std::string peers;
  app.add_option("--id", id, "this node's id (1, 2, ...)")->required();
  app.add_option("--listen", config.listen, "HOST:PORT for clients and peers")->required();
  app.add_option("--advertise", config.advertise,
                 "HOST:PORT others reach this node at (default: its --peers entry when --listen is a wildcard, "
                 "else --listen)");
  app.add_option("--peers", peers, "the voters of a new cluster: 1=HOST:PORT,2=HOST:PORT,... (this node included)");
  app.add_option("--data", config.data_dir, "data directory (created if missing)")->required();
  app.add_option("--metrics", config.metrics, "HOST:PORT for Prometheus metrics (e.g. 127.0.0.1:9101)");
  app.add_option("--metrics-auth-file", config.metrics_auth_file,
                 "a file holding USER:PASSWORD that metrics scrapes must send as HTTP basic auth (mode 0600)");
  app.add_option("--metrics-threads", config.metrics_threads,
                 "scrapes served at once (a slow or half-sent request holds one until its timeout)")
      ->capture_default_str();
  app.add_option("--metrics-request-timeout-ms", config.metrics_request_timeout_ms,
                 "a metrics request not fully received within this is dropped")
      ->capture_default_str();
  app.add_option("--log-level", config.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--cluster", config.cluster, "cluster name; peers of another cluster are refused")
      ->capture_default_str();
  app.add_option("--keys-file", config.keys_file,
                 "client keys, one per line: ROLE KEY [NAME] (roles readonly, readwrite, admin); re-read on change");
  app.add_option("--cluster-secret-file", config.cluster_secret_file,
                 "the secret every member of the cluster holds (peers prove it; it never crosses the wire)");
  app.add_flag("--insecure", config.insecure,
               "allow running without keys or cluster secret on a non-loopback address");
  app.add_option("--max-connections", config.max_connections, "open connections at most")->capture_default_str();
  app.add_option("--handshake-timeout-ms", config.handshake_timeout_ms,
                 "a connection that has not authenticated by then is closed")
      ->capture_default_str();
  app.add_option("--idle-timeout-ms", config.idle_timeout_ms,
                 "a client connection with no call for this long is closed (0: never; peers are never closed)")
      ->capture_default_str();
  app.add_option("--max-pending-requests", config.max_pending_requests,
                 "requests waiting on the driver or the read threads at most; beyond, 503 with retry-after")
      ->capture_default_str();
  app.add_option("--max-pending-per-key", config.max_pending_per_key,
                 "requests of one client key in flight on this node at most; beyond, 503 with retry-after")
      ->capture_default_str();
  app.add_option("--max-pending-per-connection", config.max_pending_per_connection,
                 "requests of one connection in flight at most; beyond, 503 with retry-after")
      ->capture_default_str();
  app.add_option("--max-parked-reads", config.max_parked_reads,
                 "session/bounded reads and change feed long-polls waiting for this replica at most (one key: half)")
      ->capture_default_str();
  app.add_option("--max-connections-per-key", config.max_connections_per_key,
                 "sessions one client key may hold open on this node")
      ->capture_default_str();
  app.add_option("--reserved-peer-connections", config.reserved_peer_connections,
                 "of --max-connections, slots that client sessions never take (for peers reconnecting)")
      ->capture_default_str();
  app.add_option("--read-threads", config.read_threads, "threads that execute item lists and queries")
      ->capture_default_str();
  app.add_option("--max-read-work", config.max_read_work,
                 "steps of work (~1 ns each) one page of a query, list, change feed, forecast or defaultTtl dry run "
                 "may take; past it, 400")
      ->capture_default_str();
  app.add_option("--tls-cert", config.tls_cert_file,
                 "PEM certificate this node serves TLS with (with --tls-key and --tls-ca; docs/security.md)");
  app.add_option("--tls-key", config.tls_key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", config.tls_ca_file,
                 "PEM CA certificate: peers' certificates must be signed by it (the system store is not used)");
  app.add_option("--http", config.http,
                 "HOST:PORT for the Cosmos DB REST API (https with --tls-cert/--tls-key, else http; off when not set)");
  app.add_flag("--emulator-key", config.http_emulator_key,
               "also accept the Cosmos emulator's well-known key (only with --http on a loopback address)");
  app.add_option("--http-replay-guard", config.http_replay_guard,
                 "accept a signed database or container replace or delete once per signature (false: as often as it "
                 "is sent within its 15 minutes, as Cosmos DB does)")
      ->capture_default_str();
  app.add_option("--http-max-connections", config.http_max_connections,
                 "open HTTP connections at most (when full, the oldest one waiting for a request is closed)")
      ->capture_default_str();
  app.add_option("--http-max-connections-per-address", config.http_max_connections_per_address,
                 "open HTTP connections from one client address at most (the oldest waiting one makes room)")
      ->capture_default_str();
  app.add_option("--http-header-timeout-ms", config.http_header_timeout_ms,
                 "a request's line and headers must arrive within this, from its first byte")
      ->capture_default_str();
  app.add_option("--http-body-timeout-ms", config.http_body_timeout_ms,
                 "a request's body must arrive within this, from the end of its headers")
      ->capture_default_str();
  app.add_option("--http-max-header-bytes", config.http_max_header_bytes, "request line and headers, at most")
      ->capture_default_str();
  app.add_option("--http-max-body-bytes", config.http_max_body_bytes, "one HTTP request body, at most")
      ->capture_default_str();
  app.add_option("--http-idle-timeout-ms", config.http_idle_timeout_ms,
                 "an HTTP connection that sends no byte of a next request for this long is closed")
      ->capture_default_str();
  app.add_option("--http-threads", config.http_threads, "threads serving HTTP connections")->capture_default_str();
  app.add_option_function<std::string>(
         "--clock",
         [&config](const std::string& mode) { config.virtual_clock = mode == "virtual"; },
         "real (default) or virtual: replicated time moves only on `mayfly cluster advance-clock` (for tests; every "
         "node of the cluster must say the same)")
      ->check(CLI::IsMember({"real", "virtual"}));
  app.add_flag("--join", config.join, "start empty and wait to be added with `mayfly cluster add-member`");
  app.add_option("--restore", config.restore_file,
                 "start a new cluster from this backup file (`mayfly backup create`), this node its first voter; "
                 "the data directory must be empty");
  app.add_option("--ttl", config.restore_ttl,
                 "with --restore: preserve (expiry continues from the backup's time), pause (TTL off on every "
                 "container) or rebase (items keep the lifetime they had left)");
  app.add_flag("--dry-run", config.restore_dry_run,
               "with --restore: print what each --ttl mode would expire at once, change nothing, exit");
  app.add_option("--tick-ms", config.tick_interval_ms, "Raft tick")->capture_default_str();
  app.add_option("--election-timeout-ticks", config.election_timeout_ticks)->capture_default_str();
  app.add_option("--heartbeat-ticks", config.heartbeat_interval_ticks)->capture_default_str();
  app.add_option("--time-entry-ms", config.time_entry_interval_ms, "idle time entry interval")->capture_default_str();
  app.add_option("--max-clock-offset", config.max_clock_offset_ms,
                 "ms: the leader stamps replicated time at most this far ahead of the clock a quorum of voters "
                 "reports (a leader whose clock jumps forward cannot expire data early)")
      ->capture_default_str();
  app.add_option("--request-timeout-ms", config.request_timeout_ms)->capture_default_str();
  app.add_option("--bounded-staleness-entries", config.bounded_staleness_entries)->capture_default_str();
  app.add_option("--bounded-staleness-ms", config.bounded_staleness_ms)->capture_default_str();
  app.add_option("--session-wait-ms", config.session_wait_ms)->capture_default_str();
  // --snapshot-interval-entries: its name before snapshots stopped being taken for compaction (kept for scripts).
  app.add_option("--checkpoint-interval-entries,--snapshot-interval-entries", config.checkpoint_interval_entries,
                 "make the state durable and compact the Raft log after this many applied entries")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--snapshot-export-mb-per-s", config.snapshot_export_mb_per_s,
                 "MB per second a snapshot for a follower is written at most, leaving the disk and a core to clients "
                 "(0: unpaced)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--log-cache-bytes", config.log_cache_bytes,
                 "bytes of the newest Raft log entries kept in memory for followers and the apply loop (older ones "
                 "are read from the WAL's files)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--block-cache-mb", config.block_cache_mb,
                 "MB of uncompressed table blocks the store keeps in memory (LevelDB's block cache)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-open-tables", config.max_open_tables,
                 "table files the store keeps open, each with its index and Bloom filter in memory: with the block "
                 "cache, what bounds the store's memory at any size (docs/operations.md, Memory). Each takes a file "
                 "descriptor")
      ->check(CLI::Range(int64_t{64}, int64_t{100'000}))
      ->capture_default_str();
  app.add_option("--table-block-kb", config.table_block_kb,
                 "KB of items per block of a table file written from now on: one index entry per block, so larger "
                 "blocks make a smaller index in memory and a point read decode more")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1024}))
      ->capture_default_str();
  app.add_option("--gc-interval-ms", config.gc_interval_ms,
                 "the collector's pace while the node serves clients (one short pass every so often), and how often "
                 "an idle node looks for newly expired items")
      ->check(CLI::Range(int64_t{1}, int64_t{60'000}))
      ->capture_default_str();
  app.add_option("--gc-batch-items-max", config.gc_batch_items_max,
                 "items per container per collector pass (while the node serves clients: at most 100)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--gc-driver-share", config.gc_driver_share,
                 "while the node is idle, the most of the driver thread's time back-to-back collector passes take")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--gc-ru-share", config.gc_ru_share,
                 "part (0..1) of a provisioned container's spare RU the collector may spend (0: none)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--gc-compact-interval-ms", config.gc_compact_interval_ms,
                 "compact a key range the collector drained (LevelDB CompactRange, on a thread of its own, one range "
                 "at a time, not while the node serves clients) at most once per this interval (0: never; a "
                 "shutdown waits for the one under way)")
      ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}))
      ->capture_default_str();
  app.add_option("--gc-compact-min-deletes", config.gc_compact_min_deletes,
                 "keys the collector must have deleted in a range (a container's expiry index, ts index or items) "
                 "since its last compaction before it is compacted")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000'000}))
      ->capture_default_str();
  app.add_option("--forecast-max-entries", config.forecast_max_entries,
                 "expiry index entries one container's TTL forecast reads at most (beyond: answered as truncated)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000'000}))
      ->capture_default_str();
  app.add_option("--forecast-interval-ms", config.forecast_interval_ms,
                 "how often the TTL forecast metrics are recomputed, on a read thread (0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}))
      ->capture_default_str();
  app.add_option("--changefeed-retention", config.changefeed_retention_seconds,
                 "seconds a change feed keeps its changes when a container turns it on without saying (the leader "
                 "fills it in; 1 .. 90 days)")
      ->check(CLI::Range(int64_t{1}, storage::kMaxChangeFeedRetentionSeconds))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::ostringstream out, err;
    // --help and friends exit 0; every usage error exits 2, whatever CLI11's own code for it (105 for a value out
    // of range, for example).
    parsed.exit_code = app.exit(error, out, err) == 0 ? 0 : 2;
    parsed.output = out.str() + err.str();
    return parsed;
  }
  config.id = NodeId(id);
  if (!peers.empty()) {
    Result<std::map<NodeId, std::string>> parsed_peers = parse_peers(peers);
    if (!parsed_peers.is_ok()) {
      parsed.exit_code = 2;
      parsed.output = "mayflyd: " + parsed_peers.status().message() + "\n";
      return parsed;
    }
    config.peers = std::move(parsed_peers).value();
  }
  if (Status status = config.validate(); !status.is_ok()) {
    parsed.exit_code = 2;
    parsed.output = "mayflyd: " + status.message() + "\n";
  }
  return parsed;
}

}  // namespace mayfly::node

namespace mayfly::node {

Status check_data_clock_mode(const std::string& data_dir, bool virtual_clock, bool fresh) {
  const std::string path = data_dir + "/clock";
  const std::string wanted = clock_mode_name(virtual_clock);
  std::string recorded;
  {
    std::ifstream in(path);
    if (in) std::getline(in, recorded);
  }
  if (recorded.empty()) {
    // No file: a new store records the mode it starts with; an older one ran on the real clock.
    recorded = fresh ? wanted : "real";
    std::ofstream out(path, std::ios::trunc);
    out << recorded << "\n";
    out.flush();
    if (!out) return Status::io_error("cannot write " + path);
  }
  if (recorded != "real" && recorded != "virtual") {
    return Status::corruption(path + " says '" + recorded + "' (expected real or virtual)");
  }
  if (recorded != wanted) {
    return Status::precondition_failed("the data directory " + data_dir + " was created with --clock " + recorded +
                                       " and this node was started with --clock " + wanted +
                                       "; a cluster keeps its clock for life: start it with --clock " + recorded +
                                       " (or use a new --data directory)");
  }
  return Status::ok();
}

}  // namespace mayfly::node
