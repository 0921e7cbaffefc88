#include "node/restore.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "common/clock.h"
#include "storage/restore.h"

namespace mayfly::node {
namespace {

// A line in the log every 10 s of a long restore (memory stays bounded, but 5M items take minutes): which step, how
// far. Measured on the steady clock for the log only; it decides nothing.
storage::RestoreOptions with_progress_log(const std::string& file) {
  storage::RestoreOptions options;
  auto last = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  options.progress = [file, last](const storage::RestoreProgress& progress) {
    const auto now = std::chrono::steady_clock::now();
    if (now - *last < std::chrono::seconds(10)) return Status::ok();
    *last = now;
    const char* unit = progress.step == storage::RestoreProgress::Step::kInstall ? "bytes" : "items";
    if (progress.total > 0) {
      spdlog::info("restore of {}: {} {} of {} {} ({:.0f}%)", file, storage::restore_step_name(progress.step),
                   progress.done, progress.total, unit, 100.0 * static_cast<double>(progress.done) /
                                                            static_cast<double>(progress.total));
    } else {
      spdlog::info("restore of {}: {} {} {}", file, storage::restore_step_name(progress.step), progress.done, unit);
    }
    return Status::ok();
  };
  return options;
}

}  // namespace

int restore_from_backup(const NodeConfig& config) {
  // The restoring node's clock decides "now" once; the result is the new cluster's first snapshot, the same on every
  // replica.
  const int64_t now = SystemClock().now_micros();
  auto refused = [](const Status& status) {
    spdlog::critical("restore: {}", status.message());
    return status.code() == StatusCode::kIoError ? 1 : 2;
  };
  if (config.restore_dry_run) {
    std::error_code ignored;
    Result<std::vector<storage::RestoreFigures>> figures =
        storage::dry_run_restore(config.restore_file, std::filesystem::temp_directory_path(ignored).string(), now,
                                 with_progress_log(config.restore_file));
    if (!figures.is_ok()) return refused(figures.status());
    std::string out = "{\"dryRun\":true,\"modes\":[";
    for (size_t i = 0; i < figures->size(); ++i) out += (i > 0 ? "," : "") + (*figures)[i].to_json();
    out += "]}\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
    spdlog::info("restore dry run of {} (nothing changed): {}", config.restore_file, out.substr(0, out.size() - 1));
    return 0;
  }
  Result<storage::RestoreTtlMode> mode = storage::parse_restore_ttl_mode(config.restore_ttl);
  if (!mode.is_ok()) return refused(mode.status());
  replication::Membership membership;
  membership.voters.insert(config.id);
  Result<storage::RestoreFigures> figures =
      storage::restore_into_data_dir(config.restore_file, config.data_dir, membership, *mode, now,
                                     with_progress_log(config.restore_file));
  if (!figures.is_ok()) return refused(figures.status());
  const std::string json = figures->to_json();
  std::fputs((json + "\n").c_str(), stdout);
  std::fflush(stdout);
  spdlog::info("restored {} into {} at index {} with --ttl {}: {}", config.restore_file, config.data_dir,
               figures->backup_index, config.restore_ttl, json);
  for (const storage::PausedContainer& paused : figures->paused) {
    spdlog::warn("restore --ttl pause: TTL is off on {}/{} (its defaultTtl was {}); turn it back on with "
                 "`mayfly container set {} {} --default-ttl {}`",
                 paused.database, paused.container, paused.previous_default_ttl, paused.database, paused.container,
                 paused.previous_default_ttl);
  }
  spdlog::info("this node is the new cluster's only voter: start the others with --join and add them with "
               "`mayfly cluster add-member ID HOST:PORT`");
  return -1;
}

}  // namespace mayfly::node
