// Text helpers of the `mayfly` CLI: JSON as the server wrote it (split and compacted without re-printing numbers),
// table cells (truncated to a width, on one line) and tables drawn like `etcdctl -w table`. Pure functions, no I/O.
// Thread-safety: stateless.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mayfly::client {

// `text` as a JSON string literal (quotes and escapes added).
std::string json_quote(std::string_view text);

// JSON text minus the whitespace outside strings, so it fits on one line with every number as written (Boost.JSON
// would print 1.5 as 1.5E0). The input must be valid JSON.
std::string compact_json(std::string_view json);

// The elements of a JSON array, each as its own text (surrounding whitespace removed); the input must be a valid
// JSON array. Empty for "[]".
std::vector<std::string_view> json_array_elements(std::string_view array);

// The members of a JSON object as (key, value text) pairs, keys unescaped, in document order; the input must be a
// valid JSON object.
std::vector<std::pair<std::string, std::string_view>> json_object_members(std::string_view object);

// True when `text` parses as JSON (any value).
bool is_valid_json(std::string_view text);

// Server-assigned item properties (_rid, _self, _etag, _attachments, _ts, _expiresAt): a write ignores them; tables
// show only _TS; `item export --strip-system` leaves them out.
bool is_system_property(std::string_view name);

// A cell's text: a JSON string's contents unquoted, any other value as compact JSON, on one line (control characters
// become spaces).
std::string cell_text(std::string_view json_value);

// `text` cut to at most `width` characters (UTF-8 code points), ending in "…" when cut. width 0: unlimited.
std::string truncate_cell(std::string_view text, size_t width);

// Characters (UTF-8 code points) in `text`: its width in a terminal for the scripts tables show.
size_t display_width(std::string_view text);

// A table: a header and rows of cells (rows shorter than the header are padded with empty cells).
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// The table drawn with +---+ borders, the header upper-cased and centred, cells left-aligned (etcdctl's look).
// Cells are drawn as given: truncate them first.
std::string render_table(const Table& table);

}  // namespace mayfly::client
