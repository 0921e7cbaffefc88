// The TTL contract (docs/ttl.md) as pure functions: validation of item `ttl` and container `defaultTtl`,
// the effective-TTL matrix, expiry instants, visibility, and the "once expired, always expired" watermarks that a
// container TTL change leaves behind.
//
// No clock, no I/O, no JSON library: callers describe a JSON value with a TtlLiteral. Times are microseconds since
// the Unix epoch (the log's replicated time); TTLs are whole seconds. All arithmetic is 64-bit.
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace mayfly::ttl {

inline constexpr int64_t kMaxTtlSeconds = 2147483647;

// What a JSON value looked like, as much as TTL validation needs to know.
struct TtlLiteral {
  enum class Kind { kAbsent, kNull, kBool, kInteger, kNonInteger, kString, kArray, kObject };
  Kind kind = Kind::kAbsent;
  // For kInteger: the value, when it fits in int64 (integer_fits). Huge integers are still kInteger.
  int64_t integer = 0;
  bool integer_fits = false;
  // How the value reads in an error message: JSON text for numbers, true/false/null, {} and []; the string's
  // characters for strings.
  std::string text;

  static TtlLiteral absent() { return {}; }
  static TtlLiteral of_integer(int64_t value);
};

// An item's own `ttl`, as stored (exactly as written, never filled from the container default).
struct ItemTtl {
  enum class Kind : uint8_t { kInherit, kNever, kSeconds };
  Kind kind = Kind::kInherit;  // kInherit: property absent
  int64_t seconds = 0;         // kSeconds only: 1..kMaxTtlSeconds

  static ItemTtl inherit() { return {}; }
  static ItemTtl never() { return {Kind::kNever, 0}; }
  static ItemTtl of_seconds(int64_t s) { return {Kind::kSeconds, s}; }
  bool operator==(const ItemTtl&) const = default;
  // -1 for never, n for seconds; kInherit has no JSON value (asserts).
  int64_t json_value() const;
};

// A container's `defaultTtl`.
struct DefaultTtl {
  enum class Kind : uint8_t { kOff, kNoDefault, kSeconds };
  Kind kind = Kind::kOff;  // kOff: property absent, TTL off; kNoDefault: -1, on without a default
  int64_t seconds = 0;     // kSeconds only

  static DefaultTtl off() { return {}; }
  static DefaultTtl no_default() { return {Kind::kNoDefault, 0}; }
  static DefaultTtl of_seconds(int64_t s) { return {Kind::kSeconds, s}; }
  bool is_on() const { return kind != Kind::kOff; }
  bool operator==(const DefaultTtl&) const = default;
};

enum class IndexingMode : uint8_t { kConsistent, kNone };

// docs/ttl.md §2. Errors are InvalidArgument with the user-facing message (the item one is the contract's exact text).
Result<ItemTtl> validate_item_ttl(const TtlLiteral& literal);
Result<DefaultTtl> validate_default_ttl(const TtlLiteral& literal);
// docs/ttl.md §2: defaultTtl (on, either -1 or n) with indexingMode none is rejected.
Status validate_indexing(DefaultTtl default_ttl, IndexingMode mode);
std::string invalid_item_ttl_message(const std::string& text);

// docs/ttl.md §3: the effective TTL in seconds, or nullopt when the item never expires.
std::optional<int64_t> effective_ttl_seconds(ItemTtl item, DefaultTtl container);

// docs/ttl.md §3: E = _ts + e, in whole seconds: `_ts` is the write time truncated to seconds (what users see), so the
// instant a user computes from `_ts` and `ttl` is exactly when the item disappears. Returned in microseconds.
int64_t expiry_instant_micros(int64_t write_ts_micros, int64_t ttl_seconds);
// `_expiresAt` (docs/ttl.md, "_expiresAt"): E in Unix seconds (_ts + effective TTL) for an item written at `write_ts`
// with `item` ttl in a container whose defaultTtl is `container`; nullopt when it never expires. Computed at read
// time from the current policy, never stored.
std::optional<int64_t> expires_at_seconds(ItemTtl item, int64_t write_ts_micros, DefaultTtl container);
// `_ts` as users see it: whole seconds.
inline int64_t ts_seconds(int64_t ts_micros) { return ts_micros / kMicrosPerSecond; }

// Per-container TTL state carried in the container record. Besides the policy it keeps two watermarks that make
// "once expired, always expired" hold when the policy changes (docs/ttl.md §4, §6) without touching any item:
//  - own_dead_below: items with their own positive ttl whose expiry instant is < this are gone for good;
//  - default_dead_below: items that inherit the default and were written (ts) before this are gone for good.
// Both only ever rise. Items written after a change always lie above both, so a change never kills later items.
struct ContainerTtlState {
  DefaultTtl policy;
  int64_t own_dead_below_micros = 0;
  int64_t default_dead_below_micros = 0;
  // When default_dead_below last rose: the latest instant by which every item it killed had expired.
  int64_t default_dead_since_micros = 0;
  // "Expiring soon" warnings (docs/retention.md, "Warnings before expiry"): the change feed warns of an item when
  // replicated time reaches its expiry instant minus warning_seconds (0: off). The two floors are the warning bounds
  // (warning_bounds below) reached at the last change of the policy or of warning_seconds, so an item in the warning
  // window stays in it when the window shrinks or the default lengthens: a warning is never taken back or repeated.
  int64_t warning_seconds = 0;
  int64_t own_warned_below_micros = 0;
  int64_t default_warned_below_micros = 0;
  // Whether warnings were ever on: false means every warning bound is the expired bound, at every position.
  bool has_warnings() const {
    return warning_seconds != 0 || own_warned_below_micros != 0 || default_warned_below_micros != 0;
  }
  bool operator==(const ContainerTtlState&) const = default;
};

// expiryWarning: 0 (off) or whole seconds up to kMaxTtlSeconds.
Status validate_expiry_warning(int64_t seconds);

// Applies a defaultTtl change at replicated time `change_ts`: everything expired at change_ts under the old policy
// stays dead, then the new policy applies. Pure; the caller persists the result in the same write as the change.
// Everything in the warning window at change_ts under the old state stays in it (the floors rise).
ContainerTtlState change_policy(const ContainerTtlState& state, DefaultTtl new_policy, int64_t change_ts_micros);
// Sets warning_seconds at replicated time `change_ts`; as change_policy, what was in the window stays in it.
ContainerTtlState change_warning(const ContainerTtlState& state, int64_t warning_seconds, int64_t change_ts_micros);

// docs/ttl.md §3/§4: is an item written at `write_ts` with `item_ttl` visible at time `now` (T) in a container in
// `state`? Visible iff not killed by a watermark and (effective TTL never, or T < E).
bool alive(ItemTtl item_ttl, int64_t write_ts_micros, const ContainerTtlState& state, int64_t now_micros);

// The expired part of the container at time `now`, as exclusive upper bounds on its two expiry indexes
// (docs/design.md, "The state machine"): items with their own ttl ordered by expiry instant, items that inherit ordered
// by write ts. Every item in the index below its bound is expired at `now`, every one at or above it is alive (items
// with ttl -1 are in neither index). Both bounds only grow as `now` grows and across policy changes.
struct ExpiredBounds {
  int64_t own_expiry_below_micros;   // index of own-ttl items: expiry instant < this  => expired
  int64_t default_ts_below_micros;   // index of inheriting items: write ts < this    => expired
};
ExpiredBounds expired_bounds(const ContainerTtlState& state, int64_t now_micros);

// The warning window at `now` on the same two indexes: every entry below a bound has reached its instant minus
// warning_seconds (or had at an earlier change, the floors). Never below expired_bounds(state, now); equal to it when
// warnings were never on. Both bounds only grow as `now` grows and across policy and warning changes, like
// expired_bounds, so "the first position whose bound passes an entry" is where its warning is (storage/changefeed.h).
ExpiredBounds warning_bounds(const ContainerTtlState& state, int64_t now_micros);

// The expiry instant to report for an expired item of the inheriting index: the exact one when only the current
// policy expired it; for an item killed by an earlier policy change, the earlier of that and the change's time (by
// which it had certainly expired) — an upper bound, used only for backlog-age and deletion-lag figures.
int64_t inherited_expiry_for_report(const ContainerTtlState& state, int64_t write_ts_micros, int64_t now_micros);

}  // namespace mayfly::ttl
