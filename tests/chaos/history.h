// The fault campaign's history: every operation a workload client invoked, with what it sent, what came back and
// when (steady microseconds since the campaign started), in the shape the checkers (checker.h) read.
//
// Items of the workload look like {"id": K, "pk": K, "v": V, "n": N, "ttl": T}: `v` is a number no other write ever
// writes (client * 10^9 + sequence), so a read names the write whose version it saw; `n` is the counter `incr`
// patches add 1 to (a patch also sets a fresh `v`); `ttl` is absent, -1 or a few seconds.
//
// Thread-safety: History::record may be called from any thread (one mutex); Op is a value.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mayfly::chaos {

enum class OpKind { kRead, kCreate, kUpsert, kReplace, kDelete, kIncr, kSetDefaultTtl };
enum class ReadLevel { kStrong, kSession, kBounded, kEventual };

// What the client learned about an operation's effect.
//   kOk: the server answered with the operation's outcome (2xx, or a business refusal such as 404, 409, 412: those
//        are outcomes of applying it too, and the checkers hold the state to them).
//   kFail: definitely not applied (503 other than "outcome unknown", no endpoint reachable, 429, 4xx the workload
//        did not expect). Checkers ignore it (a failed read tells nothing).
//   kUnknown: a write that may or may not have been applied, at any time after its invocation (503 substatus 2,
//        client substatus 20002, 408 timeout).
enum class Outcome { kOk, kFail, kUnknown };

inline constexpr int64_t kTtlAbsent = INT64_MIN;  // an item without its own `ttl`
inline constexpr int64_t kPolicyOff = INT64_MIN;  // a container without `defaultTtl`: TTL off

struct Op {
  uint64_t index = 0;  // position in the history (order of completion records)
  int client = 0;      // workload thread (0.. ; the campaign's own final reads use -1)
  OpKind kind = OpKind::kRead;
  ReadLevel level = ReadLevel::kStrong;  // reads
  std::string key;                       // item id (== partition key); "" for kSetDefaultTtl
  int64_t invoke_us = 0;
  int64_t complete_us = 0;
  int64_t invoke_wall_us = 0;  // the test process's wall clock at invocation (never skewed)
  Outcome outcome = Outcome::kFail;
  int status = 0;
  int substatus = 0;
  uint64_t served_by = 0;
  std::optional<size_t> pinned_endpoint;  // a read sent to one node first
  int resent = 0;  // times the workload itself sent the write again after an unknown outcome (--no-exactly-once)

  // What was sent.
  int64_t write_v = 0;            // create/upsert/replace/incr: the new version's v
  int64_t write_ttl = kTtlAbsent;  // create/upsert/replace: the item's own ttl
  int64_t if_match_v = 0;         // replace: the v of the version whose etag was sent as If-Match (0: none)
  int64_t default_ttl = kPolicyOff;  // kSetDefaultTtl: the new policy

  // What came back (kOk).
  bool found = false;  // a read that returned the item
  int64_t read_v = 0, read_n = 0, read_ts = 0;
  int64_t read_ttl = kTtlAbsent;
  int64_t ts = 0;  // Response::ts: a write's new _ts (seconds); 0 when the response did not carry one
  std::string etag;

  bool is_write() const { return kind != OpKind::kRead; }
};

std::string op_kind_name(OpKind kind);
std::string read_level_name(ReadLevel level);
std::string outcome_name(Outcome outcome);
// One line: "#12 c3 [1.234567-1.240001] strong read k2 -> 200 v=3000000017 n=2 ts=.. ttl=3 @node2".
std::string describe(const Op& op);

class History {
 public:
  // Appends `op` (its index is assigned here) and returns the index.
  uint64_t record(Op op);
  // A copy of every op so far, in recording order.
  std::vector<Op> ops() const;
  // Writes one line per op (describe()) to `path`; false on an I/O error.
  bool write(const std::string& path) const;

 private:
  mutable std::mutex mutex_;
  std::vector<Op> ops_;
};

}  // namespace mayfly::chaos
