// Randomized property test: the state machine against a deliberately naive model.
//
// Random sequences of item writes, deletes, patches of ttl and container defaultTtl changes at increasing replicated
// times, probed at random times >= the applied time, on two stores: one that is collected at random points — directly
// (collect_expired up to random times) and through the node's RU-aware Collector (random provisioned budgets, random
// user load, throttled users) — and one that never is. Both must agree with the model at every probe — garbage collection never changes what
// anyone can see. The collected store counts its backlog in steps of two index entries (StoreOptions::
// backlog_count_step), often left unfinished across writes and collections: bounds while counting, exact once done. The model keeps the whole history of policy changes and decides visibility from first principles
// (no watermarks, no indexes).
//
// Reproduce a failure: MAYFLY_PROPERTY_SEED=<seed printed> MAYFLY_PROPERTY_SEQUENCES=1 ./state_machine_property_test
// Long mode: MAYFLY_PROPERTY_SEQUENCES=100000.
#include <cstdlib>
#include <map>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "common/prng.h"
#include "metrics/metrics.h"
#include "node/collector.h"
#include "node/ru_account.h"
#include "tests/env.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

using testing_env::env_or;

// The collecting store counts its backlog two index entries per call, so counts are often unfinished while items
// are written, deleted, overwritten and collected (the other store counts in one call, as a node does at this size).
constexpr size_t kCountStep = 2;

// ---- the naive model ----

// A policy as docs/ttl.md states it: absent (off), -1, or n seconds.
struct Policy {
  enum Kind { kOff, kMinusOne, kSeconds } kind = kOff;
  int64_t seconds = 0;
};

// An item's ttl as written: absent, -1 or n.
struct ModelTtl {
  enum Kind { kAbsent, kMinusOne, kSeconds } kind = kAbsent;
  int64_t seconds = 0;
};

struct ModelItem {
  int64_t write_ts = 0;
  ModelTtl ttl;
  bool deleted = false;
};

// docs/ttl.md §3 matrix, written out independently of ttl/.
std::optional<int64_t> model_effective(ModelTtl item, Policy policy) {
  if (policy.kind == Policy::kOff) return std::nullopt;
  if (item.kind == ModelTtl::kSeconds) return item.seconds;
  if (item.kind == ModelTtl::kMinusOne) return std::nullopt;
  if (policy.kind == Policy::kSeconds) return policy.seconds;
  return std::nullopt;
}

bool model_expired_under(const ModelItem& item, Policy policy, int64_t t) {
  std::optional<int64_t> e = model_effective(item.ttl, policy);
  if (!e) return false;
  const int64_t expiry_seconds = item.write_ts / kSecond + *e;  // E = _ts + e, _ts in whole seconds
  return t >= expiry_seconds * kSecond;
}

struct Model {
  std::vector<std::pair<int64_t, Policy>> history;  // (ts of change, new policy); first entry: creation
  std::map<std::string, ModelItem> items;           // by id (one partition key per id in this test)

  Policy policy_at(size_t change_index) const { return history[change_index].second; }

  // Visible at t: alive under the current policy at t, and never expired at any later policy change.
  bool visible(const std::string& id, int64_t t) const {
    auto it = items.find(id);
    if (it == items.end() || it->second.deleted) return false;
    const ModelItem& item = it->second;
    for (size_t c = 1; c < history.size(); ++c) {
      const int64_t change_ts = history[c].first;
      if (change_ts > item.write_ts && change_ts <= t && model_expired_under(item, policy_at(c - 1), change_ts)) {
        return false;
      }
    }
    return !model_expired_under(item, history.back().second, t);
  }
};

std::string ttl_json(ModelTtl ttl) {
  if (ttl.kind == ModelTtl::kMinusOne) return ",\"ttl\":-1";
  if (ttl.kind == ModelTtl::kSeconds) return ",\"ttl\":" + std::to_string(ttl.seconds);
  return "";
}

// ---- the run ----

// The node's request-unit-aware collector, run against the collecting store: its meters run on replicated time.
struct NodeCollector {
  explicit NodeCollector(StateMachine& store)
      : clock(kT0), metrics(1), account(clock, metrics), collector(store.expiry(), account, metrics, clock, {4, 1.0}) {}
  ManualClock clock;
  metrics::Metrics metrics;
  node::RequestUnitAccount account;
  node::Collector collector;
};

class PropertyRun {
 public:
  PropertyRun(uint64_t seed, StateMachine& collected, StateMachine& uncollected, NodeCollector& node,
              uint64_t& next_index, int64_t& now)
      : prng_(seed), seed_(seed), stores_{&collected, &uncollected}, node_(node), next_index_(next_index), now_(now) {}

  void run(int container_number, int steps) {
    container_ = "c" + std::to_string(container_number);
    Policy initial = random_policy();
    Command create = create_container_command("db", container_, "/pk", policy_json(initial));
    // Half the containers are provisioned with a small budget (a few deletes per second), half serverless.
    if (prng_.chance(1, 2)) {
      create.throughput = Throughput{Throughput::Mode::kProvisioned, static_cast<int64_t>(prng_.range(1, 40))};
    }
    expect_status(apply(create), 201, "create container");
    model_.history.push_back({now_, initial});
    for (int step = 0; step < steps && !::testing::Test::HasFailure(); ++step) one_step(step);
    // However the collector's scan cursors moved, everything expired can still be collected: drain, no backlog left.
    StateMachine& store = *stores_[0];
    for (int pass = 0; pass < 1000; ++pass) {
      Result<CollectResult> drained = store.expiry().collect_expired("db", container_, store.applied().ts_micros, 7);
      ASSERT_TRUE(drained.is_ok()) << drained.status().to_string();
      if (drained->items == 0) break;
    }
    Result<Backlog> left = counted_backlog(store);
    ASSERT_TRUE(left.is_ok()) << left.status().to_string();
    EXPECT_EQ(left->items, 0) << "expired items the collector can no longer reach\n" << reproduce();
  }

 private:
  static std::optional<std::string> policy_json(Policy policy) {
    if (policy.kind == Policy::kOff) return std::nullopt;
    if (policy.kind == Policy::kMinusOne) return "-1";
    return std::to_string(policy.seconds);
  }

  Policy random_policy() {
    switch (prng_.uniform(3)) {
      case 0: return {Policy::kOff, 0};
      case 1: return {Policy::kMinusOne, 0};
      default: return {Policy::kSeconds, prng_.range(1, 4)};
    }
  }

  ModelTtl random_ttl() {
    switch (prng_.uniform(3)) {
      case 0: return {ModelTtl::kAbsent, 0};
      case 1: return {ModelTtl::kMinusOne, 0};
      default: return {ModelTtl::kSeconds, prng_.range(1, 4)};
    }
  }

  // Replicated time moves by a random amount: sub-second steps, whole seconds, sometimes several seconds.
  void advance_time() {
    switch (prng_.uniform(5)) {
      case 0: now_ += 1; break;
      case 4: now_ = (now_ / kSecond + 1) * kSecond; break;  // land on a whole second: E is always one
      case 1: now_ += prng_.range(1, kSecond); break;
      case 2: now_ += kSecond; break;
      default: now_ += prng_.range(kSecond, 5 * kSecond); break;
    }
  }

  std::vector<OpResult> apply(const Command& command) {
    advance_time();
    const LogIndex index(next_index_++);
    std::vector<OpResult> results;
    for (StateMachine* store : stores_) {
      Result<OpResult> result = store->apply(command, index, now_);
      EXPECT_TRUE(result.is_ok()) << result.status().to_string();
      results.push_back(result.is_ok() ? *result : OpResult::error(StatusCode::kInternal, ""));
    }
    return results;
  }

  void expect_status(const std::vector<OpResult>& results, int expected, const std::string& what) {
    for (const OpResult& result : results) {
      EXPECT_EQ(result.http_status(), expected) << what << " at " << now_ << ": " << result.message << "\n" << reproduce();
    }
  }

  std::string reproduce() const {
    return "reproduce: MAYFLY_PROPERTY_SEED=" + std::to_string(seed_) +
           " MAYFLY_PROPERTY_SEQUENCES=1 ./build/tests/unit/state_machine_property_test";
  }

  std::string random_id() { return "i" + std::to_string(prng_.uniform(6)); }
  std::string pk_of(const std::string& id) { return "p" + id.substr(1, 1); }

  void one_step(int step) {
    const uint64_t choice = prng_.uniform(100);
    if (choice < 30) {
      write(prng_.chance(1, 2) ? CommandType::kCreateItem : CommandType::kUpsertItem);
    } else if (choice < 42) {
      write(CommandType::kReplaceItem);
    } else if (choice < 50) {
      erase();
    } else if (choice < 58) {
      patch_ttl();
    } else if (choice < 66) {
      change_policy();
    } else if (choice < 80) {
      collect();
    } else {
      probe(step);
    }
  }

  void write(CommandType type) {
    const std::string id = random_id();
    const ModelTtl ttl = random_ttl();
    const std::string body = "{\"id\":\"" + id + "\",\"pk\":\"" + pk_of(id) + "\"" + ttl_json(ttl) + "}";
    std::vector<OpResult> results = apply(item_command(type, "db", container_, body));
    const bool alive = model_.visible(id, now_);
    int expected;
    if (type == CommandType::kCreateItem) expected = alive ? 409 : 201;
    else if (type == CommandType::kReplaceItem) expected = alive ? 200 : 404;
    else expected = alive ? 200 : 201;
    expect_status(results, expected, std::string(command_type_name(type)) + " " + id);
    if (expected < 400) model_.items[id] = ModelItem{now_, ttl, false};
  }

  void erase() {
    const std::string id = random_id();
    std::vector<OpResult> results =
        apply(target_command(CommandType::kDeleteItem, "db", container_, "\"" + pk_of(id) + "\"", id));
    const bool alive = model_.visible(id, now_);
    expect_status(results, alive ? 204 : 404, "delete " + id);
    if (alive) model_.items[id].deleted = true;
  }

  void patch_ttl() {
    const std::string id = random_id();
    const ModelTtl ttl = random_ttl();
    const std::string ops = ttl.kind == ModelTtl::kAbsent
                                ? R"([{"op":"set","path":"/touched","value":true},{"op":"remove","path":"/ttl"}])"
                                : "[{\"op\":\"set\",\"path\":\"/ttl\",\"value\":" +
                                      std::to_string(ttl.kind == ModelTtl::kMinusOne ? -1 : ttl.seconds) + "}]";
    std::vector<OpResult> results =
        apply(target_command(CommandType::kPatchItem, "db", container_, "\"" + pk_of(id) + "\"", id, ops));
    const bool alive = model_.visible(id, now_);
    if (!alive) {
      expect_status(results, 404, "patch " + id);
      return;
    }
    // Removing a ttl the item does not have is a 400 (remove needs an existing target); nothing changes then.
    const bool had_ttl = model_.items[id].ttl.kind != ModelTtl::kAbsent;
    if (ttl.kind == ModelTtl::kAbsent && !had_ttl) {
      expect_status(results, 400, "patch remove missing ttl " + id);
      return;
    }
    expect_status(results, 200, "patch " + id);
    model_.items[id] = ModelItem{now_, ttl, false};
  }

  void change_policy() {
    const Policy policy = random_policy();
    std::vector<OpResult> results = apply(set_default_ttl_command("db", container_, policy_json(policy)));
    expect_status(results, 200, "set defaultTtl");
    model_.history.push_back({now_, policy});
  }

  void collect() {
    if (prng_.chance(1, 2)) {
      collect_within_budget();
      return;
    }
    StateMachine& store = *stores_[0];
    const int64_t applied = store.applied().ts_micros;
    const int64_t up_to = applied - prng_.range(0, 3 * kSecond);
    Result<CollectResult> collected =
        store.expiry().collect_expired("db", container_, std::max<int64_t>(up_to, 0), prng_.range(1, 4));
    ASSERT_TRUE(collected.is_ok()) << collected.status().to_string();
  }

  // The node's collector: spends only the spare RU of the window, and nothing while users are throttled.
  void collect_within_budget() {
    StateMachine& store = *stores_[0];
    std::optional<ContainerRecord> record = store.reader().container_record("db", container_);
    ASSERT_TRUE(record.has_value());
    node_.clock.set_micros(std::max(node_.clock.now_micros(), now_));
    const std::string key = "db/" + container_;
    if (prng_.chance(1, 2)) node_.account.charge(key, "write", static_cast<double>(prng_.range(0, 40)));
    const bool provisioned = record->throughput.mode == Throughput::Mode::kProvisioned;
    const bool throttled = provisioned && prng_.chance(1, 4) &&
                           node_.account.throttle_ms(key, record->throughput,
                                                     static_cast<double>(record->throughput.request_units_per_second)) > 0;
    Result<Backlog> before = counted_backlog(store);
    ASSERT_TRUE(before.is_ok());
    Result<int64_t> deleted = node_.collector.collect(ContainerInfo{"db", container_, *record});
    ASSERT_TRUE(deleted.is_ok()) << deleted.status().to_string();
    EXPECT_LE(*deleted, std::min<int64_t>(4, before->items)) << reproduce();
    if (throttled) {
      EXPECT_EQ(*deleted, 0) << "users were throttled: nothing is spare\n" << reproduce();
    }
  }

  // The backlog counted to the end (several calls on a store that counts in small steps).
  Result<Backlog> counted_backlog(StateMachine& store) {
    Result<Backlog> backlog = store.expiry().backlog("db", container_);
    for (int call = 0; call < 100 && backlog.is_ok() && !backlog->complete; ++call) {
      backlog = store.expiry().backlog("db", container_);
    }
    if (backlog.is_ok() && !backlog->complete) return Status::internal("the backlog count does not finish");
    return backlog;
  }

  void probe(int step) {
    const int64_t applied = stores_[0]->applied().ts_micros;
    int64_t t = prng_.chance(1, 2) ? applied : applied + prng_.range(0, 6 * kSecond);
    // Half the time, probe exactly at an item's expiry instant or 1µs before it, where off-by-one bugs live.
    if (prng_.chance(1, 2)) {
      const std::string id = random_id();
      auto it = model_.items.find(id);
      if (it != model_.items.end()) {
        std::optional<int64_t> e = model_effective(it->second.ttl, model_.history.back().second);
        const int64_t expiry = e ? (it->second.write_ts / kSecond + *e) * kSecond : 0;
        const int64_t candidate = expiry - (prng_.chance(1, 2) ? 1 : 0);
        if (e && candidate >= applied) t = candidate;
      }
    }
    int64_t visible_count = 0;
    for (int i = 0; i < 6; ++i) {
      const std::string id = "i" + std::to_string(i);
      const bool expected = model_.visible(id, t);
      visible_count += expected ? 1 : 0;
      for (StateMachine* store : stores_) {
        OpResult read = store->reader().read_item("db", container_, "\"" + pk_of(id) + "\"", id, t);
        ASSERT_EQ(read.http_status(), expected ? 200 : 404)
            << "read " << id << " at T=" << t << " (applied " << applied << ", step " << step << ")\n"
            << reproduce();
      }
    }
    for (StateMachine* store : stores_) {
      ListRequest list{"db", container_, std::nullopt, kMaxListItems, ""};
      OpResult listed = store->reader().list_items(list, t);
      ASSERT_EQ(listed.http_status(), 200);
      const int64_t listed_count =
          listed.body == "[]" ? 0 : std::count(listed.body.begin(), listed.body.end(), '{');
      ASSERT_EQ(listed_count, visible_count) << "list at T=" << t << "\n" << reproduce();
      if (t == applied) {
        Result<ContainerStats> stats = store->expiry().container_stats("db", container_);
        ASSERT_TRUE(stats.is_ok()) << stats.status().to_string();
        // The collected store counts its backlog a few index entries per call (kCountStep). Half the time leave a
        // count unfinished, so later applies and collections meet a partial count: its figures are bounds.
        if (!stats->backlog.complete && prng_.chance(1, 2)) {
          ASSERT_LE(stats->backlog.items, stats->stored_items - visible_count) << "partial count\n" << reproduce();
          ASSERT_GE(stats->live_items, visible_count) << "partial count\n" << reproduce();
          continue;
        }
        for (int call = 0; call < 100 && !stats->backlog.complete; ++call) {
          stats = store->expiry().container_stats("db", container_);
          ASSERT_TRUE(stats.is_ok()) << stats.status().to_string();
        }
        ASSERT_TRUE(stats->backlog.complete) << reproduce();
        ASSERT_EQ(stats->live_items, visible_count) << "live items at the applied time\n" << reproduce();
        ASSERT_EQ(stats->stored_items - stats->backlog.items, visible_count) << reproduce();
      }
    }
  }

  Prng prng_;
  uint64_t seed_;
  StateMachine* stores_[2];
  NodeCollector& node_;
  uint64_t& next_index_;
  int64_t& now_;
  std::string container_;
  Model model_;
};

TEST(StateMachineProperty, GarbageCollectionNeverChangesWhatAnyoneCanSee) {
  const uint64_t base_seed = env_or("MAYFLY_PROPERTY_SEED", 20261121);
  const uint64_t sequences = env_or("MAYFLY_PROPERTY_SEQUENCES", 3000);
  std::printf("property test: seed %llu, %llu sequences\n", static_cast<unsigned long long>(base_seed),
              static_cast<unsigned long long>(sequences));
  TempDir dir;
  auto open = [&](const std::string& name) {
    StoreOptions options;
    options.path = dir.path() + "/" + name;
    if (name == "collected") options.backlog_count_step = kCountStep;
    Result<std::unique_ptr<StateMachine>> opened = StateMachine::open(options);
    EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
    return std::move(opened).value();
  };
  std::unique_ptr<StateMachine> collected = open("collected");
  std::unique_ptr<StateMachine> uncollected = open("uncollected");
  auto node = std::make_unique<NodeCollector>(*collected);
  uint64_t next_index = 1;
  int64_t now = kT0;
  ASSERT_EQ(collected->apply(database_command(CommandType::kCreateDatabase, "db"), LogIndex(next_index), now)->http_status(),
            201);
  ASSERT_EQ(
      uncollected->apply(database_command(CommandType::kCreateDatabase, "db"), LogIndex(next_index), now)->http_status(),
      201);
  ++next_index;
  Prng reopen_prng(base_seed);
  for (uint64_t k = 0; k < sequences && !::testing::Test::HasFailure(); ++k) {
    PropertyRun run(base_seed + k, *collected, *uncollected, *node, next_index, now);
    run.run(static_cast<int>(k), 60);
    if (reopen_prng.chance(1, 100)) {  // rebuild the in-memory backlog trackers from disk now and then
      node.reset();
      collected.reset();
      collected = open("collected");
      node = std::make_unique<NodeCollector>(*collected);
    }
  }
}

}  // namespace
}  // namespace mayfly::storage::testing
