// Executing a query against the state machine: parse, bind parameters, plan, choose the partition, run one page
// over a storage snapshot (query/engine.h), and price the work in request units.
//
// Link graph (docs/design.md, "Modules and the link graph"): query → storage, ttl, common. Storage knows nothing of the
// query language; it offers storage::ItemReader (storage/store_reader.h), which hands out only items alive at the
// read's replicated time. The node calls execute_query from its read paths, so a query follows the consistency levels
// exactly like a list.
//
// Request units: 1 RU per query, plus 0.1 RU per item record read (expired ones too: reading them is work), 0.01 RU
// per `_ts` index entry walked, plus 1 RU per KB returned; rounded to 0.01 RU. Deterministic for the same state
// and request; a strong read pays twice (the node applies that factor, as for point reads).
// Thread-safety: pure functions on a const storage::StoreReader: any thread, concurrently with applies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "query/engine.h"
#include "query/parser.h"
#include "storage/command.h"
#include "storage/feed_range.h"
#include "storage/store_reader.h"

namespace mayfly::query {

inline constexpr size_t kMaxQueryPageItems = 1000;
inline constexpr size_t kMaxQueryParameters = 4096;  // the SDKs' read_items: 1000 ids and their keys
// The parameters' JSON text at most (an item is at most 2 MB): what string functions and LIKE get from a query.
inline constexpr size_t kMaxQueryParametersBytes = 2 << 20;

struct QueryRequest {
  std::string database;
  std::string container;
  std::string sql;
  // The parameters as one JSON object, {"@name": value, ...} ("" for none); names must start with '@'.
  std::string parameters_json;
  std::optional<std::string> partition_key_json;  // one partition (the JSON text of the key value)
  size_t max_items = 100;                         // 1..kMaxQueryPageItems
  std::string continuation;
  bool enable_scan = false;  // allow a scan on a container whose indexing mode is none
  // Only the items whose partition key's effective partition key is in this range (an SDK's feed range); unset: all.
  std::optional<storage::FeedRange> feed_range;
};

struct QueryWork {
  int64_t items_loaded = 0;
  int64_t index_entries = 0;
  size_t bytes_returned = 0;
};
double query_charge(const QueryWork& work);

// One page of the query at replicated time `now_micros` (or the reader snapshot's own applied time if later). The
// OpResult has the page as a JSON array in `body`, `continuation` when there are more pages, `work_charge`, and
// `expired_skipped`; 400 for bad queries (with position and what was expected), 404 for a missing container.
storage::OpResult execute_query(const storage::StoreReader& state, const QueryRequest& request, int64_t now_micros,
                                const EngineLimits& limits = {}, const ParseLimits& parse_limits = {});

// A query over documents held in memory — the gateway's query_databases / query_containers run over the definitions
// (ids, system properties) — with the same language, limits and paging as a container query. Documents are visited
// in the order given; `_ts` orders use their `_ts` property. `fingerprint_scope` names what is queried (continuations
// from another scope are refused). The OpResult has the page in `body` and `continuation` when there are more; 400
// for bad queries.
storage::OpResult query_documents(std::string_view fingerprint_scope, std::string_view sql,
                                  std::string_view parameters_json, std::vector<boost::json::value> documents,
                                  size_t max_items, std::string_view continuation);

}  // namespace mayfly::query
