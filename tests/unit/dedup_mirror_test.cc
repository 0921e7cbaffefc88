// The exactly-once table's mirror in memory (storage/write_dedup.h, "The table in memory"): a state machine that reads
// the table from its mirror gives the same answers and stores byte-identical LevelDB contents (every key, replicated
// and node-local) as one that reads the table from LevelDB (StoreOptions::dedup_in_memory off), over random logs of
// writes with ids — new clients, re-sends, acknowledgements of a few and of many, delayed copies, keys' clients and
// anonymous ones sharing ids, idle expiry, evictions and every kind of refusal — applied in random apply groups, with
// the mirrored machine restarted (its mirror loaded again, cold) and snapshots of another table installed in between.
//
// The table's bounds are large (a million clients, 256 MiB); the runs reach them by starting from a table whose
// totals (and one key's share, one client's record) are already near them, written into both stores before the first
// apply: a consistent table as far as either read path is concerned.
//
// Reproduce a failure: MAYFLY_MIRROR_SEED=<seed printed> ./dedup_mirror_test
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/codec.h"
#include "common/prng.h"
#include "storage/write_dedup.h"
#include "tests/env.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

using Contents = std::vector<std::pair<std::string, std::string>>;

// Every key and value in the store's LevelDB, in key order.
Contents contents(StateMachine& machine) {
  Contents out;
  std::unique_ptr<leveldb::Iterator> it(machine.leveldb()->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) out.emplace_back(it->key().ToString(), it->value().ToString());
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

// The first difference between two stores' contents, for a readable failure.
std::string first_difference(const Contents& got, const Contents& expected) {
  const auto hex = [](const std::string& bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes.substr(0, 48)) {
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
    return out;
  };
  for (size_t i = 0; i < std::max(got.size(), expected.size()); ++i) {
    if (i >= got.size()) return "missing key " + hex(expected[i].first);
    if (i >= expected.size()) return "extra key " + hex(got[i].first);
    if (got[i].first != expected[i].first) return "key " + hex(got[i].first) + " where " + hex(expected[i].first);
    if (got[i].second != expected[i].second) {
      return "value of " + hex(got[i].first) + ": " + hex(got[i].second) + " where " + hex(expected[i].second);
    }
  }
  return "none";
}

void expect_same_answer(const OpResult& got, const OpResult& expected, const std::string& where) {
  EXPECT_EQ(got.code, expected.code) << where << ": " << got.message << " / " << expected.message;
  EXPECT_EQ(got.done, expected.done) << where;
  EXPECT_EQ(got.substatus, expected.substatus) << where;
  EXPECT_EQ(got.message, expected.message) << where;
  EXPECT_EQ(got.body, expected.body) << where;
  EXPECT_EQ(got.etag, expected.etag) << where;
  EXPECT_EQ(got.ts_micros, expected.ts_micros) << where;
  EXPECT_EQ(got.duplicate, expected.duplicate) << where;
  EXPECT_EQ(got.dedup_refusal == nullptr, expected.dedup_refusal == nullptr) << where;
  if (got.dedup_refusal != nullptr && expected.dedup_refusal != nullptr) {
    EXPECT_STREQ(got.dedup_refusal, expected.dedup_refusal) << where;
  }
}

std::unique_ptr<StateMachine> open_store(const std::string& path, bool in_memory) {
  StoreOptions options;
  options.path = path;
  options.dedup_in_memory = in_memory;
  Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
  return opened.is_ok() ? std::move(opened).value() : nullptr;
}

// A store reading the table from its mirror and one reading it from LevelDB, fed the same log.
class Twin {
 public:
  Twin() : mirrored_(open_store(mirrored_dir_.path() + "/db", true)),
           reference_(open_store(reference_dir_.path() + "/db", false)) {}

  bool ok() const { return mirrored_ != nullptr && reference_ != nullptr; }
  StateMachine& mirrored() { return *mirrored_; }
  StateMachine& reference() { return *reference_; }
  uint64_t next_index() const { return next_index_; }

  // Applies at the next index on both; the answers must be the same.
  OpResult apply(const Command& command, int64_t ts, const std::string& where) {
    const LogIndex index(next_index_++);
    Result<OpResult> got = mirrored_->apply(command, index, ts);
    Result<OpResult> expected = reference_->apply(command, index, ts);
    EXPECT_TRUE(got.is_ok()) << where << ": " << got.status().to_string();
    EXPECT_TRUE(expected.is_ok()) << where << ": " << expected.status().to_string();
    if (!got.is_ok() || !expected.is_ok()) return OpResult::error(StatusCode::kInternal, "apply failed");
    expect_same_answer(*got, *expected, where);
    return *got;
  }

  void begin_group() {
    mirrored_->begin_apply_group();
    reference_->begin_apply_group();
  }
  void end_group() {
    EXPECT_TRUE(mirrored_->end_apply_group().is_ok());
    EXPECT_TRUE(reference_->end_apply_group().is_ok());
  }

  // Outside a group: the stores hold the same keys and values, every one of them.
  void expect_same_stores(const std::string& where) {
    const Contents got = contents(*mirrored_);
    const Contents expected = contents(*reference_);
    EXPECT_TRUE(got == expected) << where << ": first difference: " << first_difference(got, expected);
  }

  // Closes and opens the mirrored store again: its mirror starts cold.
  void restart_mirrored() {
    mirrored_.reset();
    mirrored_ = open_store(mirrored_dir_.path() + "/db", true);
  }

  void install(const std::string& snapshot) {
    EXPECT_TRUE(mirrored_->install_snapshot(snapshot).is_ok());
    EXPECT_TRUE(reference_->install_snapshot(snapshot).is_ok());
    next_index_ = reference_->applied().index.value() + 1;
  }

  // Writes `batch` into both stores directly (before the first apply: the starting table).
  void write_both(leveldb::WriteBatch& batch) {
    ASSERT_TRUE(mirrored_->leveldb()->Write(leveldb::WriteOptions(), &batch).ok());
    ASSERT_TRUE(reference_->leveldb()->Write(leveldb::WriteOptions(), &batch).ok());
  }

 private:
  TempDir mirrored_dir_, reference_dir_;
  std::unique_ptr<StateMachine> mirrored_, reference_;
  uint64_t next_index_ = 1;
};

// The stored table's encodings (storage/write_dedup.cc), for writing a starting table.
std::string totals_value(uint64_t clients, int64_t result_bytes, int64_t last_eviction_micros) {
  std::string value;
  codec::put_u8(value, 1);
  codec::put_varint(value, clients);
  codec::put_varint_signed(value, result_bytes);
  codec::put_varint_signed(value, last_eviction_micros);
  return value;
}
std::string share_value(uint64_t clients, int64_t result_bytes) {
  std::string value;
  codec::put_u8(value, 1);
  codec::put_varint(value, clients);
  codec::put_varint_signed(value, result_bytes);
  return value;
}
std::string tagged(uint8_t tag, uint64_t a) {
  std::string key(1, static_cast<char>(tag));
  codec::put_u64_be(key, a);
  return key;
}

// One writer of the log: a client id under an owner (0: anonymous), its next sequence and lowest unanswered one.
struct ClientModel {
  uint64_t client = 0;
  uint64_t owner = 0;
  uint64_t next = 1;
  uint64_t first_unacknowledged = 1;
  bool acknowledges = true;  // false: keeps every outcome (until the table refuses it)
};

// A random log, generated step by step (the same generator drives a donor store for snapshots).
class Workload {
 public:
  Workload(Prng prng, int64_t ts) : prng_(std::move(prng)), ts_(ts) {
    const uint64_t a = dedup_owner_of("A"), b = dedup_owner_of("B");
    // Anonymous clients, keys' clients, and ids shared between them (each (owner, id) is its own record).
    for (const auto& [client, owner] : std::vector<std::pair<uint64_t, uint64_t>>{
             {101, 0}, {102, 0}, {103, 0}, {104, 0}, {105, a}, {106, a}, {107, b}, {101, a}, {102, b}}) {
      clients_.push_back(ClientModel{client, owner});
    }
  }

  int64_t ts() const { return ts_; }
  void set_ts(int64_t ts) { ts_ = ts; }
  std::vector<ClientModel>& clients() { return clients_; }

  // The next command and its time. `describe` says what it is, for failures.
  std::pair<Command, int64_t> next(std::string& describe) {
    advance_time();
    const uint64_t roll = prng_.uniform(100);
    if (roll < 8) {
      describe = "time entry";
      return {Command{}, ts_};
    }
    if (roll < 14) {
      describe = "write without id";
      return {random_write(), ts_};
    }
    if (roll < 18 && fresh_ < 80) {
      // A new client (growing the table: evictions once it is full).
      const uint64_t owners[] = {0, dedup_owner_of("A"), dedup_owner_of("B")};
      clients_.push_back(ClientModel{5000 + fresh_++, owners[prng_.uniform(3)]});
    }
    return write_from(roll < 18 ? clients_.size() - 1 : prng_.uniform(clients_.size()), describe);
  }

  // The next write of clients()[model_index].
  std::pair<Command, int64_t> write_from(size_t model_index, std::string& describe) {
    ClientModel& model = clients_[model_index];
    Command command = random_write();
    WriteId id;
    id.client = model.client;
    id.owner = model.owner;
    const uint64_t kind = prng_.uniform(100);
    if (kind < 25 && model.next > 1) {
      // A re-send of an earlier write: still unanswered, or (a delayed copy) acknowledged already.
      const uint64_t low = model.first_unacknowledged > 2 ? model.first_unacknowledged - 2 : 1;
      id.sequence = low + prng_.uniform(model.next - low);
      id.first_unacknowledged = std::min(model.first_unacknowledged, id.sequence);
      id.retry = true;
      describe = "re-send";
    } else if (kind < 30 && model.owner != 0) {
      // A key's re-send of what its client id wrote anonymously (before owners existed).
      for (const ClientModel& other : clients_) {
        if (other.client == model.client && other.owner == 0 && other.next > 1) {
          id.sequence = other.first_unacknowledged + prng_.uniform(other.next - other.first_unacknowledged);
          break;
        }
      }
      if (id.sequence == 0) id.sequence = model.next++;
      id.first_unacknowledged = std::min(model.first_unacknowledged, id.sequence);
      id.retry = true;
      describe = "keyed re-send of an anonymous write";
    } else {
      if (prng_.chance(1, 30)) model.next += 33 + prng_.uniform(20);  // many never sent: a long acknowledgement
      id.sequence = model.next++;
      // Acknowledge: all answered, a few, or none.
      const uint64_t ack = model.acknowledges ? prng_.uniform(10) : 10;
      if (ack < 5) {
        model.first_unacknowledged = id.sequence;
      } else if (ack < 8) {
        model.first_unacknowledged = std::min(id.sequence, model.first_unacknowledged + prng_.uniform(3));
      }
      id.first_unacknowledged = model.first_unacknowledged;
      id.retry = prng_.chance(1, 12);  // a re-send whose first attempt never arrived
      describe = "write";
    }
    describe += " " + std::to_string(id.sequence) + " (first unacknowledged " +
                std::to_string(id.first_unacknowledged) + (id.retry ? ", retry" : "") + ") of client " +
                std::to_string(id.client) + " owner " + std::to_string(id.owner);
    command.write_id = id;
    return {std::move(command), ts_};
  }

 private:
  void advance_time() {
    const uint64_t roll = prng_.uniform(1000);
    if (roll < 8) {
      ts_ += kDedupWindowMicros + prng_.range(0, 3) * kDedupActivityBucketMicros;  // idle clients expire
    } else if (roll < 60) {
      ts_ += prng_.range(20, 200) * kSecond;  // minutes pass: activity moves between buckets
    } else {
      ts_ += prng_.range(0, 3) * kSecond;
    }
  }

  Command random_write() {
    const std::string id = "i" + std::to_string(prng_.uniform(6));
    // Mostly small outcomes; some large ones fill the byte bounds sooner.
    const std::string pad = prng_.chance(1, 8) ? std::string(prng_.range(1000, 6000), 'x') : "";
    const std::string body = R"({"id":")" + id + R"(","pk":"p","n":0,"s":")" + pad + "\"}";
    switch (prng_.uniform(7)) {
      case 0: return item_command(CommandType::kCreateItem, "db", "c", body);
      case 1: return item_command(CommandType::kReplaceItem, "db", "c", body);
      case 2:
        return target_command(CommandType::kPatchItem, "db", "c", "\"p\"", id,
                              R"([{"op":"incr","path":"/n","value":1}])");
      case 3: return target_command(CommandType::kDeleteItem, "db", "c", "\"p\"", id);
      case 4: return item_command(CommandType::kReplaceItem, "db", "c", body, std::string("\"stale\""));
      default: return item_command(CommandType::kUpsertItem, "db", "c", body);
    }
  }

  Prng prng_;
  int64_t ts_;
  std::vector<ClientModel> clients_;
  uint64_t fresh_ = 0;
};

// A table near its bounds, in a store holding nothing else yet: totals 3 clients short of kDedupMaxClients (new
// clients evict) and `spare_bytes` short of kDedupMaxTotalBytes; key A's share 3 clients and 30 KB short of its
// bounds; anonymous client 104 with 3 outcomes short of kDedupMaxUnacknowledged (it writes a few and is refused).
void write_starting_table(Twin& twin, int64_t ts, int64_t spare_bytes) {
  leveldb::WriteBatch batch;
  batch.Put(std::string(1, '\x0D'), totals_value(kDedupMaxClients - 3, kDedupMaxTotalBytes - spare_bytes, -1));
  batch.Put(tagged(0x0D, dedup_owner_of("A")), share_value(kDedupMaxClientsPerKey - 3, kDedupMaxKeyBytes - 30'000));
  std::string record;
  codec::put_u8(record, 1);
  codec::put_varint_signed(record, ts);
  codec::put_varint(record, 1);
  codec::put_varint(record, kDedupMaxUnacknowledged - 3);
  codec::put_varint_signed(record, 0);
  batch.Put(tagged(0x0A, 104), record);
  std::string activity(1, '\x0C');
  codec::put_i64_be(activity, ts - ts % kDedupActivityBucketMicros);
  codec::put_u64_be(activity, 104);
  batch.Put(activity, "");
  twin.write_both(batch);
}

// Applies `steps` of `workload` to a single store from `index` on (a donor of snapshots).
void drive(StateMachine& machine, Workload& workload, uint64_t& index, int steps) {
  for (int i = 0; i < steps; ++i) {
    std::string describe;
    auto [command, ts] = workload.next(describe);
    Result<OpResult> result = machine.apply(command, LogIndex(index++), ts);
    ASSERT_TRUE(result.is_ok()) << describe << ": " << result.status().to_string();
  }
}

void setup_container(StateMachine& machine, uint64_t& index, int64_t ts) {
  ASSERT_EQ(machine.apply(database_command(CommandType::kCreateDatabase, "db"), LogIndex(index++), ts)->http_status(),
            201);
  ASSERT_EQ(machine.apply(create_container_command("db", "c", "/pk"), LogIndex(index++), ts)->http_status(), 201);
}

// What a run's answers were, by the table's verdicts (so a run can show it reached every rule).
struct Verdicts {
  std::map<std::string, int> counts;
  void count(const Command& command, const OpResult& result, const std::string& describe) {
    if (!command.write_id) return;
    std::string verdict;
    if (result.duplicate) {
      verdict = describe.starts_with("keyed") ? "duplicate from the anonymous record" : "duplicate";
    } else if (result.substatus == kDedupSubstatusRecordLost) {
      verdict = "503 record lost";
    } else if (result.dedup_refusal != nullptr) {
      verdict = std::string("429 ") + result.dedup_refusal;
    } else if (result.code == StatusCode::kInvalidArgument &&
               result.message.find("acknowledged") != std::string::npos) {
      verdict = "400 acknowledged";
    } else {
      verdict = "recorded";
    }
    counts[verdict] += 1;
  }
  std::string to_string() const {
    std::string out;
    for (const auto& [verdict, n] : counts) out += (out.empty() ? "" : ", ") + verdict + " " + std::to_string(n);
    return out;
  }
};

void run(uint64_t seed, int steps, Verdicts& all) {
  Prng prng(seed);
  Twin twin;
  ASSERT_TRUE(twin.ok());
  // Seeds alternate between an empty starting table and one near its bounds.
  const bool near_bounds = seed % 2 == 1;
  if (near_bounds) write_starting_table(twin, kT0, seed % 4 == 3 ? 6'000 : 60'000);
  ASSERT_EQ(twin.apply(database_command(CommandType::kCreateDatabase, "db"), kT0, "create db").http_status(), 201);
  ASSERT_EQ(twin.apply(create_container_command("db", "c", "/pk"), kT0, "create c").http_status(), 201);
  Workload workload(prng.fork(), kT0);
  int group_left = 0;
  int installs = 0, restarts = 0;
  Verdicts verdicts;
  if (near_bounds) {
    // Client 104 (its record near its bound in the starting table) writes before anyone evicts it, keeping all.
    for (ClientModel& model : workload.clients()) model.acknowledges = model.client != 104 || model.owner != 0;
    for (size_t i = 0; i < workload.clients().size(); ++i) {
      if (workload.clients()[i].client != 104 || workload.clients()[i].owner != 0) continue;
      for (int k = 0; k < 5; ++k) {
        std::string describe;
        auto [command, ts] = workload.write_from(i, describe);
        verdicts.count(command, twin.apply(command, ts, "client 104: " + describe), describe);
      }
    }
  }
  uint64_t evictions = 0, expiries = 0;
  DedupTotals totals_before = *twin.reference().reader().dedup_totals();
  for (int step = 0; step < steps; ++step) {
    if (group_left == 0) {
      // Between groups: compare the stores; sometimes restart the mirrored store or install another table.
      if (step % 20 == 0) {
        twin.expect_same_stores("before step " + std::to_string(step));
        if (::testing::Test::HasFailure()) return;
      }
      if (prng.chance(1, 150)) {
        twin.restart_mirrored();
        ASSERT_TRUE(twin.ok());
        ++restarts;
      }
      if (prng.chance(1, 150)) {
        // A donor with its own table over the same client ids (other sequences, other outcomes) sends a snapshot.
        TempDir donor_dir;
        std::unique_ptr<StateMachine> donor = open_store(donor_dir.path() + "/db", true);
        ASSERT_NE(donor, nullptr);
        uint64_t index = twin.next_index() + 5;
        setup_container(*donor, index, workload.ts());
        Workload donor_load(prng.fork(), workload.ts());
        drive(*donor, donor_load, index, 200 + static_cast<int>(prng.uniform(200)));
        Result<std::string> snapshot = donor->export_snapshot();
        ASSERT_TRUE(snapshot.is_ok());
        twin.install(*snapshot);
        twin.expect_same_stores("after installing a snapshot at step " + std::to_string(step));
        workload.clients() = donor_load.clients();  // the clients now write against the donor's table
        workload.set_ts(donor_load.ts());
        totals_before = *twin.reference().reader().dedup_totals();
        ++installs;
      }
      if (prng.chance(1, 3)) {
        group_left = 1 + static_cast<int>(prng.uniform(30));
        twin.begin_group();
      }
    }
    std::string describe;
    auto [command, ts] = workload.next(describe);
    const std::string where = "step " + std::to_string(step) + " (index " + std::to_string(twin.next_index()) +
                              "): " + describe;
    const OpResult result = twin.apply(command, ts, where);
    if (::testing::Test::HasFailure()) return;
    verdicts.count(command, result, describe);
    if (group_left == 0 || group_left == 1) {
      // Outside a group (or at its end): did clients go (expiry, or an eviction, which records its time)?
      const DedupTotals totals = *twin.reference().reader().dedup_totals();
      if (totals.last_eviction_micros != totals_before.last_eviction_micros) ++evictions;
      if (totals.clients < totals_before.clients) ++expiries;
      totals_before = totals;
    }
    if (group_left > 0 && --group_left == 0) {
      twin.end_group();
      twin.expect_same_stores("after the group ending at step " + std::to_string(step));
      if (::testing::Test::HasFailure()) return;
    }
  }
  if (group_left > 0) twin.end_group();
  twin.expect_same_stores("at the end");
  std::printf("seed %llu%s: %d steps, %d restarts, %d snapshot installs, %llu times clients expired, %llu evictions; "
              "%s\n",
              static_cast<unsigned long long>(seed), near_bounds ? " (table near its bounds)" : "", steps, restarts,
              installs, static_cast<unsigned long long>(expiries), static_cast<unsigned long long>(evictions),
              verdicts.to_string().c_str());
  for (const auto& [verdict, n] : verdicts.counts) all.counts[verdict] += n;
  all.counts["(evictions)"] += static_cast<int>(evictions);
  all.counts["(expiries)"] += static_cast<int>(expiries);
  all.counts["(snapshot installs)"] += installs;
  all.counts["(restarts)"] += restarts;
}

TEST(DedupMirrorTest, TheMirrorAnswersAndWritesAsTheTableReadFromLevelDb) {
  const uint64_t given = testing_env::env_or("MAYFLY_MIRROR_SEED", 0);
  const uint64_t first_seed = given != 0 ? given : 20261128;
  const uint64_t seeds = given != 0 ? 1 : testing_env::env_or("MAYFLY_MIRROR_SEEDS", 8);
  const int steps = static_cast<int>(testing_env::env_or("MAYFLY_MIRROR_STEPS", 1500));
  std::printf("seeds %llu..%llu (MAYFLY_MIRROR_SEED=<seed> runs one)\n", static_cast<unsigned long long>(first_seed),
              static_cast<unsigned long long>(first_seed + seeds - 1));
  Verdicts all;
  for (uint64_t s = 0; s < seeds; ++s) {
    const uint64_t seed = first_seed + s;
    SCOPED_TRACE("MAYFLY_MIRROR_SEED=" + std::to_string(seed));
    run(seed, steps, all);
    if (::testing::Test::HasFailure()) return;
  }
  if (given != 0) return;
  // The default seeds reach every rule of the table (the mirror is compared on each of them).
  for (const char* verdict : {"recorded", "duplicate", "duplicate from the anonymous record", "503 record lost",
                              "429 client", "429 key", "429 table", "400 acknowledged", "(evictions)", "(expiries)",
                              "(snapshot installs)", "(restarts)"}) {
    EXPECT_GT(all.counts[verdict], 0) << verdict << " never happened: " << all.to_string();
  }
}

// Client ids 7 and 8 have records in both tables, with other outcomes: after the install, the installed table answers.
TEST(DedupMirrorTest, AnInstalledSnapshotReplacesTheMirror) {
  const auto incr = [](uint64_t client, uint64_t sequence, uint64_t first_unacknowledged, bool retry) {
    Command command = target_command(CommandType::kPatchItem, "db", "c", "\"p\"", "n",
                                     R"([{"op":"incr","path":"/n","value":1}])");
    command.write_id = WriteId{client, sequence, first_unacknowledged, retry};
    return command;
  };
  const auto create = [](const std::string& body) { return item_command(CommandType::kCreateItem, "db", "c", body); };
  Twin twin;
  ASSERT_TRUE(twin.ok());
  ASSERT_EQ(twin.apply(database_command(CommandType::kCreateDatabase, "db"), kT0, "db").http_status(), 201);
  ASSERT_EQ(twin.apply(create_container_command("db", "c", "/pk"), kT0, "c").http_status(), 201);
  ASSERT_EQ(twin.apply(create(R"({"id":"n","pk":"p","n":0})"), kT0, "n").http_status(), 201);
  ASSERT_EQ(twin.apply(incr(7, 1, 1, false), kT0 + kSecond, "7/1").http_status(), 200);
  ASSERT_EQ(twin.apply(incr(8, 1, 1, false), kT0 + kSecond, "8/1").http_status(), 200);
  ASSERT_EQ(twin.apply(incr(8, 2, 1, false), kT0 + kSecond, "8/2").http_status(), 200);
  // The mirror holds clients 7 and 8 now (a re-send is answered from it).
  EXPECT_TRUE(twin.apply(incr(7, 1, 1, true), kT0 + 2 * kSecond, "7/1 again").duplicate);

  // Another store: item n counts from 100; client 7's write 1 is another write; client 8 has only written 1;
  // client 9 exists only there.
  TempDir donor_dir;
  std::unique_ptr<StateMachine> donor = open_store(donor_dir.path() + "/db", true);
  ASSERT_NE(donor, nullptr);
  uint64_t index = 1;
  setup_container(*donor, index, kT0);
  ASSERT_TRUE(donor->apply(create(R"({"id":"n","pk":"p","n":100})"), LogIndex(index++), kT0).is_ok());
  Result<OpResult> donor_first = donor->apply(incr(7, 1, 1, false), LogIndex(index++), kT0 + kSecond);
  ASSERT_TRUE(donor_first.is_ok());
  ASSERT_TRUE(donor->apply(incr(8, 1, 1, false), LogIndex(index++), kT0 + kSecond).is_ok());
  ASSERT_TRUE(donor->apply(incr(9, 1, 1, false), LogIndex(index++), kT0 + kSecond).is_ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(donor->apply(Command{}, LogIndex(index++), kT0 + kSecond).is_ok());
  Result<std::string> snapshot = donor->export_snapshot();
  ASSERT_TRUE(snapshot.is_ok());
  EXPECT_TRUE(twin.mirrored().dedup_mirror().loaded());
  twin.install(*snapshot);
  twin.expect_same_stores("after the install");
  EXPECT_FALSE(twin.mirrored().dedup_mirror().loaded());

  const int64_t t = kT0 + 3 * kSecond;
  // Client 7's write 1 is answered with the donor's outcome (n was 101 there), not this store's (n 1).
  const OpResult seven = twin.apply(incr(7, 1, 1, true), t, "7/1 after the install");
  EXPECT_TRUE(seven.duplicate);
  EXPECT_EQ(seven.body, donor_first->body);
  // Client 8's write 2 is not in the installed table: it applies.
  const OpResult eight = twin.apply(incr(8, 2, 1, false), t, "8/2 after the install");
  EXPECT_FALSE(eight.duplicate);
  EXPECT_EQ(eight.http_status(), 200);
  // Client 9 is known (its re-send is a duplicate); expiry takes everyone once idle, in the installed table's order.
  EXPECT_TRUE(twin.apply(incr(9, 1, 1, true), t, "9/1 after the install").duplicate);
  twin.begin_group();
  for (uint64_t i = 0; i < 2 * kDedupExpiryEvery; ++i) {
    twin.apply(Command{}, t + kDedupWindowMicros + 2 * kDedupActivityBucketMicros, "time entry");
  }
  twin.end_group();
  twin.expect_same_stores("after expiry");
  EXPECT_EQ(twin.mirrored().reader().dedup_totals()->clients, 0u);
  // Forgotten: write 1 of client 7 is new again.
  EXPECT_FALSE(twin.apply(incr(7, 1, 1, false), t + kDedupWindowMicros + 3 * kDedupActivityBucketMicros, "7/1 new")
                   .duplicate);
  twin.expect_same_stores("at the end");
}

// A restarted store loads its mirror on first use: clients its table holds are found (a re-send is a duplicate) in
// the middle of a group whose earlier applies are not written yet, and one it does not hold is new.
TEST(DedupMirrorTest, ARestartedStoreLoadsTheTableOnFirstUse) {
  Twin twin;
  ASSERT_TRUE(twin.ok());
  ASSERT_EQ(twin.apply(database_command(CommandType::kCreateDatabase, "db"), kT0, "db").http_status(), 201);
  ASSERT_EQ(twin.apply(create_container_command("db", "c", "/pk"), kT0, "c").http_status(), 201);
  const auto upsert = [](uint64_t client, uint64_t sequence, uint64_t first_unacknowledged, bool retry, int n) {
    Command command = item_command(CommandType::kUpsertItem, "db", "c",
                                   R"({"id":"i","pk":"p","n":)" + std::to_string(n) + "}");
    command.write_id = WriteId{client, sequence, first_unacknowledged, retry};
    return command;
  };
  for (uint64_t client = 1; client <= 5; ++client) {
    for (uint64_t sequence = 1; sequence <= 3; ++sequence) {
      twin.apply(upsert(client, sequence, 1, false, static_cast<int>(client * 10 + sequence)), kT0 + kSecond, "fill");
    }
  }
  twin.restart_mirrored();
  ASSERT_TRUE(twin.ok());
  const DedupMirror& mirror = twin.mirrored().dedup_mirror();
  EXPECT_FALSE(mirror.loaded());
  twin.begin_group();
  // A write without an id, on an entry that does not expire clients, needs nothing of the table.
  ASSERT_NE(twin.next_index() % kDedupExpiryEvery, 0u);
  twin.apply(item_command(CommandType::kUpsertItem, "db", "c", R"({"id":"j","pk":"p"})"), kT0 + 2 * kSecond,
             "no id");
  EXPECT_FALSE(mirror.loaded());
  // The index is loaded whole; a client only once touched. Client 6 is new: known without a read.
  EXPECT_FALSE(twin.apply(upsert(6, 1, 1, false, 61), kT0 + 2 * kSecond, "new client 6").duplicate);
  EXPECT_TRUE(mirror.loaded());
  EXPECT_EQ(mirror.clients(), 6u);
  EXPECT_EQ(mirror.loaded_clients(), 1u);
  EXPECT_TRUE(twin.apply(upsert(2, 2, 1, true, 0), kT0 + 2 * kSecond, "client 2 re-sends 2").duplicate);
  EXPECT_EQ(mirror.loaded_clients(), 2u);
  // Client 3 acknowledges 1 and 2 and writes 4; then re-sends 4 (in the same group) and 3.
  EXPECT_FALSE(twin.apply(upsert(3, 4, 3, false, 34), kT0 + 2 * kSecond, "client 3 writes 4").duplicate);
  EXPECT_TRUE(twin.apply(upsert(3, 4, 3, true, 0), kT0 + 2 * kSecond, "client 3 re-sends 4").duplicate);
  EXPECT_TRUE(twin.apply(upsert(3, 3, 3, true, 0), kT0 + 2 * kSecond, "client 3 re-sends 3").duplicate);
  EXPECT_EQ(twin.apply(upsert(3, 2, 3, true, 0), kT0 + 2 * kSecond, "client 3 re-sends 2").http_status(), 400);
  twin.end_group();
  twin.expect_same_stores("after the group");
  EXPECT_EQ(twin.mirrored().reader().dedup_totals()->clients, 6u);
}

}  // namespace
}  // namespace mayfly::storage::testing
