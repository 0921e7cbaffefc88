// BackupService: the node's side of online backups (docs/operations.md, "Backup and restore"; proto
// Request.backupOpen/backupRead). open() has the driver open a consistent view of the state machine at its applied
// index (between applies, as for a Raft snapshot) and a thread of the backup's own export it, through the Raft snapshot
// export, into a backup file (storage/backup_file.h) under the data directory, a piece at a time (memory stays at about
// one piece). read() serves that file by offset in bounded chunks. No node stops and nothing waits on the export: the
// driver only opens the view.
//
// Limits: at most kMaxBackups in progress on a node (more: 429); a backup not read for kIdleMs is dropped (its
// file removed); reading at its end releases it. Files left by a previous run are removed at start.
//
// Thread-safety: open() and read() on the RPC thread; the export threads and the driver's task share the table
// under a mutex; stop() (any thread, once) joins the exports and removes the files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "node/config.h"
#include "node/request.h"
#include "storage/backup_file.h"

namespace mayfly::node {

class Driver;

class BackupService {
 public:
  static constexpr size_t kMaxBackups = 2;
  static constexpr uint32_t kMaxChunkBytes = 1 << 20;
  static constexpr int64_t kIdleMs = 120'000;

  BackupService(const NodeConfig& config, Driver& driver);
  ~BackupService();
  BackupService(const BackupService&) = delete;
  BackupService& operator=(const BackupService&) = delete;

  Reply open();
  Reply read(uint64_t id, uint64_t offset, uint32_t max_bytes);
  void stop();

 private:
  struct Backup {
    enum class State { kExporting, kReady, kFailed };
    uint64_t id = 0;
    std::string path;
    State state = State::kExporting;
    Status error;
    storage::BackupSummary summary;
    int64_t last_used_ms = 0;
    std::thread thread;
  };
  void drop_idle_locked(int64_t now_ms);
  void remove_locked(uint64_t id);
  Reply reply(Reply reply) const;

  const NodeConfig& config_;
  Driver& driver_;
  std::string dir_;
  std::mutex mutex_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Backup>> backups_;
  std::vector<std::thread> finished_;  // threads of backups removed from the table, joined by the next open() or stop()
};

}  // namespace mayfly::node
