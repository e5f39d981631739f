// Errors as values. A Status says whether an operation worked and, if not,
// what the caller should do next (the code) and why (the message). Result<T>
// carries either a T or a non-OK Status. Nothing in core throws.
//
// A Status may name a place in the input it came from (line and column of a
// cluster file, say); the edge that knows the file name prints
// "FILE:LINE:COL: message".
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace unipool {

// Codes are chosen by what the caller does next.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // fix the input; retrying the same input fails again
  kNotFound,            // the named thing does not exist
  kAlreadyExists,       // pick another name or id
  kFailedPrecondition,  // the system is not in a state that allows this now
  kResourceExhausted,   // over a quota or a limit
  kAborted,             // a concurrent change won (compare-and-swap); re-read and retry
  kUnauthenticated,     // no or unknown credentials
  kPermissionDenied,    // known caller, not allowed to do this
  kUnavailable,         // transient; retry later
  kDeadlineExceeded,    // no answer in time: it may have happened; look before retrying
  kInternal,            // a bug: an invariant broke
};

const char* StatusCodeName(StatusCode code);

// Position in a source text; 1-based, 0 means unknown.
struct SourceLoc {
  int line = 0;
  int column = 0;
  bool known() const { return line > 0; }
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, SourceLoc loc = {})
      : code_(code), message_(std::move(message)), loc_(loc) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const SourceLoc& loc() const { return loc_; }

  // "LINE:COL: message" when the place is known, else the message alone.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  SourceLoc loc_;
};

inline Status InvalidArgument(std::string msg, SourceLoc loc = {}) {
  return Status(StatusCode::kInvalidArgument, std::move(msg), loc);
}
inline Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
inline Status FailedPrecondition(std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(msg));
}
inline Status ResourceExhausted(std::string msg) {
  return Status(StatusCode::kResourceExhausted, std::move(msg));
}
inline Status Aborted(std::string msg) { return Status(StatusCode::kAborted, std::move(msg)); }
inline Status Unauthenticated(std::string msg) {
  return Status(StatusCode::kUnauthenticated, std::move(msg));
}
inline Status PermissionDenied(std::string msg) {
  return Status(StatusCode::kPermissionDenied, std::move(msg));
}
inline Status Unavailable(std::string msg) {
  return Status(StatusCode::kUnavailable, std::move(msg));
}
inline Status DeadlineExceeded(std::string msg) {
  return Status(StatusCode::kDeadlineExceeded, std::move(msg));
}
inline Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }
inline Status AlreadyExists(std::string msg) {
  return Status(StatusCode::kAlreadyExists, std::move(msg));
}

// Either a value or an error. REQUIRES: the Status given is not OK.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace unipool

// Returns from the enclosing function if `expr` is not OK.
#define UNIPOOL_RETURN_IF_ERROR(expr) \
  do {                                \
    ::unipool::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)
