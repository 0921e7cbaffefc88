#include "tests/sim/simulator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <vector>

#include <leveldb/db.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "api/codec.h"
#include "common/clock.h"
#include "common/prng.h"
#include "metrics/metrics.h"
#include "node/driver.h"
#include "node/event_loop.h"
#include "node/read_service.h"
#include "node/request.h"
#include "node/router.h"
#include "node/ru_account.h"
#include "replication/codec.h"
#include "storage/changefeed.h"
#include "storage/document.h"
#include "storage/layout.h"
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
constexpr int64_t kFeedCheckMillis = 2000;  // every replica's whole change feed read and compared
constexpr int64_t kElectionTimeoutTicks = 15;
constexpr int64_t kHeartbeatTicks = 2;

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

// A node's wall clock as the simulation sets it (skew, drift and jumps).
class SimClock final : public Clock {
 public:
  explicit SimClock(std::function<int64_t()> now) : now_(std::move(now)) {}
  int64_t now_micros() override { return now_(); }

 private:
  std::function<int64_t()> now_;
};

// One running mayflyd as the simulation sees it: the production Driver — Raft core, log, state machine, collector,
// request-unit account, time entries, expiry deadlines, learner promotion — on a ManualLoop, its output captured.
// Destroyed whole on a crash (the Driver first: it holds timers of the loop).
struct Process final : node::DriverOutput {
  Process(int64_t now_micros, std::function<int64_t()> wall_clock, const node::NodeConfig& config)
      : loop(now_micros),
        clock(std::move(wall_clock)),
        metrics(config.id.value()),
        request_units(clock, metrics),
        router(config) {}
  void deliver(node::DriverBatch batch) override { outbox.push_back(std::move(batch)); }

  node::ManualLoop loop;
  SimClock clock;
  metrics::Metrics metrics;
  node::RequestUnitAccount request_units;
  // Where the node sends each client request, forward and peer message, as mayflyd's RPC side does (node/router.h).
  node::Router router;
  std::vector<node::DriverBatch> outbox;
  std::unique_ptr<node::Driver> driver;
};

struct Node {
  NodeId id;
  std::unique_ptr<FaultEnv> env;
  std::unique_ptr<Process> process;  // null while crashed
  storage::Replica& replica() { return process->driver->replica(); }
  int64_t restart_at_ms = -1;
  bool bootstrap_member = true;  // false once wiped to rejoin as a new server
  int64_t clock_offset_us = 0;   // skew plus jumps
  int64_t drift_ppm = 0;
  int64_t start_delay_ms = 0;  // the first tick's phase
  LogIndex last_applied;
  int64_t last_applied_ts = 0;
  // A crash chosen for this install, after its batch number crash_at_install_batch (0: none), and one the store's
  // hook reported: the process is torn down as soon as control is back in the simulation.
  int crash_at_install_batch = 0;
  bool crash_requested = false;
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

// A request handed to a node's driver, waiting for its reply.
struct PendingRequest {
  enum class Kind { kWrite, kStrongRead, kAdmin } kind;
  uint64_t command_hash = 0;     // kWrite: of the encoded command, as the log will hold it
  LogIndex acknowledged_before;  // kStrongRead: the highest index acknowledged when the read started
  bool forwarded = false;        // kWrite: a follower's router forwarded it to this node
  std::optional<api::WriteId> write_id;  // kWrite: its exactly-once id
};

// A client of the exactly-once table (storage/write_dedup.h), as the client library numbers its writes: each item
// write gets the next sequence, says the lowest one still unanswered, and a write left unanswered (dropped, its
// node crashed, a 5xx) is re-sent with the same id until answered or given up.
struct DedupClient {
  uint64_t id = 0;
  uint64_t next = 1;
  std::map<uint64_t, api::Request> unanswered;  // sequence -> the write as first sent
};

// A write a follower's router forwards to its leader, on the simulated network.
struct Forward {
  NodeId from;
  NodeId to;
  std::string request;  // the api::Request as the peer API carries it (api/codec.h)
};

// A session or bounded read the node's router parked until its applied index reaches the read's bound.
struct ParkedRead {
  api::Request operation;
  int64_t deadline_ms;
};

// Thrown-free failure: the first violation is recorded and the run stops.
class Simulation {
 public:
  // The write ids draw from a stream of their own, so they leave the fault schedule of a seed as it was.
  explicit Simulation(const SimOptions& options)
      : options_(options), prng_(options.seed), ids_prng_(options.seed ^ 0x6d6179666c796964ULL) {
    for (DedupClient& client : dedup_clients_) client.id = ids_prng_.next_u64() | 1;
  }

  SimResult run() {
    plan_ = draw_plan();
    for (int i = 1; i <= options_.nodes; ++i) membership_.voters.insert(NodeId(i));
    for (int i = 1; i <= options_.nodes; ++i) {
      Node node;
      node.id = NodeId(i);
      node.env = std::make_unique<FaultEnv>();
      node.clock_offset_us = prng_.range(-5'000'000, 5'000'000);  // ±5 s skew
      node.drift_ppm = prng_.range(-200, 200);
      node.start_delay_ms = prng_.range(0, kTickMillis - 1);
      nodes_.push_back(std::move(node));
    }
    // Processes start at different moments, so their ticks have different phases.
    for (Node& node : nodes_) node.restart_at_ms = node.start_delay_ms;
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

  storage::ReplicaOptions replica_options(Node& node) {
    storage::ReplicaOptions options;
    options.data_dir = "/sim/node" + std::to_string(node.id.value());
    options.env = node.env.get();
    options.raft.self = node.id;
    options.raft.election_timeout_ticks = kElectionTimeoutTicks;
    options.raft.heartbeat_interval_ticks = kHeartbeatTicks;
    options.raft.tick_interval_micros = kTickMillis * 1000;
    options.raft.max_inflight_messages = 16;
    // Small enough that the byte bound, not the count, stops appends to a follower catching up (entries are ~100 B to
    // a few KB here).
    options.raft.max_inflight_bytes = 8 << 10;
    options.raft.snapshot_chunk_bytes = 4096;  // several chunks per snapshot
    // A leader holds checkpoints while a follower installs, at most this long (10 min by default, past the run): a
    // follower that crashed mid-install then lets the leader's checkpoints and compactions go on within the run.
    options.raft.snapshot_install_wait_ticks = 20 * kElectionTimeoutTicks;
    if (node.bootstrap_member) options.bootstrap = bootstrap_;
    options.seed = options_.seed * 31 + node.id.value() * 7 + restarts_++;
    options.checkpoint_interval_entries = 200;
    options.log_entries_kept_after_checkpoint = 50;
    options.block_cache_bytes = 1 << 20;
    // Small WAL segments and cache: segments rotate and are deleted after compactions many times per run, and
    // followers' catch-up and the applies after a restart read entries back from the segment files.
    options.log.segment_bytes = 16 << 10;
    options.log.recent_entry_bytes = 8 << 10;
    options.background_snapshots = true;  // the driver's path (run inline: the loop has no threads)
    // Installs in batches of 2 KB, and a crash after a random one of them in a third of the installs — the store is
    // left with the install marker and part of the snapshot, which the restart must redo before it serves anything.
    options.install_batch_bytes = 2 << 10;
    Node* self = &node;
    options.after_install_batch = [this, self](int batch) -> Status {
      if (batch == 1) self->crash_at_install_batch = prng_.uniform(3) == 0 ? static_cast<int>(prng_.range(1, 6)) : 0;
      if (self->crash_requested || batch != self->crash_at_install_batch) return Status::ok();
      self->crash_requested = true;
      ++result_.installs_interrupted;
      note("node " + std::to_string(self->id.value()) + " crashes after batch " + std::to_string(batch) +
           " of a snapshot install");
      return Status::unavailable("simulated crash in the middle of a snapshot install");
    };
    return options;
  }

  node::NodeConfig node_config(const Node& node) const {
    node::NodeConfig config;
    config.id = node.id;
    config.tick_interval_ms = kTickMillis;
    config.election_timeout_ticks = kElectionTimeoutTicks;
    config.heartbeat_interval_ticks = kHeartbeatTicks;
    config.time_entry_interval_ms = kTimeEntryMillis;
    config.request_timeout_ms = 3000;
    config.session_wait_ms = 1000;
    config.gc_interval_ms = 50;
    config.gc_batch_items_max = 20;
    return config;
  }

  void start(Node& node) {
    if (bootstrap_.voters.empty()) bootstrap_ = membership_;
    auto replica = storage::Replica::open(replica_options(node));
    if (!replica.is_ok() && node.crash_requested) return crash(node);  // it crashed redoing an install at open
    if (!replica.is_ok()) return fail("node " + std::to_string(node.id.value()) + " failed to open: " +
                                      replica.status().to_string());
    if ((*replica)->installed_at_open()) {
      ++result_.installs_redone_at_open;
      note("node " + std::to_string(node.id.value()) + " installed the snapshot at index " +
           std::to_string((*replica)->installed_at_open()->snapshot.index.value()) + " at open" +
           ((*replica)->installed_at_open()->redo ? " (redone: the store held the install marker)" : ""));
    }
    Node* self = &node;
    node.process = std::make_unique<Process>(now_ms_ * 1000, [this, self] { return clock_of(*self); },
                                             node_config(node));
    Process& process = *node.process;
    process.driver = std::make_unique<node::Driver>(node_config(node), std::move(replica).value(), process.clock,
                                                    process.metrics, process.request_units, &process.loop);
    process.driver->set_flush_observer(
        [this, self](const storage::ReplicaOutput& output) { on_flush(*self, output); });
    node.last_applied = process.driver->state().applied().index;
    node.last_applied_ts = process.driver->state().applied().ts_micros;
    process.driver->start(process);
  }

  // The node's process is gone (SIGKILL): requests it held are never answered.
  void drop_process(Node& node) {
    if (!node.process) return;
    result_.gc_items_collected += node.process->driver->gc_items_collected();
    for (auto it = pending_.begin(); it != pending_.end();) {
      it = it->first.first == node.id.value() ? pending_.erase(it) : std::next(it);
    }
    for (auto it = parked_.begin(); it != parked_.end();) {
      it = it->first.first == node.id.value() ? parked_.erase(it) : std::next(it);
    }
    node.process.reset();
  }

  void crash(Node& node) {
    drop_process(node);
    node.crash_requested = false;
    node.crash_at_install_batch = 0;
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
    deliver_due_forwards();
    expire_parked_reads();
    for (Node& n : nodes_) {
      if (!n.process && n.restart_at_ms >= 0 && now_ms_ >= n.restart_at_ms) {
        n.restart_at_ms = -1;
        start(n);
        note("restart node " + std::to_string(n.id.value()));
      }
    }
    if (now_ms_ < options_.fault_phase_ms) {
      inject_faults();
    } else {
      advance_membership_cycle(false);
    }
    workload();
    for (Node& n : nodes_) {
      if (n.process) run_process(n);
      if (!result_.ok) return;
    }
    check_leaders();
    if (now_ms_ % kCheckpointMillis == 0) checkpoint_states();
    if (now_ms_ % kFeedCheckMillis == 0) check_change_feeds();
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
      if (!target.process || !link_up(message.from, message.to)) {
        ++result_.messages_dropped;
        continue;
      }
      // Every peer here is correct, so a refusal as malformed (replication::RejectReason) is a false positive of
      // the core's validation of what arrives from the network.
      // Peer admission, as the Raft transport applies it (node/peer_admission.h): a message from a node outside
      // this one's membership is dropped.
      if (target.process->router.peer_message_refusal(message.from, Result<Message>(message)) != nullptr) {
        ++result_.messages_refused_by_admission;
        continue;
      }
      node::Driver& driver = *target.process->driver;
      const uint64_t refused = driver.messages_refused();
      driver.on_messages({message});
      if (driver.messages_refused() != refused) {
        return fail("a correct peer's message was refused (" +
                    std::string(replication::reject_reason_name(driver.replica().core().last_rejection())) +
                    "): " + message.describe());
      }
      ++result_.messages_delivered;
    }
  }

  // Runs node n's loop up to now, then takes what its driver handed out: messages go on the network (through the
  // codec, as on the wire), replies to the requests waiting for them.
  void run_process(Node& n) {
    n.process->loop.advance_to(now_ms_ * 1000);
    if (n.crash_requested) return crash(n);  // the store stopped in the middle of an install: the process dies
    if (!n.process) return;
    std::vector<node::DriverBatch> outbox = std::move(n.process->outbox);
    n.process->outbox.clear();
    for (node::DriverBatch& batch : outbox) {
      if (batch.view) {
        for (uint64_t wait : n.process->router.set_view(*batch.view)) {
          auto parked = parked_.find({n.id.value(), wait});
          if (parked == parked_.end()) continue;
          api::Request read = std::move(parked->second.operation);
          parked_.erase(parked);
          serve_read(n, read);
          if (!result_.ok || !n.process) return;
        }
      }
      for (const auto& [to, encoded] : batch.messages) {
        for (const std::string& bytes : encoded) {
          auto decoded = replication::decode_message(bytes);
          if (!decoded.is_ok()) return fail("a message the driver sent does not decode: " + decoded.status().to_string());
          send(*decoded);
        }
      }
      for (auto& [id, reply] : batch.replies) on_reply(n, id, reply);
      if (!result_.ok) return;
    }
  }

  // ---- the workload: client requests to the drivers ----

  Node* leader() {
    Node* found = nullptr;
    uint64_t found_term = 0;
    for (Node& n : nodes_) {
      if (!n.process) continue;
      const replication::RaftCore& core = n.replica().core();
      if (core.role() == Role::kLeader && (found == nullptr || core.term().value() > found_term)) {
        found = &n;
        found_term = core.term().value();
      }
    }
    return found;
  }

  // A client write as the client library would send it, chosen from what the leader's state machine holds.
  api::Request random_write(const storage::StateMachine& state) {
    api::Request request;
    request.database = "db";
    request.container = "c";
    // The schema first, as the leader's state machine sees it (a lost create is simply proposed again).
    if (!state.reader().read_database("db").ok()) {
      request.operation = api::CreateDatabase{};
      return request;
    }
    if (!state.reader().read_container("db", "c").ok()) {
      api::ContainerSettings settings;
      settings.partition_key_path = "/pk";
      settings.default_ttl = api::ContainerSettings::DefaultTtl::kSet;
      settings.default_ttl_json = "3";
      // Its change feed on, so every replica's feed is checked: the same changes at the same positions.
      settings.change_feed = api::ContainerSettings::ChangeFeed::kOn;
      settings.change_feed_retention_seconds = 3600;
      // Expiring-soon warnings a second before each instant: compared like the expirations.
      settings.expiry_warning_seconds = 1;
      request.operation = api::CreateContainer{settings};
      return request;
    }
    // A second container with its feed off: the one that deletes by partition key (refused while a feed is on), so
    // the replicas' visible state is compared while their collectors drain deleted partitions at their own pace.
    if (!state.reader().read_container("db", "d").ok()) {
      api::ContainerSettings settings;
      settings.partition_key_path = "/pk";
      settings.default_ttl = api::ContainerSettings::DefaultTtl::kSet;
      settings.default_ttl_json = "-1";
      request.container = "d";
      request.operation = api::CreateContainer{settings};
      return request;
    }
    const std::string id = "i" + std::to_string(prng_.uniform(30));
    const std::string pk = "\"p" + std::to_string(prng_.uniform(3)) + "\"";
    if (prng_.uniform(4) == 0) {
      request.container = "d";
      const uint64_t special = prng_.uniform(10);
      if (special == 0) {
        request.operation = api::DeletePartition{pk};
        return request;
      }
      // Legal holds come and go (ids h0..h3; a set of an active id or a release of an inactive one is refused):
      // held items outlive their instant and expire at the release, on every replica at the same position.
      if (special == 1) {
        api::SetHold hold;
        hold.id = "h" + std::to_string(prng_.uniform(4));
        const uint64_t scope = prng_.uniform(5);
        hold.scope = scope == 0   ? api::SetHold::Scope::kContainer
                     : scope <= 2 ? api::SetHold::Scope::kPartition
                                  : api::SetHold::Scope::kItem;
        if (hold.scope != api::SetHold::Scope::kContainer) hold.partition_key = pk;
        if (hold.scope == api::SetHold::Scope::kItem) hold.item_id = id;
        hold.reason = "sim";
        request.operation = std::move(hold);
        return request;
      }
      if (special == 2) {
        request.operation = api::ReleaseHold{"h" + std::to_string(prng_.uniform(4)), "sim", ""};
        return request;
      }
    }
    const uint64_t choice = prng_.uniform(100);
    if (choice < 55) {
      const api::Kind kind = std::array{api::Kind::kUpsertItem, api::Kind::kCreateItem,
                                        api::Kind::kReplaceItem}[prng_.uniform(3)];
      std::string ttl;
      switch (prng_.uniform(4)) {
        case 0: break;
        case 1: ttl = ",\"ttl\":-1"; break;
        default: ttl = ",\"ttl\":" + std::to_string(prng_.range(1, 3)); break;
      }
      std::string body =
          "{\"id\":\"" + id + "\",\"pk\":" + pk + ttl + ",\"n\":" + std::to_string(prng_.uniform(1000)) + "}";
      if (kind == api::Kind::kUpsertItem) request.operation = api::UpsertItem{std::move(body)};
      if (kind == api::Kind::kCreateItem) request.operation = api::CreateItem{std::move(body)};
      if (kind == api::Kind::kReplaceItem) request.operation = api::ReplaceItem{std::move(body)};
    } else if (choice < 75) {
      request.operation = api::DeleteItem{pk, id};
    } else if (choice < 88) {
      request.operation = api::PatchItem{pk, id, "[{\"op\":\"incr\",\"path\":\"/n\",\"value\":1}]"};
    } else {
      api::ContainerSettings settings;
      const uint64_t policy = prng_.uniform(4);
      if (policy == 0) {
        settings.default_ttl = api::ContainerSettings::DefaultTtl::kRemove;
      } else {
        settings.default_ttl = api::ContainerSettings::DefaultTtl::kSet;
        settings.default_ttl_json = policy == 1 ? "-1" : std::to_string(prng_.range(1, 4));
      }
      // The simulation exercises defaultTtl changes, not the guard against mass expiry.
      settings.force = true;
      request.operation = api::UpdateContainer{settings};
    }
    return request;
  }

  // An item write gets an exactly-once id; or, sometimes, is replaced by a re-send of a write still unanswered.
  api::Request with_write_id(api::Request write) {
    const bool item_write = write.as<api::UpsertItem>() != nullptr || write.as<api::CreateItem>() != nullptr ||
                            write.as<api::ReplaceItem>() != nullptr || write.as<api::DeleteItem>() != nullptr ||
                            write.as<api::PatchItem>() != nullptr;
    if (!item_write) return write;
    DedupClient& client = dedup_clients_[ids_prng_.uniform(dedup_clients_.size())];
    if (!client.unanswered.empty() && ids_prng_.chance(1, 4)) {
      auto resent = client.unanswered.begin();
      std::advance(resent, ids_prng_.uniform(client.unanswered.size()));
      api::Request again = resent->second;
      again.write_id->first_unacknowledged = client.unanswered.begin()->first;
      again.write_id->retry = true;
      ++result_.writes_resent;
      return again;
    }
    const uint64_t sequence = client.next++;
    // A library gives a write up after a while: at most a few kept unanswered.
    if (client.unanswered.size() >= 6) client.unanswered.erase(client.unanswered.begin());
    const uint64_t first_unacknowledged = client.unanswered.empty() ? sequence : client.unanswered.begin()->first;
    write.write_id = api::WriteId{client.id, sequence, first_unacknowledged, false};
    client.unanswered.emplace(sequence, write);
    return write;
  }

  void request(Node& n, PendingRequest pending, api::Request operation) {
    const uint64_t id = next_request_id_++;
    pending_[{n.id.value(), id}] = pending;
    n.process->driver->on_request(id, std::move(operation));
  }

  // A client's request to node n, where its router sends it (node/router.h) — as mayflyd's RPC side does, with the
  // simulated network between a follower and the leader it forwards to.
  void client_request(Node& n, api::Request operation, bool forwarded = false) {
    Process& process = *n.process;
    const node::Route route =
        process.router.route(operation, forwarded, process.driver->state().applied(), process.loop.now_ms());
    switch (route.kind) {
      case node::Route::Kind::kServe:
        return serve_read(n, operation);
      case node::Route::Kind::kWait: {
        if (process.router.parked_full("")) {
          ++result_.reads_refused;
          return;
        }
        ++result_.reads_waited;
        const uint64_t wait = process.router.park(route.required, "");
        parked_[{n.id.value(), wait}] = ParkedRead{std::move(operation), now_ms_ + route.wait_ms};
        return;
      }
      case node::Route::Kind::kRefuse:
        ++result_.reads_refused;
        return;
      case node::Route::Kind::kStrongRead:
        return request(n, PendingRequest{PendingRequest::Kind::kStrongRead, 0, highest_acknowledged_},
                       std::move(operation));
      case node::Route::Kind::kForward: {
        const int64_t delay = send_delay_ms();
        if (delay < 0) return;  // dropped
        // On the wire, as the peer API's forward carries it.
        capnp::MallocMessageBuilder message;
        api::encode_request(operation, message.initRoot<proto::Request>());
        kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
        const kj::ArrayPtr<const char> bytes = words.asChars();
        forwards_.emplace(now_ms_ + delay, Forward{n.id, route.leader, std::string(bytes.begin(), bytes.size())});
        return;
      }
      case node::Route::Kind::kDriver: {
        PendingRequest pending;
        pending.kind = PendingRequest::Kind::kWrite;
        // The command the driver will propose (node/request.h to_command, an item body validated against the
        // container as the leader sees it now: storage::prepare_body), as the log will hold it.
        storage::Command command = node::to_command(operation, node_config(n).changefeed_retention_seconds);
        if (storage::is_item_write(command.type)) {
          if (std::optional<storage::ContainerRecord> container =
                  n.replica().state().container_for_write(command.database, command.container)) {
            (void)storage::prepare_body(command, *container);  // a bad body is refused, never logged
          }
        }
        pending.command_hash = fnv1a(storage::encode_command(command));
        pending.forwarded = forwarded;
        pending.write_id = operation.write_id;
        return request(n, pending, std::move(operation));
      }
      case node::Route::Kind::kGuardTtl:
      case node::Route::Kind::kLocal:
        break;
    }
    fail("the router sent a simulated request where the simulation does not send any (" +
         node::op_name(operation) + ")");
  }

  // -1: dropped; else how long a message takes now.
  int64_t send_delay_ms() {
    const bool faulty = now_ms_ < options_.fault_phase_ms;
    if (faulty && prng_.uniform(1000) < plan_.drop_per_mille) return -1;
    return faulty ? prng_.range(1, plan_.max_delay_ms) : prng_.range(1, 3);
  }

  void deliver_due_forwards() {
    while (!forwards_.empty() && forwards_.begin()->first <= now_ms_) {
      Forward forward = std::move(forwards_.begin()->second);
      forwards_.erase(forwards_.begin());
      if (forward.to.value() < 1 || forward.to.value() > nodes_.size()) continue;
      Node& target = node(forward.to);
      if (!target.process || !link_up(forward.from, forward.to)) continue;
      // The peer API's admission of a forward (node/router.h may_forward).
      if (!target.process->router.may_forward(forward.from)) {
        ++result_.forwards_refused;
        continue;
      }
      // The leader's peer API decodes and checks it (node/request.h), as it does a real forward.
      kj::ArrayPtr<const capnp::word> words(reinterpret_cast<const capnp::word*>(forward.request.data()),
                                            forward.request.size() / sizeof(capnp::word));
      capnp::FlatArrayMessageReader reader(words);
      Result<api::Request> operation = node::decode_request(reader.getRoot<proto::Request>());
      if (!operation.is_ok()) return fail("a forwarded write does not decode: " + operation.status().to_string());
      client_request(target, std::move(operation).value(), true);
      if (!result_.ok) return;
    }
  }

  void expire_parked_reads() {
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->second.deadline_ms > now_ms_) {
        ++it;
        continue;
      }
      Node& n = node(NodeId(it->first.first));
      if (n.process) n.process->router.unpark(it->first.second);
      ++result_.reads_behind;
      it = parked_.erase(it);
    }
  }

  // A read the router let node n serve: the production read path (node/read_service.h serve_read) on its applied
  // state. A session read must see every write up to its token (read your writes), whichever replica serves it.
  void serve_read(Node& n, const api::Request& read) {
    Process& process = *n.process;
    const storage::StateMachine& state = process.driver->state();
    const LogIndex applied = state.applied().index;
    const node::Reply reply = node::serve_read(state.reader(), state.change_feed(), process.request_units, n.id, read,
                                               process.router.view().leader);
    const uint64_t token = node::session_token_of(read);
    if (node::consistency_of(read) == node::Consistency::kSession && applied.value() < token) {
      return fail("session read with token " + std::to_string(token) + " served by node " +
                  std::to_string(n.id.value()) + " at applied index " + std::to_string(applied.value()));
    }
    if (reply.result.http_status() >= 500) {
      return fail("a read served by node " + std::to_string(n.id.value()) + " failed: " + reply.result.message);
    }
    ++result_.reads_served;
    if (n.replica().core().role() != Role::kLeader) ++result_.follower_reads_served;
  }

  api::Request item_read(node::Consistency consistency) {
    api::Request read;
    read.options.consistency = consistency;
    read.database = "db";
    read.container = "c";
    std::string pk = "\"p" + std::to_string(prng_.uniform(3)) + "\"";
    read.operation = api::ReadItem{std::move(pk), "i" + std::to_string(prng_.uniform(30))};
    return read;
  }

  Node* random_live_node() {
    Node& n = nodes_[prng_.uniform(nodes_.size())];
    return n.process ? &n : nullptr;
  }

  void workload() {
    Node* lead = leader();
    if (lead != nullptr && prng_.uniform(100) < 20) {  // a client write, to the leader or to any node
      api::Request write = with_write_id(random_write(lead->process->driver->state()));
      Node* target = prng_.uniform(2) == 0 ? lead : random_live_node();
      if (target != nullptr) client_request(*target, std::move(write));
    }
    if (prng_.uniform(100) < 3) {  // a strong read on a random live node
      if (Node* reader = random_live_node()) {
        api::Request read = item_read(node::Consistency::kStrong);
        read.operation = api::ReadItem{"\"p0\"", "i0"};
        client_request(*reader, std::move(read));
      }
    }
    if (prng_.uniform(100) < 4) {  // a session read, by a client that saw the latest acknowledged write, on any node
      if (Node* reader = random_live_node()) {
        api::Request read = item_read(node::Consistency::kSession);
        read.options.session_token = std::to_string(highest_acknowledged_.value());
        client_request(*reader, std::move(read));
      }
    }
    if (prng_.uniform(100) < 1) {  // a bounded-staleness read on any node
      if (Node* reader = random_live_node()) client_request(*reader, item_read(node::Consistency::kBounded));
    }
  }

  void on_reply(Node& n, uint64_t id, const node::Reply& reply) {
    auto it = pending_.find({n.id.value(), id});
    if (it == pending_.end()) return;
    const PendingRequest pending = it->second;
    pending_.erase(it);
    switch (pending.kind) {
      case PendingRequest::Kind::kWrite:
        // Applied (whatever its business outcome) at the index the session token names.
        if (pending.write_id && reply.result.http_status() < 500 && reply.result.http_status() != 429) {
          // Answered (a 429 of the table is not: nothing was applied, the client re-sends it).
          for (DedupClient& client : dedup_clients_) {
            if (client.id == pending.write_id->client) client.unanswered.erase(pending.write_id->sequence);
          }
          if (reply.result.duplicate) ++result_.writes_deduplicated;
        }
        if (reply.result.http_status() < 500 && reply.session_token != 0) {
          acknowledged_[reply.session_token] = pending.command_hash;
          highest_acknowledged_ = std::max(highest_acknowledged_, LogIndex(reply.session_token));
          ++result_.writes_acknowledged;
          if (pending.forwarded) ++result_.forwarded_writes_acknowledged;
        }
        return;
      case PendingRequest::Kind::kStrongRead: {
        if (!reply.serve_here) return;  // 503: no leader could confirm it
        // The driver released the read: this node's state is now at least as new as every write acknowledged
        // before the read started (ReadIndex).
        const LogIndex applied = n.process->driver->state().applied().index;
        if (applied < pending.acknowledged_before) {
          return fail("strong read on node " + std::to_string(n.id.value()) + " released at applied index " +
                      std::to_string(applied.value()) + " below acknowledged write " +
                      std::to_string(pending.acknowledged_before.value()));
        }
        ++result_.strong_reads_checked;
        return;
      }
      case PendingRequest::Kind::kAdmin:
        return;
    }
  }

  // ---- faults ----

  void inject_faults() {
    if (prng_.uniform(1000) < plan_.partition_per_mille_per_ms) toggle_partition();
    if (prng_.uniform(1000) < plan_.crash_per_mille_per_ms) {
      Node& victim = nodes_[prng_.uniform(nodes_.size())];
      if (victim.process) crash(victim);
    }
    if (prng_.uniform(1000) < plan_.clock_jump_per_mille_per_ms) {
      Node& jumper = nodes_[prng_.uniform(nodes_.size())];
      jumper.clock_offset_us += prng_.range(-3'000'000, 3'000'000);
      note("clock jump on node " + std::to_string(jumper.id.value()));
    }
    if (prng_.uniform(1000) < plan_.transfer_per_mille_per_ms) {
      Node* lead = leader();
      if (lead != nullptr) {
        const auto& voters = lead->replica().core().membership().voters;
        std::vector<NodeId> others(voters.begin(), voters.end());
        NodeId target = others[prng_.uniform(others.size())];
        if (target != lead->id) {
          api::Request transfer;
          transfer.operation = api::TransferLeader{target.value()};
          request(*lead, PendingRequest{PendingRequest::Kind::kAdmin, 0, {}}, std::move(transfer));
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

  // Remove a voter, wipe it, add it back (the driver makes it a learner and promotes it once caught up): one change
  // at a time, through the drivers' admin requests as a user would make them.
  enum class MembershipStep { kIdle, kRemoving, kAdding };

  // Keeps the cluster whole (re-adds a missing node) and, when asked to (`may_remove`), starts a cycle by removing a
  // voter. A step that does not complete within kMembershipStepMillis is abandoned and reconsidered.
  static constexpr int64_t kMembershipStepMillis = 3000;

  void advance_membership_cycle(bool may_remove) {
    Node* lead = leader();
    if (lead == nullptr) return;
    const replication::Membership current = lead->replica().core().membership();
    const replication::RaftStatus status = lead->replica().core().status();
    if (membership_cycle_ != MembershipStep::kIdle && now_ms_ - membership_step_since_ms_ > kMembershipStepMillis) {
      membership_cycle_ = MembershipStep::kIdle;  // lost in a leader change: look again
    }
    if (membership_cycle_ == MembershipStep::kRemoving) {
      if (current.contains(cycling_) || status.commit < status.last_index) return;
      // The removed server is retired; a new, empty one takes its id and waits to be added.
      Node& removed = node(cycling_);
      drop_process(removed);
      removed.env = std::make_unique<FaultEnv>();
      removed.bootstrap_member = false;
      removed.restart_at_ms = -1;
      start(removed);
      membership_cycle_ = MembershipStep::kIdle;
      ++result_.membership_changes;
      return;
    }
    if (membership_cycle_ == MembershipStep::kAdding) {
      // Done once the driver has promoted it (auto-promotion of a caught-up learner).
      if (current.is_voter(cycling_) && status.commit >= status.last_index) membership_cycle_ = MembershipStep::kIdle;
      return;
    }
    for (Node& n : nodes_) {
      if (!current.contains(n.id) && !n.bootstrap_member && n.process) {
        api::Request add;
        add.operation = api::AddMember{n.id.value(), "sim-node-" + std::to_string(n.id.value()) + ":7100"};
        begin_membership_step(*lead, n.id, std::move(add), MembershipStep::kAdding, "add");
        return;
      }
    }
    if (!may_remove || current.voters.size() < 3 || !current.learners.empty()) return;
    std::vector<NodeId> candidates;
    for (NodeId voter : current.voters) {
      if (voter != lead->id) candidates.push_back(voter);
    }
    const NodeId removed = candidates[prng_.uniform(candidates.size())];
    api::Request remove;
    remove.operation = api::RemoveMember{removed.value()};
    begin_membership_step(*lead, removed, std::move(remove), MembershipStep::kRemoving, "remove");
  }

  void begin_membership_step(Node& lead, NodeId member, api::Request operation, MembershipStep step,
                             const char* what) {
    membership_cycle_ = step;
    cycling_ = member;
    membership_step_since_ms_ = now_ms_;
    note(std::string(what) + " node " + std::to_string(cycling_.value()));
    request(lead, PendingRequest{PendingRequest::Kind::kAdmin, 0, {}}, std::move(operation));
  }

  void heal() {
    blocked_.clear();
    for (Node& n : nodes_) {
      if (!n.process && n.restart_at_ms >= 0) {
        n.restart_at_ms = -1;
        start(n);
      }
    }
    heal_acknowledged_mark_ = highest_acknowledged_;
    note("faults healed");
  }

  // ---- what the drivers did, and the checkers ----

  // Every flush of node n's driver: the replica's output, before the driver acts on it.
  void on_flush(Node& n, const storage::ReplicaOutput& output) {
    n.replica().core().check_invariants();  // aborts with the invariant that broke
    if (output.snapshot_installed) {  // the state jumped to the leader's snapshot
      ++result_.snapshots_installed;
      n.last_applied = output.snapshot_installed->index;
      n.last_applied_ts = output.snapshot_installed->ts_micros;
    }
    for (const storage::AppliedEntry& applied : output.applied) on_applied(n, applied);
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
    auto stored = n.replica().log().entries(applied.index, applied.index.next(), UINT64_MAX);
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
  }

  void check_leaders() {
    for (Node& n : nodes_) {
      if (!n.process || n.replica().core().role() != Role::kLeader) continue;
      const uint64_t term = n.replica().core().term().value();
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
  uint64_t visible_digest(const storage::StateMachine& state) {
    uint64_t hash = fnv1a("state");
    auto containers = state.reader().containers();
    if (!containers.is_ok()) return 0;
    const int64_t now = state.applied().ts_micros;
    for (const storage::ContainerInfo& info : *containers) {
      hash = fnv1a(info.database + "/" + info.container, hash);
      hash = fnv1a(std::to_string(static_cast<int>(info.record.ttl.policy.kind)) + ":" +
                       std::to_string(info.record.ttl.policy.seconds),
                   hash);
      storage::ListRequest request{info.database, info.container, std::nullopt, storage::kMaxListItems, ""};
      do {
        storage::OpResult page = state.reader().list_items(request, now);
        hash = fnv1a(page.body, hash);
        request.continuation = page.continuation;
      } while (!request.continuation.empty());
    }
    return hash;
  }

  // The exactly-once table (0A..0D, storage/layout.h) — which clients, kept outcomes and activity minutes it holds,
  // the outcomes' bytes, records and totals — is replicated, so byte-identical on every replica at the same applied
  // index, however each replica's mirror of the table was loaded (storage/write_dedup.h) and whatever its collector
  // has removed (an apply's answer never depends on that: a write to an expired item is a 404 in the same words
  // whether or not it is still stored).
  uint64_t table_digest(const storage::StateMachine& state) {
    uint64_t hash = fnv1a("table");
    std::unique_ptr<leveldb::Iterator> it(state.leveldb()->NewIterator(leveldb::ReadOptions()));
    const std::string first(1, static_cast<char>(storage::KeyTag::kDedupClient));
    for (it->Seek(first); it->Valid() && static_cast<uint8_t>(it->key()[0]) <=
                                             static_cast<uint8_t>(storage::KeyTag::kDedupTotals);
         it->Next()) {
      hash = fnv1a(std::string_view(it->key().data(), it->key().size()), hash);
      hash = fnv1a(std::string_view(it->value().data(), it->value().size()), hash);
    }
    return it->status().ok() ? hash : 0;
  }

  void checkpoint_states() {
    for (Node& n : nodes_) {
      if (!n.process) continue;
      const storage::StateMachine& state = n.process->driver->state();
      const uint64_t index = state.applied().index.value();
      const uint64_t digest = visible_digest(state);
      auto [it, inserted] = digests_.try_emplace(index, std::make_pair(digest, n.id.value()));
      if (!inserted && it->second.first != digest) {
        return fail("visible state at applied index " + std::to_string(index) + " differs between nodes " +
                    std::to_string(it->second.second) + " and " + std::to_string(n.id.value()));
      }
      const uint64_t table = table_digest(state);
      auto [known, first] = table_digests_.try_emplace(index, std::make_pair(table, n.id.value()));
      if (!first && known->second.first != table) {
        return fail("the exactly-once table (keys and values) at applied index " + std::to_string(index) +
                    " differ between nodes " + std::to_string(known->second.second) + " and " +
                    std::to_string(n.id.value()));
      }
    }
  }

  // Every live replica's change feed, read whole from the beginning (a page at a time, with continuations), is the
  // same sequence of changes at the same positions with the same images as every other replica's up to its applied
  // index: expirations included, whatever each node's collector did, after crashes, snapshot installs and wipes.
  // `feed_` holds every change seen so far by position, complete up to `feed_known_upto_`.
  void check_change_feeds() {
    for (Node& n : nodes_) {
      if (!n.process || !result_.ok) continue;
      const storage::StateMachine& state = n.process->driver->state();
      auto container = state.reader().read_container("db", "c");
      if (!container.ok()) continue;  // not created here yet
      const uint64_t applied = state.applied().index.value();
      const std::string who = "node " + std::to_string(n.id.value()) + " (applied " + std::to_string(applied) + ")";
      std::vector<storage::Change> changes;
      if (!read_whole_feed(state, Only::kNothing, changes, who)) return;
      ++result_.feed_reads_checked;
      const uint64_t known = std::min(applied, feed_known_upto_);
      size_t compared = 0;
      for (size_t i = 0; i < changes.size(); ++i) {
        const storage::Change& change = changes[i];
        if (i > 0 && !(changes[i - 1].position < change.position)) {
          return fail("the change feed of " + who + " is out of order at position " + describe(change.position));
        }
        if (change.position.index > applied) {
          return fail("the change feed of " + who + " serves position " + describe(change.position) +
                      " past its applied index");
        }
        const uint64_t hash = change_hash(change);
        if (change.position.index <= known) {
          auto it = feed_.find(change.position);
          if (it == feed_.end()) {
            return fail("the change feed of " + who + " has " + describe(change.position) + " (" +
                        (change.ttl_expired ? "expiration" : "write") + " of " + change.id +
                        ") that another replica's feed did not have");
          }
          if (it->second.first != hash) {
            return fail("the change at " + describe(change.position) + " differs between node " +
                        std::to_string(it->second.second) + " and " + who);
          }
          ++compared;
        } else {
          feed_.try_emplace(change.position, hash, n.id.value());
        }
      }
      // Complete: every change known at positions up to `known` was served.
      const size_t expected = static_cast<size_t>(std::distance(
          feed_.begin(), feed_.lower_bound(storage::ChangePosition{known + 1, 0, 0, INT64_MIN, "", ""})));
      if (compared != expected) {
        return fail("the change feed of " + who + " has " + std::to_string(compared) + " changes up to position " +
                    std::to_string(known) + " where other replicas had " + std::to_string(expected));
      }
      feed_known_upto_ = std::max(feed_known_upto_, applied);
      result_.feed_changes_checked = std::max<uint64_t>(result_.feed_changes_checked, changes.size());
      // Only the expirations (warnings) are the feed's expirations (warnings), in the same order.
      for (const Only only : {Only::kExpirations, Only::kWarnings}) {
        std::vector<storage::Change> some;
        if (!read_whole_feed(state, only, some, who)) return;
        std::vector<storage::Change> filtered;
        for (const storage::Change& change : changes) {
          if (only == Only::kExpirations ? change.ttl_expired
                                         : change.operation == storage::ChangeOperation::kWarning) {
            filtered.push_back(change);
          }
        }
        if (some != filtered) {
          return fail(std::string("the only-") + (only == Only::kExpirations ? "expirations" : "warnings") +
                      " feed of " + who + " (" + std::to_string(some.size()) + " changes) is not the feed's (" +
                      std::to_string(filtered.size()) + ")");
        }
        if (only == Only::kWarnings) {
          result_.feed_warnings_checked = std::max<uint64_t>(result_.feed_warnings_checked, some.size());
        }
      }
    }
  }

  enum class Only { kNothing, kExpirations, kWarnings };
  bool read_whole_feed(const storage::StateMachine& state, Only only, std::vector<storage::Change>& out,
                       const std::string& who) {
    storage::ChangeFeedRequest request;
    request.database = "db";
    request.container = "c";
    request.only_expirations = only == Only::kExpirations;
    request.only_warnings = only == Only::kWarnings;
    request.max_changes = 1 + prng_.uniform(200);  // page boundaries anywhere, bursts of expirations included
    for (int pages = 0; pages < 1'000'000; ++pages) {
      auto page = state.change_feed().read(request);
      if (!page.is_ok()) {
        fail("the change feed of " + who + " could not be read: " + page.status().to_string());
        return false;
      }
      for (storage::Change& change : page->changes) out.push_back(std::move(change));
      if (page->caught_up) return true;
      request.from.kind = storage::ChangeFeedFrom::Kind::kContinuation;
      request.from.continuation = page->continuation;
    }
    fail("the change feed of " + who + " never caught up");
    return false;
  }

  static std::string describe(const storage::ChangePosition& position) {
    return std::to_string(position.index) + "." + std::to_string(position.phase) +
           (position.phase == 0 ? "/" + std::to_string(position.kind) + "/" + std::to_string(position.sort_micros) +
                                      "/" + position.partition_key + "/" + position.id
                                : std::string());
  }

  static uint64_t change_hash(const storage::Change& change) {
    uint64_t hash = fnv1a(std::to_string(static_cast<int>(change.operation)) + ":" +
                          std::to_string(change.ts_micros) + ":" + (change.ttl_expired ? "x" : "-"));
    for (const std::string* part : {&change.partition_key, &change.id, &change.image, &change.previous}) {
      hash = fnv1a(std::to_string(part->size()) + ":", hash);
      hash = fnv1a(*part, hash);
    }
    return hash;
  }

  void final_checks() {
    for (Node& n : nodes_) {
      if (n.process) result_.gc_items_collected += n.process->driver->gc_items_collected();
    }
    Node* lead = leader();
    if (lead == nullptr) return fail("liveness: no leader " + std::to_string(options_.heal_phase_ms) +
                                     " ms after the faults healed");
    if (highest_acknowledged_ <= heal_acknowledged_mark_) {
      return fail("liveness: no write was acknowledged after the faults healed");
    }
    const LogIndex commit = lead->replica().core().status().commit;
    for (Node& n : nodes_) {
      const bool member = lead->replica().core().membership().contains(n.id);
      if (!member || !n.process) continue;
      const uint64_t applied = n.process->driver->state().applied().index.value();
      if (applied + 50 < commit.value()) {  // time entries keep arriving: allow a little lag
        const replication::RaftStatus mine = n.process->driver->replica().core().status();
        const replication::RaftStatus theirs = lead->replica().core().status();
        const storage::RaftLogStore& log = lead->replica().log();
        std::string progress = "none";
        if (auto it = theirs.progress.find(n.id); it != theirs.progress.end()) {
          progress = "match " + std::to_string(it->second.match.value()) + " next " +
                     std::to_string(it->second.next.value()) + " state " +
                     std::string(replication::progress_state_name(it->second.state)) +
                     (it->second.recent_active ? " active" : " inactive");
        }
        return fail("liveness: node " + std::to_string(n.id.value()) + " applied " + std::to_string(applied) +
                    " but the leader committed " + std::to_string(commit.value()) + " (node: term " +
                    std::to_string(mine.term.value()) + " leader " + std::to_string(mine.leader.value()) +
                    " log " + std::to_string(mine.first_index.value()) + ".." +
                    std::to_string(mine.last_index.value()) + " commit " + std::to_string(mine.commit.value()) +
                    "; leader " + std::to_string(lead->id.value()) + " term " + std::to_string(theirs.term.value()) +
                    " log " + std::to_string(theirs.first_index.value()) + ".." +
                    std::to_string(theirs.last_index.value()) + ", snapshot record " +
                    std::to_string(log.snapshot_metadata().index.value()) +
                    (log.snapshot_data_ready() ? " with data" : " (checkpoint)") + ", its progress: " + progress +
                    "; snapshot errors read " + std::to_string(theirs.snapshot_read_errors) + " receive " +
                    std::to_string(mine.snapshot_receive_errors) + " " + mine.last_snapshot_error + ")");
      }
    }
    // Every write a driver acknowledged is the committed entry at the index it named.
    for (const auto& [index, hash] : acknowledged_) {
      auto it = committed_.find(index);
      if (it == committed_.end() || (it->second.data_hash != 0 && it->second.data_hash != hash)) {
        return fail("acknowledged write at index " + std::to_string(index) + " was lost");
      }
    }
    checkpoint_states();
    check_change_feeds();
    if (result_.ok && result_.feed_reads_checked == 0) fail("no replica's change feed was ever read");
    // The router's paths ran: a follower forwarded writes the leader acknowledged, and followers served reads.
    if (result_.ok && result_.forwarded_writes_acknowledged == 0) fail("no forwarded write was ever acknowledged");
    if (result_.ok && result_.follower_reads_served == 0) fail("no follower ever served a read");
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

  uint64_t next_request_id_ = 1;
  std::map<std::pair<uint64_t, uint64_t>, PendingRequest> pending_;  // (node, request id)
  std::multimap<int64_t, Forward> forwards_;                         // arrival ms -> forwarded write in flight
  std::map<std::pair<uint64_t, uint64_t>, ParkedRead> parked_;       // (node, the router's wait id)
  std::map<uint64_t, uint64_t> acknowledged_;  // index -> hash of the acknowledged write's command
  LogIndex highest_acknowledged_;
  LogIndex heal_acknowledged_mark_;
  std::map<uint64_t, CommittedEntry> committed_;
  std::map<uint64_t, uint64_t> leaders_;                              // term -> node
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> digests_;        // applied index -> (digest, node)
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> table_digests_;  // applied index -> (table digest, node)
  Prng ids_prng_;                                                     // write ids and re-sends
  std::array<DedupClient, 4> dedup_clients_;
  std::map<storage::ChangePosition, std::pair<uint64_t, uint64_t>> feed_;  // position -> (change hash, node)
  uint64_t feed_known_upto_ = 0;

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
      << " snapshots installed (" << installs_interrupted << " cut short by a crash, " << installs_redone_at_open
      << " redone at open), " << feed_reads_checked << " change feeds compared (up to " << feed_changes_checked
      << " changes, " << feed_warnings_checked << " warnings), " << gc_items_collected << " items collected, " << messages_delivered
      << " messages delivered, " << messages_dropped << " dropped, " << messages_refused_by_admission
      << " refused by admission; router: " << forwarded_writes_acknowledged << " forwarded writes acknowledged ("
      << forwards_refused << " forwards refused), " << reads_served << " reads served here (" << follower_reads_served
      << " by followers), " << reads_waited << " parked, " << reads_behind << " timed out behind, " << reads_refused
      << " refused; exactly-once: " << writes_resent << " writes re-sent, " << writes_deduplicated
      << " answered as duplicates";
  return out.str();
}

std::string reproduce_command(const SimOptions& options) {
  return "build/tests/sim/mayfly-sim --seed " + std::to_string(options.seed) + " --nodes " +
         std::to_string(options.nodes) + " --fault-ms " + std::to_string(options.fault_phase_ms) + " --heal-ms " +
         std::to_string(options.heal_phase_ms) + " --verbose";
}

SimResult run_simulation(const SimOptions& options) { return Simulation(options).run(); }

}  // namespace mayfly::sim
