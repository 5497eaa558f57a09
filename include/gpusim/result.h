// Result<T>: the value of an operation that can fail for an expected reason (a bad file, an
// unsupported op, an unresolved dim), or the reason it failed.
//
// Why not exceptions: library code is called by the CLI, by tests that pin messages, and later by a
// multi-threaded service; an expected failure is data that callers inspect, print or collect. Only
// main() exits. Messages name the object (file, node, field), the value, the limit and the fix:
//   model.onnx: node "conv_7" (Conv): kernel_shape has 3 dims, input has 2 spatial dims
//
// Usage:
//   gpusim::Result<Graph> g = gpusim::import_onnx("model.onnx", opts);
//   if (!g) { fmt::print(stderr, "{}\n", g.error().message); return 1; }
//   use(*g);
#pragma once

#include "gpusim/export.h"

#include <string>
#include <utility>
#include <variant>

namespace gpusim {

enum class ErrorCode {
  kIo,           // file missing or unreadable
  kParse,        // not a protobuf / not an ONNX model / truncated
  kInvalidModel, // structurally wrong graph (cycle, dangling input, bad attribute)
  kUnsupported,  // valid ONNX the importer does not handle (op, control flow)
  kShape,        // shape inference failed (mismatch, unresolved symbolic dim, overflow)
  kDataDependent,// an output shape depends on values only known at run time
  kInvalidArgument,
  kUnavailable,  // a backend, driver or device that is not present at run time
  kDevice,       // a device or compiler reported an error (compile log, launch failure)
  kNotFound,     // a name that is not there: a GPU profile, a runtime, an uploaded model's id
  kInternal,     // a bug: an unexpected exception caught at a public entry point
  kLimit,        // a request over a service limit (body, model size, time)
};

struct GPUSIM_API Error {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<Error>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Status: a Result without a value.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

}  // namespace gpusim
