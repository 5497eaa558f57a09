#include "tensor_value.h"

#include "raw_decode.h"

namespace gpusim::detail {

std::optional<Value> tensor_value(const onnx::TensorProto& t, DType dtype, const Shape& dims, int64_t max_elements) {
  const auto n = shape_elements(dims);
  if (!n || *n > max_elements) return std::nullopt;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
  if (dtype == DType::kString || dtype_bits(dtype) < 8 || dtype == DType::kComplex64 || dtype == DType::kComplex128) {
    return std::nullopt;
  }
  Value v;
  v.dtype = dtype;
  v.shape = dims;
  if (t.has_raw_data()) {
    if (!decode_raw(t.raw_data(), dtype, *n, v.reals, v.ints)) return std::nullopt;
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
