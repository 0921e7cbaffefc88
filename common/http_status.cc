#include "common/http_status.h"

namespace mayfly {

int http_status(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kUnauthorized: return 401;
    case StatusCode::kForbidden: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kConflict: return 409;
    case StatusCode::kPreconditionFailed: return 412;
    case StatusCode::kTooLarge: return 413;
    case StatusCode::kThrottled: return 429;
    case StatusCode::kGone: return 410;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kCorruption:
    case StatusCode::kIoError:
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

int http_status(Done done) {
  switch (done) {
    case Done::kOk: return 200;
    case Done::kCreated: return 201;
    case Done::kNoContent: return 204;
    case Done::kMultiStatus: return 207;
  }
  return 200;
}

std::optional<HttpAnswer> from_http_status(int status) {
  switch (status) {
    case 200: return HttpAnswer{StatusCode::kOk, Done::kOk};
    case 201: return HttpAnswer{StatusCode::kOk, Done::kCreated};
    case 204: return HttpAnswer{StatusCode::kOk, Done::kNoContent};
    case 207: return HttpAnswer{StatusCode::kOk, Done::kMultiStatus};
    case 400: return HttpAnswer{StatusCode::kInvalidArgument};
    case 401: return HttpAnswer{StatusCode::kUnauthorized};
    case 403: return HttpAnswer{StatusCode::kForbidden};
    case 404: return HttpAnswer{StatusCode::kNotFound};
    case 409: return HttpAnswer{StatusCode::kConflict};
    case 412: return HttpAnswer{StatusCode::kPreconditionFailed};
    case 413: return HttpAnswer{StatusCode::kTooLarge};
    case 410: return HttpAnswer{StatusCode::kGone};
    case 429: return HttpAnswer{StatusCode::kThrottled};
    case 503: return HttpAnswer{StatusCode::kUnavailable};
    case 500: return HttpAnswer{StatusCode::kInternal};
    default: return std::nullopt;
  }
}

}  // namespace mayfly
