#include "storage/pread_env.h"

#include <fcntl.h>
#include <leveldb/env.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace mayfly::storage {
namespace {

leveldb::Status posix_error(const std::string& context, int error) {
  if (error == ENOENT) return leveldb::Status::NotFound(context, std::strerror(error));
  return leveldb::Status::IOError(context, std::strerror(error));
}

class PreadFile final : public leveldb::RandomAccessFile {
 public:
  PreadFile(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
  ~PreadFile() override { ::close(fd_); }
  PreadFile(const PreadFile&) = delete;
  PreadFile& operator=(const PreadFile&) = delete;

  // Up to n bytes at offset; fewer only at the end of the file (LevelDB checks the length it gets).
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result, char* scratch) const override {
    size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        *result = leveldb::Slice(scratch, 0);
        return posix_error(name_, errno);
      }
      if (got == 0) break;  // end of file
      done += static_cast<size_t>(got);
    }
    *result = leveldb::Slice(scratch, done);
    return leveldb::Status::OK();
  }

 private:
  const std::string name_;
  const int fd_;
};

class PreadEnv final : public leveldb::EnvWrapper {
 public:
  PreadEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}

  leveldb::Status NewRandomAccessFile(const std::string& name, leveldb::RandomAccessFile** result) override {
    *result = nullptr;
    int fd;
    do {
      fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return posix_error(name, errno);
    *result = new PreadFile(name, fd);
    return leveldb::Status::OK();
  }
};

}  // namespace

leveldb::Env* pread_table_env() {
  static PreadEnv* const env = new PreadEnv();  // never destroyed: DBs may close during static destruction
  return env;
}

}  // namespace mayfly::storage
