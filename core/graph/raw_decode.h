// Internal: decoding ONNX tensor payloads (little-endian raw bytes, fp16 and bf16 bit patterns),
// shared by the importer's small constants (tensor_value.cpp) and the tensor-data reader
// (tensor_data.cpp); and the fp16/bf16 encoders the executor's uploads and the API's output
// buffers use.
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

// IEEE half from a float: round to nearest even, overflow to infinity, NaN kept a NaN.
inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf/nan
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);                                           // overflow
  if (exp <= 0) {                                                                                         // subnormal
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // round to nearest even (may carry into exp)
  return static_cast<uint16_t>(sign | h);
}

// bfloat16 from a float: round to nearest even, NaN kept a NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// Element k of packed little-endian elements of type `t` at `p`, as a double (floating types) or an
// int64 (integers, bool). The type must have a fixed width of whole bytes (raw_decode's types).
template <typename R>
R load_element(const void* p, DType t, int64_t k) {
  const auto* b = static_cast<const unsigned char*>(p) + k * (dtype_bits(t) / 8);
  const auto load = [b](auto v) {
    std::memcpy(&v, b, sizeof(v));
    return static_cast<R>(v);
  };
  switch (t) {
    case DType::kFloat32: return load(float{});
    case DType::kFloat64: return load(double{});
    case DType::kFloat16: return static_cast<R>(half_to_double(load(uint16_t{})));
    case DType::kBFloat16: return static_cast<R>(bf16_to_double(load(uint16_t{})));
    case DType::kInt8: return load(int8_t{});
    case DType::kUInt8: case DType::kBool: return load(uint8_t{});
    case DType::kInt16: return load(int16_t{});
    case DType::kUInt16: return load(uint16_t{});
    case DType::kInt32: return load(int32_t{});
    case DType::kUInt32: return load(uint32_t{});
    case DType::kInt64: return load(int64_t{});
    case DType::kUInt64: return load(uint64_t{});
    default: return R{};
  }
}
inline double load_real(const void* p, DType t, int64_t k) { return load_element<double>(p, t, k); }
inline int64_t load_integer(const void* p, DType t, int64_t k) { return load_element<int64_t>(p, t, k); }

// Stores element k of type `t` at `p` (packed little-endian): a double for floating types, an int64
// for integers and bool (truncated to the type's width, as a C cast does).
inline void store_real(void* p, DType t, int64_t k, double v) {
  auto* b = static_cast<unsigned char*>(p) + k * (dtype_bits(t) / 8);
  const auto put = [b](auto x) { std::memcpy(b, &x, sizeof(x)); };
  switch (t) {
    case DType::kFloat32: put(static_cast<float>(v)); break;
    case DType::kFloat64: put(v); break;
    case DType::kFloat16: put(float_to_half(static_cast<float>(v))); break;
    case DType::kBFloat16: put(float_to_bf16(static_cast<float>(v))); break;
    default: break;
  }
}
inline void store_integer(void* p, DType t, int64_t k, int64_t v) {
  auto* b = static_cast<unsigned char*>(p) + k * (dtype_bits(t) / 8);
  const auto put = [b](auto x) { std::memcpy(b, &x, sizeof(x)); };
  switch (t) {
    case DType::kInt8: put(static_cast<int8_t>(v)); break;
    case DType::kUInt8: case DType::kBool: put(static_cast<uint8_t>(v)); break;
    case DType::kInt16: put(static_cast<int16_t>(v)); break;
    case DType::kUInt16: put(static_cast<uint16_t>(v)); break;
    case DType::kInt32: put(static_cast<int32_t>(v)); break;
    case DType::kUInt32: put(static_cast<uint32_t>(v)); break;
    case DType::kInt64: put(v); break;
    case DType::kUInt64: put(static_cast<uint64_t>(v)); break;
    default: store_real(p, t, k, static_cast<double>(v)); break;
  }
}

// `n` packed elements of type `from` at `src` as elements of type `to` at `dst`: copied as they
// are when the types match, else each converted (floats through double, integers through int64).
inline void convert_packed(const void* src, DType from, void* dst, DType to, int64_t n) {
  if (from == to) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n * (dtype_bits(to) / 8)));
    return;
  }
  for (int64_t k = 0; k < n; ++k) {
    if (dtype_is_float(to)) {
      store_real(dst, to, k, load_real(src, from, k));
    } else {
      store_integer(dst, to, k, load_integer(src, from, k));
    }
  }
}

// Appends the `n` elements of `raw` (type `t`, little-endian) to `reals` (floating types) or
// `ints` (integers, bool). False when the size does not match or the type has no fixed width.
bool decode_raw(const std::string& raw, DType t, int64_t n, std::vector<double>& reals, std::vector<int64_t>& ints);
bool decode_raw(const void* data, size_t size, DType t, int64_t n, std::vector<double>& reals, std::vector<int64_t>& ints);

}  // namespace gpusim::detail
