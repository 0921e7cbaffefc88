#include "client/changefeed_cli.h"

#include <boost/json.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "common/assert.h"

namespace mayfly::client {

namespace {

bool worth_retrying(const Response& response) {
  return response.status == 503 || response.status == 408 || response.status == 429;
}

}  // namespace

int run_changefeed(Client& client, const CliCommand& command, std::ostream& out, std::ostream& err,
                   const std::atomic<bool>& stop) {
  Request request = command.request;
  ReadChangeFeed* feed = request.as<ReadChangeFeed>();
  MAYFLY_ASSERT_MSG(feed != nullptr, "run_changefeed needs a readChangeFeed request");
  if (command.follow) feed->wait_ms = kFollowWaitMs;
  std::string continuation;
  auto finish = [&](int code) {
    if (!continuation.empty()) err << "continuation: " << continuation << std::endl;
    return code;
  };
  while (!stop.load()) {
    const auto asked = std::chrono::steady_clock::now();
    const Response response = client.execute(request);
    const auto answered = std::chrono::steady_clock::now();
    if (!response.ok()) {
      if (command.follow && worth_retrying(response)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(kFollowRetryMs));
        continue;
      }
      err << format_response(response) << std::endl;
      return finish(exit_code_for(response));
    }
    boost::system::error_code error;
    const boost::json::value body = boost::json::parse(response.body, error);
    const boost::json::object* page = !error && body.is_object() ? &body.as_object() : nullptr;
    const boost::json::array* changes = nullptr;
    if (page != nullptr) {
      if (const auto* found = page->if_contains("changes"); found != nullptr && found->is_array()) {
        changes = &found->as_array();
      }
    }
    const auto* next = page != nullptr ? page->if_contains("continuation") : nullptr;
    if (changes == nullptr || next == nullptr || !next->is_string()) {
      err << "mayfly changefeed: the answer is not a change feed page: " << response.body.substr(0, 200)
          << std::endl;
      return finish(kExitRequestFailed);
    }
    for (const boost::json::value& change : *changes) out << boost::json::serialize(change) << '\n';
    out.flush();
    const std::string token(next->as_string());
    const bool progressed = token != continuation || !changes->empty();
    continuation = token;
    feed->from = ReadChangeFeed::From::kContinuation;
    feed->continuation = continuation;
    const auto* caught_up = page->if_contains("caughtUp");
    const bool at_end = caught_up != nullptr && caught_up->is_bool() && caught_up->as_bool();
    if (!command.follow && at_end) break;
    // A replica behind the continuation answers the same token without waiting: do not ask it again at once. A
    // caught-up page the node held for the whole long-poll is no such answer: nothing was applied meanwhile (an idle
    // cluster with --time-entry-ms >= the wait), and the next position may come any moment — ask again at once, or a
    // change applied during the pause reaches this reader up to kFollowRetryMs late.
    const bool waited_out = command.follow && at_end && answered - asked >= std::chrono::milliseconds(kFollowWaitMs);
    if (!progressed && !waited_out) std::this_thread::sleep_for(std::chrono::milliseconds(kFollowRetryMs));
  }
  return finish(kExitOk);
}

}  // namespace mayfly::client
