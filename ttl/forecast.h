// The TTL forecast (docs/ttl.md, "Forecast"): live items and bytes expiring per minute for the next hour
// and per hour for the next day, and the projection of the collector's backlog over that day — its peak, when, and
// how long the collector needs to work it off. Pure functions over values; the counting itself is
// storage::StoreReader::forecast_expiry, the capacity node/forecast.h.
//
// Buckets are half-open on the left: an item is in minute bucket i when its expiry instant E lies in
// (now + i min, now + (i+1) min] — exactly the items an advance of replicated time from now + i min to
// now + (i+1) min expires (alive iff T < E). An item with E <= now is dead already: backlog, never forecast.
// Thread-safety: pure functions over values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace mayfly::ttl {

inline constexpr int kForecastMinutes = 60;
inline constexpr int kForecastHours = 24;
inline constexpr int64_t kMinuteMicros = int64_t{60} * 1'000'000;
inline constexpr int64_t kHourMicros = int64_t{3600} * 1'000'000;
inline constexpr int64_t kForecastHorizonMicros = kForecastHours * kHourMicros;

struct ExpiryBucket {
  int64_t items = 0;
  int64_t bytes = 0;
  bool operator==(const ExpiryBucket&) const = default;
};

struct ExpiryHistogram {
  std::array<ExpiryBucket, kForecastMinutes> minutes{};  // (now + i min, now + (i+1) min]
  std::array<ExpiryBucket, kForecastHours> hours{};      // (now + j h, now + (j+1) h]; hours[0] = Σ minutes
  bool operator==(const ExpiryHistogram&) const = default;
  // Adds an item that expires at `expiry_micros` to its buckets; false (nothing added) when it is not within
  // (now, now + 24 h].
  bool add(int64_t now_micros, int64_t expiry_micros, int64_t bytes);
};

// The backlog over the next 24 h under a constant reclaim capacity, minute by minute. Each minute's expirations are
// taken to arrive at the minute's start (the worst case for the peak): the level at the start of minute m is
// L(m) = B(m) + expiring(m), and B(m+1) = max(0, L(m) − capacity·60 s), B(0) = the backlog now. Minutes past the
// first hour get an even share of their hour bucket. The collector works the level off at `capacity` items/s.
struct BacklogProjection {
  double peak_items = 0;       // max over m of L(m)
  int64_t peak_at_seconds = 0; // start of the first minute with that level, from now
  // From the peak until the backlog is empty (0 when the peak is 0); nullopt: not within the 24 h (or no capacity).
  std::optional<double> drain_seconds;
};
BacklogProjection project_backlog(int64_t backlog_items, const ExpiryHistogram& histogram,
                                  double capacity_items_per_second);

}  // namespace mayfly::ttl
