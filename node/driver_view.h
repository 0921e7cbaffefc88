// NodeView: what the rest of the node knows of the driver's state — its role, leader, term, indexes, replicated
// times, leader contact and membership — refreshed after every flush and handed out with the flush's output
// (node/driver.h DriverBatch). The RPC thread's router (node/router.h) and the Raft transport's peer admission
// (node/peer_admission.h) decide from their own copy of it.
// Thread-safety: a value.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

#include "common/ids.h"
#include "replication/raft_core.h"

namespace mayfly::node {

// What the RPC side needs to know about this node, refreshed after every flush.
struct NodeView {
  NodeId self;
  NodeId leader;
  // The leader this node knew in `term`, remembered across a pre-election and a restart (replication::HardState).
  NodeId term_leader;
  replication::Role role = replication::Role::kFollower;
  uint64_t term = 0;
  uint64_t commit = 0;
  uint64_t applied = 0;
  uint64_t last_index = 0;
  int64_t applied_ts_micros = 0;
  int64_t last_ts_micros = 0;
  // Steady-clock ms when this node last heard from its leader (now, on the leader); nullopt: no leader known.
  std::optional<int64_t> leader_contact_steady_ms;
  std::set<NodeId> voters;  // the membership in effect: its last change appended (Raft thesis §4.1)
  std::set<NodeId> learners;
  // While a membership change is appended but not committed: the voters and learners of the committed membership
  // (empty otherwise, or when they are the same).
  std::set<NodeId> committed_members;
};

}  // namespace mayfly::node
