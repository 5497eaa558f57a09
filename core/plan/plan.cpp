#include "gpusim/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "gpusim/kernel_work.h"
#include "gpusim/op_catalog.h"
#include "gpusim/patterns.h"

namespace gpusim {

bool runs_on_device(const Graph& g, const Node& n) { return node_work(g, n).has_value(); }

bool is_view(const Graph& g, const Node& n) { return !n.folded && !runs_on_device(g, n); }

std::vector<TensorId> view_roots(const Graph& g, std::vector<bool>* views, std::vector<NodeKind>* kinds) {
  std::vector<TensorId> root(g.tensors.size());
  std::iota(root.begin(), root.end(), 0);
  if (views) views->assign(g.nodes.size(), false);
  if (kinds) kinds->assign(g.nodes.size(), NodeKind::kNone);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    // is_view, with the node's work priced once for its kind as well.
    const std::optional<KernelWork> work = node_work(g, n);
    if (kinds) (*kinds)[i] = node_kind(n, work);
    const bool view = !n.folded && !work;
    if (views) (*views)[i] = view;
    if (!view || n.inputs.empty() || n.inputs[0] == kNoTensor) continue;
    for (TensorId o : n.outputs) {
      if (o != kNoTensor) root[static_cast<size_t>(o)] = root[static_cast<size_t>(n.inputs[0])];
    }
  }
  return root;
}

std::string_view kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::kPointwise: return "pointwise";
    case KernelKind::kMainLoop: return "main-loop";
    case KernelKind::kRow: return "row";
    case KernelKind::kAttention: return "attention";
    case KernelKind::kCopy: return "copy";
  }
  return "pointwise";
}

std::optional<KernelKind> kernel_kind_from_name(std::string_view s) {
  for (KernelKind k : {KernelKind::kPointwise, KernelKind::kMainLoop, KernelKind::kRow, KernelKind::kAttention,
                       KernelKind::kCopy}) {
    if (kernel_kind_name(k) == s) return k;
  }
  return std::nullopt;
}

std::string_view operand_role_name(OperandRole r) {
  switch (r) {
    case OperandRole::kInput: return "input";
    case OperandRole::kA: return "a";
    case OperandRole::kB: return "b";
    case OperandRole::kQuery: return "query";
    case OperandRole::kKey: return "key";
    case OperandRole::kValue: return "value";
    case OperandRole::kEpilogue: return "epilogue";
    case OperandRole::kOutput: return "output";
  }
  return "input";
}

namespace {
constexpr SchedulerKind kSchedulers[] = {SchedulerKind::kEager, SchedulerKind::kGreedy, SchedulerKind::kBeam,
                                         SchedulerKind::kRandom, SchedulerKind::kSplit, SchedulerKind::kLowering};
constexpr Objective kObjectives[] = {Objective::kLatency, Objective::kThroughput, Objective::kEnergy, Objective::kMemory};
}  // namespace

std::string_view scheduler_name(SchedulerKind s) {
  switch (s) {
    case SchedulerKind::kEager: return "eager";
    case SchedulerKind::kGreedy: return "greedy";
    case SchedulerKind::kBeam: return "beam";
    case SchedulerKind::kRandom: return "random";
    case SchedulerKind::kSplit: return "split";
    case SchedulerKind::kLowering: return "lowering";
  }
  return "eager";
}

std::optional<SchedulerKind> scheduler_from_name(std::string_view s) {
  for (SchedulerKind k : kSchedulers) {
    if (scheduler_name(k) == s) return k;
  }
  return std::nullopt;
}

std::optional<Objective> objective_from_name(std::string_view s) {
  for (Objective o : kObjectives) {
    if (objective_name(o) == s) return o;
  }
  return std::nullopt;
}

std::string_view objective_name(Objective o) {
  switch (o) {
    case Objective::kLatency: return "latency";
    case Objective::kThroughput: return "throughput";
    case Objective::kEnergy: return "energy";
    case Objective::kMemory: return "memory";
  }
  return "latency";
}

std::string objective_names() {
  std::vector<std::string_view> names;
  for (Objective o : kObjectives) names.push_back(objective_name(o));
  return fmt::format("{}", fmt::join(names, ", "));
}

namespace {

// `anchor_kind` gives the anchor's NodeKind (asked only when the class does not decide).
template <class AnchorKind>
KernelKind kernel_kind_with(const Graph& g, const std::vector<int>& nodes, int anchor, bool attention,
                            const AnchorKind& anchor_kind) {
  if (attention) return KernelKind::kAttention;
  if (nodes.empty() || anchor < 0 || anchor >= static_cast<int>(nodes.size())) return KernelKind::kPointwise;
  const int ai = nodes[static_cast<size_t>(anchor)];
  const Node& a = g.nodes[static_cast<size_t>(ai)];
  const auto cls = op_class(a.domain, a.op_type);
  if (cls == OpClass::kAttention) return KernelKind::kAttention;
  switch (anchor_kind(ai)) {
    case NodeKind::kMainLoop: return KernelKind::kMainLoop;
    case NodeKind::kRowwise: return KernelKind::kRow;
    default: break;
  }
  // Data movement runs as a copy kernel unless it folded into an element-wise reader's loads.
  return cls == OpClass::kDataMovement && nodes.size() == 1 ? KernelKind::kCopy : KernelKind::kPointwise;
}

}  // namespace

KernelKind kernel_kind(const Graph& g, const std::vector<int>& nodes, int anchor, bool attention) {
  return kernel_kind_with(g, nodes, anchor, attention,
                          [&](int ni) { return node_kind(g, g.nodes[static_cast<size_t>(ni)]); });
}

KernelKind kernel_kind(const Graph& g, const GraphIndex& idx, const std::vector<int>& nodes, int anchor,
                       bool attention) {
  return kernel_kind_with(g, nodes, anchor, attention, [&](int ni) { return idx.kind[static_cast<size_t>(ni)]; });
}

void classify_kernel(const Graph& g, const GraphIndex& idx, PlanKernel& k) {
  const bool attention = std::find(k.fusions.begin(), k.fusions.end(), "attention") != k.fusions.end();
  k.kind = kernel_kind(g, idx, k.nodes, k.anchor, attention);
  k.operands.clear();
  if (k.nodes.empty() || k.anchor < 0 || k.anchor >= static_cast<int>(k.nodes.size())) return;
  auto root = [&](TensorId t) { return idx.root[static_cast<size_t>(t)]; };
  auto node = [&](int ni) -> const Node& { return g.nodes[static_cast<size_t>(ni)]; };
  // Scratch reused across calls (every eager kernel of a million-node graph is classified): the
  // roots written inside the kernel (kernels are small: a list, not a map) and the operands, which
  // the kernel then keeps in one exact allocation.
  thread_local std::vector<TensorId> written;
  thread_local std::vector<KernelOperand> ops;
  written.clear();
  ops.clear();
  for (int ni : k.nodes) {
    for (TensorId t : node(ni).outputs) {
      if (t != kNoTensor) written.push_back(root(t));
    }
  }
  auto has = [](const std::vector<TensorId>& v, TensorId t) { return std::find(v.begin(), v.end(), t) != v.end(); };
  // The main loops that frame the kernel: its anchor, or attention's first and last MatMul.
  const Node& anchor = node(k.nodes[static_cast<size_t>(k.anchor)]);
  const Node* qk = nullptr;
  const Node* pv = nullptr;
  if (k.kind == KernelKind::kAttention && k.nodes.size() > 1) {
    for (int ni : k.nodes) {
      if (node(ni).op_type == "MatMul") (qk ? pv : qk) = &node(ni);
    }
  }
  // Attention's query, key and value: the tensors QK^T and PV read, traced back through the data
  // movement inside the kernel (a K^T transposed, heads split by a Reshape) to what is read from
  // outside. V is the PV operand that traces outside (P x V, or V x P^T).
  std::vector<std::pair<TensorId, OperandRole>> traced;
  if (qk && pv) {
    auto in_kernel = [&](int ni) { return std::find(k.nodes.begin(), k.nodes.end(), ni) != k.nodes.end(); };
    auto trace = [&](TensorId t) {
      for (int step = 0; step < 16 && t != kNoTensor; ++step) {
        const TensorId r = root(t);
        const int p = idx.producer[static_cast<size_t>(r)];
        if (p < 0 || !in_kernel(p)) return r;
        const Node& m = node(p);
        if (op_class(m.domain, m.op_type) != OpClass::kDataMovement || m.inputs.empty()) return kNoTensor;
        t = m.inputs[0];
      }
      return kNoTensor;
    };
    auto add = [&](TensorId t, OperandRole r) {
      if (t != kNoTensor && !has(written, t)) traced.emplace_back(t, r);
    };
    if (qk->inputs.size() >= 2) {
      add(trace(qk->inputs[0]), OperandRole::kQuery);
      add(trace(qk->inputs[1]), OperandRole::kKey);
    }
    for (size_t i = 0; i < pv->inputs.size() && i < 2; ++i) add(trace(pv->inputs[i]), OperandRole::kValue);
  }
  auto role_of = [&](const Node& n, size_t i) {
    if (qk && pv) {
      const TensorId r = root(n.inputs[i]);
      for (const auto& [t, role] : traced) {
        if (t == r) return role;
      }
      return OperandRole::kEpilogue;
    }
    if (k.kind == KernelKind::kMainLoop || k.kind == KernelKind::kAttention) {
      if (&n == &anchor && i < 2) return i == 0 ? OperandRole::kA : OperandRole::kB;
      return OperandRole::kEpilogue;
    }
    return OperandRole::kInput;
  };
  auto listed = [&](TensorId r) {
    return std::any_of(ops.begin(), ops.end(), [&](const KernelOperand& o) { return o.tensor == r; });
  };
  for (int ni : k.nodes) {
    const Node& n = node(ni);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] == kNoTensor) continue;
      const TensorId r = root(n.inputs[i]);
      if (!has(written, r) && !listed(r)) ops.push_back({r, role_of(n, i)});
    }
  }
  // Outputs: what a reader outside the kernel, or the graph's caller, needs (a recomputed node's
  // result is never stored).
  for (int ni : k.nodes) {
    if (std::find(k.recomputed.begin(), k.recomputed.end(), ni) != k.recomputed.end()) continue;
    for (TensorId t : node(ni).outputs) {
      if (t == kNoTensor) continue;
      const TensorId r = root(t);
      int inside = 0;
      for (int nj : k.nodes) {
        for (TensorId u : node(nj).inputs) inside += static_cast<int>(u != kNoTensor && root(u) == r);
      }
      const bool needed = idx.graph_output[static_cast<size_t>(r)] || idx.readers[static_cast<size_t>(r)] > inside;
      if (needed && !listed(r)) ops.push_back({r, OperandRole::kOutput});
    }
  }
  k.operands.assign(ops.begin(), ops.end());
}

void classify_kernels(const Graph& g, Plan& p) {
  const GraphIndex idx = index_graph(g);
  for (PlanKernel& k : p.kernels) classify_kernel(g, idx, k);
}

}  // namespace gpusim
