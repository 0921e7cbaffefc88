// mayflyd: one node of a Mayfly cluster. main() builds every object and hands each its dependencies.
//
//   mayflyd --id 1 --listen 127.0.0.1:7101 --peers 1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103 --data DIR
//
// SIGTERM / SIGINT: stop taking requests, answer the pending ones, close the store cleanly.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include "common/auth.h"
#include "common/clock.h"
#include "metrics/metrics.h"
#include "node/config.h"
#include "node/driver.h"
#include "node/restore.h"
#include "node/rpc.h"
#include "gateway/server.h"
#include "storage/replica.h"

// jemalloc's options (the program links it, mayflyd/CMakeLists.txt; common/allocator.h says why): a background thread
// gives free pages back to the system, those freed more than 5 s ago, so a node's resident memory follows what it
// holds instead of its highest point (a snapshot sent or installed, a backup). The MALLOC_CONF environment variable
// still overrides any of them.
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "background_thread:true,dirty_decay_ms:5000,muzzy_decay_ms:0";
}

int main(int argc, char** argv) {
  using namespace mayfly;
  node::ParsedFlags parsed = node::parse_flags(argc, argv);
  if (parsed.exit_code >= 0) {
    std::fputs(parsed.output.c_str(), parsed.exit_code == 0 ? stdout : stderr);
    return parsed.exit_code;
  }
  const node::NodeConfig& config = parsed.config;
  auto logger = spdlog::stderr_color_mt("mayflyd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ node" + std::to_string(config.id.value()) + " %v",
                      spdlog::pattern_time_type::utc);

  if (!config.restore_file.empty()) {
    if (int code = node::restore_from_backup(config); code >= 0) return code;
  }
  storage::ReplicaOptions options;
  options.data_dir = config.data_dir;
  options.raft.self = config.id;
  options.raft.election_timeout_ticks = config.election_timeout_ticks;
  options.raft.heartbeat_interval_ticks = config.heartbeat_interval_ticks;
  options.raft.tick_interval_micros = config.tick_interval_ms * 1000;
  options.raft.max_clock_offset_micros = config.max_clock_offset_ms * 1000;
  options.seed = static_cast<uint64_t>(SystemClock().now_micros()) ^ (config.id.value() << 48);
  options.checkpoint_interval_entries = config.checkpoint_interval_entries;
  options.log_entries_kept_after_checkpoint = config.log_entries_kept_after_checkpoint;
  options.snapshot_export_bytes_per_second = config.snapshot_export_mb_per_s << 20;
  options.log.recent_entry_bytes = config.log_cache_bytes;
  options.block_cache_bytes = static_cast<size_t>(config.block_cache_mb) << 20;
  options.max_open_tables = static_cast<int>(config.max_open_tables);
  options.table_block_bytes = static_cast<size_t>(config.table_block_kb) << 10;
  options.background_snapshots = true;
  if (!config.join) {
    for (const auto& [id, address] : config.peers) options.bootstrap.voters.insert(id);
  }
  std::error_code fs_error;
  const bool fresh = !std::filesystem::exists(config.data_dir, fs_error) ||
                     std::filesystem::is_empty(config.data_dir, fs_error);
  if (config.virtual_clock) {
    // Nobody's wall clock is replicated time, so the max-clock-offset ceiling has nothing to guard.
    options.raft.max_clock_offset_micros = replication::kNoClockOffsetLimit;
  }
  Result<std::unique_ptr<storage::Replica>> replica = storage::Replica::open(options);
  if (!replica.is_ok()) {
    spdlog::critical("cannot open the data directory {}: {}", config.data_dir, replica.status().to_string());
    return 1;
  }
  if (Status mode = node::check_data_clock_mode(config.data_dir, config.virtual_clock, fresh); !mode.is_ok()) {
    spdlog::critical("{}", mode.message());
    return 2;
  }
  if (config.virtual_clock) {
    spdlog::info("virtual clock: replicated time moves only on `mayfly cluster advance-clock`");
  }
  if (const auto& installed = (*replica)->installed_at_open()) {
    spdlog::warn("{} the install of the snapshot at index {} ({} bytes) that a crash interrupted, from its file, in "
                 "{:.0f} ms",
                 installed->redo ? "redid" : "did", installed->snapshot.index.value(), installed->snapshot.size_bytes,
                 installed->seconds * 1000);
  }
  const storage::AppliedState applied = (*replica)->state().applied();
  spdlog::info("opened {} at applied index {} (replicated time {} µs); log {}..{}, checkpoint at {}",
               config.data_dir, applied.index.value(), applied.ts_micros, (*replica)->log().first_index().value(),
               (*replica)->log().last_index().value(), (*replica)->log().snapshot_metadata().index.value());

  metrics::Metrics metrics(config.id.value());
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (!config.metrics.empty()) {
    std::string metrics_auth;
    if (!config.metrics_auth_file.empty()) {
      Result<std::string> read = auth::read_secret_file(config.metrics_auth_file);
      if (!read.is_ok() || read->find(':') == std::string::npos || read->front() == ':') {
        spdlog::critical("--metrics-auth-file: {}", read.is_ok() ? std::string("it must hold USER:PASSWORD")
                                                                 : read.status().message());
        return 2;
      }
      metrics_auth = std::move(read).value();
    } else if (!node::is_loopback_listen(config.metrics)) {
      spdlog::warn("metrics on {} without --metrics-auth-file: anyone who reaches it reads them", config.metrics);
    }
    Result<std::unique_ptr<metrics::MetricsServer>> started =
        metrics::MetricsServer::start(config.metrics, metrics, metrics_auth, config.metrics_threads,
                                      config.metrics_request_timeout_ms);
    if (!started.is_ok()) {
      spdlog::critical("{}", started.status().to_string());
      return 1;
    }
    metrics_server = std::move(started).value();
    spdlog::info("metrics on http://{}/metrics", config.metrics);
  }
  Result<node::Keyring> keyring = node::Keyring::load(config.keys_file);
  if (!keyring.is_ok()) {
    spdlog::critical("--keys-file: {}", keyring.status().message());
    return 2;
  }
  Result<node::ClusterSecrets> cluster_secrets = node::ClusterSecrets::load(config.cluster_secret_file);
  if (!cluster_secrets.is_ok()) {
    spdlog::critical("--cluster-secret-file: {}", cluster_secrets.status().message());
    return 2;
  }
  SystemClock clock;
  node::RequestUnitAccount request_units(clock, metrics);
  node::Driver driver(config, std::move(replica).value(), clock, metrics, request_units);
  node::RpcHost rpc(config, driver, metrics, request_units, std::move(keyring).value(),
                   std::move(cluster_secrets).value());
  if (Status status = rpc.start(); !status.is_ok()) {
    spdlog::critical("{}", status.to_string());
    return 1;
  }
  std::unique_ptr<gateway::Server> http;
  if (!config.http.empty()) {
    Result<std::unique_ptr<gateway::Server>> started = gateway::Server::start(config, rpc);
    if (!started.is_ok()) {
      spdlog::critical("{}", started.status().to_string());
      return 1;
    }
    http = std::move(started).value();
    spdlog::info("Cosmos DB REST API on http://{}/", config.http);
    if (config.http_emulator_key) {
      spdlog::warn("--emulator-key: the Cosmos emulator's published key is accepted on http://{}/ (read-write); "
                   "anyone on this machine knows it. For local development only", config.http);
    }
  }
  boost::asio::signal_set signals(driver.io(), SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& error, int signal) {
    if (error) return;
    spdlog::info("signal {}: shutting down", signal);
    driver.stop_gracefully();
  });
  metrics.set_expiring_source([&state = driver.state().reader()] {
    std::vector<int64_t> windows;
    for (int64_t seconds : metrics::kExpiringWindowsSeconds) windows.push_back(seconds * 1'000'000);
    std::vector<metrics::ExpiringFigures> figures;
    // Counted on the scrape itself: bounded per container, so a huge index never holds a scrape up (past the cap the
    // figures are lower bounds; the forecast metrics, refreshed on a read thread, cover the whole day).
    constexpr size_t kScrapeEntriesPerContainer = 100'000;
    Result<std::vector<storage::ExpiringSoon>> counted = state.expiring_soon(windows, kScrapeEntriesPerContainer);
    if (!counted.is_ok()) {
      spdlog::warn("cannot count the items expiring soon: {}", counted.status().to_string());
      return figures;
    }
    for (const storage::ExpiringSoon& container : *counted) {
      metrics::ExpiringFigures entry{container.database + "/" + container.container, {}};
      std::copy(container.counts.begin(), container.counts.end(), entry.counts.begin());
      figures.push_back(std::move(entry));
    }
    return figures;
  });
  driver.start(rpc);
  driver.run();  // catches what escapes the driver thread: logged, then the same clean stop as a storage failure
  metrics.set_expiring_source(nullptr);  // before the state machine it reads goes away
  if (http) http->stop();  // before the RPC host its calls run on
  rpc.stop();
  if (driver.failed()) {
    spdlog::critical("stopped after a failure (see above); closing the store");
    spdlog::default_logger()->flush();
    return 1;
  }
  spdlog::info("stopped cleanly");
  return 0;
}
