// RpcHost's side of the driver's output (node/rpc.h): each batch split between the Raft transport (messages,
// deliveries taken, the view) and the RPC thread (replies, the view), and the request link to each peer.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "node/rpc_internal.h"

namespace mayfly::node {

using namespace rpc_detail;

// ---- RpcHost: the driver's output, peer links, peer deliveries ----------------------------------------------------

void RpcHost::deliver(DriverBatch batch) {
  uint64_t dropped = 0;
  if (!batch.messages.empty() || !batch.deliveries_taken.empty() || batch.view) {
    DriverBatch raft;
    raft.messages = std::move(batch.messages);
    raft.deliveries_taken = std::move(batch.deliveries_taken);
    raft.view = batch.view;
    dropped += transport_->deliver(std::move(raft));
  }
  // The early hand-off of a leader's appends carries messages only: nothing for the RPC thread.
  if (!batch.replies.empty() || batch.view) mailbox_.post(std::move(batch));
  if (dropped > 0) security_metrics_.add_handoff_dropped(dropped);
}

kj::Promise<void> RpcHost::drain_mailbox() {
  return mailbox_.next().then([this](std::vector<DriverBatch> batches) {
    for (DriverBatch& batch : batches) apply_batch(batch);
    return drain_mailbox();
  });
}

void RpcHost::apply_batch(DriverBatch& batch) {
  owner_.check();
  if (batch.view) {
    const NodeView& view = router_.view();
    const bool members_changed = batch.view->voters != view.voters || batch.view->learners != view.learners;
    // The reads the new applied index releases, in order.
    for (uint64_t id : router_.set_view(*batch.view)) {
      auto ready = parked_.find(id);
      if (ready == parked_.end()) continue;
      ready->second->fulfill(true);
      parked_.erase(ready);
    }
    // Request links to every member connect ahead of the first forwarded write or status call.
    if (members_changed) {
      for (const std::set<NodeId>* members : {&view.voters, &view.learners}) {
        for (NodeId member : *members) {
          if (member == config_.id) continue;
          if (PeerLink* peer_link = link(member)) peer_link->warm();
        }
      }
    }
  }
  for (auto& [id, reply] : batch.replies) {
    if (read_jobs_.erase(id) != 0) read_queue_.finished();  // its read thread is free: the next lane's turn
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;  // timed out already
    it->second->fulfill(kj::mv(reply));
    pending_.erase(it);
    pending_writes_.erase(id);
  }
}

PeerLink* RpcHost::link(NodeId peer) {
  auto it = links_.find(peer);
  if (it != links_.end()) return it->second.get();
  std::optional<std::string> address = peer_address(config_, state_, peer);
  if (!address) return nullptr;
  auto created = std::make_unique<PeerLink>(*this, PeerLink::Kind::kRequests, peer, *address);
  PeerLink* raw = created.get();
  links_.emplace(peer, std::move(created));
  return raw;
}

bool RpcHost::may_forward(NodeId from) const { return router_.may_forward(from); }

}  // namespace mayfly::node
