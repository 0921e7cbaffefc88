#include "node/ttl_guard.h"

#include "storage/json.h"
#include "ttl/ttl.h"

namespace mayfly::node {

bool needs_ttl_guard(const Operation& operation) {
  if (operation.kind != Operation::Kind::kWrite) return false;
  const storage::Command& command = operation.command;
  if (command.type != storage::CommandType::kUpdateContainer) return false;
  if (operation.ttl_dry_run) return true;
  return command.default_ttl_change != storage::DefaultTtlChange::kKeep && !operation.ttl_force;
}

Reply ttl_change_verdict(const storage::StoreReader& state, const Operation& operation) {
  const storage::Command& command = operation.command;
  ttl::DefaultTtl policy = ttl::DefaultTtl::off();
  switch (command.default_ttl_change) {
    case storage::DefaultTtlChange::kKeep:
      return Reply::error(StatusCode::kInvalidArgument,
                          "a dry run previews a defaultTtl change: give the new defaultTtl (--default-ttl N, -1 or off)");
    case storage::DefaultTtlChange::kRemove: break;
    case storage::DefaultTtlChange::kSet: {
      Result<boost::json::value> parsed = json::parse(command.default_ttl_json);
      if (!parsed.is_ok()) {
        return Reply::error(StatusCode::kInvalidArgument, "defaultTtl is not valid JSON: " + parsed.status().message());
      }
      Result<ttl::DefaultTtl> valid = ttl::validate_default_ttl(json::ttl_literal(&*parsed));
      if (!valid.is_ok()) return Reply::error(StatusCode::kInvalidArgument, valid.status().message());
      policy = *valid;
      break;
    }
  }
  Reply go_ahead;
  go_ahead.serve_here = true;
  if (operation.ttl_force && !operation.ttl_dry_run) return go_ahead;  // forced: no need to count
  Result<storage::TtlChangePreview> preview = state.preview_default_ttl(command.database, command.container, policy);
  if (!preview.is_ok()) {
    if (preview.status().code() == StatusCode::kNotFound) {
      return Reply{state.read_container(command.database, command.container)};
    }
    return Reply::error(StatusCode::kUnavailable,
                        "could not count what the defaultTtl change would expire: " + preview.status().to_string());
  }
  if (operation.ttl_dry_run) {
    Reply result;
    result.result.body = preview->to_json();
    result.session_token = preview->applied_index;
    return result;
  }
  if (preview->at_once_items * 100 <= preview->live_items * kTtlGuardPercent) return go_ahead;
  return Reply::error(
      StatusCode::kPreconditionFailed,
      "this defaultTtl change would expire " + std::to_string(preview->at_once_items) + " of the container's " +
          std::to_string(preview->live_items) + " live items (" + std::to_string(preview->at_once_bytes) +
          " bytes) at once, more than " + std::to_string(kTtlGuardPercent) + "%; " +
          std::to_string(preview->within_hour_items) + " within an hour and " +
          std::to_string(preview->within_day_items) +
          " within a day. Nothing was changed: if this is intended, send it again with --force (force in the "
          "library's ContainerSettings); --dry-run shows the figures. Figures: " + preview->to_json());
}

}  // namespace mayfly::node
