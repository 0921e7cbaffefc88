// The max-clock-offset ceiling on replicated time: a leader stamps entries at most max_clock_offset_micros ahead of
// the clock a quorum of voters (itself included) has, estimated from the clocks followers report in their responses
// plus the leader's own ticks since. A leader whose clock jumps forward cannot drag cluster time (and expiry) along.
#include <gtest/gtest.h>

#include <limits>

#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

constexpr int64_t kHour = 3'600'000'000;
constexpr int64_t kMaxOffset = 500'000;  // RaftConfig's default
constexpr int64_t kTick = TestCluster::kTickMicros;

void expect_strictly_increasing(TestCluster& cluster) {
  for (NodeId id : cluster.ids()) {
    const std::vector<Entry> log = cluster.log_of(id);
    for (size_t i = 1; i < log.size(); ++i) ASSERT_GT(log[i].ts_micros, log[i - 1].ts_micros) << "node " << id;
  }
}

// A 3-node cluster led by node 1 where every node has ticked (so every clock has been reported).
void start_with_reports(TestCluster& cluster) {
  cluster.tick_all(1);  // followers learn a clock of their own before the election
  cluster.elect(N(1));
  cluster.tick_all(3);  // heartbeat responses carry the followers' clocks
  ASSERT_EQ(cluster.core(N(1)).status().clock_offsets_micros.size(), 2u) << "both followers reported";
}

TEST(ClockOffset, DefaultsAndValidation) {
  RaftConfig config;
  config.self = N(1);
  EXPECT_EQ(config.max_clock_offset_micros, kMaxOffset);
  EXPECT_EQ(config.tick_interval_micros, kTick);
  EXPECT_TRUE(config.validate().is_ok());
  config.max_clock_offset_micros = -1;
  EXPECT_FALSE(config.validate().is_ok());
  config.max_clock_offset_micros = kMaxOffset;
  config.tick_interval_micros = 0;
  EXPECT_FALSE(config.validate().is_ok());
}

TEST(ClockOffset, ResponsesReportTheSendersClock) {
  TestCluster cluster(3, 90);
  ASSERT_NO_FATAL_FAILURE(start_with_reports(cluster));
  int reported = 0;
  for (const Message& message : cluster.sent_log()) {
    if (message.type == MessageType::kHeartbeatResponse && message.clock_micros != 0) {
      ++reported;
      EXPECT_LE(message.clock_micros, cluster.now_micros());
      EXPECT_GE(message.clock_micros, cluster.now_micros() - 5 * kTick);
    }
    if (message.type == MessageType::kHeartbeat || message.type == MessageType::kAppend) {
      EXPECT_EQ(message.clock_micros, 0) << "only responses report a clock: " << message.describe();
    }
  }
  EXPECT_GT(reported, 0);
  for (const auto& [peer, offset] : cluster.core(N(1)).status().clock_offsets_micros) {
    EXPECT_LE(std::abs(offset), kTick) << "node " << peer << " runs the same clock";
  }
}

TEST(ClockOffset, LeaderClockAnHourAheadStaysWithinMaxOffsetOfTheFollowers) {
  TestCluster cluster(3, 91);
  ASSERT_NO_FATAL_FAILURE(start_with_reports(cluster));
  const Proposal before = cluster.propose(N(1), "before");
  EXPECT_EQ(before.ts_micros, cluster.now_micros()) << "clocks agree: the leader's clock is used as is";

  cluster.node(N(1)).clock_offset_micros = kHour;  // the leader's clock is stepped forward
  for (int round = 0; round < 50; ++round) {
    cluster.tick_all(1);
    const int64_t followers_clock = cluster.now_micros();
    const Proposal proposal = cluster.propose(N(1), "w" + std::to_string(round));
    ASSERT_GT(proposal.ts_micros, before.ts_micros);
    ASSERT_LE(proposal.ts_micros, followers_clock + kMaxOffset + 2 * kTick)
        << "round " << round << ": cluster time followed the leader's jumped clock";
    Result<Proposal> time_entry = cluster.core(N(1)).propose_time_entry(followers_clock + kHour);
    ASSERT_TRUE(time_entry.is_ok());
    ASSERT_LE(time_entry->ts_micros, followers_clock + kMaxOffset + 2 * kTick) << "round " << round;
    cluster.stabilize();
  }
  // Time kept moving with the quorum's clocks meanwhile (not frozen at the last ts + 1).
  const int64_t last_ts = cluster.core(N(1)).status().last_ts_micros;
  EXPECT_GE(last_ts, cluster.now_micros() + kMaxOffset - 2 * kTick);

  const RaftStatus status = cluster.core(N(1)).status();
  EXPECT_GE(status.clock_holds, 100u);
  EXPECT_NEAR(static_cast<double>(status.last_clock_hold_ahead_micros), static_cast<double>(kHour),
              static_cast<double>(kMaxOffset + 2 * kTick));
  EXPECT_GT(status.last_clock_hold_ts_micros, before.ts_micros);
  for (const auto& [peer, offset] : status.clock_offsets_micros) {
    EXPECT_NEAR(static_cast<double>(offset), static_cast<double>(-kHour), static_cast<double>(2 * kTick))
        << "the leader sees node " << peer << " an hour behind";
  }
  EXPECT_LE(cluster.core(N(1)).time_ceiling_micros(), cluster.now_micros() + kMaxOffset + kTick);
  EXPECT_EQ(cluster.core(N(2)).time_ceiling_micros(), std::numeric_limits<int64_t>::max()) << "not leader";
  for (NodeId id : cluster.ids()) EXPECT_EQ(cluster.node(id).applied_ts_micros, last_ts);
  expect_strictly_increasing(cluster);
}

TEST(ClockOffset, ElapsedTimeComesFromTicksNotTheLeadersClock) {
  // The followers stop answering: the leader's estimate of their clocks keeps advancing with its ticks only.
  TestCluster cluster(3, 92);
  ASSERT_NO_FATAL_FAILURE(start_with_reports(cluster));
  cluster.node(N(1)).clock_offset_micros = kHour;
  cluster.isolate(N(2));
  cluster.isolate(N(3));
  const int64_t isolated_at = cluster.now_micros();
  // Fewer ticks than an election timeout, so node 1 stays leader (check-quorum).
  for (int i = 0; i < 5; ++i) {
    cluster.node(N(1)).core->tick(cluster.now_micros() + (i + 1) * kTick + kHour);
    cluster.stabilize();
  }
  ASSERT_EQ(cluster.core(N(1)).role(), Role::kLeader);
  Result<Proposal> proposal = cluster.core(N(1)).propose("x", isolated_at + 5 * kTick + kHour);
  ASSERT_TRUE(proposal.is_ok());
  EXPECT_LE(proposal->ts_micros, isolated_at + 5 * kTick + kMaxOffset);
  EXPECT_GE(proposal->ts_micros, isolated_at + 5 * kTick + kMaxOffset - 2 * kTick);
}

TEST(ClockOffset, LeaderBehindStaysMonotonicAndHoldsNothing) {
  TestCluster cluster(3, 93);
  ASSERT_NO_FATAL_FAILURE(start_with_reports(cluster));
  const int64_t start_ts = cluster.propose(N(1), "a").ts_micros;
  cluster.node(N(1)).clock_offset_micros = -kHour;  // stepped back
  int64_t previous = start_ts;
  for (int i = 0; i < 20; ++i) {
    cluster.tick_all(1);
    const Proposal proposal = cluster.propose(N(1), "b");
    ASSERT_EQ(proposal.ts_micros, previous + 1) << "a slow clock advances time by the minimum";
    previous = proposal.ts_micros;
  }
  EXPECT_EQ(cluster.core(N(1)).status().clock_holds, 0u) << "the ceiling held nothing back";
  expect_strictly_increasing(cluster);
}

TEST(ClockOffset, NewLeaderWithAFastClockIsBoundedByItsVoters) {
  TestCluster cluster(3, 94);
  ASSERT_NO_FATAL_FAILURE(start_with_reports(cluster));
  const int64_t last = cluster.propose(N(1), "a").ts_micros;
  cluster.node(N(2)).clock_offset_micros = kHour;
  cluster.tick_all(2);
  cluster.isolate(N(1));
  cluster.elect(N(2));  // node 3's vote carries its clock
  const RaftStatus status = cluster.core(N(2)).status();
  ASSERT_EQ(status.role, Role::kLeader);
  EXPECT_LE(status.last_ts_micros, cluster.now_micros() + kMaxOffset + 2 * kTick)
      << "the new leader's first entry jumped with its clock";
  EXPECT_GT(status.last_ts_micros, last);
  const Proposal proposal = cluster.propose(N(2), "b");
  EXPECT_LE(proposal.ts_micros, cluster.now_micros() + kMaxOffset + 2 * kTick);
  EXPECT_GE(cluster.core(N(2)).status().clock_holds, 2u);
  cluster.heal();
  cluster.tick_all(5);
  expect_strictly_increasing(cluster);
}

TEST(ClockOffset, NewLeaderWithoutReportsAdvancesOnlyByItsTicks) {
  // Node 3 never ticks, so it has no clock to report; node 2 never led, so it has no reports either.
  TestCluster cluster(3, 95);
  cluster.elect(N(1));
  const int64_t last = cluster.propose(N(1), "a").ts_micros;
  cluster.isolate(N(1));
  cluster.node(N(2)).clock_offset_micros = kHour;
  cluster.elect(N(2));
  ASSERT_TRUE(cluster.core(N(2)).status().clock_offsets_micros.empty());
  const int64_t first = cluster.core(N(2)).status().last_ts_micros;
  EXPECT_GT(first, last);
  EXPECT_LE(first, last + 100) << "no quorum of reports: the new leader must not jump";
  for (int i = 1; i <= 10; ++i) {
    cluster.core(N(2)).tick(cluster.now_micros() + i * kTick + kHour);
    cluster.stabilize();
  }
  const Proposal proposal = cluster.propose(N(2), "b");
  EXPECT_LE(proposal.ts_micros, last + 10 * kTick + 100) << "at most the ticks since the election";
  EXPECT_GE(proposal.ts_micros, last + 9 * kTick);
  expect_strictly_increasing(cluster);
}

TEST(ClockOffset, ABootstrapLogTakesTheFirstLeadersClock) {
  TestCluster cluster(3, 96);
  cluster.node(N(1)).clock_offset_micros = 42;
  cluster.elect(N(1));  // nobody has reported a clock, and the log is only the bootstrap entries
  EXPECT_EQ(cluster.propose(N(1), "a").ts_micros, cluster.now_micros() + 42);
  EXPECT_EQ(cluster.core(N(1)).status().clock_holds, 0u);
}

TEST(ClockOffset, ASingleVoterIsBoundedByNothingButItself) {
  TestCluster cluster(1, 97);
  cluster.tick_all(1);
  cluster.elect(N(1));
  cluster.node(N(1)).clock_offset_micros = kHour;
  cluster.tick_all(1);
  EXPECT_EQ(cluster.propose(N(1), "a").ts_micros, cluster.now_micros() + kHour);
  EXPECT_EQ(cluster.core(N(1)).status().clock_holds, 0u);
}

TEST(ClockOffset, AFollowerClaimingAHugeClockCannotMoveTimeAlone) {
  TestCluster cluster(3, 98);
  ASSERT_NO_FATAL_FAILURE(start_with_reports(cluster));
  for (int64_t forged : {std::numeric_limits<int64_t>::max(), int64_t{-5}}) {  // -5: ignored, not a clock
    Message response{.type = MessageType::kHeartbeatResponse,
                     .from = N(2),
                     .to = N(1),
                     .term = cluster.core(N(1)).term(),
                     .clock_micros = forged};
    ASSERT_TRUE(cluster.core(N(1)).step(response).is_ok());
    cluster.core(N(1)).check_invariants();
    cluster.stabilize();
  }
  // A non-member's report is not even kept.
  ASSERT_TRUE(cluster.core(N(1))
                  .step(Message{.type = MessageType::kHeartbeatResponse,
                                .from = N(9),
                                .to = N(1),
                                .term = cluster.core(N(1)).term(),
                                .clock_micros = std::numeric_limits<int64_t>::max()})
                  .is_ok());
  cluster.stabilize();
  const RaftStatus status = cluster.core(N(1)).status();
  EXPECT_FALSE(status.clock_offsets_micros.contains(N(9)));
  EXPECT_EQ(status.clock_offsets_micros.at(N(2)), std::numeric_limits<int64_t>::max() - cluster.now_micros())
      << "saturated, not overflowed";
  // Node 2 claims the end of time: the ceiling (the second-highest of three clocks, plus the offset) is still
  // about our own clock, and the leader's correct clock is what gets stamped.
  EXPECT_LE(cluster.core(N(1)).time_ceiling_micros(), cluster.now_micros() + kMaxOffset + kTick);
  EXPECT_EQ(cluster.propose(N(1), "a").ts_micros, cluster.now_micros());

  // With the leader's clock also wrong, two of three clocks are wrong: a quorum then vouches for the jump — the
  // documented limit. Once node 2 reports its real clock again, the ceiling holds the leader back.
  cluster.node(N(1)).clock_offset_micros = kHour;
  cluster.tick_all(1);
  const Proposal held = cluster.propose(N(1), "b");
  EXPECT_LE(held.ts_micros, cluster.now_micros() + kMaxOffset + kTick);
  EXPECT_GE(cluster.core(N(1)).status().clock_holds, 1u);
}

}  // namespace
}  // namespace mayfly::replication::testing
