// The exactly-once table against a key that attacks it (issue 28, finding 14), on real processes: write ids are bound
// to the key that made them, and one key holds at most its share of the table (storage/write_dedup.h).
//
// The attacker holds the readwrite key (it-app), the victim the admin key (it-admin); both write through followers,
// so the identity each node authenticated has to travel with the forwarded write to the leader.
#include <gtest/gtest.h>

#include <iostream>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;
using client::Response;

constexpr int kSubstatusTableFull = static_cast<int>(kSubstatusDedupTableFull);  // common/wire.h

// Two nodes other than the leader (a 3-node cluster).
std::pair<size_t, size_t> followers(uint64_t leader) {
  std::vector<size_t> out;
  for (size_t n = 1; n <= 3; ++n) {
    if (n != leader) out.push_back(n);
  }
  return {out[0], out[1]};
}

void set_up_container(Cluster& cluster) {
  client::Client setup(cluster.client_options());
  ASSERT_EQ(setup.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
  ASSERT_EQ(setup.execute(create_container("d", "c", "/pk")).status, 201);
}

Request create_on(size_t node, const std::string& id, const std::string& extra = std::string()) {
  Request request = item_write(Op::kCreateItem, "d", "c", R"({"id":")" + id + R"(","pk":"p")" + extra + "}");
  request.endpoint = node;
  return request;
}

int read_status(Cluster& cluster, const std::string& id) {
  client::Client reader(cluster.client_options());
  Request read = item_key(Op::kReadItem, "d", "c", "p", id);
  read.options.consistency = client::Consistency::kStrong;
  return reader.execute(read).status;
}

TEST(DedupShare, AKeyReusingAnotherKeysClientIdCannotSuppressItsWrites) {
  Cluster cluster(ClusterOptions{.name = "dedup-ids"});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  set_up_container(cluster);
  const auto [first, second] = followers(leader);
  const uint64_t victim_id = 0x5eed'0000'0000'0028ULL;  // the id the attacker learned

  // The attacker goes first with the victim's client id and write numbers 1..3, through one follower.
  {
    client::ClientOptions options = cluster.client_options();
    options.key = cluster.readwrite_key();
    options.client_id = victim_id;
    client::Client attacker(options);
    for (int i = 1; i <= 3; ++i) {
      const Response answer = attacker.execute(create_on(first, "attacker-" + std::to_string(i)));
      ASSERT_EQ(answer.status, 201) << answer.message;
    }
  }
  // The victim's writes 1..3 (same client id, same numbers), through the other follower: each is its own and
  // applies; without owners they were answered with the attacker's outcomes (or refused as already acknowledged)
  // and silently not applied.
  {
    client::ClientOptions options = cluster.client_options();  // the admin key
    options.client_id = victim_id;
    client::Client victim(options);
    for (int i = 1; i <= 3; ++i) {
      const Response answer = victim.execute(create_on(second, "victim-" + std::to_string(i)));
      EXPECT_EQ(answer.status, 201) << "victim write " << i << ": " << answer.message;
      EXPECT_NE(answer.body.find("victim-" + std::to_string(i)), std::string::npos) << answer.body;
    }
  }
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(read_status(cluster, "victim-" + std::to_string(i)), 200) << "victim item " << i << " was not written";
  }
  // The same key's write re-sent under the same id to another node (the leader, directly) is still recognised: the
  // follower passed on the identity it authenticated, and the leader took it.
  const uint64_t own_id = 0x5eed'0000'0000'0029ULL;
  Response through_follower;
  {
    client::ClientOptions options = cluster.client_options();
    options.client_id = own_id;
    client::Client once(options);
    through_follower = once.execute(create_on(first, "once"));
    ASSERT_EQ(through_follower.status, 201) << through_follower.message;
  }
  {
    client::ClientOptions options = cluster.client_options();
    options.client_id = own_id;
    client::Client again(options);
    const Response resent = again.execute(create_on(static_cast<size_t>(leader), "once-twin"));
    EXPECT_EQ(resent.status, 201) << resent.message;
    EXPECT_EQ(resent.body, through_follower.body) << "answered with the first outcome";
  }
  EXPECT_EQ(read_status(cluster, "once-twin"), 404) << "a re-sent write applied a second time";
}

TEST(DedupShare, AKeyFillingItsShareOfTheTableLeavesOtherKeysWriting) {
  Cluster cluster(ClusterOptions{.name = "dedup-share", .metrics = true});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  set_up_container(cluster);
  const auto [first, second] = followers(leader);

  // The attacker: one-write clients, each leaving the ~1.9 MB outcome of its upsert unacknowledged (a client that
  // never writes again never acknowledges), until its key's share (32 MiB) is full: at most 40 writes.
  client::ClientOptions attacker_options = cluster.client_options();
  attacker_options.key = cluster.readwrite_key();
  attacker_options.retry_throttled = false;
  attacker_options.request_timeout_ms = 30000;
  const std::string big = R"(,"s":")" + std::string(1'900'000, 'x') + "\"";
  Response refused;
  int kept = 0;
  for (int i = 0; i < 40; ++i) {
    client::Client attacker(attacker_options);
    Request upsert = item_write(Op::kUpsertItem, "d", "c", R"({"id":"fill","pk":"p")" + big + "}");
    upsert.endpoint = first;
    const Response answer = attacker.execute(upsert);
    if (answer.status == 429) {
      refused = answer;
      break;
    }
    ASSERT_TRUE(answer.status == 200 || answer.status == 201) << answer.status << " " << answer.message;
    ++kept;
  }
  std::cout << "attacker outcomes kept before the refusal: " << kept << std::endl;
  ASSERT_EQ(refused.status, 429) << "the attacker's key filled more than its share";
  EXPECT_EQ(refused.substatus, kSubstatusTableFull) << refused.message;
  EXPECT_GE(kept, 17) << "refused before the key had its share (32 MiB)";
  // Another client of the same key is refused as well, and nothing applied.
  {
    client::Client attacker(attacker_options);
    Request create = create_on(first, "attacker-late");
    const Response answer = attacker.execute(create);
    EXPECT_EQ(answer.status, 429) << answer.message;
    EXPECT_EQ(answer.substatus, kSubstatusTableFull);
  }
  EXPECT_EQ(read_status(cluster, "attacker-late"), 404);

  // The victim's key keeps writing exactly-once, big outcomes included, through both followers and the leader.
  {
    client::ClientOptions options = cluster.client_options();  // the admin key
    options.retry_throttled = false;
    options.request_timeout_ms = 30000;
    client::Client victim(options);
    for (int i = 0; i < 12; ++i) {
      const size_t node = i % 3 == 0 ? first : i % 3 == 1 ? second : static_cast<size_t>(leader);
      const Response answer = victim.execute(create_on(node, "victim-" + std::to_string(i), i < 3 ? big : ""));
      EXPECT_EQ(answer.status, 201) << "victim write " << i << ": " << answer.status << " " << answer.message;
    }
  }
  // Each node counts the refusals it applied, by the bound met.
  std::optional<Scrape> scrape = cluster.scrape(leader);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_GE(scrape->sum("mayfly_dedup_refused_total", {{"bound", "key"}}), 2);
  EXPECT_EQ(scrape->sum("mayfly_dedup_refused_total", {{"bound", "table"}}), 0);
}

}  // namespace
}  // namespace mayfly::it
