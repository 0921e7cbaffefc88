// Item documents: turning a request body into what is stored (validated id, partition key, ttl; system
// properties stripped) and a stored record back into what users read (system properties merged in).
// Thread-safety: pure functions.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "storage/command.h"
#include "storage/records.h"
#include "ttl/ttl.h"

namespace mayfly::storage {

inline constexpr size_t kMaxItemBytes = 2 * 1024 * 1024;  // docs/ttl.md §9: larger items are 413
inline constexpr size_t kMaxIdCharacters = 255;

// PreparedItem (storage/command.h): what a validated item body yields.

// Validates an item body (docs/ttl.md §1–§2, §9): a JSON object ≤ 2 MB with a valid string `id`, a partition key value
// at `partition_key_path` (string, number, bool or null; one at each path of a hierarchical key), and a valid `ttl`
// if present. kInvalidArgument or kTooLarge on failure.
Result<PreparedItem> prepare_item(std::string_view body, std::string_view partition_key_path);
// The same for a document already parsed (after a patch); `id` and the key are re-checked, size is measured.
Result<PreparedItem> prepare_item_object(boost::json::object document, std::string_view partition_key_path);
// The leader's step before proposing a create, replace or upsert (node/driver.cc): validates `command.body` against
// `container` and, when valid, moves it into `command.prepared` (storage/command.h PreparedBody), the form the log
// carries. A bad body is the Status (kInvalidArgument or kTooLarge) and `command` is unchanged. Other commands: ok,
// unchanged.
Status prepare_body(Command& command, const ContainerRecord& container);

// Resource ids (items, containers, databases): 1..255 characters, none of / \ ? #.
Status validate_resource_id(std::string_view kind, std::string_view id);

// Parses a partition key given as JSON text ("\"a\"", "42", "true", "null"; a hierarchical key's ["a", 42]) into its
// canonical form (json::canonical_partition_key_value). 400 if it is not JSON or not such a value (kInvalidArgument).
Result<std::string> canonical_partition_key_text(std::string_view partition_key_json);
// The same, checked against the container's definition (`partition_key_path`): as many components as it has paths.
Result<std::string> canonical_partition_key_text(std::string_view partition_key_json,
                                                 std::string_view partition_key_path);

// The item as users read it: the stored JSON with `_rid`, `_etag`, `_ts` (seconds) and, when its effective TTL (its
// own ttl or the container's `default_ttl`) is set, `_expiresAt` (seconds) merged in.
// `hold_json`: `_hold`'s value (the ids of the legal holds covering the item, storage/holds.h), "" for none.
std::string render_item(const ItemRecord& record, std::string_view database, uint64_t crid,
                        ttl::DefaultTtl default_ttl, std::string_view hold_json = {});

// Resource ids (`_rid`) laid out as Cosmos DB's, so the SDKs that take them apart can (the Rust SDK reads a container's
// database from the first 4 bytes of its `_rid`): base64 with '/' written '-', of a database's 4 bytes, a container's
// 8 (its database's 4, then its own) and an item's 16 (its container's 8, then its own). A database's 4 bytes are the
// FNV-1a hash of its name (every replica, every render, no lookup); a container's own 4 are its container rid (a
// replicated counter), an item's own 8 its item rid, big-endian.
std::string format_database_rid(std::string_view database);
std::string format_container_rid(std::string_view database, uint64_t crid);
std::string format_item_rid(std::string_view database, uint64_t crid, uint64_t item_rid);

}  // namespace mayfly::storage
