// mayflyd --restore FILE --ttl MODE [--dry-run]: starting a new cluster from an online backup (storage/restore.h).
// Thread-safety: a free function, run by main() on its own thread before any of the node's threads start.
#pragma once

#include "node/config.h"

namespace mayfly::node {

// Restores config.restore_file into config.data_dir (this node the new cluster's only voter), printing the figures as
// JSON on stdout and in the log. Returns -1 to go on starting the node, or the exit code: 0 after a dry run, 1 when
// the file cannot be read or written, 2 when it is refused (not a backup, truncated, corrupted, data dir not empty).
int restore_from_backup(const NodeConfig& config);

}  // namespace mayfly::node
