#include "gateway/protocol.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include "common/auth.h"
#include "storage/json.h"

namespace mayfly::gateway {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Status unauthorized(std::string message) { return Status(StatusCode::kUnauthorized, std::move(message)); }

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

// Cosmos resources Mayfly does not have, by their path segment.
const char* unsupported_feature(std::string_view segment) {
  if (segment == "users") return "users";
  if (segment == "permissions") return "permissions (resource tokens)";
  if (segment == "sprocs") return "stored procedures (sprocs)";
  if (segment == "udfs") return "user-defined functions (udfs)";
  if (segment == "triggers") return "triggers";
  if (segment == "attachments") return "attachments";
  if (segment == "clientencryptionkeys") return "client encryption keys";
  if (segment == "schemas") return "schemas";
  return nullptr;
}

}  // namespace

Result<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) {
        return Status::invalid_argument("bad percent escape at the end of '" + std::string(text) + "'");
      }
      const int high = hex_value(text[i + 1]);
      const int low = hex_value(text[i + 2]);
      if (high < 0 || low < 0) {
        return Status::invalid_argument("bad percent escape in '" + std::string(text) + "'");
      }
      c = static_cast<char>(high * 16 + low);
      i += 2;
    }
    if (c == '\0') return Status::invalid_argument("a path must not contain a NUL byte");
    out.push_back(c);
  }
  return out;
}

Result<Route> parse_route(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  if (path.empty() || path.front() != '/') {
    return Status::invalid_argument("the request target must be an absolute path, not '" + std::string(path) + "'");
  }
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  std::vector<std::string> segments;
  if (!path.empty()) {
    for (std::string_view raw : split(path, '/')) {
      Result<std::string> decoded = percent_decode(raw);
      if (!decoded.is_ok()) return decoded.status();
      if (decoded->empty()) return Status::invalid_argument("empty segment in the path '" + std::string(target) + "'");
      segments.push_back(std::move(decoded).value());
    }
  }
  Route route;
  // The signed link is the decoded path; the type is the last segment for a feed (odd count), the second-to-last
  // for a resource (even count).
  std::string link;
  for (const std::string& segment : segments) link += (link.empty() ? "" : "/") + segment;
  const size_t n = segments.size();
  if (n == 0) return route;  // the account: empty type and link
  if (n % 2 == 1) {
    route.resource_type = segments[n - 1];
    route.resource_link = link.substr(0, link.size() - segments[n - 1].size());
    while (!route.resource_link.empty() && route.resource_link.back() == '/') route.resource_link.pop_back();
  } else {
    route.resource_type = segments[n - 2];
    route.resource_link = link;
  }
  auto not_found = [&] {
    return Status::invalid_argument("'" + std::string(path) + "' is not a Cosmos DB resource path");
  };
  if (segments[0] == "offers" && n <= 2) {
    route.kind = n == 1 ? Route::Kind::kOffers : Route::Kind::kOffer;
    if (n == 2) {
      route.id = segments[1];
      // Offers are addressed by resource id, which the SDKs sign alone and lower-cased.
      route.resource_link = route.id;
      for (char& c : route.resource_link) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return route;
  }
  if (segments[0] != "dbs") {
    if (const char* feature = unsupported_feature(segments[0])) {
      route.kind = Route::Kind::kUnsupported;
      route.feature = feature;
      return route;
    }
    return not_found();
  }
  if (n >= 2) route.database = segments[1];
  if (n >= 3 && segments[2] != "colls") {
    if (const char* feature = unsupported_feature(segments[2])) {
      route.kind = Route::Kind::kUnsupported;
      route.feature = feature;
      return route;
    }
    return not_found();
  }
  if (n >= 4) route.container = segments[3];
  if (n >= 5) {
    const std::string& child = segments[4];
    if (child == "conflicts" && n <= 6) {
      route.kind = n == 5 ? Route::Kind::kConflicts : Route::Kind::kConflict;
      if (n == 6) route.id = segments[5];
      return route;
    }
    if (child == "holds" && n <= 6) {  // a Mayfly resource: legal holds (docs/retention.md)
      route.kind = n == 5 ? Route::Kind::kHolds : Route::Kind::kHold;
      if (n == 6) route.id = segments[5];
      return route;
    }
    if (child == "operations" && n == 6 && segments[5] == "partitionkeydelete") {
      route.kind = Route::Kind::kPartitionKeyDelete;
      route.resource_type = "colls";  // the SDKs sign it as the container's (not "partitionkey")
      route.resource_link = "dbs/" + segments[1] + "/colls/" + segments[3];
      return route;
    }
    if (child == "pkranges" && n <= 6) {
      if (n == 6) route.id = segments[5];
      route.kind = Route::Kind::kPartitionKeyRanges;
      return route;
    }
    if (child != "docs") {
      if (const char* feature = unsupported_feature(child)) {
        route.kind = Route::Kind::kUnsupported;
        route.feature = feature;
        return route;
      }
      return not_found();
    }
  }
  if (n >= 6) route.id = segments[5];
  if (n >= 7) {
    if (const char* feature = unsupported_feature(segments[6])) {
      route.kind = Route::Kind::kUnsupported;
      route.feature = feature;
      return route;
    }
    return not_found();
  }
  static constexpr Route::Kind kByDepth[] = {Route::Kind::kAccount,    Route::Kind::kDatabases,
                                             Route::Kind::kDatabase,   Route::Kind::kContainers,
                                             Route::Kind::kContainer,  Route::Kind::kItems,
                                             Route::Kind::kItem};
  route.kind = kByDepth[n];
  return route;
}

std::string string_to_sign(std::string_view verb, std::string_view resource_type, std::string_view resource_link,
                           std::string_view date) {
  std::string text = lower(verb);
  text += '\n';
  text += lower(resource_type);
  text += '\n';
  text += resource_link;
  text += '\n';
  text += lower(date);
  text += "\n\n";
  return text;
}

Result<Authorization> parse_authorization(std::string_view header) {
  if (header.empty()) {
    return unauthorized("the authorization header is missing: sign the request with the account key");
  }
  if (header.size() > 1024) return unauthorized("the authorization header is too long");
  // Decoded once, '+' kept (a base64 signature contains '+', sent as %2B or as is).
  Result<std::string> decoded = percent_decode(header);
  if (!decoded.is_ok()) return unauthorized("the authorization header is not url-encoded text");
  Authorization authorization;
  for (std::string_view part : split(*decoded, '&')) {
    const size_t equals = part.find('=');
    if (equals == std::string_view::npos) continue;
    const std::string_view name = part.substr(0, equals);
    const std::string_view value = part.substr(equals + 1);
    if (name == "type") authorization.type = value;
    if (name == "ver") authorization.version = value;
    if (name == "sig") {
      Result<std::string> signature = base64_decode(value);
      if (!signature.is_ok()) return unauthorized("the authorization signature is not base64");
      authorization.signature = std::move(signature).value();
    }
  }
  if (authorization.type != "master") {
    return unauthorized("authorization type '" + authorization.type +
                                   "' is not supported: Mayfly accepts master-key signatures (type=master) only");
  }
  if (authorization.signature.empty()) return unauthorized("the authorization header has no sig=");
  return authorization;
}

Result<int64_t> parse_http_date(std::string_view text) {
  // "Tue, 24 Nov 2026 11:00:00 GMT": parsed by hand (std::get_time depends on the locale).
  static constexpr std::string_view kMonths[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                                 "jul", "aug", "sep", "oct", "nov", "dec"};
  const std::string date = lower(trim(text));
  auto bad = [&] { return Status::invalid_argument("'" + std::string(text) + "' is not an RFC 1123 date"); };
  if (date.size() != 29 || date[3] != ',' || date.substr(25) != " gmt") return bad();
  auto number = [&](size_t at, size_t digits, int& out) {
    out = 0;
    for (size_t i = at; i < at + digits; ++i) {
      if (date[i] < '0' || date[i] > '9') return false;
      out = out * 10 + (date[i] - '0');
    }
    return true;
  };
  int day = 0, year = 0, hour = 0, minute = 0, second = 0;
  if (!number(5, 2, day) || !number(12, 4, year) || !number(17, 2, hour) || !number(20, 2, minute) ||
      !number(23, 2, second) || date[16] != ' ' || date[19] != ':' || date[22] != ':') {
    return bad();
  }
  int month = -1;
  for (int m = 0; m < 12; ++m) {
    if (date.substr(8, 3) == kMonths[m]) month = m + 1;
  }
  if (month < 0 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60 || year < 1970) return bad();
  // Days from the civil date (Howard Hinnant's algorithm).
  const int y = year - (month <= 2 ? 1 : 0);
  const int era = y / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = int64_t{era} * 146097 + doe - 719468;
  return days * 86400 + hour * 3600 + minute * 60 + second;
}

bool replay_guarded(std::string_view verb, Route::Kind kind, bool forces_ttl_change) {
  if (forces_ttl_change) return true;
  // Replaces and deletes of one database or container. Not POSTs: creates (and query_containers) of several
  // containers in one second carry the same signature, as SDK fixtures do; a replayed create only makes a resource
  // that did not exist (409 otherwise), where a replayed replace could rewrite a defaultTtl.
  if (verb != "PUT" && verb != "DELETE" && verb != "PATCH") return false;
  // A hold's release too: replayed after the same id was set again, it would release the new hold.
  return kind == Route::Kind::kDatabase || kind == Route::Kind::kContainer || kind == Route::Kind::kHold;
}

Status check_signed_date(std::string_view date, int64_t now_seconds) {
  if (trim(date).empty()) return unauthorized("x-ms-date is missing: the signature covers it");
  Result<int64_t> seconds = parse_http_date(date);
  if (!seconds.is_ok()) return unauthorized("x-ms-date " + seconds.status().message());
  if (*seconds < now_seconds - kSignatureWindowSeconds || *seconds > now_seconds + kSignatureWindowSeconds) {
    return unauthorized("x-ms-date '" + std::string(date) +
                        "' is more than 15 minutes away from the node's clock: a replayed request, or a client "
                        "clock that is wrong");
  }
  return Status::ok();
}

bool signed_with_emulator_key(std::string_view text, std::string_view signature) {
  static const std::string key = base64_decode(kEmulatorKeyBase64).value();
  return auth::constant_time_equal(auth::hmac_sha256(key, text), signature);
}

std::string sign(std::string_view key_bytes, std::string_view text) {
  return base64_encode(auth::hmac_sha256(key_bytes, text));
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return Status::invalid_argument("base64 text must be a multiple of 4 characters");
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool alphabet = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
    const bool padding = c == '=' && i + 2 >= text.size();
    if (!alphabet && !padding) return Status::invalid_argument("not base64");
    if (!padding && i > 0 && text[i - 1] == '=') return Status::invalid_argument("not base64");
  }
  std::string out(text.size() / 4 * 3, '\0');
  if (text.empty()) return out;
  const int written = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (written < 0) return Status::invalid_argument("not base64");
  size_t size = static_cast<size_t>(written);
  if (text.back() == '=') --size;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --size;
  out.resize(size);
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(written));
  return out;
}

Result<std::string> parse_partition_key_header(std::string_view header) {
  Result<boost::json::value> parsed = json::parse(header);
  if (!parsed.is_ok() || !parsed->is_array()) {
    return Status::invalid_argument("x-ms-documentdb-partitionkey must be a JSON array of 1 to 3 values, like [\"a\"], "
                                    "not '" + std::string(header) + "'");
  }
  const boost::json::array& values = parsed->as_array();
  if (values.empty()) return Status::invalid_argument("x-ms-documentdb-partitionkey is an empty array");
  if (values.size() > json::kMaxPartitionKeyPaths) {
    return Status::invalid_argument("x-ms-documentdb-partitionkey has " + std::to_string(values.size()) +
                                    " values; a hierarchical partition key has at most 3");
  }
  for (const boost::json::value& value : values) {
    // {}: the undefined partition (PartitionKey.None), the items without a value at the path.
    if (value.is_array() || (value.is_object() && !value.get_object().empty())) {
      return Status::invalid_argument("x-ms-documentdb-partitionkey values are strings, numbers, booleans, null or "
                                      "{} (no value: PartitionKey.None), not " + json::to_json(value));
    }
  }
  // One value: that value (a Hash key); several: the array, a hierarchical key's value (the node checks the count).
  return values.size() == 1 ? json::to_json(values[0]) : json::to_json(*parsed);
}

Result<uint64_t> parse_session_token_header(std::string_view header) {
  header = trim(header);
  if (header.empty()) return uint64_t{0};
  if (header.size() > 4096) return Status::invalid_argument("x-ms-session-token is too long");
  uint64_t highest = 0;
  for (std::string_view token : split(header, ',')) {
    token = trim(token);
    const size_t colon = token.find(':');
    if (colon != std::string_view::npos) token = token.substr(colon + 1);
    std::vector<std::string_view> segments = split(token, '#');
    // "VERSION#LSN[#REGION=LSN...]", or a bare log index.
    const std::string_view lsn = segments.size() >= 2 ? segments[1] : segments[0];
    uint64_t value = 0;
    auto [end, error] = std::from_chars(lsn.data(), lsn.data() + lsn.size(), value);
    if (error != std::errc() || end != lsn.data() + lsn.size() || lsn.empty()) {
      return Status::invalid_argument("x-ms-session-token '" + std::string(header) +
                                      "' is not a session token this cluster issued");
    }
    highest = std::max(highest, value);
  }
  return highest;
}

std::string format_session_token(uint64_t index) { return "0:1#" + std::to_string(index); }

Result<std::optional<Consistency>> parse_consistency_header(std::string_view header) {
  const std::string value = lower(trim(header));
  if (value.empty() || value == "none") return std::optional<Consistency>();
  if (value == "strong") return std::optional<Consistency>(Consistency::kStrong);
  if (value == "boundedstaleness") return std::optional<Consistency>(Consistency::kBounded);
  if (value == "session") return std::optional<Consistency>(Consistency::kSession);
  if (value == "eventual" || value == "consistentprefix") return std::optional<Consistency>(Consistency::kEventual);
  return Status::invalid_argument("x-ms-consistency-level '" + std::string(header) +
                                  "' is not one of Strong, BoundedStaleness, Session, ConsistentPrefix, Eventual");
}

Result<uint32_t> parse_max_item_count(std::string_view header, uint32_t fallback) {
  header = trim(header);
  if (header.empty() || header == "-1") return fallback;
  int64_t value = 0;
  auto [end, error] = std::from_chars(header.data(), header.data() + header.size(), value);
  if (error != std::errc() || end != header.data() + header.size() || value <= 0) {
    return Status::invalid_argument("x-ms-max-item-count must be -1 or a positive number, not '" +
                                    std::string(header) + "'");
  }
  return static_cast<uint32_t>(std::min<int64_t>(value, 1000));
}

bool header_flag(std::string_view header) { return lower(trim(header)) == "true"; }

}  // namespace mayfly::gateway
