// Which messages an authenticated peer link delivers to the driver (node/peer_admission.h).
#include "node/peer_admission.h"

#include <gtest/gtest.h>

namespace mayfly::node {
namespace {

using replication::Message;
using replication::MessageType;

constexpr NodeId kSelf{3};

Result<Message> msg(MessageType type, uint64_t from, uint64_t term, NodeId to = kSelf) {
  Message message;
  message.type = type;
  message.from = NodeId(from);
  message.to = to;
  message.term = Term(term);
  return message;
}

NodeView view_of(std::set<uint64_t> voters, std::set<uint64_t> learners, uint64_t leader, uint64_t term) {
  NodeView view;
  view.self = kSelf;
  for (uint64_t id : voters) view.voters.insert(NodeId(id));
  for (uint64_t id : learners) view.learners.insert(NodeId(id));
  view.leader = NodeId(leader);
  view.term = term;
  return view;
}

std::string verdict(const NodeView& view, uint64_t link_from, const Result<Message>& message) {
  const char* refusal = peer_message_refusal(view, kSelf, NodeId(link_from), message);
  return refusal == nullptr ? "deliver" : refusal;
}

TEST(PeerAdmission, SenderAndRecipientMustMatchTheLinkAndThisNode) {
  const NodeView view = view_of({1, 2, 3}, {}, 1, 5);
  EXPECT_EQ(verdict(view, 1, msg(MessageType::kAppend, 1, 5)), "deliver");
  EXPECT_EQ(verdict(view, 2, msg(MessageType::kAppend, 1, 5)), "wrong_sender");
  EXPECT_EQ(verdict(view, 1, msg(MessageType::kAppend, 1, 5, NodeId(2))), "wrong_recipient");
  EXPECT_EQ(verdict(view, 1, Result<Message>(Status(StatusCode::kInvalidArgument, "bad bytes"))), "undecodable");
}

TEST(PeerAdmission, ANodeWithNoMembershipYetHearsEveryAuthenticatedPeer) {
  const NodeView empty = view_of({}, {}, 0, 0);  // a --join node waiting for its first snapshot
  EXPECT_EQ(verdict(empty, 7, msg(MessageType::kSnapshot, 7, 9)), "deliver");
  EXPECT_EQ(verdict(empty, 7, msg(MessageType::kVote, 7, 9)), "deliver");
}

TEST(PeerAdmission, ANonMemberIsNotHeardWhateverItsTerm) {
  // Node 9 holds the cluster secret but is no member; node 1 leads term 5.
  const NodeView view = view_of({1, 2, 3}, {}, 1, 5);
  EXPECT_EQ(verdict(view, 9, msg(MessageType::kHeartbeat, 9, 5 + 1000)), "not_member");
  EXPECT_EQ(verdict(view, 9, msg(MessageType::kAppend, 9, 5)), "not_member");
  EXPECT_EQ(verdict(view, 9, msg(MessageType::kPreVote, 9, 6)), "not_member");
  // A removed node (no longer in the membership) that is not the leader this node follows.
  const NodeView after_removal = view_of({2, 3}, {}, 2, 6);
  EXPECT_EQ(verdict(after_removal, 1, msg(MessageType::kVote, 1, 7)), "not_member");
  EXPECT_EQ(verdict(after_removal, 1, msg(MessageType::kAppend, 1, 5)), "not_member");
  // Learners are heard like voters.
  EXPECT_EQ(verdict(view_of({1, 2}, {3, 4}, 1, 5), 4, msg(MessageType::kAppendResponse, 4, 5)), "deliver");
}

// Chaos seed 2012: node 3 was removed, wiped and added back as a learner. Its first snapshot came from node 1, the
// leader of term 8 — but it was taken while node 1 was itself out of the membership (removed, then added back after
// the snapshot), so after installing it node 3's membership is {2, 4} plus itself. The entries that add node 1 back
// can only come from node 1: refusing them left node 3 deaf to its leader until another node won an election.
TEST(PeerAdmission, TheLeaderThisNodeFollowsIsHeardEvenWhenAStaleSnapshotLeftItOutOfTheMembership) {
  const NodeView after_install = view_of({2, 4}, {3}, 1, 8);
  EXPECT_EQ(verdict(after_install, 1, msg(MessageType::kAppend, 1, 8)), "deliver");
  EXPECT_EQ(verdict(after_install, 1, msg(MessageType::kHeartbeat, 1, 8)), "deliver");
  EXPECT_EQ(verdict(after_install, 1, msg(MessageType::kSnapshot, 1, 8)), "deliver");
  // Re-elected in a later term before node 3 caught up: still the leader it knows.
  EXPECT_EQ(verdict(after_install, 1, msg(MessageType::kAppend, 1, 9)), "deliver");
  // Not from an earlier term (that leader is gone), and no one else who is outside the membership.
  EXPECT_EQ(verdict(after_install, 1, msg(MessageType::kAppend, 1, 7)), "not_member");
  EXPECT_EQ(verdict(after_install, 5, msg(MessageType::kAppend, 5, 8)), "not_member");
  EXPECT_EQ(verdict(after_install, 5, msg(MessageType::kHeartbeat, 5, 100)), "not_member");
}

// The node of the test above restarted before the entries that add node 1 back arrived, or a node whose log is
// behind heard node 1 named by a member that refused its pre-vote: it has not heard node 1 in this process, but its
// Raft core knows node 1 as the leader of term 8 (RaftStatus::term_leader).
TEST(PeerAdmission, TheLeaderOfTheTermIsStillHeardAfterARestart) {
  NodeView restarted = view_of({2, 4}, {3}, 0, 8);
  EXPECT_EQ(verdict(restarted, 1, msg(MessageType::kAppend, 1, 8)), "not_member");  // without the remembered leader
  restarted.term_leader = NodeId(1);
  EXPECT_EQ(verdict(restarted, 1, msg(MessageType::kAppend, 1, 8)), "deliver");
  EXPECT_EQ(verdict(restarted, 1, msg(MessageType::kSnapshot, 1, 9)), "deliver");
  EXPECT_EQ(verdict(restarted, 1, msg(MessageType::kAppend, 1, 7)), "not_member");
  EXPECT_EQ(verdict(restarted, 5, msg(MessageType::kAppend, 5, 8)), "not_member");
}

// Simulator seed 1045: node 3, leader of term 3, appended "remove node 2" and lost leadership before it committed;
// node 2, which never got that entry, was elected for term 4 by node 1. Until the change commits it may be undone —
// and only node 2 can undo it, by truncating it: node 3 must hear node 2 while the change is pending.
TEST(PeerAdmission, TheCommittedMembershipIsHeardWhileAnAppendedChangeIsPending) {
  NodeView pending = view_of({1, 3}, {}, 0, 3);
  pending.committed_members = {NodeId(1), NodeId(2), NodeId(3)};
  EXPECT_EQ(verdict(pending, 2, msg(MessageType::kAppend, 2, 4)), "deliver");
  EXPECT_EQ(verdict(pending, 2, msg(MessageType::kVote, 2, 4)), "deliver");
  EXPECT_EQ(verdict(pending, 9, msg(MessageType::kAppend, 9, 4)), "not_member");
  // Once it commits (the view then carries no committed membership of its own), node 2 is out.
  EXPECT_EQ(verdict(view_of({1, 3}, {}, 1, 4), 2, msg(MessageType::kAppend, 2, 4)), "not_member");
}

}  // namespace
}  // namespace mayfly::node
