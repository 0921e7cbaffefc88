#include "replication/config.h"

#include <string>

namespace mayfly::replication {

Status RaftConfig::validate() const {
  auto invalid = [](const std::string& why) { return Status::invalid_argument("raft config: " + why); };
  if (self == NodeId(0)) return invalid("self must not be 0");
  if (heartbeat_interval_ticks < 1) return invalid("heartbeat_interval_ticks must be >= 1");
  if (election_timeout_ticks <= heartbeat_interval_ticks) {
    return invalid("election_timeout_ticks must be > heartbeat_interval_ticks");
  }
  // The randomized timeout doubles it; keep far away from overflow in tick arithmetic.
  if (election_timeout_ticks > (int64_t{1} << 40)) return invalid("election_timeout_ticks is absurdly large");
  if (max_inflight_messages < 1) return invalid("max_inflight_messages must be >= 1");
  if (max_inflight_bytes < 1) return invalid("max_inflight_bytes must be >= 1");
  // Whatever one message carries must decode on the receiving side (replication/codec.h's bounds): at most 8 MiB of
  // entries or one entry, or one snapshot chunk, leaves room in kMaxEncodedMessageBytes (16 MiB).
  constexpr uint64_t kMaxPayloadBytes = uint64_t{8} << 20;
  if (max_message_bytes < 1 || max_message_bytes > kMaxPayloadBytes) {
    return invalid("max_message_bytes must be in [1, 8 MiB]");
  }
  if (max_entry_bytes < 1 || max_entry_bytes > kMaxPayloadBytes) {
    return invalid("max_entry_bytes must be in [1, 8 MiB]");
  }
  if (max_uncommitted_bytes < 1) return invalid("max_uncommitted_bytes must be >= 1");
  if (max_committed_bytes_per_ready < 1) return invalid("max_committed_bytes_per_ready must be >= 1");
  if (snapshot_chunk_bytes < 1 || snapshot_chunk_bytes > kMaxPayloadBytes) {
    return invalid("snapshot_chunk_bytes must be in [1, 8 MiB]");
  }
  if (max_snapshot_bytes < 1) return invalid("max_snapshot_bytes must be >= 1");
  if (max_pending_read_requests < 1) return invalid("max_pending_read_requests must be >= 1");
  if (tick_interval_micros < 1 || tick_interval_micros > 3'600'000'000) {
    return invalid("tick_interval_micros must be in 1..3600000000");
  }
  if (max_clock_offset_micros != kNoClockOffsetLimit &&
      (max_clock_offset_micros < 0 || max_clock_offset_micros > 86'400'000'000)) {
    return invalid("max_clock_offset_micros must be in 0..86400000000 (a day), or kNoClockOffsetLimit");
  }
  return Status::ok();
}

}  // namespace mayfly::replication
