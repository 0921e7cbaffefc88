// The collector's pacer (node/gc_pacer.h): back-to-back passes within --gc-driver-share while the node is idle, one
// short pass per --gc-interval-ms while it serves clients, and the full interval after a pass with nothing more to do.
#include <gtest/gtest.h>

#include "node/gc_pacer.h"

namespace mayfly::node {
namespace {

constexpr int64_t kMs = 1000;

GcPaceOptions options(double share = 0.5) {
  GcPaceOptions o;
  o.interval_micros = 200 * kMs;
  o.batch_items_max = 1000;
  o.driver_share = share;
  o.min_pause_micros = 10 * kMs;
  return o;
}

TEST(GcPacer, IdlePassesWithABacklogPauseSoThatTheyTakeTheirShareOfTheDriver) {
  GcPacer pacer(options(0.5));
  EXPECT_FALSE(pacer.busy(0));
  EXPECT_EQ(pacer.batch_items(0), 1000u);
  // A 30 ms pass that left a backlog: 30 ms pause at a half share.
  pacer.pass_done(1000 * kMs, 1030 * kMs, 1000, true);
  EXPECT_EQ(pacer.next_pass_micros(), 1060 * kMs);
  // A quarter share: three times the pass.
  GcPacer quarter(options(0.25));
  quarter.pass_done(1000 * kMs, 1030 * kMs, 1000, true);
  EXPECT_EQ(quarter.next_pass_micros(), 1120 * kMs);
}

TEST(GcPacer, PausesAreAtLeastATickAndAtMostTheInterval) {
  GcPacer pacer(options(0.5));
  pacer.pass_done(0, 2 * kMs, 100, true);  // a 2 ms pass: 2 ms would do, a tick it is
  EXPECT_EQ(pacer.next_pass_micros(), 12 * kMs);
  GcPacer slow(options(0.05));
  slow.pass_done(0, 100 * kMs, 1000, true);  // 1.9 s by the share, the interval at most
  EXPECT_EQ(slow.next_pass_micros(), 300 * kMs);
  GcPacer simulated(options(0.5));  // a simulated loop: passes take no time
  simulated.pass_done(5 * kMs, 5 * kMs, 20, true);
  EXPECT_EQ(simulated.next_pass_micros(), 15 * kMs);
}

TEST(GcPacer, APassWithNothingMoreToDoWaitsTheInterval) {
  GcPacer pacer(options());
  pacer.pass_done(0, 30 * kMs, 500, false);  // emptied the backlog
  EXPECT_EQ(pacer.next_pass_micros(), 230 * kMs);
  pacer.pass_done(230 * kMs, 231 * kMs, 0, true);  // no RU to spare: deleted nothing
  EXPECT_EQ(pacer.next_pass_micros(), 431 * kMs);
}

TEST(GcPacer, ForegroundLoadSwitchesToShortPassesEveryIntervalUntilItHasBeenQuietForHalfASecond) {
  GcPacer pacer(options());
  // 20 operations in a window are not load (200 a second at most).
  for (int i = 0; i < 10; ++i) pacer.note_foreground(i * 10 * kMs, 2);
  EXPECT_FALSE(pacer.busy(100 * kMs));
  // 21 in a window are.
  pacer.note_foreground(100 * kMs, 20);
  EXPECT_FALSE(pacer.busy(100 * kMs));
  pacer.note_foreground(150 * kMs, 1);
  EXPECT_TRUE(pacer.busy(150 * kMs));
  EXPECT_EQ(pacer.batch_items(150 * kMs), GcPacer::kBusyBatchItems);
  pacer.pass_done(160 * kMs, 161 * kMs, 100, true);  // a backlog left, but busy: the interval
  EXPECT_EQ(pacer.next_pass_micros(), 361 * kMs);
  // Load goes on in later windows: still busy half a second after the last busy window.
  pacer.note_foreground(300 * kMs, 50);
  EXPECT_TRUE(pacer.busy(799 * kMs));
  EXPECT_FALSE(pacer.busy(800 * kMs));
  EXPECT_EQ(pacer.batch_items(800 * kMs), 1000u);
  pacer.pass_done(800 * kMs, 820 * kMs, 1000, true);
  EXPECT_EQ(pacer.next_pass_micros(), 840 * kMs);
}

TEST(GcPacer, TheBusyBatchNeverExceedsTheConfiguredOne) {
  GcPaceOptions small = options();
  small.batch_items_max = 20;
  GcPacer pacer(small);
  pacer.note_foreground(0, 1000);
  EXPECT_TRUE(pacer.busy(0));
  EXPECT_EQ(pacer.batch_items(0), 20u);
}

}  // namespace
}  // namespace mayfly::node
