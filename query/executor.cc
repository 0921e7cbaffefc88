#include "query/executor.h"

#include <cmath>
#include <memory>

#include "storage/document.h"
#include "storage/json.h"

namespace mayfly::query {
namespace {

namespace bj = boost::json;
using storage::OpResult;

OpResult bad_request(std::string message) { return OpResult::error(StatusCode::kInvalidArgument, std::move(message)); }

OpResult from_status(const Status& status) {
  if (status.code() == StatusCode::kInvalidArgument) return bad_request(status.message());
  // A read stopped by its deadline, a cancellation or shutdown (common/work_budget.h): 503, nothing was done.
  if (status.code() == StatusCode::kUnavailable) return OpResult::error(status);
  return OpResult::storage_failure(status);
}

// An ItemSource over a storage snapshot: the container, or one partition of it, as users read the items.
class StorageSource final : public ItemSource {
 public:
  StorageSource(storage::ItemReader& reader, std::optional<std::string> partition_key,
                int64_t now_micros)
      : reader_(reader), partition_key_(std::move(partition_key)), now_micros_(now_micros) {}

  bool single_partition() const override { return partition_key_.has_value(); }

  Status scan(ScanOrder order, std::string_view resume_after, bool with_documents,
              const std::function<bool(SourceItem&)>& visit) override {
    using Order = storage::ItemReader::Order;
    const Order walk_order = order == ScanOrder::kKey           ? Order::kKey
                             : order == ScanOrder::kTsAscending ? Order::kTsAscending
                                                                : Order::kTsDescending;
    Status failure;
    Status walked = reader_.walk(walk_order, partition_key_, resume_after, now_micros_,
                                 [&](const storage::ItemReader::Visit& found) {
                                   if (!with_documents) {
                                     SourceItem bare{found.position, found.record.write_ts_micros, nullptr};
                                     return visit(bare);
                                   }
                                   Result<SourceItem> item = document_of(found.record, found.position);
                                   if (!item.is_ok()) {
                                     failure = item.status();
                                     return false;
                                   }
                                   return visit(*item);
                                 });
    MAYFLY_RETURN_IF_ERROR(walked);
    return failure;
  }

  Status lookup(std::string_view id, const std::function<void(SourceItem&)>& visit) override {
    MAYFLY_ASSERT(partition_key_.has_value());
    MAYFLY_ASSIGN_OR_RETURN(std::optional<storage::ItemRecord> record, reader_.lookup(*partition_key_, id, now_micros_));
    if (!record) return Status::ok();
    MAYFLY_ASSIGN_OR_RETURN(SourceItem item, document_of(*record, ""));
    visit(item);
    return Status::ok();
  }

 private:
  // The item as a read returns it: the stored JSON with `_rid`, `_etag`, `_ts` (seconds) and `_expiresAt` (when its
  // effective TTL is set) after the user's properties — the same document storage::render_item writes.
  Result<SourceItem> document_of(const storage::ItemRecord& record, std::string_view position) const {
    Result<bj::value> parsed = json::parse(record.json);
    if (!parsed.is_ok() || !parsed->is_object()) return Status::corruption("stored item is not a JSON object");
    bj::object& object = parsed->get_object();
    object["_rid"] = storage::format_item_rid(reader_.container().crid, record.item_rid);
    object["_etag"] = storage::format_etag(record.etag_sequence);
    object["_ts"] = ttl::ts_seconds(record.write_ts_micros);
    if (std::optional<int64_t> expires_at =
            ttl::expires_at_seconds(record.ttl, record.write_ts_micros, reader_.container().ttl.policy)) {
      object["_expiresAt"] = *expires_at;
    }
    SourceItem item;
    item.position = position;
    item.write_ts_micros = record.write_ts_micros;
    item.document = std::move(*parsed);
    return item;
  }

  storage::ItemReader& reader_;
  std::optional<std::string> partition_key_;
  int64_t now_micros_;
};

// No items at all: what a query reads when its filter and --pk name different partitions (aggregates still give
// their one row: COUNT 0, SUM 0).
class EmptySource final : public ItemSource {
 public:
  bool single_partition() const override { return true; }
  Status scan(ScanOrder, std::string_view, bool, const std::function<bool(SourceItem&)>&) override {
    return Status::ok();
  }
  Status lookup(std::string_view, const std::function<void(SourceItem&)>&) override { return Status::ok(); }
};

std::string fingerprint_of(const QueryRequest& request, const Parameters& parameters,
                           const std::optional<std::string>& partition_key) {
  // FNV-1a over everything that decides the result set, so a token cannot resume a different query.
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](std::string_view text) {
    for (char c : text) {
      hash ^= static_cast<uint8_t>(c);
      hash *= 1099511628211ull;
    }
    hash ^= 0xff;
    hash *= 1099511628211ull;
  };
  mix(request.database);
  mix(request.container);
  mix(request.sql);
  for (const auto& [name, value] : parameters) {
    mix(name);
    mix(json::to_json(value));
  }
  mix(partition_key ? "p" + *partition_key : "*");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<size_t>(i)] = kHex[hash & 0xf];
    hash >>= 4;
  }
  return out;
}

Result<Parameters> parse_parameters(std::string_view text) {
  Parameters out;
  if (text.empty()) return out;
  if (text.size() > kMaxQueryParametersBytes) {
    return Status::invalid_argument("query parameters are " + std::to_string(text.size()) + " bytes; at most " +
                                    std::to_string(kMaxQueryParametersBytes));
  }
  Result<bj::value> parsed = json::parse(text);
  if (!parsed.is_ok()) return Status::invalid_argument("query parameters are not valid JSON: " + parsed.status().message());
  if (!parsed->is_object()) return Status::invalid_argument("query parameters must be a JSON object {\"@name\": value}");
  if (parsed->get_object().size() > kMaxQueryParameters) {
    return Status::invalid_argument("at most " + std::to_string(kMaxQueryParameters) + " query parameters");
  }
  for (const auto& member : parsed->get_object()) {
    const std::string_view name = member.key();
    if (name.size() < 2 || name[0] != '@') {
      return Status::invalid_argument("query parameter name '" + std::string(name) + "' must start with '@'");
    }
    out.emplace(std::string(name), member.value());
  }
  return out;
}

}  // namespace

double query_charge(const QueryWork& work) {
  const double charge = 1.0 + 0.1 * static_cast<double>(work.items_loaded) +
                        0.01 * static_cast<double>(work.index_entries) +
                        static_cast<double>(work.bytes_returned) / 1024.0;
  return std::round(charge * 100.0) / 100.0;
}

OpResult execute_query(const storage::StoreReader& state, const QueryRequest& request, int64_t now_micros,
                       const EngineLimits& limits, const ParseLimits& parse_limits) {
  if (request.max_items == 0 || request.max_items > kMaxQueryPageItems) {
    return bad_request("max items per page must be between 1 and " + std::to_string(kMaxQueryPageItems));
  }
  Result<Query> parsed = parse_query(request.sql, parse_limits);
  if (!parsed.is_ok()) return bad_request(parsed.status().message());
  // The evaluator points into the query: keep it at a stable address.
  auto query = std::make_unique<Query>(std::move(parsed).value());
  Result<Parameters> parameters = parse_parameters(request.parameters_json);
  if (!parameters.is_ok()) return bad_request(parameters.status().message());
  Result<Evaluator> evaluator = Evaluator::create(*query, *parameters);
  if (!evaluator.is_ok()) return bad_request(evaluator.status().message());

  Result<std::unique_ptr<storage::ItemReader>> opened =
      state.open_item_reader(request.database, request.container);
  if (!opened.is_ok()) return OpResult::error(opened.status());
  storage::ItemReader& reader = *opened.value();
  const storage::ContainerRecord& container = reader.container();
  const int64_t at_micros = std::max(now_micros, reader.applied_ts_micros());

  const Plan plan = make_plan(*evaluator, container.partition_key_path);
  std::optional<std::string> partition_key;
  bool matches_nothing = plan.matches_nothing;
  if (request.partition_key_json) {
    Result<std::string> canonical = storage::canonical_partition_key_text(*request.partition_key_json);
    if (!canonical.is_ok()) return OpResult::error(canonical.status());
    partition_key = canonical.value();
  }
  if (plan.partition_key) {
    Result<std::string> canonical = json::canonical_partition_key(*plan.partition_key);
    if (canonical.is_ok()) {
      if (partition_key && *partition_key != *canonical) matches_nothing = true;  // --pk and the filter disagree
      partition_key = *canonical;
    }
  }
  const bool point_lookup = plan.id && partition_key && !plan.needs_full_scan;
  if (container.indexing == ttl::IndexingMode::kNone && !point_lookup && !request.enable_scan) {
    return bad_request(
        "the container's indexing mode is none, so this query would scan its items; allow that with "
        "--enable-scan (Cosmos DB's EnableScanInQuery), or read by partition key and id");
  }

  EngineLimits page_limits = limits;
  page_limits.max_items = request.max_items;
  StorageSource storage_source(reader, partition_key, at_micros);
  EmptySource empty_source;
  ItemSource& source = matches_nothing ? static_cast<ItemSource&>(empty_source) : storage_source;
  Result<Page> ran = run_page(*evaluator, plan, source, request.continuation,
                              fingerprint_of(request, *parameters, partition_key), page_limits);
  if (!ran.is_ok()) return from_status(ran.status());
  Page page = std::move(ran).value();
  OpResult result;
  result.body = std::move(page.body);
  result.continuation = std::move(page.continuation);
  result.expired_skipped = reader.counters().expired_skipped;
  result.work_charge = query_charge(QueryWork{reader.counters().items_loaded, reader.counters().index_entries,
                                              result.body.size()});
  return result;
}

}  // namespace mayfly::query
