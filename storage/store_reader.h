// StoreReader: the read side of the replicated state — items, lists, databases, containers, the address book, the
// exactly-once totals, the items expiring soon, and the query engine's ItemReader. Every method is const and never
// writes: the apply side (StateMachine, storage/state_machine.h) owns the store and hands out
// `const StoreReader&`, so code holding only a reader (RPC, query/, the metrics exporter) cannot apply or collect.
//
// Reads are at a replicated time the caller passes (normally applied().ts_micros): expired items are 404 / left
// out. A call that reads more than one key does so on one consistent LevelDB snapshot (ReadSnapshot). While a
// snapshot is being installed (InstallGate below), every read answers Unavailable — "this node is installing a
// snapshot; retry on another node" — except the apply side's own lookups (get_raw, get_item, find_container).
//
// Thread-safety: every const method may be called from any thread, concurrently with applies. The non-const
// invalidate_container_list() is the apply side's (driver thread). An ItemReader is used by one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "storage/command.h"
#include "storage/deleted_partitions.h"
#include "storage/holds.h"
#include "storage/layout.h"
#include "storage/records.h"
#include "storage/write_dedup.h"
#include "ttl/forecast.h"

namespace leveldb {
class DB;
class Snapshot;
}  // namespace leveldb

namespace mayfly::storage {

struct AppliedState {
  LogIndex index;
  int64_t ts_micros = 0;
};

// The applied index and time, which change together: set by the apply side after each write, read by any thread.
class AppliedCell {
 public:
  AppliedState get() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return applied_;
  }
  void set(AppliedState applied) {
    std::lock_guard<std::mutex> lock(mutex_);
    applied_ = applied;
  }

 private:
  mutable std::mutex mutex_;
  AppliedState applied_;
};

// Whether what a read sees is one whole state. A snapshot is installed in many bounded LevelDB writes
// (StateMachine::install_snapshot, "Installing a snapshot"), so between its first write and its last the store holds
// part of the old state and part of the new one, and no read may answer from it. The apply side makes the gate's
// count odd before the install's first write and even again after its last (it stays odd when an install stops
// half-way, and from the opening of a store an unfinished install left until that install is redone). A read takes a
// ticket (the count) before it reads and checks it once its LevelDB snapshot is taken — or after its last read, for
// one without a snapshot: an odd ticket or a count that moved means it may have seen a half state, and it answers
// Unavailable (503: retry elsewhere) instead. The check is exact, not a heuristic: an install's first write comes
// after the count moved, and LevelDB orders that write and the read's snapshot under its mutex.
// Thread-safety: close() and open() on the driver thread; the rest on any thread.
class InstallGate {
 public:
  uint64_t ticket() const { return count_.load(); }
  // OK when no install was under way at `ticket` and none began since.
  Status check(uint64_t ticket) const;
  bool installing() const { return count_.load() % 2 == 1; }
  void close();  // an install's writes begin (or the store holds an unfinished one)
  void open();   // its last write is done

 private:
  std::atomic<uint64_t> count_{0};
};

// One consistent LevelDB snapshot, released when this goes. Destroy it before the DB.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(leveldb::DB* db);
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  const leveldb::Snapshot* get() const { return snapshot_; }

 private:
  leveldb::DB* db_;
  const leveldb::Snapshot* snapshot_;
};

struct ListRequest {
  std::string database;
  std::string container;
  std::optional<std::string> partition_key_json;  // one partition, or the whole container
  size_t max_items = 100;                         // 1..kMaxListItems
  std::string continuation;                       // from the previous page's OpResult::continuation
};
inline constexpr size_t kMaxListItems = 1000;
inline constexpr size_t kMaxListPageBytes = 4 << 20;
// Item records one list_items page reads at most, expired ones included (they are skipped but reading them is the
// work): a page over a long run of expired, not yet collected items ends there, short or even empty, with a
// continuation that resumes after the last record read.
inline constexpr size_t kMaxListExamined = 10'000;

// Live items of one container whose expiry instant falls within each of the asked windows after the applied time:
// counts[i] is for windows_micros[i] (a forecast under the container's current policy).
struct ExpiringSoon {
  std::string database;
  std::string container;
  std::vector<int64_t> counts;
  bool truncated = false;  // the container's entry cap was reached: the counts are lower bounds
};

// What a defaultTtl change would expire (docs/ttl.md, "Containers": dry-run and the guard), at one snapshot and its
// applied replicated time: live items (and their record bytes) in the container now, and those of them that the new
// policy would have expired at once, within an hour and within a day of that time (cumulative: the hour includes
// the ones at once).
struct TtlChangePreview {
  uint64_t applied_index = 0;
  int64_t at_micros = 0;  // the applied replicated time the figures are for
  int64_t live_items = 0, live_bytes = 0;
  int64_t at_once_items = 0, at_once_bytes = 0;
  int64_t within_hour_items = 0, within_hour_bytes = 0;
  int64_t within_day_items = 0, within_day_bytes = 0;
  std::string to_json() const;
};

// The TTL forecast of one container on this node (docs/ttl.md, "Forecast"), read from one snapshot at its
// applied replicated time: live items and bytes by the minute / hour they expire (ttl/forecast.h) from the two
// expiry indexes — own-ttl entries by their instant, inheriting ones by write ts + the defaultTtl when the policy has
// a number of seconds — and the backlog: index entries already expired (watermarks included) but still stored here.
struct ExpiryForecast {
  uint64_t applied_index = 0;
  int64_t at_micros = 0;
  ContainerRecord container;
  ttl::ExpiryHistogram histogram;
  int64_t backlog_items = 0, backlog_bytes = 0;
  int64_t entries_read = 0;  // index entries read (the work, charged like a scan of that many entries)
  bool truncated = false;    // stopped at max_entries: the figures are lower bounds
};

struct ContainerInfo {
  std::string database;
  std::string container;
  ContainerRecord record;
};

// A consistent, read-only view of one container's items (one LevelDB snapshot), for the query engine (query/):
// walks in key order or by last-modified time (the `_ts` index) and point lookups. Only items alive at
// `now_micros` are ever handed out: expired ones are skipped and counted here, in storage, so no query path above
// can see one. Opened by StoreReader::open_item_reader (any thread); used by one thread; destroyed before the store.
class ItemReader {
 public:
  enum class Order : uint8_t { kKey, kTsAscending, kTsDescending };
  struct Visit {
    // Where the item sits in the walk, to resume strictly after it: the item key (key order) or the `_ts` index
    // key (ts order) without the container's prefix. Key-order positions compare (bytewise) like the walk.
    std::string_view position;
    std::string_view partition_key;  // canonical JSON of the key value
    std::string_view id;
    const ItemRecord& record;
  };
  struct Counters {
    int64_t items_loaded = 0;     // item records read and decoded, expired ones included (the work done)
    int64_t bytes_loaded = 0;
    int64_t index_entries = 0;    // `_ts` index entries walked
    int64_t expired_skipped = 0;  // items passed over because they had expired at now_micros
    int64_t deleted_skipped = 0;  // items passed over because their partition was deleted (not yet collected)
  };
  ItemReader(const ItemReader&) = delete;
  ItemReader& operator=(const ItemReader&) = delete;
  const ContainerRecord& container() const { return container_; }
  const Counters& counters() const { return counters_; }
  // The replicated time of the snapshot's own applied position. Callers evaluate at max(their time, this), so a
  // reader never judges a newer state by an older time (which could show an item the newer state saw expire).
  int64_t applied_ts_micros() const { return applied_ts_micros_; }
  // Visits alive items in `order` strictly after `resume_after` ("" from the start) until `visit` returns false.
  // `partition_key` (canonical) keeps the walk to one partition. InvalidArgument for a position that is not one.
  Status walk(Order order, const std::optional<std::string>& partition_key, std::string_view resume_after,
              int64_t now_micros, const std::function<bool(const Visit&)>& visit);
  // The item (pk, id) when it exists and is alive at now_micros.
  Result<std::optional<ItemRecord>> lookup(std::string_view partition_key, std::string_view id, int64_t now_micros);
  // `_hold` of an item handed out: the JSON array of the active legal holds covering it, "" when none.
  Result<std::string> hold_json(std::string_view partition_key, std::string_view id);

 private:
  friend class StoreReader;
  explicit ItemReader(leveldb::DB* db);
  Status walk_keys(const std::optional<std::string>& partition_key, std::string_view resume_after,
                   int64_t now_micros, const std::function<bool(const Visit&)>& visit);
  Status walk_ts(bool descending, const std::optional<std::string>& partition_key, std::string_view resume_after,
                 int64_t now_micros, const std::function<bool(const Visit&)>& visit);
  // Whether an item is gone: expired at now_micros or deleted with its partition (counted in counters_).
  Result<bool> gone(std::string_view partition_key, std::string_view id, const ItemRecord& record,
                    int64_t now_micros);
  // The container's holds at snapshot_ (loaded on first use; nullptr when none is active).
  Result<const HoldSet*> holds();
  leveldb::DB* db_;
  ReadSnapshot snapshot_;
  ContainerRecord container_;
  int64_t applied_ts_micros_ = 0;
  Counters counters_;
  std::unique_ptr<PartitionDeletes> deletes_;  // at snapshot_, for container_ (made on first use)
  std::unique_ptr<HoldSet> holds_;             // likewise, when container_ has active holds
};

class StoreReader {
 public:
  // `db`, `applied` and `gate` belong to the apply side and outlive the reader.
  StoreReader(leveldb::DB* db, const AppliedCell& applied, const InstallGate& gate)
      : db_(db), applied_(applied), gate_(gate) {}
  StoreReader(const StoreReader&) = delete;
  StoreReader& operator=(const StoreReader&) = delete;

  // The applied index and time, as the apply side last published them.
  AppliedState applied() const { return applied_.get(); }

  // Reads at replicated time `now_micros` (normally the applied time). Expired items are 404 / left out.
  OpResult read_item(std::string_view database, std::string_view container, std::string_view partition_key_json,
                     std::string_view id, int64_t now_micros) const;
  OpResult list_items(const ListRequest& request, int64_t now_micros) const;
  OpResult read_database(std::string_view database) const;
  OpResult list_databases() const;
  // The account's provisioned throughputs (api::ListOffers): [{"database","container"?,"rid","throughput","ts"}] for
  // every database with shared throughput and every container with its own, in key order.
  OpResult list_offers() const;
  // Legal holds (storage/holds.h): a JSON array of the holds of one container, of every container of `database`
  // (container empty) or of every container (both empty); active ones only unless include_released.
  OpResult list_holds(std::string_view database, std::string_view container, bool include_released) const;
  // The holds' audit trail, oldest first, `max_items` a page (continuation: the next entry's log index).
  OpResult list_hold_audit(size_t max_items, std::string_view continuation) const;
  OpResult read_container(std::string_view database, std::string_view container) const;
  // The container's settings, or nullopt when it (or its database) does not exist — or while a snapshot is being
  // installed (the read that follows answers Unavailable).
  std::optional<ContainerRecord> container_record(std::string_view database, std::string_view container) const;
  OpResult list_containers(std::string_view database) const;

  // The exactly-once table's totals (storage/write_dedup.h).
  Result<DedupTotals> dedup_totals() const;
  // One key's share of it (storage::dedup_owner_of), zeros when it holds nothing.
  Result<DedupTotals> dedup_key_totals(uint64_t owner) const;

  // The replicated address book: node id -> HOST:PORT, as set by kSetMemberAddress commands (empty while a snapshot
  // is being installed: addresses in --peers still work).
  std::map<NodeId, std::string> member_addresses() const;

  // Every container, sorted by (database, container) name (std::string order), for the garbage collector's
  // schedule and metrics. container_list() shares the cached list instead of copying it: the same pointer until a
  // container command or a snapshot install changes the set (callers compare pointers to see a change).
  Result<std::vector<ContainerInfo>> containers() const;
  Result<std::shared_ptr<const std::vector<ContainerInfo>>> container_list() const;
  // The apply side, after a write that may change the set of containers (driver thread).
  void invalidate_container_list();

  // For every container with TTL on: how many live items expire within each window after the applied time, from one
  // consistent LevelDB snapshot (the applied time is read from it too). The work is one index scan per container
  // over the items expiring within the largest window, at most `max_entries_per_container` index entries each (past
  // that the counts are lower bounds and `truncated` says so: a metrics scrape never walks a huge index).
  Result<std::vector<ExpiringSoon>> expiring_soon(const std::vector<int64_t>& windows_micros,
                                                  size_t max_entries_per_container = SIZE_MAX) const;

  // What changing the container's defaultTtl to `policy` would expire (TtlChangePreview), read from one snapshot:
  // one pass over the container's items (ttl::alive under the current state and under ttl::change_policy's result).
  // kNotFound when the container does not exist.
  Result<TtlChangePreview> preview_default_ttl(std::string_view database, std::string_view container,
                                               ttl::DefaultTtl policy) const;

  // The container's ExpiryForecast, reading at most `max_entries` expiry index entries: the own-ttl index's next day,
  // then the inheriting index's, then the backlog of both. kNotFound when the container does not exist.
  Result<ExpiryForecast> forecast_expiry(std::string_view database, std::string_view container,
                                         size_t max_entries) const;

  // kNotFound when the database or container does not exist; a storage failure when it cannot be read.
  Result<std::unique_ptr<ItemReader>> open_item_reader(std::string_view database, std::string_view container) const;

  // Lookups at `snapshot`, or (nullptr) at the live DB — which the apply side uses, between its own writes. Not
  // gated (the apply side never runs during an install); the reads above that use them are.
  Result<std::optional<std::string>> get_raw(const std::string& key, const ReadSnapshot* snapshot) const;
  Result<std::optional<ItemRecord>> get_item(const std::string& key, const ReadSnapshot* snapshot) const;
  // kNotFound (saying which) when the container or its database is missing; a storage failure when the record
  // cannot be read or decoded.
  Result<ContainerRecord> find_container(std::string_view database, std::string_view container,
                                         const ReadSnapshot* snapshot) const;

 private:
  leveldb::DB* db_;
  const AppliedCell& applied_;
  const InstallGate& gate_;
  // The container list, rebuilt after any apply that can change it: scanning the container keys ends by stepping
  // into the item keys after them, over every item tombstone left by deletions.
  mutable std::mutex containers_mutex_;
  mutable std::shared_ptr<const std::vector<ContainerInfo>> containers_cache_;
};

// A container's JSON as the API returns it (create, replace, read and list containers).
std::string render_container(std::string_view database, std::string_view id, const ContainerRecord& record);

}  // namespace mayfly::storage
