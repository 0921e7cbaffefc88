#include "tests/integration/cluster_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <link.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string_view>

#include "common/peer_preamble.h"

#ifndef MAYFLY_IT_MAYFLYD
#error "MAYFLY_IT_MAYFLYD (path of mayflyd) must be defined"
#endif
#ifndef MAYFLY_IT_CLI
#error "MAYFLY_IT_CLI (path of the mayfly CLI) must be defined"
#endif

extern char** environ;

namespace mayfly::it {
namespace fs = std::filesystem;

int64_t wall_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool wait_until(const std::function<bool()>& condition, milliseconds timeout, milliseconds poll) {
  const auto deadline = Clock::now() + testing_env::scaled(timeout);
  for (int round = 0; round < 1000000; ++round) {
    if (condition()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);  // polling interval of a bounded wait, not synchronisation
  }
  return false;
}

pid_t spawn_with(const std::vector<std::string>& argv, const posix_spawn_file_actions_t* actions) {
  if (argv.empty()) return -1;
  std::vector<std::string> args = argv;
  std::vector<char*> c_argv;
  for (std::string& arg : args) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, c_argv[0], actions, nullptr, c_argv.data(), environ);
  return spawned == 0 ? pid : -1;
}

pid_t spawn_to_files(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const pid_t pid = spawn_with(argv, &actions);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

uint64_t test_seed() {
  if (const char* text = std::getenv("MAYFLY_IT_SEED"); text != nullptr && *text != '\0') {
    return std::strtoull(text, nullptr, 10);
  }
  return static_cast<uint64_t>(wall_micros());
}

int connect_raft_transport(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  if (::inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &address.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::send(fd, kPeerPreamble.data(), kPeerPreamble.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(kPeerPreamble.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string hello(proto::Mayfly::Client& main, kj::WaitScope& wait, const std::string& client_nonce) {
  auto request = main.helloRequest();
  request.setClientNonce(
      capnp::Data::Reader(reinterpret_cast<const kj::byte*>(client_nonce.data()), client_nonce.size()));
  auto greeted = request.send().wait(wait);
  const capnp::Data::Reader nonce = greeted.getServerNonce();
  return std::string(reinterpret_cast<const char*>(nonce.begin()), nonce.size());
}

boost::json::value parse_json(const std::string& text) {
  boost::system::error_code error;
  boost::json::value value = boost::json::parse(text, error);
  if (error) return nullptr;
  return value;
}

// ---- CliResult ------------------------------------------------------------------------------------------------------

int CliResult::status() const {
  if (!json.is_object()) return -1;
  const boost::json::value* status = json.as_object().if_contains("status");
  return status != nullptr && status->is_int64() ? static_cast<int>(status->as_int64()) : -1;
}

namespace {
std::string string_member(const boost::json::value& json, const char* key) {
  if (!json.is_object()) return {};
  const boost::json::value* member = json.as_object().if_contains(key);
  return member != nullptr && member->is_string() ? std::string(member->as_string()) : std::string();
}
}  // namespace

std::string CliResult::message() const { return string_member(json, "message"); }
std::string CliResult::session_token() const { return string_member(json, "sessionToken"); }
std::string CliResult::etag() const { return string_member(json, "etag"); }

const boost::json::value* CliResult::body() const {
  if (!json.is_object()) return nullptr;
  return json.as_object().if_contains("body");
}

std::string CliResult::describe() const {
  return "exit " + std::to_string(exit_code) + ", stdout: " + out + (err.empty() ? "" : ", stderr: " + err);
}

// ---- Cluster --------------------------------------------------------------------------------------------------------

namespace {

// N distinct free ports: bind them all to 127.0.0.1:0 at once (so they differ), read them, close them.
std::vector<std::string> free_ports(size_t count) {
  std::vector<int> sockets;
  std::vector<std::string> ports;
  for (size_t i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof(address);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ::close(fd);
      break;
    }
    sockets.push_back(fd);
    ports.push_back("127.0.0.1:" + std::to_string(ntohs(address.sin_port)));
  }
  for (int fd : sockets) ::close(fd);
  return ports;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The libfaketime preload library (Debian: libfaketime). We preload it directly instead of running the `faketime`
// wrapper, because the wrapper forks and waits: its PID is not mayflyd's, and signals sent to it do not reach the node.
std::string faketime_library() {
  for (const char* candidate : {"/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                                "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
                                "/usr/lib/faketime/libfaketimeMT.so.1"}) {
    if (fs::exists(candidate)) return candidate;
  }
  return {};
}

// In a sanitizer build (make sanitize) mayflyd links the ASan runtime dynamically, and ASan refuses to start unless
// its runtime comes first in the initial library list ("ASan runtime does not come first"): a node started with
// LD_PRELOAD=libfaketime (or a test's fault library) would die at once. The harness is built with the same flags as
// mayflyd, so it finds the runtime in its own process and the node's LD_PRELOAD names it first: ASan's interceptors
// (clock_gettime among them) then call on into libfaketime's through RTLD_NEXT, so the clock is still faked.
// Empty in a build without ASan.
std::string sanitizer_runtime_library() {
#if defined(__SANITIZE_ADDRESS__)
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string_view name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (name.find("/libasan.so") == std::string_view::npos) return 0;
        *static_cast<std::string*>(data) = std::string(name);
        return 1;
      },
      &found);
  return found;
#else
  return {};
#endif
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Spawns argv with stdin/stdout/stderr redirected; returns the pid or -1.
pid_t spawn_process(std::vector<std::string> argv, const std::vector<std::string>& extra_env,
                    const std::string& stdin_path, const std::string& stdout_path, const std::string& stderr_path,
                    bool append) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const int flags = O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC);
  posix_spawn_file_actions_addopen(&actions, 0, stdin_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), flags, 0644);
  if (stderr_path == stdout_path) {
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  } else {
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), flags, 0644);
  }
  // The child's environment: ours (minus the variables we set), plus extra_env.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool overridden = entry.rfind("MAYFLY_ENDPOINTS=", 0) == 0;
    for (const std::string& extra : extra_env) {
      if (entry.compare(0, extra.find('=') + 1, extra, 0, extra.find('=') + 1) == 0) overridden = true;
    }
    if (!overridden) env.push_back(entry);
  }
  for (const std::string& extra : extra_env) env.push_back(extra);
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(error);
    return -1;
  }
  return pid;
}

}  // namespace

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)), nodes_(options_.nodes) {
  std::string pattern = (fs::temp_directory_path() / ("mayfly-it-" + options_.name + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << pattern << ": " << std::strerror(errno);
  }
  dir_ = pattern;
  pick_ports();
  if (options_.auth) {
    // Random keys (never printed); files only the owner may read, as the node requires.
    std::random_device random;
    auto make_key = [&random] {
      static const char* digits = "0123456789abcdef";
      std::string key;
      for (int i = 0; i < 40; ++i) key.push_back(digits[random() % 16]);
      return key;
    };
    admin_key_ = make_key();
    readwrite_key_ = make_key();
    readonly_key_ = make_key();
    auto write_private = [](const std::string& path, const std::string& text) {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
      fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
    };
    write_private(keys_file(), "admin " + admin_key_ + " it-admin\nreadwrite " + readwrite_key_ +
                                   " it-app\nreadonly " + readonly_key_ + " it-dashboard\n");
    write_private(secret_file(), make_key() + "\n");
    write_private(admin_key_file(), admin_key_ + "\n");
  }
  if (!options_.metrics_auth.empty()) {
    const std::string path = dir_ + "/metrics-auth";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << options_.metrics_auth << "\n";
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  }
}

void Cluster::pick_ports() {
  if (!options_.addresses.empty()) {
    ports_ = options_.addresses;
    ports_.resize(options_.nodes);
    metrics_ports_ = free_ports(options_.metrics ? options_.nodes : 0);
    return;
  }
  // All at once, so they differ.
  std::vector<std::string> ports = free_ports(options_.nodes * (options_.metrics ? 2 : 1));
  metrics_ports_.assign(ports.begin() + static_cast<std::ptrdiff_t>(std::min(ports.size(), options_.nodes)),
                        ports.end());
  ports.resize(std::min(ports.size(), options_.nodes));
  ports_ = std::move(ports);
}

std::vector<std::string> sanitizer_reports(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("ERROR: AddressSanitizer") != std::string::npos ||
        line.find("ERROR: LeakSanitizer") != std::string::npos || line.find(": runtime error: ") != std::string::npos) {
      out.push_back(line);
    }
  }
  return out;
}

Cluster::~Cluster() {
  admin_.reset();
  for (size_t n = 1; n <= nodes_.size(); ++n) {
    if (nodes_[n - 1].pid <= 0) continue;
    if (testing_env::kSanitized) {
      // SIGTERM, so that LeakSanitizer checks the node at its exit (a SIGKILL ends it unchecked); SIGCONT first in
      // case a test left it stopped. Its exit status is not judged (a node under a fault shim may fail to stop
      // cleanly), its log is, below. Bounded: killed when it does not exit.
      ::kill(nodes_[n - 1].pid, SIGCONT);
      ::kill(nodes_[n - 1].pid, SIGTERM);
      int status = 0;
      if (reap(n, milliseconds(15000), &status)) continue;
    }
    kill_node(n);
  }
  // Whatever a sanitizer reported in any node's log, during the test or at a node's exit, fails the test (a node
  // that aborted on an ASan error in a test that tolerates node deaths would otherwise go unnoticed).
  for (size_t n = 1; n <= nodes_.size(); ++n) {
    for (const std::string& report : sanitizer_reports(log_text(n))) {
      ADD_FAILURE() << "node " << n << " (" << log_path(n) << "): " << report;
    }
  }
  if (keep_ || ::testing::Test::HasFailure()) {
    dump_logs();
    std::cerr << "[cluster] kept " << dir_ << " for diagnosis\n";
  } else {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

std::string Cluster::endpoints_csv() const {
  std::string out;
  for (const std::string& port : ports_) out += (out.empty() ? "" : ",") + port;
  return out;
}

std::string Cluster::log_path(size_t n) const { return dir_ + "/node" + std::to_string(n) + ".log"; }
std::string Cluster::data_dir(size_t n) const { return dir_ + "/node" + std::to_string(n); }
std::string Cluster::log_text(size_t n) const { return read_file(log_path(n)); }
pid_t Cluster::pid(size_t n) const { return nodes_.at(n - 1).pid; }

std::string default_mayflyd() {
  // $MAYFLY_IT_MAYFLYD_OVERRIDE runs the clusters on another build's mayflyd (a Debug one, whose thread-ownership
  // checks are live: docs/tests.md); otherwise this build's.
  if (const char* path = std::getenv("MAYFLY_IT_MAYFLYD_OVERRIDE"); path != nullptr && *path != '\0') return path;
  return MAYFLY_IT_MAYFLYD;
}

std::vector<std::string> Cluster::node_argv(size_t n) const {
  std::string peers;
  for (size_t i = 1; i <= ports_.size(); ++i) {
    peers += (peers.empty() ? "" : ",") + std::to_string(i) + "=" + ports_[i - 1];
  }
  std::vector<std::string> argv;
  if (auto prefix = options_.launch_prefix.find(n); prefix != options_.launch_prefix.end()) argv = prefix->second;
  argv.insert(argv.end(), {options_.mayflyd.empty() ? default_mayflyd() : options_.mayflyd,
                                   "--id",
                                   std::to_string(n),
                                   "--listen",
                                   ports_.at(n - 1),
                                   "--peers",
                                   peers,
                                   "--data",
                                   data_dir(n),
                                   "--tick-ms",
                                   std::to_string(options_.tick_ms),
                                   "--election-timeout-ticks",
                                   std::to_string(options_.election_timeout_ticks),
                                   "--heartbeat-ticks",
                                   std::to_string(options_.heartbeat_ticks)});
  if (options_.auth) {
    argv.insert(argv.end(), {"--keys-file", keys_file(), "--cluster-secret-file", secret_file()});
  }
  if (options_.metrics && !options_.metrics_auth.empty()) {
    argv.insert(argv.end(), {"--metrics-auth-file", dir_ + "/metrics-auth"});
  }
  if (options_.metrics) {
    argv.push_back("--metrics");
    argv.push_back(metrics_ports_.at(n - 1));
  }
  argv.insert(argv.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  if (auto flags = node_flags_.find(n); flags != node_flags_.end()) {
    argv.insert(argv.end(), flags->second.begin(), flags->second.end());
  }
  // For diagnosis: MAYFLY_IT_NODE_FLAGS="--log-level debug" is appended to every node's command line.
  if (const char* extra = std::getenv("MAYFLY_IT_NODE_FLAGS"); extra != nullptr) {
    std::istringstream words(extra);
    for (std::string word; words >> word;) argv.push_back(word);
  }
  return argv;
}

bool Cluster::spawn(size_t n) {
  Node& node = nodes_.at(n - 1);
  if (node.pid > 0) {
    ADD_FAILURE() << "node " << n << " is already running (pid " << node.pid << ")";
    return false;
  }
  std::vector<std::string> env;
  if (auto offset = options_.clock_offset.find(n); offset != options_.clock_offset.end()) {
    const std::string library = faketime_library();
    if (library.empty()) {
      ADD_FAILURE() << "libfaketime is not installed (Debian package faketime)";
      return false;
    }
    // mayflyd runs on jemalloc, whose start reads the clock under a lock that libfaketime's first call (dlsym, which
    // callocs) would wait for: the shim, first, sends allocations to glibc's malloc (tests/integration/
    // glibc_malloc_shim.cc). Not under ASan, whose runtime replaces malloc itself and goes first (below).
    const std::string preload =
        sanitizer_runtime_library().empty() ? std::string(MAYFLY_IT_GLIBC_MALLOC_SHIM) + ":" + library : library;
    env = {"LD_PRELOAD=" + preload, "FAKETIME=" + offset->second, "FAKETIME_DONT_FAKE_MONOTONIC=1"};
  }
  for (const std::string& extra : options_.extra_env) {
    // Two preloaded libraries (libfaketime and a test's): one LD_PRELOAD naming both.
    auto preload = std::find_if(env.begin(), env.end(), [](const std::string& e) { return e.rfind("LD_PRELOAD=", 0) == 0; });
    if (extra.rfind("LD_PRELOAD=", 0) == 0 && preload != env.end()) {
      *preload += ":" + extra.substr(std::strlen("LD_PRELOAD="));
    } else {
      env.push_back(extra);
    }
  }
  // Under ASan its runtime must be preloaded first of all (see sanitizer_runtime_library).
  if (auto preload = std::find_if(env.begin(), env.end(), [](const std::string& e) { return e.rfind("LD_PRELOAD=", 0) == 0; });
      preload != env.end()) {
    if (const std::string runtime = sanitizer_runtime_library(); !runtime.empty()) {
      *preload = "LD_PRELOAD=" + runtime + ":" + preload->substr(std::strlen("LD_PRELOAD="));
      // ASan's allocator reads the monotonic clock (for its release-to-OS interval) while it holds a region lock;
      // with libfaketime preloaded that clock_gettime is faketime's, whose first call looks its symbols up with
      // dlsym, which mallocs: the node deadlocked at start (seen in the chaos campaign's clock faults). Without
      // the interval ASan does not read the clock there.
      const char* asan_options = std::getenv("ASAN_OPTIONS");
      env.push_back("ASAN_OPTIONS=" + std::string(asan_options != nullptr ? asan_options : "") +
                    (asan_options != nullptr && *asan_options != '\0' ? ":" : "") +
                    "allocator_release_to_os_interval_ms=-1");
    }
  }
  {
    std::ofstream log(log_path(n), std::ios::app);
    log << "===== [harness] starting node " << n << ":";
    for (const std::string& arg : node_argv(n)) log << " " << arg;
    for (const std::string& e : env) log << " (" << e << ")";
    log << "\n";
  }
  node.exit_status.reset();
  node.pid = spawn_process(node_argv(n), env, "/dev/null", log_path(n), log_path(n), true);
  return node.pid > 0;
}

bool Cluster::reap(size_t n, milliseconds timeout, int* status) {
  Node& node = nodes_.at(n - 1);
  if (node.pid <= 0) return true;
  bool reaped = false;
  wait_until(
      [&] {
        const pid_t result = ::waitpid(node.pid, status, WNOHANG);
        if (result == node.pid || (result < 0 && errno == ECHILD)) reaped = true;
        return reaped;
      },
      timeout, milliseconds(5));
  if (reaped) node.pid = -1;
  return reaped;
}

std::optional<int> Cluster::exit_status(size_t n) {
  if (running(n)) return std::nullopt;
  return nodes_.at(n - 1).exit_status;
}

bool Cluster::running(size_t n) {
  Node& node = nodes_.at(n - 1);
  if (node.pid <= 0) return false;
  int status = 0;
  const pid_t result = ::waitpid(node.pid, &status, WNOHANG);
  if (result == node.pid) {
    node.exit_status = status;
    std::cerr << "[cluster] node " << n << " (pid " << node.pid << ") exited on its own: "
              << (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                    : "signal " + std::to_string(WTERMSIG(status)))
              << "\n";
    node.pid = -1;
    return false;
  }
  return true;
}

bool Cluster::wait_listening(size_t n, milliseconds timeout) {
  // mayflyd logs "node N listening on HOST:PORT" once its listener is bound; a bind failure makes it exit.
  const std::string marker = "node " + std::to_string(n) + " listening on " + endpoint(n);
  size_t starts = 0;
  return wait_until(
      [&] {
        const std::string text = log_text(n);
        // Only the latest run's lines count.
        const size_t last_start = text.rfind("===== [harness] starting node");
        if (last_start != std::string::npos) starts = last_start;
        return text.find(marker, starts) != std::string::npos || !running(n);
      },
      timeout) &&
         running(n);
}

bool Cluster::start() {
  for (int attempt = 1; attempt <= 5; ++attempt) {
    bool ok = true;
    for (size_t n = 1; n <= nodes_.size() && ok; ++n) ok = spawn(n);
    for (size_t n = 1; n <= nodes_.size() && ok; ++n) ok = wait_listening(n, milliseconds(10000));
    if (ok) return true;
    std::cerr << "[cluster] start attempt " << attempt << " failed (a port may have been taken); retrying\n";
    dump_logs(20);
    for (size_t n = 1; n <= nodes_.size(); ++n) {
      if (nodes_[n - 1].pid > 0) kill_node(n);
      std::error_code ignored;
      fs::remove_all(data_dir(n), ignored);
      fs::remove(log_path(n), ignored);
    }
    pick_ports();
    admin_.reset();
  }
  ADD_FAILURE() << "could not start the cluster";
  return false;
}

bool Cluster::start_node(size_t n) {
  if (!spawn(n)) return false;
  if (!wait_listening(n, milliseconds(10000))) {
    ADD_FAILURE() << "node " << n << " did not start listening on " << endpoint(n);
    return false;
  }
  return true;
}

bool Cluster::stop_node(size_t n) {
  Node& node = nodes_.at(n - 1);
  if (node.pid <= 0) {
    ADD_FAILURE() << "stop_node(" << n << "): not running";
    return false;
  }
  const pid_t pid = node.pid;
  ::kill(pid, SIGTERM);
  int status = 0;
  if (!reap(n, milliseconds(15000), &status)) {
    ADD_FAILURE() << "node " << n << " (pid " << pid << ") did not exit within 15 s of SIGTERM; killing it";
    kill_node(n);
    return false;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << "node " << n << " did not exit cleanly after SIGTERM: "
                  << (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                        : "signal " + std::to_string(WTERMSIG(status)));
    return false;
  }
  return true;
}

void Cluster::kill_node(size_t n) {
  Node& node = nodes_.at(n - 1);
  if (node.pid <= 0) return;
  ::kill(node.pid, SIGKILL);
  int status = 0;
  if (!reap(n, milliseconds(10000), &status)) ADD_FAILURE() << "node " << n << " not reaped after SIGKILL";
}

void Cluster::wipe_node(size_t n) {
  if (nodes_.at(n - 1).pid > 0) {
    ADD_FAILURE() << "wipe_node(" << n << ") while it runs";
    return;
  }
  std::error_code error;
  fs::remove_all(data_dir(n), error);
  if (error) ADD_FAILURE() << "wipe " << data_dir(n) << ": " << error.message();
}

client::ClientOptions Cluster::client_options() const {
  client::ClientOptions options;
  options.endpoints = ports_;
  options.request_timeout_ms = 10000;
  options.key = admin_key_;
  options.tls_ca = tls_ca_;
  return options;
}

client::Client& Cluster::admin() {
  if (admin_ != nullptr && admin_thread_ != std::this_thread::get_id()) {
    ADD_FAILURE() << "Cluster status queries must come from the thread that made the first one";
  }
  if (admin_ == nullptr) {
    client::ClientOptions options = client_options();
    options.request_timeout_ms = 3000;
    options.max_retries_unavailable = 0;  // a status is asked of one node: no retry elsewhere
    options.max_retries_throttled = 0;
    admin_ = std::make_unique<client::Client>(options);
    admin_thread_ = std::this_thread::get_id();
  }
  return *admin_;
}

std::optional<NodeStatus> Cluster::status(size_t n) {
  if (nodes_.at(n - 1).pid <= 0) return std::nullopt;
  client::Request request;
  request.operation = api::ClusterStatus{};
  request.endpoint = n;
  client::Response response = admin().execute(request);
  if (response.substatus == client::kSubstatusReadConnectionLost) {
    response = admin().execute(request);  // the node closed the connection (restarted, or --idle-timeout-ms)
  }
  if (response.status != 200 || response.served_by != n) return std::nullopt;
  const boost::json::value body = parse_json(response.body);
  if (!body.is_object()) return std::nullopt;
  const boost::json::value* nodes = body.as_object().if_contains("nodes");
  if (nodes == nullptr || !nodes->is_array()) return std::nullopt;
  for (const boost::json::value& entry : nodes->as_array()) {
    if (!entry.is_object()) continue;
    const boost::json::object& object = entry.as_object();
    auto number = [&](const char* key) -> int64_t {
      const boost::json::value* v = object.if_contains(key);
      return v != nullptr && v->is_int64() ? v->as_int64() : (v != nullptr && v->is_uint64() ? static_cast<int64_t>(v->as_uint64()) : -1);
    };
    if (number("id") != static_cast<int64_t>(n)) continue;
    NodeStatus status;
    status.id = n;
    status.role = string_member(entry, "role");
    status.term = static_cast<uint64_t>(number("term"));
    status.commit = static_cast<uint64_t>(number("commit"));
    status.applied = static_cast<uint64_t>(number("applied"));
    status.applied_time_micros = number("appliedTime");
    status.leader = static_cast<uint64_t>(number("leader"));
    return status;
  }
  return std::nullopt;
}

uint64_t Cluster::wait_for_leader(milliseconds timeout) {
  uint64_t agreed = 0;
  wait_until(
      [&] {
        agreed = 0;
        uint64_t leader = 0;
        uint64_t leader_term = 0;
        std::vector<NodeStatus> seen;
        for (size_t n = 1; n <= nodes_.size(); ++n) {
          if (!running(n)) continue;
          std::optional<NodeStatus> s = status(n);
          if (!s) return false;  // a running node that does not answer yet: wait
          seen.push_back(*s);
          if (s->role == "leader" && s->term >= leader_term) {
            leader = s->id;
            leader_term = s->term;
          }
        }
        if (leader == 0) return false;
        for (const NodeStatus& s : seen) {
          if (s.leader != leader) return false;
        }
        agreed = leader;
        return true;
      },
      timeout, milliseconds(20));
  return agreed;
}

bool Cluster::wait_applied(size_t n, uint64_t index, milliseconds timeout) {
  uint64_t last = 0;
  const bool ok = wait_until(
      [&] {
        std::optional<NodeStatus> s = status(n);
        if (s) last = s->applied;
        return s && s->applied >= index;
      },
      timeout, milliseconds(20));
  if (!ok) ADD_FAILURE() << "node " << n << " did not apply index " << index << " in time (last seen " << last << ")";
  return ok;
}

bool Cluster::transfer_leader(uint64_t target, milliseconds timeout) {
  const auto deadline = Clock::now() + testing_env::scaled(timeout);
  for (int attempt = 0; attempt < 50 && Clock::now() < deadline; ++attempt) {
    const uint64_t leader = wait_for_leader(milliseconds(5000));
    if (leader == target) return true;
    if (leader == 0) continue;
    client::Request request;
    request.operation = api::TransferLeader{.id = target};
    request.endpoint = leader;
    admin().execute(request);
    if (wait_until([&] { return wait_for_leader(milliseconds(500)) == target; }, milliseconds(3000),
                   milliseconds(20))) {
      return true;
    }
  }
  ADD_FAILURE() << "could not make node " << target << " the leader";
  return false;
}

CliResult Cluster::cli(const std::vector<std::string>& args, std::optional<size_t> node,
                       const std::string& stdin_text) {
  const int run = ++cli_runs_;
  const std::string base = dir_ + "/cli" + std::to_string(run);
  const std::string in_path = write_file("cli" + std::to_string(run) + ".in", stdin_text);
  std::vector<std::string> argv = {MAYFLY_IT_CLI};
  if (std::find(args.begin(), args.end(), "--endpoints") == args.end()) {
    argv.insert(argv.end(), {"--endpoints", node ? endpoint(*node) : endpoints_csv()});
  }
  if (options_.auth && std::find(args.begin(), args.end(), "--key") == args.end() &&
      std::find(args.begin(), args.end(), "--key-file") == args.end()) {
    argv.insert(argv.end(), {"--key-file", admin_key_file()});
  }
  if (!tls_ca_.empty() && std::find(args.begin(), args.end(), "--tls-ca") == args.end()) {
    argv.insert(argv.end(), {"--tls-ca", tls_ca_});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  CliResult result;
  const pid_t pid = spawn_process(argv, {}, in_path, base + ".out", base + ".err", false);
  if (pid <= 0) return result;
  int status = 0;
  bool done = false;
  wait_until(
      [&] {
        done = ::waitpid(pid, &status, WNOHANG) == pid;
        return done;
      },
      milliseconds(60000), milliseconds(2));
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "the CLI did not finish within 60 s";
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(base + ".out");
  result.err = read_file(base + ".err");
  result.json = parse_json(result.out);
  for (const std::string& report : sanitizer_reports(result.err)) {
    ADD_FAILURE() << "the CLI: " << report << "\n" << result.err;
  }
  if (std::getenv("MAYFLY_IT_VERBOSE") != nullptr) {
    std::cerr << "[cli]";
    for (size_t i = 1; i < argv.size(); ++i) std::cerr << " " << (argv[i].size() > 200 ? argv[i].substr(0, 200) + "..." : argv[i]);
    std::cerr << "\n  -> " << result.describe().substr(0, 600) << "\n";
  }
  std::error_code ignored;
  fs::remove(base + ".out", ignored);
  fs::remove(base + ".err", ignored);
  fs::remove(in_path, ignored);
  return result;
}

std::string Cluster::write_file(const std::string& name, const std::string& text) const {
  const std::string path = dir_ + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return path;
}

void Cluster::dump_logs(size_t tail_lines) const {
  for (size_t n = 1; n <= nodes_.size(); ++n) {
    const std::string text = log_text(n);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    const size_t from = lines.size() > tail_lines ? lines.size() - tail_lines : 0;
    std::cerr << "----- " << log_path(n) << " (last " << (lines.size() - from) << " of " << lines.size()
              << " lines) -----\n";
    for (size_t i = from; i < lines.size(); ++i) std::cerr << lines[i] << "\n";
  }
}

}  // namespace mayfly::it

namespace mayfly::it {

// ---- metrics ------------------------------------------------------------------------------------------------------

std::optional<Scrape> Cluster::scrape(size_t n) const {
  return Scrape::fetch(metrics_endpoint(n), options_.metrics_auth);
}

// ---- request builders -----------------------------------------------------------------------------------------------

client::Request db_req(client::Op op, const std::string& db) {
  client::Request r;
  r.operation = api::make_operation(op);
  r.database = db;
  return r;
}
client::Request container_req(client::Op op, const std::string& db, const std::string& c) {
  client::Request r = db_req(op, db);
  r.container = c;
  return r;
}
client::Request create_container(const std::string& db, const std::string& c, const std::string& pk_path,
                                 std::optional<std::string> default_ttl, bool indexing_none) {
  client::Request r = container_req(client::Op::kCreateContainer, db, c);
  client::ContainerSettings& settings = test::settings_of(r);
  settings.partition_key_path = pk_path;
  if (default_ttl) {
    settings.default_ttl = client::ContainerSettings::DefaultTtl::kSet;
    settings.default_ttl_json = *default_ttl;
  }
  if (indexing_none) settings.indexing = client::ContainerSettings::Indexing::kNone;
  return r;
}
client::Request item_write(client::Op op, const std::string& db, const std::string& c, const std::string& json,
                           const std::string& if_match) {
  client::Request r = container_req(op, db, c);
  test::body_of(r) = json;
  r.options.if_match = if_match;
  return r;
}
client::Request item_key(client::Op op, const std::string& db, const std::string& c, const std::string& pk,
                         const std::string& id) {
  client::Request r = container_req(op, db, c);
  test::set_partition_key(r, "\"" + pk + "\"");
  test::id_of(r) = id;
  return r;
}

}  // namespace mayfly::it
