#include "storage/document.h"

#include <cstdio>

#include "storage/json.h"

namespace mayfly::storage {
namespace {

// Read-only: what a client sends under these names is dropped (`_expiresAt` is computed at read time).
constexpr std::string_view kSystemProperties[] = {"_ts", "_etag", "_rid", "_expiresAt"};

Status bad_request(std::string message) { return Status::invalid_argument(std::move(message)); }

}  // namespace

Status validate_resource_id(std::string_view kind, std::string_view id) {
  const size_t length = json::utf8_length(id);
  if (length == 0 || length > kMaxIdCharacters) {
    return Status::invalid_argument(std::string(kind) + " id must be 1 to 255 characters long (got " +
                                    std::to_string(length) + ")");
  }
  const size_t bad = id.find_first_of("/\\?#");
  if (bad != std::string_view::npos) {
    return Status::invalid_argument(std::string(kind) + " id '" + std::string(id) + "' contains '" + id[bad] +
                                    "'; ids cannot contain / \\ ? or #");
  }
  return Status::ok();
}

Result<PreparedItem> prepare_item(std::string_view body, std::string_view partition_key_path) {
  if (body.size() > kMaxItemBytes) {
    return Status::too_large("item is " + std::to_string(body.size()) + " bytes; the limit is " +
                             std::to_string(kMaxItemBytes) + " bytes (2 MB)");
  }
  Result<boost::json::value> parsed = json::parse(body);
  if (!parsed.is_ok()) return bad_request("item body is not valid JSON: " + parsed.status().message());
  if (!parsed->is_object()) return bad_request("item body must be a JSON object, e.g. {\"id\": \"1\", ...}");
  return prepare_item_object(std::move(parsed->get_object()), partition_key_path);
}

Status prepare_body(Command& command, const ContainerRecord& container) {
  if (command.type != CommandType::kCreateItem && command.type != CommandType::kReplaceItem &&
      command.type != CommandType::kUpsertItem) {
    return Status::ok();
  }
  Result<PreparedItem> item = prepare_item(command.body, container.partition_key_path);
  if (!item.is_ok()) return item.status();
  command.prepared = PreparedBody{.container_rid = container.crid, .item = std::move(item).value()};
  command.body.clear();
  return Status::ok();
}

Result<PreparedItem> prepare_item_object(boost::json::object document, std::string_view partition_key_path) {
  PreparedItem item;
  const boost::json::value* id = document.if_contains("id");
  if (id == nullptr) return bad_request("item has no 'id' property; every item needs a string id");
  if (!id->is_string()) return bad_request("item 'id' must be a string, not " + json::to_json(*id));
  item.id = std::string(id->get_string());
  if (Status status = validate_resource_id("item", item.id); !status.is_ok()) return bad_request(status.message());

  // One component for a Hash key; for a hierarchical key the array of its components, path by path.
  const std::vector<std::string> paths = json::partition_key_paths(partition_key_path);
  std::string key_text = paths.size() > 1 ? "[" : "";
  for (size_t i = 0; i < paths.size(); ++i) {
    // No value at the path: the item is in the undefined partition, as in Cosmos DB (read it with [{}]).
    const boost::json::value* key = json::find_path(document, paths[i]);
    if (i > 0) key_text += ',';
    if (key == nullptr) {
      key_text += json::kUndefinedPartitionKey;
      continue;
    }
    Result<std::string> canonical = json::canonical_partition_key(*key);
    if (!canonical.is_ok()) return bad_request(canonical.status().message());
    key_text += canonical.value();
  }
  if (paths.size() > 1) key_text += ']';
  item.partition_key = std::move(key_text);

  Result<ttl::ItemTtl> item_ttl = ttl::validate_item_ttl(json::ttl_literal(document.if_contains("ttl")));
  if (!item_ttl.is_ok()) return bad_request(item_ttl.status().message());
  item.ttl = *item_ttl;

  // Patches can nest values deeper than a request could; what is stored must parse again.
  boost::json::value as_value(std::move(document));
  if (json::depth(as_value) > json::kMaxDepth) {
    return bad_request("item nests deeper than " + std::to_string(json::kMaxDepth) + " levels");
  }
  document = std::move(as_value.get_object());
  for (std::string_view property : kSystemProperties) document.stable_erase(property);  // erase() would move the last member here
  item.json = json::to_json(document);
  if (item.json.size() > kMaxItemBytes) {
    return Status::too_large("item is " + std::to_string(item.json.size()) + " bytes; the limit is " +
                             std::to_string(kMaxItemBytes) + " bytes (2 MB)");
  }
  return item;
}

Result<std::string> canonical_partition_key_text(std::string_view partition_key_json) {
  Result<boost::json::value> parsed = json::parse(partition_key_json);
  if (!parsed.is_ok()) return bad_request("partition key is not valid JSON: " + parsed.status().message());
  Result<std::string> canonical = json::canonical_partition_key_value(*parsed);
  if (!canonical.is_ok()) return bad_request(canonical.status().message());
  return std::move(canonical).value();
}

Result<std::string> canonical_partition_key_text(std::string_view partition_key_json,
                                                 std::string_view partition_key_path) {
  Result<std::string> canonical = canonical_partition_key_text(partition_key_json);
  if (!canonical.is_ok()) return canonical;
  if (Status shape = json::check_partition_key_shape(partition_key_path, *canonical); !shape.is_ok()) {
    return bad_request(shape.message());
  }
  return canonical;
}

namespace {

// Cosmos's resource id alphabet: standard base64, '-' for '/', with padding.
std::string rid_text(const uint8_t* bytes, size_t size) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-";
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    const uint32_t chunk = (static_cast<uint32_t>(bytes[i]) << 16) |
                           (i + 1 < size ? static_cast<uint32_t>(bytes[i + 1]) << 8 : 0) |
                           (i + 2 < size ? static_cast<uint32_t>(bytes[i + 2]) : 0);
    out.push_back(kAlphabet[(chunk >> 18) & 63]);
    out.push_back(kAlphabet[(chunk >> 12) & 63]);
    out.push_back(i + 1 < size ? kAlphabet[(chunk >> 6) & 63] : '=');
    out.push_back(i + 2 < size ? kAlphabet[chunk & 63] : '=');
  }
  return out;
}

void put_database_bytes(std::string_view database, uint8_t* out) {
  uint32_t hash = 2166136261u;
  for (char c : database) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 16777619u;
  }
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(hash >> (24 - 8 * i));
}

void put_be(uint64_t value, int bytes, uint8_t* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(value >> (8 * (bytes - 1 - i)));
}

}  // namespace

std::string format_database_rid(std::string_view database) {
  uint8_t bytes[4];
  put_database_bytes(database, bytes);
  return rid_text(bytes, sizeof bytes);
}

std::string format_container_rid(std::string_view database, uint64_t crid) {
  uint8_t bytes[8];
  put_database_bytes(database, bytes);
  put_be(crid, 4, bytes + 4);
  return rid_text(bytes, sizeof bytes);
}

std::string format_item_rid(std::string_view database, uint64_t crid, uint64_t item_rid) {
  uint8_t bytes[16];
  put_database_bytes(database, bytes);
  put_be(crid, 4, bytes + 4);
  put_be(item_rid, 8, bytes + 8);
  return rid_text(bytes, sizeof bytes);
}

std::string render_item(const ItemRecord& record, std::string_view database, uint64_t crid,
                        ttl::DefaultTtl default_ttl, std::string_view hold_json) {
  // The stored JSON is compact and ends with '}': append the system properties before it.
  MAYFLY_ASSERT(record.json.size() >= 2 && record.json.back() == '}');
  std::string out;
  out.reserve(record.json.size() + 80);
  out.append(record.json, 0, record.json.size() - 1);
  if (record.json.size() > 2) out.push_back(',');
  out += "\"_rid\":";
  json::write_json_string(format_item_rid(database, crid, record.item_rid), out);
  out += ",\"_etag\":";
  json::write_json_string(format_etag(record.etag_sequence), out);
  out += ",\"_ts\":";
  out += std::to_string(ttl::ts_seconds(record.write_ts_micros));
  if (std::optional<int64_t> expires_at = ttl::expires_at_seconds(record.ttl, record.write_ts_micros, default_ttl)) {
    out += ",\"_expiresAt\":";
    out += std::to_string(*expires_at);
  }
  if (!hold_json.empty()) {
    out += ",\"_hold\":";
    out += hold_json;
  }
  out.push_back('}');
  return out;
}

}  // namespace mayfly::storage
