// What the cluster benchmarks (mayfly-bench, mayfly-gc-bench) share: a local cluster of mayflyd processes that the
// benchmark starts and stops by PID, waiting for a leader, CPU accounting from /proc, percentiles, and fatal errors
// that stop the cluster first.
//
// Thread-safety: one thread (the benchmark's). die() and the SIGINT/SIGTERM handler stop only the nodes this process
// started.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mayfly::bench {

using Clock = std::chrono::steady_clock;

// The prefix of every message die() and the cluster print ("mayfly-bench").
void set_program_name(const std::string& name);
const std::string& program_name();

// Prints "<program>: what", stops the current cluster (if any) and exits 1.
[[noreturn]] void die(const std::string& what);

double seconds_since(Clock::time_point start);
std::vector<std::string> split(const std::string& text, char separator = ',');

// <build>/mayflyd/mayflyd for a benchmark binary that lives in <build>/bench/.
std::string default_mayflyd_path();

// True if 127.0.0.1:port can be bound right now (SO_REUSEADDR: sockets in TIME_WAIT do not count).
bool port_is_free(int port);
// `count` distinct ports that the OS reports free on 127.0.0.1 (bound to port 0, then released).
std::vector<int> free_ports(size_t count);

struct LocalClusterOptions {
  std::string mayflyd;            // the binary to run
  std::vector<int> ports;         // node i+1 listens on 127.0.0.1:ports[i]; the cluster has ports.size() nodes
  std::vector<int> metrics_ports;  // empty: no --metrics; else node i+1 serves /metrics on 127.0.0.1:metrics_ports[i]
  std::vector<std::string> extra_flags;  // appended to every node's command line
  bool keep_data = false;                // keep the temporary directory (data and node logs) after stop()
  std::string temp_prefix = "mayfly-bench";  // /tmp/<prefix>-XXXXXX
};

// mayflyd processes this benchmark started on 127.0.0.1 with fresh data under a new temporary directory. stop() (and
// the destructor, die(), SIGINT and SIGTERM) send SIGTERM to these PIDs only, wait (bounded) and SIGKILL stragglers.
class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  const std::vector<std::string>& endpoints() const { return endpoints_; }          // "127.0.0.1:P", node i+1 at [i]
  const std::vector<std::string>& metrics_endpoints() const { return metrics_endpoints_; }
  const std::vector<pid_t>& pids() const { return pids_; }
  const std::string& dir() const { return dir_; }

  // Empty if every node this benchmark started is still running; else which one exited.
  std::string exited();
  // SIGTERM to our own PIDs, a bounded wait for each (a leader hands over first), SIGKILL to any still running.
  void stop();

 private:
  LocalClusterOptions options_;
  std::string dir_;
  std::vector<std::string> endpoints_;
  std::vector<std::string> metrics_endpoints_;
  std::vector<pid_t> pids_;
  bool stopped_ = false;
};

// The cluster die() stops (nullptr: none).
void set_current_cluster(LocalCluster* cluster);

// CPU seconds (user + system) used so far by process `pid`, or by its thread `tid` when given.
double process_cpu_seconds(pid_t pid, pid_t tid = 0);
double own_cpu_seconds();

// Waits (bounded) until some endpoint reports a leader; returns its node id. Dies if none appears in time or a node
// of `cluster` (when given) exits.
uint64_t wait_for_leader(const std::vector<std::string>& endpoints, double max_seconds, LocalCluster* cluster);

double median(std::vector<double> values);                // 0 for none; even counts: mean of the middle two
double percentile(std::vector<double>& sorted, double p);  // nearest rank; `sorted` ascending; 0 for none

// The figures of several runs of one setting: median and range (all 0 for none).
struct Spread {
  double median = 0, min = 0, max = 0;
  size_t count = 0;
};
Spread spread(const std::vector<double>& values);
// "8366 (6437–9443)" for several values, "8366" for one, "—" for none; `decimals` digits after the point.
std::string format_spread(const Spread& spread, int decimals = 0);
// numerator / denominator, or nothing when the denominator is not positive (a setting that did no work).
std::optional<double> ratio(double numerator, double denominator);

// One page of a readChangeFeed answer, as the benchmark needs it: {"changes":[...],"continuation":"...",
// "caughtUp":bool}. parse_feed_page returns nothing (and says why in `error`) for anything else: not JSON, no
// changes array, no string continuation, no bool caughtUp, or an empty continuation on a page that is
// not caught up (the reader could not go on from it).
struct FeedPage {
  size_t changes = 0;
  std::string continuation;
  bool caught_up = false;
};
std::optional<FeedPage> parse_feed_page(const std::string& body, std::string& error);

}  // namespace mayfly::bench
