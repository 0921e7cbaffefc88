// Legal holds (storage/holds.h).
#include "storage/holds.h"

#include <leveldb/db.h>

#include <algorithm>
#include <memory>

#include "common/codec.h"
#include "storage/json.h"
#include "storage/layout.h"
#include "ttl/ttl.h"

namespace mayfly::storage {
namespace {

constexpr uint8_t kHoldVersion = 1;

Status corrupt(std::string_view what) { return Status::corruption("undecodable " + std::string(what)); }

bool get_string(codec::Reader& reader, std::string& out) {
  std::string_view bytes;
  if (!reader.get_bytes(bytes)) return false;
  out.assign(bytes);
  return true;
}

bool get_scope(codec::Reader& reader, HoldScope& scope) {
  uint8_t value;
  if (!reader.get_u8(value) || value > static_cast<uint8_t>(HoldScope::kItem)) return false;
  scope = static_cast<HoldScope>(value);
  return true;
}

void add_string_field(std::string& out, std::string_view name, std::string_view value) {
  out += ",\"";
  out += name;
  out += "\":";
  json::write_json_string(value, out);
}

}  // namespace

std::string_view hold_scope_name(HoldScope scope) {
  switch (scope) {
    case HoldScope::kContainer: return "container";
    case HoldScope::kPartition: return "partition";
    case HoldScope::kItem: return "item";
  }
  return "container";
}

bool HoldRecord::covers(std::string_view pk, std::string_view item) const {
  switch (scope) {
    case HoldScope::kContainer: return true;
    case HoldScope::kPartition: return pk == partition_key;
    case HoldScope::kItem: return pk == partition_key && item == item_id;
  }
  return false;
}

std::string encode_hold(const HoldRecord& record) {
  std::string out;
  codec::put_u8(out, kHoldVersion);
  codec::put_bytes(out, record.id);
  codec::put_u8(out, static_cast<uint8_t>(record.scope));
  codec::put_bytes(out, record.partition_key);
  codec::put_bytes(out, record.item_id);
  codec::put_bytes(out, record.reason);
  codec::put_bytes(out, record.set_by);
  codec::put_varint(out, record.set_index);
  codec::put_varint_signed(out, record.set_ts_micros);
  codec::put_varint(out, record.released_index);
  codec::put_varint_signed(out, record.released_ts_micros);
  codec::put_bytes(out, record.released_by);
  codec::put_bytes(out, record.release_reason);
  return out;
}

Result<HoldRecord> decode_hold(std::string_view bytes) {
  codec::Reader reader(bytes);
  HoldRecord record;
  uint8_t version;
  if (!reader.get_u8(version) || version != kHoldVersion || !get_string(reader, record.id) ||
      !get_scope(reader, record.scope) || !get_string(reader, record.partition_key) ||
      !get_string(reader, record.item_id) || !get_string(reader, record.reason) || !get_string(reader, record.set_by) ||
      !reader.get_varint(record.set_index) || !reader.get_varint_signed(record.set_ts_micros) ||
      !reader.get_varint(record.released_index) || !reader.get_varint_signed(record.released_ts_micros) ||
      !get_string(reader, record.released_by) || !get_string(reader, record.release_reason) || !reader.done()) {
    return corrupt("hold record");
  }
  return record;
}

std::string encode_hold_audit(const HoldAuditRecord& record) {
  std::string out;
  codec::put_u8(out, kHoldVersion);
  codec::put_u8(out, static_cast<uint8_t>(record.action));
  codec::put_varint(out, record.index);
  codec::put_varint_signed(out, record.ts_micros);
  codec::put_bytes(out, record.database);
  codec::put_bytes(out, record.container);
  codec::put_bytes(out, record.hold_id);
  codec::put_u8(out, static_cast<uint8_t>(record.scope));
  codec::put_bytes(out, record.partition_key);
  codec::put_bytes(out, record.item_id);
  codec::put_bytes(out, record.actor);
  codec::put_bytes(out, record.reason);
  return out;
}

Result<HoldAuditRecord> decode_hold_audit(std::string_view bytes) {
  codec::Reader reader(bytes);
  HoldAuditRecord record;
  uint8_t version, action;
  if (!reader.get_u8(version) || version != kHoldVersion || !reader.get_u8(action) || action > 1 ||
      !reader.get_varint(record.index) || !reader.get_varint_signed(record.ts_micros) ||
      !get_string(reader, record.database) || !get_string(reader, record.container) ||
      !get_string(reader, record.hold_id) || !get_scope(reader, record.scope) ||
      !get_string(reader, record.partition_key) || !get_string(reader, record.item_id) ||
      !get_string(reader, record.actor) || !get_string(reader, record.reason) || !reader.done()) {
    return corrupt("hold audit record");
  }
  record.action = static_cast<HoldAuditRecord::Action>(action);
  return record;
}

void render_hold(const HoldRecord& hold, std::string_view database, std::string_view container, std::string& out) {
  out += "{\"id\":";
  json::write_json_string(hold.id, out);
  if (!database.empty()) add_string_field(out, "database", database);
  if (!container.empty()) add_string_field(out, "container", container);
  add_string_field(out, "scope", hold_scope_name(hold.scope));
  if (hold.scope != HoldScope::kContainer) out += ",\"partitionKey\":" + hold.partition_key;
  if (hold.scope == HoldScope::kItem) add_string_field(out, "itemId", hold.item_id);
  add_string_field(out, "reason", hold.reason);
  add_string_field(out, "setBy", hold.set_by);
  out += ",\"setTs\":" + std::to_string(ttl::ts_seconds(hold.set_ts_micros));
  out += ",\"setIndex\":" + std::to_string(hold.set_index);
  out += hold.active() ? ",\"active\":true" : ",\"active\":false";
  if (!hold.active()) {
    out += ",\"releasedTs\":" + std::to_string(ttl::ts_seconds(hold.released_ts_micros));
    out += ",\"releasedIndex\":" + std::to_string(hold.released_index);
    add_string_field(out, "releasedBy", hold.released_by);
    add_string_field(out, "releaseReason", hold.release_reason);
  }
  out += '}';
}

void render_hold_audit(const HoldAuditRecord& record, std::string& out) {
  out += "{\"action\":";
  out += record.action == HoldAuditRecord::Action::kSet ? "\"set\"" : "\"release\"";
  out += ",\"index\":" + std::to_string(record.index);
  out += ",\"ts\":" + std::to_string(ttl::ts_seconds(record.ts_micros));
  add_string_field(out, "database", record.database);
  add_string_field(out, "container", record.container);
  add_string_field(out, "hold", record.hold_id);
  add_string_field(out, "scope", hold_scope_name(record.scope));
  if (record.scope != HoldScope::kContainer) out += ",\"partitionKey\":" + record.partition_key;
  if (record.scope == HoldScope::kItem) add_string_field(out, "itemId", record.item_id);
  add_string_field(out, "actor", record.actor);
  add_string_field(out, "reason", record.reason);
  out += '}';
}

HoldSet::HoldSet(std::vector<HoldRecord> holds) : holds_(std::move(holds)) {
  std::sort(holds_.begin(), holds_.end(),
            [](const HoldRecord& a, const HoldRecord& b) { return a.set_index < b.set_index; });
  for (size_t i = 0; i < holds_.size(); ++i) {
    const HoldRecord& hold = holds_[i];
    if (hold.active()) ++active_;
    switch (hold.scope) {
      case HoldScope::kContainer: container_.push_back(i); break;
      case HoldScope::kPartition: partition_[hold.partition_key].push_back(i); break;
      case HoldScope::kItem:
        item_[{hold.partition_key, hold.item_id}].push_back(i);
        items_in_partition_[hold.partition_key].push_back(i);
        break;
    }
  }
}

Result<HoldSet> HoldSet::load(leveldb::DB* db, const leveldb::Snapshot* snapshot, uint64_t crid) {
  leveldb::ReadOptions options;
  options.snapshot = snapshot;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(options));
  const std::string prefix = hold_prefix(crid);
  std::vector<HoldRecord> holds;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    MAYFLY_ASSIGN_OR_RETURN(HoldRecord hold, decode_hold(std::string_view(it->value().data(), it->value().size())));
    holds.push_back(std::move(hold));
  }
  if (!it->status().ok()) return Status::io_error("read holds: " + it->status().ToString());
  return HoldSet(std::move(holds));
}

Result<std::optional<HoldSet>> HoldSet::load_if_held(leveldb::DB* db, const leveldb::Snapshot* snapshot,
                                                     const ContainerRecord& container) {
  if (container.active_holds == 0) return std::optional<HoldSet>();
  MAYFLY_ASSIGN_OR_RETURN(HoldSet holds, load(db, snapshot, container.crid));
  return std::optional<HoldSet>(std::move(holds));
}

std::vector<const HoldRecord*> HoldSet::active() const {
  std::vector<const HoldRecord*> out;
  for (const HoldRecord& hold : holds_) {
    if (hold.active()) out.push_back(&hold);
  }
  return out;
}

const HoldRecord* HoldSet::active_by_id(std::string_view id) const {
  for (const HoldRecord& hold : holds_) {
    if (hold.active() && hold.id == id) return &hold;
  }
  return nullptr;
}

namespace {

// The holds covering one item: the container's, its partition's and its own (indexes into the set's vector).
template <typename Partitions, typename Items>
std::vector<size_t> covering(const std::vector<size_t>& container, const Partitions& partitions, const Items& items,
                             std::string_view pk, std::string_view id) {
  std::vector<size_t> out = container;
  if (auto found = partitions.find(pk); found != partitions.end()) {
    out.insert(out.end(), found->second.begin(), found->second.end());
  }
  if (auto found = items.find(std::pair<std::string, std::string>(pk, id)); found != items.end()) {
    out.insert(out.end(), found->second.begin(), found->second.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<const HoldRecord*> HoldSet::active_covering(std::string_view pk, std::string_view id) const {
  std::vector<const HoldRecord*> out;
  if (active_ == 0) return out;
  for (size_t i : covering(container_, partition_, item_, pk, id)) {
    if (holds_[i].active()) out.push_back(&holds_[i]);
  }
  return out;
}

std::vector<const HoldRecord*> HoldSet::active_in_partition(std::string_view pk) const {
  std::vector<size_t> indexes = container_;
  if (auto found = partition_.find(pk); found != partition_.end()) {
    indexes.insert(indexes.end(), found->second.begin(), found->second.end());
  }
  if (auto found = items_in_partition_.find(pk); found != items_in_partition_.end()) {
    indexes.insert(indexes.end(), found->second.begin(), found->second.end());
  }
  std::sort(indexes.begin(), indexes.end());
  std::vector<const HoldRecord*> out;
  for (size_t i : indexes) {
    if (holds_[i].active()) out.push_back(&holds_[i]);
  }
  return out;
}

std::optional<int64_t> HoldSet::held_since(std::string_view pk, std::string_view id) const {
  if (active_ == 0) return std::nullopt;
  const std::vector<size_t> holds = covering(container_, partition_, item_, pk, id);
  // The stretch ending now begins at the earliest active covering hold; a released covering hold that was still on
  // when the stretch began (released after that position) extends it back to its own start, and so on. By set
  // position, descending: each hold can only extend the start to an earlier one.
  std::optional<size_t> start;
  for (size_t i : holds) {
    if (holds_[i].active() && (!start || holds_[i].set_index < holds_[*start].set_index)) start = i;
  }
  if (!start) return std::nullopt;
  bool extended = true;
  while (extended) {
    extended = false;
    for (size_t i : holds) {
      const HoldRecord& hold = holds_[i];
      if (!hold.active() && hold.set_index < holds_[*start].set_index &&
          hold.released_index > holds_[*start].set_index) {
        start = i;
        extended = true;
      }
    }
  }
  return holds_[*start].set_ts_micros;
}

bool HoldSet::alive(const ItemRecord& record, const ttl::ContainerTtlState& state, int64_t now_micros,
                    std::optional<int64_t> since) {
  if (ttl::alive(record.ttl, record.write_ts_micros, state, now_micros)) return true;
  return since && ttl::alive(record.ttl, record.write_ts_micros, state, *since);
}

bool HoldSet::alive(std::string_view pk, std::string_view id, const ItemRecord& record,
                    const ttl::ContainerTtlState& state, int64_t now_micros) const {
  if (ttl::alive(record.ttl, record.write_ts_micros, state, now_micros)) return true;
  const std::optional<int64_t> since = held_since(pk, id);
  return since && ttl::alive(record.ttl, record.write_ts_micros, state, *since);
}

std::string HoldSet::hold_json(std::string_view pk, std::string_view id) const {
  const std::vector<const HoldRecord*> holds = active_covering(pk, id);
  if (holds.empty()) return "";
  std::string out = "[";
  for (size_t i = 0; i < holds.size(); ++i) {
    if (i > 0) out += ',';
    json::write_json_string(holds[i]->id, out);
  }
  out += ']';
  return out;
}

std::string describe_holds(const std::vector<const HoldRecord*>& holds) {
  std::string out;
  for (size_t i = 0; i < holds.size(); ++i) {
    const HoldRecord& hold = *holds[i];
    if (i > 0) out += "; ";
    out += "'" + hold.id + "' (";
    switch (hold.scope) {
      case HoldScope::kContainer: out += "the whole container"; break;
      case HoldScope::kPartition: out += "partition key " + hold.partition_key; break;
      case HoldScope::kItem: out += "item '" + hold.item_id + "' of partition key " + hold.partition_key; break;
    }
    out += ", set by '" + (hold.set_by.empty() ? std::string("anonymous") : hold.set_by) + "'";
    if (!hold.reason.empty()) out += ": " + hold.reason;
    out += ")";
  }
  return out;
}

}  // namespace mayfly::storage
