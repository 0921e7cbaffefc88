#include "metrics/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>
#include <unordered_set>
#include <utility>

#include "common/allocator.h"
#include "common/auth.h"

namespace mayfly::metrics {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Latencies from 100 µs to ~13 s.
Histogram::BucketBoundaries latency_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 13};
}

// Expiry lateness: fine steps around the 5 ms target (issue #14), so a p99 is not interpolated across 5-10 ms.
Histogram::BucketBoundaries lateness_buckets() {
  return {0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.01, 0.0125, 0.015,
          0.02,   0.025, 0.05,   0.1,   0.25,  0.5,   1,     2.5,   5,     13};
}

// Deletion lag from 10 ms to a day.
Histogram::BucketBoundaries lag_buckets() {
  return {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400};
}

constexpr const char* kRoles[] = {"follower", "pre-candidate", "candidate", "leader"};
constexpr const char* kExpiringWindowLabels[] = {"1m", "10m", "1h"};
static_assert(std::size(kExpiringWindowLabels) == kExpiringWindowsSeconds.size());
constexpr std::chrono::seconds kExpiringRefresh{5};

}  // namespace

// mayfly_ttl_items_expiring, counted on demand (see Metrics::set_expiring_source).
class ExpiringCollectable : public prometheus::Collectable {
 public:
  explicit ExpiringCollectable(std::string node) : node_(std::move(node)) {}

  void set_source(std::function<std::vector<ExpiringFigures>()> source) {
    std::lock_guard<std::mutex> lock(mutex_);
    source_ = std::move(source);
    counted_at_.reset();
    figures_.clear();
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!source_) return {};
    const auto now = std::chrono::steady_clock::now();
    if (!counted_at_ || now - *counted_at_ >= kExpiringRefresh) {
      figures_ = source_();
      counted_at_ = now;
    }
    prometheus::MetricFamily family;
    family.name = "mayfly_ttl_items_expiring";
    family.help = "Live items whose expiry instant falls within the window after this node's applied time";
    family.type = prometheus::MetricType::Gauge;
    for (const ExpiringFigures& figures : figures_) {
      for (size_t i = 0; i < figures.counts.size(); ++i) {
        prometheus::ClientMetric metric;
        metric.label = {{"container", figures.container}, {"node", node_}, {"window", kExpiringWindowLabels[i]}};
        metric.gauge.value = static_cast<double>(figures.counts[i]);
        family.metric.push_back(std::move(metric));
      }
    }
    return {std::move(family)};
  }

 private:
  const std::string node_;
  mutable std::mutex mutex_;
  std::function<std::vector<ExpiringFigures>()> source_;
  mutable std::optional<std::chrono::steady_clock::time_point> counted_at_;
  mutable std::vector<ExpiringFigures> figures_;
};

// mayfly_memory_allocator_bytes and mayfly_memory_allocator_info, read from the allocator when scraped
// (common/allocator.h).
class AllocatorCollectable : public prometheus::Collectable {
 public:
  explicit AllocatorCollectable(std::string node) : node_(std::move(node)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const AllocatorFigures figures = allocator_figures();
    prometheus::MetricFamily bytes;
    bytes.name = "mayfly_memory_allocator_bytes";
    bytes.help = "The memory allocator's figures: allocated (held by the program), resident (allocated plus free "
                 "memory not yet given back to the system), retained (address space kept, not in RAM)";
    bytes.type = prometheus::MetricType::Gauge;
    for (const auto& [kind, value] : {std::pair<const char*, uint64_t>{"allocated", figures.allocated},
                                      {"resident", figures.resident},
                                      {"retained", figures.retained}}) {
      prometheus::ClientMetric metric;
      metric.label = {{"kind", kind}, {"node", node_}};
      metric.gauge.value = static_cast<double>(value);
      bytes.metric.push_back(std::move(metric));
    }
    prometheus::MetricFamily info;
    info.name = "mayfly_memory_allocator_info";
    info.help = "1, labelled with the memory allocator this node runs on";
    info.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric metric;
    metric.label = {{"allocator", figures.name}, {"node", node_}};
    metric.gauge.value = 1;
    info.metric.push_back(std::move(metric));
    return {std::move(bytes), std::move(info)};
  }

 private:
  const std::string node_;
};

Metrics::Metrics(uint64_t node_id)
    : registry_(std::make_shared<prometheus::Registry>()),
      node_(std::to_string(node_id)),
      expiring_(std::make_shared<ExpiringCollectable>(node_)),
      allocator_(std::make_shared<AllocatorCollectable>(node_)),
      raft_term_(BuildGauge().Name("mayfly_raft_term").Help("Current Raft term").Register(*registry_)),
      raft_role_(BuildGauge()
                     .Name("mayfly_raft_role")
                     .Help("1 for this node's current Raft role, 0 for the others")
                     .Register(*registry_)),
      raft_leader_(BuildGauge().Name("mayfly_raft_leader").Help("Id of the leader this node knows (0: none)").Register(*registry_)),
      raft_commit_index_(BuildGauge().Name("mayfly_raft_commit_index").Help("Highest log index known committed").Register(*registry_)),
      raft_applied_index_(BuildGauge().Name("mayfly_raft_applied_index").Help("Highest log index applied to the state machine").Register(*registry_)),
      applied_time_lag_(BuildGauge()
                            .Name("mayfly_applied_time_lag_seconds")
                            .Help("This node's wall clock minus its applied replicated time")
                            .Register(*registry_)),
      leader_changes_(BuildCounter()
                          .Name("mayfly_raft_leader_changes_total")
                          .Help("Times this node saw the leader change")
                          .Register(*registry_)),
      clock_offset_(BuildGauge()
                        .Name("mayfly_clock_offset_seconds")
                        .Help("Leader only: a voter's wall clock minus the leader's, as the leader estimates it from "
                              "the clocks voters report")
                        .Register(*registry_)),
      clock_held_back_(BuildCounter()
                           .Name("mayfly_clock_held_back_total")
                           .Help("Entries this node stamped below its own clock because it ran more than "
                                 "--max-clock-offset ahead of a quorum of voters")
                           .Register(*registry_)),
      writes_deduplicated_(BuildCounter()
                               .Name("mayfly_writes_deduplicated_total")
                               .Help("Re-sent client writes this node applied as duplicates: answered with the "
                                     "outcome of their first execution, not executed again")
                               .Register(*registry_)),
      dedup_refused_(BuildCounter()
                         .Name("mayfly_dedup_refused_total")
                         .Help("Client writes this node's exactly-once table refused with 429 substatus 6, by the "
                               "bound they met: client (1024 outcomes, 16 MiB), key (a key's share of the table), "
                               "table (256 MiB in all)")
                         .Register(*registry_)),
      dedup_clients_(BuildGauge()
                         .Name("mayfly_dedup_clients")
                         .Help("Clients the exactly-once table keeps a record of (idle ones go after 10 minutes)")
                         .Register(*registry_)),
      dedup_bytes_(BuildGauge()
                       .Name("mayfly_dedup_bytes")
                       .Help("Bytes of unacknowledged write outcomes the exactly-once table keeps")
                       .Register(*registry_)),
      fsync_latency_(BuildHistogram()
                         .Name("mayfly_raft_fsync_latency_seconds")
                         .Help("Time to persist one Ready (one fsync'd append to the Raft WAL)")
                         .Register(*registry_)),
      proposal_latency_(BuildHistogram()
                            .Name("mayfly_raft_proposal_latency_seconds")
                            .Help("From proposal to applied, on the leader")
                            .Register(*registry_)),
      expiry_lateness_(BuildHistogram()
                           .Name("mayfly_ttl_expiry_lateness_seconds")
                           .Help("Wall time at which this replica's applied time reached an item's expiry instant, "
                                 "minus that instant (one sample per distinct instant)")
                           .Register(*registry_)),
      requests_(BuildCounter()
                    .Name("mayfly_requests_total")
                    .Help("Client requests answered by this node, by operation and status")
                    .Register(*registry_)),
      request_latency_(BuildHistogram()
                           .Name("mayfly_request_latency_seconds")
                           .Help("Client request latency on this node, by operation")
                           .Register(*registry_)),
      expired_skipped_(BuildCounter()
                           .Name("mayfly_ttl_reads_skipped_expired_total")
                           .Help("Items reads passed over because they had expired")
                           .Register(*registry_)),
      peer_messages_rejected_(BuildCounter()
                                  .Name("mayfly_peer_messages_rejected_total")
                                  .Help("Raft messages from peers refused as malformed, by reason")
                                  .Register(*registry_)),
      snapshot_errors_(BuildCounter()
                           .Name("mayfly_raft_snapshot_errors_total")
                           .Help("Snapshot transfers that failed on this node: read (of the leader's snapshot file), "
                                 "receive (an incoming snapshot refused or not written)")
                           .Register(*registry_)),
      state_persists_(BuildCounter()
                          .Name("mayfly_raft_state_persists_total")
                          .Help("How the Raft log was made compactable: checkpoint (a synced write of the state, "
                                "the log compacted behind it) or snapshot_export (the state streamed to a snapshot "
                                "file for a follower that needs one)")
                          .Register(*registry_)),
      live_items_(BuildGauge().Name("mayfly_storage_live_items").Help("Items users can see (expired items excluded)").Register(*registry_)),
      billable_bytes_(BuildGauge()
                          .Name("mayfly_storage_billable_bytes")
                          .Help("Bytes of the items users can see (expired items excluded)")
                          .Register(*registry_)),
      backlog_items_(BuildGauge()
                         .Name("mayfly_ttl_gc_backlog_items")
                         .Help("Items expired at the applied time but not yet deleted on this node")
                         .Register(*registry_)),
      backlog_bytes_(BuildGauge()
                         .Name("mayfly_ttl_gc_backlog_bytes")
                         .Help("Bytes of items expired but not yet deleted on this node")
                         .Register(*registry_)),
      backlog_counting_(BuildGauge()
                            .Name("mayfly_ttl_gc_backlog_counting")
                            .Help("1 while this node is still counting the container's expired items (after a "
                                  "restart or a defaultTtl change): the backlog figures are lower bounds until 0")
                            .Register(*registry_)),
      active_holds_(BuildGauge()
                        .Name("mayfly_holds_active")
                        .Help("Legal holds in force on the container (docs/retention.md): its covered items do not "
                              "expire and cannot be deleted; the backlog counts those past their instant")
                        .Register(*registry_)),
      oldest_expired_age_(BuildGauge()
                              .Name("mayfly_ttl_gc_oldest_expired_age_seconds")
                              .Help("Age of the oldest expired, not yet deleted item (0: none)")
                              .Register(*registry_)),
      deleted_items_(BuildCounter()
                         .Name("mayfly_ttl_gc_deleted_items_total")
                         .Help("Expired items the garbage collector deleted on this node")
                         .Register(*registry_)),
      deleted_bytes_(BuildCounter()
                         .Name("mayfly_ttl_gc_deleted_bytes_total")
                         .Help("Bytes of expired items the garbage collector deleted on this node")
                         .Register(*registry_)),
      deletion_lag_(BuildHistogram()
                        .Name("mayfly_ttl_gc_deletion_lag_seconds")
                        .Help("Physical delete time minus expiry instant")
                        .Register(*registry_)),
      partition_drained_items_(BuildCounter()
                                   .Name("mayfly_partition_delete_drained_items_total")
                                   .Help("Items of partitions deleted by partition key that the collector removed on "
                                         "this node")
                                   .Register(*registry_)),
      partition_drained_bytes_(BuildCounter()
                                   .Name("mayfly_partition_delete_drained_bytes_total")
                                   .Help("Bytes of those items")
                                   .Register(*registry_)),
      partitions_pending_(BuildGauge()
                              .Name("mayfly_partition_delete_pending_partitions")
                              .Help("Partitions deleted by partition key whose items this node's collector has not "
                                    "all removed yet (hidden from every read meanwhile)")
                              .Register(*registry_)),
      request_units_(BuildCounter()
                         .Name("mayfly_ru_consumed_total")
                         .Help("Request units consumed on this node, by container and operation (ttl_delete: "
                               "serverless TTL deletes)")
                         .Register(*registry_)),
      throttled_(BuildCounter()
                     .Name("mayfly_requests_throttled_total")
                     .Help("Requests answered 429 because the container's provisioned RU/s were used up")
                     .Register(*registry_)),
      collector_request_units_(BuildCounter()
                                   .Name("mayfly_ttl_gc_ru_spent_total")
                                   .Help("Request units the garbage collector spent deleting on this node")
                                   .Register(*registry_)),
      spare_request_units_(BuildGauge()
                               .Name("mayfly_ttl_gc_spare_ru")
                               .Help("Request units left for the collector in the current second (provisioned "
                                     "minus consumed minus already spent)")
                               .Register(*registry_)),
      forecast_expiring_items_(BuildGauge()
                                   .Name("mayfly_ttl_forecast_expiring_items")
                                   .Help("Live items that expire within the window (1h, 24h) after this node's "
                                         "applied time (the TTL forecast, refreshed every --forecast-interval-ms)")
                                   .Register(*registry_)),
      forecast_backlog_peak_(BuildGauge()
                                 .Name("mayfly_ttl_forecast_backlog_peak_items")
                                 .Help("Peak of the expired-not-collected backlog projected over the next 24 h")
                                 .Register(*registry_)),
      forecast_drain_seconds_(BuildGauge()
                                  .Name("mayfly_ttl_forecast_drain_seconds")
                                  .Help("Projected time from the backlog's peak until the collector has emptied it "
                                        "(86400: not within the 24 h)")
                                  .Register(*registry_)),
      reclaim_capacity_(BuildGauge()
                            .Name("mayfly_ttl_gc_reclaim_capacity_items_per_second")
                            .Help("Items per second the collector can delete on this node for the container: "
                                  "measured over the last minute's busy passes, else from its configuration")
                            .Register(*registry_)),
      changefeed_bytes_(BuildGauge()
                            .Name("mayfly_changefeed_bytes")
                            .Help("LevelDB's approximate on-disk size of the container's change feed on this node "
                                  "(records, shadow images, policy history; not what is still in the memtable)")
                            .Register(*registry_)),
      changefeed_oldest_position_(BuildGauge()
                                      .Name("mayfly_changefeed_oldest_position")
                                      .Help("The oldest log position a change feed reader may start from (the "
                                            "retention's start)")
                                      .Register(*registry_)),
      changefeed_oldest_age_(BuildGauge()
                                 .Name("mayfly_changefeed_oldest_age_seconds")
                                 .Help("Replicated time between the feed's oldest position and the applied time")
                                 .Register(*registry_)),
      changefeed_warnings_(BuildCounter()
                               .Name("mayfly_changefeed_warnings_total")
                               .Help("Expiring-soon warnings (the container's expiryWarning) this node served in change "
                                     "feed pages")
                               .Register(*registry_)),
      gc_busy_(BuildGauge()
                   .Name("mayfly_ttl_gc_busy")
                   .Help("1 while the garbage collector yields to foreground load (short passes every "
                         "--gc-interval-ms), 0 while it uses idle time (passes back to back up to --gc-driver-share)")
                   .Register(*registry_)),
      gc_next_pass_(BuildGauge()
                        .Name("mayfly_ttl_gc_next_pass_seconds")
                        .Help("Time until the garbage collector's next pass (node/gc_pacer.h)")
                        .Register(*registry_)),
      gc_compactions_(BuildCounter()
                          .Name("mayfly_ttl_gc_compactions_total")
                          .Help("Key ranges the garbage collector drained that this node compacted (LevelDB "
                                "CompactRange, so scans stop stepping over their tombstones)")
                          .Register(*registry_)),
      gc_compaction_seconds_(BuildCounter()
                                 .Name("mayfly_ttl_gc_compaction_seconds_total")
                                 .Help("Time those compactions took, on their own thread")
                                 .Register(*registry_)),
      gc_compacted_keys_(BuildCounter()
                             .Name("mayfly_ttl_gc_compacted_keys_total")
                             .Help("Keys deleted in the ranges compacted (their tombstones dropped)")
                             .Register(*registry_)),
      gc_busy_gauge_(gc_busy_.Add({{"node", node_}})),
      gc_next_pass_gauge_(gc_next_pass_.Add({{"node", node_}})),
      fsync_histogram_(fsync_latency_.Add({{"node", node_}}, latency_buckets())),
      proposal_histogram_(proposal_latency_.Add({{"node", node_}}, latency_buckets())),
      lateness_histogram_(expiry_lateness_.Add({{"node", node_}}, lateness_buckets())) {
  raft_term_.Add({{"node", node_}}).Set(0);
  for (const char* role : kRoles) raft_role_.Add({{"node", node_}, {"role", role}}).Set(0);
  leader_changes_.Add({{"node", node_}});
  clock_held_back_.Add({{"node", node_}});
  writes_deduplicated_.Add({{"node", node_}});
  for (const char* bound : kDedupRefusalBounds) dedup_refused_.Add({{"node", node_}, {"bound", bound}});
  dedup_clients_.Add({{"node", node_}});
  dedup_bytes_.Add({{"node", node_}});
  expired_skipped_.Add({{"node", node_}});
  for (const char* reason : kPeerRejectReasons) peer_messages_rejected_.Add({{"node", node_}, {"reason", reason}});
  for (const char* kind : {"read", "receive"}) snapshot_errors_.Add({{"node", node_}, {"kind", kind}});
  for (const char* kind : {"checkpoint", "snapshot_export"}) state_persists_.Add({{"node", node_}, {"kind", kind}});
  gc_compactions_.Add({{"node", node_}});
  gc_compaction_seconds_.Add({{"node", node_}});
  gc_compacted_keys_.Add({{"node", node_}});
}

void Metrics::add_gc_compaction(double seconds, int64_t keys) {
  const prometheus::Labels node{{"node", node_}};
  gc_compactions_.Add(node).Increment();
  gc_compaction_seconds_.Add(node).Increment(std::max(0.0, seconds));
  gc_compacted_keys_.Add(node).Increment(static_cast<double>(std::max<int64_t>(0, keys)));
}

void Metrics::set_gc_pace(bool busy, double next_pass_seconds) {
  gc_busy_gauge_.Set(busy ? 1 : 0);
  gc_next_pass_gauge_.Set(next_pass_seconds);
}

void Metrics::set_raft(const RaftFigures& figures) {
  const prometheus::Labels node{{"node", node_}};
  raft_term_.Add(node).Set(static_cast<double>(figures.term));
  for (const char* role : kRoles) {
    raft_role_.Add({{"node", node_}, {"role", role}}).Set(figures.role == role ? 1 : 0);
  }
  raft_leader_.Add(node).Set(static_cast<double>(figures.leader));
  raft_commit_index_.Add(node).Set(static_cast<double>(figures.commit_index));
  raft_applied_index_.Add(node).Set(static_cast<double>(figures.applied_index));
  applied_time_lag_.Add(node).Set(figures.applied_time_lag_seconds);
  std::lock_guard<std::mutex> lock(mutex_);
  if (figures.leader != 0 && figures.leader != last_leader_) {
    if (last_leader_ != 0) leader_changes_.Add(node).Increment();
    last_leader_ = figures.leader;
  }
}

void Metrics::set_clock_offsets(const std::map<uint64_t, double>& offset_seconds_by_peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint64_t peer : known_clock_peers_) {
    if (!offset_seconds_by_peer.contains(peer)) {
      clock_offset_.Remove(&clock_offset_.Add({{"node", node_}, {"peer", std::to_string(peer)}}));
    }
  }
  known_clock_peers_.clear();
  for (const auto& [peer, seconds] : offset_seconds_by_peer) {
    clock_offset_.Add({{"node", node_}, {"peer", std::to_string(peer)}}).Set(seconds);
    known_clock_peers_.push_back(peer);
  }
}

void Metrics::add_clock_held_back(uint64_t entries) {
  clock_held_back_.Add({{"node", node_}}).Increment(static_cast<double>(entries));
}

void Metrics::add_writes_deduplicated(uint64_t writes) {
  writes_deduplicated_.Add({{"node", node_}}).Increment(static_cast<double>(writes));
}

void Metrics::add_dedup_refused(std::string_view bound) {
  for (const char* known : kDedupRefusalBounds) {
    if (bound == known) {
      dedup_refused_.Add({{"node", node_}, {"bound", known}}).Increment();
      return;
    }
  }
}

void Metrics::set_dedup_table(uint64_t clients, int64_t bytes) {
  dedup_clients_.Add({{"node", node_}}).Set(static_cast<double>(clients));
  dedup_bytes_.Add({{"node", node_}}).Set(static_cast<double>(bytes));
}

void Metrics::observe_fsync(double seconds) { fsync_histogram_.Observe(seconds); }

void Metrics::observe_expiry_lateness(double seconds) {
  lateness_histogram_.Observe(seconds);
}

void Metrics::observe_proposal(double seconds) {
  proposal_histogram_.Observe(seconds);
}

void Metrics::observe_request(const std::string& op, int status, double seconds) {
  RequestSeries series;
  {
    std::lock_guard<std::mutex> lock(request_series_mutex_);
    RequestSeries& known = request_series_[{op, status}];
    if (known.count == nullptr) {
      known.count = &requests_.Add({{"node", node_}, {"op", op}, {"status", std::to_string(status)}});
      known.latency = &request_latency_.Add({{"node", node_}, {"op", op}}, latency_buckets());
    }
    series = known;
  }
  series.count->Increment();
  series.latency->Observe(seconds);
}

void Metrics::add_expired_skipped(int64_t items) {
  if (items > 0) expired_skipped_.Add({{"node", node_}}).Increment(static_cast<double>(items));
}

void Metrics::add_peer_message_rejected(const std::string& reason) {
  bool known = false;
  for (const char* name : kPeerRejectReasons) known = known || reason == name;
  peer_messages_rejected_.Add({{"node", node_}, {"reason", known ? reason : std::string("other")}}).Increment();
}

void Metrics::add_state_persists(const std::string& kind, uint64_t count) {
  if (count > 0) state_persists_.Add({{"node", node_}, {"kind", kind}}).Increment(static_cast<double>(count));
}

void Metrics::add_snapshot_errors(const std::string& kind, uint64_t count) {
  if (count > 0) snapshot_errors_.Add({{"node", node_}, {"kind", kind}}).Increment(static_cast<double>(count));
}

void Metrics::set_containers(const std::vector<ContainerFigures>& containers) {
  std::vector<std::string> names;
  for (const ContainerFigures& figures : containers) names.push_back(figures.container);
  retain_containers(names);
  set_container_figures(containers);
}

void Metrics::set_container_figures(const std::vector<ContainerFigures>& containers) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const ContainerFigures& figures : containers) {
    const prometheus::Labels labels{{"node", node_}, {"container", figures.container}};
    live_items_.Add(labels).Set(static_cast<double>(figures.live_items));
    billable_bytes_.Add(labels).Set(static_cast<double>(figures.live_bytes));
    backlog_items_.Add(labels).Set(static_cast<double>(figures.backlog_items));
    backlog_bytes_.Add(labels).Set(static_cast<double>(figures.backlog_bytes));
    backlog_counting_.Add(labels).Set(figures.backlog_counting ? 1 : 0);
    active_holds_.Add(labels).Set(static_cast<double>(figures.active_holds));
    oldest_expired_age_.Add(labels).Set(figures.oldest_expired_age_seconds);
    // The forecast series exist as soon as the container does (0 until its first forecast): Add keeps a value.
    for (const char* window : {"1h", "24h"}) {
      forecast_expiring_items_.Add({{"node", node_}, {"container", figures.container}, {"window", window}});
    }
    for (auto* family : {&forecast_backlog_peak_, &forecast_drain_seconds_, &reclaim_capacity_}) family->Add(labels);
    known_containers_.insert(figures.container);
  }
}

void Metrics::set_forecast_figures(const std::vector<ForecastFigures>& containers) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const ForecastFigures& figures : containers) {
    const prometheus::Labels labels{{"node", node_}, {"container", figures.container}};
    forecast_expiring_items_.Add({{"node", node_}, {"container", figures.container}, {"window", "1h"}})
        .Set(static_cast<double>(figures.expiring_hour_items));
    forecast_expiring_items_.Add({{"node", node_}, {"container", figures.container}, {"window", "24h"}})
        .Set(static_cast<double>(figures.expiring_day_items));
    forecast_backlog_peak_.Add(labels).Set(figures.backlog_peak_items);
    forecast_drain_seconds_.Add(labels).Set(figures.drain_seconds);
    reclaim_capacity_.Add(labels).Set(figures.capacity_items_per_second);
    known_containers_.insert(figures.container);
  }
}

void Metrics::add_changefeed_warnings(const std::string& container, int64_t warnings) {
  changefeed_warnings_.Add({{"node", node_}, {"container", container}}).Increment(static_cast<double>(warnings));
}

void Metrics::set_changefeed_figures(const std::vector<ChangeFeedFigures>& feeds) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<std::string> on;
  for (const ChangeFeedFigures& figures : feeds) {
    const prometheus::Labels labels{{"node", node_}, {"container", figures.container}};
    changefeed_bytes_.Add(labels).Set(figures.approximate_bytes);
    changefeed_oldest_position_.Add(labels).Set(figures.oldest_position);
    changefeed_oldest_age_.Add(labels).Set(figures.oldest_age_seconds);
    on.insert(figures.container);
  }
  for (const std::string& container : feed_containers_) {
    if (on.contains(container)) continue;
    const prometheus::Labels labels{{"node", node_}, {"container", container}};
    for (auto* family : {&changefeed_bytes_, &changefeed_oldest_position_, &changefeed_oldest_age_}) {
      family->Remove(&family->Add(labels));
    }
  }
  feed_containers_ = std::move(on);
}

void Metrics::retain_containers(const std::vector<std::string>& existing) {
  const std::unordered_set<std::string> keep(existing.begin(), existing.end());
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto gone = known_containers_.begin(); gone != known_containers_.end();) {
    if (keep.contains(*gone)) {
      ++gone;
      continue;
    }
    const prometheus::Labels labels{{"node", node_}, {"container", *gone}};
    for (auto* family : {&live_items_, &billable_bytes_, &backlog_items_, &backlog_bytes_, &backlog_counting_,
                         &active_holds_, &oldest_expired_age_, &spare_request_units_}) {
      family->Remove(&family->Add(labels));
    }
    for (auto* family : {&deleted_items_, &deleted_bytes_, &throttled_, &collector_request_units_,
                         &partition_drained_items_, &partition_drained_bytes_}) {
      family->Remove(&family->Add(labels));
    }
    for (const char* reason : kPartitionWaitReasons) {
      partitions_pending_.Remove(&partitions_pending_.Add({{"node", node_}, {"container", *gone}, {"reason", reason}}));
    }
    deletion_lag_.Remove(&deletion_lag_.Add(labels, lag_buckets()));
    for (auto* family : {&forecast_backlog_peak_, &forecast_drain_seconds_, &reclaim_capacity_}) {
      family->Remove(&family->Add(labels));
    }
    for (const char* window : {"1h", "24h"}) {
      forecast_expiring_items_.Remove(
          &forecast_expiring_items_.Add({{"node", node_}, {"container", *gone}, {"window", window}}));
    }
    gone = known_containers_.erase(gone);
  }
  // Request-unit series of containers that no longer exist (their op label is whatever was charged).
  for (auto it = charged_ops_.begin(); it != charged_ops_.end();) {
    if (keep.contains(it->first)) {
      ++it;
      continue;
    }
    for (const auto& [op, counter] : it->second) request_units_.Remove(counter);
    it = charged_ops_.erase(it);
  }
}

void Metrics::note_container(const std::string& container) {
  std::lock_guard<std::mutex> lock(mutex_);
  known_containers_.insert(container);
}

void Metrics::observe_collected(const std::string& container, int64_t items, int64_t bytes,
                                const std::vector<double>& lag_seconds) {
  note_container(container);
  const prometheus::Labels labels{{"node", node_}, {"container", container}};
  deleted_items_.Add(labels).Increment(static_cast<double>(items));
  deleted_bytes_.Add(labels).Increment(static_cast<double>(bytes));
  Histogram& lag = deletion_lag_.Add(labels, lag_buckets());
  for (double seconds : lag_seconds) lag.Observe(seconds);
}

void Metrics::observe_partition_drain(const std::string& container, int64_t items, int64_t bytes, int64_t pending,
                                      const char* reason) {
  note_container(container);
  const prometheus::Labels labels{{"node", node_}, {"container", container}};
  partition_drained_items_.Add(labels).Increment(static_cast<double>(items));
  partition_drained_bytes_.Add(labels).Increment(static_cast<double>(bytes));
  for (const char* known : kPartitionWaitReasons) {
    partitions_pending_.Add({{"node", node_}, {"container", container}, {"reason", known}})
        .Set(std::string_view(known) == reason ? static_cast<double>(pending) : 0.0);
  }
}

void Metrics::add_request_units(const std::string& container, const std::string& op, double request_units) {
  // Under the lock that retain_containers removes series under: a handle is never used after its removal.
  std::lock_guard<std::mutex> lock(mutex_);
  auto& ops = charged_ops_[container];
  auto found = ops.find(op);
  if (found == ops.end()) {
    found = ops.emplace(op, &request_units_.Add({{"node", node_}, {"container", container}, {"op", op}})).first;
  }
  found->second->Increment(request_units);
}

void Metrics::add_throttled(const std::string& container) {
  note_container(container);
  throttled_.Add({{"node", node_}, {"container", container}}).Increment();
}

void Metrics::add_collector_request_units(const std::string& container, double request_units) {
  note_container(container);
  collector_request_units_.Add({{"node", node_}, {"container", container}}).Increment(request_units);
}

void Metrics::set_spare_request_units(const std::string& container, double request_units) {
  note_container(container);
  spare_request_units_.Add({{"node", node_}, {"container", container}}).Set(request_units);
}

void Metrics::set_expiring_source(std::function<std::vector<ExpiringFigures>()> source) {
  expiring_->set_source(std::move(source));
}

std::vector<std::shared_ptr<prometheus::Collectable>> Metrics::collectables() const {
  return {registry_, expiring_, allocator_};
}

std::string Metrics::scrape_text() const {
  std::vector<prometheus::MetricFamily> families;
  for (const std::shared_ptr<prometheus::Collectable>& collectable : collectables()) {
    for (prometheus::MetricFamily& family : collectable->Collect()) families.push_back(std::move(family));
  }
  prometheus::TextSerializer serializer;
  return serializer.Serialize(families);
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address, const Metrics& metrics,
                                                            const std::string& basic_auth, int64_t threads,
                                                            int64_t request_timeout_ms) {
  try {
    // civetweb's options: a pool of worker threads (one accepted socket each, until its request is answered) and a
    // deadline on reading a request, so no single socket can hold the only worker.
    auto exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", address, "num_threads", std::to_string(threads), "request_timeout_ms",
        std::to_string(request_timeout_ms)});
    if (!basic_auth.empty()) {
      const size_t colon = basic_auth.find(':');
      const std::string user = basic_auth.substr(0, colon);
      const std::string password = colon == std::string::npos ? std::string() : basic_auth.substr(colon + 1);
      exposer->RegisterAuth(
          [user, password](const std::string& given_user, const std::string& given_password) {
            // Both compared in full, in time that depends only on the lengths.
            const bool user_ok = auth::constant_time_equal(user, given_user);
            const bool password_ok = auth::constant_time_equal(password, given_password);
            return user_ok && password_ok;
          },
          "mayfly");
    }
    for (const std::shared_ptr<prometheus::Collectable>& collectable : metrics.collectables()) {
      exposer->RegisterCollectable(collectable);
    }
    return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer)));
  } catch (const std::exception& error) {
    return Status::unavailable("cannot serve metrics on " + address + ": " + error.what());
  }
}

}  // namespace mayfly::metrics
