#include "node/keyring.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/auth.h"

namespace mayfly::node {
namespace {

// The text of `path` when its modification time or size differ from the last read (recorded in mtime_ns/size), or
// nullopt when it did not change. The file must not be readable by group or others.
Result<std::optional<std::string>> read_if_changed(const std::string& path, const std::string& what, int64_t& mtime_ns,
                                                   int64_t& size) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return Status::invalid_argument("cannot read " + what + " " + path + ": " + std::strerror(errno));
  }
  const int64_t modified_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
  if (modified_ns == mtime_ns && static_cast<int64_t>(info.st_size) == size) return std::optional<std::string>();
  if ((info.st_mode & 077) != 0) {
    return Status::invalid_argument(what + " " + path + " may be read by other users; run: chmod 600 " + path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::invalid_argument("cannot read " + what + " " + path + ": " + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  mtime_ns = modified_ns;
  size = static_cast<int64_t>(info.st_size);
  return std::optional<std::string>(buffer.str());
}

std::optional<Role> parse_role(std::string_view text) {
  if (text == "readonly") return Role::kReadOnly;
  if (text == "readwrite") return Role::kReadWrite;
  if (text == "admin") return Role::kAdmin;
  if (text == "compliance") return Role::kCompliance;
  return std::nullopt;
}

}  // namespace

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kNone: return "none";
    case Role::kReadOnly: return "readonly";
    case Role::kReadWrite: return "readwrite";
    case Role::kAdmin: return "admin";
    case Role::kCompliance: return "compliance";
  }
  return "none";
}

bool role_allows(Role have, Role need) {
  if (have == Role::kNone) return false;
  if (have == Role::kAdmin) return true;
  switch (need) {
    case Role::kNone: return true;
    case Role::kReadOnly: return true;  // every role reads
    case Role::kReadWrite: return have == Role::kReadWrite;
    case Role::kCompliance: return have == Role::kCompliance;
    case Role::kAdmin: return false;
  }
  return false;
}

Result<std::vector<ClientKey>> parse_keys(std::string_view text, const std::string& origin) {
  std::vector<ClientKey> keys;
  std::istringstream lines{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string role_text, key, name, extra;
    if (!(fields >> role_text)) continue;  // blank
    const std::string where = origin + " line " + std::to_string(number);
    std::optional<Role> role = parse_role(role_text);
    if (!role) {
      // The field is not echoed: a line written KEY ROLE, or a key alone, would print the key into the log.
      return Status::invalid_argument(where + ": the first field (" + std::to_string(role_text.size()) +
                                      " bytes, not shown: it may be a key) is not readonly, readwrite or admin; "
                                      "expected ROLE KEY [NAME]");
    }
    if (!(fields >> key)) return Status::invalid_argument(where + ": a key must follow the role");
    if (key.size() < 16) {
      return Status::invalid_argument(where + ": the key is " + std::to_string(key.size()) +
                                      " bytes; use at least 16 (e.g. openssl rand -base64 32)");
    }
    fields >> name;
    if (fields >> extra) return Status::invalid_argument(where + ": expected ROLE KEY [NAME], found more");
    ClientKey entry{*role, key, name.empty() ? auth::fingerprint(key) : name, auth::sha256_hex(key)};
    for (const ClientKey& other : keys) {
      if (other.id == entry.id) {
        return Status::invalid_argument(where + ": the same key appears twice (as '" + other.name + "')");
      }
    }
    keys.push_back(std::move(entry));
  }
  return keys;
}

Result<Keyring> Keyring::load(const std::string& path) {
  Keyring keyring;
  keyring.path_ = path;
  if (path.empty()) return keyring;
  Status loaded = keyring.reload_if_changed();
  if (!loaded.is_ok()) return loaded;
  if (keyring.keys_.empty()) {
    return Status::invalid_argument(path + " holds no key; add lines ROLE KEY [NAME] (docs/security.md)");
  }
  return keyring;
}

Status Keyring::reload_if_changed() {
  if (path_.empty()) return Status::ok();
  int64_t mtime_ns = mtime_ns_, size = size_;
  Result<std::optional<std::string>> text = read_if_changed(path_, "keys file", mtime_ns, size);
  if (!text.is_ok()) return text.status();
  if (!text->has_value()) return Status::ok();
  Result<std::vector<ClientKey>> parsed = parse_keys(**text, path_);
  if (!parsed.is_ok()) return parsed.status();
  mtime_ns_ = mtime_ns;
  size_ = size;
  keys_ = std::move(parsed).value();
  ++generation_;
  return Status::ok();
}

std::optional<Keyring::Match> Keyring::match(std::string_view client_nonce, std::string_view server_nonce,
                                             std::string_view proof) const {
  std::optional<Match> found;
  for (const ClientKey& key : keys_) {
    // Every key is tried whether or not an earlier one matched, so the time taken says nothing about which did.
    const bool equal = auth::constant_time_equal(auth::session_client_proof(key.key, client_nonce, server_nonce), proof);
    if (equal && !found) {
      found = Match{key.role, key.id, key.name, auth::session_server_proof(key.key, client_nonce, server_nonce)};
    }
  }
  return found;
}

std::optional<Keyring::Match> Keyring::match_signature(std::string_view text, std::string_view signature) const {
  std::optional<Match> found;
  for (const ClientKey& key : keys_) {
    const bool equal = auth::constant_time_equal(auth::hmac_sha256(key.key, text), signature);
    if (equal && !found) found = Match{key.role, key.id, key.name, std::string()};
  }
  return found;
}

Role Keyring::role_of(const std::string& key_id) const {
  for (const ClientKey& key : keys_) {
    if (key.id == key_id) return key.role;
  }
  return Role::kNone;
}

Result<std::vector<std::string>> parse_cluster_secrets(std::string_view text, const std::string& origin) {
  std::vector<std::string> secrets;
  std::istringstream lines{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const size_t begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos || line[begin] == '#') continue;
    const size_t end = line.find_last_not_of(" \t\r");
    std::string secret = line.substr(begin, end - begin + 1);
    const std::string where = origin + " line " + std::to_string(number);
    if (secret.size() < 16) {
      return Status::invalid_argument(where + ": the secret is " + std::to_string(secret.size()) +
                                      " bytes; use at least 16 (e.g. openssl rand -base64 32)");
    }
    for (const std::string& other : secrets) {
      if (other == secret) return Status::invalid_argument(where + ": the same secret appears twice");
    }
    secrets.push_back(std::move(secret));
    if (secrets.size() > ClusterSecrets::kMaxClusterSecrets) {
      return Status::invalid_argument(origin + ": more than " + std::to_string(ClusterSecrets::kMaxClusterSecrets) +
                                      " secrets (one per line: the one this node proves with first)");
    }
  }
  if (secrets.empty()) return Status::invalid_argument(origin + " holds no secret; it must hold one per line");
  return secrets;
}

Result<ClusterSecrets> ClusterSecrets::load(const std::string& path) {
  ClusterSecrets secrets;
  secrets.path_ = path;
  if (path.empty()) return secrets;
  Status loaded = secrets.reload_if_changed();
  if (!loaded.is_ok()) return loaded;
  return secrets;
}

const std::string& ClusterSecrets::proving() const {
  static const std::string none;
  return secrets_.empty() ? none : secrets_.front();
}

Status ClusterSecrets::reload_if_changed() {
  if (path_.empty()) return Status::ok();
  int64_t mtime_ns = mtime_ns_, size = size_;
  Result<std::optional<std::string>> text = read_if_changed(path_, "cluster secret file", mtime_ns, size);
  if (!text.is_ok()) return text.status();
  if (!text->has_value()) return Status::ok();
  Result<std::vector<std::string>> parsed = parse_cluster_secrets(**text, path_);
  if (!parsed.is_ok()) return parsed.status();
  mtime_ns_ = mtime_ns;
  size_ = size;
  secrets_ = std::move(parsed).value();
  ++generation_;
  return Status::ok();
}

}  // namespace mayfly::node
