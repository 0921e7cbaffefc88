#include "node/gc_compactor.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <optional>

namespace mayfly::node {

Result<bool> GcCompactor::poll(int64_t now_micros, bool busy, bool background) {
  if (in_flight_) {
    if (!done_.load(std::memory_order_acquire)) return false;
    join();
    in_flight_ = false;
    next_start_micros_ = now_micros + options_.interval_micros;
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (!failure_.empty()) return Status::internal("compacting a drained range: " + failure_);
  }
  if (options_.interval_micros <= 0 || busy || now_micros < next_start_micros_) return false;
  std::optional<storage::DrainedRange> range = expiry_.take_drained_range(options_.min_deletes);
  if (!range) return false;
  if (!background) {
    run(*range);
    next_start_micros_ = now_micros + options_.interval_micros;
    return true;
  }
  done_.store(false, std::memory_order_relaxed);
  in_flight_ = true;
  thread_ = std::thread([this, range = std::move(*range)] {
    try {
      run(range);
    } catch (const std::exception& exception) {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      failure_ = exception.what();
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      failure_ = "an exception of unknown type";
    }
    done_.store(true, std::memory_order_release);
  });
  return true;
}

void GcCompactor::join() {
  if (thread_.joinable()) thread_.join();
}

void GcCompactor::run(const storage::DrainedRange& range) {
  const auto started = std::chrono::steady_clock::now();
  expiry_.compact(range);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  metrics_.add_gc_compaction(seconds, range.deleted);
  compacted_keys_.fetch_add(range.deleted, std::memory_order_relaxed);
  compactions_.fetch_add(1, std::memory_order_release);
  spdlog::debug("compacted a drained range ({} of container crid {}, {} keys deleted there) in {:.3f} s",
                storage::drained_range_name(range.tag), range.crid, range.deleted, seconds);
}

}  // namespace mayfly::node
