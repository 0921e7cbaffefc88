// WarnLimiter: rate-limits a warn log line per key (e.g. "sender/reason"), so a peer flooding malformed messages
// costs one line per interval, not one per message. The lines held back are counted and reported with the next one.
//
// Thread-safety: none; one instance belongs to one thread (the driver's, or the RPC thread's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace mayfly::node {

class WarnLimiter {
 public:
  explicit WarnLimiter(int64_t interval_ms) : interval_ms_(interval_ms) {}

  // nullopt: stay quiet now. Otherwise log now; the value is how many lines for `key` were held back since the last.
  std::optional<uint64_t> admit(const std::string& key, int64_t now_ms) {
    // Keys may come from the sender (a claimed node id): past kMaxKeys distinct ones, new keys share one slot, so
    // neither the map nor the log grows with how many ids a sender makes up.
    const bool overflow = keys_.size() >= kMaxKeys && !keys_.contains(key);
    auto [it, fresh] = keys_.try_emplace(overflow ? std::string(kOverflowKey) : key, State{now_ms, 0});
    if (!fresh && now_ms - it->second.last_ms < interval_ms_) {
      ++it->second.suppressed;
      return std::nullopt;
    }
    const uint64_t suppressed = it->second.suppressed;
    it->second = State{now_ms, 0};
    return suppressed;
  }

 private:
  struct State {
    int64_t last_ms;
    uint64_t suppressed;
  };
  static constexpr size_t kMaxKeys = 1024;
  static constexpr const char* kOverflowKey = "\x01overflow";
  int64_t interval_ms_;
  std::map<std::string, State> keys_;  // at most kMaxKeys + 1
};

}  // namespace mayfly::node
