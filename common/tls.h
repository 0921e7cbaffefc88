// TLS on the RPC port (docs/security.md): the node's and the client's kj::TlsContext, built from PEM files.
//
// A node with --tls-cert/--tls-key/--tls-ca serves TLS only (its certificate and key) and connects to its peers with
// TLS, trusting only --tls-ca. A client with ClientOptions::tls_ca connects with TLS, trusting only that CA. Neither
// side trusts the system's store. The server's certificate is checked against the host part of the address dialled
// (common name / DNS SANs, as kj-tls asks OpenSSL to: an IP address like 127.0.0.1 must therefore appear as a DNS SAN
// too, which deploy/make-certs.sh does). Clients present no certificate: they prove their key in the handshake on top.
//
// Thread-safety: a Context is used on one kj event-loop thread.
#pragma once

#include <kj/async-io.h>
#include <kj/compat/tls.h>
#include <kj/timer.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace mayfly::tls {

// The host part of "host:port" or "[v6]:port" (without brackets): the name a server's certificate must carry.
std::string host_of(const std::string& address);

class Context {
 public:
  // A client context trusting only the CA(s) in `ca_file`; with `cert_file` and `key_file` also a server context
  // whose handshakes time out after `accept_timeout_ms` on `timer`.
  static Result<std::unique_ptr<Context>> load(const std::string& ca_file, const std::string& cert_file = "",
                                               const std::string& key_file = "", kj::Timer* timer = nullptr,
                                               int64_t accept_timeout_ms = 0);
  ~Context();

  kj::Promise<kj::Own<kj::AsyncIoStream>> wrap_server(kj::Own<kj::AsyncIoStream> stream) {
    return context_->wrapServer(kj::mv(stream));
  }
  // Fails unless the server's certificate chains to the CA and names the host of `address`.
  kj::Promise<kj::Own<kj::AsyncIoStream>> wrap_client(kj::Own<kj::AsyncIoStream> stream, const std::string& address) {
    return context_->wrapClient(kj::mv(stream), host_of(address));
  }

 private:
  Context() = default;
  kj::Array<kj::TlsCertificate> trusted_;
  kj::Own<kj::TlsKeypair> keypair_;
  kj::Own<kj::TlsContext> context_;  // last: destroyed first
};

}  // namespace mayfly::tls
