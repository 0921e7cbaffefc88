// The work one read may do: a budget of steps, a deadline, and cancellation flags that another thread sets (the
// request timed out, its connection closed, the node is stopping). Long loops — a query's or a list's scan, a change
// feed page, a forecast, LIKE and CONTAINS over long text — charge their steps to the budget of the read running on
// their thread and stop as soon as charge_work() says so; the read then ends with work_status()'s error and changes
// nothing. A thread that has no budget installed (tests, tools, the driver's own work) is never stopped.
//
// A step is roughly a nanosecond of work: a byte compared by a string function is one step, an item read by a scan
// is kStepsPerItem. The clock and the flags are looked at every kCheckEverySteps steps, so a read notices a
// cancellation or its deadline within well under a millisecond of work.
// Thread-safety: a WorkBudget belongs to the thread that runs the read; the flags it watches are atomics any
// thread may set.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace mayfly {

// Steps charged per item or record a scan reads (besides what evaluating it costs).
inline constexpr int64_t kStepsPerItem = 200;
// The steps one page of a read may take by default (about a second of work; mayflyd's --max-read-work): past it, a
// 400 that tells the user to narrow the query.
inline constexpr int64_t kMaxWorkStepsPerPage = 1'000'000'000;

class WorkBudget {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int64_t kCheckEverySteps = 1 << 16;

  // `cancel` and `stop` may be null; `deadline` may be Clock::time_point::max() for none.
  WorkBudget(int64_t max_steps, Clock::time_point deadline, const std::atomic<bool>* cancel,
             const std::atomic<bool>* stop)
      : max_steps_(max_steps), deadline_(deadline), cancel_(cancel), stop_(stop) {}

  // Adds `steps`; false once the read must stop (and from then on).
  bool charge(int64_t steps) {
    if (reason_ != Reason::kNone) return false;
    steps_ += steps;
    unchecked_ += steps;
    if (steps_ > max_steps_) {
      reason_ = Reason::kOverBudget;
      return false;
    }
    if (unchecked_ >= kCheckEverySteps) {
      unchecked_ = 0;
      return check();
    }
    return true;
  }
  // Looks at the flags and the clock now.
  bool check() {
    if (reason_ != Reason::kNone) return false;
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) {
      reason_ = Reason::kStopping;
    } else if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      reason_ = Reason::kCancelled;
    } else if (Clock::now() >= deadline_) {
      reason_ = Reason::kDeadline;
    }
    return reason_ == Reason::kNone;
  }
  bool stopped() const { return reason_ != Reason::kNone; }
  int64_t steps() const { return steps_; }

  // Why the read stopped: 400 over the step budget (deterministic: the same read always fails), 503 otherwise.
  Status status() const {
    switch (reason_) {
      case Reason::kNone: return Status();
      case Reason::kOverBudget:
        return Status::invalid_argument(
            "the request needs more than " + std::to_string(max_steps_) +
            " steps of work in one page (long text through LIKE or string functions, or many large items); nothing "
            "was done: narrow the query (filter on the partition key or id, shorter patterns, a smaller page)");
      case Reason::kDeadline:
        return Status(StatusCode::kUnavailable,
                      "the request ran past its deadline (--request-timeout-ms) and was stopped; nothing was done: "
                      "narrow the query or retry");
      case Reason::kCancelled:
        return Status(StatusCode::kUnavailable,
                      "the request was cancelled (it timed out or its connection closed); nothing was done");
      case Reason::kStopping:
        return Status(StatusCode::kUnavailable, "the node is shutting down; retry on another node");
    }
    return Status();
  }
  bool over_budget() const { return reason_ == Reason::kOverBudget; }
  // A limit of the read's own refused it (the read then answers 400 itself): "sort_bytes", "group_bytes". For metrics.
  void note_refusal(const char* what) { refusal_ = what; }
  const char* refusal() const { return refusal_; }
  // For metrics: "" while running, else "over_budget", "deadline", "cancelled" or "stopping".
  const char* reason_name() const {
    switch (reason_) {
      case Reason::kNone: return "";
      case Reason::kOverBudget: return "over_budget";
      case Reason::kDeadline: return "deadline";
      case Reason::kCancelled: return "cancelled";
      case Reason::kStopping: return "stopping";
    }
    return "";
  }

 private:
  enum class Reason : uint8_t { kNone, kOverBudget, kDeadline, kCancelled, kStopping };
  int64_t max_steps_;
  Clock::time_point deadline_;
  const std::atomic<bool>* cancel_;
  const std::atomic<bool>* stop_;
  int64_t steps_ = 0;
  int64_t unchecked_ = 0;
  Reason reason_ = Reason::kNone;
  const char* refusal_ = "";
};

namespace work_detail {
inline thread_local WorkBudget* current = nullptr;
}  // namespace work_detail

// The budget of the read running on this thread, or nullptr.
inline WorkBudget* current_work_budget() { return work_detail::current; }
// Charges this thread's budget; true while the work may go on (always, without a budget).
inline bool charge_work(int64_t steps) {
  WorkBudget* budget = work_detail::current;
  return budget == nullptr || budget->charge(steps);
}
inline bool work_stopped() {
  const WorkBudget* budget = work_detail::current;
  return budget != nullptr && budget->stopped();
}
// The error of a stopped read (OK when it was not stopped).
inline Status work_status() {
  const WorkBudget* budget = work_detail::current;
  return budget != nullptr ? budget->status() : Status();
}

// Notes on this thread's budget (if any) that one of the read's own limits refused it (WorkBudget::note_refusal).
inline void note_work_refusal(const char* what) {
  if (WorkBudget* budget = work_detail::current) budget->note_refusal(what);
}

// Installs `budget` as this thread's for its lifetime (restoring the one before).
class ScopedWorkBudget {
 public:
  explicit ScopedWorkBudget(WorkBudget& budget) : previous_(work_detail::current) { work_detail::current = &budget; }
  ~ScopedWorkBudget() { work_detail::current = previous_; }
  ScopedWorkBudget(const ScopedWorkBudget&) = delete;
  ScopedWorkBudget& operator=(const ScopedWorkBudget&) = delete;

 private:
  WorkBudget* previous_;
};

}  // namespace mayfly
