// One fault-campaign run: a real 3-node mayflyd cluster (each node in its own network namespace when this machine
// allows it), the workload (workload.h) for a while under a seeded fault schedule — SIGKILL (a power cut for the
// unsynced Raft WAL and LevelDB log, with power_cut_shim) and restart, SIGSTOP
// pauses longer than the election timeout, partitions, the leader restarted with its clock stepped ±5 s or +1 h
// (libfaketime) — then every fault healed, a bound on recovery, final strong reads, a check that every node's state
// machine agrees, and the checkers (checker.h) over the history.
//
// Thread-safety: run_campaign runs on the calling thread (which must be the one that made any Network) and starts
// the workload's threads itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/chaos/netns.h"

namespace mayfly::chaos {

struct CampaignOptions {
  uint64_t seed = 1;
  int64_t seconds = 20;  // of workload under faults
  size_t threads = 4;
  bool exactly_once = true;
  std::vector<std::string> faults = {"kill", "pause", "partition", "clock", "blackout", "membership", "diskfull"};
  std::string mayflyd;   // empty: this build's
  Network* network = nullptr;  // nullptr: nodes on 127.0.0.1, no partitions
  // Non-empty: every node preloads this library (power_cut_shim.c), so a SIGKILL also loses the WAL and LevelDB log
  // writes the node had not fsync'd, as a power cut would.
  std::string power_cut_shim;
  int64_t recovery_bound_ms = 15000;
  // The nodes' --checkpoint-interval-entries; 0: by seed, 300 / 2000 / 20000 in turn, so checkpoints, log
  // compaction and snapshots produced for and installed by a lagging or re-added node happen under the faults too.
  int64_t checkpoint_interval_entries = 0;
  std::string history_dir;  // where failing runs' histories are written
  bool keep_history = false;  // write it for passing runs too
};

enum class CampaignResult { kPass, kAnomaly, kInconclusive };

struct CampaignSummary {
  CampaignResult result = CampaignResult::kPass;
  size_t ops = 0, ok = 0, failed = 0, unknown = 0;
  size_t faults = 0;
  double seconds = 0;
  std::string fault_log;
};

CampaignSummary run_campaign(const CampaignOptions& options);

}  // namespace mayfly::chaos
