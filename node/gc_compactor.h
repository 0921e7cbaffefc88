// GcCompactor: compacts the key ranges the garbage collector drained (issue #31), so that scans starting in front of
// them stop stepping over their tombstones. A delete in LevelDB is a tombstone that stays until a compaction takes
// its key down to the last level holding it, and LevelDB compacts by file count, level size and sampled reads — after
// a mass expiry that can take a long time. Meanwhile every scan that starts at the front of a drained expiry index
// (the collector's first scan after a restart, the backlog count, the backlog part of a TTL forecast), of the ts index
// (ORDER BY c._ts) or of an emptied container's items steps over each tombstone, invisibly and at the price of a read.
//
// The ExpiryKeeper tracks the drained ranges (storage::DrainedRange: per container, the expiry indexes, the ts index,
// the items when at least half of them are gone, the keys of a dropped container) and which one is most worth it;
// this class decides when, and runs LevelDB's CompactRange over it:
//   - only after --gc-compact-min-deletes keys were deleted in the range since its last compaction;
//   - one range at a time, on a thread of its own: CompactRange is synchronous and heavy (it flushes the memtable,
//     then rewrites every table file overlapping the range while LevelDB's own compactions wait), so never on the
//     driver thread, which ticks Raft;
//   - at least --gc-compact-interval-ms between the end of one and the start of the next (0: never compact);
//   - not while the node is busy (node/gc_pacer.h: foreground load) or exports a snapshot (which holds a LevelDB
//     snapshot: the tombstones would stay); the range waits, and keeps growing, until then.
// CompactRange cannot be interrupted: join() (the driver's stop) waits for the one under way, so a shutdown waits for
// at most one range compaction.
//
// Thread-safety: poll() and join() on the driver thread; the counters from any thread. The compaction thread touches
// only LevelDB (ExpiryKeeper::compact) and the metrics, both thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "metrics/metrics.h"
#include "storage/expiry_keeper.h"

namespace mayfly::node {

struct GcCompactOptions {
  int64_t interval_micros = 5'000'000;  // --gc-compact-interval-ms: the least time between two; 0: never compact
  int64_t min_deletes = 10'000;         // --gc-compact-min-deletes: keys deleted in a range before it is compacted
};

class GcCompactor {
 public:
  GcCompactor(storage::ExpiryKeeper& expiry, metrics::Metrics& metrics, GcCompactOptions options)
      : expiry_(expiry), metrics_(metrics), options_(options) {}
  ~GcCompactor() { join(); }
  GcCompactor(const GcCompactor&) = delete;
  GcCompactor& operator=(const GcCompactor&) = delete;

  // After a collector pass, at loop time `now_micros`: notes a compaction that has finished, then starts the next
  // when one is due and the node is not `busy`. `background`: on the compaction thread (mayflyd); false: here, inline
  // (a simulated loop, which keeps its runs single-threaded and reproducible). Returns whether it started one; an
  // error is an exception the compaction thread caught (the node must stop).
  Result<bool> poll(int64_t now_micros, bool busy, bool background);
  // Waits for the compaction under way, if any (it cannot be interrupted). The next poll() notes its end.
  void join();

  // A compaction was started on the thread and is not finished yet.
  bool running() const { return in_flight_ && !done_.load(std::memory_order_acquire); }
  // Range compactions finished, and the keys deleted in the ranges they covered.
  uint64_t compactions() const { return compactions_.load(std::memory_order_acquire); }
  int64_t compacted_keys() const { return compacted_keys_.load(std::memory_order_relaxed); }
  const GcCompactOptions& options() const { return options_; }

 private:
  void run(const storage::DrainedRange& range);  // on the compaction thread, or inline

  storage::ExpiryKeeper& expiry_;
  metrics::Metrics& metrics_;
  const GcCompactOptions options_;
  std::thread thread_;
  bool in_flight_ = false;         // a compaction started on the thread, its end not yet noted by poll()
  std::atomic<bool> done_{false};  // the thread has finished its range
  std::mutex failure_mutex_;
  std::string failure_;            // what the thread caught, if anything
  int64_t next_start_micros_ = 0;  // loop time
  std::atomic<uint64_t> compactions_{0};
  std::atomic<int64_t> compacted_keys_{0};
};

}  // namespace mayfly::node
