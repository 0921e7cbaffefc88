// The Env the store opens LevelDB with on the real file system: leveldb::Env::Default(), except that table files are
// read with pread(2) instead of being mapped into memory.
//
// LevelDB's default maps up to 1000 table files read-only. Every page a scan touches then counts in the process's
// resident set until the kernel takes it back, so a full pass over the store — a snapshot sent to a follower, a
// backup, a restart's first expiry scan — made a node's RSS grow with its data (a 5M-item store: +700 MB of mapped
// table pages during a backup, docs/benchmarks.md). Read with pread, the same pages sit in the kernel's page cache,
// shared and reclaimable, and the process holds only its block cache (StoreOptions::block_cache_bytes) and the
// blocks in flight. RocksDB reads this way by default (allow_mmap_reads = false).
//
// Each open table keeps one descriptor: at most StoreOptions::max_open_tables (mayflyd --max-open-tables, 990), and
// LevelDB keeps ten for other files. mayflyd raises its soft descriptor limit to the hard one at start, which must
// cover those and --max-connections (docs/operations.md, Limits).
// Thread-safety: the Env and its files are safe for LevelDB's concurrent use (pread has no shared file offset).
#pragma once

namespace leveldb {
class Env;
}

namespace mayfly::storage {

// Process-wide, never destroyed (LevelDB requires an Env to outlive every DB opened with it).
leveldb::Env* pread_table_env();

}  // namespace mayfly::storage
