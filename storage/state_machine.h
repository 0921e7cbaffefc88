// StateMachine: Mayfly's replicated state on LevelDB — databases, containers, items, expiry indexes — and the
// deterministic apply of committed commands. It owns the store and hands out its two other sides as types, so the
// thread that may call a method is the type it is called on:
//   - StateMachine (this file): apply, snapshot export/install, dump — the driver thread;
//   - ExpiryKeeper (expiry() — storage/expiry_keeper.h): garbage collection, backlog and container figures, the
//     next expiry deadline, reclaiming dropped containers — the driver thread;
//   - StoreReader (reader() — storage/store_reader.h): every read, all const — any thread, concurrently with
//     applies, each call on one consistent LevelDB snapshot.
//
// Determinism: apply(command, index, ts) uses only its arguments and the stored state — never a clock — so every
// replica that applies the same log reaches byte-identical replicated state (layout.h is_replicated_tag; see
// storage/layout.h). Each apply is one LevelDB WriteBatch that also records the applied index and time (the applies
// of one group written together as one), so after a crash the state is exactly that of the last applied command, and
// a rejected command changes nothing but those. Installing a snapshot is the exception: it is many bounded writes,
// made crash-safe by a marker (see install_snapshot).
// Expiry is decided at the time passed in: writes at the entry's ts, reads at the T the caller chooses (the node's
// applied time). Garbage collection deletes only items expired at or before the applied time, and never changes
// what a read at any time >= the applied time sees.
//
// Thread-safety: the non-const methods, expiry() and open_view() on one thread (the node's driver); reader(),
// applied() and a View's export_snapshot() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "storage/apply_group.h"
#include "storage/changefeed.h"
#include "storage/command.h"
#include "storage/expiry_keeper.h"
#include "storage/holds.h"
#include "storage/layout.h"
#include "storage/records.h"
#include "storage/store_reader.h"
#include "storage/write_dedup.h"

namespace leveldb {
class DB;
class Env;
class Cache;
class FilterPolicy;
}  // namespace leveldb

namespace mayfly::storage {

inline constexpr int kDefaultMaxOpenTables = 990;
inline constexpr size_t kDefaultTableBlockBytes = 16 << 10;

struct StoreOptions {
  std::string path;                 // the LevelDB directory; created when missing
  leveldb::Env* env = nullptr;      // nullptr: the real file system; tests pass leveldb's in-memory Env
  size_t block_cache_bytes = 64 << 20;
  size_t write_buffer_bytes = 16 << 20;
  // LevelDB's table cache: each open table file holds its index and Bloom filter in memory, so this bounds what the
  // store keeps beside the block cache as it grows (docs/operations.md, Memory). LevelDB keeps ten more descriptors.
  int max_open_tables = kDefaultMaxOpenTables;
  // The uncompressed size of a table's data blocks: one index entry per block, so larger blocks mean a smaller index
  // (a point read decodes one block).
  size_t table_block_bytes = kDefaultTableBlockBytes;
  // fsync each apply. Off by default: the raft log is the durable record and applies are replayed from it after a
  // crash; each apply is still atomic.
  bool sync_applies = false;
  // At most this many expiry index entries counted by one backlog() call that is not given its own limit. After a
  // restart or a defaultTtl change the expired part can be millions of entries, and backlog() runs on the driver
  // thread between Raft ticks: counting resumes where it stopped on the next call (Backlog::complete says when it
  // is done). ~0.7 µs an entry, so the default holds the caller for ~7 ms.
  size_t backlog_count_step = kBacklogCountStep;
  // Applies read the exactly-once table from its mirror in memory (storage/write_dedup.h, "The table in memory")
  // instead of LevelDB. Tests turn it off to hold the mirror's verdicts and writes to those of the table read from
  // LevelDB; what is stored is the same either way.
  bool dedup_in_memory = true;
  // A snapshot is installed in LevelDB batches of about this many bytes (install_snapshot): what an install holds in
  // memory is one batch and one piece of the snapshot, whatever the snapshot's size.
  size_t install_batch_bytes = 4 << 20;
  // Tests: called after each batch of an install is written but the last, with its number (1 is the marker's). An
  // error stops the install right there, as if the process had died (the store keeps the marker and is stopped).
  std::function<Status(int batch)> after_install_batch;
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
  // Applies between these two calls are written to LevelDB together, as one batch, at end_apply_group() (or
  // earlier, when an apply needs to scan the store or is not an item write or time entry); reads on other threads
  // and applied() see them only then. Replica::process_ready groups the committed entries of each Ready. A Status
  // error: the write failed (sticky, as for apply).
  void begin_apply_group();
  Status end_apply_group();
  // The applied index and time (the same as reader().applied()).
  AppliedState applied() const { return reader_.applied(); }
  // Makes everything applied so far durable: one synced LevelDB write of the applied state (LevelDB's log is
  // sequential, so every earlier unsynced write becomes durable with it). After it returns, a crash — of the process or
  // of the machine — reopens the store at applied() or later, so the Raft log may be compacted up to it (Replica).
  // Driver thread, outside an apply group. A Status error is sticky, as for apply.
  Status checkpoint();

  // The read side: hand this, not the StateMachine, to code on other threads.
  const StoreReader& reader() const { return reader_; }
  // The applied state's record of a container, for the leader's checks before it proposes an item write (driver
  // thread, between applies): from the apply path's cache, so a LevelDB Get only after a database or container
  // change. nullopt: no such container (or it could not be read: reader().read_container says which).
  std::optional<ContainerRecord> container_for_write(const std::string& database, const std::string& container);
  // The change feed's reader (storage/changefeed.h): const, any thread.
  const ChangeFeedReader& change_feed() const { return change_feed_; }
  // The garbage collector's side (driver thread).
  ExpiryKeeper& expiry() { return expiry_; }
  const ExpiryKeeper& expiry() const { return expiry_; }

  // Snapshots for Raft (storage/state_snapshot.cc): the replicated state (every replicated key, applied index and
  // time included) as one blob, taken from a consistent LevelDB snapshot; and installing one, which replaces the
  // whole state machine (node-local figures are recomputed from the installed items).
  Result<std::string> export_snapshot() const;
  // Installing a snapshot. The snapshot is read from `source` a piece at a time (it is asked for up to `max_bytes`
  // and returns any non-empty piece, or "" at the end; records may straddle pieces) and written in bounded batches
  // (StoreOptions::install_batch_bytes), so memory stays at one piece and one batch whatever the snapshot's size:
  //   1. a synced write of the install marker (storage/layout.h, 21) naming the snapshot's index — from here on,
  //      every read (StoreReader, the change feed, the query engine's ItemReader) answers Unavailable (InstallGate);
  //   2. every state-machine key but the marker deleted, batch by batch;
  //   3. the snapshot's keys put, batch by batch, counting each container's items and bytes;
  //   4. one last write: the recomputed local stats, the applied state (meta) and the marker's removal. Only this
  //      write makes the new state the applied one; then the caches are dropped and reads resume.
  // Every batch is synced: LevelDB fsyncs only its current log file, and one closed at a memtable switch is never
  // fsync'd, so an unsynced earlier batch could be lost in a crash that keeps the synced last one.
  // Before step 1 the snapshot's version and its first record — the applied state, which the export writes first
  // (key order) — are checked (and the index against `expect_index`, when given): a snapshot refused there changes
  // nothing. Corrupt framing found later returns Corruption with the marker left in place: the store is stopped
  // (sticky), as after any failed write, and reads stay Unavailable — it holds half a state.
  // A store opened with the marker present (unfinished_install()) applies, collects and reads nothing (Unavailable)
  // until the install is redone from the same snapshot: Replica::open does that from the raft log's snapshot file.
  using SnapshotSource = std::function<Result<std::string>(size_t max_bytes)>;
  Status install_snapshot(const SnapshotSource& source, std::optional<LogIndex> expect_index = std::nullopt);
  // The same from bytes in memory (tests, restore), in pieces through the same code.
  Status install_snapshot(std::string_view data, std::optional<LogIndex> expect_index = std::nullopt);
  // Recomputes from the store what install_snapshot's last step derives from the installed keys, for a store whose
  // replicated keys were changed in bulk outside apply (storage/restore.cc): each container's node-local figures
  // (items and bytes, by one scan of the items: memory is one entry per container, not per item) replace every stored
  // one in one synced write; then the applied state is read back from the store, the caches are dropped and the
  // applied state is published, as after an install. Driver thread, outside an apply group; nothing else may use the
  // store meanwhile. A write error is sticky, as for apply.
  Status recompute_local_state();
  // The index of a snapshot whose install began and did not finish (the marker is in the store), if any.
  std::optional<LogIndex> unfinished_install() const { return unfinished_install_; }

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
    // The same bytes, handed to `write` in pieces of about `piece_bytes` (memory stays at one piece: online backups,
    // storage/backup_file.h); counts the items exported into `figures` when given. Stops at write's first error.
    using SnapshotWriter = std::function<Status(std::string_view piece)>;
    struct SnapshotFigures {
      uint64_t items = 0;
      uint64_t item_bytes = 0;  // keys and values of the items
    };
    Status export_snapshot_to(const SnapshotWriter& write, size_t piece_bytes, SnapshotFigures* figures) const;

   private:
    friend class StateMachine;
    View(leveldb::DB* db, AppliedState applied, std::atomic<int>* open_views);
    leveldb::DB* db_;
    ReadSnapshot snapshot_;
    AppliedState applied_;
    std::atomic<int>* open_views_;
  };
  std::unique_ptr<View> open_view() const;
  // Views not yet destroyed. The store asserts there are none when it closes: a View that outlived it would release
  // its LevelDB snapshot on a closed database.
  int open_views() const { return open_views_.load(); }

  // Replicated (or, with include_local, all state-machine) key/value pairs in key order. For tests and tools.
  Result<std::vector<std::pair<std::string, std::string>>> dump(bool include_local) const;
  // The LevelDB handle (the Raft log only reads it to migrate a log an earlier version kept here).
  leveldb::DB* leveldb() const { return db_.get(); }
  // The exactly-once table's mirror as it is now (tests: what it has loaded). Driver thread.
  const DedupMirror& dedup_mirror() const { return dedup_mirror_; }


 private:
  struct ApplyContext;

  StateMachine(const StoreOptions& options, std::unique_ptr<leveldb::Cache> cache,
               std::unique_ptr<const leveldb::FilterPolicy> filter, std::unique_ptr<leveldb::DB> db, MetaState meta,
               std::optional<LogIndex> unfinished_install);

  OpResult dispatch(const Command& command, int64_t ts, ApplyContext& context);
  OpResult create_database(const Command& command, int64_t ts, ApplyContext& context);
  OpResult delete_database(const Command& command, ApplyContext& context);
  OpResult update_database(const Command& command, int64_t ts, ApplyContext& context);
  // The database record an apply reads; nullopt with the answer in `refusal` (404, or a storage failure recorded in
  // `context`) when there is none to read.
  std::optional<DatabaseRecord> apply_database(const std::string& name, ApplyContext& context, OpResult& refusal);
  // A transactional batch: every operation applies, in order, each reading what the earlier ones wrote, or none
  // does (207 with the failed operation's status and 424 for the others).
  OpResult execute_batch(const Command& command, int64_t ts, ApplyContext& context);
  OpResult create_container(const Command& command, int64_t ts, ApplyContext& context);
  OpResult update_container(const Command& command, int64_t ts, ApplyContext& context);
  OpResult delete_container(const Command& command, ApplyContext& context);
  OpResult write_item(const Command& command, int64_t ts, ApplyContext& context);
  OpResult delete_item(const Command& command, int64_t ts, ApplyContext& context);
  // Delete by partition key (storage/deleted_partitions.h); refused on a container whose change feed is on.
  OpResult delete_partition(const Command& command, int64_t ts, ApplyContext& context);
  OpResult set_member_address(const Command& command, ApplyContext& context);
  // Legal holds (storage/holds.h).
  OpResult set_hold(const Command& command, int64_t ts, ApplyContext& context);
  OpResult release_hold(const Command& command, int64_t ts, ApplyContext& context);
  // The container's holds for an apply: nullptr when none is active (the common case: no read at all). Read from the
  // live DB: hold commands are never grouped, so no hold is waiting in an open group. Cached like apply_containers_.
  Result<const HoldSet*> apply_holds(const ContainerRecord& container);
  // 409: `what` cannot be `verb` (deleted, changed) while the container has active holds, naming them.
  OpResult holds_block(const ContainerRecord& container, const std::string& what, const char* verb,
                       ApplyContext& context);

  struct StoredItem {
    ItemRecord record;
    size_t bytes = 0;  // key and value, as counted in stats and the backlog
  };
  Result<std::optional<StoredItem>> load_item(const std::string& key) const;  // the live DB (apply)
  // A live item removed by a write keeps its warning in the change feed (state_machine.cc, warning_image_key).
  Status keep_warning_image(const ContainerRecord& container, std::string_view partition_key, std::string_view id,
                            const ItemRecord& record, int64_t ts, ApplyContext& context) const;
  // Whether a stored item was deleted with its partition (and not yet removed by the collector): it is then absent.
  Result<bool> hidden_by_partition_delete(const ContainerRecord& container, std::string_view partition_key,
                                          const ItemRecord& record) const;
  // Writes the apply's batch, or adds it to the open group (`grouped`).
  Status commit(ApplyContext& context, bool grouped);
  static bool groupable(CommandType type);
  Status write_group();
  // The container an item write or delete applies to, from apply_containers_ or the live DB (only applies of database
  // and container commands change container records, and they clear the cache).
  Result<ContainerRecord> apply_container(const std::string& database, const std::string& container);
  // A point read for the apply path: the running batch's writes, the open group's, then the live DB.
  Result<std::optional<std::string>> apply_get(const std::string& key) const;
  void publish_applied();
  // Reads a snapshot's records from a SnapshotSource (storage/state_snapshot.cc).
  class SnapshotDecoder;
  // Steps 1-4 of install_snapshot, after its checks; `meta_bytes` is the snapshot's applied state record.
  Status write_snapshot(SnapshotDecoder& decoder, const MetaState& meta, const std::string& meta_bytes);
  // The exactly-once table reads through the group (storage/write_dedup.h).
  class GroupReads final : public ApplyReads {
   public:
    explicit GroupReads(StateMachine& machine) : machine_(machine) {}
    Result<std::optional<std::string>> get(const std::string& key) override;
    Status before_scan() override;

   private:
    StateMachine& machine_;
  };

  StoreOptions options_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;  // bloom filters: point reads of absent keys skip files
  std::unique_ptr<leveldb::DB> db_;
  MetaState meta_;  // driver thread only
  // The writes of the transactional batch being applied (key -> value, nullopt: deleted), so each of its operations
  // reads what the earlier ones wrote; empty outside execute_batch. Driver thread only.
  std::unordered_map<std::string, std::optional<std::string>> batch_writes_;
  // The exactly-once table in memory (storage/write_dedup.h, "The table in memory"; unused without
  // StoreOptions::dedup_in_memory): loaded by the first apply that reads the table, moved by each apply once its
  // batch is committed (written, or in the open group); dropped when a snapshot replaces the store and when a write
  // fails (the machine is stopped then). Driver thread only.
  DedupMirror dedup_mirror_;
  // Container records found by item applies, by container key: a LevelDB Get and a decode less per write. Cleared
  // after every database or container command and by snapshot installs. Driver thread only.
  std::unordered_map<std::string, ContainerRecord> apply_containers_;
  // Holds found by applies, by crid (apply_holds); cleared with apply_containers_. Driver thread only.
  std::unordered_map<uint64_t, HoldSet> apply_holds_;
  bool grouping_ = false;  // between begin_apply_group and end_apply_group
  ApplyGroup group_;       // applies not yet written (driver thread only)
  AppliedCell applied_;  // published after each write, for the reader on any thread
  InstallGate install_gate_;  // closed while a snapshot is half-installed (install_snapshot), for the readers
  // An install that began and did not finish: found at open (the marker), or stopped half-way in this process.
  std::optional<LogIndex> unfinished_install_;
  // The store was opened with an unfinished install: sticky_ says so, and install_snapshot may run (once) anyway.
  bool redo_install_ = false;
  StoreReader reader_;
  ChangeFeedReader change_feed_;
  // A failed write: every later apply, install and GC write fails with it. Also set (Unavailable) while the store
  // holds an unfinished install from an earlier run, until it is redone.
  Status sticky_;
  mutable std::atomic<int> open_views_{0};
  ExpiryKeeper expiry_;
};

}  // namespace mayfly::storage
