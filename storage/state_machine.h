// StateMachine: Mayfly's replicated state on LevelDB — databases, containers, items, expiry indexes — and the
// deterministic apply of committed commands, reads at a replicated time, and the garbage-collection primitives.
//
// Determinism: apply(command, index, ts) uses only its arguments and the stored state — never a clock — so every
// replica that applies the same log reaches byte-identical replicated state (key prefixes below 0x10; see
// storage/layout.h). Each apply is one LevelDB WriteBatch that also records the applied index and time, so after a
// crash the state is exactly that of the last applied command, and a rejected command changes nothing but those.
// Expiry is decided at the time passed in: writes at the entry's ts, reads at the T the caller chooses (the node's
// applied time). Garbage collection deletes only items expired at or before the applied time, and never changes
// what a read at any time >= the applied time sees.
//
// Thread-safety: apply, collect_expired, backlog, container_stats and reclaim_dropped must be called from one thread
// (the node's driver). The read_* / list_* methods may be called from any thread concurrently with it; each sees one
// consistent LevelDB snapshot.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "storage/command.h"
#include "storage/layout.h"
#include "storage/store_reader.h"
#include "storage/write_dedup.h"

namespace leveldb {
class DB;
class Env;
class Cache;
class FilterPolicy;
}  // namespace leveldb

namespace mayfly::storage {

inline constexpr size_t kBacklogCountStep = 10'000;

struct StoreOptions {
  std::string path;                 // the LevelDB directory; created when missing
  leveldb::Env* env = nullptr;      // nullptr: the real file system; tests pass leveldb's in-memory Env
  size_t block_cache_bytes = 64 << 20;
  size_t write_buffer_bytes = 16 << 20;
  // fsync each apply. Off by default: the raft log is the durable record and applies are replayed from it after a
  // crash; each apply is still atomic.
  bool sync_applies = false;
  // At most this many expiry index entries counted by one backlog() call that is not given its own limit. After a
  // restart or a defaultTtl change the expired part can be millions of entries, and backlog() runs on the driver
  // thread between Raft ticks: counting resumes where it stopped on the next call (Backlog::complete says when it
  // is done). ~0.7 µs an entry, so the default holds the caller for ~7 ms.
  size_t backlog_count_step = kBacklogCountStep;
};

// What one collect_expired call reclaimed.
struct CollectResult {
  int64_t items = 0;
  int64_t bytes = 0;
  std::vector<int64_t> expiry_instants_micros;  // of each deleted item, for deletion-lag figures
  bool more = false;                            // stopped at max_items: more expired items remain
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
  // What users can see: stored minus expired (spec §4: expired items are not billed). An upper bound while
  // backlog.complete is false.
  int64_t live_items = 0;
  int64_t live_bytes = 0;
};

class StateMachine {
 public:
  static Result<std::unique_ptr<StateMachine>> open(const StoreOptions& options);
  ~StateMachine();
  StateMachine(const StateMachine&) = delete;
  StateMachine& operator=(const StateMachine&) = delete;

  // Applies the committed command at log position `index` (> applied index) and replicated time `ts_micros`
  // (>= applied time). The OpResult is the business outcome (201, 404, 409, ...); a Status error means the disk
  // failed, and every later call fails with it too (sticky: the state on disk is unknown).
  Result<OpResult> apply(const Command& command, LogIndex index, int64_t ts_micros);
  // The same for an encoded command; undecodable bytes are a 400 result (deterministic on every replica).
  Result<OpResult> apply_encoded(std::string_view command_bytes, LogIndex index, int64_t ts_micros);
  // The applied index and time (the same as reader().applied()).
  AppliedState applied() const { return reader_.applied(); }
  // The read side: hand this, not the StateMachine, to code on other threads.
  const StoreReader& reader() const { return reader_; }

  // Physically deletes up to `max_items` items of the container that are expired at `up_to_micros`, oldest expiry
  // first. up_to_micros must not exceed the applied time (spec §7). Node-local: not replicated.
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
  // Deletes up to max_keys keys of dropped containers; returns how many it deleted.
  Result<int64_t> reclaim_dropped(size_t max_keys);

  // Snapshots for Raft: the replicated state (every replicated key, applied index and time included) as one blob,
  // taken from a consistent LevelDB snapshot; and installing one, which replaces the whole state machine (node-local
  // figures are recomputed from the installed items). Installing is one atomic write.
  Result<std::string> export_snapshot() const;
  Status install_snapshot(std::string_view data);

  // A consistent, read-only view of the state at the current applied position, for exporting a snapshot on another
  // thread while applies go on. Open it on the driver thread; export it anywhere; destroy it before the store.
  class View {
   public:
    ~View();
    View(const View&) = delete;
    View& operator=(const View&) = delete;
    AppliedState applied() const { return applied_; }
    // The snapshot blob (the same format as export_snapshot). Thread-safe.
    Result<std::string> export_snapshot() const;

   private:
    friend class StateMachine;
    View(leveldb::DB* db, AppliedState applied);
    leveldb::DB* db_;
    ReadSnapshot snapshot_;
    AppliedState applied_;
  };
  std::unique_ptr<View> open_view() const;

  // Replicated (or, with include_local, all state-machine) key/value pairs in key order. For tests and tools.
  Result<std::vector<std::pair<std::string, std::string>>> dump(bool include_local) const;
  // The LevelDB handle, shared with the raft log (which uses its own key prefixes).
  leveldb::DB* leveldb() const { return db_.get(); }

 private:
  struct ApplyContext;
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
  enum class IndexKind { kNone, kOwn, kInherit };
  struct IndexEntry {
    IndexKind kind = IndexKind::kNone;
    std::string key;
    int64_t sort_micros = 0;
  };

  StateMachine(const StoreOptions& options, std::unique_ptr<leveldb::Cache> cache,
               std::unique_ptr<const leveldb::FilterPolicy> filter, std::unique_ptr<leveldb::DB> db, MetaState meta);

  OpResult dispatch(const Command& command, int64_t ts, ApplyContext& context);
  OpResult create_database(const Command& command, int64_t ts, ApplyContext& context);
  OpResult delete_database(const Command& command, ApplyContext& context);
  OpResult create_container(const Command& command, int64_t ts, ApplyContext& context);
  OpResult update_container(const Command& command, int64_t ts, ApplyContext& context);
  OpResult delete_container(const Command& command, ApplyContext& context);
  OpResult write_item(const Command& command, int64_t ts, ApplyContext& context);
  OpResult delete_item(const Command& command, int64_t ts, ApplyContext& context);
  OpResult set_member_address(const Command& command, ApplyContext& context);

  struct StoredItem {
    ItemRecord record;
    size_t bytes = 0;  // key and value, as counted in stats and the backlog
  };
  Result<std::optional<StoredItem>> load_item(const std::string& key) const;  // the live DB (apply)

  static IndexEntry index_entry_for(uint64_t crid, std::string_view partition_key, std::string_view id,
                                    const ItemRecord& record);
  // Removes a stored item and its index entry inside an apply/GC batch.
  void remove_stored_item(uint64_t crid, const std::string& key, std::string_view partition_key, std::string_view id,
                          const ItemRecord& record, size_t record_bytes, ApplyContext& context);
  LocalStats& local_stats(uint64_t crid);
  // Advances the tracker towards the expired bounds at now_micros, reading at most max_entries index entries;
  // returns whether both indexes are counted up to their bounds, and adds the entries read to *entries_read.
  Result<bool> advance_tracker(uint64_t crid, const ttl::ContainerTtlState& state, int64_t now_micros,
                               BacklogTracker& tracker, size_t max_entries, int64_t* entries_read) const;
  Status commit(ApplyContext& context, bool sync);
  void publish_applied();

  StoreOptions options_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;  // bloom filters: point reads of absent keys skip files
  std::unique_ptr<leveldb::DB> db_;
  MetaState meta_;  // driver thread only
  AppliedCell applied_;  // published after each write, for the reader on any thread
  StoreReader reader_;
  Status sticky_;
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
};

}  // namespace mayfly::storage
