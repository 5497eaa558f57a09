// Tensor data read from files: the initializers and Constant values of an ONNX model (the shape-only
// importer skips them; executors need them) and serialized TensorProto files (.pb), as the ONNX
// test data stores inputs and expected outputs. Decoded to doubles (floating types), int64s
// (integers and bool) or strings.
//
// And the buffers a run carries in their own dtype, packed as the device stores them: the caller's
// views (TensorView, ConstTensorView) and owned bytes (HostBuffer).
//
// Usage:
//   auto w = gpusim::read_model_tensors("model.onnx");   // name -> data, for weights present
//   auto t = gpusim::read_tensor_file("test_data_set_0/input_0.pb");
#pragma once

#include "gpusim/export.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/result.h"

namespace gpusim {

struct GPUSIM_API TensorData {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<double> reals;          // floating types
  std::vector<int64_t> ints;          // integer types and bool
  std::vector<std::string> strings;   // string tensors
};

// A caller's buffer: `data` holds `shape`'s elements of `dtype`, densely packed, row-major.
struct GPUSIM_API TensorView {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  void* data = nullptr;
  size_t size_bytes = 0;
};
struct GPUSIM_API ConstTensorView {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t size_bytes = 0;
};

// A buffer that owns its bytes (a tensor read from a file, an output to keep).
struct GPUSIM_API HostBuffer {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  ConstTensorView view() const { return {dtype, shape, bytes.data(), bytes.size()}; }
};

// Whether a buffer can carry tensors of this type (fixed-width numbers and bool; not strings,
// complex numbers or the 4-bit types).
inline bool buffer_dtype(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kFloat64: case DType::kFloat16: case DType::kBFloat16:
    case DType::kInt8: case DType::kUInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}
// Every initializer and Constant-node tensor whose data is in the file or in an external-data file
// beside it. Tensors whose data is absent (a shape-only model) are simply not in the map.
GPUSIM_API Result<std::map<std::string, TensorData>> read_model_tensors(const std::string& model_path);
// The same from a serialized model in memory (external data is not read: no directory).
GPUSIM_API Result<std::map<std::string, TensorData>> read_model_tensors_bytes(std::string_view bytes, const std::string& name);

// One serialized onnx.TensorProto (.pb).
GPUSIM_API Result<TensorData> read_tensor_file(const std::string& path);

}  // namespace gpusim
