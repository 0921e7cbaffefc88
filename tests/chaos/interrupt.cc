#include "tests/chaos/interrupt.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/chaos/disk.h"
#include "tests/chaos/netns.h"

namespace mayfly::chaos {
namespace {

int signal_pipe[2] = {-1, -1};

// Debian 12's <sys/pidfd.h> declares these without extern "C"; the system calls themselves (Linux >= 5.3).
int open_pidfd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
int pidfd_kill(int fd) { return static_cast<int>(::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0)); }

extern "C" void on_signal(int signo) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  [[maybe_unused]] const ssize_t n = ::write(signal_pipe[1], &byte, 1);  // non-blocking; a full pipe drops it
  errno = saved;
}

std::mutex dirs_mutex;
std::set<std::string>& run_dirs() {
  static std::set<std::string> dirs;
  return dirs;
}

// The parent PID and command name in /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may hold spaces and
// parentheses, so it ends at the last ')'). False if the process is gone.
bool read_stat(pid_t pid, pid_t* ppid, std::string* comm) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  *comm = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 1));
  std::string state;
  long parent = 0;
  if (!(rest >> state >> parent)) return false;
  *ppid = static_cast<pid_t>(parent);
  return true;
}

std::vector<pid_t> children_of(pid_t self) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  while (const dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t ppid = 0;
    std::string comm;
    if (read_stat(static_cast<pid_t>(std::stol(name)), &ppid, &comm) && ppid == self) {
      children.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  ::closedir(proc);
  return children;
}

struct Killed {
  pid_t pid;
  std::string comm;
  int pidfd;
};

// SIGKILLs this process's children but those in `killed` already; appends the ones it signalled (each with a pidfd).
void kill_children(pid_t self, std::vector<Killed>& killed) {
  for (pid_t pid : children_of(self)) {
    if (std::any_of(killed.begin(), killed.end(), [pid](const Killed& k) { return k.pid == pid; })) continue;
    const int fd = open_pidfd(pid);
    if (fd < 0) continue;  // gone (reaped) meanwhile
    pid_t ppid = 0;
    std::string comm;
    // The pidfd names one process for good; it is our child if its parent is us now (a reaped and reused PID's is not).
    if (!read_stat(pid, &ppid, &comm) || ppid != self || pidfd_kill(fd) != 0) {
      ::close(fd);
      continue;
    }
    killed.push_back({pid, comm, fd});
  }
}

void cleanup_and_exit(int signo) {
  const pid_t self = ::getpid();
  const char* name = signo == SIGINT ? "SIGINT" : "SIGTERM";
  std::fprintf(stderr, "\n[chaos] %s: stopping the campaign and cleaning up\n", name);
  // 1. No node starts from here on (the lock is never released: this process ends below).
  if (!node_start_gate().try_lock_for(std::chrono::seconds(15))) {
    std::fprintf(stderr, "[chaos] a node start did not finish within 15 s; cleaning up anyway\n");
  }
  // 2. Every child, by pidfd; twice, for a command spawned while the first pass ran.
  std::vector<Killed> killed;
  kill_children(self, killed);
  kill_children(self, killed);
  for (Killed& k : killed) {
    pollfd exited{k.pidfd, POLLIN, 0};
    const bool dead = ::poll(&exited, 1, 5000) == 1;  // readable once the process has exited
    std::fprintf(stderr, "[chaos] killed pid %d (%s)%s\n", static_cast<int>(k.pid), k.comm.c_str(),
                 dead ? "" : " - still not dead after 5 s");
    ::close(k.pidfd);
  }
  // 3. The tmpfs (inside a cluster directory, so first), the namespaces, the cluster directories.
  for (const std::string& target : unmount_disks_of(self)) std::fprintf(stderr, "[chaos] unmounted %s\n", target.c_str());
  for (const std::string& ns : remove_namespaces_of(self)) std::fprintf(stderr, "[chaos] deleted namespace %s\n", ns.c_str());
  {
    std::lock_guard<std::mutex> lock(dirs_mutex);
    for (const std::string& dir : run_dirs()) {
      std::error_code error;
      std::filesystem::remove_all(dir, error);
      std::fprintf(stderr, "[chaos] removed %s%s\n", dir.c_str(), error ? (" (" + error.message() + ")").c_str() : "");
    }
  }
  std::fprintf(stderr, "[chaos] interrupted by %s; exit status %d\n", name, 128 + signo);
  std::fflush(stderr);
  ::_exit(128 + signo);
}

}  // namespace

std::timed_mutex& node_start_gate() {
  static std::timed_mutex gate;
  return gate;
}

void note_run_dir(const std::string& path) {
  std::lock_guard<std::mutex> lock(dirs_mutex);
  run_dirs().insert(path);
}

void forget_run_dir(const std::string& path) {
  std::lock_guard<std::mutex> lock(dirs_mutex);
  run_dirs().erase(path);
}

void install_interrupt_cleanup() {
  if (::pipe2(signal_pipe, O_CLOEXEC) != 0) {
    std::perror("[chaos] pipe2 (SIGINT/SIGTERM will not clean up)");
    return;
  }
  ::fcntl(signal_pipe[1], F_SETFL, ::fcntl(signal_pipe[1], F_GETFL) | O_NONBLOCK);
  std::thread([] {
    for (;;) {
      unsigned char signo = 0;
      const ssize_t n = ::read(signal_pipe[0], &signo, 1);
      if (n == 1) cleanup_and_exit(signo);
      if (n < 0 && errno == EINTR) continue;
      return;  // the pipe broke: nothing to wait for
    }
  }).detach();
  struct sigaction action{};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

}  // namespace mayfly::chaos
