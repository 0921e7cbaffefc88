// StateMachine (storage/state_machine.h): opening the store, the deterministic apply of each command kind and the
// commit of its batch. Snapshots and dump are in storage/state_snapshot.cc.
#include "storage/state_machine.h"

#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>

#include <cctype>
#include <cstdio>
#include <filesystem>

#include "common/codec.h"
#include "storage/deleted_partitions.h"
#include "storage/document.h"
#include "storage/json.h"
#include "storage/patch.h"
#include "storage/pread_env.h"
#include "storage/store_internal.h"
#include "storage/write_dedup.h"
#include "ttl/request_units.h"

namespace mayfly::storage {

using internal::bad_request;
using internal::from_leveldb;
using internal::has_prefix;
using internal::index_value;
using internal::internal_error;
using internal::not_found;

// One apply: the batch and its node-local effects (internal::StoreBatch) plus the meta state it writes.
struct StateMachine::ApplyContext : internal::StoreBatch {
  MetaState meta;
  uint64_t index = 0;  // the log position applied (change feed keys)
  Status failure;  // an internal error found while building the batch
};

Result<std::unique_ptr<StateMachine>> StateMachine::open(const StoreOptions& options) {
  std::unique_ptr<leveldb::Cache> cache(leveldb::NewLRUCache(options.block_cache_bytes));
  std::unique_ptr<const leveldb::FilterPolicy> filter(leveldb::NewBloomFilterPolicy(10));
  leveldb::Options db_options;
  db_options.create_if_missing = true;
  db_options.paranoid_checks = true;
  db_options.block_cache = cache.get();
  db_options.filter_policy = filter.get();
  db_options.write_buffer_size = options.write_buffer_bytes;
  db_options.max_file_size = 32 << 20;
  db_options.max_open_files = options.max_open_tables + 10;  // LevelDB keeps ten for its log, MANIFEST and others
  db_options.block_size = options.table_block_bytes;
  if (options.env != nullptr) {
    db_options.env = options.env;
  } else {
    db_options.env = pread_table_env();  // table pages in the page cache, not in this process's RSS
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(options.path).parent_path(), error);
    if (error) return Status::io_error("create directory for " + options.path + ": " + error.message());
  }
  leveldb::DB* raw = nullptr;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(leveldb::DB::Open(db_options, options.path, &raw), "open " + options.path));
  std::unique_ptr<leveldb::DB> db(raw);

  MetaState meta;
  std::string bytes;
  leveldb::Status status = db->Get(leveldb::ReadOptions(), meta_key(), &bytes);
  if (status.ok()) {
    MAYFLY_ASSIGN_OR_RETURN(meta, decode_meta(bytes));
  } else if (!status.IsNotFound()) {
    return from_leveldb(status, "read meta state");
  }
  // An install that did not finish (storage/state_snapshot.cc): the store holds half a state until it is redone.
  std::optional<LogIndex> unfinished_install;
  status = db->Get(leveldb::ReadOptions(), install_marker_key(), &bytes);
  if (status.ok()) {
    codec::Reader reader(bytes);
    uint64_t index = 0;
    if (!reader.get_u64_be(index) || !reader.done()) return Status::corruption("undecodable snapshot install marker");
    unfinished_install = LogIndex(index);
  } else if (!status.IsNotFound()) {
    return from_leveldb(status, "read snapshot install marker");
  }
  return std::unique_ptr<StateMachine>(
      new StateMachine(options, std::move(cache), std::move(filter), std::move(db), meta, unfinished_install));
}

StateMachine::StateMachine(const StoreOptions& options, std::unique_ptr<leveldb::Cache> cache,
                           std::unique_ptr<const leveldb::FilterPolicy> filter, std::unique_ptr<leveldb::DB> db,
                           MetaState meta, std::optional<LogIndex> unfinished_install)
    : options_(options),
      cache_(std::move(cache)),
      filter_(std::move(filter)),
      db_(std::move(db)),
      meta_(meta),
      unfinished_install_(unfinished_install),
      reader_(db_.get(), applied_, install_gate_),
      change_feed_(db_.get(), install_gate_),
      expiry_(db_.get(), reader_, sticky_, options.backlog_count_step) {
  publish_applied();
  if (unfinished_install_) {
    // Half of one state and half of another: nothing is applied, collected or read until the install is redone.
    install_gate_.close();
    redo_install_ = true;
    sticky_ = Status::unavailable("the store holds an unfinished install of the snapshot at index " +
                                  std::to_string(unfinished_install_->value()) +
                                  "; it must be installed again (Replica::open does, from the raft log's snapshot)");
  }
}

StateMachine::~StateMachine() {
  // A View still open here would release its LevelDB snapshot on the closed database later: stop with the cause
  // now instead of a use-after-free at some later point.
  MAYFLY_ASSERT_MSG(open_views_.load() == 0, "the store closes with %d snapshot view(s) still open",
                    open_views_.load());
  db_.reset();  // the DB must close before its block cache and filter policy go
}

void StateMachine::publish_applied() {
  applied_.set(AppliedState{LogIndex(meta_.applied_index), meta_.applied_ts_micros});
}

Result<OpResult> StateMachine::apply_encoded(std::string_view command_bytes, LogIndex index, int64_t ts_micros) {
  Result<Command> command = decode_command(command_bytes);
  if (command.is_ok()) return apply(*command, index, ts_micros);
  Command time_only;  // still advance applied index and time, deterministically
  Result<OpResult> result = apply(time_only, index, ts_micros);
  if (!result.is_ok()) return result;
  return bad_request(command.status().message());
}

Result<OpResult> StateMachine::apply(const Command& command, LogIndex index, int64_t ts_micros) {
  if (!sticky_.is_ok()) return sticky_;
  MAYFLY_ASSERT_MSG(index.value() > meta_.applied_index, "apply index %llu after %llu",
                    static_cast<unsigned long long>(index.value()),
                    static_cast<unsigned long long>(meta_.applied_index));
  MAYFLY_ASSERT_MSG(ts_micros >= meta_.applied_ts_micros && ts_micros >= 0, "apply ts %lld after %lld",
                    static_cast<long long>(ts_micros), static_cast<long long>(meta_.applied_ts_micros));
  // Item writes and time entries join the open group; any other command may scan or change what readers cache:
  // the group is written first and the command on its own.
  const bool grouped = grouping_ && groupable(command.type);
  if (grouping_ && !grouped) MAYFLY_RETURN_IF_ERROR(write_group());
  ApplyContext context;
  context.meta = meta_;
  context.index = index.value();
  // A write re-sent by its client is answered with its first outcome, or refused, without running again.
  GroupReads reads(*this);
  DedupApply dedup(db_.get(), &reads, ts_micros, options_.dedup_in_memory ? &dedup_mirror_ : nullptr);
  std::optional<OpResult> answered;
  if (command.write_id) {
    Result<std::optional<OpResult>> checked = dedup.check(*command.write_id);
    if (!checked.is_ok()) {
      sticky_ = checked.status();
      return sticky_;
    }
    answered = std::move(checked).value();
  }
  OpResult result = answered ? std::move(*answered) : dispatch(command, ts_micros, context);
  // The table's own answers (a recorded outcome, or a refusal such as a retry whose first outcome may be lost) are
  // verdicts. A command that met a failure of the store (a read failed, stored data did not decode) is not: other
  // replicas would not see it, so answering anything would make this node diverge: stop, sticky. Decided by the
  // answer's code, never by an HTTP number.
  if (!answered && (!context.failure.is_ok() || is_storage_failure(result.code))) {
    sticky_ = context.failure.is_ok() ? Status::io_error(result.message) : context.failure;
    return sticky_;
  }
  if (!result.ok() || answered) {
    context.reset();  // a rejected command changes nothing but the applied position
    context.meta.write_sequence = meta_.write_sequence;
    context.meta.next_container_rid = meta_.next_container_rid;
    context.meta.feed_containers = meta_.feed_containers;
  }
  // The outcome of a write with an id is recorded whatever it was (a 409 is as final as a 201).
  Status recorded = dedup.finish(command.write_id && !answered ? &result : nullptr, index.value(), context.batch);
  if (!recorded.is_ok()) {
    sticky_ = recorded;
    return sticky_;
  }
  context.meta.applied_index = index.value();
  context.meta.applied_ts_micros = ts_micros;
  // The change feed's time index: the reader evaluates expiry bounds at past positions (docs/changefeed.md). Every
  // apply while some container has its feed on, rejected ones and time entries included.
  if (context.meta.feed_containers > 0) {
    std::string ts_value;
    codec::put_varint_signed(ts_value, ts_micros);
    context.batch.Put(time_index_key(index.value()), ts_value);
  }
  context.batch.Put(meta_key(), encode_meta(context.meta));
  MAYFLY_RETURN_IF_ERROR(commit(context, grouped));
  dedup.committed();  // the table's mirror follows what is now stored (or in the group)
  switch (command.type) {
    case CommandType::kCreateDatabase:
    case CommandType::kDeleteDatabase:
    case CommandType::kUpdateDatabase:
    case CommandType::kCreateContainer:
    case CommandType::kUpdateContainer:
    case CommandType::kDeleteContainer:
    case CommandType::kDeletePartition:
    case CommandType::kSetHold:
    case CommandType::kReleaseHold: {
      reader_.invalidate_container_list();
      apply_containers_.clear();
      apply_holds_.clear();
      break;
    }
    default:
      break;
  }
  return result;
}

Status StateMachine::commit(ApplyContext& context, bool grouped) {
  if (grouped) {
    // Written with the group; what this apply changed in memory holds from now on (a failed group write is
    // sticky: nothing is answered or applied after it).
    group_.add(std::make_unique<leveldb::WriteBatch>(context.batch));
    meta_ = context.meta;
    expiry_.committed(context);
    return Status::ok();
  }
  leveldb::WriteOptions write_options;
  write_options.sync = options_.sync_applies;
  Status status = from_leveldb(db_->Write(write_options, &context.batch), "write state batch");
  if (!status.is_ok()) {
    sticky_ = status;
    dedup_mirror_.drop();  // stopped: never read again
    return status;
  }
  meta_ = context.meta;
  publish_applied();
  expiry_.committed(context);
  return Status::ok();
}

bool StateMachine::groupable(CommandType type) { return type == CommandType::kTime || is_item_write(type); }

void StateMachine::begin_apply_group() {
  MAYFLY_ASSERT_MSG(!grouping_ && group_.empty(), "apply group opened twice");
  grouping_ = true;
}

Status StateMachine::end_apply_group() {
  Status written = write_group();
  grouping_ = false;
  group_.clear();
  return written;
}

Status StateMachine::checkpoint() {
  MAYFLY_ASSERT_MSG(!grouping_, "a checkpoint inside an apply group");
  if (!sticky_.is_ok()) return sticky_;
  leveldb::WriteBatch batch;
  batch.Put(meta_key(), encode_meta(meta_));  // the value it already has: the write is for its sync
  leveldb::WriteOptions write_options;
  write_options.sync = true;
  Status status = from_leveldb(db_->Write(write_options, &batch), "write checkpoint");
  if (!status.is_ok()) sticky_ = status;
  return status;
}

Status StateMachine::write_group() {
  if (!sticky_.is_ok()) return sticky_;
  if (group_.empty()) return Status::ok();
  leveldb::WriteBatch batch = group_.combined();
  leveldb::WriteOptions write_options;
  write_options.sync = options_.sync_applies;
  Status status = from_leveldb(db_->Write(write_options, &batch), "write state batch");
  group_.clear();
  if (!status.is_ok()) {
    sticky_ = status;
    dedup_mirror_.drop();  // it holds the group's changes, which the store does not: stopped, never read again
    return status;
  }
  publish_applied();
  return Status::ok();
}

Result<ContainerRecord> StateMachine::apply_container(const std::string& database, const std::string& container) {
  std::string key = container_key(database, container);
  auto cached = apply_containers_.find(key);
  if (cached != apply_containers_.end()) return cached->second;
  MAYFLY_ASSIGN_OR_RETURN(ContainerRecord record, reader_.find_container(database, container, nullptr));
  apply_containers_.emplace(std::move(key), record);
  return record;
}

std::optional<ContainerRecord> StateMachine::container_for_write(const std::string& database,
                                                                 const std::string& container) {
  MAYFLY_ASSERT_MSG(!grouping_, "container_for_write inside an apply group");
  Result<ContainerRecord> record = apply_container(database, container);
  if (!record.is_ok()) return std::nullopt;
  return std::move(record).value();
}

Result<std::optional<std::string>> StateMachine::apply_get(const std::string& key) const {
  if (!batch_writes_.empty()) {
    if (auto staged = batch_writes_.find(key); staged != batch_writes_.end()) return staged->second;
  }
  if (const std::optional<std::string_view>* pending = group_.find(key)) {
    if (!pending->has_value()) return std::optional<std::string>();
    return std::optional<std::string>(std::string(**pending));
  }
  return reader_.get_raw(key, nullptr);
}

Result<std::optional<std::string>> StateMachine::GroupReads::get(const std::string& key) {
  return machine_.apply_get(key);
}

Status StateMachine::GroupReads::before_scan() { return machine_.write_group(); }

OpResult StateMachine::dispatch(const Command& command, int64_t ts, ApplyContext& context) {
  switch (command.type) {
    case CommandType::kTime: return OpResult{};
    case CommandType::kCreateDatabase: return create_database(command, ts, context);
    case CommandType::kDeleteDatabase: return delete_database(command, context);
    case CommandType::kUpdateDatabase: return update_database(command, ts, context);
    case CommandType::kCreateContainer: return create_container(command, ts, context);
    case CommandType::kUpdateContainer: return update_container(command, ts, context);
    case CommandType::kDeleteContainer: return delete_container(command, context);
    case CommandType::kCreateItem:
    case CommandType::kReplaceItem:
    case CommandType::kUpsertItem:
    case CommandType::kPatchItem: return write_item(command, ts, context);
    case CommandType::kDeleteItem: return delete_item(command, ts, context);
    case CommandType::kSetMemberAddress: return set_member_address(command, context);
    case CommandType::kBatch: return execute_batch(command, ts, context);
    case CommandType::kDeletePartition: return delete_partition(command, ts, context);
    case CommandType::kSetHold: return set_hold(command, ts, context);
    case CommandType::kReleaseHold: return release_hold(command, ts, context);
  }
  return bad_request("unknown command type");
}

Result<std::optional<StateMachine::StoredItem>> StateMachine::load_item(const std::string& key) const {
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, apply_get(key));
  if (!raw) return std::optional<StoredItem>();
  MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(*raw));
  return std::optional<StoredItem>(StoredItem{std::move(record), key.size() + raw->size()});
}

// ---- databases and containers -----------------------------------------------------------------------------------

namespace {
Status validate_throughput(const Throughput& throughput);
}  // namespace

OpResult StateMachine::create_database(const Command& command, int64_t ts, ApplyContext& context) {
  if (Status status = validate_resource_id("database", command.database); !status.is_ok()) {
    return bad_request(status.message());
  }
  const std::string key = database_key(command.database);
  Result<std::optional<std::string>> existing = reader_.get_raw(key, nullptr);
  if (!existing.is_ok()) {
    context.failure = existing.status();
    return internal_error(existing.status());
  }
  if (existing->has_value()) {
    return OpResult::error(StatusCode::kConflict, "database '" + command.database + "' already exists");
  }
  DatabaseRecord record{++context.meta.write_sequence, ts};
  if (command.throughput && command.throughput->mode != Throughput::Mode::kServerless) {
    if (command.throughput->mode != Throughput::Mode::kProvisioned) {
      return bad_request("a database's shared throughput is a provisioned number of RU/s");
    }
    if (Status status = validate_throughput(*command.throughput); !status.is_ok()) return bad_request(status.message());
    record.throughput = *command.throughput;
    record.modified_ts_micros = ts;
  }
  context.batch.Put(key, encode_database(record));
  OpResult result;
  result.done = Done::kCreated;
  result.ts_micros = ts;
  std::string body = "{\"id\":";
  json::write_json_string(command.database, body);
  body += ",\"_ts\":" + std::to_string(ttl::ts_seconds(ts)) + "}";
  result.body = std::move(body);
  return result;
}

std::optional<DatabaseRecord> StateMachine::apply_database(const std::string& name, ApplyContext& context,
                                                           OpResult& refusal) {
  Result<std::optional<std::string>> existing = reader_.get_raw(database_key(name), nullptr);
  Result<DatabaseRecord> record = Status::not_found("database '" + name + "' does not exist");
  if (existing.is_ok() && existing->has_value()) record = decode_database(**existing);
  if (!existing.is_ok() || (existing->has_value() && !record.is_ok())) {
    context.failure = existing.is_ok() ? record.status() : existing.status();
    refusal = internal_error(context.failure);
    return std::nullopt;
  }
  if (!record.is_ok()) {
    refusal = not_found(record.status().message());
    return std::nullopt;
  }
  return std::move(record).value();
}

OpResult StateMachine::update_database(const Command& command, int64_t ts, ApplyContext& context) {
  const std::string key = database_key(command.database);
  OpResult refusal;
  std::optional<DatabaseRecord> record = apply_database(command.database, context, refusal);
  if (!record) return refusal;
  if (record->throughput.mode != Throughput::Mode::kProvisioned) {
    return bad_request("database '" + command.database + "' has no shared throughput to change: it was created "
                       "without one, so its containers each have their own (change theirs)");
  }
  if (!command.throughput || command.throughput->mode != Throughput::Mode::kProvisioned) {
    return bad_request("a database's shared throughput is a provisioned number of RU/s");
  }
  if (Status status = validate_throughput(*command.throughput); !status.is_ok()) return bad_request(status.message());
  record->throughput = *command.throughput;
  record->modified_ts_micros = ts;
  // Its sharing containers carry the figure (Throughput::kShared), so every check reads one record.
  const std::string prefix = container_prefix(command.database);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    Result<ContainerRecord> container = decode_container(std::string_view(it->value().data(), it->value().size()));
    if (!container.is_ok()) {
      context.failure = container.status();
      return internal_error(container.status());
    }
    if (container->throughput.mode != Throughput::Mode::kShared) continue;
    container->throughput.request_units_per_second = record->throughput.request_units_per_second;
    context.batch.Put(it->key(), encode_container(*container));
  }
  if (!it->status().ok()) {
    context.failure = from_leveldb(it->status(), "scan containers");
    return internal_error(context.failure);
  }
  context.batch.Put(key, encode_database(*record));
  OpResult result;
  result.ts_micros = ts;
  std::string body = "{\"id\":";
  json::write_json_string(command.database, body);
  body += ",\"throughput\":" + std::to_string(record->throughput.request_units_per_second) + "}";
  result.body = std::move(body);
  return result;
}

OpResult StateMachine::delete_database(const Command& command, ApplyContext& context) {
  const std::string key = database_key(command.database);
  OpResult refusal;
  if (!apply_database(command.database, context, refusal)) return refusal;
  const std::string prefix = container_prefix(command.database);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    Result<ContainerRecord> record = decode_container(std::string_view(it->value().data(), it->value().size()));
    if (!record.is_ok()) {
      context.failure = record.status();
      return internal_error(record.status());
    }
    if (record->active_holds > 0) {
      return holds_block(record.value(), "database '" + command.database + "'", "deleted", context);
    }
    context.batch.Delete(it->key());
    context.batch.Put(dropped_container_key(record->crid), "");
    context.dropped.push_back(record->crid);
    if (record->change_feed.enabled) context.meta.feed_containers -= 1;
  }
  if (!it->status().ok()) {
    context.failure = from_leveldb(it->status(), "scan containers");
    return internal_error(context.failure);
  }
  context.batch.Delete(key);
  OpResult result;
  result.done = Done::kNoContent;
  return result;
}

namespace {

// With the feed on, a live item that a write removes (delete, or replace by a new version) keeps its image for its
// warning when replicated time has already reached its warning window: a warning shadow (layout.h, 0E crid 02 kind
// 2|3) under its expiry index entry's key, so a warning a reader may have seen is never taken out of the feed. The
// feed's reader decides from the image whether there was a warning at all (storage/changefeed.h, "Warnings"). The
// key of that shadow, or "" when there is none to keep.
std::string warning_image_key(const ContainerRecord& container, std::string_view partition_key, std::string_view id,
                              const ItemRecord& record, int64_t ts) {
  if (!container.change_feed.enabled || !container.ttl.has_warnings()) return "";
  const internal::IndexEntry entry = internal::index_entry_for(container.crid, partition_key, id, record);
  if (entry.kind == internal::IndexKind::kNone) return "";
  const bool own = entry.kind == internal::IndexKind::kOwn;
  const ttl::ExpiredBounds warned = ttl::warning_bounds(container.ttl, ts);
  if (entry.sort_micros >= (own ? warned.own_expiry_below_micros : warned.default_ts_below_micros)) return "";
  return feed_shadow_key(container.crid, own ? kFeedWarningShadowKindOwn : kFeedWarningShadowKindInherit,
                         entry.sort_micros, partition_key, id);
}

// Warnings are changes of the all-versions feed: asking for them on a container whose feed is off would give nothing.
// (Turning the feed off later is allowed: its warnings are simply not served while it is off.)
constexpr const char* kWarningNeedsFeed =
    "expiryWarning needs the container's change feed on (warnings are changes of its all-versions feed): turn it on "
    "in the same request (--change-feed on)";

// The change feed's expirations are derived from the expiry indexes and know nothing of holds yet
// (docs/retention.md, "Legal holds"): a container has holds or its feed on, not both.
constexpr const char* kHoldsWithoutFeed =
    "legal holds and the change feed do not go together yet (the feed would show a held item's expiration at its "
    "instant instead of at the hold's release): release the container's holds before turning its feed on";

// Parses the JSON text of a defaultTtl value and validates it (docs/ttl.md §2).
Result<ttl::DefaultTtl> parse_default_ttl(std::string_view text) {
  Result<boost::json::value> parsed = json::parse(text);
  if (!parsed.is_ok()) return Status::invalid_argument("defaultTtl is not valid JSON: " + parsed.status().message());
  return ttl::validate_default_ttl(json::ttl_literal(&*parsed));
}

Status validate_throughput(const Throughput& throughput) {
  if (throughput.mode == Throughput::Mode::kProvisioned &&
      (throughput.request_units_per_second < kMinProvisionedRequestUnits ||
       throughput.request_units_per_second > kMaxProvisionedRequestUnits)) {
    return Status::invalid_argument("provisioned throughput must be between " +
                                    std::to_string(kMinProvisionedRequestUnits) + " and " +
                                    std::to_string(kMaxProvisionedRequestUnits) + " RU/s, got " +
                                    std::to_string(throughput.request_units_per_second));
  }
  return Status::ok();
}

// The settings a command asks for, checked; since_index is the caller's.
Result<ChangeFeedSettings> requested_change_feed(const ChangeFeedSettings& asked) {
  ChangeFeedSettings settings;
  settings.enabled = asked.enabled;
  if (!asked.enabled) return settings;
  if (asked.retention_seconds < 0 || asked.retention_seconds > kMaxChangeFeedRetentionSeconds) {
    return Status::invalid_argument("change feed retention must be between 1 and " +
                                    std::to_string(kMaxChangeFeedRetentionSeconds) + " seconds, got " +
                                    std::to_string(asked.retention_seconds));
  }
  settings.retention_seconds =
      asked.retention_seconds == 0 ? kDefaultChangeFeedRetentionSeconds : asked.retention_seconds;
  return settings;
}

}  // namespace

OpResult StateMachine::create_container(const Command& command, int64_t ts, ApplyContext& context) {
  if (Status status = validate_resource_id("container", command.container); !status.is_ok()) {
    return bad_request(status.message());
  }
  Result<std::optional<std::string>> db = reader_.get_raw(database_key(command.database), nullptr);
  Result<std::optional<std::string>> existing =
      reader_.get_raw(container_key(command.database, command.container), nullptr);
  if (!db.is_ok() || !existing.is_ok()) {
    context.failure = db.is_ok() ? existing.status() : db.status();
    return internal_error(context.failure);
  }
  if (!db->has_value()) return not_found("database '" + command.database + "' does not exist");
  if (existing->has_value()) {
    return OpResult::error(StatusCode::kConflict, "container '" + command.container +
                                                      "' already exists in database '" + command.database + "'");
  }
  ContainerRecord record;
  if (Status status = json::validate_partition_key_path(command.partition_key_path); !status.is_ok()) {
    return bad_request(status.message());
  }
  record.partition_key_path = command.partition_key_path;
  if (command.default_ttl_change == DefaultTtlChange::kSet) {
    Result<ttl::DefaultTtl> policy = parse_default_ttl(command.default_ttl_json);
    if (!policy.is_ok()) return OpResult::error(policy.status());
    record.ttl.policy = policy.value();
  }
  if (command.expiry_warning_seconds) {
    if (Status status = ttl::validate_expiry_warning(*command.expiry_warning_seconds); !status.is_ok()) {
      return bad_request(status.message());
    }
    record.ttl.warning_seconds = *command.expiry_warning_seconds;
  }
  record.indexing = command.indexing.value_or(ttl::IndexingMode::kConsistent);
  if (Status status = ttl::validate_indexing(record.ttl.policy, record.indexing); !status.is_ok()) {
    return bad_request(status.message());
  }
  record.throughput = command.throughput.value_or(Throughput{});
  if (Status status = validate_throughput(record.throughput); !status.is_ok()) return bad_request(status.message());
  if (!command.throughput) {
    // No throughput of its own: in a database with shared throughput it shares that.
    Result<DatabaseRecord> database = decode_database(**db);
    if (!database.is_ok()) {
      context.failure = database.status();
      return internal_error(database.status());
    }
    if (database->throughput.mode == Throughput::Mode::kProvisioned) {
      record.throughput = Throughput{Throughput::Mode::kShared, database->throughput.request_units_per_second};
    }
  }
  if (command.change_feed) {
    Result<ChangeFeedSettings> feed = requested_change_feed(*command.change_feed);
    if (!feed.is_ok()) return bad_request(feed.status().message());
    record.change_feed = feed.value();
  }
  if (record.ttl.warning_seconds > 0 && !record.change_feed.enabled) return bad_request(kWarningNeedsFeed);
  record.crid = context.meta.next_container_rid++;
  record.modified_ts_micros = ts;
  record.etag_sequence = ++context.meta.write_sequence;
  if (record.change_feed.enabled) {
    record.change_feed.since_index = context.index;
    context.meta.feed_containers += 1;
    context.batch.Put(feed_policy_key(record.crid, context.index), encode_ttl_state(record.ttl));
  }
  context.batch.Put(container_key(command.database, command.container), encode_container(record));
  OpResult result;
  result.done = Done::kCreated;
  result.ts_micros = ts;
  result.etag = format_etag(record.etag_sequence);
  result.body = render_container(command.database, command.container, record);
  return result;
}

OpResult StateMachine::update_container(const Command& command, int64_t ts, ApplyContext& context) {
  Result<ContainerRecord> found = reader_.find_container(command.database, command.container, nullptr);
  if (!found.is_ok()) return OpResult::error(found.status());
  ContainerRecord record = found.value();
  if (command.if_match && *command.if_match != format_etag(record.etag_sequence)) {
    return OpResult::error(StatusCode::kPreconditionFailed,
                           "container etag does not match if-match " + *command.if_match);
  }
  if (!command.partition_key_path.empty() && command.partition_key_path != record.partition_key_path) {
    return bad_request("the partition key path of a container cannot change (it is '" + record.partition_key_path +
                       "')");
  }
  ttl::DefaultTtl policy = record.ttl.policy;
  if (command.default_ttl_change == DefaultTtlChange::kSet) {
    Result<ttl::DefaultTtl> parsed = parse_default_ttl(command.default_ttl_json);
    if (!parsed.is_ok()) return OpResult::error(parsed.status());
    policy = parsed.value();
  } else if (command.default_ttl_change == DefaultTtlChange::kRemove) {
    policy = ttl::DefaultTtl::off();
  }
  if (command.expiry_warning_seconds) {
    if (Status status = ttl::validate_expiry_warning(*command.expiry_warning_seconds); !status.is_ok()) {
      return bad_request(status.message());
    }
  }
  const bool warning_change =
      command.expiry_warning_seconds && *command.expiry_warning_seconds != record.ttl.warning_seconds;
  const bool feed_after = command.change_feed ? command.change_feed->enabled : record.change_feed.enabled;
  if (command.expiry_warning_seconds && *command.expiry_warning_seconds > 0 && !feed_after) {
    return bad_request(kWarningNeedsFeed);
  }
  const bool policy_changes = command.default_ttl_change != DefaultTtlChange::kKeep && !(policy == record.ttl.policy);
  if (record.active_holds > 0 && policy_changes) {
    // Any change may raise the container's watermarks, which would expire held items (storage/holds.h).
    return holds_block(record, "the defaultTtl of container '" + command.container + "'", "changed", context);
  }
  if (record.active_holds > 0 && feed_after && !record.change_feed.enabled) {
    return bad_request(kHoldsWithoutFeed);
  }
  const ttl::IndexingMode indexing = command.indexing.value_or(record.indexing);
  if (Status status = ttl::validate_indexing(policy, indexing); !status.is_ok()) return bad_request(status.message());
  if (command.throughput && record.throughput.mode == Throughput::Mode::kShared &&
      !(*command.throughput == record.throughput)) {
    return bad_request("container '" + command.container + "' shares its database's throughput and cannot have its "
                       "own (as in Cosmos DB); change the database's throughput instead");
  }
  const Throughput throughput = command.throughput.value_or(record.throughput);
  if (Status status = validate_throughput(throughput); !status.is_ok()) return bad_request(status.message());
  ChangeFeedSettings feed = record.change_feed;
  if (command.change_feed) {
    Result<ChangeFeedSettings> asked = requested_change_feed(*command.change_feed);
    if (!asked.is_ok()) return bad_request(asked.status().message());
    if (asked->enabled && !feed.enabled) {
      feed = asked.value();
      feed.since_index = context.index;  // turned on (again): served from here on
      context.meta.feed_containers += 1;
    } else if (asked->enabled) {
      feed.retention_seconds = asked->retention_seconds;
    } else if (feed.enabled) {
      feed.enabled = false;  // its feed keys are trimmed by the collector (ExpiryKeeper::trim_change_feed)
      context.meta.feed_containers -= 1;
    }
  }

  // (A held container only ever gets its own policy again here, which must not move its watermarks.)
  if (command.default_ttl_change != DefaultTtlChange::kKeep && record.active_holds == 0) {
    record.ttl = ttl::change_policy(record.ttl, policy, ts);  // docs/ttl.md §4: once expired, always expired
  }
  if (warning_change) record.ttl = ttl::change_warning(record.ttl, *command.expiry_warning_seconds, ts);
  // The feed's policy history: the ttl state from this position on, when it changed or the feed was turned on.
  if (feed.enabled && (command.default_ttl_change != DefaultTtlChange::kKeep || warning_change ||
                       feed.since_index == context.index)) {
    context.batch.Put(feed_policy_key(record.crid, context.index), encode_ttl_state(record.ttl));
  }
  record.change_feed = feed;
  record.indexing = indexing;
  record.throughput = throughput;
  record.modified_ts_micros = ts;
  record.etag_sequence = ++context.meta.write_sequence;
  context.batch.Put(container_key(command.database, command.container), encode_container(record));
  OpResult result;
  result.ts_micros = ts;
  result.etag = format_etag(record.etag_sequence);
  result.body = render_container(command.database, command.container, record);
  return result;
}

OpResult StateMachine::delete_container(const Command& command, ApplyContext& context) {
  Result<ContainerRecord> found = reader_.find_container(command.database, command.container, nullptr);
  if (!found.is_ok()) return OpResult::error(found.status());
  if (found->active_holds > 0) {
    return holds_block(found.value(), "container '" + command.container + "'", "deleted", context);
  }
  context.batch.Delete(container_key(command.database, command.container));
  context.batch.Put(dropped_container_key(found.value().crid), "");
  context.dropped.push_back(found.value().crid);
  if (found.value().change_feed.enabled) context.meta.feed_containers -= 1;
  OpResult result;
  result.done = Done::kNoContent;
  return result;
}

// ---- legal holds ------------------------------------------------------------------------------------------------

namespace {

// Whether a stored item is alive at `ts` for an apply: TTL, kept alive by a hold (storage/holds.h).
bool item_alive(const HoldSet* holds, const ContainerRecord& container, std::string_view partition_key,
                std::string_view id, const ItemRecord& record, int64_t ts) {
  if (holds == nullptr) return ttl::alive(record.ttl, record.write_ts_micros, container.ttl, ts);
  return holds->alive(partition_key, id, record, container.ttl, ts);
}

OpResult held_item_refusal(std::string_view partition_key, std::string_view id,
                           const std::vector<const HoldRecord*>& holds) {
  return OpResult::error(StatusCode::kConflict,
                         "item '" + std::string(id) + "' of partition key " + std::string(partition_key) +
                             " is under legal hold " + describe_holds(holds) +
                             ": it cannot be replaced, patched or deleted until its holds are released");
}

}  // namespace

Result<const HoldSet*> StateMachine::apply_holds(const ContainerRecord& container) {
  if (container.active_holds == 0) return static_cast<const HoldSet*>(nullptr);
  auto cached = apply_holds_.find(container.crid);
  if (cached == apply_holds_.end()) {
    MAYFLY_ASSIGN_OR_RETURN(HoldSet holds, HoldSet::load(db_.get(), nullptr, container.crid));
    cached = apply_holds_.emplace(container.crid, std::move(holds)).first;
  }
  return static_cast<const HoldSet*>(&cached->second);
}

OpResult StateMachine::holds_block(const ContainerRecord& container, const std::string& what, const char* verb,
                                   ApplyContext& context) {
  Result<const HoldSet*> holds = apply_holds(container);
  if (!holds.is_ok()) {
    context.failure = holds.status();
    return internal_error(holds.status());
  }
  const std::vector<const HoldRecord*> active = *holds ? (*holds)->active() : std::vector<const HoldRecord*>();
  return OpResult::error(StatusCode::kConflict, what + " cannot be " + verb + " while its container holds items "
                                                    "under legal hold " + describe_holds(active) +
                                                    " (release them first: mayfly hold release)");
}

namespace {

Status validate_hold_text(std::string_view what, std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return Status::invalid_argument("the hold's " + std::string(what) + " is " + std::to_string(text.size()) +
                                    " bytes; at most " + std::to_string(max_bytes) + " are allowed");
  }
  for (unsigned char c : text) {
    if (c < 0x20) return Status::invalid_argument("the hold's " + std::string(what) + " has a control character");
  }
  return Status::ok();
}

}  // namespace

OpResult StateMachine::set_hold(const Command& command, int64_t ts, ApplyContext& context) {
  if (!command.hold) return bad_request("a hold command without its hold");
  const HoldCommand& asked = *command.hold;
  if (command.id.empty()) return bad_request("a hold needs an id (--id)");
  if (Status status = validate_hold_text("id", command.id, kMaxHoldIdBytes); !status.is_ok()) {
    return bad_request(status.message());
  }
  if (Status status = validate_hold_text("reason", command.body, kMaxHoldReasonBytes); !status.is_ok()) {
    return bad_request(status.message());
  }
  Result<ContainerRecord> found = reader_.find_container(command.database, command.container, nullptr);
  if (!found.is_ok()) return OpResult::error(found.status());
  ContainerRecord container = found.value();
  if (container.change_feed.enabled) {
    return bad_request("container '" + command.container + "' has its change feed on; " + kHoldsWithoutFeed +
                       " (or turn its feed off: mayfly container set " + command.database + " " +
                       command.container + " --change-feed off)");
  }
  if (container.active_holds >= kMaxActiveHoldsPerContainer) {
    return bad_request("container '" + command.container + "' already has " + std::to_string(container.active_holds) +
                       " active holds, the most allowed; hold a partition or the container instead of single items");
  }
  HoldRecord hold;
  hold.id = command.id;
  hold.scope = asked.scope;
  hold.reason = command.body;
  hold.set_by = asked.actor;
  hold.set_index = context.index;
  hold.set_ts_micros = ts;
  if (asked.scope != HoldScope::kContainer) {
    if (command.partition_key_json.empty()) return bad_request("a partition or item hold needs a partition key (--pk)");
    Result<std::string> partition_key =
        canonical_partition_key_text(command.partition_key_json, container.partition_key_path);
    if (!partition_key.is_ok()) return OpResult::error(partition_key.status());
    hold.partition_key = *partition_key;
  } else if (!command.partition_key_json.empty() || !asked.item_id.empty()) {
    return bad_request("a container hold takes no partition key or item id");
  }
  Result<const HoldSet*> holds = apply_holds(container);
  if (!holds.is_ok()) {
    context.failure = holds.status();
    return internal_error(holds.status());
  }
  if (*holds && (*holds)->active_by_id(command.id) != nullptr) {
    return OpResult::error(StatusCode::kConflict, "container '" + command.container + "' already has an active hold '" +
                                                      command.id + "'; release it first or choose another id");
  }
  if (asked.scope == HoldScope::kItem) {
    if (asked.item_id.empty()) return bad_request("an item hold needs the item's id (--item)");
    hold.item_id = asked.item_id;
    // The item must exist and be alive now: a hold keeps what is there, it brings nothing back.
    Result<std::optional<StoredItem>> loaded = load_item(item_key(container.crid, hold.partition_key, hold.item_id));
    if (!loaded.is_ok()) {
      context.failure = loaded.status();
      return internal_error(loaded.status());
    }
    const Result<bool> deleted = *loaded ? hidden_by_partition_delete(container, hold.partition_key, (*loaded)->record)
                                         : Result<bool>(false);
    if (!deleted.is_ok()) {
      context.failure = deleted.status();
      return internal_error(deleted.status());
    }
    if (!*loaded || *deleted ||
        !item_alive(*holds, container, hold.partition_key, hold.item_id, (*loaded)->record, ts)) {
      return not_found("item with id '" + hold.item_id + "' and partition key " + hold.partition_key +
                       " does not exist (a hold keeps an item that is there; it cannot bring one back)");
    }
  } else if (!asked.item_id.empty()) {
    return bad_request("only an item hold takes an item id");
  }
  context.batch.Put(hold_key(container.crid, context.index), encode_hold(hold));
  HoldAuditRecord audit{HoldAuditRecord::Action::kSet, context.index, ts, command.database, command.container,
                        hold.id, hold.scope, hold.partition_key, hold.item_id, hold.set_by, hold.reason};
  context.batch.Put(hold_audit_key(context.index), encode_hold_audit(audit));
  container.active_holds += 1;
  context.batch.Put(container_key(command.database, command.container), encode_container(container));
  ++context.meta.write_sequence;
  OpResult result;
  result.done = Done::kCreated;
  result.ts_micros = ts;
  render_hold(hold, command.database, command.container, result.body);
  return result;
}

OpResult StateMachine::release_hold(const Command& command, int64_t ts, ApplyContext& context) {
  if (!command.hold) return bad_request("a hold command without its hold");
  if (Status status = validate_hold_text("release reason", command.body, kMaxHoldReasonBytes); !status.is_ok()) {
    return bad_request(status.message());
  }
  Result<ContainerRecord> found = reader_.find_container(command.database, command.container, nullptr);
  if (!found.is_ok()) return OpResult::error(found.status());
  ContainerRecord container = found.value();
  Result<const HoldSet*> holds = apply_holds(container);
  if (!holds.is_ok()) {
    context.failure = holds.status();
    return internal_error(holds.status());
  }
  const HoldRecord* active = *holds ? (*holds)->active_by_id(command.id) : nullptr;
  if (active == nullptr) {
    return not_found("container '" + command.container + "' has no active hold '" + command.id + "'");
  }
  HoldRecord hold = *active;
  hold.released_index = context.index;
  hold.released_ts_micros = ts;
  hold.released_by = command.hold->actor;
  hold.release_reason = command.body;
  context.batch.Put(hold_key(container.crid, hold.set_index), encode_hold(hold));
  HoldAuditRecord audit{HoldAuditRecord::Action::kRelease, context.index, ts, command.database, command.container,
                        hold.id, hold.scope, hold.partition_key, hold.item_id, hold.released_by, hold.release_reason};
  context.batch.Put(hold_audit_key(context.index), encode_hold_audit(audit));
  container.active_holds -= 1;
  context.batch.Put(container_key(command.database, command.container), encode_container(container));
  ++context.meta.write_sequence;
  // What the collector passed over while it was held is expired now (or still held by another hold): it looks again.
  context.holds_released.push_back(container.crid);
  OpResult result;
  result.ts_micros = ts;
  render_hold(hold, command.database, command.container, result.body);
  return result;
}

// ---- items ------------------------------------------------------------------------------------------------------

Status StateMachine::keep_warning_image(const ContainerRecord& container, std::string_view partition_key,
                                        std::string_view id, const ItemRecord& record, int64_t ts,
                                        ApplyContext& context) const {
  const std::string key = warning_image_key(container, partition_key, id, record, ts);
  if (key.empty()) return Status::ok();
  // The first version kept under a key is the one that can have a warning: any later one of the same key was
  // written after that key's warning position, inside its window, and has none.
  MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> kept, apply_get(key));
  if (!kept) context.batch.Put(key, encode_item(record));
  return Status::ok();
}

OpResult StateMachine::write_item(const Command& command, int64_t ts, ApplyContext& context) {
  Result<ContainerRecord> found = apply_container(command.database, command.container);
  if (!found.is_ok()) return OpResult::error(found.status());
  const ContainerRecord& container = found.value();
  const CommandType type = command.type;

  // The target: from the body for create/replace/upsert, from (pk, id) for patch.
  std::optional<PreparedItem> prepared;
  std::string partition_key, id;
  if (type == CommandType::kPatchItem) {
    Result<std::string> key = canonical_partition_key_text(command.partition_key_json, container.partition_key_path);
    if (!key.is_ok()) return OpResult::error(key.status());
    partition_key = key.value();
    id = command.id;
  } else if (command.prepared && command.prepared->container_rid == container.crid) {
    prepared = command.prepared->item;  // validated by the leader against this very container
    partition_key = prepared->partition_key;
    id = prepared->id;
  } else {
    // A raw body, or one validated against a container that has since been replaced: validated here.
    Result<PreparedItem> item = prepare_item(command.prepared ? command.prepared->item.json : command.body,
                                             container.partition_key_path);
    if (!item.is_ok()) return OpResult::error(item.status());
    prepared = std::move(item.value());
    partition_key = prepared->partition_key;
    id = prepared->id;
  }
  const std::string key = item_key(container.crid, partition_key, id);
  Result<std::optional<StoredItem>> loaded = load_item(key);
  if (!loaded.is_ok()) {
    context.failure = loaded.status();
    return internal_error(loaded.status());
  }
  const std::optional<StoredItem>& existing = *loaded;
  const Result<bool> deleted = existing ? hidden_by_partition_delete(container, partition_key, existing->record)
                                        : Result<bool>(false);
  if (!deleted.is_ok()) {
    context.failure = deleted.status();
    return internal_error(deleted.status());
  }
  Result<const HoldSet*> holds = apply_holds(container);
  if (!holds.is_ok()) {
    context.failure = holds.status();
    return internal_error(holds.status());
  }
  // Expired (TTL; a held item does not expire: storage/holds.h), or deleted with its partition and not yet removed
  // by the collector: either way absent.
  const bool expired = existing && !item_alive(*holds, container, partition_key, id, existing->record, ts);
  const bool alive = existing && !expired && !*deleted;

  const bool creating = type == CommandType::kCreateItem || (type == CommandType::kUpsertItem && !alive);
  if (type == CommandType::kCreateItem && alive) {
    return OpResult::error(StatusCode::kConflict,
                           "an item with id '" + id + "' and partition key " + partition_key + " already exists");
  }
  if (!creating && !alive) {
    // The same words whether an expired item is still stored or this node's collector removed it already: the
    // answer is recorded in the exactly-once table, which must be byte-identical on every replica.
    return not_found("item with id '" + id + "' and partition key " + partition_key + " does not exist");
  }
  if (!creating && *holds) {
    // A held item is kept as it is: no replace, upsert or patch may drop its version.
    if (std::vector<const HoldRecord*> covering = (*holds)->active_covering(partition_key, id); !covering.empty()) {
      return held_item_refusal(partition_key, id, covering);
    }
  }
  if (command.if_match && !creating && *command.if_match != format_etag(existing->record.etag_sequence)) {
    return OpResult::error(StatusCode::kPreconditionFailed, "the item's etag " +
                                                                format_etag(existing->record.etag_sequence) +
                                                                " does not match if-match " + *command.if_match);
  }
  if (command.if_match && creating && type == CommandType::kUpsertItem) {
    return not_found("item with id '" + id + "' does not exist; if-match needs an existing item");
  }

  if (type == CommandType::kPatchItem) {
    Result<boost::json::value> document = json::parse(existing->record.json);
    if (!document.is_ok() || !document->is_object()) {
      context.failure = Status::corruption("stored item is not a JSON object");
      return internal_error(context.failure);
    }
    std::vector<std::string> immutable = json::partition_key_paths(container.partition_key_path);
    immutable.insert(immutable.begin(), "/id");
    Result<boost::json::object> patched = json::apply_patch(document->get_object(), command.body, immutable);
    if (!patched.is_ok()) return bad_request(patched.status().message());
    // The document as patched must be a valid item again (ttl rules, size).
    Result<PreparedItem> item = prepare_item_object(std::move(patched).value(), container.partition_key_path);
    if (!item.is_ok()) return OpResult::error(item.status());
    prepared = std::move(item.value());
  }

  ItemRecord record;
  record.write_ts_micros = ts;
  record.ttl = prepared->ttl;
  record.etag_sequence = ++context.meta.write_sequence;
  record.item_rid = creating ? record.etag_sequence : existing->record.item_rid;
  record.json = std::move(prepared->json);

  // With the feed on, an expired version not yet collected keeps its image for its expiration (a shadow); one
  // deleted with its partition has no expiration in the feed (the feed's reader passes over such items).
  const bool feed = container.change_feed.enabled;
  if (existing) {
    expiry_.remove_stored_item(container.crid, key, partition_key, id, existing->record, existing->bytes, context,
                               feed && expired && !*deleted);
    if (!expired && !*deleted) {
      if (Status status = keep_warning_image(container, partition_key, id, existing->record, ts, context);
          !status.is_ok()) {
        context.failure = status;
        return internal_error(status);
      }
    }
  }
  const std::string value = encode_item(record);
  if (feed) {
    FeedRecord change;
    change.operation = creating ? ChangeOperation::kCreate : ChangeOperation::kReplace;
    change.ts_micros = ts;
    change.partition_key = partition_key;
    change.id = id;
    change.image = value;
    if (!creating) change.previous = encode_item(existing->record);
    context.batch.Put(feed_record_key(container.crid, context.index), encode_feed_record(change));
  }
  const size_t record_bytes = key.size() + value.size();
  context.batch.Put(key, value);
  std::string written_at;  // the write's log index: the latest-version feed's lsn (storage/changefeed.cc)
  codec::put_varint(written_at, context.index);
  context.batch.Put(ts_index_key(container.crid, ts, partition_key, id), written_at);
  const internal::IndexEntry entry = internal::index_entry_for(container.crid, partition_key, id, record);
  if (entry.kind != internal::IndexKind::kNone) context.batch.Put(entry.key, index_value(record_bytes));
  auto [stats, inserted] = context.stats.try_emplace(container.crid);
  if (inserted) stats->second = expiry_.local_stats(container.crid);
  stats->second.items += 1;
  stats->second.bytes += static_cast<int64_t>(record_bytes);
  context.batch.Put(local_stats_key(container.crid), encode_local_stats(stats->second));

  OpResult result;
  result.done = creating ? Done::kCreated : Done::kOk;
  result.ts_micros = ts;
  result.etag = format_etag(record.etag_sequence);
  result.body = render_item(record, command.database, container.crid, container.ttl.policy,
                            *holds ? (*holds)->hold_json(partition_key, id) : std::string());
  return result;
}

OpResult StateMachine::delete_item(const Command& command, int64_t ts, ApplyContext& context) {
  Result<ContainerRecord> found = apply_container(command.database, command.container);
  if (!found.is_ok()) return OpResult::error(found.status());
  const ContainerRecord& container = found.value();
  Result<std::string> partition_key =
      canonical_partition_key_text(command.partition_key_json, container.partition_key_path);
  if (!partition_key.is_ok()) return OpResult::error(partition_key.status());
  const std::string key = item_key(container.crid, partition_key.value(), command.id);
  Result<std::optional<StoredItem>> loaded = load_item(key);
  if (!loaded.is_ok()) {
    context.failure = loaded.status();
    return internal_error(loaded.status());
  }
  const std::optional<StoredItem>& existing = *loaded;
  const Result<bool> deleted = existing ? hidden_by_partition_delete(container, partition_key.value(), existing->record)
                                        : Result<bool>(false);
  if (!deleted.is_ok()) {
    context.failure = deleted.status();
    return internal_error(deleted.status());
  }
  Result<const HoldSet*> holds = apply_holds(container);
  if (!holds.is_ok()) {
    context.failure = holds.status();
    return internal_error(holds.status());
  }
  if (!existing || *deleted || !item_alive(*holds, container, *partition_key, command.id, existing->record, ts)) {
    return not_found("item with id '" + command.id + "' and partition key " + partition_key.value() +
                     " does not exist");  // whether or not the collector removed it (see write_item)
  }
  if (*holds) {
    if (std::vector<const HoldRecord*> covering = (*holds)->active_covering(*partition_key, command.id);
        !covering.empty()) {
      return held_item_refusal(*partition_key, command.id, covering);
    }
  }
  if (command.if_match && *command.if_match != format_etag(existing->record.etag_sequence)) {
    return OpResult::error(StatusCode::kPreconditionFailed, "the item's etag " +
                                                                format_etag(existing->record.etag_sequence) +
                                                                " does not match if-match " + *command.if_match);
  }
  expiry_.remove_stored_item(container.crid, key, partition_key.value(), command.id, existing->record,
                             existing->bytes, context);
  if (Status status = keep_warning_image(container, partition_key.value(), command.id, existing->record, ts, context);
      !status.is_ok()) {
    context.failure = status;
    return internal_error(status);
  }
  if (container.change_feed.enabled) {
    FeedRecord change;
    change.operation = ChangeOperation::kDelete;
    change.ts_micros = ts;
    change.partition_key = partition_key.value();
    change.id = command.id;
    change.previous = encode_item(existing->record);
    context.batch.Put(feed_record_key(container.crid, context.index), encode_feed_record(change));
  }
  context.batch.Put(local_stats_key(container.crid), encode_local_stats(context.stats[container.crid]));
  ++context.meta.write_sequence;  // deletes are writes too: etags of later writes stay unique
  OpResult result;
  result.done = Done::kNoContent;
  result.ts_micros = ts;
  return result;
}

// ---- delete by partition key -----------------------------------------------------------------------------------

Result<bool> StateMachine::hidden_by_partition_delete(const ContainerRecord& container, std::string_view partition_key,
                                                      const ItemRecord& record) const {
  PartitionDeletes deletes(container, [this](const std::string& key) { return apply_get(key); });
  return deletes.hides(partition_key, record.write_ts_micros);
}

OpResult StateMachine::delete_partition(const Command& command, int64_t ts, ApplyContext& context) {
  Result<ContainerRecord> found = apply_container(command.database, command.container);
  if (!found.is_ok()) return OpResult::error(found.status());
  ContainerRecord container = found.value();
  Result<std::string> partition_key =
      canonical_partition_key_text(command.partition_key_json, container.partition_key_path);
  if (!partition_key.is_ok()) return OpResult::error(partition_key.status());
  if (container.change_feed.enabled) {
    // Its feed would have to carry a delete for every item at this one position (as for a batch): not yet.
    return bad_request("delete by partition key is not available on container '" + command.container +
                       "' while its change feed is on (turn it off with `mayfly container set " + command.database +
                       " " + command.container + " --change-feed off`, or delete the items one by one)");
  }
  Result<const HoldSet*> holds = apply_holds(container);
  if (!holds.is_ok()) {
    context.failure = holds.status();
    return internal_error(holds.status());
  }
  if (*holds) {
    if (std::vector<const HoldRecord*> held = (*holds)->active_in_partition(*partition_key); !held.empty()) {
      return OpResult::error(StatusCode::kConflict, "partition key " + *partition_key + " of container '" +
                                                        command.container + "' holds items under legal hold " +
                                                        describe_holds(held) +
                                                        "; it cannot be deleted until the holds are released");
    }
  }
  // The partition's items written up to now are gone from this position on; the collector removes them (and this
  // record) with spare request units.
  context.batch.Put(deleted_partition_key(container.crid, partition_key.value()),
                    encode_deleted_partition(DeletedPartition{ts, context.index}));
  container.partitions_deleted_through_micros = ts;
  context.batch.Put(container_key(command.database, command.container), encode_container(container));
  ++context.meta.write_sequence;  // a write like the deletes it stands for
  OpResult result;
  result.ts_micros = ts;
  result.body = "{\"partitionKey\":" + partition_key.value() + ",\"deletedTs\":" +
                std::to_string(ttl::ts_seconds(ts)) + "}";
  return result;
}

// ---- transactional batch ----------------------------------------------------------------------------------------

namespace {

inline constexpr size_t kMaxBatchOperations = 100;  // Cosmos DB's limit

// Copies a batch's writes into the running batch's overlay (StateMachine::batch_writes_).
class StageWrites final : public leveldb::WriteBatch::Handler {
 public:
  explicit StageWrites(std::unordered_map<std::string, std::optional<std::string>>& staged) : staged_(staged) {}
  void Put(const leveldb::Slice& key, const leveldb::Slice& value) override {
    staged_[key.ToString()] = value.ToString();
  }
  void Delete(const leveldb::Slice& key) override { staged_[key.ToString()] = std::nullopt; }

 private:
  std::unordered_map<std::string, std::optional<std::string>>& staged_;
};

// One operation of a batch, as the REST API sends it.
struct BatchOperation {
  CommandType type = CommandType::kCreateItem;
  bool read = false;
  std::string id;
  std::string body;  // create/upsert/replace: the item; patch: the operations array
  std::optional<std::string> if_match;
};

Result<std::vector<BatchOperation>> parse_batch(std::string_view text) {
  Result<boost::json::value> parsed = json::parse(text);
  if (!parsed.is_ok() || !parsed->is_array()) {
    return Status::invalid_argument("a transactional batch is a JSON array of operations");
  }
  const boost::json::array& operations = parsed->get_array();
  // Cosmos DB's messages.
  if (operations.empty()) return Status::invalid_argument("Batch request has no operations.");
  if (operations.size() > kMaxBatchOperations) {
    return Status::invalid_argument("Batch request has more operations than what is supported. (at most " +
                                    std::to_string(kMaxBatchOperations) + ", got " +
                                    std::to_string(operations.size()) + ")");
  }
  std::vector<BatchOperation> out;
  for (size_t i = 0; i < operations.size(); ++i) {
    const std::string where = "batch operation " + std::to_string(i) + ": ";
    const boost::json::object* operation = operations[i].if_object();
    if (operation == nullptr) return Status::invalid_argument(where + "must be a JSON object");
    const auto* kind = operation->if_contains("operationType");
    if (kind == nullptr || !kind->is_string()) return Status::invalid_argument(where + "needs an operationType");
    std::string name(kind->get_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    BatchOperation op;
    if (name == "create") {
      op.type = CommandType::kCreateItem;
    } else if (name == "upsert") {
      op.type = CommandType::kUpsertItem;
    } else if (name == "replace") {
      op.type = CommandType::kReplaceItem;
    } else if (name == "read") {
      op.read = true;
    } else if (name == "delete") {
      op.type = CommandType::kDeleteItem;
    } else if (name == "patch") {
      op.type = CommandType::kPatchItem;
    } else {
      return Status::invalid_argument(where + "operationType '" + std::string(kind->get_string()) +
                                      "' is not one of Create, Upsert, Replace, Read, Delete, Patch");
    }
    const bool needs_id = op.read || op.type == CommandType::kDeleteItem || op.type == CommandType::kPatchItem ||
                          op.type == CommandType::kReplaceItem;
    if (needs_id) {
      const auto* id = operation->if_contains("id");
      if (id == nullptr || !id->is_string()) return Status::invalid_argument(where + "needs the item's \"id\"");
      op.id = std::string(id->get_string());
    }
    const bool needs_body = !op.read && op.type != CommandType::kDeleteItem;
    if (needs_body) {
      const auto* body = operation->if_contains("resourceBody");
      if (body == nullptr || !body->is_object()) {
        return Status::invalid_argument(where + "needs a \"resourceBody\" object");
      }
      if (op.type == CommandType::kPatchItem) {
        const auto* condition = body->get_object().if_contains("condition");
        if (condition != nullptr && !condition->is_null()) {
          return Status::invalid_argument(where + "conditional patch (filter_predicate) is not supported");
        }
        const auto* patches = body->get_object().if_contains("operations");
        if (patches == nullptr || !patches->is_array()) {
          return Status::invalid_argument(where + "a patch's resourceBody needs its \"operations\"");
        }
        op.body = json::to_json(*patches);
      } else {
        op.body = json::to_json(*body);
        const auto* body_id = body->get_object().if_contains("id");
        if (op.type == CommandType::kReplaceItem &&
            (body_id == nullptr || !body_id->is_string() || body_id->get_string() != op.id)) {
          return Status::invalid_argument(where + "a replace's resourceBody must have the id '" + op.id + "'");
        }
      }
    }
    if (const auto* if_match = operation->if_contains("ifMatch"); if_match != nullptr && !if_match->is_null()) {
      if (!if_match->is_string()) return Status::invalid_argument(where + "ifMatch must be an etag string");
      op.if_match = std::string(if_match->get_string());
    }
    if (const auto* none = operation->if_contains("ifNoneMatch"); none != nullptr && !none->is_null()) {
      return Status::invalid_argument(where + "ifNoneMatch is not supported in a batch");
    }
    out.push_back(std::move(op));
  }
  return out;
}

// One operation's entry of a batch's answer, as the REST API has it.
std::string batch_result(int status, double charge, const std::string& etag, const std::string& body,
                         const std::string& message) {
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.2f", charge);
  std::string out = "{\"statusCode\":" + std::to_string(status) + ",\"requestCharge\":" + figure;
  if (!etag.empty()) {
    out += ",\"eTag\":";
    json::write_json_string(etag, out);
  }
  if (!body.empty()) out += ",\"resourceBody\":" + body;
  if (!message.empty()) {
    out += ",\"message\":";
    json::write_json_string(message, out);
  }
  out += '}';
  return out;
}

}  // namespace

OpResult StateMachine::execute_batch(const Command& command, int64_t ts, ApplyContext& context) {
  Result<ContainerRecord> found = apply_container(command.database, command.container);
  if (!found.is_ok()) return OpResult::error(found.status());
  const ContainerRecord container = found.value();
  if (container.change_feed.enabled) {
    return bad_request("a transactional batch on a container whose change feed is on is not supported yet (its "
                       "changes would share one log position); write the operations one by one");
  }
  Result<std::string> partition_key =
      canonical_partition_key_text(command.partition_key_json, container.partition_key_path);
  if (!partition_key.is_ok()) return OpResult::error(partition_key.status());
  Result<std::vector<BatchOperation>> operations = parse_batch(command.body);
  if (!operations.is_ok()) return bad_request(operations.status().message());

  const MetaState before = context.meta;
  std::vector<std::string> results;  // each operation's entry of the answer
  std::string body = "[";
  std::optional<size_t> failed;
  OpResult failure;
  for (size_t i = 0; i < operations->size(); ++i) {
    const BatchOperation& op = (*operations)[i];
    OpResult result;
    if (op.read) {
      Result<std::optional<StoredItem>> loaded = load_item(item_key(container.crid, *partition_key, op.id));
      if (!loaded.is_ok()) {
        context.failure = loaded.status();
        batch_writes_.clear();
        return internal_error(loaded.status());
      }
      const std::optional<StoredItem>& item = *loaded;
      const Result<bool> deleted =
          item ? hidden_by_partition_delete(container, *partition_key, item->record) : Result<bool>(false);
      if (!deleted.is_ok()) {
        context.failure = deleted.status();
        batch_writes_.clear();
        return internal_error(deleted.status());
      }
      Result<const HoldSet*> holds = apply_holds(container);
      if (!holds.is_ok()) {
        context.failure = holds.status();
        batch_writes_.clear();
        return internal_error(holds.status());
      }
      if (!item || *deleted || !item_alive(*holds, container, *partition_key, op.id, item->record, ts)) {
        result = not_found("item with id '" + op.id + "' and partition key " + *partition_key + " does not exist");
      } else {
        result.etag = format_etag(item->record.etag_sequence);
        result.body = render_item(item->record, command.database, container.crid, container.ttl.policy,
                                  *holds ? (*holds)->hold_json(*partition_key, op.id) : std::string());
      }
    } else {
      Command sub;
      sub.type = op.type;
      sub.database = command.database;
      sub.container = command.container;
      sub.partition_key_json = command.partition_key_json;
      sub.id = op.id;
      sub.if_match = op.if_match;
      if (op.type != CommandType::kDeleteItem && op.type != CommandType::kPatchItem) {
        // Validated once here, and handed over prepared (as the leader does), so write_item does not parse it again;
        // the item must belong to the batch's partition.
        Result<PreparedItem> prepared = prepare_item(op.body, container.partition_key_path);
        if (!prepared.is_ok()) {
          result = OpResult::error(prepared.status());
        } else if (prepared->partition_key != *partition_key) {
          result = bad_request("the item's partition key " + prepared->partition_key + " is not the batch's, " +
                               *partition_key + " (a batch writes one partition)");
        } else {
          sub.prepared = PreparedBody{.container_rid = container.crid, .item = std::move(prepared).value()};
        }
      } else {
        sub.body = op.body;
      }
      if (result.ok()) {
        ApplyContext step;
        step.meta = context.meta;
        step.index = context.index;
        step.stats = std::move(context.stats);
        step.removals = std::move(context.removals);
        result = dispatch(sub, ts, step);
        context.stats = std::move(step.stats);
        context.removals = std::move(step.removals);
        if (!step.failure.is_ok() || is_storage_failure(result.code)) {
          context.failure = step.failure.is_ok() ? Status::io_error(result.message) : step.failure;
          batch_writes_.clear();
          return internal_error(context.failure);
        }
        if (result.ok()) {
          StageWrites stage(batch_writes_);
          leveldb::Status staged = step.batch.Iterate(&stage);
          if (!staged.ok()) {
            context.failure = Status::internal("batch: " + staged.ToString());
            batch_writes_.clear();
            return internal_error(context.failure);
          }
          context.batch.Append(step.batch);
          context.meta = step.meta;
        }
      }
    }
    if (!result.ok()) {
      failed = i;
      failure = std::move(result);
      break;
    }
    const double charge = op.read ? ttl::read_request_charge(true, 0, result.body.size(), false)
                                  : ttl::write_request_charge(true, op.body.size(), result.body.size());
    results.push_back(batch_result(result.http_status(), charge, result.etag, result.body, ""));
  }
  batch_writes_.clear();
  OpResult outcome;
  outcome.ts_micros = ts;
  if (failed) {
    // Nothing of the batch applies: the failed operation's status, and 424 (failed dependency) for the others.
    context.reset();
    context.meta = before;
    results.clear();
    for (size_t i = 0; i < operations->size(); ++i) {
      results.push_back(i == *failed ? batch_result(failure.http_status(), 1.0, "", "", failure.message)
                                     : batch_result(424, 0.0, "", "", ""));
    }
    outcome.done = Done::kMultiStatus;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (i > 0) body += ',';
    body += results[i];
  }
  body += ']';
  outcome.body = std::move(body);
  return outcome;
}

OpResult StateMachine::set_member_address(const Command& command, ApplyContext& context) {
  uint64_t node = 0;
  try {
    size_t used = 0;
    node = std::stoull(command.id, &used);
    if (used != command.id.size()) node = 0;
  } catch (const std::exception&) {
    node = 0;
  }
  if (node == 0) return bad_request("member id must be a positive number, got '" + command.id + "'");
  if (command.body.empty() || command.body.find(':') == std::string::npos) {
    return bad_request("member address must be HOST:PORT, got '" + command.body + "'");
  }
  context.batch.Put(member_address_key(node), command.body);
  return OpResult{};
}

}  // namespace mayfly::storage
