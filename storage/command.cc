#include "storage/command.h"

#include "common/assert.h"
#include "common/codec.h"

namespace mayfly::storage {
namespace {

constexpr uint8_t kCommandVersion = 1;
constexpr uint8_t kCommandVersionWithWriteId = 2;  // version 1 followed by the WriteId
constexpr uint8_t kCommandVersionWithOwner = 3;    // version 2 with the WriteId's owner after it
constexpr uint8_t kMaxCommandType = static_cast<uint8_t>(CommandType::kReleaseHold);

enum Presence : uint8_t { kAbsent = 0, kPresent = 1 };
// The change feed tail's first byte: 0 off, 1 on, or this when only a later tail part (the expiry warning) is there.
constexpr uint8_t kFeedUnchanged = 2;

// Set in the type byte when the body is a PreparedBody (after the empty raw body); older nodes refuse such a type as
// undecodable rather than misread it.
constexpr uint8_t kPreparedFlag = 0x80;

bool may_be_prepared(CommandType type) {
  return type == CommandType::kCreateItem || type == CommandType::kReplaceItem || type == CommandType::kUpsertItem;
}

}  // namespace

std::string_view command_type_name(CommandType type) {
  switch (type) {
    case CommandType::kTime: return "time";
    case CommandType::kCreateDatabase: return "create_database";
    case CommandType::kDeleteDatabase: return "delete_database";
    case CommandType::kCreateContainer: return "create_container";
    case CommandType::kUpdateContainer: return "update_container";
    case CommandType::kDeleteContainer: return "delete_container";
    case CommandType::kCreateItem: return "create";
    case CommandType::kReplaceItem: return "replace";
    case CommandType::kUpsertItem: return "upsert";
    case CommandType::kDeleteItem: return "delete";
    case CommandType::kPatchItem: return "patch";
    case CommandType::kSetMemberAddress: return "set_member_address";
    case CommandType::kUpdateDatabase: return "update_database";
    case CommandType::kBatch: return "batch";
    case CommandType::kDeletePartition: return "delete_partition";
    case CommandType::kSetHold: return "set_hold";
    case CommandType::kReleaseHold: return "release_hold";
  }
  return "unknown";
}

bool is_hold_command(CommandType type) {
  return type == CommandType::kSetHold || type == CommandType::kReleaseHold;
}

bool is_item_write(CommandType type) {
  return (type >= CommandType::kCreateItem && type <= CommandType::kPatchItem) || type == CommandType::kBatch;
}

std::string encode_command(const Command& command) {
  std::string out;
  out.reserve(command.body.size() + command.database.size() + command.container.size() + 32 +
              (command.prepared ? command.prepared->item.json.size() + command.prepared->item.id.size() +
                                      command.prepared->item.partition_key.size()
                                : 0));
  // Commands without a write id keep version 1's bytes, so logs written before exactly-once read the same.
  // Writes of the anonymous owner keep version 2's bytes (open nodes: logs read the same by an older node).
  codec::put_u8(out, !command.write_id          ? kCommandVersion
                     : command.write_id->owner ? kCommandVersionWithOwner
                                               : kCommandVersionWithWriteId);
  MAYFLY_ASSERT_MSG(!command.prepared || (may_be_prepared(command.type) && command.body.empty()),
                    "a prepared body is for create, replace and upsert, instead of the raw body");
  codec::put_u8(out, static_cast<uint8_t>(command.type) | (command.prepared ? kPreparedFlag : 0));
  codec::put_bytes(out, command.database);
  codec::put_bytes(out, command.container);
  codec::put_bytes(out, command.partition_key_path);
  codec::put_u8(out, static_cast<uint8_t>(command.default_ttl_change));
  codec::put_bytes(out, command.default_ttl_json);
  codec::put_u8(out, command.indexing ? kPresent : kAbsent);
  if (command.indexing) codec::put_u8(out, static_cast<uint8_t>(*command.indexing));
  codec::put_u8(out, command.throughput ? kPresent : kAbsent);
  if (command.throughput) {
    codec::put_u8(out, static_cast<uint8_t>(command.throughput->mode));
    codec::put_varint_signed(out, command.throughput->request_units_per_second);
  }
  codec::put_bytes(out, command.partition_key_json);
  codec::put_bytes(out, command.id);
  codec::put_u8(out, command.if_match ? kPresent : kAbsent);
  if (command.if_match) codec::put_bytes(out, *command.if_match);
  codec::put_bytes(out, command.body);
  if (command.prepared) {
    const PreparedItem& item = command.prepared->item;
    codec::put_varint(out, command.prepared->container_rid);
    codec::put_bytes(out, item.id);
    codec::put_bytes(out, item.partition_key);
    codec::put_u8(out, static_cast<uint8_t>(item.ttl.kind));
    codec::put_varint(out, static_cast<uint64_t>(item.ttl.seconds));
    codec::put_bytes(out, item.json);
  }
  if (command.write_id) {
    codec::put_u64_be(out, command.write_id->client);
    codec::put_varint(out, command.write_id->sequence);
    codec::put_varint(out, command.write_id->first_unacknowledged);
    codec::put_u8(out, command.write_id->retry ? 1 : 0);
    if (command.write_id->owner != 0) codec::put_u64_be(out, command.write_id->owner);
  }
  MAYFLY_ASSERT_MSG(command.hold.has_value() == is_hold_command(command.type), "hold commands carry HoldCommand");
  if (command.hold) {
    codec::put_u8(out, static_cast<uint8_t>(command.hold->scope));
    codec::put_bytes(out, command.hold->item_id);
    codec::put_bytes(out, command.hold->actor);
    return out;
  }
  // Appended only when present, so every command without it keeps its bytes.
  if (command.change_feed || command.expiry_warning_seconds) {
    codec::put_u8(out, command.change_feed ? (command.change_feed->enabled ? 1 : 0) : kFeedUnchanged);
    codec::put_varint_signed(out, command.change_feed ? command.change_feed->retention_seconds : 0);
  }
  if (command.expiry_warning_seconds) codec::put_varint_signed(out, *command.expiry_warning_seconds);
  return out;
}

Status validate_write_id(const WriteId& id) {
  if (id.client == 0) return Status::invalid_argument("write id: client 0 is not a client id");
  if (id.sequence == 0 || id.first_unacknowledged == 0 || id.first_unacknowledged > id.sequence) {
    return Status::invalid_argument("write id: sequence " + std::to_string(id.sequence) +
                                    " with first unacknowledged " + std::to_string(id.first_unacknowledged) +
                                    " (need 1 <= first unacknowledged <= sequence)");
  }
  return Status::ok();
}

Result<Command> decode_command(std::string_view bytes) {
  codec::Reader reader(bytes);
  Command command;
  uint8_t version = 0, type = 0, change = 0, presence = 0, value = 0;
  std::string_view database, container, path, ttl_json, pk, id, body;
  bool ok = reader.get_u8(version) &&
            (version == kCommandVersion || version == kCommandVersionWithWriteId ||
             version == kCommandVersionWithOwner) &&
            reader.get_u8(type);
  const bool prepared = (type & kPreparedFlag) != 0;
  type = static_cast<uint8_t>(type & ~kPreparedFlag);
  ok = ok && type <= kMaxCommandType && (!prepared || may_be_prepared(static_cast<CommandType>(type))) &&
            reader.get_bytes(database) && reader.get_bytes(container) &&
            reader.get_bytes(path) && reader.get_u8(change) && change <= 2 && reader.get_bytes(ttl_json) &&
            reader.get_u8(presence) && presence <= 1;
  if (ok && presence == kPresent) {
    ok = reader.get_u8(value) && value <= 1;
    command.indexing = static_cast<ttl::IndexingMode>(value);
  }
  ok = ok && reader.get_u8(presence) && presence <= 1;
  if (ok && presence == kPresent) {
    Throughput throughput;
    ok = reader.get_u8(value) && value <= 1 && reader.get_varint_signed(throughput.request_units_per_second);
    throughput.mode = static_cast<Throughput::Mode>(value);
    command.throughput = throughput;
  }
  ok = ok && reader.get_bytes(pk) && reader.get_bytes(id) && reader.get_u8(presence) && presence <= 1;
  if (ok && presence == kPresent) {
    std::string_view if_match;
    ok = reader.get_bytes(if_match);
    command.if_match = std::string(if_match);
  }
  ok = ok && reader.get_bytes(body);
  if (ok && prepared) {
    PreparedBody form;
    std::string_view item_id, item_key, json;
    uint8_t ttl_kind = 0;
    uint64_t seconds = 0;
    ok = body.empty() && reader.get_varint(form.container_rid) && reader.get_bytes(item_id) &&
         reader.get_bytes(item_key) && reader.get_u8(ttl_kind) && ttl_kind <= 2 && reader.get_varint(seconds) &&
         seconds <= static_cast<uint64_t>(ttl::kMaxTtlSeconds) && reader.get_bytes(json) && !item_id.empty() &&
         !item_key.empty() && !json.empty() && json.front() == '{';
    form.item.id = std::string(item_id);
    form.item.partition_key = std::string(item_key);
    form.item.ttl.kind = static_cast<ttl::ItemTtl::Kind>(ttl_kind);
    form.item.ttl.seconds = static_cast<int64_t>(seconds);
    form.item.json = std::string(json);
    command.prepared = std::move(form);
  }
  if (ok && version != kCommandVersion) {
    WriteId write_id;
    uint8_t retry = 0;
    ok = reader.get_u64_be(write_id.client) && reader.get_varint(write_id.sequence) &&
         reader.get_varint(write_id.first_unacknowledged) && reader.get_u8(retry) && retry <= 1 &&
         validate_write_id(write_id).is_ok();
    // Version 3 names a key's owner (never 0: that is version 2's anonymous one).
    if (ok && version == kCommandVersionWithOwner) ok = reader.get_u64_be(write_id.owner) && write_id.owner != 0;
    write_id.retry = retry == 1;
    command.write_id = write_id;
  }
  if (ok && is_hold_command(static_cast<CommandType>(type))) {
    HoldCommand hold;
    uint8_t scope = 0;
    std::string_view item_id, actor;
    ok = reader.get_u8(scope) && scope <= static_cast<uint8_t>(HoldScope::kItem) && reader.get_bytes(item_id) &&
         reader.get_bytes(actor);
    hold.scope = static_cast<HoldScope>(scope);
    hold.item_id = std::string(item_id);
    hold.actor = std::string(actor);
    command.hold = std::move(hold);
  }
  if (ok && !reader.done() && !command.hold) {
    ChangeFeedSettings feed;
    uint8_t enabled = 0;
    ok = reader.get_u8(enabled) && enabled <= kFeedUnchanged && reader.get_varint_signed(feed.retention_seconds);
    feed.enabled = enabled == 1;
    if (enabled != kFeedUnchanged) command.change_feed = feed;
  }
  if (ok && !reader.done() && !command.hold) {
    int64_t seconds = 0;
    ok = reader.get_varint_signed(seconds);
    command.expiry_warning_seconds = seconds;
  }
  ok = ok && reader.done();
  if (!ok) return Status::corruption("undecodable command (" + std::to_string(bytes.size()) + " bytes)");
  command.type = static_cast<CommandType>(type);
  command.database = std::string(database);
  command.container = std::string(container);
  command.partition_key_path = std::string(path);
  command.default_ttl_change = static_cast<DefaultTtlChange>(change);
  command.default_ttl_json = std::string(ttl_json);
  command.partition_key_json = std::string(pk);
  command.id = std::string(id);
  command.body = std::string(body);
  return command;
}

}  // namespace mayfly::storage
