// Conditional patch (api::PatchItem::condition, Cosmos DB's filter_predicate): "FROM c WHERE <condition>", evaluated
// over the item as a read shows it (system properties included). The leader decides it before proposing and pins the
// patch to the etag it looked at (Driver::handle_write), so the apply needs no query engine: if the item changed in
// between, the pinned etag makes the patch a 412 on every replica, never a patch of an item the condition did not
// hold for.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "storage/command.h"
#include "storage/store_reader.h"

namespace mayfly::node {

inline constexpr size_t kMaxPatchConditionBytes = 16 * 1024;

// 400 (InvalidArgument) with the reason when `condition` is not "FROM <alias> [WHERE <expr>]" or is too long.
Status validate_patch_condition(std::string_view condition);
// Whether the condition holds for the item (`item_json`, an object); InvalidArgument as above.
Result<bool> patch_condition_holds(std::string_view condition, std::string_view item_json);

// The leader's decision on a conditional patch `command` (kPatchItem) before it is proposed, over the item as
// `reader` holds it at its applied time: the answer when it is refused here (the item's 404, a 400 for the
// condition, 412 when it is false), else nullopt with `command` pinned to the etag the condition was decided on
// (a client's own if-match is kept: it must name that version too). A re-sent patch (`resent`) is never refused
// here — only its apply knows whether its first attempt applied — and is pinned to no version when the condition
// is false now.
std::optional<storage::OpResult> decide_patch_condition(const storage::StoreReader& reader,
                                                        std::string_view condition, bool resent,
                                                        storage::Command& command);

}  // namespace mayfly::node
