// VirtualClock: the clock a --clock virtual node stamps log entries with (docs/ttl.md, "Virtual clock"). It reads the
// time of the last entry in the node's own log, so a leader stamps each new entry one microsecond after the previous
// one (RaftCore stamps strictly increasing times) and replicated time stands still; `mayfly cluster advance-clock` is
// the only thing that moves it, with a time entry stamped that much later. A log still at bootstrap (its entries
// stamped with their index, below kVirtualEpochFloorMicros) has no time yet: the wall clock then gives the start of
// virtual time, which the first entry stamped with it freezes.
//
// Thread-safety: the driver thread only (it reads the Raft core's log).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "common/clock.h"

namespace mayfly::node {

// 2001-09-09: a log time below it is a bootstrap log's index stamps, not a time.
inline constexpr int64_t kVirtualEpochFloorMicros = 1'000'000'000'000'000;
// 9999-12-31T23:59:59.999999Z: advance-clock never moves virtual time past it (400). Far below the timestamps every
// node accepts (replication/types.h kMaxTimestampMicros, 2^62 µs), so no number of advances, nor the entries stamped
// one microsecond apart after the last one, can make a follower refuse the leader's entries.
inline constexpr int64_t kMaxVirtualTimeMicros = 253'402'300'799'999'999;

class VirtualClock final : public Clock {
 public:
  // `log_time`: the ts of the last entry in this node's log; `wall`: the start of virtual time, read once.
  VirtualClock(std::function<int64_t()> log_time, Clock& wall) : log_time_(std::move(log_time)), wall_(wall) {}
  int64_t now_micros() override {
    const int64_t log = log_time_();
    return log >= kVirtualEpochFloorMicros ? log : wall_.now_micros();
  }

 private:
  std::function<int64_t()> log_time_;
  Clock& wall_;
};

}  // namespace mayfly::node
