#include "tests/unit/replication/allocation_probe.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> g_tracking{false};
std::atomic<size_t> g_largest{0};
}  // namespace

// Replacements of the global (unaligned) operator new and delete; one per program.
void* operator new(size_t size) {
  if (g_tracking.load(std::memory_order_relaxed)) {
    size_t seen = g_largest.load(std::memory_order_relaxed);
    while (size > seen && !g_largest.compare_exchange_weak(seen, size)) {
    }
  }
  if (void* pointer = std::malloc(size == 0 ? 1 : size)) return pointer;
  throw std::bad_alloc();
}
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, size_t) noexcept { std::free(pointer); }

namespace mayfly::testing {

AllocationProbe::AllocationProbe() {
  g_largest = 0;
  g_tracking = true;
}

AllocationProbe::~AllocationProbe() { g_tracking = false; }

size_t AllocationProbe::largest() const { return g_largest.load(); }

}  // namespace mayfly::testing
