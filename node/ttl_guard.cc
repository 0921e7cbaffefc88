#include "node/ttl_guard.h"

#include "storage/json.h"
#include "ttl/ttl.h"

namespace mayfly::node {

bool needs_ttl_guard(const api::Request& operation) {
  const auto* update = operation.as<api::UpdateContainer>();
  if (update == nullptr) return false;
  if (update->settings.dry_run) return true;
  return update->settings.default_ttl != api::ContainerSettings::DefaultTtl::kUnchanged && !update->settings.force;
}

Reply ttl_change_verdict(const storage::StoreReader& state, const api::Request& operation) {
  const auto* update = operation.as<api::UpdateContainer>();
  if (update == nullptr) return Reply::error(StatusCode::kInvalidArgument, "only an updateContainer has a TTL verdict");
  const api::ContainerSettings& settings = update->settings;
  const bool dry_run = settings.dry_run;
  ttl::DefaultTtl policy = ttl::DefaultTtl::off();
  switch (settings.default_ttl) {
    case api::ContainerSettings::DefaultTtl::kUnchanged:
      return Reply::error(StatusCode::kInvalidArgument,
                          "a dry run previews a defaultTtl change: give the new defaultTtl (--default-ttl N, -1 or off)");
    case api::ContainerSettings::DefaultTtl::kRemove: break;
    case api::ContainerSettings::DefaultTtl::kSet: {
      Result<boost::json::value> parsed = json::parse(settings.default_ttl_json);
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
  if (settings.force && !dry_run) return go_ahead;  // forced: no need to count
  // A container under legal hold refuses any change of its policy at apply (409 naming the holds, storage/holds.h):
  // counting first would only answer a 412 that --force then turns into that 409.
  if (const std::optional<storage::ContainerRecord> record =
          state.container_record(operation.database, operation.container);
      !dry_run && record && record->active_holds > 0 && !(record->ttl.policy == policy)) {
    return go_ahead;
  }
  Result<storage::TtlChangePreview> preview = state.preview_default_ttl(operation.database, operation.container, policy);
  if (!preview.is_ok()) {
    if (preview.status().code() == StatusCode::kNotFound) {
      return Reply{state.read_container(operation.database, operation.container)};
    }
    return Reply::error(StatusCode::kUnavailable,
                        "could not count what the defaultTtl change would expire: " + preview.status().to_string());
  }
  if (dry_run) {
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
