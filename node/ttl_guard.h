// The dry-run and the guard of a defaultTtl change (docs/ttl.md, "Containers"): what the change would
// expire — live items and bytes expired at once, within an hour, within a day — counted at one consistent snapshot of
// the leader's applied state at its replicated time (never a wall clock), and the verdict: answer the dry run, refuse
// with 412 when more than kTtlGuardPercent of the live items would expire at once (unless forced), or let it through.
//
// The count reads every item of the container, so it runs on a read thread of the leader's RPC host (node/rpc.cc),
// never on the driver thread: the driver only proposes changes the guard let through (marked forced). The leader
// decides once, before the change enters the log, so replicas cannot disagree; writes in flight are not counted.
// Thread-safety: pure function of a StoreReader (safe on any read thread).
#pragma once

#include <cstdint>

#include "node/request.h"
#include "storage/store_reader.h"

namespace mayfly::node {

inline constexpr int64_t kTtlGuardPercent = 10;

// Whether `operation` is an updateContainer the guard must look at: a dry run, or a defaultTtl change not forced.
bool needs_ttl_guard(const api::Request& operation);

// The dry run's figures, the guard's 412, a 400/404/503 — or, when the change may go ahead, a Reply with
// serve_here set (nothing to answer yet: propose it).
Reply ttl_change_verdict(const storage::StoreReader& state, const api::Request& operation);

}  // namespace mayfly::node
