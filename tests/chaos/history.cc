#include "tests/chaos/history.h"

#include <cstdio>
#include <fstream>

namespace mayfly::chaos {

std::string op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kRead: return "read";
    case OpKind::kCreate: return "create";
    case OpKind::kUpsert: return "upsert";
    case OpKind::kReplace: return "replace";
    case OpKind::kDelete: return "delete";
    case OpKind::kIncr: return "incr";
    case OpKind::kSetDefaultTtl: return "defaultTtl";
  }
  return "?";
}

std::string read_level_name(ReadLevel level) {
  switch (level) {
    case ReadLevel::kStrong: return "strong";
    case ReadLevel::kSession: return "session";
    case ReadLevel::kBounded: return "bounded";
    case ReadLevel::kEventual: return "eventual";
  }
  return "?";
}

std::string outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return "ok";
    case Outcome::kFail: return "fail";
    case Outcome::kUnknown: return "UNKNOWN";
  }
  return "?";
}

namespace {
std::string seconds(int64_t micros) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6f", static_cast<double>(micros) / 1e6);
  return text;
}
std::string ttl_text(int64_t ttl) { return ttl == kTtlAbsent ? "none" : std::to_string(ttl); }
}  // namespace

std::string describe(const Op& op) {
  std::string out = "#" + std::to_string(op.index) + " c" + std::to_string(op.client) + " [" + seconds(op.invoke_us) +
                    ", " + (op.outcome == Outcome::kUnknown ? std::string("?") : seconds(op.complete_us)) + "] ";
  if (op.kind == OpKind::kRead) out += read_level_name(op.level) + " ";
  out += op_kind_name(op.kind);
  if (!op.key.empty()) out += " " + op.key;
  switch (op.kind) {
    case OpKind::kCreate:
    case OpKind::kUpsert:
    case OpKind::kReplace:
      out += " v=" + std::to_string(op.write_v) + " ttl=" + ttl_text(op.write_ttl);
      if (op.if_match_v != 0) out += " if-match(v=" + std::to_string(op.if_match_v) + ")";
      break;
    case OpKind::kIncr: out += " v=" + std::to_string(op.write_v); break;
    case OpKind::kSetDefaultTtl: out += " " + (op.default_ttl == kPolicyOff ? std::string("off") : std::to_string(op.default_ttl)); break;
    default: break;
  }
  if (op.pinned_endpoint) out += " pinned=" + std::to_string(*op.pinned_endpoint);
  if (op.resent != 0) out += " resent=" + std::to_string(op.resent);
  out += " -> " + outcome_name(op.outcome) + " " + std::to_string(op.status);
  if (op.substatus != 0) out += "/" + std::to_string(op.substatus);
  if (op.kind == OpKind::kRead && op.found) {
    out += " v=" + std::to_string(op.read_v) + " n=" + std::to_string(op.read_n) + " ts=" + std::to_string(op.read_ts) +
           " ttl=" + ttl_text(op.read_ttl);
  }
  if (op.is_write() && op.ts != 0) out += " ts=" + std::to_string(op.ts);
  if (op.served_by != 0) out += " @node" + std::to_string(op.served_by);
  return out;
}

uint64_t History::record(Op op) {
  std::lock_guard<std::mutex> lock(mutex_);
  op.index = ops_.size();
  ops_.push_back(std::move(op));
  return ops_.back().index;
}

std::vector<Op> History::ops() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ops_;
}

bool History::write(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  for (const Op& op : ops()) out << describe(op) << "\n";
  return static_cast<bool>(out);
}

}  // namespace mayfly::chaos
