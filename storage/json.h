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
#include <vector>

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

// The property names of a partition key path: "/address/zip" -> address, zip. A segment may be quoted, as Cosmos DB
// allows for names with other characters: /"level' 1*()"/"le/vel2" -> level' 1*(), le/vel2. Empty when the path is
// malformed (validate_partition_key_path says why).
std::vector<std::string> partition_key_path_segments(std::string_view path);
// The value at a partition key path such as "/customerId" or "/address/zip" (nullptr when absent).
const boost::json::value* find_path(const boost::json::object& object, std::string_view path);

// A container's partition key definition as stored (ContainerRecord::partition_key_path, the wire's partitionKeyPath):
// one path, "/tenant" (kind Hash), or a hierarchical key (kind MultiHash) as the JSON array of its 2 or 3 paths,
// ["/tenant","/user"]. A path starts with '/', has non-empty segments and is at most 3 levels deep (no escapes);
// the paths of a hierarchical key are distinct.
Status validate_partition_key_path(std::string_view definition);
inline constexpr size_t kMaxPartitionKeyPaths = 3;
// The paths of a definition (one for Hash, 2..3 for MultiHash). A definition that does not validate yields itself.
std::vector<std::string> partition_key_paths(std::string_view definition);
// The definition of a hierarchical key with these paths (the JSON array text).
std::string hierarchical_partition_key_definition(const std::vector<std::string>& paths);

// A partition key component in the canonical form stored in keys: compact JSON of a string, number, bool or null;
// numbers that are integral and fit in int64 are written as integers, so 42 and 42.0 are the same partition.
Result<std::string> canonical_partition_key(const boost::json::value& value);
// The canonical component of an item that has no value at a partition key path: Cosmos DB's "undefined" partition
// (the SDKs' PartitionKey.None / NonePartitionKeyValue, sent as [{}]); distinct from null.
inline constexpr std::string_view kUndefinedPartitionKey = "{}";
// A partition key value: one component (canonical_partition_key, or {} for undefined) or, for a hierarchical key, a
// JSON array of 2 or 3 components, canonical each: ["a",42].
Result<std::string> canonical_partition_key_value(const boost::json::value& value);
// Whether a canonical value fits a definition: one component for Hash, as many as the paths for MultiHash.
// InvalidArgument naming what was expected otherwise.
Status check_partition_key_shape(std::string_view definition, std::string_view canonical_value);

// Nesting depth: 0 for scalars, 1 for an empty or flat array/object, and so on. Stops counting past `limit`.
int depth(const boost::json::value& value, int limit = kMaxDepth + 1);

// How many characters (Unicode code points) a UTF-8 string holds.
size_t utf8_length(std::string_view text);

}  // namespace mayfly::json
