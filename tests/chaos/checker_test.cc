// The fault campaign's checkers (checker.h) against hand-made histories: each anomaly class must be reported, and
// the legitimate histories around it (concurrency, unknown outcomes, expiry) must pass.
#include "tests/chaos/checker.h"

#include <gtest/gtest.h>

namespace mayfly::chaos {
namespace {

class HistoryBuilder {
 public:
  // A write; `ts` is the _ts the server answered with (0: none).
  HistoryBuilder& write(OpKind kind, int64_t v, int64_t at, int64_t until, int status, int64_t ts,
                        int64_t ttl = kTtlAbsent, int client = 0, Outcome outcome = Outcome::kOk,
                        const std::string& key = "k") {
    Op op = base(client, key, at, until);
    op.kind = kind;
    op.write_v = v;
    op.write_ttl = ttl;
    op.status = status;
    op.ts = ts;
    op.outcome = outcome;
    return add(op);
  }
  HistoryBuilder& unknown(OpKind kind, int64_t v, int64_t at, int64_t ttl = kTtlAbsent, const std::string& key = "k") {
    return write(kind, v, at, at + 1, 503, 0, ttl, 0, Outcome::kUnknown, key);
  }
  HistoryBuilder& del(int64_t at, int64_t until, int status, int client = 0) {
    Op op = base(client, "k", at, until);
    op.kind = OpKind::kDelete;
    op.status = status;
    return add(op);
  }
  // A read that found version v (n, ts, ttl), or (v == 0) got 404.
  HistoryBuilder& read(int64_t v, int64_t at, int64_t until, int64_t ts = 0, int64_t ttl = kTtlAbsent, int64_t n = 0,
                       ReadLevel level = ReadLevel::kStrong, int client = 0, const std::string& key = "k") {
    Op op = base(client, key, at, until);
    op.kind = OpKind::kRead;
    op.level = level;
    op.status = v != 0 ? 200 : 404;
    op.found = v != 0;
    op.read_v = v;
    op.read_n = n;
    op.read_ts = ts;
    op.read_ttl = ttl;
    return add(op);
  }
  HistoryBuilder& policy(int64_t default_ttl, int64_t at, int64_t until, int64_t ts) {
    Op op = base(0, "", at, until);
    op.kind = OpKind::kSetDefaultTtl;
    op.default_ttl = default_ttl;
    op.status = 200;
    op.ts = ts;
    return add(op);
  }
  const std::vector<Op>& ops() const { return ops_; }

 private:
  Op base(int client, const std::string& key, int64_t at, int64_t until) {
    Op op;
    op.client = client;
    op.key = key;
    op.invoke_us = at * 1000;
    op.complete_us = until * 1000;
    op.invoke_wall_us = 0;
    op.outcome = Outcome::kOk;
    return op;
  }
  HistoryBuilder& add(Op op) {
    op.index = ops_.size();
    ops_.push_back(op);
    return *this;
  }
  std::vector<Op> ops_;
};

CheckReport check(const HistoryBuilder& history, int64_t policy = -1, std::set<std::string> counters = {}) {
  CheckOptions options;
  options.initial_policy = policy;
  options.counter_keys = std::move(counters);
  return check_history(history.ops(), options);
}

bool has(const CheckReport& report, const std::string& checker) {
  for (const Anomaly& a : report.anomalies) {
    if (a.checker == checker) return true;
  }
  return false;
}

TEST(ChaosChecker, ReadOfTheLastWritePasses) {
  HistoryBuilder h;
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1).write(OpKind::kUpsert, 2, 20, 30, 200, 100, -1).read(2, 40, 50, 100, -1);
  EXPECT_TRUE(check(h).ok());
}

TEST(ChaosChecker, ConcurrentWritesMayLandInEitherOrder) {
  HistoryBuilder h;
  h.write(OpKind::kUpsert, 1, 0, 50, 201, 100, -1, 0).write(OpKind::kUpsert, 2, 10, 40, 200, 100, -1, 1);
  h.read(1, 60, 70, 100, -1);  // 2 then 1: upsert 2 created it (201 expected)... see next test
  EXPECT_FALSE(check(h).ok()) << "upsert 2 answered 200 (replaced), so 1 came first and the read must see 2";
  HistoryBuilder g;
  g.write(OpKind::kUpsert, 1, 0, 50, 200, 100, -1, 0).write(OpKind::kUpsert, 2, 10, 40, 201, 100, -1, 1);
  g.read(1, 60, 70, 100, -1);
  EXPECT_TRUE(check(g).ok());
}

TEST(ChaosChecker, StaleStrongReadFails) {
  HistoryBuilder h;
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1).write(OpKind::kUpsert, 2, 20, 30, 200, 100, -1).read(1, 40, 50, 100, -1);
  EXPECT_TRUE(has(check(h), "linearizable"));
}

TEST(ChaosChecker, LostAcknowledgedWriteFails) {
  HistoryBuilder h;
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1).read(0, 20, 30);
  EXPECT_TRUE(has(check(h), "linearizable"));
}

TEST(ChaosChecker, ExpiryIsAWriteOfAbsentAtTheExpiryInstant) {
  HistoryBuilder h;  // ttl 2 at second 100: gone from second 102 on
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, 2).read(1, 20, 30, 100, 2).read(0, 40, 50);
  h.write(OpKind::kCreate, 2, 60, 70, 201, 102, -1);
  EXPECT_TRUE(check(h).ok());
}

TEST(ChaosChecker, ResurrectionAfterExpiryFails) {
  HistoryBuilder h;
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, 2).read(0, 20, 30).read(1, 40, 50, 100, 2);
  EXPECT_TRUE(has(check(h), "linearizable"));
}

TEST(ChaosChecker, AnItemAliveAtAKnownLaterSecondFails) {
  HistoryBuilder h;  // expires at 102; a write acknowledged at second 103 completed before the read began
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, 2).write(OpKind::kCreate, 9, 20, 30, 201, 103, -1, 1, Outcome::kOk, "x");
  h.read(1, 40, 50, 100, 2);
  EXPECT_FALSE(has(check(h), "linearizable")) << "another key's write does not move this key's time (per-key search)";
  EXPECT_TRUE(has(check(h), "recency")) << "replicated time is one for all keys: the recency check sees it";
  HistoryBuilder g;
  g.write(OpKind::kCreate, 1, 0, 10, 201, 100, 2).write(OpKind::kCreate, 2, 20, 30, 409, 0, -1);
  g.write(OpKind::kUpsert, 3, 40, 50, 201, 103, -1).read(1, 60, 70, 100, 2);
  EXPECT_TRUE(has(check(g), "linearizable"));
}

TEST(ChaosChecker, ExpiringBeforeTheInstantFails) {
  HistoryBuilder h;  // ttl 5 at 100: alive at 102, so an upsert at 102 must replace (200), not create (201)
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, 5).write(OpKind::kUpsert, 2, 20, 30, 201, 102, -1);
  EXPECT_TRUE(has(check(h), "linearizable"));
}

TEST(ChaosChecker, UnknownWritesMayTakeEffectLaterOrNever) {
  HistoryBuilder h;
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1).unknown(OpKind::kUpsert, 2, 20, -1).read(1, 30, 40, 100, -1);
  h.read(2, 50, 60, 101, -1);
  EXPECT_TRUE(check(h).ok());
  h.read(1, 70, 80, 100, -1);  // and back: impossible
  EXPECT_TRUE(has(check(h), "linearizable"));
}

TEST(ChaosChecker, AReadOfARefusedWriteFails) {
  HistoryBuilder h;
  h.write(OpKind::kUpsert, 1, 0, 10, 503, 0, -1, 0, Outcome::kFail).read(1, 20, 30, 100, -1);
  EXPECT_TRUE(has(check(h), "versions"));
}

TEST(ChaosChecker, IncrementsCountExactlyOnce) {
  HistoryBuilder h;
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1, 0, Outcome::kOk, "c");
  h.write(OpKind::kIncr, 2, 20, 30, 200, 100, kTtlAbsent, 0, Outcome::kOk, "c");
  h.unknown(OpKind::kIncr, 3, 40, kTtlAbsent, "c");
  h.read(3, 60, 70, 101, -1, 2, ReadLevel::kStrong, -1, "c");
  EXPECT_TRUE(check(h, -1, {"c"}).ok());
  HistoryBuilder twice;  // one increment, counted twice
  twice.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1, 0, Outcome::kOk, "c");
  twice.write(OpKind::kIncr, 2, 20, 30, 200, 100, kTtlAbsent, 0, Outcome::kOk, "c");
  twice.read(2, 60, 70, 100, -1, 2, ReadLevel::kStrong, -1, "c");
  const CheckReport report = check(twice, -1, {"c"});
  EXPECT_TRUE(has(report, "counters"));
  EXPECT_TRUE(has(report, "linearizable"));
}

TEST(ChaosChecker, ShorteningTheDefaultTtlExpiresOldItemsAtTheChange) {
  HistoryBuilder h;  // inherits 60 s; the default becomes 3 s at second 110: the item (from 100) is gone
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100).policy(3, 20, 30, 110).read(1, 40, 50, 100);
  EXPECT_TRUE(has(check(h, 60), "linearizable"));
  HistoryBuilder g;
  g.write(OpKind::kCreate, 1, 0, 10, 201, 100).policy(30, 20, 30, 110).read(1, 40, 50, 100);
  EXPECT_TRUE(check(g, 60).ok());
}

TEST(ChaosChecker, SessionReadGoingBackFails) {
  HistoryBuilder h;  // client 1 wrote v2 (second 101); its session read returns v1 (second 100)
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1, 0).write(OpKind::kUpsert, 2, 20, 30, 200, 101, -1, 1);
  h.read(1, 40, 50, 100, -1, 0, ReadLevel::kSession, 1);
  EXPECT_TRUE(has(check(h), "session"));
  HistoryBuilder other;  // another client may read the older version at session level
  other.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1, 0).write(OpKind::kUpsert, 2, 20, 30, 200, 101, -1, 1);
  other.read(1, 40, 50, 100, -1, 0, ReadLevel::kSession, 2);
  EXPECT_TRUE(check(other).ok());
}

TEST(ChaosChecker, SessionAbsentAfterANeverExpiringVersionNeedsAChangeThatMayFollowIt) {
  HistoryBuilder h;  // client 1 saw v1 (ttl -1, it never expires), then the key absent, and nothing removed it
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1, 0);
  h.read(1, 20, 30, 100, -1, 0, ReadLevel::kSession, 1).read(0, 40, 50, 0, kTtlAbsent, 0, ReadLevel::kSession, 1);
  EXPECT_TRUE(has(check(h), "session"));
  HistoryBuilder before;  // a delete that completed before v1 was even written cannot explain it
  before.del(0, 5, 204, 2).write(OpKind::kCreate, 1, 10, 15, 201, 100, -1, 0);
  before.read(1, 20, 30, 100, -1, 0, ReadLevel::kSession, 1).read(0, 40, 50, 0, kTtlAbsent, 0, ReadLevel::kSession, 1);
  EXPECT_TRUE(has(check(before), "session"));
  // Seed 2003: client 2's delete began after v1's write and completed before client 1's session read, which a stale
  // node answered with v1; client 1's next read found the key absent — the delete, moving forward.
  HistoryBuilder stale;
  stale.write(OpKind::kUpsert, 1, 0, 10, 201, 100, -1, 0).del(12, 25, 204, 2);
  stale.read(1, 30, 35, 100, -1, 0, ReadLevel::kSession, 1).read(0, 40, 50, 0, kTtlAbsent, 0, ReadLevel::kSession, 1);
  EXPECT_TRUE(check(stale).ok());
}

TEST(ChaosChecker, SessionSeeingAnExpiredItemAgainFails) {
  HistoryBuilder h;  // client 1 saw v1, then saw it gone (expired), then saw v1 again
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, 2, 0);
  h.read(1, 20, 30, 100, 2, 0, ReadLevel::kSession, 1).read(0, 40, 50, 0, kTtlAbsent, 0, ReadLevel::kSession, 1);
  h.read(1, 60, 70, 100, 2, 0, ReadLevel::kSession, 1);
  EXPECT_TRUE(has(check(h), "session"));
  HistoryBuilder eventual;  // eventual reads promise no order
  eventual.write(OpKind::kCreate, 1, 0, 10, 201, 100, 2, 0);
  eventual.read(1, 20, 30, 100, 2, 0, ReadLevel::kEventual, 1).read(0, 40, 50, 0, kTtlAbsent, 0, ReadLevel::kEventual, 1);
  eventual.read(1, 60, 70, 100, 2, 0, ReadLevel::kEventual, 1);
  EXPECT_TRUE(check(eventual).ok());
}

TEST(ChaosChecker, ManyUnknownIncrementsStayTractable) {
  HistoryBuilder h;
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, -1, 0, Outcome::kOk, "c");
  for (int i = 0; i < 40; ++i) h.unknown(OpKind::kIncr, 100 + i, 20 + i, kTtlAbsent, "c");
  h.read(139, 100, 110, 101, -1, 17, ReadLevel::kStrong, -1, "c");
  CheckOptions options;
  options.initial_policy = -1;
  options.counter_keys = {"c"};
  options.max_search_steps = 100000;
  EXPECT_TRUE(check_history(h.ops(), options).ok());
  h.read(139, 120, 130, 101, -1, 18, ReadLevel::kStrong, -1, "c");  // the same version with another count
  EXPECT_TRUE(has(check_history(h.ops(), options), "linearizable"));
}

TEST(ChaosChecker, AStrongReadOfAnItemLongExpiredByTheWallClockFails) {
  HistoryBuilder h;  // expires at second 102; read at wall second 110 (slack 2 s)
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, 2).read(1, 20, 30, 100, 2);
  std::vector<Op> ops = h.ops();
  ops[1].invoke_wall_us = 110'000'000;
  CheckOptions options;
  options.initial_policy = -1;
  EXPECT_TRUE(has(check_history(ops, options), "recency"));
  ops[1].invoke_wall_us = 103'500'000;  // within the slack: replicated time may trail the wall clock a little
  EXPECT_TRUE(check_history(ops, options).ok());
}

TEST(ChaosChecker, AStrongReadOfAnItemExpiredByReplicatedTimeOnAnotherKeyFails) {
  // k0 expires at second 102; a write on k1 acknowledged at _ts 102 completed before the read of k0 began, so the
  // read's replicated second is >= 102 and k0 was gone. Per key nothing shows it (k0's own history is a write and a
  // read), nor does the wall clock (second 103: within the 2 s slack). A reads-ignore-expiry build did this.
  HistoryBuilder h;
  h.write(OpKind::kCreate, 1, 0, 10, 201, 100, 2, 0, Outcome::kOk, "k0");
  h.write(OpKind::kUpsert, 2, 20, 30, 201, 102, kTtlAbsent, 1, Outcome::kOk, "k1");
  h.read(1, 40, 50, 100, 2, 0, ReadLevel::kStrong, 2, "k0");
  std::vector<Op> ops = h.ops();
  ops[2].invoke_wall_us = 103'000'000;
  CheckOptions options;
  options.initial_policy = -1;
  EXPECT_TRUE(has(check_history(ops, options), "recency"));
  ops[1].ts = 101;  // replicated time only known to have reached 101: k0 may still be alive
  EXPECT_TRUE(check_history(ops, options).ok());
  ops[1].ts = 102;
  ops[1].complete_us = 45'000;  // the write completed after the read began: no order, no anomaly
  EXPECT_TRUE(check_history(ops, options).ok());
  // A strong read of a version with _ts 102, on any key, is a witness too: here the write's outcome is unknown and a
  // strong read of k1, done before the read of k0 began, saw its version.
  ops[1].complete_us = 30'000;
  ops[1].outcome = Outcome::kUnknown;
  EXPECT_TRUE(check_history(ops, options).ok());
  Op witness = ops[1];
  witness.kind = OpKind::kRead;
  witness.level = ReadLevel::kStrong;
  witness.outcome = Outcome::kOk;
  witness.status = 200;
  witness.found = true;
  witness.read_v = 2;
  witness.read_ts = 102;
  witness.invoke_us = 31'000;
  witness.complete_us = 35'000;
  witness.index = ops.size();
  ops.push_back(witness);
  EXPECT_TRUE(has(check_history(ops, options), "recency"));
}

TEST(ChaosChecker, SearchOverItsBoundIsInconclusiveNotAPass) {
  HistoryBuilder h;
  for (int i = 0; i < 12; ++i) h.unknown(OpKind::kUpsert, 10 + i, i, -1);
  h.read(0, 100, 110);
  CheckOptions options;
  options.initial_policy = -1;
  options.max_search_steps = 5;
  const CheckReport report = check_history(h.ops(), options);
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(report.anomalies[0].inconclusive);
}

}  // namespace
}  // namespace mayfly::chaos
