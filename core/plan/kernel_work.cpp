// What a kernel computes: one node's work (GEMM view for matmuls and convolutions, rows for
// reductions and normalizations, runs for transposes), and a fused group's.
#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "gpusim/kernel_work.h"
#include "gpusim/plan.h"
#include "gpusim/op_catalog.h"

namespace gpusim {
namespace {

int64_t prod(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  const size_t end = std::min(to, s.size());
  if (from >= end) return 1;
  return std::accumulate(s.begin() + static_cast<long>(from), s.begin() + static_cast<long>(end), int64_t{1},
                         std::multiplies<>());
}

int64_t norm_axis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

// Rows x row_elements for a reduction over the trailing dims from `axis`.
void rows_from(KernelWork& w, const Shape& s, int64_t axis) {
  const auto ax = static_cast<size_t>(std::clamp<int64_t>(axis, 0, static_cast<int64_t>(s.size())));
  w.row_elements = std::max<int64_t>(1, prod(s, ax));
  w.rows = std::max<int64_t>(1, prod(s, 0, ax));
}

int64_t attr(const Node& n, const char* key, int64_t def) { return n.attr_int(key, def); }

}  // namespace

std::optional<KernelWork> node_work(const Graph& g, const Node& n) {
  if (n.folded) return std::nullopt;
  const OpCost c = op_cost(g, n);
  if (c.bytes_read == 0 && c.bytes_written == 0 && c.flops.total() == 0 && c.macs == 0) return std::nullopt;
  KernelWork w;
  w.cls = c.cls;
  w.macs = c.macs;
  w.flops = c.flops;
  w.bytes_read = c.bytes_read;
  w.bytes_written = c.bytes_written;
  const Tensor& out = g.tensor(n.outputs.front());
  const Tensor* in0 = n.inputs.empty() || n.inputs[0] == kNoTensor ? nullptr : &g.tensor(n.inputs[0]);
  w.dtype = in0 && dtype_is_float(in0->dtype) ? in0->dtype : out.dtype;
  // Integer products (MatMulInteger, ConvInteger, the QLinear ops) multiply 8-bit operands: the int8
  // rate, whatever type they write.
  if ((c.cls == OpClass::kGemm || c.cls == OpClass::kConv) && in0 && dtype_is_integer(in0->dtype) && dtype_bits(in0->dtype) == 8) {
    w.dtype = in0->dtype;
  }
  w.elements = out.elements();
  const std::string& op = n.op_type;

  if (c.cls == OpClass::kGemm) {
    const Shape& os = out.shape;
    if ((op == "MatMul" || op == "MatMulInteger" || op == "QLinearMatMul") && in0) {
      const Shape& a = in0->shape;
      const Shape& b = g.tensor(n.inputs[op == "QLinearMatMul" ? 3 : 1]).shape;
      w.k = a.back();
      w.m = a.size() >= 2 ? a[a.size() - 2] : 1;
      w.n = b.size() >= 2 ? b.back() : 1;
      w.batch = std::max<int64_t>(1, out.elements() / std::max<int64_t>(1, w.m * w.n));
      w.b_shared = b.size() <= 2;
      // A batched A times one matrix B (activations times a weight) is one GEMM over every row
      // of A, as BLAS libraries run it: [197, 1, 768] x [768, 2304] is 197 x 768 x 2304, not 197
      // GEMMs of one row each.
      if (w.b_shared && w.batch > 1) {
        w.m *= w.batch;
        w.batch = 1;
      }
    } else {
      w.n = os.empty() ? 1 : os.back();
      w.m = std::max<int64_t>(1, out.elements() / std::max<int64_t>(1, w.n));
      w.k = std::max<int64_t>(1, c.macs / std::max<int64_t>(1, out.elements()));
      w.b_shared = true;
      if (op == "MatMulNBits") {
        // A block-quantized weight: `bits` a weight plus a scale (the scales' type) and, where given,
        // a zero point of `bits` a block; unpacking is a shift, a mask and the offset (2), or a
        // convert for 8 bits (1).
        const int64_t bits = attr(n, "bits", 4), block = std::max<int64_t>(1, attr(n, "block_size", 32));
        const double scale_bits = n.inputs.size() > 2 && n.inputs[2] != kNoTensor ? dtype_bits(g.tensor(n.inputs[2]).dtype) : 16;
        const double zp_bits = n.inputs.size() > 3 && n.inputs[3] != kNoTensor ? static_cast<double>(bits) : 0.0;
        w.b_bits = static_cast<double>(bits) + (scale_bits + zp_bits) / static_cast<double>(block);
        w.dequant_ops = bits >= 8 ? 1.0 : 2.0;
      }
    }
  } else if (c.cls == OpClass::kConv && in0) {
    const size_t wi = op == "QLinearConv" ? 3 : 1;  // QLinearConv: x, x_scale, x_zero_point, w, ...
    const Shape& wt = g.tensor(n.inputs[wi]).shape;
    const int64_t groups = attr(n, "group", 1);
    if (op == "ConvTranspose") {  // GEMM over input pixels, then col2im
      w.m = in0->shape[0] * prod(in0->shape, 2);
      w.n = wt[1] * prod(wt, 2);
      w.k = wt[0] / groups;
    } else {
      w.m = out.shape[0] * prod(out.shape, 2);
      w.n = wt[0] / groups;
      w.k = prod(wt, 1);
    }
    w.batch = groups;
    w.window = prod(wt, 2);
    w.b_shared = true;
    w.a_bytes = c.bytes_read - g.tensor(n.inputs[wi]).bytes();  // input and bias, read at least once
    if (w.n < 16 || w.k < 16) {  // depthwise and tiny convolutions run as direct (streaming) kernels
      w.m = w.n = w.k = 0;
    }
  } else if (c.cls == OpClass::kAttention && in0) {
    const Shape& q = in0->shape;
    const Shape& k = g.tensor(n.inputs.size() > 1 && n.inputs[1] != kNoTensor ? n.inputs[1] : n.inputs[0]).shape;
    if (q.size() == 4) {
      w.batch = q[0] * q[1];
      w.m = q[2];
      w.kv_seq = k[2];
      w.head_dim = q[3];
      w.v_head_dim = out.shape.back();
    } else {
      const int64_t heads = std::max<int64_t>(1, attr(n, n.domain.empty() ? "q_num_heads" : "num_heads", 1));
      w.batch = q[0] * heads;
      w.m = q[1];
      w.kv_seq = k.size() == 3 && n.inputs.size() > 1 && n.inputs[1] != kNoTensor ? k[1] : q[1];
      w.head_dim = q.back() / heads;
      w.v_head_dim = out.shape.back() / heads;
    }
  } else if (c.cls == OpClass::kNormalization && in0) {
    const Shape& s = in0->shape;
    if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
      const int64_t axis = norm_axis(attr(n, "axis", g.opset >= 13 ? -1 : 1), s.size());
      if (g.opset >= 13) {
        w.row_elements = s.empty() ? 1 : s[static_cast<size_t>(axis)];
        w.rows = std::max<int64_t>(1, in0->elements() / std::max<int64_t>(1, w.row_elements));
      } else {
        rows_from(w, s, axis);
      }
      w.passes = 2;
    } else if (op == "LayerNormalization") {
      rows_from(w, s, norm_axis(attr(n, "axis", -1), s.size()));
      w.passes = 2;
    } else if (op == "GroupNormalization" || op == "InstanceNormalization") {
      const int64_t groups = op == "GroupNormalization" ? attr(n, "num_groups", 1) : s[1];
      w.rows = s[0] * groups;
      w.row_elements = std::max<int64_t>(1, in0->elements() / w.rows);
      w.passes = 2;
    }  // BatchNormalization, LRN, LpNormalization, MVN: per-element kernels
  } else if (c.cls == OpClass::kReduction && in0) {
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool") {
      w.rows = in0->shape[0] * in0->shape[1];
      w.row_elements = prod(in0->shape, 2);
    } else if (op.rfind("Reduce", 0) == 0 || op == "ArgMax" || op == "ArgMin") {
      w.rows = std::max<int64_t>(1, out.elements());
      w.row_elements = std::max<int64_t>(1, in0->elements() / w.rows);
    } else if (op == "TopK" || op == "CumSum") {
      const int64_t axis = norm_axis(attr(n, "axis", op == "TopK" ? -1 : 0), in0->shape.size());
      w.row_elements = in0->shape.empty() ? 1 : in0->shape[static_cast<size_t>(axis)];
      w.rows = std::max<int64_t>(1, in0->elements() / w.row_elements);
    }  // windowed pools: per-output kernels
  } else if (op == "Transpose" && in0) {
    const Attribute* perm = n.attr("perm");
    const size_t r = in0->shape.size();
    const bool inner_stays = r == 0 || (perm ? perm->ints.back() == static_cast<int64_t>(r) - 1 : r <= 1);
    if (!inner_stays) {
      w.contiguous_run = std::min<int64_t>({32, in0->shape.back(), out.shape.back()});
    }
  }
  return w;
}

}  // namespace gpusim

namespace gpusim {

GraphIndex index_graph(const Graph& g) {
  GraphIndex idx;
  idx.producer.assign(g.tensors.size(), -1);
  std::vector<bool> views;
  idx.root = view_roots(g, &views, &idx.kind);
  idx.readers.assign(g.tensors.size(), 0);
  idx.graph_output.assign(g.tensors.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.folded) continue;
    for (TensorId t : n.outputs) {
      if (t != kNoTensor) idx.producer[static_cast<size_t>(t)] = static_cast<int>(i);
    }
    if (views[i]) continue;
    for (TensorId t : n.inputs) {
      if (t != kNoTensor) ++idx.readers[static_cast<size_t>(idx.root[static_cast<size_t>(t)])];
    }
  }
  for (TensorId t : g.outputs) idx.graph_output[static_cast<size_t>(idx.root[static_cast<size_t>(t)])] = true;
  return idx;
}

KernelWork plan_kernel_work(const Graph& g, const GraphIndex& idx, const PlanKernel& k) {
  return group_work(g, idx, k.nodes, k.anchor, k.kind == KernelKind::kAttention, k.recomputed);
}

KernelWork group_work(const Graph& g, const GraphIndex& idx, const std::vector<int>& nodes, int anchor,
                      bool attention, const std::vector<int>& recomputed) {
  const Node& a = g.nodes[static_cast<size_t>(nodes[static_cast<size_t>(anchor)])];
  if (nodes.size() == 1) return node_work(g, a).value_or(KernelWork{});
  KernelWork w = node_work(g, a).value_or(KernelWork{});
  // Boundary, through views: tensors read from outside the group, and produced tensors that some
  // reader outside the group (or the graph's output) needs.
  auto root = [&](TensorId t) { return static_cast<size_t>(idx.root[static_cast<size_t>(t)]); };
  // Per root tensor the group touches (a map the group's size, not the graph's: a plan search
  // costs one group per candidate, and a vector per tensor each time was quadratic in the graph).
  struct Touched {
    int inside = 0;         // readers within the group
    bool produced = false;  // written by a node of the group
    bool counted = false;   // already counted as read
  };
  std::unordered_map<size_t, Touched> touched;
  touched.reserve(nodes.size() * 4);
  for (int ni : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(ni)];
    for (TensorId t : n.outputs) {
      if (t != kNoTensor) touched[root(t)].produced = true;
    }
    for (TensorId t : n.inputs) {
      if (t != kNoTensor) ++touched[root(t)].inside;
    }
  }
  int64_t read = 0, written = 0, anchor_inputs = 0;
  for (int ni : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(ni)];
    // A Slice or Split folded into the kernel reads only the pieces the kernel uses.
    const bool slicing = (n.op_type == "Slice" || n.op_type == "Split") && !n.inputs.empty();
    for (TensorId t : n.inputs) {
      if (t == kNoTensor) continue;
      Touched& tt = touched[root(t)];
      if (tt.produced || tt.counted) continue;
      tt.counted = true;
      int64_t bytes = g.tensor(t).bytes();
      if (slicing && t == n.inputs[0]) {
        int64_t used = 0;
        for (TensorId o : n.outputs) {
          if (o != kNoTensor && touched[root(o)].inside > 0) used += g.tensor(o).bytes();
        }
        bytes = std::min(bytes, used);
      }
      read += bytes;
      if (&n == &a) anchor_inputs += bytes;
    }
    const bool copy = std::find(recomputed.begin(), recomputed.end(), ni) != recomputed.end();
    for (TensorId t : n.outputs) {
      if (t == kNoTensor || copy) continue;  // a recomputed node's result is never stored
      const size_t r = root(t);
      if (idx.graph_output[r] || idx.readers[r] > touched[r].inside) written += g.tensor(t).bytes();
    }
  }
  // dequantize-into-gemm: a DequantizeLinear of the group producing the GEMM's A or B is read as
  // its 8-bit input (the GEMM's own operand bytes; B at 8 bits an element, unpacked and scaled
  // each time a block loads it), and its arithmetic is the GEMM's, not the epilogue's.
  std::vector<const Node*> dequantized;
  if ((a.op_type == "MatMul" || a.op_type == "Gemm") && a.inputs.size() >= 2) {
    for (size_t k = 0; k < 2; ++k) {
      const int p = a.inputs[k] == kNoTensor ? -1 : idx.producer[root(a.inputs[k])];
      if (p < 0 || std::find(nodes.begin(), nodes.end(), p) == nodes.end()) continue;
      const Node& dq = g.nodes[static_cast<size_t>(p)];
      if (dq.op_type != "DequantizeLinear" || dq.inputs.empty()) continue;
      const DType qt = g.tensor(dq.inputs[0]).dtype;
      if (qt != DType::kInt8 && qt != DType::kUInt8) continue;
      dequantized.push_back(&dq);
      for (TensorId t : dq.inputs) {
        if (t != kNoTensor) anchor_inputs += g.tensor(t).bytes();
      }
      if (k == 0) {
        w.a_bytes = g.tensor(dq.inputs[0]).bytes();
      } else {
        w.b_bits = 8;
        w.dequant_ops = 2;  // a conversion and a multiply-add (q - zero point) x scale
      }
    }
  }
  FlopCounts flops, anchor_flops;
  int64_t macs = 0, elements = 0;
  for (int ni : nodes) {
    const Node& n = g.nodes[static_cast<size_t>(ni)];
    const OpCost c = op_cost(g, n);
    flops += c.flops;
    macs += c.macs;
    if (&n == &a || std::find(dequantized.begin(), dequantized.end(), &n) != dequantized.end()) anchor_flops += c.flops;
    for (TensorId t : n.outputs) {
      if (t != kNoTensor) elements = std::max(elements, g.tensor(t).elements());
    }
  }
  if (attention) {
    // nodes: MatMul(Q, K^T) ... Softmax ... MatMul(P, V); the first and last MatMuls frame it.
    const Node* qk = nullptr;
    const Node* pv = nullptr;
    for (int ni : nodes) {
      const Node& n = g.nodes[static_cast<size_t>(ni)];
      if (n.op_type != "MatMul") continue;
      (qk ? pv : qk) = &n;
    }
    if (qk && pv) {
      const Shape& q = g.tensor(qk->inputs[0]).shape;
      const Shape& kt = g.tensor(qk->inputs[1]).shape;
      // PV is P x V, or V x P^T for channels-first attention (V [.., d, kv] first): V is the
      // operand the group does not compute.
      const bool v_first = touched[root(pv->inputs[1])].produced && !touched[root(pv->inputs[0])].produced;
      const Shape& v = g.tensor(pv->inputs[v_first ? 0 : 1]).shape;
      w = KernelWork{};
      w.cls = OpClass::kAttention;
      w.dtype = g.tensor(qk->inputs[0]).dtype;
      w.m = q[q.size() - 2];
      w.head_dim = q.back();
      w.kv_seq = kt.back();
      w.v_head_dim = v_first && v.size() >= 2 ? v[v.size() - 2] : v.back();
      w.batch = std::max<int64_t>(1, g.tensor(qk->outputs[0]).elements() / std::max<int64_t>(1, w.m * w.kv_seq));
    }
  }
  w.flops = flops;
  w.macs = macs;
  w.bytes_read = read;
  w.bytes_written = written;
  w.elements = std::max(w.elements, elements);
  if (w.cls == OpClass::kGemm || w.cls == OpClass::kConv) {
    // The GEMM prices its own operands; the epilogue adds its other inputs and its arithmetic.
    w.epilogue_bytes = std::max<int64_t>(0, read - anchor_inputs);
    w.epilogue_flops.fma = flops.fma - anchor_flops.fma;
    w.epilogue_flops.transcendental = flops.transcendental - anchor_flops.transcendental;
    w.epilogue_flops.compare = flops.compare - anchor_flops.compare;
  }
  return w;
}

}  // namespace gpusim
