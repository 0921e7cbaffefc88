// Mayfly's operation vocabulary: one struct per operation of the client API, and the Request that carries one with
// its names and options. The same types travel the whole way — the client library builds them, api/codec.h puts them
// on the wire (proto/mayfly.capnp's Request) and takes them off again, and the node's router, driver and read service
// take them as decoded — so an operation is listed once, here, in the order of the schema's union. No Cap'n Proto,
// no storage: this header is what a library user and every layer of the node can both include.
//
// Validation (a session token that is not a log index, a change feed page over 1000, an add-member without an
// address, ...) is the node's (node/request.h): these are the words, not the rules.
// Thread-safety: values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/wire.h"

namespace mayfly::api {

// A container's settings as sent on create and update (proto ContainerSettings). On create, `kUnchanged` means
// "absent" (TTL off, consistent indexing, serverless throughput); on update it leaves the setting as it is.
struct ContainerSettings {
  enum class DefaultTtl { kUnchanged, kSet, kRemove };
  enum class Indexing { kUnchanged, kConsistent, kNone };
  enum class Throughput { kUnchanged, kProvisioned, kServerless };
  enum class ChangeFeed { kUnchanged, kOn, kOff };

  std::string partition_key_path;  // "/tenant"; required on create, empty on update
  DefaultTtl default_ttl = DefaultTtl::kUnchanged;
  std::string default_ttl_json;  // with kSet: the JSON value as the user wrote it ("10", "-1", "1.5"); the node checks it
  Indexing indexing = Indexing::kUnchanged;
  Throughput throughput = Throughput::kUnchanged;
  uint32_t provisioned_ru_per_second = 0;  // with kProvisioned
  // Update only, with a defaultTtl change: answer what it would expire and change nothing; or apply it even when it
  // expires more than 10 % of the live items at once (otherwise 412 with the figures).
  bool dry_run = false;
  bool force = false;
  // The change feed: on (with a retention in seconds; 0: the leader's --changefeed-retention) or off.
  ChangeFeed change_feed = ChangeFeed::kUnchanged;
  uint32_t change_feed_retention_seconds = 0;  // with kOn
  // "Expiring soon" warnings (docs/retention.md): the window in seconds (0: off); absent: unchanged (create: off).
  std::optional<uint32_t> expiry_warning_seconds;

  bool operator==(const ContainerSettings&) const = default;
};

// Databases (Request::database names the database).
struct CreateDatabase {
  uint32_t shared_ru_per_second = 0;  // provisioned RU/s its containers without their own throughput share; 0: none
  bool operator==(const CreateDatabase&) const = default;
};
// A database's shared throughput changes (it must have been created with one).
struct UpdateDatabase {
  uint32_t shared_ru_per_second = 0;
  bool operator==(const UpdateDatabase&) const = default;
};
// Every provisioned throughput of the account: databases with shared throughput, containers with their own.
struct ListOffers {
  bool operator==(const ListOffers&) const = default;
};
// A transactional batch on one partition (proto Batch).
struct ExecuteBatch {
  std::string partition_key;  // JSON
  std::string operations;     // JSON array, as Cosmos DB's REST API sends it
  bool operator==(const ExecuteBatch&) const = default;
};
// Delete by partition key (proto deletePartition).
struct DeletePartition {
  std::string partition_key;  // JSON
  bool operator==(const DeletePartition&) const = default;
};
// Legal holds (docs/retention.md, "Legal holds"; proto Hold): keys with the compliance role (or admin) only.
// `actor` is the key name of the client: set by the node that authenticated it, never taken from a client.
struct SetHold {
  enum class Scope { kContainer, kPartition, kItem };
  std::string id;
  Scope scope = Scope::kContainer;
  std::string partition_key;  // JSON: kPartition, kItem
  std::string item_id;        // kItem
  std::string reason;
  std::string actor;
  bool operator==(const SetHold&) const = default;
};
struct ReleaseHold {
  std::string id;
  std::string reason;
  std::string actor;
  bool operator==(const ReleaseHold&) const = default;
};
// The holds of container database/container, of every container of `database` (container empty), or of every
// container (both empty); released ones too with include_released.
struct ListHolds {
  bool include_released = false;
  bool operator==(const ListHolds&) const = default;
};
// The audit trail of holds set and released, oldest first, a page at a time (Options::max_items, continuation).
struct ListHoldAudit {
  bool operator==(const ListHoldAudit&) const = default;
};
struct DeleteDatabase {
  bool operator==(const DeleteDatabase&) const = default;
};
struct ListDatabases {
  bool operator==(const ListDatabases&) const = default;
};

// Containers (Request::database and Request::container name the container).
struct CreateContainer {
  ContainerSettings settings;
  bool operator==(const CreateContainer&) const = default;
};
struct UpdateContainer {
  ContainerSettings settings;
  bool operator==(const UpdateContainer&) const = default;
};
struct GetContainer {
  bool operator==(const GetContainer&) const = default;
};
struct DeleteContainer {
  bool operator==(const DeleteContainer&) const = default;
};
struct ListContainers {
  bool operator==(const ListContainers&) const = default;
};

// Items. A partition key value travels as JSON text: "\"tenant-1\"", "42", "true", "null".
struct CreateItem {
  std::string body;  // the item JSON
  bool operator==(const CreateItem&) const = default;
};
struct UpsertItem {
  std::string body;
  bool operator==(const UpsertItem&) const = default;
};
struct ReplaceItem {
  std::string body;
  bool operator==(const ReplaceItem&) const = default;
};
struct ReadItem {
  std::string partition_key;
  std::string id;
  bool operator==(const ReadItem&) const = default;
};
struct DeleteItem {
  std::string partition_key;
  std::string id;
  bool operator==(const DeleteItem&) const = default;
};
struct PatchItem {
  std::string partition_key;
  std::string id;
  std::string operations;  // the JSON array of patch operations
  // Conditional patch (Cosmos DB's filter_predicate): "FROM c WHERE <condition>" over the item; the patch applies
  // only when it is true of the item as it is, else 412. Empty: unconditional.
  std::string condition;
  bool operator==(const PatchItem&) const = default;
};
// The read feed, a page at a time (Options::max_items, Options::continuation): one partition, or the whole container.
struct ListItems {
  std::optional<std::string> partition_key;
  bool operator==(const ListItems&) const = default;
};

// Cluster administration.
struct ClusterStatus {
  bool operator==(const ClusterStatus&) const = default;
};
struct AddMember {
  uint64_t id = 0;
  std::string address;  // host:port of the new member's RPC listener
  bool operator==(const AddMember&) const = default;
};
struct RemoveMember {
  uint64_t id = 0;
  bool operator==(const RemoveMember&) const = default;
};
struct TransferLeader {
  uint64_t id = 0;
  bool operator==(const TransferLeader&) const = default;
};

// A query in Mayfly's Cosmos-style SQL subset (docs/cosmos.md, "Queries"), a page at a time like ListItems.
struct Query {
  std::string sql;
  std::string parameters;                    // one JSON object {"@name": value}; empty: none
  std::optional<std::string> partition_key;  // set: only this partition is read
  bool enable_scan = false;                  // allow a scan of a container whose indexing mode is none
  // A feed range (Cosmos effective partition keys, hex; storage/feed_range.h): only items whose partition key hashes
  // into [feed_range_min, feed_range_max) are read. Both empty: the whole container.
  std::string feed_range_min;
  std::string feed_range_max;
  bool operator==(const Query&) const = default;
};

// --clock virtual clusters only (docs/ttl.md, "Virtual clock"): move replicated time forward.
struct AdvanceClock {
  std::string duration;  // "90s", "1500ms", "30m", "2h", "1d"; a bare number is seconds
  bool operator==(const AdvanceClock&) const = default;
};

// Online backup of the node called, never forwarded (docs/operations.md, "Backup and restore").
struct BackupOpen {
  bool operator==(const BackupOpen&) const = default;
};
struct BackupRead {
  uint64_t backup = 0;     // from BackupOpen's answer
  uint64_t offset = 0;
  uint32_t max_bytes = 0;  // 0: the node's 1 MiB
  bool operator==(const BackupRead&) const = default;
};

// The TTL forecast of a container from the applied state of the node called (docs/ttl.md, "Forecast").
struct ContainerForecast {
  bool operator==(const ContainerForecast&) const = default;
};

// A page of a container's change feed (docs/changefeed.md).
struct ReadChangeFeed {
  enum class Mode { kAll, kLatest };
  enum class From { kBeginning, kNow, kTime, kContinuation };
  Mode mode = Mode::kAll;
  From from = From::kBeginning;
  int64_t time_micros = 0;   // kTime: changes at positions whose replicated time is >= this
  std::string continuation;  // kContinuation: a page's continuation or a change's position
  bool only_expirations = false;
  uint32_t max_items = 0;    // 0: the node's 100
  uint32_t wait_ms = 0;      // long-poll (at most 5000): a caught-up, empty page waits this long for new positions
  // A feed range (as Query's): only changes to items whose partition key hashes into it. Both empty: all.
  std::string feed_range_min;
  std::string feed_range_max;
  bool only_warnings = false;  // only "expiring soon" warnings (docs/retention.md)
  bool no_warnings = false;    // without them
  bool operator==(const ReadChangeFeed&) const = default;
};

// Every operation, in the order of proto Request's union; Kind names the alternatives in the same order.
using Operation =
    std::variant<CreateDatabase, DeleteDatabase, ListDatabases, CreateContainer, UpdateContainer, GetContainer,
                 DeleteContainer, ListContainers, CreateItem, UpsertItem, ReplaceItem, ReadItem, DeleteItem, PatchItem,
                 ListItems, ClusterStatus, AddMember, RemoveMember, TransferLeader, Query, AdvanceClock, BackupOpen,
                 BackupRead, ContainerForecast, ReadChangeFeed, UpdateDatabase, ListOffers, ExecuteBatch,
                 DeletePartition, SetHold, ReleaseHold, ListHolds, ListHoldAudit>;

enum class Kind {
  kCreateDatabase,
  kDeleteDatabase,
  kListDatabases,
  kCreateContainer,
  kUpdateContainer,
  kGetContainer,
  kDeleteContainer,
  kListContainers,
  kCreateItem,
  kUpsertItem,
  kReplaceItem,
  kReadItem,
  kDeleteItem,
  kPatchItem,
  kListItems,
  kClusterStatus,
  kAddMember,
  kRemoveMember,
  kTransferLeader,
  kQuery,
  kAdvanceClock,
  kBackupOpen,
  kBackupRead,
  kContainerForecast,
  kReadChangeFeed,
  kUpdateDatabase,
  kListOffers,
  kExecuteBatch,
  kDeletePartition,
  kSetHold,
  kReleaseHold,
  kListHolds,
  kListHoldAudit,
};
inline constexpr size_t kKindCount = std::variant_size_v<Operation>;
static_assert(static_cast<size_t>(Kind::kListHoldAudit) + 1 == kKindCount, "Kind lists every Operation alternative");

inline Kind kind_of(const Operation& operation) { return static_cast<Kind>(operation.index()); }
// A default-made operation of that kind (for builders that fill the fields afterwards).
Operation make_operation(Kind kind);

// "createItem", as in the schema.
std::string_view kind_name(Kind kind);
// The replicated operations: database, container and item writes. They go to the leader, may carry a WriteId, and
// are never blindly re-sent after a lost connection. (Admin operations that change the cluster — add-member,
// advance-clock, ... — go to the leader too, but are not writes of data.)
bool is_write(Kind kind);
// Operations that change the cluster's state: the writes and the admin operations that go to the leader
// (add/remove member, transfer leadership, advance the clock). The client library sends them to the leader and never
// re-sends one blindly after a lost connection.
bool changes_state(Kind kind);
// Operations a replica serves from its applied state at the request's consistency level.
bool is_read(Kind kind);
// Operations served by the node called and never forwarded: cluster status, backups, the forecast.
bool is_node_local(Kind kind);
std::string_view consistency_name(Consistency consistency);  // "session", "strong", ...

// Per-request options (proto Options).
struct Options {
  std::optional<Consistency> consistency;  // unset: the client's default (on the wire: session)
  std::string session_token;               // a previous response's token; empty: none
  std::string if_match;                    // an etag with its quotes; a write applies only to that version
  uint32_t max_items = 0;                  // listItems / query page size; 0: the node's default
  std::string continuation;                // listItems / query: from the previous page's continuation

  bool operator==(const Options&) const = default;
};

// A write's identity for exactly-once execution (proto WriteId; docs/tests.md, "Exactly-once writes").
struct WriteId {
  uint64_t client = 0;                // the client's random id, != 0
  uint64_t sequence = 0;              // 1, 2, 3, ... per client; a re-sent write keeps its number
  uint64_t first_unacknowledged = 0;  // the lowest sequence the client still waits for (<= sequence)
  bool retry = false;                 // this attempt may be a re-send of an earlier one
  // Who made the write: set only by a node forwarding the write of a client it authenticated (the node that
  // authenticated the client decides it; a client's value is ignored).
  uint64_t owner = 0;

  bool operator==(const WriteId&) const = default;
};

// One request: an operation, the database and container it names, its options and, for a write, its identity.
struct Request {
  std::string database;   // every operation but listDatabases and the cluster ones
  std::string container;  // container and item operations
  Operation operation;
  Options options;
  std::optional<WriteId> write_id;  // the client library stamps its writes (ClientOptions::exactly_once)
  // Client library only, never on the wire: the endpoint (1..N, as in ClientOptions::endpoints) the first attempt
  // goes to, overriding leader routing for writes and read spreading for reads; retries follow the normal rules.
  std::optional<size_t> endpoint;

  Kind kind() const { return kind_of(operation); }
  template <typename T>
  T* as() { return std::get_if<T>(&operation); }
  template <typename T>
  const T* as() const { return std::get_if<T>(&operation); }

  bool operator==(const Request&) const = default;
};

}  // namespace mayfly::api
