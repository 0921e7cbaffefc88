#include "tests/sim/simulator.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <vector>

#include "common/prng.h"
#include "replication/codec.h"
#include "storage/replica.h"
#include "tests/sim/fault_env.h"

namespace mayfly::sim {
namespace {

using replication::ConfigChange;
using replication::ConfigChangeType;
using replication::EntryType;
using replication::Message;
using replication::Role;
using storage::Command;
using storage::CommandType;

constexpr int64_t kEpochMicros = 1'800'000'000'000'000;  // 2027-01-15: all clocks start near here
constexpr int64_t kTickMillis = 10;
constexpr int64_t kTimeEntryMillis = 100;
constexpr int64_t kCheckpointMillis = 25;

uint64_t fnv1a(std::string_view bytes, uint64_t hash = 1469598103934665603ULL) {
  for (char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

// The fault intensities of one run, themselves drawn from the seed so runs differ in character.
struct FaultPlan {
  uint64_t drop_per_mille;
  uint64_t duplicate_per_mille;
  int64_t max_delay_ms;
  uint64_t partition_per_mille_per_ms;
  uint64_t crash_per_mille_per_ms;
  uint64_t clock_jump_per_mille_per_ms;
  uint64_t transfer_per_mille_per_ms;
  uint64_t membership_per_mille_per_ms;
};

struct Node {
  NodeId id;
  std::unique_ptr<FaultEnv> env;
  std::unique_ptr<storage::Replica> replica;  // null while crashed
  int64_t restart_at_ms = -1;
  bool bootstrap_member = true;  // false once wiped to rejoin as a new server
  int64_t clock_offset_us = 0;   // skew plus jumps
  int64_t drift_ppm = 0;
  int64_t next_tick_ms = 0;
  LogIndex last_applied;
  int64_t last_applied_ts = 0;
};

struct InFlight {
  int64_t deliver_at_ms;
  uint64_t sequence;
  Message message;
  bool operator>(const InFlight& other) const {
    return std::tie(deliver_at_ms, sequence) > std::tie(other.deliver_at_ms, other.sequence);
  }
};

struct CommittedEntry {
  Term term;
  int64_t ts_micros;
  EntryType type;
  uint64_t data_hash;
};

struct PendingWrite {
  Term term;
  int64_t proposed_at_ms;
};

struct PendingRead {
  NodeId node;
  LogIndex acknowledged_before;  // highest index acknowledged when the read started
};

// Thrown-free failure: the first violation is recorded and the run stops.
class Simulation {
 public:
  explicit Simulation(const SimOptions& options) : options_(options), prng_(options.seed) {}

  SimResult run() {
    plan_ = draw_plan();
    for (int i = 1; i <= options_.nodes; ++i) membership_.voters.insert(NodeId(i));
    for (int i = 1; i <= options_.nodes; ++i) {
      Node node;
      node.id = NodeId(i);
      node.env = std::make_unique<FaultEnv>();
      node.clock_offset_us = prng_.range(-5'000'000, 5'000'000);  // ±5 s skew
      node.drift_ppm = prng_.range(-200, 200);
      node.next_tick_ms = prng_.range(0, kTickMillis - 1);
      nodes_.push_back(std::move(node));
    }
    for (Node& node : nodes_) start(node);
    const int64_t end_ms = options_.fault_phase_ms + options_.heal_phase_ms;
    for (now_ms_ = 0; now_ms_ < end_ms && result_.ok; ++now_ms_) {
      if (now_ms_ == options_.fault_phase_ms) heal();
      step_once();
    }
    if (result_.ok) final_checks();
    return result_;
  }

 private:
  // ---- setup and the clock ----

  FaultPlan draw_plan() {
    return FaultPlan{prng_.uniform(100),      prng_.uniform(30),  prng_.range(1, 40), prng_.uniform(3),
                     prng_.uniform(2) + 0,    prng_.uniform(2),   prng_.uniform(2),   prng_.uniform(2)};
  }

  int64_t clock_of(const Node& node) const {
    const int64_t elapsed_us = now_ms_ * 1000;
    return kEpochMicros + elapsed_us + node.clock_offset_us + elapsed_us / 1'000'000 * node.drift_ppm;
  }

  storage::ReplicaOptions replica_options(const Node& node) {
    storage::ReplicaOptions options;
    options.data_dir = "/sim/node" + std::to_string(node.id.value());
    options.env = node.env.get();
    options.raft.self = node.id;
    options.raft.election_timeout_ticks = 15;
    options.raft.heartbeat_interval_ticks = 2;
    options.raft.max_inflight_messages = 16;
    options.raft.snapshot_chunk_bytes = 4096;  // several chunks per snapshot
    if (node.bootstrap_member) options.bootstrap = bootstrap_;
    options.seed = options_.seed * 31 + node.id.value() * 7 + restarts_++;
    options.snapshot_interval_entries = 200;
    options.log_entries_kept_after_snapshot = 50;
    options.block_cache_bytes = 1 << 20;
    return options;
  }

  void start(Node& node) {
    if (bootstrap_.voters.empty()) bootstrap_ = membership_;
    auto replica = storage::Replica::open(replica_options(node));
    if (!replica.is_ok()) return fail("node " + std::to_string(node.id.value()) + " failed to open: " +
                                      replica.status().to_string());
    node.replica = std::move(replica).value();
    node.last_applied = node.replica->state().applied().index;
    node.last_applied_ts = node.replica->state().applied().ts_micros;
  }

  void crash(Node& node) {
    node.replica.reset();
    std::unique_ptr<FaultEnv> survived = node.env->crash_copy();
    const uint64_t lost = node.env->bytes_lost_in_last_crash();
    node.env = std::move(survived);
    result_.unsynced_bytes_lost += lost;
    node.restart_at_ms = now_ms_ + prng_.range(50, 1500);
    ++result_.crashes;
    note("crash node " + std::to_string(node.id.value()) + " (" + std::to_string(lost) + " unsynced bytes lost)");
  }

  Node& node(NodeId id) { return nodes_[id.value() - 1]; }

  void fail(const std::string& what) {
    if (!result_.ok) return;
    result_.ok = false;
    std::ostringstream out;
    out << "simulation failed at t=" << now_ms_ << "ms (seed " << options_.seed << ", " << options_.nodes
        << " nodes): " << what << "\n  reproduce: " << reproduce_command(options_);
    result_.failure = out.str();
  }

  void note(const std::string& what) {
    if (options_.verbose) std::printf("[%6lld ms] %s\n", static_cast<long long>(now_ms_), what.c_str());
  }

  // ---- one millisecond ----

  void step_once() {
    deliver_due_messages();
    for (Node& n : nodes_) {
      if (!n.replica && n.restart_at_ms >= 0 && now_ms_ >= n.restart_at_ms) {
        n.restart_at_ms = -1;
        start(n);
        note("restart node " + std::to_string(n.id.value()));
      }
      if (n.replica && now_ms_ >= n.next_tick_ms) {
        n.replica->tick(clock_of(n));
        n.next_tick_ms += kTickMillis;
      }
    }
    if (now_ms_ < options_.fault_phase_ms) {
      inject_faults();
    } else {
      advance_membership_cycle(false);
    }
    workload();
    for (Node& n : nodes_) {
      if (n.replica) process(n);
      if (!result_.ok) return;
    }
    check_leaders();
    if (now_ms_ % kCheckpointMillis == 0) checkpoint_states();
  }

  bool link_up(NodeId from, NodeId to) const { return !blocked_.contains({from.value(), to.value()}); }

  void send(const Message& message) {
    const bool faulty = now_ms_ < options_.fault_phase_ms;
    if (faulty && prng_.uniform(1000) < plan_.drop_per_mille) {
      ++result_.messages_dropped;
      return;
    }
    const int copies = faulty && prng_.uniform(1000) < plan_.duplicate_per_mille ? 2 : 1;
    for (int c = 0; c < copies; ++c) {
      const int64_t delay = faulty ? prng_.range(1, plan_.max_delay_ms) : prng_.range(1, 3);
      network_.push(InFlight{now_ms_ + delay, message_sequence_++, message});
    }
  }

  void deliver_due_messages() {
    while (!network_.empty() && network_.top().deliver_at_ms <= now_ms_) {
      InFlight in_flight = network_.top();
      network_.pop();
      const Message& message = in_flight.message;
      if (message.to.value() < 1 || message.to.value() > nodes_.size()) continue;
      Node& target = node(message.to);
      if (!target.replica || !link_up(message.from, message.to)) {
        ++result_.messages_dropped;
        continue;
      }
      // The wire: encode and decode, as the transport will.
      auto decoded = replication::decode_message(replication::encode_message(message));
      if (!decoded.is_ok()) return fail("message does not survive encoding: " + message.describe());
      // Every peer here is correct, so a refusal as malformed (replication::RejectReason) is a false positive of
      // the core's validation of what arrives from the network.
      const Status stepped = target.replica->step(*decoded);
      if (!stepped.is_ok()) {
        return fail("a correct peer's message was refused (" +
                    std::string(replication::reject_reason_name(target.replica->core().last_rejection())) +
                    "): " + message.describe() + ": " + stepped.to_string());
      }
      ++result_.messages_delivered;
    }
  }

  // ---- the workload ----

  Node* leader() {
    Node* found = nullptr;
    for (Node& n : nodes_) {
      if (n.replica && n.replica->core().role() == Role::kLeader) {
        if (found == nullptr || n.replica->core().term() > found->replica->core().term()) found = &n;
      }
    }
    return found;
  }

  Command random_command(storage::Replica& leader_replica) {
    Command command;
    command.database = "db";
    command.container = "c";
    // The schema first, as the leader's state machine sees it (a lost create is simply proposed again).
    if (!leader_replica.state().read_database("db").ok()) {
      command.type = CommandType::kCreateDatabase;
      return command;
    }
    if (!leader_replica.state().read_container("db", "c").ok()) {
      command.type = CommandType::kCreateContainer;
      command.partition_key_path = "/pk";
      command.default_ttl_change = storage::DefaultTtlChange::kSet;
      command.default_ttl_json = "3";
      return command;
    }
    const std::string id = "i" + std::to_string(prng_.uniform(30));
    const std::string pk = "\"p" + std::to_string(prng_.uniform(3)) + "\"";
    const uint64_t choice = prng_.uniform(100);
    if (choice < 55) {
      static constexpr CommandType kWrites[] = {CommandType::kUpsertItem, CommandType::kCreateItem,
                                                CommandType::kReplaceItem};
      command.type = kWrites[prng_.uniform(3)];
      std::string ttl;
      switch (prng_.uniform(4)) {
        case 0: break;
        case 1: ttl = ",\"ttl\":-1"; break;
        default: ttl = ",\"ttl\":" + std::to_string(prng_.range(1, 3)); break;
      }
      command.body = "{\"id\":\"" + id + "\",\"pk\":" + pk + ttl + ",\"n\":" + std::to_string(prng_.uniform(1000)) +
                     "}";
    } else if (choice < 75) {
      command.type = CommandType::kDeleteItem;
      command.partition_key_json = pk;
      command.id = id;
    } else if (choice < 88) {
      command.type = CommandType::kPatchItem;
      command.partition_key_json = pk;
      command.id = id;
      command.body = "[{\"op\":\"incr\",\"path\":\"/n\",\"value\":1}]";
    } else {
      command.type = CommandType::kUpdateContainer;
      const uint64_t policy = prng_.uniform(4);
      if (policy == 0) {
        command.default_ttl_change = storage::DefaultTtlChange::kRemove;
      } else {
        command.default_ttl_change = storage::DefaultTtlChange::kSet;
        command.default_ttl_json = policy == 1 ? "-1" : std::to_string(prng_.range(1, 4));
      }
    }
    return command;
  }

  void workload() {
    Node* lead = leader();
    if (lead == nullptr) return;
    storage::Replica& replica = *lead->replica;
    if (prng_.uniform(100) < 20) {  // a client write
      Command command = random_command(replica);
      auto proposal = replica.propose(command, clock_of(*lead));
      if (proposal.is_ok()) pending_writes_[{lead->id.value(), proposal->index.value()}] = {proposal->term, now_ms_};
    }
    if (now_ms_ - last_time_entry_ms_ >= kTimeEntryMillis) {  // the leader keeps replicated time moving
      (void)replica.propose_time_entry(clock_of(*lead));
      last_time_entry_ms_ = now_ms_;
    }
    if (prng_.uniform(100) < 3) {  // a strong read from a random live node
      Node& reader = nodes_[prng_.uniform(nodes_.size())];
      if (reader.replica) {
        const std::string context = "read-" + std::to_string(read_sequence_++);
        if (reader.replica->read_index(context).is_ok()) {
          pending_reads_[context] = PendingRead{reader.id, highest_acknowledged_};
        }
      }
    }
  }

  // ---- faults ----

  void inject_faults() {
    if (prng_.uniform(1000) < plan_.partition_per_mille_per_ms) toggle_partition();
    if (prng_.uniform(1000) < plan_.crash_per_mille_per_ms) {
      Node& victim = nodes_[prng_.uniform(nodes_.size())];
      if (victim.replica) crash(victim);
    }
    if (prng_.uniform(1000) < plan_.clock_jump_per_mille_per_ms) {
      Node& jumper = nodes_[prng_.uniform(nodes_.size())];
      jumper.clock_offset_us += prng_.range(-3'000'000, 3'000'000);
      note("clock jump on node " + std::to_string(jumper.id.value()));
    }
    if (prng_.uniform(1000) < plan_.transfer_per_mille_per_ms) {
      Node* lead = leader();
      if (lead != nullptr) {
        const auto& voters = lead->replica->core().membership().voters;
        std::vector<NodeId> others(voters.begin(), voters.end());
        NodeId target = others[prng_.uniform(others.size())];
        if (target != lead->id && lead->replica->transfer_leadership(target).is_ok()) {
          ++result_.transfers;
          note("transfer leadership to " + std::to_string(target.value()));
        }
      }
    }
    advance_membership_cycle(prng_.uniform(1000) < plan_.membership_per_mille_per_ms);
  }

  void toggle_partition() {
    if (!blocked_.empty() && prng_.chance(1, 2)) {
      blocked_.clear();
      note("partition healed");
      return;
    }
    // Isolate one node (both ways), or cut one direction of one link.
    const uint64_t victim = 1 + prng_.uniform(nodes_.size());
    if (prng_.chance(2, 3)) {
      for (uint64_t other = 1; other <= nodes_.size(); ++other) {
        if (other == victim) continue;
        blocked_.insert({victim, other});
        blocked_.insert({other, victim});
      }
      note("partition: node " + std::to_string(victim) + " isolated");
    } else {
      const uint64_t other = 1 + (victim % nodes_.size());
      blocked_.insert({victim, other});
      note("partition: " + std::to_string(victim) + " -> " + std::to_string(other) + " cut one way");
    }
    ++result_.partitions;
  }

  // Remove a voter, wipe it, add it back as a learner, promote it: one change at a time.
  enum class MembershipStep { kIdle, kRemoving, kAdding, kPromoting };

  // Keeps the cluster whole (re-adds a missing node as a learner, promotes a caught-up learner) and, when asked to
  // (`may_remove`), starts a cycle by removing a voter. Every step is a proposal on the current leader; a step that
  // does not complete within kMembershipStepMillis is abandoned and reconsidered.
  static constexpr int64_t kMembershipStepMillis = 3000;

  void advance_membership_cycle(bool may_remove) {
    Node* lead = leader();
    if (lead == nullptr) return;
    storage::Replica& replica = *lead->replica;
    const replication::Membership current = replica.core().membership();
    const replication::RaftStatus status = replica.core().status();
    if (membership_cycle_ != MembershipStep::kIdle && now_ms_ - membership_step_since_ms_ > kMembershipStepMillis) {
      membership_cycle_ = MembershipStep::kIdle;  // lost in a leader change: look again
    }
    if (membership_cycle_ == MembershipStep::kRemoving) {
      if (current.contains(cycling_) || status.commit < status.last_index) return;
      // The removed server is retired; a new, empty one takes its id and waits to be added.
      Node& removed = node(cycling_);
      removed.replica.reset();
      removed.env = std::make_unique<FaultEnv>();
      removed.bootstrap_member = false;
      removed.restart_at_ms = -1;
      start(removed);
      membership_cycle_ = MembershipStep::kIdle;
      ++result_.membership_changes;
      return;
    }
    if (membership_cycle_ != MembershipStep::kIdle) {
      const bool done = membership_cycle_ == MembershipStep::kAdding ? current.is_learner(cycling_)
                                                                     : current.is_voter(cycling_);
      if (done && status.commit >= status.last_index) membership_cycle_ = MembershipStep::kIdle;
      return;
    }
    for (Node& n : nodes_) {
      if (!current.contains(n.id) && !n.bootstrap_member && n.replica) {
        propose_membership(replica, ConfigChangeType::kAddLearner, n.id, MembershipStep::kAdding);
        return;
      }
    }
    for (NodeId learner : current.learners) {
      auto progress = status.progress.find(learner);
      if (progress != status.progress.end() && progress->second.match >= status.commit) {
        propose_membership(replica, ConfigChangeType::kPromoteLearner, learner, MembershipStep::kPromoting);
        return;
      }
    }
    if (!may_remove || current.voters.size() < 3 || !current.learners.empty()) return;
    std::vector<NodeId> candidates;
    for (NodeId voter : current.voters) {
      if (voter != lead->id) candidates.push_back(voter);
    }
    propose_membership(replica, ConfigChangeType::kRemoveNode, candidates[prng_.uniform(candidates.size())],
                       MembershipStep::kRemoving);
  }

  void propose_membership(storage::Replica& replica, ConfigChangeType type, NodeId target, MembershipStep step) {
    if (!replica.propose_config_change(ConfigChange{type, target}).is_ok()) return;
    membership_cycle_ = step;
    cycling_ = target;
    membership_step_since_ms_ = now_ms_;
    static constexpr const char* kNames[] = {"add learner", "promote", "remove", "add voter"};
    note(std::string(kNames[static_cast<int>(type)]) + " node " + std::to_string(target.value()));
  }

  void heal() {
    blocked_.clear();
    for (Node& n : nodes_) {
      if (!n.replica && n.restart_at_ms >= 0) {
        n.restart_at_ms = -1;
        start(n);
      }
    }
    heal_acknowledged_mark_ = highest_acknowledged_;
    note("faults healed");
  }

  // ---- outputs and checkers ----

  void process(Node& n) {
    auto output = n.replica->process_ready();
    if (!output.is_ok()) return fail("node " + std::to_string(n.id.value()) + ": " + output.status().to_string());
    n.replica->core().check_invariants();  // aborts with the invariant that broke
    for (const Message& message : output->messages) send(message);
    if (output->snapshot_installed) {  // the state jumped to the leader's snapshot
      ++result_.snapshots_installed;
      n.last_applied = output->snapshot_installed->index;
      n.last_applied_ts = output->snapshot_installed->ts_micros;
    }
    for (const storage::AppliedEntry& applied : output->applied) on_applied(n, applied);
    for (const replication::ReadState& read : output->read_states) on_read_state(n, read);
    if (prng_.uniform(100) < 5) collect_garbage(n);
  }

  void on_applied(Node& n, const storage::AppliedEntry& applied) {
    if (applied.index <= n.last_applied) return;  // replayed after a restart: already checked
    if (applied.index != n.last_applied.next()) {
      return fail("node " + std::to_string(n.id.value()) + " applied index " + std::to_string(applied.index.value()) +
                  " after " + std::to_string(n.last_applied.value()) + " (a gap)");
    }
    if (applied.ts_micros <= n.last_applied_ts && n.last_applied != LogIndex(0)) {
      return fail("entry timestamps went backwards on node " + std::to_string(n.id.value()) + ": index " +
                  std::to_string(applied.index.value()) + " ts " + std::to_string(applied.ts_micros) + " after " +
                  std::to_string(n.last_applied_ts));
    }
    n.last_applied = applied.index;
    n.last_applied_ts = applied.ts_micros;
    // Committed entries agree everywhere. Reconstruct the entry's data hash from the log when still there.
    CommittedEntry entry{applied.term, applied.ts_micros, applied.type, 0};
    auto stored = n.replica->log().entries(applied.index, applied.index.next(), UINT64_MAX);
    if (stored.is_ok()) entry.data_hash = fnv1a(stored->front().data);
    auto [it, inserted] = committed_.try_emplace(applied.index.value(), entry);
    if (!inserted) {
      const CommittedEntry& first = it->second;
      if (first.term != entry.term || first.ts_micros != entry.ts_micros || first.type != entry.type ||
          (first.data_hash != 0 && entry.data_hash != 0 && first.data_hash != entry.data_hash)) {
        return fail("committed entry " + std::to_string(applied.index.value()) + " differs on node " +
                    std::to_string(n.id.value()));
      }
      if (first.data_hash == 0) it->second.data_hash = entry.data_hash;
    } else {
      ++result_.entries_committed;
      auto previous = committed_.find(applied.index.value() - 1);
      if (previous != committed_.end() && previous->second.ts_micros >= entry.ts_micros) {
        return fail("entry " + std::to_string(applied.index.value()) + " is not stamped after its predecessor");
      }
    }
    // The proposer's acknowledgement: the entry it proposed committed at the same index with the same term.
    auto pending = pending_writes_.find({n.id.value(), applied.index.value()});
    if (pending != pending_writes_.end()) {
      if (pending->second.term == applied.term) {
        acknowledged_[applied.index.value()] = applied.term;
        highest_acknowledged_ = std::max(highest_acknowledged_, applied.index);
        ++result_.writes_acknowledged;
      }
      pending_writes_.erase(pending);
    }
  }

  void on_read_state(Node& n, const replication::ReadState& read) {
    auto pending = pending_reads_.find(read.context);
    if (pending == pending_reads_.end() || pending->second.node != n.id) return;
    if (read.index < pending->second.acknowledged_before) {
      return fail("strong read " + read.context + " on node " + std::to_string(n.id.value()) + " got read index " +
                  std::to_string(read.index.value()) + " below acknowledged write " +
                  std::to_string(pending->second.acknowledged_before.value()));
    }
    ++result_.strong_reads_checked;
    pending_reads_.erase(pending);
  }

  void collect_garbage(Node& n) {
    storage::StateMachine& state = n.replica->state();
    auto containers = state.containers();
    if (!containers.is_ok()) return fail("containers(): " + containers.status().to_string());
    for (const storage::ContainerInfo& info : *containers) {
      auto collected = state.collect_expired(info.database, info.container, state.applied().ts_micros, 20);
      if (!collected.is_ok()) return fail("collect_expired: " + collected.status().to_string());
      result_.gc_items_collected += collected->items;
    }
  }

  void check_leaders() {
    for (Node& n : nodes_) {
      if (!n.replica || n.replica->core().role() != Role::kLeader) continue;
      const uint64_t term = n.replica->core().term().value();
      auto [it, inserted] = leaders_.try_emplace(term, n.id.value());
      if (inserted) {
        ++result_.leader_changes;
        note("leader " + std::to_string(n.id.value()) + " in term " + std::to_string(term));
      } else if (it->second != n.id.value()) {
        return fail("two leaders in term " + std::to_string(term) + ": nodes " + std::to_string(it->second) +
                    " and " + std::to_string(n.id.value()));
      }
    }
  }

  // Everything a user could see on this node: containers and every item visible at the applied time.
  uint64_t visible_digest(storage::StateMachine& state) {
    uint64_t hash = fnv1a("state");
    auto containers = state.containers();
    if (!containers.is_ok()) return 0;
    const int64_t now = state.applied().ts_micros;
    for (const storage::ContainerInfo& info : *containers) {
      hash = fnv1a(info.database + "/" + info.container, hash);
      hash = fnv1a(std::to_string(static_cast<int>(info.record.ttl.policy.kind)) + ":" +
                       std::to_string(info.record.ttl.policy.seconds),
                   hash);
      storage::ListRequest request{info.database, info.container, std::nullopt, storage::kMaxListItems, ""};
      do {
        storage::OpResult page = state.list_items(request, now);
        hash = fnv1a(page.body, hash);
        request.continuation = page.continuation;
      } while (!request.continuation.empty());
    }
    return hash;
  }

  void checkpoint_states() {
    for (Node& n : nodes_) {
      if (!n.replica) continue;
      const uint64_t index = n.replica->state().applied().index.value();
      const uint64_t digest = visible_digest(n.replica->state());
      auto [it, inserted] = digests_.try_emplace(index, std::make_pair(digest, n.id.value()));
      if (!inserted && it->second.first != digest) {
        return fail("visible state at applied index " + std::to_string(index) + " differs between nodes " +
                    std::to_string(it->second.second) + " and " + std::to_string(n.id.value()));
      }
    }
  }

  void final_checks() {
    Node* lead = leader();
    if (lead == nullptr) return fail("liveness: no leader " + std::to_string(options_.heal_phase_ms) +
                                     " ms after the faults healed");
    if (highest_acknowledged_ <= heal_acknowledged_mark_) {
      return fail("liveness: no write was acknowledged after the faults healed");
    }
    const LogIndex commit = lead->replica->core().status().commit;
    for (Node& n : nodes_) {
      const bool member = lead->replica->core().membership().contains(n.id);
      if (!member || !n.replica) continue;
      if (n.replica->state().applied().index.value() + 50 < commit.value()) {  // time entries keep arriving: allow a little lag
        return fail("liveness: node " + std::to_string(n.id.value()) + " applied " +
                    std::to_string(n.replica->state().applied().index.value()) + " but the leader committed " +
                    std::to_string(commit.value()));
      }
    }
    for (const auto& [index, term] : acknowledged_) {
      auto it = committed_.find(index);
      if (it == committed_.end() || it->second.term != term) {
        return fail("acknowledged write at index " + std::to_string(index) + " (term " +
                    std::to_string(term.value()) + ") was lost");
      }
    }
    checkpoint_states();
  }

  SimOptions options_;
  Prng prng_;
  FaultPlan plan_{};
  SimResult result_;
  std::vector<Node> nodes_;
  replication::Membership membership_;
  replication::Membership bootstrap_;
  uint64_t restarts_ = 0;
  int64_t now_ms_ = 0;
  std::priority_queue<InFlight, std::vector<InFlight>, std::greater<InFlight>> network_;
  uint64_t message_sequence_ = 0;
  std::set<std::pair<uint64_t, uint64_t>> blocked_;  // (from, to) links that drop everything

  int64_t last_time_entry_ms_ = 0;
  uint64_t read_sequence_ = 0;
  std::map<std::pair<uint64_t, uint64_t>, PendingWrite> pending_writes_;  // (node, index)
  std::map<std::string, PendingRead> pending_reads_;
  std::map<uint64_t, Term> acknowledged_;
  LogIndex highest_acknowledged_;
  LogIndex heal_acknowledged_mark_;
  std::map<uint64_t, CommittedEntry> committed_;
  std::map<uint64_t, uint64_t> leaders_;                              // term -> node
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> digests_;        // applied index -> (digest, node)

  MembershipStep membership_cycle_ = MembershipStep::kIdle;
  NodeId cycling_;
  int64_t membership_step_since_ms_ = 0;
};

}  // namespace

std::string SimResult::summary() const {
  std::ostringstream out;
  out << entries_committed << " entries committed, " << writes_acknowledged << " writes acknowledged, "
      << strong_reads_checked << " strong reads, " << leader_changes << " leaders, " << crashes << " crashes ("
      << unsynced_bytes_lost << " unsynced bytes lost), " << partitions << " partitions, " << transfers
      << " transfers, " << membership_changes << " membership cycles, " << snapshots_installed
      << " snapshots installed, " << gc_items_collected << " items collected, " << messages_delivered
      << " messages delivered, " << messages_dropped << " dropped";
  return out.str();
}

std::string reproduce_command(const SimOptions& options) {
  return "build/tests/sim/mayfly-sim --seed " + std::to_string(options.seed) + " --nodes " +
         std::to_string(options.nodes) + " --fault-ms " + std::to_string(options.fault_phase_ms) + " --heal-ms " +
         std::to_string(options.heal_phase_ms) + " --verbose";
}

SimResult run_simulation(const SimOptions& options) { return Simulation(options).run(); }

}  // namespace mayfly::sim
