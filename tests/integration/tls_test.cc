// TLS on the RPC port (docs/security.md) against real mayflyd processes. Certificates come from
// deploy/make-certs.sh in each test's temp dir. A TLS client's writes and reads work and replicate (so the peers speak
// TLS to each other); a plaintext client and a client trusting another CA are refused before any request is sent
// (the node counts the plaintext ones as failed handshakes); a node whose certificate is signed by another CA is cut off from the
// cluster in both directions. The key handshake on top is unchanged (the harness's nodes run with keys and a secret).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;

// deploy/make-certs.sh DIR NAME[,ALIAS...]...
bool make_certs(const std::string& dir, const std::vector<std::string>& names) {
  std::string command = std::string(MAYFLY_IT_MAKE_CERTS) + " '" + dir + "'";
  for (const std::string& name : names) command += " '" + name + "'";
  command += " >/dev/null";
  return std::system(command.c_str()) == 0;
}

// Node n's certificate "node<n>" from `cert_dir`, trusting the CA in `ca_dir`.
std::vector<std::string> tls_flags(size_t n, const std::string& cert_dir, const std::string& ca_dir) {
  const std::string name = cert_dir + "/node" + std::to_string(n);
  return {"--tls-cert", name + ".crt", "--tls-key", name + ".key", "--tls-ca", ca_dir + "/ca.crt"};
}

std::vector<std::string> node_names(size_t count) {
  std::vector<std::string> names;
  for (size_t n = 1; n <= count; ++n) names.push_back("node" + std::to_string(n) + ",127.0.0.1,localhost");
  return names;
}

// Certificates for every node from one cluster CA in <dir>/certs; the harness's clients trust that CA.
void start_tls_cluster(Cluster& cluster) {
  const std::string certs = cluster.dir() + "/certs";
  ASSERT_TRUE(make_certs(certs, node_names(cluster.size())));
  for (size_t n = 1; n <= cluster.size(); ++n) cluster.set_node_flags(n, tls_flags(n, certs, certs));
  cluster.set_tls_ca(certs + "/ca.crt");
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
}

// Nodes 1 and 2 report the same leader (for clusters whose node 3 the harness's status client cannot reach).
bool nodes_one_and_two_agree_on_a_leader(Cluster& cluster) {
  return wait_until(
      [&] {
        std::optional<NodeStatus> one = cluster.status(1);
        std::optional<NodeStatus> two = cluster.status(2);
        return one && two && one->leader != 0 && one->leader == two->leader;
      },
      milliseconds(10000), milliseconds(50));
}

client::Response run(client::Client& client, Request request, size_t node) {
  request.endpoint = node;
  return client.execute(request);
}

client::ClientOptions quick(client::ClientOptions options) {
  options.max_retries_unavailable = 1;
  options.request_timeout_ms = 3000;
  return options;
}

double tls_refusals(const Cluster& cluster, size_t n) {
  std::optional<Scrape> scrape = cluster.scrape(n);
  return scrape ? scrape->sum("mayfly_connections_refused_total", {{"reason", "tls"}}) : -1;
}

bool replicated_everywhere(Cluster& cluster, client::Client& client, const Request& read) {
  for (size_t n = 1; n <= cluster.size(); ++n) {
    Request eventual = read;
    eventual.options.consistency = client::Consistency::kEventual;
    const bool there =
        wait_until([&] { return run(client, eventual, n).status == 200; }, milliseconds(10000), milliseconds(50));
    if (!there) {
      ADD_FAILURE() << "node " << n << " never served the item";
      return false;
    }
  }
  return true;
}

TEST(Tls, TlsClientWritesAndReadsReplicateOverTlsPeers) {
  Cluster cluster({.name = "tls-ok", .metrics = true});
  start_tls_cluster(cluster);
  // make-certs.sh leaves the keys readable by their owner only.
  for (const char* key : {"/certs/ca.key", "/certs/node1.key", "/certs/node3.key"}) {
    EXPECT_EQ(std::filesystem::status(cluster.dir() + key).permissions(),
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
        << key;
  }
  client::Client client(cluster.client_options());
  ASSERT_EQ(run(client, db_req(Op::kCreateDatabase, "t"), 1).status, 201);
  ASSERT_EQ(run(client, create_container("t", "c", "/pk"), 2).status, 201);  // forwarded to the leader over TLS
  ASSERT_EQ(run(client, item_write(Op::kCreateItem, "t", "c", R"({"id":"a","pk":"p","v":1})"), 3).status, 201);
  EXPECT_TRUE(replicated_everywhere(cluster, client, item_key(Op::kReadItem, "t", "c", "p", "a")));
  Request strong = item_key(Op::kReadItem, "t", "c", "p", "a");
  strong.options.consistency = client::Consistency::kStrong;
  EXPECT_EQ(parse_json(run(client, strong, 1).body).at("v").as_int64(), 1);

  // The CLI with --tls-ca (the harness adds it).
  const CliResult upsert = cluster.cli({"item", "upsert", "t", "c", R"({"id":"b","pk":"p","v":2})"});
  EXPECT_EQ(upsert.status(), 201) << upsert.describe();
  const CliResult read = cluster.cli({"item", "read", "t", "c", "--pk", "p", "--id", "b", "--consistency", "strong"});
  EXPECT_EQ(read.status(), 200) << read.describe();
  // Healthy TLS traffic, peers included, refuses nothing.
  for (size_t n = 1; n <= cluster.size(); ++n) EXPECT_EQ(tls_refusals(cluster, n), 0) << "node " << n;
}

TEST(Tls, PlaintextAndForeignCaClientsAreRefusedAndChangeNothing) {
  Cluster cluster({.name = "tls-refuse", .metrics = true});
  start_tls_cluster(cluster);
  client::Client admin(cluster.client_options());
  ASSERT_EQ(run(admin, db_req(Op::kCreateDatabase, "t"), 1).status, 201);
  ASSERT_EQ(run(admin, create_container("t", "c", "/pk"), 1).status, 201);

  // Plaintext: the node's TLS handshake fails on the first bytes; the call fails, nothing is applied.
  client::ClientOptions plain_options = quick(cluster.client_options());
  plain_options.tls_ca.clear();
  client::Client plain(plain_options);
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const double before = tls_refusals(cluster, n);
    const client::Response response =
        run(plain, item_write(Op::kCreateItem, "t", "c", R"({"id":"plain","pk":"p"})"), n);
    EXPECT_TRUE(response.status == 503 || response.status == 408) << n << ": " << response.status << " " << response.message;
    EXPECT_TRUE(wait_until([&] { return tls_refusals(cluster, n) > before; }, milliseconds(5000)))
        << "node " << n << " did not count the plaintext connection as refused (tls)";
  }

  // A client that trusts another CA refuses the nodes' certificates: nothing is sent.
  const std::string other = cluster.dir() + "/other-ca";
  ASSERT_TRUE(make_certs(other, {"node1,127.0.0.1,localhost"}));
  client::ClientOptions foreign_options = quick(cluster.client_options());
  foreign_options.tls_ca = other + "/ca.crt";
  client::Client foreign(foreign_options);
  // (kj-tls checks the chain after the handshake and then closes: the node sees an ordinary disconnect, not a failed
  // handshake, so this refusal is the client's alone and is not counted by the node.)
  for (size_t n = 1; n <= cluster.size(); ++n) {
    const client::Response response =
        run(foreign, item_write(Op::kCreateItem, "t", "c", R"({"id":"foreign","pk":"p"})"), n);
    EXPECT_TRUE(response.status == 503 || response.status == 408) << n << ": " << response.status << " " << response.message;
    EXPECT_NE(response.message.find("not trusted"), std::string::npos) << response.message;
  }
  // The CLI too: it exits 1.
  const CliResult cli = cluster.cli({"--tls-ca", other + "/ca.crt", "--timeout-ms", "2000", "item", "create", "t", "c",
                                     R"({"id":"cli","pk":"p"})"});
  EXPECT_EQ(cli.exit_code, 1) << cli.describe();

  for (const char* id : {"plain", "foreign", "cli"}) {
    Request read = item_key(Op::kReadItem, "t", "c", "p", id);
    read.options.consistency = client::Consistency::kStrong;
    EXPECT_EQ(run(admin, read, 1).status, 404) << id;
  }
  // The cluster still serves its TLS clients.
  EXPECT_EQ(run(admin, item_write(Op::kCreateItem, "t", "c", R"({"id":"ok","pk":"p"})"), 1).status, 201);
}

TEST(Tls, NodeWithCertificateOfAnotherCaIsCutOff) {
  Cluster cluster({.name = "tls-rogue"});
  const std::string certs = cluster.dir() + "/certs";
  const std::string rogue = cluster.dir() + "/rogue";
  ASSERT_TRUE(make_certs(certs, node_names(2)));
  ASSERT_TRUE(make_certs(rogue, {"node3,127.0.0.1,localhost"}));
  cluster.set_node_flags(1, tls_flags(1, certs, certs));
  cluster.set_node_flags(2, tls_flags(2, certs, certs));
  cluster.set_node_flags(3, tls_flags(3, rogue, rogue));  // holds the cluster secret, but not a cluster certificate
  cluster.set_tls_ca(certs + "/ca.crt");
  ASSERT_TRUE(cluster.start());
  // Nodes 1 and 2 elect a leader between them (node 3 cannot be asked with the cluster CA).
  ASSERT_TRUE(nodes_one_and_two_agree_on_a_leader(cluster));
  client::ClientOptions options = cluster.client_options();
  options.endpoints.pop_back();  // node 3 cannot be reached with the cluster CA
  client::Client client(options);
  ASSERT_EQ(run(client, db_req(Op::kCreateDatabase, "t"), 1).status, 201);
  ASSERT_EQ(run(client, create_container("t", "c", "/pk"), 1).status, 201);
  ASSERT_EQ(run(client, item_write(Op::kCreateItem, "t", "c", R"({"id":"a","pk":"p"})"), 2).status, 201);

  // Node 3, asked by a client that trusts its CA: it never received anything.
  client::ClientOptions rogue_options = quick(cluster.client_options());
  rogue_options.endpoints = {cluster.endpoint(3)};
  rogue_options.tls_ca = rogue + "/ca.crt";
  client::Client rogue_client(rogue_options);
  Request read = item_key(Op::kReadItem, "t", "c", "p", "a");
  read.options.consistency = client::Consistency::kEventual;
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_EQ(run(rogue_client, read, 1).status, 404);
  Request status;
  status.operation = api::make_operation(Op::kClusterStatus);
  const client::Response own = run(rogue_client, status, 1);
  ASSERT_EQ(own.status, 200) << own.message;
  EXPECT_EQ(parse_json(own.body).at("leader").as_int64(), 0) << own.body;  // it never heard of the leader

  // Both directions were refused by certificate verification.
  EXPECT_TRUE(wait_until(
      [&] { return cluster.log_text(1).find("TLS handshake with node 3") != std::string::npos; }, milliseconds(5000)))
      << "node 1 did not refuse node 3's certificate";
  EXPECT_TRUE(wait_until(
      [&] { return cluster.log_text(3).find("TLS handshake with node 1") != std::string::npos; }, milliseconds(5000)))
      << "node 3 did not refuse node 1's certificate";
}

TEST(Tls, CertificateMustNameTheHostDialled) {
  Cluster cluster({.name = "tls-host"});
  const std::string certs = cluster.dir() + "/certs";
  std::vector<std::string> names = node_names(2);
  names.push_back("node3,elsewhere.invalid");  // signed by the cluster CA, but not for 127.0.0.1
  ASSERT_TRUE(make_certs(certs, names));
  for (size_t n = 1; n <= 3; ++n) cluster.set_node_flags(n, tls_flags(n, certs, certs));
  cluster.set_tls_ca(certs + "/ca.crt");
  ASSERT_TRUE(cluster.start());
  ASSERT_TRUE(nodes_one_and_two_agree_on_a_leader(cluster));
  client::ClientOptions options = quick(cluster.client_options());
  client::Client client(options);
  Request status;
  status.operation = api::make_operation(Op::kClusterStatus);
  // The client refuses node 3 (its certificate does not name 127.0.0.1)...
  const client::Response refused = run(client, status, 3);
  EXPECT_EQ(refused.status, 503) << refused.message;
  EXPECT_NE(refused.message.find("hostname mismatch"), std::string::npos) << refused.message;
  // ...and so do its peers: node 1 cannot reach it.
  const client::Response from_one = run(client, status, 1);
  ASSERT_EQ(from_one.status, 200) << from_one.message;
  bool node3_unreachable = false;
  const boost::json::value cluster_view = parse_json(from_one.body);
  ASSERT_TRUE(cluster_view.is_object()) << from_one.body;
  for (const boost::json::value& node : cluster_view.at("nodes").as_array()) {
    if (node.at("id").as_int64() == 3) node3_unreachable = !node.at("reachable").as_bool();
  }
  EXPECT_TRUE(node3_unreachable) << from_one.body;
  EXPECT_TRUE(wait_until(
      [&] { return cluster.log_text(1).find("TLS handshake with node 3") != std::string::npos; }, milliseconds(5000)));
}

}  // namespace
}  // namespace mayfly::it
