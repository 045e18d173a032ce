// Status and Result<T>: how external failures (bad input, malformed files, I/O) travel.
// Invariant violations use DI_CHECK (check.h) instead; nothing here throws.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace deepinfer {

// An error message for a person: it names the file, tensor or field at fault.
class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }
  // The request field at fault, where one is (e.g. "max_tokens"); empty otherwise. The server
  // reports it as the error's `param`.
  const std::string& field() const { return field_; }
  Status with_field(std::string field) && {
    field_ = std::move(field);
    return std::move(*this);
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  std::string field_;
  bool failed_ = false;
};

// Either a value or a failed Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {            // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) {
      std::fprintf(stderr, "%s:%d: Result built from an ok Status\n", __FILE__, __LINE__);
      std::abort();
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status ok_status;
    return ok() ? ok_status : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace deepinfer

// Returns the failed Status of an expression from the enclosing function.
#define DI_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::deepinfer::Status di_status_ = (expr);      \
    if (!di_status_.ok()) return di_status_;      \
  } while (0)

#define DI_CONCAT_INNER(a, b) a##b
#define DI_CONCAT(a, b) DI_CONCAT_INNER(a, b)
// DI_ASSIGN_OR_RETURN(auto x, ResultExpr()): binds the value or returns the Status.
#define DI_ASSIGN_OR_RETURN(lhs, expr) DI_ASSIGN_OR_RETURN_IMPL(DI_CONCAT(di_result_, __LINE__), lhs, expr)
#define DI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
