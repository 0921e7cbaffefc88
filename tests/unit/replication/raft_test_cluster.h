// TestCluster: N Raft cores in one thread with a deterministic, seeded network — the smallest harness that runs the
// production core like a driver would (persist → send → apply → advance), so tests can drop, partition, crash and
// restart at will. Checkers run on every step:
//   - Election Safety: at most one leader per term, ever;
//   - State Machine Safety / Log Matching: every node applies the same entry at the same index;
//   - replicated time: ts increases strictly in apply order on every node;
//   - RaftCore::check_invariants after every call.
// A later simulator (tests/sim) can grow from this: it adds delays, duplication and disk faults.
//
// Thread-safety: none; one test, one thread.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/codec.h"
#include "common/prng.h"
#include "replication/codec.h"
#include "replication/log_storage.h"
#include "replication/raft_core.h"

namespace mayfly::replication::testing {

inline NodeId N(uint64_t id) { return NodeId(id); }

inline RaftConfig test_config(NodeId self) {
  RaftConfig config;
  config.self = self;
  config.election_timeout_ticks = 10;
  config.heartbeat_interval_ticks = 1;
  config.max_inflight_messages = 4;
  config.max_message_bytes = 4096;
  config.snapshot_chunk_bytes = 64;
  return config;
}

// The state machine of a test node: the data of every normal entry applied, in order.
inline std::string encode_state(const std::vector<std::string>& state) {
  std::string out;
  codec::put_varint(out, state.size());
  for (const std::string& item : state) codec::put_bytes(out, item);
  return out;
}

inline std::vector<std::string> decode_state(std::string_view bytes) {
  codec::Reader reader(bytes);
  uint64_t count = 0;
  EXPECT_TRUE(reader.get_varint(count));
  std::vector<std::string> state;
  for (uint64_t i = 0; i < count; ++i) {
    std::string_view item;
    EXPECT_TRUE(reader.get_bytes(item));
    state.emplace_back(item);
  }
  EXPECT_TRUE(reader.done());
  return state;
}

struct TestNode {
  NodeId id;
  RaftConfig config;
  std::unique_ptr<MemoryLogStorage> storage;
  std::unique_ptr<RaftCore> core;  // null while crashed
  std::vector<std::string> state;  // state machine contents
  std::vector<Entry> applied_entries;  // entries applied since start (not those covered by an installed snapshot)
  LogIndex applied_index;
  int64_t applied_ts_micros = 0;
  int64_t clock_offset_micros = 0;
  std::vector<ReadState> read_states;
  int snapshots_installed = 0;
};

class TestCluster {
 public:
  // Nodes 1..voters, all voters of a fresh cluster.
  TestCluster(int voters, uint64_t seed, std::function<void(RaftConfig&)> tune = {})
      : seed_(seed), prng_(seed), tune_(std::move(tune)) {
    std::printf("TestCluster seed=%llu\n", static_cast<unsigned long long>(seed));
    for (int i = 1; i <= voters; ++i) bootstrap_.voters.insert(N(i));
    for (int i = 1; i <= voters; ++i) add_node(N(i), bootstrap_);
  }

  // A node with its own storage. `bootstrap` is empty for a node that joins an existing cluster.
  void add_node(NodeId id, const Membership& bootstrap) {
    TestNode& node = nodes_[id];
    node.id = id;
    node.config = test_config(id);
    if (tune_) tune_(node.config);
    node.storage = std::make_unique<MemoryLogStorage>(bootstrap);
    start(node);
  }

  TestNode& node(NodeId id) { return nodes_.at(id); }
  RaftCore& core(NodeId id) {
    EXPECT_NE(nodes_.at(id).core, nullptr) << "node " << id << " is down";
    return *nodes_.at(id).core;
  }
  std::vector<NodeId> ids() const {
    std::vector<NodeId> out;
    for (const auto& [id, node] : nodes_) out.push_back(id);
    return out;
  }
  int64_t now_micros() const { return now_micros_; }
  Prng& prng() { return prng_; }

  // --- Network faults ---
  void isolate(NodeId id) { isolated_.insert(id); }
  void heal() {
    isolated_.clear();
    cut_links_.clear();
  }
  void cut(NodeId a, NodeId b) {
    cut_links_.insert({a, b});
    cut_links_.insert({b, a});
  }
  void set_drop_percent(uint64_t percent) { drop_percent_ = percent; }
  // Return true to drop a message (after partitions and random drops).
  void set_filter(std::function<bool(const Message&)> filter) { filter_ = std::move(filter); }
  // Counts of delivered messages by type.
  int delivered(MessageType type) const {
    auto it = delivered_.find(type);
    return it == delivered_.end() ? 0 : it->second;
  }
  void reset_counts() { delivered_.clear(); }
  std::vector<Message>& sent_log() { return sent_log_; }

  // --- Crashes ---
  // Loses nothing that was persisted (the driver persists before acking); the state machine is durable too.
  void crash(NodeId id) { nodes_.at(id).core.reset(); }
  void restart(NodeId id) { start(nodes_.at(id)); }

  // Replaces `id`'s persisted log after the bootstrap entries, and its hard state (a node that went through some
  // history), and restarts it.
  void reset_log(NodeId id, const std::vector<Entry>& entries, const HardState& hard_state) {
    TestNode& n = nodes_.at(id);
    n.core.reset();
    n.storage = std::make_unique<MemoryLogStorage>(bootstrap_);
    ASSERT_TRUE(n.storage->append(entries).is_ok());
    n.storage->set_hard_state(hard_state);
    n.applied_index = LogIndex(0);
    start(n);
  }

  // The persisted log of `id` (after stabilize() nothing is left unpersisted).
  std::vector<Entry> log_of(NodeId id) {
    const MemoryLogStorage& storage = *nodes_.at(id).storage;
    if (storage.last_index() < storage.first_index()) return {};
    Result<std::vector<Entry>> entries =
        storage.entries(storage.first_index(), storage.last_index().next(), UINT64_MAX);
    EXPECT_TRUE(entries.is_ok());
    return entries.is_ok() ? *entries : std::vector<Entry>{};
  }

  // Every entry some node applied, by index.
  const std::map<uint64_t, Entry>& committed() const { return committed_; }

  // --- Driving ---
  // Handles every pending Ready and delivers every message until the cluster is quiet.
  void stabilize(int max_rounds = 10000) {
    for (int round = 0; round < max_rounds; ++round) {
      bool progressed = false;
      for (auto& [id, node] : nodes_) {
        if (node.core && node.core->has_ready()) {
          handle_ready(node);
          progressed = true;
        }
      }
      if (!queue_.empty()) {
        deliver_one();
        progressed = true;
      }
      if (!progressed) return;
    }
    ADD_FAILURE() << "cluster did not stabilize; seed=" << seed_;
  }

  // One tick on every live node (clock advances by tick_micros), then stabilize.
  void tick_all(int ticks = 1) {
    for (int i = 0; i < ticks; ++i) {
      now_micros_ += kTickMicros;
      for (auto& [id, node] : nodes_) {
        if (!node.core) continue;
        node.core->tick(now_micros_ + node.clock_offset_micros);
        node.core->check_invariants();
      }
      stabilize();
    }
  }

  // Makes `id` campaign now (as a leadership transfer would, so voters in a leader's lease still answer), then
  // ticks only `id` until it leads. Deterministic: nobody else campaigns.
  void elect(NodeId id, int max_ticks = 200) {
    const NodeId other = nodes_.begin()->first == id ? std::next(nodes_.begin())->first : nodes_.begin()->first;
    if (core(id).role() != Role::kLeader && other != id) {
      const Status status =
          core(id).step(Message{.type = MessageType::kTimeoutNow, .from = other, .to = id, .term = core(id).term()});
      ASSERT_TRUE(status.is_ok()) << status.to_string();
      core(id).check_invariants();
      stabilize();
    }
    for (int i = 0; i < max_ticks && core(id).role() != Role::kLeader; ++i) {
      now_micros_ += kTickMicros;
      core(id).tick(now_micros_ + node(id).clock_offset_micros);
      core(id).check_invariants();
      stabilize();
    }
    ASSERT_EQ(core(id).role(), Role::kLeader) << "node " << id << " did not win; seed=" << seed_;
    stabilize();
  }

  // The leader of the highest term among live nodes, or 0.
  NodeId leader() const {
    NodeId best;
    Term best_term;
    for (const auto& [id, node] : nodes_) {
      if (node.core && node.core->role() == Role::kLeader && node.core->term() >= best_term) {
        best = id;
        best_term = node.core->term();
      }
    }
    return best;
  }

  // Ticks everyone until some node leads and every live, connected node follows it.
  NodeId tick_until_leader(int max_ticks = 500) {
    for (int i = 0; i < max_ticks; ++i) {
      const NodeId lead = leader();
      if (lead != NodeId(0)) return lead;
      tick_all();
    }
    ADD_FAILURE() << "no leader after " << max_ticks << " ticks; seed=" << seed_;
    return NodeId(0);
  }

  // Proposes on `id` and stabilizes; returns the proposal.
  Proposal propose(NodeId id, const std::string& data) {
    Result<Proposal> proposal = core(id).propose(data, now_micros_ + node(id).clock_offset_micros);
    EXPECT_TRUE(proposal.is_ok()) << proposal.status().to_string();
    core(id).check_invariants();
    stabilize();
    return proposal.is_ok() ? *proposal : Proposal{};
  }

  // Takes a snapshot of `id`'s state machine at its applied index and compacts its log up to it.
  void snapshot_and_compact(NodeId id) {
    TestNode& n = node(id);
    const LogIndex index = n.applied_index;
    if (index <= n.storage->snapshot_metadata().index) return;  // nothing new to cover
    ASSERT_TRUE(n.storage->create_snapshot(index, n.core->membership_at(index), encode_state(n.state)).is_ok());
    ASSERT_TRUE(n.storage->compact(index).is_ok());
    n.core->check_invariants();
  }

  // Every live node has applied exactly `count` normal entries with the same data.
  void expect_states_equal() {
    const std::vector<std::string>* reference = nullptr;
    for (auto& [id, node] : nodes_) {
      if (!node.core) continue;
      if (reference == nullptr) {
        reference = &node.state;
      } else {
        EXPECT_EQ(node.state, *reference) << "node " << id << " diverges; seed=" << seed_;
      }
    }
  }

  static constexpr int64_t kTickMicros = 10'000;

 private:
  void start(TestNode& node) {
    Result<std::unique_ptr<RaftCore>> core =
        RaftCore::create(node.config, *node.storage, prng_.fork(), node.applied_index);
    ASSERT_TRUE(core.is_ok()) << core.status().to_string();
    node.core = std::move(core).value();
    node.core->check_invariants();
  }

  void handle_ready(TestNode& node) {
    Ready ready = node.core->ready();
    check_election_safety(node);
    for (Message& message : ready.messages) send(std::move(message));
    if (ready.snapshot) {
      ASSERT_TRUE(node.storage->apply_snapshot(*ready.snapshot).is_ok());
    }
    ASSERT_TRUE(node.storage->append(ready.entries).is_ok());
    if (ready.hard_state) node.storage->set_hard_state(*ready.hard_state);
    for (Message& message : ready.messages_after_persist) send(std::move(message));
    if (ready.snapshot) {
      node.state = decode_state(ready.snapshot->data);
      node.applied_index = ready.snapshot->metadata.index;
      node.applied_ts_micros = ready.snapshot->metadata.ts_micros;
      ++node.snapshots_installed;
    }
    for (const Entry& entry : ready.committed_entries) apply(node, entry);
    for (ReadState& read : ready.read_states) node.read_states.push_back(std::move(read));
    node.core->advance(ready);
    node.core->check_invariants();
  }

  void apply(TestNode& node, const Entry& entry) {
    ASSERT_EQ(entry.index, node.applied_index.next()) << "node " << node.id << " applies out of order";
    ASSERT_GT(entry.ts_micros, node.applied_ts_micros) << "ts must increase along the log; seed=" << seed_;
    auto [it, fresh] = committed_.try_emplace(entry.index.value(), entry);
    ASSERT_EQ(it->second, entry) << "node " << node.id << " applied a different entry at " << entry.index
                                 << "; seed=" << seed_;
    (void)fresh;
    node.applied_index = entry.index;
    node.applied_ts_micros = entry.ts_micros;
    node.applied_entries.push_back(entry);
    if (entry.type == EntryType::kNormal) node.state.push_back(entry.data);
  }

  void check_election_safety(const TestNode& node) {
    if (node.core->role() != Role::kLeader) return;
    auto [it, fresh] = leader_by_term_.try_emplace(node.core->term().value(), node.id);
    (void)fresh;
    ASSERT_EQ(it->second, node.id) << "two leaders in term " << node.core->term() << "; seed=" << seed_;
  }

  void send(Message message) {
    // Round-trip every message through the wire encoding, as the real transport does.
    Result<Message> decoded = decode_message(encode_message(message));
    ASSERT_TRUE(decoded.is_ok());
    ASSERT_EQ(*decoded, message);
    sent_log_.push_back(message);
    queue_.push_back(std::move(message));
  }

  bool dropped(const Message& message) {
    if (isolated_.contains(message.from) || isolated_.contains(message.to)) return true;
    if (cut_links_.contains({message.from, message.to})) return true;
    if (drop_percent_ > 0 && prng_.chance(drop_percent_, 100)) return true;
    return filter_ && filter_(message);
  }

  void deliver_one() {
    Message message = std::move(queue_.front());
    queue_.pop_front();
    auto it = nodes_.find(message.to);
    if (it == nodes_.end() || !it->second.core || dropped(message)) return;
    ++delivered_[message.type];
    const Status status = it->second.core->step(message);
    EXPECT_TRUE(status.is_ok()) << status.to_string() << " for " << message.describe();
    it->second.core->check_invariants();
    check_election_safety(it->second);
  }

  uint64_t seed_;
  Prng prng_;
  std::function<void(RaftConfig&)> tune_;
  Membership bootstrap_;
  std::map<NodeId, TestNode> nodes_;
  std::deque<Message> queue_;
  std::set<NodeId> isolated_;
  std::set<std::pair<NodeId, NodeId>> cut_links_;
  uint64_t drop_percent_ = 0;
  std::function<bool(const Message&)> filter_;
  std::map<MessageType, int> delivered_;
  std::vector<Message> sent_log_;
  std::map<uint64_t, Entry> committed_;       // index → the entry applied there (first applier)
  std::map<uint64_t, NodeId> leader_by_term_;  // term → its only leader
  int64_t now_micros_ = 1'000'000'000;
};

// For tests that drive one core by hand: handles its Ready like a driver (persist into `storage`, apply nothing)
// and returns the messages it wanted to send.
inline std::vector<Message> drain(RaftCore& core, MemoryLogStorage& storage) {
  std::vector<Message> out;
  while (core.has_ready()) {
    Ready ready = core.ready();
    if (ready.snapshot) {
      EXPECT_TRUE(storage.apply_snapshot(*ready.snapshot).is_ok());
    }
    EXPECT_TRUE(storage.append(ready.entries).is_ok());
    if (ready.hard_state) storage.set_hard_state(*ready.hard_state);
    for (Message& message : ready.messages) out.push_back(std::move(message));
    for (Message& message : ready.messages_after_persist) out.push_back(std::move(message));
    core.advance(ready);
    core.check_invariants();
  }
  return out;
}

inline Entry make_entry(uint64_t index, uint64_t term, std::string data = "") {
  return Entry{.term = Term(term), .index = LogIndex(index), .ts_micros = static_cast<int64_t>(index) * 10,
               .type = EntryType::kNormal, .data = std::move(data)};
}

}  // namespace mayfly::replication::testing
