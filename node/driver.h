// Driver: the node's one event-loop thread. It owns the Replica (Raft core + log + state machine) and everything that
// changes it: ticks, peer messages, client writes and strong reads, leader time entries, and local garbage
// collection. Each batch of inputs ends in one flush(): persist → send → apply → advance (storage::Replica), then
// completions and outgoing messages go to the RPC side in one hop (DriverOutput).
//
// Replicated time: the leader stamps every entry with its clock (never below the previous entry). While the log is
// idle it appends a time entry every time_entry_interval_ms, and it schedules one exactly at the next expiry deadline
// the state machine knows of, so an item disappears within one commit round trip of its deadline. With --clock
// virtual the leader's clock is the log's own time (node/virtual_clock.h): no idle time entries, no deadline timer;
// time moves only with an advance-clock entry.
//
// Time and scheduling come from an EventLoop (node/event_loop.h): in mayflyd an AsioLoop run by the driver thread, in
// tests a ManualLoop on simulated time. The driver reads no clock of its own (replicated time comes from `clock`,
// intervals and timeouts from the loop) and never waits on another thread.
//
// Files: driver.cc (the cycle: flush, ticks, writes, strong reads, expiry deadlines, stopping), driver_upkeep.cc
// (admin and membership changes, snapshot jobs, garbage collector passes and pacing); what it publishes to
// Prometheus is a type of its own (node/driver_metrics.h), the pacer too (node/gc_pacer.h).
//
// Thread-safety: the loop's thread (the driver thread) owns the Driver and everything in it (checked in debug builds:
// ThreadOwner, bound by run()). Other threads reach it only through: post() (the loop's queue); foreground() (an
// atomic count); state()'s thread-safe readers and reclaim_rate() (its lock), which the read threads are handed at
// start; and io() for main's signal handling.
#pragma once

#include <boost/asio.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread_owner.h"
#include "metrics/metrics.h"
#include "node/collector.h"
#include "node/gc_compactor.h"
#include "node/gc_pacer.h"
#include "node/config.h"
#include "node/driver_metrics.h"
#include "node/driver_view.h"
#include "node/event_loop.h"
#include "node/forecast.h"
#include "node/expiry_watch.h"
#include "node/request.h"
#include "node/ru_account.h"
#include "node/warn_limiter.h"
#include "replication/message.h"
#include "storage/replica.h"

namespace mayfly::node {

// One flush's worth of output.
struct DriverBatch {
  std::map<NodeId, std::vector<std::string>> messages;  // encoded Raft messages, per destination, in order
  std::vector<std::pair<uint64_t, Reply>> replies;      // request id -> reply
  std::optional<NodeView> view;                         // absent in the early hand-off of a leader's appends
  std::vector<uint64_t> deliveries_taken;               // peer deliveries the driver has stepped
};

// Implemented by the RPC side. deliver() is called on the driver thread.
class DriverOutput {
 public:
  virtual ~DriverOutput() = default;
  virtual void deliver(DriverBatch batch) = 0;
};

// A collector pass or metrics refresh that holds the driver this long is logged: a third of the shortest default
// election timeout, so a warning comes well before followers would give up on a leader held like that.
inline constexpr int64_t kDriverHoldWarnMs = 100;

class Driver {
 public:
  // `loop`: where the driver runs (not owned; it must outlive the driver); nullptr: an AsioLoop of its own, run by
  // run().
  Driver(const NodeConfig& config, std::unique_ptr<storage::Replica> replica, Clock& clock,
         metrics::Metrics& metrics, RequestUnitAccount& request_units, EventLoop* loop = nullptr);
  ~Driver();

  // Runs `task` on the driver's loop. Any thread (with an injected ManualLoop: that loop's thread).
  void post(std::function<void()> task) { loop_.post(std::move(task)); }
  // The Asio context of a driver that owns its loop (signal handling in main, tests).
  boost::asio::io_context& io();
  // Starts the timers; output receives every flush. Then call run() on the driver thread.
  void start(DriverOutput& output);
  // Runs io() on the calling thread (the driver thread) until the node stops. An exception escaping a handler
  // (std::bad_alloc, a kj::Exception, anything) or the background snapshot thread ends here: its cause is logged
  // (critical), the node stops as after a storage failure — pending requests get 503, failed() is true — and run()
  // returns; the caller then closes the store and exits non-zero. A replication::StorageFailure (the core could not
  // read its log) is logged as a storage failure, with the read and the disk's error.
  void run();
  // Stops timers and answers every pending request with 503, waits for a range compaction under way (at most one,
  // node/gc_compactor.h), then lets io().run() return.
  void stop();
  // SIGTERM: a leader first hands leadership to its most caught-up voter (TimeoutNow), so a planned restart costs
  // no election timeout; then (or after at most two election timeouts) stop().
  void stop_gracefully();

  // Inputs (driver thread).
  // `delivery` (non-zero) is acknowledged with the next flush's output, once the messages are stepped: the RPC side
  // counts a peer's deliveries waiting for the driver and, past a few, holds the peer's deliver call until then
  // (backpressure).
  void on_messages(std::vector<replication::Message> messages, uint64_t delivery = 0);
  void on_request(uint64_t request_id, api::Request operation);

  const storage::StateMachine& state() const { return replica_->state(); }
  // For the simulator and tests, which check what the production loop did: the replica (its core's invariants, its
  // log), every flush's output as the replica produced it (called on the loop, before replies go out), messages
  // refused as malformed or out of place, and items the collector deleted.
  storage::Replica& replica() { return *replica_; }
  void set_flush_observer(std::function<void(const storage::ReplicaOutput&)> observer) {
    flush_observer_ = std::move(observer);
  }
  uint64_t messages_refused() const { return messages_refused_; }
  int64_t gc_items_collected() const { return gc_items_collected_; }
  // The compactions of what the collector drained (node/gc_compactor.h).
  const GcCompactor& gc_compactor() const { return gc_compactor_; }
  // True after a storage failure stopped the node (the process should exit non-zero).
  bool failed() const { return failed_; }
  NodeView view() const;
  // The collector's reclaim capacity (node/forecast.h): thread-safe, for the TTL forecast on read threads.
  const ReclaimRate& reclaim_rate() const { return reclaim_rate_; }
  // Any thread: where the RPC side counts the client reads and writes it serves, the collector's pacer's measure of
  // foreground load (node/gc_pacer.h).
  ForegroundCount& foreground() { return foreground_; }

 private:
  struct PendingWrite {
    uint64_t request_id;
    uint64_t term;
    int64_t deadline_ms;
    int64_t proposed_at_micros;  // steady clock, for the proposal latency histogram
  };
  // A strong read whose ReadIndex is confirmed, waiting for this node's applied index to reach it (the RPC thread
  // then serves it: Reply::serve_here).
  struct WaitingRead {
    uint64_t request_id;
    int64_t deadline_ms;
  };
  // A strong read waiting for its ReadIndex to be confirmed by a quorum.
  struct PendingStrongRead {
    uint64_t request_id;
    int64_t deadline_ms;
  };

  void schedule_flush();
  void flush();
  void on_tick();
  void on_deadline_timer();
  void handle_write(uint64_t request_id, const api::Request& operation);
  void handle_read(uint64_t request_id, const api::Request& operation);
  void handle_admin(uint64_t request_id, const api::Request& operation);
  // mayfly cluster advance-clock (virtual clock only): a time entry stamped `operation.advance_micros` later.
  void handle_advance_clock(uint64_t request_id, const api::Request& operation);
  // After apply: the advance whose entry (or another term's entry at its index) just applied, answered.
  void answer_advance(const storage::AppliedEntry& applied);
  void answer_advances();  // advances whose index a snapshot install skipped: outcome unknown
  void reply(uint64_t request_id, Reply reply);
  void serve_waiting_reads();
  void expire_requests();
  // A collector pass, then the next one armed when the pacer says (node/gc_pacer.h); and a drained range's
  // compaction started when one is due (node/gc_compactor.h).
  void collect_garbage();
  // Gives the pacer the client requests served and item writes applied since it last heard.
  void note_foreground();
  void auto_promote_learners();
  void watch_expiry();  // every node, after each flush: lateness samples and the next expiry instant
  void schedule_expiry_entry();
  void publish_metrics();
  // Logs (rate-limited) when `what`, begun at `started`, held the driver thread for kDriverHoldWarnMs or more.
  void note_driver_hold(std::string_view what, int64_t started_micros);
  void maybe_start_snapshot();
  void finish_snapshot();  // of snapshot_job_
  void charge_applied(const storage::AppliedEntry& applied, Reply* reply);
  int64_t steady_ms() const;
  Reply not_leader(std::string what) const;
  void fatal(const Status& status);
  // After an exception: log `cause`, stop, mark failed.
  void fail_on_exception(std::string_view where, const std::string& cause);
  // Mark failed, stop (answering what is pending with 503) and end io().run(), even if stopping throws.
  void stop_after_failure();
  // What the exception being handled is, for the log (call inside a catch block).
  static std::string describe_current_exception();

  ThreadOwner owner_{"Driver"};
  std::unique_ptr<AsioLoop> own_loop_;  // when no loop was injected
  EventLoop& loop_;
  NodeConfig config_;
  std::unique_ptr<storage::Replica> replica_;
  // With --clock virtual: a clock that reads the log's own time (node/virtual_clock.h); clock_ is then this one.
  std::unique_ptr<Clock> virtual_clock_;
  Clock& clock_;
  metrics::Metrics& metrics_;
  RequestUnitAccount& request_units_;
  Collector collector_;
  ReclaimRate reclaim_rate_;  // after collector_ (its pass budget): the forecast's capacity, read by read threads
  GcPacer gc_pacer_;
  // After replica_: destroyed (its thread joined) before the store closes.
  GcCompactor gc_compactor_;
  DriverMetrics driver_metrics_;
  DriverOutput* output_ = nullptr;
  std::unique_ptr<EventLoop::Timer> tick_timer_;
  std::unique_ptr<EventLoop::Timer> deadline_timer_;
  std::unique_ptr<EventLoop::Timer> gc_timer_;
  bool flush_scheduled_ = false;
  bool stopped_ = false;
  bool failed_ = false;
  std::optional<int64_t> stop_deadline_ms_;  // set while handing leadership over before stopping

  DriverBatch batch_;  // being filled until the next flush delivers it
  std::map<uint64_t, PendingWrite> pending_writes_;            // log index -> write
  std::map<std::string, PendingStrongRead> pending_strong_;    // ReadIndex context -> read
  std::multimap<uint64_t, WaitingRead> waiting_reads_;         // confirmed read index -> strong read
  std::map<uint64_t, uint64_t> pending_config_;                // log index -> request id (admin changes)
  struct PendingAdvance {
    uint64_t request_id;
    uint64_t term;          // the advance entry's term: another term's entry at its index means it was lost
    int64_t target_micros;  // the advance entry's ts
    int64_t deadline_ms;
  };
  std::map<uint64_t, PendingAdvance> pending_advances_;        // log index -> advance-clock request
  std::string read_context_prefix_;  // "r<this start's seed>.": ReadIndex contexts unique across restarts
  uint64_t next_read_context_ = 1;
  int64_t last_proposal_ms_ = 0;
  // The restart's replay of the log after the state's checkpoint: reported once applied reaches the commit index
  // known at start.
  struct Replay {
    uint64_t from = 0;
    uint64_t until = 0;
    int64_t started_ms = 0;
    bool reported = true;
  } replay_;
  ForegroundCount foreground_;           // client requests served, counted by the RPC thread
  uint64_t foreground_ops_seen_ = 0;     // foreground_.total() already given to the pacer
  uint64_t item_writes_unreported_ = 0;  // item writes applied since the pacer last heard
  std::optional<int64_t> scheduled_expiry_micros_;
  std::optional<int64_t> last_deadline_fired_micros_;  // loop time
  uint64_t expiry_checked_at_applied_ = 0;
  ExpiryWatch expiry_watch_;
  std::thread snapshot_thread_;  // exports a snapshot off the driver thread; at most one at a time
  std::unique_ptr<storage::Replica::SnapshotJob> snapshot_job_;  // the snapshot in the making (owns its view)
  WarnLimiter rejected_warnings_{1000};  // refused peer messages: one line per sender and reason per second
  WarnLimiter term_warnings_{10000};     // a term at its maximum: one line per 10 s
  WarnLimiter hold_warnings_{10000};     // long collector passes or metric refreshes: one line per 10 s each
  std::function<void(const storage::ReplicaOutput&)> flush_observer_;
  uint64_t messages_refused_ = 0;
  int64_t gc_items_collected_ = 0;
};

}  // namespace mayfly::node
