// ExpiryWatch: when this replica's applied (replicated) time reaches the expiry instants of its items, and how late
// that is by this node's wall clock — mayfly_ttl_expiry_lateness_seconds, the figure an operator reads to know how
// long an expired item could still be seen here. It also keeps the next expiry instant after the applied time, which
// the leader schedules a time entry for (Driver::schedule_expiry_entry): one index lookup serves both.
//
// A sample is the wall time of the flush whose applies moved the applied time to or past an instant, minus that
// instant, one per distinct instant (items that expire together share it). Instants reached while the node replays
// its log at startup are not sampled (the first look only learns where the applied time is), nor are instants of
// items written and already expired within one flush before the next known instant (a follower catching up after a
// long pause) — both would be lateness of a node that was not serving, not of expiry.
//
// Thread-safety: the driver's thread only (it reads the ExpiryKeeper, which is driver-owned).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"
#include "storage/expiry_keeper.h"
#include "storage/store_reader.h"

namespace mayfly::node {

class ExpiryWatch {
 public:
  // At most this many instants are sampled per flush (a flush that applied past more skips to the applied time).
  static constexpr int kMaxInstantsPerFlush = 64;

  // After a flush: `applied` is the replica's applied state, `wall_now_micros` this node's clock. Appends the
  // lateness in seconds (never negative: a leader's clock slightly ahead of ours counts as on time) of every expiry
  // instant reached since the last call to *lateness_seconds. Does nothing when the applied index has not moved.
  Status on_applied(const storage::ExpiryKeeper& expiry, const storage::AppliedState& applied, int64_t wall_now_micros,
                    std::vector<double>* lateness_seconds);

  // The earliest expiry instant after the applied time as of the last on_applied (nullopt: nothing will expire).
  std::optional<int64_t> next() const { return next_; }
  // The applied index of the last on_applied that looked (0 before the first).
  uint64_t looked_at_index() const { return looked_at_index_; }

 private:
  bool started_ = false;
  uint64_t looked_at_index_ = 0;
  std::optional<int64_t> next_;
};

}  // namespace mayfly::node
