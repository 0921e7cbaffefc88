// A test-only LD_PRELOAD library for mayflyd (never linked into it), for disk_fault_test.cc: while the file
// `<data>/fail-log-reads` exists, reads of the node's LevelDB table blocks that hold nothing but Raft log entries fail
// with EIO — a disk whose unreadable sectors hold the log, while the state machine beside it in the same files reads
// fine. LevelDB's own read path then reports it (its iterator's status), as for an EIO from the device.
//
// How: it interposes leveldb::DB::Open (mayflyd calls it through the dynamic linker, so this definition comes first)
// and opens the database on an Env that wraps the real one: table files' reads are passed through and then judged by
// what they hold (tests/sim/table_block.h). The real DB::Open is the next definition (RTLD_NEXT). Only table reads
// made after the trigger appears fail; LevelDB keeps blocks it decompressed in its cache, so a compressed block that
// was read before stays readable (the test writes incompressible items).
#include <dlfcn.h>
#include <unistd.h>

#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/options.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "tests/sim/table_block.h"

namespace {

// storage/layout.h: KeyTag::kRaftEntry, the first byte of every Raft log entry's key.
constexpr char kRaftEntryKeyPrefix[] = "\x11";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class FailingTableFile final : public leveldb::RandomAccessFile {
 public:
  FailingTableFile(leveldb::RandomAccessFile* inner, std::string name, const std::string* trigger)
      : inner_(inner), name_(std::move(name)), trigger_(trigger) {}

  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result, char* scratch) const override {
    leveldb::Status status = inner_->Read(offset, n, result, scratch);
    if (status.ok() && ::access(trigger_->c_str(), F_OK) == 0 &&
        mayfly::sim::table_block_keys_all_start_with(std::string_view(result->data(), result->size()),
                                                     kRaftEntryKeyPrefix)) {
      *result = leveldb::Slice();
      return leveldb::Status::IOError(name_, std::strerror(EIO));
    }
    return status;
  }

 private:
  std::unique_ptr<leveldb::RandomAccessFile> inner_;
  std::string name_;
  const std::string* trigger_;
};

class LogReadFaultEnv final : public leveldb::EnvWrapper {
 public:
  LogReadFaultEnv(leveldb::Env* target, std::string trigger)
      : leveldb::EnvWrapper(target), trigger_(std::move(trigger)) {}

  leveldb::Status NewRandomAccessFile(const std::string& name, leveldb::RandomAccessFile** result) override {
    leveldb::Status status = target()->NewRandomAccessFile(name, result);
    if (status.ok() && (ends_with(name, ".ldb") || ends_with(name, ".sst"))) {
      *result = new FailingTableFile(*result, name, &trigger_);  // LevelDB owns the file, never the Env
    }
    return status;
  }

 private:
  const std::string trigger_;
};

std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The wrapping Env, held here for the process's life: LevelDB never deletes its Env, and a pointer in a global keeps
// it reachable, so LeakSanitizer (make sanitize) does not report it as a leak of mayflyd's.
leveldb::Env* process_env = nullptr;

}  // namespace

namespace leveldb {

Status DB::Open(const Options& options, const std::string& name, DB** dbptr) {
  using OpenFunction = Status (*)(const Options&, const std::string&, DB**);
  static const auto real = reinterpret_cast<OpenFunction>(dlsym(
      RTLD_NEXT, "_ZN7leveldb2DB4OpenERKNS_7OptionsERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEPPS0_"));
  if (real == nullptr) return Status::NotSupported("log read fault shim: no leveldb::DB::Open after this library");
  Options faulty = options;
  // `name` is <data>/db. The Env lives as long as the process (LevelDB never deletes its Env; mayflyd opens once).
  process_env = new LogReadFaultEnv(options.env, parent_directory(name) + "/fail-log-reads");
  faulty.env = process_env;
  return real(faulty, name, dbptr);
}

}  // namespace leveldb
