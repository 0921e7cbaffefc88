// A small tmpfs mounted as one node's data directory, so the campaign can fill it (disk full) deterministically:
// fill() writes a filler file until the file system answers ENOSPC, drain() deletes it.
//
// The mount's source is named "mfc<pid>-disk": the destructor unmounts it, and create() first unmounts leftovers of
// campaign processes that no longer exist. Needs root (else create() says why).
//
// Thread-safety: one thread (the campaign's main thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mayfly::chaos {

class SmallDisk {
 public:
  static std::unique_ptr<SmallDisk> create(const std::string& directory, int64_t size_mib, std::string* why);
  ~SmallDisk();
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  // Writes the filler until ENOSPC; the MiB written.
  int64_t fill();
  void drain();

 private:
  explicit SmallDisk(std::string directory) : directory_(std::move(directory)) {}
  std::string directory_;
  int64_t size_mib_ = 0;
};

// Unmounts the tmpfs mounts of campaign process `pid` ("mfc<pid>-disk"); their mount points. For an interrupted
// campaign (interrupt.h), from any thread: it needs no SmallDisk object.
std::vector<std::string> unmount_disks_of(pid_t pid);

}  // namespace mayfly::chaos
