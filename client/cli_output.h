// How the `mayfly` CLI prints a response: one line of JSON (for scripts; the default when stdout is not a terminal)
// or tables for people (the default on a terminal), chosen with -o json|table.
//
// Tables (docs/operations.md, "Command line"):
//   cluster status     ENDPOINT, ID, IS LEADER, ROLE, TERM, COMMIT INDEX, APPLIED INDEX, APPLIED LAG, ERRORS —
//                      one row per member, like `etcdctl endpoint status -w table`; APPLIED LAG is how far the node's
//                      applied replicated time trails the newest applied time among the reachable nodes
//   db list            ID
//   container list/get/create/set   ID, PARTITION KEY, DEFAULT TTL, INDEXING, THROUGHPUT, CHANGE FEED, _TS
//   item list, query   ID, PARTITION KEY, _TS, TTL (when an item has one), then up to kItemExtraColumns other
//                      top-level fields (first seen first); rows that are not objects (SELECT VALUE ...) as one VALUE
//                      column; rows without ids (projections, aggregates) as their first kProjectionColumns
//                      fields; cells longer than their width end in "…"
//   one item           FIELD, VALUE: every top-level field
// then a footer line (count, RU, continuation). An error (status >= 400) goes to stderr as one line.
// Thread-safety: stateless.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "client/cli_text.h"
#include "client/client.h"

namespace mayfly::client {

enum class OutputFormat { kJson, kTable };

inline constexpr size_t kItemExtraColumns = 3;  // top-level fields shown besides id, partition key, _ts and ttl
inline constexpr size_t kIdWidth = 36;          // a UUID fits
inline constexpr size_t kCellWidth = 24;        // any other item cell
inline constexpr size_t kValueWidth = 60;       // FIELD/VALUE and VALUE tables
inline constexpr size_t kProjectionColumns = 6; // query rows without ids: their first fields

// -o when given, else table on a terminal and JSON otherwise (so pipes and scripts keep getting JSON).
OutputFormat choose_output(std::optional<OutputFormat> requested, bool stdout_is_terminal);

// Text for stdout and for stderr.
struct FormattedOutput {
  std::string out;
  std::string err;
};

// The table form of `response` to `request`. partition_key_path: the container's ("/user"), for the PARTITION KEY
// column of items; empty when unknown (the column is then left out).
FormattedOutput format_response_table(const Request& request, const Response& response,
                                      std::string_view partition_key_path);

// The pieces, for tests and for import/export.
Table cluster_status_table(std::string_view body);
Table containers_table(std::string_view array_body);
Table items_table(std::string_view array_body, std::string_view partition_key_path);
Table fields_table(std::string_view object_body);

// The value at a partition key path ("/a/b") of an item, as JSON text; empty when the item has none.
std::string partition_key_value(std::string_view item, std::string_view partition_key_path);

}  // namespace mayfly::client
