// The deterministic cluster simulator: 3 or 5 production nodes in one thread — each the real node::Driver (its
// Replica: Raft core, WAL log and state machine; its collector, request-unit account, time entries, expiry
// deadlines, learner promotion, request timeouts) on a ManualLoop (node/event_loop.h) with a simulated wall clock, on
// an in-memory LevelDB Env that loses unsynced writes on a crash — with a simulated network, and every choice drawn
// from one seed. Clients reach the nodes as they reach mayflyd: each request goes where the node's Router
// (node/router.h) sends it — reads served by the replica the client chose once it is fresh enough (session reads
// parked until then), writes to a follower forwarded over the simulated network to its leader, strong reads and
// writes to the driver (Driver::on_request, replies in DriverBatch); peer messages travel through the wire codec and
// the router's peer admission.
//
// A run has a fault phase — message drops, delays (hence reordering), duplicates, symmetric and one-way partitions
// that come and go, crashes and restarts, clock skew, drift and jumps, leadership transfers and membership changes,
// under a workload of item writes with assorted TTLs, container defaultTtl changes, deletes, strong reads and local
// garbage collection — then a heal phase with every fault removed. Checkers run throughout:
//   - at most one leader per term;
//   - committed entries agree: every node that applies index i applies the same entry (term, ts, type, data);
//   - entry timestamps strictly increase along the log;
//   - every node's visible state (containers, and every item visible at the applied time) is identical at the same
//     applied index — identical expiry decisions, whatever each node's garbage collector did;
//   - every node's change feed (on for the workload's container) is the same sequence of changes — writes and
//     expirations, at the same positions, with the same images — up to its applied index, read in pages of random
//     sizes; its only-expirations feed is exactly the feed's expirations;
//   - a strong read is released by the driver only once the node has applied every write acknowledged before it
//     started (ReadIndex);
//   - every write a driver acknowledged is the committed entry at the index it named, and every node applies it —
//     forwarded ones included;
//   - a session read is served only by a replica that has applied its token (read your writes), and every read
//     served is answered without an internal error; in every run followers serve reads and forward writes the
//     leader acknowledges;
//   - liveness: after the faults heal, a write commits and every node catches up within a bound.
// A failure names the seed and the command that reproduces it.
#pragma once

#include <cstdint>
#include <string>

namespace mayfly::sim {

struct SimOptions {
  uint64_t seed = 1;
  int nodes = 3;                     // 3 or 5
  int64_t fault_phase_ms = 6000;     // simulated milliseconds with faults
  int64_t heal_phase_ms = 6000;      // then without; liveness must show within this
  bool verbose = false;              // print a line per notable event
};

struct SimResult {
  bool ok = true;
  std::string failure;  // what broke, with the seed and the reproduce command
  // Figures, for the report line.
  uint64_t entries_committed = 0;
  uint64_t writes_acknowledged = 0;
  uint64_t strong_reads_checked = 0;
  uint64_t crashes = 0;
  uint64_t partitions = 0;
  uint64_t leader_changes = 0;
  uint64_t transfers = 0;
  uint64_t membership_changes = 0;
  uint64_t snapshots_installed = 0;
  // Installs cut short by a crash after one of their batches (the store holding the install marker and half of the
  // snapshot), and installs a restart redid from the raft log's snapshot file.
  uint64_t installs_interrupted = 0;
  uint64_t installs_redone_at_open = 0;
  uint64_t messages_delivered = 0;
  uint64_t messages_dropped = 0;
  uint64_t gc_items_collected = 0;
  uint64_t feed_reads_checked = 0;    // whole change feeds read from a replica and compared
  uint64_t feed_changes_checked = 0;  // the longest of them
  uint64_t feed_warnings_checked = 0;  // the most expiring-soon warnings in one of them
  uint64_t unsynced_bytes_lost = 0;
  uint64_t messages_refused_by_admission = 0;  // Raft messages from outside the receiver's membership
  // The router's paths (node/router.h): writes sent to followers and forwarded to the leader, reads served by the
  // replica the client chose (session, bounded), reads parked until their replica caught up, and what came of them.
  uint64_t forwarded_writes_acknowledged = 0;
  uint64_t forwards_refused = 0;
  uint64_t reads_served = 0;
  uint64_t follower_reads_served = 0;
  uint64_t reads_waited = 0;
  uint64_t reads_behind = 0;
  uint64_t reads_refused = 0;
  // Exactly-once: item writes re-sent with their first id, and re-sends answered with the first outcome.
  uint64_t writes_resent = 0;
  uint64_t writes_deduplicated = 0;
  std::string summary() const;
};

SimResult run_simulation(const SimOptions& options);

// "build/tests/sim/mayfly-sim --seed N --nodes M" for a failing run.
std::string reproduce_command(const SimOptions& options);

}  // namespace mayfly::sim
