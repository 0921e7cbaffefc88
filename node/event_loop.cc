#include "node/event_loop.h"

#include <chrono>

namespace mayfly::node {
namespace {

class AsioTimer final : public EventLoop::Timer {
 public:
  explicit AsioTimer(boost::asio::io_context& io) : timer_(io) {}
  void arm(int64_t delay_micros, std::function<void()> fire) override {
    timer_.expires_after(std::chrono::microseconds(delay_micros));
    timer_.async_wait([fire = std::move(fire)](const boost::system::error_code& error) {
      if (!error) fire();
    });
  }
  void cancel() override { timer_.cancel(); }

 private:
  boost::asio::steady_timer timer_;
};

}  // namespace

int64_t AsioLoop::now_micros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::unique_ptr<EventLoop::Timer> AsioLoop::make_timer() { return std::make_unique<AsioTimer>(io_); }

class ManualLoop::ManualTimer final : public EventLoop::Timer {
 public:
  explicit ManualTimer(ManualLoop& loop) : loop_(loop), generation_(std::make_shared<uint64_t>(0)) {}
  ~ManualTimer() override { ++*generation_; }
  void arm(int64_t delay_micros, std::function<void()> fire) override {
    const uint64_t armed = ++*generation_;
    const int64_t due = loop_.now_ + (delay_micros > 0 ? delay_micros : 0);
    loop_.timers_.emplace(std::make_pair(due, loop_.next_sequence_++), Armed{generation_, armed, std::move(fire)});
  }
  void cancel() override { ++*generation_; }

 private:
  ManualLoop& loop_;
  std::shared_ptr<uint64_t> generation_;
};

std::unique_ptr<EventLoop::Timer> ManualLoop::make_timer() { return std::make_unique<ManualTimer>(*this); }

void ManualLoop::run_tasks() {
  while (!tasks_.empty() && !quit_) {
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    task();
  }
}

void ManualLoop::advance_to(int64_t micros) {
  run_tasks();
  while (!quit_ && !timers_.empty() && timers_.begin()->first.first <= micros) {
    auto due = timers_.begin();
    Armed armed = std::move(due->second);
    if (due->first.first > now_) now_ = due->first.first;
    timers_.erase(due);
    if (*armed.generation == armed.armed_generation) armed.fire();
    run_tasks();
  }
  if (micros > now_) now_ = micros;
  run_tasks();
}

}  // namespace mayfly::node
