// mayfly-sim: runs the deterministic cluster simulator for one seed or many.
//
//   mayfly-sim --seed N [--nodes 3|5] [--fault-ms MS] [--heal-ms MS] [--verbose]
//   mayfly-sim --seeds COUNT [--first-seed N] [--nodes 3|5]      (soak: stops at the first failure)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/sim/simulator.h"

int main(int argc, char** argv) {
  mayfly::sim::SimOptions options;
  uint64_t seeds = 0;
  uint64_t first_seed = 1;
  bool single = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> uint64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mayfly-sim: %s needs a value\n", flag.c_str());
        std::exit(2);
      }
      return std::strtoull(argv[++i], nullptr, 10);
    };
    if (flag == "--seed") {
      options.seed = value();
      single = true;
    } else if (flag == "--seeds") {
      seeds = value();
    } else if (flag == "--first-seed") {
      first_seed = value();
    } else if (flag == "--nodes") {
      options.nodes = static_cast<int>(value());
    } else if (flag == "--fault-ms") {
      options.fault_phase_ms = static_cast<int64_t>(value());
    } else if (flag == "--heal-ms") {
      options.heal_phase_ms = static_cast<int64_t>(value());
    } else if (flag == "--verbose") {
      options.verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: mayfly-sim --seed N [--nodes 3|5] [--fault-ms MS] [--heal-ms MS] [--verbose]\n"
                   "       mayfly-sim --seeds COUNT [--first-seed N] [--nodes 3|5]\n");
      return 2;
    }
  }
  if (options.nodes != 3 && options.nodes != 5) {
    std::fprintf(stderr, "mayfly-sim: --nodes must be 3 or 5\n");
    return 2;
  }
  if (single || seeds == 0) {
    mayfly::sim::SimResult result = mayfly::sim::run_simulation(options);
    std::printf("seed %llu: %s\n  %s\n", static_cast<unsigned long long>(options.seed), result.ok ? "ok" : "FAILED",
                result.summary().c_str());
    if (!result.ok) std::printf("%s\n", result.failure.c_str());
    return result.ok ? 0 : 1;
  }
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t k = 0; k < seeds; ++k) {
    options.seed = first_seed + k;
    mayfly::sim::SimResult result = mayfly::sim::run_simulation(options);
    if (!result.ok) {
      std::printf("%s\n", result.failure.c_str());
      return 1;
    }
    if ((k + 1) % 50 == 0 || k + 1 == seeds) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%llu/%llu seeds ok (%.1f s)\n", static_cast<unsigned long long>(k + 1),
                  static_cast<unsigned long long>(seeds), seconds);
      std::fflush(stdout);
    }
  }
  return 0;
}
