#include "node/replay_cache.h"

namespace mayfly::node {

void ReplayCache::forget_expired(int64_t now_seconds) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first < now_seconds) {
    seen_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
}

ReplayCache::Outcome ReplayCache::use(std::string_view signature, int64_t valid_until_seconds, int64_t now_seconds) {
  forget_expired(now_seconds);
  std::string key(signature);
  if (seen_.contains(key)) return Outcome::kReplayed;
  if (seen_.size() >= kMaxEntries) return Outcome::kFull;
  seen_.insert(key);
  by_expiry_.emplace(valid_until_seconds, std::move(key));
  return Outcome::kFirstUse;
}

void ReplayCache::release(std::string_view signature, int64_t valid_until_seconds) {
  std::string key(signature);
  if (seen_.erase(key) == 0) return;
  auto [first, last] = by_expiry_.equal_range(valid_until_seconds);
  for (auto it = first; it != last; ++it) {
    if (it->second == key) {
      by_expiry_.erase(it);
      return;
    }
  }
}

}  // namespace mayfly::node
