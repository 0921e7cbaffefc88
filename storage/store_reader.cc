#include "storage/store_reader.h"

#include <leveldb/db.h>

#include <algorithm>
#include <charconv>

#include "common/codec.h"
#include "common/work_budget.h"
#include "storage/document.h"
#include "storage/json.h"
#include "storage/store_internal.h"

namespace mayfly::storage {

using internal::bad_request;
using internal::from_leveldb;
using internal::has_prefix;
using internal::internal_error;
using internal::not_found;
using internal::read_options;

Status InstallGate::check(uint64_t ticket) const {
  if (ticket % 2 == 1 || count_.load() != ticket) {
    return Status::unavailable("this node is installing a snapshot; retry on another node");
  }
  return Status::ok();
}

void InstallGate::close() {
  MAYFLY_ASSERT_MSG(!installing(), "install gate closed twice");
  count_.fetch_add(1);
}

void InstallGate::open() {
  MAYFLY_ASSERT_MSG(installing(), "install gate opened twice");
  count_.fetch_add(1);
}

ReadSnapshot::ReadSnapshot(leveldb::DB* db) : db_(db), snapshot_(db->GetSnapshot()) {}

ReadSnapshot::~ReadSnapshot() { db_->ReleaseSnapshot(snapshot_); }

Result<DedupTotals> StoreReader::dedup_totals() const {
  const uint64_t ticket = gate_.ticket();
  Result<DedupTotals> totals = read_dedup_totals(db_);
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));  // after the read: it has no snapshot of its own
  return totals;
}

Result<DedupTotals> StoreReader::dedup_key_totals(uint64_t owner) const {
  const uint64_t ticket = gate_.ticket();
  Result<DedupTotals> totals = read_dedup_key_totals(db_, owner);
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));
  return totals;
}

// ---- lookups ----------------------------------------------------------------------------------------------------

Result<std::optional<std::string>> StoreReader::get_raw(const std::string& key, const ReadSnapshot* snapshot) const {
  std::string value;
  leveldb::Status status = db_->Get(read_options(snapshot), key, &value);
  if (status.IsNotFound()) return std::optional<std::string>();
  MAYFLY_RETURN_IF_ERROR(from_leveldb(status, "read"));
  return std::optional<std::string>(std::move(value));
}

Result<std::optional<ItemRecord>> StoreReader::get_item(const std::string& key, const ReadSnapshot* snapshot) const {
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, get_raw(key, snapshot));
  if (!raw) return std::optional<ItemRecord>();
  MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(*raw));
  return std::optional<ItemRecord>(std::move(record));
}

Result<ContainerRecord> StoreReader::find_container(std::string_view database, std::string_view container,
                                                      const ReadSnapshot* snapshot) const {
  Result<std::optional<std::string>> raw = get_raw(container_key(database, container), snapshot);
  if (!raw.is_ok()) return raw.status();
  if (!raw->has_value()) {
    Result<std::optional<std::string>> db = get_raw(database_key(database), snapshot);
    if (db.is_ok() && !db->has_value()) {
      return Status::not_found("database '" + std::string(database) + "' does not exist");
    }
    return Status::not_found("container '" + std::string(container) + "' does not exist in database '" +
                             std::string(database) + "'");
  }
  return decode_container(**raw);
}

std::string render_container(std::string_view database, std::string_view id, const ContainerRecord& record) {
  std::string body = "{\"id\":";
  json::write_json_string(id, body);
  body += ",\"partitionKey\":{\"paths\":[";
  const std::vector<std::string> paths = json::partition_key_paths(record.partition_key_path);
  for (size_t i = 0; i < paths.size(); ++i) {
    if (i > 0) body += ',';
    json::write_json_string(paths[i], body);
  }
  // The indexing policy as Cosmos DB reports it (what Mayfly indexes today is `_ts` and expiry; queries scan).
  body += paths.size() > 1 ? "],\"kind\":\"MultiHash\"}" : "],\"kind\":\"Hash\"}";
  body += ",\"indexingPolicy\":";
  body += record.indexing == ttl::IndexingMode::kNone
              ? R"({"indexingMode":"none","automatic":false,"includedPaths":[],"excludedPaths":[]})"
              : R"({"indexingMode":"consistent","automatic":true,"includedPaths":[{"path":"/*"}],)"
                R"("excludedPaths":[{"path":"/\"_etag\"/?"}]})";
  if (record.ttl.policy.kind == ttl::DefaultTtl::Kind::kNoDefault) body += ",\"defaultTtl\":-1";
  if (record.ttl.policy.kind == ttl::DefaultTtl::Kind::kSeconds) {
    body += ",\"defaultTtl\":" + std::to_string(record.ttl.policy.seconds);
  }
  if (record.ttl.warning_seconds != 0) body += ",\"expiryWarning\":" + std::to_string(record.ttl.warning_seconds);
  if (record.throughput.mode == Throughput::Mode::kServerless) {
    body += ",\"throughput\":{\"mode\":\"serverless\"}";
  } else if (record.throughput.mode == Throughput::Mode::kShared) {
    body += ",\"throughput\":{\"mode\":\"shared\",\"requestUnitsPerSecond\":" +
            std::to_string(record.throughput.request_units_per_second) + "}";
  } else {
    body += ",\"throughput\":{\"mode\":\"provisioned\",\"requestUnitsPerSecond\":" +
            std::to_string(record.throughput.request_units_per_second) + "}";
  }
  // Only once a feed was ever turned on, so the bodies of containers without one stay as they were.
  if (!(record.change_feed == ChangeFeedSettings{})) {
    body += ",\"changeFeed\":{\"enabled\":";
    body += record.change_feed.enabled ? "true" : "false";
    if (record.change_feed.enabled) {
      body += ",\"retentionSeconds\":" + std::to_string(record.change_feed.retention_seconds) +
              ",\"sinceIndex\":" + std::to_string(record.change_feed.since_index);
    }
    body += "}";
  }
  body += ",\"_rid\":\"" + format_container_rid(database, record.crid) + "\",\"_etag\":";
  json::write_json_string(format_etag(record.etag_sequence), body);
  body += ",\"_ts\":" + std::to_string(ttl::ts_seconds(record.modified_ts_micros)) + "}";
  return body;
}

std::map<NodeId, std::string> StoreReader::member_addresses() const {
  std::map<NodeId, std::string> out;
  const uint64_t ticket = gate_.ticket();
  const ReadSnapshot snapshot(db_);
  if (!gate_.check(ticket).is_ok()) return out;
  const std::string prefix(1, static_cast<char>(KeyTag::kMemberAddress));
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot)));
  for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    codec::Reader reader(std::string_view(it->key().data(), it->key().size()).substr(1));
    uint64_t node = 0;
    if (reader.get_u64_be(node)) out.emplace(NodeId(node), it->value().ToString());
  }
  return out;
}

// ---- reads ------------------------------------------------------------------------------------------------------

OpResult StoreReader::read_item(std::string_view database, std::string_view container,
                                 std::string_view partition_key_json, std::string_view id, int64_t now_micros) const {
  const uint64_t ticket = gate_.ticket();
  ReadSnapshot snapshot(db_);
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  Result<ContainerRecord> found = find_container(database, container, &snapshot);
  if (!found.is_ok()) return OpResult::error(found.status());
  Result<std::string> partition_key = canonical_partition_key_text(partition_key_json, found->partition_key_path);
  if (!partition_key.is_ok()) return OpResult::error(partition_key.status());
  Result<std::optional<ItemRecord>> record =
      get_item(item_key(found.value().crid, partition_key.value(), id), &snapshot);
  if (!record.is_ok()) return internal_error(record.status());
  const std::string missing = "item with id '" + std::string(id) + "' and partition key " + partition_key.value() +
                              " does not exist";
  if (!record->has_value()) return not_found(missing);
  const ItemRecord& item = **record;
  Result<std::optional<HoldSet>> loaded = HoldSet::load_if_held(db_, snapshot.get(), *found);
  if (!loaded.is_ok()) return internal_error(loaded.status());
  const std::optional<HoldSet>& holds = *loaded;
  if (holds ? !holds->alive(*partition_key, id, item, found->ttl, now_micros)
            : !ttl::alive(item.ttl, item.write_ts_micros, found.value().ttl, now_micros)) {
    OpResult result = not_found(missing);
    result.expired_skipped = 1;
    return result;
  }
  Result<bool> deleted =
      PartitionDeletes::at(db_, snapshot.get(), found.value()).hides(partition_key.value(), item.write_ts_micros);
  if (!deleted.is_ok()) return internal_error(deleted.status());
  if (*deleted) return not_found(missing);
  OpResult result;
  result.ts_micros = item.write_ts_micros;
  result.etag = format_etag(item.etag_sequence);
  result.body = render_item(item, database, found.value().crid, found.value().ttl.policy,
                            holds ? holds->hold_json(*partition_key, id) : std::string());
  return result;
}

OpResult StoreReader::list_items(const ListRequest& request, int64_t now_micros) const {
  if (request.max_items == 0 || request.max_items > kMaxListItems) {
    return bad_request("max items per page must be between 1 and " + std::to_string(kMaxListItems));
  }
  const uint64_t ticket = gate_.ticket();
  ReadSnapshot snapshot(db_);
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  Result<ContainerRecord> found = find_container(request.database, request.container, &snapshot);
  if (!found.is_ok()) return OpResult::error(found.status());
  const ContainerRecord& container = found.value();
  std::string prefix = item_prefix(container.crid);
  if (request.partition_key_json) {
    Result<std::string> partition_key =
        canonical_partition_key_text(*request.partition_key_json, container.partition_key_path);
    if (!partition_key.is_ok()) return OpResult::error(partition_key.status());
    prefix = partition_prefix(container.crid, partition_key.value());
  }
  std::string start = prefix;
  if (!request.continuation.empty()) {
    std::optional<std::string> decoded = codec::hex_decode(request.continuation);
    if (!decoded || decoded->empty()) return bad_request("continuation token is malformed");
    start = item_prefix(container.crid) + *decoded;
    if (start.compare(0, prefix.size(), prefix) != 0) {
      return bad_request("continuation token belongs to a different listing");
    }
  }
  OpResult result;
  result.body = "[";
  size_t count = 0;
  size_t examined = 0;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot)));
  it->Seek(start);
  if (!request.continuation.empty() && it->Valid() && it->key() == leveldb::Slice(start)) it->Next();
  std::string last_read;  // the key of the last record read: the next page resumes after it
  PartitionDeletes deletes = PartitionDeletes::at(db_, snapshot.get(), container);
  Result<std::optional<HoldSet>> loaded = HoldSet::load_if_held(db_, snapshot.get(), container);
  if (!loaded.is_ok()) return internal_error(loaded.status());
  const std::optional<HoldSet>& holds = *loaded;
  std::string partition_key, id;
  for (; it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    if (count == request.max_items || result.body.size() >= kMaxListPageBytes) {
      break;
    }
    if (examined == kMaxListExamined) {
      // Enough work for one page (a long run of expired, uncollected items): resume after the last record read,
      // even an expired one. Positions are keys, so nothing is skipped or repeated.
      break;
    }
    if (!charge_work(kStepsPerItem)) return OpResult::error(work_status());  // timed out, cancelled, stopping
    ++examined;
    last_read.assign(it->key().data(), it->key().size());
    Result<ItemRecord> item = decode_item(std::string_view(it->value().data(), it->value().size()));
    if (!item.is_ok()) return internal_error(item.status());
    if (holds || item->write_ts_micros <= container.partitions_deleted_through_micros) {
      if (Status status = decode_item_key(last_read, partition_key, id); !status.is_ok()) return internal_error(status);
    }
    if (holds ? !holds->alive(partition_key, id, *item, container.ttl, now_micros)
              : !ttl::alive(item->ttl, item->write_ts_micros, container.ttl, now_micros)) {
      ++result.expired_skipped;
      continue;
    }
    if (item->write_ts_micros <= container.partitions_deleted_through_micros) {
      Result<bool> deleted = deletes.hides(partition_key, item->write_ts_micros);
      if (!deleted.is_ok()) return internal_error(deleted.status());
      if (*deleted) continue;
    }
    if (count > 0) result.body.push_back(',');
    result.body += render_item(*item, request.database, container.crid, container.ttl.policy,
                               holds ? holds->hold_json(partition_key, id) : std::string());
    ++count;
  }
  if (!it->status().ok()) return internal_error(from_leveldb(it->status(), "scan items"));
  if (it->Valid() && has_prefix(it->key(), prefix) && !last_read.empty()) {  // more pages
    result.continuation =
        codec::hex_encode(std::string_view(last_read).substr(item_prefix(container.crid).size()));
  }
  result.body.push_back(']');
  return result;
}

// ---- the query engine's reader -----------------------------------------------------------------------------

ItemReader::ItemReader(leveldb::DB* db) : db_(db), snapshot_(db) {}

Result<std::unique_ptr<ItemReader>> StoreReader::open_item_reader(std::string_view database,
                                                                               std::string_view container) const {
  // The container record is read from the reader's own snapshot, so settings and items are one consistent state.
  const uint64_t ticket = gate_.ticket();
  std::unique_ptr<ItemReader> reader(new ItemReader(db_));
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));  // its walks read that snapshot only
  Result<ContainerRecord> found = find_container(database, container, &reader->snapshot_);
  if (!found.is_ok()) return found.status();
  reader->container_ = std::move(found.value());
  Result<std::optional<std::string>> meta = get_raw(meta_key(), &reader->snapshot_);
  if (!meta.is_ok()) return meta.status();
  if (meta->has_value()) {
    Result<MetaState> decoded = decode_meta(**meta);
    if (!decoded.is_ok()) return decoded.status();
    reader->applied_ts_micros_ = decoded->applied_ts_micros;
  }
  return reader;
}

Status ItemReader::walk(Order order, const std::optional<std::string>& partition_key,
                                      std::string_view resume_after, int64_t now_micros,
                                      const std::function<bool(const Visit&)>& visit) {
  if (order == Order::kKey) return walk_keys(partition_key, resume_after, now_micros, visit);
  return walk_ts(order == Order::kTsDescending, partition_key, resume_after, now_micros, visit);
}

Status ItemReader::walk_keys(const std::optional<std::string>& partition_key,
                                           std::string_view resume_after, int64_t now_micros,
                                           const std::function<bool(const Visit&)>& visit) {
  const std::string container_prefix = item_prefix(container_.crid);
  const std::string prefix = partition_key ? partition_prefix(container_.crid, *partition_key) : container_prefix;
  const std::string start = container_prefix + std::string(resume_after);
  if (!resume_after.empty() && start.compare(0, prefix.size(), prefix) != 0) {
    return Status::invalid_argument("continuation position is outside this partition");
  }
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot_)));
  it->Seek(resume_after.empty() ? prefix : start);
  if (!resume_after.empty() && it->Valid() && it->key() == leveldb::Slice(start)) it->Next();
  std::string pk, id;
  for (; it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    const std::string_view value(it->value().data(), it->value().size());
    ++counters_.items_loaded;
    counters_.bytes_loaded += static_cast<int64_t>(key.size() + value.size());
    MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(value));
    MAYFLY_RETURN_IF_ERROR(decode_item_key(key, pk, id));
    MAYFLY_ASSIGN_OR_RETURN(bool is_gone, gone(pk, id, record, now_micros));
    if (is_gone) continue;
    if (!visit(Visit{key.substr(container_prefix.size()), pk, id, record})) return Status::ok();
  }
  return from_leveldb(it->status(), "query scan");
}

Status ItemReader::walk_ts(bool descending, const std::optional<std::string>& partition_key,
                                         std::string_view resume_after, int64_t now_micros,
                                         const std::function<bool(const Visit&)>& visit) {
  const std::string prefix = ts_index_prefix(container_.crid);
  const std::string start = prefix + std::string(resume_after);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot_)));
  if (!descending) {
    it->Seek(resume_after.empty() ? prefix : start);
    if (!resume_after.empty() && it->Valid() && it->key() == leveldb::Slice(start)) it->Next();
  } else {
    // Position at the last key strictly below the resume point (or the last key of the index).
    const std::string end = resume_after.empty() ? codec::prefix_successor(prefix) : start;
    it->Seek(end);
    if (it->Valid()) {
      it->Prev();
    } else {
      it->SeekToLast();
    }
    while (it->Valid() && it->key().compare(leveldb::Slice(end)) >= 0) it->Prev();
  }
  std::string value;
  for (; it->Valid() && has_prefix(it->key(), prefix); descending ? it->Prev() : it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    ++counters_.index_entries;
    MAYFLY_ASSIGN_OR_RETURN(IndexKey entry, decode_index_key(key));
    if (partition_key && entry.partition_key != *partition_key) continue;
    const std::string item = item_key(container_.crid, entry.partition_key, entry.id);
    leveldb::Status status = db_->Get(read_options(&snapshot_), item, &value);
    if (status.IsNotFound()) return Status::corruption("`_ts` index entry without its item");
    MAYFLY_RETURN_IF_ERROR(from_leveldb(status, "query index lookup"));
    ++counters_.items_loaded;
    counters_.bytes_loaded += static_cast<int64_t>(item.size() + value.size());
    MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(value));
    MAYFLY_ASSIGN_OR_RETURN(bool is_gone, gone(entry.partition_key, entry.id, record, now_micros));
    if (is_gone) continue;
    if (!visit(Visit{key.substr(prefix.size()), entry.partition_key, entry.id, record})) return Status::ok();
  }
  return from_leveldb(it->status(), "query index walk");
}

Result<std::optional<ItemRecord>> ItemReader::lookup(std::string_view partition_key,
                                                                   std::string_view id, int64_t now_micros) {
  const std::string key = item_key(container_.crid, partition_key, id);
  std::string value;
  leveldb::Status status = db_->Get(read_options(&snapshot_), key, &value);
  if (status.IsNotFound()) return std::optional<ItemRecord>();
  MAYFLY_RETURN_IF_ERROR(from_leveldb(status, "query point read"));
  ++counters_.items_loaded;
  counters_.bytes_loaded += static_cast<int64_t>(key.size() + value.size());
  MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(value));
  MAYFLY_ASSIGN_OR_RETURN(bool is_gone, gone(partition_key, id, record, now_micros));
  if (is_gone) return std::optional<ItemRecord>();
  return std::optional<ItemRecord>(std::move(record));
}

Result<const HoldSet*> ItemReader::holds() {
  if (container_.active_holds == 0) return static_cast<const HoldSet*>(nullptr);
  if (!holds_) {
    MAYFLY_ASSIGN_OR_RETURN(HoldSet loaded, HoldSet::load(db_, snapshot_.get(), container_.crid));
    holds_ = std::make_unique<HoldSet>(std::move(loaded));
  }
  return static_cast<const HoldSet*>(holds_.get());
}

Result<std::string> ItemReader::hold_json(std::string_view partition_key, std::string_view id) {
  MAYFLY_ASSIGN_OR_RETURN(const HoldSet* held, holds());
  return held ? held->hold_json(partition_key, id) : std::string();
}

Result<bool> ItemReader::gone(std::string_view partition_key, std::string_view id, const ItemRecord& record,
                              int64_t now_micros) {
  MAYFLY_ASSIGN_OR_RETURN(const HoldSet* held, holds());
  if (held ? !held->alive(partition_key, id, record, container_.ttl, now_micros)
           : !ttl::alive(record.ttl, record.write_ts_micros, container_.ttl, now_micros)) {
    ++counters_.expired_skipped;
    return true;
  }
  if (record.write_ts_micros > container_.partitions_deleted_through_micros) return false;
  if (!deletes_) deletes_ = std::make_unique<PartitionDeletes>(PartitionDeletes::at(db_, snapshot_.get(), container_));
  MAYFLY_ASSIGN_OR_RETURN(bool deleted, deletes_->hides(partition_key, record.write_ts_micros));
  if (deleted) ++counters_.deleted_skipped;
  return deleted;
}

OpResult StoreReader::read_database(std::string_view database) const {
  const uint64_t ticket = gate_.ticket();
  const ReadSnapshot snapshot(db_);
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  Result<std::optional<std::string>> raw = get_raw(database_key(database), &snapshot);
  if (!raw.is_ok()) return internal_error(raw.status());
  if (!raw->has_value()) return not_found("database '" + std::string(database) + "' does not exist");
  Result<DatabaseRecord> record = decode_database(**raw);
  if (!record.is_ok()) return internal_error(record.status());
  OpResult result;
  result.ts_micros = record->created_ts_micros;
  result.body = "{\"id\":";
  json::write_json_string(database, result.body);
  result.body += ",\"_ts\":" + std::to_string(ttl::ts_seconds(record->created_ts_micros)) + "}";
  return result;
}

OpResult StoreReader::list_databases() const {
  const uint64_t ticket = gate_.ticket();
  const ReadSnapshot snapshot(db_);
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  const std::string prefix(1, static_cast<char>(KeyTag::kDatabase));
  OpResult result;
  result.body = "[";
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot)));
  bool first = true;
  for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    codec::Reader reader(std::string_view(it->key().data(), it->key().size()).substr(1));
    std::string name;
    if (!reader.get_ordered_string(name)) return internal_error(Status::corruption("database key"));
    if (!first) result.body.push_back(',');
    first = false;
    json::write_json_string(name, result.body);
  }
  result.body.push_back(']');
  return result;
}

OpResult StoreReader::list_holds(std::string_view database, std::string_view container,
                                 bool include_released) const {
  const uint64_t ticket = gate_.ticket();
  ReadSnapshot snapshot(db_);
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  OpResult result;
  result.body = "[";
  bool first = true;
  const auto add = [&](std::string_view db_name, std::string_view container_name,
                       const ContainerRecord& record) -> Status {
    if (record.active_holds == 0 && !include_released) return Status::ok();
    MAYFLY_ASSIGN_OR_RETURN(HoldSet holds, HoldSet::load(db_, snapshot.get(), record.crid));
    for (const HoldRecord& hold : holds.all()) {
      if (!hold.active() && !include_released) continue;
      if (!first) result.body.push_back(',');
      first = false;
      render_hold(hold, db_name, container_name, result.body);
    }
    return Status::ok();
  };
  if (!container.empty()) {
    Result<ContainerRecord> found = find_container(database, container, &snapshot);
    if (!found.is_ok()) return OpResult::error(found.status());
    if (Status status = add(database, container, *found); !status.is_ok()) return internal_error(status);
  } else {
    if (!database.empty()) {
      Result<std::optional<std::string>> db = get_raw(database_key(database), &snapshot);
      if (!db.is_ok()) return internal_error(db.status());
      if (!db->has_value()) return not_found("database '" + std::string(database) + "' does not exist");
    }
    const std::string prefix =
        database.empty() ? std::string(1, static_cast<char>(KeyTag::kContainer)) : container_prefix(database);
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot)));
    for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
      codec::Reader reader(std::string_view(it->key().data(), it->key().size()).substr(1));
      std::string db_name, container_name;
      Result<ContainerRecord> record = decode_container(std::string_view(it->value().data(), it->value().size()));
      if (!reader.get_ordered_string(db_name) || !reader.get_ordered_string(container_name) || !record.is_ok()) {
        return internal_error(Status::corruption("container record"));
      }
      if (Status status = add(db_name, container_name, *record); !status.is_ok()) return internal_error(status);
    }
    if (!it->status().ok()) return internal_error(from_leveldb(it->status(), "scan containers"));
  }
  result.body.push_back(']');
  return result;
}

OpResult StoreReader::list_hold_audit(size_t max_items, std::string_view continuation) const {
  if (max_items == 0 || max_items > kMaxListItems) {
    return bad_request("max items per page must be between 1 and " + std::to_string(kMaxListItems));
  }
  uint64_t from = 0;
  if (!continuation.empty()) {
    const auto [end, error] = std::from_chars(continuation.data(), continuation.data() + continuation.size(), from);
    if (error != std::errc() || end != continuation.data() + continuation.size()) {
      return bad_request("continuation token is malformed");
    }
  }
  const uint64_t ticket = gate_.ticket();
  ReadSnapshot snapshot(db_);
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  OpResult result;
  result.body = "[";
  size_t count = 0;
  const std::string prefix = hold_audit_prefix();
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot)));
  for (it->Seek(hold_audit_key(from)); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    Result<HoldAuditRecord> record = decode_hold_audit(std::string_view(it->value().data(), it->value().size()));
    if (!record.is_ok()) return internal_error(record.status());
    if (count == max_items) {
      result.continuation = std::to_string(record->index);
      break;
    }
    if (count > 0) result.body.push_back(',');
    render_hold_audit(*record, result.body);
    ++count;
  }
  if (!it->status().ok()) return internal_error(from_leveldb(it->status(), "scan hold audit"));
  result.body.push_back(']');
  return result;
}

OpResult StoreReader::list_offers() const {
  const uint64_t ticket = gate_.ticket();
  ReadSnapshot snapshot(db_);
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  const std::string prefix(1, static_cast<char>(KeyTag::kDatabase));
  OpResult result;
  result.body = "[";
  bool first = true;
  auto offer = [&](std::string_view database, const std::string* container, const std::string& rid,
                   int64_t request_units, int64_t ts_micros) {
    if (!first) result.body.push_back(',');
    first = false;
    result.body += "{\"database\":";
    json::write_json_string(database, result.body);
    if (container != nullptr) {
      result.body += ",\"container\":";
      json::write_json_string(*container, result.body);
    }
    result.body += ",\"rid\":\"" + rid + "\",\"throughput\":" + std::to_string(request_units) +
                   ",\"ts\":" + std::to_string(ttl::ts_seconds(ts_micros)) + "}";
  };
  std::unique_ptr<leveldb::Iterator> databases(db_->NewIterator(read_options(&snapshot)));
  for (databases->Seek(prefix); databases->Valid() && has_prefix(databases->key(), prefix); databases->Next()) {
    codec::Reader reader(std::string_view(databases->key().data(), databases->key().size()).substr(1));
    std::string name;
    Result<DatabaseRecord> record =
        decode_database(std::string_view(databases->value().data(), databases->value().size()));
    if (!reader.get_ordered_string(name) || !record.is_ok()) {
      return internal_error(Status::corruption("database record"));
    }
    if (record->throughput.mode == Throughput::Mode::kProvisioned) {
      offer(name, nullptr, format_database_rid(name), record->throughput.request_units_per_second,
            record->modified_ts_micros);
    }
    const std::string containers_prefix = container_prefix(name);
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot)));
    for (it->Seek(containers_prefix); it->Valid() && has_prefix(it->key(), containers_prefix); it->Next()) {
      codec::Reader container_reader(
          std::string_view(it->key().data(), it->key().size()).substr(containers_prefix.size()));
      std::string container;
      Result<ContainerRecord> found = decode_container(std::string_view(it->value().data(), it->value().size()));
      if (!container_reader.get_ordered_string(container) || !found.is_ok()) {
        return internal_error(Status::corruption("container record"));
      }
      if (found->throughput.mode != Throughput::Mode::kProvisioned) continue;
      offer(name, &container, format_container_rid(name, found->crid), found->throughput.request_units_per_second,
            found->modified_ts_micros);
    }
    if (!it->status().ok()) return internal_error(from_leveldb(it->status(), "scan containers"));
  }
  if (!databases->status().ok()) return internal_error(from_leveldb(databases->status(), "scan databases"));
  result.body.push_back(']');
  return result;
}

OpResult StoreReader::read_container(std::string_view database, std::string_view container) const {
  const uint64_t ticket = gate_.ticket();
  const ReadSnapshot snapshot(db_);  // the database is looked up too when the container is missing
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  Result<ContainerRecord> found = find_container(database, container, &snapshot);
  if (!found.is_ok()) return OpResult::error(found.status());
  OpResult result;
  result.ts_micros = found.value().modified_ts_micros;
  result.etag = format_etag(found.value().etag_sequence);
  result.body = render_container(database, container, found.value());
  return result;
}

std::optional<ContainerRecord> StoreReader::container_record(std::string_view database,
                                                              std::string_view container) const {
  const uint64_t ticket = gate_.ticket();
  const ReadSnapshot snapshot(db_);  // the database is looked up too when the container is missing
  if (!gate_.check(ticket).is_ok()) return std::nullopt;
  Result<ContainerRecord> found = find_container(database, container, &snapshot);
  if (!found.is_ok()) return std::nullopt;
  return found.value();
}

OpResult StoreReader::list_containers(std::string_view database) const {
  const uint64_t ticket = gate_.ticket();
  ReadSnapshot snapshot(db_);
  if (Status whole = gate_.check(ticket); !whole.is_ok()) return OpResult::error(whole);
  Result<std::optional<std::string>> db = get_raw(database_key(database), &snapshot);
  if (!db.is_ok()) return internal_error(db.status());
  if (!db->has_value()) return not_found("database '" + std::string(database) + "' does not exist");
  const std::string prefix = container_prefix(database);
  OpResult result;
  result.body = "[";
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot)));
  bool first = true;
  for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    codec::Reader reader(std::string_view(it->key().data(), it->key().size()).substr(prefix.size()));
    std::string name;
    Result<ContainerRecord> record = decode_container(std::string_view(it->value().data(), it->value().size()));
    if (!reader.get_ordered_string(name) || !record.is_ok()) {
      return internal_error(Status::corruption("container record"));
    }
    if (!first) result.body.push_back(',');
    first = false;
    result.body += render_container(database, name, *record);
  }
  result.body.push_back(']');
  return result;
}

Result<std::vector<ContainerInfo>> StoreReader::containers() const {
  MAYFLY_ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<ContainerInfo>> list, container_list());
  return *list;
}

void StoreReader::invalidate_container_list() {
  std::lock_guard<std::mutex> lock(containers_mutex_);
  containers_cache_.reset();
}

Result<std::shared_ptr<const std::vector<ContainerInfo>>> StoreReader::container_list() const {
  const uint64_t ticket = gate_.ticket();
  std::lock_guard<std::mutex> lock(containers_mutex_);
  // The cache is dropped when an install ends, before the gate opens: a list cached before it is the old state's.
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));
  if (containers_cache_) return containers_cache_;
  const ReadSnapshot snapshot(db_);
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));  // never cache a list read from a half-installed state
  const std::string prefix(1, static_cast<char>(KeyTag::kContainer));
  std::vector<ContainerInfo> out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(read_options(&snapshot)));
  for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    ContainerInfo info;
    codec::Reader reader(std::string_view(it->key().data(), it->key().size()).substr(1));
    if (!reader.get_ordered_string(info.database) || !reader.get_ordered_string(info.container)) {
      return Status::corruption("container key");
    }
    MAYFLY_ASSIGN_OR_RETURN(info.record, decode_container(std::string_view(it->value().data(), it->value().size())));
    out.push_back(std::move(info));
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan containers"));
  containers_cache_ = std::make_shared<const std::vector<ContainerInfo>>(std::move(out));
  return containers_cache_;
}

Result<std::vector<ExpiringSoon>> StoreReader::expiring_soon(const std::vector<int64_t>& windows_micros,
                                                             size_t max_entries_per_container) const {
  if (windows_micros.empty()) return std::vector<ExpiringSoon>{};
  const int64_t widest = *std::max_element(windows_micros.begin(), windows_micros.end());
  MAYFLY_ASSERT(widest >= 0);
  const uint64_t ticket = gate_.ticket();
  const ReadSnapshot snapshot(db_);
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));
  const leveldb::ReadOptions options = read_options(&snapshot);

  std::string meta_bytes;
  MetaState meta;
  const leveldb::Status got = db_->Get(options, meta_key(), &meta_bytes);
  if (!got.IsNotFound()) {
    MAYFLY_RETURN_IF_ERROR(from_leveldb(got, "read the applied state"));
    MAYFLY_ASSIGN_OR_RETURN(meta, decode_meta(meta_bytes));
  }
  const int64_t now = meta.applied_ts_micros;

  std::vector<ExpiringSoon> out;
  const std::string container_prefix(1, static_cast<char>(KeyTag::kContainer));
  std::unique_ptr<leveldb::Iterator> containers(db_->NewIterator(options));
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(options));
  for (containers->Seek(container_prefix); containers->Valid() && has_prefix(containers->key(), container_prefix);
       containers->Next()) {
    ExpiringSoon entry;
    codec::Reader reader(std::string_view(containers->key().data(), containers->key().size()).substr(1));
    if (!reader.get_ordered_string(entry.database) || !reader.get_ordered_string(entry.container)) {
      return Status::corruption("container key");
    }
    MAYFLY_ASSIGN_OR_RETURN(
        ContainerRecord record,
        decode_container(std::string_view(containers->value().data(), containers->value().size())));
    if (!record.ttl.policy.is_on()) continue;
    entry.counts.assign(windows_micros.size(), 0);
    const ttl::ExpiredBounds at_now = ttl::expired_bounds(record.ttl, now);
    const ttl::ExpiredBounds at_end = ttl::expired_bounds(record.ttl, now + widest);
    size_t read = 0;
    for (const bool own : {true, false}) {
      if (entry.truncated) break;
      const std::string prefix = own ? own_expiry_prefix(record.crid) : inherit_expiry_prefix(record.crid);
      const int64_t from = own ? at_now.own_expiry_below_micros : at_now.default_ts_below_micros;
      const int64_t to = own ? at_end.own_expiry_below_micros : at_end.default_ts_below_micros;
      if (from >= to) continue;
      std::string start = prefix;
      codec::put_i64_be(start, from);
      for (it->Seek(start); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
        MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(std::string_view(it->key().data(), it->key().size())));
        if (key.sort_micros >= to) break;
        if (read++ >= max_entries_per_container) {
          entry.truncated = true;
          break;
        }
        // The item expires at the first instant its index entry falls below the bound: its own expiry instant, or
        // its write time plus the default ttl (whole seconds, as ttl::expiry_instant_micros).
        const int64_t expiry =
            own ? key.sort_micros : ttl::expiry_instant_micros(key.sort_micros, record.ttl.policy.seconds);
        for (size_t i = 0; i < windows_micros.size(); ++i) {
          if (expiry <= now + windows_micros[i]) entry.counts[i] += 1;
        }
      }
      MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expiry index"));
    }
    out.push_back(std::move(entry));
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(containers->status(), "scan containers"));
  return out;
}

}  // namespace mayfly::storage
