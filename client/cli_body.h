// JSON bodies given on the `mayfly` command line: inline, `@path` (the file's contents) or `-` (standard input).
// Thread-safety: stateless; the stream is read on the calling thread.
#pragma once

#include <istream>
#include <optional>
#include <string>

namespace mayfly::client {

inline constexpr size_t kBodyMaxBytes = 16 * 1024 * 1024;

// The body an argument names, or an error message for the user (file not readable, no standard input).
struct BodyRead {
  std::optional<std::string> body;
  std::string error;
};

// Reads the body `argument` names: "-" reads `standard_input` to its end (null: not available), "@path" reads the
// file, anything else is the body itself. A file or input larger than max_bytes is refused (the server's item limit
// is 2 MB; patch operations and query parameters are smaller still).
BodyRead read_body(const std::string& argument, std::istream* standard_input, size_t max_bytes = kBodyMaxBytes);

}  // namespace mayfly::client
