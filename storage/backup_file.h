// The online backup file (docs/operations.md, "Backup and restore"): the state machine's Raft snapshot export
// (storage/state_snapshot.cc: every replicated key at one applied index) between a fixed header and a trailer.
//
//   header  (48 bytes)  "MAYFLYBK" | u32 format version (1) | u64 applied index | i64 applied (replicated) time µs |
//                       u64 node that served it | i64 creation time µs (that node's clock; informational) | u32 0
//   body                the snapshot export, exactly as Raft ships it
//   trailer (64 bytes)  "MFBKTAIL" | u64 body bytes | u64 items | u64 item bytes | SHA-256 of header and body (32)
// Integers big-endian. A reader checks the magic, the version, the body length against the file's size, and the
// checksum, so a truncated, padded or corrupted file is refused with an error that says which.
//
// Thread-safety: pure functions; a BackupWriter is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "storage/state_machine.h"

namespace mayfly::storage {

inline constexpr size_t kBackupHeaderBytes = 48;
inline constexpr size_t kBackupTrailerBytes = 64;

struct BackupHeader {
  uint64_t applied_index = 0;
  int64_t applied_ts_micros = 0;
  uint64_t source_node = 0;
  int64_t created_micros = 0;
};

struct BackupSummary {
  BackupHeader header;
  uint64_t body_bytes = 0;
  uint64_t items = 0;
  uint64_t item_bytes = 0;
  uint64_t file_bytes = 0;
  std::string sha256_hex;
  std::string to_json() const;
};

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  void update(std::string_view bytes);
  std::string finish();  // 32 raw bytes
 private:
  void* context_;
};
std::string hex(std::string_view bytes);

// Writes a backup file at `path` from `view` (any thread): header, the export in pieces of `piece_bytes` (memory stays
// at one piece), trailer; fsync'd. Returns what it wrote.
Result<BackupSummary> write_backup_file(const StateMachine::View& view, uint64_t source_node, int64_t created_micros,
                                        const std::string& path, size_t piece_bytes = 1 << 20);

// Checks a backup file end to end (magic, version, length, checksum) reading it in pieces; `body`, when given,
// receives the snapshot export (to install it). Errors are InvalidArgument (not a backup, truncated) or Corruption
// (checksum), with a message naming the file and the problem.
Result<BackupSummary> read_backup_file(const std::string& path, std::string* body = nullptr);

// A backup's body to install a piece at a time (StateMachine::install_snapshot; restore): the file is first checked
// end to end exactly as read_backup_file does (same refusals, same messages; one sequential read, nothing kept), and
// only then is the returned source made. It reads the body from the file again, pieces of at most `piece_bytes` (and
// of the size asked for; memory: one piece, whatever the backup's size), and hashes it again on the way: if the file
// changed after it was
// checked, the call that would end the body (return "") returns Corruption ("changed while it was being restored")
// instead, so an install from it fails before its last write and nothing corrupt is ever installed. A short read is
// IOError. `summary` receives what the check found.
Result<StateMachine::SnapshotSource> open_backup_body(const std::string& path, BackupSummary* summary,
                                                      size_t piece_bytes = 1 << 20);

}  // namespace mayfly::storage
