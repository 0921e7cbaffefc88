// Strong ids: a NodeId is not a Term is not a LogIndex, and the compiler says so.
// Values; thread-safe as any integer.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>

namespace mayfly {

template <typename Tag>
class StrongId {
 public:
  constexpr StrongId() = default;
  constexpr explicit StrongId(uint64_t value) : value_(value) {}
  constexpr uint64_t value() const { return value_; }
  constexpr auto operator<=>(const StrongId&) const = default;
  // The successor; saturates at the largest value instead of wrapping to 0 (callers that must move on, like an
  // election, check has_next() first).
  constexpr StrongId next() const { return has_next() ? StrongId(value_ + 1) : *this; }
  constexpr bool has_next() const { return value_ != UINT64_MAX; }
  constexpr StrongId prev() const { return StrongId(value_ - 1); }
  friend std::ostream& operator<<(std::ostream& out, StrongId id) { return out << id.value_; }

 private:
  uint64_t value_ = 0;
};

struct NodeIdTag {};
struct TermTag {};
struct LogIndexTag {};
using NodeId = StrongId<NodeIdTag>;      // 0 means "none"
using Term = StrongId<TermTag>;          // 0 before the first election
using LogIndex = StrongId<LogIndexTag>;  // 0 means "before the first entry"

}  // namespace mayfly

template <typename Tag>
struct std::hash<mayfly::StrongId<Tag>> {
  size_t operator()(mayfly::StrongId<Tag> id) const noexcept { return std::hash<uint64_t>()(id.value()); }
};
