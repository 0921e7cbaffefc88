// Fair share on the RPC port (issue #28, ctest -L hostile), against real mayflyd processes: what one client key or
// one connection can hold on a node is bounded, and the clients of other keys (and the peers) keep being served.
//   - Made-up session tokens (finding 2): a readonly key floods session reads with token 2^64-1; the leader refuses
//     them at once (503 substatus 3: retriable, since a deposed leader cannot tell either), a follower after a few
//     heartbeats (503 substatus 3), neither holding the node's request budget, and a
//     readwrite client's writes through the leader and through that follower keep succeeding.
//   - Replies nobody reads (finding 4): a client pipelines reads of a 1.9 MB item and never reads its socket; the
//     node closes the connection past 64 MiB of queued replies, its RSS stays within a stated bound, and another
//     client is served.
//   - Connection slots (finding 5): one key holds at most --max-connections-per-key sessions, so another key can
//     still connect; when all keys together fill every client slot, a restarted follower still reconnects to the
//     leader (--reserved-peer-connections) and writes through it succeed.
#include <arpa/inet.h>
#include <capnp/message.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <thread>

#include "api/codec.h"
#include "proto/mayfly.capnp.h"
#include "tests/integration/cluster_harness.h"
#include "tests/integration/proc_status.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;
using client::Response;

constexpr const char* kMadeUpToken = "18446744073709551615";

double counter(Cluster& cluster, size_t n, const std::string& name, const std::map<std::string, std::string>& labels) {
  std::optional<Scrape> scrape = cluster.scrape(n);
  return scrape ? scrape->sum(name, labels) : -1;
}

int port_of(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

client::ClientOptions options_for(Cluster& cluster, const std::string& key, std::optional<size_t> only = std::nullopt) {
  client::ClientOptions options = cluster.client_options();
  options.key = key;
  if (only) options.endpoints = {cluster.endpoint(*only)};
  return options;
}

TEST(FairShare, MadeUpSessionTokensAreAnsweredAtOnceAndWritesKeepSucceeding) {
  // A small request budget and a long session wait: without the fixes, parked reads fill the budget within a second
  // and every write gets 503 substatus 4; the flood's reads would wait 5 s each.
  ClusterOptions options{.name = "fair-token", .metrics = true};
  options.extra_flags = {"--max-pending-requests", "64", "--session-wait-ms", "5000"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t follower = leader % 3 + 1;
  {
    client::Client admin(cluster.client_options());
    ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
    ASSERT_EQ(admin.execute(create_container("d", "c", "/pk")).status, 201);
  }
  ASSERT_TRUE(cluster.wait_applied(follower, cluster.status(leader)->applied));

  constexpr int kFloodMs = 4000;
  const auto flood_end = Clock::now() + milliseconds(kFloodMs);
  std::atomic<bool> flooding{true};
  std::atomic<int> writes_ok{0}, writes_failed{0}, writes_shed{0};
  std::string first_failure;
  // The victim: a readwrite client writing through the follower and through the leader, one at a time, with no
  // retries (a 503 would be hidden by a retry otherwise).
  std::thread writer([&] {
    client::ClientOptions writer_options = options_for(cluster, cluster.readwrite_key());
    writer_options.max_retries_unavailable = 0;
    client::Client client(writer_options);
    for (int i = 0; flooding && i < 2000; ++i) {
      Request write = item_write(Op::kUpsertItem, "d", "c", R"({"id":"w)" + std::to_string(i) + R"(","pk":"p"})");
      write.endpoint = i % 2 == 0 ? follower : static_cast<size_t>(leader);
      const Response response = client.execute(write);
      if (response.status < 300) {
        ++writes_ok;
      } else {
        if (response.status == 503 && response.substatus == kSubstatusOverloaded) ++writes_shed;
        if (writes_failed++ == 0) {
          first_failure = "via node " + std::to_string(*write.endpoint) + ": " + std::to_string(response.status) +
                          " substatus " + std::to_string(response.substatus) + " " + response.message;
        }
      }
    }
  });

  // The attacker: a readonly key keeping 150 session reads in flight at each of the leader and the follower, every one
  // with the largest token there is.
  client::ClientOptions flood_options = options_for(cluster, cluster.readonly_key());
  flood_options.max_retries_unavailable = 0;
  flood_options.max_retries_throttled = 0;
  flood_options.request_timeout_ms = 20000;
  client::Client flood(flood_options);
  struct Tally {
    int answered = 0;
    std::map<std::pair<int, int>, int> by_status;  // (status, substatus) -> count
    int64_t slowest_ms = 0;
  };
  std::map<size_t, Tally> tallies;
  std::atomic<int> in_flight{0};
  int sent = 0;
  struct Errors final : kj::TaskSet::ErrorHandler {
    void taskFailed(kj::Exception&& exception) override { ADD_FAILURE() << exception.getDescription().cStr(); }
  } errors;
  kj::TaskSet tasks(errors);
  std::function<void(size_t)> send_one = [&](size_t node) {
    Request read = item_key(Op::kReadItem, "d", "c", "p", "missing");
    read.options.consistency = client::Consistency::kSession;
    read.options.session_token = kMadeUpToken;
    read.endpoint = node;
    ++in_flight;
    ++sent;
    const auto started = Clock::now();
    tasks.add(flood.execute_async(read).then([&, node, started](Response response) {
      --in_flight;
      Tally& tally = tallies[node];
      ++tally.answered;
      ++tally.by_status[{response.status, static_cast<int>(response.substatus)}];
      tally.slowest_ms = std::max<int64_t>(
          tally.slowest_ms, std::chrono::duration_cast<milliseconds>(Clock::now() - started).count());
      if (Clock::now() < flood_end && sent < 200'000) send_one(node);
    }));
  };
  for (int i = 0; i < 150; ++i) {
    send_one(static_cast<size_t>(leader));
    send_one(follower);
  }
  // Bounded: the flood stops sending at flood_end; what is in flight is answered within the request timeout.
  const auto give_up = Clock::now() + milliseconds(kFloodMs + 30000);
  while (in_flight > 0 && Clock::now() < give_up) {
    flood.wait_scope().poll();
    std::this_thread::sleep_for(milliseconds(1));
  }
  flooding = false;
  writer.join();
  EXPECT_EQ(in_flight, 0) << "flood reads still unanswered";

  for (const auto& [node, tally] : tallies) {
    std::cout << "node " << node << (node == leader ? " (leader)" : " (follower)") << ": " << tally.answered
              << " flood reads answered, slowest " << tally.slowest_ms << " ms:";
    for (const auto& [status, count] : tally.by_status) {
      std::cout << " " << status.first << "/" << status.second << " x" << count;
    }
    std::cout << "\n";
  }
  std::cout << "writes: " << writes_ok << " ok, " << writes_failed << " failed\n";

  // The victims: no write was shed (503 substatus 4) because of the reads. On this shared 2-core machine a flood of
  // thousands of reads a second can still cost an election now and then (the RPC thread carries Raft; issue #28
  // finding 10, not this one): a write may then get 503 substatus 1 (not applied, retry), so a few of those are let
  // through.
  EXPECT_EQ(writes_shed, 0) << "first failure " << first_failure;
  EXPECT_LE(writes_failed, writes_ok / 20) << "first failure " << first_failure;
  EXPECT_GT(writes_ok, 10);
  // Every made-up token is answered at once, far sooner than --session-wait-ms (5 s here), with 503 substatus 3: by
  // the leader at once (it is past the leader's log), by a follower (which cannot tell a token it has not heard of
  // from a made-up one) after a few heartbeats. Leadership may move during the flood, so this is counted over both
  // nodes.
  int answered = 0, behind_503 = 0;
  for (const auto& [node, tally] : tallies) {
    answered += tally.answered;
    for (const auto& [status, count] : tally.by_status) {
      if (status.first == 503 && status.second == 3) behind_503 += count;
    }
    EXPECT_LT(tally.slowest_ms, 2500) << "node " << node << " held a made-up token";
  }
  EXPECT_GT(answered, 600);
  EXPECT_EQ(behind_503, answered);
}

// Writes one Cap'n Proto RPC message to a blocking socket.
bool send_rpc(int fd, const std::function<void(capnp::rpc::Message::Builder)>& build) {
  capnp::MallocMessageBuilder message;
  build(message.initRoot<capnp::rpc::Message>());
  try {
    capnp::writeMessageToFd(fd, message);
    return true;
  } catch (const kj::Exception&) {
    return false;  // the node closed the connection
  }
}

TEST(FairShare, AClientThatNeverReadsItsRepliesIsClosedAndTheNodeStaysSmall) {
  // One node, no keys (the raw Cap'n Proto client below opens its session without a proof).
  ClusterOptions options{.name = "fair-backlog", .nodes = 1, .metrics = true, .auth = false};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client honest(cluster.client_options());
  ASSERT_EQ(honest.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
  ASSERT_EQ(honest.execute(create_container("d", "c", "/pk")).status, 201);
  const std::string big(1'900'000, 'x');
  ASSERT_LT(honest.execute(item_write(Op::kUpsertItem, "d", "c", R"({"id":"big","pk":"p","v":")" + big + R"("})"))
                .status,
            300);
  ASSERT_EQ(honest.execute(item_key(Op::kReadItem, "d", "c", "p", "big")).status, 200);
  const pid_t node = cluster.pid(1);
  const int64_t rss_before_kb = status_kb(node, "VmRSS:");
  ASSERT_GT(rss_before_kb, 0);

  // The attacker: a raw socket that bootstraps, opens a session and pipelines 400 reads of the 1.9 MB item (760 MB of
  // replies), then never reads a byte.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port_of(cluster.endpoint(1))));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_TRUE(send_rpc(fd, [](capnp::rpc::Message::Builder message) { message.initBootstrap().setQuestionId(0); }));
  ASSERT_TRUE(send_rpc(fd, [](capnp::rpc::Message::Builder message) {
    auto call = message.initCall();
    call.setQuestionId(1);
    call.initTarget().initPromisedAnswer().setQuestionId(0);
    call.setInterfaceId(capnp::typeId<proto::Mayfly>());
    call.setMethodId(0);  // openSession
    call.initParams().getContent().initAs<proto::Mayfly::OpenSessionParams>();
  }));
  // As the client library sends it: eventual, no session token.
  Request read = item_key(Op::kReadItem, "d", "c", "p", "big");
  read.options.consistency = client::Consistency::kEventual;
  constexpr uint32_t kCalls = 400;
  uint32_t written = 0;
  for (uint32_t i = 0; i < kCalls; ++i) {
    const bool ok = send_rpc(fd, [&](capnp::rpc::Message::Builder message) {
      auto call = message.initCall();
      call.setQuestionId(2 + i);
      auto target = call.initTarget().initPromisedAnswer();
      target.setQuestionId(1);
      target.initTransform(1)[0].setGetPointerField(0);  // OpenSessionResults.session
      call.setInterfaceId(capnp::typeId<proto::Session>());
      call.setMethodId(0);  // execute
      auto params = call.initParams().getContent().initAs<proto::Session::ExecuteParams>();
      api::encode_request(read, params.initRequest());
    });
    if (!ok) break;
    ++written;
  }
  std::cout << "pipelined " << written << " reads of a 1.9 MB item without reading a reply\n";

  // The node closes the connection once 64 MiB of replies are queued for it (bounded wait).
  const bool closed = wait_until(
      [&] { return counter(cluster, 1, "mayfly_connections_refused_total", {{"reason", "reply_backlog"}}) >= 1; },
      milliseconds(20000), milliseconds(100));
  // Others are served meanwhile and after.
  client::ClientOptions other_options = cluster.client_options();
  other_options.request_timeout_ms = 5000;
  client::Client other(other_options);
  for (int i = 0; i < 5; ++i) {
    const Response response = other.execute(item_key(Op::kReadItem, "d", "c", "p", "big"));
    EXPECT_EQ(response.status, 200) << response.message;
  }
  const int64_t peak_kb = status_kb(node, "VmHWM:");
  const int64_t rss_after_kb = status_kb(node, "VmRSS:");
  ::close(fd);
  std::cout << "node RSS before " << rss_before_kb << " kB, after " << rss_after_kb << " kB, peak " << peak_kb
            << " kB\n";
  EXPECT_TRUE(closed) << "the connection that reads no replies was not closed (reply_backlog)";
  // The stated bound: 64 MiB of queued replies plus the replies in the making and allocator slack, well under 256
  // MiB; without the limit the node holds all 760 MB.
  EXPECT_LT(peak_kb - rss_before_kb, 256 * 1024) << "the node's peak RSS grew by more than 256 MiB";
  EXPECT_TRUE(cluster.running(1));
}

// Opens `count` clients of `key`, each with its own session at node `n` (one read each); returns how many were let
// in (the read reached the node: 404 for an item that does not exist). The clients stay open in `holders`.
int open_sessions(Cluster& cluster, size_t n, const std::string& key, int count,
                  std::vector<std::unique_ptr<client::Client>>& holders) {
  int admitted = 0;
  for (int i = 0; i < count; ++i) {
    client::ClientOptions options = options_for(cluster, key, n);
    options.max_retries_unavailable = 0;
    options.request_timeout_ms = 3000;
    auto holder = std::make_unique<client::Client>(options);
    const Response response = holder->execute(item_key(Op::kReadItem, "d", "c", "p", "missing"));
    if (response.status == 404) ++admitted;
    holders.push_back(std::move(holder));
  }
  return admitted;
}

TEST(FairShare, OneKeyCannotTakeEverySlotAndARestartedFollowerRejoins) {
  // 40 slots, 8 kept for peers (so 32 for client sessions), 14 sessions a key: three keys could take 42.
  ClusterOptions options{.name = "fair-slots", .metrics = true};
  options.extra_flags = {"--max-connections", "40", "--max-connections-per-key", "14",
                         "--reserved-peer-connections", "8"};
  Cluster cluster(options);
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const size_t follower = leader % 3 + 1;
  {
    client::Client admin(cluster.client_options());
    ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
    ASSERT_EQ(admin.execute(create_container("d", "c", "/pk")).status, 201);
  }
  ASSERT_TRUE(cluster.stop_node(follower));

  std::vector<std::unique_ptr<client::Client>> holders;
  // The attacker's key opens as many sessions as it can at the leader: it gets its share, not the node.
  const int readonly_admitted = open_sessions(cluster, leader, cluster.readonly_key(), 40, holders);
  std::cout << "readonly key: " << readonly_admitted << " of 40 sessions admitted\n";
  EXPECT_EQ(readonly_admitted, 14);
  // Another key can still connect, and write.
  client::ClientOptions writer_options = options_for(cluster, cluster.readwrite_key());
  writer_options.request_timeout_ms = 5000;
  client::Client writer(writer_options);
  Request first = item_write(Op::kUpsertItem, "d", "c", R"({"id":"a","pk":"p"})");
  first.endpoint = leader;
  const Response written = writer.execute(first);
  EXPECT_LT(written.status, 300) << written.message;
  // The other keys fill every slot clients may have.
  const int readwrite_admitted = open_sessions(cluster, leader, cluster.readwrite_key(), 20, holders);
  const int admin_admitted = open_sessions(cluster, leader, cluster.admin_key(), 20, holders);
  std::cout << "readwrite key: " << readwrite_admitted << ", admin key: " << admin_admitted << " more admitted\n";
  EXPECT_GT(counter(cluster, leader, "mayfly_connections_refused_total", {{"reason", "key_limit"}}), 0);
  EXPECT_GT(counter(cluster, leader, "mayfly_connections_refused_total", {{"reason", "client_limit"}}), 0);

  // The stopped follower comes back: it reconnects to the leader (a reserved slot) and writes through it (forwarded
  // to the leader over that link) succeed within a bounded time.
  ASSERT_TRUE(cluster.start_node(follower));
  client::ClientOptions via_options = options_for(cluster, cluster.readwrite_key(), follower);
  via_options.request_timeout_ms = 3000;
  client::Client via_follower(via_options);
  int attempt = 0;
  std::string last;
  const bool rejoined = wait_until(
      [&] {
        const Response response = via_follower.execute(
            item_write(Op::kUpsertItem, "d", "c", R"({"id":"f)" + std::to_string(attempt++) + R"(","pk":"p"})"));
        last = std::to_string(response.status) + " " + response.message;
        return response.status < 300;
      },
      milliseconds(20000), milliseconds(200));
  EXPECT_TRUE(rejoined) << "no write through the restarted follower succeeded; last: " << last;
  const std::optional<NodeStatus> at_leader = cluster.status(leader);
  ASSERT_TRUE(at_leader.has_value());
  EXPECT_TRUE(cluster.wait_applied(follower, at_leader->applied)) << "the restarted follower did not catch up";
}

}  // namespace
}  // namespace mayfly::it
