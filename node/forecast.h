// The TTL forecast on a node (docs/ttl.md, "Forecast"): the collector's reclaim capacity (ReclaimRate), the
// answer to `mayfly container forecast` (proto Request.containerForecast), and the figures the forecast metrics
// export. The counting is storage::StoreReader::forecast_expiry (one snapshot, bounded by --forecast-max-entries),
// the projection ttl::project_backlog; both run on a read thread, never on the driver thread.
//
// Capacity, in items per second: *measured* — the items the collector deleted over its passes of the last minute that
// were limited by their budget (they left expired items behind), divided by the time those passes stood for (each
// from the pass before it) — or, when no pass had more work than it could do in that minute, *configured*: the work
// budget of a pass in deletes (pass_work / kDeleteWork) times passes per second (1000 / --gc-interval-ms). Passes that
// emptied the backlog say nothing about how much more they could have done, so they do not count. For one container
// the capacity is further capped by its batch ceiling (--gc-batch-items-max per pass) and, when provisioned, by its
// RU/s × --gc-ru-share ÷ the RU of one delete of its average item (an upper bound: users' consumption comes first).
//
// Thread-safety: ReclaimRate locks (record_pass on the driver thread, the rest on any); the functions are pure
// functions of a StoreReader (any read thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "metrics/metrics.h"
#include "node/request.h"
#include "storage/records.h"
#include "storage/store_reader.h"

namespace mayfly::node {

struct ReclaimCapacity {
  double items_per_second = 0;
  bool measured = false;  // false: estimated from the configuration
};

// What the configured estimate needs of the collector's settings.
struct ReclaimSettings {
  int64_t gc_interval_ms = 200;
  uint64_t batch_items_max = 1000;
  double ru_share = 1.0;
  uint64_t pass_work = 0;  // Collector::pass_work()
};

class ReclaimRate {
 public:
  static constexpr int64_t kWindowMicros = 60'000'000;

  explicit ReclaimRate(ReclaimSettings settings) : settings_(settings) {}

  // Driver thread: a collector pass ended at steady time `at_micros`, deleted `items`, and left expired items behind
  // because its budget (RU, batch ceiling, work) ran out (`saturated`).
  void record_pass(int64_t at_micros, int64_t items, bool saturated);
  // This node's capacity: measured over the last minute of passes, else the configured estimate.
  ReclaimCapacity node_capacity() const;
  // One container's: the node's, capped by its batch ceiling and (provisioned) its RU/s for items of `average_bytes`.
  ReclaimCapacity container_capacity(const storage::ContainerRecord& record, uint64_t average_bytes) const;
  const ReclaimSettings& settings() const { return settings_; }

 private:
  struct Pass {
    int64_t at_micros;
    int64_t items;
    int64_t span_micros;  // since the pass before it
  };
  const ReclaimSettings settings_;
  mutable std::mutex mutex_;
  std::deque<Pass> saturated_;  // within kWindowMicros of last_pass_micros_
  std::optional<int64_t> last_pass_micros_;
};

// One container's forecast on this node, with its projection under `capacity`.
struct ContainerForecast {
  storage::ExpiryForecast figures;
  ReclaimCapacity capacity;
  ttl::BacklogProjection projection;
  std::string to_json(NodeId node, std::string_view database, std::string_view container) const;
};

Result<ContainerForecast> forecast_container(const storage::StoreReader& state, const ReclaimRate& rate,
                                             std::string_view database, std::string_view container,
                                             size_t max_entries);

// The answer to a containerForecast request (404 for a missing container, 503 when the store cannot be read).
Reply forecast_reply(const storage::StoreReader& state, const ReclaimRate& rate, const api::Request& operation,
                     size_t max_entries, NodeId self);

// The figures of the forecast metrics, for every container (a container dropped meanwhile is left out); stops early
// (with what it has) once *cancel is true.
std::vector<metrics::ForecastFigures> forecast_figures(const storage::StoreReader& state, const ReclaimRate& rate,
                                                       size_t max_entries, const std::atomic<bool>* cancel = nullptr);

// The change feed metrics' figures, for every container whose feed is on (one left out when it cannot be read now).
std::vector<metrics::ChangeFeedFigures> changefeed_figures(const storage::StoreReader& state,
                                                        const storage::ChangeFeedReader& feed);

// A drain time of "not within 24 h" as the metric exports it.
inline constexpr double kDrainNeverSeconds = 86'400;

}  // namespace mayfly::node
