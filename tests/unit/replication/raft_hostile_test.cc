// Messages from the wire are validated, never asserted on (issue #10): forged terms, entries whose timestamps,
// indexes or terms are out of order, garbage config entries, rival leaders and acknowledgements of what was never
// sent are refused with a reason and change nothing, and the cluster goes on electing and committing. The decoder
// bounds what a few bytes can make it allocate.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/codec.h"
#include "tests/env.h"
#include "tests/unit/replication/allocation_probe.h"
#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

constexpr uint64_t kSeed = 1010;

// An append from `leader` to `to` continuing `to`'s log with `entries` (indexes/terms/ts as given).
Message append_after_last(TestCluster& cluster, NodeId leader, NodeId to, std::vector<Entry> entries) {
  const RaftStatus status = cluster.core(to).status();
  return Message{.type = MessageType::kAppend,
                 .from = leader,
                 .to = to,
                 .term = cluster.core(leader).term(),
                 .log_term = status.last_term,
                 .index = status.last_index,
                 .entries = std::move(entries),
                 .commit = status.commit};
}

Entry next_entry(const RaftStatus& status, uint64_t offset, Term term, int64_t ts, EntryType type = EntryType::kNormal,
                 std::string data = "x") {
  return Entry{.term = term, .index = LogIndex(status.last_index.value() + offset), .ts_micros = ts, .type = type,
               .data = std::move(data)};
}

// Steps `message` into its recipient and expects a refusal for `reason` that changed neither term nor log.
void expect_refused(TestCluster& cluster, const Message& message, RejectReason reason) {
  RaftCore& core = cluster.core(message.to);
  const RaftStatus before = core.status();
  const Status status = core.step(message);
  EXPECT_FALSE(status.is_ok()) << message.describe();
  EXPECT_EQ(core.last_rejection(), reason) << status.to_string();
  core.check_invariants();
  const RaftStatus after = core.status();
  EXPECT_EQ(after.term, before.term);
  EXPECT_EQ(after.last_index, before.last_index);
  EXPECT_EQ(after.commit, before.commit);
  EXPECT_EQ(after.role, before.role);
}

// The cluster still commits a proposal on its leader, and can elect a new one after losing it.
void expect_cluster_healthy(TestCluster& cluster) {
  cluster.tick_all(50);  // long enough for a leader deposed by a higher term to learn it
  const NodeId lead = cluster.tick_until_leader();
  ASSERT_NE(lead, NodeId(0));
  const Proposal proposal = cluster.propose(lead, "after");
  cluster.tick_all(3);
  for (NodeId id : cluster.ids()) {
    EXPECT_GE(cluster.core(id).status().commit, proposal.index) << "node " << id;
  }
  cluster.isolate(lead);
  cluster.tick_all(60);
  cluster.heal();
  const NodeId next = cluster.tick_until_leader();
  ASSERT_NE(next, NodeId(0));
  EXPECT_LT(cluster.core(next).term(), Term(1000)) << "terms stay sane";
  cluster.propose(next, "after-reelection");
  cluster.tick_all(3);
}

TEST(Hostile, ForgedMaxTermHeartbeatIsRefused) {
  TestCluster cluster(3, kSeed);
  cluster.elect(N(1));
  cluster.propose(N(1), "a");
  const Term leader_term = cluster.core(N(1)).term();
  for (uint64_t forged : {UINT64_MAX, kMaxTerm.value() + 1}) {
    for (NodeId to : {N(1), N(2)}) {  // the leader and a follower
      expect_refused(cluster,
                     Message{.type = MessageType::kHeartbeat, .from = N(3), .to = to, .term = Term(forged),
                             .commit = LogIndex(1'000'000)},
                     RejectReason::kTermOutOfRange);
      // Every other carrier of a term too: a vote request, a response, an append's log_term.
      expect_refused(cluster, Message{.type = MessageType::kVote, .from = N(3), .to = to, .term = Term(forged)},
                     RejectReason::kTermOutOfRange);
      expect_refused(cluster,
                     Message{.type = MessageType::kAppendResponse, .from = N(3), .to = to, .term = Term(forged)},
                     RejectReason::kTermOutOfRange);
    }
  }
  EXPECT_EQ(cluster.core(N(1)).term(), leader_term);
  EXPECT_EQ(cluster.core(N(1)).role(), Role::kLeader);
  expect_cluster_healthy(cluster);
}

TEST(Hostile, TermNextNeverWrapsAndANodeAtTheMaximumDoesNotCampaign) {
  EXPECT_EQ(Term(UINT64_MAX).next(), Term(UINT64_MAX));
  EXPECT_FALSE(Term(UINT64_MAX).has_next());
  EXPECT_EQ(Term(41).next(), Term(42));

  // kMaxTerm itself is in range (documented: a hostile in-range term is adopted; authentication keeps it out).
  TestCluster cluster(3, kSeed + 1);
  cluster.elect(N(1));
  RaftCore& core = cluster.core(N(2));
  ASSERT_TRUE(core.step(Message{.type = MessageType::kHeartbeat, .from = N(3), .to = N(2), .term = kMaxTerm}).is_ok());
  EXPECT_EQ(core.term(), kMaxTerm);
  EXPECT_TRUE(core.term_exhausted());
  // Ticked alone far past any election timeout, it never becomes a (pre-)candidate and its term never moves.
  for (int i = 0; i < 200; ++i) {
    core.tick(cluster.now_micros() + i * TestCluster::kTickMicros);
    core.check_invariants();
    EXPECT_EQ(core.role(), Role::kFollower);
    EXPECT_EQ(core.term(), kMaxTerm);
  }
  // A transfer asking it to campaign now does nothing either.
  ASSERT_TRUE(core.step(Message{.type = MessageType::kTimeoutNow, .from = N(1), .to = N(2), .term = kMaxTerm}).is_ok());
  EXPECT_EQ(core.role(), Role::kFollower);
  EXPECT_EQ(core.term(), kMaxTerm);
}

TEST(Hostile, EntriesWhoseTimestampsDoNotIncreaseAreRefused) {
  TestCluster cluster(3, kSeed + 2);
  cluster.elect(N(1));
  cluster.propose(N(1), "a");
  cluster.propose(N(1), "b");
  const Term term = cluster.core(N(1)).term();
  const RaftStatus follower = cluster.core(N(2)).status();
  const int64_t last_ts = follower.last_ts_micros;

  // Decreasing among themselves.
  expect_refused(cluster,
                 append_after_last(cluster, N(1), N(2),
                                   {next_entry(follower, 1, term, last_ts + 100),
                                    next_entry(follower, 2, term, last_ts + 50)}),
                 RejectReason::kBadEntries);
  // Equal among themselves.
  expect_refused(cluster,
                 append_after_last(cluster, N(1), N(2),
                                   {next_entry(follower, 1, term, last_ts + 100),
                                    next_entry(follower, 2, term, last_ts + 100)}),
                 RejectReason::kBadEntries);
  // Not after the follower's last entry (the assert at the append used to abort here).
  expect_refused(cluster, append_after_last(cluster, N(1), N(2), {next_entry(follower, 1, term, last_ts)}),
                 RejectReason::kBadEntries);
  expect_refused(cluster, append_after_last(cluster, N(1), N(2), {next_entry(follower, 1, term, last_ts - 1'000'000)}),
                 RejectReason::kBadEntries);
  // Outside [0, 2^62] (so that ts + 1 can never overflow).
  expect_refused(cluster, append_after_last(cluster, N(1), N(2), {next_entry(follower, 1, term, INT64_MAX)}),
                 RejectReason::kBadEntries);
  expect_refused(cluster,
                 append_after_last(cluster, N(1), N(2), {next_entry(follower, 1, term, kMaxTimestampMicros + 1)}),
                 RejectReason::kBadEntries);
  // Replacing an uncommitted suffix: the new entry must still come after the entry before it. Node 2 gets entry
  // "c" but the leader never hears its ack (and node 3 is away), so "c" stays uncommitted on node 2.
  cluster.isolate(N(3));
  cluster.set_filter([](const Message& message) { return message.from == N(2); });
  cluster.propose(N(1), "c");
  const RaftStatus with_c = cluster.core(N(2)).status();
  ASSERT_EQ(with_c.last_index, follower.last_index.next());
  ASSERT_EQ(with_c.commit, follower.commit);
  Message replace{.type = MessageType::kAppend,
                  .from = N(3),
                  .to = N(2),
                  .term = term.next(),
                  .log_term = follower.last_term,
                  .index = follower.last_index,
                  .entries = {next_entry(follower, 1, term.next(), last_ts - 5)},
                  .commit = follower.commit};
  expect_refused(cluster, replace, RejectReason::kBadEntries);
  cluster.set_filter({});
  cluster.heal();
  expect_cluster_healthy(cluster);
}

TEST(Hostile, EntriesOutOfOrderOrOverwritingCommittedOnesAreRefused) {
  TestCluster cluster(3, kSeed + 3);
  cluster.elect(N(1));
  for (int i = 0; i < 4; ++i) cluster.propose(N(1), "e" + std::to_string(i));
  cluster.tick_all(2);
  const Term term = cluster.core(N(1)).term();
  const RaftStatus follower = cluster.core(N(2)).status();
  const int64_t ts = follower.last_ts_micros;
  // Not contiguous after `index`.
  expect_refused(cluster, append_after_last(cluster, N(1), N(2), {next_entry(follower, 2, term, ts + 1)}),
                 RejectReason::kBadEntries);
  // Entry term above the message's.
  expect_refused(cluster, append_after_last(cluster, N(1), N(2), {next_entry(follower, 1, term.next(), ts + 1)}),
                 RejectReason::kBadEntries);
  // Entry terms decreasing.
  Message decreasing = append_after_last(cluster, N(1), N(2), {});
  decreasing.term = term.next();
  decreasing.entries = {next_entry(follower, 1, term.next(), ts + 1), next_entry(follower, 2, term, ts + 2)};
  expect_refused(cluster, decreasing, RejectReason::kBadEntries);
  // Indexes that would overflow.
  Message overflow = append_after_last(cluster, N(1), N(2), {});
  overflow.index = LogIndex(UINT64_MAX);
  overflow.entries = {Entry{.term = term, .index = LogIndex(UINT64_MAX), .ts_micros = ts + 1}};
  expect_refused(cluster, overflow, RejectReason::kBadEntries);
  // A higher-term "leader" whose entries conflict with committed ones: the follower only answers with its commit
  // (entries at or below it are known to match) and keeps its log.
  ASSERT_EQ(follower.commit, follower.last_index);
  const std::vector<Entry> log_before = cluster.log_of(N(2));
  const LogIndex base = LogIndex(follower.commit.value() - 2);
  const Message conflicting{.type = MessageType::kAppend,
                            .from = N(3),
                            .to = N(2),
                            .term = term.next(),
                            .log_term = log_before[base.value() - 1].term,
                            .index = base,
                            .entries = {Entry{.term = term.next(), .index = base.next(), .ts_micros = ts + 1}},
                            .commit = base};
  ASSERT_TRUE(cluster.core(N(2)).step(conflicting).is_ok());
  cluster.stabilize();
  EXPECT_EQ(cluster.log_of(N(2)), log_before);
  expect_cluster_healthy(cluster);
}

TEST(Hostile, GarbageOrInapplicableConfigEntriesAreRefused) {
  TestCluster cluster(3, kSeed + 4);
  cluster.elect(N(1));
  cluster.propose(N(1), "a");
  const Term term = cluster.core(N(1)).term();
  const RaftStatus follower = cluster.core(N(2)).status();
  const int64_t ts = follower.last_ts_micros;
  // Does not decode.
  expect_refused(cluster,
                 append_after_last(cluster, N(1), N(2),
                                   {next_entry(follower, 1, term, ts + 1, EntryType::kConfigChange, "garbage")}),
                 RejectReason::kBadConfig);
  // Decodes but does not apply: node 1 is already a voter; node 0 is never a member; removing a non-member.
  for (const ConfigChange& change : {ConfigChange{ConfigChangeType::kAddLearner, N(1)},
                                     ConfigChange{ConfigChangeType::kAddLearner, NodeId(0)},
                                     ConfigChange{ConfigChangeType::kRemoveNode, N(9)}}) {
    expect_refused(cluster,
                   append_after_last(cluster, N(1), N(2),
                                     {next_entry(follower, 1, term, ts + 1, EntryType::kNormal, "fine"),
                                      next_entry(follower, 2, term, ts + 2, EntryType::kConfigChange,
                                                 encode_config_change(change))}),
                   RejectReason::kBadConfig);
  }
  // Two changes that each apply alone but not in sequence (the second removes the learner the first did not add).
  expect_refused(cluster,
                 append_after_last(cluster, N(1), N(2),
                                   {next_entry(follower, 1, term, ts + 1, EntryType::kConfigChange,
                                               encode_config_change({ConfigChangeType::kAddLearner, N(4)})),
                                    next_entry(follower, 2, term, ts + 2, EntryType::kConfigChange,
                                               encode_config_change({ConfigChangeType::kAddLearner, N(4)}))}),
                 RejectReason::kBadConfig);
  EXPECT_EQ(cluster.core(N(2)).membership().voters.size(), 3u);
  expect_cluster_healthy(cluster);
}

TEST(Hostile, RivalLeadersAndAcknowledgementsOfWhatWasNeverSentAreRefused) {
  TestCluster cluster(3, kSeed + 5);
  cluster.elect(N(1));
  cluster.propose(N(1), "a");
  const Term term = cluster.core(N(1)).term();
  // Another node claiming to lead the leader's own term (used to abort on "election safety").
  expect_refused(cluster, Message{.type = MessageType::kHeartbeat, .from = N(3), .to = N(1), .term = term},
                 RejectReason::kRivalLeader);
  expect_refused(cluster, append_after_last(cluster, N(3), N(1), {}), RejectReason::kRivalLeader);
  // An ack past the leader's log, and of a read round never started.
  expect_refused(cluster,
                 Message{.type = MessageType::kAppendResponse, .from = N(2), .to = N(1), .term = term,
                         .index = LogIndex(1'000'000)},
                 RejectReason::kBadResponse);
  expect_refused(cluster,
                 Message{.type = MessageType::kHeartbeatResponse, .from = N(2), .to = N(1), .term = term,
                         .read_round = 1'000'000},
                 RejectReason::kBadResponse);
  // Snapshot metadata above the message's term, without voters, or a chunk outside the snapshot.
  const SnapshotMetadata good{.index = LogIndex(50), .term = term, .ts_micros = INT64_MAX / 2,
                              .membership = {.voters = {N(1), N(2), N(3)}}, .size_bytes = 10};
  Message snapshot{.type = MessageType::kSnapshot, .from = N(1), .to = N(2), .term = term, .snapshot = good,
                   .snapshot_chunk = "0123456789", .snapshot_done = true};
  Message bad = snapshot;
  bad.snapshot.term = term.next();
  expect_refused(cluster, bad, RejectReason::kBadSnapshot);
  bad = snapshot;
  bad.snapshot.membership.voters.clear();
  expect_refused(cluster, bad, RejectReason::kBadSnapshot);
  bad = snapshot;
  bad.snapshot_offset = UINT64_MAX - 2;
  expect_refused(cluster, bad, RejectReason::kBadSnapshot);
  bad = snapshot;
  bad.snapshot.ts_micros = 1;  // time going back below what the follower committed
  expect_refused(cluster, bad, RejectReason::kBadSnapshot);
  bad.snapshot.ts_micros = INT64_MAX;
  expect_refused(cluster, bad, RejectReason::kBadSnapshot);
  expect_cluster_healthy(cluster);
}

// Random forgeries: messages the cluster really sent, with fields replaced by edge values, stepped into every
// node. None may trip an assert or break an invariant of the core (check_invariants after every step); each is
// either acted on or refused. Forged but well-formed content may still mislead a node (that is what peer
// authentication is for), so this drives the cores by hand, without the harness's cross-node checkers.
uint64_t edge_value(Prng& prng, uint64_t near) {
  switch (prng.uniform(9)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return near;
    case 3: return near + 1;
    case 4: return near > 0 ? near - 1 : 0;
    case 5: return uint64_t{1} << 62;
    case 6: return kMaxTerm.value();
    case 7: return kMaxTerm.value() + 1;
    default: return UINT64_MAX;
  }
}

Message mutate(Prng& prng, Message message, const RaftStatus& target) {
  const int changes = static_cast<int>(prng.range(1, 4));
  for (int i = 0; i < changes; ++i) {
    switch (prng.uniform(12)) {
      case 0: message.type = static_cast<MessageType>(prng.uniform(kMaxMessageType + 1)); break;
      case 1: message.term = Term(edge_value(prng, target.term.value())); break;
      case 2: message.log_term = Term(edge_value(prng, target.last_term.value())); break;
      case 3: message.index = LogIndex(edge_value(prng, target.last_index.value())); break;
      case 4: message.commit = LogIndex(edge_value(prng, target.commit.value())); break;
      case 5: message.reject = !message.reject; message.reject_hint = LogIndex(edge_value(prng, 3)); break;
      case 6: message.read_round = edge_value(prng, 5); break;
      case 7: message.from = NodeId(prng.uniform(5)); break;
      case 8: {  // entries: a fresh run after `index`, with edge terms and timestamps and any type
        message.entries.clear();
        const uint64_t count = prng.uniform(4);
        for (uint64_t k = 0; k < count; ++k) {
          const int64_t ts = prng.chance(1, 2) ? target.last_ts_micros + static_cast<int64_t>(k) + 1
                                               : static_cast<int64_t>(edge_value(prng, target.last_ts_micros));
          std::string data = prng.chance(1, 2) ? encode_config_change({static_cast<ConfigChangeType>(prng.uniform(4)),
                                                                       NodeId(prng.uniform(6))})
                                               : std::string("junk");
          message.entries.push_back(Entry{.term = prng.chance(1, 2) ? message.term : message.log_term,
                                          .index = LogIndex(message.index.value() + k + 1),
                                          .ts_micros = ts,
                                          .type = static_cast<EntryType>(prng.uniform(kMaxEntryType + 1)),
                                          .data = std::move(data)});
        }
        break;
      }
      case 9:
        message.snapshot.index = LogIndex(edge_value(prng, target.commit.value()));
        message.snapshot.term = Term(edge_value(prng, target.term.value()));
        message.snapshot.ts_micros = static_cast<int64_t>(edge_value(prng, target.last_ts_micros));
        break;
      case 10:
        message.snapshot.size_bytes = edge_value(prng, message.snapshot_chunk.size());
        message.snapshot_offset = edge_value(prng, 0);
        message.snapshot_done = prng.chance(1, 2);
        break;
      default: message.leadership_transfer = !message.leadership_transfer; break;
    }
  }
  return message;
}

TEST(Hostile, RandomForgeriesNeverTripAnAssertOrBreakAnInvariant) {
  const uint64_t seed = testing_env::env_or("MAYFLY_SEED", kSeed + 100);
  std::printf("RandomForgeries seed=%llu (replay: MAYFLY_SEED=%llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  Prng prng(seed);
  int refused = 0;
  // Forged terms soon depose the leader; a fresh cluster per epoch keeps leader paths exercised too.
  for (int epoch = 0; epoch < 50; ++epoch) {
    TestCluster cluster(3, prng.next_u64());
    cluster.elect(N(prng.range(1, 3)));
    for (int i = 0; i < 5; ++i) cluster.propose(cluster.leader(), "p" + std::to_string(i));
    cluster.tick_all(3);
    const std::vector<Message> samples = cluster.sent_log();
    ASSERT_FALSE(samples.empty());
    for (int round = 0; round < 2'000; ++round) {
      const NodeId to = N(prng.range(1, 3));
      RaftCore& core = cluster.core(to);
      Message forged = mutate(prng, samples[prng.uniform(samples.size())], core.status());
      forged.to = to;
      // Through the wire encoding, as the transport would (what does not round-trip is refused by the decoder).
      const Result<Message> decoded = decode_message(encode_message(forged));
      if (!decoded.is_ok()) continue;
      if (!core.step(*decoded).is_ok()) ++refused;
      core.check_invariants();
      // The node's reaction: persisted, its messages stepped into their targets (correct nodes, forged state).
      for (const Message& reply : drain(core, *cluster.node(to).storage)) {
        if (reply.to < N(1) || reply.to > N(3) || reply.to == to) continue;
        (void)cluster.core(reply.to).step(reply);
        cluster.core(reply.to).check_invariants();
        (void)drain(cluster.core(reply.to), *cluster.node(reply.to).storage);
      }
      if (round % 64 == 0) {
        for (NodeId id : cluster.ids()) {
          cluster.core(id).tick(cluster.now_micros() + round * TestCluster::kTickMicros);
          cluster.core(id).check_invariants();
          (void)drain(cluster.core(id), *cluster.node(id).storage);
        }
      }
    }
  }
  EXPECT_GT(refused, 5000) << "the forgeries exercise the validation";
}

// --- Decoding ---

std::string message_header_with_entry_count(uint64_t count) {
  std::string bytes;
  codec::put_u8(bytes, 1);  // format version
  codec::put_u8(bytes, static_cast<uint8_t>(MessageType::kAppend));
  for (uint64_t id : {2, 1, 5, 4, 10}) codec::put_varint(bytes, id);  // from, to, term, log_term, index
  codec::put_varint(bytes, count);
  return bytes;
}

size_t largest_allocation_decoding(std::string_view bytes, bool& decoded_ok) {
  const mayfly::testing::AllocationProbe probe;
  decoded_ok = decode_message(bytes).is_ok();
  return probe.largest();
}

TEST(HostileDecode, AHundredThousandEntryCountInAFewBytesIsRefusedWithoutAllocating) {
  bool ok = true;
  const std::string few = message_header_with_entry_count(100'000);
  EXPECT_LT(few.size(), 16u);
  EXPECT_LT(largest_allocation_decoding(few, ok), size_t{4096});
  EXPECT_FALSE(ok);
  // Backed by 1 byte per claimed entry (less than the 5 an entry takes at least): refused before any entry vector
  // is sized — before, that reserved 100k entries (~6 MB) for 100 kB of input.
  std::string padded = message_header_with_entry_count(100'000);
  padded.append(100'000, '\0');
  EXPECT_LT(largest_allocation_decoding(padded, ok), padded.size() * 2);
  EXPECT_FALSE(ok);
  // Past the message size bound.
  std::string huge = message_header_with_entry_count(0);
  huge.append(kMaxEncodedMessageBytes, '\0');
  EXPECT_FALSE(decode_message(huge).is_ok());
}

TEST(HostileDecode, MembershipCountsAreBounded) {
  Message message;
  for (uint64_t id = 1; id <= kMaxMembers + 1; ++id) message.snapshot.membership.voters.insert(NodeId(id));
  EXPECT_FALSE(decode_message(encode_message(message)).is_ok());
  message.snapshot.membership.voters.erase(NodeId(kMaxMembers + 1));
  EXPECT_TRUE(decode_message(encode_message(message)).is_ok());
}

TEST(HostileDecode, AnHonestFullAppendStillDecodes) {
  // The largest append the core sends under mayflyd's limits: 4 MiB of entries (32 bytes charged per entry).
  Message message{.type = MessageType::kAppend, .from = N(1), .to = N(2), .term = Term(3)};
  const size_t count = (size_t{4} << 20) / Entry::kOverheadBytes;
  for (size_t i = 0; i < count; ++i) {
    message.entries.push_back(Entry{.term = Term(3), .index = LogIndex(i + 1),
                                    .ts_micros = 1'700'000'000'000'000 + static_cast<int64_t>(i),
                                    .type = EntryType::kEmpty});
  }
  const Result<Message> decoded = decode_message(encode_message(message));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->entries.size(), count);
}

}  // namespace
}  // namespace mayfly::replication::testing
