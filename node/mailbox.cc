#include "node/mailbox.h"

namespace mayfly::node {

bool Mailbox::post(DriverBatch batch, uint64_t* dropped_messages) {
  size_t bytes = 0;
  uint64_t count = 0;
  for (const auto& [peer, messages] : batch.messages) {
    count += messages.size();
    for (const std::string& message : messages) bytes += message.size();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return false;
  if (bytes > 0 && queued_message_bytes_ + bytes > kMaxQueuedMessageBytes) {
    batch.messages.clear();
    if (dropped_messages != nullptr) *dropped_messages = count;
    bytes = 0;
  }
  queued_message_bytes_ += bytes;
  queue_.push_back(std::move(batch));
  if (waiter_.get() != nullptr) {
    waiter_->fulfill();
    waiter_ = nullptr;
  }
  return true;
}

std::vector<DriverBatch> Mailbox::take_locked() {
  std::vector<DriverBatch> out;
  out.swap(queue_);
  queued_message_bytes_ = 0;
  return out;
}

std::vector<DriverBatch> Mailbox::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return take_locked();
}

kj::Promise<std::vector<DriverBatch>> Mailbox::next() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!queue_.empty()) return take_locked();
  auto wake = kj::newPromiseAndCrossThreadFulfiller<void>();
  waiter_ = kj::mv(wake.fulfiller);
  return wake.promise.then([this] { return take(); });
}

void Mailbox::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

}  // namespace mayfly::node
