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
  constexpr StrongId next() const { return StrongId(value_ + 1); }
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
