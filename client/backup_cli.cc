#include "client/backup_cli.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

namespace mayfly::client {
namespace {

constexpr size_t kHeaderBytes = 48;
constexpr size_t kTrailerBytes = 64;
constexpr uint32_t kChunkBytes = 1 << 20;
constexpr auto kExportWait = std::chrono::minutes(30);

using SteadyClock = std::chrono::steady_clock;

uint64_t get_u64(const std::string& bytes, size_t at) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

std::string to_hex(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 15]);
  }
  return out;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

int fail(const std::string& message) {
  std::cout << "{\"status\":500,\"message\":" << boost::json::serialize(boost::json::string(message)) << "}"
            << std::endl;
  std::cerr << "mayfly backup: " << message << std::endl;
  return 1;
}

// The node to back up from and its address: --node, else the reachable follower with the highest applied index,
// else the leader.
bool choose_node(Client& cluster, uint64_t wanted, uint64_t& node, std::string& address, std::string& error) {
  Request status;
  status.operation = api::ClusterStatus{};
  Response answer = cluster.execute(status);
  if (!answer.ok()) {
    error = "cluster status failed (" + std::to_string(answer.status) + "): " + answer.message;
    return false;
  }
  boost::system::error_code parse_error;
  boost::json::value body = boost::json::parse(answer.body, parse_error);
  if (parse_error || !body.is_object() || !body.as_object().contains("nodes")) {
    error = "cluster status answered an unexpected body";
    return false;
  }
  uint64_t best_applied = 0;
  bool best_is_follower = false;
  for (const boost::json::value& entry : body.at("nodes").as_array()) {
    const boost::json::object& n = entry.as_object();
    if (!n.contains("reachable") || !n.at("reachable").as_bool() || !n.contains("address")) continue;
    const uint64_t id = n.at("id").to_number<uint64_t>();
    const std::string role = n.contains("role") ? std::string(n.at("role").as_string()) : "";
    const uint64_t applied = n.contains("applied") ? n.at("applied").to_number<uint64_t>() : 0;
    const std::string where(n.at("address").as_string());
    if (wanted != 0) {
      if (id == wanted) {
        node = id;
        address = where;
        return true;
      }
      continue;
    }
    const bool follower = role == "follower";
    if (node == 0 || (follower && !best_is_follower) || (follower == best_is_follower && applied > best_applied)) {
      node = id;
      address = where;
      best_applied = applied;
      best_is_follower = follower;
    }
  }
  if (node == 0) {
    error = wanted != 0 ? "node " + std::to_string(wanted) + " is not a reachable member of the cluster"
                        : "no reachable node";
    return false;
  }
  return true;
}

// How this client reaches `node`: its advertised address when that is one of --endpoints, else the --endpoints entry
// that answers as `node` (behind NAT or a port mapping — compose's published ports — the advertised "mayfly2:7100"
// does not resolve where the CLI runs), else the advertised address.
std::string address_for(Client& cluster, const ClientOptions& options, uint64_t node, const std::string& advertised) {
  const std::vector<std::string>& endpoints = options.endpoints;
  if (std::find(endpoints.begin(), endpoints.end(), advertised) != endpoints.end()) return advertised;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    Request status;
    status.operation = api::ClusterStatus{};
    status.endpoint = i + 1;
    const Response answer = cluster.execute(status);
    if (answer.ok() && answer.served_by == node) return endpoints[i];
  }
  return advertised;
}

}  // namespace

std::string verify_backup_bytes_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot open " + path;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size < kHeaderBytes + kTrailerBytes) return "truncated (" + std::to_string(size) + " bytes)";
  in.seekg(0);
  std::string header(8, '\0');
  in.read(header.data(), 8);
  if (header != "MAYFLYBK") return "not a Mayfly backup (no MAYFLYBK header)";
  std::string trailer(kTrailerBytes, '\0');
  in.seekg(static_cast<std::streamoff>(size - kTrailerBytes));
  in.read(trailer.data(), static_cast<std::streamsize>(kTrailerBytes));
  if (!in || trailer.substr(0, 8) != "MFBKTAIL") return "truncated (no trailer)";
  if (get_u64(trailer, 8) != size - kHeaderBytes - kTrailerBytes) return "truncated or padded (body length)";
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  EVP_DigestInit_ex(context, EVP_sha256(), nullptr);
  in.seekg(0);
  std::string piece(1 << 20, '\0');
  uint64_t left = size - kTrailerBytes;
  while (left > 0 && in) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, piece.size()));
    in.read(piece.data(), static_cast<std::streamsize>(n));
    EVP_DigestUpdate(context, piece.data(), n);
    left -= n;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context, digest, &length);
  EVP_MD_CTX_free(context);
  if (left != 0) return "read error";
  if (std::string(reinterpret_cast<const char*>(digest), length) != trailer.substr(32, 32)) {
    return "checksum mismatch (SHA-256 " + to_hex(digest, length) + "): corrupted in transfer or on disk";
  }
  return "";
}

int run_backup(const BackupCommand& command) {
  std::error_code exists_error;
  if (std::filesystem::exists(command.out, exists_error)) {
    std::cerr << "mayfly backup: " << command.out << " exists; give a new file name (a backup never overwrites)"
              << std::endl;
    return 2;
  }
  Client cluster(command.options);
  uint64_t node = 0;
  std::string address, error;
  if (!choose_node(cluster, command.node, node, address, error)) return fail(error);
  address = address_for(cluster, command.options, node, address);
  ClientOptions pinned = command.options;
  pinned.endpoints = {address};
  Client client(pinned);

  const auto started = SteadyClock::now();
  Request open;
  open.operation = api::BackupOpen{};
  Response opened = client.execute(open);
  if (!opened.ok()) {
    return fail("node " + std::to_string(node) + " refused the backup (" + std::to_string(opened.status) +
                "): " + opened.message);
  }
  boost::system::error_code parse_error;
  boost::json::value opened_body = boost::json::parse(opened.body, parse_error);
  if (parse_error || !opened_body.is_object() || !opened_body.as_object().contains("backup")) {
    return fail("unexpected answer to backupOpen: " + opened.body);
  }
  const uint64_t id = opened_body.at("backup").to_number<uint64_t>();

  const std::string partial = command.out + ".partial";
  std::ofstream file(partial, std::ios::binary | std::ios::trunc);
  if (!file) return fail("cannot create " + partial);
  std::error_code mode_error;  // the whole database is in it: owner only, like the node's own files
  std::filesystem::permissions(partial, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               mode_error);
  auto abandon = [&](const std::string& message) {
    file.close();
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    if (command.progress) std::cerr << std::endl;
    return fail(message);
  };
  uint64_t offset = 0;
  uint64_t total = 0;
  boost::json::object summary;
  auto last_draw = SteadyClock::now() - std::chrono::seconds(1);
  const auto export_deadline = SteadyClock::now() + kExportWait;
  for (;;) {
    Request read;
    read.operation = api::BackupRead{.backup = id, .offset = offset, .max_bytes = kChunkBytes};
    Response chunk = client.execute(read);
    if (!chunk.ok()) return abandon("reading backup " + std::to_string(id) + " from node " + std::to_string(node) +
                                    " failed (" + std::to_string(chunk.status) + "): " + chunk.message);
    boost::json::value body = boost::json::parse(chunk.body, parse_error);
    if (parse_error || !body.is_object() || !body.as_object().contains("state")) {
      return abandon("unexpected answer to backupRead: " + chunk.body);
    }
    if (body.at("state").as_string() == "exporting") {
      if (SteadyClock::now() > export_deadline) return abandon("node " + std::to_string(node) + " did not finish "
                                                               "exporting in 30 minutes");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    summary = body.as_object();
    total = summary.at("bytes").to_number<uint64_t>();
    if (chunk.data.empty()) {
      if (offset != total) return abandon("node " + std::to_string(node) + " sent no bytes at offset " +
                                          std::to_string(offset) + " of " + std::to_string(total));
      break;  // that read at the end released the backup on the node
    }
    if (offset + chunk.data.size() > total) return abandon("node sent more bytes than the backup holds");
    file.write(chunk.data.data(), static_cast<std::streamsize>(chunk.data.size()));
    if (!file) return abandon("write to " + partial + " failed (disk full?)");
    offset += chunk.data.size();
    const auto now = SteadyClock::now();
    if (command.progress && (now - last_draw >= std::chrono::milliseconds(200) || offset == total)) {
      last_draw = now;
      const double seconds = std::max(1e-3, std::chrono::duration<double>(now - started).count());
      std::fprintf(stderr, "\r  %s / %s  %3.0f%%  %s/s   ", human_bytes(static_cast<double>(offset)).c_str(),
                   human_bytes(static_cast<double>(total)).c_str(), total == 0 ? 100.0 : 100.0 * offset / total,
                   human_bytes(offset / seconds).c_str());
      std::fflush(stderr);
    }
  }
  file.flush();
  file.close();
  if (command.progress) std::cerr << std::endl;
  {
    const int fd = ::open(partial.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      if (fd >= 0) ::close(fd);
      return abandon("fsync of " + partial + " failed");
    }
    ::close(fd);
  }
  if (std::string problem = verify_backup_bytes_file(partial); !problem.empty()) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    return fail("the downloaded backup is refused: " + problem + " (nothing written to " + command.out + ")");
  }
  std::error_code rename_error;
  std::filesystem::rename(partial, command.out, rename_error);
  if (rename_error) return fail("rename " + partial + " to " + command.out + ": " + rename_error.message());
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
  summary.erase("state");
  summary["file"] = command.out;
  summary["servedBy"] = node;
  summary["seconds"] = seconds;
  const int64_t applied_micros = summary.at("appliedTime").to_number<int64_t>();
  const std::time_t applied_seconds = static_cast<std::time_t>(applied_micros / 1'000'000);
  char utc[32];
  std::strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&applied_seconds));
  summary["appliedTimeUtc"] = utc;
  std::cout << "{\"status\":200,\"body\":" << boost::json::serialize(summary) << "}" << std::endl;
  if (command.progress) {
    std::cerr << "backup of node " << node << " at index " << summary.at("appliedIndex").to_number<uint64_t>()
              << " (replicated time " << utc << "): " << summary.at("items").to_number<uint64_t>() << " items, "
              << human_bytes(static_cast<double>(total)) << " in " << seconds << " s -> " << command.out << std::endl;
  }
  return 0;
}

}  // namespace mayfly::client
