// The store reads LevelDB's table files with pread, not mmap (storage/pread_env.h): a full scan of a store on the
// real file system leaves no table file mapped into the process, so its pages never count in the node's RSS.
// Real LevelDB in a temp dir; the control opens the same data with LevelDB's default Env and sees the mappings, so
// the check can fail.
#include "storage/pread_env.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/write_batch.h>

#include <fstream>
#include <memory>
#include <string>

#include "storage/state_machine.h"
#include "tests/unit/store_fixture.h"

namespace mayfly::storage::testing {
namespace {

// Lines of /proc/self/maps naming a table file under `dir`.
int mapped_table_files(const std::string& dir) {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find(dir) != std::string::npos && line.find(".ldb") != std::string::npos) ++count;
  }
  return count;
}

// Writes 8 MB in 1 KB values and compacts it into table files.
void fill(leveldb::DB& db) {
  for (int batch = 0; batch < 64; ++batch) {
    leveldb::WriteBatch writes;
    for (int i = 0; i < 128; ++i) {
      writes.Put("k" + std::to_string(batch * 128 + i + 100000), std::string(1024, static_cast<char>('a' + i % 26)));
    }
    ASSERT_TRUE(db.Write(leveldb::WriteOptions(), &writes).ok());
  }
  db.CompactRange(nullptr, nullptr);
}

// Reads every value, bypassing the block cache, and checks them.
void scan(leveldb::DB& db) {
  leveldb::ReadOptions options;
  options.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(db.NewIterator(options));
  int seen = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const int i = std::stoi(it->key().ToString().substr(1)) - 100000;
    ASSERT_EQ(it->value().ToString(), std::string(1024, static_cast<char>('a' + i % 128 % 26)));
    ++seen;
  }
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(seen, 64 * 128);
}

TEST(PreadEnv, TheStoreScansItsTableFilesWithoutMappingThem) {
  TempDir dir;
  StoreOptions options;
  options.path = dir.path() + "/store";
  options.block_cache_bytes = 1 << 20;
  auto state = StateMachine::open(options);
  ASSERT_TRUE(state.is_ok()) << state.status().to_string();
  ASSERT_NO_FATAL_FAILURE(fill(*(*state)->leveldb()));
  ASSERT_NO_FATAL_FAILURE(scan(*(*state)->leveldb()));
  EXPECT_EQ(mapped_table_files(options.path), 0);
}

// The control: LevelDB's own Env maps the same files, and the count above sees it.
TEST(PreadEnv, LevelDbsDefaultEnvMapsThem) {
  TempDir dir;
  leveldb::Options options;
  options.create_if_missing = true;
  leveldb::DB* raw = nullptr;
  ASSERT_TRUE(leveldb::DB::Open(options, dir.path() + "/db", &raw).ok());
  std::unique_ptr<leveldb::DB> db(raw);
  ASSERT_NO_FATAL_FAILURE(fill(*db));
  ASSERT_NO_FATAL_FAILURE(scan(*db));
  EXPECT_GT(mapped_table_files(dir.path() + "/db"), 0);
}

// A table file that is gone reads as NotFound (LevelDB then tries the file's older .sst name), others as IOError.
TEST(PreadEnv, AMissingFileIsNotFound) {
  TempDir dir;
  leveldb::RandomAccessFile* file = nullptr;
  leveldb::Status status = pread_table_env()->NewRandomAccessFile(dir.path() + "/000001.ldb", &file);
  EXPECT_TRUE(status.IsNotFound()) << status.ToString();
  EXPECT_EQ(file, nullptr);
  status = pread_table_env()->NewRandomAccessFile(dir.path() + "/no-such-dir/000001.ldb", &file);
  EXPECT_FALSE(status.ok());
}

// Reads at the end of a file come back short, not as an error; a read past it is empty.
TEST(PreadEnv, ReadsAtTheEndOfAFileAreShort) {
  TempDir dir;
  const std::string path = dir.path() + "/f";
  std::ofstream(path) << "0123456789";
  leveldb::RandomAccessFile* raw = nullptr;
  ASSERT_TRUE(pread_table_env()->NewRandomAccessFile(path, &raw).ok());
  std::unique_ptr<leveldb::RandomAccessFile> file(raw);
  char scratch[16];
  leveldb::Slice got;
  ASSERT_TRUE(file->Read(2, 4, &got, scratch).ok());
  EXPECT_EQ(got.ToString(), "2345");
  ASSERT_TRUE(file->Read(6, 16, &got, scratch).ok());
  EXPECT_EQ(got.ToString(), "6789");
  ASSERT_TRUE(file->Read(100, 4, &got, scratch).ok());
  EXPECT_EQ(got.size(), 0u);
}

}  // namespace
}  // namespace mayfly::storage::testing
