#include "replication/types.h"

namespace mayfly::replication {
namespace {

std::string join_ids(const std::set<NodeId>& ids) {
  std::string out = "{";
  bool first = true;
  for (NodeId id : ids) {
    if (!first) out += ",";
    out += std::to_string(id.value());
    first = false;
  }
  return out + "}";
}

}  // namespace

std::string_view entry_type_name(EntryType type) {
  switch (type) {
    case EntryType::kNormal:
      return "normal";
    case EntryType::kConfigChange:
      return "config_change";
    case EntryType::kEmpty:
      return "empty";
  }
  return "unknown";
}

std::string Membership::to_string() const {
  return "voters=" + join_ids(voters) + " learners=" + join_ids(learners);
}

Status apply_config_change(const ConfigChange& change, Membership& membership) {
  const NodeId node = change.node;
  const std::string who = "node " + std::to_string(node.value());
  if (node == NodeId(0)) return Status::invalid_argument("config change names node 0");
  switch (change.type) {
    case ConfigChangeType::kAddLearner:
      if (membership.contains(node)) return Status::invalid_argument(who + " is already a member");
      membership.learners.insert(node);
      return Status::ok();
    case ConfigChangeType::kAddVoter:
      if (membership.contains(node)) return Status::invalid_argument(who + " is already a member");
      membership.voters.insert(node);
      return Status::ok();
    case ConfigChangeType::kPromoteLearner:
      if (!membership.is_learner(node)) return Status::invalid_argument(who + " is not a learner");
      membership.learners.erase(node);
      membership.voters.insert(node);
      return Status::ok();
    case ConfigChangeType::kRemoveNode:
      if (!membership.contains(node)) return Status::invalid_argument(who + " is not a member");
      if (membership.is_voter(node) && membership.voters.size() == 1) {
        return Status::invalid_argument("cannot remove the last voter");
      }
      membership.voters.erase(node);
      membership.learners.erase(node);
      return Status::ok();
  }
  return Status::invalid_argument("unknown config change type");
}

}  // namespace mayfly::replication
