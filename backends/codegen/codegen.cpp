// Codegen's entry: picks the generator by the class of the kernel's anchor op.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "generators.h"
#include "gpusim/op_catalog.h"

namespace gpusim::codegen {

Result<Kernel> generate(const Graph& g, const GraphIndex& idx, const PlanKernel& k, const Options& opts) {
  if (k.nodes.empty()) return make_error(ErrorCode::kInvalidArgument, "codegen: a plan kernel with no nodes");
  GenContext c{g, idx, k, opts};
  const Node& a = c.anchor();
  for (int ni : k.nodes) {
    const Node& n = g.nodes[static_cast<size_t>(ni)];
    for (TensorId t : n.inputs) {
      if (t != kNoTensor && (g.tensor(t).is_sequence || g.tensor(t).dtype == DType::kString)) {
        return c.unsupported(n, "sequence and string values run on the host");
      }
    }
  }
  const auto cls = op_class(a.domain, a.op_type);
  if (!cls) return c.unsupported(a, "not in the op catalog");
  Result<Kernel> r = make_error(ErrorCode::kUnsupported, "");
  if (k.kind == KernelKind::kAttention) {
    r = gen_attention(c);
  } else {
    switch (*cls) {
      case OpClass::kElementwise: r = gen_elementwise(c); break;
      case OpClass::kGemm: r = gen_gemm(c); break;
      case OpClass::kConv: r = gen_conv(c); break;
      case OpClass::kReduction:
      case OpClass::kNormalization: r = gen_reduction(c); break;
      // Data movement anchors a kernel of several nodes only when all of it folds (a roll: two
      // slices and a concat): the element-wise generator reads it through index math.
      case OpClass::kDataMovement: r = k.nodes.size() > 1 ? gen_elementwise(c) : gen_data_movement(c); break;
      case OpClass::kAttention: r = gen_attention(c); break;
    }
  }
  if (!r) return r;
  // Names unique per kernel text: the generator's prefix and the first node's index.
  for (char& ch : r->name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
  }
  return r;
}

Result<Kernel> generate(const Graph& g, const PlanKernel& k, const Options& opts) {
  const GraphIndex idx = index_graph(g);
  return generate(g, idx, k, opts);
}

int vector_lanes(int vector_width, int64_t elements) { return generated_vector_lanes(vector_width, elements); }


}  // namespace gpusim::codegen
