// The process's memory allocator, seen from inside: which one it is and what it holds.
//
// mayflyd links jemalloc (mayflyd/CMakeLists.txt; not in a sanitized build, whose runtime brings its own allocator)
// and sets its options in `malloc_conf` (mayflyd/main.cc): freed memory goes back to the operating system within
// seconds, from a background thread, and many threads do not each keep an arena of freed memory as glibc's malloc
// does. Measured: with glibc's malloc a node that had sent and installed snapshots of a 1M-item store held 250–370 MB
// of anonymous memory with ~120 MB allocated (docs/benchmarks.md, "Memory per node").
//
// Everything else (the tests, the client, the tools) keeps the C library's malloc; allocator_figures() reports
// whichever the process runs on, so the figures are right in both. jemalloc is found at run time (`mallctl`, a weak
// symbol), not at build time, so this file builds and links the same way everywhere.
//
// Thread-safety: from any thread.
#pragma once

#include <cstdint>
#include <string>

namespace mayfly {

struct AllocatorFigures {
  std::string name;         // "jemalloc 5.3.0-0-g…" or "glibc malloc"
  uint64_t allocated = 0;   // bytes the program holds (malloc'd and not freed)
  uint64_t resident = 0;    // bytes of the allocator's memory in RAM: allocated + free memory not yet given back
                            // (+ jemalloc's own metadata); glibc: the arenas' size, whether in RAM or not
  uint64_t retained = 0;    // jemalloc: address space kept for reuse, not in RAM (0 under glibc)
};

AllocatorFigures allocator_figures();

}  // namespace mayfly
