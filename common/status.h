// Status and Result<T>: how every module boundary in Mayfly reports failure.
//
// A Status is cheap on success (no allocation) and carries one code from a small closed set plus a message with
// context. It is the one error currency of storage and node: "this call could not do its job" — bad arguments, a
// refusal of the document API (not found, conflict, precondition failed, too large, throttled, ...), a component
// that is not ready, or a failure of the store itself (I/O, corruption, a broken invariant: is_storage_failure).
// The HTTP number a refusal is answered with is made in one place, common/http_status.h, where answers leave.
//
// Thread-safety: values; safe to copy and move between threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/assert.h"

namespace mayfly {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something that can never work (a bad request)
  kNotFound,         // a thing the call needs does not exist
  kCorruption,       // persisted data does not decode: stop, do not guess
  kIoError,          // the disk or the OS failed; sticky in storage
  kUnavailable,      // not ready / shutting down / not applied / try elsewhere
  kInternal,         // a bug or an invariant that does not hold
  // Refusals of the document API (docs/ttl.md §9).
  kUnauthorized,        // no valid key
  kForbidden,           // the key's role is not enough
  kConflict,            // the thing to create exists already
  kPreconditionFailed,  // if-match does not match
  kTooLarge,            // an item over the size limit
  kThrottled,           // a budget is used up for now: retry later
  kGone,                // what was asked for existed but is no longer kept (a change feed position past retention)
};

std::string_view status_code_name(StatusCode code);
// The failures of the store itself (kCorruption, kIoError, kInternal): a node that meets one while applying cannot
// go on (its replicas would not see it), so the state machine stops, sticky. Every other code is a verdict.
inline bool is_storage_failure(StatusCode code) {
  return code == StatusCode::kCorruption || code == StatusCode::kIoError || code == StatusCode::kInternal;
}

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status ok() { return Status(); }
  static Status invalid_argument(std::string message) { return {StatusCode::kInvalidArgument, std::move(message)}; }
  static Status not_found(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
  static Status corruption(std::string message) { return {StatusCode::kCorruption, std::move(message)}; }
  static Status io_error(std::string message) { return {StatusCode::kIoError, std::move(message)}; }
  static Status unavailable(std::string message) { return {StatusCode::kUnavailable, std::move(message)}; }
  static Status internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }
  static Status conflict(std::string message) { return {StatusCode::kConflict, std::move(message)}; }
  static Status precondition_failed(std::string message) {
    return {StatusCode::kPreconditionFailed, std::move(message)};
  }
  static Status too_large(std::string message) { return {StatusCode::kTooLarge, std::move(message)}; }

  bool is_ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "IoError: fsync raft log: No space left on device"
  std::string to_string() const;

  // Adds context in front of the message: status.with_context("open store /data").
  Status with_context(std::string_view context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;  // null means OK; shared so copies stay cheap
};

// Either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    MAYFLY_ASSERT_MSG(!status_.is_ok(), "a Result built from a Status must carry an error");
  }

  bool is_ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    MAYFLY_ASSERT_MSG(is_ok(), "value() on an error Result: %s", status_.to_string().c_str());
    return *value_;
  }
  const T& value() const& {
    MAYFLY_ASSERT_MSG(is_ok(), "value() on an error Result: %s", status_.to_string().c_str());
    return *value_;
  }
  T&& value() && {
    MAYFLY_ASSERT_MSG(is_ok(), "value() on an error Result: %s", status_.to_string().c_str());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace mayfly

// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define MAYFLY_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::mayfly::Status mayfly_status_ = (expr); \
    if (!mayfly_status_.is_ok()) {            \
      return mayfly_status_;                  \
    }                                         \
  } while (false)

#define MAYFLY_CONCAT_INNER_(a, b) a##b
#define MAYFLY_CONCAT_(a, b) MAYFLY_CONCAT_INNER_(a, b)
// `MAYFLY_ASSIGN_OR_RETURN(auto x, compute());` — x is the value, or the enclosing function returns the error.
#define MAYFLY_ASSIGN_OR_RETURN(lhs, expr) MAYFLY_ASSIGN_OR_RETURN_IMPL_(MAYFLY_CONCAT_(mayfly_result_, __LINE__), lhs, expr)
#define MAYFLY_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                  \
  if (!result.is_ok()) {                                 \
    return result.status();                              \
  }                                                      \
  lhs = std::move(result).value()
