#include "gateway/server.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "gateway/translate.h"

namespace mayfly::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kWriteTimeout = std::chrono::seconds(30);
constexpr auto kDrainTimeout = std::chrono::seconds(2);
constexpr size_t kDrainBytesMax = 4 << 20;

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

// The gateway's io_context, with a way to destroy the handlers still pending in it once its threads are joined:
// those handlers hold the Impl (accept) and the Connections (reads, timers), which hold the io_context — a cycle that
// would otherwise outlive stop() and leak at exit (LeakSanitizer found it under make sanitize).
class GatewayContext : public asio::io_context {
 public:
  // Only after every thread running the context has returned. Idempotent (asio's shutdown is).
  void destroy_pending_handlers() { shutdown(); }
};

class Server::Impl : public std::enable_shared_from_this<Server::Impl> {
 public:
  Impl(const node::NodeConfig& config, node::RpcHost& host)
      : config_(config), host_(host), context_(std::make_shared<GatewayContext>()), acceptor_(*context_) {}

  // A node with --tls-cert/--tls-key serves the gateway over HTTPS only, with the same certificate and key as its RPC
  // port (TLS 1.2 or later); clients check it against --tls-ca's CA as they do for the RPC port.
  Status load_tls() {
    if (!config_.tls()) return Status::ok();
    auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
    boost::system::error_code error;
    context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                             ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                         error);
    if (!error) context->use_certificate_chain_file(config_.tls_cert_file, error);
    if (error) return Status::invalid_argument("--http over TLS: cannot use --tls-cert " + config_.tls_cert_file + ": " +
                                               error.message());
    context->use_private_key_file(config_.tls_key_file, ssl::context::pem, error);
    if (error) return Status::invalid_argument("--http over TLS: cannot use --tls-key " + config_.tls_key_file + ": " +
                                               error.message());
    tls_ = std::move(context);
    return Status::ok();
  }

  Status listen() {
    const size_t colon = config_.http.rfind(':');
    std::string host_part = config_.http.substr(0, colon);
    const std::string port_part = config_.http.substr(colon + 1);
    if (host_part.size() >= 2 && host_part.front() == '[' && host_part.back() == ']') {
      host_part = host_part.substr(1, host_part.size() - 2);
    }
    if (host_part == "localhost") host_part = "127.0.0.1";
    boost::system::error_code error;
    const asio::ip::address address = asio::ip::make_address(host_part, error);
    if (error) return Status::invalid_argument("--http " + config_.http + ": '" + host_part + "' is not an IP address");
    unsigned port = 0;
    try {
      port = static_cast<unsigned>(std::stoul(port_part));
    } catch (...) {
      return Status::invalid_argument("--http " + config_.http + ": the port is not a number");
    }
    if (port > 65535) return Status::invalid_argument("--http " + config_.http + ": the port is above 65535");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
    acceptor_.open(endpoint.protocol(), error);
    if (!error) acceptor_.set_option(asio::socket_base::reuse_address(true), error);
    if (!error) acceptor_.bind(endpoint, error);
    if (!error) acceptor_.listen(asio::socket_base::max_listen_connections, error);
    if (error) return Status::unavailable("cannot listen on --http " + config_.http + ": " + error.message());
    return Status::ok();
  }

  void run() {
    accept();
    for (int64_t i = 0; i < config_.http_threads; ++i) {
      threads_.emplace_back([context = context_] {
        for (;;) {
          try {
            context->run();
            return;
          } catch (const std::exception& exception) {
            spdlog::error("HTTP gateway thread: {}", exception.what());
          }
        }
      });
    }
  }

  void stop() {
    if (stopped_.exchange(true)) return;
    asio::post(*context_, [self = shared_from_this()] {
      boost::system::error_code ignored;
      self->acceptor_.close(ignored);
    });
    context_->stop();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    // No thread runs the context now: close the acceptor here (the posted close may not have run) and destroy what
    // is still pending, releasing the references to this Impl and to the Connections. `keep` holds the context
    // while its handlers (which may hold its last other references) are destroyed.
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    const std::shared_ptr<GatewayContext> keep = context_;
    keep->destroy_pending_handlers();
  }

  const node::NodeConfig& config() const { return config_; }
  node::RpcHost& host() { return host_; }
  std::atomic<int64_t>& open_connections() { return open_connections_; }
  std::shared_ptr<asio::io_context> context() const { return context_; }
  ssl::context* tls() { return tls_.get(); }

 private:
  void accept();

  const node::NodeConfig config_;
  node::RpcHost& host_;
  std::shared_ptr<GatewayContext> context_;
  tcp::acceptor acceptor_;
  std::unique_ptr<ssl::context> tls_;  // set: HTTPS only
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> open_connections_{0};
  int64_t last_refusal_log_ms_ = 0;
};

namespace {

// The plain and the TLS stream a connection runs on: deadlines and closing act on the TCP layer beneath.
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

beast::tcp_stream& tcp_of(PlainStream& stream) { return stream; }
beast::tcp_stream& tcp_of(TlsStream& stream) { return beast::get_lowest_layer(stream); }

// One HTTP connection: (for HTTPS, a TLS handshake within the idle timeout, then) read a request (bounded),
// translate, hand it to the node, write the answer, repeat.
template <typename Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  template <typename... TlsContext>
  Connection(std::shared_ptr<Server::Impl> server, tcp::socket socket, TlsContext&... tls)
      : server_(std::move(server)), context_(server_->context()), stream_(std::move(socket), tls...) {
    ++server_->open_connections();
  }
  ~Connection() { --server_->open_connections(); }

  void start() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      tcp_of(stream_).expires_after(std::chrono::milliseconds(server_->config().http_idle_timeout_ms));
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code error) {
        // Not TLS (plain HTTP to an HTTPS port), a failed handshake or a silent client: closed, nothing answered
        // (there is no TLS session to answer in).
        if (error) {
          self->close();
          return;
        }
        self->read();
      });
    } else {
      read();
    }
  }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_->config().http_max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(server_->config().http_max_body_bytes));
    tcp_of(stream_).expires_after(std::chrono::milliseconds(server_->config().http_idle_timeout_ms));
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code error, size_t) { self->on_read(error); });
  }

  void on_read(beast::error_code error) {
    if (error == http::error::end_of_stream || error == beast::error::timeout || error == asio::error::eof ||
        error == asio::error::connection_reset || error == asio::error::operation_aborted ||
        error == ssl::error::stream_truncated) {
      close();
      return;
    }
    if (error) {
      keep_alive_ = false;
      if (error == http::error::body_limit) {
        respond(error_response(413, "the request body is larger than --http-max-body-bytes (" +
                                        std::to_string(server_->config().http_max_body_bytes) + " bytes)"));
      } else if (error == http::error::header_limit) {
        respond(error_response(431, "the request line and headers are larger than --http-max-header-bytes (" +
                                        std::to_string(server_->config().http_max_header_bytes) + " bytes)"));
      } else {
        respond(error_response(400, "malformed HTTP request: " + error.message()));
      }
      return;
    }
    http::request<http::string_body> message = parser_->release();
    keep_alive_ = message.keep_alive();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    for (const auto& field : message) request.headers[lower(field.name_string())] = std::string(field.value());
    request.body = std::move(message.body());
    Plan plan = plan_request(request);
    if (plan.answer) {
      respond(std::move(*plan.answer));
      return;
    }
    // What the signature covers: verb, resource type and link of the path, and the x-ms-date (or Date) header.
    const std::string_view authorization = request.header("authorization");
    Result<Authorization> parsed = parse_authorization(authorization);
    std::string_view date = request.header("x-ms-date");
    if (date.empty()) date = request.header("date");
    if (parsed.is_ok()) {
      const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
      if (Status fresh = check_signed_date(date, now); !fresh.is_ok()) parsed = fresh;
    }
    if (parsed.is_ok()) {
      plan.call.signed_text =
          string_to_sign(request.method, plan.spec.route.resource_type, plan.spec.route.resource_link, date);
      plan.call.signature = std::move(parsed->signature);
      plan.call.emulator_key = server_->config().http_emulator_key &&
                               signed_with_emulator_key(plan.call.signed_text, plan.call.signature);
      plan.call.replay_guarded = replay_guarded(request.method, plan.spec.route.kind,
                                                header_flag(request.header("x-mayfly-force-ttl-change")));
      if (Result<int64_t> signed_at = parse_http_date(date); signed_at.is_ok()) {
        plan.call.valid_until_seconds = *signed_at + kSignatureWindowSeconds;
      }
    } else {
      plan.call.authorization = parsed.status();
    }
    server_->host().execute_gateway(
        std::move(plan.call), [self = this->shared_from_this(), spec = std::move(plan.spec)](node::Reply reply) {
          // On the kj thread: render here would hold it up, so hand the reply to this connection's executor.
          asio::post(self->stream_.get_executor(), [self, spec, reply = std::move(reply)] {
            self->respond(render_reply(spec, reply));
          });
        });
  }

  void respond(HttpResponse answer) {
    auto response = std::make_shared<http::response<http::string_body>>();
    response->version(11);
    response->result(static_cast<unsigned>(answer.status));
    response->set(http::field::server, "mayfly");
    for (auto& [name, value] : answer.headers) response->set(name, value);
    if (answer.status != 204 && answer.status != 304) {
      response->set(http::field::content_type, "application/json");
      response->body() = std::move(answer.body);
    }
    response->keep_alive(keep_alive_);
    response->prepare_payload();
    tcp_of(stream_).expires_after(kWriteTimeout);
    http::async_write(stream_, *response,
                      [self = this->shared_from_this(), response](beast::error_code error, size_t) {
                        if (error) {
                          self->close();
                          return;
                        }
                        if (!self->keep_alive_) {
                          self->finish();
                          return;
                        }
                        self->read();
                      });
  }

  // After an answer that ends the connection (often to a request not read to its end). Plain HTTP: stop sending,
  // then read and drop what the client still sends (bounded in bytes and time) before closing, so the close is not a
  // reset that would destroy the answer in flight. HTTPS: a TLS close_notify (bounded in time), then close.
  void finish() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      tcp_of(stream_).expires_after(kDrainTimeout);
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) { self->close(); });
    } else {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      stream_.expires_after(kDrainTimeout);
      drain_buffer_.resize(64 * 1024);
      drain_next();
    }
  }

  void drain_next() {
    tcp_of(stream_).async_read_some(asio::buffer(drain_buffer_), [self = this->shared_from_this()](
                                                                    beast::error_code error, size_t bytes) {
      self->drained_bytes_ += bytes;
      if (error || self->drained_bytes_ > kDrainBytesMax) {
        self->close();
        return;
      }
      self->drain_next();
    });
  }

  void close() {
    beast::error_code ignored;
    tcp_of(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcp_of(stream_).close();
  }

  std::shared_ptr<Server::Impl> server_;
  std::shared_ptr<asio::io_context> context_;  // outlives the stream (a late answer may hold the last reference)
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = true;
  std::vector<char> drain_buffer_;
  size_t drained_bytes_ = 0;
};

}  // namespace

void Server::Impl::accept() {
  acceptor_.async_accept(asio::make_strand(*context_), [self = shared_from_this()](beast::error_code error,
                                                                                     tcp::socket socket) {
    if (error == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
    if (!error) {
      if (self->open_connections_.load() >= self->config_.http_max_connections) {
        const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
        if (now - self->last_refusal_log_ms_ > 5000) {
          self->last_refusal_log_ms_ = now;
          spdlog::warn("HTTP gateway: --http-max-connections ({}) connections are open; closing new ones",
                       self->config_.http_max_connections);
        }
        beast::error_code ignored;
        socket.close(ignored);
      } else {
        if (ssl::context* tls = self->tls()) {
          std::make_shared<Connection<TlsStream>>(self, std::move(socket), *tls)->start();
        } else {
          std::make_shared<Connection<PlainStream>>(self, std::move(socket))->start();
        }
      }
    }
    self->accept();
  });
}

Result<std::unique_ptr<Server>> Server::start(const node::NodeConfig& config, node::RpcHost& host) {
  auto impl = std::make_shared<Impl>(config, host);
  if (Status status = impl->load_tls(); !status.is_ok()) return status;
  if (Status status = impl->listen(); !status.is_ok()) return status;
  impl->run();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

void Server::stop() {
  if (impl_) impl_->stop();
}

}  // namespace mayfly::gateway
