// Status and Result<T>: how every module boundary in Mayfly reports failure.
//
// A Status is cheap on success (no allocation) and carries one code from a small closed set plus a message with
// context. Business outcomes of the document API (404, 409, 412, ...) are *not* Statuses: they are values in the
// results of the state machine and the wire schema. A Status is for "this call could not do its job": bad arguments
// to an internal API, I/O failure, corruption, or a component that is not ready.
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
  kInvalidArgument,  // the caller passed something that can never work
  kNotFound,         // a thing the call needs does not exist (internal lookups, not item 404s)
  kCorruption,       // persisted data does not decode: stop, do not guess
  kIoError,          // the disk or the OS failed; sticky in storage
  kUnavailable,      // not ready / shutting down / try elsewhere
  kInternal,         // a bug or an invariant that does not hold
};

std::string_view status_code_name(StatusCode code);

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
