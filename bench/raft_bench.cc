// Raft benchmark: entries committed per second by a 3-node cluster in one process.
//   1. The core's own ceiling: three RaftCores with in-memory logs, messages handed over in memory (no I/O).
//   2. The real thing minus the network: three storage::Replica (WAL log with fsync, state machine applying
//      1 KB item upserts) in directories on this machine's disk; proposals arrive in bursts of 1, 16 and 256, as
//      from that many concurrent clients, and the group commit puts each burst into one fsync per node.
// Prints the figures and the command. Medians of --runs runs.
//
//   build/bench/mayfly-raft-bench [--seconds S] [--runs R] [--dir PATH]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/command_line.h"
#include "replication/log_storage.h"
#include "replication/raft_core.h"
#include "storage/replica.h"

namespace mayfly {
namespace {

using replication::Message;
using replication::Ready;

constexpr int64_t kEpoch = 1'800'000'000'000'000;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "mayfly-raft-bench: %s\n", what.c_str());
    std::exit(1);
  }
}

replication::RaftConfig config_for(uint64_t id) {
  replication::RaftConfig config;
  config.self = NodeId(id);
  config.max_uncommitted_bytes = 256 << 20;
  return config;
}

// ---- 1. the core alone ----

struct CoreNode {
  std::unique_ptr<replication::MemoryLogStorage> storage;
  std::unique_ptr<replication::RaftCore> core;
};

double core_ceiling(double seconds, size_t burst) {
  const replication::Membership members{{NodeId(1), NodeId(2), NodeId(3)}, {}};
  std::vector<CoreNode> nodes(3);
  for (uint64_t i = 0; i < 3; ++i) {
    nodes[i].storage = std::make_unique<replication::MemoryLogStorage>(members);
    auto core = replication::RaftCore::create(config_for(i + 1), *nodes[i].storage, Prng(i + 1));
    check(core.is_ok(), "create core");
    nodes[i].core = std::move(core).value();
  }
  std::deque<Message> network;
  int64_t now = kEpoch;
  uint64_t committed = 0;
  auto pump = [&]() {
    bool progress = true;
    while (progress) {
      progress = false;
      while (!network.empty()) {
        Message message = std::move(network.front());
        network.pop_front();
        (void)nodes[message.to.value() - 1].core->step(message);
        progress = true;
      }
      for (size_t i = 0; i < nodes.size(); ++i) {
        while (nodes[i].core->has_ready()) {
          Ready ready = nodes[i].core->ready();
          for (Message& m : ready.messages) network.push_back(std::move(m));
          if (ready.snapshot) check(nodes[i].storage->apply_snapshot(*ready.snapshot).is_ok(), "snapshot");
          check(nodes[i].storage->append(ready.entries).is_ok(), "append");
          if (ready.hard_state) nodes[i].storage->set_hard_state(*ready.hard_state);
          for (Message& m : ready.messages_after_persist) network.push_back(std::move(m));
          if (i == 0) committed += ready.committed_entries.size();
          nodes[i].core->advance(ready);
          progress = true;
        }
      }
    }
  };
  while (nodes[0].core->role() != replication::Role::kLeader) {  // let node 1 win the first election
    nodes[0].core->tick(now += 10'000);
    pump();
  }
  const std::string data(256, 'x');
  const uint64_t start_committed = committed;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  uint64_t rounds = 0;
  while (elapsed < seconds) {
    for (size_t k = 0; k < burst; ++k) check(nodes[0].core->propose(data, now += 1).is_ok(), "propose");
    pump();
    if (++rounds % 64 == 0) {  // compact now and then so memory stays flat
      for (CoreNode& node : nodes) {
        const LogIndex applied = node.core->status().applied;
        if (applied.value() > 10000) {
          (void)node.storage->create_snapshot(applied, node.core->membership_at(applied), "");
          (void)node.storage->compact(LogIndex(applied.value() - 1000));
        }
      }
    }
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return static_cast<double>(committed - start_committed) / elapsed;
}

// ---- 2. replicas with LevelDB and fsync ----

struct Figures {
  double entries_per_second;
  double entries_per_fsync;
};

Figures replicas_on_disk(const std::string& dir, double seconds, size_t burst) {
  std::filesystem::remove_all(dir);
  const replication::Membership members{{NodeId(1), NodeId(2), NodeId(3)}, {}};
  std::vector<std::unique_ptr<storage::Replica>> nodes;
  for (uint64_t i = 1; i <= 3; ++i) {
    storage::ReplicaOptions options;
    options.data_dir = dir + "/node" + std::to_string(i);
    options.raft.self = NodeId(i);
    options.raft.max_uncommitted_bytes = 256 << 20;
    options.bootstrap = members;
    options.seed = i;
    auto replica = storage::Replica::open(options);
    check(replica.is_ok(), replica.is_ok() ? "" : replica.status().to_string());
    nodes.push_back(std::move(replica).value());
  }
  std::deque<Message> network;
  int64_t now = kEpoch;
  uint64_t committed = 0, fsyncs = 0, entries_persisted = 0;
  auto pump = [&]() {
    bool progress = true;
    while (progress) {
      progress = false;
      while (!network.empty()) {
        Message message = std::move(network.front());
        network.pop_front();
        (void)nodes[message.to.value() - 1]->step(message);
        progress = true;
      }
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (!nodes[i]->has_ready()) continue;
        auto output = nodes[i]->process_ready();
        check(output.is_ok(), output.is_ok() ? "" : output.status().to_string());
        for (Message& m : output->messages) network.push_back(std::move(m));
        if (i == 0) committed += output->applied.size();
        fsyncs += output->synced ? 1 : 0;
        entries_persisted += output->entries_persisted;
        progress = true;
      }
    }
  };
  while (nodes[0]->core().role() != replication::Role::kLeader) {
    nodes[0]->tick(now += 10'000);
    pump();
  }
  storage::Command command;
  command.type = storage::CommandType::kCreateDatabase;
  command.database = "db";
  check(nodes[0]->propose(command, now += 1).is_ok(), "create database");
  command.type = storage::CommandType::kCreateContainer;
  command.container = "c";
  command.partition_key_path = "/pk";
  command.default_ttl_change = storage::DefaultTtlChange::kSet;
  command.default_ttl_json = "3600";
  check(nodes[0]->propose(command, now += 1).is_ok(), "create container");
  pump();
  command = storage::Command{};
  command.type = storage::CommandType::kUpsertItem;
  command.database = "db";
  command.container = "c";
  const std::string payload(900, 'x');
  const uint64_t start_committed = committed, start_fsyncs = fsyncs, start_persisted = entries_persisted;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  uint64_t next_id = 0;
  while (elapsed < seconds) {
    for (size_t k = 0; k < burst; ++k) {
      command.body = "{\"id\":\"" + std::to_string(next_id++ % 100000) + "\",\"pk\":\"p\",\"ttl\":60,\"v\":\"" +
                     payload + "\"}";
      check(nodes[0]->propose(command, now += 1).is_ok(), "propose");
    }
    pump();
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  nodes.clear();
  std::filesystem::remove_all(dir);
  const double syncs = static_cast<double>(std::max<uint64_t>(1, fsyncs - start_fsyncs));
  return {static_cast<double>(committed - start_committed) / elapsed,
          static_cast<double>(entries_persisted - start_persisted) / syncs};
}

}  // namespace
}  // namespace mayfly

int main(int argc, char** argv) {
  double seconds = 3;
  int runs = 3;
  std::string dir;
  CLI::App app{"mayfly-raft-bench: the Raft core's ceiling (in memory) and the replicated log's on disk (3 nodes, one "
               "process)"};
  app.add_option("--seconds", seconds, "how long each measurement runs")->check(CLI::PositiveNumber);
  app.add_option("--runs", runs, "measurements per row (the median is printed)")->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "where the on-disk logs go (default: a new directory under /tmp)");
  CLI11_PARSE(app, argc, argv);
  const std::string command = mayfly::bench::command_line(argc, argv);
  if (dir.empty()) dir = "/tmp/mayfly-raft-bench-" + std::to_string(getpid());
  std::printf("command: %s\n| cluster (3 nodes, one process) | burst | entries committed/s | entries per fsync |\n"
              "|---|---|---|---|\n",
              command.c_str());
  for (size_t burst : {1, 256}) {
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) rates.push_back(mayfly::core_ceiling(seconds, burst));
    std::printf("| Raft core only, in-memory log, no I/O (256 B entries) | %zu | %.0f | — |\n", burst,
                mayfly::median(rates));
    std::fflush(stdout);
  }
  for (size_t burst : {1, 16, 256}) {
    std::vector<double> rates, batching;
    for (int r = 0; r < runs; ++r) {
      mayfly::Figures figures = mayfly::replicas_on_disk(dir, seconds, burst);
      rates.push_back(figures.entries_per_second);
      batching.push_back(figures.entries_per_fsync);
    }
    std::printf("| Replica: WAL log + fsync, applying 1 KB upserts | %zu | %.0f | %.1f |\n", burst,
                mayfly::median(rates), mayfly::median(batching));
    std::fflush(stdout);
  }
  return 0;
}
