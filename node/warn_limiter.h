// WarnLimiter: rate-limits a warn log line per key (e.g. "sender/reason"), so a peer flooding malformed messages
// costs one line per interval, not one per message. The lines held back are counted and reported with the next one.
//
// Thread-safety: none; one instance belongs to one thread (the driver's, or the RPC thread's).
#pragma once

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
    auto [it, fresh] = keys_.try_emplace(key, State{now_ms, 0});
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
  int64_t interval_ms_;
  std::map<std::string, State> keys_;  // bounded: keys are sender ids x a fixed set of reasons
};

}  // namespace mayfly::node
