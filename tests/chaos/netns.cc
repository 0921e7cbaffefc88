#include "tests/chaos/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace mayfly::chaos {
namespace {
constexpr const char* kIp = "/usr/sbin/ip";
constexpr const char* kIptables = "/usr/sbin/iptables";
}  // namespace

int run_command(const std::vector<std::string>& argv, int timeout_ms, std::string* output) {
  char path[] = "/tmp/mayfly-chaos-cmd-XXXXXX";
  const int out_fd = ::mkstemp(path);
  if (out_fd < 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 2);
  std::vector<char*> c_argv;
  for (const std::string& word : argv) c_argv.push_back(const_cast<char*>(word.c_str()));
  c_argv.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_fd);
  int status = -1;
  bool done = false;
  if (error == 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done && std::chrono::steady_clock::now() < deadline) {
      done = ::waitpid(pid, &status, WNOHANG) == pid;
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling a bounded wait
    }
    if (!done) {
      ::kill(pid, SIGKILL);  // our own child
      ::waitpid(pid, &status, 0);
    }
  }
  if (output != nullptr) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    *output = text.str();
  }
  ::unlink(path);
  if (error != 0 || !done || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

namespace {
bool run_ok(const std::vector<std::string>& argv) {
  std::string output;
  if (run_command(argv, 10000, &output) == 0) return true;
  std::string line;
  for (const std::string& word : argv) line += word + " ";
  std::cerr << "[netns] failed: " << line << "\n" << output;
  return false;
}

// The namespaces "mfc<pid>-..." that `ip netns list` shows, with the pid in their names.
std::vector<std::pair<std::string, std::string>> campaign_namespaces() {
  std::vector<std::pair<std::string, std::string>> found;
  std::string listing;
  if (run_command({kIp, "netns", "list"}, 10000, &listing) != 0) return found;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.rfind("mfc", 0) != 0) continue;
    const size_t dash = name.find('-');
    if (dash == std::string::npos) continue;
    const std::string pid = name.substr(3, dash - 3);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(name, pid);
  }
  return found;
}

// Deletes namespaces "mfc<pid>-..." whose campaign process is gone.
void remove_leftovers() {
  for (const auto& [name, pid] : campaign_namespaces()) {
    struct stat info{};
    if (::stat(("/proc/" + pid).c_str(), &info) == 0) continue;  // its campaign still runs
    std::cerr << "[netns] removing leftover namespace " << name << "\n";
    run_command({kIp, "netns", "del", name});
  }
}
}  // namespace

std::unique_ptr<Network> Network::create(size_t nodes, std::string* why) {
  if (::geteuid() != 0) {
    *why = "not root: network namespaces and iptables need root";
    return nullptr;
  }
  if (::access(kIp, X_OK) != 0 || ::access(kIptables, X_OK) != 0) {
    *why = std::string("needs ") + kIp + " and " + kIptables + " (Debian: iproute2, iptables)";
    return nullptr;
  }
  remove_leftovers();
  std::unique_ptr<Network> network(new Network(nodes, "mfc" + std::to_string(::getpid())));
  network->made_ = true;
  const std::string hub = network->hub();
  bool ok = run_ok({kIp, "netns", "add", hub}) && run_ok({kIp, "-n", hub, "link", "set", "lo", "up"}) &&
            run_ok({kIp, "-n", hub, "link", "add", "br0", "type", "bridge"}) &&
            run_ok({kIp, "-n", hub, "addr", "add", "10.77.0.254/24", "dev", "br0"}) &&
            run_ok({kIp, "-n", hub, "link", "set", "br0", "up"});
  for (size_t n = 1; ok && n <= nodes; ++n) {
    const std::string ns = network->node_ns(n);
    const std::string veth = "vn" + std::to_string(n);
    ok = run_ok({kIp, "netns", "add", ns}) && run_ok({kIp, "-n", ns, "link", "set", "lo", "up"}) &&
         run_ok({kIp, "-n", hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns}) &&
         run_ok({kIp, "-n", hub, "link", "set", veth, "master", "br0"}) &&
         run_ok({kIp, "-n", hub, "link", "set", veth, "up"}) &&
         run_ok({kIp, "-n", ns, "addr", "add", network->address(n) + "/24", "dev", "eth0"}) &&
         run_ok({kIp, "-n", ns, "link", "set", "eth0", "up"});
  }
  if (!ok) {
    *why = "could not set up the namespaces (see the lines above)";
    return nullptr;  // the destructor removes what was made
  }
  return network;
}

Network::~Network() {
  if (!made_) return;
  for (size_t n = 1; n <= nodes_; ++n) run_command({kIp, "netns", "del", node_ns(n)});
  run_command({kIp, "netns", "del", hub()});
}

std::vector<std::string> remove_namespaces_of(pid_t pid) {
  std::vector<std::string> removed;
  for (const auto& [name, owner] : campaign_namespaces()) {
    if (owner == std::to_string(pid) && run_command({kIp, "netns", "del", name}) == 0) removed.push_back(name);
  }
  return removed;
}

std::vector<std::string> Network::launch_prefix(size_t n) const { return {kIp, "netns", "exec", node_ns(n)}; }

bool Network::enter_hub(std::string* why) {
  const std::string path = "/run/netns/" + hub();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    *why = "setns " + path + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

bool Network::partition(const std::vector<std::set<size_t>>& groups) {
  if (!heal()) return false;
  auto group_of = [&groups](size_t n) {
    for (size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].count(n)) return g;
    }
    return groups.size();
  };
  bool ok = true;
  for (size_t n = 1; n <= nodes_; ++n) {
    for (size_t m = 1; m <= nodes_; ++m) {
      if (m == n || group_of(m) == group_of(n)) continue;
      const std::vector<std::string> exec = {kIp, "netns", "exec", node_ns(n), kIptables, "-w", "5"};
      std::vector<std::string> in = exec, out = exec;
      in.insert(in.end(), {"-A", "INPUT", "-s", address(m), "-j", "DROP"});
      out.insert(out.end(), {"-A", "OUTPUT", "-d", address(m), "-j", "DROP"});
      ok = run_ok(in) && run_ok(out) && ok;
    }
  }
  return ok;
}

bool Network::heal() {
  bool ok = true;
  for (size_t n = 1; n <= nodes_; ++n) {
    ok = run_ok({kIp, "netns", "exec", node_ns(n), kIptables, "-w", "5", "-F", "INPUT"}) &&
         run_ok({kIp, "netns", "exec", node_ns(n), kIptables, "-w", "5", "-F", "OUTPUT"}) && ok;
  }
  return ok;
}

}  // namespace mayfly::chaos
