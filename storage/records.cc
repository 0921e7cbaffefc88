#include "storage/records.h"

#include <cstdio>

#include "common/codec.h"

namespace mayfly::storage {
namespace {

constexpr uint8_t kRecordVersion = 1;

Status corrupt(std::string_view what) { return Status::corruption("undecodable " + std::string(what)); }

}  // namespace

std::string encode_meta(const MetaState& meta) {
  std::string out;
  codec::put_u8(out, kRecordVersion);
  codec::put_varint(out, meta.applied_index);
  codec::put_varint_signed(out, meta.applied_ts_micros);
  codec::put_varint(out, meta.write_sequence);
  codec::put_varint(out, meta.next_container_rid);
  if (meta.feed_containers > 0) codec::put_varint(out, meta.feed_containers);
  return out;
}

Result<MetaState> decode_meta(std::string_view bytes) {
  codec::Reader reader(bytes);
  MetaState meta;
  uint8_t version;
  if (!reader.get_u8(version) || version != kRecordVersion || !reader.get_varint(meta.applied_index) ||
      !reader.get_varint_signed(meta.applied_ts_micros) || !reader.get_varint(meta.write_sequence) ||
      !reader.get_varint(meta.next_container_rid)) {
    return corrupt("meta state");
  }
  if (!reader.done() && (!reader.get_varint(meta.feed_containers) || meta.feed_containers == 0 || !reader.done())) {
    return corrupt("meta state");
  }
  return meta;
}

std::string encode_database(const DatabaseRecord& record) {
  std::string out;
  codec::put_u8(out, kRecordVersion);
  codec::put_varint(out, record.rid);
  codec::put_varint_signed(out, record.created_ts_micros);
  if (record.throughput.mode == Throughput::Mode::kProvisioned) {
    codec::put_varint_signed(out, record.throughput.request_units_per_second);
    codec::put_varint_signed(out, record.modified_ts_micros);
  }
  return out;
}

Result<DatabaseRecord> decode_database(std::string_view bytes) {
  codec::Reader reader(bytes);
  DatabaseRecord record;
  uint8_t version;
  if (!reader.get_u8(version) || version != kRecordVersion || !reader.get_varint(record.rid) ||
      !reader.get_varint_signed(record.created_ts_micros)) {
    return corrupt("database record");
  }
  if (!reader.done()) {
    record.throughput.mode = Throughput::Mode::kProvisioned;
    if (!reader.get_varint_signed(record.throughput.request_units_per_second) ||
        record.throughput.request_units_per_second <= 0 || !reader.get_varint_signed(record.modified_ts_micros) ||
        !reader.done()) {
      return corrupt("database record");
    }
  }
  return record;
}

namespace {

// The expiry warning's part of a ContainerTtlState (ttl.h), a tail of both records that hold one (written only when
// state.has_warnings()).
void put_warning_state(std::string& out, const ttl::ContainerTtlState& state) {
  codec::put_varint_signed(out, state.warning_seconds);
  codec::put_varint_signed(out, state.own_warned_below_micros);
  codec::put_varint_signed(out, state.default_warned_below_micros);
}
bool get_warning_state(codec::Reader& reader, ttl::ContainerTtlState& state) {
  return reader.get_varint_signed(state.warning_seconds) && ttl::validate_expiry_warning(state.warning_seconds).is_ok() &&
         reader.get_varint_signed(state.own_warned_below_micros) &&
         reader.get_varint_signed(state.default_warned_below_micros);
}

}  // namespace

std::string encode_container(const ContainerRecord& record) {
  std::string out;
  codec::put_u8(out, kRecordVersion);
  codec::put_varint(out, record.crid);
  codec::put_bytes(out, record.partition_key_path);
  codec::put_u8(out, static_cast<uint8_t>(record.ttl.policy.kind));
  codec::put_varint_signed(out, record.ttl.policy.seconds);
  codec::put_varint_signed(out, record.ttl.own_dead_below_micros);
  codec::put_varint_signed(out, record.ttl.default_dead_below_micros);
  codec::put_varint_signed(out, record.ttl.default_dead_since_micros);
  codec::put_u8(out, static_cast<uint8_t>(record.indexing));
  codec::put_u8(out, static_cast<uint8_t>(record.throughput.mode));
  codec::put_varint_signed(out, record.throughput.request_units_per_second);
  codec::put_varint_signed(out, record.modified_ts_micros);
  codec::put_varint(out, record.etag_sequence);
  // Optional tail, each part written only when it or a later one is not its default, so older records keep their
  // bytes: the change feed, the latest delete by partition key, the expiry warning.
  const bool holds = record.active_holds != 0;
  const bool warnings = holds || record.ttl.has_warnings();
  const bool deletes = warnings || record.partitions_deleted_through_micros != 0;
  if (deletes || !(record.change_feed == ChangeFeedSettings{})) {
    codec::put_u8(out, record.change_feed.enabled ? 1 : 0);
    codec::put_varint_signed(out, record.change_feed.retention_seconds);
    codec::put_varint(out, record.change_feed.since_index);
  }
  if (deletes) codec::put_varint_signed(out, record.partitions_deleted_through_micros);
  if (warnings) put_warning_state(out, record.ttl);
  if (holds) codec::put_varint(out, record.active_holds);
  return out;
}

Result<ContainerRecord> decode_container(std::string_view bytes) {
  codec::Reader reader(bytes);
  ContainerRecord record;
  uint8_t version, policy_kind, indexing, mode;
  std::string_view path;
  if (!reader.get_u8(version) || version != kRecordVersion || !reader.get_varint(record.crid) ||
      !reader.get_bytes(path) || !reader.get_u8(policy_kind) || policy_kind > 2 ||
      !reader.get_varint_signed(record.ttl.policy.seconds) ||
      !reader.get_varint_signed(record.ttl.own_dead_below_micros) ||
      !reader.get_varint_signed(record.ttl.default_dead_below_micros) ||
      !reader.get_varint_signed(record.ttl.default_dead_since_micros) || !reader.get_u8(indexing) || indexing > 1 ||
      !reader.get_u8(mode) || mode > 2 || !reader.get_varint_signed(record.throughput.request_units_per_second) ||
      !reader.get_varint_signed(record.modified_ts_micros) || !reader.get_varint(record.etag_sequence)) {
    return corrupt("container record");
  }
  if (!reader.done()) {
    uint8_t enabled;
    if (!reader.get_u8(enabled) || enabled > 1 || !reader.get_varint_signed(record.change_feed.retention_seconds) ||
        !reader.get_varint(record.change_feed.since_index)) {
      return corrupt("container record");
    }
    record.change_feed.enabled = enabled == 1;
    if (!reader.done() && !reader.get_varint_signed(record.partitions_deleted_through_micros)) {
      return corrupt("container record");
    }
    if (!reader.done() && !get_warning_state(reader, record.ttl)) return corrupt("container record");
    if (!reader.done() && (!reader.get_varint(record.active_holds) || record.active_holds == 0)) {
      return corrupt("container record");
    }
    if (!reader.done()) return corrupt("container record");
  }
  record.partition_key_path = std::string(path);
  record.ttl.policy.kind = static_cast<ttl::DefaultTtl::Kind>(policy_kind);
  record.indexing = static_cast<ttl::IndexingMode>(indexing);
  record.throughput.mode = static_cast<Throughput::Mode>(mode);
  return record;
}

std::string encode_deleted_partition(const DeletedPartition& record) {
  std::string out;
  codec::put_u8(out, kRecordVersion);
  codec::put_varint_signed(out, record.ts_micros);
  codec::put_varint(out, record.index);
  return out;
}

Result<DeletedPartition> decode_deleted_partition(std::string_view bytes) {
  codec::Reader reader(bytes);
  DeletedPartition record;
  uint8_t version;
  if (!reader.get_u8(version) || version != kRecordVersion || !reader.get_varint_signed(record.ts_micros) ||
      !reader.get_varint(record.index) || !reader.done()) {
    return corrupt("deleted partition record");
  }
  return record;
}

std::string encode_item(const ItemRecord& record) {
  std::string out;
  out.reserve(record.json.size() + 24);
  codec::put_u8(out, kRecordVersion);
  codec::put_varint_signed(out, record.write_ts_micros);
  codec::put_u8(out, static_cast<uint8_t>(record.ttl.kind));
  codec::put_varint(out, static_cast<uint64_t>(record.ttl.seconds));
  codec::put_varint(out, record.etag_sequence);
  codec::put_varint(out, record.item_rid);
  out.append(record.json);  // the rest of the value
  return out;
}

Result<ItemRecord> decode_item(std::string_view bytes) {
  codec::Reader reader(bytes);
  ItemRecord record;
  uint8_t version, ttl_kind;
  uint64_t seconds;
  if (!reader.get_u8(version) || version != kRecordVersion || !reader.get_varint_signed(record.write_ts_micros) ||
      !reader.get_u8(ttl_kind) || ttl_kind > 2 || !reader.get_varint(seconds) ||
      seconds > static_cast<uint64_t>(ttl::kMaxTtlSeconds) || !reader.get_varint(record.etag_sequence) ||
      !reader.get_varint(record.item_rid) || reader.rest().empty() || reader.rest().front() != '{') {
    return corrupt("item record");
  }
  record.ttl.kind = static_cast<ttl::ItemTtl::Kind>(ttl_kind);
  record.ttl.seconds = static_cast<int64_t>(seconds);
  record.json = std::string(reader.rest());
  return record;
}

std::string encode_feed_record(const FeedRecord& record) {
  std::string out;
  codec::put_u8(out, kRecordVersion);
  codec::put_u8(out, static_cast<uint8_t>(record.operation));
  codec::put_varint_signed(out, record.ts_micros);
  codec::put_bytes(out, record.partition_key);
  codec::put_bytes(out, record.id);
  codec::put_bytes(out, record.image);
  codec::put_bytes(out, record.previous);
  return out;
}

Result<FeedRecord> decode_feed_record(std::string_view bytes) {
  codec::Reader reader(bytes);
  FeedRecord record;
  uint8_t version, operation;
  std::string_view pk, id, image, previous;
  if (!reader.get_u8(version) || version != kRecordVersion || !reader.get_u8(operation) || operation > 2 ||
      !reader.get_varint_signed(record.ts_micros) || !reader.get_bytes(pk) || !reader.get_bytes(id) ||
      !reader.get_bytes(image) || !reader.get_bytes(previous) || !reader.done()) {
    return corrupt("change feed record");
  }
  record.operation = static_cast<ChangeOperation>(operation);
  record.partition_key = std::string(pk);
  record.id = std::string(id);
  record.image = std::string(image);
  record.previous = std::string(previous);
  return record;
}

std::string encode_ttl_state(const ttl::ContainerTtlState& state) {
  std::string out;
  codec::put_u8(out, kRecordVersion);
  codec::put_u8(out, static_cast<uint8_t>(state.policy.kind));
  codec::put_varint_signed(out, state.policy.seconds);
  codec::put_varint_signed(out, state.own_dead_below_micros);
  codec::put_varint_signed(out, state.default_dead_below_micros);
  codec::put_varint_signed(out, state.default_dead_since_micros);
  if (state.has_warnings()) put_warning_state(out, state);
  return out;
}

Result<ttl::ContainerTtlState> decode_ttl_state(std::string_view bytes) {
  codec::Reader reader(bytes);
  ttl::ContainerTtlState state;
  uint8_t version, kind;
  if (!reader.get_u8(version) || version != kRecordVersion || !reader.get_u8(kind) || kind > 2 ||
      !reader.get_varint_signed(state.policy.seconds) || !reader.get_varint_signed(state.own_dead_below_micros) ||
      !reader.get_varint_signed(state.default_dead_below_micros) ||
      !reader.get_varint_signed(state.default_dead_since_micros) ||
      (!reader.done() && !get_warning_state(reader, state)) || !reader.done()) {
    return corrupt("ttl state");
  }
  state.policy.kind = static_cast<ttl::DefaultTtl::Kind>(kind);
  return state;
}

std::string encode_local_stats(const LocalStats& stats) {
  std::string out;
  codec::put_varint_signed(out, stats.items);
  codec::put_varint_signed(out, stats.bytes);
  return out;
}

Result<LocalStats> decode_local_stats(std::string_view bytes) {
  codec::Reader reader(bytes);
  LocalStats stats;
  if (!reader.get_varint_signed(stats.items) || !reader.get_varint_signed(stats.bytes) || !reader.done()) {
    return corrupt("local stats");
  }
  return stats;
}

std::string format_etag(uint64_t sequence) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "\"%016llx\"", static_cast<unsigned long long>(sequence));
  return buffer;
}

}  // namespace mayfly::storage
