// Partial document update ("patch"), following Azure Cosmos DB's patch operations, as a pure function.
//
// A patch is a JSON array of 1..kMaxPatchOperations operations {"op", "path", "value"}, applied in order and
// atomically: either every operation succeeds and the patched copy is returned, or nothing is returned.
//
// Operations (paths are JSON Pointers, RFC 6901: "/a/b/0", "~0" is '~', "~1" is '/'):
//   add      object member: create or replace. Array index i (0..size): insert before i; "-": append.
//   set      object member: create or replace. Array index i < size: replace; i == size or "-": append.
//   replace  the target must exist; it is replaced.
//   remove   the target must exist; it is removed (later array elements shift down; member order is kept).
//            "value" must not be given.
//   incr     "value" must be a number. The target must exist and be a number, or (object member only) be absent,
//            in which case it is created with the value. Integer sums are exact: stored as int64 when they fit;
//            int64 + int64 outside int64 is an error; when an operand is a uint64 (above INT64_MAX) the sum may
//            also be a uint64. If either side is a double, the sum is a double (a non-finite sum is an error).
//            An array element must exist to be incremented ("-" and index == size are errors).
//   move     {"op": "move", "from": "/a", "path": "/b"}: the value at "from" (which must exist) is removed and set at
//            "path" (created or replaced, as set). "from" follows the same rules as a path (not the id, the
//            partition key or a system property), and may not be an ancestor of "path". "value" must not be given.
// For every operation the parent of the target must exist and be an object or an array.
//
// Paths must start with '/', must not be the root, and must not contain empty segments ("/a//b"); array indexes
// are decimal without leading zeros; "-" is only for add and set on an array. Members other than op/path/value (and
// from, for move) are rejected (so a misspelt "valeu" is reported rather than silently ignored).
// System properties (_ts, _etag, _rid, _self, _attachments, and anything under them) cannot be patched. An
// operation whose path equals an immutable path, is a prefix of it ("/tenant" for "/tenant/id"), or lies below it,
// is rejected. `/ttl` is an ordinary property here; the caller re-validates the resulting document (ttl, size, depth).
//
// Errors are InvalidArgument; those about one operation read "patch operation <n> (<op> <path>): <reason>", n 1-based.
//
// Thread-safety: pure functions; safe to call concurrently.
#pragma once

#include <boost/json.hpp>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mayfly::json {

inline constexpr size_t kMaxPatchOperations = 10;
inline constexpr size_t kMaxPatchBytes = 1024 * 1024;  // the operations JSON text; larger is rejected

// Parses `operations_json` and applies it to a copy of `document`, which is returned; `document` is never modified.
// `immutable_paths` are the paths that must not change: the caller passes "/id" and the container's partition key
// path (e.g. "/tenant/id"); these are written like partition key paths (json::partition_key_path_segments).
Result<boost::json::object> apply_patch(const boost::json::object& document, std::string_view operations_json,
                                        const std::vector<std::string>& immutable_paths);

}  // namespace mayfly::json
