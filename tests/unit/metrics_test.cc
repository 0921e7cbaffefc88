// The metrics module: families carry the documented names, labels and values, and the exposer serves them over HTTP.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "metrics/metrics.h"
#include "metrics/scrape.h"
#include "tests/env.h"

namespace mayfly::metrics {
namespace {

bool contains_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Metrics, RaftFiguresAndLeaderChanges) {
  Metrics metrics(3);
  metrics.set_raft(RaftFigures{7, "leader", 3, 120, 118, 0.25});
  metrics.set_raft(RaftFigures{8, "follower", 1, 130, 130, 0.5});  // a new leader: one change
  const std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_raft_term{node=\"3\"} 8")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_raft_role{node=\"3\",role=\"follower\"} 1"));
  EXPECT_TRUE(contains_line(text, "mayfly_raft_role{node=\"3\",role=\"leader\"} 0"));
  EXPECT_TRUE(contains_line(text, "mayfly_raft_commit_index{node=\"3\"} 130"));
  EXPECT_TRUE(contains_line(text, "mayfly_raft_leader_changes_total{node=\"3\"} 1"));
  EXPECT_TRUE(contains_line(text, "mayfly_applied_time_lag_seconds{node=\"3\"} 0.5"));
}

TEST(Metrics, RefusedPeerMessagesByBoundedReason) {
  Metrics metrics(2);
  std::string text = metrics.scrape_text();
  EXPECT_TRUE(
      contains_line(text, "mayfly_peer_messages_rejected_total{node=\"2\",reason=\"term_out_of_range\"} 0"))
      << "every reason is exported from the start";
  metrics.add_peer_message_rejected("bad_entries");
  metrics.add_peer_message_rejected("bad_entries");
  metrics.add_peer_message_rejected("made-up reason from nowhere");
  text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_peer_messages_rejected_total{node=\"2\",reason=\"bad_entries\"} 2"))
      << text;
  EXPECT_TRUE(contains_line(text, "mayfly_peer_messages_rejected_total{node=\"2\",reason=\"other\"} 1")) << text;
  EXPECT_EQ(text.find("made-up"), std::string::npos);
}

TEST(Metrics, SnapshotErrorsAreCountedByKindFromZero) {
  Metrics metrics(2);
  std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_raft_snapshot_errors_total{kind=\"read\",node=\"2\"} 0")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_raft_snapshot_errors_total{kind=\"receive\",node=\"2\"} 0")) << text;
  metrics.add_snapshot_errors("read", 3);
  metrics.add_snapshot_errors("receive", 0);
  text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_raft_snapshot_errors_total{kind=\"read\",node=\"2\"} 3")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_raft_snapshot_errors_total{kind=\"receive\",node=\"2\"} 0")) << text;
}

TEST(Metrics, ClockOffsetsPerPeerAndHeldBack) {
  Metrics metrics(1);
  EXPECT_TRUE(contains_line(metrics.scrape_text(), "mayfly_clock_held_back_total{node=\"1\"} 0"));
  metrics.set_clock_offsets({{2, -3600.25}, {3, 0.5}});
  metrics.add_clock_held_back(4);
  metrics.add_clock_held_back(1);
  std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_clock_offset_seconds{node=\"1\",peer=\"2\"} -3600.25")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_clock_offset_seconds{node=\"1\",peer=\"3\"} 0.5"));
  EXPECT_TRUE(contains_line(text, "mayfly_clock_held_back_total{node=\"1\"} 5"));
  metrics.set_clock_offsets({{3, 0.25}});  // node 2 left the voters
  text = metrics.scrape_text();
  EXPECT_EQ(text.find("peer=\"2\""), std::string::npos) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_clock_offset_seconds{node=\"1\",peer=\"3\"} 0.25"));
  metrics.set_clock_offsets({});  // no longer leader
  EXPECT_EQ(metrics.scrape_text().find("mayfly_clock_offset_seconds{"), std::string::npos);
}

TEST(Metrics, ContainersAppearAndDisappear) {
  Metrics metrics(1);
  metrics.set_containers({ContainerFigures{"db/c", 10, 1000, 4, 400, 2.5}, ContainerFigures{"db/d", 1, 10, 0, 0, 0}});
  std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_backlog_items{container=\"db/c\",node=\"1\"} 4")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_backlog_bytes{container=\"db/c\",node=\"1\"} 400"));
  EXPECT_TRUE(contains_line(text, "mayfly_storage_live_items{container=\"db/c\",node=\"1\"} 10"));
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_oldest_expired_age_seconds{container=\"db/c\",node=\"1\"} 2.5"));
  metrics.set_containers({ContainerFigures{"db/c", 10, 1000, 0, 0, 0}});  // db/d was deleted
  text = metrics.scrape_text();
  EXPECT_EQ(text.find("container=\"db/d\""), std::string::npos) << text;
}

TEST(Metrics, ContainerFiguresRefreshedInTurnsAndSeriesDroppedWithTheContainer) {
  Metrics metrics(1);
  // A refresh of some containers leaves the others' figures as they were.
  metrics.set_container_figures({ContainerFigures{"db/c", 10, 1000, 4, 400, 2.5, true}});
  metrics.set_container_figures({ContainerFigures{"db/d", 1, 10, 0, 0, 0, false}});
  metrics.observe_collected("db/e", 1, 100, {0.5});  // a container the refresh has not reached yet
  std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_backlog_items{container=\"db/c\",node=\"1\"} 4")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_backlog_counting{container=\"db/c\",node=\"1\"} 1")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_backlog_counting{container=\"db/d\",node=\"1\"} 0")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_deleted_items_total{container=\"db/e\",node=\"1\"} 1")) << text;
  // Dropped: every series of db/d and db/e goes, db/c keeps its figures.
  metrics.retain_containers({"db/c"});
  text = metrics.scrape_text();
  EXPECT_EQ(text.find("container=\"db/d\""), std::string::npos) << text;
  EXPECT_EQ(text.find("container=\"db/e\""), std::string::npos) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_storage_live_items{container=\"db/c\",node=\"1\"} 10")) << text;
}

TEST(Metrics, CollectionsFillTheDeletionLagHistogram) {
  Metrics metrics(2);
  metrics.observe_collected("db/c", 3, 300, {0.02, 0.2, 7});
  const std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_deleted_items_total{container=\"db/c\",node=\"2\"} 3")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_deletion_lag_seconds_count{container=\"db/c\",node=\"2\"} 3"));
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_deletion_lag_seconds_bucket{container=\"db/c\",node=\"2\",le=\"0.05\"} 1"));
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_gc_deletion_lag_seconds_bucket{container=\"db/c\",node=\"2\",le=\"10\"} 3"));
}

TEST(Metrics, ExpiryLatenessHistogramAndItsQuantilesAsAScrapeReadsThem) {
  Metrics metrics(3);
  EXPECT_FALSE(Scrape::parse(metrics.scrape_text()).histogram_quantile("mayfly_ttl_expiry_lateness_seconds", 0.99))
      << "an empty histogram has no quantile";
  // 90 instants reached 1.5 ms late (bucket 0.001-0.0015), 10 reached 20 ms late (bucket 0.015-0.02).
  for (int i = 0; i < 90; ++i) metrics.observe_expiry_lateness(0.0015);
  for (int i = 0; i < 10; ++i) metrics.observe_expiry_lateness(0.02);
  const std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_expiry_lateness_seconds_count{node=\"3\"} 100")) << text;
  const Scrape scrape = Scrape::parse(text);
  // Interpolated inside the bucket, as Prometheus's histogram_quantile does.
  EXPECT_NEAR(*scrape.histogram_quantile("mayfly_ttl_expiry_lateness_seconds", 0.5), 0.001 + 0.0005 * 50 / 90, 1e-9);
  EXPECT_NEAR(*scrape.histogram_quantile("mayfly_ttl_expiry_lateness_seconds", 0.99, {{"node", "3"}}),
              0.015 + 0.005 * 9 / 10, 1e-9);
  EXPECT_FALSE(scrape.histogram_quantile("mayfly_ttl_expiry_lateness_seconds", 0.5, {{"node", "4"}}));
}

TEST(Metrics, RequestsByOpAndStatus) {
  Metrics metrics(1);
  metrics.observe_request("create", 201, 0.002);
  metrics.observe_request("create", 201, 0.003);
  metrics.observe_request("read", 404, 0.001);
  metrics.add_expired_skipped(2);
  const std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_requests_total{node=\"1\",op=\"create\",status=\"201\"} 2")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_requests_total{node=\"1\",op=\"read\",status=\"404\"} 1"));
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_reads_skipped_expired_total{node=\"1\"} 2"));
}

// The allocator's figures come from the allocator this process runs on: the C library's malloc here (mayflyd links
// jemalloc; tests/integration/exhaustion_test.cc checks that one). Memory held shows in `allocated` and goes when freed.
TEST(Metrics, AllocatorFiguresFollowWhatTheProcessHolds) {
  if (testing_env::kSanitized) GTEST_SKIP() << "the sanitizer's allocator keeps its own figures";
  Metrics metrics(1);
  auto allocated = [&] {
    const Scrape scrape = Scrape::parse(metrics.scrape_text());
    EXPECT_TRUE(scrape.has("mayfly_memory_allocator_info", {{"allocator", "glibc malloc"}, {"node", "1"}}))
        << scrape.text();
    return scrape.sum("mayfly_memory_allocator_bytes", {{"kind", "allocated"}});
  };
  const double before = allocated();
  constexpr size_t kBytes = 64 << 20;
  auto held = std::make_unique<char[]>(kBytes);
  std::memset(held.get(), 1, kBytes);
  asm volatile("" : : "r"(held.get()) : "memory");  // the allocation is used: the compiler keeps it
  const double holding = allocated();
  EXPECT_GE(holding - before, static_cast<double>(kBytes));
  held.reset();
  EXPECT_LT(allocated(), holding - static_cast<double>(kBytes) / 2);
}

// The exposer answers a real HTTP GET on a free port.
TEST(Metrics, ItemsExpiringSoonAreCountedWhenScrapedAtMostEveryFewSeconds) {
  Metrics metrics(2);
  int counted = 0;
  metrics.set_expiring_source([&counted] {
    ++counted;
    return std::vector<ExpiringFigures>{{"db/c", {4, 9, 30}}};
  });
  EXPECT_EQ(counted, 0) << "nothing is counted until someone scrapes";
  const std::string text = metrics.scrape_text();
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_items_expiring{container=\"db/c\",node=\"2\",window=\"1m\"} 4")) << text;
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_items_expiring{container=\"db/c\",node=\"2\",window=\"10m\"} 9"));
  EXPECT_TRUE(contains_line(text, "mayfly_ttl_items_expiring{container=\"db/c\",node=\"2\",window=\"1h\"} 30"));
  EXPECT_NE(text.find("# TYPE mayfly_ttl_items_expiring gauge"), std::string::npos);
  (void)metrics.scrape_text();
  EXPECT_EQ(counted, 1) << "a second scrape right after reuses the count";
  metrics.set_expiring_source(nullptr);
  EXPECT_EQ(metrics.scrape_text().find("mayfly_ttl_items_expiring"), std::string::npos)
      << "without a source (node stopping) the family is left out";
}

TEST(MetricsServer, ServesTheRegistryOverHttp) {
  Metrics metrics(5);
  metrics.set_raft(RaftFigures{4, "candidate", 0, 1, 1, 0});
  metrics.set_expiring_source([] { return std::vector<ExpiringFigures>{{"db/x", {1, 2, 3}}}; });
  const int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  close(probe);
  auto server = MetricsServer::start("127.0.0.1:" + std::to_string(port), metrics);
  ASSERT_TRUE(server.is_ok()) << server.status().to_string();

  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(write(client, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = read(client, buffer, sizeof buffer)) > 0;) response.append(buffer, static_cast<size_t>(n));
  close(client);
  EXPECT_NE(response.find("200 OK"), std::string::npos) << response;
  EXPECT_NE(response.find("mayfly_raft_term{node=\"5\"} 4"), std::string::npos) << response;
  EXPECT_NE(response.find("mayfly_ttl_items_expiring{container=\"db/x\",node=\"5\",window=\"1h\"} 3"),
            std::string::npos)
      << "the on-demand family is served too: " << response;
}

TEST(MetricsServer, ABadAddressIsAClearError) {
  Metrics metrics(1);
  auto server = MetricsServer::start("256.1.1.1:notaport", metrics);
  EXPECT_FALSE(server.is_ok());
}

}  // namespace
}  // namespace mayfly::metrics
