#include "common/tls.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mayfly::tls {
namespace {

Result<std::string> read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::invalid_argument(std::string("cannot read the TLS ") + what + " file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return Status::invalid_argument(std::string("the TLS ") + what + " file " + path + " is empty");
  return text.str();
}

// A private key, like the keys file and the cluster secret (node/keyring.h), must not be readable by group or others.
Status check_private(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return Status::invalid_argument("cannot read the TLS key file " + path + ": " + std::strerror(errno));
  }
  if ((info.st_mode & 077) != 0) {
    return Status::invalid_argument("the TLS key file " + path + " may be read by other users; run: chmod 600 " + path);
  }
  return Status::ok();
}

}  // namespace

std::string host_of(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return close == std::string::npos ? address.substr(1) : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

Context::~Context() = default;

Result<std::unique_ptr<Context>> Context::load(const std::string& ca_file, const std::string& cert_file,
                                               const std::string& key_file, kj::Timer* timer,
                                               int64_t accept_timeout_ms) {
  Result<std::string> ca = read_file(ca_file, "CA");
  if (!ca.is_ok()) return ca.status();
  std::string cert;
  std::string key;
  if (!cert_file.empty() || !key_file.empty()) {
    Result<std::string> cert_text = read_file(cert_file, "certificate");
    if (!cert_text.is_ok()) return cert_text.status();
    if (Status mode = check_private(key_file); !mode.is_ok()) return mode;
    Result<std::string> key_text = read_file(key_file, "key");
    if (!key_text.is_ok()) return key_text.status();
    cert = std::move(cert_text).value();
    key = std::move(key_text).value();
  }
  std::unique_ptr<Context> context(new Context());
  const std::string& ca_text = ca.value();
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions([&] {
    auto trusted = kj::heapArrayBuilder<kj::TlsCertificate>(1);
    trusted.add(kj::StringPtr(ca_text.c_str()));
    context->trusted_ = trusted.finish();
    kj::TlsContext::Options options;
    options.useSystemTrustStore = false;
    options.minVersion = kj::TlsVersion::TLS_1_2;
    options.trustedCertificates = context->trusted_;
    if (!cert.empty()) {
      context->keypair_ = kj::heap<kj::TlsKeypair>(
          kj::TlsKeypair{kj::TlsPrivateKey(kj::StringPtr(key.c_str())), kj::TlsCertificate(kj::StringPtr(cert.c_str()))});
      options.defaultKeypair = *context->keypair_;
      if (timer != nullptr && accept_timeout_ms > 0) {
        options.timer = *timer;
        options.acceptTimeout = accept_timeout_ms * kj::MILLISECONDS;
      }
    }
    context->context_ = kj::heap<kj::TlsContext>(kj::mv(options));
  })) {
    return Status::invalid_argument("TLS material (" + ca_file + (cert_file.empty() ? "" : ", " + cert_file) +
                                    (key_file.empty() ? "" : ", " + key_file) +
                                    ") not usable: " + exception->getDescription().cStr());
  }
  return context;
}

}  // namespace mayfly::tls
