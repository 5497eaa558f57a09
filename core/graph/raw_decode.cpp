#include "raw_decode.h"

namespace gpusim::detail {
namespace {

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

bool decode_raw(const std::string& raw, DType t, int64_t n, std::vector<double>& reals, std::vector<int64_t>& ints) {
  return decode_raw(raw.data(), raw.size(), t, n, reals, ints);
}

bool decode_raw(const void* data, size_t size, DType t, int64_t n, std::vector<double>& reals, std::vector<int64_t>& ints) {
  const int bytes = dtype_bits(t) / 8;
  if (bytes == 0 || dtype_bits(t) % 8 != 0 || static_cast<int64_t>(size) != n * bytes) return false;
  if (dtype_is_float(t)) {
    reals.reserve(reals.size() + static_cast<size_t>(n));
  } else {
    ints.reserve(ints.size() + static_cast<size_t>(n));
  }
  for (int64_t i = 0; i < n; ++i) {
    const char* p = static_cast<const char*>(data) + i * bytes;
    switch (t) {
      case DType::kFloat32: reals.push_back(load<float>(p)); break;
      case DType::kFloat64: reals.push_back(load<double>(p)); break;
      case DType::kFloat16: reals.push_back(half_to_double(load<uint16_t>(p))); break;
      case DType::kBFloat16: reals.push_back(bf16_to_double(load<uint16_t>(p))); break;
      case DType::kInt8: ints.push_back(load<int8_t>(p)); break;
      case DType::kUInt8: case DType::kBool: ints.push_back(load<uint8_t>(p)); break;
      case DType::kInt16: ints.push_back(load<int16_t>(p)); break;
      case DType::kUInt16: ints.push_back(load<uint16_t>(p)); break;
      case DType::kInt32: ints.push_back(load<int32_t>(p)); break;
      case DType::kUInt32: ints.push_back(load<uint32_t>(p)); break;
      case DType::kInt64: ints.push_back(load<int64_t>(p)); break;
      case DType::kUInt64: ints.push_back(static_cast<int64_t>(load<uint64_t>(p))); break;
      default: return false;
    }
  }
  return true;
}

}  // namespace gpusim::detail
