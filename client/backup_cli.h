// `mayfly backup create --out FILE [--node ID]`: downloads an online backup (docs/operations.md, "Backup and restore")
// from one node — a follower by default, the most caught-up one that answers — in bounded chunks (proto
// Request.backupRead), to FILE.partial, checks it end to end (the SHA-256 in its trailer, storage/backup_file.h) and
// renames it to FILE. On a terminal, stderr shows a progress line (bytes, rate). stdout gets one JSON summary (applied
// index, replicated time, items, bytes, checksum). Exit: 0 done, 1 failed (nothing left at FILE), 2 usage (FILE
// exists).
#pragma once

#include <cstdint>
#include <string>

#include "client/client.h"

namespace mayfly::client {

struct BackupCommand {
  ClientOptions options;     // the cluster (its endpoints, key, TLS)
  std::string out;           // FILE
  uint64_t node = 0;         // 0: pick a follower
  bool progress = false;     // draw the progress line on stderr
};

// Runs the backup; returns the exit code and prints the summary (stdout) and errors (stderr).
int run_backup(const BackupCommand& command);

// Checks a downloaded backup's framing and checksum (the format of storage/backup_file.h: a 48-byte header starting
// "MAYFLYBK", a 64-byte trailer starting "MFBKTAIL" with the body length at [8,16) and the SHA-256 of header and body
// at [32,64)). Empty on success, else what is wrong.
std::string verify_backup_bytes_file(const std::string& path);

}  // namespace mayfly::client
