// BufferedMessageStream (common/message_stream.h) over a real socket pair: messages written in one turn arrive whole
// and in order and share writes; large and many-segment messages cross; the framing is capnp's own both ways; a
// table no message has fails the read instead of allocating; a clean end is nullptr, a cut one an exception; end()
// sends what is pending first.
#include <gtest/gtest.h>

#include <capnp/message.h>
#include <capnp/serialize-async.h>
#include <kj/async-io.h>

#include <string>
#include <vector>

#include "common/message_stream.h"
#include "proto/mayfly.capnp.h"

namespace mayfly {
namespace {

struct Pipe {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::TwoWayPipe pipe = io.provider->newTwoWayPipe();
};

// A message whose body is `text` (in a Response's message field).
void fill(capnp::MessageBuilder& builder, const std::string& text) {
  builder.initRoot<proto::Response>().setMessage(text);
}

std::string text_of(capnp::MessageReader& reader) {
  return std::string(reader.getRoot<proto::Response>().getMessage().cStr());
}

TEST(BufferedMessageStream, MessagesOfOneTurnArriveWholeInOrderInFewWrites) {
  Pipe p;
  BufferedMessageStream out(*p.pipe.ends[0]);
  BufferedMessageStream in(*p.pipe.ends[1]);
  constexpr int kMessages = 200;
  std::vector<kj::Promise<void>> written;
  for (int i = 0; i < kMessages; ++i) {
    capnp::MallocMessageBuilder builder(16);
    fill(builder, "message " + std::to_string(i));
    written.push_back(out.writeMessage(nullptr, builder.getSegmentsForOutput()));  // copied: builder may go
  }
  for (auto& promise : written) promise.wait(p.io.waitScope);
  for (int i = 0; i < kMessages; ++i) {
    auto reader = in.tryReadMessage(nullptr, capnp::ReaderOptions(), nullptr).wait(p.io.waitScope);
    KJ_IF_MAYBE(message, reader) {
      EXPECT_EQ(text_of(*message->reader), "message " + std::to_string(i));
    } else {
      FAIL() << "the stream ended after " << i << " messages";
    }
  }
  EXPECT_LE(out.writes(), 2u) << "one turn's messages share a write";
  EXPECT_LT(in.reads(), static_cast<size_t>(kMessages) / 4) << "one read hands out many messages";
}

TEST(BufferedMessageStream, LargeAndManySegmentMessagesCrossAndCapnpReadsThem) {
  Pipe p;
  BufferedMessageStream out(*p.pipe.ends[0]);
  capnp::AsyncIoMessageStream plain_in(*p.pipe.ends[1]);
  const std::string big(3 * 1024 * 1024 + 5, 'x');  // larger than the read buffer and the first segment
  capnp::MallocMessageBuilder builder(8, capnp::AllocationStrategy::FIXED_SIZE);  // many small segments
  auto list = builder.initRoot<proto::Response>();
  list.setMessage(big);
  list.setBody("after");
  ASSERT_GT(builder.getSegmentsForOutput().size(), 1u);
  out.writeMessage(nullptr, builder.getSegmentsForOutput()).wait(p.io.waitScope);
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 16 * 1024 * 1024;
  auto reader = plain_in.readMessage(options).wait(p.io.waitScope);
  EXPECT_EQ(reader->getRoot<proto::Response>().getMessage().size(), big.size());
  EXPECT_EQ(std::string(reader->getRoot<proto::Response>().getBody().cStr()), "after");
}

TEST(BufferedMessageStream, ReadsWhatCapnpsOwnStreamWrites) {
  Pipe p;
  capnp::AsyncIoMessageStream plain_out(*p.pipe.ends[0]);
  BufferedMessageStream in(*p.pipe.ends[1]);
  const std::string big(2 * 1024 * 1024, 'y');
  // Written one after the other while the reader reads (the big one does not fit the socket's buffer).
  std::vector<kj::Own<capnp::MallocMessageBuilder>> builders;
  kj::Promise<void> written = kj::READY_NOW;
  for (const std::string& text : {std::string("small"), big, std::string("last")}) {
    builders.push_back(kj::heap<capnp::MallocMessageBuilder>());
    fill(*builders.back(), text);
    written = written.then([&plain_out, builder = builders.back().get()] {
      return plain_out.writeMessage(nullptr, builder->getSegmentsForOutput());
    });
  }
  written = written.eagerlyEvaluate(nullptr);
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 16 * 1024 * 1024;
  for (const std::string& text : {std::string("small"), big, std::string("last")}) {
    auto reader = in.tryReadMessage(nullptr, options, nullptr).wait(p.io.waitScope);
    KJ_IF_MAYBE(message, reader) {
      EXPECT_EQ(text_of(*message->reader), text);
    } else {
      FAIL() << "ended early";
    }
  }
  written.wait(p.io.waitScope);
}

// Writes raw bytes to one end, closes it, and reads the other with a BufferedMessageStream: the read's outcome (an
// exception that names the bad table, rather than one for the early end, shows the table was refused as it came).
kj::Maybe<kj::Exception> read_raw(const std::vector<uint32_t>& words32, capnp::ReaderOptions options) {
  Pipe p;
  BufferedMessageStream in(*p.pipe.ends[1]);
  p.pipe.ends[0]->write(words32.data(), words32.size() * 4).wait(p.io.waitScope);
  p.pipe.ends[0]->shutdownWrite();
  return kj::runCatchingExceptions([&] {
    auto result = in.tryReadMessage(nullptr, options, nullptr).wait(p.io.waitScope);
    KJ_REQUIRE(result != nullptr, "the stream ended cleanly");
  });
}

TEST(BufferedMessageStream, ATableNoMessageHasFailsTheReadWithoutAllocating) {
  // 600 segments: capnp's limit is 512.
  KJ_IF_MAYBE(failure, read_raw({599, 1, 0}, capnp::ReaderOptions())) {
    EXPECT_NE(std::string(failure->getDescription().cStr()).find("too many segments"), std::string::npos);
  } else {
    FAIL() << "a 600-segment table was accepted";
  }
  // One segment of 2^31 words: beyond the traversal limit, refused before any buffer of that size is made.
  KJ_IF_MAYBE(failure, read_raw({0, 0x80000000u}, capnp::ReaderOptions())) {
    EXPECT_NE(std::string(failure->getDescription().cStr()).find("too large"), std::string::npos);
  } else {
    FAIL() << "a 16 GiB message was accepted";
  }
  // A message cut short by the end of the stream.
  KJ_IF_MAYBE(failure, read_raw({0, 4, 1, 2}, capnp::ReaderOptions())) {
    EXPECT_NE(std::string(failure->getDescription().cStr()).find("middle of a message"), std::string::npos);
  } else {
    FAIL() << "a cut message was accepted";
  }
}

TEST(BufferedMessageStream, ACleanEndIsNullAndEndSendsWhatIsPendingFirst) {
  Pipe p;
  BufferedMessageStream out(*p.pipe.ends[0]);
  BufferedMessageStream in(*p.pipe.ends[1]);
  capnp::MallocMessageBuilder builder;
  fill(builder, "before the end");
  auto written = out.writeMessage(nullptr, builder.getSegmentsForOutput());
  out.end().wait(p.io.waitScope);
  written.wait(p.io.waitScope);
  auto first = in.tryReadMessage(nullptr, capnp::ReaderOptions(), nullptr).wait(p.io.waitScope);
  KJ_IF_MAYBE(message, first) {
    EXPECT_EQ(text_of(*message->reader), "before the end");
  } else {
    FAIL() << "the pending message was not sent before the end";
  }
  auto second = in.tryReadMessage(nullptr, capnp::ReaderOptions(), nullptr).wait(p.io.waitScope);
  EXPECT_TRUE(second == nullptr);
}

}  // namespace
}  // namespace mayfly
