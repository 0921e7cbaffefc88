#include "common/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mayfly::auth {
namespace {

std::string tagged(std::string_view tag, std::string_view a, std::string_view b, std::string_view extra = {}) {
  // Length-prefixed fields so no two different inputs concatenate to the same message.
  std::string message;
  auto put = [&message](std::string_view part) {
    const uint32_t size = static_cast<uint32_t>(part.size());
    for (int shift = 24; shift >= 0; shift -= 8) message.push_back(static_cast<char>((size >> shift) & 0xff));
    message.append(part);
  };
  put(tag);
  put(extra);
  put(a);
  put(b);
  return message;
}

std::string peer_extra(std::string_view cluster, uint64_t id) {
  std::string extra(cluster);
  extra.push_back('\0');
  extra += std::to_string(id);
  return extra;
}

}  // namespace

std::string random_nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    // OpenSSL's RNG fails only when the OS gives it no entropy at all; a node cannot authenticate anything then.
    MAYFLY_UNREACHABLE("RAND_bytes failed: the OS random number generator is unavailable");
  }
  return nonce;
}

std::string hmac_sha256(std::string_view key, std::string_view message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), out, &length);
  return std::string(reinterpret_cast<const char*>(out), length);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string session_client_proof(std::string_view key, std::string_view client_nonce, std::string_view server_nonce) {
  return hmac_sha256(key, tagged("mayfly-session-client-v1", client_nonce, server_nonce));
}

std::string session_server_proof(std::string_view key, std::string_view client_nonce, std::string_view server_nonce) {
  return hmac_sha256(key, tagged("mayfly-session-server-v1", client_nonce, server_nonce));
}

std::string peer_client_proof(std::string_view secret, std::string_view cluster, uint64_t from,
                              std::string_view client_nonce, std::string_view server_nonce) {
  return hmac_sha256(secret, tagged("mayfly-peer-client-v1", client_nonce, server_nonce, peer_extra(cluster, from)));
}

std::string peer_server_proof(std::string_view secret, std::string_view cluster, uint64_t self,
                              std::string_view client_nonce, std::string_view server_nonce) {
  return hmac_sha256(secret, tagged("mayfly-peer-server-v1", client_nonce, server_nonce, peer_extra(cluster, self)));
}

Result<std::string> read_secret_file(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return Status::invalid_argument("cannot read " + path + ": " + std::strerror(errno));
  }
  if ((info.st_mode & 077) != 0) {
    return Status::invalid_argument(path + " may be read by other users (mode " +
                                    std::to_string((info.st_mode >> 6) & 7) + std::to_string((info.st_mode >> 3) & 7) +
                                    std::to_string(info.st_mode & 7) + "); run: chmod 600 " + path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::invalid_argument("cannot read " + path + ": " + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return Status::invalid_argument(path + " is empty; it must hold a secret");
  const size_t end = text.find_last_not_of(" \t\r\n");
  text = text.substr(begin, end - begin + 1);
  if (text.size() < 16) {
    return Status::invalid_argument(path + " holds a secret of " + std::to_string(text.size()) +
                                    " bytes; use at least 16 (e.g. openssl rand -base64 32)");
  }
  return text;
}

std::string sha256_hex(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char byte : digest) {
    out.push_back(hex[byte >> 4]);
    out.push_back(hex[byte & 15]);
  }
  return out;
}

std::string fingerprint(std::string_view key) { return sha256_hex(key).substr(0, 8); }

}  // namespace mayfly::auth
