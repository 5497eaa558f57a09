#include "gpusim/graph_summary.h"

#include <algorithm>

namespace gpusim {
namespace {

TensorInfo info(const Tensor& t) { return {t.name, t.dtype, t.shape, t.role, t.bytes()}; }

}  // namespace

GraphSummary summarize(const Graph& g, size_t largest_count) {
  GraphSummary s;
  s.source_path = g.source_path;
  s.opset = g.opset;
  s.notes = g.notes;
  for (const Node& n : g.nodes) {
    ++s.nodes;
    if (n.folded) {
      ++s.folded_nodes;
      continue;
    }
    ++s.op_types[n.domain.empty() ? n.op_type : n.domain + ":" + n.op_type];
    const OpCost c = op_cost(g, n);
    ClassTotals& t = s.by_class[static_cast<size_t>(c.cls)];
    ++t.ops;
    t.macs += c.macs;
    t.flops += c.flops;
    t.bytes_read += c.bytes_read;
    t.bytes_written += c.bytes_written;
    s.macs += c.macs;
    s.flops += c.flops;
    s.bytes_read += c.bytes_read;
    s.bytes_written += c.bytes_written;
  }
  // Load-time constants in a weight slot (any input after the first) of a conv, gemm or normalization.
  std::vector<bool> weight_slot(g.tensors.size(), false);
  for (const Node& n : g.nodes) {
    if (n.folded) continue;
    const auto cls = op_class(n.domain, n.op_type);
    if (cls != OpClass::kConv && cls != OpClass::kGemm && cls != OpClass::kNormalization) continue;
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i] != kNoTensor) weight_slot[static_cast<size_t>(n.inputs[i])] = true;
    }
  }
  std::vector<const Tensor*> all;
  for (size_t id = 0; id < g.tensors.size(); ++id) {
    const Tensor& t = g.tensors[id];
    const bool big_const = t.role == TensorRole::kConstant && dtype_is_float(t.dtype) && !t.value;
    if (t.role == TensorRole::kWeight || (big_const && weight_slot[id])) {
      s.params += t.elements();
      s.param_bytes += t.bytes();
    } else if (big_const) {
      ++s.constants;
      s.constant_bytes += t.bytes();
    }
    if (t.role == TensorRole::kActivation || t.role == TensorRole::kOutput) {
      ++s.activations;
      s.activation_bytes += t.bytes();
    }
    all.push_back(&t);
  }
  for (TensorId id : g.inputs) s.inputs.push_back(info(g.tensor(id)));
  for (TensorId id : g.outputs) s.outputs.push_back(info(g.tensor(id)));
  const size_t k = std::min(largest_count, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<long>(k), all.end(),
                    [](const Tensor* a, const Tensor* b) { return a->bytes() > b->bytes(); });
  for (size_t i = 0; i < k; ++i) s.largest.push_back(info(*all[i]));
  return s;
}

}  // namespace gpusim
