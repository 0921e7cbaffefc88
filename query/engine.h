// Running a parsed query over an ItemSource, one page at a time: the access path (point lookup, key-order scan,
// `_ts`-ordered index walk, or scan + sort), WHERE, ORDER BY, OFFSET/LIMIT/TOP, SELECT, aggregates and GROUP BY,
// and the continuation token that lets the next page resume.
//
// Expiry is not decided here: an ItemSource yields only items alive at its replicated time (storage decides, see
// storage::ItemReader in storage/store_reader.h, wrapped by query/executor.cc), so nothing this file computes —
// rows, counts, sums, groups, sort order, offsets, the position a continuation resumes from — can include an expired
// item. Continuations resume from a *position* (an item key, an index key, or the last sort values and key), never
// from a count of items, so a page is stable when items expire between pages: the expired ones are simply not
// there, and nothing shifts.
//
// Aggregates and GROUP BY are computed over the whole visible set in one request (one snapshot, one replicated time)
// and come back in a single page; a continuation is never issued for them. Their work is bounded by
// EngineLimits::max_items_examined_per_request.
// Thread-safety: pure functions over the arguments.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "query/ast.h"
#include "query/evaluator.h"

namespace mayfly::query {

// How a source walks its items.
enum class ScanOrder : uint8_t {
  kKey,           // by (partition key, id): positions compare (as bytes) in the same order
  kTsAscending,   // by last-modified time (µs), then key: the container's `_ts` index
  kTsDescending,  // the same, newest first
};

struct SourceItem {
  std::string_view position;  // where the item sits in the walk; resume strictly after it
  int64_t write_ts_micros = 0;
  boost::json::value document;  // the item as users read it (system properties included)
};

// Where a query's items come from: one container, or one partition of it, at one replicated time. Implementations
// yield only items that are alive at that time.
class ItemSource {
 public:
  virtual ~ItemSource() = default;
  virtual bool single_partition() const = 0;
  // Visits items in `order`, strictly after `resume_after` (empty: from the start), until `visit` returns false
  // or there are no more. InvalidArgument when resume_after is not a position of this source. Without
  // `with_documents` the items' documents are left null (a COUNT(1) needs only to know that an item is alive).
  virtual Status scan(ScanOrder order, std::string_view resume_after, bool with_documents,
                      const std::function<bool(SourceItem&)>& visit) = 0;
  // The item with `id` in this (single-partition) source, when it exists and is alive.
  virtual Status lookup(std::string_view id, const std::function<void(SourceItem&)>& visit) = 0;
};

// What the filter pins down, for choosing an access path (never changes the result, only the cost).
struct Plan {
  std::optional<boost::json::value> partition_key;  // WHERE ... AND c.<pk path> = <literal or parameter> (an array
                                                     // of them, path by path, for a hierarchical key)
  bool matches_nothing = false;                      // c.pk = 1 AND c.pk = 2 (or two ids): nothing can match
  std::optional<std::string> id;                     // WHERE ... AND c.id = '<string>'
  bool order_by_ts = false;                          // exactly ORDER BY c._ts [ASC|DESC]
  bool ts_descending = false;
  bool needs_full_scan = false;                      // aggregates, GROUP BY, or ORDER BY not served by the index
};
// `partition_key_path` is the container's definition ("/user", "/address/zip", ["/tenant","/user"]).
Plan make_plan(const Evaluator& evaluator, std::string_view partition_key_path);

// Queries run synchronously on the thread that serves the read (the node's RPC thread; the driver thread for strong
// reads), so one request is bounded to roughly a quarter of a second of work (~1 µs per item evaluated): long scans
// must not stall heartbeats. Moving big scans to a worker pool would lift these bounds.
struct EngineLimits {
  size_t max_items = 100;                      // results per page (the request's page size)
  size_t max_page_bytes = 4 << 20;             // a page stops growing past this
  size_t max_items_examined_per_page = 50000;  // streaming paths: a page ends early (with a continuation) here
  size_t max_items_examined_per_request = 250000;  // full-scan paths: above this the query is rejected (400)
  size_t max_groups = 10000;
  size_t max_sorted_rows = 20000;  // ORDER BY without an index keeps OFFSET + page size rows in memory: at most this
  // ... and at most this many bytes of them (the documents as parsed in memory, json_memory_bytes): past it the page
  // keeps fewer rows (and ends with a continuation), and an OFFSET whose rows alone are past it is refused (400).
  size_t max_sorted_bytes = 64 << 20;
  size_t max_group_bytes = 64 << 20;  // GROUP BY: the groups' keys and first items in memory; past it, 400
};

// What a parsed JSON value holds in memory (its nodes, strings, keys and containers' storage), in bytes.
size_t json_memory_bytes(const boost::json::value& value);

struct PageStats {
  int64_t items_examined = 0;  // alive items the engine evaluated
  int64_t rows = 0;
  bool used_point_lookup = false;
  bool used_ts_index = false;
  bool full_scan = false;
};

struct Page {
  std::string body;          // JSON array of results
  std::string continuation;  // "" when this is the last page
  PageStats stats;
};

// Runs one page. `fingerprint` identifies the query (text, parameters, container, partition); a continuation made
// for another query is rejected. InvalidArgument (400) for bad continuations and work limits exceeded.
Result<Page> run_page(const Evaluator& evaluator, const Plan& plan, ItemSource& source, std::string_view continuation,
                      std::string_view fingerprint, const EngineLimits& limits);

}  // namespace mayfly::query
