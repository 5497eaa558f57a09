// The pattern matcher (include/gpusim/patterns.h): chains and regions of graph nodes, shared by the
// runtimes' lowerings and the planner's fusion passes.
#include "gpusim/patterns.h"

#include <algorithm>
#include <utility>
#include <set>

#include "gpusim/op_catalog.h"

namespace gpusim {
namespace {

template <typename T>
bool has(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool is_const_like(const Tensor& t) { return t.role == TensorRole::kWeight || t.role == TensorRole::kConstant; }

}  // namespace

std::string_view node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kPointwise: return "pointwise";
    case NodeKind::kMainLoop: return "main-loop";
    case NodeKind::kRowwise: return "rowwise";
    case NodeKind::kNone: return "none";
  }
  return "none";
}

NodeKind node_kind(const Graph& g, const Node& n) { return node_kind(n, node_work(g, n)); }

NodeKind node_kind(const Node& n, const std::optional<KernelWork>& w) {
  if (!w) return NodeKind::kNone;
  const auto c = op_class(n.domain, n.op_type).value_or(OpClass::kElementwise);
  if (c == OpClass::kGemm || c == OpClass::kConv || c == OpClass::kAttention) {
    // Depthwise and tiny convolutions run as streaming kernels.
    return w->m > 0 ? NodeKind::kMainLoop : NodeKind::kPointwise;
  }
  if (c == OpClass::kNormalization || c == OpClass::kReduction) {
    return n.op_type == "BatchNormalization" || n.op_type == "LRN" || n.op_type == "MaxPool" ||
                   n.op_type == "AveragePool"
               ? NodeKind::kPointwise
               : NodeKind::kRowwise;
  }
  return NodeKind::kPointwise;
}

bool kinds_fuse(int main_loops, int row_passes, bool attention) {
  return attention ? (main_loops <= 2 && row_passes <= 1) : (main_loops + row_passes <= 1);
}

Pattern region_pattern(std::string name, std::map<std::string, int> ops) {
  Pattern p;
  p.name = std::move(name);
  p.shape = Pattern::Shape::kRegion;
  p.region_ops = std::move(ops);
  return p;
}

PatternMatcher::PatternMatcher(const Graph& g) : PatternMatcher(g, index_graph(g)) {}

PatternMatcher::PatternMatcher(const Graph& g, GraphIndex idx) : g_(g), idx_(std::move(idx)) {
  const size_t nn = g.nodes.size();
  kind_ = idx_.kind;
  alias_ = idx_.root;
  readers_.resize(g.tensors.size());
  for (size_t i = 0; i < nn; ++i) {
    if (kind_[i] == NodeKind::kNone) continue;
    for (TensorId t : g.nodes[i].inputs) {
      if (t == kNoTensor) continue;
      auto& r = readers_[static_cast<size_t>(alias_[static_cast<size_t>(t)])];
      if (r.empty() || r.back() != static_cast<int>(i)) r.push_back(static_cast<int>(i));
    }
  }
  escapes_.assign(g.tensors.size(), 0);
  for (TensorId t : g.outputs) escapes_[static_cast<size_t>(alias_[static_cast<size_t>(t)])] = 1;
  consumer_.assign(nn, -1);
  for (size_t i = 0; i < nn; ++i) {
    if (kind_[i] == NodeKind::kNone) continue;
    int only = -1;
    bool ok = true;
    for (TensorId t : g.nodes[i].outputs) {
      if (t == kNoTensor) continue;
      const auto r = static_cast<size_t>(alias_[static_cast<size_t>(t)]);
      if (escapes_[r]) ok = false;
      for (int j : readers_[r]) {
        if (only >= 0 && j != only) ok = false;
        only = j;
      }
    }
    consumer_[i] = ok ? only : -1;
  }
}

const std::vector<int>& PatternMatcher::readers(TensorId t) const {
  return readers_[static_cast<size_t>(alias_[static_cast<size_t>(t)])];
}

bool PatternMatcher::selects(const NodeSelector& s, int node, int prev) const {
  const Node& n = g_.nodes[static_cast<size_t>(node)];
  if (!s.ops.empty() || !s.classes.empty()) {
    bool hit = has(s.ops, n.op_type);
    if (!hit && !s.classes.empty()) {
      if (auto c = op_class(n.domain, n.op_type)) hit = has(s.classes, std::string(op_class_name(*c)));
    }
    if (!hit) return false;
  }
  if (!s.kinds.empty() && !has(s.kinds, std::string(node_kind_name(kind(node))))) return false;
  if (s.elements != NodeSelector::Elements::kAny && prev >= 0) {
    const int64_t now = g_.tensor(n.outputs.front()).elements();
    const int64_t before = g_.tensor(g_.nodes[static_cast<size_t>(prev)].outputs.front()).elements();
    if (s.elements == NodeSelector::Elements::kSame ? now != before : now < before) return false;
  }
  if (s.swaps_last_two) {
    if (n.op_type != "Transpose") return false;
    const Attribute* perm = n.attr("perm");
    const size_t r = g_.tensor(n.outputs.front()).shape.size();
    if (!perm || perm->ints.size() != r || r < 2) return false;
    for (size_t i = 0; i + 2 < r; ++i) {
      if (perm->ints[i] != static_cast<int64_t>(i)) return false;
    }
    if (perm->ints[r - 2] != static_cast<int64_t>(r - 1) || perm->ints[r - 1] != static_cast<int64_t>(r - 2)) return false;
  }
  return true;
}

bool PatternMatcher::others_ok(const NodeSelector& s, int node, TensorId chain_in, TensorId region_in) const {
  if (s.others == NodeSelector::Operand::kAny) return true;
  const Node& n = g_.nodes[static_cast<size_t>(node)];
  int others = 0;
  for (TensorId t : n.inputs) {
    if (t == kNoTensor) continue;
    const TensorId r = resolve(t);
    if (chain_in != kNoTensor && r == chain_in) continue;
    if (region_in != kNoTensor && r == region_in) continue;
    ++others;
    const Tensor& x = g_.tensor(r);
    switch (s.others) {
      case NodeSelector::Operand::kNone: return false;
      case NodeSelector::Operand::kConstant:
        if (!is_const_like(x) || x.elements() != 1) return false;
        break;
      case NodeSelector::Operand::kWeight:
        if (!is_const_like(x)) return false;
        break;
      case NodeSelector::Operand::kBias: {
        const Shape& out = g_.tensor(n.outputs.front()).shape;
        if (!is_const_like(x) || out.empty() || x.elements() != out.back()) return false;
        break;
      }
      case NodeSelector::Operand::kAny: break;
    }
  }
  return s.others != NodeSelector::Operand::kBias || others == 1;
}

int PatternMatcher::anchor_of(const Pattern& p, const std::vector<int>& nodes, const std::vector<int>& steps) const {
  if (p.anchor_step >= 0) {
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i] == p.anchor_step) return static_cast<int>(i);
    }
  }
  for (NodeKind want : {NodeKind::kMainLoop, NodeKind::kRowwise}) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (kind(nodes[i]) == want) return static_cast<int>(i);
    }
  }
  return 0;
}

std::optional<PatternMatch> PatternMatcher::match_chain(const Pattern& p, int node,
                                                        const std::vector<uint8_t>* taken) const {
  std::vector<int> nodes, steps;
  int cur = node, prev = -1;
  // The chain enters its first node on that node's first input that is not a weight or constant;
  // `others` tests the rest.
  TensorId chain_in = kNoTensor;
  for (TensorId t : g_.nodes[static_cast<size_t>(node)].inputs) {
    if (t != kNoTensor && !is_const_like(g_.tensor(resolve(t)))) {
      chain_in = resolve(t);
      break;
    }
  }
  auto free = [&](int i) { return i >= 0 && runs(i) && !(taken && (*taken)[static_cast<size_t>(i)]); };
  for (size_t si = 0; si < p.steps.size(); ++si) {
    const NodeSelector& s = p.steps[si];
    int count = 0;
    while (count < s.max && free(cur) && selects(s, cur, prev) && others_ok(s, cur, chain_in, kNoTensor)) {
      nodes.push_back(cur);
      steps.push_back(static_cast<int>(si));
      ++count;
      const int next = sole_consumer(cur);
      chain_in = kNoTensor;
      if (next >= 0) {
        for (TensorId t : g_.nodes[static_cast<size_t>(cur)].outputs) {
          if (t != kNoTensor) {
            chain_in = resolve(t);
            break;
          }
        }
      }
      prev = cur;
      cur = next;
    }
    if (count < s.min) return std::nullopt;
  }
  if (nodes.empty()) return std::nullopt;
  PatternMatch m;
  m.anchor = anchor_of(p, nodes, steps);
  m.nodes = std::move(nodes);
  return m;
}

std::optional<PatternMatch> PatternMatcher::match_region(const Pattern& p, int node,
                                                         const std::vector<uint8_t>* taken) const {
  const Node& first = g_.nodes[static_cast<size_t>(node)];
  if (!runs(node) || (taken && (*taken)[static_cast<size_t>(node)]) || !p.region_ops.count(first.op_type)) {
    return std::nullopt;
  }
  int total = 0;
  for (const auto& [op, n] : p.region_ops) total += n;
  // The region's input: one of the first node's inputs that is not a scalar constant.
  for (TensorId cand : first.inputs) {
    if (cand == kNoTensor) continue;
    const TensorId x = resolve(cand);
    const Tensor& xt = g_.tensor(x);
    if (is_const_like(xt) && xt.elements() == 1) continue;
    std::map<std::string, int> left = p.region_ops;
    std::vector<int> region;
    std::set<TensorId> inside;  // resolved outputs of region nodes
    auto accepts = [&](int j) {
      const Node& n = g_.nodes[static_cast<size_t>(j)];
      if (!runs(j) || (taken && (*taken)[static_cast<size_t>(j)])) return false;
      auto it = left.find(n.op_type);
      if (it == left.end() || it->second == 0) return false;
      bool linked = false;
      for (TensorId t : n.inputs) {
        if (t == kNoTensor) continue;
        const TensorId r = resolve(t);
        if (r == x || inside.count(r)) {
          linked = true;
          continue;
        }
        const Tensor& rt = g_.tensor(r);
        if (!is_const_like(rt) || rt.elements() > kMaxConstElements) return false;
        // Data movement takes its starts, ends and axes as small constants; arithmetic only scalars.
        const auto cls = op_class(n.domain, n.op_type);
        if (rt.elements() != 1 && cls != OpClass::kDataMovement) return false;
      }
      return linked;
    };
    std::set<int> frontier = {node};
    while (!frontier.empty() && static_cast<int>(region.size()) < total) {
      const int j = *frontier.begin();
      frontier.erase(frontier.begin());
      if (!accepts(j)) continue;
      region.push_back(j);
      --left[g_.nodes[static_cast<size_t>(j)].op_type];
      for (TensorId t : g_.nodes[static_cast<size_t>(j)].outputs) {
        if (t == kNoTensor) continue;
        inside.insert(resolve(t));
        for (int r : readers(t)) {
          if (r > j) frontier.insert(r);
        }
      }
      if (region.size() == 1) {
        for (int r : readers(x)) {
          if (r > node) frontier.insert(r);
        }
      }
    }
    if (static_cast<int>(region.size()) != total) continue;
    // Exactly one tensor leaves the region; every other result is read only inside it.
    std::set<int> members(region.begin(), region.end());
    int leaving = 0;
    for (TensorId r : inside) {
      bool out = escapes_[static_cast<size_t>(r)] != 0;
      for (int rd : readers_[static_cast<size_t>(r)]) out = out || !members.count(rd);
      leaving += out ? 1 : 0;
    }
    if (leaving != 1) continue;
    std::sort(region.begin(), region.end());
    PatternMatch m;
    m.nodes = region;
    m.anchor = 0;
    return m;
  }
  return std::nullopt;
}

std::optional<PatternMatch> PatternMatcher::match_at(const Pattern& p, int node, const std::vector<uint8_t>* taken) const {
  if (node < 0 || node >= static_cast<int>(g_.nodes.size())) return std::nullopt;
  return p.shape == Pattern::Shape::kRegion ? match_region(p, node, taken) : match_chain(p, node, taken);
}

std::vector<PatternMatch> PatternMatcher::match_all(const Pattern& p, std::vector<uint8_t>* taken) const {
  std::vector<uint8_t> local;
  if (!taken) {
    local.assign(g_.nodes.size(), 0);
    taken = &local;
  }
  std::vector<PatternMatch> out;
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if ((*taken)[i] || !runs(static_cast<int>(i))) continue;
    auto m = match_at(p, static_cast<int>(i), taken);
    if (!m) continue;
    for (int n : m->nodes) (*taken)[static_cast<size_t>(n)] = 1;
    out.push_back(std::move(*m));
  }
  return out;
}

bool PatternMatcher::matches_pair(const Pattern& p, int producer, int consumer) const {
  if (p.shape != Pattern::Shape::kChain || p.steps.size() != 2 || !runs(producer) || !runs(consumer)) return false;
  TensorId first_in = kNoTensor;
  for (TensorId t : g_.nodes[static_cast<size_t>(producer)].inputs) {
    if (t != kNoTensor && !is_const_like(g_.tensor(resolve(t)))) {
      first_in = resolve(t);
      break;
    }
  }
  if (!selects(p.steps[0], producer, -1) || !others_ok(p.steps[0], producer, first_in, kNoTensor)) return false;
  if (!selects(p.steps[1], consumer, producer)) return false;
  for (TensorId t : g_.nodes[static_cast<size_t>(producer)].outputs) {
    if (t == kNoTensor) continue;
    const TensorId r = resolve(t);
    const auto& rd = readers_[static_cast<size_t>(r)];
    if (std::find(rd.begin(), rd.end(), consumer) != rd.end()) return others_ok(p.steps[1], consumer, r, kNoTensor);
  }
  return false;
}

namespace {

NodeSelector sel(std::vector<std::string> ops, std::vector<std::string> classes, std::vector<std::string> kinds,
                 NodeSelector::Elements e = NodeSelector::Elements::kAny) {
  NodeSelector s;
  s.ops = std::move(ops);
  s.classes = std::move(classes);
  s.kinds = std::move(kinds);
  s.elements = e;
  return s;
}

Pattern pair(const char* name, NodeSelector a, NodeSelector b) {
  Pattern p;
  p.name = name;
  p.fusion = name;
  p.steps = {std::move(a), std::move(b)};
  p.origin = "the planner's fusion passes";
  return p;
}

}  // namespace

const std::vector<std::string>& folded_data_movement() {
  static const std::vector<std::string> kOps = {"Transpose", "Slice", "Pad", "Concat", "Split", "Expand"};
  return kOps;
}

const std::vector<Pattern>& planner_pair_passes() {
  using E = NodeSelector::Elements;
  // Pointwise: elementwise ops, and inference BatchNormalization (a per-channel scale and shift).
  static const std::vector<Pattern> kPasses = [] {
    const auto pointwise = [](E e) { return sel({"BatchNormalization"}, {"elementwise"}, {"pointwise"}, e); };
    return std::vector<Pattern>{
        pair("batchnorm-fold", sel({"Conv"}, {}, {"main-loop"}), sel({"BatchNormalization"}, {}, {})),
        pair("elementwise-chain", pointwise(E::kAny), pointwise(E::kNotFewer)),
        pair("gemm-epilogue", sel({}, {}, {"main-loop"}), pointwise(E::kSame)),
        pair("norm-prologue", sel({}, {"elementwise"}, {"pointwise"}), sel({}, {"normalization"}, {"rowwise"})),
        pair("norm-epilogue", sel({}, {"normalization"}, {"rowwise"}), pointwise(E::kSame)),
        pair("transpose-into-gemm", sel({"Transpose"}, {}, {}), sel({"MatMul", "Gemm"}, {}, {"main-loop"})),
        // A QDQ graph's weight (or activation) dequantized as the GEMM loads it: the int8 bytes are
        // read, never the float copy.
        pair("dequantize-into-gemm", sel({"DequantizeLinear"}, {}, {}), sel({"MatMul", "Gemm"}, {}, {"main-loop"})),
        // Data movement read through index math by the element-wise kernel (or the data movement)
        // that reads it: its output is never stored (codegen folds it into that kernel's loads).
        pair("fold-data-movement", sel(folded_data_movement(), {}, {}),
             sel(folded_data_movement(), {"elementwise"}, {"pointwise"})),
    };
  }();
  return kPasses;
}

const Pattern& planner_attention_pass() {
  // MatMul(Q, K^T) -> pointwise* -> Softmax -> pointwise* -> MatMul(P, V).
  static const Pattern kAttention = [] {
    Pattern p;
    p.name = "attention";
    p.fusion = "attention";
    p.origin = "the planner's fusion passes";
    NodeSelector pw = sel({}, {}, {"pointwise"});
    pw.min = 0;
    pw.max = 5;
    p.steps = {sel({"MatMul"}, {}, {"main-loop"}), pw, sel({"Softmax"}, {}, {}), pw, sel({"MatMul"}, {}, {"main-loop"})};
    return p;
  }();
  return kAttention;
}

}  // namespace gpusim
