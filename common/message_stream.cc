#include "common/message_stream.h"

#include <capnp/serialize.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace mayfly {
namespace {

constexpr uint64_t kMaxSegments = 512;                 // as capnp's readers
constexpr size_t kKeepCapacityBytes = 1024 * 1024;     // a larger buffer (a big message's) is freed once used

uint32_t load_u32(const kj::byte* p) {
  uint32_t value = 0;
  std::memcpy(&value, p, sizeof(value));  // capnp's framing is little-endian, as is every machine Mayfly builds on
  return value;
}

}  // namespace

BufferedMessageStream::BufferedMessageStream(kj::AsyncIoStream& stream) : stream_(stream), tasks_(*this) {}

BufferedMessageStream::~BufferedMessageStream() noexcept(false) {}

size_t BufferedMessageStream::front_message_bytes(const capnp::ReaderOptions& options) const {
  const size_t available = in_end_ - in_begin_;
  if (available < sizeof(capnp::word)) return sizeof(capnp::word);
  const kj::byte* front = in_.data() + in_begin_;
  const uint64_t segments = uint64_t{load_u32(front)} + 1;
  KJ_REQUIRE(segments < kMaxSegments, "message has too many segments", segments);
  const size_t table_bytes = static_cast<size_t>((segments + 2) / 2) * sizeof(capnp::word);
  if (available < table_bytes) return table_bytes;
  uint64_t words = 0;
  for (uint64_t i = 0; i < segments; ++i) words += load_u32(front + 4 + 4 * i);
  KJ_REQUIRE(words <= options.traversalLimitInWords,
             "message is too large for this connection's reader options", words, options.traversalLimitInWords);
  return table_bytes + static_cast<size_t>(words) * sizeof(capnp::word);
}

kj::Own<capnp::MessageReader> BufferedMessageStream::take_message(size_t bytes, const capnp::ReaderOptions& options) {
  // A copy the reader owns: the buffer is reused for the next read at once.
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes / sizeof(capnp::word));
  std::memcpy(words.begin(), in_.data() + in_begin_, bytes);
  in_begin_ += bytes;
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  auto reader = kj::heap<capnp::FlatArrayMessageReader>(words.asPtr(), options);
  return reader.attach(kj::mv(words));
}

kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> BufferedMessageStream::tryReadMessage(
    kj::ArrayPtr<kj::AutoCloseFd>, capnp::ReaderOptions options, kj::ArrayPtr<capnp::word>) {
  // evalNow: a header no message has fails the promise (and with it the connection), it does not throw here.
  return kj::evalNow([this, options]() -> kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> {
    // Fewer bytes than the front message needs (its table, or table and body): read; else it is whole.
    const size_t needed = front_message_bytes(options);
    if (in_end_ - in_begin_ >= needed) {
      return kj::Maybe<capnp::MessageReaderAndFds>(capnp::MessageReaderAndFds{take_message(needed, options), nullptr});
    }
    return read_more(options);
  });
}

kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> BufferedMessageStream::read_more(capnp::ReaderOptions options) {
  // Room at the end for the rest of the front message (and more): move what is unread to the front, grow the buffer
  // to the message's size when it is larger than the usual, give a large one back once it is no longer needed.
  const size_t unread = in_end_ - in_begin_;
  if (in_begin_ > 0) {
    if (unread > 0) std::memmove(in_.data(), in_.data() + in_begin_, unread);
    in_begin_ = 0;
    in_end_ = unread;
  }
  const size_t wanted = std::max(kReadBufferBytes, front_message_bytes(options));
  if (in_.size() < wanted || (in_.size() > kKeepCapacityBytes && wanted <= kReadBufferBytes)) {
    std::vector<kj::byte> resized(wanted);
    if (unread > 0) std::memcpy(resized.data(), in_.data(), unread);
    in_.swap(resized);
  }
  ++reads_;
  return stream_.tryRead(in_.data() + in_end_, 1, in_.size() - in_end_)
      .then([this, options](size_t read) -> kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> {
        if (read == 0) {
          if (in_end_ == in_begin_) return kj::Maybe<capnp::MessageReaderAndFds>(nullptr);  // a clean end
          return KJ_EXCEPTION(DISCONNECTED, "the connection ended in the middle of a message");
        }
        in_end_ += read;
        return tryReadMessage(nullptr, options, nullptr);
      });
}

void BufferedMessageStream::append(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  KJ_REQUIRE(segments.size() > 0, "a message has at least one segment");
  const size_t table_words = (segments.size() + 2) / 2;
  size_t body_bytes = 0;
  for (const auto& segment : segments) body_bytes += segment.size() * sizeof(capnp::word);
  const size_t at = pending_.size();
  pending_.resize(at + table_words * sizeof(capnp::word) + body_bytes);
  kj::byte* out = pending_.data() + at;
  std::memset(out, 0, table_words * sizeof(capnp::word));
  const uint32_t count_minus_one = static_cast<uint32_t>(segments.size() - 1);
  std::memcpy(out, &count_minus_one, 4);
  for (size_t i = 0; i < segments.size(); ++i) {
    const uint32_t words = static_cast<uint32_t>(segments[i].size());
    std::memcpy(out + 4 + 4 * i, &words, 4);
  }
  out += table_words * sizeof(capnp::word);
  for (const auto& segment : segments) {
    std::memcpy(out, segment.begin(), segment.size() * sizeof(capnp::word));
    out += segment.size() * sizeof(capnp::word);
  }
}

kj::Promise<void> BufferedMessageStream::writeMessage(kj::ArrayPtr<const int> fds,
                                                      kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  KJ_REQUIRE(fds.size() == 0, "this stream carries no file descriptors");
  KJ_IF_MAYBE(failed, failure_) { return kj::cp(*failed); }
  KJ_REQUIRE(!ended_, "a message written after end()");
  append(segments);
  schedule_flush();
  // The message is copied: the caller may release it now. Past the bound, the caller waits for the socket.
  if (pending_.size() + writing_.size() > kMaxPendingBytes) return drained();
  return kj::READY_NOW;
}

kj::Promise<void> BufferedMessageStream::writeMessages(
    kj::ArrayPtr<kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>> messages) {
  KJ_IF_MAYBE(failed, failure_) { return kj::cp(*failed); }
  KJ_REQUIRE(!ended_, "a message written after end()");
  for (const auto& segments : messages) append(segments);
  schedule_flush();
  if (pending_.size() + writing_.size() > kMaxPendingBytes) return drained();
  return kj::READY_NOW;
}

void BufferedMessageStream::schedule_flush() {
  if (flush_scheduled_ || write_in_flight_) return;  // a write in flight flushes again when it completes
  flush_scheduled_ = true;
  // After every other event of this turn: the messages they write go out together.
  tasks_.add(kj::evalLast([this] { flush(); }));
}

void BufferedMessageStream::flush() {
  flush_scheduled_ = false;
  if (write_in_flight_ || failure_ != nullptr) return;
  if (pending_.empty()) {
    for (auto& waiter : drain_waiters_) waiter->fulfill();
    drain_waiters_.clear();
    return;
  }
  writing_.swap(pending_);
  pending_.clear();
  if (pending_.capacity() > kKeepCapacityBytes) std::vector<kj::byte>().swap(pending_);
  write_in_flight_ = true;
  ++writes_;
  tasks_.add(stream_.write(writing_.data(), writing_.size())
                 .then(
                     [this] {
                       write_in_flight_ = false;
                       writing_.clear();
                       flush();  // what was written meanwhile, or the waiters when nothing was
                     },
                     [this](kj::Exception&& exception) {
                       write_in_flight_ = false;
                       writing_.clear();
                       pending_.clear();
                       for (auto& waiter : drain_waiters_) waiter->reject(kj::cp(exception));
                       drain_waiters_.clear();
                       failure_ = kj::mv(exception);
                     }));
}

kj::Promise<void> BufferedMessageStream::drained() {
  KJ_IF_MAYBE(failed, failure_) { return kj::cp(*failed); }
  if (pending_.empty() && !write_in_flight_) return kj::READY_NOW;
  auto waiter = kj::newPromiseAndFulfiller<void>();
  drain_waiters_.push_back(kj::mv(waiter.fulfiller));
  if (!write_in_flight_) schedule_flush();
  return kj::mv(waiter.promise);
}

kj::Maybe<int> BufferedMessageStream::getSendBufferSize() {
  int size = 0;
  uint length = sizeof(size);
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&]() {
                stream_.getsockopt(SOL_SOCKET, SO_SNDBUF, &size, &length);
              })) {
    return nullptr;
  }
  return size;
}

kj::Promise<void> BufferedMessageStream::end() {
  ended_ = true;
  return drained().then([this] { stream_.shutdownWrite(); });
}

void BufferedMessageStream::taskFailed(kj::Exception&& exception) {
  // Only the evalLast flush can get here (a write's failure is handled where it happens): keep it as the stream's.
  if (failure_ == nullptr) failure_ = kj::mv(exception);
}

}  // namespace mayfly
