// Element types, numbered as ONNX's TensorProto.DataType so a value read from a file maps 1:1.
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpusim {

enum class DType : int {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
};

// Bits per element. Strings have no fixed size: they count as one 8-byte handle per element
// (what a runtime stores), which keeps byte totals finite and documented.
GPUSIM_API int dtype_bits(DType t);
GPUSIM_API std::string_view dtype_name(DType t);  // "fp32", "int64", "bf16", ...
GPUSIM_API std::optional<DType> dtype_from_onnx(int onnx_type);  // nullopt for codes gpusim does not know
// "fp32" | "fp16" | "bf16": the float types a graph may be re-typed to (--dtype); nullopt otherwise.
GPUSIM_API std::optional<DType> float_dtype_from_name(std::string_view name);
// What a graph may be re-typed to (`dtype`): the float types above, "int8", and "fp8" (E4M3FN,
// the type inference engines run fp8 GEMMs in).
GPUSIM_API std::optional<DType> retype_dtype_from_name(std::string_view name);
// Its name for a re-typed graph's type, as retype_dtype_from_name reads it back ("fp8" for E4M3FN).
GPUSIM_API std::string_view retype_dtype_name(DType t);
GPUSIM_API bool dtype_is_float(DType t);    // fp64/32/16, bf16, fp8 variants
GPUSIM_API bool dtype_is_integer(DType t);  // signed and unsigned ints, bool excluded

}  // namespace gpusim
