// The simulator in CI (label `sim`): many seeds, 3- and 5-node clusters. Split into shards so ctest can run them in
// parallel. Long mode: build/tests/sim/mayfly-sim --seeds 100000. MAYFLY_SIM_SEEDS_PER_SHARD overrides the count.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/env.h"
#include "tests/sim/simulator.h"

namespace mayfly::sim {
namespace {

// 64 seeds a shard (512 in all); 8 (64 in all) in a sanitized build, where a seed takes ~20x as long (~6 s).
uint64_t seeds_per_shard() {
  return testing_env::env_or("MAYFLY_SIM_SEEDS_PER_SHARD", testing_env::size_for_build(64, 8));
}

class SimShard : public ::testing::TestWithParam<int> {};

TEST_P(SimShard, EverySeedKeepsEveryInvariant) {
  const int shard = GetParam();
  const int nodes = shard % 2 == 0 ? 3 : 5;
  const uint64_t count = seeds_per_shard();
  // Coverage of the paths a shard must reach, or nothing would fail if a change stopped them from firing: snapshots
  // installed, installs cut short by a crash and redone when the node opened again.
  uint64_t installed = 0;
  uint64_t interrupted = 0;
  uint64_t redone = 0;
  for (uint64_t k = 0; k < count; ++k) {
    SimOptions options;
    options.seed = 1000 + static_cast<uint64_t>(shard) * 100000 + k;
    options.nodes = nodes;
    SimResult result = run_simulation(options);
    ASSERT_TRUE(result.ok) << result.failure;
    installed += result.snapshots_installed;
    interrupted += result.installs_interrupted;
    redone += result.installs_redone_at_open;
    if (k == 0) {
      std::printf("shard %d (%d nodes), %llu seeds (MAYFLY_SIM_SEEDS_PER_SHARD%s), first seed: %s\n", shard, nodes,
                  static_cast<unsigned long long>(count), testing_env::kSanitized ? "; sanitized build" : "",
                  result.summary().c_str());
    }
  }
  std::printf("shard %d: %llu snapshots installed, %llu cut short by a crash, %llu redone at open\n", shard,
              static_cast<unsigned long long>(installed), static_cast<unsigned long long>(interrupted),
              static_cast<unsigned long long>(redone));
  if (count >= 32) {  // a handful of seeds (a sanitized build, an override) may well miss them
    EXPECT_GT(installed, 0u);
    EXPECT_GT(interrupted, 0u);
    EXPECT_GT(redone, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, SimShard, ::testing::Range(0, 8));

}  // namespace
}  // namespace mayfly::sim
