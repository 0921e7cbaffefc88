// DriverMetrics (node/driver_metrics.h).
#include "node/driver_metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "node/collector.h"

namespace mayfly::node {

Result<bool> DriverMetrics::publish(const NodeView& view, int64_t now, int64_t steady_ms,
                                    storage::StateMachine& state) {
  metrics_.set_raft(metrics::RaftFigures{view.term, std::string(replication::role_name(view.role)),
                                         view.leader.value(), view.commit, view.applied,
                                         static_cast<double>(now - view.applied_ts_micros) / 1e6});
  if (steady_ms - last_container_metrics_ms_ < 1000) return false;
  last_container_metrics_ms_ = steady_ms;
  Result<storage::DedupTotals> dedup = state.reader().dedup_totals();
  if (!dedup.is_ok()) return dedup.status();
  metrics_.set_dedup_table(dedup->clients, dedup->result_bytes);
  Result<std::shared_ptr<const std::vector<storage::ContainerInfo>>> list = state.reader().container_list();
  if (!list.is_ok()) return list.status();
  const std::vector<storage::ContainerInfo>& containers = **list;
  // Series and meters of containers that no longer exist go when the set changes (a new list), and every 10 s for
  // whatever a request in flight during the change charged afterwards. In memory, but O(containers): not each second.
  if (*list != containers_ || steady_ms - last_container_retain_ms_ >= 10'000) {
    containers_ = *list;
    last_container_retain_ms_ = steady_ms;
    std::vector<std::string> names;
    names.reserve(containers.size());
    for (const storage::ContainerInfo& info : containers) names.push_back(info.database + "/" + info.container);
    metrics_.retain_containers(names);
    request_units_.retain(names);
  }
  // Figures for containers in turn from where the last refresh stopped, within kMetricsWorkMax: each second
  // refreshes ~2,000 containers with nothing to count, so with more each one is refreshed every few seconds; and a
  // backlog count after a restart or a defaultTtl change advances a bounded step per second here (the collector
  // advances it too).
  size_t next = std::lower_bound(containers.begin(), containers.end(), cursor_,
                                 [](const storage::ContainerInfo& info,
                                    const std::pair<std::string, std::string>& key) {
                                   return std::tie(info.database, info.container) < std::tie(key.first, key.second);
                                 }) -
                containers.begin();
  std::vector<metrics::ContainerFigures> figures;
  uint64_t work = 0;
  for (size_t visits = 0; visits < containers.size() && work + kVisitWork <= kMetricsWorkMax; ++visits, ++next) {
    if (next >= containers.size()) next = 0;
    const storage::ContainerInfo& info = containers[next];
    work += kVisitWork;
    Result<storage::ContainerStats> stats =
        state.expiry().container_stats(info.database, info.container, (kMetricsWorkMax - work) / 2 / kCountWork);
    if (!stats.is_ok()) continue;  // dropped between the two calls
    work += static_cast<uint64_t>(stats->backlog.entries_read) * kCountWork;
    metrics::ContainerFigures container{info.database + "/" + info.container, stats->live_items, stats->live_bytes,
                                        stats->backlog.items, stats->backlog.bytes, 0, !stats->backlog.complete,
                                        static_cast<int64_t>(info.record.active_holds)};
    if (stats->backlog.oldest_expiry_micros) {
      container.oldest_expired_age_seconds =
          std::max<double>(0, static_cast<double>(now - *stats->backlog.oldest_expiry_micros) / 1e6);
    }
    figures.push_back(std::move(container));
  }
  if (next >= containers.size()) next = 0;
  if (!containers.empty()) cursor_ = {containers[next].database, containers[next].container};
  metrics_.set_container_figures(figures);
  return true;
}

void DriverMetrics::note_state_persists(uint64_t checkpoints, uint64_t snapshot_exports) {
  metrics_.add_state_persists("checkpoint", checkpoints - checkpoints_seen_);
  metrics_.add_state_persists("snapshot_export", snapshot_exports - snapshot_exports_seen_);
  checkpoints_seen_ = checkpoints;
  snapshot_exports_seen_ = snapshot_exports;
}

void DriverMetrics::note_snapshot_errors(const replication::RaftStatus& status, int64_t steady_ms) {
  const uint64_t reads = status.snapshot_read_errors - snapshot_read_errors_seen_;
  const uint64_t receives = status.snapshot_receive_errors - snapshot_receive_errors_seen_;
  if (reads == 0 && receives == 0) return;
  snapshot_read_errors_seen_ = status.snapshot_read_errors;
  snapshot_receive_errors_seen_ = status.snapshot_receive_errors;
  metrics_.add_snapshot_errors("read", reads);
  metrics_.add_snapshot_errors("receive", receives);
  snapshot_errors_unlogged_ += reads + receives;
  const int64_t now = steady_ms;
  if (snapshot_error_logged_ms_ != 0 && now - snapshot_error_logged_ms_ < 5000) return;
  spdlog::error("snapshot transfer failed ({} time(s) since the last report; retried at the next heartbeat): {}",
                snapshot_errors_unlogged_, status.last_snapshot_error);
  snapshot_errors_unlogged_ = 0;
  snapshot_error_logged_ms_ = now;
}

void DriverMetrics::publish_clock(const replication::RaftStatus& status, int64_t steady_ms) {
  std::map<uint64_t, double> offsets;
  for (const auto& [peer, micros] : status.clock_offsets_micros) {
    offsets[peer.value()] = static_cast<double>(micros) / 1e6;
  }
  metrics_.set_clock_offsets(offsets);
  if (status.clock_holds == clock_holds_seen_) return;
  const uint64_t held = status.clock_holds - clock_holds_seen_;
  clock_holds_seen_ = status.clock_holds;
  metrics_.add_clock_held_back(held);
  clock_holds_unreported_ += held;
  constexpr int64_t kWarningIntervalMs = 10'000;
  const int64_t now = steady_ms;
  if (last_clock_warning_ms_ && now - *last_clock_warning_ms_ < kWarningIntervalMs) return;
  last_clock_warning_ms_ = now;
  spdlog::warn("leader clock is {:.3f} s ahead of the quorum; cluster time held at {:.6f} s since the epoch "
               "(--max-clock-offset {} ms; {} entries held back since the last warning). Check this node's clock.",
               static_cast<double>(status.last_clock_hold_ahead_micros) / 1e6,
               static_cast<double>(status.last_clock_hold_ts_micros) / 1e6, config_.max_clock_offset_ms,
               clock_holds_unreported_);
  clock_holds_unreported_ = 0;
}

}  // namespace mayfly::node
