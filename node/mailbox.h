// Mailbox: how the driver thread and the read threads hand their output (DriverBatch: replies, Raft messages, the
// node view, peer deliveries taken) to the kj thread without waiting for it. A sender appends under a mutex and, if
// the kj thread is waiting, wakes it through a kj cross-thread fulfiller; the kj thread takes everything queued at
// once. So a kj thread busy for a while (a large reply to encode, a burst of connections) never stalls the driver's
// heartbeats and fsyncs, which an executeSync hand-off did.
//
// Bounded: replies are bounded by the requests the kj thread lets in (--max-pending-requests); Raft messages are
// not, so past kMaxQueuedMessageBytes a batch's messages are dropped (counted; Raft resends what is lost) while its
// replies, view and acknowledgements still go through.
//
// Thread-safety: post() and close() from any thread; next() and take() on the kj thread only.
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "node/driver.h"

namespace mayfly::node {

class Mailbox {
 public:
  static constexpr size_t kMaxQueuedMessageBytes = 64 << 20;

  // Queues `batch` and wakes the kj thread. Returns false (dropping it) once closed. `dropped_messages` (optional)
  // receives how many Raft messages of this batch were dropped by the bound.
  bool post(DriverBatch batch, uint64_t* dropped_messages = nullptr);
  // kj thread: resolves with everything queued, as soon as there is something (at once if there is already).
  kj::Promise<std::vector<DriverBatch>> next();
  // kj thread: everything queued now, without waiting.
  std::vector<DriverBatch> take();
  // Later posts are dropped. A pending next() never resolves (its loop is being torn down).
  void close();

 private:
  std::vector<DriverBatch> take_locked();

  std::mutex mutex_;
  std::vector<DriverBatch> queue_;
  size_t queued_message_bytes_ = 0;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> waiter_;  // set while the kj thread waits in next()
  bool closed_ = false;
};

}  // namespace mayfly::node
