#include "gpusim/dtype.h"

namespace gpusim {

int dtype_bits(DType t) {
  switch (t) {
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: case DType::kComplex64: return 64;
    case DType::kComplex128: return 128;
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 32;
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUInt16: return 16;
    case DType::kInt8: case DType::kUInt8: case DType::kBool: return 8;
    case DType::kFloat8E4M3FN: case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ: return 8;
    case DType::kInt4: case DType::kUInt4: return 4;
    case DType::kString: return 64;  // one handle per element; see dtype.h
    case DType::kUndefined: return 0;
  }
  return 0;
}

std::optional<DType> float_dtype_from_name(std::string_view name) {
  if (name == "fp32") return DType::kFloat32;
  if (name == "fp16") return DType::kFloat16;
  if (name == "bf16") return DType::kBFloat16;
  return std::nullopt;
}

std::optional<DType> retype_dtype_from_name(std::string_view name) {
  if (auto d = float_dtype_from_name(name)) return d;
  if (name == "int8") return DType::kInt8;
  if (name == "fp8") return DType::kFloat8E4M3FN;
  return std::nullopt;
}

std::string_view retype_dtype_name(DType t) { return t == DType::kFloat8E4M3FN ? "fp8" : dtype_name(t); }

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kUndefined: return "undefined";
    case DType::kFloat32: return "fp32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "fp16";
    case DType::kFloat64: return "fp64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat8E4M3FN: return "fp8e4m3fn";
    case DType::kFloat8E4M3FNUZ: return "fp8e4m3fnuz";
    case DType::kFloat8E5M2: return "fp8e5m2";
    case DType::kFloat8E5M2FNUZ: return "fp8e5m2fnuz";
    case DType::kUInt4: return "uint4";
    case DType::kInt4: return "int4";
  }
  return "undefined";
}

std::optional<DType> dtype_from_onnx(int onnx_type) {
  if (onnx_type < 1 || onnx_type > 22) return std::nullopt;
  return static_cast<DType>(onnx_type);
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kFloat16: case DType::kFloat64: case DType::kBFloat16:
    case DType::kFloat8E4M3FN: case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ: case DType::kComplex64: case DType::kComplex128:
      return true;
    default:
      return false;
  }
}

bool dtype_is_integer(DType t) {
  switch (t) {
    case DType::kUInt8: case DType::kInt8: case DType::kUInt16: case DType::kInt16: case DType::kInt32:
    case DType::kInt64: case DType::kUInt32: case DType::kUInt64: case DType::kUInt4: case DType::kInt4:
      return true;
    default:
      return false;
  }
}

}  // namespace gpusim
