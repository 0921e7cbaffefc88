// The change feed reader and the helpers it shares with the collector's retention (storage/changefeed.h).
#include "storage/changefeed.h"

#include <leveldb/db.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>

#include "common/codec.h"
#include "common/work_budget.h"
#include "storage/deleted_partitions.h"
#include "storage/feed_range.h"
#include "storage/holds.h"
#include "storage/layout.h"
#include "storage/store_internal.h"

namespace mayfly::storage {

using internal::from_leveldb;
using internal::has_prefix;
using internal::read_options;
using internal::view;

namespace {

constexpr uint8_t kTokenVersion = 1;
// ChangePosition phases beyond the log-order ones (0 expirations, 1 a write): positions in write-time order.
constexpr uint8_t kPhaseAfterWrite = 2;  // right after the _ts index entry (sort_micros, partition_key, id)
constexpr uint8_t kPhaseFromTime = 3;    // at the first _ts index entry whose write time is >= sort_micros
constexpr size_t kMaxChunkPositions = 4096;  // log positions whose bounds one step holds in memory

Status gone(std::string message) { return Status(StatusCode::kGone, std::move(message)); }

// Continuation tokens: hex of (version, crid, position). The crid keeps a token of one container (or of a dropped
// container of the same name) from being read against another.
std::string encode_token(uint64_t crid, const ChangePosition& position) {
  std::string raw;
  codec::put_u8(raw, kTokenVersion);
  codec::put_u64_be(raw, crid);
  codec::put_u64_be(raw, position.index);
  codec::put_u8(raw, position.phase);
  codec::put_u8(raw, position.kind);
  codec::put_i64_be(raw, position.sort_micros);
  codec::put_bytes(raw, position.partition_key);
  codec::put_bytes(raw, position.id);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

Result<ChangePosition> decode_token(std::string_view token, uint64_t crid) {
  const Status bad = Status::invalid_argument("the change feed continuation is not valid for this container");
  if (token.size() % 2 != 0) return bad;
  std::string raw;
  for (size_t i = 0; i < token.size(); i += 2) {
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int high = nibble(token[i]), low = nibble(token[i + 1]);
    if (high < 0 || low < 0) return bad;
    raw.push_back(static_cast<char>(high * 16 + low));
  }
  codec::Reader reader(raw);
  uint8_t version;
  uint64_t token_crid;
  ChangePosition position;
  std::string_view pk, id;
  if (!reader.get_u8(version) || version != kTokenVersion || !reader.get_u64_be(token_crid) || token_crid != crid ||
      !reader.get_u64_be(position.index) || !reader.get_u8(position.phase) || position.phase > 3 ||
      !reader.get_u8(position.kind) || position.kind > 3 || !reader.get_i64_be(position.sort_micros) ||
      !reader.get_bytes(pk) || !reader.get_bytes(id) || !reader.done()) {
    return bad;
  }
  position.partition_key = std::string(pk);
  position.id = std::string(id);
  return position;
}

// The key of an expiry index entry or shadow: tag crid [sub kind] sort pk id.
struct EntryKey {
  int64_t sort_micros = 0;
  std::string partition_key;
  std::string id;
};
Result<EntryKey> decode_entry_key(std::string_view key, size_t prefix_size) {
  codec::Reader reader(key.substr(prefix_size));
  EntryKey out;
  if (!reader.get_i64_be(out.sort_micros) || !reader.get_ordered_string(out.partition_key) ||
      !reader.get_ordered_string(out.id) || !reader.done()) {
    return Status::corruption("undecodable change feed entry key");
  }
  return out;
}

std::string entry_key(const std::string& prefix, int64_t sort_micros, std::string_view pk, std::string_view id) {
  std::string key = prefix;
  codec::put_i64_be(key, sort_micros);
  codec::put_ordered_string(key, pk);
  codec::put_ordered_string(key, id);
  return key;
}

std::string sort_bound_key(const std::string& prefix, int64_t sort_micros) {
  std::string key = prefix;
  codec::put_i64_be(key, sort_micros);
  return key;
}

// Position kinds of phase 0 (changefeed.h): expirations of the own-ttl and inheriting indexes, then their warnings.
constexpr uint8_t kWarningKinds = 2;  // kind - kWarningKinds: the index a warning kind reads
uint8_t index_kind(uint8_t kind) { return kind % kWarningKinds; }
bool is_warning(uint8_t kind) { return kind >= kWarningKinds; }

// The bounds of one position: the expired bounds and the warning bounds (changefeed.h).
struct Bounds {
  ttl::ExpiredBounds expired;
  ttl::ExpiredBounds warned;
};
Bounds bounds_for(const ttl::ContainerTtlState& state, int64_t ts) {
  return {ttl::expired_bounds(state, ts), ttl::warning_bounds(state, ts)};
}

int64_t bound_of(const ttl::ExpiredBounds& bounds, uint8_t kind) {
  return index_kind(kind) == 0 ? bounds.own_expiry_below_micros : bounds.default_ts_below_micros;
}
int64_t bound_of(const Bounds& bounds, uint8_t kind) {
  return bound_of(is_warning(kind) ? bounds.warned : bounds.expired, kind);
}

// Where a kind's entries are: its index, the shadows of the index's collected items, and for a warning kind the
// warning shadows of items removed alive inside their window (layout.h).
struct EntrySource {
  std::string prefix;
  bool shadow;  // the value is the image (else the item is read by its key)
};
std::vector<EntrySource> entry_sources(uint64_t crid, uint8_t kind) {
  const uint8_t index = index_kind(kind);
  std::vector<EntrySource> sources{{index == 0 ? own_expiry_prefix(crid) : inherit_expiry_prefix(crid), false},
                                   {feed_shadow_kind_prefix(crid, index), true}};
  if (is_warning(kind)) sources.push_back({feed_shadow_kind_prefix(crid, kind), true});
  return sources;
}

}  // namespace

Result<std::optional<int64_t>> feed_time_at(leveldb::DB* db, const ReadSnapshot* snapshot, uint64_t index) {
  std::string value;
  leveldb::Status status = db->Get(read_options(snapshot), time_index_key(index), &value);
  if (status.IsNotFound()) return std::optional<int64_t>();
  MAYFLY_RETURN_IF_ERROR(from_leveldb(status, "read time index"));
  codec::Reader reader(value);
  int64_t ts;
  if (!reader.get_varint_signed(ts) || !reader.done()) return Status::corruption("undecodable time index entry");
  return std::optional<int64_t>(ts);
}

namespace {

// The entry at `index` of the time index, or the next one after it; nullopt past the last.
Result<std::optional<FeedPoint>> time_entry_at_or_after(leveldb::Iterator& it, uint64_t index) {
  it.Seek(time_index_key(index));
  if (!it.Valid() || !has_prefix(it.key(), time_index_prefix())) {
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it.status(), "seek time index"));
    return std::optional<FeedPoint>();
  }
  FeedPoint point;
  MAYFLY_ASSIGN_OR_RETURN(point.index, decode_trailing_index(view(it.key())));
  codec::Reader reader(view(it.value()));
  if (!reader.get_varint_signed(point.ts_micros) || !reader.done()) {
    return Status::corruption("undecodable time index entry");
  }
  return std::optional<FeedPoint>(point);
}

// The first time index entry at or after `from` whose time is >= `at_least`; nullopt when there is none. A binary
// search over log positions: O(log n) seeks however long the feed is. The time index strictly increases in time along
// the log, so "the next entry at or after p has ts >= at_least" is monotone in p whatever gaps the index has (a
// trimmed prefix, positions applied while no feed was on).
Result<std::optional<FeedPoint>> first_time_at_least(leveldb::DB* db, const ReadSnapshot* snapshot, uint64_t from,
                                                     int64_t at_least) {
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(read_options(snapshot)));
  // The last entry: the one before the first key past the time index's tag.
  std::string past = time_index_prefix();
  past.back() = static_cast<char>(static_cast<uint8_t>(past.back()) + 1);
  it->Seek(past);
  if (it->Valid()) {
    it->Prev();
  } else {
    it->SeekToLast();
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "seek time index"));
  if (!it->Valid() || !has_prefix(it->key(), time_index_prefix())) return std::optional<FeedPoint>();
  MAYFLY_ASSIGN_OR_RETURN(uint64_t last, decode_trailing_index(view(it->key())));
  if (last < from) return std::optional<FeedPoint>();
  MAYFLY_ASSIGN_OR_RETURN(std::optional<FeedPoint> at_last, time_entry_at_or_after(*it, last));
  if (!at_last || at_last->ts_micros < at_least) return std::optional<FeedPoint>();
  uint64_t low = from, high = last;  // the smallest position whose probe passes is in [low, high]
  std::optional<FeedPoint> found = at_last;  // the probe at `high`
  while (low < high) {
    const uint64_t mid = low + (high - low) / 2;
    MAYFLY_ASSIGN_OR_RETURN(std::optional<FeedPoint> probe, time_entry_at_or_after(*it, mid));
    if (probe && probe->ts_micros >= at_least) {
      high = mid;
      found = probe;
    } else {
      low = mid + 1;
    }
  }
  return found;
}

}  // namespace

Result<FeedPoint> feed_retention_start(leveldb::DB* db, const ReadSnapshot* snapshot, const ChangeFeedSettings& feed,
                                       int64_t now_micros) {
  const int64_t oldest_ts = now_micros - feed.retention_seconds * kMicrosPerSecond;
  MAYFLY_ASSIGN_OR_RETURN(std::optional<FeedPoint> start,
                          first_time_at_least(db, snapshot, feed.since_index, oldest_ts));
  if (!start) return Status::corruption("the time index has no entry at or after the change feed's start");
  return *start;
}

Result<FeedPolicy> feed_policy_at(leveldb::DB* db, const ReadSnapshot* snapshot, uint64_t crid, uint64_t index) {
  const std::string prefix = feed_sub_prefix(crid, FeedSub::kPolicy);
  const std::string at = feed_policy_key(crid, index);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(read_options(snapshot)));
  it->Seek(at);
  if (it->Valid() && it->key().compare(leveldb::Slice(at)) == 0) {
    // exactly at index
  } else if (it->Valid()) {
    it->Prev();
  } else {
    it->SeekToLast();
    while (it->Valid() && it->key().compare(leveldb::Slice(at)) > 0) it->Prev();
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "seek policy history"));
  if (!it->Valid() || !has_prefix(it->key(), prefix)) {
    return Status::corruption("the change feed has no ttl state at or before position " + std::to_string(index));
  }
  FeedPolicy policy;
  MAYFLY_ASSIGN_OR_RETURN(policy.index, decode_trailing_index(view(it->key())));
  MAYFLY_ASSIGN_OR_RETURN(policy.state, decode_ttl_state(view(it->value())));
  return policy;
}

namespace {

// The bounds B(p) and W(p) at one position, from the time index and the policy history.
Result<Bounds> bounds_at(leveldb::DB* db, const ReadSnapshot* snapshot, uint64_t crid, uint64_t index) {
  MAYFLY_ASSIGN_OR_RETURN(std::optional<int64_t> ts, feed_time_at(db, snapshot, index));
  if (!ts) return Status::corruption("the time index has no entry for log position " + std::to_string(index));
  MAYFLY_ASSIGN_OR_RETURN(FeedPolicy policy, feed_policy_at(db, snapshot, crid, index));
  return bounds_for(policy.state, *ts);
}

// The first position after `done` (every change at or before it served) that holds a change the read may return, or
// applied + 1 when none does: the next feed record, and for each kind read the position where its first pending
// entry (index or shadow; the smallest key at or above its bound at `done`) passes the bound — entries of one kind
// pass in key order, so no other can come sooner. A binary search over positions, O(log n) seeks: a long stretch of
// positions without changes (an idle container's time entries) costs a reader nothing, and a page comes back empty
// only when it is caught up (or every warning it examined was one not served). Adds the seeks to *work.
Result<uint64_t> next_change_position(leveldb::DB* db, const ReadSnapshot* snapshot, leveldb::Iterator& it,
                                      uint64_t crid, uint64_t done, uint64_t applied, bool expirations, bool warnings,
                                      bool writes, int64_t* work) {
  uint64_t next = applied + 1;
  if (writes) {
    const std::string prefix = feed_sub_prefix(crid, FeedSub::kRecord);
    it.Seek(feed_record_key(crid, done + 1));
    *work += 1;
    if (it.Valid() && has_prefix(it.key(), prefix)) {
      MAYFLY_ASSIGN_OR_RETURN(uint64_t index, decode_trailing_index(view(it.key())));
      next = std::min(next, index);
    }
    MAYFLY_RETURN_IF_ERROR(from_leveldb(it.status(), "seek change feed records"));
  }
  if ((!expirations && !warnings) || next <= done + 1) return next;
  MAYFLY_ASSIGN_OR_RETURN(Bounds at_done, bounds_at(db, snapshot, crid, done));
  *work += 1;
  for (uint8_t kind = 0; kind < 2 * kWarningKinds; ++kind) {
    if (!(is_warning(kind) ? warnings : expirations)) continue;
    std::optional<int64_t> smallest;
    for (const EntrySource& source : entry_sources(crid, kind)) {
      const std::string& prefix = source.prefix;
      it.Seek(sort_bound_key(prefix, bound_of(at_done, kind)));
      *work += 1;
      if (it.Valid() && has_prefix(it.key(), prefix)) {
        MAYFLY_ASSIGN_OR_RETURN(EntryKey key, decode_entry_key(view(it.key()), prefix.size()));
        smallest = std::min(smallest.value_or(key.sort_micros), key.sort_micros);
      }
      MAYFLY_RETURN_IF_ERROR(from_leveldb(it.status(), "seek expiry entries"));
    }
    if (!smallest || next <= done + 1) continue;
    // The first p in (done, next - 1] whose bound passes it, if any.
    uint64_t low = done + 1, high = next - 1;
    MAYFLY_ASSIGN_OR_RETURN(Bounds at_high, bounds_at(db, snapshot, crid, high));
    *work += 1;
    if (bound_of(at_high, kind) <= *smallest) continue;
    while (low < high) {
      const uint64_t mid = low + (high - low) / 2;
      MAYFLY_ASSIGN_OR_RETURN(Bounds at_mid, bounds_at(db, snapshot, crid, mid));
      *work += 1;
      if (bound_of(at_mid, kind) > *smallest) {
        high = mid;
      } else {
        low = mid + 1;
      }
    }
    next = low;
  }
  return next;
}

// Whether an item of `partition_key` is in the request's feed range (none: all are), remembered per partition key.
using RangeCache = std::map<std::string, bool, std::less<>>;
Result<bool> in_feed_range(const std::optional<FeedRange>& feed_range, RangeCache& cache,
                           const std::string& partition_key) {
  if (!feed_range) return true;
  auto known = cache.find(partition_key);
  if (known == cache.end()) {
    MAYFLY_ASSIGN_OR_RETURN(std::string epk, effective_partition_key(partition_key.empty() ? "null" : partition_key));
    known = cache.emplace(partition_key, feed_range->contains(epk)).first;
  }
  return known->second;
}

// A change a step found, or a position it passed over (skip): see the step in ChangeFeedReader::read.
struct Found {
  Change change;
  bool skip = false;
};

bool by_write_time(const ChangePosition& position) {
  return position.phase == kPhaseAfterWrite || position.phase == kPhaseFromTime;
}

// The latest-version feed in write-time order (changefeed.h, "Latest version without the feed"): the container's
// `_ts` index (09 crid write_ts pk id -> log index) holds one entry per item, at its latest write, so reading it from
// a cursor on is reading every item written (created or replaced) after the cursor, once, as it is now. Expired
// items are left out; deletes leave no entry. Cursors are positions in that index: "from time T" (phase 3) starts at
// the first entry whose write time is >= T, "after" (phase 2) right after one entry.
Result<ChangeFeedPage> read_by_write_time(leveldb::DB* db, const leveldb::ReadOptions& options,
                                          const ContainerRecord& container, const MetaState& meta,
                                          const ChangeFeedRequest& request, ChangePosition cursor,
                                          const std::optional<FeedRange>& feed_range) {
  const uint64_t crid = container.crid;
  const int64_t now = meta.applied_ts_micros;
  ChangeFeedPage page;
  page.crid = crid;
  page.partition_key_path = container.partition_key_path;
  const std::string prefix = ts_index_prefix(crid);
  std::string seek = prefix;
  codec::put_i64_be(seek, cursor.sort_micros);
  if (cursor.phase == kPhaseAfterWrite) {
    codec::put_ordered_string(seek, cursor.partition_key);
    codec::put_ordered_string(seek, cursor.id);
  }
  RangeCache ranges;
  PartitionDeletes deletes = PartitionDeletes::at(db, options.snapshot, container);
  // A held item is alive past its instant (storage/holds.h).
  MAYFLY_ASSIGN_OR_RETURN(std::optional<HoldSet> holds, HoldSet::load_if_held(db, options.snapshot, container));
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(options));
  size_t page_bytes = 0;
  bool end = true;  // the scan reached the index's end: caught up
  for (it->Seek(seek); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
    if (cursor.phase == kPhaseAfterWrite && view(it->key()) == std::string_view(seek)) continue;
    if (page.changes.size() >= request.max_changes || static_cast<size_t>(page.work) >= request.max_work) {
      end = false;
      break;
    }
    if (!charge_work(kStepsPerItem)) return work_status();  // timed out, cancelled, stopping
    MAYFLY_ASSIGN_OR_RETURN(IndexKey key, decode_index_key(view(it->key())));
    ChangePosition position;
    position.phase = kPhaseAfterWrite;
    position.sort_micros = key.sort_micros;
    position.partition_key = key.partition_key;
    position.id = key.id;
    if (!it->value().empty()) {
      codec::Reader reader(view(it->value()));
      if (!reader.get_varint(position.index) || !reader.done()) return Status::corruption("undecodable _ts index entry");
    }
    MAYFLY_ASSIGN_OR_RETURN(bool in_range, in_feed_range(feed_range, ranges, key.partition_key));
    if (!in_range) {  // passed over: the cursor still advances
      page.work += 1;
      cursor = std::move(position);
      continue;
    }
    std::string current;
    MAYFLY_RETURN_IF_ERROR(
        from_leveldb(db->Get(options, item_key(crid, key.partition_key, key.id), &current), "read item"));
    page.work += 1;
    MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(current));
    if (record.write_ts_micros != key.sort_micros) {
      return Status::corruption("the _ts index entry of an item does not match its write time");
    }
    MAYFLY_ASSIGN_OR_RETURN(bool deleted, deletes.hides(key.partition_key, record.write_ts_micros));
    if (deleted || !(holds ? holds->alive(key.partition_key, key.id, record, container.ttl, now)
                           : ttl::alive(record.ttl, record.write_ts_micros, container.ttl, now))) {
      cursor = std::move(position);
      continue;
    }
    const size_t bytes = current.size() + key.partition_key.size() + key.id.size();
    if (!page.changes.empty() && page_bytes + bytes > request.max_bytes) {
      end = false;  // full: the page ends right before this change
      break;
    }
    page_bytes += bytes;
    Change change;
    // The write that made this version created the item when the item's resource id is that write's sequence.
    change.operation = record.item_rid == record.etag_sequence ? ChangeOperation::kCreate : ChangeOperation::kReplace;
    change.position = position;
    change.ts_micros = key.sort_micros;
    change.partition_key = std::move(key.partition_key);
    change.id = std::move(key.id);
    change.image = std::move(current);
    change.default_ttl = container.ttl.policy;
    page.changes.push_back(std::move(change));
    cursor = std::move(position);
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan the _ts index"));
  page.caught_up = end;
  page.continuation = encode_token(crid, cursor);
  return page;
}

}  // namespace

Result<ChangeFeedPage> ChangeFeedReader::read(const ChangeFeedRequest& request) const {
  if (request.max_changes == 0 || request.max_work == 0) {
    return Status::invalid_argument("a change feed page needs max_changes and max_work of at least 1");
  }
  std::optional<FeedRange> feed_range;
  if (!request.feed_range_min.empty() || !request.feed_range_max.empty()) {
    MAYFLY_ASSIGN_OR_RETURN(FeedRange range, parse_feed_range(request.feed_range_min, request.feed_range_max));
    if (!range.whole()) feed_range = std::move(range);
  }
  RangeCache ranges;  // partition key -> whether it is in feed_range
  const uint64_t ticket = gate_.ticket();
  ReadSnapshot snapshot(db_);
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));
  const leveldb::ReadOptions options = read_options(&snapshot);
  std::string raw;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(db_->Get(options, meta_key(), &raw), "read meta state"));
  MAYFLY_ASSIGN_OR_RETURN(MetaState meta, decode_meta(raw));
  leveldb::Status got = db_->Get(options, container_key(request.database, request.container), &raw);
  if (got.IsNotFound()) {
    return Status::not_found("container '" + request.container + "' does not exist in database '" + request.database +
                             "'");
  }
  MAYFLY_RETURN_IF_ERROR(from_leveldb(got, "read container"));
  MAYFLY_ASSIGN_OR_RETURN(ContainerRecord container, decode_container(raw));
  const ChangeFeedSettings& feed = container.change_feed;
  const uint64_t crid = container.crid;
  const uint64_t applied = meta.applied_index;
  const int64_t now = meta.applied_ts_micros;
  std::optional<ChangePosition> token;
  if (request.from.kind == ChangeFeedFrom::Kind::kContinuation) {
    MAYFLY_ASSIGN_OR_RETURN(token, decode_token(request.from.continuation, crid));
  }
  if (request.only_expirations && request.only_warnings) {
    return Status::invalid_argument("ask for only expirations or only warnings, not both");
  }
  if (request.only_warnings && !request.warnings) {
    return Status::invalid_argument("only warnings were asked for, with warnings left out");
  }
  if (request.mode == ChangeFeedMode::kLatest && !request.only_expirations && !request.only_warnings &&
      (!feed.enabled || (token && by_write_time(*token)))) {
    // The latest-version feed every container has, feed on or off (a token of this kind keeps its order when the
    // feed is turned on or off between pages).
    ChangePosition cursor;
    cursor.phase = kPhaseFromTime;
    switch (request.from.kind) {
      case ChangeFeedFrom::Kind::kBeginning: cursor.sort_micros = 0; break;
      case ChangeFeedFrom::Kind::kNow: cursor.sort_micros = now + 1; break;
      case ChangeFeedFrom::Kind::kTime: cursor.sort_micros = request.from.ts_micros; break;
      case ChangeFeedFrom::Kind::kContinuation:
        if (!by_write_time(*token)) {
          return Status::invalid_argument("the change feed continuation is not valid for this container");
        }
        cursor = *token;
        break;
    }
    return read_by_write_time(db_, options, container, meta, request, std::move(cursor), feed_range);
  }
  if (!feed.enabled) {
    return Status::invalid_argument("the change feed of container '" + request.container +
                                    "' is off: only its latest-version feed can be read (turn the feed on for all "
                                    "versions, deletes, expirations and warnings)");
  }

  // The last position already served ("all of index done" when phase is 1).
  ChangePosition cursor;
  switch (request.from.kind) {
    case ChangeFeedFrom::Kind::kNow: cursor.index = applied; break;
    case ChangeFeedFrom::Kind::kBeginning: {
      MAYFLY_ASSIGN_OR_RETURN(FeedPoint start, feed_retention_start(db_, &snapshot, feed, now));
      cursor.index = start.index;
      break;
    }
    case ChangeFeedFrom::Kind::kTime: {
      // The changes at positions whose time is >= T: start after the last position before the first such one.
      MAYFLY_ASSIGN_OR_RETURN(std::optional<FeedPoint> first,
                              first_time_at_least(db_, &snapshot, feed.since_index, request.from.ts_micros));
      cursor.index = applied;
      if (first && first->index <= applied) {
        if (first->index <= feed.since_index) {
          return gone("the change feed of container '" + request.container +
                      "' was turned on after the time asked for; read from the beginning instead");
        }
        cursor.index = first->index - 1;
      }
      break;
    }
    case ChangeFeedFrom::Kind::kContinuation: {
      if (by_write_time(*token)) {
        return Status::invalid_argument(
            "this change feed continuation is one of the latest-version feed; it cannot resume the all-versions feed");
      }
      cursor = *token;
      break;
    }
  }
  ChangeFeedPage page;
  page.crid = crid;
  page.partition_key_path = container.partition_key_path;
  if (cursor.index > applied) {
    // A token from a replica further ahead: nothing here yet.
    page.continuation = encode_token(crid, cursor);
    return page;
  }
  {
    // The first position whose bounds the read needs must be inside the feed and the retention window.
    const uint64_t need = cursor.phase == 0 ? cursor.index - 1 : cursor.index;
    if (need < feed.since_index) {
      return gone("the position asked for is before the change feed of container '" + request.container +
                  "' was turned on (at log position " + std::to_string(feed.since_index) + ")");
    }
    MAYFLY_ASSIGN_OR_RETURN(std::optional<int64_t> ts, feed_time_at(db_, &snapshot, need));
    if (!ts || *ts < now - feed.retention_seconds * kMicrosPerSecond) {
      return gone("the position asked for is older than the change feed retention of container '" +
                  request.container + "' (" + std::to_string(feed.retention_seconds) +
                  " s); read from the beginning instead");
    }
  }

  // Warnings and expirations are all-versions changes; only_warnings reads the warnings in either mode.
  const bool latest = request.mode == ChangeFeedMode::kLatest && !request.only_warnings;
  const bool expirations = !latest && !request.only_warnings;
  const bool warnings = !latest && request.warnings && !request.only_expirations && container.ttl.has_warnings();
  const bool writes = !request.only_expirations && !request.only_warnings;
  PartitionDeletes deletes = PartitionDeletes::at(db_, snapshot.get(), container);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(options));
  size_t page_bytes = 0;  // the images of the changes on the page
  bool full = false;      // the next change would take the page past max_bytes
  while (!full && page.changes.size() < request.max_changes && !(cursor.phase == 1 && cursor.index == applied) &&
         (page.work == 0 || static_cast<size_t>(page.work) < request.max_work)) {
    if (!charge_work(kStepsPerItem)) return work_status();  // timed out, cancelled, stopping
    if (cursor.phase == 1) {
      // Past the positions without a change this read could return, straight to the next one that has one.
      MAYFLY_ASSIGN_OR_RETURN(uint64_t next, next_change_position(db_, &snapshot, *it, crid, cursor.index, applied,
                                                                  expirations, warnings, writes, &page.work));
      if (next > cursor.index + 1) {
        cursor = ChangePosition{};
        cursor.index = next - 1;
        if (cursor.index == applied) break;
      }
    }
    // One step: the positions (lo, hi], with the bounds at lo..hi.
    const uint64_t lo = cursor.phase == 0 ? cursor.index - 1 : cursor.index;
    const size_t budget = request.max_work > static_cast<size_t>(page.work) ? request.max_work - page.work : 1;
    const uint64_t span = std::max<uint64_t>(1, std::min<uint64_t>(budget, kMaxChunkPositions));
    const uint64_t hi = std::min<uint64_t>(applied, lo + span);
    std::vector<int64_t> times;
    std::vector<Bounds> bounds;
    std::vector<ttl::DefaultTtl> policies;
    times.reserve(hi - lo + 1);
    {
      uint64_t expected = lo;
      const std::string prefix = time_index_prefix();
      for (it->Seek(time_index_key(lo)); it->Valid() && has_prefix(it->key(), prefix) && expected <= hi; it->Next()) {
        MAYFLY_ASSIGN_OR_RETURN(uint64_t index, decode_trailing_index(view(it->key())));
        if (index != expected) break;
        codec::Reader reader(view(it->value()));
        int64_t ts;
        if (!reader.get_varint_signed(ts) || !reader.done()) return Status::corruption("undecodable time index");
        times.push_back(ts);
        ++expected;
      }
      MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan time index"));
      if (expected != hi + 1) {
        return Status::corruption("the time index has no entry for log position " + std::to_string(expected));
      }
    }
    {
      MAYFLY_ASSIGN_OR_RETURN(FeedPolicy policy, feed_policy_at(db_, &snapshot, crid, lo));
      ttl::ContainerTtlState state = policy.state;
      const std::string prefix = feed_sub_prefix(crid, FeedSub::kPolicy);
      it->Seek(feed_policy_key(crid, lo + 1));
      for (uint64_t p = lo; p <= hi; ++p) {
        while (it->Valid() && has_prefix(it->key(), prefix)) {
          MAYFLY_ASSIGN_OR_RETURN(uint64_t index, decode_trailing_index(view(it->key())));
          if (index > p) break;
          MAYFLY_ASSIGN_OR_RETURN(state, decode_ttl_state(view(it->value())));
          it->Next();
        }
        bounds.push_back(bounds_for(state, times[p - lo]));
        policies.push_back(state.policy);
      }
      MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan policy history"));
    }
    page.work += static_cast<int64_t>(hi - lo + 1);
    auto bound_at = [&](uint64_t p, uint8_t kind) { return bound_of(bounds[p - lo], kind); };

    const size_t limit = request.max_changes - page.changes.size();
    // What the sources found in (lo, hi], with entries passed over (a warning not served, an item deleted with its
    // partition) kept as placeholders: their positions still order the step and may end it.
    std::vector<Found> found;
    // When a source stopped at `limit`: the smallest last position such a source read. Changes up to it are all
    // found; past it, not necessarily.
    std::optional<ChangePosition> certain;
    auto stopped_at = [&certain](const ChangePosition& last) {
      if (!certain || last < *certain) certain = last;
    };
    // The warnings of a step whose warning bounds are its expired bounds would all be expirations: none is read.
    bool step_warns = false;
    for (const Bounds& at : bounds) {
      step_warns = step_warns || at.warned.own_expiry_below_micros != at.expired.own_expiry_below_micros ||
                   at.warned.default_ts_below_micros != at.expired.default_ts_below_micros;
    }
    for (uint8_t kind = 0; kind < 2 * kWarningKinds; ++kind) {
      if (!(is_warning(kind) ? warnings && step_warns : expirations)) continue;
      // Where this kind's entries after the cursor start (see the header's order).
      int64_t start_sort = 0;
      if (cursor.phase == 1 || kind < cursor.kind) {
        start_sort = bound_at(cursor.index, kind);
      } else if (kind > cursor.kind) {
        start_sort = bound_at(lo, kind);
      }
      const int64_t end_sort = bound_at(hi, kind);
      for (const EntrySource& source : entry_sources(crid, kind)) {
        const std::string& prefix = source.prefix;
        const bool shadow = source.shadow;
        const bool after_cursor = cursor.phase == 0 && kind == cursor.kind;
        const std::string from = after_cursor ? entry_key(prefix, cursor.sort_micros, cursor.partition_key, cursor.id)
                                              : sort_bound_key(prefix, start_sort);
        const std::string end = sort_bound_key(prefix, end_sort);
        size_t taken = 0;
        for (it->Seek(from); it->Valid() && has_prefix(it->key(), prefix); it->Next()) {
          if (it->key().compare(leveldb::Slice(end)) >= 0) break;
          if (after_cursor && it->key().compare(leveldb::Slice(from)) == 0) continue;
          if (taken == limit) {
            stopped_at(found.back().change.position);  // this source's last, in its (and position) order
            break;
          }
          ++taken;
          page.work += 1;
          if (!charge_work(kStepsPerItem)) return work_status();
          MAYFLY_ASSIGN_OR_RETURN(EntryKey key, decode_entry_key(view(it->key()), prefix.size()));
          // Its position: the first p in (lo, hi] whose bound passes it.
          uint64_t first = lo + 1, last = hi;
          while (first < last) {
            const uint64_t mid = first + (last - first) / 2;
            if (bound_at(mid, kind) > key.sort_micros) {
              last = mid;
            } else {
              first = mid + 1;
            }
          }
          Found entry;
          Change& change = entry.change;
          change.operation = is_warning(kind) ? ChangeOperation::kWarning : ChangeOperation::kDelete;
          change.ttl_expired = !is_warning(kind);
          change.position = {first, 0, kind, key.sort_micros, key.partition_key, key.id};
          change.ts_micros = times[first - lo];
          change.default_ttl = policies[first - lo];
          change.partition_key = key.partition_key;
          change.id = key.id;
          std::string image;
          if (shadow) {
            image = it->value().ToString();
          } else {
            MAYFLY_RETURN_IF_ERROR(from_leveldb(
                db_->Get(options, item_key(crid, key.partition_key, key.id), &image), "read expiring item"));
          }
          MAYFLY_ASSIGN_OR_RETURN(ItemRecord record, decode_item(image));
          if (!shadow) {
            // An item deleted with its partition (before the feed was turned on: a feed that is on refuses such
            // deletes) has no expiration, on a replica that still stores it as on one whose collector removed it.
            MAYFLY_ASSIGN_OR_RETURN(bool deleted, deletes.hides(key.partition_key, record.write_ts_micros));
            entry.skip = deleted;
          }
          if (is_warning(kind)) {
            // Served only after the item's write and while it is alive (changefeed.h, "Warnings").
            entry.skip = entry.skip || change.ts_micros <= record.write_ts_micros ||
                         bound_at(first, index_kind(kind)) > key.sort_micros;
            change.image = std::move(image);
          } else {
            change.previous = std::move(image);
          }
          found.push_back(std::move(entry));
        }
        MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan expired entries"));
      }
    }
    if (writes) {
      const std::string prefix = feed_sub_prefix(crid, FeedSub::kRecord);
      const std::string end = feed_record_key(crid, hi + 1);
      size_t taken = 0;
      for (it->Seek(feed_record_key(crid, cursor.phase == 0 ? cursor.index : cursor.index + 1));
           it->Valid() && has_prefix(it->key(), prefix) && it->key().compare(leveldb::Slice(end)) < 0; it->Next()) {
        if (taken == limit) {
          stopped_at(found.back().change.position);
          break;
        }
        ++taken;
        page.work += 1;
        if (!charge_work(kStepsPerItem)) return work_status();
        MAYFLY_ASSIGN_OR_RETURN(uint64_t index, decode_trailing_index(view(it->key())));
        MAYFLY_ASSIGN_OR_RETURN(FeedRecord record, decode_feed_record(view(it->value())));
        Found entry;
        Change& change = entry.change;
        change.operation = record.operation;
        change.position.index = index;
        change.ts_micros = record.ts_micros;
        change.default_ttl = policies[index - lo];
        change.partition_key = std::move(record.partition_key);
        change.id = std::move(record.id);
        change.image = std::move(record.image);
        change.previous = std::move(record.previous);
        found.push_back(std::move(entry));
      }
      MAYFLY_RETURN_IF_ERROR(from_leveldb(it->status(), "scan change feed records"));
    }
    // In position order; one change per position: a warning's entry can be in two sources at once (a warning shadow
    // and a later version of the same key, which has no warning), and the one served, if any, is kept.
    std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
      return a.change.position < b.change.position || (a.change.position == b.change.position && !a.skip && b.skip);
    });
    found.erase(std::unique(found.begin(), found.end(),
                            [](const Found& a, const Found& b) { return a.change.position == b.change.position; }),
                found.end());
    // Each source read at most `limit` entries: the changes up to the first stop are certain, and of those the first
    // `limit` are the next ones in order. Past them the step ends at the last one kept.
    const ChangePosition step_start = cursor;
    if (certain) {
      found.erase(std::find_if(found.begin(), found.end(),
                               [&](const Found& entry) { return *certain < entry.change.position; }),
                  found.end());
    }
    if (certain || found.size() > limit) {
      // Not empty: a source that stopped took `limit` >= 1 entries, all at or before `certain`.
      found.resize(std::min(found.size(), limit));
      cursor = found.back().change.position;
    } else {
      cursor = ChangePosition{};
      cursor.index = hi;
    }
    for (size_t i = 0; i < found.size(); ++i) {
      if (found[i].skip) continue;  // passed over (the position still advances)
      Change& change = found[i].change;
      MAYFLY_ASSIGN_OR_RETURN(bool in_range, in_feed_range(feed_range, ranges, change.partition_key));
      if (!in_range) continue;  // passed over (the position still advances)
      const size_t bytes = change.image.size() + change.previous.size() + change.partition_key.size() +
                           change.id.size();
      if (!page.changes.empty() && page_bytes + bytes > request.max_bytes) {
        // Full: the page ends right before this change (positions are exact, so nothing is skipped or repeated).
        cursor = i == 0 ? step_start : found[i - 1].change.position;
        full = true;
        break;
      }
      if (latest) {
        // Only creates and replaces whose version is the item's current, live one.
        if (change.operation == ChangeOperation::kDelete) continue;
        std::string current;
        leveldb::Status status = db_->Get(options, item_key(crid, change.partition_key, change.id), &current);
        if (status.IsNotFound()) continue;
        MAYFLY_RETURN_IF_ERROR(from_leveldb(status, "read item"));
        MAYFLY_ASSIGN_OR_RETURN(ItemRecord now_record, decode_item(current));
        MAYFLY_ASSIGN_OR_RETURN(ItemRecord image, decode_item(change.image));
        if (now_record.etag_sequence != image.etag_sequence ||
            !ttl::alive(now_record.ttl, now_record.write_ts_micros, container.ttl, now)) {
          continue;
        }
        MAYFLY_ASSIGN_OR_RETURN(bool deleted, deletes.hides(change.partition_key, now_record.write_ts_micros));
        if (deleted) continue;
      }
      page_bytes += bytes;
      page.changes.push_back(std::move(change));
    }
  }
  page.caught_up = cursor.phase == 1 && cursor.index == applied;
  page.continuation = encode_token(crid, cursor);
  return page;
}

std::string change_feed_token(uint64_t crid, const ChangePosition& position) { return encode_token(crid, position); }

Result<ChangeFeedUsage> ChangeFeedReader::usage(const ContainerRecord& container) const {
  leveldb::DB* db = db_;
  if (!container.change_feed.enabled) return Status::invalid_argument("the change feed is off");
  const uint64_t ticket = gate_.ticket();
  ReadSnapshot snapshot(db);
  MAYFLY_RETURN_IF_ERROR(gate_.check(ticket));
  std::string raw;
  MAYFLY_RETURN_IF_ERROR(from_leveldb(db->Get(read_options(&snapshot), meta_key(), &raw), "read meta state"));
  MAYFLY_ASSIGN_OR_RETURN(MetaState meta, decode_meta(raw));
  ChangeFeedUsage usage;
  usage.applied_ts_micros = meta.applied_ts_micros;
  MAYFLY_ASSIGN_OR_RETURN(FeedPoint start,
                          feed_retention_start(db, &snapshot, container.change_feed, meta.applied_ts_micros));
  usage.oldest_index = start.index;
  usage.oldest_ts_micros = start.ts_micros;
  const std::string from = feed_prefix(container.crid);
  const std::string to = feed_prefix(container.crid + 1);
  const leveldb::Range range(from, to);
  db->GetApproximateSizes(&range, 1, &usage.approximate_bytes);
  return usage;
}

}  // namespace mayfly::storage
