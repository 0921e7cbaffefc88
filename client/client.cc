#include "client/client.h"

#include <capnp/ez-rpc.h>
#include <capnp/rpc-twoparty.h>
#include <sys/socket.h>
#include <kj/async-io.h>
#include <kj/debug.h>
#include <kj/io.h>
#include <kj/time.h>
#include <kj/timer.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <deque>
#include <set>
#include <utility>

#include "api/codec.h"
#include "client/policy.h"
#include "common/assert.h"
#include "common/auth.h"
#include "common/message_stream.h"
#include "common/tls.h"
#include "client/wire.h"
#include "proto/mayfly.capnp.h"

namespace mayfly::client {

namespace {

// One endpoint's RPC connection and the session opened on it. Shared by the Client's endpoint table and the attempts
// in flight on it, so replacing a broken connection never pulls it from under a call that is still using it.
// The session's failure when the node could not prove it holds the client's key.
constexpr const char* kAuthRefusal =
    "the node did not accept the client key (unknown or removed), or it runs without keys and so cannot prove it "
    "holds it; no request was sent to it";

// The RPC system of one connection, over a stream that reads and writes in bulk (common/message_stream.h).
struct Wire {
  explicit Wire(kj::AsyncIoStream& stream)
      : messages(stream), network(messages, capnp::rpc::twoparty::Side::CLIENT), rpc(capnp::makeRpcClient(network)) {}

  proto::Mayfly::Client bootstrap() {
    capnp::MallocMessageBuilder message(8);
    auto vat = message.initRoot<capnp::rpc::twoparty::VatId>();
    vat.setSide(capnp::rpc::twoparty::Side::SERVER);
    return rpc.bootstrap(vat).castAs<proto::Mayfly>();
  }

  BufferedMessageStream messages;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
};

// Whether a request may share an executeBatch call (proto Session) with others: item writes and point reads, which
// are answered within a commit round. Anything that may wait long (queries and lists on a read thread, change feed
// long-polls, admin work) goes alone, so it never holds the answers of the requests batched with it.
bool batchable(const Request& request) {
  switch (request.kind()) {
    case Op::kCreateItem:
    case Op::kUpsertItem:
    case Op::kReplaceItem:
    case Op::kDeleteItem:
    case Op::kPatchItem:
    case Op::kReadItem:
      return true;
    default:
      return false;
  }
}

// One request as its own execute call.
kj::Promise<Response> execute_one(proto::Session::Client& session, const Request& request) {
  auto rpc = session.executeRequest(api::size_hint(request));
  api::encode_request(request, rpc.initRequest());
  return rpc.send().then(
      [](capnp::Response<proto::Session::ExecuteResults> results) { return decode_response(results.getResponse()); });
}

// The batchable requests issued on one connection in the same turn of the event loop, sent as one executeBatch call
// when the turn ends (kj::evalLast) or when the batch is full: one message and one answer for many requests, instead
// of a call each. Every request keeps its own promise, resolved with its own response (or rejected with the call's
// failure); the caller's timeouts and retries are per request, as without batching. A node without executeBatch
// (UNIMPLEMENTED) gets the batch again one call per request, and only single calls after that.
//
// Thread-safety: the connection's thread (the client's event loop).
class Batcher {
 public:
  // More than a node takes in one call (kMaxBatchRequests) is never put in one.
  explicit Batcher(size_t max_requests)
      : max_requests_(std::min<size_t>(max_requests, kMaxBatchRequests)), tasks_(errors_) {}

  // `generation` names the session the request was made for: requests of two sessions never share a call.
  kj::Promise<Response> submit(proto::Session::Client session, uint64_t generation, Request request) {
    if (max_requests_ <= 1 || unimplemented_) return execute_one(session, request);
    if (open_.has_value() && open_->generation != generation) send();
    const size_t words = api::size_hint(request).wordCount;
    if (open_.has_value() && open_->words + words > kMaxBatchWords) send();
    if (!open_.has_value()) {
      open_.emplace(Open{.session = kj::mv(session), .generation = generation});
      tasks_.add(kj::evalLast([this, batch = ++opened_] {
        if (open_.has_value() && opened_ == batch) send();
      }));
    }
    auto answer = kj::newPromiseAndFulfiller<Response>();
    open_->requests.push_back(std::move(request));
    open_->waiting.push_back(kj::mv(answer.fulfiller));
    open_->words += words;
    if (open_->requests.size() >= max_requests_) send();
    return kj::mv(answer.promise);
  }

 private:
  // Bounds one call's request message well under the node's flow limit.
  static constexpr size_t kMaxBatchWords = (1 << 20) / sizeof(capnp::word);

  struct Open {
    proto::Session::Client session;
    uint64_t generation = 0;
    std::vector<Request> requests;
    std::vector<kj::Own<kj::PromiseFulfiller<Response>>> waiting;
    size_t words = 8;
  };
  using Waiting = std::vector<kj::Own<kj::PromiseFulfiller<Response>>>;

  class Errors final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&&) override {}  // every task hands its failure to the requests it carries
  };

  void send() {
    Open batch = kj::mv(*open_);
    open_.reset();
    auto waiting = std::make_shared<Waiting>(kj::mv(batch.waiting));
    if (batch.requests.size() == 1) {
      tasks_.add(forward(execute_one(batch.session, batch.requests[0]), waiting, 0));
      return;
    }
    auto rpc = batch.session.executeBatchRequest(capnp::MessageSize{batch.words, 0});
    auto list = rpc.initRequests(static_cast<unsigned>(batch.requests.size()));
    for (size_t i = 0; i < batch.requests.size(); ++i) api::encode_request(batch.requests[i], list[i]);
    auto requests = std::make_shared<std::vector<Request>>(std::move(batch.requests));
    tasks_.add(rpc.send().then(
        [waiting](capnp::Response<proto::Session::ExecuteBatchResults> results) {
          auto responses = results.getResponses();
          if (responses.size() != waiting->size()) {
            const kj::Exception malformed(kj::Exception::Type::FAILED, __FILE__, __LINE__,
                                          kj::str("the node answered ", responses.size(), " of a batch of ",
                                                  waiting->size(), " requests"));
            for (auto& fulfiller : *waiting) fulfiller->reject(kj::cp(malformed));
            return;
          }
          for (size_t i = 0; i < waiting->size(); ++i) (*waiting)[i]->fulfill(decode_response(responses[i]));
        },
        [this, waiting, requests, session = kj::mv(batch.session)](kj::Exception&& failure) mutable {
          if (failure.getType() != kj::Exception::Type::UNIMPLEMENTED) {
            for (auto& fulfiller : *waiting) fulfiller->reject(kj::cp(failure));
            return;
          }
          // An older node: nothing of the batch ran. One call per request from now on.
          unimplemented_ = true;
          for (size_t i = 0; i < requests->size(); ++i) {
            tasks_.add(forward(execute_one(session, (*requests)[i]), waiting, i));
          }
        }));
  }

  // Hands `answer` to the i-th waiting request.
  static kj::Promise<void> forward(kj::Promise<Response> answer, std::shared_ptr<Waiting> waiting, size_t i) {
    return answer.then([waiting, i](Response response) { (*waiting)[i]->fulfill(kj::mv(response)); },
                       [waiting, i](kj::Exception&& failure) { (*waiting)[i]->reject(kj::mv(failure)); });
  }

  const size_t max_requests_;
  std::optional<Open> open_;
  uint64_t opened_ = 0;  // batches opened so far: the end-of-turn send belongs to one of them
  bool unimplemented_ = false;
  Errors errors_;
  kj::TaskSet tasks_;
};

struct Connection {
  // The connection is made here, through the network of the thread's EzRpc context, and wrapped with TLS when `tls`
  // is set (the node's certificate must chain to ClientOptions::tls_ca and name the endpoint's host); EzRpcClient
  // only holds the thread's shared event loop, on a local socket pair nothing uses.
  Connection(const std::string& address, kj::TimePoint opened_at, std::string client_key, tls::Context* tls,
             size_t max_batch_requests)
      : loop_socket(idle_socket()),
        rpc(kj::heap<capnp::EzRpcClient>(loop_socket.get())),
        key(std::move(client_key)),
        main(proto::Mayfly::Client(connect(address, tls))),
        session(open_session(main, this->key)),
        last_answer_at(opened_at),
        batcher(max_batch_requests) {}

  // One end of a socket pair whose other end is closed at once: EzRpcClient's own connection, idle (it sees EOF).
  static kj::AutoCloseFd idle_socket() {
    int ends[2];
    KJ_SYSCALL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends));
    kj::AutoCloseFd other(ends[1]);
    return kj::AutoCloseFd(ends[0]);
  }

  kj::Promise<proto::Mayfly::Client> connect(const std::string& address, tls::Context* tls) {
    return rpc->getIoProvider()
        .getNetwork()
        .parseAddress(address)
        .then([](kj::Own<kj::NetworkAddress> resolved) { return resolved->connect(); })
        .then([tls, address](kj::Own<kj::AsyncIoStream> connected) -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
          if (tls == nullptr) return kj::mv(connected);
          return tls->wrap_client(kj::mv(connected), address);
        })
        .then([this](kj::Own<kj::AsyncIoStream> connected) {
          stream = kj::mv(connected);
          wire = kj::heap<Wire>(*stream);
          return wire->bootstrap();
        });
  }

  // The handshake (proto Mayfly, common/auth.h): hello, then openSession with this key's proof; the node's proof
  // must match before the session is used, so requests never go to a node that does not hold the key.
  static kj::ForkedPromise<proto::Session::Client> open_session(proto::Mayfly::Client main, const std::string& key) {
    const std::string client_nonce = auth::random_nonce();
    auto hello = main.helloRequest();
    hello.setClientNonce(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(client_nonce.data()), client_nonce.size()));
    return hello.send()
        .then([main, key, client_nonce](capnp::Response<proto::Mayfly::HelloResults> greeted) mutable {
          const capnp::Data::Reader nonce = greeted.getServerNonce();
          const std::string server_nonce(reinterpret_cast<const char*>(nonce.begin()), nonce.size());
          auto open = main.openSessionRequest();
          if (!key.empty()) {
            const std::string proof = auth::session_client_proof(key, client_nonce, server_nonce);
            open.setProof(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(proof.data()), proof.size()));
          }
          return open.send().then([key, client_nonce, server_nonce](
                                      capnp::Response<proto::Mayfly::OpenSessionResults> results) {
            if (!key.empty()) {
              const capnp::Data::Reader answer = results.getServerProof();
              const std::string expected = auth::session_server_proof(key, client_nonce, server_nonce);
              if (!auth::constant_time_equal(
                      expected, std::string_view(reinterpret_cast<const char*>(answer.begin()), answer.size()))) {
                // The node does not know this key (unknown or removed), runs without keys, or is not a node of
                // this cluster at all: no request goes to it, and the caller gets a 401 (kAuthRefusal).
                kj::throwFatalException(
                    kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::heapString(kAuthRefusal)));
              }
            }
            return results.getSession();
          });
        })
        .fork();
  }

  kj::AutoCloseFd loop_socket;       // EzRpcClient's idle socket (closed after it)
  kj::Own<capnp::EzRpcClient> rpc;  // the thread's shared event loop
  kj::Own<kj::AsyncIoStream> stream;  // the connection (plaintext or TLS)
  kj::Own<Wire> wire;                 //   and its RPC system
  std::string key;
  proto::Mayfly::Client main;
  kj::ForkedPromise<proto::Session::Client> session;
  uint64_t session_generation = 0;  // bumped when `session` is opened again (a write's idle probe)
  bool broken = false;            // a call saw it fail: the next use opens a new one
  kj::TimePoint last_answer_at;   // when an execute call last got its answer on it (or when it was opened)
  Batcher batcher;                // declared last: its calls go before the connection's RPC system
};

std::string describe(const kj::Exception& exception) {
  const kj::StringPtr description = exception.getDescription();
  return std::string(description.cStr(), description.size());
}

}  // namespace

uint64_t random_client_id() {
  std::random_device device;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(device()) << 32) ^ device();
  return id;
}

class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)),
        routing_(options_.endpoints),
        prng_(options_.jitter_seed),
        client_id_(options_.client_id != 0 ? options_.client_id : random_client_id()) {
    if (!options_.tls_ca.empty()) {
      Result<std::unique_ptr<tls::Context>> loaded = tls::Context::load(options_.tls_ca);
      KJ_REQUIRE(loaded.is_ok(), loaded.status().message());
      tls_ = std::move(loaded).value();
    }
    connections_.resize(routing_.endpoint_count());
  }

  kj::Promise<Response> execute_async(const Request& request) {
    auto call = std::make_shared<Call>();
    call->request = request;
    call->write = api::changes_state(request.kind());
    call->consistency = request.options.consistency.value_or(options_.default_consistency);
    if (request.endpoint.has_value() && (*request.endpoint == 0 || *request.endpoint > routing_.endpoint_count())) {
      Response response;
      response.status = 400;
      response.message = "request endpoint " + std::to_string(*request.endpoint) + " is not in 1.." +
                         std::to_string(routing_.endpoint_count());
      return response;
    }
    const auto to_index = [](std::optional<size_t> number) -> std::optional<size_t> {
      return number.has_value() ? std::optional<size_t>(*number - 1) : std::nullopt;
    };
    call->endpoint = routing_.first_endpoint(request.kind(), call->consistency, to_index(request.endpoint),
                                             to_index(options_.preferred_endpoint));
    call->retries.pinned_read =
        !call->write && (request.endpoint.has_value() || options_.preferred_endpoint.has_value());
    kj::Timer& clock = timer(call->endpoint);
    // The timer's now() is the time of the event loop's last turn; a caller that was away from the loop (busy, or
    // sleeping) would otherwise start with part of its timeout already spent. The loop's timer reads the same
    // monotonic clock, so the later of the two is "now".
    const kj::TimePoint now = kj::max(clock.now(), kj::systemPreciseMonotonicClock().now());
    call->deadline = now + options_.request_timeout_ms * kj::MILLISECONDS;
    call->retry_horizon = now + kExactlyOnceRetryHorizonMs * kj::MILLISECONDS;
    auto timeout = clock.atTime(call->deadline).then([this, call]() { return on_timeout(*call); });
    // Database, container and item writes (api::is_write) carry a write id: the cluster deduplicates those.
    // Membership changes and the clock do not (they are idempotent or checked by the Raft core).
    if (!call->write || !options_.exactly_once || !api::is_write(request.kind())) {
      return run(call).exclusiveJoin(kj::mv(timeout));
    }
    // Numbered before the first attempt; the number stays unacknowledged (so the cluster keeps its outcome) until
    // the caller has the answer, whatever it is, or drops the promise (the ticket's end). The cluster keeps at most
    // kWriteWindow outcomes per client, from the oldest unacknowledged number on: a write is numbered only while it
    // fits in that window, else it waits (inside its own timeout) for the oldest to be answered. Otherwise one write
    // retried for long (its node died) while the others go on would fill the cluster's table, and every later write,
    // that retry included, would be refused 429 until the timeout.
    auto ticket = std::make_shared<WriteTicket>(*this);
    kj::Promise<void> numbered = enter_window(ticket);
    return numbered
        .then([this, call, ticket]() {
          call->sequence = ticket->sequence;
          return run(call);
        })
        .exclusiveJoin(kj::mv(timeout))
        .then([ticket](Response response) {
          ticket->release();  // answered: its outcome need not be kept, even while the caller holds the promise
          return response;
        })
        .attach(kj::mv(ticket))
        // Run as events arrive, not only when the caller waits: a write let into the window must go out then, and an
        // answered one must leave it, whichever promises the caller happens to be waiting on.
        .eagerlyEvaluate(nullptr);
  }

  kj::WaitScope& wait_scope() { return any_connection().rpc->getWaitScope(); }

  const Routing& routing() const { return routing_; }
  void set_node_address(uint64_t id, const std::string& address) {
    routing_.set_node_address(id, address);
    connections_.resize(routing_.endpoint_count());
  }
  const SessionTokens& tokens() const { return tokens_; }

 private:
  // A numbered write's place in the window: its number, once it has one; acknowledged when the call ends.
  struct WriteTicket {
    explicit WriteTicket(Impl& owner) : impl(owner) {}
    ~WriteTicket() { release(); }  // also when the call is dropped unanswered
    void release() {
      if (sequence.has_value()) impl.acknowledge(*sequence);
      sequence.reset();
    }
    Impl& impl;
    std::optional<uint64_t> sequence;
  };

  bool window_has_room() const {
    return unacknowledged_.empty() || next_sequence_ - *unacknowledged_.begin() < kWriteWindow;
  }
  void number(WriteTicket& ticket) {
    ticket.sequence = next_sequence_++;
    unacknowledged_.insert(*ticket.sequence);
  }
  // Numbers the write now if it fits (and nobody waits before it), else when earlier writes are answered.
  kj::Promise<void> enter_window(const std::shared_ptr<WriteTicket>& ticket) {
    if (window_waiters_.empty() && window_has_room()) {
      number(*ticket);
      return kj::READY_NOW;
    }
    auto waiting = kj::newPromiseAndFulfiller<void>();
    window_waiters_.emplace_back(kj::mv(waiting.fulfiller), ticket);
    return kj::mv(waiting.promise);
  }
  void acknowledge(uint64_t sequence) {
    unacknowledged_.erase(sequence);
    while (!window_waiters_.empty() && window_has_room()) {
      auto [fulfiller, weak] = kj::mv(window_waiters_.front());
      window_waiters_.pop_front();
      std::shared_ptr<WriteTicket> ticket = weak.lock();
      if (ticket == nullptr || !fulfiller->isWaiting()) continue;  // gave up (timed out) while it waited
      number(*ticket);  // numbered here, so the next waiter sees the window as it now is
      fulfiller->fulfill();
    }
  }

  // One execute call across its attempts. Shared between the retry chain and the timeout branch.
  struct Call {
    Request request;
    bool write = false;
    Consistency consistency = Consistency::kSession;
    RetryState retries;
    size_t endpoint = 0;
    kj::TimePoint deadline = kj::origin<kj::TimePoint>();
    kj::TimePoint retry_horizon = kj::origin<kj::TimePoint>();  // exactly-once retries end here
    kj::TimePoint attempt_started_at = kj::origin<kj::TimePoint>();
    std::optional<uint64_t> sequence;  // the write's number, when it carries a write id
    uint32_t attempts = 0;             // sent or tried so far
    bool maybe_applied = false;        // a write: some attempt's outcome was unknown
    std::weak_ptr<Connection> connection;  // of the attempt in flight, for the timeout's diagnosis
  };

  // The connection for `endpoint`, opened now if there is none or the last one broke. The new one is made before the
  // old one is released, so the thread's shared EzRpc event loop never goes away under a running Client.
  std::shared_ptr<Connection> connection(size_t endpoint) {
    std::shared_ptr<Connection>& slot = connections_.at(endpoint);
    if (slot == nullptr || slot->broken) {
      const kj::TimePoint now = timer_ != nullptr ? timer_->now() : kj::origin<kj::TimePoint>();
      auto fresh = std::make_shared<Connection>(routing_.address(endpoint), now, options_.key, tls_.get(),
                                                options_.max_batch_requests);
      if (timer_ == nullptr) {
        timer_ = &fresh->rpc->getIoProvider().getTimer();
        fresh->last_answer_at = timer_->now();
      }
      slot = std::move(fresh);
    }
    return slot;
  }

  Connection& any_connection() {
    for (const auto& existing : connections_) {
      if (existing != nullptr) {
        return *existing;
      }
    }
    return *connection(0);
  }

  kj::Timer& timer(size_t endpoint) {
    if (timer_ == nullptr) {
      connection(endpoint);  // lazily: the connection the call is about to use starts the event loop
    }
    return *timer_;
  }

  kj::Promise<Response> run(std::shared_ptr<Call> call) {
    std::shared_ptr<Connection> conn = connection(call->endpoint);
    call->connection = conn;
    call->attempt_started_at = timer_->now();
    std::optional<WriteId> write_id;
    if (call->sequence) {
      // The lowest number still waiting for its answer (this one at the latest) lets the cluster drop older outcomes.
      // The owner is never the client's to set (a node forwarding the write sets it).
      write_id = WriteId{.client = client_id_,
                         .sequence = *call->sequence,
                         .first_unacknowledged = *unacknowledged_.begin(),
                         .retry = call->attempts > 0};
    }
    ++call->attempts;
    return attempt(conn, *call, write_id).then([this, call](Attempt outcome) {
      return after_attempt(call, kj::mv(outcome));
    });
  }

  // Sends the call once on `conn`. Waiting for the session first (instead of pipelining on it) is what lets a failed
  // connect be told apart from a failure after the request left.
  kj::Promise<Attempt> attempt(std::shared_ptr<Connection> conn, const Call& call, std::optional<WriteId> write_id) {
    Connection* raw = conn.get();
    kj::Promise<proto::Session::Client> session = raw->session.addBranch();
    // The loop's now() is the time of its last turn, which can be long ago for a caller that was away from the loop:
    // measure the quiet spell with the clock itself (the same monotonic clock the timer reads).
    const kj::TimePoint now = kj::max(timer_->now(), kj::systemPreciseMonotonicClock().now());
    if (call.write && now - raw->last_answer_at >= options_.write_probe_idle_ms * kj::MILLISECONDS) {
      raw->session = Connection::open_session(raw->main, raw->key);
      ++raw->session_generation;
      session = raw->session.addBranch();
      // One probe per quiet spell: the other writes of a burst wait on this one's session (a node answers one
      // openSession per hello on a connection, so concurrent handshakes on it would spoil each other's proofs).
      raw->last_answer_at = now;
    }
    // The copy that goes out: the effective consistency (the caller's, else the client's default) and, for a numbered
    // write, its write id; a request's own write_id is never sent.
    Request request = call.request;
    request.options.consistency = call.consistency;
    request.write_id = write_id;
    return session
        .then(
            [this, raw, request = kj::mv(request),
             generation = raw->session_generation](proto::Session::Client opened) mutable -> kj::Promise<Attempt> {
              // The token is chosen at send time, so a retry carries whatever newer token arrived meanwhile.
              request.options.session_token = tokens_.token_for(request.options, *request.options.consistency);
              kj::Promise<Response> answer = batchable(request)
                                                 ? raw->batcher.submit(kj::mv(opened), generation, kj::mv(request))
                                                 : execute_one(opened, request);
              return answer.then(
                  [this, raw](Response response) {
                    raw->last_answer_at = timer_->now();
                    return Attempt{.kind = Attempt::Kind::kAnswered, .response = kj::mv(response)};
                  },
                  [raw](kj::Exception&& exception) {
                    if (exception.getType() == kj::Exception::Type::DISCONNECTED) {
                      raw->broken = true;
                    }
                    return Attempt{.kind = Attempt::Kind::kConnectionLost, .error = describe(exception)};
                  });
            },
            [raw](kj::Exception&& exception) {
              raw->broken = true;
              const std::string error = describe(exception);
              if (error.find(kAuthRefusal) != std::string::npos) {
                Response refused;
                refused.status = 401;
                refused.substatus = kSubstatusKeyNotProven;
                refused.message = kAuthRefusal;
                return Attempt{.kind = Attempt::Kind::kAnswered, .response = kj::mv(refused)};
              }
              return Attempt{.kind = Attempt::Kind::kNotSent, .error = error};
            })
        .attach(kj::mv(conn));  // released after the RPC's own promise nodes are gone
  }

  kj::Promise<Response> after_attempt(std::shared_ptr<Call> call, Attempt outcome) {
    if (call->write && (outcome.kind == Attempt::Kind::kConnectionLost ||
                        (outcome.kind == Attempt::Kind::kAnswered && outcome.response.status == 503 &&
                         outcome.response.substatus == kSubstatusServerOutcomeUnknown))) {
      call->maybe_applied = true;
    }
    if (outcome.kind == Attempt::Kind::kAnswered) {
      learn(call->request, outcome.response, call->write);
    } else if (outcome.kind == Attempt::Kind::kNotSent) {
      routing_.forget_leader_at(call->endpoint);
    }
    // A numbered write may be re-sent after an unknown outcome: the cluster applies it at most once.
    const bool deduplicated = call->sequence.has_value() && timer_->now() < call->retry_horizon;
    const RetryDecision decision = decide_retry(options_, call->retries, outcome, call->write, prng_, deduplicated);
    if (!decision.retry || timer_->now() + decision.delay_ms * kj::MILLISECONDS >= call->deadline) {
      // Out of retries, or the wait would outlast the deadline: the last answer says more than a 408 would.
      Response last = outcome.kind == Attempt::Kind::kAnswered
                          ? kj::mv(outcome.response)
                          : unanswered_response(outcome, call->write, routing_.address(call->endpoint));
      // A later attempt's "not applied" says nothing of an earlier attempt whose outcome was unknown.
      return call->maybe_applied ? outcome_still_unknown(kj::mv(last)) : kj::mv(last);
    }
    call->endpoint = next_endpoint(*call, decision);
    return timer_->afterDelay(decision.delay_ms * kj::MILLISECONDS).then([this, call]() { return run(call); });
  }

  size_t next_endpoint(const Call& call, const RetryDecision& decision) const {
    switch (decision.target) {
      case RetryDecision::Target::kSameEndpoint:
        return call.endpoint;
      case RetryDecision::Target::kLeaderNode:
        if (const auto endpoint = routing_.endpoint_of_node(decision.node)) {
          return *endpoint;
        }
        break;
      case RetryDecision::Target::kNextEndpoint:
        if (call.write && routing_.leader().has_value()) {
          const auto leader_endpoint = routing_.endpoint_of_node(*routing_.leader());
          if (leader_endpoint.has_value() && *leader_endpoint != call.endpoint) {
            return *leader_endpoint;  // another call has meanwhile learned where the leader is
          }
        }
        break;
    }
    return routing_.next_endpoint(call.endpoint);
  }

  void learn(const Request& request, const Response& response, bool write) {
    routing_.observe(response, write);
    tokens_.observe(response.session_token);
    if (!response.ok()) {
      return;
    }
    if (const auto* add = request.as<api::AddMember>(); add != nullptr && !add->address.empty()) {
      routing_.set_node_address(add->id, add->address);
    } else if (request.kind() == Op::kClusterStatus) {
      for (const auto& [id, address] : parse_cluster_nodes(response.body)) {
        routing_.set_node_address(id, address);
      }
    }
    connections_.resize(routing_.endpoint_count());
  }

  Response on_timeout(const Call& call) {
    // A connection on which nothing at all came back while we waited may be dead without a reset (peer host gone):
    // open a new one next time. A merely slow peer keeps answering other calls and keeps its connection.
    if (auto conn = call.connection.lock(); conn != nullptr && conn->last_answer_at <= call.attempt_started_at) {
      conn->broken = true;
    }
    return timeout_response(options_.request_timeout_ms, call.write, routing_.address(call.endpoint));
  }

  ClientOptions options_;
  Routing routing_;
  SessionTokens tokens_;
  Prng prng_;
  std::unique_ptr<tls::Context> tls_;  // with ClientOptions::tls_ca; outlives the connections
  std::vector<std::shared_ptr<Connection>> connections_;  // by endpoint; null until first used
  kj::Timer* timer_ = nullptr;  // the shared event loop's timer; set with the first connection
  const uint64_t client_id_;    // with exactly_once: the id every numbered write carries
  uint64_t next_sequence_ = 1;
  std::set<uint64_t> unacknowledged_;  // numbered writes whose caller has no answer yet
  // Writes waiting for room in the window, in order, each with the ticket it is numbered into.
  std::deque<std::pair<kj::Own<kj::PromiseFulfiller<void>>, std::weak_ptr<WriteTicket>>> window_waiters_;
};

Client::Client(ClientOptions options) {
  KJ_REQUIRE(!options.endpoints.empty(), "a Mayfly client needs at least one endpoint");
  for (const auto& endpoint : options.endpoints) {
    const Status valid = validate_endpoint(endpoint);
    KJ_REQUIRE(valid.is_ok(), valid.message());
  }
  if (options.preferred_endpoint.has_value()) {
    KJ_REQUIRE(*options.preferred_endpoint >= 1 && *options.preferred_endpoint <= options.endpoints.size(),
               "preferred_endpoint must be an endpoint number 1..N", *options.preferred_endpoint);
  }
  impl_ = std::make_unique<Impl>(std::move(options));
}

Client::~Client() = default;

Response Client::execute(const Request& request) { return impl_->execute_async(request).wait(impl_->wait_scope()); }

kj::Promise<Response> Client::execute_async(const Request& request) { return impl_->execute_async(request); }

std::vector<Response> Client::execute_all(const std::vector<Request>& requests) {
  auto promises = kj::heapArrayBuilder<kj::Promise<Response>>(requests.size());
  for (const auto& request : requests) {
    promises.add(impl_->execute_async(request));
  }
  kj::Array<Response> responses = kj::joinPromises(promises.finish()).wait(impl_->wait_scope());
  return std::vector<Response>(std::make_move_iterator(responses.begin()), std::make_move_iterator(responses.end()));
}

kj::WaitScope& Client::wait_scope() { return impl_->wait_scope(); }

std::optional<uint64_t> Client::leader() const { return impl_->routing().leader(); }

std::string Client::session_token() const { return impl_->tokens().highest(); }

void Client::set_node_address(uint64_t id, const std::string& address) {
  const Status valid = validate_endpoint(address);
  KJ_REQUIRE(valid.is_ok(), valid.message());
  impl_->set_node_address(id, address);
}

Response PageIterator::next() {
  MAYFLY_ASSERT_MSG(more_, "PageIterator::next() after the last page");
  Response page = client_.execute(request_);
  if (!page.ok() || page.continuation.empty()) {
    more_ = false;
  } else {
    request_.options.continuation = page.continuation;
  }
  return page;
}

}  // namespace mayfly::client
