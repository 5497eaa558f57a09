// Internal: decodes the data of a small ONNX TensorProto (at most `max_elements` elements) into
// a Value. Returns nullopt for larger tensors, tensors whose data is external or was skipped, and
// string tensors: their values are never needed for shapes.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>

#include "gpusim/graph.h"

namespace gpusim::detail {

std::optional<Value> tensor_value(const onnx::TensorProto& t, DType dtype, const Shape& dims,
                                  int64_t max_elements = kMaxConstElements);

}  // namespace gpusim::detail
