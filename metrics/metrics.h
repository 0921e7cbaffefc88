// Metrics: every Prometheus family of a node, defined in one place (metrics.cc holds all names), and the HTTP
// exposer. Names use the prefix mayfly_, base units (seconds, bytes), and counters end in _total. Labels are
// bounded: node, op, status, container ("database/container") — never item ids or partition key values.
//
// Thread-safety: every method may be called from any thread (prometheus-cpp metrics are thread-safe; the per-label
// caches below are locked).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "metrics/stats.h"

namespace mayfly::metrics {

// Why a deleted partition's items are still stored (mayfly_partition_delete_pending_partitions{reason}): the
// collector is removing them; users spent the container's request units (no spare RU); or this pass's work bound
// was spent on other containers or expired items (the next pass goes on).
inline constexpr const char* kPartitionWaitReasons[] = {"draining", "no_spare_ru", "pass_budget"};

// Live items of one container expiring within 1 minute, 10 minutes and 1 hour of the node's applied time.
inline constexpr std::array<int64_t, 3> kExpiringWindowsSeconds = {60, 600, 3600};
struct ExpiringFigures {
  std::string container;  // "database/container"
  std::array<int64_t, kExpiringWindowsSeconds.size()> counts{};
};

// The `reason` label of mayfly_peer_messages_rejected_total: "undecodable" (the transport could not decode it) and
// the names of replication::RejectReason (the Raft core refused it), plus "wrong_sender" for the peer handshake.
inline constexpr std::array<const char*, 10> kPeerRejectReasons = {
    "undecodable", "wrong_sender", "wrong_recipient", "not_member",   "term_out_of_range",
    "bad_entries", "bad_config",   "bad_snapshot",    "bad_response", "rival_leader"};

// The `bound` label of mayfly_dedup_refused_total (storage/write_dedup.h): one client's outcomes, one key's share of
// the table, the whole table.
inline constexpr std::array<const char*, 3> kDedupRefusalBounds = {"client", "key", "table"};

class Metrics {
 public:
  explicit Metrics(uint64_t node_id);

  // Raft and replicated time, after each driver flush.
  void set_raft(const RaftFigures& figures);
  void observe_fsync(double seconds);
  void observe_proposal(double seconds);  // propose -> applied on the leader
  // Expiry lateness on this replica: the wall time at which its applied (replicated) time first reached an item's
  // expiry instant, minus that instant (node/expiry_watch.h).
  void observe_expiry_lateness(double seconds);
  // Replicated time (leader): each other voter's clock minus ours, in seconds, as the leader estimates it; peers not
  // listed (every peer, on a follower) are dropped. And entries stamped below our clock by the max-clock-offset
  // ceiling.
  void set_clock_offsets(const std::map<uint64_t, double>& offset_seconds_by_peer);
  void add_clock_held_back(uint64_t entries);
  // Exactly-once writes: re-sent writes this node applied as duplicates (answered with their first outcome), and the
  // table of client write outcomes (clients it knows, bytes of outcomes it keeps).
  void add_writes_deduplicated(uint64_t writes);
  void set_dedup_table(uint64_t clients, int64_t bytes);
  // A write the exactly-once table refused with 429 substatus 6 (every node counts its own applies); `bound` is one
  // of kDedupRefusalBounds (storage::OpResult::dedup_refusal), anything else is not counted.
  void add_dedup_refused(std::string_view bound);
  // Requests, where they are answered.
  void observe_request(const std::string& op, int status, double seconds);
  // Whether the collector runs at its busy pace (yielding to foreground load), and the time to its next pass.
  void set_gc_pace(bool busy, double next_pass_seconds);
  // The collector's drained ranges (node/gc_compactor.h): one range compacted in `seconds`, which held `keys` deleted
  // keys. Called on the compaction thread.
  void add_gc_compaction(double seconds, int64_t keys);
  void add_expired_skipped(int64_t items);
  // A peer message was refused: `reason` is one of kPeerRejectReasons (anything else counts as "other").
  void add_peer_message_rejected(const std::string& reason);
  // Snapshot transfers that failed locally: kind "read" (a leader could not read its snapshot file) or "receive" (a
  // follower refused or could not write an incoming one).
  void add_snapshot_errors(const std::string& kind, uint64_t count);
  // Checkpoints ("checkpoint") and snapshot exports for followers ("snapshot_export") this node made.
  void add_state_persists(const std::string& kind, uint64_t count);
  // Containers, refreshed periodically by the driver. set_container_figures sets the figures of the containers
  // given (a node with many refreshes them in turns); retain_containers drops every series of the containers not in
  // `existing` ("database/container"); set_containers is both: the containers given are all there are.
  void set_containers(const std::vector<ContainerFigures>& containers);
  void set_container_figures(const std::vector<ContainerFigures>& containers);
  void retain_containers(const std::vector<std::string>& existing);
  // The garbage collector deleted `items`/`bytes` from `container`, with these deletion lags (delete - expiry).
  void observe_collected(const std::string& container, int64_t items, int64_t bytes,
                         const std::vector<double>& lag_seconds);
  // Delete by partition key: items (and bytes) of deleted partitions the collector removed, and the deleted
  // partitions on this node whose items are not all removed yet.
  // `pending` is reported under `reason` (kPartitionWaitReasons: why they are not removed yet), 0 under the others.
  void observe_partition_drain(const std::string& container, int64_t items, int64_t bytes, int64_t pending,
                               const char* reason);

  // The TTL forecast (node/forecast.h) of the containers given. Every container that set_container_figures has seen
  // has these series from then on, at 0 until its first forecast.
  void set_forecast_figures(const std::vector<ForecastFigures>& containers);
  // The change feeds that are on (every other container's feed series are removed).
  void set_changefeed_figures(const std::vector<ChangeFeedFigures>& feeds);
  // "Expiring soon" warnings (docs/retention.md) this node served in change feed pages.
  void add_changefeed_warnings(const std::string& container, int64_t warnings);

  // Request units.
  void add_request_units(const std::string& container, const std::string& op, double request_units);
  void add_throttled(const std::string& container);
  void add_collector_request_units(const std::string& container, double request_units);
  void set_spare_request_units(const std::string& container, double request_units);

  // Items expiring soon take an index scan to count, so they are counted when scraped, on the scraper's thread, by
  // `source` (at most once per `kExpiringRefresh`; figures in between come from the last count). Clear the source
  // (nullptr) before what it reads goes away: this waits for a count in progress.
  void set_expiring_source(std::function<std::vector<ExpiringFigures>()> source);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  const std::string& node_label() const { return node_; }  // the `node` label every series carries
  // Everything a scrape serves: the registry, the items-expiring-soon family and the allocator's figures.
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables() const;
  // The text exposition, as a scrape would return it (for tests and `mayflyd --print-metrics`).
  std::string scrape_text() const;

 private:
  prometheus::Gauge& container_gauge(prometheus::Family<prometheus::Gauge>& family, const std::string& container);
  void note_container(const std::string& container);  // it has a series now: retain_containers may drop it

  std::shared_ptr<prometheus::Registry> registry_;
  std::string node_;
  std::shared_ptr<class ExpiringCollectable> expiring_;
  std::shared_ptr<class AllocatorCollectable> allocator_;
  prometheus::Family<prometheus::Gauge>& raft_term_;
  prometheus::Family<prometheus::Gauge>& raft_role_;
  prometheus::Family<prometheus::Gauge>& raft_leader_;
  prometheus::Family<prometheus::Gauge>& raft_commit_index_;
  prometheus::Family<prometheus::Gauge>& raft_applied_index_;
  prometheus::Family<prometheus::Gauge>& applied_time_lag_;
  prometheus::Family<prometheus::Counter>& leader_changes_;
  prometheus::Family<prometheus::Gauge>& clock_offset_;
  prometheus::Family<prometheus::Counter>& clock_held_back_;
  prometheus::Family<prometheus::Counter>& writes_deduplicated_;
  prometheus::Family<prometheus::Counter>& dedup_refused_;
  prometheus::Family<prometheus::Gauge>& dedup_clients_;
  prometheus::Family<prometheus::Gauge>& dedup_bytes_;
  prometheus::Family<prometheus::Histogram>& fsync_latency_;
  prometheus::Family<prometheus::Histogram>& proposal_latency_;
  prometheus::Family<prometheus::Histogram>& expiry_lateness_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_latency_;
  prometheus::Family<prometheus::Counter>& expired_skipped_;
  prometheus::Family<prometheus::Counter>& peer_messages_rejected_;
  prometheus::Family<prometheus::Counter>& snapshot_errors_;
  prometheus::Family<prometheus::Counter>& state_persists_;
  prometheus::Family<prometheus::Gauge>& live_items_;
  prometheus::Family<prometheus::Gauge>& billable_bytes_;
  prometheus::Family<prometheus::Gauge>& backlog_items_;
  prometheus::Family<prometheus::Gauge>& backlog_bytes_;
  prometheus::Family<prometheus::Gauge>& backlog_counting_;
  prometheus::Family<prometheus::Gauge>& active_holds_;
  prometheus::Family<prometheus::Gauge>& oldest_expired_age_;
  prometheus::Family<prometheus::Counter>& deleted_items_;
  prometheus::Family<prometheus::Counter>& deleted_bytes_;
  prometheus::Family<prometheus::Histogram>& deletion_lag_;
  prometheus::Family<prometheus::Counter>& partition_drained_items_;
  prometheus::Family<prometheus::Counter>& partition_drained_bytes_;
  prometheus::Family<prometheus::Gauge>& partitions_pending_;
  prometheus::Family<prometheus::Counter>& request_units_;
  prometheus::Family<prometheus::Counter>& throttled_;
  prometheus::Family<prometheus::Counter>& collector_request_units_;
  prometheus::Family<prometheus::Gauge>& spare_request_units_;
  prometheus::Family<prometheus::Gauge>& forecast_expiring_items_;
  prometheus::Family<prometheus::Gauge>& forecast_backlog_peak_;
  prometheus::Family<prometheus::Gauge>& forecast_drain_seconds_;
  prometheus::Family<prometheus::Gauge>& reclaim_capacity_;
  prometheus::Family<prometheus::Gauge>& changefeed_bytes_;
  prometheus::Family<prometheus::Gauge>& changefeed_oldest_position_;
  prometheus::Family<prometheus::Gauge>& changefeed_oldest_age_;
  prometheus::Family<prometheus::Counter>& changefeed_warnings_;

  prometheus::Family<prometheus::Gauge>& gc_busy_;
  prometheus::Family<prometheus::Gauge>& gc_next_pass_;
  prometheus::Family<prometheus::Counter>& gc_compactions_;
  prometheus::Family<prometheus::Counter>& gc_compaction_seconds_;
  prometheus::Family<prometheus::Counter>& gc_compacted_keys_;
  prometheus::Gauge& gc_busy_gauge_;       // this node's series of the two above: set on every driver tick
  prometheus::Gauge& gc_next_pass_gauge_;
  // This node's series of the per-write histograms. Family::Add builds (and drops) a whole metric on every call, even
  // for labels it already has: the hot paths keep handles instead.
  prometheus::Histogram& fsync_histogram_;
  prometheus::Histogram& proposal_histogram_;
  prometheus::Histogram& lateness_histogram_;

  // The request series by (op, status): bounded label sets, made once and never removed.
  struct RequestSeries {
    prometheus::Counter* count = nullptr;
    prometheus::Histogram* latency = nullptr;
  };
  std::mutex request_series_mutex_;
  std::map<std::pair<std::string, int>, RequestSeries> request_series_;

  std::mutex mutex_;
  std::set<std::string> feed_containers_;  // containers with change feed series
  std::string last_role_;
  uint64_t last_leader_ = 0;
  std::set<std::string> known_containers_;  // every container with a series of its own
  std::vector<uint64_t> known_clock_peers_;
  // container -> op -> its request-units series (removed with the container, retain_containers).
  std::map<std::string, std::map<std::string, prometheus::Counter*, std::less<>>, std::less<>> charged_ops_;
};

// Serves a registry on http://HOST:PORT/metrics (civetweb inside prometheus-cpp).
class MetricsServer {
 public:
  // `basic_auth` "USER:PASSWORD": scrapes must carry these HTTP basic-auth credentials (compared in constant time),
  // anything else gets 401; empty: no authentication.
  // `threads` requests are served at once; a request whose line and headers have not all arrived within
  // `request_timeout_ms` is dropped (civetweb's request_timeout_ms), so a slow or half-sent request holds one thread
  // for that long at most and the others keep answering scrapes.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address, const Metrics& metrics,
                                                      const std::string& basic_auth = std::string(),
                                                      int64_t threads = 4, int64_t request_timeout_ms = 5000);

 private:
  explicit MetricsServer(std::unique_ptr<prometheus::Exposer> exposer) : exposer_(std::move(exposer)) {}
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace mayfly::metrics
