#include "replication/message.h"

namespace mayfly::replication {

std::string_view message_type_name(MessageType type) {
  switch (type) {
    case MessageType::kAppend:
      return "Append";
    case MessageType::kAppendResponse:
      return "AppendResponse";
    case MessageType::kHeartbeat:
      return "Heartbeat";
    case MessageType::kHeartbeatResponse:
      return "HeartbeatResponse";
    case MessageType::kPreVote:
      return "PreVote";
    case MessageType::kPreVoteResponse:
      return "PreVoteResponse";
    case MessageType::kVote:
      return "Vote";
    case MessageType::kVoteResponse:
      return "VoteResponse";
    case MessageType::kSnapshot:
      return "Snapshot";
    case MessageType::kSnapshotResponse:
      return "SnapshotResponse";
    case MessageType::kReadIndex:
      return "ReadIndex";
    case MessageType::kReadIndexResponse:
      return "ReadIndexResponse";
    case MessageType::kTimeoutNow:
      return "TimeoutNow";
  }
  return "Unknown";
}

bool is_vote_request(MessageType type) { return type == MessageType::kVote || type == MessageType::kPreVote; }
bool is_vote_response(MessageType type) {
  return type == MessageType::kVoteResponse || type == MessageType::kPreVoteResponse;
}

bool is_response(MessageType type) {
  switch (type) {
    case MessageType::kAppendResponse:
    case MessageType::kHeartbeatResponse:
    case MessageType::kPreVoteResponse:
    case MessageType::kVoteResponse:
    case MessageType::kSnapshotResponse:
    case MessageType::kReadIndexResponse:
      return true;
    default:
      return false;
  }
}

std::string Message::describe() const {
  std::string out(message_type_name(type));
  out += " " + std::to_string(from.value()) + "->" + std::to_string(to.value());
  out += " term=" + std::to_string(term.value());
  out += " log_term=" + std::to_string(log_term.value());
  out += " index=" + std::to_string(index.value());
  out += " commit=" + std::to_string(commit.value());
  if (!entries.empty()) {
    out += " entries=[" + std::to_string(entries.front().index.value()) + ".." +
           std::to_string(entries.back().index.value()) + "]";
  }
  if (reject) out += " reject hint=" + std::to_string(reject_hint.value());
  if (type == MessageType::kSnapshot || type == MessageType::kSnapshotResponse) {
    out += " snapshot_index=" + std::to_string(snapshot.index.value());
    out += " offset=" + std::to_string(snapshot_offset) + " chunk=" + std::to_string(snapshot_chunk.size());
    if (snapshot_done) out += " done";
  }
  if (read_round != 0) out += " read_round=" + std::to_string(read_round);
  if (leadership_transfer) out += " transfer";
  if (clock_micros != 0) out += " clock=" + std::to_string(clock_micros);
  if (leader != NodeId(0)) out += " leader=" + std::to_string(leader.value());
  return out;
}

}  // namespace mayfly::replication
