// Conditional patch (api::PatchItem::condition, Cosmos DB's filter_predicate): "FROM c WHERE <condition>", evaluated
// over the item as a read shows it (system properties included). The leader decides it before proposing and pins the
// patch to the etag it looked at (Driver::handle_write), so the apply needs no query engine: if the item changed in
// between, the pinned etag makes the patch a 412 on every replica, never a patch of an item the condition did not
// hold for.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace mayfly::node {

inline constexpr size_t kMaxPatchConditionBytes = 16 * 1024;

// 400 (InvalidArgument) with the reason when `condition` is not "FROM <alias> [WHERE <expr>]" or is too long.
Status validate_patch_condition(std::string_view condition);
// Whether the condition holds for the item (`item_json`, an object); InvalidArgument as above.
Result<bool> patch_condition_holds(std::string_view condition, std::string_view item_json);

}  // namespace mayfly::node
