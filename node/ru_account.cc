#include "node/ru_account.h"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_set>

namespace mayfly::node {

RequestUnitAccount::Meters& RequestUnitAccount::deciding_meters(const std::string& container,
                                                                const storage::Throughput& throughput) {
  if (throughput.mode != storage::Throughput::Mode::kShared) {
    pool_of_.erase(container);
    return meters_[container];
  }
  const std::string database = container.substr(0, container.find('/'));
  pool_of_[container] = database;
  return pools_[database];
}

void RequestUnitAccount::charge(const std::string& container, const std::string& op, double request_units) {
  if (request_units <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t now = clock_.now_micros();
    meters_[container].users.add(now, request_units);
    if (auto pool = pool_of_.find(container); pool != pool_of_.end()) pools_[pool->second].users.add(now, request_units);
  }
  metrics_.add_request_units(container, op, request_units);
}

int64_t RequestUnitAccount::throttle_ms(const std::string& container, const storage::Throughput& throughput,
                                        double request_units) {
  if (throughput.mode == storage::Throughput::Mode::kServerless) {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_of_.erase(container);
    return 0;
  }
  const double limit = static_cast<double>(throughput.request_units_per_second);
  int64_t wait_micros = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Meters& meters = deciding_meters(container, throughput);
    ttl::RequestUnitMeter& users = meters.users;
    const int64_t now = clock_.now_micros();
    // A request larger than the whole budget is let through when nothing else ran this second; otherwise it could
    // never succeed.
    const double consumed = users.consumed(now);
    if (consumed + request_units <= limit || consumed == 0) return 0;
    wait_micros = users.micros_until_fits(now, std::min(request_units, limit), limit);
    meters.last_throttled_micros = now;
  }
  metrics_.add_throttled(container);
  return std::max<int64_t>(1, wait_micros / 1000);
}

double RequestUnitAccount::collector_budget(const std::string& container, const storage::Throughput& throughput) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (throughput.mode == storage::Throughput::Mode::kServerless) {
    pool_of_.erase(container);
    return std::numeric_limits<double>::infinity();
  }
  Meters& meters = deciding_meters(container, throughput);
  const int64_t now = clock_.now_micros();
  const bool demand_exceeded = meters.last_throttled_micros > now - ttl::RequestUnitMeter::kWindowMicros;
  const double spare =
      demand_exceeded ? 0.0
                      : ttl::spare_request_units(static_cast<double>(throughput.request_units_per_second),
                                                 meters.users.consumed(now), meters.collector.consumed(now));
  metrics_.set_spare_request_units(container, spare);
  return spare;
}

void RequestUnitAccount::collector_spent(const std::string& container, const storage::Throughput& throughput,
                                         double request_units) {
  if (request_units <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t now = clock_.now_micros();
    meters_[container].collector.add(now, request_units);
    if (throughput.mode == storage::Throughput::Mode::kShared) {
      deciding_meters(container, throughput).collector.add(now, request_units);
    }
  }
  metrics_.add_collector_request_units(container, request_units);
  if (throughput.mode == storage::Throughput::Mode::kServerless) {
    metrics_.add_request_units(container, "ttl_delete", request_units);
  }
}

void RequestUnitAccount::retain(const std::vector<std::string>& existing) {
  const std::unordered_set<std::string> keep(existing.begin(), existing.end());
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = meters_.begin(); it != meters_.end();) {
    if (!keep.contains(it->first)) {
      it = meters_.erase(it);
    } else {
      ++it;
    }
  }
  std::set<std::string> sharing;
  for (auto it = pool_of_.begin(); it != pool_of_.end();) {
    if (!keep.contains(it->first)) {
      it = pool_of_.erase(it);
    } else {
      sharing.insert(it->second);
      ++it;
    }
  }
  for (auto it = pools_.begin(); it != pools_.end();) {
    if (!sharing.contains(it->first)) {
      it = pools_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t RequestUnitAccount::meter_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return meters_.size() + pools_.size();
}

}  // namespace mayfly::node
