#include "ttl/request_units.h"

#include <algorithm>
#include <cmath>

namespace mayfly::ttl {
namespace {

constexpr int64_t kSlotMicros = RequestUnitMeter::kWindowMicros / RequestUnitMeter::kSlots;

uint64_t kilobytes_rounded_up(uint64_t bytes) { return std::max<uint64_t>(1, (bytes + 1023) / 1024); }

int64_t slot_of(int64_t now_micros) {
  return now_micros >= 0 ? now_micros / kSlotMicros : -((-now_micros + kSlotMicros - 1) / kSlotMicros);
}

}  // namespace

double read_charge(uint64_t bytes, bool strong) {
  const double base = static_cast<double>(kilobytes_rounded_up(bytes));
  return strong ? 2 * base : base;
}

double write_charge(uint64_t bytes) { return 5.0 * static_cast<double>(kilobytes_rounded_up(bytes)); }

double read_request_charge(bool succeeded, double work_charge, uint64_t body_bytes, bool strong) {
  if (!succeeded) return kFailedRequestCharge;
  if (work_charge > 0) return strong ? 2 * work_charge : work_charge;
  return read_charge(body_bytes, strong);
}

double write_request_charge(bool succeeded, uint64_t command_bytes, uint64_t result_bytes) {
  if (!succeeded) return kFailedRequestCharge;
  return write_charge(std::max(command_bytes, result_bytes));
}

void RequestUnitMeter::roll(int64_t now_micros) {
  const int64_t slot = slot_of(now_micros);
  if (current_slot_ == INT64_MIN || slot - current_slot_ >= kSlots) {
    slots_.fill(0);
  } else {
    for (int64_t s = current_slot_ + 1; s <= slot; ++s) slots_[static_cast<size_t>(s % kSlots)] = 0;
  }
  if (current_slot_ == INT64_MIN || slot > current_slot_) current_slot_ = slot;
}

void RequestUnitMeter::add(int64_t now_micros, double request_units) {
  roll(now_micros);
  // A time before the current slot (a clock step back) is counted in the current slot: never lost, never early.
  slots_[static_cast<size_t>(current_slot_ % kSlots)] += request_units;
}

double RequestUnitMeter::consumed(int64_t now_micros) {
  roll(now_micros);
  double total = 0;
  for (double slot : slots_) total += slot;
  return total;
}

int64_t RequestUnitMeter::micros_until_fits(int64_t now_micros, double request_units, double limit) {
  roll(now_micros);
  double total = 0;
  for (double slot : slots_) total += slot;
  if (total + request_units <= limit) return 1000;
  // Slots expire oldest first; find how many must expire before the request fits.
  for (int k = 1; k <= kSlots; ++k) {
    const double expiring = slots_[static_cast<size_t>((current_slot_ + k) % kSlots)];
    total -= expiring;
    if (total + request_units <= limit) {
      const int64_t next_slot_start = (current_slot_ + k) * kSlotMicros;
      return std::max<int64_t>(1000, next_slot_start - now_micros);
    }
  }
  return kWindowMicros;
}

double spare_request_units(double provisioned_per_second, double consumed_by_users, double spent_by_collector) {
  return std::max(0.0, provisioned_per_second - consumed_by_users - spent_by_collector);
}

uint64_t affordable_deletes(double spare, uint64_t bytes_per_item, uint64_t max_items) {
  const double each = ttl_delete_charge(bytes_per_item);
  if (!(spare >= each)) return 0;  // also NaN
  // Compare before converting: an unlimited (infinite) budget must not reach the double -> integer conversion.
  const double items = std::floor(spare / each);
  return items >= static_cast<double>(max_items) ? max_items : static_cast<uint64_t>(items);
}

}  // namespace mayfly::ttl
