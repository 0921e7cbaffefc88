#include "gateway/translate.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <memory>

#include "storage/document.h"
#include "storage/feed_range.h"
#include "storage/json.h"

namespace mayfly::gateway {
namespace {

using Shape = RenderSpec::Shape;
constexpr uint32_t kDefaultPageItems = 100;

std::string json_string(std::string_view text) {
  std::string out;
  json::write_json_string(text, out);
  return out;
}

const char* status_name(int status) {
  switch (status) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 409: return "Conflict";
    case 412: return "PreconditionFailed";
    case 410: return "Gone";
    case 413: return "RequestEntityTooLarge";
    case 429: return "TooManyRequests";
    case 501: return "NotImplemented";
    case 503: return "ServiceUnavailable";
    default: return status >= 500 ? "InternalServerError" : "BadRequest";
  }
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

Plan answer(HttpResponse response) {
  Plan plan;
  plan.answer = std::move(response);
  return plan;
}

Plan bad_request(std::string_view message) { return answer(error_response(400, message)); }

Plan method_not_allowed(const HttpRequest& request, std::string_view what) {
  return answer(error_response(405, request.method + " is not supported on " + std::string(what)));
}

// Reads the headers every call may carry into `request` (names, consistency, session token, if-match); a message
// when one is malformed.
std::optional<std::string> common_options(const HttpRequest& http, const Route& route, api::Request& request) {
  request.database = route.database;
  request.container = route.container;
  api::Options& options = request.options;
  Result<std::optional<Consistency>> requested = parse_consistency_header(http.header("x-ms-consistency-level"));
  if (!requested.is_ok()) return requested.status().message();
  Consistency level = requested->value_or(Consistency::kSession);
  // Databases, containers and partition key ranges are metadata, strongly consistent in Cosmos DB (and the SDKs send
  // no session token for them): a database created through one node is then read at once through any other.
  const bool metadata = route.kind != Route::Kind::kItems && route.kind != Route::Kind::kItem;
  if (metadata) level = Consistency::kStrong;
  options.consistency = level;
  Result<uint64_t> token = parse_session_token_header(http.header("x-ms-session-token"));
  if (!token.is_ok()) return token.status().message();
  if (*token != 0) options.session_token = std::to_string(*token);
  options.if_match = std::string(http.header("if-match"));
  return std::nullopt;
}

Result<boost::json::object> parse_object(std::string_view body, std::string_view what) {
  Result<boost::json::value> parsed = json::parse(body);
  if (!parsed.is_ok()) return Status::invalid_argument(std::string(what) + " is not valid JSON: " + parsed.status().message());
  if (!parsed->is_object()) return Status::invalid_argument(std::string(what) + " must be a JSON object");
  return std::move(parsed->as_object());
}

// x-ms-offer-throughput: a fixed RU/s in `units` (0 when absent), or why the offer is refused.
std::optional<std::string> offer_header(const HttpRequest& http, uint32_t& units) {
  units = 0;
  const std::string_view offer = http.header("x-ms-offer-throughput");
  if (!offer.empty()) {
    auto [end, error] = std::from_chars(offer.data(), offer.data() + offer.size(), units);
    if (error != std::errc() || end != offer.data() + offer.size() || units == 0) {
      return "x-ms-offer-throughput must be a positive number of RU/s, not '" + std::string(offer) + "'";
    }
  } else if (!http.header("x-ms-cosmos-offer-autopilot-settings").empty()) {
    return std::string("autoscale throughput is not supported: give a fixed offer_throughput, or none (serverless)");
  }
  return std::nullopt;
}

// PUT /offers/{id}: the offer as the SDKs send it back with a new content.offerThroughput. Its `resource` names the
// database or container (and must be the one the id names); the update goes to it.
std::optional<std::string> offer_replacement(const HttpRequest& http, const Route& route, api::Request& request,
                                             Route& target) {
  Result<boost::json::value> parsed = json::parse(http.body);
  if (!parsed.is_ok() || !parsed->is_object()) return std::string("the offer must be a JSON object");
  const boost::json::object& offer = parsed->as_object();
  const auto* resource = offer.if_contains("resource");
  if (resource == nullptr || !resource->is_string()) {
    return std::string("the offer needs its \"resource\", the link of its database or container");
  }
  std::string_view link = resource->as_string();
  while (!link.empty() && link.front() == '/') link.remove_prefix(1);
  while (!link.empty() && link.back() == '/') link.remove_suffix(1);
  if (offer_id(link) != route.id) {
    return "offer '" + route.id + "' is not the offer of '" + std::string(resource->as_string()) + "'";
  }
  const auto* content = offer.if_contains("content");
  const boost::json::object* fields = content != nullptr ? content->if_object() : nullptr;
  if (fields == nullptr) return std::string("the offer needs its \"content\" with an offerThroughput");
  if (const auto* autopilot = fields->if_contains("offerAutopilotSettings");
      autopilot != nullptr && !autopilot->is_null()) {
    return std::string("autoscale throughput is not supported: give a fixed offerThroughput");
  }
  const auto* throughput = fields->if_contains("offerThroughput");
  if (throughput == nullptr || !throughput->is_int64() || throughput->as_int64() <= 0 ||
      throughput->as_int64() > std::numeric_limits<uint32_t>::max()) {
    return std::string("content.offerThroughput must be a positive number of RU/s");
  }
  const uint32_t units = static_cast<uint32_t>(throughput->as_int64());
  Result<Route> named = parse_route("/" + std::string(link));
  if (!named.is_ok() || (named->kind != Route::Kind::kDatabase && named->kind != Route::Kind::kContainer)) {
    return "the offer's resource '" + std::string(resource->as_string()) + "' is not a database or a container";
  }
  // The render names the resource; the signature still covers the offer (the route as requested).
  target.database = named->database;
  target.container = named->container;
  request.database = named->database;
  request.container = named->container;
  if (named->kind == Route::Kind::kDatabase) {
    request.operation = api::UpdateDatabase{units};
  } else {
    api::ContainerSettings& settings = request.operation.emplace<api::UpdateContainer>().settings;
    settings.throughput = api::ContainerSettings::Throughput::kProvisioned;
    settings.provisioned_ru_per_second = units;
  }
  request.options.if_match.clear();  // an offer's etag is not its resource's
  return std::nullopt;
}

// POST /dbs/{db}/colls and PUT /dbs/{db}/colls/{c}: the container definition -> ContainerSettings.
std::optional<std::string> container_settings(const HttpRequest& http, const boost::json::object& definition,
                                              bool create, api::ContainerSettings& settings) {
  for (const auto& member : definition) {
    const std::string_view name = member.key();
    if (name == "uniqueKeyPolicy" && member.value().is_object()) {
      const auto* keys = member.value().as_object().if_contains("uniqueKeys");
      if (keys != nullptr && keys->is_array() && !keys->as_array().empty()) {
        return std::string("unique key policies (uniqueKeyPolicy) are not supported by Mayfly");
      }
    }
    if (name == "analyticalStorageTtl") return std::string("analytical storage (analyticalStorageTtl) is not supported");
    if (name == "computedProperties") return std::string("computed properties are not supported by Mayfly");
    if (name == "vectorEmbeddingPolicy" || name == "fullTextPolicy") {
      return std::string(name) + " is not supported by Mayfly";
    }
  }
  const auto* key = definition.if_contains("partitionKey");
  if (key != nullptr && key->is_object()) {
    const auto* paths = key->as_object().if_contains("paths");
    const auto* kind = key->as_object().if_contains("kind");
    const bool hierarchical = kind != nullptr && kind->is_string() && kind->as_string() == "MultiHash";
    if (kind != nullptr && (!kind->is_string() || (kind->as_string() != "Hash" && !hierarchical))) {
      return "partition key kind " + json::to_json(*kind) + " is not supported: use Hash (one path) or MultiHash "
             "(2 or 3 paths)";
    }
    if (paths == nullptr || !paths->is_array() || paths->as_array().empty() ||
        !std::all_of(paths->as_array().begin(), paths->as_array().end(),
                     [](const boost::json::value& path) { return path.is_string(); })) {
      return std::string("partitionKey.paths must list the key's paths, like [\"/tenant\"] (kind Hash) or "
                         "[\"/tenant\",\"/user\"] (kind MultiHash)");
    }
    const boost::json::array& listed = paths->as_array();
    if (!hierarchical && listed.size() != 1) {
      return std::string("a partition key of kind Hash has exactly one path; give kind MultiHash for a hierarchical "
                         "key of 2 or 3 paths");
    }
    // On a replace the node refuses a different definition (a container's partition key cannot change); it
    // validates the paths.
    if (hierarchical) {
      std::vector<std::string> texts;
      for (const boost::json::value& path : listed) texts.emplace_back(path.as_string());
      settings.partition_key_path = json::hierarchical_partition_key_definition(texts);
    } else {
      settings.partition_key_path = std::string(listed[0].as_string());
    }
  } else if (create) {
    return std::string("the container definition needs a partitionKey, like {\"paths\":[\"/tenant\"],\"kind\":\"Hash\"}");
  }
  // defaultTtl as written (the node validates it, with Cosmos's messages). PUT replaces the whole definition, so an
  // absent defaultTtl there turns TTL off, as in Cosmos DB.
  if (const auto* ttl = definition.if_contains("defaultTtl")) {
    settings.default_ttl = api::ContainerSettings::DefaultTtl::kSet;
    settings.default_ttl_json = json::to_json(*ttl);
  } else if (create) {
    settings.default_ttl = api::ContainerSettings::DefaultTtl::kUnchanged;
  } else {
    settings.default_ttl = api::ContainerSettings::DefaultTtl::kRemove;
  }
  settings.indexing = api::ContainerSettings::Indexing::kUnchanged;
  if (const auto* policy = definition.if_contains("indexingPolicy"); policy != nullptr && policy->is_object()) {
    const auto* mode = policy->as_object().if_contains("indexingMode");
    if (mode != nullptr && mode->is_string()) {
      const std::string text(mode->as_string());
      if (text == "none" || text == "None") {
        settings.indexing = api::ContainerSettings::Indexing::kNone;
      } else if (text == "consistent" || text == "Consistent") {
        settings.indexing = api::ContainerSettings::Indexing::kConsistent;
      } else {
        return "indexing mode '" + text + "' is not supported (consistent or none)";
      }
    }
  }
  // Mayfly's guard (docs/ttl.md, "Containers"): a defaultTtl change that would expire more than 10 % of the container's
  // items at once is refused with 412 and the figures, unless the caller says it is intended. The SDKs cannot say so
  // in the definition; they can send a header (the Python SDK: `headers={...}`, azure-core's per-call headers; its
  // replace_container drops `initial_headers`).
  if (!create) {
    const std::string_view force = http.header("x-mayfly-force-ttl-change");
    if (!force.empty()) {
      const bool is_false = force == "false" || force == "False";
      if (!header_flag(force) && !is_false) {
        return "x-mayfly-force-ttl-change must be true or false, not '" + std::string(force) + "'";
      }
      settings.force = header_flag(force);
    }
  }
  settings.throughput = api::ContainerSettings::Throughput::kUnchanged;
  uint32_t units = 0;
  if (std::optional<std::string> problem = offer_header(http, units)) return problem;
  if (units > 0) {
    if (!create) {
      return std::string("throughput cannot be changed with a container replace: replace its offer "
                         "(replace_throughput)");
    }
    settings.throughput = api::ContainerSettings::Throughput::kProvisioned;
    settings.provisioned_ru_per_second = units;
  }
  return std::nullopt;
}

// A query body {"query": "...", "parameters": [{"name": "@x", "value": ...}]} -> sql and Mayfly's parameter object.
std::optional<std::string> query_request(const HttpRequest& http, api::Query& query) {
  Result<boost::json::value> parsed = json::parse(http.body);
  std::string sql;
  std::string parameters;
  if (parsed.is_ok() && parsed->is_string()) {
    sql = parsed->as_string();
  } else if (parsed.is_ok() && parsed->is_object()) {
    const auto* text = parsed->as_object().if_contains("query");
    if (text == nullptr || !text->is_string()) return std::string("the query body needs a \"query\" string");
    sql = text->as_string();
    if (const auto* list = parsed->as_object().if_contains("parameters"); list != nullptr && !list->is_null()) {
      if (!list->is_array()) return std::string("\"parameters\" must be an array of {\"name\",\"value\"}");
      boost::json::object named;
      for (const boost::json::value& entry : list->as_array()) {
        const auto* object = entry.if_object();
        const auto* name = object ? object->if_contains("name") : nullptr;
        if (name == nullptr || !name->is_string()) return std::string("every query parameter needs a \"name\"");
        const auto* value = object->if_contains("value");
        named[name->as_string()] = value ? *value : boost::json::value(nullptr);
      }
      if (!named.empty()) parameters = json::to_json(named);
    }
  } else {
    return "the query body must be {\"query\":...,\"parameters\":[...]}" +
           (parsed.is_ok() ? std::string() : ": " + parsed.status().message());
  }
  query.sql = std::move(sql);
  query.parameters = std::move(parameters);
  const std::string_view key = http.header("x-ms-documentdb-partitionkey");
  if (!key.empty()) {
    Result<std::string> value = parse_partition_key_header(key);
    if (!value.is_ok()) return value.status().message();
    query.partition_key = std::move(value).value();
  }
  query.enable_scan = true;  // Cosmos scans a container with indexing none too
  // A feed range (query_items(feed_range=...)): the node reads only the items whose partition key hashes into it.
  const std::string_view start_epk = trim(http.header("x-ms-start-epk"));
  const std::string_view end_epk = trim(http.header("x-ms-end-epk"));
  if (!start_epk.empty() || !end_epk.empty()) {
    Result<storage::FeedRange> range = storage::parse_feed_range(start_epk, end_epk);
    if (!range.is_ok()) return range.status().message();
    if (!range->whole()) {
      query.feed_range_min = range->min;
      query.feed_range_max = range->max;
    }
  }
  return std::nullopt;
}

// Paging headers for read feeds and queries.
std::optional<std::string> page_options(const HttpRequest& http, api::Options& options) {
  Result<uint32_t> items = parse_max_item_count(http.header("x-ms-max-item-count"), kDefaultPageItems);
  if (!items.is_ok()) return items.status().message();
  options.max_items = *items;
  const std::string continuation(http.header("x-ms-continuation"));
  if (continuation.size() > 16384) return std::string("x-ms-continuation is too long");
  options.continuation = continuation;
  return std::nullopt;
}

// POST /dbs or /dbs/{db}/colls with x-ms-documentdb-isquery (query_databases, query_containers): the query and its
// paging, run by render_reply over the list the node returns.
bool is_query(const HttpRequest& http) {
  return header_flag(http.header("x-ms-documentdb-isquery")) ||
         http.header("content-type").substr(0, 22) == "application/query+json";
}

std::optional<std::string> metadata_query(const HttpRequest& http, RenderSpec& spec) {
  api::Query query;
  if (std::optional<std::string> problem = query_request(http, query)) return problem;
  if (query.partition_key || !query.feed_range_min.empty() || !query.feed_range_max.empty()) {
    return std::string("databases and containers have no partition key: query them without one");
  }
  api::Options options;
  if (std::optional<std::string> problem = page_options(http, options)) return problem;
  spec.query = RenderSpec::MetadataQuery{std::move(query.sql), std::move(query.parameters), options.max_items,
                                         options.continuation};
  return std::nullopt;
}

// GET .../docs with A-IM: the container's change feed (docs/changefeed.md, docs/cosmos.md), as the SDKs
// send it: the mode in A-IM, where to start in If-None-Match (a previous page's etag, or * for now) or
// If-Modified-Since (a time), the page size in x-ms-max-item-count; the whole container, a feed range or one partition
// key.
Plan plan_change_feed(const HttpRequest& http, api::Request& request) {
  Plan plan;
  plan.spec.shape = Shape::kChangeFeed;
  const std::string mode = lower(trim(http.header("a-im")));
  const std::string_view wire_format = trim(http.header("x-ms-cosmos-changefeed-wire-format-version"));
  if (mode == "incremental feed") {
    plan.spec.all_versions = false;
  } else if (mode == "full-fidelity feed") {
    plan.spec.all_versions = true;
  } else if (mode.empty()) {
    return bad_request("x-ms-cosmos-changefeed-wire-format-version without A-IM: a change feed request needs A-IM "
                       "'Incremental feed' (latest version) or 'Full-Fidelity Feed' (all versions and deletes)");
  } else {
    return bad_request("A-IM must be 'Incremental feed' (latest version) or 'Full-Fidelity Feed' (all versions and "
                       "deletes), not '" + std::string(http.header("a-im")) + "'");
  }
  // The all-versions body has one shape, the SDKs' current one (current/previous/metadata, 2021-09-15).
  if (plan.spec.all_versions && wire_format != "2021-09-15") {
    return answer(error_response(501, "x-ms-cosmos-changefeed-wire-format-version '" + std::string(wire_format) +
                                          "' is not supported by Mayfly's all-versions change feed (2021-09-15 is)"));
  }
  // A feed range (the SDKs send one for query_items_change_feed(partition_key=...) and (feed_range=...)), or one
  // partition key: only those items' changes.
  const std::string_view start_epk = trim(http.header("x-ms-start-epk"));
  const std::string_view end_epk = trim(http.header("x-ms-end-epk"));
  std::optional<storage::FeedRange> scope;
  if (!start_epk.empty() || !end_epk.empty()) {
    Result<storage::FeedRange> range = storage::parse_feed_range(start_epk, end_epk);
    if (!range.is_ok()) return bad_request(range.status().message());
    if (!range->whole()) scope = std::move(range).value();
  }
  if (const std::string_view key = http.header("x-ms-documentdb-partitionkey"); !key.empty()) {
    Result<std::string> value = parse_partition_key_header(key);
    if (!value.is_ok()) return bad_request(value.status().message());
    Result<std::string> canonical = storage::canonical_partition_key_text(*value);
    if (!canonical.is_ok()) return bad_request(canonical.status().message());
    Result<std::string> epk = storage::effective_partition_key(*canonical);
    if (!epk.is_ok()) return bad_request(epk.status().message());
    if (scope) {
      return bad_request("a change feed takes a partition key (x-ms-documentdb-partitionkey) or a feed range "
                         "(x-ms-start-epk / x-ms-end-epk), not both");
    }
    scope = storage::point_feed_range(*epk);
  }
  const std::string_view range = trim(http.header("x-ms-documentdb-partitionkeyrangeid"));
  if (!range.empty() && range != "0") {
    return bad_request("x-ms-documentdb-partitionkeyrangeid '" + std::string(range) +
                       "' does not exist (Mayfly has one partition key range: 0)");
  }
  api::ReadChangeFeed& feed = request.operation.emplace<api::ReadChangeFeed>();
  feed.mode = plan.spec.all_versions ? api::ReadChangeFeed::Mode::kAll : api::ReadChangeFeed::Mode::kLatest;
  feed.no_warnings = true;  // Cosmos DB's feed has no such change
  if (scope) {
    feed.feed_range_min = scope->min;
    feed.feed_range_max = scope->max;
  }
  // The continuation travels as the etag: quoted, as the SDKs send an etag back.
  std::string_view etag = trim(http.header("if-none-match"));
  const std::string_view since = trim(http.header("if-modified-since"));
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  if (etag == "*") {
    feed.from = api::ReadChangeFeed::From::kNow;
  } else if (!etag.empty()) {
    if (etag.size() > 16384) return bad_request("If-None-Match (the change feed continuation) is too long");
    for (char c : etag) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
        return bad_request("If-None-Match must be a change feed page's etag (its continuation) or *, not '" +
                           std::string(http.header("if-none-match")).substr(0, 200) + "'");
      }
    }
    feed.from = api::ReadChangeFeed::From::kContinuation;
    feed.continuation = std::string(etag);
  } else if (!since.empty()) {
    Result<int64_t> seconds = parse_http_date(since);
    if (!seconds.is_ok()) {
      return bad_request("If-Modified-Since (the change feed start time) must be an RFC 1123 date like "
                         "'Tue, 24 Nov 2026 11:00:00 GMT', not '" + std::string(since).substr(0, 200) + "'");
    }
    feed.from = api::ReadChangeFeed::From::kTime;
    feed.time_micros = *seconds * 1'000'000;
  } else {
    feed.from = api::ReadChangeFeed::From::kBeginning;
  }
  Result<uint32_t> items = parse_max_item_count(http.header("x-ms-max-item-count"), kDefaultPageItems);
  if (!items.is_ok()) return bad_request(items.status().message());
  feed.max_items = *items;
  return plan;
}

Plan plan_items(const HttpRequest& http, const Route& route, api::Request& request) {
  const std::string& method = http.method;
  Plan plan;
  plan.spec.shape = Shape::kItem;
  std::optional<std::string> problem;
  if (route.kind == Route::Kind::kItems) {
    if (method == "POST") {
      if (header_flag(http.header("x-ms-cosmos-is-batch-request"))) {
        // A transactional batch: the JSON array of operations, all on the partition in the header.
        const std::string_view atomic = http.header("x-ms-cosmos-batch-atomic");
        if (!atomic.empty() && !header_flag(atomic)) {
          return answer(error_response(501, "bulk (a non-atomic batch, x-ms-cosmos-batch-atomic: false) is not "
                                            "supported by Mayfly yet: send transactional batches, or the "
                                            "operations one by one"));
        }
        const std::string_view key = http.header("x-ms-documentdb-partitionkey");
        if (key.empty()) return bad_request("a transactional batch needs its partition key (x-ms-documentdb-partitionkey)");
        Result<std::string> value = parse_partition_key_header(key);
        if (!value.is_ok()) return bad_request(value.status().message());
        request.operation = api::ExecuteBatch{std::move(value).value(), http.body};
        plan.spec.shape = Shape::kBatch;
        return plan;
      }
      if (header_flag(http.header("x-ms-cosmos-is-query-plan-request"))) {
        return answer(error_response(400, "query plans are not needed: Mayfly answers every query completely "
                                          "(filters, ORDER BY, aggregates, TOP, paging) on the server"));
      }
      if (is_query(http)) {
        problem = query_request(http, request.operation.emplace<api::Query>());
        if (!problem) problem = page_options(http, request.options);
        plan.spec.shape = Shape::kItems;
      } else if (header_flag(http.header("x-ms-documentdb-is-upsert"))) {
        request.operation = api::UpsertItem{http.body};
      } else {
        request.operation = api::CreateItem{http.body};
      }
    } else if (method == "GET") {
      if (!http.header("a-im").empty() || !http.header("x-ms-cosmos-changefeed-wire-format-version").empty()) {
        Plan feed = plan_change_feed(http, request);
        if (feed.answer) return feed;
        plan.spec = feed.spec;
        return plan;
      }
      const std::string_view key = http.header("x-ms-documentdb-partitionkey");
      api::ListItems& list = request.operation.emplace<api::ListItems>();
      if (!key.empty()) {
        Result<std::string> value = parse_partition_key_header(key);
        if (!value.is_ok()) return bad_request(value.status().message());
        list.partition_key = std::move(value).value();
      }
      problem = page_options(http, request.options);
      plan.spec.shape = Shape::kItems;
    } else {
      return method_not_allowed(http, "a container's items (docs)");
    }
  } else {
    const std::string_view key_header = http.header("x-ms-documentdb-partitionkey");
    std::string key;
    if (method != "PUT") {
      if (key_header.empty()) {
        return bad_request("x-ms-documentdb-partitionkey is required to " + method + " item '" + route.id + "'");
      }
      Result<std::string> value = parse_partition_key_header(key_header);
      if (!value.is_ok()) return bad_request(value.status().message());
      key = std::move(value).value();
    }
    if (method == "GET") {
      request.operation = api::ReadItem{key, route.id};
    } else if (method == "DELETE") {
      request.operation = api::DeleteItem{key, route.id};
    } else if (method == "PUT") {
      Result<boost::json::object> item = parse_object(http.body, "the item");
      if (!item.is_ok()) return bad_request(item.status().message());
      const auto* id = item->if_contains("id");
      if (id == nullptr || !id->is_string() || id->as_string() != route.id) {
        return bad_request("the replacement's \"id\" must be '" + route.id + "', the id in the path");
      }
      request.operation = api::ReplaceItem{http.body};
    } else if (method == "PATCH") {
      Result<boost::json::object> patch = parse_object(http.body, "the patch");
      if (!patch.is_ok()) return bad_request(patch.status().message());
      std::string condition;  // the SDKs' filter_predicate: "from c where ..." (node/patch_condition.h)
      if (const auto* given = patch->if_contains("condition"); given != nullptr && !given->is_null()) {
        if (!given->is_string() || given->as_string().empty()) {
          return bad_request("the patch's \"condition\" must be a filter predicate like \"from c where c.n > 1\"");
        }
        condition = std::string(given->as_string());
      }
      const auto* operations = patch->if_contains("operations");
      if (operations == nullptr || !operations->is_array()) {
        return bad_request("the patch body needs \"operations\": [{\"op\",\"path\",\"value\"}, ...]");
      }
      request.operation = api::PatchItem{key, route.id, json::to_json(*operations), std::move(condition)};
    } else {
      return method_not_allowed(http, "an item");
    }
  }
  if (problem) return bad_request(*problem);
  return plan;
}

}  // namespace

HttpResponse error_response(int status, std::string_view message, int substatus) {
  HttpResponse response;
  response.status = status;
  response.body = std::string("{\"code\":\"") + status_name(status) + "\",\"message\":" + json_string(message) + "}";
  if (substatus != 0) response.headers.emplace_back("x-ms-substatus", std::to_string(substatus));
  return response;
}

Plan plan_request(const HttpRequest& http) {
  Result<Route> parsed = parse_route(http.target);
  if (!parsed.is_ok()) return bad_request(parsed.status().message());
  // Cosmos binary JSON (the Rust SDK's default for item writes) starts with 0x80, which no JSON text does.
  if (!http.body.empty() && static_cast<unsigned char>(http.body[0]) == 0x80) {
    return bad_request("the request body is Cosmos binary JSON, which Mayfly does not read: turn the SDK's binary "
                       "encoding off (Rust SDK: BinaryEncodingOptions::new().with_enabled(false), or "
                       "AZURE_COSMOS_BINARY_ENCODING_ENABLED=false)");
  }
  const Route& route = *parsed;
  if (route.kind == Route::Kind::kUnsupported) {
    return answer(error_response(501, route.feature + " are not supported by Mayfly (see docs/cosmos.md, \"Use your Cosmos "
                                                     "DB SDK\", compatibility)"));
  }
  const std::string& method = http.method;
  api::Request request;
  bool authenticate_only = false;
  Plan plan;
  plan.spec.route = route;
  plan.spec.host = http.header("host");
  if (std::optional<std::string> problem = common_options(http, route, request)) return bad_request(*problem);
  switch (route.kind) {
    case Route::Kind::kAccount:
      if (method != "GET") return method_not_allowed(http, "the database account");
      plan.spec.shape = Shape::kAccount;
      authenticate_only = true;
      break;
    case Route::Kind::kDatabases:
      if (method == "GET") {
        request.operation = api::ListDatabases{};
        plan.spec.shape = Shape::kDatabases;
      } else if (method == "POST" && is_query(http)) {
        if (std::optional<std::string> problem = metadata_query(http, plan.spec)) return bad_request(*problem);
        request.operation = api::ListDatabases{};
        plan.spec.shape = Shape::kDatabases;
      } else if (method == "POST") {
        Result<boost::json::object> body = parse_object(http.body, "the database definition");
        if (!body.is_ok()) return bad_request(body.status().message());
        const auto* id = body->if_contains("id");
        if (id == nullptr || !id->is_string() || id->as_string().empty()) {
          return bad_request("the database definition needs an \"id\"");
        }
        // With an offer: throughput its containers share (those created without their own).
        uint32_t shared = 0;
        if (std::optional<std::string> problem = offer_header(http, shared)) return bad_request(*problem);
        plan.spec.route.database = id->as_string();
        request.database = plan.spec.route.database;
        request.operation = api::CreateDatabase{shared};
        plan.spec.shape = Shape::kDatabaseWritten;
      } else {
        return method_not_allowed(http, "/dbs");
      }
      break;
    case Route::Kind::kDatabase:
      if (method == "GET") {
        request.operation = api::ListDatabases{};
        plan.spec.shape = Shape::kDatabase;
      } else if (method == "DELETE") {
        request.operation = api::DeleteDatabase{};
        plan.spec.shape = Shape::kDatabaseWritten;
      } else {
        return method_not_allowed(http, "a database");
      }
      break;
    case Route::Kind::kContainers:
      if (method == "GET") {
        request.operation = api::ListContainers{};
        plan.spec.shape = Shape::kContainers;
      } else if (method == "POST" && is_query(http)) {
        if (std::optional<std::string> problem = metadata_query(http, plan.spec)) return bad_request(*problem);
        request.operation = api::ListContainers{};
        plan.spec.shape = Shape::kContainers;
      } else if (method == "POST") {
        Result<boost::json::object> body = parse_object(http.body, "the container definition");
        if (!body.is_ok()) return bad_request(body.status().message());
        const auto* id = body->if_contains("id");
        if (id == nullptr || !id->is_string() || id->as_string().empty()) {
          return bad_request("the container definition needs an \"id\"");
        }
        plan.spec.route.container = id->as_string();
        request.container = plan.spec.route.container;
        if (std::optional<std::string> problem =
                container_settings(http, *body, true, request.operation.emplace<api::CreateContainer>().settings)) {
          return problem->find("not supported") != std::string::npos ? answer(error_response(501, *problem))
                                                                      : bad_request(*problem);
        }
        plan.spec.shape = Shape::kContainer;
      } else {
        return method_not_allowed(http, "a database's containers (colls)");
      }
      break;
    case Route::Kind::kContainer:
      plan.spec.shape = Shape::kContainer;
      if (method == "GET") {
        request.operation = api::GetContainer{};
      } else if (method == "DELETE") {
        request.operation = api::DeleteContainer{};
      } else if (method == "PUT") {
        Result<boost::json::object> body = parse_object(http.body, "the container definition");
        if (!body.is_ok()) return bad_request(body.status().message());
        const auto* id = body->if_contains("id");
        if (id != nullptr && (!id->is_string() || id->as_string() != route.container)) {
          return bad_request("the definition's \"id\" must be '" + route.container + "', the id in the path");
        }
        if (std::optional<std::string> problem =
                container_settings(http, *body, false, request.operation.emplace<api::UpdateContainer>().settings)) {
          return problem->find("not supported") != std::string::npos ? answer(error_response(501, *problem))
                                                                      : bad_request(*problem);
        }
      } else {
        return method_not_allowed(http, "a container");
      }
      break;
    case Route::Kind::kPartitionKeyRanges:
      if (method != "GET") return method_not_allowed(http, "partition key ranges");
      if (!route.id.empty() && route.id != "0") {
        return answer(error_response(404, "partition key range '" + route.id + "' does not exist (there is one: 0)"));
      }
      request.operation = api::GetContainer{};  // the container must exist
      plan.spec.shape = Shape::kPartitionKeyRanges;
      plan.spec.if_none_match = http.header("if-none-match");
      break;
    case Route::Kind::kItems:
    case Route::Kind::kItem: {
      Plan items = plan_items(http, route, request);
      if (items.answer) return items;
      plan.spec.shape = items.spec.shape;
      plan.spec.all_versions = items.spec.all_versions;
      // The SDKs' no_response_on_write / EnableContentResponseOnWrite=false: an item write answers without its body.
      plan.spec.minimal = items.spec.shape == Shape::kItem && method != "GET" && method != "DELETE" &&
                          lower(http.header("prefer")).find("return=minimal") != std::string::npos;
      break;
    }
    case Route::Kind::kConflicts:
      // Mayfly has one write region: there are never conflicts to list, query or read (Cosmos's conflict feed).
      if (method != "GET" && !(method == "POST" && is_query(http))) {
        return method_not_allowed(http, "a container's conflicts (list or query them)");
      }
      request.operation = api::GetContainer{};  // the container must exist
      plan.spec.shape = Shape::kConflicts;
      break;
    case Route::Kind::kConflict:
      if (method != "GET" && method != "DELETE") return method_not_allowed(http, "a conflict (read or delete it)");
      return answer(error_response(404, "conflict '" + route.id + "' does not exist: Mayfly has one write region, so "
                                        "it never has conflicts"));
    case Route::Kind::kHolds: {
      // Mayfly's legal holds (docs/retention.md): GET lists the container's (x-mayfly-include-released: true for the
      // released ones too); POST {"id","reason","partitionKey"?,"itemId"?} sets one. Compliance or admin keys.
      if (method == "GET") {
        request.operation = api::ListHolds{lower(http.header("x-mayfly-include-released")) == "true"};
      } else if (method == "POST") {
        Result<boost::json::object> body = parse_object(http.body, "a hold");
        if (!body.is_ok()) return bad_request(body.status().message());
        api::SetHold hold;
        const boost::json::value* id = body->if_contains("id");
        const boost::json::value* reason = body->if_contains("reason");
        const boost::json::value* key = body->if_contains("partitionKey");
        const boost::json::value* item = body->if_contains("itemId");
        if (id == nullptr || !id->is_string()) return bad_request("a hold needs \"id\", a string");
        if (reason == nullptr || !reason->is_string()) return bad_request("a hold needs \"reason\", a string");
        if (item != nullptr && !item->is_string()) return bad_request("a hold's \"itemId\" must be a string");
        if (item != nullptr && key == nullptr) return bad_request("an item hold needs the item's \"partitionKey\"");
        hold.id = std::string(id->as_string());
        hold.reason = std::string(reason->as_string());
        if (key != nullptr) {
          hold.partition_key = json::to_json(*key);
          hold.scope = api::SetHold::Scope::kPartition;
        }
        if (item != nullptr) {
          hold.item_id = std::string(item->as_string());
          hold.scope = api::SetHold::Scope::kItem;
        }
        request.operation = std::move(hold);
      } else {
        return method_not_allowed(http, "a container's legal holds (list: GET, set: POST)");
      }
      plan.spec.shape = Shape::kBatch;  // the node's body as it is
      break;
    }
    case Route::Kind::kHold:
      // DELETE releases it; the reason in x-mayfly-reason.
      if (method != "DELETE") return method_not_allowed(http, "a legal hold (release: DELETE)");
      request.operation = api::ReleaseHold{route.id, std::string(http.header("x-mayfly-reason")), ""};
      plan.spec.shape = Shape::kBatch;
      break;
    case Route::Kind::kPartitionKeyDelete: {
      // delete_all_items_by_partition_key: every item of the partition in the header, at once (docs/retention.md).
      if (method != "POST") return method_not_allowed(http, "delete by partition key (POST)");
      const std::string_view key = http.header("x-ms-documentdb-partitionkey");
      if (key.empty()) return bad_request("a delete by partition key needs the partition key (x-ms-documentdb-partitionkey)");
      Result<std::string> value = parse_partition_key_header(key);
      if (!value.is_ok()) return bad_request(value.status().message());
      request.operation = api::DeletePartition{std::move(value).value()};
      plan.spec.shape = Shape::kBatch;  // the node's body as it is: {"partitionKey":…,"deletedTs":…}
      break;
    }
    case Route::Kind::kOffers:
      if (method == "GET" || (method == "POST" && is_query(http))) {
        if (method == "POST") {
          if (std::optional<std::string> problem = metadata_query(http, plan.spec)) return bad_request(*problem);
        }
        request.operation = api::ListOffers{};
        plan.spec.shape = Shape::kOffers;
      } else {
        return method_not_allowed(http, "offers (an offer is created with its database or container)");
      }
      break;
    case Route::Kind::kOffer:
      if (method == "GET") {
        request.operation = api::ListOffers{};
        plan.spec.shape = Shape::kOffer;
      } else if (method == "PUT") {
        if (std::optional<std::string> problem = offer_replacement(http, route, request, plan.spec.route)) {
          return problem->find("not supported") != std::string::npos ? answer(error_response(501, *problem))
                                                                      : bad_request(*problem);
        }
        plan.spec.shape = Shape::kOfferWritten;
      } else {
        return method_not_allowed(http, "an offer (read it or replace its throughput)");
      }
      break;
    case Route::Kind::kUnsupported: break;
  }
  if (!authenticate_only) plan.call.request = std::move(request);
  return plan;
}

std::string offer_id(std::string_view resource_link) {
  // 4 bytes of a hash of the link in the resource-id alphabet (format_database_rid hashes any name the same way).
  return storage::format_database_rid(resource_link);
}

}  // namespace mayfly::gateway
