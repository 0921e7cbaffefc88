// The fault campaign's checkers over a recorded history (history.h). Each returns anomalies, never throws; a history
// the checkers cannot decide (a key's linearizability search over its step budget) is reported as inconclusive, not
// as a pass.
//
//   versions       every version a read returned was written by a write that was not refused (v names it), and
//                  carries one `_ts` everywhere it is seen.
//   linearizable   per key: writes (every outcome but a definite failure), strong reads and defaultTtl changes,
//                  with expiry as a write of "absent" at the item's expiry instant (linearizability.h).
//   session        per client, on session reads: read-your-writes and monotonic reads. A version u is "older" than
//                  a version w only when that is certain: u's `_ts` < w's `_ts` (replicated time orders the log), or
//                  u's write completed before w's was invoked. "Absent" after a version is a violation only when the
//                  version could not expire (ttl -1) and no delete or other write of the key was invoked meanwhile.
//   counters       per counter key (only ever incremented): the final strong read's n is at least the acknowledged
//                  increments and at most acknowledged + unknown ones (exactly-once).
//   recency        a strong read never returns an item with its own ttl whose expiry second E the replicated time
//                  had certainly reached: an acknowledged write, or a strong read's version, on any key, completed
//                  before the read began with `_ts` >= E (replicated time never goes back along the log; exact, and
//                  across keys, which the per-key search is not). And against the wall clock: never when the
//                  expiry instant is more than `expiry_slack_s` before the read's wall time w (replicated time
//                  follows the leader's clock, held back at most by the clock faults the campaign made).
//   server errors  no 500.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tests/chaos/history.h"

namespace mayfly::chaos {

struct Anomaly {
  std::string checker;  // "linearizable", "session", ...
  std::string key;      // "" for whole-history anomalies
  std::string message;
  int64_t around_us = 0;  // where in the history (steady µs) to look
  bool inconclusive = false;  // the checker could not decide (not a proven anomaly)
};

struct CheckOptions {
  int64_t initial_policy = kPolicyOff;       // the container's defaultTtl at creation
  std::set<std::string> counter_keys;        // keys only ever incremented
  int64_t expiry_slack_s = 2;                // recency
  uint64_t max_search_steps = 20'000'000;    // per key
};

struct CheckReport {
  std::vector<Anomaly> anomalies;
  size_t keys_checked = 0;
  uint64_t search_steps = 0;
  bool ok() const { return anomalies.empty(); }
};

CheckReport check_history(const std::vector<Op>& ops, const CheckOptions& options);

// The ops on `key` (and defaultTtl changes) around `around_us`, one per line, at most `max_lines`.
std::string excerpt(const std::vector<Op>& ops, const std::string& key, int64_t around_us, size_t max_lines = 30);

}  // namespace mayfly::chaos
