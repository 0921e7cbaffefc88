// GcPacer: when the node's garbage collector runs its next pass, and how many items a container may lose in it —
// spare capacity first (issue #14). The RU budget (node/collector.h) still decides what a provisioned container's
// deletes may cost; the pacer decides how much of the node's time the collector takes.
//
// Two paces, switched by the node's foreground load — the client requests this node served (reads and writes, at
// the RPC side) plus the item writes it applied (every replica applies every write), counted per 100 ms window:
//   busy   more than kBusyOpsPerWindow operations in a window, and for kBusyHoldMicros after the last such window:
//          one short pass (at most kBusyBatchItems items per container) every --gc-interval-ms. A pass then holds the
//          driver ~1 ms, and the collector's deletes (and the LevelDB compactions they cause) stay a small part of
//          what the node's log and its clients need.
//   idle   otherwise: passes of --gc-batch-items-max items per container back to back while expired items remain,
//          each followed by a pause so that passes take at most --gc-driver-share of the driver thread's time (and
//          never less than one tick: heartbeats and timers always get their turn). With nothing left to delete, one
//          pass every --gc-interval-ms looks for newly expired items.
// A pass that deleted nothing (no RU to spare, or nothing expired) counts as "nothing left": the next waits the full
// interval, never a busy loop.
//
// Pure: time comes in as arguments (the driver's EventLoop), so the simulator runs it on simulated time.
// Thread-safety: GcPacer on the driver thread only; ForegroundCount on any thread (an atomic).
#pragma once

#include <atomic>
#include <cstdint>

namespace mayfly::node {

// The client reads and writes a node served: counted by the RPC thread, read by the driver for its pacer — the one
// input the pacer takes from another thread.
class ForegroundCount {
 public:
  void add(uint64_t ops) { ops_.fetch_add(ops, std::memory_order_relaxed); }
  uint64_t total() const { return ops_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> ops_{0};
};

struct GcPaceOptions {
  int64_t interval_micros = 200'000;  // --gc-interval-ms: the pace while busy, and the idle check with no backlog
  uint64_t batch_items_max = 1000;    // --gc-batch-items-max: items per container per idle pass
  double driver_share = 0.5;          // --gc-driver-share: (0, 1], the idle passes' part of the driver thread
  int64_t min_pause_micros = 10'000;  // the shortest pause between passes: one Raft tick
};

class GcPacer {
 public:
  static constexpr int64_t kWindowMicros = 100'000;
  static constexpr uint64_t kBusyOpsPerWindow = 20;  // 200 operations a second
  static constexpr int64_t kBusyHoldMicros = 500'000;
  static constexpr uint64_t kBusyBatchItems = 100;

  explicit GcPacer(GcPaceOptions options) : options_(options) {}

  // `ops` foreground operations happened up to `now_micros` since the last call.
  void note_foreground(int64_t now_micros, uint64_t ops);
  // Whether the node counts as busy at `now_micros` (see above).
  bool busy(int64_t now_micros) const { return now_micros < busy_until_micros_; }
  // The steady time the next pass is due at (the driver arms its timer for it).
  int64_t next_pass_micros() const { return next_pass_micros_; }
  // Items per container for a pass starting at `now_micros`.
  uint64_t batch_items(int64_t now_micros) const;
  // A pass ran from `started_micros` to `ended_micros`, deleted `deleted` items, and left expired items behind that
  // its budget — batch ceiling, work or spare RU — kept it from (`backlog_left`: Collector::last_pass_saturated). A
  // container out of RU deletes nothing on the next pass, which then waits the full interval.
  void pass_done(int64_t started_micros, int64_t ended_micros, int64_t deleted, bool backlog_left);

  const GcPaceOptions& options() const { return options_; }

 private:
  GcPaceOptions options_;
  int64_t window_start_micros_ = 0;
  uint64_t window_ops_ = 0;
  int64_t busy_until_micros_ = 0;
  int64_t next_pass_micros_ = 0;
};

}  // namespace mayfly::node
