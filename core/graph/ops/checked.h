// Checked 64-bit arithmetic for shape computations. Dims, attributes and constant values come from
// the file: any sum or product of them may overflow, and a signed overflow is undefined behaviour
// that silently yields a wrong shape. Each helper returns nullopt on overflow; callers turn that
// into an error naming the node and the values.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

#include "gpusim/graph.h"

namespace gpusim::ops {

inline std::optional<int64_t> add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> sub_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// A float as a dim: nullopt when it is NaN, infinite or outside int64's range.
inline std::optional<int64_t> to_int64(double v) {
  if (!std::isfinite(v) || v >= 9.2e18 || v <= -9.2e18) return std::nullopt;
  return static_cast<int64_t>(v);
}
// A folded value stored in an integer tensor: truncated toward zero and saturated (NaN is 0), as
// Value::as_int reads one; a cast of an out-of-range double is undefined behaviour. Shapes built
// from such values are then refused by the shape checks, with the value named.
using gpusim::saturate_int64;  // graph.h: NaN is 0, past the range its nearest end

}  // namespace gpusim::ops
