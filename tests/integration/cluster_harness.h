// A small harness for integration tests against real `mayflyd` processes on 127.0.0.1.
//
// Cluster starts N nodes (posix_spawn; optionally with libfaketime preloaded to skew a node's wall clock) on free
// ports it finds itself, each with a fresh data directory under one temp dir and its stderr/stdout in a log file.
// It only ever signals PIDs it started and has not reaped yet. Every wait is bounded polling for a condition.
// On a failed test the destructor prints the tail of every node's log and keeps the temp dir.
//
// Thread-safety: one thread (the test's main thread) drives a Cluster. Its status queries use a client::Client
// created lazily on that thread. Tests may run their own Clients on other threads.
#pragma once

#include <boost/json.hpp>
#include <spawn.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "metrics/scrape.h"
#include "proto/mayfly.capnp.h"
#include "tests/env.h"
#include "tests/request_fields.h"

namespace mayfly::it {

// The mayflyd the clusters run: $MAYFLY_IT_MAYFLYD_OVERRIDE when set (another build's, e.g. a Debug one whose
// thread-ownership checks are live), else this build's.
std::string default_mayflyd();

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Wall-clock microseconds since the Unix epoch (the test process's own clock: it is never skewed).
int64_t wall_micros();

// Polls `condition` every `poll` until it is true or `timeout` ran out; returns whether it became true. The timeout
// is scaled for a sanitized build (tests/env.h time_scale: 4x under make sanitize, 1x otherwise), as is every wait
// of the harness's that is built on it (node start and stop, leader, applied index, leader transfer).
bool wait_until(const std::function<bool()>& condition, milliseconds timeout, milliseconds poll = milliseconds(10));

// Starts `argv` (argv[0] the program's path) in the background with stdout and stderr written to the files `out` and
// `err` (created or truncated); returns its pid, or -1 when it could not be started. The caller reaps it (waitpid).
// Starts argv[0] (a path) with these file actions (may be null) and this environment; -1 if it could not start.
pid_t spawn_with(const std::vector<std::string>& argv, const posix_spawn_file_actions_t* actions);
pid_t spawn_to_files(const std::vector<std::string>& argv, const std::string& out, const std::string& err);

// The first line of each report a sanitizer wrote into `text` (a node's log, a CLI run's stderr): AddressSanitizer
// errors, LeakSanitizer's leak report at exit, UndefinedBehaviorSanitizer's "file:line:col: runtime error: ...".
// In a sanitized build (make sanitize) the Cluster's destructor stops its nodes with SIGTERM, so LeakSanitizer checks
// them, and fails the test for any report in a node's log; cli() does the same for the CLI's stderr.
std::vector<std::string> sanitizer_reports(const std::string& text);

// A seed for randomised tests: $MAYFLY_IT_SEED if set, else from the clock. Printed by the caller.
uint64_t test_seed();

// A plaintext TCP connection to `endpoint` ("127.0.0.1:PORT") that has sent the Raft transport's preamble
// (common/peer_preamble.h), as a node's Raft link does: give it to capnp::EzRpcClient(fd) to speak the peer API on the
// node's Raft thread. -1 when it cannot connect. The caller closes it.
int connect_raft_transport(const std::string& endpoint);
// The handshake's first step, as a raw client makes it (proto Mayfly.hello): sends `client_nonce` and returns the
// node's nonce, for the proof of openSession or openPeer (common/auth.h). Throws what the node answers.
std::string hello(proto::Mayfly::Client& main, kj::WaitScope& wait, const std::string& client_nonce);

struct ClusterOptions {
  std::string name = "cluster";  // prefix of the temp dir
  size_t nodes = 3;
  // Appended to every node's command line (the harness already passes the fast timings below).
  std::vector<std::string> extra_flags;
  // Node number (1..N) -> libfaketime offset, e.g. "+5s" or "-5s" (FAKETIME_DONT_FAKE_MONOTONIC=1 is set too).
  std::map<size_t, std::string> clock_offset;
  // Environment added for every node (e.g. "LD_PRELOAD=" a test-only fault library; with a clock_offset too, the
  // node's LD_PRELOAD names both libraries).
  std::vector<std::string> extra_env;
  // Serve Prometheus metrics from every node (--metrics on a port of its own; see Cluster::scrape).
  bool metrics = false;
  // With metrics: USER:PASSWORD every node requires of scrapes (--metrics-auth-file); Cluster::scrape sends it.
  std::string metrics_auth;
  // Keys and a cluster secret (docs/security.md): every node gets --keys-file and --cluster-secret-file, and the
  // harness's clients and CLI runs use the admin key. false: the nodes run open, as on a loopback dev machine.
  bool auth = true;
  // The nodes' addresses ("HOST:PORT", node n is [n-1]); empty: free ports on 127.0.0.1 that the harness finds (and
  // re-picks when one was taken). Set: these exactly, e.g. addresses in network namespaces the test made.
  std::vector<std::string> addresses;
  // Node number -> words put before mayflyd's path on its command line, e.g. {"/usr/sbin/ip", "netns", "exec", "ns1"}
  // (a program that execs mayflyd in place, so the PID the harness signals is still the node's).
  std::map<size_t, std::vector<std::string>> launch_prefix;
  // The mayflyd binary to run; empty: the one this build made.
  std::string mayflyd;
  int64_t tick_ms = 10;
  int64_t election_timeout_ticks = 30;
  int64_t heartbeat_ticks = 5;
};

// One node's own view, from `cluster status` (the node's entry for itself).
struct NodeStatus {
  uint64_t id = 0;
  std::string role;
  uint64_t term = 0;
  uint64_t commit = 0;
  uint64_t applied = 0;
  int64_t applied_time_micros = 0;
  uint64_t leader = 0;
};

// The outcome of one `mayfly` CLI run.
struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  boost::json::value json;  // stdout parsed (null when it is not one JSON object)
  int status() const;       // json["status"], or -1
  std::string message() const;
  std::string session_token() const;
  std::string etag() const;
  const boost::json::value* body() const;  // json["body"] or nullptr
  std::string describe() const;            // for failure messages
};

using metrics::Scrape;  // metrics/scrape.h: one /metrics scrape, parsed

class Cluster {
 public:
  explicit Cluster(ClusterOptions options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Starts every node; if one cannot bind its port (taken meanwhile), stops them all and retries with new ports.
  // Returns false (with a gtest failure recorded) when the cluster could not be started.
  bool start();
  // Starts node n (1-based) with its data directory as it is; waits until it listens.
  bool start_node(size_t n);
  // SIGTERM; waits (bounded) for the exit and records a failure unless it exited with status 0.
  bool stop_node(size_t n);
  // SIGKILL; waits for the process to be reaped.
  void kill_node(size_t n);
  // Removes node n's data directory (the node must not be running).
  void wipe_node(size_t n);
  bool running(size_t n);  // reaps the process if it exited on its own
  // The wait status of node n's last process if it has exited on its own (reaped by running() or here); nullopt
  // while it runs.
  std::optional<int> exit_status(size_t n);
  // Extra flags for node n's next starts (e.g. {"--join"}); replaces what was set before.
  void set_node_flags(size_t n, std::vector<std::string> flags) { node_flags_[n] = std::move(flags); }
  // The libfaketime offset for node n's next starts (as ClusterOptions::clock_offset); empty: its real clock.
  void set_clock_offset(size_t n, const std::string& offset) {
    if (offset.empty()) {
      options_.clock_offset.erase(n);
    } else {
      options_.clock_offset[n] = offset;
    }
  }
  // The CA (PEM file) the harness's clients and CLI runs trust: they connect with TLS (ClientOptions::tls_ca,
  // --tls-ca). Empty (the default): plaintext. Set it before the first status query.
  void set_tls_ca(std::string path) { tls_ca_ = std::move(path); }
  pid_t pid(size_t n) const;

  size_t size() const { return options_.nodes; }
  const std::string& endpoint(size_t n) const { return ports_.at(n - 1); }
  std::vector<std::string> endpoints() const { return ports_; }
  std::string endpoints_csv() const;
  const std::string& dir() const { return dir_; }
  std::string log_path(size_t n) const;
  std::string data_dir(size_t n) const;
  std::string log_text(size_t n) const;

  // Node n's metrics endpoint ("127.0.0.1:P"; with ClusterOptions::metrics) and one scrape of it over HTTP
  // (nullopt if it did not answer within 5 s).
  const std::string& metrics_endpoint(size_t n) const { return metrics_ports_.at(n - 1); }
  std::optional<Scrape> scrape(size_t n) const;

  // The keys of a cluster started with ClusterOptions::auth (empty otherwise), the files the nodes read them from, and
  // a file holding the admin key alone (what the CLI runs get as --key-file).
  const std::string& admin_key() const { return admin_key_; }
  const std::string& readwrite_key() const { return readwrite_key_; }
  const std::string& readonly_key() const { return readonly_key_; }
  std::string keys_file() const { return dir_ + "/keys"; }
  std::string secret_file() const { return dir_ + "/cluster-secret"; }
  std::string admin_key_file() const { return dir_ + "/admin.key"; }

  // ClientOptions for this cluster (endpoint i+1 = node i+1), with the admin key when the cluster has keys.
  client::ClientOptions client_options() const;

  // Node n's own view, asked of node n itself; nullopt if it did not answer.
  std::optional<NodeStatus> status(size_t n);
  // The leader every running node agrees on (a node reporting role leader, seen as leader by the others that
  // answered). Polls until `timeout`; 0 if there is none by then.
  uint64_t wait_for_leader(milliseconds timeout = milliseconds(10000));
  // Waits until node n's applied index is >= index.
  bool wait_applied(size_t n, uint64_t index, milliseconds timeout = milliseconds(15000));
  // Moves leadership to node `target` (cluster transfer-leader) until it is the leader.
  bool transfer_leader(uint64_t target, milliseconds timeout = milliseconds(15000));

  // Runs the CLI with --endpoints (all nodes, or the one given), the admin key (unless the arguments give --key or
  // --key-file) and the arguments; bounded by a 60 s timeout.
  CliResult cli(const std::vector<std::string>& args, std::optional<size_t> node = std::nullopt,
                const std::string& stdin_text = std::string());
  // Writes `text` into a file in the cluster dir and returns its path.
  std::string write_file(const std::string& name, const std::string& text) const;

  // Prints every node's log tail (and where the logs are) to stderr.
  void dump_logs(size_t tail_lines = 120) const;
  // Keep the temp dir (and print the logs) when this cluster goes, even if no gtest failure is recorded by then
  // (the fault campaign finds its anomalies before it reports them).
  void keep_for_diagnosis() { keep_ = true; }

 private:
  struct Node {
    pid_t pid = -1;
    std::optional<int> exit_status;  // of a process that exited on its own (seen by running())
  };
  bool spawn(size_t n);
  bool wait_listening(size_t n, milliseconds timeout);
  bool reap(size_t n, milliseconds timeout, int* status);
  std::vector<std::string> node_argv(size_t n) const;
  client::Client& admin();

  ClusterOptions options_;
  std::string dir_;
  void pick_ports();
  std::vector<std::string> ports_;          // "127.0.0.1:P", by node
  std::vector<std::string> metrics_ports_;  // likewise, with options_.metrics
  std::vector<Node> nodes_;
  std::map<size_t, std::vector<std::string>> node_flags_;
  std::string tls_ca_;
  std::unique_ptr<client::Client> admin_;
  std::string admin_key_, readwrite_key_, readonly_key_;
  std::thread::id admin_thread_;
  int cli_runs_ = 0;
  bool keep_ = false;
};

// Sets `stop` and joins `thread` when it goes out of scope, so a test that returns early (a failed ASSERT) still
// stops its load thread before the cluster goes.
struct StopAndJoin {
  std::atomic<bool>& stop;
  std::thread& thread;
  ~StopAndJoin() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
};

// Reads an item: the JSON body parsed (null on error).
boost::json::value parse_json(const std::string& text);

// ---- request builders for the client library ------------------------------------------------------------------------
// Each makes the operation of kind `op` (api::make_operation) and fills what it is given; a test that sets more reaches
// into the alternative (request.as<api::Query>()->sql, ...) or through tests/request_fields.h (test::body_of,
// test::settings_of, test::id_of, test::set_partition_key), which this header brings in.
// A request of kind `op` naming database `db` (and container `c`), its operation's fields left at their defaults.
client::Request db_req(client::Op op, const std::string& db);
client::Request container_req(client::Op op, const std::string& db, const std::string& c);
client::Request create_container(const std::string& db, const std::string& c, const std::string& pk_path,
                                 std::optional<std::string> default_ttl = std::nullopt, bool indexing_none = false);
// `op` is createItem, upsertItem or replaceItem (`json`: the item) or patchItem (`json`: the operations; set its key
// with test::set_partition_key and test::id_of).
client::Request item_write(client::Op op, const std::string& db, const std::string& c, const std::string& json,
                           const std::string& if_match = {});
// An item addressed by its string partition key value and id: `op` is readItem, deleteItem or patchItem.
client::Request item_key(client::Op op, const std::string& db, const std::string& c, const std::string& pk,
                         const std::string& id);

}  // namespace mayfly::it
