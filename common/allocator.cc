#include "common/allocator.h"

#include <malloc.h>

#include <cstddef>
#include <cstdint>
#include <string>

// jemalloc's control interface, present only when the program links jemalloc (mayflyd does).
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace mayfly {
namespace {

bool jemalloc() { return mallctl != nullptr; }

uint64_t jemalloc_size(const char* name) {
  size_t value = 0;
  size_t length = sizeof(value);
  if (mallctl(name, &value, &length, nullptr, 0) != 0) return 0;
  return value;
}

}  // namespace

AllocatorFigures allocator_figures() {
  AllocatorFigures figures;
  if (jemalloc()) {
    const char* version = nullptr;
    size_t length = sizeof(version);
    figures.name = "jemalloc";
    if (mallctl("version", &version, &length, nullptr, 0) == 0 && version != nullptr) {
      figures.name += std::string(" ") + version;
    }
    // The statistics are a snapshot taken when the epoch advances.
    uint64_t epoch = 1;
    size_t epoch_length = sizeof(epoch);
    mallctl("epoch", &epoch, &epoch_length, &epoch, epoch_length);
    figures.allocated = jemalloc_size("stats.allocated");
    figures.resident = jemalloc_size("stats.resident");
    figures.retained = jemalloc_size("stats.retained");
    return figures;
  }
  const struct mallinfo2 info = mallinfo2();
  figures.name = "glibc malloc";
  figures.allocated = info.uordblks + info.hblkhd;
  figures.resident = info.arena + info.hblkhd;
  return figures;
}

}  // namespace mayfly
