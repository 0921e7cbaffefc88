// The one mapping between Mayfly's error currency (StatusCode, common/status.h) and the HTTP status numbers of the
// document API (docs/ttl.md §9). Everything inside the node speaks StatusCode; the HTTP number is made here, and only
// where an answer leaves in that form: the wire (node/request.cc encode_reply), the request metrics, and the
// exactly-once table's stored outcomes, whose format (storage/write_dedup.cc) has held HTTP numbers since it was
// introduced.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "common/status.h"

namespace mayfly {

// How a request that did its work was answered: 200, 201 (created) or 204 (deleted; no body).
// kMultiStatus: 207, a transactional batch that failed as a whole (its body says which operation failed and why).
enum class Done : uint8_t { kOk, kCreated, kNoContent, kMultiStatus };

// kOk: 200; kInvalidArgument 400; kUnauthorized 401; kForbidden 403; kNotFound 404; kConflict 409;
// kPreconditionFailed 412; kTooLarge 413; kGone 410;
// kThrottled 429; kUnavailable 503; kIoError, kCorruption, kInternal 500.
int http_status(StatusCode code);
int http_status(Done done);
// The HTTP number of an answer: `done` when `code` is kOk, else the code's.
inline int http_status(StatusCode code, Done done) { return code == StatusCode::kOk ? http_status(done) : http_status(code); }

// The inverse, for HTTP numbers stored or received: exactly the numbers http_status makes; nullopt for any other.
struct HttpAnswer {
  StatusCode code = StatusCode::kOk;
  Done done = Done::kOk;
};
std::optional<HttpAnswer> from_http_status(int status);

}  // namespace mayfly
