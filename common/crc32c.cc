#include "common/crc32c.h"

#include <boost/crc.hpp>
#include <cstring>

namespace mayfly::crc {
namespace {

#if defined(__x86_64__)
// Raw (no pre/post inversion) CRC-32C with the SSE4.2 instruction, 8 bytes a step.
__attribute__((target("sse4.2"))) uint32_t raw_hardware(uint32_t raw, std::string_view data) {
  const char* p = data.data();
  size_t n = data.size();
  uint64_t crc = raw;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc = __builtin_ia32_crc32di(crc, word);
    p += 8;
    n -= 8;
  }
  auto crc32 = static_cast<uint32_t>(crc);
  while (n-- > 0) crc32 = __builtin_ia32_crc32qi(crc32, static_cast<unsigned char>(*p++));
  return crc32;
}

bool detect_hardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

}  // namespace

bool crc32c_hardware() {
#if defined(__x86_64__)
  static const bool available = detect_hardware();
  return available;
#else
  return false;
#endif
}

uint32_t crc32c_portable(uint32_t crc, std::string_view data) {
  // Castagnoli polynomial, reflected, initial value and final xor all ones: continuing from a finished checksum
  // means starting from its inversion.
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> table(crc ^ 0xFFFFFFFFu);
  table.process_bytes(data.data(), data.size());
  return table.checksum();
}

uint32_t crc32c_extend(uint32_t crc, std::string_view data) {
#if defined(__x86_64__)
  if (crc32c_hardware()) return ~raw_hardware(~crc, data);
#endif
  return crc32c_portable(crc, data);
}

uint32_t crc32c(std::string_view data) { return crc32c_extend(0, data); }

}  // namespace mayfly::crc
