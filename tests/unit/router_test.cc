// The router's rules (node/router.h) on their own: where each kind of request goes from a leader's and a follower's
// view, the session and bounded waits, and the parked reads' bounds. The simulator runs the same router under faults.
#include "node/router.h"

#include <gtest/gtest.h>

namespace mayfly::node {
namespace {

NodeConfig config_of(uint64_t self) {
  NodeConfig config;
  config.id = NodeId(self);
  config.session_wait_ms = 1000;
  config.bounded_staleness_ms = 500;
  config.bounded_staleness_entries = 10;
  config.heartbeat_interval_ticks = 2;
  config.tick_interval_ms = 10;
  config.max_parked_reads = 8;
  config.max_pending_requests = 100;
  config.changefeed_retention_seconds = 777;
  return config;
}

NodeView view_of(uint64_t self, uint64_t leader, uint64_t commit, uint64_t applied, int64_t contact_ms) {
  NodeView view;
  view.self = NodeId(self);
  view.leader = NodeId(leader);
  view.role = self == leader ? replication::Role::kLeader : replication::Role::kFollower;
  view.term = 3;
  view.commit = commit;
  view.applied = applied;
  view.last_index = commit;
  view.leader_contact_steady_ms = contact_ms;
  view.voters = {NodeId(1), NodeId(2), NodeId(3)};
  return view;
}

api::Request read(Consistency consistency, uint64_t token = 0) {
  api::Request operation{.database = "db", .container = "c", .operation = api::ReadItem{"\"p\"", "a"}};
  operation.options.consistency = consistency;
  if (token != 0) operation.options.session_token = std::to_string(token);
  return operation;
}

api::Request write() {
  return api::Request{.database = "db", .container = "c", .operation = api::UpsertItem{R"({"id":"a","pk":"p"})"}};
}

storage::AppliedState applied_at(uint64_t index) { return storage::AppliedState{LogIndex(index), 0}; }

TEST(Router, AFollowerServesASessionReadOnceItHasAppliedTheToken) {
  Router router(config_of(2));
  router.set_view(view_of(2, 1, 100, 90, 1000));
  EXPECT_EQ(router.route(read(Consistency::kSession, 90), false, applied_at(90), 1000).kind, Route::Kind::kServe);
  const Route wait = router.route(read(Consistency::kSession, 95), false, applied_at(90), 1000);
  EXPECT_EQ(wait.kind, Route::Kind::kWait);
  EXPECT_EQ(wait.required, 95u);
  EXPECT_EQ(wait.wait_ms, 1000);
  // Beyond the commit index it knows: a few heartbeats (10 × 20 ms), not the whole session wait.
  const Route beyond = router.route(read(Consistency::kSession, 150), false, applied_at(90), 1000);
  EXPECT_EQ(beyond.kind, Route::Kind::kWait);
  EXPECT_EQ(beyond.wait_ms, 200);
  EXPECT_EQ(router.route(read(Consistency::kEventual), false, applied_at(0), 1000).kind, Route::Kind::kServe);
}

TEST(Router, ALeaderRefusesATokenPastTheEndOfItsLog) {
  Router router(config_of(1));
  router.set_view(view_of(1, 1, 100, 100, 1000));
  const Route route = router.route(read(Consistency::kSession, 101), false, applied_at(100), 1000);
  ASSERT_EQ(route.kind, Route::Kind::kRefuse);
  EXPECT_EQ(route.refusal.result.code, StatusCode::kUnavailable);
  EXPECT_EQ(route.refusal.result.substatus, static_cast<int>(kSubstatusReplicaBehind));
}

TEST(Router, BoundedReadsNeedRecentLeaderContact) {
  Router router(config_of(2));
  router.set_view(view_of(2, 1, 100, 95, 1000));
  EXPECT_EQ(router.route(read(Consistency::kBounded), false, applied_at(95), 1400).kind, Route::Kind::kServe);
  // Too far behind: waits for the commit index minus the slack.
  const Route wait = router.route(read(Consistency::kBounded), false, applied_at(80), 1400);
  EXPECT_EQ(wait.kind, Route::Kind::kWait);
  EXPECT_EQ(wait.required, 90u);
  // The leader not heard for longer than the bound: refused, never served as "bounded".
  const Route stale = router.route(read(Consistency::kBounded), false, applied_at(95), 1501);
  ASSERT_EQ(stale.kind, Route::Kind::kRefuse);
  EXPECT_EQ(stale.refusal.result.substatus, static_cast<int>(kSubstatusNoLeader));
}

TEST(Router, WritesGoToTheLeaderOnce) {
  Router follower(config_of(2));
  follower.set_view(view_of(2, 1, 100, 100, 1000));
  const Route forward = follower.route(write(), false, applied_at(100), 1000);
  EXPECT_EQ(forward.kind, Route::Kind::kForward);
  EXPECT_EQ(forward.leader, NodeId(1));
  // A forwarded request is never forwarded again: the driver answers (not the leader: its hint).
  EXPECT_EQ(follower.route(write(), true, applied_at(100), 1000).kind, Route::Kind::kDriver);
  Router leader(config_of(1));
  leader.set_view(view_of(1, 1, 100, 100, 1000));
  EXPECT_EQ(leader.route(write(), false, applied_at(100), 1000).kind, Route::Kind::kDriver);
  EXPECT_EQ(leader.route(read(Consistency::kStrong), false, applied_at(100), 1000).kind, Route::Kind::kStrongRead);
  // No leader known: the driver answers.
  Router alone(config_of(3));
  EXPECT_EQ(alone.route(write(), false, applied_at(0), 0).kind, Route::Kind::kDriver);
}

TEST(Router, TheTtlGuardRunsOnTheLeaderOnly) {
  api::ContainerSettings settings;
  settings.default_ttl = api::ContainerSettings::DefaultTtl::kSet;
  settings.default_ttl_json = "5";
  api::Request change{.database = "db", .container = "c", .operation = api::UpdateContainer{settings}};
  Router follower(config_of(2));
  follower.set_view(view_of(2, 1, 100, 100, 1000));
  EXPECT_EQ(follower.route(change, false, applied_at(100), 1000).kind, Route::Kind::kForward);
  EXPECT_EQ(follower.route(change, true, applied_at(100), 1000).kind, Route::Kind::kGuardTtl);
  Router leader(config_of(1));
  leader.set_view(view_of(1, 1, 100, 100, 1000));
  EXPECT_EQ(leader.route(change, false, applied_at(100), 1000).kind, Route::Kind::kGuardTtl);
  change.as<api::UpdateContainer>()->settings.force = true;
  EXPECT_EQ(leader.route(change, false, applied_at(100), 1000).kind, Route::Kind::kDriver);
  const api::Request status{.operation = api::ClusterStatus{}};
  EXPECT_EQ(follower.route(status, false, applied_at(100), 1000).kind, Route::Kind::kLocal);
}

TEST(Router, ParkedReadsAreReleasedInOrderAndBoundedPerKey) {
  Router router(config_of(2));
  router.set_view(view_of(2, 1, 100, 50, 1000));
  const uint64_t late = router.park(70, "a");
  const uint64_t early = router.park(60, "a");
  const uint64_t other = router.park(90, "");
  EXPECT_EQ(router.parked(), 3u);
  EXPECT_EQ(router.parked_of("a"), 2);
  // A key gets half of --max-parked-reads (8): two more for "a", then refused.
  EXPECT_FALSE(router.parked_full("a"));
  const uint64_t third = router.park(65, "a");
  const uint64_t fourth = router.park(66, "a");
  EXPECT_TRUE(router.parked_full("a"));
  EXPECT_FALSE(router.parked_full("b"));
  router.unpark(fourth);
  router.unpark(fourth);  // twice: no-op
  EXPECT_EQ(router.parked_of("a"), 3);
  const std::vector<uint64_t> released = router.set_view(view_of(2, 1, 100, 70, 1000));
  EXPECT_EQ(released, (std::vector<uint64_t>{early, third, late}));
  EXPECT_EQ(router.parked_of("a"), 0);
  EXPECT_EQ(router.parked(), 1u);
  router.unpark(other);
  EXPECT_EQ(router.parked(), 0u);
  // The node's own bound, whatever the key.
  for (int i = 0; i < 8; ++i) router.park(200, "k" + std::to_string(i));
  EXPECT_TRUE(router.parked_full(""));
}

TEST(Router, ReadsAreShedBeforeWrites) {
  Router router(config_of(1));
  EXPECT_FALSE(router.over_request_limit(74, 0, false));
  EXPECT_TRUE(router.over_request_limit(75, 0, false));
  EXPECT_FALSE(router.over_request_limit(75, 0, true));
  EXPECT_TRUE(router.over_request_limit(100, 0, true));
  EXPECT_TRUE(router.over_request_limit(0, 75, false));
}

TEST(Router, ForwardsAreTakenFromMembersAndTheLeaderOnly) {
  Router router(config_of(2));
  EXPECT_TRUE(router.may_forward(NodeId(9)));  // no membership known yet (a --join node)
  router.set_view(view_of(2, 1, 100, 100, 1000));
  EXPECT_TRUE(router.may_forward(NodeId(3)));
  EXPECT_FALSE(router.may_forward(NodeId(9)));
}

}  // namespace
}  // namespace mayfly::node

namespace mayfly::node {
namespace {

// The request metrics name a write by the command it becomes, without building it (node/request.h op_name).
TEST(Request, AWritesMetricNameIsItsCommandsName) {
  for (size_t i = 0; i < api::kKindCount; ++i) {
    const api::Kind kind = static_cast<api::Kind>(i);
    if (!api::is_write(kind)) continue;
    const api::Request request{.database = "db", .container = "c", .operation = api::make_operation(kind)};
    EXPECT_EQ(op_name(request), storage::command_type_name(to_command(request, 0).type)) << api::kind_name(kind);
  }
}

}  // namespace
}  // namespace mayfly::node
