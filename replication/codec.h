// Byte encodings of the Raft values, built on common/codec.h: Message for the peer transport, Entry and HardState
// for the persisted log, ConfigChange for config-change entries' data, SnapshotMetadata for the snapshot record.
//
// Every encoding starts with a format version byte. Decoders never trust their input: truncated, oversized,
// trailing or out-of-range data is a Corruption status, never a crash.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "replication/message.h"
#include "replication/types.h"

namespace mayfly::replication {

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
