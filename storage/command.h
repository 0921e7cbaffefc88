// Commands: what the log carries and the state machine applies, and the results it gives back.
//
// A command holds the request as the client sent it (raw JSON for patch operations and TTL values), so that
// validation happens inside the deterministic apply and every replica reaches the same verdict. Item bodies of
// create, replace and upsert are the exception: the leader validates them before proposing (storage::prepare_item,
// storage/document.h, called by node/driver.cc) and logs the validated parts (PreparedBody), so a body is parsed once
// in the cluster, not once per replica. Encoded with common/codec; decoding rejects malformed bytes with a Status.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/http_status.h"
#include "common/status.h"
#include "storage/holds.h"
#include "storage/records.h"
#include "ttl/ttl.h"

namespace mayfly::storage {

enum class CommandType : uint8_t {
  kTime = 0,  // no change: only advances replicated time (leader time entries)
  kCreateDatabase,
  kDeleteDatabase,
  kCreateContainer,
  kUpdateContainer,
  kDeleteContainer,
  kCreateItem,
  kReplaceItem,
  kUpsertItem,
  kDeleteItem,
  kPatchItem,
  kSetMemberAddress,  // id: the node id (decimal), body: its HOST:PORT — the replicated address book
  kUpdateDatabase,    // throughput: the database's new shared throughput (provisioned)
  // A transactional batch (storage/state_machine.cc execute_batch): partition_key_json, and in body the operations
  // as the Cosmos REST API sends them (a JSON array of {"operationType", "id", "resourceBody", "ifMatch"}).
  kBatch,
  // Delete by partition key (storage/deleted_partitions.h): partition_key_json; the partition's items are gone at
  // once and the collector removes them with spare request units.
  kDeletePartition,
  // Legal holds (storage/holds.h): id is the hold's id, partition_key_json its partition (empty: the whole
  // container), body the reason; `hold` says the scope, the item and who asked.
  kSetHold,
  kReleaseHold,
};
std::string_view command_type_name(CommandType type);
bool is_item_write(CommandType type);
bool is_hold_command(CommandType type);  // kSetHold, kReleaseHold

// A client write's identity for exactly-once execution (storage/write_dedup.h): the client's random id, the write's
// sequence number (1, 2, ... per client; re-sent writes keep theirs), the lowest sequence the client still waits for
// an answer to (outcomes below it may be dropped), and whether this attempt may be a re-send. `owner`: who made the
// write — the fingerprint of the key that authenticated the client (storage::dedup_owner_of, write_dedup.h), set by
// the node that authenticated it and carried through forwarding, never taken from a client; 0: the anonymous
// identity (an open node, and every command logged before write ids were bound to keys). The exactly-once table
// keeps each owner's clients apart, so one key cannot answer for, or suppress, another key's writes.
struct WriteId {
  uint64_t client = 0;
  uint64_t sequence = 0;
  uint64_t first_unacknowledged = 0;
  bool retry = false;
  uint64_t owner = 0;
  bool operator==(const WriteId&) const = default;
};
// Whether a WriteId is well formed: client != 0 and 1 <= first_unacknowledged <= sequence.
Status validate_write_id(const WriteId& id);

// For kUpdateContainer: what to do with defaultTtl.
enum class DefaultTtlChange : uint8_t { kKeep, kSet, kRemove };

// An item body validated (storage::prepare_item, storage/document.h): what apply needs of it.
struct PreparedItem {
  std::string id;
  std::string partition_key;  // canonical JSON of the key value
  ttl::ItemTtl ttl;
  std::string json;           // compact user JSON without system properties
  bool operator==(const PreparedItem&) const = default;
};

// A create, replace or upsert body the leader validated before proposing it, against the container whose resource
// id is `container_rid`: the log carries these parts instead of the raw body, so no replica parses the JSON again.
// Apply uses them while that container is the one it applies to; a container deleted and created again meanwhile
// (another rid, perhaps another partition key path) gets `item.json` validated afresh against its own path.
struct PreparedBody {
  uint64_t container_rid = 0;
  PreparedItem item;
  bool operator==(const PreparedBody&) const = default;
};

// What a hold command carries besides id, partition_key_json and body. `actor`: the key name of the client, set by
// the node that authenticated it (never taken from a client), recorded in the hold and its audit entry.
struct HoldCommand {
  HoldScope scope = HoldScope::kContainer;  // kSetHold
  std::string item_id;                       // kSetHold with kItem
  std::string actor;
  bool operator==(const HoldCommand&) const = default;
};

struct Command {
  CommandType type = CommandType::kTime;
  std::string database;
  std::string container;

  // kCreateContainer / kUpdateContainer. default_ttl_json is the JSON text of the value as sent ("10", "-1",
  // "null", "1.5", ...); for create, DefaultTtlChange::kKeep means "absent" (TTL off).
  std::string partition_key_path;
  DefaultTtlChange default_ttl_change = DefaultTtlChange::kKeep;
  std::string default_ttl_json;
  std::optional<ttl::IndexingMode> indexing;
  std::optional<Throughput> throughput;
  // Turns the change feed on (retention_seconds 0: kDefaultChangeFeedRetentionSeconds) or off; absent: unchanged
  // (create: off). since_index is ignored (the apply sets it).
  std::optional<ChangeFeedSettings> change_feed;
  // Sets the container's expiryWarning (seconds; 0: off); absent: unchanged (create: off).
  std::optional<int64_t> expiry_warning_seconds;

  // Items. body: the item JSON (create/replace/upsert) or the patch operations array (patch).
  // partition_key_json / id: the target of delete and patch (the JSON text of the key value, e.g. "\"a\"" or "42").
  std::string body;
  std::string partition_key_json;
  std::string id;
  std::optional<std::string> if_match;  // etag, as returned in _etag
  // Create, replace, upsert: the body as the leader validated it; `body` is then empty. Absent: the raw body is in
  // `body` (commands logged before this form existed, and re-sent writes whose container the leader did not find).
  std::optional<PreparedBody> prepared;

  // Client writes from a client that asks for exactly-once execution; absent for time entries, the address book
  // and older clients.
  std::optional<WriteId> write_id;

  // kSetHold, kReleaseHold (always present for them, absent otherwise).
  std::optional<HoldCommand> hold;
};

std::string encode_command(const Command& command);
Result<Command> decode_command(std::string_view bytes);

// The answer to a command or a read. A refusal has a code (common/status.h) and a message a user can act on; a
// success says how it was done (200, 201 created, 204 deleted) and carries the JSON body (item with system
// properties, container, database, or an array for lists). The HTTP number (docs/ttl.md §9) is made from code and
// `done` by the one mapping, common/http_status.h, only where the answer leaves: the wire, metrics, the exactly-once
// table.
struct OpResult {
  StatusCode code = StatusCode::kOk;  // kOk: the request did its work
  Done done = Done::kOk;              // how, when code is kOk
  int substatus = 0;
  std::string message;
  std::string body;
  std::string etag;
  int64_t ts_micros = 0;         // the item's or container's last-modified replicated time
  std::string continuation;      // lists: where the next page starts ("" when there is none)
  int64_t expired_skipped = 0;   // reads: items passed over because they had expired (metrics)
  double work_charge = 0;        // queries: RU for the work done (query/executor.h); 0: priced by the body size
  bool duplicate = false;        // a re-sent write answered with its first outcome (storage/write_dedup.h)
  // A write the exactly-once table refused with 429 substatus 6: which bound ("client", "key", "table"), for the
  // refusal counter; not stored or sent.
  const char* dedup_refusal = nullptr;

  bool ok() const { return code == StatusCode::kOk; }
  // The answer's HTTP status (common/http_status.h).
  int http_status() const { return mayfly::http_status(code, done); }

  // A refusal: `code` (not kOk) and its message.
  static OpResult error(StatusCode code, std::string message) {
    MAYFLY_ASSERT_MSG(code != StatusCode::kOk, "an error answer needs an error code");
    OpResult result;
    result.code = code;
    result.message = std::move(message);
    return result;
  }
  // A Status (not OK) as the answer: a failure of the store as storage_failure() does, any other code with its
  // message.
  static OpResult error(const Status& status) {
    if (is_storage_failure(status.code())) return storage_failure(status);
    return error(status.code(), status.message());
  }
  // A failure of the store met while answering: "internal storage error: ..." with the failure's code (kInternal
  // when `status` carries another one).
  static OpResult storage_failure(const Status& status) {
    return error(is_storage_failure(status.code()) ? status.code() : StatusCode::kInternal,
                 "internal storage error: " + status.to_string());
  }
};

}  // namespace mayfly::storage
