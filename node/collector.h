// Collector: the node-local, request-unit-aware garbage collector (spec §7, DESIGN.md §6). On the driver thread,
// between Ready iterations (never racing apply), it deletes per container the expired items that the spare request
// units of the current window pay for, up to a batch ceiling, oldest expiry first, only up to the applied time.
// Provisioned containers: spare = (provisioned − consumed by users on this node − already spent by the collector)
// × ru_share, and nothing while users are being throttled here; the deletes are free for users. Serverless: no RU
// limit (the batch ceiling paces it) and the deletes are reported as consumed RU (op ttl_delete).
//
// Thread-safety: driver thread only (it calls StateMachine::collect_expired).
#pragma once

#include <cstdint>

#include "common/clock.h"
#include "common/status.h"
#include "metrics/metrics.h"
#include "node/request_units.h"
#include "storage/state_machine.h"

namespace mayfly::node {

struct CollectorOptions {
  uint64_t batch_items_max = 1000;  // items per container per pass
  double ru_share = 1.0;            // (0, 1]: the part of a provisioned container's spare RU the collector may use
};

class Collector {
 public:
  Collector(storage::StateMachine& state, RequestUnitAccount& request_units, metrics::Metrics& metrics, Clock& clock,
            CollectorOptions options)
      : state_(state), request_units_(request_units), metrics_(metrics), clock_(clock), options_(options) {}

  // One pass over every container, then a batch of dropped containers' keys. Returns the items deleted; an error
  // is a storage failure (sticky; the node must stop).
  Result<int64_t> run_once();
  // One container's share of a pass: what its spare RU pay for. Returns the items deleted.
  Result<int64_t> collect(const storage::ContainerInfo& info);

 private:
  storage::StateMachine& state_;
  RequestUnitAccount& request_units_;
  metrics::Metrics& metrics_;
  Clock& clock_;
  CollectorOptions options_;
};

}  // namespace mayfly::node
