// Exactly-once writes in the state machine (storage/write_dedup.h): a write re-sent with the same id is answered with
// its first outcome and changes nothing, across restarts and snapshot installs; acknowledged outcomes go; idle
// clients expire by replicated time; the table is bounded; the command codec carries the id.
#include "storage/write_dedup.h"

#include <map>

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

// The same write made with the key named `key`.
Command by(const std::string& key, Command command) {
  command.write_id->owner = dedup_owner_of(key);
  return command;
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
  DedupTotals share(const std::string& key) {
    Result<DedupTotals> read_back = store_->reader().dedup_key_totals(dedup_owner_of(key));
    EXPECT_TRUE(read_back.is_ok()) << read_back.status().to_string();
    return read_back.is_ok() ? *read_back : DedupTotals{};
  }
  // The client records stored (0A), as key -> value.
  std::map<std::string, std::string> client_records() {
    std::map<std::string, std::string> out;
    auto dump = store_->dump(false);
    EXPECT_TRUE(dump.is_ok());
    if (!dump.is_ok()) return out;
    for (const auto& [key, value] : *dump) {
      if (static_cast<uint8_t>(key[0]) == 0x0A) out.emplace(key, value);
    }
    return out;
  }
};

// An item whose stored outcome is about 1.9 MB.
Command big_create(const std::string& id, uint64_t client, uint64_t sequence) {
  return with_id(item_command(CommandType::kCreateItem, "db", "c",
                              R"({"id":")" + id + R"(","pk":"p","s":")" + std::string(1'900'000, 'x') + "\"}"),
                 client, sequence, 1);
}

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
  // Two keys' clients with the same ids (records, outcomes and the keys' shares replicated alike).
  for (uint64_t i = 1; i <= 20; ++i) {
    log.emplace_back(by(i % 2 == 0 ? "A" : "B", incr(100 + i % 3, i, i > 4 ? i - 4 : 1, i % 5 == 0)),
                     kT0 + 50 * kSecond);
  }
  for (size_t i = 3; i < log.size(); ++i) apply(log[i].first, log[i].second);
  for (size_t i = 0; i < log.size(); ++i) {
    ASSERT_TRUE((*other)->apply(log[i].first, LogIndex(i + 1), log[i].second).is_ok());
  }
  EXPECT_EQ(*(*other)->dump(false), *store_->dump(false));
}

TEST_F(WriteDedupTest, KeysThatShareAClientIdAreKeptApart) {
  // Key B's write 1 of client 7 applies; key A, which learned client 7, re-sends "write 1 of client 7": it is A's own
  // write (applied, not B's outcome), and acknowledging B's writes as A drops nothing of B's.
  OpResult victim = apply(by("B", incr(7, 1, 1)), kT0 + kSecond);
  ASSERT_EQ(victim.http_status(), 200) << victim.message;
  OpResult attacker = apply(by("A", incr(7, 1, 1, true)), kT0 + 2 * kSecond);
  EXPECT_EQ(attacker.http_status(), 200) << attacker.message;
  EXPECT_FALSE(attacker.duplicate);
  EXPECT_EQ(counter(), 2);
  ASSERT_EQ(apply(by("A", incr(7, 5, 5)), kT0 + 3 * kSecond).http_status(), 200);
  OpResult resent = apply(by("B", incr(7, 1, 1, true)), kT0 + 4 * kSecond);
  EXPECT_TRUE(resent.duplicate);
  EXPECT_EQ(resent.body, victim.body);
  EXPECT_EQ(counter(), 3);
  // A goes first with the victim's next ids: the victim's write still applies (not answered with A's outcome).
  ASSERT_EQ(apply(by("A", incr(7, 6, 5)), kT0 + 5 * kSecond).http_status(), 200);
  OpResult second = apply(by("B", incr(7, 6, 2)), kT0 + 6 * kSecond);
  EXPECT_EQ(second.http_status(), 200) << second.message;
  EXPECT_FALSE(second.duplicate);
  EXPECT_EQ(counter(), 5);
  // An anonymous client 7 (an open node's) is a third one.
  OpResult anonymous = apply(incr(7, 6, 6), kT0 + 7 * kSecond);
  EXPECT_FALSE(anonymous.duplicate);
  EXPECT_EQ(counter(), 6);
  EXPECT_EQ(totals().clients, 3u);
  EXPECT_EQ(share("A").clients, 1u);
  EXPECT_EQ(share("B").clients, 1u);
  EXPECT_NE(dedup_owner_of("A"), dedup_owner_of("B"));
  EXPECT_NE(dedup_table_client(dedup_owner_of("A"), 7), dedup_table_client(dedup_owner_of("B"), 7));
  EXPECT_EQ(dedup_table_client(0, 7), 7u);
}

TEST_F(WriteDedupTest, AKeyFillingItsShareIsRefusedWhileOtherKeysWrite) {
  // Key A's clients keep ~1.9 MB outcomes, four per client (under the 16 MiB client bound), until its share is full.
  OpResult refused;
  uint64_t applied = 0;
  for (uint64_t i = 0; i < 40 && refused.code == StatusCode::kOk; ++i) {
    OpResult result = apply(by("A", big_create("a" + std::to_string(i), 1000 + i / 4, i % 4 + 1)),
                            kT0 + kSecond);
    if (result.http_status() == 201) {
      ++applied;
    } else {
      refused = result;
    }
  }
  ASSERT_EQ(refused.http_status(), 429) << refused.message;
  EXPECT_EQ(refused.substatus, kDedupSubstatusTableFull);
  ASSERT_NE(refused.dedup_refusal, nullptr);
  EXPECT_STREQ(refused.dedup_refusal, "key");
  EXPECT_GE(share("A").result_bytes, kDedupMaxKeyBytes);
  EXPECT_LT(share("A").result_bytes, kDedupMaxKeyBytes + 2'100'000);
  EXPECT_EQ(share("A").result_bytes, totals().result_bytes);
  EXPECT_EQ(share("A").clients, (applied + 3) / 4);
  // A new client of A, and an existing one, are refused too; nothing applied.
  EXPECT_EQ(apply(by("A", incr(2000, 1, 1)), kT0 + kSecond).http_status(), 429);
  EXPECT_EQ(apply(by("A", incr(1000, 5, 1)), kT0 + kSecond).http_status(), 429);
  EXPECT_EQ(counter(), 0);
  // Key B and the anonymous owner keep writing (new clients and big outcomes alike).
  EXPECT_EQ(apply(by("B", incr(1000, 1, 1)), kT0 + kSecond).http_status(), 200);
  EXPECT_EQ(apply(by("B", big_create("b", 3000, 1)), kT0 + kSecond).http_status(), 201);
  EXPECT_EQ(apply(incr(1000, 1, 1), kT0 + kSecond).http_status(), 200);
  EXPECT_EQ(counter(), 2);
  EXPECT_EQ(share("B").clients, 2u);
  // A client of A acknowledging its own outcomes frees the share: its next write applies.
  OpResult freed = apply(by("A", incr(1000, 5, 5)), kT0 + 2 * kSecond);
  EXPECT_EQ(freed.http_status(), 200) << freed.message;
  EXPECT_LT(share("A").result_bytes, kDedupMaxKeyBytes);
  // Expiry takes the shares down with the clients, to nothing.
  for (uint64_t i = 0; i < kDedupExpiryEvery * 2; ++i) apply(Command{}, kT0 + 3 * kDedupWindowMicros);
  EXPECT_EQ(totals().clients, 0u);
  EXPECT_EQ(share("A"), DedupTotals{});
  EXPECT_EQ(share("B"), DedupTotals{});
  auto dump = store_->dump(false);
  ASSERT_TRUE(dump.is_ok());
  for (const auto& [key, value] : *dump) EXPECT_NE(static_cast<uint8_t>(key[0]), 0x0B);
}

TEST_F(WriteDedupTest, RecordsFromBeforeOwnersMapToTheAnonymousOwner) {
  // Written as every node wrote them before write ids had owners: anonymous, record version 1.
  OpResult before = apply(incr(41, 1, 1), kT0 + kSecond);
  ASSERT_EQ(before.http_status(), 200);
  const std::map<std::string, std::string> records = client_records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records.begin()->second[0], 1) << "anonymous records keep version 1's bytes";
  // An upgraded client re-sends that write under its key: answered from the old record, not applied again; the
  // table is not changed by that answer.
  const auto dump_before = store_->dump(false);
  OpResult resent = apply(by("K", incr(41, 1, 1, true)), kT0 + 2 * kSecond);
  EXPECT_TRUE(resent.duplicate);
  EXPECT_EQ(resent.body, before.body);
  EXPECT_EQ(counter(), 1);
  auto dump_after = store_->dump(false);
  ASSERT_TRUE(dump_before.is_ok() && dump_after.is_ok());
  std::vector<std::pair<std::string, std::string>> table_before, table_after;
  for (const auto& entry : *dump_before) if (entry.first[0] >= 0x0A && entry.first[0] <= 0x0D) table_before.push_back(entry);
  for (const auto& entry : *dump_after) if (entry.first[0] >= 0x0A && entry.first[0] <= 0x0D) table_after.push_back(entry);
  EXPECT_EQ(table_after, table_before);
  // Not a retry, or a number the old record has no outcome for: the key's own write.
  EXPECT_EQ(apply(by("K", incr(41, 2, 1, true)), kT0 + 3 * kSecond).http_status(), 200);
  EXPECT_EQ(counter(), 2);
  EXPECT_EQ(client_records().size(), 2u);
  EXPECT_EQ(share("K").clients, 1u);
  // The old record still answers its own (anonymous) client, as before.
  OpResult anonymous = apply(incr(41, 1, 1, true), kT0 + 4 * kSecond);
  EXPECT_TRUE(anonymous.duplicate);
  EXPECT_EQ(counter(), 2);
}

TEST(WriteIdCodecTest, RoundTripsAndRejectsMalformedIds) {
  Command command = incr(0xfedcba9876543210ULL, 1'000'000, 999'990, true);
  Result<Command> decoded = decode_command(encode_command(command));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  ASSERT_TRUE(decoded->write_id.has_value());
  EXPECT_EQ(*decoded->write_id, *command.write_id);
  // The anonymous owner's writes keep version 2's bytes; a key's owner makes version 3 and round-trips.
  EXPECT_EQ(encode_command(command)[0], 2);
  Command owned = by("reader", command);
  EXPECT_EQ(encode_command(owned)[0], 3);
  Result<Command> owned_back = decode_command(encode_command(owned));
  ASSERT_TRUE(owned_back.is_ok()) << owned_back.status().to_string();
  EXPECT_EQ(owned_back->write_id->owner, dedup_owner_of("reader"));
  EXPECT_EQ(*owned_back->write_id, *owned.write_id);
  {
    // Version 3 with owner 0 is not a command anyone writes: refused. (The owner is the last 8 bytes here.)
    Command one = command;
    one.write_id->owner = 1;
    std::string bytes = encode_command(one);
    ASSERT_EQ(bytes.back(), 1);
    bytes.back() = 0;
    EXPECT_FALSE(decode_command(bytes).is_ok());
  }
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
