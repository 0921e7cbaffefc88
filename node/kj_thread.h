// KjThread: a thread of its own that runs a kj event loop for one owner — the RPC host (node/rpc.h) or the Raft
// transport (node/peer_transport.h) — started and stopped from the main thread. start() runs `set_up` on the new
// thread with its AsyncIoContext: a set-up that fails ends the thread (it must leave nothing of the loop's behind) and
// start() returns why. Otherwise the loop runs until stop(); then `tear_down` runs on the thread, which may still wait
// on the loop (answers flushed, forwarded writes answered), and the thread ends.
//
// Thread-safety: start() and stop() from one controlling thread; executor() from any thread once start() returned OK.
#pragma once

#include <kj/async-io.h>
#include <kj/async.h>

#include <functional>
#include <thread>

#include "common/status.h"

namespace mayfly::node {

class KjThread {
 public:
  using SetUp = std::function<Status(kj::AsyncIoContext& io)>;
  using TearDown = std::function<void(kj::AsyncIoContext& io)>;

  explicit KjThread(const char* name) : name_(name) {}
  ~KjThread() { stop(); }

  Status start(SetUp set_up, TearDown tear_down);
  // Ends the loop, waits for `tear_down` and joins the thread. Idempotent.
  void stop();
  bool running() const { return running_; }
  // The loop's executor, for handing it work from another thread; nullptr until start() succeeded.
  const kj::Executor* executor() const { return executor_.get(); }

 private:
  const char* name_;
  std::thread thread_;
  kj::Own<const kj::Executor> executor_;
  kj::Own<kj::PromiseFulfiller<void>> shutdown_;
  bool running_ = false;
};

}  // namespace mayfly::node
