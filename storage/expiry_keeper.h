// ExpiryKeeper: the node-local side of expiry — garbage collection of expired items (collect_expired), the
// backlog of expired but not yet deleted items and each container's stored/live figures, the next expiry deadline,
// and reclaiming the keys of dropped containers. Nothing here is replicated: deletes of expired items never change
// what a read at any time >= the applied time sees (docs/ttl.md §7), and the figures are derived from the store.
//
// It keeps what the collector and the figures need between calls: the backlog trackers, the collect and reclaim
// cursors and the cache of the persisted local stats. The apply path (StateMachine) updates them through
// remove_stored_item / local_stats / committed, in the same batch as the items it writes.
//
// It also keeps the key ranges the collector drained, for the node's compactor (node/gc_compactor.h): which one is
// worth a LevelDB compaction, and the compaction itself.
//
// Thread-safety: driver thread only, like StateMachine::apply (which owns it: StateMachine::expiry()); compact() and
// approximate_bytes() on any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "storage/layout.h"
#include "storage/records.h"
#include "storage/store_reader.h"

namespace leveldb {
class DB;
}  // namespace leveldb

namespace mayfly::storage {

namespace internal {
struct StoreBatch;
}  // namespace internal

inline constexpr size_t kBacklogCountStep = 10'000;

// What one collect_expired call reclaimed.
struct CollectResult {
  int64_t items = 0;
  int64_t bytes = 0;
  std::vector<int64_t> expiry_instants_micros;  // of each deleted item, for deletion-lag figures
  bool more = false;                            // stopped at max_items: more expired items remain
};

// What one drain of a container's deleted partitions did (ExpiryKeeper::drain_deleted_partitions).
// drain_deleted_partitions counts at most this many marks past the ones it drained (clients decide how many there
// are: the count must not hold the driver thread).
inline constexpr int64_t kMaxCountedDeletedPartitions = 10'000;
struct PartitionDrain {
  int64_t items = 0;     // items removed
  int64_t bytes = 0;
  int64_t examined = 0;  // item records read (the work)
  int64_t pending = 0;   // deleted partitions whose items are not all removed yet, after this drain (a lower bound
                         // when more than kMaxCountedDeletedPartitions were left uncounted)
  bool more = false;     // stopped at a limit: more remain
};

// Items expired at the applied time but not yet physically deleted.
//
// The count is kept incrementally and advanced by a bounded amount of work per call, so after a restart or when a
// defaultTtl change expires a large part of a container at once it takes several calls to finish. Until it has
// (`complete` false), `items` and `bytes` count only the expired index entries read so far: exact figures for that
// part, hence lower bounds of the backlog. `oldest_expiry_micros` is exact either way (one index seek).
struct Backlog {
  int64_t items = 0;
  int64_t bytes = 0;
  std::optional<int64_t> oldest_expiry_micros;  // nullopt when the backlog is empty
  bool complete = true;                         // false: still counting; items and bytes are lower bounds
  int64_t entries_read = 0;                     // expiry index entries this call read to advance the count (work)
};

struct ContainerStats {
  int64_t stored_items = 0;  // physically present on this node, expired or not
  int64_t stored_bytes = 0;
  Backlog backlog;
  // What users can see: stored minus expired (docs/ttl.md §4: expired items are not billed). An upper bound while
  // backlog.complete is false.
  int64_t live_items = 0;
  int64_t live_bytes = 0;
};

// A key range of one container that the collector (or the reclaiming of a dropped container) emptied: every key it
// deleted there since the range was last compacted lies in [first, last]. LevelDB keeps a deleted key as a tombstone
// until a compaction reaches it, and a scan that starts in front of such a range — the collector's first scan of an
// index after a restart, the backlog count, a forecast's backlog part, a list of the container's items — steps over
// every one of them (docs/metrics.md, "The garbage collector": compacting drained ranges).
struct DrainedRange {
  uint64_t crid = 0;
  KeyTag tag = KeyTag::kItem;  // kItem, kOwnExpiryIndex, kInheritExpiryIndex, kTsIndex or kChangeFeed
  std::string first;           // the smallest and the largest key deleted there
  std::string last;
  int64_t deleted = 0;         // keys deleted there since its last compaction
};
// "items", "own_expiry_index", "inherit_expiry_index", "ts_index", "change_feed" (for logs).
const char* drained_range_name(KeyTag tag);

class ExpiryKeeper {
 public:
  // `db`, `reader` and `sticky` (the store's sticky disk failure, shared with the apply path) belong to the
  // StateMachine that owns this keeper. backlog_count_step: StoreOptions::backlog_count_step.
  ExpiryKeeper(leveldb::DB* db, const StoreReader& reader, Status& sticky, size_t backlog_count_step);
  ExpiryKeeper(const ExpiryKeeper&) = delete;
  ExpiryKeeper& operator=(const ExpiryKeeper&) = delete;

  // The read side of the same store (the container list, the applied time).
  const StoreReader& reader() const { return reader_; }

  // Physically deletes up to `max_items` items of the container that are expired at `up_to_micros`, oldest expiry
  // first. up_to_micros must not exceed the applied time (docs/ttl.md §7). Node-local: not replicated.
  Result<CollectResult> collect_expired(std::string_view database, std::string_view container, int64_t up_to_micros,
                                        size_t max_items);
  // Backlog at the applied time. Maintained incrementally: after open (or a snapshot install) the expired part is
  // counted once, later calls only look at what expired since, and a call reads at most `max_count_entries` expiry
  // index entries to advance the count (StoreOptions::backlog_count_step when not given; 0: no counting, just the
  // figures so far), resuming where the last call stopped. Removals of entries already counted (GC, deletes,
  // overwrites) keep the count exact meanwhile.
  Result<Backlog> backlog(std::string_view database, std::string_view container);
  Result<Backlog> backlog(std::string_view database, std::string_view container, size_t max_count_entries);
  Result<ContainerStats> container_stats(std::string_view database, std::string_view container);
  Result<ContainerStats> container_stats(std::string_view database, std::string_view container,
                                         size_t max_count_entries);
  // The earliest expiry instant after `now_micros` of any item in any container (nullopt: nothing will expire). The
  // leader schedules a time entry there, so an item disappears within one commit round trip of its deadline.
  // Two index seeks per container with TTL on.
  Result<std::optional<int64_t>> next_expiry_after(int64_t now_micros) const;
  // Delete by partition key (storage/deleted_partitions.h): removes up to `max_items` items of the container's deleted
  // partitions (those written at or before their partition's delete), reading at most 4 × max_items + 64 records and
  // marks, and the record of each deleted partition it finds empty of them. Node-local, like collect_expired.
  Result<PartitionDrain> drain_deleted_partitions(const ContainerRecord& container, size_t max_items);
  // Deletes up to max_keys keys of dropped containers; returns how many it deleted.
  Result<int64_t> reclaim_dropped(size_t max_keys);
  // Change feed retention (docs/changefeed.md): deletes up to max_keys feed keys no reader may still ask for — feed
  // records, shadow images and superseded policy history at or before each container's retention start, the time
  // index below the oldest start any feed needs, and every feed key of a container whose feed is off. Node-local
  // like GC: it never changes what a read allowed at the applied time returns. Returns how many it deleted.
  Result<int64_t> trim_change_feed(size_t max_keys);

  // The drained range most worth compacting now, or nullopt: of those with at least `min_deletes` deleted keys, the
  // one with the most. An expiry index range holds tombstones only (the collector deletes oldest first, and no new
  // entry sorts below an expired one); so does the ts index range of items that inherit the defaultTtl (same order),
  // while items with ttls of their own leave live entries between. Item keys are ordered by partition key and id, so
  // the deleted ones are spread over the container's whole item range, live items in between: an item range
  // qualifies only once the keys deleted there are at least as many as the items the container still stores (a
  // compaction then drops at least as much as it rewrites), or the container was dropped. The range returned is
  // forgotten here: deletes from now on start a new one.
  std::optional<DrainedRange> take_drained_range(int64_t min_deletes);
  // The ranges being tracked, none forgotten (tests, diagnostics).
  std::vector<DrainedRange> drained_ranges() const;
  // LevelDB's DB::CompactRange over `range`: its tombstones, and the values they hide, are dropped (those newer than
  // an open LevelDB snapshot excepted). Synchronous and heavy: LevelDB first flushes its memtable (a write that
  // arrives meanwhile waits behind the flush of the one before, if any), then rewrites every table file that
  // overlaps the range, level by level, while its automatic compactions wait. Any thread (it touches nothing but
  // LevelDB, which is thread-safe); the store must stay open until it returns.
  void compact(const DrainedRange& range) const;
  // LevelDB's approximate on-disk bytes of the keys in [from, to) (what is still in the memtable not counted). Any
  // thread.
  uint64_t approximate_bytes(const std::string& from, const std::string& to) const;

  // For the apply path, in its batch: removes a stored item and its index entries; the local stats of a container
  // (cached); and, once the batch is written, its effects on the trackers, stats and cursors. forget_all() drops
  // everything after a snapshot install replaced the store (figures are recomputed lazily).
  // With `shadow` (an expired item of a container whose change feed is on) its image moves to the feed's shadow
  // keyspace under the key of its expiry index entry, so the feed still serves its expiration (docs/changefeed.md).
  void remove_stored_item(uint64_t crid, const std::string& key, std::string_view partition_key, std::string_view id,
                          const ItemRecord& record, size_t record_bytes, internal::StoreBatch& batch,
                          bool shadow = false);
  LocalStats& local_stats(uint64_t crid);
  void committed(const internal::StoreBatch& batch);
  void forget_all();

 private:
  // The backlog count of one container. For each expiry index, an entry is counted iff its key sorts below the
  // index's position (a full index key; "" counts nothing). Counting moves a position towards the index's expired
  // bound (the key prefix + the bound: every expired entry sorts below it, no live one does) a bounded number of
  // entries per call; a stopped count keeps the key of the first entry it did not count. No entry is ever written
  // below a position (new entries sort above the expired bound, which never moves back), so removals alone change
  // the counted set: commit() subtracts an index entry removed below the position, exactly.
  struct BacklogTracker {
    std::array<std::string, 2> positions;  // {own-ttl index, inheriting index}
    int64_t items = 0;
    int64_t bytes = 0;
  };

  // Advances the tracker towards the expired bounds at now_micros, reading at most max_entries index entries;
  // returns whether both indexes are counted up to their bounds, and adds the entries read to *entries_read.
  Result<bool> advance_tracker(uint64_t crid, const ttl::ContainerTtlState& state, int64_t now_micros,
                               BacklogTracker& tracker, size_t max_entries, int64_t* entries_read) const;
  // Writes a GC batch (not synced; the sticky failure on error) and applies its effects.
  Status write(internal::StoreBatch& batch);

  // The keys deleted in one drained range since its compaction (see DrainedRange).
  struct KeySpan {
    std::string first;
    std::string last;
    int64_t deleted = 0;
    void add(std::string_view key);
    void add(const KeySpan& other);
  };
  using SpanKey = std::pair<uint64_t, KeyTag>;  // (crid, the key tag of the range)
  // Adds the spans of a batch that was written.
  void note_drained(const std::map<SpanKey, KeySpan>& spans);

  leveldb::DB* db_;
  const StoreReader& reader_;
  Status& sticky_;
  const size_t backlog_count_step_;
  std::unordered_map<uint64_t, LocalStats> local_stats_;   // cache of the persisted local stats
  std::unordered_map<uint64_t, BacklogTracker> trackers_;  // derived, rebuilt lazily after open
  // Where collect_expired's scans of a container's two expiry indexes start: every index key below is gone. Deleted
  // keys stay in LevelDB as tombstones until a compaction, and a scan from the start of the index would step over
  // all of them on every pass. New entries always sort after what was collected (their expiry instant or write time
  // is later than any applied time so far), so a cursor never hides a live entry. In memory: after open, the first
  // pass starts at the beginning again.
  // backlog() seeks the oldest expired entry from these too, for the same reason.
  std::unordered_map<uint64_t, std::array<std::string, 2>> collect_cursors_;  // crid -> {own, inherit}
  // Where reclaim_dropped resumes deleting a dropped container's keys (crid -> the last key it deleted): a seek from
  // the container's first key would step over every key deleted by the passes before. In memory, like the above.
  std::unordered_map<uint64_t, std::string> reclaim_cursors_;
  // Where drain_deleted_partitions resumes in a deleted partition: (crid, pk) -> (the delete's time, the last item
  // key it read). In memory; a newer delete of the partition (another time) starts it over.
  std::map<std::pair<uint64_t, std::string>, std::pair<int64_t, std::string>> drain_cursors_;
  // The drained ranges (see take_drained_range), and the dropped containers among their crids. In memory: tombstones
  // left behind by a node that stopped before compacting them wait for LevelDB's own compactions.
  std::map<SpanKey, KeySpan> drained_;
  std::set<uint64_t> drained_dropped_;
};

}  // namespace mayfly::storage
