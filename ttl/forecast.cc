#include "ttl/forecast.h"

#include <algorithm>

namespace mayfly::ttl {

bool ExpiryHistogram::add(int64_t now_micros, int64_t expiry_micros, int64_t bytes) {
  if (expiry_micros <= now_micros || expiry_micros - now_micros > kForecastHorizonMicros) return false;
  const int64_t after = expiry_micros - now_micros - 1;  // (now, now + d] -> [0, d)
  const int64_t hour = after / kHourMicros;
  hours[hour].items += 1;
  hours[hour].bytes += bytes;
  if (hour == 0) {
    const int64_t minute = after / kMinuteMicros;
    minutes[minute].items += 1;
    minutes[minute].bytes += bytes;
  }
  return true;
}

BacklogProjection project_backlog(int64_t backlog_items, const ExpiryHistogram& histogram,
                                  double capacity_items_per_second) {
  constexpr int kMinutes = kForecastHours * 60;
  const double capacity = std::max(0.0, capacity_items_per_second);
  const double per_minute = capacity * 60.0;
  auto arriving = [&histogram](int minute) {
    if (minute < kForecastMinutes) return static_cast<double>(histogram.minutes[minute].items);
    return static_cast<double>(histogram.hours[minute / 60].items) / 60.0;
  };
  std::array<double, kMinutes> level{};  // L(m)
  double backlog = static_cast<double>(std::max<int64_t>(0, backlog_items));
  BacklogProjection projection;
  int peak_minute = 0;
  for (int m = 0; m < kMinutes; ++m) {
    level[m] = backlog + arriving(m);
    if (level[m] > projection.peak_items) {
      projection.peak_items = level[m];
      peak_minute = m;
    }
    backlog = std::max(0.0, level[m] - per_minute);
  }
  projection.peak_at_seconds = int64_t{peak_minute} * 60;
  if (projection.peak_items <= 0) {
    projection.drain_seconds = 0.0;
    return projection;
  }
  if (capacity <= 0) return projection;
  // From the peak: within a minute the level falls at `capacity` until it is empty or the next minute's items come.
  double remaining = level[peak_minute];
  for (int m = peak_minute; m < kMinutes; ++m) {
    if (m > peak_minute) remaining = level[m];
    if (remaining <= per_minute) {
      projection.drain_seconds = static_cast<double>(m - peak_minute) * 60.0 + remaining / capacity;
      return projection;
    }
  }
  return projection;
}

}  // namespace mayfly::ttl
