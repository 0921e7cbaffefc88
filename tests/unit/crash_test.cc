// Crash safety of the state machine: a child process applies a deterministic command stream to a real LevelDB on
// disk and is killed with SIGKILL at a random moment. On reopen, the applied index says how far it got, and the
// whole store (replicated and node-local keys) must equal a store that applied exactly that prefix of the stream:
// nothing half-applied, nothing acknowledged lost.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "common/prng.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

// The i-th command (1-based) of the stream for `seed`, and its replicated time.
Command stream_command(uint64_t seed, uint64_t i) {
  if (i == 1) return database_command(CommandType::kCreateDatabase, "db");
  if (i == 2) return create_container_command("db", "c", "/pk", "3");
  Prng prng(seed * 1'000'003 + i);
  const std::string id = "item" + std::to_string(prng.uniform(50));
  const std::string pk = "\"p" + std::to_string(prng.uniform(5)) + "\"";
  const uint64_t choice = prng.uniform(100);
  if (choice < 60) {
    std::string ttl = prng.chance(1, 3) ? ",\"ttl\":" + std::to_string(prng.range(1, 5)) : "";
    std::string body = "{\"id\":\"" + id + "\",\"pk\":" + pk + ttl + ",\"payload\":\"" +
                       std::string(prng.uniform(2000), 'x') + "\"}";
    return item_command(CommandType::kUpsertItem, "db", "c", body);
  }
  if (choice < 80) return target_command(CommandType::kDeleteItem, "db", "c", pk, id);
  if (choice < 85) return set_default_ttl_command("db", "c", std::to_string(prng.range(1, 6)));
  if (choice < 90) return item_command(CommandType::kCreateItem, "db", "c", "{\"id\":\"bad\",\"pk\":1,\"ttl\":0}");
  return Command{};  // a time entry
}

int64_t stream_ts(uint64_t i) { return kT0 + static_cast<int64_t>(i) * 1000; }

[[noreturn]] void run_child(const std::string& path, uint64_t seed, int progress_fd) {
  StoreOptions options;
  options.path = path;
  Result<std::unique_ptr<StateMachine>> store = StateMachine::open(options);
  if (!store.is_ok()) _exit(3);
  for (uint64_t i = 1;; ++i) {
    Result<OpResult> result = (*store)->apply(stream_command(seed, i), LogIndex(i), stream_ts(i));
    if (!result.is_ok()) _exit(4);
    if (write(progress_fd, &i, sizeof i) != sizeof i) _exit(5);
  }
}

TEST(CrashTest, KillDuringApplyLeavesExactlyAPrefix) {
  for (uint64_t round = 0; round < 4; ++round) {
    const uint64_t seed = 7700 + round;
    SCOPED_TRACE("seed " + std::to_string(seed));
    TempDir dir;
    const std::string path = dir.path() + "/crashed";
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(pipe_fds[0]);
      run_child(path, seed, pipe_fds[1]);
    }
    close(pipe_fds[1]);
    // Let it run for a seed-chosen number of acknowledged applies, then kill it without warning.
    Prng prng(seed);
    const uint64_t kill_after = 200 + prng.uniform(1500);
    uint64_t acknowledged = 0;
    while (acknowledged < kill_after) {
      ASSERT_EQ(read(pipe_fds[0], &acknowledged, sizeof acknowledged), static_cast<ssize_t>(sizeof acknowledged));
    }
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited by itself with " << WEXITSTATUS(status);
    close(pipe_fds[0]);

    StoreOptions options;
    options.path = path;
    Result<std::unique_ptr<StateMachine>> crashed = StateMachine::open(options);
    ASSERT_TRUE(crashed.is_ok()) << crashed.status().to_string();
    const uint64_t applied = (*crashed)->applied().index.value();
    EXPECT_GE(applied, acknowledged) << "an apply the child had finished was lost";

    options.path = dir.path() + "/reference";
    Result<std::unique_ptr<StateMachine>> reference = StateMachine::open(options);
    ASSERT_TRUE(reference.is_ok());
    for (uint64_t i = 1; i <= applied; ++i) {
      ASSERT_TRUE((*reference)->apply(stream_command(seed, i), LogIndex(i), stream_ts(i)).is_ok());
    }
    auto crashed_dump = (*crashed)->dump(true);
    auto reference_dump = (*reference)->dump(true);
    ASSERT_TRUE(crashed_dump.is_ok() && reference_dump.is_ok());
    EXPECT_EQ(crashed_dump->size(), reference_dump->size());
    EXPECT_TRUE(*crashed_dump == *reference_dump) << "the crashed store is not the prefix up to index " << applied;
    std::printf("round %llu: killed after %llu acknowledged applies; reopened at index %llu, %zu keys match\n",
                static_cast<unsigned long long>(round), static_cast<unsigned long long>(acknowledged),
                static_cast<unsigned long long>(applied), crashed_dump->size());

    // The reopened store goes on from where it was: the next command applies normally.
    const uint64_t next = applied + 1;
    Result<OpResult> more = (*crashed)->apply(stream_command(seed, next), LogIndex(next), stream_ts(next));
    ASSERT_TRUE(more.is_ok());
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
