// Which Raft messages arriving on an authenticated peer link reach the driver. Pure: a function of this node's view
// (node/driver.h NodeView, as the RPC thread last heard it) and the message, so the rule is unit-tested on its own
// (tests/unit/peer_admission_test.cc).
//
// The rule:
//   - the message must decode, name the link's node as its sender and this node as its recipient;
//   - the sender must be a voter or learner in this node's membership — so a removed node that does not know it was
//     removed cannot disturb the cluster with vote requests or stale appends — or, while this node holds a
//     membership change it has appended but not seen committed, in the committed membership: that change may still
//     be undone, by a leader elected without it, which may be the very node it removes (the simulator found a
//     follower that had appended "remove node 2", then refused node 2's appends as the leader of the next term
//     forever; only that leader could truncate the change);
//   - except (1) before this node knows any membership (a --join node waiting for its first snapshot), when every
//     authenticated peer is heard, and (2) the leader this node follows, in that leader's term or a later one. (2) is
//     what keeps a node's membership from going stale for good: a node that installed a snapshot taken while its
//     leader was itself out of the membership (removed, then added back after the snapshot; chaos seed 2012) must
//     still take that leader's appends, since they carry the entries that add the leader back. The leader it follows
//     is the one it already accepted for this term (Raft has at most one per term), so this admits no new sender.
//     "The leader it follows" is the leader of its current term as the Raft core knows it (RaftStatus::term_leader):
//     the one it heard, kept across a restart (replication::HardState::leader), or the one a member named when it
//     refused this node's (pre-)vote (replication::Message::leader). The last is how a node whose log is behind a
//     "remove X, add X back" cycle hears X once X leads: it cannot hear X's appends, and no one else sends entries
//     (simulator seeds 5029 and 5213 of the 5-node runs before the install crashes, 274 after, stayed behind for
//     good). A member vouches only for a leader it follows itself, so this too admits no new sender.
// Thread-safety: pure function.
#pragma once

#include "common/ids.h"
#include "common/status.h"
#include "node/driver_view.h"
#include "replication/message.h"

namespace mayfly::node {

// nullptr: deliver it. Otherwise the reason it is refused, a metric label: "undecodable", "wrong_sender",
// "wrong_recipient" or "not_member".
const char* peer_message_refusal(const NodeView& view, NodeId self, NodeId link_from,
                                 const Result<replication::Message>& message);

}  // namespace mayfly::node
