// Clock: the one way code asks for wall time. Only the leader's driver reads it (to stamp log entries); the state
// machine and the raft core never do — they are handed time as input.
#pragma once

#include <cstdint>

namespace mayfly {

inline constexpr int64_t kMicrosPerSecond = 1'000'000;

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch. May jump (NTP, operators); callers must not assume monotonicity.
  virtual int64_t now_micros() = 0;
};

// The system's wall clock (CLOCK_REALTIME). Thread-safe.
class SystemClock final : public Clock {
 public:
  int64_t now_micros() override;
};

// A clock that moves only when told to. For tests and the simulator. Not thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_micros) : now_(start_micros) {}
  int64_t now_micros() override { return now_; }
  void set_micros(int64_t micros) { now_ = micros; }
  void advance_micros(int64_t delta) { now_ += delta; }

 private:
  int64_t now_;
};

}  // namespace mayfly
