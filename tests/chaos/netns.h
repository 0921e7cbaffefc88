// Network namespaces for the fault campaign: a hub namespace with a bridge (10.77.0.254/24) that the campaign
// process joins, and one namespace per node with a veth on that bridge (node n is 10.77.0.n). A partition is iptables
// DROP rules inside the nodes' namespaces, between node addresses only: clients (the hub) always reach every node.
//
// Only the namespaces it made are touched: their names carry this process's PID ("mfc<pid>-h", "mfc<pid>-n<k>"),
// the destructor deletes them (their interfaces and iptables rules go with them), and create() first deletes
// leftovers of campaign processes that no longer exist. Every command is bounded in time.
//
// Thread-safety: one thread (the campaign's main thread).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace mayfly::chaos {

class Network {
 public:
  // Makes the namespaces for `nodes` nodes; nullptr with `why` set when this machine cannot (not root, no `ip`).
  static std::unique_ptr<Network> create(size_t nodes, std::string* why);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  std::string address(size_t n) const { return "10.77.0." + std::to_string(n); }
  // Words that run a program inside node n's namespace (`ip netns exec` execs it in place: same PID).
  std::vector<std::string> launch_prefix(size_t n) const;
  // Moves the calling thread into the hub namespace (call it before starting any thread that uses the network: threads
  // started afterwards inherit the namespace, threads started before keep theirs).
  bool enter_hub(std::string* why);
  // Drops all traffic between nodes of different groups (both directions); replaces any earlier partition.
  bool partition(const std::vector<std::set<size_t>>& groups);
  bool heal();

 private:
  Network(size_t nodes, std::string prefix) : nodes_(nodes), prefix_(std::move(prefix)) {}
  std::string hub() const { return prefix_ + "-h"; }
  std::string node_ns(size_t n) const { return prefix_ + "-n" + std::to_string(n); }

  size_t nodes_;
  std::string prefix_;
  bool made_ = false;
};

// Runs argv (argv[0] a full path), waits at most `timeout_ms`; the exit status, or -1 (could not run / timed out,
// then killed). Output goes to /dev/null unless `output` is given.
int run_command(const std::vector<std::string>& argv, int timeout_ms = 10000, std::string* output = nullptr);

// Deletes the namespaces named for campaign process `pid` ("mfc<pid>-..."); the names it deleted. For an interrupted
// campaign (interrupt.h), from any thread: it needs no Network object.
std::vector<std::string> remove_namespaces_of(pid_t pid);

}  // namespace mayfly::chaos
