// Status and StatusOr: the error channel of every public nibble function.
// No exception crosses the public API; a failed Status carries a message that
// names the node/tensor/attribute and the expected vs. actual value.
#ifndef NIBBLE_BASE_STATUS_H_
#define NIBBLE_BASE_STATUS_H_

#include <string>
#include <utility>
#include <variant>

namespace nibble {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK.
  static Status Ok() { return Status(); }
  static Status Error(std::string message) {
    Status s;
    s.ok_ = false;
    s.message_ = std::move(message);
    return s;
  }

  bool ok() const { return ok_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<prefix>: <message>" (for adding the
  // node or tensor name at an outer layer).
  Status WithPrefix(const std::string& prefix) const {
    if (ok_) return *this;
    return Error(prefix + ": " + message_);
  }

 private:
  bool ok_ = true;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design.
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  // Precondition: ok().
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

}  // namespace nibble

#define NIBBLE_RETURN_IF_ERROR(expr)       \
  do {                                     \
    ::nibble::Status nibble_s_ = (expr);   \
    if (!nibble_s_.ok()) return nibble_s_; \
  } while (0)

#endif  // NIBBLE_BASE_STATUS_H_
