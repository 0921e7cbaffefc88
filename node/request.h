// Requests and replies between the wire (proto/mayfly.capnp) and the node: decoding a client Request into an
// Operation (a state-machine Command for writes, a ReadQuery for reads, or an admin action), executing reads against
// the state machine, and encoding a Reply back into a Response. Thin adapters: no business logic lives here.
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <string>

#include "common/ids.h"
#include "common/wire.h"
#include "proto/mayfly.capnp.h"
#include "query/executor.h"
#include "storage/changefeed.h"
#include "storage/command.h"
#include "storage/store_reader.h"
#include "storage/write_dedup.h"

namespace mayfly::node {

using mayfly::Consistency;  // common/wire.h

struct ReadQuery {
  enum class Kind { kItem, kItems, kContainer, kContainers, kDatabases, kQuery, kChangeFeed };
  Kind kind = Kind::kItem;
  std::string database;
  std::string container;
  std::string partition_key_json;  // kItem
  std::string id;                  // kItem
  storage::ListRequest list;       // kItems
  query::QueryRequest query;       // kQuery
  storage::ChangeFeedRequest feed; // kChangeFeed
  uint32_t feed_wait_ms = 0;       // kChangeFeed: the long-poll (<= kMaxChangeFeedWaitMs)
};

// The longest a readChangeFeed long-poll waits on the node (the request's waitMs is capped to it).
inline constexpr uint32_t kMaxChangeFeedWaitMs = 5000;

struct Operation {
  enum class Kind { kWrite, kRead, kClusterStatus, kAddMember, kRemoveMember, kTransferLeader, kAdvanceClock,
                    kBackupOpen, kBackupRead, kContainerForecast };
  Kind kind = Kind::kWrite;
  storage::Command command;  // kWrite
  ReadQuery read;            // kRead; kContainerForecast: database and container
  Consistency consistency = Consistency::kSession;
  uint64_t session_token = 0;  // the log index the client has seen; 0: none
  NodeId member;               // admin
  std::string member_address;  // kAddMember
  int64_t advance_micros = 0;  // kAdvanceClock: > 0
  bool ttl_dry_run = false;    // updateContainer: preview the defaultTtl change, change nothing
  bool ttl_force = false;      // updateContainer: skip the guard (more than kTtlGuardPercent expired at once)
  uint64_t backup_id = 0;      // kBackupRead
  uint64_t backup_offset = 0;
  uint32_t backup_max_bytes = 0;
};

// What goes back to the client.
struct Reply {
  storage::OpResult result;
  uint64_t session_token = 0;
  NodeId served_by;
  NodeId leader_hint;
  uint32_t retry_after_ms = 0;
  double request_charge = 0;
  // From the driver for a read it made wait (session token, staleness bound, strong read's ReadIndex): this node's
  // applied state is now recent enough; the RPC thread executes the read itself, so scans and queries never hold up
  // the driver thread (and with it heartbeats and the log).
  bool serve_here = false;
  std::string data;  // backupRead: bytes of the backup file (Response.data)
  // readChangeFeed: the page reached the applied position and held no change (a long-poll waits, node-local only).
  bool feed_idle = false;

  static Reply error(StatusCode code, std::string message) {
    Reply reply;
    reply.result = storage::OpResult::error(code, std::move(message));
    return reply;
  }
};

// 429 with retry-after: the container's provisioned RU/s are used up for this second (docs/ttl.md §8).
Reply throttled_reply(int64_t wait_ms);

// advance-clock's duration: a positive integer with an optional unit ms, s (the default), m, h or d, at most
// 2147483647 s (the longest ttl), as microseconds; anything else is kInvalidArgument with the accepted forms.
Result<int64_t> parse_clock_advance(std::string_view text);

// Decodes a wire request; malformed ones (bad session token, missing fields) are kInvalidArgument.
Result<Operation> decode_request(proto::Request::Reader request);
// Builds the wire form of an Operation that must be forwarded (the inverse of decode_request, for writes).
// The edge: a Reply's answer goes on the wire with its HTTP status (common/http_status.h), and comes back from it (a
// leader's answer to a forwarded request) as a code again; a number the mapping does not make reads as kInternal.
void encode_reply(const Reply& reply, proto::Response::Builder response);
Reply decode_reply(proto::Response::Reader response);

// A short, bounded name for metrics labels: "create", "read", "list", "cluster_status", ...
std::string op_name(const Operation& operation);

// Runs a read at replicated time `now_micros`. Not for kChangeFeed (execute_change_feed).
storage::OpResult execute_read(const storage::StoreReader& state, const ReadQuery& query, int64_t now_micros);

// A page of a change feed as JSON (docs/changefeed.md): {"changes":[...],"partitionKeyPath":"/pk",
// "continuation":"...","caughtUp":bool}, each change {"operationType","position","lsn","ts","tsMicros","partitionKey",
// "id","current","previous"[,"timeToLiveExpired":true]}, the images' _expiresAt under the defaultTtl in force at the
// change's position. `caught_up` (may be null) says whether the page reached the applied position and held no change
// (a long-poll waits then). 410 / 400 / 404 as ChangeFeedReader::read.
storage::OpResult execute_change_feed(const storage::ChangeFeedReader& feed, const storage::ChangeFeedRequest& request,
                                      bool* caught_up_and_empty);

// The substatus values the node adds to its refusals (kSubstatusNoLeader ...) are in common/wire.h.

}  // namespace mayfly::node
