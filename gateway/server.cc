#include "gateway/server.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
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

  // A connection as the admission table sees it: it can be closed from another thread (on its own executor).
  class Slot {
   public:
    virtual ~Slot() = default;
    virtual void evict() = 0;
  };
  // The accepting thread: a place in the table for a new connection from `address` (0: refused, counted). When the
  // table (--http-max-connections) or the address's share (--http-max-connections-per-address) is full, the
  // connection that has waited longest for a request (a silent or slow socket, an idle keep-alive) is closed to make
  // room; connections with a request being served are never closed for it.
  uint64_t admit(const asio::ip::address& address, std::weak_ptr<Slot> slot);
  // The connection is waiting for (and reading) a request, or serving one. false: it was evicted (close it).
  bool set_waiting(uint64_t id, bool waiting);
  void release(uint64_t id);
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
  struct Entry {
    asio::ip::address address;
    std::weak_ptr<Slot> slot;
    bool waiting = true;
    uint64_t since = 0;  // when it began to wait (a sequence number): the smallest is evicted first
  };
  std::mutex slots_mutex_;
  std::map<uint64_t, Entry> slots_;  // every admitted connection not yet destroyed (nor evicted)
  uint64_t next_slot_ = 1;
  uint64_t next_since_ = 1;
};

uint64_t Server::Impl::admit(const asio::ip::address& address, std::weak_ptr<Slot> slot) {
  std::shared_ptr<Slot> victim;
  bool evicted = false;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(slots_mutex_);
    size_t from_address = 0;
    for (const auto& [other, entry] : slots_) {
      if (entry.address == address) ++from_address;
    }
    const bool address_full = from_address >= static_cast<size_t>(config_.http_max_connections_per_address);
    if (address_full || slots_.size() >= static_cast<size_t>(config_.http_max_connections)) {
      auto pick = slots_.end();
      for (auto it = slots_.begin(); it != slots_.end(); ++it) {
        if (!it->second.waiting || (address_full && it->second.address != address)) continue;
        if (pick == slots_.end() || it->second.since < pick->second.since) pick = it;
      }
      if (pick != slots_.end()) {
        victim = pick->second.slot.lock();
        slots_.erase(pick);
        evicted = true;
      } else {
        host_.security_metrics().add_http_refused("limit");
        const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
        if (now - last_refusal_log_ms_ > 5000) {
          last_refusal_log_ms_ = now;
          spdlog::warn("HTTP gateway: {} connections are open ({} from {}), all serving requests "
                       "(--http-max-connections {}, --http-max-connections-per-address {}); closing new ones",
                       slots_.size(), from_address, address.to_string(), config_.http_max_connections,
                       config_.http_max_connections_per_address);
        }
        return 0;
      }
    }
    id = next_slot_++;
    slots_.emplace(id, Entry{address, std::move(slot), true, next_since_++});
  }
  if (evicted) host_.security_metrics().add_http_refused("evicted");
  if (victim) victim->evict();
  return id;
}

bool Server::Impl::set_waiting(uint64_t id, bool waiting) {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return false;
  if (waiting && !it->second.waiting) it->second.since = next_since_++;
  it->second.waiting = waiting;
  return true;
}

void Server::Impl::release(uint64_t id) {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  slots_.erase(id);
}

namespace {

// The plain and the TLS stream a connection runs on: deadlines and closing act on the TCP layer beneath.
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

beast::tcp_stream& tcp_of(PlainStream& stream) { return stream; }
beast::tcp_stream& tcp_of(TlsStream& stream) { return beast::get_lowest_layer(stream); }

// One HTTP connection: (for HTTPS, a TLS handshake within --http-header-timeout-ms, then) wait for a request's first
// byte (--http-idle-timeout-ms), read its line and headers (--http-header-timeout-ms), check its signature before
// reading a body, read the body (--http-body-timeout-ms), translate, hand it to the node, write the answer, repeat.
template <typename Stream>
class Connection : public Server::Impl::Slot, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  template <typename... TlsContext>
  Connection(std::shared_ptr<Server::Impl> server, tcp::socket socket, TlsContext&... tls)
      : server_(std::move(server)), context_(server_->context()), stream_(std::move(socket), tls...) {
    ++server_->open_connections();
  }
  ~Connection() override {
    if (slot_ != 0) server_->release(slot_);
    --server_->open_connections();
  }

  // The accepting thread: a place in the table (false: refused; the socket closes with this object).
  bool admit(const asio::ip::address& address) {
    slot_ = server_->admit(address, this->weak_from_this());
    return slot_ != 0;
  }

  // Any thread: closed on the connection's own executor.
  void evict() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      self->slot_ = 0;  // no longer in the table
      self->close();
    });
  }

  void start() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      tcp_of(stream_).expires_after(std::chrono::milliseconds(server_->config().http_header_timeout_ms));
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code error) {
        // Not TLS (plain HTTP to an HTTPS port), a failed handshake or a silent client: closed, nothing answered
        // (there is no TLS session to answer in).
        if (error) {
          if (error == beast::error::timeout) self->server_->host().security_metrics().add_http_refused("header_timeout");
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
  const node::NodeConfig& config() const { return server_->config(); }

  // Waits for the next request's first byte: an idle connection may wait --http-idle-timeout-ms (and is the first
  // to be closed when the table is full); from that byte on, the line and headers have --http-header-timeout-ms.
  void read() {
    if (slot_ == 0 || !server_->set_waiting(slot_, true)) {
      close();
      return;
    }
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(config().http_max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(config().http_max_body_bytes));
    if (buffer_.size() > 0) {  // the client sent the next request already
      read_header();
      return;
    }
    tcp_of(stream_).expires_after(std::chrono::milliseconds(config().http_idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code error, size_t bytes) {
                              if (error) {
                                self->close();  // idle timeout, closed or reset by the client, evicted
                                return;
                              }
                              self->buffer_.commit(bytes);
                              self->read_header();
                            });
  }

  void read_header() {
    tcp_of(stream_).expires_after(std::chrono::milliseconds(config().http_header_timeout_ms));
    http::async_read_header(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code error,
                                                                                           size_t) {
      if (self->refuse_on(error, "header_timeout")) return;
      if (self->slot_ == 0 || !self->server_->set_waiting(self->slot_, false)) {  // evicted meanwhile
        self->close();
        return;
      }
      self->on_header();
    });
  }

  // A read that failed: closed quietly, or answered (400, 413, 431) and closed. true when it failed.
  bool refuse_on(beast::error_code error, const char* timeout_reason) {
    if (!error) return false;
    if (error == beast::error::timeout) {
      server_->host().security_metrics().add_http_refused(timeout_reason);
      close();
      return true;
    }
    if (error == http::error::end_of_stream || error == asio::error::eof ||
        error == asio::error::connection_reset || error == asio::error::operation_aborted ||
        error == ssl::error::stream_truncated || error == asio::error::bad_descriptor) {
      close();
      return true;
    }
    // Beast reads only HTTP/1.x: an HTTP/2 preface fails its request line with bad_version, and is still in buffer_.
    constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n";
    const std::string_view received(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    if (received.substr(0, kHttp2Preface.size()) == kHttp2Preface) {
      refuse_http2();
      return true;
    }
    keep_alive_ = false;
    if (error == http::error::body_limit) {
      respond(error_response(413, "the request body is larger than --http-max-body-bytes (" +
                                      std::to_string(config().http_max_body_bytes) + " bytes)"));
    } else if (error == http::error::header_limit) {
      respond(error_response(431, "the request line and headers are larger than --http-max-header-bytes (" +
                                      std::to_string(config().http_max_header_bytes) + " bytes)"));
    } else {
      respond(error_response(400, "malformed HTTP request: " + error.message()));
    }
    return true;
  }

  HttpRequest head_of(const http::request<http::string_body>& message) {
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    for (const auto& field : message) request.headers[lower(field.name_string())] = std::string(field.value());
    return request;
  }

  // What the signature covers (verb, resource type and link of the path, and the x-ms-date or Date header), and the
  // signature: set on `call`, or why there is none (call.authorization, 401 on the node's thread).
  static void sign(const HttpRequest& request, const Route& route, bool emulator_key, bool replay_guard,
                   node::GatewayCall& call) {
    Result<Authorization> parsed = parse_authorization(request.header("authorization"));
    std::string_view date = request.header("x-ms-date");
    if (date.empty()) date = request.header("date");
    if (parsed.is_ok()) {
      const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
      if (Status fresh = check_signed_date(date, now); !fresh.is_ok()) parsed = fresh;
    }
    if (parsed.is_ok()) {
      call.signed_text = string_to_sign(request.method, route.resource_type, route.resource_link, date);
      call.signature = std::move(parsed->signature);
      call.emulator_key = emulator_key && signed_with_emulator_key(call.signed_text, call.signature);
      call.replay_guarded = replay_guard && replay_guarded(request.method, route.kind,
                                                           header_flag(request.header("x-mayfly-force-ttl-change")));
      if (Result<int64_t> signed_at = parse_http_date(date); signed_at.is_ok()) {
        call.valid_until_seconds = *signed_at + kSignatureWindowSeconds;
      }
    } else {
      call.authorization = parsed.status();
    }
  }

  // The line and headers are in. A request with a body on a node with keys: its signature is checked first (on the
  // node's thread, like every call's), and a bad one is answered 401 with the body neither read nor parsed.
  void on_header() {
    if (parser_->is_done() || server_->host().clients_open()) {
      read_body();
      return;
    }
    const HttpRequest head = head_of(parser_->get());
    Result<Route> route = parse_route(head.target);
    if (!route.is_ok()) {
      keep_alive_ = false;
      respond(error_response(400, route.status().message()));
      return;
    }
    node::GatewayCall call;  // no request: authenticate only
    sign(head, *route, config().http_emulator_key, config().http_replay_guard, call);
    RenderSpec spec;
    spec.route = *route;
    if (!call.authorization.is_ok()) {
      refuse_unsigned(spec, node::Reply::error(StatusCode::kUnauthorized, call.authorization.message()));
      return;
    }
    server_->host().execute_gateway(
        std::move(call), [self = this->shared_from_this(), spec = std::move(spec)](node::Reply reply) {
          asio::post(self->stream_.get_executor(), [self, spec, reply = std::move(reply)] {
            if (!reply.result.ok()) {
              self->refuse_unsigned(spec, reply);
              return;
            }
            self->read_body();
          });
        });
  }

  void refuse_unsigned(const RenderSpec& spec, const node::Reply& reply) {
    server_->host().security_metrics().add_http_refused("unauthorized_body");
    keep_alive_ = false;  // the body is not read: the connection ends after the answer
    respond(render_reply(spec, reply));
  }

  void read_body() {
    if (parser_->is_done()) {
      on_request();
      return;
    }
    tcp_of(stream_).expires_after(std::chrono::milliseconds(config().http_body_timeout_ms));
    http::async_read(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code error, size_t) {
      if (self->refuse_on(error, "body_timeout")) return;
      self->on_request();
    });
  }

  void on_request() {
    http::request<http::string_body> message = parser_->release();
    keep_alive_ = message.keep_alive();
    HttpRequest request = head_of(message);
    request.body = std::move(message.body());
    Plan plan = plan_request(request);
    plan.spec.https = std::is_same_v<Stream, TlsStream>;
    if (plan.answer) {
      respond(std::move(*plan.answer));
      return;
    }
    sign(request, plan.spec.route, config().http_emulator_key, config().http_replay_guard, plan.call);
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

  // An HTTP/2 client with prior knowledge (its preface is "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"): answered in HTTP/2, as
  // RFC 9113 lets a server that will not speak it — an empty SETTINGS frame (the server's preface) and a GOAWAY with
  // HTTP_1_1_REQUIRED — then the usual graceful close. Clients read that as "use HTTP/1.1" (the Rust SDK retries over
  // HTTP/1.1); an HTTP/1.1 400 read as HTTP/2 frames, or a reset, is not a signal they can act on.
  //
  // The answer waits for the client's first HEADERS frame (its first request): a GOAWAY that arrives before the client
  // sent its request makes an HTTP/2 client (hyper) drop the request as "connection closed", without the reason it
  // falls back on. Bounded: at most kMaxHttp2Wait bytes, within --http-header-timeout-ms; past either the answer goes
  // out anyway.
  void refuse_http2() {
    server_->host().security_metrics().add_http_refused("http2");
    keep_alive_ = false;
    http2_wait();
  }

  // Whether buffer_ (the preface, then frames) holds a complete HEADERS frame header.
  bool http2_headers_seen() const {
    constexpr size_t kPrefaceBytes = 24;  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    const auto* bytes = static_cast<const unsigned char*>(buffer_.data().data());
    size_t at = kPrefaceBytes;
    while (at + 9 <= buffer_.size()) {
      const size_t length = (size_t{bytes[at]} << 16) | (size_t{bytes[at + 1]} << 8) | size_t{bytes[at + 2]};
      if (bytes[at + 3] == 0x1) return true;  // HEADERS
      at += 9 + length;
    }
    return false;
  }

  void http2_wait() {
    static constexpr size_t kMaxHttp2Wait = 64 * 1024;
    if (http2_headers_seen() || buffer_.size() >= kMaxHttp2Wait) {
      send_http2_goaway();
      return;
    }
    tcp_of(stream_).expires_after(std::chrono::milliseconds(config().http_header_timeout_ms));
    stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](beast::error_code error,
                                                                                      size_t bytes) {
      if (error == beast::error::timeout) {
        self->send_http2_goaway();
        return;
      }
      if (error) {
        self->close();
        return;
      }
      self->buffer_.commit(bytes);
      self->http2_wait();
    });
  }

  void send_http2_goaway() {
    static constexpr char kDebug[] = "Mayfly's gateway speaks HTTP/1.1";
    constexpr uint32_t kGoAwayLength = 8 + sizeof kDebug - 1;
    auto frames = std::make_shared<std::string>();
    // SETTINGS: length 0, type 0x4, no flags, stream 0.
    frames->append("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
    // GOAWAY: type 0x7, stream 0; last stream id 0, error HTTP_1_1_REQUIRED (0xd), debug text.
    frames->push_back(static_cast<char>((kGoAwayLength >> 16) & 0xff));
    frames->push_back(static_cast<char>((kGoAwayLength >> 8) & 0xff));
    frames->push_back(static_cast<char>(kGoAwayLength & 0xff));
    frames->append("\x07\x00\x00\x00\x00\x00", 6);
    frames->append("\x00\x00\x00\x00\x00\x00\x00\x0d", 8);
    frames->append(kDebug, sizeof kDebug - 1);
    tcp_of(stream_).expires_after(kWriteTimeout);
    asio::async_write(stream_, asio::buffer(*frames), [self = this->shared_from_this(), frames](beast::error_code error,
                                                                                                 size_t) {
      if (error) {
        self->close();
        return;
      }
      self->finish();
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
  uint64_t slot_ = 0;  // its place in the admission table (0: none, or evicted)
  std::vector<char> drain_buffer_;
  size_t drained_bytes_ = 0;
};

}  // namespace

void Server::Impl::accept() {
  acceptor_.async_accept(asio::make_strand(*context_), [self = shared_from_this()](beast::error_code error,
                                                                                     tcp::socket socket) {
    if (error == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
    if (!error) {
      beast::error_code no_address;
      const tcp::endpoint remote = socket.remote_endpoint(no_address);
      if (no_address) {
        beast::error_code ignored;
        socket.close(ignored);  // already gone
      } else if (ssl::context* tls = self->tls()) {
        auto connection = std::make_shared<Connection<TlsStream>>(self, std::move(socket), *tls);
        if (connection->admit(remote.address())) connection->start();
      } else {
        auto connection = std::make_shared<Connection<PlainStream>>(self, std::move(socket));
        if (connection->admit(remote.address())) connection->start();
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
