#include "node/expiry_watch.h"

#include <algorithm>

namespace mayfly::node {

Status ExpiryWatch::on_applied(const storage::ExpiryKeeper& expiry, const storage::AppliedState& applied,
                               int64_t wall_now_micros, std::vector<double>* lateness_seconds) {
  if (started_ && applied.index.value() == looked_at_index_) return Status::ok();
  if (started_) {
    for (int sampled = 0; next_ && *next_ <= applied.ts_micros && sampled < kMaxInstantsPerFlush; ++sampled) {
      lateness_seconds->push_back(static_cast<double>(std::max<int64_t>(0, wall_now_micros - *next_)) / 1e6);
      MAYFLY_ASSIGN_OR_RETURN(next_, expiry.next_expiry_after(*next_));
    }
  }
  // Whatever was applied may have brought an earlier instant (a new item with a short ttl, a shorter defaultTtl).
  MAYFLY_ASSIGN_OR_RETURN(next_, expiry.next_expiry_after(applied.ts_micros));
  looked_at_index_ = applied.index.value();
  started_ = true;
  return Status::ok();
}

}  // namespace mayfly::node
