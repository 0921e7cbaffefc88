#include "replication/codec.h"

#include <string>
#include <vector>

#include "common/codec.h"

namespace mayfly::replication {
namespace {

// Bumped when a layout changes; decoders refuse versions they do not know.
constexpr uint8_t kEntryFormat = 1;
constexpr uint8_t kMessageFormat = 2;  // 2: Message::clock_micros at the end
// 3: Message::leader after it; written only when the leader is set, so a node of the release before still reads every
// message but those (refused votes that name a leader, which it does without).
constexpr uint8_t kMessageFormatWithLeader = 3;
constexpr uint8_t kConfigChangeFormat = 1;
// 1: term, vote, commit. 2: and the leader of the term (read from both; written as 2).
constexpr uint8_t kHardStateFormatV1 = 1;
constexpr uint8_t kHardStateFormat = 2;
constexpr uint8_t kSnapshotMetadataFormat = 1;

void put_id(std::string& out, uint64_t value) { codec::put_varint(out, value); }

template <typename Id>
bool get_id(codec::Reader& reader, Id& id) {
  uint64_t value;
  if (!reader.get_varint(value)) return false;
  id = Id(value);
  return true;
}

bool get_string(codec::Reader& reader, std::string& value) {
  std::string_view view;
  if (!reader.get_bytes(view)) return false;
  value.assign(view);
  return true;
}

// A count read from the input can be at most what the bytes left can hold at `min_element_bytes` per element and at
// most `max_count`, which bounds allocations by the input size (see codec.h).
bool get_count(codec::Reader& reader, uint64_t& count, size_t min_element_bytes, size_t max_count) {
  return reader.get_varint(count) && count <= reader.rest().size() / min_element_bytes && count <= max_count;
}

void put_entry(std::string& out, const Entry& entry) {
  put_id(out, entry.term.value());
  put_id(out, entry.index.value());
  codec::put_varint_signed(out, entry.ts_micros);
  codec::put_u8(out, static_cast<uint8_t>(entry.type));
  codec::put_bytes(out, entry.data);
}

bool get_entry(codec::Reader& reader, Entry& entry) {
  uint8_t type;
  if (!get_id(reader, entry.term) || !get_id(reader, entry.index) || !reader.get_varint_signed(entry.ts_micros) ||
      !reader.get_u8(type) || type > kMaxEntryType || !get_string(reader, entry.data)) {
    return false;
  }
  entry.type = static_cast<EntryType>(type);
  return true;
}

void put_id_set(std::string& out, const std::set<NodeId>& ids) {
  codec::put_varint(out, ids.size());
  for (NodeId id : ids) put_id(out, id.value());
}

bool get_id_set(codec::Reader& reader, std::set<NodeId>& ids) {
  uint64_t count;
  if (!get_count(reader, count, 1, kMaxMembers)) return false;
  for (uint64_t i = 0; i < count; ++i) {
    NodeId id;
    if (!get_id(reader, id) || !ids.insert(id).second) return false;  // duplicates are malformed
  }
  return true;
}

void put_snapshot_metadata(std::string& out, const SnapshotMetadata& metadata) {
  put_id(out, metadata.index.value());
  put_id(out, metadata.term.value());
  codec::put_varint_signed(out, metadata.ts_micros);
  put_id_set(out, metadata.membership.voters);
  put_id_set(out, metadata.membership.learners);
  codec::put_varint(out, metadata.size_bytes);
}

bool get_snapshot_metadata(codec::Reader& reader, SnapshotMetadata& metadata) {
  if (!get_id(reader, metadata.index) || !get_id(reader, metadata.term) ||
      !reader.get_varint_signed(metadata.ts_micros) || !get_id_set(reader, metadata.membership.voters) ||
      !get_id_set(reader, metadata.membership.learners) || !reader.get_varint(metadata.size_bytes)) {
    return false;
  }
  for (NodeId learner : metadata.membership.learners) {
    if (metadata.membership.is_voter(learner)) return false;
  }
  return true;
}

bool check_version(codec::Reader& reader, uint8_t expected) {
  uint8_t version;
  return reader.get_u8(version) && version == expected;
}

Status malformed(const char* what) { return Status::corruption(std::string("malformed ") + what); }

}  // namespace

std::string encode_entry(const Entry& entry) {
  std::string out;
  codec::put_u8(out, kEntryFormat);
  put_entry(out, entry);
  return out;
}

Result<Entry> decode_entry(std::string_view bytes) {
  codec::Reader reader(bytes);
  Entry entry;
  if (!check_version(reader, kEntryFormat) || !get_entry(reader, entry) || !reader.done()) return malformed("entry");
  return entry;
}

std::string encode_message(const Message& message) {
  std::string out;
  const bool with_leader = message.leader != NodeId(0);
  codec::put_u8(out, with_leader ? kMessageFormatWithLeader : kMessageFormat);
  codec::put_u8(out, static_cast<uint8_t>(message.type));
  put_id(out, message.from.value());
  put_id(out, message.to.value());
  put_id(out, message.term.value());
  put_id(out, message.log_term.value());
  put_id(out, message.index.value());
  codec::put_varint(out, message.entries.size());
  for (const Entry& entry : message.entries) put_entry(out, entry);
  put_id(out, message.commit.value());
  codec::put_u8(out, message.reject ? 1 : 0);
  put_id(out, message.reject_hint.value());
  codec::put_u8(out, message.leadership_transfer ? 1 : 0);
  put_snapshot_metadata(out, message.snapshot);
  codec::put_varint(out, message.snapshot_offset);
  codec::put_bytes(out, message.snapshot_chunk);
  codec::put_u8(out, message.snapshot_done ? 1 : 0);
  codec::put_varint(out, message.read_round);
  codec::put_bytes(out, message.context);
  codec::put_varint_signed(out, message.clock_micros);
  if (with_leader) put_id(out, message.leader.value());
  return out;
}

Result<Message> decode_message(std::string_view bytes) {
  if (bytes.size() > kMaxEncodedMessageBytes) return malformed("message: too large");
  codec::Reader reader(bytes);
  Message message;
  uint8_t version;
  uint8_t type;
  uint64_t entry_count;
  if (!reader.get_u8(version) || (version != kMessageFormat && version != kMessageFormatWithLeader) ||
      !reader.get_u8(type) || type > kMaxMessageType ||
      !get_id(reader, message.from) || !get_id(reader, message.to) || !get_id(reader, message.term) ||
      !get_id(reader, message.log_term) || !get_id(reader, message.index) ||
      !get_count(reader, entry_count, kMinEncodedEntryBytes, kMaxDecodedEntries)) {
    return malformed("message header");
  }
  message.type = static_cast<MessageType>(type);
  message.entries.resize(entry_count);
  for (Entry& entry : message.entries) {
    if (!get_entry(reader, entry)) return malformed("message entry");
  }
  if (!get_id(reader, message.commit) || !reader.get_bool(message.reject) || !get_id(reader, message.reject_hint) ||
      !reader.get_bool(message.leadership_transfer) || !get_snapshot_metadata(reader, message.snapshot) ||
      !reader.get_varint(message.snapshot_offset) || !get_string(reader, message.snapshot_chunk) ||
      !reader.get_bool(message.snapshot_done) || !reader.get_varint(message.read_round) ||
      !get_string(reader, message.context) || !reader.get_varint_signed(message.clock_micros) ||
      (version == kMessageFormatWithLeader && (!get_id(reader, message.leader) || message.leader == NodeId(0))) ||
      !reader.done()) {
    return malformed("message body");
  }
  return message;
}

std::string encode_config_change(const ConfigChange& change) {
  std::string out;
  codec::put_u8(out, kConfigChangeFormat);
  codec::put_u8(out, static_cast<uint8_t>(change.type));
  put_id(out, change.node.value());
  return out;
}

Result<ConfigChange> decode_config_change(std::string_view bytes) {
  codec::Reader reader(bytes);
  ConfigChange change;
  uint8_t type;
  if (!check_version(reader, kConfigChangeFormat) || !reader.get_u8(type) || type > kMaxConfigChangeType ||
      !get_id(reader, change.node) || !reader.done()) {
    return malformed("config change");
  }
  change.type = static_cast<ConfigChangeType>(type);
  return change;
}

std::string encode_hard_state(const HardState& hard_state) {
  std::string out;
  codec::put_u8(out, kHardStateFormat);
  put_id(out, hard_state.term.value());
  put_id(out, hard_state.vote.value());
  put_id(out, hard_state.commit.value());
  put_id(out, hard_state.leader.value());
  return out;
}

Result<HardState> decode_hard_state(std::string_view bytes) {
  codec::Reader reader(bytes);
  HardState hard_state;
  uint8_t version = 0;
  if (!reader.get_u8(version) || (version != kHardStateFormatV1 && version != kHardStateFormat) ||
      !get_id(reader, hard_state.term) || !get_id(reader, hard_state.vote) || !get_id(reader, hard_state.commit) ||
      (version == kHardStateFormat && !get_id(reader, hard_state.leader)) || !reader.done()) {
    return malformed("hard state");
  }
  return hard_state;
}

std::string encode_snapshot_metadata(const SnapshotMetadata& metadata) {
  std::string out;
  codec::put_u8(out, kSnapshotMetadataFormat);
  put_snapshot_metadata(out, metadata);
  return out;
}

Result<SnapshotMetadata> decode_snapshot_metadata(std::string_view bytes) {
  codec::Reader reader(bytes);
  SnapshotMetadata metadata;
  if (!check_version(reader, kSnapshotMetadataFormat) || !get_snapshot_metadata(reader, metadata) ||
      !reader.done()) {
    return malformed("snapshot metadata");
  }
  return metadata;
}

}  // namespace mayfly::replication
