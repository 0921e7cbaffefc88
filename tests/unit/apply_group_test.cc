// Grouped applies (StateMachine::begin_apply_group, storage/apply_group.h): a log applied in groups written as one
// LevelDB batch each gives the same answers and byte-identical state (replicated and node-local keys) as the same
// log applied one write per entry — same items overwritten within a group, exactly-once records read back within it,
// acknowledgements by point reads and by scans, idle-client expiry, container changes in the middle of a group.
// Readers see a group only once it is written.
//
// Reproduce a failure: MAYFLY_GROUP_SEED=<seed printed> ./apply_group_test
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/prng.h"
#include "storage/write_dedup.h"
#include "tests/env.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

struct LoggedCommand {
  Command command;
  int64_t ts;
};

Command with_id(Command command, uint64_t client, uint64_t sequence, uint64_t first_unacknowledged, bool retry) {
  command.write_id = WriteId{client, sequence, first_unacknowledged, retry};
  return command;
}

// A random log over few ids and clients, so groups often touch the same item and the same client record twice.
std::vector<LoggedCommand> random_log(Prng& prng, size_t length) {
  std::vector<LoggedCommand> log = {{database_command(CommandType::kCreateDatabase, "db"), kT0},
                                    {create_container_command("db", "c", "/pk"), kT0}};
  int64_t ts = kT0;
  // Per client: the next sequence and the lowest unanswered one.
  std::vector<std::pair<uint64_t, uint64_t>> clients(3, {1, 1});
  for (size_t i = 0; i < length; ++i) {
    ts += prng.chance(1, 50) ? kDedupWindowMicros / 3 : prng.range(0, 2) * kSecond;
    const std::string id = "i" + std::to_string(prng.uniform(4));
    Command command;
    switch (prng.uniform(9)) {
      case 0:
      case 1:
      case 2:
        command = item_command(CommandType::kUpsertItem, "db", "c",
                               R"({"id":")" + id + R"(","pk":"p","n":)" + std::to_string(i) +
                                   (prng.chance(1, 2) ? R"(,"ttl":)" + std::to_string(prng.range(1, 5)) : "") + "}");
        break;
      case 3:
        command = item_command(CommandType::kCreateItem, "db", "c", R"({"id":")" + id + R"(","pk":"p","n":0})");
        break;
      case 4:
        command = target_command(CommandType::kPatchItem, "db", "c", "\"p\"", id,
                                 R"([{"op":"incr","path":"/n","value":1}])");
        break;
      case 5: command = target_command(CommandType::kDeleteItem, "db", "c", "\"p\"", id); break;
      case 6: command = Command{}; break;  // a time entry
      case 7:
        command = set_default_ttl_command("db", "c", prng.chance(1, 2) ? std::optional<std::string>("3")
                                                                        : std::optional<std::string>());
        break;
      default:
        command = item_command(CommandType::kReplaceItem, "db", "c", R"({"id":")" + id + R"(","pk":"p","r":1})");
        break;
    }
    if (command.type != CommandType::kTime && command.type != CommandType::kUpdateContainer && prng.chance(3, 4)) {
      const size_t c = prng.uniform(clients.size());
      auto& [next, unanswered] = clients[c];
      bool retry = false;
      uint64_t sequence = next;
      if (next > unanswered && prng.chance(1, 5)) {
        sequence = unanswered + prng.uniform(next - unanswered);  // a re-send of one still unanswered
        retry = true;
      } else {
        ++next;
      }
      // Acknowledge a few, or (sometimes) many at once: point reads and the scan both run.
      if (prng.chance(1, 2)) unanswered = std::min(sequence, unanswered + prng.uniform(3));
      if (prng.chance(1, 40)) {
        for (int k = 0; k < 40; ++k) log.push_back({with_id(command, 50 + c, next++, unanswered, false), ts});
        unanswered = next - 1;
      }
      command = with_id(std::move(command), 50 + c, sequence, std::min(unanswered, sequence), retry);
    }
    log.push_back({std::move(command), ts});
  }
  return log;
}

TEST(ApplyGroupTest, GroupedAppliesMatchOneWriteEachByteForByte) {
  const uint64_t given = testing_env::env_or("MAYFLY_GROUP_SEED", 0);
  const uint64_t first_seed = given != 0 ? given : 20261124;
  const int sequences = given != 0 ? 1 : 20;
  std::printf("seeds %llu..%llu\n", static_cast<unsigned long long>(first_seed),
              static_cast<unsigned long long>(first_seed + sequences - 1));
  for (int s = 0; s < sequences; ++s) {
    const uint64_t seed = first_seed + static_cast<uint64_t>(s);
    SCOPED_TRACE("MAYFLY_GROUP_SEED=" + std::to_string(seed));
    Prng prng(seed);
    const std::vector<LoggedCommand> log = random_log(prng, 300);
    TempDir one_dir, grouped_dir;
    StoreOptions options;
    options.path = one_dir.path() + "/db";
    Result<std::unique_ptr<StateMachine>> one = StateMachine::open(options);
    options.path = grouped_dir.path() + "/db";
    Result<std::unique_ptr<StateMachine>> grouped = StateMachine::open(options);
    ASSERT_TRUE(one.is_ok() && grouped.is_ok());
    size_t i = 0;
    while (i < log.size()) {
      const size_t end = std::min(log.size(), i + 1 + prng.uniform(40));
      const AppliedState before = (*grouped)->applied();
      (*grouped)->begin_apply_group();
      for (; i < end; ++i) {
        const LogIndex index(i + 1);
        Result<OpResult> expected = (*one)->apply(log[i].command, index, log[i].ts);
        Result<OpResult> got = (*grouped)->apply(log[i].command, index, log[i].ts);
        ASSERT_TRUE(expected.is_ok() && got.is_ok()) << i;
        EXPECT_EQ(got->http_status(), expected->http_status()) << i << " " << got->message;
        EXPECT_EQ(got->substatus, expected->substatus) << i;
        EXPECT_EQ(got->message, expected->message) << i;
        EXPECT_EQ(got->body, expected->body) << i;
        EXPECT_EQ(got->etag, expected->etag) << i;
        EXPECT_EQ(got->duplicate, expected->duplicate) << i;
      }
      // Readers see nothing of a group before it is written (unless a scan or a container change wrote it early).
      EXPECT_GE((*grouped)->applied().index, before.index);
      ASSERT_TRUE((*grouped)->end_apply_group().is_ok());
      EXPECT_EQ((*grouped)->applied().index, LogIndex(end));
      if (::testing::Test::HasFailure()) return;
    }
    Result<std::vector<std::pair<std::string, std::string>>> expected_dump = (*one)->dump(true);
    Result<std::vector<std::pair<std::string, std::string>>> got_dump = (*grouped)->dump(true);
    ASSERT_TRUE(expected_dump.is_ok() && got_dump.is_ok());
    EXPECT_EQ(*got_dump, *expected_dump);
    EXPECT_EQ(*(*grouped)->reader().dedup_totals(), *(*one)->reader().dedup_totals());
  }
}

TEST(ApplyGroupTest, ReadersSeeAGroupOnlyOnceWritten) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.path() + "/db";
  Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
  ASSERT_TRUE(opened.is_ok());
  StateMachine& store = **opened;
  ASSERT_TRUE(store.apply(database_command(CommandType::kCreateDatabase, "db"), LogIndex(1), kT0).is_ok());
  ASSERT_TRUE(store.apply(create_container_command("db", "c", "/pk"), LogIndex(2), kT0).is_ok());
  store.begin_apply_group();
  Result<OpResult> first =
      store.apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p","n":1})"), LogIndex(3), kT0);
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first->http_status(), 201);
  // The next apply in the group sees the item (a second create is a conflict) ...
  Result<OpResult> second =
      store.apply(item_command(CommandType::kCreateItem, "db", "c", R"({"id":"a","pk":"p","n":2})"), LogIndex(4), kT0);
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second->http_status(), 409);
  // ... a reader does not, and the applied position has not moved.
  EXPECT_EQ(store.applied().index, LogIndex(2));
  EXPECT_EQ(store.reader().read_item("db", "c", "\"p\"", "a", kT0).http_status(), 404);
  ASSERT_TRUE(store.end_apply_group().is_ok());
  EXPECT_EQ(store.applied().index, LogIndex(4));
  OpResult read = store.reader().read_item("db", "c", "\"p\"", "a", kT0);
  EXPECT_EQ(read.http_status(), 200);
  EXPECT_NE(read.body.find("\"n\":1"), std::string::npos) << read.body;
}

TEST(ApplyGroupTest, ItemWritesSeeContainerChangesAppliedBeforeThem) {
  // The apply path keeps the containers it looked up: a container dropped and created again under the same name (a new
  // internal id) and a changed defaultTtl must reach the next item write, in a group or not.
  TempDir dir;
  StoreOptions options;
  options.path = dir.path() + "/db";
  Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
  ASSERT_TRUE(opened.is_ok());
  StateMachine& store = **opened;
  uint64_t index = 0;
  auto apply = [&](const Command& command, int64_t ts) {
    Result<OpResult> result = store.apply(command, LogIndex(++index), ts);
    EXPECT_TRUE(result.is_ok());
    return result.is_ok() ? result->http_status() : 0;
  };
  ASSERT_EQ(apply(database_command(CommandType::kCreateDatabase, "db"), kT0), 201);
  ASSERT_EQ(apply(create_container_command("db", "c", "/pk"), kT0), 201);
  for (const bool grouped : {false, true}) {
    const int64_t t = kT0 + (grouped ? 10 : 0) * kSecond;
    if (grouped) store.begin_apply_group();
    ASSERT_EQ(apply(item_command(CommandType::kUpsertItem, "db", "c", R"({"id":"a","pk":"p"})"), t), 201);
    ASSERT_EQ(apply(target_command(CommandType::kDeleteContainer, "db", "c", "", ""), t), 204);
    ASSERT_EQ(apply(create_container_command("db", "c", "/pk"), t), 201);
    ASSERT_EQ(apply(item_command(CommandType::kUpsertItem, "db", "c", R"({"id":"b","pk":"p"})"), t), 201);
    // A defaultTtl of 1 s: 2 s later the item written at t has expired, so an upsert creates it again (201, not 200).
    ASSERT_EQ(apply(set_default_ttl_command("db", "c", "1"), t), 200);
    EXPECT_EQ(apply(item_command(CommandType::kUpsertItem, "db", "c", R"({"id":"b","pk":"p"})"), t + 2 * kSecond),
              201);
    if (grouped) {
      ASSERT_TRUE(store.end_apply_group().is_ok());
    }
    EXPECT_EQ(store.reader().read_item("db", "c", "\"p\"", "b", t + 2 * kSecond).http_status(), 200) << grouped;
    EXPECT_EQ(store.reader().read_item("db", "c", "\"p\"", "a", t + 2 * kSecond).http_status(), 404) << grouped;
    ASSERT_EQ(apply(set_default_ttl_command("db", "c", std::nullopt), t + 2 * kSecond), 200);
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
