// Router: where a request goes on this node, and which peers this node listens to — decided from the node's view
// (NodeView, as the driver last reported it), its applied state and its configuration alone. No sockets, threads or
// clock of its own: the time is an argument. The RPC host (node/rpc.h) calls it on the RPC thread and carries out its
// answers with kj promises; the deterministic simulator (tests/sim) calls it the same way on simulated time, so
// follower reads, session and bounded waits, forwarded writes, the TTL guard's turn and peer admission run there as
// they run in mayflyd (docs/design.md "Requests").
//
// The rules:
//   - a read this replica is fresh enough for is served here: eventual always; session once the applied index
//     reaches the token; bounded while the leader was heard within --bounded-staleness-ms and this replica is within
//     --bounded-staleness-entries and -ms of what it last heard; strong never (the driver confirms it first, by
//     ReadIndex, then it is served here);
//   - a session read it is not fresh enough for waits (parks) until the applied index reaches the token, for
//     --session-wait-ms — or for a few heartbeats when the token is beyond the commit index this node knows, which
//     an honest token never stays for; on a leader, a token past the end of its log is refused at once (it did not
//     come from this cluster, or this node was deposed without knowing it);
//   - a bounded read waits for the commit index it knows minus the slack; without recent leader contact it is refused;
//   - cluster status, backups and forecasts are this node's own: never forwarded;
//   - writes and admin changes go to the leader: on the leader (or when no leader is known, so the driver answers
//     with its hint) to the driver; on a follower forwarded to the leader, once; a defaultTtl change is first counted
//     by the guard (node/ttl_guard.h), on the leader only;
//   - Raft messages and forwarded requests are taken only from members (node/peer_admission.h).
// Parked reads are counted here too, per key and for the node (--max-parked-reads; a key gets half), so the
// waits' bounds are part of the same pure rules.
//
// Thread-safety: none; one owner (in mayflyd the RPC thread, checked by the RpcHost's ThreadOwner).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "node/config.h"
#include "node/driver_view.h"
#include "node/request.h"
#include "replication/message.h"
#include "storage/store_reader.h"

namespace mayfly::node {

// Where one request goes.
struct Route {
  enum class Kind {
    kServe,       // a read this replica may serve now
    kWait,        // a read that waits until the applied index reaches `required` (at most `wait_ms`), then kServe
    kStrongRead,  // to the driver, which confirms leadership (ReadIndex) and answers serve_here when applied that far
    kDriver,      // a write or admin change for the driver (this node leads, or knows no leader)
    kForward,     // a write or admin change for `leader`, over this node's request link to it
    kGuardTtl,    // a defaultTtl change the guard counts first (on a read thread), then kDriver with ttl_force
    kLocal,       // this node's own: cluster status, backups, forecasts
    kRefuse,      // answered at once with `refusal`
  };
  Kind kind = Kind::kDriver;
  uint64_t required = 0;  // kWait
  int64_t wait_ms = 0;    // kWait
  NodeId leader;          // kForward
  Reply refusal;          // kRefuse
};

class Router {
 public:
  explicit Router(const NodeConfig& config);

  // The driver's view after a flush. Returns the parked reads (their ids from park()) the new applied index
  // releases, in the order they were parked by required index.
  std::vector<uint64_t> set_view(const NodeView& view);
  const NodeView& view() const { return view_; }

  // Where `operation` goes. `forwarded`: it came from a peer's forward (never forwarded again); `applied`: this
  // replica's applied state now; `steady_ms`: the node's steady clock, on the scale of the view's
  // leader_contact_steady_ms.
  Route route(const api::Request& operation, bool forwarded, storage::AppliedState applied, int64_t steady_ms) const;

  // Parked reads. parked_full: the refusal (503, overloaded) when --max-parked-reads are parked on this node, or half
  // of them for `key` ("" counts only towards the node's). park: a read of `key` waits for `required`; its id.
  // unpark: forgets a wait that timed out (no-op when released already). clear: forgets every wait (shutdown).
  std::optional<Reply> parked_full(const std::string& key) const;
  uint64_t park(uint64_t required, const std::string& key);
  void unpark(uint64_t id);
  void clear_parked();
  size_t parked() const { return waits_.size(); }
  int64_t parked_of(const std::string& key) const;
  // The 503 for a wait that ran out: the token is beyond what this node knows committed, or the replica is behind.
  Reply behind(uint64_t required) const;

  // Load shedding: whether a request must be refused because `waiting` requests already wait on the driver, a read
  // thread or the leader, or `queued_reads` jobs wait for a read thread. Reads stop at three quarters of
  // --max-pending-requests: the last quarter is kept for writes.
  bool over_request_limit(size_t waiting, size_t queued_reads, bool write) const;

  // Peer admission (node/peer_admission.h): nullptr when the Raft message may reach the driver, else why not.
  const char* peer_message_refusal(NodeId link_from, const Result<replication::Message>& message) const;
  // Whether the node link `from` proved may use the peer API's forward now: a voter or learner of this node's
  // membership, or any authenticated peer before this node knows one (a --join node), or the leader it follows.
  bool may_forward(NodeId from) const;

  // The answers this node gives itself, with its id and its leader hint.
  Reply unavailable(uint32_t substatus, uint32_t retry_after_ms, std::string message) const;
  Reply shutting_down() const;
  Reply overloaded(std::string message) const;
  // A request that got no answer within --request-timeout-ms (the outcome of a write is unknown).
  Reply timed_out() const;
  // A forwarded request the leader did not answer: it could not be reached (`why`), or not in time (`why` empty).
  Reply leader_unreachable(NodeId leader, const std::string& why) const;

 private:
  bool fresh_enough(const api::Request& operation, storage::AppliedState applied, int64_t steady_ms) const;
  bool leader_heard_within(int64_t steady_ms, int64_t ms) const;

  NodeConfig config_;
  NodeView view_;
  struct Wait {
    uint64_t id;
    std::string key;
  };
  std::multimap<uint64_t, Wait> waits_;        // required applied index -> the wait
  std::map<uint64_t, uint64_t> wait_required_;  // wait id -> its required index
  std::map<std::string, int64_t> parked_by_key_;
  uint64_t next_wait_id_ = 1;
};

}  // namespace mayfly::node
