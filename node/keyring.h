// Keyring: the client keys a node accepts (--keys-file) and the role each grants, re-read when the file changes so
// keys rotate without a restart (add the new key on every node, move clients, remove the old one).
//
// File format, one key per line (blank lines and `#` comments ignored):
//     ROLE KEY [NAME]       e.g.  admin  kP3...base64...  ops-team
// Roles: readonly (reads, lists, queries, cluster status), readwrite (also every data, database and container write),
// compliance (readonly's reads, and legal holds: set, release, list and their audit), admin (everything: also
// membership changes and leadership transfer, and legal holds). A key is at least 16 bytes with no spaces. The file
// must not be readable by group or others.
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

// compliance: what readonly may, and legal holds (set, release, list, audit: docs/retention.md); admin may everything.
enum class Role { kNone = 0, kReadOnly = 1, kReadWrite = 2, kAdmin = 3, kCompliance = 4 };
std::string_view role_name(Role role);
// Whether a key of role `have` may run an operation that needs `need` (kReadOnly, kReadWrite, kCompliance or kAdmin).
bool role_allows(Role have, Role need);

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
  // The key K with HMAC-SHA256(K, text) == signature: a Cosmos DB master-key signature (gateway/protocol.h), where the
  // Cosmos key of a Mayfly key K is base64(K). Every key is tried, each in constant time. `server_proof` is empty.
  std::optional<Match> match_signature(std::string_view text, std::string_view signature) const;
  // The role of the key with this id now (kNone once it was removed).
  Role role_of(const std::string& key_id) const;

 private:
  std::string path_;
  std::vector<ClientKey> keys_;
  int64_t mtime_ns_ = 0;
  int64_t size_ = -1;
  uint64_t generation_ = 0;
};

// The cluster secrets (--cluster-secret-file), one per line (blank lines and lines starting with `#` ignored): this
// node proves with the first and accepts a peer that proves any of them, so the secret rotates with no restart and no
// downtime: add the new secret as a second line on every node, then move it first on every node, then remove the old
// line. Re-read when the file changes (like the keys file); a file that no longer parses keeps the old secrets.
// At most kMaxClusterSecrets lines, each at least 16 bytes; the file must not be readable by group or others.
//
// Thread-safety: one thread (the RPC thread) uses it.
class ClusterSecrets {
 public:
  static constexpr size_t kMaxClusterSecrets = 4;
  // An empty path: no secret (peers are not authenticated; the node runs open).
  static Result<ClusterSecrets> load(const std::string& path);

  bool empty() const { return secrets_.empty(); }
  // The secret this node proves with ("" when none).
  const std::string& proving() const;
  // Every secret a peer may prove (the proving one first).
  const std::vector<std::string>& accepted() const { return secrets_; }
  uint64_t generation() const { return generation_; }
  Status reload_if_changed();

 private:
  std::string path_;
  std::vector<std::string> secrets_;
  int64_t mtime_ns_ = 0;
  int64_t size_ = -1;
  uint64_t generation_ = 0;
};

// Parses a cluster secret file's text; the error names the line (never the secret).
Result<std::vector<std::string>> parse_cluster_secrets(std::string_view text, const std::string& origin);

}  // namespace mayfly::node
