#include "storage/backup_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "common/codec.h"

namespace mayfly::storage {
namespace {

constexpr std::string_view kHeaderMagic = "MAYFLYBK";
constexpr std::string_view kTrailerMagic = "MFBKTAIL";
constexpr uint32_t kFormatVersion = 1;

void put_u32(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xff));
}
void put_u64(std::string& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xff));
}
uint64_t get_u64(std::string_view bytes, size_t at) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}
uint32_t get_u32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

std::string encode_header(const BackupHeader& header) {
  std::string out(kHeaderMagic);
  put_u32(out, kFormatVersion);
  put_u64(out, header.applied_index);
  put_u64(out, static_cast<uint64_t>(header.applied_ts_micros));
  put_u64(out, header.source_node);
  put_u64(out, static_cast<uint64_t>(header.created_micros));
  put_u32(out, 0);
  return out;
}

Status errno_status(const std::string& what, const std::string& path) {
  return Status::io_error(what + " " + path + ": " + std::strerror(errno));
}

class File {
 public:
  explicit File(int fd) : fd_(fd) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

Status write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno_status("write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return Status::ok();
}

}  // namespace

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(), nullptr);
}
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }
void Sha256::update(std::string_view bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), bytes.data(), bytes.size());
}
std::string Sha256::finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest, &size);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string BackupSummary::to_json() const {
  return "{\"appliedIndex\":" + std::to_string(header.applied_index) +
         ",\"appliedTime\":" + std::to_string(header.applied_ts_micros) +
         ",\"sourceNode\":" + std::to_string(header.source_node) +
         ",\"created\":" + std::to_string(header.created_micros) + ",\"items\":" + std::to_string(items) +
         ",\"itemBytes\":" + std::to_string(item_bytes) + ",\"bytes\":" + std::to_string(file_bytes) +
         ",\"sha256\":\"" + sha256_hex + "\"}";
}

Result<BackupSummary> write_backup_file(const StateMachine::View& view, uint64_t source_node, int64_t created_micros,
                                        const std::string& path, size_t piece_bytes) {
  File file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (file.fd() < 0) return errno_status("create", path);
  BackupSummary summary;
  summary.header = BackupHeader{view.applied().index.value(), view.applied().ts_micros, source_node, created_micros};
  Sha256 sha;
  const std::string header = encode_header(summary.header);
  sha.update(header);
  MAYFLY_RETURN_IF_ERROR(write_all(file.fd(), header, path));
  StateMachine::View::SnapshotFigures figures;
  MAYFLY_RETURN_IF_ERROR(view.export_snapshot_to(
      [&](std::string_view piece) {
        sha.update(piece);
        summary.body_bytes += piece.size();
        return write_all(file.fd(), piece, path);
      },
      piece_bytes, &figures));
  summary.items = figures.items;
  summary.item_bytes = figures.item_bytes;
  const std::string digest = sha.finish();
  summary.sha256_hex = hex(digest);
  std::string trailer(kTrailerMagic);
  put_u64(trailer, summary.body_bytes);
  put_u64(trailer, summary.items);
  put_u64(trailer, summary.item_bytes);
  trailer += digest;
  MAYFLY_RETURN_IF_ERROR(write_all(file.fd(), trailer, path));
  if (::fsync(file.fd()) != 0) return errno_status("fsync", path);
  summary.file_bytes = kBackupHeaderBytes + summary.body_bytes + kBackupTrailerBytes;
  return summary;
}

Result<BackupSummary> read_backup_file(const std::string& path, std::string* body) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found("cannot open backup file " + path + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  const std::string refused = "backup file " + path + " refused: ";
  if (size < kBackupHeaderBytes + kBackupTrailerBytes) {
    return Status::invalid_argument(refused + "it is truncated or not a Mayfly backup (" + std::to_string(size) +
                                    " bytes, a backup has at least " +
                                    std::to_string(kBackupHeaderBytes + kBackupTrailerBytes) + ")");
  }
  std::string header(kBackupHeaderBytes, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header.size()));
  if (!in) return Status::io_error(refused + "cannot read its header");
  if (std::string_view(header).substr(0, 8) != kHeaderMagic) {
    return Status::invalid_argument(refused + "not a Mayfly backup (no MAYFLYBK header)");
  }
  if (get_u32(header, 8) != kFormatVersion) {
    return Status::invalid_argument(refused + "format version " + std::to_string(get_u32(header, 8)) +
                                    " (this build reads version " + std::to_string(kFormatVersion) + ")");
  }
  BackupSummary summary;
  summary.header.applied_index = get_u64(header, 12);
  summary.header.applied_ts_micros = static_cast<int64_t>(get_u64(header, 20));
  summary.header.source_node = get_u64(header, 28);
  summary.header.created_micros = static_cast<int64_t>(get_u64(header, 36));
  summary.file_bytes = size;
  const uint64_t body_bytes = size - kBackupHeaderBytes - kBackupTrailerBytes;
  std::string trailer(kBackupTrailerBytes, '\0');
  in.seekg(static_cast<std::streamoff>(size - kBackupTrailerBytes));
  in.read(trailer.data(), static_cast<std::streamsize>(trailer.size()));
  if (!in) return Status::io_error(refused + "cannot read its trailer");
  if (std::string_view(trailer).substr(0, 8) != kTrailerMagic) {
    return Status::invalid_argument(refused + "truncated (its end is not a backup trailer: the copy stopped early "
                                    "or the file was cut)");
  }
  summary.body_bytes = get_u64(trailer, 8);
  summary.items = get_u64(trailer, 16);
  summary.item_bytes = get_u64(trailer, 24);
  if (summary.body_bytes != body_bytes) {
    return Status::invalid_argument(refused + "its trailer records " + std::to_string(summary.body_bytes) +
                                    " bytes of state, the file holds " + std::to_string(body_bytes) +
                                    " (truncated or padded)");
  }
  const std::string expected = trailer.substr(32, 32);
  Sha256 sha;
  sha.update(header);
  in.seekg(static_cast<std::streamoff>(kBackupHeaderBytes));
  if (body != nullptr) {
    body->clear();
    body->reserve(body_bytes);
  }
  std::string piece(1 << 20, '\0');
  uint64_t left = body_bytes;
  while (left > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, piece.size()));
    in.read(piece.data(), static_cast<std::streamsize>(n));
    if (!in) return Status::io_error(refused + "read error in its body");
    sha.update(std::string_view(piece.data(), n));
    if (body != nullptr) body->append(piece.data(), n);
    left -= n;
  }
  const std::string actual = sha.finish();
  if (actual != expected) {
    return Status::corruption(refused + "checksum mismatch (SHA-256 " + hex(actual) + ", recorded " + hex(expected) +
                              "): the file is corrupted");
  }
  summary.sha256_hex = hex(actual);
  return summary;
}

Result<StateMachine::SnapshotSource> open_backup_body(const std::string& path, BackupSummary* summary,
                                                      size_t piece_bytes) {
  MAYFLY_ASSIGN_OR_RETURN(*summary, read_backup_file(path));
  // What the source reads as it goes: the file again, from the header to the end of the body, hashed again.
  struct Reading {
    std::string path;
    std::unique_ptr<File> file;
    Sha256 sha;
    uint64_t offset = 0;  // the next byte to read, from the start of the file
    uint64_t end = 0;     // the end of the body
    std::string expected_hex;
    bool finished = false;
  };
  auto reading = std::make_shared<Reading>();
  reading->path = path;
  reading->file = std::make_unique<File>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (reading->file->fd() < 0) return errno_status("cannot open backup file", path);
  reading->end = kBackupHeaderBytes + summary->body_bytes;
  reading->expected_hex = summary->sha256_hex;
  const std::string refused = "backup file " + path + " refused: ";
  // One read of at most `bytes` at the current offset; "" only at the end of the body.
  auto read_piece = [reading, refused](uint64_t bytes) -> Result<std::string> {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, reading->end - reading->offset));
    std::string piece(n, '\0');
    size_t got = 0;
    while (got < n) {
      const ssize_t read = ::pread(reading->file->fd(), piece.data() + got, n - got,
                                   static_cast<off_t>(reading->offset + got));
      if (read < 0 && errno == EINTR) continue;
      if (read < 0) return Status::io_error(refused + "read error in its body: " + std::strerror(errno));
      if (read == 0) {
        return Status::corruption(refused + "it is shorter than when it was checked: the file changed while it was "
                                  "being restored");
      }
      got += static_cast<size_t>(read);
    }
    reading->sha.update(piece);
    reading->offset += n;
    return piece;
  };
  // The header goes into the hash first, as the checksum covers it.
  MAYFLY_ASSIGN_OR_RETURN(std::string header, read_piece(kBackupHeaderBytes));
  (void)header;
  piece_bytes = std::max<size_t>(piece_bytes, 1);
  return StateMachine::SnapshotSource([reading, read_piece, refused, piece_bytes](size_t max_bytes)
                                          -> Result<std::string> {
    if (reading->offset < reading->end) return read_piece(std::clamp<size_t>(max_bytes, 1, piece_bytes));
    if (!reading->finished) {
      const std::string actual = hex(reading->sha.finish());
      if (actual != reading->expected_hex) {
        return Status::corruption(refused + "checksum mismatch (SHA-256 " + actual + ", recorded " +
                                  reading->expected_hex + "): the file changed while it was being restored");
      }
      reading->finished = true;
    }
    return std::string();
  });
}

}  // namespace mayfly::storage
