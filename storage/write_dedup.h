// Exactly-once writes (the Raft dissertation's §6.3 client sessions): the replicated table of write outcomes that
// lets the state machine answer a re-sent write with the outcome of its first execution instead of applying it again.
//
// A client draws a random 64-bit id and numbers its writes 1, 2, 3, ... Every write carries (client, sequence) and
// the lowest sequence the client still waits for an answer to (`first_unacknowledged`): outcomes below it have
// reached the client and are dropped, so the table holds only the writes in flight. A re-sent write also says so
// (`retry`). The table lives in the state machine's LevelDB under replicated prefixes, so it is written in the same
// batch as the write it records, travels in snapshots, and is byte-identical on every replica:
//
//   0A table_client            -> ClientRecord (last active time, first_unacknowledged, results kept, their bytes;
//                                 version 2 also the owner)
//   0B table_client sequence   -> the write's outcome (status, substatus, message, body, etag, _ts)
//   0C last_active_min table_client -> ""      (clients by the minute of their last activity: expiry, eviction)
//   0D                         -> DedupTotals  (clients, result bytes, the last time a record was evicted)
//   0D owner                   -> DedupTotals  (one key's clients and result bytes: its share; no eviction time)
//
// Write ids are bound to the key that made them. A write's owner (WriteId::owner) is the fingerprint of the key's
// name (dedup_owner_of), set by the node that authenticated the client; 0 is the anonymous identity (open nodes,
// and every command logged before owners existed). A client is stored under its table_client: its own id for the
// anonymous owner (so records written before owners existed keep their keys), else the first 64 bits of
// SHA-256(owner, client) (dedup_table_client). A key that learns another key's client id therefore lands on a
// record of its own: it cannot be answered with the victim's outcomes, acknowledge them away, or make the victim's
// write look like a duplicate.
//
// Every rule below depends only on the stored table and the entry's replicated time, never on a clock or a limit a
// node is configured with: each replica reaches the same verdict.
//
// - A client idle for kDedupWindowMicros of replicated time (to the minute: 10 to 11 minutes) is forgotten (checked
//   on every kDedupExpiryEvery-th log entry, at most kDedupExpiryBatch clients at a time). The library never re-sends a write that long after first
//   sending it (client.h), so no retry it makes can find its client forgotten that way.
// - At most kDedupMaxClients clients: a new client beyond evicts the least recently active one and records the time.
//   A retry (`retry`) from a client the table does not know, within the window after an eviction, is refused with
//   503 kDedupSubstatusRecordLost: its first attempt may have been applied and its outcome evicted, so applying it
//   could apply it twice. Without evictions, an unknown client's retry means its first attempt never applied.
// - A client may have at most kDedupMaxUnacknowledged outcomes and kDedupMaxClientBytes bytes of them kept, and all
//   clients together kDedupMaxTotalBytes: beyond, a write is refused with 429 kDedupSubstatusTableFull (retry after
//   the client's earlier writes are answered). Refusals change nothing and are not recorded.
// - The table is shared fairly between keys: the clients of one key (owner != 0) may hold at most
//   kDedupMaxClientsPerKey clients and kDedupMaxKeyBytes bytes of outcomes (1/kDedupKeyShareDivisor of the table
//   each). Beyond, that key's writes get 429 kDedupSubstatusTableFull and nothing is applied, while other keys'
//   writes keep applying; so no single key can fill the table (its bytes) or push other keys' clients out of it
//   (its clients: one key alone never reaches kDedupMaxClients). The anonymous owner has no share of its own: on an
//   open node it is every client, and on a node with keys only records from before owners existed and writes
//   forwarded by a peer that did not prove the cluster secret are anonymous.
// - Records from before owners existed (version 1, all anonymous) map as they are: the anonymous owner's clients.
//   A retry of a key's write that finds no record of its own, while an anonymous record of the same client id holds
//   an outcome for that sequence, is answered with that outcome (a write first sent before the upgrade and re-sent
//   after it is not applied twice); that answer changes nothing in the table.
// - A sequence below the client's first_unacknowledged was answered already and its outcome dropped: 400, nothing
//   changes (only a delayed copy of an old request can arrive like that).
//
// The table in memory (DedupMirror). What LevelDB stores is the table; the state machine also keeps a mirror of it
// so that the apply of a write reads memory instead of LevelDB (a client's record, which outcomes it keeps, the
// totals, the activity index), and expiry and eviction walk an in-memory index instead of opening an iterator. Only
// reads change: every apply writes the same keys and values, in the same batch, with or without a mirror.
// - What it holds: the 0C activity index (every client in the table, by (minute, table_client): the order of the 0C
//   keys), the totals and every stored key share (0D), and for each client it has loaded its decoded record (0A)
//   and its outcomes' sequences with their stored bytes (key and value). Not the outcomes themselves: a duplicate
//   is rare, and its outcome is read from LevelDB (through the open apply group) when one arrives.
// - Loading: the index and the totals on first use (one pass over 0C and 0D, after the apply group is written out);
//   a client's record and outcome sizes when an apply first touches that client (a Get of its 0A record and one
//   prefix scan of its 0B keys). A client missing from the index is not in the table: the table keeps exactly one
//   activity entry per client record, so absence needs no read. A client the mirror has not loaded has not changed
//   since the index was loaded (every change to the table goes through the mirror), so its keys are all in LevelDB
//   and the prefix scan needs no write of the open group.
// - Changes: a DedupApply never changes what the mirror holds of the table, it only loads stored state into it;
//   DedupApply::committed(), called once the apply's batch is written or added to the apply group, moves the mirror
//   to what that batch stores. An apply whose batch is not committed leaves the mirror as it was. An apply that
//   fails stops the state machine (sticky): the mirror is not read again, and where it may be ahead of the store (a
//   failed write of a batch or of the group) it is dropped.
// - Dropping: whenever the store changes outside an apply (a snapshot installed; a restore installs one) and when a
//   write fails; the next apply that reads the table loads it again.
// - Bounds: the index has one entry per client in the table, the loaded clients are at most as many, the outcome
//   sizes one per outcome kept and the shares one per key with clients in the table: the table's own bounds
//   (kDedupMaxClients, kDedupMaxTotalBytes) bound the mirror.
// - Determinism: everything the rules walk in order is an ordered container in LevelDB's key order (the index by
//   (minute, table_client), which sorts as the 0C keys do since codec::put_i64_be preserves order; a client's
//   outcomes by sequence as its 0B keys sort), so the mirror yields the same clients, in the same order, as a scan
//   of LevelDB would: the same verdicts and the same batches. Expiry and eviction walk the index as stored before
//   the entry, as the scan did.
//   A damaged table (an activity entry without a record, or in another minute than its record says) is a
//   corruption error when the mirror meets it.
//
// Thread-safety: a DedupApply is made, used and dropped within one StateMachine::apply on the driver thread; the
// DedupMirror is the state machine's, driver thread only. read_dedup_totals may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/wire.h"
#include "storage/command.h"

namespace leveldb {
class DB;
class Iterator;
class WriteBatch;
}  // namespace leveldb

namespace mayfly::storage {

inline constexpr int64_t kDedupWindowMicros = 10 * 60 * 1'000'000LL;  // 10 minutes of replicated time
inline constexpr int64_t kDedupActivityBucketMicros = 60 * 1'000'000LL;  // activity is indexed by the minute
inline constexpr uint64_t kDedupMaxClients = 1'000'000;
inline constexpr uint64_t kDedupMaxUnacknowledged = 1024;
inline constexpr int64_t kDedupMaxClientBytes = 16 << 20;
inline constexpr int64_t kDedupMaxTotalBytes = 256 << 20;
// Each key may hold 1/kDedupKeyShareDivisor of the table's clients and bytes (125,000 clients, 32 MiB).
inline constexpr uint64_t kDedupKeyShareDivisor = 8;
inline constexpr uint64_t kDedupMaxClientsPerKey = kDedupMaxClients / kDedupKeyShareDivisor;
inline constexpr int64_t kDedupMaxKeyBytes = kDedupMaxTotalBytes / static_cast<int64_t>(kDedupKeyShareDivisor);
inline constexpr uint64_t kDedupExpiryEvery = 16;  // entries whose index is a multiple of this expire idle clients
inline constexpr size_t kDedupExpiryBatch = 32;

// Substatuses of the table's refusals (common/wire.h): a retry whose first outcome may have been evicted (503), too
// many outcomes kept for this client, its key or in all (429).
inline constexpr int kDedupSubstatusRecordLost = static_cast<int>(kSubstatusWriteRecordLost);
inline constexpr int kDedupSubstatusTableFull = static_cast<int>(kSubstatusDedupTableFull);

struct DedupTotals {
  uint64_t clients = 0;
  int64_t result_bytes = 0;
  int64_t last_eviction_micros = -1;  // replicated time of the last eviction; -1: never
  bool operator==(const DedupTotals&) const = default;
};

// The table's totals as stored (zeros when nothing was ever recorded). Any thread.
Result<DedupTotals> read_dedup_totals(leveldb::DB* db);
// One key's share as stored: its clients and result bytes (last_eviction_micros -1). Any thread.
Result<DedupTotals> read_dedup_key_totals(leveldb::DB* db, uint64_t owner);

// The owner (WriteId::owner) of writes made with the key named `key_name` (its NAME in the keys file, or its
// fingerprint when it has none): the first 64 bits of SHA-256 over a domain tag and the name; never 0 (the anonymous
// owner). A key keeps its owner across a rotation of its bytes as long as its name stays.
uint64_t dedup_owner_of(std::string_view key_name);
// Where `owner`'s client `client` is stored: `client` itself for the anonymous owner, else the first 64 bits of
// SHA-256 over a domain tag, the owner and the client.
uint64_t dedup_table_client(uint64_t owner, uint64_t client);

// How an apply reads the table when the state machine groups applies (storage/apply_group.h): point reads through
// the writes of earlier applies not yet in LevelDB, and those writes made before an iterator is opened.
class ApplyReads {
 public:
  virtual Result<std::optional<std::string>> get(const std::string& key) = 0;
  virtual Status before_scan() = 0;

 protected:
  ~ApplyReads() = default;
};

class DedupMirror;

// One apply's work on the table: check() before the command runs, finish() after, both with the entry's time.
class DedupApply {
 public:
  // `reads`: how the table is read from LevelDB (nullptr: directly). `mirror`: the table in memory, read instead
  // (loading into it, through `reads`, what it has not loaded yet), which must mirror the table as `db` and `reads`
  // hold it; call committed() once the batch is committed. nullptr: every read goes to LevelDB.
  DedupApply(leveldb::DB* db, ApplyReads* reads, int64_t ts_micros, DedupMirror* mirror = nullptr)
      : db_(db), reads_(reads), ts_(ts_micros), mirror_(mirror) {}

  // For a write that carries an id: nullopt when the command is to run; otherwise the answer to give instead —
  // the recorded outcome of a duplicate (OpResult::duplicate set), or a refusal. A Status error: the disk failed or
  // the table did not decode.
  Result<std::optional<OpResult>> check(const WriteId& id);
  // Adds what this entry changes in the table to `batch`: for a write with an id that ran (`executed`: its outcome,
  // which is recorded) or was a duplicate (nullptr), the client's acknowledgements and activity; and, on every
  // kDedupExpiryEvery-th entry, the expiry of idle clients. Call once per apply, after check() if it was called.
  Status finish(const OpResult* executed, uint64_t index, leveldb::WriteBatch& batch);
  // The batch finish() filled is committed (written, or added to the open apply group): the mirror, when there is
  // one, moves to what it stores. Not called for an apply that failed (the state machine stops and drops the
  // mirror). Call at most once, after finish().
  void committed();

 private:
  friend class DedupMirror;
  struct ClientRecord {
    int64_t last_active_micros = 0;
    uint64_t first_unacknowledged = 0;
    uint64_t results = 0;
    int64_t result_bytes = 0;
    uint64_t owner = 0;  // stored from record version 2 on (version 1: anonymous)
  };
  // A stored outcome: its sequence and the bytes it takes (key and value).
  struct StoredResult {
    uint64_t sequence = 0;
    int64_t bytes = 0;
  };
  static Result<ClientRecord> decode_record(std::string_view raw, uint64_t table_client);
  static std::string encode_record(const ClientRecord& record);
  Status load_totals();
  // The stored share of `owner` (!= 0), loaded on first use; finish() writes back the ones changed.
  Result<DedupTotals*> key_totals(uint64_t owner);
  // Deletes every key of `client` (its record, outcomes and activity entry) in `batch`, and takes it off the totals.
  Status forget(uint64_t client, leveldb::WriteBatch& batch);
  Status expire_idle(leveldb::WriteBatch& batch);

  // The table as stored, from the mirror or from LevelDB (through the apply group): what the rules above read.
  // The record of `client` (nullopt: not in the table).
  Result<std::optional<ClientRecord>> stored_record(uint64_t client);
  // The outcome of (client, sequence) as stored (nullopt: none); `client` is in the table.
  Result<std::optional<std::string>> stored_result(uint64_t client, uint64_t sequence);
  // The outcomes `client` keeps with sequence in [from, to), in sequence order.
  Result<std::vector<StoredResult>> stored_results(uint64_t client, uint64_t from, uint64_t to);
  // Every outcome `client` keeps, in sequence order.
  Result<std::vector<StoredResult>> all_stored_results(uint64_t client);
  // The least recently active client (the first activity entry), if any.
  Result<std::optional<uint64_t>> least_recently_active();
  // Up to kDedupExpiryBatch clients whose activity entry is in a minute before `bound_bucket`, oldest first,
  // passing over the client this entry makes active.
  Result<std::vector<uint64_t>> idle_clients(int64_t bound_bucket);
  Result<std::optional<std::string>> get(const std::string& key);
  // An iterator over LevelDB, after the grouped writes reached it.
  Result<std::unique_ptr<leveldb::Iterator>> scan();

  leveldb::DB* db_;
  ApplyReads* reads_;
  int64_t ts_;
  DedupMirror* mirror_ = nullptr;  // read instead of LevelDB when set
  std::optional<DedupTotals> totals_;  // loaded on first use
  bool totals_changed_ = false;
  // Set by check() for a write to record or acknowledge.
  std::optional<WriteId> id_;
  uint64_t table_client_ = 0;           // id_'s client as stored (dedup_table_client)
  std::map<uint64_t, DedupTotals> keys_;  // keys' shares this apply read, as they will be
  std::set<uint64_t> keys_changed_;
  std::optional<ClientRecord> stored_;  // the client's record as stored (nullopt: a new client)
  ClientRecord record_;                 // as it will be
  std::vector<StoredResult> acknowledged_;  // outcomes now below first_unacknowledged
  std::optional<int64_t> recorded_bytes_;   // set by finish(): the bytes of id_'s outcome, recorded in this entry
  std::vector<uint64_t> forgotten_;         // clients forget() removed in this entry
};

// The table in memory (see "The table in memory" above): owned by the state machine, read and loaded by each
// apply's DedupApply, changed only by DedupApply::committed().
class DedupMirror {
 public:
  // Forgets everything; the next apply that reads the table loads it again.
  void drop();
  // What is in memory (tests): whether the index is loaded, the clients in it, those whose record is loaded.
  bool loaded() const { return loaded_; }
  size_t clients() const { return clients_.size(); }
  size_t loaded_clients() const;

 private:
  friend class DedupApply;
  struct Client {
    int64_t activity_bucket = 0;  // the minute of its activity entry (0C)
    bool loaded = false;          // record and results below hold what is stored
    DedupApply::ClientRecord record;
    std::map<uint64_t, int64_t> results;  // sequence -> the stored outcome's bytes (key and value)
  };
  // Loads the index and the totals if not yet loaded.
  Status load(leveldb::DB* db, ApplyReads* reads);
  // `client`'s entry with its record and results loaded (nullptr: not in the table). Loads the index first.
  Result<Client*> find(leveldb::DB* db, ApplyReads* reads, uint64_t client);

  bool loaded_ = false;
  DedupTotals totals_;                      // 0D
  std::map<uint64_t, DedupTotals> shares_;  // 0D owner: each stored share; an owner missing has none
  std::unordered_map<uint64_t, Client> clients_;       // every client in the table, by table_client
  std::set<std::pair<int64_t, uint64_t>> activity_;    // (minute, table_client): the 0C keys, in their order
};

}  // namespace mayfly::storage
