// Collector: the node-local, request-unit-aware garbage collector (docs/ttl.md §7, docs/design.md "Garbage
// collection"). On the driver thread, between Ready iterations (never racing apply), it deletes per container the
// expired items that the spare request units of the current window pay for, up to a batch ceiling, oldest expiry first,
// only up to the applied time. Provisioned containers: spare = (provisioned − consumed by users on this node − already
// spent by the collector) × ru_share, and nothing while users are being throttled here; the deletes are free for users.
// Serverless: no RU limit (the batch ceiling paces it) and the deletes are reported as consumed RU (op ttl_delete).
//
// A pass is bounded by work, not by the number of containers or the size of a backlog: it holds the driver thread,
// which also ticks Raft (heartbeats every 50 ms, elections after 300–600 ms of silence). Each pass has a budget of
// work units (see the constants below) for looking at containers, reading expiry index entries to count their
// backlogs and deleting items. It takes containers in name order from where the last pass stopped (a cursor, so
// every container gets its turn across passes however many there are) until the budget is spent.
//
// Thread-safety: driver thread only (it calls storage::ExpiryKeeper::collect_expired).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "common/clock.h"
#include "common/status.h"
#include "metrics/metrics.h"
#include "node/ru_account.h"
#include "storage/expiry_keeper.h"

namespace mayfly::node {

// Work units: one is an expiry index entry read to count a backlog. Measured on this 2-core machine: counting costs
// 0.12 µs an entry in a unit test and 0.12–0.2 µs in a 3-node cluster (300,000 entries in 37–60 ms); looking at a
// container (its record, backlog tracker and meters) 1.3–7 µs; deleting an item (its record read, four keys
// deleted, the batch written) 3.5 µs in a unit test but ~50 µs in the cluster (2,000 deletes held the driver
// 100–140 ms, with LevelDB compacting the deletions and three nodes on two cores).
inline constexpr uint64_t kCountWork = 1;
inline constexpr uint64_t kVisitWork = 20;
inline constexpr uint64_t kDeleteWork = 300;
// An item record read and decoded without deleting it (a deleted partition's items written after its delete): about
// eight index entries counted.
inline constexpr uint64_t kReadWork = 8;
// Per pass: ~25 ms of driver time here (150,000 entries counted, 500 deletes, or 7,500 containers looked at).
inline constexpr uint64_t kPassWorkMax = 150'000;

struct CollectorOptions {
  uint64_t batch_items_max = 1000;  // items per container per pass
  double ru_share = 1.0;            // (0, 1]: the part of a provisioned container's spare RU the collector may use
  // Work units per pass; raised to what one container's full batch needs when batch_items_max asks for more.
  uint64_t pass_work_max = kPassWorkMax;
};

class Collector {
 public:
  Collector(storage::ExpiryKeeper& expiry, RequestUnitAccount& request_units, metrics::Metrics& metrics, Clock& clock,
            CollectorOptions options)
      : expiry_(expiry), request_units_(request_units), metrics_(metrics), clock_(clock), options_(options) {}

  // One pass: containers in turn from the cursor while the pass's work budget lasts (each at most once), then a
  // batch of dropped containers' keys (at most batch_items_max, outside the budget). A container the budget cut
  // short (other than the pass's first) is where the next pass starts. Returns the items deleted; an error is a
  // storage failure (sticky; the node must stop).
  Result<int64_t> run_once() { return run_once(options_.batch_items_max); }
  // The same with at most `batch_items_max` items per container (node/gc_pacer.h: smaller while the node is busy).
  Result<int64_t> run_once(uint64_t batch_items_max);
  // One container's share of a pass, within `max_work` units: advances its backlog count (with at most half the
  // work left after looking at it, so a long count still leaves room for deletes) and deletes what its spare RU and
  // the rest of the work pay for, at most batch_items_max. Returns the items deleted; adds the work done to *work.
  Result<int64_t> collect(const storage::ContainerInfo& info, uint64_t max_work, uint64_t* work = nullptr);
  Result<int64_t> collect(const storage::ContainerInfo& info) { return collect(info, pass_work()); }

  // The budget of one pass: pass_work_max, or more when one container's full batch needs more.
  uint64_t pass_work() const { return pass_work(options_.batch_items_max); }
  uint64_t pass_work(uint64_t batch_items_max) const;
  // Containers the last run_once() looked at, and the work it did (for tests and the driver's slow-pass warning).
  size_t last_pass_visits() const { return last_pass_visits_; }
  uint64_t last_pass_work() const { return last_pass_work_; }
  // Whether the last run_once() left expired items behind because a container's budget (spare RU, batch ceiling,
  // the pass's work) ran out: its deletes then measure what the collector can do (node/forecast.h ReclaimRate).
  bool last_pass_saturated() const { return last_pass_saturated_; }

 private:
  // collect() with the work done in `spent`, and *cut_short set when max_work stopped the count or the deletes.
  Result<int64_t> collect_within(const storage::ContainerInfo& info, uint64_t max_work, uint64_t batch_items_max,
                                 uint64_t& spent, bool* cut_short);
  // Its two parts: expired items, then the items of deleted partitions (delete by partition key) with what is left
  // of the container's spare RU and of the work.
  Result<int64_t> collect_expired_within(const storage::ContainerInfo& info, uint64_t max_work,
                                         uint64_t batch_items_max, uint64_t& spent, bool* cut_short);
  Result<int64_t> drain_partitions_within(const storage::ContainerInfo& info, uint64_t max_work,
                                          uint64_t batch_items_max, uint64_t& spent, bool* cut_short);

  storage::ExpiryKeeper& expiry_;
  RequestUnitAccount& request_units_;
  metrics::Metrics& metrics_;
  Clock& clock_;
  CollectorOptions options_;
  // The next container to look at, by (database, container) name: a name survives containers created or dropped
  // in between, where a position in the list would not.
  std::pair<std::string, std::string> cursor_;
  size_t last_pass_visits_ = 0;
  uint64_t last_pass_work_ = 0;
  bool last_pass_saturated_ = false;
};

}  // namespace mayfly::node
