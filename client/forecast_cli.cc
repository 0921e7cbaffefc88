#include "client/forecast_cli.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "client/cli_text.h"

namespace mayfly::client {

namespace {

namespace bj = boost::json;

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return buffer;
}

std::string duration_text(double seconds) {
  char buffer[32];
  if (seconds < 60) {
    std::snprintf(buffer, sizeof buffer, seconds < 10 ? "%.2f s" : "%.0f s", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buffer, sizeof buffer, "%.1f min", seconds / 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f h", seconds / 3600);
  }
  return buffer;
}

std::string number_text(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, value == std::floor(value) ? "%.0f" : "%.1f", value);
  return buffer;
}

double number_at(const bj::object& object, std::string_view key) {
  const bj::value* value = object.if_contains(key);
  return value != nullptr && value->is_number() ? value->to_number<double>() : 0.0;
}

}  // namespace

std::string forecast_text(const NodeForecast& answer) {
  std::string out = "node " + std::to_string(answer.node) + " (" + answer.address + ")";
  if (!answer.response.ok()) {
    return out + ": " + std::to_string(answer.response.status) + " " + answer.response.message + "\n";
  }
  bj::error_code error;
  const bj::value parsed = bj::parse(answer.response.body, error);
  if (error || !parsed.is_object()) return out + ": unexpected answer: " + answer.response.body + "\n";
  const bj::object& body = parsed.as_object();
  auto pair = [&body](std::string_view outer, std::string_view inner) -> const bj::object* {
    const bj::value* first = body.if_contains(outer);
    if (first == nullptr || !first->is_object()) return nullptr;
    const bj::value* second = inner.empty() ? first : first->as_object().if_contains(inner);
    return second != nullptr && second->is_object() ? &second->as_object() : nullptr;
  };
  static const bj::object kEmpty;
  const bj::object& backlog = pair("backlog", "") ? *pair("backlog", "") : kEmpty;
  const bj::object& capacity = pair("capacity", "") ? *pair("capacity", "") : kEmpty;
  const bj::object& hour = pair("expiring", "hour") ? *pair("expiring", "hour") : kEmpty;
  const bj::object& day = pair("expiring", "day") ? *pair("expiring", "day") : kEmpty;
  const bj::object& projection = pair("projection", "") ? *pair("projection", "") : kEmpty;
  out += ": applied index " + number_text(number_at(body, "appliedIndex")) + ", replicated time " +
         number_text(number_at(body, "at")) + " s\n";
  out += "  backlog now   " + number_text(number_at(backlog, "items")) + " items (" +
         bytes_text(number_at(backlog, "bytes")) + ")\n";
  const bj::value* source = capacity.if_contains("source");
  out += "  capacity      " + number_text(number_at(capacity, "itemsPerSecond")) + " items/s (" +
         (source != nullptr && source->is_string() ? std::string(source->as_string()) : "?") + ")\n";
  out += "  expiring      " + number_text(number_at(hour, "items")) + " items (" +
         bytes_text(number_at(hour, "bytes")) + ") within the hour, " + number_text(number_at(day, "items")) +
         " (" + bytes_text(number_at(day, "bytes")) + ") within the day\n";
  const bj::value* drain = projection.if_contains("drainSeconds");
  out += "  peak backlog  " + number_text(number_at(projection, "peakItems")) + " items at +" +
         duration_text(number_at(projection, "peakAtSeconds")) + ", drained " +
         (drain != nullptr && drain->is_number() ? duration_text(drain->to_number<double>()) + " later"
                                                 : std::string("not within 24 h")) +
         "\n";
  const bj::value* truncated = body.if_contains("truncated");
  if (truncated != nullptr && truncated->is_bool() && truncated->as_bool()) {
    out += "  (truncated at --forecast-max-entries: the figures are lower bounds)\n";
  }
  // The histogram: minutes of the first hour, then the later hours; empty buckets left out.
  struct Row {
    std::string when;
    double items;
    double bytes;
  };
  std::vector<Row> rows;
  auto add_rows = [&](std::string_view key, int64_t unit_seconds, size_t first) {
    const bj::value* buckets = body.if_contains(key);
    if (buckets == nullptr || !buckets->is_array()) return;
    const bj::array& array = buckets->as_array();
    for (size_t i = first; i < array.size(); ++i) {
      if (!array[i].is_object()) continue;
      const double items = number_at(array[i].as_object(), "items");
      if (items <= 0) continue;
      const char* unit = unit_seconds == 60 ? "m" : "h";
      rows.push_back(Row{"+" + std::to_string(i) + unit + " .. +" + std::to_string(i + 1) + unit, items,
                         number_at(array[i].as_object(), "bytes")});
    }
  };
  add_rows("minutes", 60, 0);
  add_rows("hours", 3600, 1);  // hour 0 is the minutes above
  if (rows.empty()) return out + "  nothing expires within 24 h\n";
  double most = 0;
  for (const Row& row : rows) most = std::max(most, row.items);
  Table table;
  table.header = {"expires", "items", "bytes", ""};
  for (const Row& row : rows) {
    const size_t bar = static_cast<size_t>(std::ceil(row.items / most * 30));
    table.rows.push_back({row.when, number_text(row.items), bytes_text(row.bytes), std::string(bar, '#')});
  }
  return out + render_table(table);
}

std::string forecast_json(const ForecastAnswers& answers) {
  std::string out = "{\"nodes\":[";
  for (size_t i = 0; i < answers.nodes.size(); ++i) {
    const NodeForecast& node = answers.nodes[i];
    if (i > 0) out += ",";
    out += "{\"node\":" + std::to_string(node.node) + ",\"address\":" + json_quote(node.address) +
           ",\"status\":" + std::to_string(node.response.status) + ",\"message\":" + json_quote(node.response.message) +
           ",\"body\":" +
           (node.response.body.empty()             ? std::string("null")
            : is_valid_json(node.response.body)    ? compact_json(node.response.body)
                                                   : json_quote(node.response.body)) +
           "}";
  }
  out += "]";
  if (!answers.error.empty()) out += ",\"error\":" + json_quote(answers.error);
  return out + "}";
}

int run_forecast(const ClientOptions& options, std::string_view database, std::string_view container, uint64_t node,
                 OutputFormat format, std::ostream& out, std::ostream& err) {
  const ForecastAnswers answers = container_forecast(options, database, container, node);
  bool all_ok = answers.error.empty();
  for (const NodeForecast& answer : answers.nodes) all_ok = all_ok && answer.response.ok();
  if (format == OutputFormat::kJson) {
    out << forecast_json(answers) << std::endl;
  } else {
    if (!answers.error.empty()) err << "mayfly: forecast: " << answers.error << "\n";
    for (const NodeForecast& answer : answers.nodes) out << forecast_text(answer);
  }
  return all_ok ? 0 : 1;
}

}  // namespace mayfly::client
