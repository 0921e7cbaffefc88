// Request units (docs/ttl.md §8) and the garbage collector's budget (docs/ttl.md §7, docs/design.md "Request units"),
// as pure functions and a meter that is told the time. No clock, no I/O.
//
// Charges are deterministic: a point read of an item of up to 1 KB costs 1 RU and 1 RU per further KB; a write
// (create, replace, upsert, patch, delete) 5 RU per KB, at least 5; strong reads cost twice; a failed request still
// costs 1 RU. A TTL delete is priced like a delete, so the collector's work can be compared with spare capacity.
// Thread-safety: functions are pure; a RequestUnitMeter is a value owned by one thread (callers lock if they share).
#pragma once

#include <array>
#include <cstdint>

namespace mayfly::ttl {

double read_charge(uint64_t bytes, bool strong);
double write_charge(uint64_t bytes);
inline constexpr double kFailedRequestCharge = 1.0;
inline double ttl_delete_charge(uint64_t bytes) { return write_charge(bytes); }
// What a read request is charged once answered: 1 RU when it failed; a query's work charge when it has one (twice for
// a strong read); otherwise the size-based read charge of the `body_bytes` it returned.
double read_request_charge(bool succeeded, double work_charge, uint64_t body_bytes, bool strong);
// What an applied item write is charged: the write charge of the larger of the command and the item it produced, or
// 1 RU when it was refused.
double write_request_charge(bool succeeded, uint64_t command_bytes, uint64_t result_bytes);

// RU spent in the last second, in 10 slots of 100 ms (a sliding window with 100 ms resolution).
class RequestUnitMeter {
 public:
  static constexpr int64_t kWindowMicros = 1'000'000;
  static constexpr int kSlots = 10;

  void add(int64_t now_micros, double request_units);
  // RU spent in (now - 1 s, now].
  double consumed(int64_t now_micros);
  // How long until `request_units` more would fit under `limit` per second, if nothing else were spent: the
  // retry-after for a throttled request (at least 1 ms, at most the window).
  int64_t micros_until_fits(int64_t now_micros, double request_units, double limit);

 private:
  void roll(int64_t now_micros);
  std::array<double, kSlots> slots_{};
  int64_t current_slot_ = INT64_MIN;  // slot index (now / 100 ms) of slots_[current_slot_ % kSlots]
};

// What the collector may spend in this window on a provisioned container: what users left over, minus what the
// collector already spent. Never negative.
double spare_request_units(double provisioned_per_second, double consumed_by_users, double spent_by_collector);
// How many items of about `bytes_per_item` a budget of `spare` RU pays for, capped at `max_items`.
uint64_t affordable_deletes(double spare, uint64_t bytes_per_item, uint64_t max_items);

}  // namespace mayfly::ttl
