// Translation between a Cosmos DB REST call and Mayfly's one request path: plan_request turns an HTTP request into
// the proto::Request the Cap'n Proto API carries (node/rpc.h GatewayCall), or answers it at once (a malformed or
// unsupported call: 400/405/501 naming what is wrong); render_reply turns the node's Reply into the Cosmos answer
// (status, the x-ms-* headers, the body shapes the SDKs parse: feeds, system properties, {"code","message"} errors).
// No business logic: TTL, consistency, RU, 429 and etags are the node's.
//
// Thread-safety: pure functions and values (the HTTP threads call them).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/protocol.h"
#include "node/request.h"
#include "node/rpc.h"

namespace mayfly::gateway {

// What the translation needs of an HTTP request (independent of Beast, so it is tested without sockets).
struct HttpRequest {
  std::string method;                         // as sent: GET, POST, PUT, PATCH, DELETE, ...
  std::string target;                         // the percent-encoded path and query string
  std::map<std::string, std::string> headers; // names lower-cased; a repeated header keeps its last value
  std::string body;

  std::string_view header(const std::string& name) const {
    auto found = headers.find(name);
    return found == headers.end() ? std::string_view() : std::string_view(found->second);
  }
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // empty for 204 and 304
};

// How a Reply becomes the Cosmos answer.
struct RenderSpec {
  enum class Shape {
    kAccount,          // GET /: the database account
    kDatabases,        // GET /dbs: {"Databases":[...]}
    kDatabase,         // GET /dbs/{db}: one entry of the list, or 404
    kDatabaseWritten,  // POST /dbs: {"id":...}; DELETE: 204
    kContainers,       // {"DocumentCollections":[...]}
    kContainer,        // one container, with its system properties
    kPartitionKeyRanges,  // one range covering everything, 304 on a matching If-None-Match
    kItem,             // one item (create, upsert, read, replace, patch), 204 for delete
    kItems,            // read feed and query pages: {"Documents":[...]}
    kChangeFeed,       // a change feed page (A-IM): {"Documents":[...]}, etag = continuation, 304 when caught up
    kOffers,           // GET /offers, query_offers: {"Offers":[...]} from the node's list (api::ListOffers)
    kOffer,            // GET /offers/{id}: one entry of the list, or 404
    kOfferWritten,     // PUT /offers/{id}: the offer as the database or container update left it
    kBatch,            // a transactional batch: the node's per-operation results as they are, 200 or 207
    kConflicts,        // a container's conflicts: {"Conflicts":[]} once the container is found
  };
  Shape shape = Shape::kAccount;
  Route route;
  std::string if_none_match;  // pkranges
  bool all_versions = false;  // kChangeFeed: A-IM Full-Fidelity Feed (Cosmos all versions and deletes)
  std::string host;           // the Host header, for the account's own address
  bool https = false;         // the connection is TLS (the account's address is https://)
  bool minimal = false;       // Prefer: return=minimal — an item write answers without its body
  // kDatabases / kContainers answering query_databases / query_containers (POST with x-ms-documentdb-isquery): the
  // query runs over the list's entries as the SDKs see them.
  struct MetadataQuery {
    std::string sql;
    std::string parameters;  // one JSON object {"@name": value}; "" for none
    uint32_t max_items = 100;
    std::string continuation;
  };
  std::optional<MetadataQuery> query;
};

struct Plan {
  std::optional<HttpResponse> answer;  // set: answered here (bad or unsupported request); the node is not called
  node::GatewayCall call;              // otherwise: what the node executes (authenticated on its thread)
  RenderSpec spec;
};

Plan plan_request(const HttpRequest& request);

// The id (and `_rid`) of the offer of a database ("dbs/shop") or container ("dbs/shop/colls/carts"): 8 characters
// derived from that link, so every node names it the same without a lookup and a replace can be checked against
// the resource it names.
std::string offer_id(std::string_view resource_link);

// `reply` answers plan.call.
HttpResponse render_reply(const RenderSpec& spec, const node::Reply& reply);

// A Cosmos error answer: {"code":"<name of the status>","message":...}, with x-ms-substatus when not 0.
HttpResponse error_response(int status, std::string_view message, int substatus = 0);

}  // namespace mayfly::gateway
