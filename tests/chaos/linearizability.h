// Per-key linearizability of a recorded history (Wing & Gong's search with Lowe's memoisation, as in Knossos and
// Porcupine), against a model of one item under Mayfly's TTL contract.
//
// The model's state is the item (absent, or its v, n, own ttl, _ts), the container's defaultTtl, and a lower bound L
// on the replicated time (whole seconds) at the current point of the linearization. Replicated time never goes
// backwards along the log, so:
//   * a write the server acknowledged with a `_ts` happened at replicated second `_ts`: it needs `_ts` >= L and
//     sets L = `_ts`; the item it replaces is expired at it iff `_ts` >= E (E = the item's `_ts` + effective ttl,
//     in seconds, as docs/ttl.md §3 says: expired at T iff T >= E, and T >= E iff floor(T) >= E);
//   * an operation whose replicated time is not known (a read, a delete, a refusal, an unknown write) happens at
//     some second >= L. Expiry is modelled as a write of "absent" at E: before such an operation the search may let
//     the item expire (then L = max(L, E)) or not (possible only while L < E). Taking the least time consistent with
//     what was seen keeps every later choice open, so this loses no linearization.
//   * a version written by a write whose outcome is unknown has the `_ts` some read reported for it (reads report
//     `_ts`), or, if no one ever saw it, an unknown `_ts`: it may then expire before any later operation.
// `_ts` is in seconds, so this is exact for acknowledged writes and conservative elsewhere: the search never has to
// guess the time inside a second. What it cannot see: an expiry "late" by less than the distance to the next
// acknowledged write's `_ts` (checker.h's recency check bounds that against the wall clock).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/chaos/history.h"

namespace mayfly::chaos {

enum class Verdict { kLinearizable, kNotLinearizable, kTooBig };

struct LinearizabilityResult {
  Verdict verdict = Verdict::kLinearizable;
  uint64_t steps = 0;  // model steps tried
  // kNotLinearizable: the op (history index) that no linearization of the longest prefix found could place before
  // its completion, and how many ops that prefix held.
  uint64_t stuck_op = 0;
  size_t longest_prefix = 0;
};

// `ops`: the key's writes (any outcome but kFail), its kOk strong reads, and the container's defaultTtl changes.
// `version_ts`: every `_ts` seen for a version v (write responses and reads of any level). `initial_policy`: the
// container's defaultTtl when the key was first written (kPolicyOff: off). `max_steps` bounds the search.
LinearizabilityResult check_key(const std::vector<Op>& ops, const std::map<int64_t, int64_t>& version_ts,
                                int64_t initial_policy, uint64_t max_steps);

}  // namespace mayfly::chaos
