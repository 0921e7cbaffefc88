// `mayfly changefeed DB CONTAINER [...] [--follow]` (docs/changefeed.md): reads a container's change feed page after
// page and prints one JSON change per line (JSON Lines, whatever -o says), then the continuation on stderr. Without
// --follow it stops at the first caught-up page; with it, it keeps asking with a server-side long-poll (waitMs: the
// node holds the request until a later position is applied, at most kFollowWaitMs) until `stop` is set (SIGINT).
// Thread-safety: one thread; `stop` may be set from a signal handler.
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>

#include "client/cli.h"
#include "client/client.h"

namespace mayfly::client {

// The long-poll of one --follow request: short, so an interrupt ends the command within about a second.
inline constexpr uint32_t kFollowWaitMs = 1000;
// A --follow page that made no progress (a replica behind the continuation, or an error worth retrying: 503, 408,
// 429) is asked again after this long; a caught-up page the node held for the whole long-poll is asked again at once.
inline constexpr uint32_t kFollowRetryMs = 200;

// Exit: 0 when it read to the end (or was interrupted in --follow), 1 for an error answer (printed on `err`).
int run_changefeed(Client& client, const CliCommand& command, std::ostream& out, std::ostream& err,
                   const std::atomic<bool>& stop);

}  // namespace mayfly::client
