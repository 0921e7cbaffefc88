#include "node/read_queue.h"

#include <utility>

namespace mayfly::node {

void ReadQueue::submit(const std::string& lane, Job start) {
  lanes_[lane].push_back(std::move(start));
  ++queued_;
  start_queued();
}

void ReadQueue::finished() {
  if (running_ > 0) --running_;
  start_queued();
}

void ReadQueue::start_queued() {
  while (running_ < threads_ && queued_ > 0) {
    auto next = lanes_.upper_bound(last_lane_);
    if (next == lanes_.end()) next = lanes_.begin();
    Job job = std::move(next->second.front());
    next->second.pop_front();
    last_lane_ = next->first;
    if (next->second.empty()) lanes_.erase(next);
    --queued_;
    ++running_;
    job();
  }
}

}  // namespace mayfly::node
