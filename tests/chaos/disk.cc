#include "tests/chaos/disk.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>
#include <vector>

namespace mayfly::chaos {
namespace {

std::string source_name() { return "mfc" + std::to_string(::getpid()) + "-disk"; }

// The campaign tmpfs mounts ("mfc<pid>-disk") in /proc/self/mounts: (mount point, pid in the name).
std::vector<std::pair<std::string, std::string>> campaign_mounts() {
  std::vector<std::pair<std::string, std::string>> found;
  std::ifstream mounts("/proc/self/mounts");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream fields(line);
    std::string source, target, type;
    fields >> source >> target >> type;
    if (type != "tmpfs" || source.rfind("mfc", 0) != 0 || source.size() < 9 ||
        source.compare(source.size() - 5, 5, "-disk") != 0) {
      continue;
    }
    const std::string pid = source.substr(3, source.size() - 8);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(target, pid);
  }
  return found;
}

// Unmounts tmpfs mounts named "mfc<pid>-disk" whose campaign process is gone.
void unmount_leftovers() {
  for (const auto& [target, pid] : campaign_mounts()) {
    struct stat info{};
    if (::stat(("/proc/" + pid).c_str(), &info) == 0) continue;
    std::cerr << "[disk] unmounting leftover " << target << "\n";
    ::umount2(target.c_str(), MNT_DETACH);
  }
}

}  // namespace

std::unique_ptr<SmallDisk> SmallDisk::create(const std::string& directory, int64_t size_mib, std::string* why) {
  if (::geteuid() != 0) {
    *why = "not root: mounting a tmpfs needs root";
    return nullptr;
  }
  unmount_leftovers();
  std::error_code ignored;
  std::filesystem::create_directories(directory, ignored);
  const std::string options = "size=" + std::to_string(size_mib) + "m,mode=0700";
  if (::mount(source_name().c_str(), directory.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    *why = "mount tmpfs on " + directory + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<SmallDisk> disk(new SmallDisk(directory));
  disk->size_mib_ = size_mib;
  return disk;
}

std::vector<std::string> unmount_disks_of(pid_t pid) {
  std::vector<std::string> unmounted;
  for (const auto& [target, owner] : campaign_mounts()) {
    if (owner == std::to_string(pid) && ::umount2(target.c_str(), MNT_DETACH) == 0) unmounted.push_back(target);
  }
  return unmounted;
}

SmallDisk::~SmallDisk() { ::umount2(directory_.c_str(), MNT_DETACH); }

int64_t SmallDisk::fill() {
  const std::string path = directory_ + "/filler";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  const std::vector<char> chunk(1 << 20, 'x');
  int64_t written = 0;
  for (int64_t i = 0; i < size_mib_ + 8; ++i) {  // bounded: the file system holds at most size_mib_
    const ssize_t n = ::write(fd, chunk.data(), chunk.size());
    if (n <= 0) break;
    written += n;
  }
  ::close(fd);
  return written >> 20;
}

void SmallDisk::drain() { ::unlink((directory_ + "/filler").c_str()); }

}  // namespace mayfly::chaos
