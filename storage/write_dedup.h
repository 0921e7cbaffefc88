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
// Thread-safety: a DedupApply is made, used and dropped within one StateMachine::apply on the driver thread.
// read_dedup_totals may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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

// One apply's work on the table: check() before the command runs, finish() after, both with the entry's time.
class DedupApply {
 public:
  // `reads`: nullptr reads LevelDB directly. `totals`: the totals as stored, when the caller keeps them in memory
  // (the state machine does, between applies: reading them on every write cost a Get); nullopt: read on first use.
  DedupApply(leveldb::DB* db, ApplyReads* reads, int64_t ts_micros,
             const std::optional<DedupTotals>& totals = std::nullopt)
      : db_(db), reads_(reads), ts_(ts_micros), totals_(totals) {}

  // For a write that carries an id: nullopt when the command is to run; otherwise the answer to give instead —
  // the recorded outcome of a duplicate (OpResult::duplicate set), or a refusal. A Status error: the disk failed or
  // the table did not decode.
  Result<std::optional<OpResult>> check(const WriteId& id);
  // Adds what this entry changes in the table to `batch`: for a write with an id that ran (`executed`: its outcome,
  // which is recorded) or was a duplicate (nullptr), the client's acknowledgements and activity; and, on every
  // kDedupExpiryEvery-th entry, the expiry of idle clients. Call once per apply, after check() if it was called.
  Status finish(const OpResult* executed, uint64_t index, leveldb::WriteBatch& batch);
  // The totals as finish() left them in the batch (nullopt when this apply never needed them); what is stored once
  // the batch is written.
  const std::optional<DedupTotals>& totals() const { return totals_; }

 private:
  struct ClientRecord {
    int64_t last_active_micros = 0;
    uint64_t first_unacknowledged = 0;
    uint64_t results = 0;
    int64_t result_bytes = 0;
    uint64_t owner = 0;  // stored from record version 2 on (version 1: anonymous)
  };
  static Result<ClientRecord> decode_record(std::string_view raw, uint64_t table_client);
  static std::string encode_record(const ClientRecord& record);
  Status load_totals();
  // The stored share of `owner` (!= 0), loaded on first use; finish() writes back the ones changed.
  Result<DedupTotals*> key_totals(uint64_t owner);
  // Deletes every key of `client` (its record, outcomes and activity entry) in `batch`, and takes it off the totals.
  Status forget(uint64_t client, leveldb::WriteBatch& batch);
  Status expire_idle(leveldb::WriteBatch& batch);
  Result<std::optional<std::string>> get(const std::string& key);
  // An iterator over LevelDB, after the grouped writes reached it.
  Result<std::unique_ptr<leveldb::Iterator>> scan();

  leveldb::DB* db_;
  ApplyReads* reads_;
  int64_t ts_;
  std::optional<DedupTotals> totals_;  // given, or loaded on first use
  bool totals_changed_ = false;
  // Set by check() for a write to record or acknowledge.
  std::optional<WriteId> id_;
  uint64_t table_client_ = 0;           // id_'s client as stored (dedup_table_client)
  std::map<uint64_t, DedupTotals> keys_;  // keys' shares this apply read, as they will be
  std::set<uint64_t> keys_changed_;
  std::optional<ClientRecord> stored_;  // the client's record as stored (nullopt: a new client)
  ClientRecord record_;                 // as it will be
  std::vector<std::pair<std::string, int64_t>> acknowledged_;  // outcome keys now below first_unacknowledged, bytes
  std::vector<uint64_t> forgotten_;                            // clients forget() removed in this entry
};

}  // namespace mayfly::storage
