// Wire constants shared by the node, the client library and the gateway, defined once: the consistency levels a read
// may ask for, and the substatus numbers the node puts on its refusals (the client library's own start at 20000,
// client/client.h; the gateway sends them as x-ms-substatus).
#pragma once

#include <cstdint>

namespace mayfly {

// How fresh a read must be (docs/design.md, "Reads and consistency levels"; proto Consistency on the wire).
enum class Consistency { kSession, kStrong, kBounded, kEventual };

// Substatuses the node adds to its 503s and 429s, so clients can tell "retry anywhere" from "outcome unknown".
inline constexpr uint32_t kSubstatusNoLeader = 1;         // 503: not applied; retry (the leader hint may help)
inline constexpr uint32_t kSubstatusOutcomeUnknown = 2;   // 503: a write whose fate is unknown (leader lost mid-commit)
inline constexpr uint32_t kSubstatusReplicaBehind = 3;    // 503: a read this replica cannot serve fresh enough yet
inline constexpr uint32_t kSubstatusOverloaded = 4;       // 503: not executed, too much waiting on this node; retry
// From the exactly-once table (storage/write_dedup.h): a retry whose first outcome may be lost (503), and a client
// (or key, or the whole table) with too many outcomes kept (429).
inline constexpr uint32_t kSubstatusWriteRecordLost = 5;
inline constexpr uint32_t kSubstatusDedupTableFull = 6;

// Session.executeBatch takes at most this many requests in one call; a longer batch is answered 400 for every request
// and nothing in it runs. The client library sends far fewer (ClientOptions::max_batch_requests).
inline constexpr uint32_t kMaxBatchRequests = 1024;

}  // namespace mayfly
