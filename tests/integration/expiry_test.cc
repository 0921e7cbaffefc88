// Simultaneous expiry on every replica, at every consistency level, with real processes; and the same under clock
// skew (libfaketime), with replicated time never moving backwards across a leadership change.
//
// The poller runs every (node, level) stream concurrently from one thread (execute_async + WaitScope::poll), pinning
// each read to its node with Request::endpoint. Every observation keeps its send and receive time (this process's
// wall clock) and the serving node's applied index (the read's session token), so the checks below can tell
// "later" from "concurrent" and compare decisions at the same log position.
#include <gtest/gtest.h>
#include <kj/async.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Consistency;
using client::Op;
using client::Request;
using client::Response;

constexpr Consistency kLevels[] = {Consistency::kStrong, Consistency::kSession, Consistency::kBounded,
                                   Consistency::kEventual};
constexpr int64_t kMs = 1000;

struct Obs {
  size_t stream = 0;
  uint64_t served_by = 0;
  int64_t sent_us = 0;
  int64_t recv_us = 0;
  uint64_t index = 0;  // the serving node's applied index (0: unknown)
  int status = 0;
  bool alive() const { return status == 200; }
  bool gone() const { return status == 404; }
};

struct StreamItem {
  bool in_flight = false;
  int64_t last_sent_us = 0;
  int64_t first_gone_recv_us = -1;
  int rechecks = 0;
};

struct Item {
  std::string id;
  std::string pk;
  int64_t deadline_local_us = 0;  // the expiry instant in this process's clock
  int64_t deadline_s = 0;         // _ts + ttl, in the cluster's (leader's) clock
  int64_t ttl = 0;                // effective ttl (s)
  std::string body;
  bool created = false;           // its create was acknowledged (only then is it polled)
  uint64_t create_index = 0;      // the create's log index: reads at lower applied indexes predate it
  std::vector<StreamItem> per;
  std::vector<Obs> obs;
};

struct Stream {
  size_t node;
  size_t level;  // index into kLevels
  client::Client* client;
  int in_flight = 0;
  bool done = false;
};

std::string level_name(size_t level) { return std::string(client::consistency_name(kLevels[level])); }

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"  // kj's ErrorHandler is deleted through kj's own means
class ErrorHandler final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& exception) override {
    ADD_FAILURE() << "poll task failed: " << exception.getDescription().cStr();
  }
};
#pragma GCC diagnostic pop

// The p99 lateness bound for strong and session reads, and the interval of idle time entries it must stay far
// below; both scaled together in a sanitized build (tests/env.h time_scale), so the bound keeps its meaning there.
const double kLatenessBoundMs = testing_env::scaled(250.0);
const int64_t kIdleTimeEntryMs = testing_env::scaled(int64_t{1000});

struct ExpiryRunOptions {
  std::string container;
  size_t items = 200;
  // Items are created in this many waves, 1 s apart, to spread the deadlines (whole seconds): on 2 cores the poller
  // can re-read ~10-15 items per deadline on 12 streams every few ms, not 200.
  size_t waves = 16;
  uint64_t seed = 0;
  int64_t leader_offset_us = 0;      // the leader's clock minus ours (faketime)
  // With idle time entries only once a second (--time-entry-ms 1000, kIdleTimeEntryMs), items can only vanish on time if the leader
  // schedules a time entry at each deadline: assert p99 lateness far below that second for strong and session on
  // every node. The 50 ms goal itself is measured and printed (speed belongs to benchmarks, not to assertions on a
  // shared 2-core machine).
  bool assert_lateness = true;
  // The cluster serves metrics: print each replica's mayfly_ttl_expiry_lateness_seconds and check it counted every
  // deadline.
  bool replica_lateness = false;
  std::string label;
};

// Creates the items (ttl 1..3 s, some inheriting the container's defaultTtl of 2), polls them on every node at every
// level until all are gone everywhere, and checks the expiry invariants. The session client does the writes, so it
// carries their token from the start.
void expiry_run(Cluster& cluster, client::Client& session_client, const ExpiryRunOptions& options) {
  SCOPED_TRACE(options.label + " seed " + std::to_string(options.seed));
  std::cerr << "[" << options.label << "] seed " << options.seed << " (rerun with MAYFLY_IT_SEED=" << options.seed
            << ")\n";
  std::mt19937_64 prng(options.seed);
  client::ClientOptions base = cluster.client_options();
  client::Client strong_client(base), bounded_client(base), eventual_client(base);
  client::Client* clients[] = {&strong_client, &session_client, &bounded_client, &eventual_client};

  Request container;
  container.operation = api::make_operation(Op::kCreateContainer);
  container.database = "d";
  container.container = options.container;
  test::settings_of(container).partition_key_path = "/pk";
  test::settings_of(container).default_ttl = client::ContainerSettings::DefaultTtl::kSet;
  test::settings_of(container).default_ttl_json = "2";
  ASSERT_EQ(session_client.execute(container).status, 201);

  // The items and their ttls (0: inherit the container's 2 s), created in waves from inside the poll loop so that
  // polling covers every deadline; spreading creation over several seconds spreads the deadlines (whole seconds).
  std::vector<Item> items(options.items);
  for (size_t i = 0; i < items.size(); ++i) {
    items[i].id = "i" + std::to_string(i);
    items[i].pk = "p" + std::to_string(i % 7);
    const int choice = static_cast<int>(prng() % 4);
    items[i].ttl = choice == 0 ? 2 : choice;
    items[i].body = R"({"id":")" + items[i].id + R"(","pk":")" + items[i].pk + "\"" +
                    (choice == 0 ? std::string() : ",\"ttl\":" + std::to_string(choice)) + "}";
  }
  constexpr int64_t kWaveEveryUs = 1000 * kMs;
  const int64_t start_us = wall_micros();
  size_t waves_issued = 0, creates_pending = 0, created_count = 0;
  const int64_t provisional_end = start_us + static_cast<int64_t>(options.waves) * kWaveEveryUs + 4000 * kMs;
  int64_t max_created_deadline = 0;

  std::vector<Stream> streams;
  for (size_t level = 0; level < std::size(kLevels); ++level) {
    for (size_t n = 1; n <= cluster.size(); ++n) streams.push_back({n, level, clients[level]});
  }
  for (Item& item : items) item.per.resize(streams.size());

  // The poll loop.
  constexpr int kCapPerStream = 8;
  // The machine has 2 cores shared by 3 nodes and this poller: polling is focused on items near their deadline so
  // that the measurement resolution stays well below the 50 ms being measured.
  constexpr int64_t kHotBeforeUs = 60 * kMs;  // poll continuously from 60 ms before the deadline
  constexpr int64_t kRecheckEveryUs = 400 * kMs;
  constexpr int kRechecks = 2;
  ErrorHandler errors;
  kj::TaskSet tasks(errors);
  kj::WaitScope& wait_scope = session_client.wait_scope();
  auto hard_end = [&] {
    return (created_count == items.size() ? max_created_deadline : provisional_end) + 10000 * kMs;
  };
  size_t errors_seen = 0, misrouted = 0, before_create = 0;
  std::map<int, size_t> error_statuses;
  int64_t total_requests = 0;
  auto issue = [&](size_t s, size_t i) {
    Stream& stream = streams[s];
    StreamItem& state = items[i].per[s];
    Request r;
    r.operation = api::make_operation(Op::kReadItem);
    r.database = "d";
    r.container = options.container;
    test::set_partition_key(r, "\"" + items[i].pk + "\"");
    test::id_of(r) = items[i].id;
    r.options.consistency = kLevels[stream.level];
    r.endpoint = stream.node;
    state.in_flight = true;
    ++stream.in_flight;
    ++total_requests;
    const int64_t sent = wall_micros();
    state.last_sent_us = sent;
    tasks.add(stream.client->execute_async(r).then([&, s, i, sent](Response response) {
      const int64_t recv = wall_micros();
      Stream& st = streams[s];
      StreamItem& item_state = items[i].per[s];
      item_state.in_flight = false;
      --st.in_flight;
      Obs obs;
      obs.stream = s;
      obs.served_by = response.served_by;
      obs.sent_us = sent;
      obs.recv_us = recv;
      obs.status = response.status;
      obs.index = std::strtoull(response.session_token.c_str(), nullptr, 10);
      if (!obs.alive() && !obs.gone()) {
        ++errors_seen;
        ++error_statuses[response.status];
        return;
      }
      if (response.served_by != st.node) {
        ++misrouted;
        return;  // not an observation of this node
      }
      if (obs.index < items[i].create_index) {
        ++before_create;  // this replica had not applied the create yet: not an expiry observation
        return;
      }
      items[i].obs.push_back(obs);
      if (obs.gone()) {
        if (item_state.first_gone_recv_us < 0) {
          item_state.first_gone_recv_us = recv;
        } else {
          ++item_state.rechecks;
        }
      } else if (item_state.first_gone_recv_us >= 0) {
        ++item_state.rechecks;  // alive again: recorded, the checks below report it
      }
    }));
  };
  for (int64_t iteration = 0; iteration < 50'000'000; ++iteration) {
    const int64_t now = wall_micros();
    if (now > hard_end()) break;
    bool all_done = waves_issued == options.waves && creates_pending == 0;
    if (waves_issued < options.waves && now >= start_us + static_cast<int64_t>(waves_issued) * kWaveEveryUs) {
      const size_t from = items.size() * waves_issued / options.waves;
      const size_t to = items.size() * (waves_issued + 1) / options.waves;
      ++waves_issued;
      for (size_t i = from; i < to; ++i) {
        Request r;
        r.operation = api::make_operation(Op::kCreateItem);
        r.database = "d";
        r.container = options.container;
        test::body_of(r) = items[i].body;
        ++creates_pending;
        const int64_t sent = wall_micros();
        tasks.add(session_client.execute_async(r).then([&, i, sent](Response response) {
          --creates_pending;
          const int64_t recv = wall_micros();
          Item& item = items[i];
          EXPECT_EQ(response.status, 201) << item.id << ": " << response.message;
          if (response.status != 201) return;
          // _ts follows the leader's clock.
          EXPECT_GE(response.ts * 1000000, sent + options.leader_offset_us - 1000000) << item.id;
          EXPECT_LE(response.ts * 1000000, recv + options.leader_offset_us + 1000) << item.id;
          item.deadline_s = response.ts + item.ttl;
          item.deadline_local_us = item.deadline_s * 1000000 - options.leader_offset_us;
          item.create_index = std::strtoull(response.session_token.c_str(), nullptr, 10);
          item.created = true;
          ++created_count;
          max_created_deadline = std::max(max_created_deadline, item.deadline_local_us);
        }));
      }
    }
    int issued = 0;
    for (size_t s = 0; s < streams.size(); ++s) {
      Stream& stream = streams[s];
      if (stream.done) continue;
      bool done = true;
      // Candidates by priority: hot (not yet gone, deadline near or past), then due rechecks and prechecks.
      std::vector<std::pair<int64_t, size_t>> hot, due;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].created) {
          done = false;
          continue;
        }
        const StreamItem& st = items[i].per[s];
        if (st.first_gone_recv_us < 0 || st.rechecks < kRechecks) done = false;
        if (st.in_flight) continue;
        if (st.first_gone_recv_us < 0) {
          if (now >= items[i].deadline_local_us - kHotBeforeUs) {
            hot.emplace_back(st.last_sent_us, i);
          } else if (st.last_sent_us == 0) {
            due.emplace_back(st.last_sent_us, i);  // one check while it is alive
          }
        } else if (st.rechecks < kRechecks && now - st.last_sent_us >= kRecheckEveryUs) {
          due.emplace_back(st.last_sent_us, i);
        }
      }
      if (done && stream.in_flight == 0) {
        stream.done = true;
        continue;
      }
      all_done = false;
      std::sort(hot.begin(), hot.end());
      std::sort(due.begin(), due.end());
      for (const auto& [last, i] : hot) {
        if (stream.in_flight >= kCapPerStream) break;
        issue(s, i);
        ++issued;
      }
      for (const auto& [last, i] : due) {
        if (stream.in_flight >= kCapPerStream) break;
        issue(s, i);
        ++issued;
      }
    }
    if (all_done) break;
    wait_scope.poll();
    if (issued == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // pacing of the poll loop
  }
  // Let what is still in flight finish (bounded), then drop the rest.
  for (int i = 0; i < 20000 && wall_micros() < hard_end() + 5000 * kMs; ++i) {
    bool any = false;
    for (const Stream& s : streams) any = any || s.in_flight > 0;
    if (!any) break;
    wait_scope.poll();
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  std::cerr << "[" << options.label << "] " << total_requests << " reads; " << errors_seen
            << " answered neither 200 nor 404";
  for (const auto& [status, count] : error_statuses) std::cerr << " (" << status << ": " << count << ")";
  std::cerr << "; " << misrouted << " served by another node than pinned (ignored); " << before_create
            << " served at an applied index below the item's create (ignored)\n";
  EXPECT_EQ(created_count, items.size()) << "not every item was created";

  // ---- checks ----
  size_t never_gone = 0, early = 0, strong_violations = 0, session_violations = 0, resurrections = 0,
         index_violations = 0;
  std::map<size_t, size_t> inversions;  // by level: alive on node m after gone on node n != m (same level)
  for (const Item& item : items) {
    int64_t first_gone_any = INT64_MAX, first_gone_session = INT64_MAX;
    std::map<size_t, int64_t> first_gone_level;  // level -> earliest recv of a gone on any node
    uint64_t max_alive_index = 0, min_gone_index = UINT64_MAX;
    const Obs* max_alive = nullptr;
    const Obs* min_gone = nullptr;
    for (const Obs& o : item.obs) {
      const size_t level = streams[o.stream].level;
      if (o.gone()) {
        first_gone_any = std::min(first_gone_any, o.recv_us);
        if (kLevels[level] == Consistency::kSession) first_gone_session = std::min(first_gone_session, o.recv_us);
        auto [it, inserted] = first_gone_level.emplace(level, o.recv_us);
        if (!inserted) it->second = std::min(it->second, o.recv_us);
        if (o.recv_us < item.deadline_local_us - 2 * kMs && ++early <= 5) {
          ADD_FAILURE() << item.id << " reported gone on node " << o.served_by << " (" << level_name(level)
                        << ") " << (item.deadline_local_us - o.recv_us) / 1000.0 << " ms BEFORE its deadline "
                        << item.deadline_s << " (cluster clock)";
        }
        if (o.index != 0 && o.index < min_gone_index) {
          min_gone_index = o.index;
          min_gone = &o;
        }
      } else if (o.index != 0 && o.index >= max_alive_index) {
        max_alive_index = o.index;
        max_alive = &o;
      }
    }
    for (size_t s = 0; s < streams.size(); ++s) {
      if (item.per[s].first_gone_recv_us < 0 && ++never_gone <= 5) {
        ADD_FAILURE() << item.id << " (deadline " << item.deadline_s << ") never seen gone on node "
                      << streams[s].node << " at " << level_name(streams[s].level);
      }
    }
    // Same log position, same decision: every alive observation is at a lower applied index than every gone one.
    if (max_alive != nullptr && min_gone != nullptr && max_alive_index >= min_gone_index && ++index_violations <= 5) {
      ADD_FAILURE() << item.id << ": alive on node " << max_alive->served_by << " ("
                    << level_name(streams[max_alive->stream].level) << ") at applied index " << max_alive_index
                    << " but gone on node " << min_gone->served_by << " ("
                    << level_name(streams[min_gone->stream].level) << ") at applied index " << min_gone_index;
    }
    for (const Obs& o : item.obs) {
      if (!o.alive()) continue;
      const Stream& stream = streams[o.stream];
      const Consistency level = kLevels[stream.level];
      // strong is linearizable: once anyone saw it gone (any node, any level), no later strong read sees it.
      if (level == Consistency::kStrong && o.sent_us > first_gone_any && ++strong_violations <= 5) {
        ADD_FAILURE() << item.id << ": strong read on node " << stream.node << " sent "
                      << (o.sent_us - first_gone_any) / 1000.0
                      << " ms after a read had seen it gone, still shows it (applied index " << o.index << ")";
      }
      // session, with one client carrying its token across nodes: once it saw it gone, never again.
      if (level == Consistency::kSession && o.sent_us > first_gone_session && ++session_violations <= 5) {
        ADD_FAILURE() << item.id << ": session read on node " << stream.node << " sent "
                      << (o.sent_us - first_gone_session) / 1000.0
                      << " ms after the same client saw it gone, still shows it (applied index " << o.index << ")";
      }
      // Per node, per level: once gone, never back.
      const int64_t gone_here = item.per[o.stream].first_gone_recv_us;
      if (gone_here >= 0 && o.sent_us > gone_here && ++resurrections <= 5) {
        ADD_FAILURE() << item.id << " came back on node " << stream.node << " (" << level_name(stream.level)
                      << ") " << (o.sent_us - gone_here) / 1000.0 << " ms after it was gone there";
      }
      // Cross-node inversions (counted, not asserted for bounded/eventual).
      auto first = first_gone_level.find(stream.level);
      if (first != first_gone_level.end() && o.sent_us > first->second && (gone_here < 0 || o.sent_us <= gone_here)) {
        ++inversions[stream.level];
      }
    }
  }
  EXPECT_EQ(never_gone, 0u) << "items still visible long after their deadline";
  EXPECT_EQ(early, 0u) << "items expired before their deadline";
  EXPECT_EQ(strong_violations, 0u) << "strong reads saw expired items again";
  EXPECT_EQ(session_violations, 0u) << "session reads (token carried across nodes) saw expired items again";
  EXPECT_EQ(resurrections, 0u) << "an item came back on a node after it was gone there";
  EXPECT_EQ(index_violations, 0u) << "nodes decided differently at the same applied index";

  // Lateness: first-gone receive time on each node minus the deadline (an upper bound of the true lateness). The
  // last alive read before it gives a lower bound (it was still alive when that read was sent); the gap between the
  // two is the poller's resolution on this machine.
  std::fprintf(stderr,
               "[%s] lateness = first 404 received - deadline (ms), per node and level (%zu items); "
               "lower bound = last 200 sent - deadline\n",
               options.label.c_str(), items.size());
  std::fprintf(stderr, "  %-9s %-5s %8s %8s %8s %8s | %9s %9s  %s\n", "level", "node", "p50", "p99", "max", "min",
               "lower p50", "lower p99", "cross-node inversions (level)");
  for (size_t s = 0; s < streams.size(); ++s) {
    std::vector<double> lateness, lower;
    for (const Item& item : items) {
      const int64_t gone = item.per[s].first_gone_recv_us;
      if (gone < 0) continue;
      lateness.push_back(static_cast<double>(gone - item.deadline_local_us) / 1000.0);
      int64_t last_alive_sent = INT64_MIN;
      for (const Obs& o : item.obs) {
        if (o.stream == s && o.alive() && o.recv_us <= gone) last_alive_sent = std::max(last_alive_sent, o.sent_us);
      }
      if (last_alive_sent != INT64_MIN) {
        lower.push_back(static_cast<double>(last_alive_sent - item.deadline_local_us) / 1000.0);
      }
    }
    const double p50 = percentile(lateness, 50), p99 = percentile(lateness, 99);
    std::fprintf(stderr, "  %-9s %-5zu %8.1f %8.1f %8.1f %8.1f | %9.1f %9.1f  %zu\n",
                 level_name(streams[s].level).c_str(), streams[s].node, p50, p99, percentile(lateness, 100),
                 percentile(lateness, 0), percentile(lower, 50), percentile(lower, 99), inversions[streams[s].level]);
    const Consistency level = kLevels[streams[s].level];
    if (options.assert_lateness && (level == Consistency::kStrong || level == Consistency::kSession)) {
      EXPECT_LE(p99, kLatenessBoundMs) << "p99 lateness at " << level_name(streams[s].level) << " on node "
                                       << streams[s].node << " (goal 50 ms; idle time entries come every "
                                       << kIdleTimeEntryMs << " ms)";
    }
  }
  // The replicas' own figure (node/expiry_watch.h): each node samples every distinct deadline once, when its
  // applied time reaches it, by its own clock. Printed, not asserted on (speed is for benchmarks); the count is.
  if (options.replica_lateness) {
    std::set<int64_t> deadlines;
    for (const Item& item : items) deadlines.insert(item.deadline_s);
    for (size_t n = 1; n <= cluster.size(); ++n) {
      std::optional<metrics::Scrape> scraped = cluster.scrape(n);
      ASSERT_TRUE(scraped) << "node " << n << " did not serve /metrics";
      const double count = scraped->sum("mayfly_ttl_expiry_lateness_seconds_count");
      EXPECT_GE(count, static_cast<double>(deadlines.size()))
          << "node " << n << " sampled fewer expiry instants than there were deadlines";
      const double p50 = scraped->histogram_quantile("mayfly_ttl_expiry_lateness_seconds", 0.5).value_or(-1);
      const double p99 = scraped->histogram_quantile("mayfly_ttl_expiry_lateness_seconds", 0.99).value_or(-1);
      std::fprintf(stderr,
                   "[%s] node %zu: mayfly_ttl_expiry_lateness_seconds p50 %.1f ms, p99 %.1f ms over %.0f instants "
                   "(%zu deadlines; buckets interpolated)\n",
                   options.label.c_str(), n, p50 * 1000, p99 * 1000, count, deadlines.size());
    }
  }
  for (size_t level = 0; level < std::size(kLevels); ++level) {
    std::cerr << "[" << options.label << "] " << level_name(level)
              << ": alive observations after another node had reported the item gone: " << inversions[level]
              << "\n";
  }
  // Finally, nothing is listed anywhere.
  for (size_t n = 1; n <= cluster.size(); ++n) {
    Request list;
    list.operation = api::make_operation(Op::kListItems);
    list.database = "d";
    list.container = options.container;
    list.options.consistency = Consistency::kStrong;
    list.endpoint = n;
    const Response listed = strong_client.execute(list);
    EXPECT_EQ(listed.status, 200) << listed.message;
    EXPECT_EQ(listed.body.find("\"id\""), std::string::npos) << "expired items listed on node " << n << ": "
                                                              << listed.body.substr(0, 300);
  }
}

void create_database(client::Client& c) {
  Request db;
  db.operation = api::make_operation(Op::kCreateDatabase);
  db.database = "d";
  ASSERT_EQ(c.execute(db).status, 201);
}

TEST(IntegrationExpiry, SimultaneousExpiryOnEveryNodeAtEveryLevel) {
  Cluster cluster(
      {.name = "expiry", .extra_flags = {"--time-entry-ms", std::to_string(kIdleTimeEntryMs)}, .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u) << "no leader elected";
  client::Client session_client(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(create_database(session_client));
  expiry_run(cluster, session_client,
             {.container = "x",
              .items = 200,
              .seed = test_seed(),
              .leader_offset_us = 0,
              .replica_lateness = true,
              .label = "expiry"});
}

TEST(IntegrationExpiry, ClockSkewSameDecisionsAndTimeNeverMovesBackwards) {
  // node 1 at +5 s, node 2 at -5 s, node 3 unskewed. Skew within --max-clock-offset: the leader's clock is followed
  // (clock_test.cc covers a leader beyond it).
  Cluster cluster(
      {.name = "skew", .extra_flags = {"--max-clock-offset", "7000"}, .clock_offset = {{1, "+5s"}, {2, "-5s"}}});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u) << "no leader elected";
  ASSERT_TRUE(cluster.transfer_leader(1));
  client::Client session_client(cluster.client_options());
  ASSERT_NO_FATAL_FAILURE(create_database(session_client));
  expiry_run(cluster, session_client,
             {.container = "x",
              .items = 60,
              .waves = 4,
              .seed = test_seed(),
              .leader_offset_us = 5'000'000,
              .assert_lateness = false,
              .label = "skew(leader +5s)"});

  // Leadership moves to node 2 (10 s behind node 1): replicated time never moves backwards.
  Request write;
  write.operation = api::make_operation(Op::kUpsertItem);
  write.database = "d";
  write.container = "x";
  int64_t last_ts = 0;
  int writes = 0;
  auto write_one = [&](const std::string& when) {
    test::body_of(write) = R"({"id":"t)" + std::to_string(++writes) + R"(","pk":"p","ttl":-1})";
    const Response r = session_client.execute(write);
    EXPECT_TRUE(r.ok()) << when << ": " << r.status << " " << r.message;
    EXPECT_GE(r.ts, last_ts) << when << ": _ts moved backwards";
    last_ts = std::max(last_ts, r.ts);
    return r;
  };
  std::map<size_t, int64_t> applied_time;  // highest appliedTime seen per node
  int64_t max_applied_time = 0;
  size_t time_regressions = 0;
  auto sample = [&](const std::string& when) {
    for (size_t n = 1; n <= cluster.size(); ++n) {
      std::optional<NodeStatus> s = cluster.status(n);
      if (!s) continue;
      if (s->applied_time_micros < applied_time[n] && ++time_regressions <= 5) {
        ADD_FAILURE() << when << ": node " << n << " appliedTime went from " << applied_time[n] << " to "
                      << s->applied_time_micros;
      }
      applied_time[n] = std::max(applied_time[n], s->applied_time_micros);
      max_applied_time = std::max(max_applied_time, s->applied_time_micros);
    }
  };
  const Response before = write_one("before the transfer");
  EXPECT_GE(before.ts * 1000000, wall_micros() + 5'000'000 - 1'500'000) << "_ts does not follow leader 1's clock";
  sample("before the transfer");
  const int64_t before_transfer_max = max_applied_time;
  const CliResult transfer = cluster.cli({"cluster", "transfer-leader", "2"});
  EXPECT_EQ(transfer.exit_code, 0) << transfer.describe();
  const bool moved = wait_until(
      [&] {
        sample("during the transfer");
        write_one("during the transfer");
        const std::optional<NodeStatus> s = cluster.status(2);
        return s && s->role == "leader";
      },
      milliseconds(10000), milliseconds(20));
  ASSERT_TRUE(moved || cluster.transfer_leader(2)) << "node 2 did not become the leader";
  for (int i = 0; i < 30; ++i) {
    sample("after the transfer");
    write_one("after the transfer");
  }
  const std::optional<NodeStatus> leader2 = cluster.status(2);
  ASSERT_TRUE(leader2.has_value());
  EXPECT_EQ(leader2->role, "leader");
  EXPECT_GE(leader2->applied_time_micros, before_transfer_max)
      << "the new leader (clock -5 s) applied an earlier replicated time than the cluster had reached";
  EXPECT_EQ(time_regressions, 0u);
  std::cerr << "[skew] after the transfer to node 2: appliedTime " << leader2->applied_time_micros
            << " µs = our clock " << (leader2->applied_time_micros - wall_micros()) / 1000
            << " ms; node 2's clock is ~-5000 ms; last _ts " << last_ts << "\n";
}

}  // namespace
}  // namespace mayfly::it
