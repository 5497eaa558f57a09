#include "tensor_value.h"

#include <cmath>
#include <cstring>

namespace gpusim::detail {
namespace {

double half_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(frac, -24);
  } else if (exp == 31) {
    v = frac ? NAN : INFINITY;
  } else {
    v = std::ldexp(frac + 1024, exp - 25);
  }
  return sign ? -v : v;
}

double bf16_to_double(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element i of raw little-endian data, as int64 (integers, bool) or double (floats).
bool decode_raw(const std::string& raw, DType t, int64_t n, Value& v) {
  const int bytes = dtype_bits(t) / 8;
  if (bytes == 0 || static_cast<int64_t>(raw.size()) != n * bytes) return false;
  for (int64_t i = 0; i < n; ++i) {
    const char* p = raw.data() + i * bytes;
    switch (t) {
      case DType::kFloat32: v.reals.push_back(load<float>(p)); break;
      case DType::kFloat64: v.reals.push_back(load<double>(p)); break;
      case DType::kFloat16: v.reals.push_back(half_to_double(load<uint16_t>(p))); break;
      case DType::kBFloat16: v.reals.push_back(bf16_to_double(load<uint16_t>(p))); break;
      case DType::kInt8: v.ints.push_back(load<int8_t>(p)); break;
      case DType::kUInt8: case DType::kBool: v.ints.push_back(load<uint8_t>(p)); break;
      case DType::kInt16: v.ints.push_back(load<int16_t>(p)); break;
      case DType::kUInt16: v.ints.push_back(load<uint16_t>(p)); break;
      case DType::kInt32: v.ints.push_back(load<int32_t>(p)); break;
      case DType::kUInt32: v.ints.push_back(load<uint32_t>(p)); break;
      case DType::kInt64: v.ints.push_back(load<int64_t>(p)); break;
      case DType::kUInt64: v.ints.push_back(static_cast<int64_t>(load<uint64_t>(p))); break;
      default: return false;
    }
  }
  return true;
}

}  // namespace

std::optional<Value> tensor_value(const onnx::TensorProto& t, DType dtype, const Shape& dims) {
  const auto n = shape_elements(dims);
  if (!n || *n > kMaxConstElements) return std::nullopt;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
  if (dtype == DType::kString || dtype_bits(dtype) < 8 || dtype == DType::kComplex64 || dtype == DType::kComplex128) {
    return std::nullopt;
  }
  Value v;
  v.dtype = dtype;
  v.shape = dims;
  if (t.has_raw_data()) {
    if (!decode_raw(t.raw_data(), dtype, *n, v)) return std::nullopt;
    return v;
  }
  switch (dtype) {
    case DType::kFloat32:
      if (t.float_data_size() != *n) return std::nullopt;
      v.reals.assign(t.float_data().begin(), t.float_data().end());
      break;
    case DType::kFloat64:
      if (t.double_data_size() != *n) return std::nullopt;
      v.reals.assign(t.double_data().begin(), t.double_data().end());
      break;
    case DType::kInt64:
      if (t.int64_data_size() != *n) return std::nullopt;
      v.ints.assign(t.int64_data().begin(), t.int64_data().end());
      break;
    case DType::kUInt32: case DType::kUInt64:
      if (t.uint64_data_size() != *n) return std::nullopt;
      for (uint64_t x : t.uint64_data()) v.ints.push_back(static_cast<int64_t>(x));
      break;
    case DType::kFloat16: case DType::kBFloat16:
      if (t.int32_data_size() != *n) return std::nullopt;
      for (int32_t x : t.int32_data()) {
        const auto bits = static_cast<uint16_t>(x);
        v.reals.push_back(dtype == DType::kFloat16 ? half_to_double(bits) : bf16_to_double(bits));
      }
      break;
    default:  // int32 and narrower integers, bool: int32_data
      if (t.int32_data_size() != *n) return std::nullopt;
      v.ints.assign(t.int32_data().begin(), t.int32_data().end());
      break;
  }
  return v;
}

}  // namespace gpusim::detail
