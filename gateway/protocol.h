// The Cosmos DB REST protocol as pure functions (shared/spec/cosmos-rest.md): percent-decoding, the routes of the
// resource paths, the master-key signature (string to sign, the authorization header, base64), and the request
// headers the gateway reads (partition key, session token, consistency level, page size). Every function validates
// bytes that came from a socket and answers a Status with a message a user can act on; none asserts on them.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/wire.h"

namespace mayfly::gateway {

// ---- paths ----------------------------------------------------------------------------------------------------------

// Percent-decodes a path ("%20" -> ' '); '+' stays '+'. InvalidArgument on a bad escape or a NUL byte.
Result<std::string> percent_decode(std::string_view text);

// What a request path names. Paths arrive percent-encoded and often with a trailing slash; names keep their case.
struct Route {
  enum class Kind {
    kAccount,        // /
    kDatabases,      // /dbs
    kDatabase,       // /dbs/{db}
    kContainers,     // /dbs/{db}/colls
    kContainer,      // /dbs/{db}/colls/{c}
    kPartitionKeyRanges,  // /dbs/{db}/colls/{c}/pkranges
    kPartitionKeyDelete,  // /dbs/{db}/colls/{c}/operations/partitionkeydelete (signed as the container: "colls")
    kItems,          // /dbs/{db}/colls/{c}/docs
    kItem,           // /dbs/{db}/colls/{c}/docs/{id}
    kConflicts,      // /dbs/{db}/colls/{c}/conflicts: always empty (one write region never has conflicts)
    kConflict,       // /dbs/{db}/colls/{c}/conflicts/{id}: never exists
    kHolds,          // /dbs/{db}/colls/{c}/holds: Mayfly's legal holds (docs/retention.md), signed as "holds"
    kHold,           // /dbs/{db}/colls/{c}/holds/{id}
    kOffers,         // /offers
    kOffer,          // /offers/{id}
    kUnsupported,    // a Cosmos resource Mayfly does not have (users, sprocs, offers, ...): `feature` names it
  };
  Kind kind = Kind::kAccount;
  std::string database;
  std::string container;
  std::string id;
  std::string feature;        // kUnsupported: e.g. "stored procedures (sprocs)"
  // kOffer: the offer's id is in `id`; an offer is addressed by id (not by name), so it is signed lower-cased.
  std::string resource_type;  // what the signature covers: "dbs", "colls", "docs", "pkranges", "" for the account
  std::string resource_link;  // e.g. "dbs/shop/colls/carts" (decoded, no leading or trailing slash)
};

// Parses a request target (path and optional query string; the query string is ignored). InvalidArgument (400) for
// paths that are not Cosmos resources at all, with the path in the message.
Result<Route> parse_route(std::string_view target);

// ---- the master-key signature ----------------------------------------------------------------------------------------

// The text the client signed: lower(verb) \n lower(resourceType) \n resourceLink \n lower(x-ms-date) \n \n.
std::string string_to_sign(std::string_view verb, std::string_view resource_type, std::string_view resource_link,
                           std::string_view date);

// The authorization header, decoded: "type=master&ver=1.0&sig=<base64>" (url-encoded once by the client).
struct Authorization {
  std::string type;       // "master" (the only one Mayfly accepts); "resource" and "aad" are refused
  std::string version;    // "1.0"
  std::string signature;  // the raw HMAC bytes, base64-decoded
};
Result<Authorization> parse_authorization(std::string_view header);

// The signed date (x-ms-date, an RFC 1123 date such as "Tue, 24 Nov 2026 11:00:00 GMT") -> Unix seconds.
Result<int64_t> parse_http_date(std::string_view text);
// A signature is good for this long either side of the node's clock (as in Cosmos DB): a captured request cannot be
// replayed later. The node's own clock is fine here: this is not expiry.
inline constexpr int64_t kSignatureWindowSeconds = 15 * 60;
// 401 unless `date` parses and is within kSignatureWindowSeconds of `now_seconds`.
Status check_signed_date(std::string_view date, int64_t now_seconds);

// Whether each signature of this request may be used once only (node/replay_cache.h): a write (any verb but GET and
// HEAD) to the databases or containers — create, replace, delete — and any request with
// `x-mayfly-force-ttl-change: true`. Item requests are not: an SDK signs with a date to the second, so two honest
// upserts in one second carry the same signature, and refusing the second would lose a write; what keeps an item
// request's signature from being seen by others is TLS (--http off loopback needs it, docs/security.md).
bool replay_guarded(std::string_view verb, Route::Kind kind, bool forces_ttl_change);

// The Cosmos DB emulator's published, well-known master key (base64), accepted only with --emulator-key (which
// config validation allows only with --http on a loopback address).
inline constexpr std::string_view kEmulatorKeyBase64 =
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";
// True when `signature` is the emulator key's over `text` (constant time).
bool signed_with_emulator_key(std::string_view text, std::string_view signature);

// base64(HMAC-SHA256(key_bytes, text)), what a client puts in sig=.
std::string sign(std::string_view key_bytes, std::string_view text);

// Strict standard base64 (with padding); InvalidArgument on anything else.
Result<std::string> base64_decode(std::string_view text);
std::string base64_encode(std::string_view bytes);

// ---- request headers ---------------------------------------------------------------------------------------------

// x-ms-documentdb-partitionkey: a JSON array of exactly one value (["a"], [5], [true], [null]) -> the value's JSON
// text. `[{}]` (the "none" partition key) and hierarchical keys (several values) are refused with a message.
Result<std::string> parse_partition_key_header(std::string_view header);

// x-ms-session-token: one or more "RANGE:VERSION#LSN[#REGION=LSN...]" separated by commas (Mayfly's own form, a
// bare log index, is accepted too) -> the highest LSN, which is the log index Mayfly issued. 0 for an empty header.
Result<uint64_t> parse_session_token_header(std::string_view header);
// The session token Mayfly returns for log index `index`: "0:1#<index>" (one partition key range, id "0").
std::string format_session_token(uint64_t index);

// x-ms-consistency-level: Strong, BoundedStaleness, Session, Eventual, ConsistentPrefix (read as eventual), or
// absent / "None" (nullopt: the default, session). Case-insensitive. The levels are Mayfly's own (common/wire.h).
Result<std::optional<Consistency>> parse_consistency_header(std::string_view header);

// x-ms-max-item-count: absent or -1 -> `fallback`; 1..1000 as given; larger values are capped at 1000 (a page is
// 1000 items at most, and the continuation carries on). 0, other negatives and non-numbers are refused.
Result<uint32_t> parse_max_item_count(std::string_view header, uint32_t fallback);

// "True"/"true" (the SDKs send either) -> true; absent or anything else -> false.
bool header_flag(std::string_view header);

}  // namespace mayfly::gateway
