// Keys that mean what they say (issue #28, findings 11, 12, 13 and 15) against real mayflyd processes, each test doing
// what the attacker does and asserting what the victims see:
//   - a captured gateway signature of a container replace cannot be sent again with another body (11);
//   - a node with --keys-file and no cluster secret does not start, and a local process without the secret cannot
//     open the peer API to forward a request around the keys (12);
//   - rotating the cluster secret closes the peer links proved with the removed one, and a link proved as a node that
//     is no member cannot forward requests (13);
//   - advance-clock repeated stops at its bound and followers keep applying; a world-readable TLS key is refused; a
//     keys file that stops parsing is counted and logged, never with a key in the log (15).
// The raw peer and HTTP connections are made directly, as an attacker would.
#include <arpa/inet.h>
#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/auth.h"
#include "gateway/protocol.h"
#include "proto/mayfly.capnp.h"
#include "replication/codec.h"
#include "tests/integration/cluster_harness.h"

namespace mayfly::it {
namespace {

using client::Op;
using client::Request;
namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void replace_private_file(const std::string& path, const std::string& text) {
  const std::string staged = path + ".new";
  std::ofstream(staged, std::ios::trunc) << text;
  fs::permissions(staged, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  fs::rename(staged, path);
}

// Runs mayflyd with `args`, its stdout into `out` and its stderr into `out`.err; the exit status if it exits within
// `timeout`, else nullopt (it is then killed: a node that should have refused to start, and did not).
std::optional<int> run_mayflyd(const std::vector<std::string>& args, const std::string& out, milliseconds timeout) {
  std::vector<std::string> argv = {default_mayflyd()};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = spawn_to_files(argv, out, out + ".err");
  if (pid < 0) return std::nullopt;
  int status = 0;
  const bool exited = wait_until([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout, milliseconds(20));
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return std::nullopt;
  }
  return status;
}

capnp::Data::Reader data_of(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof(address);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

// ---- finding 12: the peer API around the keys ----------------------------------------------------------------------

// Opens the peer API on `rpc` as node `from`, proving `secret` (nothing when empty); throws what the node answers.
proto::Peer::Client open_peer(capnp::EzRpcClient& rpc, uint64_t from, const std::string& secret) {
  auto& wait = rpc.getWaitScope();
  proto::Mayfly::Client main = rpc.getMain<proto::Mayfly>();
  const std::string client_nonce = auth::random_nonce();
  const std::string server_nonce = hello(main, wait, client_nonce);
  auto open = main.openPeerRequest();
  open.setFrom(from);
  open.setCluster("mayfly");
  if (!secret.empty()) {
    open.setProof(data_of(auth::peer_client_proof(secret, "mayfly", from, client_nonce, server_nonce)));
  }
  return open.send().wait(wait).getPeer();
}

// Opens the peer API on `endpoint` as node `from` (proving `secret`, none when empty) and forwards `request`. Returns
// the response's status, or nullopt when the node refused the link (the exception's text in `failure`).
std::optional<uint32_t> forward_as_peer(const std::string& endpoint, uint64_t from, const std::string& secret,
                                        const std::function<void(proto::Request::Builder)>& build,
                                        std::string* failure) {
  capnp::EzRpcClient rpc(endpoint);
  std::optional<uint32_t> status;
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] {
    auto forward = open_peer(rpc, from, secret).forwardRequest();
    build(forward.initRequest());
    auto answered = forward.send().wait(rpc.getWaitScope());
    status = answered.getResponse().getStatus();
  })) {
    if (failure != nullptr) *failure = exception->getDescription().cStr();
  }
  return status;
}

// The databases' listing (a strong read), or "" when it failed.
std::string list_databases(client::Client& admin) {
  Request list = db_req(Op::kListDatabases, "");
  list.options.consistency = client::Consistency::kStrong;
  const client::Response response = admin.execute(list);
  return response.status == 200 ? response.body : std::string();
}

TEST(Keys, AKeysFileWithoutAClusterSecretDoesNotStartAndNoPeerGetsAroundTheKeys) {
  // What an operator might run on a loopback development box: keys, no cluster secret. The node refuses to start
  // (exit 2) and says what is missing, so no local process can use the open peer API to get around the keys.
  const std::string dir = (fs::temp_directory_path() / ("mayfly-keys-nosecret-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  const std::string keys = dir + "/keys";
  replace_private_file(keys, "readonly readonly-key-0123456789abcdef ro\n");
  const uint16_t port = free_port();
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  const std::optional<int> status =
      run_mayflyd({"--id", "1", "--listen", listen, "--peers", "1=" + listen, "--data", dir + "/data", "--keys-file",
                   keys},
                  dir + "/out", milliseconds(10000));
  const std::string output = read_text(dir + "/out") + read_text(dir + "/out.err");
  ASSERT_TRUE(status.has_value()) << "a node with --keys-file and no --cluster-secret-file started: " << output;
  ASSERT_TRUE(WIFEXITED(*status)) << output;
  EXPECT_EQ(WEXITSTATUS(*status), 2) << output;
  EXPECT_NE(output.find("--cluster-secret-file"), std::string::npos) << output;
  EXPECT_EQ(output.find("readonly-key-0123456789abcdef"), std::string::npos) << "the refusal printed a key";
  std::error_code ignored;
  fs::remove_all(dir, ignored);

  // With both, a local process that has no secret (none, or a wrong one) cannot forward a request to any node.
  Cluster cluster({.name = "keys-peer", .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client admin(cluster.client_options());
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "honest")).status, 201);
  auto create_db = [](proto::Request::Builder request) {
    request.setDatabase("forged");
    request.setCreateDatabase();
  };
  for (size_t node = 1; node <= cluster.size(); ++node) {
    const uint64_t claimed = node == 1 ? 2 : 1;
    std::string failure;
    EXPECT_FALSE(forward_as_peer(cluster.endpoint(node), claimed, "", create_db, &failure).has_value())
        << "node " << node << " let a process without the cluster secret forward a request";
    EXPECT_NE(failure.find("peer authentication failed"), std::string::npos) << failure;
    failure.clear();
    EXPECT_FALSE(forward_as_peer(cluster.endpoint(node), claimed, "wrong-secret-0123456789abcdef", create_db, &failure)
                     .has_value())
        << "node " << node << " let a wrong cluster secret forward a request";
  }
  const std::string databases = list_databases(admin);
  EXPECT_EQ(databases.find("\"forged\""), std::string::npos) << "a forged forward created a database: " << databases;
  EXPECT_NE(databases.find("\"honest\""), std::string::npos) << databases;
  std::optional<Scrape> scrape = cluster.scrape(1);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_GE(scrape->sum("mayfly_auth_failures_total", {{"reason", "peer"}}), 2) << scrape->text();
  // The victims: a readwrite client's write still commits.
  client::ClientOptions readwrite = cluster.client_options();
  readwrite.key = cluster.readwrite_key();
  client::Client writer(readwrite);
  EXPECT_EQ(writer.execute(create_container("honest", "c", "/pk")).status, 201);
}

// ---- finding 13: rotation closes old links; a link speaks only as the id it proved ----------------------------------

std::string read_secret(const Cluster& cluster) {
  std::ifstream in(cluster.secret_file());
  std::string secret;
  in >> secret;
  return secret;
}

// A peer link held open by the attacker: opened once, then used again and again.
struct HeldPeerLink {
  HeldPeerLink(const std::string& endpoint, uint64_t from, const std::string& secret) : rpc(endpoint) {
    peer = open_peer(rpc, from, secret);
  }
  // Whether the node still answers on this link.
  bool answers() {
    bool ok = false;
    KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] {
      peer.nodeStatusRequest().send().wait(rpc.getWaitScope());
      ok = true;
    })) {
      (void)exception;
    }
    return ok;
  }
  capnp::EzRpcClient rpc;
  proto::Peer::Client peer = nullptr;
};

TEST(Keys, RotatingTheClusterSecretClosesLinksProvedWithTheOldOneAndANonMemberCannotForward) {
  Cluster cluster({.name = "keys-rotate", .metrics = true});
  ASSERT_TRUE(cluster.start());
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  client::Client admin(cluster.client_options());
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "rot")).status, 201);
  ASSERT_EQ(admin.execute(create_container("rot", "c", "/pk")).status, 201);
  const std::string old_secret = read_secret(cluster);
  const std::string new_secret = "rotated-cluster-secret-0123456789abcdef";

  // A holder of the secret claims node 9, no member: the link opens, but it may not forward a request.
  auto create_db = [](proto::Request::Builder request) {
    request.setDatabase("from-node-9");
    request.setCreateDatabase();
  };
  std::string failure;
  const std::optional<uint32_t> refused = forward_as_peer(cluster.endpoint(leader), 9, old_secret, create_db, &failure);
  ASSERT_TRUE(refused.has_value()) << failure;
  EXPECT_EQ(*refused, 403u);
  const std::string databases = list_databases(admin);
  EXPECT_NE(databases.find("\"rot\""), std::string::npos) << databases;
  EXPECT_EQ(databases.find("\"from-node-9\""), std::string::npos) << "a non-member forwarded a write: " << databases;

  // The attacker (who had the old secret) holds a link to every node, as node 2 (or 1 on node 2).
  std::vector<std::unique_ptr<HeldPeerLink>> held;
  for (size_t node = 1; node <= cluster.size(); ++node) {
    held.push_back(std::make_unique<HeldPeerLink>(cluster.endpoint(node), node == 2 ? 1 : 2, old_secret));
    ASSERT_TRUE(held.back()->answers()) << "node " << node;
  }
  // The rotation, without restarts: the new secret accepted, then proved (first), then the old one removed.
  // Each step waits until every node logged that it reloaded the file (they re-read it within a second of a change).
  const auto reloads = [&](size_t node) {
    std::istringstream log(cluster.log_text(node));
    size_t count = 0;
    for (std::string line; std::getline(log, line);) {
      if (line.find("cluster secret file") != std::string::npos && line.find("reloaded") != std::string::npos) ++count;
    }
    return count;
  };
  const auto replace_and_wait = [&](const std::string& contents) {
    std::vector<size_t> before;
    for (size_t node = 1; node <= cluster.size(); ++node) before.push_back(reloads(node));
    replace_private_file(cluster.secret_file(), contents);
    for (size_t node = 1; node <= cluster.size(); ++node) {
      ASSERT_TRUE(wait_until([&] { return reloads(node) > before[node - 1]; }, milliseconds(5000)))
          << "node " << node << " did not reload the cluster secret file";
    }
  };
  replace_and_wait(old_secret + "\n" + new_secret + "\n");
  replace_and_wait(new_secret + "\n" + old_secret + "\n");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(held[node - 1]->answers()) << "node " << node << " closed a link while its secret was still accepted";
  }
  replace_private_file(cluster.secret_file(), new_secret + "\n");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(wait_until([&] { return !held[node - 1]->answers(); }, milliseconds(5000)))
        << "node " << node << " still serves a peer link proved with the removed secret";
  }
  // Every node's outgoing links proved with the old secret are gone (it reconnected with the new one): it closed
  // them itself, or — when a peer reloaded the file first — that peer closed their incoming ends, and the link that
  // replaced it was proved with the new secret (the nodes re-read the file each second, in no fixed order), so there
  // was nothing left to close. And each node counted the incoming ones it closed.
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(wait_until(
        [&] {
          static const std::regex closed_own(R"(closed \d+ incoming and [1-9]\d* outgoing (peer|Raft) link)");
          static const std::regex closed_by_peer(R"(closed [1-9]\d* incoming and \d+ outgoing Raft link)");
          if (std::regex_search(cluster.log_text(node), closed_own)) return true;
          for (size_t peer = 1; peer <= cluster.size(); ++peer) {
            if (peer != node && std::regex_search(cluster.log_text(peer), closed_by_peer)) return true;
          }
          return false;
        },
        milliseconds(5000)))
        << "node " << node << " kept an outgoing link proved with the removed secret";
    std::optional<Scrape> scrape = cluster.scrape(node);
    ASSERT_TRUE(scrape.has_value());
    EXPECT_GE(scrape->sum("mayfly_connections_refused_total", {{"reason", "secret_removed"}}), 1) << scrape->text();
  }
  // The victims: writes through every node (followers forward over the new links) keep committing.
  client::ClientOptions options = cluster.client_options();
  options.key = cluster.readwrite_key();
  client::Client writer(options);
  for (size_t node = 1; node <= cluster.size(); ++node) {
    Request write = item_write(Op::kUpsertItem, "rot", "c", R"({"id":"w)" + std::to_string(node) + R"(","pk":"p"})");
    write.endpoint = node;
    const client::Response response = writer.execute(write);
    EXPECT_TRUE(response.ok()) << "through node " << node << ": " << response.status << " " << response.message;
  }
  // And the attacker cannot open a new link with the old secret.
  EXPECT_FALSE(forward_as_peer(cluster.endpoint(leader), leader == 1 ? 2 : 1, old_secret, create_db, &failure)
                   .has_value());
}

// ---- finding 15: the small ones -------------------------------------------------------------------------------------

TEST(Keys, RepeatedAdvanceClockStopsAtItsBoundAndFollowersKeepApplying) {
  Cluster cluster({.name = "keys-vclock"});
  for (size_t n = 1; n <= cluster.size(); ++n) cluster.set_node_flags(n, {"--clock", "virtual"});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client admin(cluster.client_options());
  // The largest advance, again and again (an admin key's worth of attack, or a script gone wrong): ~120 reach the
  // bound (year 9999). Without it, ~2,100 would pass 2^62 µs, where followers refuse the leader's entries.
  Request advance;
  advance.operation = api::make_operation(Op::kAdvanceClock);
  test::operation_of<api::AdvanceClock>(advance).duration = "2147483647s";
  int advanced = 0;
  client::Response last;
  const auto deadline = Clock::now() + std::chrono::seconds(180);
  while (advanced < 3000 && Clock::now() < deadline) {
    last = admin.execute(advance);
    if (last.status != 200) break;
    ++advanced;
  }
  EXPECT_EQ(last.status, 400) << "after " << advanced << " advances: " << last.status << " " << last.message;
  EXPECT_NE(last.message.find("9999"), std::string::npos) << last.message;
  EXPECT_GT(advanced, 50);
  // Followers still take the leader's entries: a write commits and every node applies it.
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "after")).status, 201);
  const uint64_t leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0u);
  const std::optional<NodeStatus> status = cluster.status(leader);
  ASSERT_TRUE(status.has_value());
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(cluster.wait_applied(node, status->commit)) << "node " << node << " stopped applying";
  }
}

TEST(Keys, AWorldReadableTlsKeyIsRefused) {
  const std::string dir = (fs::temp_directory_path() / ("mayfly-keys-tls-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  ASSERT_EQ(std::system((std::string(MAYFLY_IT_MAKE_CERTS) + " '" + dir + "' node1,localhost,127.0.0.1 >/dev/null")
                            .c_str()),
            0);
  fs::permissions(dir + "/node1.key", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                          fs::perms::others_read,
                  fs::perm_options::replace);
  const uint16_t port = free_port();
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  const std::optional<int> status =
      run_mayflyd({"--id", "1", "--listen", listen, "--peers", "1=" + listen, "--data", dir + "/data", "--tls-cert",
                   dir + "/node1.crt", "--tls-key", dir + "/node1.key", "--tls-ca", dir + "/ca.crt"},
                  dir + "/out", milliseconds(20000));
  const std::string output = read_text(dir + "/out") + read_text(dir + "/out.err");
  ASSERT_TRUE(status.has_value()) << "a node with a world-readable TLS key started: " << output;
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) != 0) << output;
  EXPECT_NE(output.find("may be read by other users"), std::string::npos) << output;
  EXPECT_NE(output.find("chmod 600"), std::string::npos) << output;
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

TEST(Keys, AKeysFileThatStopsParsingIsCountedAndLoggedWithoutTheKey) {
  Cluster cluster({.name = "keys-broken", .metrics = true});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client admin(cluster.client_options());
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "k")).status, 201);
  client::ClientOptions readonly_options = cluster.client_options();
  readonly_options.key = cluster.readonly_key();
  readonly_options.max_retries_unavailable = 2;
  client::Client reader(readonly_options);
  Request list = db_req(Op::kListDatabases, "");
  ASSERT_EQ(reader.execute(list).status, 200);
  // The operator means to remove the readonly key, and writes the admin line the wrong way round (KEY ROLE).
  const std::string secret_looking = "swapped-admin-key-0123456789abcdef";
  replace_private_file(cluster.keys_file(), secret_looking + " admin\nadmin " + cluster.admin_key() + " it-admin\n");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    std::optional<Scrape> scrape;
    EXPECT_TRUE(wait_until(
        [&] {
          scrape = cluster.scrape(node);
          return scrape && scrape->sum("mayfly_secret_file_stale", {{"file", "keys"}}) == 1 &&
                 scrape->sum("mayfly_secret_file_reload_failures_total", {{"file", "keys"}}) == 1;
        },
        milliseconds(5000)))
        << "node " << node << ": " << (scrape ? scrape->text() : "no scrape");
    const std::string log = cluster.log_text(node);
    EXPECT_NE(log.find("KEEPING THE PREVIOUS KEYS"), std::string::npos) << "node " << node;
    EXPECT_NE(log.find(cluster.keys_file() + " line 1"), std::string::npos) << "node " << node;
    EXPECT_EQ(log.find(secret_looking), std::string::npos) << "node " << node << " logged the key";
    EXPECT_EQ(log.find(cluster.admin_key()), std::string::npos) << "node " << node << " logged the key";
  }
  // The documented choice: the previous keys stay (the readonly key still reads) until the file parses again.
  EXPECT_EQ(reader.execute(list).status, 200);
  // Fixed: the stale flag clears and the readonly key is gone.
  replace_private_file(cluster.keys_file(), "admin " + cluster.admin_key() + " it-admin\n");
  for (size_t node = 1; node <= cluster.size(); ++node) {
    EXPECT_TRUE(wait_until(
        [&] {
          std::optional<Scrape> scrape = cluster.scrape(node);
          return scrape && scrape->sum("mayfly_secret_file_stale", {{"file", "keys"}}) == 0;
        },
        milliseconds(5000)))
        << "node " << node;
    list.endpoint = node;
    EXPECT_TRUE(wait_until([&] { return reader.execute(list).status == 401; }, milliseconds(5000))) << "node " << node;
  }
}

// ---- finding 11: gateway replay ------------------------------------------------------------------------------------

// One HTTP/1.1 request on a fresh connection to 127.0.0.1:port; the status and body (Connection: close).
std::pair<int, std::string> http_call(uint16_t port, const std::string& method, const std::string& path,
                                      const std::vector<std::pair<std::string, std::string>>& headers,
                                      const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return {-1, "connect failed"};
  }
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& [name, value] : headers) request += name + ": " + value + "\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[4096];
  while (response.size() < (1 << 20)) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return {-1, response};
  const size_t end = response.find("\r\n\r\n");
  return {std::atoi(response.substr(9, 3).c_str()), end == std::string::npos ? "" : response.substr(end + 4)};
}

std::string http_date(std::time_t seconds) {
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return text;
}

// The headers a Cosmos SDK sends: x-ms-date and the master-key signature over verb, resource and date.
std::vector<std::pair<std::string, std::string>> signed_headers(const std::string& key, const std::string& verb,
                                                                const std::string& type, const std::string& link,
                                                                const std::string& date) {
  const std::string signature = gateway::sign(key, gateway::string_to_sign(verb, type, link, date));
  return {{"x-ms-date", date}, {"x-ms-version", "2018-12-31"}, {"authorization", "type=master&ver=1.0&sig=" + signature}};
}

// --http-replay-guard=false: Cosmos DB's behaviour, a signed delete is accepted again within its 15 minutes (what
// a client that deletes, recreates and deletes a database within one second sends).
TEST(Keys, WithTheReplayGuardOffASignedDeleteIsAcceptedAgain) {
  Cluster cluster({.name = "keys-replay-off", .nodes = 1});
  const uint16_t http_port = free_port();
  cluster.set_node_flags(1, {"--http", "127.0.0.1:" + std::to_string(http_port), "--http-replay-guard=false"});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client admin(cluster.client_options());
  const auto delete_headers =
      signed_headers(cluster.readwrite_key(), "DELETE", "dbs", "dbs/gone", http_date(std::time(nullptr)));
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "gone")).status, 201);
  EXPECT_EQ(http_call(http_port, "DELETE", "/dbs/gone", delete_headers, "").first, 204);
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "gone")).status, 201);
  EXPECT_EQ(http_call(http_port, "DELETE", "/dbs/gone", delete_headers, "").first, 204);
}

TEST(Keys, AReplayedSignedContainerReplaceWithAnotherBodyIsRefused) {
  Cluster cluster({.name = "keys-replay", .nodes = 1, .metrics = true});
  const uint16_t http_port = free_port();
  cluster.set_node_flags(1, {"--http", "127.0.0.1:" + std::to_string(http_port)});
  ASSERT_TRUE(cluster.start());
  ASSERT_NE(cluster.wait_for_leader(), 0u);
  client::Client admin(cluster.client_options());
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "d")).status, 201);
  ASSERT_EQ(admin.execute(create_container("d", "c", "/pk")).status, 201);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(admin.execute(item_write(Op::kCreateItem, "d", "c",
                                       R"({"id":"i)" + std::to_string(i) + R"(","pk":"p"})"))
                  .status,
              201);
  }
  const std::string key = cluster.readwrite_key();
  const std::time_t now = std::time(nullptr);
  // The honest client: a replace setting defaultTtl to one day.
  const std::string date = http_date(now);
  const auto headers = signed_headers(key, "PUT", "colls", "dbs/d/colls/c", date);
  const auto [status, body] = http_call(http_port, "PUT", "/dbs/d/colls/c", headers,
                                        R"({"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash"},"defaultTtl":86400})");
  ASSERT_EQ(status, 200) << body;
  // The attacker replays the captured headers with another body: every item expires at once, forced.
  auto replayed = headers;
  replayed.emplace_back("x-mayfly-force-ttl-change", "true");
  const auto [replay_status, replay_body] =
      http_call(http_port, "PUT", "/dbs/d/colls/c", replayed,
                R"({"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash"},"defaultTtl":1})");
  EXPECT_EQ(replay_status, 401) << replay_body;
  EXPECT_NE(replay_body.find("fresh x-ms-date"), std::string::npos) << replay_body;
  // Nothing changed: the container keeps its day, the items are there.
  Request get = container_req(Op::kGetContainer, "d", "c");
  get.options.consistency = client::Consistency::kStrong;
  const client::Response container = admin.execute(get);
  EXPECT_NE(container.body.find("86400"), std::string::npos) << container.body;
  std::this_thread::sleep_for(milliseconds(1500));
  Request read = item_key(Op::kReadItem, "d", "c", "p", "i0");
  read.options.consistency = client::Consistency::kStrong;
  EXPECT_EQ(admin.execute(read).status, 200) << "the replayed defaultTtl of 1 s expired the items";
  // A database delete replayed is refused too.
  const std::string later = http_date(now + 2);
  const auto delete_headers = signed_headers(key, "DELETE", "dbs", "dbs/gone", later);
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "gone")).status, 201);
  EXPECT_EQ(http_call(http_port, "DELETE", "/dbs/gone", delete_headers, "").first, 204);
  ASSERT_EQ(admin.execute(db_req(Op::kCreateDatabase, "gone")).status, 201);
  EXPECT_EQ(http_call(http_port, "DELETE", "/dbs/gone", delete_headers, "").first, 401);
  // The honest client resends with a fresh date: accepted.
  const auto fresh = signed_headers(key, "PUT", "colls", "dbs/d/colls/c", http_date(now + 3));
  EXPECT_EQ(http_call(http_port, "PUT", "/dbs/d/colls/c", fresh,
                      R"({"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash"},"defaultTtl":7200})")
                .first,
            200);
  // Item writes are not guarded (documented): two upserts in one second share a signature and both apply.
  const auto upsert = [&] {
    auto item_headers = signed_headers(key, "POST", "docs", "dbs/d/colls/c", http_date(now + 4));
    item_headers.emplace_back("x-ms-documentdb-is-upsert", "True");
    item_headers.emplace_back("x-ms-documentdb-partitionkey", R"(["p"])");
    return item_headers;
  }();
  EXPECT_EQ(http_call(http_port, "POST", "/dbs/d/colls/c/docs", upsert, R"({"id":"u","pk":"p","v":1})").first, 201);
  EXPECT_EQ(http_call(http_port, "POST", "/dbs/d/colls/c/docs", upsert, R"({"id":"u","pk":"p","v":2})").first, 200);
  std::optional<Scrape> scrape = cluster.scrape(1);
  ASSERT_TRUE(scrape.has_value());
  EXPECT_EQ(scrape->sum("mayfly_auth_failures_total", {{"reason", "replay"}}), 2) << scrape->text();
}

}  // namespace
}  // namespace mayfly::it
