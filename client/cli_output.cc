#include "client/cli_output.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

namespace mayfly::client {

namespace {

std::string charge_text(double request_charge) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.2f RU", request_charge);
  return buffer;
}

// A lag in microseconds as "0 ms", "12 ms", "3.4 s".
std::string lag_text(int64_t micros) {
  if (micros < 0) micros = 0;
  char buffer[64];
  if (micros < 10'000'000) {
    std::snprintf(buffer, sizeof(buffer), "%lld ms", static_cast<long long>(micros / 1000));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.1f s", static_cast<double>(micros) / 1e6);
  }
  return buffer;
}

std::optional<int64_t> int_field(const boost::json::object& object, std::string_view name) {
  const boost::json::value* value = object.if_contains(name);
  if (value == nullptr) return std::nullopt;
  if (value->is_int64()) return value->as_int64();
  if (value->is_uint64()) return static_cast<int64_t>(value->as_uint64());
  return std::nullopt;
}

std::string int_cell(const boost::json::object& object, std::string_view name) {
  const std::optional<int64_t> value = int_field(object, name);
  return value.has_value() ? std::to_string(*value) : "-";
}

std::string string_field(const boost::json::object& object, std::string_view name) {
  const boost::json::value* value = object.if_contains(name);
  return value != nullptr && value->is_string() ? std::string(value->as_string()) : std::string();
}

std::string_view member(const std::vector<std::pair<std::string, std::string_view>>& members, std::string_view name) {
  for (const auto& [key, value] : members) {
    if (key == name) return value;
  }
  return {};
}

Table values_table(const std::vector<std::string_view>& elements) {
  Table table{{"value"}, {}};
  for (std::string_view element : elements) table.rows.push_back({truncate_cell(cell_text(element), kValueWidth)});
  return table;
}

// Rows without ids (SELECT c.user, c.total ... / aggregates): the first kProjectionColumns fields met, as columns.
Table projection_table(const std::vector<std::vector<std::pair<std::string, std::string_view>>>& rows) {
  Table table;
  for (const auto& members : rows) {
    for (const auto& [key, value] : members) {
      if (table.header.size() < kProjectionColumns &&
          std::find(table.header.begin(), table.header.end(), key) == table.header.end()) {
        table.header.push_back(key);
      }
    }
  }
  for (const auto& members : rows) {
    std::vector<std::string> row;
    for (const std::string& key : table.header) {
      const std::string_view value = member(members, key);
      row.push_back(value.empty() ? std::string() : truncate_cell(cell_text(value), kCellWidth));
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

bool is_object(std::string_view json) { return !json.empty() && json.front() == '{'; }

std::string footer(const Response& response, size_t rows, std::string_view noun) {
  std::string out = std::to_string(rows) + " " + std::string(noun) + (rows == 1 ? "" : "s") + ", " +
                    charge_text(response.request_charge) + "\n";
  if (!response.continuation.empty()) out += "more: --continuation " + response.continuation + "\n";
  return out;
}

std::string status_line(const Response& response) {
  std::string out = "OK (" + std::to_string(response.status) + "), " + charge_text(response.request_charge);
  if (response.served_by != 0) out += ", node " + std::to_string(response.served_by);
  if (!response.etag.empty()) out += ", etag " + response.etag;
  return out + "\n";
}

}  // namespace

OutputFormat choose_output(std::optional<OutputFormat> requested, bool stdout_is_terminal) {
  if (requested.has_value()) return *requested;
  return stdout_is_terminal ? OutputFormat::kTable : OutputFormat::kJson;
}

std::string partition_key_value(std::string_view item, std::string_view partition_key_path) {
  std::string_view current = item;
  size_t pos = 0;
  while (pos < partition_key_path.size()) {
    if (partition_key_path[pos] == '/') {
      ++pos;
      continue;
    }
    const size_t next = partition_key_path.find('/', pos);
    const std::string_view segment =
        partition_key_path.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    if (!is_object(current)) return {};
    current = member(json_object_members(current), segment);
    if (current.empty()) return {};
    pos = next == std::string_view::npos ? partition_key_path.size() : next;
  }
  return current == item ? std::string() : std::string(current);
}

Table cluster_status_table(std::string_view body) {
  Table table{{"endpoint", "id", "is leader", "role", "term", "commit index", "applied index", "applied lag", "errors"},
              {}};
  boost::system::error_code error;
  const boost::json::value parsed = boost::json::parse(body, error);
  if (error || !parsed.is_object()) return table;
  const boost::json::object& status = parsed.as_object();
  const int64_t leader = int_field(status, "leader").value_or(0);
  const boost::json::value* nodes = status.if_contains("nodes");
  if (nodes == nullptr || !nodes->is_array()) return table;
  std::optional<int64_t> newest_applied_time;
  for (const boost::json::value& node : nodes->as_array()) {
    if (!node.is_object()) continue;
    const std::optional<int64_t> applied_time = int_field(node.as_object(), "appliedTime");
    if (applied_time.has_value() && node.as_object().if_contains("reachable") != nullptr &&
        node.as_object().at("reachable") == true) {
      newest_applied_time = std::max(newest_applied_time.value_or(*applied_time), *applied_time);
    }
  }
  for (const boost::json::value& node : nodes->as_array()) {
    if (!node.is_object()) continue;
    const boost::json::object& fields = node.as_object();
    const bool reachable = fields.if_contains("reachable") != nullptr && fields.at("reachable") == true;
    const int64_t id = int_field(fields, "id").value_or(0);
    const std::string address = string_field(fields, "address");
    std::vector<std::string> row = {address.empty() ? "-" : address, std::to_string(id),
                                    id == leader && leader != 0 ? "true" : "false"};
    if (reachable) {
      const std::optional<int64_t> applied_time = int_field(fields, "appliedTime");
      row.push_back(string_field(fields, "role"));
      row.push_back(int_cell(fields, "term"));
      row.push_back(int_cell(fields, "commit"));
      row.push_back(int_cell(fields, "applied"));
      row.push_back(applied_time.has_value() && newest_applied_time.has_value()
                        ? lag_text(*newest_applied_time - *applied_time)
                        : "-");
      row.push_back("");
    } else {
      row.insert(row.end(), {"-", "-", "-", "-", "-", "unreachable (no answer within 1 s)"});
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

Table containers_table(std::string_view array_body) {
  Table table{{"id", "partition key", "default ttl", "indexing", "throughput", "change feed", "_ts"}, {}};
  for (std::string_view element : json_array_elements(array_body)) {
    boost::system::error_code error;
    const boost::json::value parsed = boost::json::parse(element, error);
    if (error || !parsed.is_object()) continue;
    const boost::json::object& container = parsed.as_object();
    std::string partition_key = "-";
    if (const auto* key = container.if_contains("partitionKey"); key != nullptr && key->is_object()) {
      // A hierarchical key's paths joined with ',' (items_table reads that form back).
      if (const auto* paths = key->as_object().if_contains("paths"); paths != nullptr && paths->is_array()) {
        std::string joined;
        for (const boost::json::value& path : paths->as_array()) {
          if (!path.is_string()) continue;
          if (!joined.empty()) joined += ',';
          joined += path.as_string();
        }
        if (!joined.empty()) partition_key = std::move(joined);
      }
    }
    const std::optional<int64_t> default_ttl = int_field(container, "defaultTtl");
    std::string indexing = "-";
    if (const auto* policy = container.if_contains("indexingPolicy"); policy != nullptr && policy->is_object()) {
      indexing = string_field(policy->as_object(), "indexingMode");
    }
    std::string throughput = "-";
    if (const auto* mode = container.if_contains("throughput"); mode != nullptr && mode->is_object()) {
      const std::string kind = string_field(mode->as_object(), "mode");
      throughput = kind == "provisioned" ? int_cell(mode->as_object(), "requestUnitsPerSecond") + " RU/s"
                   : kind == "shared"    ? int_cell(mode->as_object(), "requestUnitsPerSecond") + " RU/s (database)"
                                         : kind;
    }
    std::string change_feed = "off";
    if (const auto* feed = container.if_contains("changeFeed"); feed != nullptr && feed->is_object()) {
      const auto* enabled = feed->as_object().if_contains("enabled");
      if (enabled != nullptr && enabled->is_bool() && enabled->as_bool()) {
        change_feed = "on, " + int_cell(feed->as_object(), "retentionSeconds") + " s";
      }
    }
    // Expiring-soon warnings ride on the feed (docs/retention.md).
    if (const std::optional<int64_t> warning = int_field(container, "expiryWarning")) {
      change_feed += ", warns " + std::to_string(*warning) + " s ahead";
    }
    table.rows.push_back({truncate_cell(string_field(container, "id"), kIdWidth), partition_key,
                          default_ttl.has_value() ? std::to_string(*default_ttl) : "off", indexing, throughput,
                          change_feed, int_cell(container, "_ts")});
  }
  return table;
}

Table items_table(std::string_view array_body, std::string_view partition_key_path) {
  const std::vector<std::string_view> elements = json_array_elements(array_body);
  if (!std::all_of(elements.begin(), elements.end(), is_object)) return values_table(elements);
  std::vector<std::vector<std::pair<std::string, std::string_view>>> items;
  items.reserve(elements.size());
  for (std::string_view element : elements) items.push_back(json_object_members(element));
  const bool any_id = std::any_of(items.begin(), items.end(), [](const auto& members) { return !member(members, "id").empty(); });
  if (!items.empty() && !any_id) return projection_table(items);
  // A top-level partition key field is already its own column.
  std::string partition_key_field;
  if (partition_key_path.size() > 1 && partition_key_path.find('/', 1) == std::string_view::npos) {
    partition_key_field = std::string(partition_key_path.substr(1));
  }
  bool any_ttl = false;
  std::vector<std::string> extra;
  for (const auto& members : items) {
    for (const auto& [key, value] : members) {
      if (key == "ttl") any_ttl = true;
      if (key == "id" || key == "ttl" || key == partition_key_field || is_system_property(key)) continue;
      if (extra.size() < kItemExtraColumns && std::find(extra.begin(), extra.end(), key) == extra.end()) {
        extra.push_back(key);
      }
    }
  }
  Table table{{"id"}, {}};
  if (!partition_key_path.empty()) table.header.push_back("partition key");
  table.header.push_back("_ts");
  if (any_ttl) table.header.push_back("ttl");
  for (const std::string& key : extra) table.header.push_back(key);
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& members = items[i];
    auto cell = [&](std::string_view name, size_t width) {
      const std::string_view value = member(members, name);
      return value.empty() ? std::string() : truncate_cell(cell_text(value), width);
    };
    std::vector<std::string> row = {cell("id", kIdWidth)};
    if (!partition_key_path.empty()) {
      // A hierarchical key ("/tenant,/user"): its values joined with ", ".
      std::string key;
      size_t start = 0;
      while (start <= partition_key_path.size()) {
        const size_t comma = partition_key_path.find(',', start);
        const std::string_view path = partition_key_path.substr(start, comma == std::string_view::npos
                                                                           ? std::string_view::npos
                                                                           : comma - start);
        const std::string value = partition_key_value(elements[i], path);
        if (start > 0) key += ", ";
        key += value.empty() ? "(none)" : cell_text(value);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      row.push_back(key == "(none)" ? key : truncate_cell(key, kCellWidth));
    }
    row.push_back(cell("_ts", kCellWidth));
    if (any_ttl) row.push_back(cell("ttl", kCellWidth));
    for (const std::string& key : extra) row.push_back(cell(key, kCellWidth));
    table.rows.push_back(std::move(row));
  }
  return table;
}

Table fields_table(std::string_view object_body) {
  Table table{{"field", "value"}, {}};
  for (const auto& [key, value] : json_object_members(object_body)) {
    table.rows.push_back({truncate_cell(key, kCellWidth), truncate_cell(cell_text(value), kValueWidth)});
  }
  return table;
}

FormattedOutput format_response_table(const Request& request, const Response& response,
                                      std::string_view partition_key_path) {
  FormattedOutput output;
  if (!response.ok()) {
    output.err = "mayfly: " + std::to_string(response.status) + " (substatus " + std::to_string(response.substatus) +
                 "): " + (response.message.empty() ? std::string("no message") : response.message);
    if (response.served_by != 0) output.err += " [node " + std::to_string(response.served_by) + "]";
    output.err += "\n";
    return output;
  }
  if (response.body.empty() || !is_valid_json(response.body)) {
    output.out = response.body.empty() ? status_line(response) : response.body + "\n" + status_line(response);
    return output;
  }
  const std::string_view body = response.body;
  switch (request.kind()) {
    case Op::kClusterStatus: {
      const Table table = cluster_status_table(body);
      output.out = render_table(table) + footer(response, table.rows.size(), "member");
      return output;
    }
    case Op::kListDatabases: {
      Table table{{"id"}, {}};
      for (std::string_view element : json_array_elements(body)) table.rows.push_back({cell_text(element)});
      output.out = render_table(table) + footer(response, table.rows.size(), "database");
      return output;
    }
    case Op::kListOffers: {
      Table table{{"database", "container", "throughput"}, {}};
      for (std::string_view element : json_array_elements(body)) {
        if (!is_object(element)) continue;
        const auto members = json_object_members(element);
        const std::string_view container = member(members, "container");
        table.rows.push_back({cell_text(member(members, "database")),
                              container.empty() ? "(shared by its containers)" : cell_text(container),
                              std::string(member(members, "throughput")) + " RU/s"});
      }
      output.out = render_table(table) + footer(response, table.rows.size(), "offer");
      return output;
    }
    case Op::kListHolds: {
      Table table{{"id", "container", "scope", "set by", "set ts", "reason", "released"}, {}};
      for (std::string_view element : json_array_elements(body)) {
        if (!is_object(element)) continue;
        const auto members = json_object_members(element);
        std::string scope = cell_text(member(members, "scope"));
        if (!member(members, "partitionKey").empty()) scope += " " + std::string(member(members, "partitionKey"));
        if (!member(members, "itemId").empty()) scope += " id " + cell_text(member(members, "itemId"));
        table.rows.push_back({cell_text(member(members, "id")),
                              cell_text(member(members, "database")) + "/" + cell_text(member(members, "container")),
                              scope, cell_text(member(members, "setBy")), std::string(member(members, "setTs")),
                              cell_text(member(members, "reason")),
                              member(members, "active") == "true" ? "" : std::string(member(members, "releasedTs"))});
      }
      output.out = render_table(table) + footer(response, table.rows.size(), "hold");
      return output;
    }
    case Op::kListHoldAudit: {
      Table table{{"index", "ts", "action", "hold", "container", "actor", "reason"}, {}};
      for (std::string_view element : json_array_elements(body)) {
        if (!is_object(element)) continue;
        const auto members = json_object_members(element);
        table.rows.push_back({std::string(member(members, "index")), std::string(member(members, "ts")),
                              cell_text(member(members, "action")), cell_text(member(members, "hold")),
                              cell_text(member(members, "database")) + "/" + cell_text(member(members, "container")),
                              cell_text(member(members, "actor")), cell_text(member(members, "reason"))});
      }
      output.out = render_table(table) + footer(response, table.rows.size(), "audit record");
      return output;
    }
    case Op::kListContainers: {
      const Table table = containers_table(body);
      output.out = render_table(table) + footer(response, table.rows.size(), "container");
      return output;
    }
    case Op::kGetContainer:
    case Op::kCreateContainer:
    case Op::kUpdateContainer:
      if (is_object(body)) {
        output.out = render_table(containers_table("[" + response.body + "]")) + status_line(response);
        return output;
      }
      break;
    case Op::kListItems:
    case Op::kQuery:
      if (!body.empty() && body.front() == '[') {
        const Table table = items_table(body, partition_key_path);
        output.out = render_table(table) + footer(response, table.rows.size(), "item");
        return output;
      }
      break;
    default:
      break;
  }
  if (is_object(body)) {
    output.out = render_table(fields_table(body)) + status_line(response);
  } else if (body.front() == '[') {
    const Table table = values_table(json_array_elements(body));
    output.out = render_table(table) + footer(response, table.rows.size(), "value");
  } else {
    output.out = cell_text(body) + "\n" + status_line(response);
  }
  return output;
}

}  // namespace mayfly::client
