// A process's memory figures for the integration tests that bound a node's RSS.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace mayfly::it {

// A memory figure of a process in kB from /proc/PID/status ("VmRSS:" resident now, "VmHWM:" its peak); 0 if
// unreadable.
inline int64_t status_kb(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size()));
  }
  return 0;
}

}  // namespace mayfly::it
