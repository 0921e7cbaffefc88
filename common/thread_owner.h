// ThreadOwner: which thread a type's state belongs to, said in code and checked where the state is touched. bind() on
// the owning thread once it runs (an event loop's thread, say); check() at the top of every method that touches the
// owned state. In builds with assertions (no NDEBUG: Debug, and `make sanitize`) a call from another thread stops the
// process with the type's name; in release builds check() is empty. on_owner() answers in every build.
//
// Thread-safety: bind() and release() on the owning thread; on_owner() and check() on any.
#pragma once

#include <atomic>
#include <thread>

#include "common/assert.h"

namespace mayfly {

class ThreadOwner {
 public:
  explicit ThreadOwner(const char* what) : what_(what) {}

  void bind() { owner_.store(std::this_thread::get_id()); }
  void release() { owner_.store(std::thread::id()); }
  // True on the owning thread, and before bind() (construction and start-up run on another thread).
  bool on_owner() const {
    const std::thread::id owner = owner_.load();
    return owner == std::thread::id() || owner == std::this_thread::get_id();
  }
  void check() const {
#ifndef NDEBUG
    MAYFLY_ASSERT_MSG(on_owner(), "%s: used off its own thread", what_);
#endif
  }

 private:
  const char* what_;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace mayfly
