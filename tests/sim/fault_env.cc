#include "tests/sim/fault_env.h"

#include <leveldb/helpers/memenv.h>


namespace mayfly::sim {

class FaultEnv::File final : public leveldb::WritableFile {
 public:
  File(leveldb::WritableFile* inner, FaultEnv* env, std::string name)
      : inner_(inner), env_(env), name_(std::move(name)) {}
  leveldb::Status Append(const leveldb::Slice& data) override {
    leveldb::Status status = inner_->Append(data);
    if (status.ok()) env_->on_append(name_, data.size());
    return status;
  }
  leveldb::Status Close() override { return inner_->Close(); }
  leveldb::Status Flush() override { return inner_->Flush(); }
  leveldb::Status Sync() override {
    leveldb::Status status = inner_->Sync();
    if (status.ok()) env_->on_sync(name_);
    return status;
  }

 private:
  std::unique_ptr<leveldb::WritableFile> inner_;
  FaultEnv* env_;
  std::string name_;
};

FaultEnv::FaultEnv() : FaultEnv(std::unique_ptr<leveldb::Env>(leveldb::NewMemEnv(leveldb::Env::Default()))) {}

FaultEnv::FaultEnv(std::unique_ptr<leveldb::Env> memory)
    : leveldb::EnvWrapper(memory.get()), memory_(std::move(memory)) {}

FaultEnv::~FaultEnv() = default;

leveldb::Status FaultEnv::NewWritableFile(const std::string& name, leveldb::WritableFile** result) {
  leveldb::Status status = target()->NewWritableFile(name, result);
  if (!status.ok()) return status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    files_[name] = FileState{};
  }
  *result = new File(*result, this, name);  // LevelDB owns the file
  return status;
}

leveldb::Status FaultEnv::NewAppendableFile(const std::string& name, leveldb::WritableFile** result) {
  uint64_t existing = 0;
  if (target()->FileExists(name)) target()->GetFileSize(name, &existing);
  leveldb::Status status = target()->NewAppendableFile(name, result);
  if (!status.ok()) return status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = files_.find(name);
    if (it == files_.end()) {
      files_[name] = FileState{existing, existing};  // unknown to us: it was durable before we saw it
    } else {
      it->second.size = existing;
    }
  }
  *result = new File(*result, this, name);
  return status;
}

leveldb::Status FaultEnv::RemoveFile(const std::string& name) {
  leveldb::Status status = target()->RemoveFile(name);
  std::lock_guard<std::mutex> lock(mutex_);
  files_.erase(name);
  return status;
}

leveldb::Status FaultEnv::RenameFile(const std::string& from, const std::string& to) {
  leveldb::Status status = target()->RenameFile(from, to);
  if (!status.ok()) return status;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = files_.find(from);
  if (it != files_.end()) {
    files_[to] = it->second;
    files_.erase(it);
  }
  return status;
}

void FaultEnv::on_append(const std::string& name, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  files_[name].size += bytes;
}

void FaultEnv::on_sync(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  FileState& state = files_[name];
  state.synced = state.size;
}

uint64_t FaultEnv::unsynced_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t total = 0;
  for (const auto& [name, state] : files_) total += state.size - state.synced;
  return total;
}

std::unique_ptr<FaultEnv> FaultEnv::crash_copy() {
  std::unique_ptr<FaultEnv> copy(new FaultEnv());
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_lost_ = 0;
  for (const auto& [name, state] : files_) {
    if (!target()->FileExists(name)) continue;
    leveldb::SequentialFile* raw_in = nullptr;
    if (!target()->NewSequentialFile(name, &raw_in).ok()) continue;
    std::unique_ptr<leveldb::SequentialFile> in(raw_in);
    std::string kept(state.synced, '\0');
    leveldb::Slice read;
    if (!in->Read(state.synced, &read, kept.data()).ok()) continue;
    kept.assign(read.data(), read.size());
    bytes_lost_ += state.size - kept.size();
    leveldb::WritableFile* raw_out = nullptr;
    if (!copy->target()->NewWritableFile(name, &raw_out).ok()) continue;
    std::unique_ptr<leveldb::WritableFile> out(raw_out);
    out->Append(kept);
    out->Close();
    copy->files_[name] = FileState{kept.size(), kept.size()};
  }
  return copy;
}

// ---- IoFaultEnv -----------------------------------------------------------------------------------------------

// Reads fail once the pattern is set, also on a file opened before (a snapshot file is opened per chunk, LevelDB's
// tables stay open).
class IoFaultEnv::RandomAccessFile final : public leveldb::RandomAccessFile {
 public:
  RandomAccessFile(leveldb::RandomAccessFile* inner, IoFaultEnv* env, std::string name)
      : inner_(inner), env_(env), name_(std::move(name)) {}
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result, char* scratch) const override {
    if (env_->matches_read(name_)) return env_->injected(name_);
    return inner_->Read(offset, n, result, scratch);
  }

 private:
  std::unique_ptr<leveldb::RandomAccessFile> inner_;
  IoFaultEnv* env_;
  std::string name_;
};

class IoFaultEnv::WritableFile final : public leveldb::WritableFile {
 public:
  WritableFile(leveldb::WritableFile* inner, IoFaultEnv* env, std::string name)
      : inner_(inner), env_(env), name_(std::move(name)) {}
  leveldb::Status Append(const leveldb::Slice& data) override { return inner_->Append(data); }
  leveldb::Status Close() override { return inner_->Close(); }
  leveldb::Status Flush() override { return inner_->Flush(); }
  leveldb::Status Sync() override {
    if (env_->matches_sync(name_)) return env_->injected(name_);
    return inner_->Sync();
  }

 private:
  std::unique_ptr<leveldb::WritableFile> inner_;
  IoFaultEnv* env_;
  std::string name_;
};

IoFaultEnv::IoFaultEnv(leveldb::Env* target) : leveldb::EnvWrapper(target) {}
IoFaultEnv::~IoFaultEnv() = default;

void IoFaultEnv::fail_reads_matching(std::string pattern) {
  std::lock_guard<std::mutex> lock(mutex_);
  read_pattern_ = std::move(pattern);
}

void IoFaultEnv::fail_syncs_matching(std::string pattern) {
  std::lock_guard<std::mutex> lock(mutex_);
  sync_pattern_ = std::move(pattern);
}

bool IoFaultEnv::matches_read(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  return !read_pattern_.empty() && name.find(read_pattern_) != std::string::npos;
}

bool IoFaultEnv::matches_sync(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  return !sync_pattern_.empty() && name.find(sync_pattern_) != std::string::npos;
}

leveldb::Status IoFaultEnv::injected(const std::string& name) {
  injected_.fetch_add(1);
  return leveldb::Status::IOError(name, "Input/output error (injected EIO)");
}

leveldb::Status IoFaultEnv::NewSequentialFile(const std::string& name, leveldb::SequentialFile** result) {
  if (matches_read(name)) return injected(name);
  return target()->NewSequentialFile(name, result);
}

leveldb::Status IoFaultEnv::NewRandomAccessFile(const std::string& name, leveldb::RandomAccessFile** result) {
  if (matches_read(name)) return injected(name);
  leveldb::Status status = target()->NewRandomAccessFile(name, result);
  if (status.ok()) *result = new RandomAccessFile(*result, this, name);
  return status;
}

leveldb::Status IoFaultEnv::NewWritableFile(const std::string& name, leveldb::WritableFile** result) {
  leveldb::Status status = target()->NewWritableFile(name, result);
  if (status.ok()) *result = new WritableFile(*result, this, name);
  return status;
}

leveldb::Status IoFaultEnv::RenameFile(const std::string& from, const std::string& to) {
  leveldb::Status status = target()->RenameFile(from, to);
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    renames_.emplace_back(from, to);
  }
  return status;
}

std::vector<std::pair<std::string, std::string>> IoFaultEnv::renames() {
  std::lock_guard<std::mutex> lock(mutex_);
  return renames_;
}

}  // namespace mayfly::sim
