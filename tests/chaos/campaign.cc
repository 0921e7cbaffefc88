#include "tests/chaos/campaign.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "tests/chaos/checker.h"
#include "tests/chaos/disk.h"
#include "tests/chaos/interrupt.h"
#include "tests/chaos/workload.h"
#include "tests/integration/cluster_harness.h"

namespace mayfly::chaos {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

const char* kDatabase = "chaos";
const char* kContainer = "items";

// A pause between fault steps: the fault schedule itself (how long a fault lasts), not a wait for a condition.
void hold(int64_t ms) { std::this_thread::sleep_for(milliseconds(ms)); }

struct NodeSnapshot {
  uint64_t applied = 0;
  int64_t applied_time_s = 0;
  std::map<std::string, Op> items;  // key -> the pinned eventual read
};

// The nemesis and the end-of-run checks of one run, on the campaign's main thread (the cluster harness and the admin
// client are single-threaded). Every random draw comes from the seed; which node leads when a fault picks "the
// leader" is the cluster's doing, so a seed fixes the schedule's choices, not the whole run.
class Campaign {
 public:
  Campaign(const CampaignOptions& options, it::Cluster& cluster, History& history, SteadyClock::time_point origin)
      : options_(options), cluster_(cluster), history_(history), origin_(origin), random_(options.seed) {}

  int64_t between(int64_t low, int64_t high) { return low + static_cast<int64_t>(random_() % (high - low + 1)); }

  void log(const std::string& line) {
    char stamp[32];
    std::snprintf(stamp, sizeof(stamp), "[%7.3f] ", static_cast<double>(micros_since(origin_)) / 1e6);
    fault_log_ += stamp + line + "\n";
    std::cerr << "[chaos] " << stamp << line << "\n";
  }

  void anomaly(const std::string& checker, const std::string& message) {
    extra_anomalies_.push_back({checker, "", message, micros_since(origin_)});
    log("ANOMALY (" + checker + "): " + message);
  }

  // The leader as the running, unpaused nodes report it (the highest term's self-declared leader); 0: none.
  uint64_t leader() {
    uint64_t best = 0, best_term = 0;
    for (size_t n = 1; n <= cluster_.size(); ++n) {
      if (paused_.count(n) || !cluster_.running(n)) continue;
      std::optional<it::NodeStatus> s = cluster_.status(n);
      if (s && s->role == "leader" && s->term >= best_term) {
        best = n;
        best_term = s->term;
      }
    }
    return best;
  }

  // A node to hit: the leader three times out of five (if there is one), else any node.
  size_t target() {
    const uint64_t lead = between(1, 5) <= 3 ? leader() : 0;
    return lead != 0 ? static_cast<size_t>(lead) : static_cast<size_t>(between(1, static_cast<int64_t>(cluster_.size())));
  }

  // After a fault heals: a leader every node agrees on within the bound.
  void expect_recovery(const std::string& after) {
    const auto start = SteadyClock::now();
    const uint64_t lead = cluster_.wait_for_leader(milliseconds(options_.recovery_bound_ms));
    const int64_t ms = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count();
    if (lead == 0) {
      // (the harness's waits are scaled in a sanitized build: tests/env.h)
      anomaly("recovery", "no leader within " +
                              std::to_string(testing_env::scaled(milliseconds(options_.recovery_bound_ms)).count()) +
                              " ms after " + after);
    } else {
      log("leader " + std::to_string(lead) + " after " + std::to_string(ms) + " ms");
      recovery_ms_max_ = std::max(recovery_ms_max_, ms);
    }
  }

  // Starts node n through the interrupt gate (interrupt.h): after SIGINT/SIGTERM no node starts.
  bool start_node(size_t n) {
    std::lock_guard<std::timed_mutex> gate(node_start_gate());
    return cluster_.start_node(n);
  }

  void restart(size_t n) {
    cluster_.kill_node(n);
    if (!start_node(n)) anomaly("recovery", "node " + std::to_string(n) + " did not restart");
  }

  void fault_kill() {
    const size_t n = target();
    log("SIGKILL node " + std::to_string(n) + (options_.power_cut_shim.empty() ? "" : " (power cut)"));
    cluster_.kill_node(n);
    hold(between(500, 2500));
    if (!start_node(n)) anomaly("recovery", "node " + std::to_string(n) + " did not restart");
    log("restarted node " + std::to_string(n));
    expect_recovery("restarting node " + std::to_string(n));
  }

  // Every node at once: with power_cut_shim, what no node had fsync'd is gone everywhere (a data centre's power cut).
  void fault_blackout() {
    log(std::string("SIGKILL every node") + (options_.power_cut_shim.empty() ? "" : " (power cut)"));
    for (size_t n = 1; n <= cluster_.size(); ++n) cluster_.kill_node(n);
    hold(between(300, 1500));
    for (size_t n = 1; n <= cluster_.size(); ++n) {
      if (!start_node(n)) anomaly("recovery", "node " + std::to_string(n) + " did not restart");
    }
    log("restarted every node");
    expect_recovery("restarting every node");
  }

  // A membership request sent until the leader accepts it (bounded); its last response.
  client::Response change_membership(client::Op op, size_t n) {
    client::Response response;
    for (int attempt = 0; attempt < 10; ++attempt) {
      client::Request request;
      if (op == client::Op::kAddMember) {
        request.operation = api::AddMember{.id = n, .address = cluster_.endpoint(n)};
      } else {
        request.operation = api::RemoveMember{.id = n};
      }
      response = admin().execute(request);
      if (response.status == 200) break;
      hold(300);  // retry spacing while a leader is elected or the last change commits
    }
    return response;
  }

  // A follower loses its disk: removed from the cluster, wiped, restarted empty with --join, added back as a learner
  // (the leader promotes it once it has caught up), all under load.
  void fault_membership() {
    const uint64_t lead = leader();
    if (lead == 0) return;
    size_t n = lead == cluster_.size() ? 1 : static_cast<size_t>(lead) + 1;
    if (disk_ != nullptr && n == disk_node_) n = n == cluster_.size() ? 1 : n + 1;  // a tmpfs cannot be wiped whole
    if (n == lead) return;
    log("remove node " + std::to_string(n) + ", wipe it, add it back");
    cluster_.kill_node(n);
    cluster_.wipe_node(n);
    client::Response removed = change_membership(client::Op::kRemoveMember, n);
    log("remove-member " + std::to_string(n) + ": " + std::to_string(removed.status) + " " + removed.message);
    if (removed.status != 200) return anomaly("membership", "remove-member " + std::to_string(n) + " never succeeded");
    cluster_.set_node_flags(n, {"--join"});
    if (!start_node(n)) anomaly("recovery", "node " + std::to_string(n) + " did not start");
    hold(between(200, 1000));
    client::Response added = change_membership(client::Op::kAddMember, n);
    log("add-member " + std::to_string(n) + ": " + std::to_string(added.status) + " " + added.message);
    if (added.status != 200) return anomaly("membership", "add-member " + std::to_string(n) + " never succeeded");
    expect_recovery("re-adding node " + std::to_string(n));
  }

  // Node disk_node_'s tmpfs filled to ENOSPC: the node must stop cleanly (exit 1 with the cause, docs/tests.md, "Disk
  // faults"), never abort; once the space is back it restarts and catches up.
  void fault_disk_full() {
    if (disk_ == nullptr) return;
    const size_t n = disk_node_;
    const int64_t mib = disk_->fill();
    log("filled node " + std::to_string(n) + "'s disk (" + std::to_string(mib) + " MiB of filler)");
    const bool exited = it::wait_until([&] { return !cluster_.running(n); }, milliseconds(10000), milliseconds(20));
    if (exited) {
      const std::optional<int> status = cluster_.exit_status(n);
      if (status && WIFSIGNALED(*status)) {
        anomaly("disk full", "node " + std::to_string(n) + " died of signal " + std::to_string(WTERMSIG(*status)) +
                                 " on a full disk instead of stopping with exit status 1");
      } else {
        log("node " + std::to_string(n) + " stopped: exit status " +
            std::to_string(status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1));
      }
    } else {
      log("node " + std::to_string(n) + " still runs with a full disk");
    }
    hold(between(500, 1500));
    disk_->drain();
    log("freed node " + std::to_string(n) + "'s disk");
    if (!cluster_.running(n) && !start_node(n)) {
      anomaly("recovery", "node " + std::to_string(n) + " did not restart after its disk was freed");
    }
    expect_recovery("freeing node " + std::to_string(n) + "'s disk");
  }

  void fault_pause() {
    const size_t n = target();
    const pid_t pid = cluster_.pid(n);
    if (pid <= 0) return;
    const int64_t ms = between(900, 2500);  // elections start after 300-600 ms of silence
    log("SIGSTOP node " + std::to_string(n) + " for " + std::to_string(ms) + " ms");
    paused_.insert(n);
    ::kill(pid, SIGSTOP);  // a PID the harness started and has not reaped
    hold(ms);
    ::kill(pid, SIGCONT);
    paused_.erase(n);
    log("SIGCONT node " + std::to_string(n));
    expect_recovery("resuming node " + std::to_string(n));
  }

  void fault_partition() {
    if (options_.network == nullptr) return;
    const size_t n = target();
    std::set<size_t> rest;
    for (size_t m = 1; m <= cluster_.size(); ++m) {
      if (m != n) rest.insert(m);
    }
    const int64_t ms = between(1000, 3000);
    log("partition {" + std::to_string(n) + "} from the others for " + std::to_string(ms) + " ms");
    if (!options_.network->partition({{n}, rest})) anomaly("harness", "could not install the partition");
    hold(ms);
    if (!options_.network->heal()) anomaly("harness", "could not heal the partition");
    log("healed partition");
    expect_recovery("healing a partition");
  }

  void fault_clock() {
    static const char* kOffsets[] = {"+5s", "-5s", "+1h"};
    const std::string offset = kOffsets[between(0, 2)];
    const uint64_t lead = leader();
    const size_t n = lead != 0 ? static_cast<size_t>(lead) : 1;
    log("restart node " + std::to_string(n) + " with its clock at " + offset + " (libfaketime)");
    cluster_.set_clock_offset(n, offset);
    restart(n);
    expect_recovery("restarting node " + std::to_string(n) + " with a skewed clock");
    // Give it back the leadership, so the skewed clock is the leader's (one request; it may refuse).
    if (const uint64_t now = leader(); now != 0 && now != n) {
      client::Request request;
      request.operation = api::TransferLeader{.id = n};
      request.endpoint = now;
      admin().execute(request);
      it::wait_until([&] { return leader() == n; }, milliseconds(2000), milliseconds(50));
      log("leader now " + std::to_string(leader()));
    }
    hold(between(2000, 4000));
    cluster_.set_clock_offset(n, "");
    log("restart node " + std::to_string(n) + " with its real clock");
    restart(n);
    expect_recovery("restoring node " + std::to_string(n) + "'s clock");
  }

  client::Client& admin() {
    if (!admin_) {
      client::ClientOptions options = cluster_.client_options();
      options.request_timeout_ms = 3000;
      admin_ = std::make_unique<client::Client>(options);
    }
    return *admin_;
  }

  void run_faults(SteadyClock::time_point until) {
    for (int round = 0; round < 10000 && SteadyClock::now() < until; ++round) {
      hold(between(300, 1500));
      if (SteadyClock::now() >= until) break;
      const std::string& kind = options_.faults[between(0, static_cast<int64_t>(options_.faults.size()) - 1)];
      ++faults_;
      if (kind == "kill") fault_kill();
      if (kind == "blackout") fault_blackout();
      if (kind == "membership") fault_membership();
      if (kind == "diskfull") fault_disk_full();
      if (kind == "pause") fault_pause();
      if (kind == "partition") fault_partition();
      if (kind == "clock") fault_clock();
    }
  }

  // After every fault healed: a leader, and every node applied what the leader had committed, within the bound.
  void expect_caught_up() {
    const uint64_t lead = cluster_.wait_for_leader(milliseconds(options_.recovery_bound_ms));
    if (lead == 0) return anomaly("recovery", "no leader after the final heal");
    std::optional<it::NodeStatus> s = cluster_.status(lead);
    if (!s) return anomaly("recovery", "the leader does not answer");
    const uint64_t commit = s->commit;
    for (size_t n = 1; n <= cluster_.size(); ++n) {
      const bool caught_up = it::wait_until(
          [&] {
            std::optional<it::NodeStatus> ns = cluster_.status(n);
            return ns && ns->applied >= commit;
          },
          milliseconds(options_.recovery_bound_ms), milliseconds(20));
      if (!caught_up) anomaly("recovery", "node " + std::to_string(n) + " did not apply index " + std::to_string(commit));
    }
  }

  Op read(const std::string& key, client::Consistency consistency, std::optional<size_t> endpoint, int client) {
    Op op;
    op.client = client;
    op.key = key;
    op.level = consistency == client::Consistency::kStrong ? ReadLevel::kStrong : ReadLevel::kEventual;
    op.pinned_endpoint = endpoint;
    client::Request request = it::item_key(client::Op::kReadItem, kDatabase, kContainer, key, key);
    request.options.consistency = consistency;
    request.endpoint = endpoint;
    op.invoke_wall_us = it::wall_micros();
    op.invoke_us = micros_since(origin_);
    const client::Response response = admin().execute(request);
    op.complete_us = micros_since(origin_);
    classify(op, response);
    return op;
  }

  // Every node's state machine, read at eventual consistency pinned to it, agrees with every other's: identical
  // at the same applied index; otherwise an item one node has and another has not must have expired in between.
  void expect_agreement(const std::vector<std::string>& keys) {
    for (int attempt = 0; attempt < 30; ++attempt) {
      std::vector<NodeSnapshot> snapshots;
      bool stable = true;
      for (size_t n = 1; n <= cluster_.size() && stable; ++n) {
        std::optional<it::NodeStatus> before = cluster_.status(n);
        NodeSnapshot snapshot;
        for (const std::string& key : keys) {
          Op op = read(key, client::Consistency::kEventual, n, -1);
          if (op.outcome != Outcome::kOk || op.served_by != n) stable = false;
          snapshot.items[key] = op;
        }
        std::optional<it::NodeStatus> after = cluster_.status(n);
        if (!before || !after || before->applied != after->applied) stable = false;
        snapshot.applied = after ? after->applied : 0;
        snapshot.applied_time_s = after ? after->applied_time_micros / 1000000 : 0;
        snapshots.push_back(std::move(snapshot));
      }
      if (!stable) continue;
      for (size_t a = 0; a < snapshots.size(); ++a) {
        for (size_t b = 0; b < snapshots.size(); ++b) {
          if (a == b) continue;
          for (const std::string& key : keys) {
            const Op& x = snapshots[a].items[key];
            const Op& y = snapshots[b].items[key];
            const bool same = x.found == y.found && (!x.found || (x.read_v == y.read_v && x.read_n == y.read_n &&
                                                                  x.read_ts == y.read_ts && x.etag == y.etag));
            if (same || (!x.found && y.found) || (x.found && y.found && a > b)) continue;  // the pair's other order
            // x present, y absent: y must be further along, at a time the item can have expired by.
            const bool excused = x.found && !y.found && snapshots[b].applied > snapshots[a].applied &&
                                 snapshots[b].applied_time_s >= x.read_ts + (x.read_ttl > 0 ? x.read_ttl : 1);
            if (excused) continue;
            anomaly("agreement", "node " + std::to_string(a + 1) + " (applied " + std::to_string(snapshots[a].applied) +
                                     ") and node " + std::to_string(b + 1) + " (applied " +
                                     std::to_string(snapshots[b].applied) + ") disagree on " + key + ": " +
                                     describe(x) + " etag " + x.etag + " vs " + describe(y) + " etag " + y.etag);
          }
        }
      }
      log("nodes agree (applied indexes " + std::to_string(snapshots[0].applied) + ", " +
          std::to_string(snapshots[1].applied) + ", " + std::to_string(snapshots[2].applied) + ")");
      return;
    }
    anomaly("agreement", "could not read every node at a stable applied index in 30 attempts");
  }

  const CampaignOptions& options_;
  it::Cluster& cluster_;
  History& history_;
  SteadyClock::time_point origin_;
  std::mt19937_64 random_;
  std::set<size_t> paused_;
  SmallDisk* disk_ = nullptr;
  size_t disk_node_ = 0;
  std::unique_ptr<client::Client> admin_;
  std::string fault_log_;
  std::vector<Anomaly> extra_anomalies_;
  size_t faults_ = 0;
  int64_t recovery_ms_max_ = 0;
};

}  // namespace

CampaignSummary run_campaign(const CampaignOptions& options) {
  CampaignSummary summary;
  const auto origin = SteadyClock::now();
  std::cerr << "[chaos] seed " << options.seed << ": " << options.seconds << " s, " << options.threads
            << " clients, exactly-once " << (options.exactly_once ? "on" : "off") << ", faults:";
  for (const std::string& f : options.faults) std::cerr << " " << f;
  std::cerr << (options.network ? " (nodes in network namespaces)" : " (nodes on 127.0.0.1)")
            << (options.power_cut_shim.empty() ? "" : ", kills are power cuts") << "\n";

  it::ClusterOptions cluster_options;
  cluster_options.name = "chaos";
  cluster_options.mayflyd = options.mayflyd;
  cluster_options.extra_flags = {"--request-timeout-ms", "3000"};
  const int64_t checkpoint_interval = options.checkpoint_interval_entries != 0 ? options.checkpoint_interval_entries
                                    : options.seed % 3 == 0                ? 300
                                    : options.seed % 3 == 1                ? 2000
                                                                           : 20000;
  cluster_options.extra_flags.insert(cluster_options.extra_flags.end(),
                                     {"--checkpoint-interval-entries", std::to_string(checkpoint_interval)});
  if (!options.power_cut_shim.empty()) cluster_options.extra_env = {"LD_PRELOAD=" + options.power_cut_shim};
  if (options.network != nullptr) {
    for (size_t n = 1; n <= 3; ++n) {
      cluster_options.addresses.push_back(options.network->address(n) + ":7100");
      cluster_options.launch_prefix[n] = options.network->launch_prefix(n);
    }
  }
  std::cerr << "[chaos] seed " << options.seed << ": checkpoints every " << checkpoint_interval << " entries\n";
  it::Cluster cluster(cluster_options);
  // Removed by an interrupt's cleanup while it exists (the destructor removes it, or keeps it for diagnosis).
  struct RunDir {
    std::string path;
    explicit RunDir(std::string p) : path(std::move(p)) { note_run_dir(path); }
    ~RunDir() { forget_run_dir(path); }
  } run_dir(cluster.dir());
  std::unique_ptr<SmallDisk> disk;  // unmounted (lazily) before the cluster's destructor removes its directory
  History history;
  Campaign campaign(options, cluster, history, origin);
  if (std::find(options.faults.begin(), options.faults.end(), "diskfull") != options.faults.end()) {
    const size_t n = 1 + options.seed % 3;
    std::string why;
    disk = SmallDisk::create(cluster.data_dir(n), 192, &why);
    if (disk == nullptr) {
      std::cerr << "[chaos] DISK FULL SKIPPED: " << why << "\n";
    } else {
      campaign.disk_ = disk.get();
      campaign.disk_node_ = n;
      campaign.log("node " + std::to_string(n) + "'s data directory is a 192 MiB tmpfs");
    }
  }
  std::mt19937_64 setup_random(options.seed ^ 0x5eed);
  const std::vector<int64_t> policies = {-1, 3, 10, 60};
  const int64_t initial_policy = policies[setup_random() % policies.size()];
  bool started = false;
  {
    std::lock_guard<std::timed_mutex> gate(node_start_gate());
    started = cluster.start();
  }
  if (!started || cluster.wait_for_leader(milliseconds(15000)) == 0) {
    summary.result = CampaignResult::kInconclusive;
    std::cerr << "[chaos] seed " << options.seed << ": the cluster did not start\n";
    return summary;
  }
  client::Response made = campaign.admin().execute(it::db_req(client::Op::kCreateDatabase, kDatabase));
  made = campaign.admin().execute(it::create_container(kDatabase, kContainer, "/pk", std::to_string(initial_policy)));
  if (made.status != 201) {
    summary.result = CampaignResult::kInconclusive;
    std::cerr << "[chaos] could not create the container: " << made.status << " " << made.message << "\n";
    return summary;
  }
  WorkloadOptions workload_options;
  workload_options.seed = options.seed;
  workload_options.threads = options.threads;
  workload_options.database = kDatabase;
  workload_options.container = kContainer;
  workload_options.keys = {"k0", "k1", "k2", "k3", "k4", "k5"};
  workload_options.counter_keys = {"c0", "c1"};
  workload_options.policies = policies;
  workload_options.item_ttls = {kTtlAbsent, kTtlAbsent, -1, 2, 3, 5};
  workload_options.client = cluster.client_options();
  workload_options.client.request_timeout_ms = 4000;
  workload_options.exactly_once = options.exactly_once;
  for (const std::string& key : workload_options.counter_keys) {  // counters start at 0 and never expire
    Op op;
    op.client = -2;
    op.kind = OpKind::kCreate;
    op.key = key;
    op.write_v = static_cast<int64_t>(history.ops().size()) + 1;
    op.write_ttl = -1;
    op.invoke_us = micros_since(origin);
    const client::Response response = campaign.admin().execute(it::item_write(
        client::Op::kCreateItem, kDatabase, kContainer,
        "{\"id\":\"" + key + "\",\"pk\":\"" + key + "\",\"v\":" + std::to_string(op.write_v) + ",\"n\":0,\"ttl\":-1}"));
    op.complete_us = micros_since(origin);
    classify(op, response);
    history.record(op);
  }

  Workload workload(workload_options, history, origin);
  workload.start();
  campaign.run_faults(SteadyClock::now() + std::chrono::seconds(options.seconds));
  if (options.network != nullptr) options.network->heal();
  campaign.log("every fault healed");
  campaign.expect_caught_up();
  hold(1000);  // a last second of load on the healed cluster
  workload.stop();
  std::vector<std::string> all_keys = workload_options.keys;
  all_keys.insert(all_keys.end(), workload_options.counter_keys.begin(), workload_options.counter_keys.end());
  for (const std::string& key : all_keys) history.record(campaign.read(key, client::Consistency::kStrong, std::nullopt, -1));
  campaign.expect_caught_up();
  campaign.expect_agreement(all_keys);

  const std::vector<Op> ops = history.ops();
  CheckOptions check_options;
  check_options.initial_policy = initial_policy;
  check_options.counter_keys = {workload_options.counter_keys.begin(), workload_options.counter_keys.end()};
  const bool clock_faults = std::find(options.faults.begin(), options.faults.end(), "clock") != options.faults.end();
  check_options.expiry_slack_s = clock_faults ? 8 : 2;
  CheckReport report = check_history(ops, check_options);
  report.anomalies.insert(report.anomalies.end(), campaign.extra_anomalies_.begin(), campaign.extra_anomalies_.end());
  if (!report.anomalies.empty()) cluster.keep_for_diagnosis();  // this run's node logs, not the next one's

  for (const Op& op : ops) {
    ++summary.ops;
    if (op.outcome == Outcome::kOk) ++summary.ok;
    if (op.outcome == Outcome::kFail) ++summary.failed;
    if (op.outcome == Outcome::kUnknown) ++summary.unknown;
  }
  summary.faults = campaign.faults_;
  summary.fault_log = campaign.fault_log_;
  summary.seconds = static_cast<double>(micros_since(origin)) / 1e6;
  std::cerr << "[chaos] seed " << options.seed << ": " << summary.ops << " ops (" << summary.ok << " ok, "
            << summary.failed << " failed, " << summary.unknown << " unknown), " << summary.faults
            << " faults, longest recovery " << campaign.recovery_ms_max_ << " ms, " << report.keys_checked
            << " keys searched in " << report.search_steps << " steps, " << summary.seconds << " s\n";
  std::map<std::string, size_t> mix;  // "strong read 200" -> count
  for (const Op& op : ops) {
    std::string what = op.kind == OpKind::kRead ? read_level_name(op.level) + " read" : op_kind_name(op.kind);
    mix[what + " " + (op.outcome == Outcome::kUnknown ? std::string("unknown") : std::to_string(op.status))]++;
  }
  std::cerr << "[chaos] seed " << options.seed << " operations:";
  for (const auto& [what, count] : mix) std::cerr << " " << what << " x" << count << ";";
  std::cerr << "\n";
  bool inconclusive = false, anomalous = false;
  for (const Anomaly& a : report.anomalies) {
    (a.inconclusive ? inconclusive : anomalous) = true;
    std::cerr << "[chaos] seed " << options.seed << " " << (a.inconclusive ? "INCONCLUSIVE" : "ANOMALY") << " ("
              << a.checker << (a.key.empty() ? "" : ", key " + a.key) << "): " << a.message << "\n";
    if (!a.key.empty() && !a.inconclusive) std::cerr << excerpt(ops, a.key, a.around_us);
  }
  summary.result = anomalous ? CampaignResult::kAnomaly : inconclusive ? CampaignResult::kInconclusive : CampaignResult::kPass;
  if (summary.result != CampaignResult::kPass || options.keep_history) {
    const std::string path = (options.history_dir.empty() ? std::string("/tmp") : options.history_dir) +
                             "/mayfly-chaos-" + std::to_string(options.seed) + ".history";
    history.write(path);
    std::cerr << "[chaos] seed " << options.seed << ": history in " << path << "; fault log:\n" << summary.fault_log;
  }
  return summary;
}

}  // namespace mayfly::chaos
