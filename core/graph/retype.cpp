// Re-typing a graph's floating-point tensors (gpusim predict --dtype).
#include "gpusim/graph.h"

namespace gpusim {

// t may be int8 or an fp8 type too: every float tensor then holds 8 bits, as a fully quantized
// (W8A8) engine runs the graph; the cost model prices each kernel at its tensors' type.
Graph retype(const Graph& g, DType t) {
  Graph r = g;
  auto is_real = [](DType d) {
    return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat64;
  };
  for (Tensor& x : r.tensors) {
    if (is_real(x.dtype)) {
      x.dtype = t;
      if (x.value) x.value->dtype = t;
    }
  }
  for (Node& n : r.nodes) {  // Cast to a float type now casts to `t`
    if (n.op_type != "Cast") continue;
    auto it = n.attributes.find("to");
    if (it != n.attributes.end() && dtype_from_onnx(static_cast<int>(it->second.i)) &&
        is_real(static_cast<DType>(it->second.i))) {
      it->second.i = static_cast<int64_t>(t);
    }
  }
  return r;
}

}  // namespace gpusim
