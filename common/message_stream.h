// A Cap'n Proto MessageStream that reads and writes in bulk: the transport of every RPC connection (client sessions,
// request links, Raft links; node/rpc_common.h, node/rpc_internal.h, node/peer_transport.cc, client/client.cc).
//
// capnp's own stream (AsyncIoMessageStream) makes two or three read() calls per incoming message (its segment table,
// then its body) and one write() per outgoing message. This one:
//  - reads whatever the socket holds, up to its buffer, with one read() and hands out every whole message in it
//    (copied out, so the buffer is reused at once);
//  - takes each outgoing message into a pending buffer and answers at once; the buffer goes out with one write() at
//    the end of the event loop's turn (kj::evalLast), so the messages of a turn — many answers, or a Return and the
//    next deliver — share a syscall. While a write is in flight, later messages wait for it in the next buffer.
// The framing on the wire is capnp's standard one, byte for byte: the other end may use either stream.
//
// Bytes from the socket are validated before anything is allocated for them: a segment count of 512 or more, or a
// message beyond the reader options' traversal limit, fails the stream (the connection), as capnp's reader does.
// Outgoing: at most kMaxPendingBytes wait unsent; beyond, writeMessage's promise waits for the socket to drain (the
// RPC system then holds further messages back itself, as it does for a slow socket with capnp's stream).
//
// Thread-safety: the thread of the event loop the stream was made on (like the AsyncIoStream it wraps).
#pragma once

#include <capnp/serialize-async.h>
#include <kj/async-io.h>
#include <kj/async.h>

#include <cstddef>
#include <vector>

namespace mayfly {

class BufferedMessageStream final : public capnp::MessageStream, private kj::TaskSet::ErrorHandler {
 public:
  static constexpr size_t kReadBufferBytes = 16 * 1024;
  static constexpr size_t kMaxPendingBytes = 4 * 1024 * 1024;

  explicit BufferedMessageStream(kj::AsyncIoStream& stream);
  ~BufferedMessageStream() noexcept(false);

  kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> tryReadMessage(kj::ArrayPtr<kj::AutoCloseFd> fd_space,
                                                                     capnp::ReaderOptions options,
                                                                     kj::ArrayPtr<capnp::word> scratch_space) override;
  kj::Promise<void> writeMessage(kj::ArrayPtr<const int> fds,
                                 kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) override;
  kj::Promise<void> writeMessages(
      kj::ArrayPtr<kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>> messages) override;
  kj::Maybe<int> getSendBufferSize() override;
  kj::Promise<void> end() override;

  // For tests and metrics: syscalls made so far.
  size_t reads() const { return reads_; }
  size_t writes() const { return writes_; }

 private:
  // The bytes the message at the front of the read buffer needs: all of it (table and body) once its segment table
  // is buffered, else as much of the table as is known. So the message is whole exactly when at least that many
  // bytes are buffered. Throws on a table no valid message has (too many segments, beyond the traversal limit).
  size_t front_message_bytes(const capnp::ReaderOptions& options) const;
  kj::Own<capnp::MessageReader> take_message(size_t bytes, const capnp::ReaderOptions& options);
  kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> read_more(capnp::ReaderOptions options);

  void append(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments);
  void schedule_flush();
  void flush();
  kj::Promise<void> drained();  // the pending and in-flight bytes are written (or the stream failed)
  void taskFailed(kj::Exception&& exception) override;

  kj::AsyncIoStream& stream_;

  std::vector<kj::byte> in_;  // [in_begin_, in_end_) not yet handed out
  size_t in_begin_ = 0;
  size_t in_end_ = 0;

  std::vector<kj::byte> pending_;  // messages not yet written
  std::vector<kj::byte> writing_;  // the bytes of the write in flight
  bool write_in_flight_ = false;
  bool flush_scheduled_ = false;
  bool ended_ = false;
  kj::Maybe<kj::Exception> failure_;  // a failed write: every later write fails with it
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> drain_waiters_;
  kj::TaskSet tasks_;

  size_t reads_ = 0;
  size_t writes_ = 0;
};

}  // namespace mayfly
