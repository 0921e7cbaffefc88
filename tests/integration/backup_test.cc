// Online backup and restore against real mayflyd processes (docs/operations.md, "Backup and restore"): a backup taken
// with `mayfly backup create` from a 3-node cluster under write load restores, on a new 3-node cluster (node 1 restored
// with `mayflyd --restore FILE --ttl MODE`, nodes 2 and 3 joined), to exactly the state at the backup's applied index —
// every item of the loaded container checked against the acknowledged writes at or below that index — in each TTL mode
// with the expected expirations; items expired at backup time never come back; `--dry-run` predicts the expirations and
// changes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

constexpr char kDb[] = "bk";
constexpr int kPerKind = 12;     // items of each TTL kind
constexpr int kLoadKeys = 150;   // ids the load writes to
constexpr int64_t kSoonTtl = 12;  // alive at backup time, expired before the restore

struct Written {
  uint64_t index = 0;
  int64_t ts = 0;
};

// What the backup's source cluster held.
struct Source {
  std::string file;
  uint64_t backup_index = 0;
  int64_t backup_time_micros = 0;
  std::map<std::string, std::string> load_at_backup;  // id -> v of the last write at or below the backup index
  std::set<std::string> uncertain;                    // ids with a write of unknown outcome (not checked)
  std::map<std::string, Written> ttl_items;           // "gone-3", "soon-1", "long-0", "never-7" -> its write
  int64_t soon_expiry_micros = 0;                     // the latest expiry instant of the soon items
};

Response read_item(client::Client& client, const std::string& container, const std::string& id,
                   std::optional<size_t> endpoint = std::nullopt) {
  Request request = item_key(Op::kReadItem, kDb, container, "p", id);
  request.options.consistency = Consistency::kStrong;
  request.endpoint = endpoint;
  return client.execute(request);
}

// Every item of a container, id -> the whole body, at strong consistency.
std::map<std::string, boost::json::object> list_all(client::Client& client, const std::string& container) {
  std::map<std::string, boost::json::object> out;
  std::string continuation;
  for (int page = 0; page < 1000; ++page) {
    Request request = container_req(Op::kListItems, kDb, container);
    request.options.consistency = Consistency::kStrong;
    request.options.max_items = 500;
    request.options.continuation = continuation;
    Response response = client.execute(request);
    EXPECT_EQ(response.status, 200) << response.message;
    if (response.status != 200) break;
    boost::json::value body = parse_json(response.body);
    const boost::json::array* items = body.is_array() ? &body.as_array() : nullptr;
    if (items == nullptr && body.is_object() && body.as_object().contains("Documents")) {
      items = &body.as_object().at("Documents").as_array();
    }
    EXPECT_NE(items, nullptr) << response.body;
    if (items == nullptr) break;
    for (const boost::json::value& item : *items) {
      out[std::string(item.as_object().at("id").as_string())] = item.as_object();
    }
    continuation = response.continuation;
    if (continuation.empty()) break;
  }
  return out;
}

Source make_backup(Cluster& source, uint64_t seed) {
  Source result;
  client::Client client(source.client_options());
  EXPECT_EQ(client.execute(db_req(Op::kCreateDatabase, kDb)).status, 201);
  EXPECT_EQ(client.execute(create_container(kDb, "t", "/pk", "3600")).status, 201);
  EXPECT_EQ(client.execute(create_container(kDb, "load", "/pk")).status, 201);
  // gone: expired before the backup; soon: alive at the backup, expired before the restore; long, never: alive.
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"gone", ",\"ttl\":1"}, {"soon", ",\"ttl\":" + std::to_string(kSoonTtl)}, {"long", ""}, {"never", ",\"ttl\":-1"}};
  int64_t gone_expiry = 0;
  for (const auto& [kind, ttl] : kinds) {
    for (int i = 0; i < kPerKind; ++i) {
      const std::string id = kind + "-" + std::to_string(i);
      Response written = client.execute(
          item_write(Op::kUpsertItem, kDb, "t", "{\"id\":\"" + id + "\",\"pk\":\"p\"" + ttl + "}"));
      EXPECT_EQ(written.status, 201) << written.message;
      result.ttl_items[id] = Written{std::stoull(written.session_token.empty() ? "0" : written.session_token),
                                     written.ts};
      if (kind == "gone") gone_expiry = std::max(gone_expiry, (written.ts + 1) * 1'000'000);
      if (kind == "soon") result.soon_expiry_micros = std::max(result.soon_expiry_micros, (written.ts + kSoonTtl) * 1'000'000);
    }
  }
  // The gone items are expired in replicated time before the backup starts.
  const uint64_t leader = source.wait_for_leader();
  EXPECT_TRUE(wait_until([&] {
    std::optional<NodeStatus> status = source.status(leader);
    return status && status->applied_time_micros >= gone_expiry;
  }, milliseconds(15000)));

  // Write load during the backup: every acknowledged upsert's log index (its session token) and value.
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::vector<std::tuple<uint64_t, std::string, std::string>> acknowledged;  // index, id, v
  std::set<std::string> uncertain;
  std::thread writer([&] {
    client::Client load(source.client_options());
    std::mt19937_64 random(seed);
    for (uint64_t v = 1; !stop.load() && v < 1'000'000; ++v) {
      const std::string id = "k" + std::to_string(random() % kLoadKeys);
      Response r = load.execute(item_write(Op::kUpsertItem, kDb, "load",
                                           "{\"id\":\"" + id + "\",\"pk\":\"p\",\"v\":" + std::to_string(v) + "}"));
      std::lock_guard lock(mutex);
      if (r.ok() && !r.session_token.empty()) {
        acknowledged.emplace_back(std::stoull(r.session_token), id, std::to_string(v));
      } else {
        uncertain.insert(id);
      }
    }
  });
  EXPECT_TRUE(wait_until([&] { std::lock_guard lock(mutex); return acknowledged.size() >= 100; },
                         milliseconds(20000)));
  result.file = source.dir() + "/cluster.mfb";
  const CliResult backup = source.cli({"backup", "create", "--out", result.file});
  EXPECT_TRUE(wait_until([&] { std::lock_guard lock(mutex); return acknowledged.size() >= 200; },
                         milliseconds(20000)));
  stop = true;
  writer.join();
  EXPECT_EQ(backup.exit_code, 0) << backup.describe();
  const boost::json::value* body = backup.body();
  EXPECT_NE(body, nullptr) << backup.describe();
  if (body == nullptr) return result;
  result.backup_index = body->at("appliedIndex").to_number<uint64_t>();
  result.backup_time_micros = body->at("appliedTime").to_number<int64_t>();
  std::cerr << "[backup] " << backup.out;
  EXPECT_NE(body->at("servedBy").to_number<uint64_t>(), leader) << "a follower serves the backup";
  EXPECT_GT(body->at("items").to_number<uint64_t>(), 0u);
  EXPECT_FALSE(std::filesystem::exists(result.file + ".partial"));
  // The state at the backup's index, from the acknowledged writes; writes after it must not be in the backup.
  size_t before = 0, after = 0;
  for (const auto& [index, id, v] : acknowledged) {
    if (index <= result.backup_index) {
      result.load_at_backup[id] = v;  // acknowledged in log order per client: later index wins
      ++before;
    } else {
      ++after;
    }
  }
  std::cerr << "[backup] index " << result.backup_index << ": " << before << " load writes at or below it, "
            << after << " after it (taken under load)\n";
  EXPECT_GT(before, 0u);
  EXPECT_GT(after, 0u) << "the load must go on past the backup's index";
  result.uncertain = uncertain;
  return result;
}

// A new 3-node cluster restored from `source` in `mode`: node 1 restores, 2 and 3 join.
struct Restored {
  std::unique_ptr<Cluster> cluster;
  boost::json::value figures;  // the restore's JSON (node 1's stdout, in its log)
};

Restored restore(const Source& source, const std::string& mode) {
  Restored out;
  out.cluster = std::make_unique<Cluster>(ClusterOptions{.name = "restore-" + mode});
  Cluster& cluster = *out.cluster;
  cluster.set_node_flags(1, {"--restore", source.file, "--ttl", mode});
  cluster.set_node_flags(2, {"--join"});
  cluster.set_node_flags(3, {"--join"});
  if (!cluster.start()) return out;
  // Nodes 2 and 3 know no leader until they are added: wait for node 1 alone.
  EXPECT_TRUE(wait_until([&] {
    std::optional<NodeStatus> status = cluster.status(1);
    return status && status->role == "leader";
  }, milliseconds(15000), milliseconds(50)));
  // Node 1 runs on with the restored directory: its next starts must not try to restore again.
  cluster.set_node_flags(1, {});
  for (size_t n : {2, 3}) {
    const CliResult added = cluster.cli({"cluster", "add-member", std::to_string(n), cluster.endpoint(n)});
    EXPECT_EQ(added.exit_code, 0) << added.describe();
  }
  for (size_t n : {2, 3}) EXPECT_TRUE(cluster.wait_applied(n, source.backup_index + 1)) << "node " << n;
  const std::string log = cluster.log_text(1);
  const size_t at = log.find("{\"mode\":\"" + mode + "\"");
  EXPECT_NE(at, std::string::npos) << "node 1 printed no restore figures";
  if (at != std::string::npos) out.figures = parse_json(log.substr(at, log.find('\n', at) - at));
  return out;
}

// Every node serves the loaded container exactly as it was at the backup's index.
void expect_load_state(Restored& restored, const Source& source) {
  client::Client client(restored.cluster->client_options());
  const std::map<std::string, boost::json::object> items = list_all(client, "load");
  size_t checked = 0;
  for (const auto& [id, v] : source.load_at_backup) {
    if (source.uncertain.contains(id)) continue;
    auto found = items.find(id);
    ASSERT_NE(found, items.end()) << id << " (v " << v << ") missing after restore";
    EXPECT_EQ(boost::json::serialize(found->second.at("v")), v) << id;
    ++checked;
  }
  for (const auto& [id, item] : items) {
    EXPECT_TRUE(source.load_at_backup.contains(id) || source.uncertain.contains(id))
        << id << " was written after the backup's index but is in the restored state";
  }
  // Each replica individually (strong reads are served by the leader; these go to every node at session level after
  // it has applied the restored index).
  for (size_t n = 1; n <= 3; ++n) {
    for (const auto& [id, v] : source.load_at_backup) {
      if (source.uncertain.contains(id)) continue;
      Request request = item_key(Op::kReadItem, kDb, "load", "p", id);
      request.options.consistency = Consistency::kEventual;
      request.endpoint = n;
      Response r = client.execute(request);
      ASSERT_EQ(r.status, 200) << "node " << n << " " << id << ": " << r.message;
      EXPECT_EQ(boost::json::serialize(parse_json(r.body).at("v")), v) << "node " << n << " " << id;
    }
  }
  std::cerr << "[restore] " << checked << " loaded items equal to the state at index " << source.backup_index << "\n";
}

int status_of(client::Client& client, const std::string& id) { return read_item(client, "t", id).status; }

class IntegrationBackup : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    seed_ = test_seed();
    std::cerr << "[backup] seed " << seed_ << " (MAYFLY_IT_SEED to repeat)\n";
    source_cluster_ = new Cluster(ClusterOptions{.name = "backup-source"});
    ASSERT_TRUE(source_cluster_->start());
    ASSERT_NE(source_cluster_->wait_for_leader(), 0u);
    source_ = new Source(make_backup(*source_cluster_, seed_));
    // The soon items expire (in wall time) before any restore starts.
    ASSERT_TRUE(wait_until([] { return wall_micros() > source_->soon_expiry_micros + 1'000'000; },
                           milliseconds(60000), milliseconds(100)));
  }
  static void TearDownTestSuite() {
    delete source_;
    delete source_cluster_;
  }
  static uint64_t seed_;
  static Cluster* source_cluster_;
  static Source* source_;
};
uint64_t IntegrationBackup::seed_ = 0;
Cluster* IntegrationBackup::source_cluster_ = nullptr;
Source* IntegrationBackup::source_ = nullptr;

TEST_F(IntegrationBackup, DryRunPredictsEachModeAndChangesNothing) {
  ASSERT_FALSE(source_->file.empty());
  const std::string data = source_cluster_->dir() + "/dry-run-data";
  const std::string command = default_mayflyd() + " --id 1 --listen 127.0.0.1:1 --peers 1=127.0.0.1:1 " +
                              "--data " + data + " --restore " + source_->file + " --dry-run 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  ASSERT_EQ(::pclose(pipe), 0) << out;
  const boost::json::value json = parse_json(out);
  ASSERT_TRUE(json.is_object()) << out;
  std::map<std::string, boost::json::object> modes;
  for (const boost::json::value& mode : json.at("modes").as_array()) {
    modes[std::string(mode.at("mode").as_string())] = mode.as_object();
  }
  ASSERT_EQ(modes.size(), 3u) << out;
  EXPECT_EQ(modes["preserve"].at("expireAtOnce").at("items").to_number<int64_t>(), kPerKind) << out;
  EXPECT_EQ(modes["pause"].at("expireAtOnce").at("items").to_number<int64_t>(), 0) << out;
  EXPECT_EQ(modes["rebase"].at("expireAtOnce").at("items").to_number<int64_t>(), 0) << out;
  EXPECT_EQ(modes["pause"].at("paused").as_array().size(), 1u) << out;
  EXPECT_FALSE(std::filesystem::exists(data)) << "a dry run creates nothing";
}

TEST_F(IntegrationBackup, PreserveRestoresTheStateAtTheIndexAndExpiresWhatExpiredOnDisk) {
  Restored restored = restore(*source_, "preserve");
  ASSERT_TRUE(restored.cluster);
  expect_load_state(restored, *source_);
  client::Client client(restored.cluster->client_options());
  for (int i = 0; i < kPerKind; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(status_of(client, "gone-" + n), 404);
    EXPECT_EQ(status_of(client, "soon-" + n), 404) << "expired while the backup sat on disk";
    Response kept = read_item(client, "t", "long-" + n);
    EXPECT_EQ(kept.status, 200);
    EXPECT_EQ(kept.ts, source_->ttl_items.at("long-" + n).ts) << "_ts kept";
    EXPECT_EQ(status_of(client, "never-" + n), 200);
  }
  EXPECT_EQ(restored.figures.at("expireAtOnce").at("items").to_number<int64_t>(), kPerKind);
  // The new cluster's replicated time is now, not the backup's.
  std::optional<NodeStatus> status = restored.cluster->status(1);
  ASSERT_TRUE(status);
  EXPECT_GT(status->applied_time_micros, source_->soon_expiry_micros);
}

TEST_F(IntegrationBackup, PauseTurnsTtlOffAndNeverBringsBackWhatHadExpired) {
  Restored restored = restore(*source_, "pause");
  ASSERT_TRUE(restored.cluster);
  expect_load_state(restored, *source_);
  client::Client client(restored.cluster->client_options());
  for (int i = 0; i < kPerKind; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(status_of(client, "gone-" + n), 404) << "expired at backup time: never back";
    Response soon = read_item(client, "t", "soon-" + n);
    EXPECT_EQ(soon.status, 200) << "TTL is off";
    EXPECT_EQ(soon.ts, source_->ttl_items.at("soon-" + n).ts) << "_ts kept";
    EXPECT_EQ(status_of(client, "long-" + n), 200);
  }
  Response container = client.execute(container_req(Op::kGetContainer, kDb, "t"));
  ASSERT_EQ(container.status, 200);
  EXPECT_EQ(container.body.find("defaultTtl"), std::string::npos) << container.body;
  const boost::json::array& paused = restored.figures.at("paused").as_array();
  ASSERT_EQ(paused.size(), 1u);
  EXPECT_EQ(paused[0].at("previousDefaultTtl").to_number<int64_t>(), 3600);
  EXPECT_NE(restored.cluster->log_text(1).find("its defaultTtl was 3600"), std::string::npos);
}

TEST_F(IntegrationBackup, RebaseKeepsTheRemainingLifetimeOfEveryLiveItem) {
  Restored restored = restore(*source_, "rebase");
  ASSERT_TRUE(restored.cluster);
  expect_load_state(restored, *source_);
  const int64_t shift = restored.figures.at("shiftSeconds").to_number<int64_t>();
  EXPECT_GE(shift * 1'000'000, source_->soon_expiry_micros - source_->backup_time_micros);
  client::Client client(restored.cluster->client_options());
  int64_t latest_soon = 0;
  for (int i = 0; i < kPerKind; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(status_of(client, "gone-" + n), 404);
    Response soon = read_item(client, "t", "soon-" + n);
    // The soon items had (E - B) >= kSoonTtl - (B - write) left at the backup; they have it again after the restore.
    EXPECT_EQ(soon.status, 200) << soon.message;
    EXPECT_EQ(soon.ts, source_->ttl_items.at("soon-" + n).ts + shift);
    latest_soon = std::max(latest_soon, (soon.ts + kSoonTtl) * 1'000'000);
    Response kept = read_item(client, "t", "long-" + n);
    EXPECT_EQ(kept.ts, source_->ttl_items.at("long-" + n).ts + shift);
  }
  // Then they expire at their shifted instants, on every node.
  ASSERT_TRUE(wait_until([&] {
    std::optional<NodeStatus> status = restored.cluster->status(1);
    return status && status->applied_time_micros > latest_soon;
  }, milliseconds(30000), milliseconds(100)));
  for (size_t node = 1; node <= 3; ++node) {
    for (int i = 0; i < kPerKind; ++i) {
      Request request = item_key(Op::kReadItem, kDb, "t", "p", "soon-" + std::to_string(i));
      request.options.consistency = Consistency::kStrong;
      EXPECT_EQ(client.execute(request).status, 404);
    }
  }
  EXPECT_EQ(status_of(client, "long-0"), 200);
}

TEST_F(IntegrationBackup, RestoreRefusesACorruptFileAndANonEmptyDirectory) {
  const std::string corrupt = source_cluster_->dir() + "/corrupt.mfb";
  std::filesystem::copy_file(source_->file, corrupt);
  {
    std::fstream file(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(std::filesystem::file_size(corrupt) / 2));
    file.put('\x5a');
  }
  auto run = [&](const std::string& file, const std::string& data) {
    const std::string command = default_mayflyd() +
                                " --id 1 --listen 127.0.0.1:1 --peers 1=127.0.0.1:1 --data " + data + " --restore " +
                                file + " --ttl preserve > " + data + ".out 2>&1";
    const int status = std::system(command.c_str());
    std::ifstream in(data + ".out");
    return std::make_pair(WEXITSTATUS(status), std::string(std::istreambuf_iterator<char>(in), {}));
  };
  const std::string data = source_cluster_->dir() + "/refused-data";
  auto [code, out] = run(corrupt, data);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("checksum mismatch"), std::string::npos) << out;
  std::filesystem::resize_file(corrupt, std::filesystem::file_size(corrupt) - 100);
  std::tie(code, out) = run(corrupt, data);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("truncated"), std::string::npos) << out;
  std::tie(code, out) = run(source_->file, source_cluster_->data_dir(2));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("not empty"), std::string::npos) << out;
}

}  // namespace
}  // namespace mayfly::it

namespace mayfly::it {
namespace {

// The CLI downloads a backup from the node it chose through the --endpoints entry that answers as that node when the
// node's advertised address is not one of them — as behind compose's published ports, where "mayfly2:7100" does not
// resolve on the host. Here every node advertises an unroutable address (TEST-NET-1).
TEST(IntegrationBackupAddress, DownloadsThroughTheEndpointThatIsTheChosenNode) {
  Cluster cluster(ClusterOptions{.name = "backup-advertise"});
  for (size_t n = 1; n <= cluster.size(); ++n) cluster.set_node_flags(n, {"--advertise", "192.0.2.1:9"});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "adv")).status, 201);
  const std::string file = cluster.dir() + "/advertise.mfb";
  const CliResult backup = cluster.cli({"backup", "create", "--out", file});
  ASSERT_EQ(backup.exit_code, 0) << backup.describe();
  const boost::json::value* body = backup.body();
  ASSERT_NE(body, nullptr) << backup.describe();
  EXPECT_NE(body->at("servedBy").to_number<uint64_t>(), leader) << "a follower serves the backup";
  EXPECT_TRUE(std::filesystem::exists(file));
}

}  // namespace
}  // namespace mayfly::it
