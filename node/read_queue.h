// ReadQueue: the read threads (--read-threads) shared fairly between client keys (issue #28). Work that may read many
// records — item lists, queries, change feed pages, forecasts, the defaultTtl dry run — runs on a read thread; with
// one queue in arrival order, a key that keeps a hundred slow queries queued would make every other key's list wait
// behind all of them. Here each key has a lane of its own: a job starts at once while fewer than `threads` run,
// otherwise it waits in its lane, and when a thread frees up the lanes take turns (round robin), one job each. So a
// key's new read waits for at most one job of every other busy lane, whatever they have queued; each job is bounded by
// --max-read-work and --request-timeout-ms (common/work_budget.h). Gateway calls take the lane of the key that
// signed them; clients of an open node and forwarded requests share the lane "" (they have no key the node can tell
// apart); defaultTtl guards have their own.
//
// Thread-safety: none; one instance belongs to the RPC thread. A job only hands its work to the pool; the RPC thread
// calls finished() when that work's answer arrives.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>

namespace mayfly::node {

class ReadQueue {
 public:
  using Job = std::function<void()>;

  explicit ReadQueue(size_t threads) : threads_(threads == 0 ? 1 : threads) {}

  // Starts `start` now if fewer than `threads` jobs run, else queues it at the end of `lane`.
  void submit(const std::string& lane, Job start);
  // A started job finished: the next lane in turn (after the last one served) starts its oldest job.
  void finished();

  size_t running() const { return running_; }
  size_t queued() const { return queued_; }
  size_t lanes() const { return lanes_.size(); }

 private:
  void start_queued();

  const size_t threads_;
  size_t running_ = 0;
  size_t queued_ = 0;
  std::map<std::string, std::deque<Job>> lanes_;  // only lanes with queued jobs
  std::string last_lane_;                         // served last; the next turn goes to the lane after it
};

}  // namespace mayfly::node
