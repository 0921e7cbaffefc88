// RpcHost: the node's Cap'n Proto side, on its own kj event-loop thread. It serves the client API (Mayfly →
// Session.execute) and the peer API (Peer.deliver / forward / nodeStatus) on one listener, keeps one outgoing link
// per peer (batched Raft messages, reconnect with backoff, bounded queue), forwards writes from this follower to the
// leader, and serves eventual/session/bounded reads straight from the state machine when this replica is fresh
// enough — everything else goes to the Driver.
//
// The bridge (DESIGN.md §5): RPC → driver by boost::asio::post; driver → RPC by kj::Executor::executeSync, once per
// flush with every reply and message of that flush. No object is touched by both threads, except the state
// machine's read methods, which are thread-safe.
//
// Thread-safety: start/stop from the main thread; deliver from the driver thread; everything else on the kj thread.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "node/config.h"
#include "node/driver.h"
#include "node/request.h"
#include "node/warn_limiter.h"
#include "proto/mayfly.capnp.h"

namespace mayfly::node {

class PeerLink;

class RpcHost final : public DriverOutput {
 public:
  RpcHost(const NodeConfig& config, Driver& driver, metrics::Metrics& metrics, RequestUnitAccount& request_units);
  ~RpcHost() noexcept override;

  // Starts the kj thread and binds the listener; returns once it listens (or why it could not).
  Status start();
  // Stops the loop and joins the thread. Idempotent.
  void stop();

  // DriverOutput (driver thread).
  void deliver(DriverBatch batch) override;

  // --- kj thread ---
  // Executes a client (or forwarded) request and records it in the request metrics.
  kj::Promise<Reply> handle(Operation operation, proto::Request::Reader request, bool forwarded);
  void receive(NodeId from, capnp::List<capnp::Data>::Reader messages);
  std::string own_status_json() const;
  const NodeConfig& config() const { return config_; }
  kj::Timer& timer() { return *timer_; }

 private:
  void run(std::promise<Status>& started);
  void apply_batch(DriverBatch& batch);
  kj::Promise<Reply> route(Operation operation, proto::Request::Reader request, bool forwarded);
  kj::Promise<Reply> to_driver(Operation operation);
  Reply serve_read(const Operation& operation);
  bool fresh_enough(const Operation& operation) const;
  kj::Promise<Reply> cluster_status();
  PeerLink* link(NodeId peer);
  Reply shutting_down() const;

  NodeConfig config_;
  Driver& driver_;
  metrics::Metrics& metrics_;
  RequestUnitAccount& request_units_;
  const storage::StateMachine& state_;
  std::thread thread_;
  kj::Own<const kj::Executor> executor_;  // the kj thread's, for the driver to call into
  kj::Own<kj::PromiseFulfiller<void>> shutdown_;
  bool running_ = false;

  // kj thread only.
  kj::Timer* timer_ = nullptr;
  WarnLimiter undecodable_warnings_{1000};  // one line per sender per second
  NodeView view_;
  uint64_t next_request_id_ = 1;
  std::map<uint64_t, kj::Own<kj::PromiseFulfiller<Reply>>> pending_;
  bool stopping_ = false;           // shutting down: no new work for the driver or the leader
  size_t forwards_in_flight_ = 0;  // writes forwarded to the leader, not answered yet
  std::map<NodeId, std::unique_ptr<PeerLink>> links_;
  class TaskErrors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override;
  };
  TaskErrors task_errors_;
  kj::Own<kj::TaskSet> tasks_;
};

}  // namespace mayfly::node
