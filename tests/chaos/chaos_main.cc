// mayfly-chaos: the fault campaign (docs/tests.md, "Fault campaign"; tests/chaos/README.md) as a program.
//
//   mayfly-chaos --seed 42 --seconds 30          # one run; a failure prints the seed, anomalies and history excerpts
//   mayfly-chaos --seeds 15 --seconds 120        # seeds 1..15 (or --first-seed S), e.g. a 30-minute campaign
//   mayfly-chaos --seed 42 --no-exactly-once     # the checker's mutation check: clients without exactly-once writes
//   mayfly-chaos --seed 42 --mayflyd /tmp/mutant/mayflyd   # run a (mutated) build of the node
//
// Exit status: 0 every run passed, 1 an anomaly, 2 inconclusive (could not start, or a search over its bound);
// 130 / 143 after SIGINT / SIGTERM, once this run's nodes, namespaces and tmpfs are gone (interrupt.h).
// It runs as one gtest test (the cluster harness reports through gtest) with its own flags parsed first.
//
// Thread-safety: main thread only; the workload threads are the campaign's.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "tests/chaos/campaign.h"
#include "tests/chaos/interrupt.h"
#include "tests/chaos/netns.h"
#include "tests/env.h"

namespace {

struct Flags {
  uint64_t seed = 0;
  uint64_t seeds = 0;
  uint64_t first_seed = 1;
  int64_t seconds = 20;
  size_t threads = 4;
  bool no_exactly_once = false;
  bool no_netns = false;
  std::string faults = "kill,pause,partition,clock,blackout,membership,diskfull";
  std::string mayflyd;
  std::string history_dir = "/tmp";
  bool keep_history = false;
  bool no_power_cut = false;
  int64_t checkpoint_interval_entries = 0;
};
Flags flags;
std::unique_ptr<mayfly::chaos::Network> network;
int exit_code = 0;

TEST(Chaos, Campaign) {
  std::vector<uint64_t> seeds;
  if (flags.seeds > 0) {
    for (uint64_t s = 0; s < flags.seeds; ++s) seeds.push_back(flags.first_seed + s);
  } else {
    seeds.push_back(flags.seed != 0 ? flags.seed
                                    : mayfly::testing_env::env_or("MAYFLY_CHAOS_SEED",
                                                                  static_cast<uint64_t>(::time(nullptr))));
  }
  std::vector<std::string> faults;
  for (size_t start = 0; start <= flags.faults.size();) {
    const size_t comma = std::min(flags.faults.find(',', start), flags.faults.size());
    if (comma > start) faults.push_back(flags.faults.substr(start, comma - start));
    start = comma + 1;
  }
  for (uint64_t seed : seeds) {
    mayfly::chaos::CampaignOptions options;
    options.seed = seed;
    options.seconds = flags.seconds;
    options.threads = flags.threads;
    options.exactly_once = !flags.no_exactly_once;
    options.faults = faults;
    options.mayflyd = flags.mayflyd;
    options.network = network.get();
    options.history_dir = flags.history_dir;
    options.keep_history = flags.keep_history;
    if (!flags.no_power_cut) options.power_cut_shim = MAYFLY_CHAOS_POWER_CUT_SHIM;
    options.checkpoint_interval_entries = flags.checkpoint_interval_entries;
    const mayfly::chaos::CampaignSummary summary = mayfly::chaos::run_campaign(options);
    const char* verdict = summary.result == mayfly::chaos::CampaignResult::kPass      ? "PASS"
                          : summary.result == mayfly::chaos::CampaignResult::kAnomaly ? "FAIL"
                                                                                        : "INCONCLUSIVE";
    std::cerr << "[chaos] seed " << seed << ": " << verdict << " (reproduce: mayfly-chaos --seed " << seed
              << " --seconds " << flags.seconds << " --threads " << flags.threads << " --faults " << flags.faults
              << (flags.no_exactly_once ? " --no-exactly-once" : "") << (flags.no_power_cut ? " --no-power-cut" : "")
              << ")\n";
    EXPECT_EQ(summary.result, mayfly::chaos::CampaignResult::kPass) << "seed " << seed << ": " << verdict;
    if (summary.result == mayfly::chaos::CampaignResult::kAnomaly) exit_code = 1;
    if (summary.result == mayfly::chaos::CampaignResult::kInconclusive && exit_code == 0) exit_code = 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("mayfly-chaos: a Jepsen-style fault campaign against a real 3-node mayflyd cluster");
  app.add_option("--seed", flags.seed, "one run with this seed (default: $MAYFLY_CHAOS_SEED, else the clock)");
  app.add_option("--seeds", flags.seeds, "run this many seeds, from --first-seed");
  app.add_option("--first-seed", flags.first_seed, "the first of --seeds");
  app.add_option("--seconds", flags.seconds, "workload time under faults per seed")->check(CLI::Range(1, 86400));
  app.add_option("--threads", flags.threads, "workload client threads")->check(CLI::Range(1, 64));
  app.add_option("--faults", flags.faults, "comma-separated: kill, blackout (every node at once), pause, partition, clock, membership, diskfull");
  app.add_flag("--no-exactly-once", flags.no_exactly_once, "clients without exactly-once writes, re-sending writes whose outcome is unknown (mutation check)");
  app.add_flag("--no-netns", flags.no_netns, "nodes on 127.0.0.1 (no partitions) even as root");
  app.add_option("--mayflyd", flags.mayflyd, "the mayflyd binary (default: this build's)");
  app.add_option("--history-dir", flags.history_dir, "where a failing run's history is written");
  app.add_flag("--no-power-cut", flags.no_power_cut, "SIGKILL only (the nodes' unsynced log writes survive it)");
  app.add_option("--checkpoint-interval-entries,--snapshot-interval-entries", flags.checkpoint_interval_entries,
                 "the nodes' checkpoint interval (default: by seed, 300, 2000 or 20000)");
  app.add_flag("--keep-history", flags.keep_history, "write the history of passing runs too");
  CLI11_PARSE(app, argc, argv);

  // SIGINT/SIGTERM: kill this run's nodes, delete its namespaces, unmount its tmpfs, exit 130/143 (interrupt.h). Its
  // thread does no networking, so it may exist before the hub namespace is entered.
  mayfly::chaos::install_interrupt_cleanup();
  // Namespaces next, while no other thread uses the network: the process then lives in the hub namespace.
  std::string why;
  if (!flags.no_netns) network = mayfly::chaos::Network::create(3, &why);
  if (network != nullptr && !network->enter_hub(&why)) network.reset();
  if (network == nullptr) {
    std::cerr << "[chaos] PARTITIONS SKIPPED: " << (flags.no_netns ? "--no-netns" : why)
              << "; nodes run on 127.0.0.1 and the partition fault is not injected\n";
  }
  int gtest_argc = 1;
  ::testing::InitGoogleTest(&gtest_argc, argv);
  const int gtest_result = RUN_ALL_TESTS();
  // Not while an interrupt's cleanup runs (it holds the gate until it _exits): exit() would run static destructors
  // under it and report this run's status instead of 130/143.
  mayfly::chaos::node_start_gate().lock();
  network.reset();
  return exit_code != 0 ? exit_code : gtest_result;
}
