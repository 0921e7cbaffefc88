#include "ttl/ttl.h"

#include <algorithm>

namespace mayfly::ttl {
namespace {

// Floor division for possibly negative numerators (bounds below can go negative for tiny T).
int64_t floor_div(int64_t numerator, int64_t denominator) {
  int64_t quotient = numerator / denominator;
  if ((numerator % denominator != 0) && ((numerator < 0) != (denominator < 0))) --quotient;
  return quotient;
}

// Write ts below which an inheriting item is expired at `now` under default `seconds`:
// expired iff ts_seconds(ts) + seconds <= now / 1e6 (in whole-second terms, see expiry_instant_micros)
//         iff ts_seconds(ts) <= floor(now / 1e6) - seconds
//         iff ts < (floor(now / 1e6) - seconds + 1) * 1e6.
int64_t inherited_expired_below(int64_t seconds, int64_t now_micros) {
  return (floor_div(now_micros, kMicrosPerSecond) - seconds + 1) * kMicrosPerSecond;
}

Result<int64_t> positive_or_minus_one(const TtlLiteral& literal) {
  if (literal.kind == TtlLiteral::Kind::kInteger && literal.integer_fits &&
      (literal.integer == -1 || (literal.integer >= 1 && literal.integer <= kMaxTtlSeconds))) {
    return literal.integer;
  }
  return Status::invalid_argument("");
}

}  // namespace

TtlLiteral TtlLiteral::of_integer(int64_t value) {
  TtlLiteral literal;
  literal.kind = Kind::kInteger;
  literal.integer = value;
  literal.integer_fits = true;
  literal.text = std::to_string(value);
  return literal;
}

int64_t ItemTtl::json_value() const {
  MAYFLY_ASSERT(kind != Kind::kInherit);
  return kind == Kind::kNever ? -1 : seconds;
}

std::string invalid_item_ttl_message(const std::string& text) {
  return "The input ttl '" + text +
         "' is invalid. Ensure to provide a nonzero positive integer less than or equal to '2147483647', or '-1' "
         "which means never expire.";
}

Result<ItemTtl> validate_item_ttl(const TtlLiteral& literal) {
  if (literal.kind == TtlLiteral::Kind::kAbsent) return ItemTtl::inherit();
  Result<int64_t> value = positive_or_minus_one(literal);
  if (!value.is_ok()) return Status::invalid_argument(invalid_item_ttl_message(literal.text));
  return *value == -1 ? ItemTtl::never() : ItemTtl::of_seconds(*value);
}

Result<DefaultTtl> validate_default_ttl(const TtlLiteral& literal) {
  if (literal.kind == TtlLiteral::Kind::kAbsent) return DefaultTtl::off();
  Result<int64_t> value = positive_or_minus_one(literal);
  if (!value.is_ok()) {
    return Status::invalid_argument("The input defaultTtl '" + literal.text +
                                    "' is invalid. Ensure to provide a nonzero positive integer less than or equal "
                                    "to '2147483647', or '-1' which means no default expiry; leave it out to turn "
                                    "TTL off.");
  }
  return *value == -1 ? DefaultTtl::no_default() : DefaultTtl::of_seconds(*value);
}

Status validate_indexing(DefaultTtl default_ttl, IndexingMode mode) {
  if (mode == IndexingMode::kNone && default_ttl.is_on()) {
    return Status::invalid_argument(
        "Indexing mode value cannot be 'none' when 'defaultTtl' is specified in the collection");
  }
  return Status::ok();
}

std::optional<int64_t> effective_ttl_seconds(ItemTtl item, DefaultTtl container) {
  switch (container.kind) {
    case DefaultTtl::Kind::kOff:
      return std::nullopt;  // TTL off: nothing expires, item ttl is kept but ignored
    case DefaultTtl::Kind::kNoDefault:
      if (item.kind == ItemTtl::Kind::kSeconds) return item.seconds;
      return std::nullopt;
    case DefaultTtl::Kind::kSeconds:
      if (item.kind == ItemTtl::Kind::kSeconds) return item.seconds;
      if (item.kind == ItemTtl::Kind::kNever) return std::nullopt;
      return container.seconds;
  }
  MAYFLY_UNREACHABLE("bad DefaultTtl kind");
}

int64_t expiry_instant_micros(int64_t write_ts_micros, int64_t ttl_seconds) {
  MAYFLY_ASSERT(write_ts_micros >= 0);
  MAYFLY_ASSERT(ttl_seconds >= 1 && ttl_seconds <= kMaxTtlSeconds);
  return (ts_seconds(write_ts_micros) + ttl_seconds) * kMicrosPerSecond;
}

std::optional<int64_t> expires_at_seconds(ItemTtl item, int64_t write_ts_micros, DefaultTtl container) {
  const std::optional<int64_t> effective = effective_ttl_seconds(item, container);
  if (!effective) return std::nullopt;
  return expiry_instant_micros(write_ts_micros, *effective) / kMicrosPerSecond;
}

namespace {

// Raises the warning floors to the window at `change_ts` under `state` (before a change).
void keep_warned(const ContainerTtlState& state, int64_t change_ts_micros, ContainerTtlState& next) {
  // Never on: the window is the expired bounds, which the dead watermarks already keep.
  if (!state.has_warnings()) return;
  const ExpiredBounds warned = warning_bounds(state, change_ts_micros);
  next.own_warned_below_micros = warned.own_expiry_below_micros;
  next.default_warned_below_micros = warned.default_ts_below_micros;
}

}  // namespace

Status validate_expiry_warning(int64_t seconds) {
  if (seconds < 0 || seconds > kMaxTtlSeconds) {
    return Status::invalid_argument("expiryWarning must be 0 (off) or whole seconds from 1 to " +
                                    std::to_string(kMaxTtlSeconds) + ", not " + std::to_string(seconds));
  }
  return Status::ok();
}

ContainerTtlState change_warning(const ContainerTtlState& state, int64_t warning_seconds, int64_t change_ts_micros) {
  MAYFLY_ASSERT(validate_expiry_warning(warning_seconds).is_ok());
  ContainerTtlState next = state;
  keep_warned(state, change_ts_micros, next);
  next.warning_seconds = warning_seconds;
  return next;
}

ContainerTtlState change_policy(const ContainerTtlState& state, DefaultTtl new_policy, int64_t change_ts_micros) {
  ContainerTtlState next = state;
  keep_warned(state, change_ts_micros, next);
  const ExpiredBounds dead = expired_bounds(state, change_ts_micros);
  next.own_dead_below_micros = dead.own_expiry_below_micros;
  if (dead.default_ts_below_micros > state.default_dead_below_micros) {
    next.default_dead_below_micros = dead.default_ts_below_micros;
    next.default_dead_since_micros = change_ts_micros;
  }
  next.policy = new_policy;
  return next;
}

bool alive(ItemTtl item_ttl, int64_t write_ts_micros, const ContainerTtlState& state, int64_t now_micros) {
  // Killed by an earlier policy change (once expired, always expired)?
  if (item_ttl.kind == ItemTtl::Kind::kSeconds &&
      expiry_instant_micros(write_ts_micros, item_ttl.seconds) < state.own_dead_below_micros) {
    return false;
  }
  if (item_ttl.kind == ItemTtl::Kind::kInherit && write_ts_micros < state.default_dead_below_micros) return false;
  const std::optional<int64_t> effective = effective_ttl_seconds(item_ttl, state.policy);
  return !effective || now_micros < expiry_instant_micros(write_ts_micros, *effective);
}

ExpiredBounds expired_bounds(const ContainerTtlState& state, int64_t now_micros) {
  ExpiredBounds bounds{state.own_dead_below_micros, state.default_dead_below_micros};
  if (state.policy.is_on()) {
    // expired iff expiry <= now iff expiry < now + 1
    bounds.own_expiry_below_micros = std::max(bounds.own_expiry_below_micros, now_micros + 1);
  }
  if (state.policy.kind == DefaultTtl::Kind::kSeconds) {
    bounds.default_ts_below_micros =
        std::max(bounds.default_ts_below_micros, inherited_expired_below(state.policy.seconds, now_micros));
  }
  return bounds;
}

ExpiredBounds warning_bounds(const ContainerTtlState& state, int64_t now_micros) {
  ExpiredBounds bounds = expired_bounds(state, now_micros + state.warning_seconds * kMicrosPerSecond);
  bounds.own_expiry_below_micros = std::max(bounds.own_expiry_below_micros, state.own_warned_below_micros);
  bounds.default_ts_below_micros = std::max(bounds.default_ts_below_micros, state.default_warned_below_micros);
  return bounds;
}

int64_t inherited_expiry_for_report(const ContainerTtlState& state, int64_t write_ts_micros, int64_t now_micros) {
  std::optional<int64_t> expiry;
  if (state.policy.kind == DefaultTtl::Kind::kSeconds) {
    const int64_t current = expiry_instant_micros(write_ts_micros, state.policy.seconds);
    if (current <= now_micros) expiry = current;
  }
  // Killed by a policy change: it had expired by the time of that change at the latest.
  if (write_ts_micros < state.default_dead_below_micros) {
    expiry = std::min(expiry.value_or(INT64_MAX), state.default_dead_since_micros);
  }
  MAYFLY_ASSERT_MSG(expiry.has_value(), "inherited_expiry_for_report on an item that has not expired");
  return *expiry;
}

}  // namespace mayfly::ttl
