// DriverMetrics: what the driver publishes to Prometheus (docs/metrics.md) from the state it owns — the Raft figures
// after every flush; once a second the exactly-once table's size and the per-container figures (live items and bytes,
// the collector's backlog), refreshed in turn within kMetricsWorkMax work units; the clock offsets and the
// max-clock-offset holds (with a rate-limited warning); snapshot transfer errors (counted, logged at most once per
// 5 s). Its inputs are explicit arguments: the driver's view and Raft status, the state machine, the times.
//
// Thread-safety: the driver thread only (it reads the state machine's expiry index, which the driver owns).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "metrics/metrics.h"
#include "node/config.h"
#include "node/driver_view.h"
#include "node/ru_account.h"
#include "replication/raft_core.h"
#include "storage/state_machine.h"

namespace mayfly::node {

// Work units (node/collector.h) the per-container metrics may spend each second on the driver thread: 2,000
// containers looked at (~3–14 ms), or up to 20,000 backlog entries counted (~4 ms).
inline constexpr uint64_t kMetricsWorkMax = 40'000;

class DriverMetrics {
 public:
  DriverMetrics(const NodeConfig& config, metrics::Metrics& metrics, RequestUnitAccount& request_units)
      : config_(config), metrics_(metrics), request_units_(request_units) {}

  // The Raft figures of `view` at wall time `now_micros`; at most once a second (`steady_ms`), the container figures
  // and the exactly-once table from `state`. Returns true when it refreshed those (for the driver's hold warning); an
  // error when the store could not be read.
  Result<bool> publish(const NodeView& view, int64_t now_micros, int64_t steady_ms, storage::StateMachine& state);
  // The clock offsets the leader estimates and the entries held back by --max-clock-offset since the last call.
  void publish_clock(const replication::RaftStatus& status, int64_t steady_ms);
  // The snapshot transfer errors the core saw since the last call.
  void note_snapshot_errors(const replication::RaftStatus& status, int64_t steady_ms);
  // The replica's checkpoints and snapshot exports so far (Replica::checkpoints, snapshots_produced).
  void note_state_persists(uint64_t checkpoints, uint64_t snapshot_exports);

 private:
  NodeConfig config_;
  metrics::Metrics& metrics_;
  RequestUnitAccount& request_units_;
  int64_t last_container_metrics_ms_ = 0;
  int64_t last_container_retain_ms_ = 0;
  std::shared_ptr<const std::vector<storage::ContainerInfo>> containers_;  // the list metrics last retained
  std::pair<std::string, std::string> cursor_;  // the next container whose figures to refresh
  uint64_t clock_holds_seen_ = 0;        // RaftStatus::clock_holds already counted
  uint64_t clock_holds_unreported_ = 0;  // holds since the last warning
  std::optional<int64_t> last_clock_warning_ms_;
  uint64_t snapshot_read_errors_seen_ = 0;
  uint64_t checkpoints_seen_ = 0;
  uint64_t snapshot_exports_seen_ = 0;
  uint64_t snapshot_receive_errors_seen_ = 0;
  uint64_t snapshot_errors_unlogged_ = 0;
  int64_t snapshot_error_logged_ms_ = 0;
};

}  // namespace mayfly::node
