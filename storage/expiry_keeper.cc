#include "storage/expiry_keeper.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <map>

#include "common/codec.h"
#include "storage/changefeed.h"
#include "storage/deleted_partitions.h"
#include "storage/holds.h"
#include "storage/store_internal.h"

namespace mayfly::storage {

using internal::decode_index_value;
using internal::from_leveldb;
using internal::has_prefix;
using internal::view;

const char* drained_range_name(KeyTag tag) {
  switch (tag) {
    case KeyTag::kItem:
      return "items";
    case KeyTag::kOwnExpiryIndex:
      return "own_expiry_index";
    case KeyTag::kInheritExpiryIndex:
      return "inherit_expiry_index";
    case KeyTag::kTsIndex:
      return "ts_index";
    case KeyTag::kChangeFeed:
      return "change_feed";
    default:
      return "other";
  }
}

ExpiryKeeper::ExpiryKeeper(leveldb::DB* db, const StoreReader& reader, Status& sticky, size_t backlog_count_step)
    : db_(db), reader_(reader), sticky_(sticky), backlog_count_step_(backlog_count_step) {}

void ExpiryKeeper::committed(const internal::StoreBatch& changes) {
  for (const auto& [crid, stats] : changes.stats) local_stats_[crid] = stats;
  for (const internal::StoreBatch::Removal& removal : changes.removals) {
    auto it = trackers_.find(removal.crid);
    if (it == trackers_.end()) continue;
    BacklogTracker& tracker = it->second;
    const std::string& position = tracker.positions[removal.kind == internal::IndexKind::kOwn ? 0 : 1];
    if (removal.key < position) {  // counted (see BacklogTracker)
      tracker.items -= 1;
      tracker.bytes -= removal.bytes;
      MAYFLY_ASSERT(tracker.items >= 0 && tracker.bytes >= 0);
    }
  }
  for (uint64_t crid : changes.holds_released) collect_cursors_.erase(crid);
  for (uint64_t crid : changes.dropped) {
    trackers_.erase(crid);
    collect_cursors_.erase(crid);
    local_stats_.erase(crid);
  }
}

void ExpiryKeeper::forget_all() {
  local_stats_.clear();
  trackers_.clear();
  collect_cursors_.clear();
  reclaim_cursors_.clear();
  drained_.clear();
  drained_dropped_.clear();
}

void ExpiryKeeper::KeySpan::add(std::string_view key) {
  if (deleted == 0 || key < first) first.assign(key);
  if (deleted == 0 || key > last) last.assign(key);
  deleted += 1;
}

void ExpiryKeeper::KeySpan::add(const KeySpan& other) {
  if (other.deleted == 0) return;
  if (deleted == 0 || other.first < first) first = other.first;
  if (deleted == 0 || other.last > last) last = other.last;
  deleted += other.deleted;
}

void ExpiryKeeper::note_drained(const std::map<SpanKey, KeySpan>& spans) {
  for (const auto& [key, span] : spans) {
    if (span.deleted > 0) drained_[key].add(span);
  }
}

std::optional<DrainedRange> ExpiryKeeper::take_drained_range(int64_t min_deletes) {
  auto best = drained_.end();
  for (auto it = drained_.begin(); it != drained_.end(); ++it) {
    const auto& [key, span] = *it;
    if (span.deleted < std::max<int64_t>(1, min_deletes)) continue;
    // Item keys: only when the compaction drops at least as much as it rewrites (see the header).
    if (key.second == KeyTag::kItem && drained_dropped_.count(key.first) == 0 &&
        span.deleted < local_stats(key.first).items) {
      continue;
    }
    if (best == drained_.end() || span.deleted > best->second.deleted) best = it;
  }
  if (best == drained_.end()) return std::nullopt;
  const uint64_t crid = best->first.first;
  DrainedRange range{crid, best->first.second, std::move(best->second.first), std::move(best->second.last),
                     best->second.deleted};
  drained_.erase(best);
  const auto rest = drained_.lower_bound(SpanKey{crid, KeyTag{0}});
  if (rest == drained_.end() || rest->first.first != crid) drained_dropped_.erase(crid);
  return range;
}

std::vector<DrainedRange> ExpiryKeeper::drained_ranges() const {
  std::vector<DrainedRange> ranges;
  for (const auto& [key, span] : drained_) {
    ranges.push_back(DrainedRange{key.first, key.second, span.first, span.last, span.deleted});
  }
  return ranges;
}

void ExpiryKeeper::compact(const DrainedRange& range) const {
  const leveldb::Slice begin(range.first);
  const leveldb::Slice end(range.last);  // inclusive: every version of this key is in the compaction
  db_->CompactRange(&begin, &end);
}

uint64_t ExpiryKeeper::approximate_bytes(const std::string& from, const std::string& to) const {
  const leveldb::Range range(from, to);
  uint64_t bytes = 0;
  db_->GetApproximateSizes(&range, 1, &bytes);
  return bytes;
}

Status ExpiryKeeper::write(internal::StoreBatch& changes) {
  Status status = from_leveldb(db_->Write(leveldb::WriteOptions(), &changes.batch), "write state batch");
  if (!status.is_ok()) {
    sticky_ = status;
    return status;
  }
  committed(changes);
  return Status::ok();
}

LocalStats& ExpiryKeeper::local_stats(uint64_t crid) {
  auto it = local_stats_.find(crid);
  if (it != local_stats_.end()) return it->second;
  LocalStats stats;
  Result<std::optional<std::string>> raw = reader_.get_raw(local_stats_key(crid), nullptr);
  if (raw.is_ok() && raw->has_value()) {
    Result<LocalStats> decoded = decode_local_stats(**raw);
    if (decoded.is_ok()) stats = *decoded;
  }
  return local_stats_.emplace(crid, stats).first->second;
}

void ExpiryKeeper::remove_stored_item(uint64_t crid, const std::string& key, std::string_view partition_key,
                                      std::string_view id, const ItemRecord& record, size_t record_bytes,
                                      internal::StoreBatch& context, bool shadow) {
  context.batch.Delete(key);
  context.batch.Delete(ts_index_key(crid, record.write_ts_micros, partition_key, id));
  const internal::IndexEntry entry = internal::index_entry_for(crid, partition_key, id, record);
  if (entry.kind != internal::IndexKind::kNone) {
    context.batch.Delete(entry.key);
    if (shadow) {
      context.batch.Put(feed_shadow_key(crid, entry.kind == internal::IndexKind::kOwn ? 0 : 1, entry.sort_micros,
                                        partition_key, id),
                        encode_item(record));
    }
    context.removals.push_back({crid, entry.kind, entry.key, static_cast<int64_t>(record_bytes)});
  }
  auto [it, inserted] = context.stats.try_emplace(crid);
  if (inserted) it->second = local_stats(crid);
  it->second.items -= 1;
  it->second.bytes -= static_cast<int64_t>(record_bytes);
}

Result<bool> ExpiryKeeper::advance_tracker(uint64_t crid, const ttl::ContainerTtlState& state, int64_t now_micros,
                                           BacklogTracker& tracker, size_t max_entries,
                                           int64_t* entries_read) const {
  const ttl::ExpiredBounds bounds = ttl::expired_bounds(state, now_micros);
  size_t budget = max_entries;
  bool complete = true;
  std::unique_ptr<leveldb::Iterator> it;
  for (const bool own : {true, false}) {
    const std::string prefix = own ? own_expiry_prefix(crid) : inherit_expiry_prefix(crid);
    // Every expired entry of this index sorts below `target`, every live one at or above it.
    std::string target = prefix;
    codec::put_i64_be(target, own ? bounds.own_expiry_below_micros : bounds.default_ts_below_micros);
    std::string& position = tracker.positions[own ? 0 : 1];
    MAYFLY_ASSERT_MSG(position <= target, "expired bound moved back below the counted position (crid %llu)",
                      static_cast<unsigned long long>(crid));
    if (position == target) continue;
    if (budget == 0) {
      complete = false;
      continue;
    }
    if (!it) it.reset(db_->NewIterator(leveldb::ReadOptions()));
    it->Seek(position.empty() ? prefix : position);
    bool reached = true;
    for (; it->Valid() && it->key().compare(leveldb::Slice(target)) < 0; it->Next()) {
      if (budget == 0) {
        // Stopped here: this entry and everything after it are not counted yet.
        position.assign(it->key().data(), it->key().size());
        reached = false;
        break;
      }
      --budget;
      *entries_read += 1;
      MAYFLY_ASSIGN_OR_RETURN(int64_t bytes, decode_index_value(it->value()));
      tracker.items += 1;
      tracker.bytes += bytes;
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expiry index"));
    if (reached) {
      position = std::move(target);
    } else {
      complete = false;
    }
  }
  return complete;
}

Result<Backlog> ExpiryKeeper::backlog(std::string_view database, std::string_view container) {
  return backlog(database, container, backlog_count_step_);
}

Result<Backlog> ExpiryKeeper::backlog(std::string_view database, std::string_view container,
                                      size_t max_count_entries) {
  if (!sticky_.is_ok()) return sticky_;
  Result<ContainerRecord> found = reader_.find_container(database, container, nullptr);
  if (!found.is_ok()) return Status::not_found(OpResult::error(found.status()).message);
  const ContainerRecord& record = found.value();
  BacklogTracker& tracker = trackers_[record.crid];
  const int64_t now = reader_.applied().ts_micros;
  Backlog backlog;
  MAYFLY_ASSIGN_OR_RETURN(backlog.complete, advance_tracker(record.crid, record.ttl, now, tracker, max_count_entries,
                                                            &backlog.entries_read));
  backlog.items = tracker.items;
  backlog.bytes = tracker.bytes;
  if (tracker.items == 0 && backlog.complete) return backlog;
  // The oldest expired item is first in one of the two indexes. Seek from the collector's cursors: the keys below
  // them were deleted, and LevelDB would step over each of their tombstones until a compaction drops them.
  const ttl::ExpiredBounds bounds = ttl::expired_bounds(record.ttl, now);
  const auto cursors = collect_cursors_.find(record.crid);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (const bool own : {true, false}) {
    const std::string prefix = own ? own_expiry_prefix(record.crid) : inherit_expiry_prefix(record.crid);
    const std::string* cursor = cursors == collect_cursors_.end() ? nullptr : &cursors->second[own ? 0 : 1];
    it->Seek(cursor == nullptr || cursor->empty() ? prefix : *cursor);
    if (!it->Valid() || !has_prefix(it->key(), prefix)) continue;
    MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(std::string_view(it->key().data(), it->key().size())));
    if (key.sort_micros >= (own ? bounds.own_expiry_below_micros : bounds.default_ts_below_micros)) continue;
    const int64_t expiry =
        own ? key.sort_micros : ttl::inherited_expiry_for_report(record.ttl, key.sort_micros, now);
    if (!backlog.oldest_expiry_micros || expiry < *backlog.oldest_expiry_micros) backlog.oldest_expiry_micros = expiry;
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "seek expiry index"));
  return backlog;
}

Result<ContainerStats> ExpiryKeeper::container_stats(std::string_view database, std::string_view container) {
  return container_stats(database, container, backlog_count_step_);
}

Result<ContainerStats> ExpiryKeeper::container_stats(std::string_view database, std::string_view container,
                                                     size_t max_count_entries) {
  MAYFLY_ASSIGN_OR_RETURN(Backlog expired, backlog(database, container, max_count_entries));
  Result<ContainerRecord> found = reader_.find_container(database, container, nullptr);
  if (!found.is_ok()) return Status::not_found(OpResult::error(found.status()).message);
  const LocalStats& stored = local_stats(found.value().crid);
  ContainerStats stats;
  stats.stored_items = stored.items;
  stats.stored_bytes = stored.bytes;
  stats.backlog = expired;
  stats.live_items = stored.items - expired.items;
  stats.live_bytes = stored.bytes - expired.bytes;
  return stats;
}

Result<CollectResult> ExpiryKeeper::collect_expired(std::string_view database, std::string_view container,
                                                    int64_t up_to_micros, size_t max_items) {
  if (!sticky_.is_ok()) return sticky_;
  const int64_t applied_ts = reader_.applied().ts_micros;
  if (up_to_micros > applied_ts) {
    return Status::invalid_argument("collect_expired up to " + std::to_string(up_to_micros) +
                                    " is past the applied time " + std::to_string(applied_ts));
  }
  Result<ContainerRecord> found = reader_.find_container(database, container, nullptr);
  if (!found.is_ok()) return Status::not_found(OpResult::error(found.status()).message);
  const ContainerRecord& record = found.value();
  const ttl::ExpiredBounds bounds = ttl::expired_bounds(record.ttl, up_to_micros);

  struct Candidate {
    int64_t expiry;
    IndexKey key;
    size_t index;         // 0: own-ttl index, 1: inheriting index
    std::string raw_key;  // the index key, for the scan cursor
  };
  // Legal holds (storage/holds.h): a held item is alive whatever its instant, so the collector passes it over. A
  // container hold keeps every item: nothing to look at. Items held one by one or by partition are skipped in the
  // scan, at most kMaxHeldSkipped a pass, and the cursor moves past them; a release starts the cursors over.
  MAYFLY_ASSIGN_OR_RETURN(std::optional<HoldSet> holds, HoldSet::load_if_held(db_, nullptr, record));
  if (holds) {
    for (const HoldRecord* hold : holds->active()) {
      if (hold->scope == HoldScope::kContainer) return CollectResult{};
    }
  }
  const size_t max_held_skipped = 4 * max_items + 64;
  std::array<std::optional<std::string>, 2> last_held;  // the last held entry each index scan passed over
  std::vector<Candidate> candidates;
  std::array<std::string, 2>& cursors = collect_cursors_[record.crid];
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (const bool own : {true, false}) {
    const std::string prefix = own ? own_expiry_prefix(record.crid) : inherit_expiry_prefix(record.crid);
    const int64_t bound = own ? bounds.own_expiry_below_micros : bounds.default_ts_below_micros;
    const std::string& cursor = cursors[own ? 0 : 1];
    size_t taken = 0;
    size_t held_skipped = 0;
    for (it->Seek(cursor.empty() ? prefix : cursor); it->Valid() && has_prefix(it->key(), prefix) && taken <= max_items;
         it->Next()) {
      MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(std::string_view(it->key().data(), it->key().size())));
      if (key.sort_micros >= bound) break;
      if (holds) {
        if (const std::optional<int64_t> since = holds->held_since(key.partition_key, key.id)) {
          const ttl::ExpiredBounds at_since = ttl::expired_bounds(record.ttl, *since);
          if (key.sort_micros >= (own ? at_since.own_expiry_below_micros : at_since.default_ts_below_micros)) {
            last_held[own ? 0 : 1] = std::string(it->key().data(), it->key().size());
            if (++held_skipped >= max_held_skipped) break;
            continue;  // alive when its hold took it: kept
          }
        }
      }
      const int64_t expiry =
          own ? key.sort_micros : ttl::inherited_expiry_for_report(record.ttl, key.sort_micros, up_to_micros);
      candidates.push_back({expiry, std::move(key), own ? size_t{0} : size_t{1},
                            std::string(it->key().data(), it->key().size())});
      ++taken;
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expiry index"));
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.expiry < b.expiry; });

  CollectResult result;
  result.more = candidates.size() > max_items;
  // The next scan of each index starts at the first entry this pass saw but leaves (still expired, beyond the
  // batch), or else at the last one it deletes: every key before that is gone.
  std::array<std::optional<std::string>, 2> next_cursor;
  std::array<bool, 2> left{false, false};  // the pass leaves an entry of this index for the next one
  for (size_t i = max_items; i < candidates.size(); ++i) {
    left[candidates[i].index] = true;
    std::optional<std::string>& next = next_cursor[candidates[i].index];
    if (!next || candidates[i].raw_key < *next) next = candidates[i].raw_key;
  }
  if (result.more) candidates.resize(max_items);
  for (size_t index = 0; index < 2; ++index) {
    if (next_cursor[index]) continue;
    for (const Candidate& deleted : candidates) {
      if (deleted.index != index) continue;
      std::optional<std::string>& next = next_cursor[index];
      if (!next || deleted.raw_key > *next) next = deleted.raw_key;
    }
  }
  internal::StoreBatch context;
  PartitionDeletes deletes = PartitionDeletes::at(db_, nullptr, record);
  std::map<SpanKey, KeySpan> drained;  // the keys this batch deletes, for the drained ranges
  KeySpan& drained_items = drained[{record.crid, KeyTag::kItem}];
  KeySpan& drained_ts = drained[{record.crid, KeyTag::kTsIndex}];
  for (const Candidate& candidate : candidates) {
    const std::string key = item_key(record.crid, candidate.key.partition_key, candidate.key.id);
    MAYFLY_ASSIGN_OR_RETURN(std::optional<std::string> raw, reader_.get_raw(key, nullptr));
    if (!raw) return Status::corruption("expiry index entry without its item");  // index and items move together
    MAYFLY_ASSIGN_OR_RETURN(ItemRecord item, decode_item(*raw));
    MAYFLY_ASSERT(!ttl::alive(item.ttl, item.write_ts_micros, record.ttl, up_to_micros));  // paired with the bound
    const size_t bytes = key.size() + raw->size();
    // With the feed on, its image stays for its expiration (a shadow) — unless the item was deleted with its
    // partition, which has no expiration in the feed (storage/deleted_partitions.h).
    bool shadow = record.change_feed.enabled;
    if (shadow) {
      MAYFLY_ASSIGN_OR_RETURN(bool deleted, deletes.hides(candidate.key.partition_key, item.write_ts_micros));
      shadow = !deleted;
    }
    remove_stored_item(record.crid, key, candidate.key.partition_key, candidate.key.id, item, bytes, context, shadow);
    drained_items.add(key);
    drained_ts.add(ts_index_key(record.crid, item.write_ts_micros, candidate.key.partition_key, candidate.key.id));
    drained[{record.crid, candidate.index == 0 ? KeyTag::kOwnExpiryIndex : KeyTag::kInheritExpiryIndex}].add(
        candidate.raw_key);
    result.items += 1;
    result.bytes += static_cast<int64_t>(bytes);
    result.expiry_instants_micros.push_back(candidate.expiry);
  }
  for (size_t index = 0; index < 2; ++index) {
    // Past the held entries this pass skipped, when every other entry it saw in this index is deleted by it.
    if (last_held[index] && !left[index] && (!next_cursor[index] || *next_cursor[index] < *last_held[index])) {
      next_cursor[index] = last_held[index];
    }
  }
  if (result.items == 0) {
    for (size_t i = 0; i < 2; ++i) {
      if (next_cursor[i]) cursors[i] = std::move(*next_cursor[i]);
    }
    return result;
  }
  context.batch.Put(local_stats_key(record.crid), encode_local_stats(context.stats[record.crid]));
  MAYFLY_RETURN_IF_ERROR(write(context));
  for (size_t i = 0; i < 2; ++i) {
    if (next_cursor[i]) cursors[i] = std::move(*next_cursor[i]);
  }
  note_drained(drained);
  return result;
}

Result<std::optional<int64_t>> ExpiryKeeper::next_expiry_after(int64_t now_micros) const {
  MAYFLY_ASSIGN_OR_RETURN(std::vector<ContainerInfo> all, reader_.containers());
  std::optional<int64_t> earliest;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  auto consider = [&](int64_t expiry) {
    if (expiry > now_micros && (!earliest || expiry < *earliest)) earliest = expiry;
  };
  for (const ContainerInfo& info : all) {
    const ttl::ContainerTtlState& state = info.record.ttl;
    if (!state.policy.is_on()) continue;
    const ttl::ExpiredBounds bounds = ttl::expired_bounds(state, now_micros);
    for (const bool own : {true, false}) {
      if (!own && state.policy.kind != ttl::DefaultTtl::Kind::kSeconds) continue;
      const std::string prefix = own ? own_expiry_prefix(info.record.crid) : inherit_expiry_prefix(info.record.crid);
      std::string start = prefix;
      codec::put_i64_be(start, own ? bounds.own_expiry_below_micros : bounds.default_ts_below_micros);
      it->Seek(start);
      if (!it->Valid() || !has_prefix(it->key(), prefix)) continue;
      MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(std::string_view(it->key().data(), it->key().size())));
      consider(own ? key.sort_micros : ttl::expiry_instant_micros(key.sort_micros, state.policy.seconds));
    }
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expiry indexes"));
  return earliest;
}

Result<PartitionDrain> ExpiryKeeper::drain_deleted_partitions(const ContainerRecord& container, size_t max_items) {
  if (!sticky_.is_ok()) return sticky_;
  PartitionDrain result;
  const uint64_t crid = container.crid;
  const int64_t max_examined = static_cast<int64_t>(4 * max_items + 64);
  internal::StoreBatch context;
  std::map<SpanKey, KeySpan> drained;
  std::vector<std::pair<std::pair<uint64_t, std::string>, std::pair<int64_t, std::string>>> cursors;  // to set
  std::vector<std::pair<uint64_t, std::string>> finished;  // cursors to forget
  const std::string prefix = deleted_partition_prefix(crid);
  std::unique_ptr<leveldb::Iterator> marker(db_->NewIterator(leveldb::ReadOptions()));
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  int64_t counted = 0;  // marks only counted (after the drain stopped)
  for (marker->Seek(prefix); marker->Valid() && has_prefix(marker->key(), prefix); marker->Next()) {
    if (result.more && ++counted > kMaxCountedDeletedPartitions) break;  // `pending` is a lower bound from here
    std::string partition_key;
    codec::Reader reader(view(marker->key()).substr(prefix.size()));
    if (!reader.get_ordered_string(partition_key) || !reader.done()) {
      return Status::corruption("undecodable deleted partition key");
    }
    MAYFLY_ASSIGN_OR_RETURN(DeletedPartition deleted, decode_deleted_partition(view(marker->value())));
    ++result.pending;
    if (result.more) continue;  // only counting the rest
    if (result.examined >= max_examined) {  // a mark costs a seek even when its partition is empty
      result.more = true;
      continue;
    }
    ++result.examined;
    const std::pair<uint64_t, std::string> cursor_key{crid, partition_key};
    const std::string items = partition_prefix(crid, partition_key);
    std::string start = items;
    bool after = false;
    if (auto cursor = drain_cursors_.find(cursor_key);
        cursor != drain_cursors_.end() && cursor->second.first == deleted.ts_micros) {
      start = cursor->second.second;
      after = true;
    }
    std::string last;
    bool done = true;
    for (it->Seek(start); it->Valid() && has_prefix(it->key(), items); it->Next()) {
      if (after && view(it->key()) == start) continue;
      if (static_cast<size_t>(result.items) >= max_items || result.examined >= max_examined) {
        done = false;
        break;
      }
      ++result.examined;
      last = it->key().ToString();
      MAYFLY_ASSIGN_OR_RETURN(ItemRecord item, decode_item(view(it->value())));
      if (item.write_ts_micros > deleted.ts_micros) continue;  // written after the delete: an item like any other
      std::string pk, id;
      MAYFLY_RETURN_IF_ERROR(decode_item_key(last, pk, id));
      const size_t bytes = last.size() + it->value().size();
      remove_stored_item(crid, last, pk, id, item, bytes, context, /*shadow=*/false);
      drained[{crid, KeyTag::kItem}].add(last);
      drained[{crid, KeyTag::kTsIndex}].add(ts_index_key(crid, item.write_ts_micros, pk, id));
      result.items += 1;
      result.bytes += static_cast<int64_t>(bytes);
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan a deleted partition"));
    if (done) {
      context.batch.Delete(marker->key());  // every item it hid is gone: so is the record
      finished.push_back(cursor_key);
      --result.pending;
    } else {
      result.more = true;
      if (!last.empty()) cursors.push_back({cursor_key, {deleted.ts_micros, last}});
    }
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(marker->status(), "scan deleted partitions"));
  if (result.items == 0 && finished.empty()) return result;
  if (result.items > 0) context.batch.Put(local_stats_key(crid), encode_local_stats(context.stats[crid]));
  MAYFLY_RETURN_IF_ERROR(write(context));
  for (auto& [key, value] : cursors) drain_cursors_[key] = std::move(value);
  for (const auto& key : finished) drain_cursors_.erase(key);
  note_drained(drained);
  return result;
}

Result<int64_t> ExpiryKeeper::reclaim_dropped(size_t max_keys) {
  if (!sticky_.is_ok()) return sticky_;
  const std::string dropped_prefix(1, static_cast<char>(KeyTag::kDroppedContainer));
  leveldb::WriteBatch batch;
  int64_t deleted = 0;
  std::map<uint64_t, std::string> last_deleted;  // crid -> its last key deleted by this call
  std::map<SpanKey, KeySpan> drained;             // the keys deleted, for the drained ranges
  std::vector<uint64_t> finished_crids;
  std::unique_ptr<leveldb::Iterator> marker(db_->NewIterator(leveldb::ReadOptions()));
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (marker->Seek(dropped_prefix); marker->Valid() && has_prefix(marker->key(), dropped_prefix); marker->Next()) {
    codec::Reader reader(std::string_view(marker->key().data(), marker->key().size()).substr(1));
    uint64_t crid;
    if (!reader.get_u64_be(crid)) return Status::corruption("dropped container key");
    // The prefixes are walked in key order and each is emptied before the next, so every key of this container
    // below the last one deleted is gone: start there.
    const auto cursor = reclaim_cursors_.find(crid);
    bool finished = true;
    for (const std::string& prefix :
         {item_prefix(crid), own_expiry_prefix(crid), inherit_expiry_prefix(crid), ts_index_prefix(crid),
          feed_prefix(crid), deleted_partition_prefix(crid), hold_prefix(crid)}) {
      const bool resume = cursor != reclaim_cursors_.end() && cursor->second > prefix;
      for (it->Seek(resume ? cursor->second : prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
        if (static_cast<size_t>(deleted) >= max_keys) {
          finished = false;
          break;
        }
        batch.Delete(it->key());
        last_deleted[crid] = it->key().ToString();
        const KeyTag tag = static_cast<KeyTag>(static_cast<uint8_t>(it->key()[0]));
        drained[{crid, tag}].add(std::string_view(it->key().data(), it->key().size()));
        ++deleted;
      }
      MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan dropped container"));
      if (!finished) break;
    }
    if (!finished) break;
    batch.Delete(local_stats_key(crid));
    batch.Delete(marker->key());
    finished_crids.push_back(crid);
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(marker->status(), "scan dropped containers"));
  Status status = from_leveldb(db_->Write(leveldb::WriteOptions(), &batch), "reclaim dropped containers");
  if (!status.is_ok()) sticky_ = status;
  MAYFLY_RETURN_IF_ERROR(status);
  for (auto& [crid, key] : last_deleted) {
    reclaim_cursors_[crid] = std::move(key);
    drained_dropped_.insert(crid);
  }
  for (uint64_t crid : finished_crids) reclaim_cursors_.erase(crid);
  note_drained(drained);
  return deleted;
}

Result<int64_t> ExpiryKeeper::trim_change_feed(size_t max_keys) {
  if (!sticky_.is_ok()) return sticky_;
  const AppliedState applied = reader_.applied();
  MAYFLY_ASSIGN_OR_RETURN(std::vector<ContainerInfo> all, reader_.containers());
  leveldb::WriteBatch batch;
  size_t deleted = 0;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  // Deletes the keys of `within` from `from` up to `to` (exclusive; empty: to its end) while the budget lasts;
  // false when it ran out.
  auto erase_range = [&](const std::string& from, const std::string& to, const std::string& within) -> bool {
    for (it->Seek(from); it->Valid() && has_prefix(it->key(), within); it->Next()) {
      if (!to.empty() && it->key().compare(leveldb::Slice(to)) >= 0) break;
      if (deleted >= max_keys) return false;
      batch.Delete(it->key());
      ++deleted;
    }
    return true;
  };
  uint64_t oldest_needed = applied.index.value() + 1;  // the time index below it goes
  bool budget_left = true;
  for (const ContainerInfo& info : all) {
    if (!budget_left) break;
    const uint64_t crid = info.record.crid;
    const ChangeFeedSettings& feed = info.record.change_feed;
    if (!feed.enabled) {
      // since_index stays set once a feed was ever on: containers that never had one cost nothing here.
      if (feed.since_index != 0) budget_left = erase_range(feed_prefix(crid), "", feed_prefix(crid));
      continue;
    }
    MAYFLY_ASSIGN_OR_RETURN(FeedPoint start, feed_retention_start(db_, nullptr, feed, applied.ts_micros));
    oldest_needed = std::min(oldest_needed, start.index);
    // Explicit changes at or before the start are never served again.
    const std::string records = feed_sub_prefix(crid, FeedSub::kRecord);
    budget_left = erase_range(records, feed_record_key(crid, start.index + 1), records);
    if (!budget_left) break;
    // Policy history: everything before the last entry at or before the start.
    MAYFLY_ASSIGN_OR_RETURN(FeedPolicy policy, feed_policy_at(db_, nullptr, crid, start.index));
    const std::string policies = feed_sub_prefix(crid, FeedSub::kPolicy);
    budget_left = erase_range(policies, feed_policy_key(crid, policy.index), policies);
    if (!budget_left) break;
    // Shadows below the expired bounds at the start expired at or before it; warning shadows (kinds 2, 3) below
    // the warning bounds had their warning at or before it.
    const ttl::ExpiredBounds bounds = ttl::expired_bounds(policy.state, start.ts_micros);
    const ttl::ExpiredBounds warned = ttl::warning_bounds(policy.state, start.ts_micros);
    for (uint8_t kind = 0; kind < 4; ++kind) {
      const ttl::ExpiredBounds& of = kind < 2 ? bounds : warned;
      const std::string prefix = feed_shadow_kind_prefix(crid, kind);
      std::string below = prefix;
      codec::put_i64_be(below, kind % 2 == 0 ? of.own_expiry_below_micros : of.default_ts_below_micros);
      budget_left = erase_range(prefix, below, prefix);
      if (!budget_left) break;
    }
  }
  if (budget_left) erase_range(time_index_prefix(), time_index_key(oldest_needed), time_index_prefix());
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan change feed keys"));
  if (deleted == 0) return int64_t{0};
  Status status = from_leveldb(db_->Write(leveldb::WriteOptions(), &batch), "trim change feed");
  if (!status.is_ok()) sticky_ = status;
  MAYFLY_RETURN_IF_ERROR(status);
  return static_cast<int64_t>(deleted);
}

}  // namespace mayfly::storage
