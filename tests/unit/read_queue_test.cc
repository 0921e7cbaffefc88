// ReadQueue (node/read_queue.h): the read threads shared between keys in turns.
#include "node/read_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mayfly::node {
namespace {

// Jobs record their lane when they start; the test plays the read threads by calling finished().
struct Recorder {
  std::vector<std::string> started;
  ReadQueue::Job job(const std::string& name) {
    return [this, name] { started.push_back(name); };
  }
};

TEST(ReadQueue, StartsAtOnceWhileThreadsAreFree) {
  ReadQueue queue(2);
  Recorder r;
  queue.submit("a", r.job("a1"));
  queue.submit("b", r.job("b1"));
  EXPECT_EQ(r.started, (std::vector<std::string>{"a1", "b1"}));
  EXPECT_EQ(queue.running(), 2u);
  queue.submit("a", r.job("a2"));
  EXPECT_EQ(queue.running(), 2u);
  EXPECT_EQ(queue.queued(), 1u);
  queue.finished();
  EXPECT_EQ(r.started.back(), "a2");
  EXPECT_EQ(queue.queued(), 0u);
}

// The attack issue #28 finding 1 describes, after the work limits: one key keeps a hundred reads queued. Another
// key's read starts at the first free thread, not after the hundred.
TEST(ReadQueue, AKeyWithAHundredQueuedReadsDoesNotHoldAnotherKeysReadBehindThem) {
  ReadQueue queue(2);
  Recorder r;
  for (int i = 0; i < 100; ++i) queue.submit("attacker", r.job("attacker"));
  queue.submit("victim", r.job("victim"));
  ASSERT_EQ(r.started.size(), 2u);
  queue.finished();
  EXPECT_EQ(r.started.back(), "victim") << "the victim's read waited behind the attacker's queue";
  EXPECT_EQ(queue.queued(), 98u);
}

TEST(ReadQueue, LanesTakeTurnsOneJobEach) {
  ReadQueue queue(1);
  Recorder r;
  queue.submit("x", r.job("x0"));  // runs
  for (int i = 1; i <= 3; ++i) {
    queue.submit("a", r.job("a" + std::to_string(i)));
    queue.submit("b", r.job("b" + std::to_string(i)));
    queue.submit("c", r.job("c" + std::to_string(i)));
  }
  while (queue.queued() > 0) queue.finished();
  EXPECT_EQ(r.started, (std::vector<std::string>{"x0", "a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3", "c3"}));
  queue.finished();
  EXPECT_EQ(queue.running(), 0u);
  EXPECT_EQ(queue.lanes(), 0u);
}

TEST(ReadQueue, TheEmptyLaneTakesItsTurnToo) {
  ReadQueue queue(1);
  Recorder r;
  queue.submit("k", r.job("k0"));
  queue.submit("", r.job("open1"));
  queue.submit("k", r.job("k1"));
  queue.submit("", r.job("open2"));
  while (queue.queued() > 0) queue.finished();
  EXPECT_EQ(r.started, (std::vector<std::string>{"k0", "open1", "k1", "open2"}));
}

}  // namespace
}  // namespace mayfly::node
