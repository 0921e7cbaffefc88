#include "common/clock.h"

#include <time.h>

namespace mayfly {

int64_t SystemClock::now_micros() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * kMicrosPerSecond + now.tv_nsec / 1000;
}

}  // namespace mayfly
