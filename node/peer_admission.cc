#include "node/peer_admission.h"

namespace mayfly::node {

const char* peer_message_refusal(const NodeView& view, NodeId self, NodeId link_from,
                                 const Result<replication::Message>& message) {
  if (!message.is_ok()) return "undecodable";
  if (message->from != link_from) return "wrong_sender";
  if (message->to != self) return "wrong_recipient";
  const bool knows_membership = !view.voters.empty() || !view.learners.empty();
  const bool member = view.voters.contains(link_from) || view.learners.contains(link_from) ||
                      view.committed_members.contains(link_from);
  const bool followed_leader =
      (view.leader == link_from || view.term_leader == link_from) && message->term.value() >= view.term;
  if (knows_membership && !member && !followed_leader) return "not_member";
  return nullptr;
}

}  // namespace mayfly::node
