// Exactly-once writes in the state machine (storage/write_dedup.h): a write re-sent with the same id is answered with
// its first outcome and changes nothing, across restarts and snapshot installs; acknowledged outcomes go; idle
// clients expire by replicated time; the table is bounded; the command codec carries the id.
#include "storage/write_dedup.h"

#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

Command with_id(Command command, uint64_t client, uint64_t sequence, uint64_t first_unacknowledged,
                bool retry = false) {
  command.write_id = WriteId{client, sequence, first_unacknowledged, retry};
  return command;
}

Command incr(uint64_t client, uint64_t sequence, uint64_t first_unacknowledged, bool retry = false) {
  return with_id(target_command(CommandType::kPatchItem, "db", "c", "\"p\"", "n",
                                R"([{"op":"incr","path":"/n","value":1}])"),
                 client, sequence, first_unacknowledged, retry);
}

class WriteDedupTest : public StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    make_container(std::nullopt);
    ASSERT_EQ(apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"n","pk":"p","n":0})"), kT0).http_status(),
              201);
  }
  int64_t counter(int64_t now = kT0 + 1000 * kSecond) {
    OpResult read_back = read("\"p\"", "n", now);
    EXPECT_EQ(read_back.http_status(), 200) << read_back.message;
    const size_t at = read_back.body.find("\"n\":");
    return at == std::string::npos ? -1 : std::stoll(read_back.body.substr(at + 4));
  }
  DedupTotals totals() {
    Result<DedupTotals> read_back = store_->reader().dedup_totals();
    EXPECT_TRUE(read_back.is_ok()) << read_back.status().to_string();
    return read_back.is_ok() ? *read_back : DedupTotals{};
  }
};

TEST_F(WriteDedupTest, ARetriedIncrAppliesOnceAndGetsTheFirstOutcome) {
  OpResult first = apply(incr(7, 1, 1), kT0 + kSecond);
  ASSERT_EQ(first.http_status(), 200) << first.message;
  EXPECT_FALSE(first.duplicate);
  OpResult again = apply(incr(7, 1, 1, /*retry=*/true), kT0 + 2 * kSecond);
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.http_status(), first.http_status());
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.etag, first.etag);
  EXPECT_EQ(again.ts_micros, first.ts_micros);
  EXPECT_EQ(counter(), 1);
  // Another write of the same client is a new one.
  EXPECT_EQ(apply(incr(7, 2, 1), kT0 + 3 * kSecond).http_status(), 200);
  EXPECT_EQ(counter(), 2);
  // The same sequence number from another client is another write too.
  EXPECT_EQ(apply(incr(8, 1, 1), kT0 + 3 * kSecond).http_status(), 200);
  EXPECT_EQ(counter(), 3);
}

TEST_F(WriteDedupTest, FailedOutcomesAreFinalToo) {
  // A create that succeeded comes back as its 201, not as a 409; a 412 stays a 412 even once the etag would match.
  Command create = with_id(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"x","pk":"p"})"), 9, 1, 1);
  OpResult created = apply(create, kT0 + kSecond);
  ASSERT_EQ(created.http_status(), 201);
  create.write_id->retry = true;
  OpResult retried = apply(create, kT0 + 2 * kSecond);
  EXPECT_EQ(retried.http_status(), 201);
  EXPECT_EQ(retried.body, created.body);
  Command replace = with_id(item_command(CommandType::kReplaceItem, "db", "c", R"({"id":"x","pk":"p","v":2})",
                                         std::string("\"nope\"")),
                            9, 2, 2);
  EXPECT_EQ(apply(replace, kT0 + 3 * kSecond).http_status(), 412);
  replace.if_match = created.etag;  // a re-send is answered from the table, never re-evaluated
  replace.write_id->retry = true;
  EXPECT_EQ(apply(replace, kT0 + 4 * kSecond).http_status(), 412);
  EXPECT_EQ(read("\"p\"", "x", kT0 + 5 * kSecond).etag, created.etag);
}

TEST_F(WriteDedupTest, AcknowledgedOutcomesAreDroppedAndLateCopiesRefused) {
  ASSERT_EQ(apply(incr(5, 1, 1), kT0 + kSecond).http_status(), 200);
  ASSERT_EQ(apply(incr(5, 2, 1), kT0 + kSecond).http_status(), 200);
  const int64_t two_kept = totals().result_bytes;
  EXPECT_GT(two_kept, 0);
  EXPECT_EQ(totals().clients, 1u);
  // Write 3 says 1 and 2 were answered: their outcomes go.
  ASSERT_EQ(apply(incr(5, 3, 3), kT0 + 2 * kSecond).http_status(), 200);
  EXPECT_LT(totals().result_bytes, two_kept);
  auto dump = store_->dump(false);
  ASSERT_TRUE(dump.is_ok());
  int outcomes = 0;
  for (const auto& [key, value] : *dump) outcomes += static_cast<uint8_t>(key[0]) == 0x0B ? 1 : 0;
  EXPECT_EQ(outcomes, 1);
  // A delayed copy of write 1 changes nothing.
  OpResult late = apply(incr(5, 1, 1, true), kT0 + 3 * kSecond);
  EXPECT_EQ(late.http_status(), 400) << late.message;
  EXPECT_EQ(counter(), 3);
}

TEST_F(WriteDedupTest, SurvivesRestartAndSnapshotInstall) {
  OpResult first = apply(incr(11, 1, 1), kT0 + kSecond);
  ASSERT_EQ(first.http_status(), 200);
  reopen();
  OpResult after_restart = apply(incr(11, 1, 1, true), kT0 + 2 * kSecond);
  EXPECT_TRUE(after_restart.duplicate);
  EXPECT_EQ(after_restart.body, first.body);
  EXPECT_EQ(counter(), 1);

  Result<std::string> snapshot = store_->export_snapshot();
  ASSERT_TRUE(snapshot.is_ok());
  TempDir other_dir;
  StoreOptions options;
  options.path = other_dir.path() + "/db";
  Result<std::unique_ptr<StateMachine>> other = StateMachine::open(options);
  ASSERT_TRUE(other.is_ok());
  ASSERT_TRUE((*other)->install_snapshot(*snapshot).is_ok());
  Result<OpResult> on_other =
      (*other)->apply(incr(11, 1, 1, true), LogIndex(store_->applied().index.value() + 1), kT0 + 3 * kSecond);
  ASSERT_TRUE(on_other.is_ok());
  EXPECT_TRUE(on_other->duplicate);
  EXPECT_EQ(on_other->body, first.body);
  EXPECT_EQ((*other)->reader().read_item("db", "c", "\"p\"", "n", kT0 + 4 * kSecond).body,
            read("\"p\"", "n", kT0 + 4 * kSecond).body);
}

TEST_F(WriteDedupTest, IdleClientsExpireByReplicatedTime) {
  ASSERT_EQ(apply(incr(21, 1, 1), kT0 + kSecond).http_status(), 200);
  ASSERT_EQ(apply(incr(22, 1, 1), kT0 + kSecond).http_status(), 200);
  EXPECT_EQ(totals().clients, 2u);
  // Client 22 stays active; 21 goes idle.
  ASSERT_EQ(apply(incr(22, 2, 2), kT0 + kDedupWindowMicros / 2).http_status(), 200);
  // Idle for the window, but within the minute after: not yet (activity is indexed by the minute).
  for (uint64_t i = 0; i < kDedupExpiryEvery; ++i) apply(Command{}, kT0 + kSecond + kDedupWindowMicros + kSecond);
  EXPECT_EQ(totals().clients, 2u);
  // Time entries past 21's window and its minute: expiry runs on every kDedupExpiryEvery-th entry.
  const int64_t later = kT0 + kDedupWindowMicros + 2 * kDedupActivityBucketMicros;
  for (uint64_t i = 0; i < kDedupExpiryEvery; ++i) apply(Command{}, later);
  EXPECT_EQ(totals().clients, 1u);
  // Forgotten: a write from 21 with the same number is new again (the library never re-sends that late).
  EXPECT_EQ(apply(incr(21, 1, 1), later + kSecond).http_status(), 200);
  EXPECT_EQ(counter(), 4);
  EXPECT_EQ(totals().clients, 2u);
  // Idle for a window of replicated time, however few entries passed meanwhile.
  for (uint64_t i = 0; i < kDedupExpiryEvery; ++i) apply(Command{}, kT0 + 3 * kDedupWindowMicros);
  EXPECT_EQ(totals().clients, 0u);
  EXPECT_EQ(totals().result_bytes, 0);
}

TEST_F(WriteDedupTest, AClientsUnacknowledgedOutcomesAreBounded) {
  for (uint64_t sequence = 1; sequence <= kDedupMaxUnacknowledged; ++sequence) {
    ASSERT_EQ(apply(incr(31, sequence, 1), kT0 + kSecond).http_status(), 200) << sequence;
  }
  OpResult refused = apply(incr(31, kDedupMaxUnacknowledged + 1, 1), kT0 + kSecond);
  EXPECT_EQ(refused.http_status(), 429) << refused.message;
  EXPECT_EQ(refused.substatus, kDedupSubstatusTableFull);
  EXPECT_EQ(counter(), static_cast<int64_t>(kDedupMaxUnacknowledged));
  // Once the client acknowledges its earlier writes, the same write goes through (it was never applied).
  OpResult later = apply(incr(31, kDedupMaxUnacknowledged + 1, kDedupMaxUnacknowledged + 1, true), kT0 + 2 * kSecond);
  EXPECT_EQ(later.http_status(), 200) << later.message;
  EXPECT_FALSE(later.duplicate);
  EXPECT_EQ(counter(), static_cast<int64_t>(kDedupMaxUnacknowledged) + 1);
}

TEST_F(WriteDedupTest, ReplicasAgreeByteForByte) {
  // The same log on two stores: identical replicated state, table included (it is in snapshots and dumps).
  TempDir other_dir;
  StoreOptions options;
  options.path = other_dir.path() + "/db";
  Result<std::unique_ptr<StateMachine>> other = StateMachine::open(options);
  ASSERT_TRUE(other.is_ok());
  // Replay what SetUp applied, then a mix of writes, duplicates and refusals.
  std::vector<std::pair<Command, int64_t>> log = {
      {database_command(CommandType::kCreateDatabase, "db"), kT0},
      {create_container_command("db", "c", "/pk"), kT0},
      {item_command(CommandType::kCreateItem, "db", "c", R"({"id":"n","pk":"p","n":0})"), kT0}};
  for (uint64_t i = 1; i <= 40; ++i) {
    log.emplace_back(incr(100 + i % 3, i, i > 4 ? i - 4 : 1, i % 5 == 0), kT0 + static_cast<int64_t>(i) * kSecond);
    if (i % 7 == 0) log.emplace_back(incr(100 + i % 3, i, i > 4 ? i - 4 : 1, true), kT0 + (i + 1) * kSecond);
  }
  for (size_t i = 3; i < log.size(); ++i) apply(log[i].first, log[i].second);
  for (size_t i = 0; i < log.size(); ++i) {
    ASSERT_TRUE((*other)->apply(log[i].first, LogIndex(i + 1), log[i].second).is_ok());
  }
  EXPECT_EQ(*(*other)->dump(false), *store_->dump(false));
}

TEST(WriteIdCodecTest, RoundTripsAndRejectsMalformedIds) {
  Command command = incr(0xfedcba9876543210ULL, 1'000'000, 999'990, true);
  Result<Command> decoded = decode_command(encode_command(command));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  ASSERT_TRUE(decoded->write_id.has_value());
  EXPECT_EQ(*decoded->write_id, *command.write_id);
  // Without an id the bytes are version 1's, as before exactly-once.
  Command plain = command;
  plain.write_id.reset();
  EXPECT_EQ(encode_command(plain)[0], 1);
  EXPECT_FALSE(decode_command(encode_command(plain))->write_id.has_value());
  for (const WriteId& bad : {WriteId{0, 1, 1, false}, WriteId{1, 0, 0, false}, WriteId{1, 2, 3, false},
                             WriteId{1, 2, 0, false}}) {
    Command malformed = command;
    malformed.write_id = bad;
    EXPECT_FALSE(decode_command(encode_command(malformed)).is_ok());
    EXPECT_FALSE(validate_write_id(bad).is_ok());
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
