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

  const boost::json::value* key = json::find_path(document, partition_key_path);
  if (key == nullptr) {
    return bad_request("item has no value at the container's partition key path '" +
                       std::string(partition_key_path) + "'");
  }
  Result<std::string> canonical = json::canonical_partition_key(*key);
  if (!canonical.is_ok()) return bad_request(canonical.status().message());
  item.partition_key = std::move(canonical).value();

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
  Result<std::string> canonical = json::canonical_partition_key(*parsed);
  if (!canonical.is_ok()) return bad_request(canonical.status().message());
  return std::move(canonical).value();
}

std::string format_item_rid(uint64_t crid, uint64_t item_rid) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%llx.%llx", static_cast<unsigned long long>(crid),
                static_cast<unsigned long long>(item_rid));
  return buffer;
}

std::string render_item(const ItemRecord& record, uint64_t crid, ttl::DefaultTtl default_ttl) {
  // The stored JSON is compact and ends with '}': append the system properties before it.
  MAYFLY_ASSERT(record.json.size() >= 2 && record.json.back() == '}');
  std::string out;
  out.reserve(record.json.size() + 80);
  out.append(record.json, 0, record.json.size() - 1);
  if (record.json.size() > 2) out.push_back(',');
  out += "\"_rid\":";
  json::write_json_string(format_item_rid(crid, record.item_rid), out);
  out += ",\"_etag\":";
  json::write_json_string(format_etag(record.etag_sequence), out);
  out += ",\"_ts\":";
  out += std::to_string(ttl::ts_seconds(record.write_ts_micros));
  if (std::optional<int64_t> expires_at = ttl::expires_at_seconds(record.ttl, record.write_ts_micros, default_ttl)) {
    out += ",\"_expiresAt\":";
    out += std::to_string(*expires_at);
  }
  out.push_back('}');
  return out;
}

}  // namespace mayfly::storage
