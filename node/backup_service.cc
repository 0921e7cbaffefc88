#include "node/backup_service.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "common/clock.h"
#include "node/driver.h"

namespace mayfly::node {
namespace {

int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

BackupService::BackupService(const NodeConfig& config, Driver& driver)
    : config_(config), driver_(driver), dir_(config.data_dir + "/backups") {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);  // a previous run's exports: nobody can read them any more
}

BackupService::~BackupService() { stop(); }

Reply BackupService::reply(Reply reply) const {
  reply.served_by = config_.id;
  return reply;
}

void BackupService::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, backup] : backups_) {
      if (backup->thread.joinable()) threads.push_back(std::move(backup->thread));
    }
    for (std::thread& thread : finished_) threads.push_back(std::move(thread));
    finished_.clear();
  }
  for (std::thread& thread : threads) thread.join();
  std::lock_guard lock(mutex_);
  backups_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void BackupService::remove_locked(uint64_t id) {
  auto it = backups_.find(id);
  if (it == backups_.end()) return;
  if (it->second->thread.joinable()) finished_.push_back(std::move(it->second->thread));
  std::error_code ignored;
  if (it->second->state != Backup::State::kExporting) std::filesystem::remove(it->second->path, ignored);
  backups_.erase(it);
}

void BackupService::drop_idle_locked(int64_t now_ms) {
  for (auto it = backups_.begin(); it != backups_.end();) {
    const std::shared_ptr<Backup> backup = it->second;
    ++it;
    if (backup->state != Backup::State::kExporting && now_ms - backup->last_used_ms > kIdleMs) {
      spdlog::info("backup {} dropped: not read for {} s", backup->id, kIdleMs / 1000);
      remove_locked(backup->id);
    }
  }
}

Reply BackupService::open() {
  const int64_t now_ms = steady_now_ms();
  std::shared_ptr<Backup> backup = std::make_shared<Backup>();
  std::vector<std::thread> finished;
  {
    std::lock_guard lock(mutex_);
    finished.swap(finished_);  // threads of finished backups (they end right after publishing their outcome)
  }
  for (std::thread& thread : finished) thread.join();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return reply(Reply::error(StatusCode::kUnavailable, "the node is shutting down"));
    drop_idle_locked(now_ms);
    if (backups_.size() >= kMaxBackups) {
      Reply busy = Reply::error(StatusCode::kThrottled,
                                "node " + std::to_string(config_.id.value()) + " already serves " +
                                    std::to_string(kMaxBackups) +
                                    " backups (the most it runs at once); retry when one is done or use another node");
      busy.retry_after_ms = 5000;
      return reply(std::move(busy));
    }
    std::error_code error;
    std::filesystem::create_directories(dir_, error);
    if (error) return reply(Reply::error(StatusCode::kInternal, "cannot create " + dir_ + ": " + error.message()));
    backup->id = next_id_++;
    backup->path = dir_ + "/backup-" + std::to_string(backup->id) + ".mfb";
    backup->last_used_ms = now_ms;
    backups_.emplace(backup->id, backup);
  }
  // The view is opened on the driver thread (between applies: exactly the state at its applied index); the export
  // runs on a thread of its own.
  driver_.post([this, backup] {
    std::shared_ptr<storage::StateMachine::View> view = driver_.state().open_view();
    std::lock_guard lock(mutex_);
    if (stopping_ || !backups_.contains(backup->id)) return;
    spdlog::info("backup {}: exporting the state at index {} to {}", backup->id, view->applied().index.value(),
                 backup->path);
    backup->thread = std::thread([this, backup, view = std::move(view)]() mutable {
      Result<storage::BackupSummary> written = [&]() -> Result<storage::BackupSummary> {
        try {
          return storage::write_backup_file(*view, config_.id.value(), SystemClock().now_micros(), backup->path);
        } catch (const std::exception& exception) {
          return Status::internal(std::string("backup export failed: ") + exception.what());
        }
      }();
      view.reset();  // before the store can close
      std::lock_guard done(mutex_);
      backup->last_used_ms = steady_now_ms();
      if (written.is_ok()) {
        backup->summary = *written;
        backup->state = Backup::State::kReady;
        spdlog::info("backup {}: ready, {}", backup->id, written->to_json());
      } else {
        backup->state = Backup::State::kFailed;
        backup->error = written.status();
        spdlog::error("backup {} failed: {}", backup->id, written.status().to_string());
      }
    });
  });
  Reply opened;
  opened.result.body = "{\"backup\":" + std::to_string(backup->id) + "}";
  return reply(std::move(opened));
}

Reply BackupService::read(uint64_t id, uint64_t offset, uint32_t max_bytes) {
  std::lock_guard lock(mutex_);
  auto it = backups_.find(id);
  if (it == backups_.end()) {
    return reply(Reply::error(StatusCode::kNotFound, "no backup " + std::to_string(id) + " on node " +
                                                         std::to_string(config_.id.value()) +
                                                         " (finished, idle too long, or the node restarted): start "
                                                         "a new one"));
  }
  Backup& backup = *it->second;
  backup.last_used_ms = steady_now_ms();
  Reply answer;
  switch (backup.state) {
    case Backup::State::kExporting:
      answer.result.body = "{\"backup\":" + std::to_string(id) + ",\"state\":\"exporting\"}";
      return reply(std::move(answer));
    case Backup::State::kFailed: {
      Reply failed = Reply::error(StatusCode::kInternal, "backup " + std::to_string(id) + " failed on node " +
                                                              std::to_string(config_.id.value()) + ": " +
                                                              backup.error.message());
      remove_locked(id);
      return reply(std::move(failed));
    }
    case Backup::State::kReady: break;
  }
  const uint64_t size = backup.summary.file_bytes;
  if (offset > size) {
    return reply(Reply::error(StatusCode::kInvalidArgument, "offset " + std::to_string(offset) + " is past the end of "
                                                                "backup " + std::to_string(id) + " (" +
                                                                std::to_string(size) + " bytes)"));
  }
  const std::string summary = backup.summary.to_json();
  answer.result.body = "{\"backup\":" + std::to_string(id) + ",\"state\":\"ready\"," + summary.substr(1);
  if (offset == size) {  // read to the end: done
    remove_locked(id);
    return reply(std::move(answer));
  }
  const uint64_t n = std::min<uint64_t>(size - offset, max_bytes == 0 || max_bytes > kMaxChunkBytes ? kMaxChunkBytes
                                                                                                   : max_bytes);
  answer.data.resize(n);
  const int fd = ::open(backup.path.c_str(), O_RDONLY | O_CLOEXEC);
  ssize_t got = -1;
  if (fd >= 0) {
    got = ::pread(fd, answer.data.data(), n, static_cast<off_t>(offset));
    ::close(fd);
  }
  if (got != static_cast<ssize_t>(n)) {
    return reply(Reply::error(StatusCode::kInternal, "cannot read backup file " + backup.path));
  }
  return reply(std::move(answer));
}

}  // namespace mayfly::node
