// NodeConfig: everything one mayflyd needs to know, from flags or a config file with the same keys
// (`--config FILE`, INI/TOML-style `key = value`). Validated before anything starts.
// Thread-safety: a value.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace mayfly::node {

struct NodeConfig {
  NodeId id;
  std::string listen;                       // host:port for clients and peers
  std::string advertise;                    // host:port others reach this node at; empty: see advertised_address()
  std::map<NodeId, std::string> peers;      // every voter of a new cluster, this node included: id -> host:port
  std::string data_dir;
  std::string metrics;                      // host:port for Prometheus (empty: off)
  std::string metrics_auth_file;            // USER:PASSWORD that scrapes must send (HTTP basic auth); empty: none
  int64_t metrics_threads = 4;              // scrapes served at once (one slow or half-sent request holds one)
  int64_t metrics_request_timeout_ms = 5000;  // a scrape request not fully received by then is dropped
  std::string log_level = "info";           // trace, debug, info, warn, error
  std::string cluster = "mayfly";           // peers refuse nodes of another cluster
  bool join = false;                        // start empty and wait to be added (cluster add-member)
  // --clock virtual (docs/ttl.md, "Virtual clock"): replicated time stands still until an admin advances it (`mayfly
  // cluster advance-clock`); every member of the cluster must run so (peers with another mode are refused, and a data
  // directory remembers the mode it was created with).
  bool virtual_clock = false;
  // Restore (docs/operations.md, "Backup and restore"): start a new cluster from a backup file, this node its only
  // voter (the others join with --join and `cluster add-member`). The data directory must be empty. With
  // restore_dry_run the node prints what each --ttl mode would expire at once and exits, changing nothing.
  std::string restore_file;
  std::string restore_ttl;                  // preserve | pause | rebase (required with restore_file)
  bool restore_dry_run = false;

  // Trust (docs/security.md). Without --keys-file every client may do everything; without --cluster-secret-file any
  // process that knows the cluster name may act as a peer. Such a node runs open: it says so at start and in
  // mayfly_security_open, and refuses a non-loopback --listen unless --insecure is given.
  std::string keys_file;                    // client keys with roles; re-read when it changes (rotation, no restart)
  std::string cluster_secret_file;          // the secret every member proves it holds
  bool insecure = false;                    // allow running open on a non-loopback address
  int64_t max_connections = 1024;           // connections beyond this are refused (oldest unauthenticated evicted)
  int64_t handshake_timeout_ms = 5000;      // a connection not authenticated by then is closed
  int64_t idle_timeout_ms = 600'000;        // a client connection with no call for this long is closed (0: never)
  int64_t max_pending_requests = 4096;      // requests waiting on the driver or the read threads; beyond: 503
                                            // (reads: beyond three quarters, the last quarter is for writes)
  int64_t max_pending_per_key = 2048;       // one client key's requests in flight on this node; beyond: 503
  int64_t max_pending_per_connection = 1024;  // one connection's requests in flight; beyond: 503
  int64_t max_parked_reads = 1024;          // reads parked for the applied index (a key: half of them); beyond: 503
  int64_t max_connections_per_key = 256;    // sessions one client key may hold open on this node
  int64_t reserved_peer_connections = 16;   // of --max-connections, slots client sessions can never take (at
                                            // most half of them)
  int64_t peer_reserve() const { return std::min(reserved_peer_connections, max_connections / 2); }
  // Steps of work (about a nanosecond each: a byte a string function compares, ~200 per item a scan reads) one page
  // of a read on a read thread may take; past it, 400 (common/work_budget.h). The deadline is --request-timeout-ms.
  int64_t max_read_work = 1'000'000'000;
  int64_t read_threads = 2;                 // threads that execute item lists and queries (off the RPC thread)
  // TLS on the RPC port: all three or none. With them the node serves TLS only (this certificate and key) and
  // connects to its peers with TLS, trusting only the CA in tls_ca_file (common/tls.h).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  bool tls() const { return !tls_cert_file.empty(); }

  // The Cosmos DB REST gateway (gateway/server.h): off when `http` is empty.
  std::string http;                         // HOST:PORT for the Cosmos DB REST API (plain http)
  bool http_emulator_key = false;           // also accept the Cosmos emulator's well-known key (loopback --http only)
  // Accept a signed database or container replace/delete (or a forced TTL change) once per signature on this node
  // (docs/security.md); false: as often as it is sent within its 15 minutes, as Cosmos DB does.
  bool http_replay_guard = true;
  int64_t http_max_connections = 256;       // open HTTP connections at most (the oldest waiting one makes room)
  int64_t http_max_connections_per_address = 64;  // open HTTP connections from one client address at most
  int64_t http_header_timeout_ms = 10000;   // a request's line and headers, from its first byte
  int64_t http_body_timeout_ms = 30000;     // a request's body, from the end of its headers
  int64_t http_max_header_bytes = 16384;    // request line and headers of one request
  int64_t http_max_body_bytes = 4 << 20;    // one request body (an item is at most 2 MB; a query text 256 KiB)
  int64_t http_idle_timeout_ms = 60000;     // a connection that sends no byte of a next request for this long is closed
  int64_t http_threads = 1;                 // threads running the HTTP connections (parsing, rendering)

  int64_t tick_interval_ms = 10;            // one Raft tick
  int64_t election_timeout_ticks = 30;      // 300-600 ms with the default tick
  int64_t heartbeat_interval_ticks = 5;
  int64_t time_entry_interval_ms = 100;     // the leader appends a time entry when the log was idle this long
  int64_t max_clock_offset_ms = 500;        // a leader stamps entries at most this far ahead of a quorum's clocks
  int64_t request_timeout_ms = 10000;       // a request not answered by then gets 503 (outcome unknown for writes)
  int64_t bounded_staleness_entries = 1000; // `bounded` reads: at most this many entries behind the leader
  int64_t bounded_staleness_ms = 5000;      //   and at most this much replicated time behind
  int64_t session_wait_ms = 2000;           // a session read waits this long for the replica to catch up
  // Checkpoint (one synced LevelDB write) and compact the log this often; snapshots are exported only for followers.
  uint64_t checkpoint_interval_entries = 20000;
  uint64_t log_entries_kept_after_checkpoint = 2000;
  uint64_t snapshot_export_mb_per_s = 200;  // a snapshot for a follower is written at most this fast (0: unpaced)
  uint64_t log_cache_bytes = 32 << 20;      // the newest log entries kept in memory (storage/raft_log_store.h)
  uint64_t block_cache_mb = 64;             // LevelDB's cache of uncompressed table blocks
  int64_t max_open_tables = 990;            // LevelDB's table cache: open table files, each with its index and filter
  uint64_t table_block_kb = 16;             // a table's data block (a larger block: a smaller index)
  int64_t gc_interval_ms = 200;             // the collector's pace while the node is busy (node/gc_pacer.h)
  uint64_t gc_batch_items_max = 1000;       // items per container per pass (at most 100 while busy)
  double gc_driver_share = 0.5;             // idle passes take at most this part of the driver thread
  double gc_ru_share = 1.0;                 // part of a provisioned container's spare RU the collector may spend
  // Compacting what the collector drained (node/gc_compactor.h): a range once this many keys were deleted in it, at
  // most one range at a time, at least this long between two (0: never), never while the node is busy.
  uint64_t gc_compact_min_deletes = 10'000;
  int64_t gc_compact_interval_ms = 5000;
  uint64_t forecast_max_entries = 1'000'000;  // expiry index entries one container's TTL forecast reads at most
  int64_t forecast_interval_ms = 60'000;    // the forecast metrics' refresh (0: never)
  // The change feed retention the leader writes into a command that turns a feed on without one (docs/changefeed.md):
  // the replicated command carries the number, so replicas never read their own flag.
  int64_t changefeed_retention_seconds = 4 * 3600;

  Status validate() const;
};

// "virtual" or "real": the --clock mode as peers and the data directory name it.
inline const char* clock_mode_name(bool virtual_clock) { return virtual_clock ? "virtual" : "real"; }

// The data directory remembers the --clock mode it was created with (a file `clock` in it): a restart with another
// mode is refused (kFailedPrecondition, with the fix in the message). `fresh`: the store has no log and no state yet,
// so the mode is recorded; a store from before the file existed ran on the real clock.
Status check_data_clock_mode(const std::string& data_dir, bool virtual_clock, bool fresh);

// Where clients and peers reach this node, as reported in cluster status (clients follow it): --advertise; else this
// node's own entry in --peers when it listens on a wildcard address (0.0.0.0, [::]); else --listen.
std::string advertised_address(const NodeConfig& config);

// True for 127.0.0.0/8, [::1] and localhost listen addresses.
bool is_loopback_listen(const std::string& listen);

// Parses argv (mayflyd --id 1 --listen 127.0.0.1:7101 --peers 1=...,2=... --data DIR ...). On --help, or a usage
// error, `exit_code` is set and the message to print is in the Status (or in `help`).
struct ParsedFlags {
  NodeConfig config;
  int exit_code = -1;  // >= 0: exit now with this code
  std::string output;  // what to print before exiting (help or the error)
};
ParsedFlags parse_flags(int argc, char** argv);

// "1=127.0.0.1:7101,2=127.0.0.1:7102" -> {1: "127.0.0.1:7101", 2: ...}
Result<std::map<NodeId, std::string>> parse_peers(const std::string& text);

}  // namespace mayfly::node
