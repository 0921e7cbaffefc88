// JSON for documents: parsing with limits, a compact canonical writer, and the few lookups the state machine needs.
//
// Library: Boost.JSON (Boost 1.81, Debian's libboost-json1.81-dev). Chosen for speed (a SAX-free DOM parser in the
// RapidJSON class), strict RFC 8259 parsing with UTF-8 validation, objects that keep insertion order, and exact
// int64/uint64/double distinction — and Boost is already part of the stack. Its own serializer prints doubles as
// `1.5E0`, so documents are written with `write_json` below (shortest round-trip doubles via std::to_chars).
// Thread-safety: pure functions.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"
#include "ttl/ttl.h"

namespace mayfly::json {

inline constexpr int kMaxDepth = 128;

// Parses one JSON text. InvalidArgument with position and reason on failure (duplicate keys: the last one wins).
Result<boost::json::value> parse(std::string_view text);

// Compact JSON: no spaces, members in stored order, integers exactly, doubles shortest-round-trip with a ".0" when
// integral (so 5.0 stays a float), strings escaped per RFC 8259 (only what must be, plus control characters).
void write_json(const boost::json::value& value, std::string& out);
std::string to_json(const boost::json::value& value);
void write_json_string(std::string_view text, std::string& out);

// Describes `value` (or its absence) for TTL validation.
ttl::TtlLiteral ttl_literal(const boost::json::value* value);

// The value at a partition key path such as "/customerId" or "/address/zip" (nullptr when absent).
const boost::json::value* find_path(const boost::json::object& object, std::string_view path);

// Validates a partition key path: starts with '/', non-empty segments, at most 3 levels deep (no escapes).
Status validate_partition_key_path(std::string_view path);

// A partition key value in the canonical form stored in keys: compact JSON of a string, number, bool or null;
// numbers that are integral and fit in int64 are written as integers, so 42 and 42.0 are the same partition.
Result<std::string> canonical_partition_key(const boost::json::value& value);

// Nesting depth: 0 for scalars, 1 for an empty or flat array/object, and so on. Stops counting past `limit`.
int depth(const boost::json::value& value, int limit = kMaxDepth + 1);

// How many characters (Unicode code points) a UTF-8 string holds.
size_t utf8_length(std::string_view text);

}  // namespace mayfly::json
