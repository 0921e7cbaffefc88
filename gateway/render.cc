// render_reply (gateway/translate.h): a node Reply -> the Cosmos DB REST answer.
#include <cstdio>
#include <optional>
#include <random>

#include "gateway/translate.h"
#include "query/executor.h"
#include "storage/document.h"
#include "storage/json.h"

namespace mayfly::gateway {
namespace {

using Shape = RenderSpec::Shape;

// The one partition key range never changes, so its etag is a constant: a client that sends it back in
// If-None-Match gets 304 (without which the SDKs re-read the ranges forever).
constexpr std::string_view kRangesEtag = "\"mayfly-pkranges-1\"";

// The Cosmos emulator's query engine limits, as the JSON *string* the SDKs expect.
constexpr std::string_view kQueryEngineConfiguration =
    R"({\"maxSqlQueryInputLength\":262144,\"maxJoinsPerSqlQuery\":5,\"maxLogicalAndPerSqlQuery\":500,)"
    R"(\"maxLogicalOrPerSqlQuery\":500,\"maxUdfRefPerSqlQuery\":10,\"maxInExpressionItemsCount\":16000,)"
    R"(\"queryMaxInMemorySortDocumentCount\":500,\"maxQueryRequestTimeoutFraction\":0.9,)"
    R"(\"sqlAllowNonFiniteNumbers\":false,\"sqlAllowAggregateFunctions\":true,\"sqlAllowSubQuery\":false,)"
    R"(\"sqlAllowScalarSubQuery\":false,\"allowNewKeywords\":true,\"sqlAllowLike\":false,)"
    R"(\"sqlAllowGroupByClause\":false,\"maxSpatialQueryCells\":12,\"spatialMaxGeometryPointCount\":256,)"
    R"(\"sqlAllowTop\":true,\"enableSpatialIndexing\":false})";

std::string activity_id() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const uint64_t high = random();
  const uint64_t low = random();
  char text[40];
  std::snprintf(text, sizeof text, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(high >> 32),
                static_cast<unsigned>((high >> 16) & 0xffff), static_cast<unsigned>(high & 0xfff),
                static_cast<unsigned>(0x8000 | ((low >> 48) & 0x3fff)),
                static_cast<unsigned long long>(low & 0xffffffffffffULL));
  return text;
}

std::string container_link(const Route& route) { return "dbs/" + route.database + "/colls/" + route.container; }

// Adds the Cosmos system links to a container definition from the node.
void decorate_container(boost::json::object& container, const Route& route) {
  const std::string id = container.contains("id") && container["id"].is_string()
                             ? std::string(container["id"].as_string())
                             : route.container;
  container["_self"] = "dbs/" + route.database + "/colls/" + id + "/";
  container["_docs"] = "docs/";
  container["_sprocs"] = "sprocs/";
  container["_triggers"] = "triggers/";
  container["_udfs"] = "udfs/";
  container["_conflicts"] = "conflicts/";
  if (auto* key = container.if_contains("partitionKey"); key != nullptr && key->is_object()) {
    key->as_object()["version"] = 2;
  }
}

boost::json::object database_entry(std::string_view name) {
  boost::json::object db;
  db["id"] = name;
  db["_rid"] = storage::format_database_rid(name);
  db["_self"] = "dbs/" + std::string(name) + "/";
  db["_etag"] = "\"0\"";
  db["_colls"] = "colls/";
  db["_users"] = "users/";
  db["_ts"] = 0;
  return db;
}

std::string feed(std::string_view kind, const boost::json::array& entries) {
  return "{\"_rid\":\"\",\"" + std::string(kind) + "\":" + json::to_json(entries) +
         ",\"_count\":" + std::to_string(entries.size()) + "}";
}

// A list of databases or containers as a feed page: all of them, or what spec.query selects from them (query_databases,
// query_containers). A bad query is a 400 with the query engine's message.
void list_page(const RenderSpec& spec, std::string_view kind, boost::json::array entries, HttpResponse& response) {
  if (!spec.query) {
    response.headers.emplace_back("x-ms-item-count", std::to_string(entries.size()));
    response.body = feed(kind, entries);
    return;
  }
  std::vector<boost::json::value> documents(entries.begin(), entries.end());
  storage::OpResult page = query::query_documents(std::string(kind) + "/" + spec.route.database, spec.query->sql,
                                                  spec.query->parameters, std::move(documents),
                                                  spec.query->max_items, spec.query->continuation);
  if (!page.ok()) {
    response = error_response(page.http_status(), page.message);
    return;
  }
  Result<boost::json::value> rows = json::parse(page.body);
  const size_t count = rows.is_ok() && rows->is_array() ? rows->as_array().size() : 0;
  response.body = "{\"_rid\":\"\",\"" + std::string(kind) + "\":" + page.body + ",\"_count\":" + std::to_string(count) + "}";
  response.headers.emplace_back("x-ms-item-count", std::to_string(count));
  if (!page.continuation.empty()) response.headers.emplace_back("x-ms-continuation", page.continuation);
}

// A Cosmos offer (throughput) of a database or a container. `resource` is the resource's `_self` (name-based, as
// Mayfly's links are), which is what the SDKs' get_throughput queries by.
boost::json::object offer_entry(std::string_view database, std::optional<std::string_view> container,
                                std::string_view rid, int64_t throughput, int64_t ts_seconds) {
  std::string link = "dbs/" + std::string(database);
  if (container) link += "/colls/" + std::string(*container);
  const std::string id = offer_id(link);
  boost::json::object offer;
  offer["id"] = id;
  offer["_rid"] = id;
  offer["_self"] = "offers/" + id + "/";
  offer["_etag"] = "\"" + std::to_string(ts_seconds) + "\"";
  offer["_ts"] = ts_seconds;
  offer["offerVersion"] = "V2";
  offer["offerType"] = "Invalid";
  offer["resource"] = link + "/";
  offer["offerResourceId"] = rid;
  boost::json::object content;
  content["offerThroughput"] = throughput;
  content["offerIsRUPerMinuteThroughputEnabled"] = false;
  offer["content"] = std::move(content);
  return offer;
}

// The node's offer list (store_reader.h list_offers) as Cosmos offers; nullopt when it does not decode.
std::optional<boost::json::array> offer_entries(const std::string& body) {
  Result<boost::json::value> parsed = json::parse(body);
  if (!parsed.is_ok() || !parsed->is_array()) return std::nullopt;
  boost::json::array offers;
  for (const auto& entry : parsed->as_array()) {
    const boost::json::object* object = entry.if_object();
    if (object == nullptr) return std::nullopt;
    const auto* database = object->if_contains("database");
    const auto* container = object->if_contains("container");
    const auto* rid = object->if_contains("rid");
    const auto* throughput = object->if_contains("throughput");
    const auto* ts = object->if_contains("ts");
    if (database == nullptr || !database->is_string() || rid == nullptr || !rid->is_string() ||
        throughput == nullptr || !throughput->is_int64() || ts == nullptr || !ts->is_int64() ||
        (container != nullptr && !container->is_string())) {
      return std::nullopt;
    }
    std::optional<std::string_view> container_name;
    if (container != nullptr) container_name = container->as_string();
    offers.push_back(offer_entry(database->as_string(), container_name, rid->as_string(), throughput->as_int64(),
                                 ts->as_int64()));
  }
  return offers;
}

// An item from the node is one compact JSON object: `_self` and `_attachments` go in before its closing brace, so a
// large item is not parsed again.
std::string decorate_item(const std::string& body, const Route& route, std::string_view id) {
  if (body.size() < 2 || body.back() != '}') return body;
  std::string out = body.substr(0, body.size() - 1);
  out += ",\"_self\":";
  json::write_json_string(container_link(route) + "/docs/" + std::string(id) + "/", out);
  out += ",\"_attachments\":\"attachments/\"}";
  return out;
}

// A created or upserted item's id (not in the path): from the body.
std::string item_id(const std::string& body) {
  Result<boost::json::value> parsed = json::parse(body);
  if (!parsed.is_ok() || !parsed->is_object()) return std::string();
  const auto* id = parsed->as_object().if_contains("id");
  return id != nullptr && id->is_string() ? std::string(id->as_string()) : std::string();
}

// The account. It lists one region, this node's own address as the client reached it (Host, scheme): the SDKs then
// keep sending everything there, and code that reads writableLocations[0] (the azure-cosmos test suite does) finds it.
std::string account_body(const RenderSpec& spec) {
  std::string location = "[{\"name\":\"local\",\"databaseAccountEndpoint\":";
  json::write_json_string(std::string(spec.https ? "https://" : "http://") + spec.host + "/", location);
  location += "}]";
  return std::string(R"({"_self":"","id":"mayfly","_rid":"mayfly","media":"//media/","addresses":"//addresses/",)") +
         R"("_dbs":"//dbs/","writableLocations":)" + location + R"(,"readableLocations":)" + location +
         R"(,"enableMultipleWriteLocations":false,)" +
         R"("userReplicationPolicy":{"asyncReplication":false,"minReplicaSetSize":1,"maxReplicasetSize":4},)" +
         R"("userConsistencyPolicy":{"defaultConsistencyLevel":"Session"},)" +
         R"("systemReplicationPolicy":{"minReplicaSetSize":1,"maxReplicasetSize":4},)" +
         R"("readPolicy":{"primaryReadCoefficient":1,"secondaryReadCoefficient":1},)" +
         R"("queryEngineConfiguration":")" + std::string(kQueryEngineConfiguration) + "\"}";
}

// An item image from the node's change feed page as the gateway's item reads show it (_self, _attachments), with the
// change's log index as _lsn (a previous image: without, its own index is not kept). nullptr when the change has no
// such image (a delete's current one, a create's previous one).
const boost::json::object* decorate_image(boost::json::value& image, const Route& route, std::optional<uint64_t> lsn) {
  boost::json::object* object = image.if_object();
  if (object == nullptr) return nullptr;
  const boost::json::value* id = object->if_contains("id");
  const std::string text_id = id != nullptr && id->is_string() ? std::string(id->as_string()) : std::string();
  (*object)["_self"] = container_link(route) + "/docs/" + text_id + "/";
  (*object)["_attachments"] = "attachments/";
  if (lsn) (*object)["_lsn"] = *lsn;
  return object;
}

// A change feed page (node body {"changes":[...],"partitionKeyPath":...,"continuation":...,"caughtUp":bool}) as a
// Cosmos feed page. The continuation is the page's etag (the SDKs send it back in If-None-Match); a caught-up page
// without changes is 304 Not Modified, which is how the SDKs know to stop (and poll later with that etag).
std::optional<std::string> change_feed_body(const RenderSpec& spec, const storage::OpResult& result,
                                            HttpResponse& response) {
  Result<boost::json::value> parsed = json::parse(result.body);
  if (!parsed.is_ok() || !parsed->is_object()) return "the node's change feed page did not decode";
  boost::json::object& page = parsed->as_object();
  boost::json::value* changes = page.if_contains("changes");
  const boost::json::value* continuation = page.if_contains("continuation");
  const boost::json::value* caught_up = page.if_contains("caughtUp");
  if (changes == nullptr || !changes->is_array() || continuation == nullptr || !continuation->is_string() ||
      caught_up == nullptr || !caught_up->is_bool()) {
    return "the node's change feed page did not decode";
  }
  // Deletes name their partition key as Cosmos does, {"<property>": value} ("/tenant" -> "tenant"); a hierarchical
  // key names each of its paths.
  std::vector<std::string> key_properties;
  if (const auto* path = page.if_contains("partitionKeyPath"); path != nullptr && path->is_string()) {
    for (std::string property : json::partition_key_paths(path->as_string())) {
      if (!property.empty() && property.front() == '/') property.erase(0, 1);
      key_properties.push_back(std::move(property));
    }
  }
  boost::json::array documents;
  for (boost::json::value& entry : changes->as_array()) {
    boost::json::object* change = entry.if_object();
    if (change == nullptr) return "the node's change feed page did not decode";
    const boost::json::value* lsn_value = change->if_contains("lsn");
    std::optional<uint64_t> lsn;  // left out by the node when it is not known
    if (lsn_value != nullptr && lsn_value->is_uint64()) lsn = lsn_value->as_uint64();
    if (lsn_value != nullptr && lsn_value->is_int64()) lsn = static_cast<uint64_t>(lsn_value->as_int64());
    boost::json::value current = change->contains("current") ? change->at("current") : boost::json::value(nullptr);
    if (!spec.all_versions) {
      // Latest version: the item as it is now (the node sends only changes whose version is current and live).
      if (decorate_image(current, spec.route, lsn) == nullptr) continue;
      documents.push_back(std::move(current));
      continue;
    }
    boost::json::value previous = change->contains("previous") ? change->at("previous") : boost::json::value(nullptr);
    boost::json::object metadata;
    const boost::json::value* operation = change->if_contains("operationType");
    metadata["operationType"] = operation != nullptr ? *operation : boost::json::value("unknown");
    if (lsn) metadata["lsn"] = *lsn;
    if (const auto* ts = change->if_contains("ts")) metadata["crts"] = *ts;
    decorate_image(previous, spec.route, std::nullopt);
    const bool is_delete = operation != nullptr && operation->is_string() && operation->as_string() == "delete";
    if (is_delete) {
      if (const auto* id = change->if_contains("id")) metadata["id"] = *id;
      if (const auto* key = change->if_contains("partitionKey"); key != nullptr && !key_properties.empty()) {
        boost::json::object named;
        if (key_properties.size() == 1) {
          named[key_properties[0]] = *key;
        } else if (key->is_array() && key->as_array().size() == key_properties.size()) {
          for (size_t i = 0; i < key_properties.size(); ++i) named[key_properties[i]] = key->as_array()[i];
        }
        metadata["partitionKey"] = std::move(named);
      }
    }
    if (const auto* expired = change->if_contains("timeToLiveExpired"); expired != nullptr && expired->is_bool()) {
      metadata["timeToLiveExpired"] = expired->as_bool();
    }
    boost::json::object document;
    if (decorate_image(current, spec.route, lsn) != nullptr) {
      document["current"] = std::move(current);
    } else {
      document["current"] = boost::json::object();  // a delete: Cosmos sends an empty current image
    }
    if (previous.is_object()) document["previous"] = std::move(previous);
    document["metadata"] = std::move(metadata);
    documents.push_back(std::move(document));
  }
  const std::string etag = "\"" + std::string(continuation->as_string()) + "\"";
  response.headers.emplace_back("etag", etag);
  if (documents.empty() && caught_up->as_bool()) {
    response.status = 304;  // nothing new: the SDKs end the iteration and keep this etag
    return std::nullopt;
  }
  response.headers.emplace_back("x-ms-item-count", std::to_string(documents.size()));
  response.body = feed("Documents", documents);
  return std::nullopt;
}

// The body of a successful answer, by shape; an error message when the node's body does not decode.
std::optional<std::string> success_body(const RenderSpec& spec, const node::Reply& reply, HttpResponse& response) {
  const storage::OpResult& result = reply.result;
  const Route& route = spec.route;
  auto parsed_array = [&]() -> std::optional<boost::json::array> {
    Result<boost::json::value> parsed = json::parse(result.body);
    if (!parsed.is_ok() || !parsed->is_array()) return std::nullopt;
    return std::move(parsed->as_array());
  };
  switch (spec.shape) {
    case Shape::kAccount: response.body = account_body(spec); return std::nullopt;
    case Shape::kDatabases: {
      std::optional<boost::json::array> names = parsed_array();
      if (!names) return "the node's database list did not decode";
      boost::json::array entries;
      for (const auto& name : *names) {
        if (name.is_string()) entries.push_back(database_entry(name.as_string()));
      }
      list_page(spec, "Databases", std::move(entries), response);
      return std::nullopt;
    }
    case Shape::kDatabase: {
      std::optional<boost::json::array> names = parsed_array();
      if (!names) return "the node's database list did not decode";
      for (const auto& name : *names) {
        if (name.is_string() && name.as_string() == route.database) {
          response.body = json::to_json(database_entry(route.database));
          return std::nullopt;
        }
      }
      response = error_response(404, "database '" + route.database + "' does not exist");
      return std::nullopt;
    }
    case Shape::kDatabaseWritten:
      if (response.status != 204) response.body = json::to_json(database_entry(route.database));
      return std::nullopt;
    case Shape::kContainers: {
      std::optional<boost::json::array> containers = parsed_array();
      if (!containers) return "the node's container list did not decode";
      for (auto& entry : *containers) {
        if (entry.is_object()) decorate_container(entry.as_object(), route);
      }
      list_page(spec, "DocumentCollections", std::move(*containers), response);
      return std::nullopt;
    }
    case Shape::kContainer: {
      if (response.status == 204) return std::nullopt;
      Result<boost::json::value> parsed = json::parse(result.body);
      if (!parsed.is_ok() || !parsed->is_object()) return "the node's container did not decode";
      decorate_container(parsed->as_object(), route);
      response.body = json::to_json(*parsed);
      return std::nullopt;
    }
    case Shape::kConflicts:
      response.headers.emplace_back("x-ms-item-count", "0");
      response.body = feed("Conflicts", boost::json::array());
      return std::nullopt;
    case Shape::kPartitionKeyRanges:
      if (spec.if_none_match == kRangesEtag) {
        response.status = 304;
        return std::nullopt;
      }
      response.body = R"({"_rid":"","PartitionKeyRanges":[{"id":"0","_rid":"0","minInclusive":"","maxExclusive":"FF",)"
                      R"("ridPrefix":0,"throughputFraction":1.0,"status":"online","parents":[],"_etag":)" +
                      std::string(kRangesEtag) + R"(}],"_count":1})";
      response.headers.emplace_back("x-ms-item-count", "1");
      return std::nullopt;
    case Shape::kItem: {
      if (response.status == 204) return std::nullopt;
      if (spec.minimal) return std::nullopt;  // a write with Prefer: return=minimal: its headers only
      const std::string id = route.id.empty() ? item_id(result.body) : route.id;
      response.body = decorate_item(result.body, route, id);
      return std::nullopt;
    }
    case Shape::kItems: {
      std::optional<boost::json::array> documents = parsed_array();
      if (!documents) return "the node's page did not decode";
      // Whole items (a read feed, SELECT * or SELECT VALUE c: every system property the node renders) carry `_self`
      // and `_attachments` as an item read shows them; projections are left as they are.
      bool decorated = false;
      for (boost::json::value& document : *documents) {
        const boost::json::object* object = document.if_object();
        if (object == nullptr || object->contains("_self")) continue;
        const auto* id = object->if_contains("id");
        if (id == nullptr || !id->is_string() || !object->contains("_rid") || !object->contains("_etag") ||
            !object->contains("_ts")) {
          continue;
        }
        decorate_image(document, route, std::nullopt);
        decorated = true;
      }
      response.body = "{\"_rid\":\"\",\"Documents\":" + (decorated ? json::to_json(*documents) : result.body) +
                      ",\"_count\":" + std::to_string(documents->size()) + "}";
      response.headers.emplace_back("x-ms-item-count", std::to_string(documents->size()));
      if (!result.continuation.empty()) response.headers.emplace_back("x-ms-continuation", result.continuation);
      return std::nullopt;
    }
    case Shape::kChangeFeed: return change_feed_body(spec, result, response);
    case Shape::kBatch: response.body = result.body; return std::nullopt;
    case Shape::kOffers: {
      std::optional<boost::json::array> offers = offer_entries(result.body);
      if (!offers) return "the node's offer list did not decode";
      list_page(spec, "Offers", std::move(*offers), response);
      return std::nullopt;
    }
    case Shape::kOffer: {
      std::optional<boost::json::array> offers = offer_entries(result.body);
      if (!offers) return "the node's offer list did not decode";
      for (const auto& offer : *offers) {
        if (offer.as_object().at("id").as_string() == route.id) {
          response.body = json::to_json(offer);
          return std::nullopt;
        }
      }
      response = error_response(404, "offer '" + route.id + "' does not exist");
      return std::nullopt;
    }
    case Shape::kOfferWritten: {
      // The node answered the database's update ({"id","throughput"}) or the container's (its definition).
      Result<boost::json::value> parsed = json::parse(result.body);
      if (!parsed.is_ok() || !parsed->is_object()) return "the node's answer did not decode";
      const boost::json::object& body = parsed->as_object();
      int64_t throughput = 0;
      std::string rid;
      if (route.container.empty()) {
        const auto* figure = body.if_contains("throughput");
        if (figure == nullptr || !figure->is_int64()) return "the node's answer did not decode";
        throughput = figure->as_int64();
        rid = storage::format_database_rid(route.database);
      } else {
        const auto* mode = body.if_contains("throughput");
        const auto* figure = mode != nullptr && mode->is_object() ? mode->as_object().if_contains("requestUnitsPerSecond")
                                                                   : nullptr;
        const auto* own_rid = body.if_contains("_rid");
        if (figure == nullptr || !figure->is_int64() || own_rid == nullptr || !own_rid->is_string()) {
          return "the node's answer did not decode";
        }
        throughput = figure->as_int64();
        rid = own_rid->as_string();
      }
      std::optional<std::string_view> container;
      if (!route.container.empty()) container = route.container;
      response.body = json::to_json(offer_entry(route.database, container, rid, throughput,
                                                result.ts_micros / 1'000'000));
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

HttpResponse render_reply(const RenderSpec& spec, const node::Reply& reply) {
  const storage::OpResult& result = reply.result;
  HttpResponse response;
  response.status = result.http_status();
  if (!result.ok()) {
    response = error_response(response.status, result.message, result.substatus);
  } else {
    if (!result.etag.empty() && spec.shape != Shape::kPartitionKeyRanges) response.headers.emplace_back("etag", result.etag);
    if (spec.shape == Shape::kPartitionKeyRanges) response.headers.emplace_back("etag", std::string(kRangesEtag));
    if (std::optional<std::string> problem = success_body(spec, reply, response)) {
      response = error_response(500, *problem);
    }
  }
  if (reply.retry_after_ms != 0 || response.status == 429) {
    response.headers.emplace_back("x-ms-retry-after-ms", std::to_string(reply.retry_after_ms));
  }
  char charge[32];
  std::snprintf(charge, sizeof charge, "%.2f", reply.request_charge);
  response.headers.emplace_back("x-ms-request-charge", charge);
  response.headers.emplace_back("x-ms-activity-id", activity_id());
  if (reply.session_token != 0) {
    response.headers.emplace_back("x-ms-session-token", format_session_token(reply.session_token));
  }
  // A container's index is never being rebuilt (Mayfly indexes `_ts` and expiry; a policy change applies at once).
  if (spec.shape == Shape::kContainer && result.ok()) {
    response.headers.emplace_back("x-ms-documentdb-collection-index-transformation-progress", "100");
  }
  if (!spec.route.container.empty() &&
      (spec.shape == Shape::kItem || spec.shape == Shape::kItems || spec.shape == Shape::kContainer ||
       spec.shape == Shape::kBatch)) {
    // With it the SDKs keep the session token per container and send it back (read-your-writes on any node).
    response.headers.emplace_back("x-ms-alt-content-path", container_link(spec.route));
  }
  if (reply.served_by.value() != 0) {
    response.headers.emplace_back("x-ms-mayfly-served-by", std::to_string(reply.served_by.value()));
  }
  return response;
}

}  // namespace mayfly::gateway
