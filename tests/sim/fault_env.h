// FaultEnv: an in-memory leveldb::Env (Debian's leveldb memenv) that remembers, for every file, how much of it was
// fsync'd — so a simulated power loss can keep exactly the synced bytes and drop the rest. A "crash" is
// crash_copy(): a new FaultEnv holding each file cut back to its last Sync(); the node is then reopened on it.
//
// Renames and deletes are taken as durable at once (a simplification: real file systems need a directory fsync).
// Thread-safety: LevelDB calls an Env from its own background thread too, so the bookkeeping is locked.
#pragma once

#include <leveldb/env.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mayfly::sim {

class FaultEnv final : public leveldb::EnvWrapper {
 public:
  FaultEnv();
  ~FaultEnv() override;

  leveldb::Status NewWritableFile(const std::string& name, leveldb::WritableFile** result) override;
  leveldb::Status NewAppendableFile(const std::string& name, leveldb::WritableFile** result) override;
  leveldb::Status RemoveFile(const std::string& name) override;
  leveldb::Status RenameFile(const std::string& from, const std::string& to) override;

  // A new Env with every file as of its last sync. Call only while nothing uses this Env (the DB is closed).
  std::unique_ptr<FaultEnv> crash_copy();
  // How many bytes written but not yet synced the last crash_copy() dropped.
  uint64_t bytes_lost_in_last_crash() const { return bytes_lost_; }
  // Bytes written but not yet synced, over all files.
  uint64_t unsynced_bytes();

 private:
  class File;
  struct FileState {
    uint64_t size = 0;
    uint64_t synced = 0;
  };
  explicit FaultEnv(std::unique_ptr<leveldb::Env> memory);
  void on_append(const std::string& name, uint64_t bytes);
  void on_sync(const std::string& name);

  std::unique_ptr<leveldb::Env> memory_;  // the memenv this wraps (EnvWrapper holds it as target())
  std::mutex mutex_;
  std::map<std::string, FileState> files_;
  uint64_t bytes_lost_ = 0;
};

// IoFaultEnv: wraps another Env (by default the real file system, leveldb::Env::Default()) and makes I/O on files
// whose path contains a pattern fail with EIO — opening or reading them (fail_reads_matching), or fsyncing them
// (fail_syncs_matching) — until cleared. Counts the failures it injected. Use it as ReplicaOptions::env to test what a
// node does when its disk returns errors.
// Thread-safety: patterns may be changed while LevelDB's background thread uses the Env (locked).
class IoFaultEnv final : public leveldb::EnvWrapper {
 public:
  explicit IoFaultEnv(leveldb::Env* target = leveldb::Env::Default());
  ~IoFaultEnv() override;

  // Empty pattern: no faults of that kind.
  void fail_reads_matching(std::string pattern);
  void fail_syncs_matching(std::string pattern);
  uint64_t injected_faults() const { return injected_.load(); }
  // Every successful RenameFile, as (from, to), in order.
  std::vector<std::pair<std::string, std::string>> renames();

  leveldb::Status NewSequentialFile(const std::string& name, leveldb::SequentialFile** result) override;
  leveldb::Status NewRandomAccessFile(const std::string& name, leveldb::RandomAccessFile** result) override;
  leveldb::Status NewWritableFile(const std::string& name, leveldb::WritableFile** result) override;
  leveldb::Status RenameFile(const std::string& from, const std::string& to) override;

 private:
  class RandomAccessFile;
  class WritableFile;
  bool matches_read(const std::string& name);
  bool matches_sync(const std::string& name);
  leveldb::Status injected(const std::string& name);

  std::mutex mutex_;
  std::string read_pattern_;
  std::string sync_pattern_;
  std::vector<std::pair<std::string, std::string>> renames_;
  std::atomic<uint64_t> injected_{0};
};

}  // namespace mayfly::sim
