// Keyring: the client keys a node accepts (--keys-file) and the role each grants, re-read when the file changes so
// keys rotate without a restart (add the new key on every node, move clients, remove the old one).
//
// File format, one key per line (blank lines and `#` comments ignored):
//     ROLE KEY [NAME]       e.g.  admin  kP3...base64...  ops-team
// Roles: readonly (reads, lists, queries, cluster status), readwrite (also every data, database and container write),
// admin (also membership changes and leadership transfer). A key is at least 16 bytes with no spaces. The file must not
// be readable by group or others.
//
// Keys are never logged or echoed: logs and metrics name a key by NAME, or by its fingerprint (auth::fingerprint).
//
// Thread-safety: one thread (the RPC thread) uses a Keyring.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mayfly::node {

enum class Role { kNone = 0, kReadOnly = 1, kReadWrite = 2, kAdmin = 3 };
std::string_view role_name(Role role);

struct ClientKey {
  Role role = Role::kNone;
  std::string key;
  std::string name;  // from the file, else the fingerprint
  std::string id;    // SHA-256 of the key (hex, full): how a session refers to its key across reloads
};

// Parses a keys file's text; the error names the line and what is wrong with it (never the key itself).
Result<std::vector<ClientKey>> parse_keys(std::string_view text, const std::string& origin);

class Keyring {
 public:
  // An empty path: no keys, every session is admin (the node runs open).
  static Result<Keyring> load(const std::string& path);

  bool open() const { return path_.empty(); }
  size_t size() const { return keys_.size(); }
  // Bumped on every reload that changed the keys.
  uint64_t generation() const { return generation_; }

  // Re-reads the file if its modification time or size changed. A file that no longer parses keeps the old keys (and
  // the error is returned, for a log line).
  Status reload_if_changed();

  struct Match {
    Role role = Role::kNone;
    std::string key_id;
    std::string name;
    std::string server_proof;
  };
  // The key whose session proof over these nonces is `proof` (every key is tried, each in constant time).
  std::optional<Match> match(std::string_view client_nonce, std::string_view server_nonce,
                             std::string_view proof) const;
  // The role of the key with this id now (kNone once it was removed).
  Role role_of(const std::string& key_id) const;

 private:
  std::string path_;
  std::vector<ClientKey> keys_;
  int64_t mtime_ns_ = 0;
  int64_t size_ = -1;
  uint64_t generation_ = 0;
};

}  // namespace mayfly::node
