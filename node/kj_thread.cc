#include "node/kj_thread.h"

#include <spdlog/spdlog.h>

#include <pthread.h>

#include <future>
#include <string>

namespace mayfly::node {

Status KjThread::start(SetUp set_up, TearDown tear_down) {
  std::promise<Status> started;
  std::future<Status> result = started.get_future();
  thread_ = std::thread([this, &started, set_up = std::move(set_up), tear_down = std::move(tear_down)] {
    // Named for top -H, perf and gdb (at most 15 characters).
    pthread_setname_np(pthread_self(), std::string(name_).substr(0, 15).c_str());
    kj::AsyncIoContext io = kj::setupAsyncIo();
    Status status = set_up(io);
    if (!status.is_ok()) {
      started.set_value(status);
      return;
    }
    executor_ = kj::getCurrentThreadExecutor().addRef();
    auto shutdown = kj::newPromiseAndFulfiller<void>();
    shutdown_ = kj::mv(shutdown.fulfiller);
    started.set_value(Status::ok());
    shutdown.promise.wait(io.waitScope);
    tear_down(io);
  });
  Status status = result.get();
  if (!status.is_ok()) {
    thread_.join();
    return status;
  }
  running_ = true;
  return status;
}

void KjThread::stop() {
  if (!running_) return;
  running_ = false;
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] { executor_->executeSync([this] { shutdown_->fulfill(); }); })) {
    spdlog::warn("stopping the {} loop: {}", name_, exception->getDescription().cStr());
  }
  thread_.join();
}

}  // namespace mayfly::node
