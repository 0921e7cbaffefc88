#include "query/executor.h"

#include <algorithm>
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
  StorageSource(storage::ItemReader& reader, std::string_view database, std::optional<std::string> partition_key,
                std::optional<storage::FeedRange> feed_range, int64_t now_micros)
      : reader_(reader),
        database_(database),
        partition_key_(std::move(partition_key)),
        feed_range_(std::move(feed_range)),
        now_micros_(now_micros) {}

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
                                   Result<bool> inside = in_feed_range(found.partition_key);
                                   if (!inside.is_ok()) {
                                     failure = inside.status();
                                     return false;
                                   }
                                   if (!*inside) return true;
                                   if (!with_documents) {
                                     SourceItem bare{found.position, found.record.write_ts_micros, nullptr};
                                     return visit(bare);
                                   }
                                   Result<SourceItem> item =
                                       document_of(found.record, found.position, found.partition_key, found.id);
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
    MAYFLY_ASSIGN_OR_RETURN(bool inside, in_feed_range(*partition_key_));
    if (!inside) return Status::ok();
    MAYFLY_ASSIGN_OR_RETURN(std::optional<storage::ItemRecord> record, reader_.lookup(*partition_key_, id, now_micros_));
    if (!record) return Status::ok();
    MAYFLY_ASSIGN_OR_RETURN(SourceItem item, document_of(*record, "", *partition_key_, id));
    visit(item);
    return Status::ok();
  }

 private:
  // The item as a read returns it: the stored JSON with `_rid`, `_etag`, `_ts` (seconds) and `_expiresAt` (when its
  // effective TTL is set) after the user's properties — the same document storage::render_item writes.
  // A legal hold adds `_hold` (the ids of the holds covering it), as storage::render_item does.
  Result<SourceItem> document_of(const storage::ItemRecord& record, std::string_view position,
                                 std::string_view partition_key, std::string_view id) const {
    Result<bj::value> parsed = json::parse(record.json);
    if (!parsed.is_ok() || !parsed->is_object()) return Status::corruption("stored item is not a JSON object");
    bj::object& object = parsed->get_object();
    object["_rid"] = storage::format_item_rid(database_, reader_.container().crid, record.item_rid);
    object["_etag"] = storage::format_etag(record.etag_sequence);
    object["_ts"] = ttl::ts_seconds(record.write_ts_micros);
    if (std::optional<int64_t> expires_at =
            ttl::expires_at_seconds(record.ttl, record.write_ts_micros, reader_.container().ttl.policy)) {
      object["_expiresAt"] = *expires_at;
    }
    if (reader_.container().active_holds > 0) {
      MAYFLY_ASSIGN_OR_RETURN(std::string holds, reader_.hold_json(partition_key, id));
      if (!holds.empty()) {
        Result<bj::value> value = json::parse(holds);
        if (!value.is_ok()) return value.status();
        object["_hold"] = std::move(*value);
      }
    }
    SourceItem item;
    item.position = position;
    item.write_ts_micros = record.write_ts_micros;
    item.document = std::move(*parsed);
    return item;
  }

  // Whether items of this partition key are in the feed range. A key walk meets each partition key's items together,
  // so the last answer is kept.
  Result<bool> in_feed_range(std::string_view partition_key) {
    if (!feed_range_) return true;
    if (partition_key != last_key_ || !last_known_) {
      MAYFLY_ASSIGN_OR_RETURN(std::string epk, storage::effective_partition_key(partition_key));
      last_key_.assign(partition_key);
      last_inside_ = feed_range_->contains(epk);
      last_known_ = true;
    }
    return last_inside_;
  }

  storage::ItemReader& reader_;
  std::string_view database_;
  std::optional<std::string> partition_key_;
  std::optional<storage::FeedRange> feed_range_;
  int64_t now_micros_;
  std::string last_key_;
  bool last_known_ = false;
  bool last_inside_ = false;
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

// Documents in memory (query_documents): positions are the zero-padded index in the list, so they compare like the
// walk in every order (the list is sorted by `_ts` for the `_ts` orders).
class MemorySource final : public ItemSource {
 public:
  explicit MemorySource(std::vector<bj::value> documents) : documents_(std::move(documents)) {
    by_ts_.resize(documents_.size());
    for (size_t i = 0; i < documents_.size(); ++i) by_ts_[i] = i;
    std::stable_sort(by_ts_.begin(), by_ts_.end(), [&](size_t a, size_t b) { return ts_of(a) < ts_of(b); });
  }
  bool single_partition() const override { return false; }
  Status scan(ScanOrder order, std::string_view resume_after, bool with_documents,
              const std::function<bool(SourceItem&)>& visit) override {
    const size_t count = documents_.size();
    for (size_t step = 0; step < count; ++step) {
      const size_t rank = order == ScanOrder::kTsDescending ? count - 1 - step : step;
      const size_t index = order == ScanOrder::kKey ? rank : by_ts_[rank];
      const std::string position = position_of(rank);
      if (!resume_after.empty()) {
        const bool after = order == ScanOrder::kTsDescending ? position < resume_after : position > resume_after;
        if (!after) continue;
      }
      SourceItem item{position, ts_of(index) * 1'000'000,
                      with_documents ? documents_[index] : bj::value(nullptr)};
      if (!visit(item)) break;
    }
    return Status::ok();
  }
  Status lookup(std::string_view, const std::function<void(SourceItem&)>&) override { return Status::ok(); }

 private:
  int64_t ts_of(size_t index) const {
    const bj::object* object = documents_[index].if_object();
    const bj::value* ts = object != nullptr ? object->if_contains("_ts") : nullptr;
    return ts != nullptr && ts->is_int64() ? ts->as_int64() : 0;
  }
  static std::string position_of(size_t rank) {
    std::string text = std::to_string(rank);
    return std::string(20 - text.size(), '0') + text;
  }
  std::vector<bj::value> documents_;
  std::vector<size_t> by_ts_;
};

std::string fingerprint_of(const QueryRequest& request, const Parameters& parameters,
                           const std::optional<std::string>& partition_key,
                           const std::optional<storage::FeedRange>& feed_range) {
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
  if (feed_range) mix("r" + feed_range->min + "-" + feed_range->max);
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
  std::optional<storage::FeedRange> feed_range = request.feed_range;
  if (request.partition_key_json) {
    Result<std::string> canonical = storage::canonical_partition_key_text(*request.partition_key_json);
    if (!canonical.is_ok()) return OpResult::error(canonical.status());
    const size_t paths = json::partition_key_paths(container.partition_key_path).size();
    const size_t components =
        canonical->front() == '[' ? json::parse(*canonical).value().get_array().size() : size_t{1};
    if (paths > 1 && components < paths) {
      // A prefix of a hierarchical key (the Rust SDK sends one as the partition key): the items under it are the
      // EPK range the prefix's hash starts, narrowed further by a feed range given too.
      Result<std::string> epk = storage::effective_partition_key(*canonical);
      if (!epk.is_ok()) return OpResult::error(epk.status());
      storage::FeedRange prefix = storage::point_feed_range(*epk);
      if (feed_range) {
        prefix.min = std::max(prefix.min, feed_range->min);
        prefix.max = std::min(prefix.max, feed_range->max);
        if (prefix.min >= prefix.max) matches_nothing = true;
      }
      feed_range = std::move(prefix);
    } else {
      Result<std::string> checked =
          storage::canonical_partition_key_text(*request.partition_key_json, container.partition_key_path);
      if (!checked.is_ok()) return OpResult::error(checked.status());
      partition_key = checked.value();
    }
  }
  if (plan.partition_key) {
    Result<std::string> canonical = json::canonical_partition_key_value(*plan.partition_key);
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
  StorageSource storage_source(reader, request.database, partition_key, feed_range, at_micros);
  EmptySource empty_source;
  ItemSource& source = matches_nothing ? static_cast<ItemSource&>(empty_source) : storage_source;
  Result<Page> ran = run_page(*evaluator, plan, source, request.continuation,
                              fingerprint_of(request, *parameters, partition_key, feed_range), page_limits);
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

OpResult query_documents(std::string_view fingerprint_scope, std::string_view sql, std::string_view parameters_json,
                         std::vector<boost::json::value> documents, size_t max_items, std::string_view continuation) {
  if (max_items == 0 || max_items > kMaxQueryPageItems) {
    return bad_request("max items per page must be between 1 and " + std::to_string(kMaxQueryPageItems));
  }
  Result<Query> parsed = parse_query(sql);
  if (!parsed.is_ok()) return bad_request(parsed.status().message());
  auto query = std::make_unique<Query>(std::move(parsed).value());
  Result<Parameters> parameters = parse_parameters(parameters_json);
  if (!parameters.is_ok()) return bad_request(parameters.status().message());
  Result<Evaluator> evaluator = Evaluator::create(*query, *parameters);
  if (!evaluator.is_ok()) return bad_request(evaluator.status().message());
  QueryRequest scope;
  scope.database = std::string(fingerprint_scope);
  scope.sql = std::string(sql);
  EngineLimits limits;
  limits.max_items = max_items;
  Plan plan = make_plan(*evaluator, "");
  plan.partition_key.reset();
  plan.id.reset();
  MemorySource source(std::move(documents));
  Result<Page> ran = run_page(*evaluator, plan, source, continuation,
                              fingerprint_of(scope, *parameters, std::nullopt, scope.feed_range), limits);
  if (!ran.is_ok()) return from_status(ran.status());
  OpResult result;
  result.body = std::move(ran->body);
  result.continuation = std::move(ran->continuation);
  return result;
}

}  // namespace mayfly::query
