// EventLoop: where the driver's work runs and when — its only source of monotonic time, of ordering and of timers.
// The driver never reads a clock of its own or blocks on another thread: everything it does is a task on this loop
// (TigerBeetle's and etcd-raft's rule: time is an input), so the same Driver runs in mayflyd on a Boost.Asio thread
// and in tests on simulated time, deterministically.
//
//   AsioLoop    production: a Boost.Asio io_context run by the driver thread, steady_clock time, steady_timers.
//   ManualLoop  tests and simulations: nothing runs until advance_to(t), which runs, in order, every task posted and
//               every timer due up to t; time is whatever the caller says.
//
// Thread-safety: AsioLoop::post may be called from any thread; everything else of both runs on the loop's thread.
// ManualLoop is single-threaded.
#pragma once

#include <boost/asio.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <utility>

namespace mayfly::node {

class EventLoop {
 public:
  // A one-shot timer that can be re-armed: arming again replaces the wait armed before.
  class Timer {
   public:
    virtual ~Timer() = default;
    virtual void arm(int64_t delay_micros, std::function<void()> fire) = 0;
    virtual void cancel() = 0;
  };

  virtual ~EventLoop() = default;
  // Monotonic microseconds (an arbitrary origin): for timeouts and intervals, never for replicated time.
  virtual int64_t now_micros() const = 0;
  int64_t now_ms() const { return now_micros() / 1000; }
  // Runs `task` on the loop after the tasks posted before it.
  virtual void post(std::function<void()> task) = 0;
  virtual std::unique_ptr<Timer> make_timer() = 0;
  // Whether blocking work (a snapshot export) may run on a thread of its own. false: the caller runs it inline, so
  // a simulation stays single-threaded and reproducible.
  virtual bool background_threads() const = 0;
  // Runs the loop on the calling thread until quit() or, after release(), until no work is left.
  virtual void run() = 0;
  virtual void quit() = 0;     // run() returns as soon as it can, whatever is pending
  virtual void release() = 0;  // run() may return once idle (nothing posted, no timer armed)
};

class AsioLoop final : public EventLoop {
 public:
  AsioLoop() : work_(boost::asio::make_work_guard(io_)) {}
  int64_t now_micros() const override;
  void post(std::function<void()> task) override { boost::asio::post(io_, std::move(task)); }
  std::unique_ptr<Timer> make_timer() override;
  bool background_threads() const override { return true; }
  void run() override { io_.run(); }
  void quit() override { io_.stop(); }
  void release() override { work_.reset(); }
  // For what needs Asio itself (signal handling in main, tests that post raw handlers).
  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
};

class ManualLoop final : public EventLoop {
 public:
  explicit ManualLoop(int64_t start_micros = 0) : now_(start_micros) {}
  int64_t now_micros() const override { return now_; }
  void post(std::function<void()> task) override { tasks_.push_back(std::move(task)); }
  std::unique_ptr<Timer> make_timer() override;
  bool background_threads() const override { return false; }
  void run() override { advance_to(now_); }
  void quit() override { quit_ = true; }
  void release() override {}

  // Runs every posted task and every timer due at or before `micros` (>= now), in time order (ties: in the order
  // they were armed), tasks first at each instant; time stands at each timer's due time while it runs, then at
  // `micros`. Stops early after quit().
  void advance_to(int64_t micros);
  // The due time of the earliest armed timer, or -1.
  int64_t next_due_micros() const { return timers_.empty() ? -1 : timers_.begin()->first.first; }
  bool idle() const { return tasks_.empty(); }

 private:
  class ManualTimer;
  void run_tasks();

  int64_t now_;
  bool quit_ = false;
  std::deque<std::function<void()>> tasks_;
  uint64_t next_sequence_ = 0;
  // (due, sequence) -> (the timer's generation at arming, what to run); a re-armed or cancelled timer's old entry
  // is skipped when its generation no longer matches.
  struct Armed {
    std::shared_ptr<uint64_t> generation;
    uint64_t armed_generation;
    std::function<void()> fire;
  };
  std::map<std::pair<int64_t, uint64_t>, Armed> timers_;
};

}  // namespace mayfly::node
