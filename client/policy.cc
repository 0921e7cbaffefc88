#include "client/policy.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

namespace mayfly::client {

namespace {

constexpr uint16_t kStatusUnavailable = 503;
constexpr uint16_t kStatusThrottled = 429;
constexpr uint16_t kStatusTimeout = 408;

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

Status validate_endpoint(std::string_view endpoint) {
  const std::string shown(endpoint);
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) {
    return Status::invalid_argument("endpoint '" + shown + "' has no port; expected host:port");
  }
  std::string_view host = endpoint.substr(0, colon);
  const std::string_view port = endpoint.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [v6]:port
  } else if (host.find(':') != std::string_view::npos) {
    return Status::invalid_argument("endpoint '" + shown + "': write IPv6 addresses as [addr]:port");
  }
  if (host.empty()) {
    return Status::invalid_argument("endpoint '" + shown + "' has no host; expected host:port");
  }
  if (host.find_first_of(" \t,/") != std::string_view::npos) {
    return Status::invalid_argument("endpoint '" + shown + "' has an invalid host");
  }
  uint32_t number = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (!all_digits(port) || error != std::errc() || end != port.data() + port.size() || number == 0 ||
      number > 65535) {
    return Status::invalid_argument("endpoint '" + shown + "' has an invalid port; expected 1..65535");
  }
  return Status::ok();
}

Result<std::vector<std::string>> parse_endpoint_list(std::string_view text) {
  std::vector<std::string> endpoints;
  std::set<std::string> seen;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view entry = trim(text.substr(0, comma));
    if (entry.empty()) {
      return Status::invalid_argument("empty entry in endpoint list; expected host:port,host:port");
    }
    MAYFLY_RETURN_IF_ERROR(validate_endpoint(entry));
    if (!seen.insert(std::string(entry)).second) {
      return Status::invalid_argument("endpoint '" + std::string(entry) + "' is listed twice");
    }
    endpoints.emplace_back(entry);
    if (comma == std::string_view::npos) {
      break;
    }
    text.remove_prefix(comma + 1);
  }
  return endpoints;
}

Routing::Routing(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {
  MAYFLY_ASSERT_MSG(!endpoints_.empty(), "a client needs at least one endpoint");
}

void Routing::set_node_address(uint64_t id, const std::string& address) {
  const auto known = std::find(endpoints_.begin(), endpoints_.end(), address);
  if (known != endpoints_.end()) {
    node_endpoint_[id] = static_cast<size_t>(known - endpoints_.begin());
    return;
  }
  endpoints_.push_back(address);
  node_endpoint_[id] = endpoints_.size() - 1;
}

std::optional<size_t> Routing::endpoint_of_node(uint64_t id) const {
  if (const auto learned = node_endpoint_.find(id); learned != node_endpoint_.end()) {
    return learned->second;
  }
  if (id >= 1 && id <= endpoints_.size()) {
    return static_cast<size_t>(id - 1);
  }
  return std::nullopt;
}

void Routing::observe(const Response& response, bool write) {
  if (response.leader_hint != 0) {
    leader_ = response.leader_hint;
  } else if (write && response.served_by != 0 && response.status != kStatusUnavailable) {
    leader_ = response.served_by;  // only the leader executes writes
  } else if (response.status == kStatusUnavailable && response.served_by != 0) {
    leader_.reset();  // the node we asked does not know a leader either
  }
}

void Routing::forget_leader_at(size_t endpoint) {
  if (leader_.has_value() && endpoint_of_node(*leader_) == endpoint) {
    leader_.reset();
  }
}

size_t Routing::round_robin() {
  const size_t chosen = round_robin_next_ % endpoints_.size();
  round_robin_next_ = chosen + 1;
  return chosen;
}

size_t Routing::first_endpoint(Op op, Consistency consistency, std::optional<size_t> request_endpoint,
                               std::optional<size_t> preferred) {
  if (request_endpoint.has_value() && *request_endpoint < endpoints_.size()) {
    return *request_endpoint;
  }
  const bool wants_leader = api::changes_state(op) || (consistency == Consistency::kStrong && !preferred.has_value());
  if (wants_leader && leader_.has_value()) {
    if (const auto endpoint = endpoint_of_node(*leader_)) {
      return *endpoint;
    }
  }
  if (!api::changes_state(op) && preferred.has_value() && *preferred < endpoints_.size()) {
    return *preferred;
  }
  return round_robin();
}

uint32_t backoff_ms(const ClientOptions& options, uint32_t retry, Prng& prng) {
  const uint64_t cap = std::max<uint64_t>(options.backoff_max_ms, 1);
  uint64_t full = std::max<uint64_t>(options.backoff_initial_ms, 1);
  for (uint32_t i = 0; i < retry && full < cap; ++i) {
    full *= 2;
  }
  full = std::min(full, cap);
  const uint64_t half = full / 2;
  return static_cast<uint32_t>(half + prng.uniform(full - half + 1));
}

RetryDecision decide_retry(const ClientOptions& options, RetryState& state, const Attempt& attempt, bool write,
                           Prng& prng, bool deduplicated) {
  RetryDecision decision;
  const auto unavailable_retry = [&](RetryDecision::Target target, uint64_t node, uint32_t retry_after_ms) {
    if (state.unavailable_retries >= options.max_retries_unavailable) {
      return RetryDecision{};
    }
    const uint32_t delay = retry_after_ms != 0 ? retry_after_ms : backoff_ms(options, state.unavailable_retries, prng);
    ++state.unavailable_retries;
    return RetryDecision{.retry = true, .delay_ms = delay, .target = target, .node = node};
  };
  const auto elsewhere = [&] {
    if (state.pinned_read && !write && !state.reconnected) {
      state.reconnected = true;
      return unavailable_retry(RetryDecision::Target::kSameEndpoint, 0, 0);
    }
    return unavailable_retry(RetryDecision::Target::kNextEndpoint, 0, 0);
  };
  switch (attempt.kind) {
    case Attempt::Kind::kNotSent:
      return elsewhere();
    case Attempt::Kind::kConnectionLost:
      if (write && !deduplicated) {
        return decision;  // the write may have been applied: re-sending could apply it twice
      }
      return elsewhere();
    case Attempt::Kind::kAnswered:
      break;
  }
  const Response& response = attempt.response;
  if (response.status == kStatusUnavailable && write && response.substatus == kSubstatusServerOutcomeUnknown &&
      !deduplicated) {
    return decision;  // it may have been applied: re-sending could apply it twice (it carries no write id)
  }
  if (response.status == kStatusUnavailable && response.substatus == kSubstatusServerWriteRecordLost) {
    return decision;  // the cluster cannot tell whether the first attempt applied: never re-sent
  }
  if (response.status == kStatusUnavailable) {
    const uint64_t hint = response.leader_hint;
    if (hint != 0 && hint != response.served_by) {
      return unavailable_retry(RetryDecision::Target::kLeaderNode, hint, response.retry_after_ms);
    }
    return unavailable_retry(RetryDecision::Target::kNextEndpoint, 0, response.retry_after_ms);
  }
  if (response.status == kStatusThrottled && options.retry_throttled &&
      state.throttled_retries < options.max_retries_throttled) {
    const uint32_t delay =
        response.retry_after_ms != 0 ? response.retry_after_ms : backoff_ms(options, state.throttled_retries, prng);
    ++state.throttled_retries;
    return RetryDecision{.retry = true, .delay_ms = delay, .target = RetryDecision::Target::kSameEndpoint};
  }
  return decision;
}

Response unanswered_response(const Attempt& attempt, bool write, std::string_view endpoint) {
  Response response;
  response.status = kStatusUnavailable;
  const std::string where(endpoint);
  if (attempt.kind == Attempt::Kind::kConnectionLost && write) {
    response.substatus = kSubstatusWriteOutcomeUnknown;
    response.message = "connection to " + where + " was lost after the write was sent (" + attempt.error +
                       "); the outcome is unknown: the write may or may not have been applied. Read the item to "
                       "find out before retrying, or retry with --if-match";
  } else if (attempt.kind == Attempt::Kind::kConnectionLost) {
    response.substatus = kSubstatusReadConnectionLost;
    response.message = "connection lost on every attempt, last to " + where + " (" + attempt.error +
                       "); retry later or check that the cluster is running";
  } else {
    response.substatus = kSubstatusNoEndpointReachable;
    response.message = "could not reach the cluster, last tried " + where + " (" + attempt.error +
                       "); check --endpoints and that the nodes are running";
  }
  return response;
}

Response outcome_still_unknown(Response last) {
  const bool executed =
      last.status < 400 || (last.status < 500 && last.status != 401 && last.status != 403 && last.status != 408 &&
                            last.status != kStatusThrottled);
  const bool already_unknown =
      last.status == kStatusUnavailable &&
      (last.substatus == kSubstatusWriteOutcomeUnknown || last.substatus == kSubstatusServerOutcomeUnknown ||
       last.substatus == kSubstatusServerWriteRecordLost);
  if (executed || already_unknown) return last;
  Response unknown = last;
  unknown.status = kStatusUnavailable;
  unknown.substatus = kSubstatusWriteOutcomeUnknown;
  unknown.body.clear();
  unknown.etag.clear();
  unknown.message = "the write's outcome is unknown: an earlier attempt may have been applied, and the retries "
                    "ended with " + std::to_string(last.status) + " (" + last.message +
                    "). Read the item to find out before writing again";
  return unknown;
}

Response timeout_response(uint32_t timeout_ms, bool write, std::string_view endpoint) {
  Response response;
  response.status = kStatusTimeout;
  response.substatus = kSubstatusTimeout;
  response.message = "request timed out after " + std::to_string(timeout_ms) + " ms (last sent to " +
                     std::string(endpoint) + ")";
  if (write) {
    response.message += "; the outcome is unknown: the write may or may not have been applied";
  }
  return response;
}

std::vector<std::pair<uint64_t, std::string>> parse_cluster_nodes(std::string_view body) {
  std::vector<std::pair<uint64_t, std::string>> nodes;
  boost::system::error_code error;
  const boost::json::value parsed = boost::json::parse(body, error);
  if (error || !parsed.is_object()) {
    return nodes;
  }
  const boost::json::value* list = parsed.as_object().if_contains("nodes");
  if (list == nullptr || !list->is_array()) {
    return nodes;
  }
  for (const auto& node : list->as_array()) {
    if (!node.is_object()) {
      continue;
    }
    const boost::json::value* id = node.as_object().if_contains("id");
    const boost::json::value* address = node.as_object().if_contains("address");
    if (id == nullptr || address == nullptr || !address->is_string()) {
      continue;
    }
    uint64_t number = 0;
    if (id->is_uint64()) {
      number = id->as_uint64();
    } else if (id->is_int64() && id->as_int64() > 0) {
      number = static_cast<uint64_t>(id->as_int64());
    }
    const std::string text(address->as_string());
    if (number != 0 && validate_endpoint(text).is_ok()) {
      nodes.emplace_back(number, text);
    }
  }
  return nodes;
}

bool session_token_newer(std::string_view candidate, std::string_view current) {
  if (candidate.empty()) {
    return false;
  }
  if (current.empty()) {
    return true;
  }
  const bool candidate_numeric = all_digits(candidate);
  const bool current_numeric = all_digits(current);
  if (candidate_numeric != current_numeric) {
    return candidate_numeric;  // a well-formed token beats a malformed one
  }
  const auto strip_zeros = [](std::string_view text) {
    while (text.size() > 1 && text.front() == '0') {
      text.remove_prefix(1);
    }
    return text;
  };
  candidate = strip_zeros(candidate);
  current = strip_zeros(current);
  if (candidate.size() != current.size()) {
    return candidate.size() > current.size();  // decimal numbers of any length, no overflow
  }
  return candidate > current;
}

void SessionTokens::observe(std::string_view token) {
  if (session_token_newer(token, highest_)) {
    highest_ = std::string(token);
  }
}

std::string SessionTokens::token_for(const Options& options, Consistency effective) const {
  if (!options.session_token.empty()) {
    return options.session_token;
  }
  return effective == Consistency::kSession ? highest_ : std::string();
}

}  // namespace mayfly::client
