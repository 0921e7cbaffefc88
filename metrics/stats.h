// Plain figures the node hands to metrics/ — no Prometheus types, so the modules that produce them need not link
// prometheus-cpp. Thread-safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mayfly::metrics {

struct RaftFigures {
  uint64_t term = 0;
  std::string role;  // "follower", "pre-candidate", "candidate", "leader"
  uint64_t leader = 0;
  uint64_t commit_index = 0;
  uint64_t applied_index = 0;
  double applied_time_lag_seconds = 0;  // this node's wall clock minus its applied replicated time
};

// One container as seen on this node.
struct ContainerFigures {
  std::string container;  // "database/container"
  int64_t live_items = 0;
  int64_t live_bytes = 0;
  int64_t backlog_items = 0;  // expired, not yet deleted
  int64_t backlog_bytes = 0;
  double oldest_expired_age_seconds = 0;  // 0 when the backlog is empty
  bool backlog_counting = false;          // still counting: backlog figures are lower bounds, live ones upper bounds
  int64_t active_holds = 0;               // legal holds in force (storage/holds.h)
};

// One container's TTL forecast on this node (node/forecast.h), refreshed every --forecast-interval-ms.
struct ForecastFigures {
  std::string container;  // "database/container"
  int64_t expiring_hour_items = 0;  // live items expiring within the next hour
  int64_t expiring_day_items = 0;   // and within the next 24 h (the hour's included)
  double backlog_peak_items = 0;    // the projected backlog's peak over the next 24 h
  double drain_seconds = 0;         // from that peak until the backlog is empty; 86400: not within the 24 h
  double capacity_items_per_second = 0;  // the reclaim capacity the projection assumed
  bool truncated = false;           // --forecast-max-entries stopped the count: lower bounds
};

// One container's change feed on this node (storage/changefeed.h ChangeFeedReader::usage), refreshed with the forecast.
struct ChangeFeedFigures {
  std::string container;             // "database/container"
  double approximate_bytes = 0;      // LevelDB's on-disk estimate of its feed keys
  double oldest_position = 0;        // the oldest log position a reader may start from
  double oldest_age_seconds = 0;     // how much replicated time lies between it and the applied time
};

}  // namespace mayfly::metrics
