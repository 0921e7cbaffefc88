// Requests and replies between the wire (proto/mayfly.capnp) and the node. A request arrives as the operation
// vocabulary's api::Request (api/operation.h, off the wire by api/codec.h) and stays that type through the router,
// the driver and the read service: this file adds the node's checks on it (check_request), its reading of the
// options, the one place a write becomes the replicated storage::Command (to_command, on the leader), and read
// execution. Thin adapters: no business logic lives here.
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <string>

#include "api/operation.h"
#include "common/ids.h"
#include "common/wire.h"
#include "proto/mayfly.capnp.h"
#include "storage/changefeed.h"
#include "storage/command.h"
#include "storage/store_reader.h"
#include "storage/write_dedup.h"

namespace mayfly::node {

using mayfly::Consistency;  // common/wire.h

// The longest a readChangeFeed long-poll waits on the node (the request's waitMs is capped to it).
inline constexpr uint32_t kMaxChangeFeedWaitMs = 5000;
// A listItems / query / change feed page when the request says 0.
inline constexpr uint32_t kDefaultPageItems = 100;
inline constexpr uint32_t kMaxChangeFeedPageItems = 1000;

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
  int64_t feed_warnings = 0;  // the warnings on a change feed page

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

// Takes a request off the wire (api::decode_request) and checks it (check_request): a malformed one is
// kInvalidArgument with a message the client can act on, and nothing is done. The write id's owner is cleared: the
// receiving side sets it from what it authenticated.
Result<api::Request> decode_request(proto::Request::Reader request);
// What the node requires of a request before it routes it: a session token that is a log index, a valid write id, a
// change feed read that names its container and a page of at most 1000 changes, an add-member with an id and a
// HOST:PORT, an advance-clock duration that parses, a forecast that names its container.
Status check_request(const api::Request& request);
// Who sets or releases a legal hold (api::SetHold::actor, api::ReleaseHold::actor): the key name the node that
// authenticated the client saw; decode_request clears what a client sent. Other operations are left as they are.
void set_hold_actor(api::Request& request, std::string actor);

// The node's reading of a checked request's options.
inline Consistency consistency_of(const api::Request& request) {
  return request.options.consistency.value_or(Consistency::kSession);
}
uint64_t session_token_of(const api::Request& request);  // the log index the client has seen; 0: none
inline bool is_read(const api::Request& request) { return api::is_read(request.kind()); }
inline bool is_write(const api::Request& request) { return api::is_write(request.kind()); }

// The replicated command of a write (api::is_write): the one place a client write changes shape, on the leader
// when it is proposed. `default_feed_retention_seconds` fills a change feed turned on without a retention.
storage::Command to_command(const api::Request& request, int64_t default_feed_retention_seconds);
// The change feed page a checked readChangeFeed asks for, and how long it may long-poll (capped at
// kMaxChangeFeedWaitMs).
storage::ChangeFeedRequest change_feed_request(const api::Request& request);
uint32_t change_feed_wait_ms(const api::Request& request);

// The edge: a Reply's answer goes on the wire with its HTTP status (common/http_status.h), and comes back from it (a
// leader's answer to a forwarded request) as a code again; a number the mapping does not make reads as kInternal.
void encode_reply(const Reply& reply, proto::Response::Builder response);
// The first segment of a message carrying `reply` (Cap'n Proto's size hint; 8 KiB zeroed otherwise).
capnp::MessageSize reply_size_hint(const Reply& reply);
Reply decode_reply(proto::Response::Reader response);

// A short, bounded name for metrics labels: "create", "read", "list", "cluster_status", ...
std::string op_name(const api::Request& request);

// Runs a read (api::is_read) at replicated time `now_micros`. Not for readChangeFeed (execute_change_feed).
storage::OpResult execute_read(const storage::StoreReader& state, const api::Request& request, int64_t now_micros);

// A page of a change feed as JSON (docs/changefeed.md): {"changes":[...],"partitionKeyPath":"/pk",
// "continuation":"...","caughtUp":bool}, each change {"operationType","position","lsn","ts","tsMicros","partitionKey",
// "id","current","previous"[,"timeToLiveExpired":true]}, the images' _expiresAt under the defaultTtl in force at the
// change's position. `caught_up` (may be null) says whether the page reached the applied position and held no change
// (a long-poll waits then). 410 / 400 / 404 as ChangeFeedReader::read.
// `warnings` (may be null) counts the page's warnings.
storage::OpResult execute_change_feed(const storage::ChangeFeedReader& feed, const storage::ChangeFeedRequest& request,
                                      bool* caught_up_and_empty, int64_t* warnings = nullptr);

// The substatus values the node adds to its refusals (kSubstatusNoLeader ...) are in common/wire.h.

}  // namespace mayfly::node
