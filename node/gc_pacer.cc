#include "node/gc_pacer.h"

#include <algorithm>

namespace mayfly::node {

void GcPacer::note_foreground(int64_t now_micros, uint64_t ops) {
  if (now_micros - window_start_micros_ >= kWindowMicros) {
    window_start_micros_ = now_micros;
    window_ops_ = 0;
  }
  window_ops_ += ops;
  if (window_ops_ > kBusyOpsPerWindow) busy_until_micros_ = now_micros + kBusyHoldMicros;
}

uint64_t GcPacer::batch_items(int64_t now_micros) const {
  return busy(now_micros) ? std::min(options_.batch_items_max, kBusyBatchItems) : options_.batch_items_max;
}

void GcPacer::pass_done(int64_t started_micros, int64_t ended_micros, int64_t deleted, bool backlog_left) {
  if (busy(ended_micros) || deleted == 0 || !backlog_left) {
    next_pass_micros_ = ended_micros + options_.interval_micros;
    return;
  }
  const double share = std::clamp(options_.driver_share, 0.01, 1.0);
  const double held = static_cast<double>(std::max<int64_t>(0, ended_micros - started_micros));
  const int64_t pause = static_cast<int64_t>(held * (1.0 - share) / share);
  next_pass_micros_ = ended_micros + std::clamp(pause, options_.min_pause_micros, options_.interval_micros);
}

}  // namespace mayfly::node
