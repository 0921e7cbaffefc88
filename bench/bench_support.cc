#include "bench/bench_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "client/client.h"

namespace mayfly::bench {
namespace {

std::string g_program_name = "mayfly-bench";
LocalCluster* g_cluster = nullptr;

// PIDs of the mayflyd processes this benchmark started; never any other process. Read by the signal handler.
pid_t g_node_pids[16];
volatile sig_atomic_t g_node_count = 0;

void on_signal(int signal) {
  for (sig_atomic_t i = 0; i < g_node_count; ++i) {
    if (g_node_pids[i] > 0) kill(g_node_pids[i], SIGTERM);
  }
  _exit(128 + signal);
}

}  // namespace

void set_program_name(const std::string& name) { g_program_name = name; }
const std::string& program_name() { return g_program_name; }

void set_current_cluster(LocalCluster* cluster) { g_cluster = cluster; }

void die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", g_program_name.c_str(), what.c_str());
  if (g_cluster != nullptr) g_cluster->stop();
  std::exit(1);
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::string default_mayflyd_path() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return (self.parent_path().parent_path() / "mayflyd" / "mayflyd").string();
}

namespace {
// Binds a TCP socket to 127.0.0.1:port (0: any); returns the fd and the port bound, or -1.
int bind_loopback(int port, int* bound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  // As the servers do (kj, civetweb): a port whose only sockets are in TIME_WAIT counts as free.
  const int reuse = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof reuse);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return -1;
  }
  *bound = ntohs(address.sin_port);
  return fd;
}
}  // namespace

bool port_is_free(int port) {
  int bound = 0;
  const int fd = bind_loopback(port, &bound);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::vector<int> free_ports(size_t count) {
  std::vector<int> sockets, ports;
  for (size_t i = 0; i < count; ++i) {
    int bound = 0;
    const int fd = bind_loopback(0, &bound);
    if (fd < 0) break;
    sockets.push_back(fd);
    ports.push_back(bound);
  }
  for (int fd : sockets) ::close(fd);
  if (ports.size() != count) die("could not find " + std::to_string(count) + " free ports on 127.0.0.1");
  return ports;
}

// ---- the local cluster -------------------------------------------------------------------------------------------

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {
  const std::string& mayflyd = options_.mayflyd;
  if (access(mayflyd.c_str(), X_OK) != 0) die(mayflyd + " is not built (cmake --build ... --target mayflyd)");
  const size_t nodes = options_.ports.size();
  if (nodes == 0 || nodes > 16) die("a local cluster has 1 to 16 nodes");
  std::string pattern = "/tmp/" + options_.temp_prefix + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) die("mkdtemp failed");
  dir_ = pattern;
  std::string peers;
  for (size_t i = 1; i <= nodes; ++i) {
    const std::string address = "127.0.0.1:" + std::to_string(options_.ports[i - 1]);
    peers += (i > 1 ? "," : "") + std::to_string(i) + "=" + address;
    endpoints_.push_back(address);
    if (!options_.metrics_ports.empty()) {
      metrics_endpoints_.push_back("127.0.0.1:" + std::to_string(options_.metrics_ports.at(i - 1)));
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  for (size_t i = 1; i <= nodes; ++i) {
    const std::string id = std::to_string(i), data = dir_ + "/node" + id, log = dir_ + "/node" + id + ".log";
    std::vector<std::string> args = {mayflyd, "--id", id, "--listen", endpoints_[i - 1], "--peers", peers, "--data",
                                     data};
    if (!metrics_endpoints_.empty()) {
      args.push_back("--metrics");
      args.push_back(metrics_endpoints_[i - 1]);
    }
    args.insert(args.end(), options_.extra_flags.begin(), options_.extra_flags.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
      execv(mayflyd.c_str(), argv.data());
      _exit(127);
    }
    pids_.push_back(pid);
    g_node_pids[g_node_count] = pid;
    g_node_count = g_node_count + 1;
  }
}

LocalCluster::~LocalCluster() { stop(); }

std::string LocalCluster::exited() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    int status = 0;
    if (pids_[i] > 0 && waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
      pids_[i] = -1;
      return "node " + std::to_string(i + 1) + " exited; see " + dir_ + "/node" + std::to_string(i + 1) + ".log";
    }
  }
  return "";
}

void LocalCluster::stop() {
  if (stopped_) return;
  stopped_ = true;
  for (pid_t pid : pids_) {
    if (pid > 0) kill(pid, SIGTERM);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  for (pid_t& pid : pids_) {
    while (pid > 0) {
      int status = 0;
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid || done < 0) {
        pid = -1;
      } else if (Clock::now() >= deadline) {
        std::fprintf(stderr, "%s: node pid %d did not stop after SIGTERM; sending SIGKILL\n", g_program_name.c_str(),
                     pid);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  g_node_count = 0;
  if (options_.keep_data) {
    std::fprintf(stderr, "%s: cluster data and logs kept in %s\n", g_program_name.c_str(), dir_.c_str());
  } else {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

// ---- measurements ------------------------------------------------------------------------------------------------

double process_cpu_seconds(pid_t pid, pid_t tid) {
  const std::string path = tid == 0 ? "/proc/" + std::to_string(pid) + "/stat"
                                    : "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat";
  std::ifstream file(path);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state; 14 utime, 15 stime
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double own_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

uint64_t wait_for_leader(const std::vector<std::string>& endpoints, double max_seconds, LocalCluster* cluster) {
  client::ClientOptions options;
  options.endpoints = endpoints;
  options.request_timeout_ms = 1000;
  options.max_retries_unavailable = 0;
  const auto start = Clock::now();
  std::string last;
  for (int attempt = 0; attempt < 100000 && seconds_since(start) < max_seconds; ++attempt) {
    if (cluster != nullptr) {
      const std::string exited = cluster->exited();
      if (!exited.empty()) die(exited);
    }
    client::Client status_client(options);
    client::Request request;
    request.operation = api::ClusterStatus{};
    request.endpoint = static_cast<size_t>(attempt) % endpoints.size() + 1;
    const client::Response response = status_client.execute(request);
    last = std::to_string(response.status) + " " + (response.ok() ? response.body : response.message);
    const size_t at = response.body.find("\"leader\":");
    if (response.ok() && at != std::string::npos) {
      const uint64_t leader = std::strtoull(response.body.c_str() + at + 9, nullptr, 10);
      if (leader != 0) return leader;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  die("no leader after " + std::to_string(max_seconds) + " s; last answer: " + last);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  // Two runs per setting (an A/B) must not report the better one as the median.
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

double percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

Spread spread(const std::vector<double>& values) {
  Spread result;
  if (values.empty()) return result;
  result.median = median(values);
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  result.min = *low;
  result.max = *high;
  result.count = values.size();
  return result;
}

std::string format_spread(const Spread& spread, int decimals) {
  if (spread.count == 0) return "—";
  char text[128];
  if (spread.count == 1) {
    std::snprintf(text, sizeof text, "%.*f", decimals, spread.median);
  } else {
    std::snprintf(text, sizeof text, "%.*f (%.*f–%.*f)", decimals, spread.median, decimals, spread.min, decimals,
                  spread.max);
  }
  return text;
}

std::optional<double> ratio(double numerator, double denominator) {
  if (!(denominator > 0)) return std::nullopt;
  return numerator / denominator;
}

std::optional<FeedPage> parse_feed_page(const std::string& body, std::string& error) {
  boost::system::error_code parse_error;
  const boost::json::value value = boost::json::parse(body, parse_error);
  if (parse_error) {
    error = "not JSON (" + parse_error.message() + ")";
    return std::nullopt;
  }
  const boost::json::object* page = value.if_object();
  if (page == nullptr) {
    error = "not a JSON object";
    return std::nullopt;
  }
  const boost::json::value* changes = page->if_contains("changes");
  if (changes == nullptr || !changes->is_array()) {
    error = "no \"changes\" array";
    return std::nullopt;
  }
  const boost::json::value* continuation = page->if_contains("continuation");
  if (continuation == nullptr || !continuation->is_string()) {
    error = "no string \"continuation\"";
    return std::nullopt;
  }
  const boost::json::value* caught_up = page->if_contains("caughtUp");
  if (caught_up == nullptr || !caught_up->is_bool()) {
    error = "no bool \"caughtUp\"";
    return std::nullopt;
  }
  FeedPage result;
  result.changes = changes->as_array().size();
  result.continuation = std::string(continuation->as_string());
  result.caught_up = caught_up->as_bool();
  if (result.continuation.empty() && !result.caught_up) {
    error = "an empty continuation on a page that is not caught up";
    return std::nullopt;
  }
  return result;
}

}  // namespace mayfly::bench
