#include "client/cli_body.h"

#include <fstream>

namespace mayfly::client {

namespace {

// Reads `in` to its end, refusing more than max_bytes.
BodyRead read_all(std::istream& in, size_t max_bytes, const std::string& what) {
  std::string body;
  char buffer[64 * 1024];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    body.append(buffer, static_cast<size_t>(in.gcount()));
    if (body.size() > max_bytes) {
      return {std::nullopt, what + " holds more than " + std::to_string(max_bytes) + " bytes"};
    }
  }
  if (in.bad()) return {std::nullopt, "cannot read " + what};
  return {std::move(body), ""};
}

}  // namespace

BodyRead read_body(const std::string& argument, std::istream* standard_input, size_t max_bytes) {
  if (argument == "-") {
    if (standard_input == nullptr) return {std::nullopt, "'-' reads JSON from standard input, which is not available"};
    return read_all(*standard_input, max_bytes, "standard input");
  }
  if (!argument.empty() && argument.front() == '@') {
    const std::string path = argument.substr(1);
    if (path.empty()) return {std::nullopt, "'@' must be followed by a file name (@item.json)"};
    std::ifstream file(path, std::ios::binary);
    if (!file) return {std::nullopt, "cannot read JSON file '" + path + "' (from " + argument + ")"};
    return read_all(file, max_bytes, "JSON file '" + path + "'");
  }
  return {argument, ""};
}

}  // namespace mayfly::client
