#include "storage/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace mayfly::json {

Result<boost::json::value> parse(std::string_view text) {
  boost::json::parse_options options;
  options.max_depth = kMaxDepth;
  boost::json::stream_parser parser({}, options);
  boost::json::error_code ec;
  size_t consumed = parser.write_some(text.data(), text.size(), ec);
  if (!ec) parser.finish(ec);
  if (ec) {
    return Status::invalid_argument("malformed JSON at byte " + std::to_string(consumed) + ": " + ec.message());
  }
  return parser.release();
}

namespace {

void write_double(double value, std::string& out) {
  if (!std::isfinite(value)) {  // cannot come from parsing; keep the output valid JSON anyway
    out += "null";
    return;
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  MAYFLY_ASSERT(ec == std::errc());
  std::string_view text(buffer, static_cast<size_t>(end - buffer));
  out += text;
  if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

}  // namespace

void write_json_string(std::string_view text, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out.push_back(kHex[byte >> 4]);
          out.push_back(kHex[byte & 0xf]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void write_json(const boost::json::value& value, std::string& out) {
  switch (value.kind()) {
    case boost::json::kind::null: out += "null"; break;
    case boost::json::kind::bool_: out += value.get_bool() ? "true" : "false"; break;
    case boost::json::kind::int64: out += std::to_string(value.get_int64()); break;
    case boost::json::kind::uint64: out += std::to_string(value.get_uint64()); break;
    case boost::json::kind::double_: write_double(value.get_double(), out); break;
    case boost::json::kind::string: write_json_string(value.get_string(), out); break;
    case boost::json::kind::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& element : value.get_array()) {
        if (!first) out.push_back(',');
        first = false;
        write_json(element, out);
      }
      out.push_back(']');
      break;
    }
    case boost::json::kind::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& member : value.get_object()) {
        if (!first) out.push_back(',');
        first = false;
        write_json_string(member.key(), out);
        out.push_back(':');
        write_json(member.value(), out);
      }
      out.push_back('}');
      break;
    }
  }
}

std::string to_json(const boost::json::value& value) {
  std::string out;
  write_json(value, out);
  return out;
}

ttl::TtlLiteral ttl_literal(const boost::json::value* value) {
  using Kind = ttl::TtlLiteral::Kind;
  ttl::TtlLiteral literal;
  if (value == nullptr) return literal;
  switch (value->kind()) {
    case boost::json::kind::null: literal.kind = Kind::kNull; break;
    case boost::json::kind::bool_: literal.kind = Kind::kBool; break;
    case boost::json::kind::int64:
      literal.kind = Kind::kInteger;
      literal.integer = value->get_int64();
      literal.integer_fits = true;
      break;
    case boost::json::kind::uint64: literal.kind = Kind::kInteger; break;  // > INT64_MAX: never valid
    case boost::json::kind::double_: literal.kind = Kind::kNonInteger; break;
    case boost::json::kind::string: literal.kind = Kind::kString; break;
    case boost::json::kind::array: literal.kind = Kind::kArray; break;
    case boost::json::kind::object: literal.kind = Kind::kObject; break;
  }
  literal.text = value->is_string() ? std::string(value->get_string()) : to_json(*value);
  return literal;
}

namespace {

// The segments of a path, or why it is malformed.
Result<std::vector<std::string>> path_segments(std::string_view path) {
  if (path.empty() || path[0] != '/') {
    return Status::invalid_argument("partition key path '" + std::string(path) + "' must start with '/', e.g. /tenantId");
  }
  std::vector<std::string> segments;
  size_t at = 1;
  while (true) {
    std::string segment;
    if (at < path.size() && path[at] == '"') {
      const size_t close = path.find('"', at + 1);
      if (close == std::string_view::npos) {
        return Status::invalid_argument("partition key path '" + std::string(path) + "' has an unclosed quote");
      }
      segment = std::string(path.substr(at + 1, close - at - 1));
      at = close + 1;
      if (at < path.size() && path[at] != '/') {
        return Status::invalid_argument("partition key path '" + std::string(path) +
                                        "': a quoted segment ends at a '/'");
      }
    } else {
      const size_t slash = std::min(path.find('/', at), path.size());
      segment = std::string(path.substr(at, slash - at));
      at = slash;
    }
    if (segment.empty()) {
      return Status::invalid_argument("partition key path '" + std::string(path) + "' has an empty segment");
    }
    segments.push_back(std::move(segment));
    if (at >= path.size()) return segments;
    ++at;  // the '/'
  }
}

}  // namespace

std::vector<std::string> partition_key_path_segments(std::string_view path) {
  Result<std::vector<std::string>> segments = path_segments(path);
  return segments.is_ok() ? std::move(segments).value() : std::vector<std::string>{};
}

const boost::json::value* find_path(const boost::json::object& object, std::string_view path) {
  const std::vector<std::string> segments = partition_key_path_segments(path);
  if (segments.empty()) return nullptr;
  const boost::json::object* current = &object;
  for (size_t i = 0; i < segments.size(); ++i) {
    const boost::json::value* found = current->if_contains(segments[i]);
    if (found == nullptr || i + 1 == segments.size()) return found;
    if (!found->is_object()) return nullptr;
    current = &found->get_object();
  }
  return nullptr;
}

namespace {

Status validate_one_path(std::string_view path) {
  Result<std::vector<std::string>> segments = path_segments(path);
  if (!segments.is_ok()) return segments.status();
  if (segments->size() > 3) {
    return Status::invalid_argument("partition key path '" + std::string(path) + "' is deeper than 3 levels");
  }
  return Status::ok();
}

// The paths of a hierarchical definition, or the error.
Result<std::vector<std::string>> hierarchical_paths(std::string_view definition) {
  Result<boost::json::value> parsed = parse(definition);
  if (!parsed.is_ok() || !parsed->is_array()) {
    return Status::invalid_argument("a hierarchical partition key is a JSON array of 2 or 3 paths, like "
                                    "[\"/tenant\",\"/user\"], not '" + std::string(definition.substr(0, 128)) + "'");
  }
  const boost::json::array& array = parsed->get_array();
  if (array.size() < 2 || array.size() > kMaxPartitionKeyPaths) {
    return Status::invalid_argument("a hierarchical partition key (kind MultiHash) has 2 or 3 paths, not " +
                                    std::to_string(array.size()) + (array.size() == 1 ? "; use kind Hash for one" : ""));
  }
  std::vector<std::string> paths;
  for (const boost::json::value& path : array) {
    if (!path.is_string()) return Status::invalid_argument("partition key paths are strings, like \"/tenant\"");
    std::string text(path.get_string());
    if (Status valid = validate_one_path(text); !valid.is_ok()) return valid;
    if (std::find(paths.begin(), paths.end(), text) != paths.end()) {
      return Status::invalid_argument("partition key path '" + text + "' is listed twice");
    }
    paths.push_back(std::move(text));
  }
  return paths;
}

}  // namespace

Status validate_partition_key_path(std::string_view definition) {
  if (!definition.empty() && definition.front() == '[') return hierarchical_paths(definition).status();
  return validate_one_path(definition);
}

std::vector<std::string> partition_key_paths(std::string_view definition) {
  if (!definition.empty() && definition.front() == '[') {
    Result<std::vector<std::string>> paths = hierarchical_paths(definition);
    if (paths.is_ok()) return std::move(paths).value();
  }
  return {std::string(definition)};
}

std::string hierarchical_partition_key_definition(const std::vector<std::string>& paths) {
  std::string out = "[";
  for (size_t i = 0; i < paths.size(); ++i) {
    if (i > 0) out += ',';
    write_json_string(paths[i], out);
  }
  out += ']';
  return out;
}

Result<std::string> canonical_partition_key(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null:
    case boost::json::kind::bool_:
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::string:
      return to_json(value);
    case boost::json::kind::double_: {
      const double d = value.get_double();
      if (std::trunc(d) == d && d >= -9.2e18 && d <= 9.2e18) return std::to_string(static_cast<int64_t>(d));
      return to_json(value);
    }
    case boost::json::kind::array:
    case boost::json::kind::object:
      break;
  }
  return Status::invalid_argument("partition key value must be a string, number, boolean or null, not " +
                                  std::string(value.is_array() ? "an array" : "an object"));
}

namespace {
// One component of a requested key: a scalar, or {} for undefined.
Result<std::string> canonical_component(const boost::json::value& value) {
  if (value.is_object() && value.get_object().empty()) return std::string(kUndefinedPartitionKey);
  return canonical_partition_key(value);
}
}  // namespace

Result<std::string> canonical_partition_key_value(const boost::json::value& value) {
  if (!value.is_array()) return canonical_component(value);
  const boost::json::array& components = value.get_array();
  if (components.size() < 2 || components.size() > kMaxPartitionKeyPaths) {
    return Status::invalid_argument("a hierarchical partition key value is an array of 2 or 3 values, not " +
                                    std::to_string(components.size()));
  }
  std::string out = "[";
  for (size_t i = 0; i < components.size(); ++i) {
    Result<std::string> component = canonical_component(components[i]);
    if (!component.is_ok()) return component.status();
    if (i > 0) out += ',';
    out += component.value();
  }
  out += ']';
  return out;
}

Status check_partition_key_shape(std::string_view definition, std::string_view canonical_value) {
  const size_t paths = partition_key_paths(definition).size();
  size_t components = 1;
  if (!canonical_value.empty() && canonical_value.front() == '[') {
    Result<boost::json::value> parsed = parse(canonical_value);
    components = parsed.is_ok() && parsed->is_array() ? parsed->get_array().size() : 0;
  }
  if (components == paths) return Status::ok();
  if (paths == 1) {
    return Status::invalid_argument("the container's partition key is one path (" + std::string(definition) +
                                    "): give one value, not " + std::to_string(components));
  }
  return Status::invalid_argument("the container's partition key is hierarchical with " + std::to_string(paths) +
                                  " paths " + std::string(definition) + ": give " + std::to_string(paths) +
                                  " values, not " + std::to_string(components));
}

int depth(const boost::json::value& value, int limit) {
  if (limit <= 0) return 0;
  int deepest = 0;
  if (value.is_array()) {
    for (const auto& element : value.get_array()) deepest = std::max(deepest, depth(element, limit - 1));
    return deepest + 1;
  }
  if (value.is_object()) {
    for (const auto& member : value.get_object()) deepest = std::max(deepest, depth(member.value(), limit - 1));
    return deepest + 1;
  }
  return 0;
}

size_t utf8_length(std::string_view text) {
  size_t count = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++count;
  }
  return count;
}

}  // namespace mayfly::json
