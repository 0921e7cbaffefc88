// Byte encodings of the Raft values, built on common/codec.h: Message for the peer transport, Entry and HardState
// for the persisted log, ConfigChange for config-change entries' data, SnapshotMetadata for the snapshot record.
//
// Every encoding starts with a format version byte. Decoders never trust their input: truncated, oversized,
// trailing or out-of-range data is a Corruption status, never a crash.
//
// Bounds on what a decoder allocates (a message arrives from the network): an encoded message is at most
// kMaxEncodedMessageBytes; a count is at most what the remaining bytes can hold at the smallest encoding of an
// element (an entry takes at least kMinEncodedEntryBytes); a message holds at most kMaxDecodedEntries entries, so
// its entry vector takes at most kMaxDecodedEntries * sizeof(Entry) = 64 MiB — at most ~13x its input for
// pathological all-empty entries, payload bytes are copied 1:1; a membership holds at most kMaxMembers ids. An
// honest sender stays far below: the core cuts appends at RaftConfig::max_message_bytes (4 MiB in mayflyd) with 32
// bytes charged per entry, snapshot chunks at snapshot_chunk_bytes.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "replication/message.h"
#include "replication/types.h"

namespace mayfly::replication {

inline constexpr size_t kMaxEncodedMessageBytes = size_t{16} << 20;
inline constexpr size_t kMinEncodedEntryBytes = 5;  // term, index, ts, type, data length: one byte each at least
inline constexpr size_t kMaxDecodedEntries = size_t{1} << 20;
inline constexpr size_t kMaxMembers = 4096;

std::string encode_entry(const Entry& entry);
Result<Entry> decode_entry(std::string_view bytes);

std::string encode_message(const Message& message);
Result<Message> decode_message(std::string_view bytes);

std::string encode_config_change(const ConfigChange& change);
Result<ConfigChange> decode_config_change(std::string_view bytes);

std::string encode_hard_state(const HardState& hard_state);
Result<HardState> decode_hard_state(std::string_view bytes);

std::string encode_snapshot_metadata(const SnapshotMetadata& metadata);
Result<SnapshotMetadata> decode_snapshot_metadata(std::string_view bytes);

}  // namespace mayfly::replication
