#include "client/cli_text.h"

#include <boost/json.hpp>

#include <algorithm>

namespace mayfly::client {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_spaces(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

// The end of the string literal that starts at `pos` (one past its closing quote).
size_t skip_string(std::string_view text, size_t pos) {
  for (++pos; pos < text.size(); ++pos) {
    if (text[pos] == '\\') {
      ++pos;
    } else if (text[pos] == '"') {
      return pos + 1;
    }
  }
  return text.size();
}

// The end of the JSON value that starts at `pos` (valid JSON assumed, so brackets balance outside strings).
size_t skip_value(std::string_view text, size_t pos) {
  if (pos >= text.size()) return pos;
  if (text[pos] == '"') return skip_string(text, pos);
  if (text[pos] == '{' || text[pos] == '[') {
    int depth = 0;
    while (pos < text.size()) {
      const char c = text[pos];
      if (c == '"') {
        pos = skip_string(text, pos);
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') {
        if (--depth == 0) return pos + 1;
      }
      ++pos;
    }
    return pos;
  }
  while (pos < text.size() && text[pos] != ',' && text[pos] != ']' && text[pos] != '}' && !is_space(text[pos])) ++pos;
  return pos;
}

// Calls `each(pos)` at the start of every element of the array or object `text` (for an object, at the member's key);
// `each` returns where the element ends. Valid JSON assumed.
template <typename Each>
void for_each_element(std::string_view text, Each each) {
  size_t pos = skip_spaces(text, 0);
  if (pos >= text.size() || (text[pos] != '[' && text[pos] != '{')) return;
  const char close = text[pos] == '[' ? ']' : '}';
  pos = skip_spaces(text, pos + 1);
  while (pos < text.size() && text[pos] != close) {
    pos = each(pos);
    pos = skip_spaces(text, pos);
    if (pos < text.size() && text[pos] == ',') pos = skip_spaces(text, pos + 1);
  }
}

// Bytes in the UTF-8 sequence that starts with `lead`.
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xe) return 3;
  if ((lead >> 3) == 0x1e) return 4;
  return 1;  // a stray continuation byte: count it alone
}

std::string centred(const std::string& text, size_t width) {
  const size_t used = display_width(text);
  if (used >= width) return text;
  const size_t left = (width - used) / 2;
  return std::string(left, ' ') + text + std::string(width - used - left, ' ');
}

std::string padded(const std::string& text, size_t width) {
  const size_t used = display_width(text);
  return used >= width ? text : text + std::string(width - used, ' ');
}

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; });
  return text;
}

}  // namespace

std::string json_quote(std::string_view text) {
  return boost::json::serialize(boost::json::value(boost::json::string(text)));
}

std::string compact_json(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  size_t pos = 0;
  while (pos < json.size()) {
    const char c = json[pos];
    if (c == '"') {
      const size_t end = skip_string(json, pos);
      out.append(json.substr(pos, end - pos));
      pos = end;
      continue;
    }
    if (!is_space(c)) out.push_back(c);
    ++pos;
  }
  return out;
}

std::vector<std::string_view> json_array_elements(std::string_view array) {
  std::vector<std::string_view> out;
  for_each_element(array, [&](size_t pos) {
    const size_t end = skip_value(array, pos);
    out.push_back(array.substr(pos, end - pos));
    return end;
  });
  return out;
}

std::vector<std::pair<std::string, std::string_view>> json_object_members(std::string_view object) {
  std::vector<std::pair<std::string, std::string_view>> out;
  for_each_element(object, [&](size_t pos) {
    const size_t key_end = skip_string(object, pos);
    boost::system::error_code error;
    const boost::json::value key = boost::json::parse(object.substr(pos, key_end - pos), error);
    size_t value_start = skip_spaces(object, key_end);
    if (value_start < object.size() && object[value_start] == ':') value_start = skip_spaces(object, value_start + 1);
    const size_t value_end = skip_value(object, value_start);
    out.emplace_back(!error && key.is_string() ? std::string(key.as_string()) : std::string(),
                     object.substr(value_start, value_end - value_start));
    return value_end;
  });
  return out;
}

bool is_valid_json(std::string_view text) {
  boost::system::error_code error;
  boost::json::parse(text, error);
  return !error;
}

std::string cell_text(std::string_view json_value) {
  std::string text;
  if (!json_value.empty() && json_value.front() == '"') {
    boost::system::error_code error;
    const boost::json::value value = boost::json::parse(json_value, error);
    text = !error && value.is_string() ? std::string(value.as_string()) : std::string(json_value);
  } else {
    text = compact_json(json_value);
  }
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return text;
}

size_t display_width(std::string_view text) {
  size_t width = 0;
  for (size_t pos = 0; pos < text.size(); pos += sequence_length(static_cast<unsigned char>(text[pos]))) ++width;
  return width;
}

std::string truncate_cell(std::string_view text, size_t width) {
  if (width == 0 || display_width(text) <= width) return std::string(text);
  std::string out;
  size_t pos = 0;
  for (size_t kept = 0; kept + 1 < width && pos < text.size(); ++kept) {
    const size_t length = std::min(sequence_length(static_cast<unsigned char>(text[pos])), text.size() - pos);
    out.append(text.substr(pos, length));
    pos += length;
  }
  return out + "…";
}

std::string render_table(const Table& table) {
  const size_t columns = table.header.size();
  std::vector<size_t> widths(columns, 0);
  for (size_t c = 0; c < columns; ++c) widths[c] = display_width(table.header[c]);
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < columns && c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  std::string rule = "+";
  for (size_t width : widths) rule += std::string(width + 2, '-') + "+";
  rule += "\n";
  std::string out = rule + "|";
  for (size_t c = 0; c < columns; ++c) out += " " + centred(upper(table.header[c]), widths[c]) + " |";
  out += "\n" + rule;
  for (const auto& row : table.rows) {
    out += "|";
    for (size_t c = 0; c < columns; ++c) out += " " + padded(c < row.size() ? row[c] : std::string(), widths[c]) + " |";
    out += "\n";
  }
  return out + rule;
}

bool is_system_property(std::string_view name) {
  return name == "_rid" || name == "_self" || name == "_etag" || name == "_attachments" || name == "_ts" ||
         name == "_expiresAt";
}

}  // namespace mayfly::client
