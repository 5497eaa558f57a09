// Internal: decoding ONNX tensor payloads (little-endian raw bytes, fp16 and bf16 bit patterns),
// shared by the importer's small constants (tensor_value.cpp) and the tensor-data reader
// (tensor_data.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpusim/dtype.h"

namespace gpusim::detail {

inline double half_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  const double v = exp == 0 ? std::ldexp(frac, -24) : (exp == 31 ? (frac ? NAN : INFINITY) : std::ldexp(frac + 1024, exp - 25));
  return sign ? -v : v;
}

inline double bf16_to_double(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Appends the `n` elements of `raw` (type `t`, little-endian) to `reals` (floating types) or
// `ints` (integers, bool). False when the size does not match or the type has no fixed width.
bool decode_raw(const std::string& raw, DType t, int64_t n, std::vector<double>& reals, std::vector<int64_t>& ints);

}  // namespace gpusim::detail
