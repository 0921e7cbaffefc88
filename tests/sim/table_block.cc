#include "tests/sim/table_block.h"

#include <snappy.h>

#include <cstdint>
#include <string>

namespace mayfly::sim {
namespace {

constexpr size_t kTrailerBytes = 5;  // compression type + CRC32C
constexpr char kNoCompression = 0;
constexpr char kSnappyCompression = 1;

uint32_t fixed32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  return value;
}

bool varint32(std::string_view bytes, size_t limit, size_t& at, uint32_t& value) {
  value = 0;
  for (int shift = 0; shift <= 28 && at < limit; shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(bytes[at++]);
    value |= static_cast<uint32_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

bool table_block_keys_all_start_with(std::string_view read, std::string_view prefix) {
  if (read.size() < kTrailerBytes) return false;
  std::string_view contents = read.substr(0, read.size() - kTrailerBytes);
  std::string uncompressed;
  switch (read[read.size() - kTrailerBytes]) {
    case kNoCompression: break;
    case kSnappyCompression:
      if (!snappy::Uncompress(contents.data(), contents.size(), &uncompressed)) return false;
      contents = uncompressed;
      break;
    default: return false;
  }
  if (contents.size() < 4) return false;
  const uint64_t restarts = fixed32(contents, contents.size() - 4);
  if (restarts == 0 || (restarts + 1) * 4 > contents.size()) return false;
  const size_t entries_end = contents.size() - (restarts + 1) * 4;
  std::string key;
  size_t at = 0;
  size_t count = 0;
  while (at < entries_end) {
    uint32_t shared = 0, unshared = 0, value_bytes = 0;
    if (!varint32(contents, entries_end, at, shared) || !varint32(contents, entries_end, at, unshared) ||
        !varint32(contents, entries_end, at, value_bytes)) {
      return false;
    }
    if (shared > key.size() || unshared > entries_end - at || value_bytes > entries_end - at - unshared) return false;
    key.resize(shared);
    key.append(contents.substr(at, unshared));
    at += unshared + value_bytes;
    if (key.size() < prefix.size() + 8 || key.compare(0, prefix.size(), prefix) != 0) return false;
    ++count;
  }
  return count > 0 && at == entries_end;
}

}  // namespace mayfly::sim
