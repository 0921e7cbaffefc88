// node/event_loop.h: the ManualLoop that tests and the simulator run the production driver on — tasks in order,
// timers by due time, re-arming replaces, cancelling drops, time stands at each timer's instant while it runs — and
// the AsioLoop mayflyd runs it on.
#include "node/event_loop.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mayfly::node {
namespace {

TEST(ManualLoop, RunsTasksThenTimersInTimeOrderAtTheirInstants) {
  ManualLoop loop(1000);
  std::vector<std::string> ran;
  auto late = loop.make_timer();
  auto early = loop.make_timer();
  late->arm(500, [&] { ran.push_back("late@" + std::to_string(loop.now_micros())); });
  early->arm(200, [&] {
    ran.push_back("early@" + std::to_string(loop.now_micros()));
    loop.post([&] { ran.push_back("posted-by-early@" + std::to_string(loop.now_micros())); });
  });
  loop.post([&] { ran.push_back("task"); });
  EXPECT_TRUE(ran.empty()) << "nothing runs until the loop is advanced";
  loop.advance_to(1300);
  EXPECT_EQ(ran, (std::vector<std::string>{"task", "early@1200", "posted-by-early@1200"}));
  EXPECT_EQ(loop.now_micros(), 1300);
  EXPECT_EQ(loop.next_due_micros(), 1500);
  loop.advance_to(2000);
  EXPECT_EQ(ran.back(), "late@1500");
  EXPECT_EQ(loop.now_micros(), 2000);
}

TEST(ManualLoop, RearmingReplacesAndCancellingOrDestroyingDrops) {
  ManualLoop loop;
  int fired = 0;
  auto timer = loop.make_timer();
  timer->arm(100, [&] { fired += 1; });
  timer->arm(300, [&] { fired += 10; });  // replaces the first
  loop.advance_to(200);
  EXPECT_EQ(fired, 0);
  loop.advance_to(300);
  EXPECT_EQ(fired, 10);
  timer->arm(100, [&] { fired += 100; });
  timer->cancel();
  auto gone = loop.make_timer();
  gone->arm(50, [&] { fired += 1000; });
  gone.reset();
  loop.advance_to(1000);
  EXPECT_EQ(fired, 10);
  // A timer re-armed from its own callback with no delay runs once per advance step, in order, never lost.
  int chained = 0;
  std::function<void()> again = [&] {
    if (++chained < 3) timer->arm(0, again);
  };
  timer->arm(0, again);
  loop.advance_to(1000);
  EXPECT_EQ(chained, 3);
}

TEST(ManualLoop, QuitStopsAnAdvance) {
  ManualLoop loop;
  int ran = 0;
  loop.post([&] {
    ++ran;
    loop.quit();
  });
  loop.post([&] { ++ran; });
  loop.advance_to(10);
  EXPECT_EQ(ran, 1);
}

TEST(AsioLoop, PostsTimersAndReleaseLetRunReturn) {
  AsioLoop loop;
  std::vector<int> order;
  auto timer = loop.make_timer();
  const int64_t started = loop.now_micros();
  timer->arm(2000, [&] {
    order.push_back(2);
    EXPECT_GE(loop.now_micros() - started, 2000);
    loop.release();
  });
  loop.post([&] { order.push_back(1); });
  loop.run();  // returns once released and idle
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace mayfly::node
