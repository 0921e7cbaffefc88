// AllocationProbe: the largest single heap allocation made while a probe is alive, from a replacement of the global
// operator new in allocation_probe.cc (its own translation unit, so no call site sees both the replacement and
// malloc/free). For tests that bound what decoding hostile input may allocate.
//
// Thread-safety: the counters are atomics; run one probe at a time (allocations on other threads count too).
#pragma once

#include <cstddef>

namespace mayfly::testing {

class AllocationProbe {
 public:
  AllocationProbe();
  ~AllocationProbe();
  AllocationProbe(const AllocationProbe&) = delete;
  AllocationProbe& operator=(const AllocationProbe&) = delete;

  size_t largest() const;  // bytes of the largest single allocation since construction
};

}  // namespace mayfly::testing
