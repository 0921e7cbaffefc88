// The command a benchmark was run with, as it prints it above its figures (so a result says how to reproduce it):
// argv joined by spaces, an argument with a space or nothing in it quoted. The flags themselves are parsed with CLI11.
// Thread-safety: a pure function.
#pragma once

#include <string>

namespace mayfly::bench {

inline std::string command_line(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i > 0) command += " ";
    command += arg.empty() || arg.find(' ') != std::string::npos ? "\"" + arg + "\"" : arg;
  }
  return command;
}

}  // namespace mayfly::bench
