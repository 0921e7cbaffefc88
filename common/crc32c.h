// CRC-32C (Castagnoli; iSCSI, ext4, LevelDB's logs): the checksum of every Raft WAL record (storage/raft_log_store.h).
// Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time), else a table (Boost.CRC); both give
// the same value. crc32c_extend continues a checksum over more bytes: crc32c(a + b) == crc32c_extend(crc32c(a), b).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace mayfly::crc {

uint32_t crc32c(std::string_view data);
uint32_t crc32c_extend(uint32_t crc, std::string_view data);
// The table version alone (tests compare the two).
uint32_t crc32c_portable(uint32_t crc, std::string_view data);
// Whether crc32c uses the CPU's instruction here.
bool crc32c_hardware();

}  // namespace mayfly::crc
