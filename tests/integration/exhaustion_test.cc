// Resource exhaustion from the network against real mayflyd processes (ctest -L hostile): a flood of idle
// connections does not starve established clients nor the peers (--max-connections, the handshake timeout, eviction
// of the oldest unauthenticated connection), and reads of made-up container names create no meters and no metric
// series.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "tests/env.h"
#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;

// A TCP connection to 127.0.0.1:port that sends nothing; -1 if the connect failed.
int idle_connection(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int port_of(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

TEST(Exhaustion, FiveThousandIdleConnectionsDoNotStarveClientsOrPeers) {
  // This process holds the idle connections: let it have the descriptors.
  struct rlimit limit;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  const size_t flood = std::min<size_t>(5000, limit.rlim_cur > 200 ? limit.rlim_cur - 200 : 0);
  std::printf("flood of %zu idle connections (RLIMIT_NOFILE %llu)\n", flood,
              static_cast<unsigned long long>(limit.rlim_cur));

  ClusterOptions options{.name = "flood", .metrics = true};
  options.extra_flags = {"--max-connections", "256", "--handshake-timeout-ms", "2000"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::ClientOptions client_options = cluster.client_options();
  client_options.request_timeout_ms = 3000;
  client::Client established(client_options);
  ASSERT_EQ(established.execute(db_req(Op::kCreateDatabase, "flood")).status, 201);
  ASSERT_EQ(established.execute(create_container("flood", "c", "/pk")).status, 201);
  // Every node is flooded, the leader included: its peers' links and the established client must keep working.
  std::vector<int> fds;
  for (size_t i = 0; i < flood; ++i) {
    const int fd = idle_connection(port_of(cluster.endpoint(1 + i % cluster.size())));
    if (fd >= 0) fds.push_back(fd);
  }
  std::printf("opened %zu\n", fds.size());
  // Established clients keep getting answers within their timeout, on every node, writes included (which need the
  // peers: a write commits only through a quorum).
  for (int round = 0; round < 20; ++round) {
    for (size_t node = 1; node <= cluster.size(); ++node) {
      Request read = item_key(Op::kReadItem, "flood", "c", "p", "missing");
      read.endpoint = node;
      const client::Response answer = established.execute(read);
      EXPECT_EQ(answer.status, 404) << "node " << node << ": " << answer.message;
    }
    const client::Response write = established.execute(
        item_write(Op::kUpsertItem, "flood", "c", R"({"id":"w)" + std::to_string(round) + R"(","pk":"p"})"));
    EXPECT_TRUE(write.ok()) << write.status << " " << write.message;
  }
  // A new client still gets in (the oldest unauthenticated connection makes room), and the leader did not change.
  client::Client newcomer(client_options);
  EXPECT_EQ(newcomer.execute(container_req(Op::kGetContainer, "flood", "c")).status, 200);
  EXPECT_EQ(cluster.wait_for_leader(), leader);
  std::optional<Scrape> scrape = cluster.scrape(1);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_LE(scrape->sum("mayfly_connections"), 256) << scrape->text();
  EXPECT_GT(scrape->sum("mayfly_connections_refused_total", {{"reason", "evicted"}}) +
                scrape->sum("mayfly_connections_refused_total", {{"reason", "handshake_timeout"}}),
            0)
      << scrape->text();
  for (int fd : fds) ::close(fd);
  // The idle ones that stayed are closed by the handshake timeout.
  EXPECT_TRUE(wait_until(
      [&] {
        scrape = cluster.scrape(1);
        return scrape && scrape->sum("mayfly_connections", {{"state", "unauthenticated"}}) == 0;
      },
      milliseconds(10000)))
      << (scrape ? scrape->text() : "");
}

TEST(Exhaustion, ReadsOfMadeUpContainersCreateNoMetricSeries) {
  Cluster cluster({.name = "series", .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client client(cluster.client_options());
  ASSERT_EQ(client.execute(db_req(Op::kCreateDatabase, "real")).status, 201);
  ASSERT_EQ(client.execute(create_container("real", "c", "/pk")).status, 201);
  Request read_real = item_key(Op::kReadItem, "real", "c", "p", "x");
  read_real.endpoint = 2;
  ASSERT_EQ(client.execute(read_real).status, 404);
  std::optional<Scrape> before = cluster.scrape(2);
  ASSERT_TRUE(before.has_value());
  // The node runs on jemalloc (common/allocator.h), and says so with its figures (a sanitized build keeps the
  // sanitizer's allocator, whose figures glibc's mallinfo2 does not see).
  if (!testing_env::kSanitized) {
    EXPECT_TRUE(before->text().find("mayfly_memory_allocator_info{allocator=\"jemalloc 5.") != std::string::npos)
        << before->text();
    const double allocated = before->sum("mayfly_memory_allocator_bytes", {{"kind", "allocated"}});
    EXPECT_GT(allocated, 1e6);
    EXPECT_GE(before->sum("mayfly_memory_allocator_bytes", {{"kind", "resident"}}), allocated);
  }
  const size_t lines_before = std::count(before->text().begin(), before->text().end(), '\n');
  const uint64_t seed = test_seed();
  std::printf("seed %llu (MAYFLY_IT_SEED to replay)\n", static_cast<unsigned long long>(seed));
  std::vector<Request> reads;
  for (int i = 0; i < 10000; ++i) {
    Request read = item_key(Op::kReadItem, "db" + std::to_string(seed % 97), "c" + std::to_string(seed + i), "p", "x");
    read.endpoint = 2;
    read.options.consistency = client::Consistency::kEventual;
    reads.push_back(std::move(read));
    if (reads.size() == 500) {
      for (const client::Response& response : client.execute_all(reads)) ASSERT_EQ(response.status, 404);
      reads.clear();
    }
  }
  std::optional<Scrape> after = cluster.scrape(2);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->text().find("c" + std::to_string(seed)), std::string::npos) << "a made-up container has a series";
  const size_t lines_after = std::count(after->text().begin(), after->text().end(), '\n');
  // Request counts and latency buckets by op exist already; nothing per made-up name may appear.
  EXPECT_LE(lines_after, lines_before + 40) << "series grew from " << lines_before << " to " << lines_after;
  // A container that is dropped takes its series with it.
  ASSERT_EQ(client.execute(container_req(Op::kDeleteContainer, "real", "c")).status, 204);
  EXPECT_TRUE(wait_until(
      [&] {
        after = cluster.scrape(2);
        return after && after->text().find("container=\"real/c\"") == std::string::npos;
      },
      milliseconds(5000)))
      << (after ? after->text() : "");
}

}  // namespace
}  // namespace mayfly::it
