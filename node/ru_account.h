// RequestUnitAccount: this node's request-unit account, per container (docs/design.md, "Request units"). It meters what
// users consumed here in the last second (requests served on this node and writes applied on it) and what the local
// garbage collector spent, decides the 429s of provisioned containers, and gives the collector its spare budget.
// Figures go to the metrics as they come. The pricing rules themselves (what a read or a write costs) are
// ttl/request_units.h.
//
// Thread-safety: all methods lock; used by the driver thread and the RPC thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "metrics/metrics.h"
#include "storage/records.h"
#include "ttl/request_units.h"

namespace mayfly::node {

// Containers that share their database's throughput (storage::Throughput::kShared) are metered on their own, for
// their metrics, and in their database's pool too: the pool decides their 429s and the collector's spare budget. A
// container joins its pool the first time a method that takes its throughput sees it kShared (every node's collector
// visits every container each pass; reads and writes check the throttle before they are charged).
class RequestUnitAccount {
 public:
  RequestUnitAccount(Clock& clock, metrics::Metrics& metrics) : clock_(clock), metrics_(metrics) {}

  // Users consumed `request_units` on `container` ("database/container") with operation `op`.
  void charge(const std::string& container, const std::string& op, double request_units);
  // 0 when `request_units` more fit within the container's provisioned RU/s in the current second; otherwise how
  // many milliseconds to wait (and the throttle is counted). Serverless containers are never throttled.
  int64_t throttle_ms(const std::string& container, const storage::Throughput& throughput, double request_units);
  // What the collector may still spend on this container in the current second (docs/ttl.md §7): provisioned minus what
  // users consumed minus what it already spent. Users who were throttled here in the last second wanted more than
  // the budget, so there is nothing spare then, whatever the meter shows (user work always wins). Serverless:
  // unlimited (the caller's batch ceiling applies).
  double collector_budget(const std::string& container, const storage::Throughput& throughput);
  // The collector spent `request_units` deleting on `container`: free for provisioned containers, consumed RU (kind
  // ttl_delete) for serverless ones.
  void collector_spent(const std::string& container, const storage::Throughput& throughput, double request_units);
  // Drops the meters of every container not in `existing` ("database/container"): a dropped container's meters go
  // with it, so names that come and go cannot grow the table.
  void retain(const std::vector<std::string>& existing);
  size_t meter_count() const;

 private:
  struct Meters {
    ttl::RequestUnitMeter users;
    ttl::RequestUnitMeter collector;
    int64_t last_throttled_micros = INT64_MIN;  // users' demand exceeded the budget at this time
  };
  // The meters that decide for `container`: its database's pool when it shares, its own otherwise. Locked.
  Meters& deciding_meters(const std::string& container, const storage::Throughput& throughput);
  Clock& clock_;
  metrics::Metrics& metrics_;
  mutable std::mutex mutex_;
  std::map<std::string, Meters> meters_;
  std::map<std::string, Meters> pools_;          // by database
  std::map<std::string, std::string> pool_of_;   // sharing container ("database/container") -> its database
};

}  // namespace mayfly::node
