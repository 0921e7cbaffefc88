#include "storage/layout.h"

#include "common/codec.h"

namespace mayfly::storage {
namespace {

std::string tagged(KeyTag tag) { return std::string(1, static_cast<char>(tag)); }

std::string with_u64(KeyTag tag, uint64_t value) {
  std::string key = tagged(tag);
  codec::put_u64_be(key, value);
  return key;
}

// Both expiry indexes: (crid, sort time, pk, id), so a prefix scan walks a container's index oldest first.
std::string expiry_index_key(KeyTag tag, uint64_t crid, int64_t sort_micros, std::string_view partition_key,
                             std::string_view id) {
  std::string key = with_u64(tag, crid);
  codec::put_i64_be(key, sort_micros);
  codec::put_ordered_string(key, partition_key);
  codec::put_ordered_string(key, id);
  return key;
}

Status corrupt(std::string_view what) { return Status::corruption("undecodable " + std::string(what)); }

}  // namespace

std::string meta_key() { return tagged(KeyTag::kMeta) + "state"; }

std::string database_key(std::string_view database) {
  std::string key = tagged(KeyTag::kDatabase);
  codec::put_ordered_string(key, database);
  return key;
}

std::string container_prefix(std::string_view database) {
  std::string key = tagged(KeyTag::kContainer);
  codec::put_ordered_string(key, database);
  return key;
}

std::string container_key(std::string_view database, std::string_view container) {
  std::string key = container_prefix(database);
  codec::put_ordered_string(key, container);
  return key;
}

std::string item_prefix(uint64_t crid) { return with_u64(KeyTag::kItem, crid); }

std::string partition_prefix(uint64_t crid, std::string_view partition_key) {
  std::string key = item_prefix(crid);
  codec::put_ordered_string(key, partition_key);
  return key;
}

std::string item_key(uint64_t crid, std::string_view partition_key, std::string_view id) {
  std::string key = partition_prefix(crid, partition_key);
  codec::put_ordered_string(key, id);
  return key;
}

std::string own_expiry_prefix(uint64_t crid) { return with_u64(KeyTag::kOwnExpiryIndex, crid); }

std::string deleted_partition_prefix(uint64_t crid) { return with_u64(KeyTag::kDeletedPartition, crid); }

std::string deleted_partition_key(uint64_t crid, std::string_view partition_key) {
  std::string key = deleted_partition_prefix(crid);
  codec::put_ordered_string(key, partition_key);
  return key;
}

std::string hold_prefix(uint64_t crid) { return with_u64(KeyTag::kHold, crid); }

std::string hold_key(uint64_t crid, uint64_t set_index) {
  std::string key = hold_prefix(crid);
  codec::put_u64_be(key, set_index);
  return key;
}

std::string hold_audit_prefix() { return tagged(KeyTag::kHoldAudit); }

std::string hold_audit_key(uint64_t index) { return with_u64(KeyTag::kHoldAudit, index); }

std::string own_expiry_key(uint64_t crid, int64_t expiry_micros, std::string_view partition_key,
                           std::string_view id) {
  return expiry_index_key(KeyTag::kOwnExpiryIndex, crid, expiry_micros, partition_key, id);
}

std::string ts_index_prefix(uint64_t crid) { return with_u64(KeyTag::kTsIndex, crid); }

std::string ts_index_key(uint64_t crid, int64_t write_ts_micros, std::string_view partition_key, std::string_view id) {
  return expiry_index_key(KeyTag::kTsIndex, crid, write_ts_micros, partition_key, id);
}

std::string inherit_expiry_prefix(uint64_t crid) { return with_u64(KeyTag::kInheritExpiryIndex, crid); }

std::string inherit_expiry_key(uint64_t crid, int64_t write_ts_micros, std::string_view partition_key,
                               std::string_view id) {
  return expiry_index_key(KeyTag::kInheritExpiryIndex, crid, write_ts_micros, partition_key, id);
}

std::string feed_prefix(uint64_t crid) { return with_u64(KeyTag::kChangeFeed, crid); }

std::string feed_sub_prefix(uint64_t crid, FeedSub sub) {
  std::string key = feed_prefix(crid);
  codec::put_u8(key, static_cast<uint8_t>(sub));
  return key;
}

std::string feed_record_key(uint64_t crid, uint64_t index) {
  std::string key = feed_sub_prefix(crid, FeedSub::kRecord);
  codec::put_u64_be(key, index);
  return key;
}

std::string feed_policy_key(uint64_t crid, uint64_t index) {
  std::string key = feed_sub_prefix(crid, FeedSub::kPolicy);
  codec::put_u64_be(key, index);
  return key;
}

std::string feed_shadow_kind_prefix(uint64_t crid, uint8_t kind) {
  std::string key = feed_sub_prefix(crid, FeedSub::kShadow);
  codec::put_u8(key, kind);
  return key;
}

std::string feed_shadow_key(uint64_t crid, uint8_t kind, int64_t sort_micros, std::string_view partition_key,
                            std::string_view id) {
  std::string key = feed_shadow_kind_prefix(crid, kind);
  codec::put_i64_be(key, sort_micros);
  codec::put_ordered_string(key, partition_key);
  codec::put_ordered_string(key, id);
  return key;
}

std::string time_index_prefix() { return tagged(KeyTag::kTimeIndex); }
std::string time_index_key(uint64_t index) { return with_u64(KeyTag::kTimeIndex, index); }

Result<uint64_t> decode_trailing_index(std::string_view key) {
  if (key.size() < 9) return corrupt("change feed key");
  codec::Reader reader(key.substr(key.size() - 8));
  uint64_t index;
  if (!reader.get_u64_be(index)) return corrupt("change feed key");
  return index;
}

std::string dropped_container_key(uint64_t crid) { return with_u64(KeyTag::kDroppedContainer, crid); }
std::string local_stats_key(uint64_t crid) { return with_u64(KeyTag::kLocalStats, crid); }
std::string install_marker_key() { return tagged(KeyTag::kInstallMarker) + "installing"; }
std::string member_address_key(uint64_t node) { return with_u64(KeyTag::kMemberAddress, node); }
std::string raft_meta_key(std::string_view name) { return tagged(KeyTag::kRaftMeta) + std::string(name); }
std::string raft_entry_key(uint64_t index) { return with_u64(KeyTag::kRaftEntry, index); }
std::string raft_entry_prefix() { return tagged(KeyTag::kRaftEntry); }

Result<IndexKey> decode_index_key(std::string_view key) {
  codec::Reader reader(key);
  IndexKey out;
  uint8_t tag;
  if (!reader.get_u8(tag) || !reader.get_u64_be(out.crid) || !reader.get_i64_be(out.sort_micros) ||
      !reader.get_ordered_string(out.partition_key) || !reader.get_ordered_string(out.id) || !reader.done()) {
    return corrupt("expiry index key");
  }
  return out;
}

Status decode_item_key(std::string_view key, std::string& partition_key, std::string& id) {
  codec::Reader reader(key);
  uint8_t tag;
  uint64_t crid;
  if (!reader.get_u8(tag) || !reader.get_u64_be(crid) || !reader.get_ordered_string(partition_key) ||
      !reader.get_ordered_string(id) || !reader.done()) {
    return corrupt("item key");
  }
  return Status::ok();
}

}  // namespace mayfly::storage
