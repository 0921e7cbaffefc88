#include "tests/chaos/checker.h"

#include <algorithm>
#include <climits>
#include <map>
#include <utility>
#include <set>

#include "tests/chaos/linearizability.h"

namespace mayfly::chaos {
namespace {

bool writes_version(const Op& op) {
  return op.kind == OpKind::kCreate || op.kind == OpKind::kUpsert || op.kind == OpKind::kReplace ||
         op.kind == OpKind::kIncr;
}

// The completion time used for "completed before": an unknown op never completes.
int64_t completion(const Op& op) { return op.outcome == Outcome::kUnknown ? INT64_MAX : op.complete_us; }

struct Versions {
  std::map<int64_t, const Op*> writer;  // v -> the write that wrote it
  std::map<int64_t, int64_t> ts;        // v -> its _ts
};

Versions check_versions(const std::vector<Op>& ops, CheckReport& report) {
  Versions versions;
  for (const Op& op : ops) {
    if (writes_version(op)) versions.writer[op.write_v] = &op;
  }
  auto note_ts = [&](int64_t v, int64_t ts, const Op& op) {
    auto [it, inserted] = versions.ts.emplace(v, ts);
    if (!inserted && it->second != ts) {
      report.anomalies.push_back({"versions", op.key,
                                  "version v=" + std::to_string(v) + " seen with _ts " + std::to_string(it->second) +
                                      " and " + std::to_string(ts) + " (" + describe(op) + ")",
                                  op.invoke_us});
    }
  };
  for (const Op& op : ops) {
    if (op.outcome != Outcome::kOk) continue;
    if (writes_version(op) && op.status < 300 && op.ts != 0) note_ts(op.write_v, op.ts, op);
    if (op.kind != OpKind::kRead || !op.found) continue;
    note_ts(op.read_v, op.read_ts, op);
    auto writer = versions.writer.find(op.read_v);
    if (writer == versions.writer.end() || writer->second->key != op.key) {
      report.anomalies.push_back({"versions", op.key, "a read returned a version no write made: " + describe(op),
                                  op.invoke_us});
    } else if (writer->second->outcome == Outcome::kFail) {
      report.anomalies.push_back({"versions", op.key,
                                  "a read returned the version of a write reported as not applied: " + describe(op) +
                                      " written by " + describe(*writer->second),
                                  op.invoke_us});
    } else if (writer->second->outcome == Outcome::kOk && writer->second->status >= 300) {
      report.anomalies.push_back({"versions", op.key,
                                  "a read returned the version of a refused write: " + describe(op) + " written by " +
                                      describe(*writer->second),
                                  op.invoke_us});
    } else if (op.invoke_us < writer->second->invoke_us && op.complete_us < writer->second->invoke_us) {
      report.anomalies.push_back({"versions", op.key, "a read returned a version before its write began: " +
                                                          describe(op) + " written by " + describe(*writer->second),
                                  op.invoke_us});
    }
  }
  return versions;
}

void check_linearizable(const std::vector<Op>& ops, const Versions& versions, const CheckOptions& options,
                        CheckReport& report) {
  std::map<std::string, std::vector<Op>> by_key;
  std::vector<Op> policy_changes;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kSetDefaultTtl) {
      if (op.outcome != Outcome::kFail && !(op.outcome == Outcome::kOk && op.status >= 300)) policy_changes.push_back(op);
      continue;
    }
    if (op.outcome == Outcome::kFail) continue;
    if (op.kind == OpKind::kRead && (op.level != ReadLevel::kStrong || op.outcome != Outcome::kOk)) continue;
    by_key[op.key].push_back(op);
  }
  for (auto& [key, key_ops] : by_key) {
    if (!options.counter_keys.count(key)) key_ops.insert(key_ops.end(), policy_changes.begin(), policy_changes.end());
    const LinearizabilityResult result =
        check_key(key_ops, versions.ts, options.initial_policy, options.max_search_steps);
    ++report.keys_checked;
    report.search_steps += result.steps;
    if (result.verdict == Verdict::kTooBig) {
      report.anomalies.push_back({"linearizable", key,
                                  "INCONCLUSIVE: the search for key " + key + " (" + std::to_string(key_ops.size()) +
                                      " ops) ran over " + std::to_string(options.max_search_steps) + " steps",
                                  0, true});
    } else if (result.verdict == Verdict::kNotLinearizable) {
      const Op& stuck = ops.at(result.stuck_op);
      report.anomalies.push_back({"linearizable", key,
                                  "not linearizable: no order of the first " + std::to_string(result.longest_prefix) +
                                      " ops explains " + describe(stuck),
                                  stuck.invoke_us});
    }
  }
}

// u is certainly before w in the log.
bool certainly_older(int64_t u, int64_t w, const Versions& versions) {
  if (u == w) return false;
  auto tu = versions.ts.find(u), tw = versions.ts.find(w);
  if (tu != versions.ts.end() && tw != versions.ts.end() && tu->second < tw->second) return true;
  auto wu = versions.writer.find(u), ww = versions.writer.find(w);
  return wu != versions.writer.end() && ww != versions.writer.end() &&
         completion(*wu->second) < ww->second->invoke_us;
}

void check_sessions(const std::vector<Op>& ops, const Versions& versions, CheckReport& report) {
  struct Floor {
    int64_t v = 0;
    int64_t ttl_own = kTtlAbsent;  // of the floor version as written (-1: it can never expire)
    int64_t since_us = 0;          // when the client learned of it
  };
  std::map<int, std::map<std::string, Floor>> floors;
  // Versions a client has seen give way (to another version, to absent, or to its own write): never seen again.
  std::map<int, std::map<std::string, std::set<int64_t>>> dead;
  std::map<std::string, std::vector<const Op*>> changes;  // per key: writes and deletes, for "absent" excuses
  for (const Op& op : ops) {
    if (op.is_write() && op.kind != OpKind::kSetDefaultTtl && op.outcome != Outcome::kFail) changes[op.key].push_back(&op);
  }
  for (const Op& op : ops) {  // ops of one client are sequential, so history order is that client's order
    if (op.client < 0 || op.kind == OpKind::kSetDefaultTtl || op.outcome != Outcome::kOk) continue;
    Floor& floor = floors[op.client][op.key];
    std::set<int64_t>& gone = dead[op.client][op.key];
    if (writes_version(op)) {
      if (op.status < 300) {
        if (floor.v != 0) gone.insert(floor.v);
        // An incr keeps the ttl of the item it patched, which may be another client's write this client never
        // saw: unknown here, so the version is not held to "never expires" (seed 2 of chaos.campaign).
        floor = Floor{op.write_v, op.kind == OpKind::kIncr ? kTtlAbsent : op.write_ttl, op.invoke_us};
      }
      continue;
    }
    if (op.kind == OpKind::kDelete) {
      if (op.status == 204) {
        if (floor.v != 0) gone.insert(floor.v);
        floor = Floor{};
      }
      continue;
    }
    if (op.kind != OpKind::kRead || op.level != ReadLevel::kSession) continue;
    if (floor.v != 0 && (!op.found || op.read_v != floor.v)) gone.insert(floor.v);
    if (op.found && gone.count(op.read_v)) {
      report.anomalies.push_back({"session", op.key,
                                  "client " + std::to_string(op.client) + " read v=" + std::to_string(op.read_v) +
                                      " again after it had seen it replaced or removed: " + describe(op),
                                  op.invoke_us});
    }
    if (op.found) {
      if (floor.v != 0 && certainly_older(op.read_v, floor.v, versions)) {
        report.anomalies.push_back({"session", op.key,
                                    "client " + std::to_string(op.client) + " read v=" + std::to_string(op.read_v) +
                                        ", older than v=" + std::to_string(floor.v) +
                                        " it had written or read before: " + describe(op),
                                    op.invoke_us});
      }
      floor = Floor{op.read_v, op.read_ttl, op.invoke_us};
      continue;
    }
    if (floor.v == 0 || floor.ttl_own != -1) continue;
    // A delete or write excuses the absence if it may follow the version in the log: it did not complete before the
    // version's write began (a session read may be stale, so a change that completed before the client saw the
    // version can still come after it — chaos seed 2003), and it began before this read ended.
    auto writer = versions.writer.find(floor.v);
    const int64_t version_from_us =
        writer != versions.writer.end() ? std::min(writer->second->invoke_us, floor.since_us) : floor.since_us;
    const auto& key_changes = changes[op.key];
    const bool excused = std::any_of(key_changes.begin(), key_changes.end(), [&](const Op* change) {
      return change->write_v != floor.v && completion(*change) > version_from_us && change->invoke_us < op.complete_us;
    });
    if (!excused) {
      report.anomalies.push_back({"session", op.key,
                                  "client " + std::to_string(op.client) + " read the key as absent after seeing v=" +
                                      std::to_string(floor.v) + " (ttl -1), with no delete or write meanwhile: " +
                                      describe(op),
                                  op.invoke_us});
    }
    floor = Floor{};
  }
}

void check_counters(const std::vector<Op>& ops, const CheckOptions& options, CheckReport& report) {
  for (const std::string& key : options.counter_keys) {
    int64_t acked = 0, unknown = 0;
    const Op* final_read = nullptr;
    for (const Op& op : ops) {
      if (op.key != key) continue;
      if (op.kind == OpKind::kIncr) {
        if (op.outcome == Outcome::kOk && op.status == 200) ++acked;
        if (op.outcome == Outcome::kUnknown) ++unknown;
      }
      if (op.client < 0 && op.kind == OpKind::kRead && op.outcome == Outcome::kOk) final_read = &op;
    }
    if (final_read == nullptr || !final_read->found) {
      report.anomalies.push_back({"counters", key, "no final strong read of counter " + key + " found it", 0});
      continue;
    }
    const int64_t n = final_read->read_n;
    if (n < acked || n > acked + unknown) {
      report.anomalies.push_back({"counters", key,
                                  "counter " + key + " is " + std::to_string(n) + " after " + std::to_string(acked) +
                                      " acknowledged and " + std::to_string(unknown) + " unknown increments (" +
                                      (n < acked ? "an acknowledged increment was lost" : "an increment applied twice") +
                                      ")",
                                  final_read->invoke_us});
    }
  }
}

void check_recency(const std::vector<Op>& ops, const CheckOptions& options, CheckReport& report) {
  // Replicated-time witnesses, on any key: an acknowledged write's `_ts`, and a strong read's version's `_ts`. A strong
  // read is served at a log position at or after every witness that completed before it was invoked, and replicated
  // time never goes backwards along the log, so its replicated second is at least theirs.
  std::vector<std::pair<int64_t, int64_t>> witnesses;  // (complete_us, replicated second)
  for (const Op& op : ops) {
    if (op.outcome != Outcome::kOk) continue;
    if (writes_version(op) && op.status < 300 && op.ts != 0) witnesses.emplace_back(op.complete_us, op.ts);
    if (op.kind == OpKind::kRead && op.level == ReadLevel::kStrong && op.found) {
      witnesses.emplace_back(op.complete_us, op.read_ts);
    }
  }
  std::sort(witnesses.begin(), witnesses.end());
  for (size_t i = 1; i < witnesses.size(); ++i) witnesses[i].second = std::max(witnesses[i].second, witnesses[i - 1].second);
  for (const Op& op : ops) {
    if (op.kind != OpKind::kRead || op.level != ReadLevel::kStrong || op.outcome != Outcome::kOk || !op.found) continue;
    if (op.read_ttl == kTtlAbsent || op.read_ttl <= 0) continue;
    const int64_t expiry_s = op.read_ts + op.read_ttl;
    // Expired at replicated time T iff floor(T) >= expiry_s: exact, whatever the wall clock does.
    auto before = std::lower_bound(witnesses.begin(), witnesses.end(), std::make_pair(op.invoke_us, INT64_MIN));
    if (before != witnesses.begin() && std::prev(before)->second >= expiry_s) {
      report.anomalies.push_back({"recency", op.key,
                                  "a strong read returned an item that expires at second " + std::to_string(expiry_s) +
                                      ", invoked after replicated time had reached second " +
                                      std::to_string(std::prev(before)->second) + " (an acknowledged write or strong "
                                      "read on any key): " + describe(op),
                                  op.invoke_us});
      continue;
    }
    if (op.invoke_wall_us / 1000000 > expiry_s + options.expiry_slack_s) {
      report.anomalies.push_back({"recency", op.key,
                                  "a strong read at wall second " + std::to_string(op.invoke_wall_us / 1000000) +
                                      " returned an item that expires at " + std::to_string(expiry_s) + ": " +
                                      describe(op),
                                  op.invoke_us});
    }
  }
}

}  // namespace

CheckReport check_history(const std::vector<Op>& ops, const CheckOptions& options) {
  CheckReport report;
  for (const Op& op : ops) {
    if (op.status >= 500 && op.status != 503) {
      report.anomalies.push_back({"server errors", op.key, "server error: " + describe(op), op.invoke_us});
    }
  }
  const Versions versions = check_versions(ops, report);
  check_linearizable(ops, versions, options, report);
  check_sessions(ops, versions, report);
  check_counters(ops, options, report);
  check_recency(ops, options, report);
  return report;
}

std::string excerpt(const std::vector<Op>& ops, const std::string& key, int64_t around_us, size_t max_lines) {
  std::vector<const Op*> related;
  for (const Op& op : ops) {
    if (key.empty() || op.key == key || op.kind == OpKind::kSetDefaultTtl) related.push_back(&op);
  }
  std::sort(related.begin(), related.end(), [](const Op* a, const Op* b) { return a->invoke_us < b->invoke_us; });
  // The max_lines ops nearest `around_us`, printed in invocation order.
  auto pivot = std::lower_bound(related.begin(), related.end(), around_us,
                                [](const Op* op, int64_t t) { return op->invoke_us < t; });
  const size_t at = static_cast<size_t>(pivot - related.begin());
  const size_t before = std::min(at, max_lines * 2 / 3);
  const size_t from = at - before;
  const size_t to = std::min(related.size(), from + max_lines);
  std::string out;
  for (size_t i = from; i < to; ++i) out += "    " + describe(*related[i]) + "\n";
  return out;
}

}  // namespace mayfly::chaos
