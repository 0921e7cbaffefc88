#include "tests/chaos/linearizability.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace mayfly::chaos {
namespace {

constexpr int64_t kUnknownTs = INT64_MIN;

struct KeyState {
  bool present = false;
  int64_t v = 0, n = 0;
  int64_t ttl_own = kTtlAbsent;
  int64_t ts = kUnknownTs;
  int64_t policy = kPolicyOff;
  int64_t floor_s = 0;  // L: a lower bound on the replicated second here

  bool operator==(const KeyState&) const = default;
  bool operator<(const KeyState& o) const {
    return std::tie(present, v, n, ttl_own, ts, policy, floor_s) <
           std::tie(o.present, o.v, o.n, o.ttl_own, o.ts, o.policy, o.floor_s);
  }
};

// The effective ttl (docs/ttl.md §3), or nullopt: never expires.
std::optional<int64_t> effective_ttl(int64_t ttl_own, int64_t policy) {
  if (policy == kPolicyOff || ttl_own == -1) return std::nullopt;
  if (ttl_own != kTtlAbsent) return ttl_own;
  if (policy == -1) return std::nullopt;
  return policy;
}

KeyState expired(KeyState s) {
  s.present = false;
  s.v = s.n = 0;
  s.ttl_own = kTtlAbsent;
  s.ts = kUnknownTs;
  return s;
}

// The time an op happened at, when the server told us: an acknowledged write's `_ts` (a defaultTtl change's too).
std::optional<int64_t> known_time(const Op& op) {
  if (op.outcome != Outcome::kOk || op.ts == 0 || op.status >= 300) return std::nullopt;
  if (op.kind == OpKind::kRead || op.kind == OpKind::kDelete) return std::nullopt;
  return op.ts;
}

class Model {
 public:
  Model(const std::map<int64_t, int64_t>& version_ts, const std::vector<int>& op_class)
      : version_ts_(version_ts), op_class_(op_class) {}

  // Every state `op` can lead to from `s` (none: `op` with its recorded outcome is impossible here).
  void step(const KeyState& s0, const Op& op, std::vector<KeyState>& out) const {
    const std::optional<int64_t> t = known_time(op);
    if (t && *t < s0.floor_s) return;  // replicated time never goes backwards along the log
    KeyState pre[2];
    int count = 0;
    const std::optional<int64_t> ttl = s0.present ? effective_ttl(s0.ttl_own, s0.policy) : std::nullopt;
    if (!ttl) {
      pre[count++] = s0;
    } else if (s0.ts == kUnknownTs) {
      pre[count++] = s0;
      pre[count++] = expired(s0);
    } else {
      const int64_t expiry = s0.ts + *ttl;
      if (t) {
        pre[count++] = *t >= expiry ? expired(s0) : s0;
      } else if (s0.floor_s >= expiry) {
        pre[count++] = expired(s0);
      } else {
        pre[count++] = s0;
        KeyState gone = expired(s0);
        gone.floor_s = expiry;
        pre[count++] = gone;
      }
    }
    for (int i = 0; i < count; ++i) {
      KeyState p = pre[i];
      if (t) p.floor_s = *t;
      apply(p, op, t, out);
    }
  }

 private:
  int64_t version_time(const Op& op, const std::optional<int64_t>& t) const {
    if (t) return *t;
    auto seen = version_ts_.find(op.write_v);
    return seen == version_ts_.end() ? kUnknownTs : seen->second;
  }

  KeyState written(KeyState s, const Op& op, const std::optional<int64_t>& t, int64_t n, int64_t ttl_own) const {
    s.present = true;
    // A version no one saw is named by its write's class, so interchangeable writes lead to one state.
    const int op_class = op_class_.at(static_cast<size_t>(&op - first_op_));
    s.v = op_class != 0 ? -op_class : op.write_v;
    s.n = n;
    s.ttl_own = ttl_own;
    s.ts = version_time(op, t);
    return s;
  }

  void apply(const KeyState& s, const Op& op, const std::optional<int64_t>& t, std::vector<KeyState>& out) const {
    const bool unknown = op.outcome == Outcome::kUnknown;
    const int status = op.status;
    switch (op.kind) {
      case OpKind::kRead:
        if (op.found ? (s.present && s.v == op.read_v && s.n == op.read_n) : !s.present) out.push_back(s);
        return;
      case OpKind::kCreate:
        if (unknown) {
          out.push_back(s.present ? s : written(s, op, t, 0, op.write_ttl));
        } else if (status == 201 && !s.present) {
          out.push_back(written(s, op, t, 0, op.write_ttl));
        } else if (status == 409 && s.present) {
          out.push_back(s);
        }
        return;
      case OpKind::kUpsert:
        if (unknown || (status == 201 && !s.present) || (status == 200 && s.present)) {
          out.push_back(written(s, op, t, 0, op.write_ttl));
        }
        return;
      case OpKind::kReplace: {
        const bool matches = s.present && (op.if_match_v == 0 || s.v == op.if_match_v);
        if (unknown) {
          out.push_back(matches ? written(s, op, t, 0, op.write_ttl) : s);
        } else if (status == 200 && matches) {
          out.push_back(written(s, op, t, 0, op.write_ttl));
        } else if ((status == 412 && s.present && !matches) || (status == 404 && !s.present)) {
          out.push_back(s);
        }
        return;
      }
      case OpKind::kDelete:
        if (unknown) {
          out.push_back(s.present ? expired(s) : s);  // a delete makes it absent, like expiry
        } else if (status == 204 && s.present) {
          out.push_back(expired(s));
        } else if (status == 404 && !s.present) {
          out.push_back(s);
        }
        return;
      case OpKind::kIncr:
        if (unknown) {
          out.push_back(s.present ? written(s, op, t, s.n + 1, s.ttl_own) : s);
        } else if (status == 200 && s.present) {
          out.push_back(written(s, op, t, s.n + 1, s.ttl_own));
        } else if (status == 404 && !s.present) {
          out.push_back(s);
        }
        return;
      case OpKind::kSetDefaultTtl: {
        KeyState changed = s;
        changed.policy = op.default_ttl;
        out.push_back(changed);
        return;
      }
    }
  }

  const std::map<int64_t, int64_t>& version_ts_;
  const std::vector<int>& op_class_;

 public:
  const Op* first_op_ = nullptr;  // ops[0]: an op's position is its address minus this
};

using StateSet = std::vector<KeyState>;  // sorted, unique

uint64_t hash_state_set(const StateSet& states) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](int64_t x) { h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull; };
  for (const KeyState& s : states) {
    mix(s.present);
    mix(s.v);
    mix(s.n);
    mix(s.ttl_own);
    mix(s.ts);
    mix(s.policy);
    mix(s.floor_s);
  }
  return h;
}

struct Entry {
  bool is_call = true;
  size_t op = 0;  // index into ops
  int64_t time = 0;
  Entry* match = nullptr;  // call <-> return
  Entry* prev = nullptr;
  Entry* next = nullptr;
};

}  // namespace

LinearizabilityResult check_key(const std::vector<Op>& ops, const std::map<int64_t, int64_t>& version_ts,
                                int64_t initial_policy, uint64_t max_steps) {
  LinearizabilityResult result;
  if (ops.empty()) return result;
  // The entry list: a call and a return per op; an unknown op returns at +infinity. Calls sort before returns at
  // the same microsecond (the more permissive reading).
  std::vector<Entry> entries(ops.size() * 2);
  for (size_t i = 0; i < ops.size(); ++i) {
    Entry& call = entries[2 * i];
    Entry& ret = entries[2 * i + 1];
    call = Entry{true, i, ops[i].invoke_us, &ret};
    ret = Entry{false, i, ops[i].outcome == Outcome::kUnknown ? INT64_MAX : ops[i].complete_us, &call};
  }
  std::vector<Entry*> order;
  for (Entry& e : entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    if (a->time != b->time) return a->time < b->time;
    return a->is_call && !b->is_call;
  });
  Entry head;
  Entry* last = &head;
  for (Entry* e : order) {
    last->next = e;
    e->prev = last;
    last = e;
  }
  auto lift = [](Entry* call) {
    call->prev->next = call->next;
    if (call->next) call->next->prev = call->prev;
    Entry* ret = call->match;
    ret->prev->next = ret->next;
    if (ret->next) ret->next->prev = ret->prev;
  };
  auto unlift = [](Entry* call) {
    Entry* ret = call->match;
    ret->prev->next = ret;
    if (ret->next) ret->next->prev = ret;
    call->prev->next = call;
    if (call->next) call->next->prev = call;
  };

  // Unknown writes whose version no one ever saw are interchangeable with others of their class (same kind, key,
  // ttl): once invoked, each may take effect at any later point, and which of them does is invisible. The search
  // tries only one member of a class at each point (an exchange argument: any linearization that places a later one
  // there places the earlier one there just as well), which keeps many unknown increments from exploding it.
  std::vector<int> op_class(ops.size(), 0);
  {
    std::map<std::tuple<int, int64_t, int64_t>, int> classes;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.outcome != Outcome::kUnknown || op.kind == OpKind::kRead || op.kind == OpKind::kSetDefaultTtl) continue;
      if (op.kind != OpKind::kDelete && version_ts.count(op.write_v)) continue;
      const auto key = std::make_tuple(static_cast<int>(op.kind), op.write_ttl, op.if_match_v);
      auto [it, inserted] = classes.emplace(key, static_cast<int>(classes.size()) + 1);
      op_class[i] = it->second;
    }
  }
  Model model(version_ts, op_class);
  model.first_op_ = ops.data();
  std::vector<int> tried;  // classes tried at the current point
  std::vector<uint64_t> linearized((ops.size() + 63) / 64, 0);
  std::unordered_map<uint64_t, std::vector<std::pair<std::vector<uint64_t>, StateSet>>> cache;
  auto remember = [&cache](const std::vector<uint64_t>& bits, const StateSet& states) {
    uint64_t h = hash_state_set(states);
    for (uint64_t word : bits) h = (h ^ word) * 0x100000001b3ull + (h >> 29);
    auto& bucket = cache[h];
    for (const auto& [seen_bits, seen_states] : bucket) {
      if (seen_bits == bits && seen_states == states) return false;
    }
    bucket.emplace_back(bits, states);
    return true;
  };

  KeyState initial;
  initial.policy = initial_policy;
  StateSet states = {initial};
  struct Level {
    Entry* call;
    StateSet states;
    std::vector<int> tried;
  };
  std::vector<Level> stack;
  Entry* entry = head.next;
  StateSet next_states;
  while (head.next != nullptr) {
    if (++result.steps > max_steps) {
      result.verdict = Verdict::kTooBig;
      return result;
    }
    if (entry == nullptr) break;  // cannot happen: a return entry always ends the list
    if (entry->is_call) {
      const int entry_class = op_class[entry->op];
      if (entry_class != 0) {
        if (std::find(tried.begin(), tried.end(), entry_class) != tried.end()) {
          entry = entry->next;
          continue;
        }
        tried.push_back(entry_class);
      }
      next_states.clear();
      for (const KeyState& s : states) model.step(s, ops[entry->op], next_states);
      std::sort(next_states.begin(), next_states.end());
      next_states.erase(std::unique(next_states.begin(), next_states.end()), next_states.end());
      if (!next_states.empty()) {
        std::vector<uint64_t> bits = linearized;
        bits[entry->op / 64] |= 1ull << (entry->op % 64);
        if (remember(bits, next_states)) {
          stack.push_back(Level{entry, std::move(states), std::move(tried)});
          tried.clear();
          states = next_states;
          linearized = std::move(bits);
          lift(entry);
          entry = head.next;
          continue;
        }
      }
      entry = entry->next;
      continue;
    }
    // A return: the op must have been linearized by now. An unknown op's return is at +infinity, after every
    // definite op's: reaching one means every definite op is placed.
    if (ops[entry->op].outcome == Outcome::kUnknown) return result;
    if (stack.size() >= result.longest_prefix) {
      result.longest_prefix = stack.size();
      result.stuck_op = ops[entry->op].index;
    }
    if (stack.empty()) {
      result.verdict = Verdict::kNotLinearizable;
      return result;
    }
    Level level = std::move(stack.back());
    stack.pop_back();
    Entry* call = level.call;
    states = std::move(level.states);
    tried = std::move(level.tried);
    linearized[call->op / 64] &= ~(1ull << (call->op % 64));
    unlift(call);
    entry = call->next;
  }
  return result;
}

}  // namespace mayfly::chaos
