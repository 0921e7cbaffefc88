// The first bytes of every Raft transport connection (node/peer_transport.h). A node's one listener serves clients and
// peers; a connection that begins with these bytes is a peer's Raft link and is handed to the Raft thread before any
// TLS or Cap'n Proto byte is read, so nothing a client or a stranger does on the listener runs on the thread that
// carries heartbeats. No client sends them first: a TLS record begins with 0x16, a Cap'n Proto frame with its segment
// count (0 for every first message a client sends), and 0xF5 as a segment count would mean 246 segments.
#pragma once

#include <string_view>

namespace mayfly {

inline constexpr std::string_view kPeerPreamble{"\xF5" "mfR", 4};

}  // namespace mayfly
