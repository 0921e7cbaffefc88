// What a LevelDB table block holds, seen from below LevelDB (an Env's RandomAccessFile::Read), so a fault-injecting
// Env can fail the reads of one kind of record only — e.g. the Raft log's entries, while the state machine beside
// them in the same table files reads fine: a disk whose bad sectors happen to hold the log.
//
// Format (LevelDB's doc/table_format.md): a block is read as its contents, a 1-byte compression type (0 none,
// 1 snappy) and a 4-byte CRC; the uncompressed contents are entries (varint32 shared key bytes, varint32 unshared,
// varint32 value length, unshared key bytes, value), then the restart array and its length (fixed32 each). Keys are
// internal keys: the user key followed by 8 bytes of sequence and type.
// Thread-safety: a pure function.
#pragma once

#include <string_view>

namespace mayfly::sim {

// Whether `read` — the bytes of one block read with its trailer — decodes as a block with at least one entry whose
// every user key starts with `prefix`. Anything else (a footer, a filter block, a block with other keys too, bytes that
// do not decode) is false.
bool table_block_keys_all_start_with(std::string_view read, std::string_view prefix);

}  // namespace mayfly::sim
