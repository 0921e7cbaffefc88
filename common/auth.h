// Authentication primitives shared by the node and the client: the challenge-response proofs of the connection
// handshake (HMAC-SHA256 over both sides' nonces), random nonces, constant-time comparison, and secret files.
//
// The handshake (docs/security.md): the caller sends `hello(clientNonce)` and gets the node's `serverNonce`; it then
// opens a session (or a peer link) with a proof computed from its key (or the cluster secret) over both nonces, and
// the node answers with a proof of its own over the same nonces. A secret never crosses the wire, a proof is good for
// one connection only (the node's nonce is fresh per connection), and the caller learns that the node holds the same
// secret before it sends anything else.
//
// Thread-safety: free functions without shared state (OpenSSL's RNG and HMAC are thread-safe).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mayfly::auth {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // HMAC-SHA256

// kNonceBytes from the OS's cryptographic RNG.
std::string random_nonce();

// HMAC-SHA256(key, message), raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view message);

// True when a and b are equal, in time that depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// A client's proof for a session: HMAC(key, "mayfly-session-client-v1" | clientNonce | serverNonce).
std::string session_client_proof(std::string_view key, std::string_view client_nonce, std::string_view server_nonce);
// The node's answer: HMAC(key, "mayfly-session-server-v1" | clientNonce | serverNonce).
std::string session_server_proof(std::string_view key, std::string_view client_nonce, std::string_view server_nonce);

// A peer's proof that it is node `from` of `cluster` and holds the cluster secret.
std::string peer_client_proof(std::string_view secret, std::string_view cluster, uint64_t from,
                              std::string_view client_nonce, std::string_view server_nonce);
// The node's answer: it is node `self` of `cluster` and holds the secret too.
std::string peer_server_proof(std::string_view secret, std::string_view cluster, uint64_t self,
                              std::string_view client_nonce, std::string_view server_nonce);

// Reads a secret from a file: its content with surrounding whitespace removed. Refuses an empty secret, one shorter
// than 16 bytes, and a file that others than its owner may read (mode & 077), with a message that says what to fix.
Result<std::string> read_secret_file(const std::string& path);

// SHA-256 of `text`, as 64 hex digits.
std::string sha256_hex(std::string_view text);

// A short, non-reversible fingerprint of a key for logs and metrics: the first 8 hex digits of SHA-256(key).
std::string fingerprint(std::string_view key);

}  // namespace mayfly::auth
