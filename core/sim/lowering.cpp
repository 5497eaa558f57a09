// A runtime's lowering (include/gpusim/lowering.h): its patterns, fusions, views, inserted kernels
// and autocast casts applied to a graph, giving the plan of the kernels it launches.
#include "gpusim/lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>

#include "gpusim/op_catalog.h"
#include "gpusim/predict.h"

namespace gpusim {
namespace {

template <typename T>
bool has(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

struct Group {
  std::vector<int> nodes;        // input-graph node indices it runs (views folded in included)
  std::vector<int> recomputed;   // folded views that other groups run too
  int anchor = -1;               // input-graph node index
  std::string rule;              // the pattern, fuse rule or view that made it ("" for a node alone)
  std::string fusion;
  std::string call;
  const RuntimeLowering::Insert* layout = nullptr;  // a layout insert applies (a node alone)
  bool extra_call = false;  // a later kernel of its call (the bias add after a convolution)
  bool alive = true;
};

int rank_of(DType t) {
  switch (t) {
    case DType::kFloat64: return 4;
    case DType::kFloat32: return 3;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    default: return dtype_is_float(t) ? 1 : 0;
  }
}

// The widest of two float types (fp16 with bf16 gives fp32, as PyTorch promotes them).
DType wider(DType a, DType b) {
  if (a == DType::kUndefined) return b;
  if (b == DType::kUndefined) return a;
  if (a == b) return a;
  if (rank_of(a) == rank_of(b)) return DType::kFloat32;
  return rank_of(a) > rank_of(b) ? a : b;
}

// Whether a Split or Slice takes its pieces along the outermost axis with size above one: each
// piece is then contiguous in memory, a view whatever reads it.
bool outer_slice(const Graph& g, const Node& n) {
  if (n.inputs.empty() || n.inputs[0] == kNoTensor) return false;
  const Shape& s = g.tensor(n.inputs[0]).shape;
  std::vector<int64_t> axes;
  if (n.op_type == "Split") {
    axes.push_back(n.attr_int("axis", 0));
  } else if (n.op_type == "Slice") {
    if (n.inputs.size() > 3 && n.inputs[3] != kNoTensor) {
      const Tensor& ax = g.tensor(n.inputs[3]);
      if (!ax.value) return false;
      for (int64_t i = 0; i < ax.value->size(); ++i) axes.push_back(ax.value->as_int(i));
    } else {
      for (size_t i = 0; i < s.size(); ++i) axes.push_back(static_cast<int64_t>(i));  // every axis sliced
    }
    if (n.inputs.size() > 4 && n.inputs[4] != kNoTensor) {
      const Tensor& st = g.tensor(n.inputs[4]);
      if (!st.value) return false;
      for (int64_t i = 0; i < st.value->size(); ++i) {
        if (st.value->as_int(i) != 1) return false;
      }
    }
  } else {
    return false;
  }
  const auto rank = static_cast<int64_t>(s.size());
  int64_t first = rank;
  for (int64_t a : axes) first = std::min(first, a < 0 ? a + rank : a);
  for (int64_t i = 0; i < first && i < rank; ++i) {
    if (s[static_cast<size_t>(i)] != 1) return false;
  }
  return true;
}

// Whether `out` is `in` with dims only split (and unit dims added or dropped): a view of a
// permuted tensor can take that shape; merging dims needs the memory contiguous (a copy).
bool only_splits(const Shape& in, const Shape& out) {
  Shape a, b;
  for (int64_t d : in) {
    if (d != 1) a.push_back(d);
  }
  for (int64_t d : out) {
    if (d != 1) b.push_back(d);
  }
  size_t j = 0;
  for (int64_t d : a) {
    int64_t p = 1;
    while (p < d && j < b.size()) p *= b[j++];
    if (p != d) return false;
  }
  return j == b.size();
}

bool nchw_nhwc_transpose(const Node& n, const Graph& g) {
  if (n.op_type != "Transpose") return false;
  const Attribute* perm = n.attr("perm");
  if (!perm || perm->ints.size() != 4 || g.tensor(n.outputs.front()).shape.size() != 4) return false;
  return perm->ints == std::vector<int64_t>{0, 2, 3, 1} || perm->ints == std::vector<int64_t>{0, 3, 1, 2};
}

// The bias Adds a runtime runs as kernels of their own, written into the graph before anything
// else: a compiler's fusions then see them as the graph's own pointwise ops.
struct BiasSplit {
  Graph graph;
  std::vector<int> origin;             // per node: the input graph's node, -1 for an inserted Add
  std::map<int, std::string> adds;     // inserted Add -> the insert's name
  std::map<int, int> add_of;           // inserted Add -> the node whose bias it adds
};

BiasSplit split_biases(const Graph& g, const RuntimeModel& rt, const LoweringOptions& o) {
  BiasSplit out;
  std::vector<const RuntimeLowering::Insert*> rules;
  for (const auto& ins : rt.lowering.inserts) {
    if (ins.what == "bias" && (ins.layout.empty() || ins.layout == o.layout)) rules.push_back(&ins);
  }
  out.graph = g;
  if (rules.empty()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) out.origin.push_back(static_cast<int>(i));
    return out;
  }
  const PatternMatcher pm(g);
  Graph& g1 = out.graph;
  g1.nodes.clear();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node n = g.nodes[i];
    const RuntimeLowering::Insert* rule = nullptr;
    if (n.inputs.size() > 2 && n.inputs[2] != kNoTensor && !n.outputs.empty()) {
      for (const auto* r : rules) {
        if (pm.selects(r->on, static_cast<int>(i), -1)) {
          rule = r;
          break;
        }
      }
    }
    if (!rule) {
      g1.nodes.push_back(std::move(n));
      out.origin.push_back(static_cast<int>(i));
      continue;
    }
    const TensorId b = n.inputs[2], y = n.outputs[0];
    n.inputs.resize(2);
    Tensor y0 = g1.tensor(y);
    y0.name = y0.name + ":nobias";
    y0.role = TensorRole::kActivation;
    y0.value.reset();
    while (g1.by_name.count(y0.name)) y0.name += "'";
    n.outputs[0] = g1.add_tensor(y0);
    Tensor bb = g1.tensor(b);
    bb.name = bb.name + ":broadcast";
    while (g1.by_name.count(bb.name)) bb.name += "'";
    bb.shape = {bb.elements()};
    for (size_t k = 2; k < g1.tensor(y).shape.size(); ++k) bb.shape.push_back(1);
    bb.value.reset();
    const TensorId b2 = g1.add_tensor(bb);
    Node add;
    add.name = n.name + "/" + rule->name;
    add.op_type = "Add";
    add.inputs = {n.outputs[0], b2};
    add.outputs = {y};
    g1.nodes.push_back(std::move(n));
    out.origin.push_back(static_cast<int>(i));
    g1.nodes.push_back(std::move(add));
    out.origin.push_back(-1);
    out.adds[static_cast<int>(g1.nodes.size()) - 1] = rule->name;
    out.add_of[static_cast<int>(g1.nodes.size()) - 1] = static_cast<int>(g1.nodes.size()) - 2;
  }
  return out;
}

class Lowerer {
 public:
  Lowerer(const Graph& g, const RuntimeModel& rt, const LoweringOptions& o, const BiasSplit& bias)
      : g_(g), rt_(rt), o_(o), pm_(g), bias_(bias), biases_(static_cast<int>(bias.adds.size())) {
    raw_readers_.resize(g.tensors.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (TensorId t : g.nodes[i].inputs) {
        if (t != kNoTensor) raw_readers_[static_cast<size_t>(t)].push_back(static_cast<int>(i));
      }
    }
  }

  Result<Lowering> run() {  // lower() has checked the layout
    if (o_.autocast && *o_.autocast != DType::kFloat16 && *o_.autocast != DType::kBFloat16) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("autocast type {} is not a mixed-precision type; expected fp16 or bf16",
                                    dtype_name(*o_.autocast)));
    }
    if (o_.autocast && !rt_.lowering.autocast.present) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("runtime \"{}\"{} has no autocast rules (lowering.autocast), so it cannot price a "
                                    "mixed-precision run; use `dtype` to re-type the graph instead",
                                    rt_.name, where()));
    }
    group_of_.assign(g_.nodes.size(), -1);
    if (auto s = apply_patterns(); !s) return s.error();
    apply_fuse();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!pm_.runs(static_cast<int>(i)) || group_of_[i] >= 0) continue;
      if (auto b = bias_.adds.find(static_cast<int>(i)); b != bias_.adds.end()) {
        // A bias the runtime adds after its op, in that op's call.
        const int id = new_group({static_cast<int>(i)}, b->second, b->second, -1,
                                 framework_op_name(g_, g_.nodes[static_cast<size_t>(bias_.add_of.at(b->first))]));
        groups_[static_cast<size_t>(id)].extra_call = true;
        continue;
      }
      new_group({static_cast<int>(i)}, "", "");
    }
    apply_views();
    apply_inserts();
    return build();
  }

 private:
  std::string where() const { return rt_.source_path.empty() ? "" : fmt::format(" ({})", rt_.source_path); }

  int new_group(std::vector<int> nodes, std::string rule, std::string fusion, int anchor = -1, std::string call = "") {
    Group gr;
    gr.nodes = std::move(nodes);
    std::sort(gr.nodes.begin(), gr.nodes.end());
    gr.rule = std::move(rule);
    gr.fusion = std::move(fusion);
    gr.anchor = anchor >= 0 ? anchor : default_anchor(gr.nodes);
    gr.call = call.empty() ? framework_op_name(g_, g_.nodes[static_cast<size_t>(gr.anchor)]) : std::move(call);
    const int id = static_cast<int>(groups_.size());
    for (int n : gr.nodes) group_of_[static_cast<size_t>(n)] = id;
    groups_.push_back(std::move(gr));
    return id;
  }

  int default_anchor(const std::vector<int>& nodes) const {
    for (NodeKind want : {NodeKind::kMainLoop, NodeKind::kRowwise}) {
      for (int n : nodes) {
        if (pm_.kind(n) == want) return n;
      }
    }
    // A pointwise group: its first node that is not data movement sets the class.
    for (int n : nodes) {
      const Node& nd = g_.nodes[static_cast<size_t>(n)];
      if (op_class(nd.domain, nd.op_type) != OpClass::kDataMovement) return n;
    }
    return nodes.front();
  }

  Status apply_patterns() {
    const auto& pats = rt_.lowering.kernels;
    for (const std::string& s : o_.skip) {
      if (std::none_of(pats.begin(), pats.end(), [&](const Pattern& p) { return p.name == s; })) {
        std::string names;
        for (const Pattern& p : pats) names += (names.empty() ? "" : ", ") + p.name;
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("runtime \"{}\"{} has no kernel pattern \"{}\" to skip; its patterns: {}", rt_.name,
                                      where(), s, names.empty() ? "none" : names));
      }
    }
    std::vector<int> claimed(g_.nodes.size(), -1);
    std::vector<std::vector<PatternMatch>> hits(pats.size());
    for (size_t pi = 0; pi < pats.size(); ++pi) {
      if (has(o_.skip, pats[pi].name)) continue;
      hits[pi] = pm_.match_all(pats[pi]);
      for (const PatternMatch& m : hits[pi]) {
        for (int n : m.nodes) {
          const int other = claimed[static_cast<size_t>(n)];
          if (other >= 0 && other != static_cast<int>(pi)) {
            const Node& nd = g_.nodes[static_cast<size_t>(n)];
            return make_error(
                ErrorCode::kInvalidArgument,
                fmt::format("runtime \"{}\"{}: patterns \"{}\" ({}) and \"{}\" ({}) both match node \"{}\" ({}) of {}; "
                            "a node runs in one kernel, so patterns must not overlap: narrow one of them (its ops or "
                            "operands) or remove it",
                            rt_.name, where(), pats[static_cast<size_t>(other)].name,
                            pats[static_cast<size_t>(other)].origin, pats[pi].name, pats[pi].origin, nd.name,
                            nd.op_type, g_.source_path));
          }
          claimed[static_cast<size_t>(n)] = static_cast<int>(pi);
        }
      }
    }
    for (size_t pi = 0; pi < pats.size(); ++pi) {
      const Pattern& p = pats[pi];
      for (const PatternMatch& m : hits[pi]) {
        new_group(m.nodes, p.name, p.fusion.empty() ? p.name : p.fusion, m.nodes[static_cast<size_t>(m.anchor)], p.call);
      }
    }
    return Ok{};
  }

  // The union-find of the fuse rules, over nodes no pattern took.
  int find(int x) {
    while (uf_[static_cast<size_t>(x)] != x) {
      uf_[static_cast<size_t>(x)] = uf_[static_cast<size_t>(uf_[static_cast<size_t>(x)])];
      x = uf_[static_cast<size_t>(x)];
    }
    return x;
  }

  // Whether some node outside both groups lies on a path from one to the other: merging them
  // would make a kernel wait for its own output.
  bool path_between(const std::vector<int>& a, const std::vector<int>& b) {
    const std::set<int> in_a(a.begin(), a.end()), in_b(b.begin(), b.end());
    const int limit = std::max(*std::max_element(a.begin(), a.end()), *std::max_element(b.begin(), b.end()));
    auto reaches = [&](const std::set<int>& from, const std::set<int>& to) {
      std::vector<int> stack;
      std::set<int> seen;
      for (int n : from) {
        for (TensorId t : g_.nodes[static_cast<size_t>(n)].outputs) {
          if (t == kNoTensor) continue;
          for (int r : pm_.readers(t)) {
            if (!from.count(r) && !to.count(r) && seen.insert(r).second) stack.push_back(r);
          }
        }
      }
      while (!stack.empty()) {
        const int n = stack.back();
        stack.pop_back();
        for (TensorId t : g_.nodes[static_cast<size_t>(n)].outputs) {
          if (t == kNoTensor) continue;
          for (int r : pm_.readers(t)) {
            if (to.count(r)) return true;
            if (r <= limit && !from.count(r) && seen.insert(r).second) stack.push_back(r);
          }
        }
      }
      return false;
    };
    return reaches(in_a, in_b) || reaches(in_b, in_a);
  }

  void apply_fuse() {
    const auto& rules = rt_.lowering.fuse;
    if (rules.empty()) return;
    const size_t nn = g_.nodes.size();
    uf_.resize(nn);
    std::iota(uf_.begin(), uf_.end(), 0);
    std::vector<int> mains(nn, 0), rows(nn, 0);
    std::vector<std::vector<int>> members(nn);
    std::vector<std::string> rule_of(nn);
    for (size_t i = 0; i < nn; ++i) {
      mains[i] = pm_.kind(static_cast<int>(i)) == NodeKind::kMainLoop;
      rows[i] = pm_.kind(static_cast<int>(i)) == NodeKind::kRowwise;
      members[i] = {static_cast<int>(i)};
    }
    auto free = [&](int n) { return pm_.runs(n) && group_of_[static_cast<size_t>(n)] < 0; };
    for (size_t pu = 0; pu < nn; ++pu) {
      const int p = static_cast<int>(pu);
      if (!free(p)) continue;
      for (TensorId t : g_.nodes[pu].outputs) {
        if (t == kNoTensor) continue;
        for (int r : pm_.readers(t)) {
          if (!free(r)) continue;
          for (const Pattern& rule : rules) {
            if (!pm_.matches_pair(rule, p, r)) continue;
            const int a = find(p), b = find(r);
            if (a == b) break;
            const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
            if (!kinds_fuse(mains[ua] + mains[ub], rows[ua] + rows[ub], false)) break;
            if (path_between(members[ua], members[ub])) break;
            uf_[ub] = a;
            mains[ua] += mains[ub];
            rows[ua] += rows[ub];
            members[ua].insert(members[ua].end(), members[ub].begin(), members[ub].end());
            members[ub].clear();
            if (rule_of[ua].empty()) rule_of[ua] = rule.name;
            break;
          }
        }
      }
    }
    for (size_t i = 0; i < nn; ++i) {
      if (find(static_cast<int>(i)) != static_cast<int>(i) || members[i].size() < 2) continue;
      // A group of views alone (a permute and a split feeding a library call) computes nothing: its
      // nodes stay views, for the views rule to fold into their readers or copy.
      const auto& vops = rt_.lowering.views.ops;
      if (std::all_of(members[i].begin(), members[i].end(),
                      [&](int n) { return has(vops, g_.nodes[static_cast<size_t>(n)].op_type); })) {
        continue;
      }
      new_group(members[i], rule_of[i], rule_of[i]);
    }
  }

  // Whether `reader` (in group `grp`) takes view node `v`'s output as a strided operand.
  bool accepts(int v, int grp, int reader) const {
    const RuntimeLowering::Views& vw = rt_.lowering.views;
    const Node& vn = g_.nodes[static_cast<size_t>(v)];
    if (outer_slice(g_, vn)) return true;
    if (vw.channels_last_free && o_.layout == "nhwc" && nchw_nhwc_transpose(vn, g_)) return true;
    if (has(vw.reader_fusions, groups_[static_cast<size_t>(grp)].fusion)) return true;
    const Node& rn = g_.nodes[static_cast<size_t>(reader)];
    if (vn.op_type == "Transpose" && (rn.op_type == "MatMul" || rn.op_type == "Gemm")) {
      NodeSelector swap;
      swap.swaps_last_two = true;
      if (pm_.selects(swap, v, -1)) return true;
    }
    for (const NodeSelector& s : vw.readers) {
      if (pm_.selects(s, reader, -1)) return true;
    }
    return false;
  }

  // Whether a Reshape after this Transpose merges permuted dims: PyTorch then copies (reshape, or
  // the model's .contiguous().view()), whatever reads the result.
  bool reshape_merges(int v) const {
    std::vector<TensorId> todo(g_.nodes[static_cast<size_t>(v)].outputs.begin(), g_.nodes[static_cast<size_t>(v)].outputs.end());
    while (!todo.empty()) {
      const TensorId t = todo.back();
      todo.pop_back();
      if (t == kNoTensor) continue;
      for (int c : raw_readers_[static_cast<size_t>(t)]) {
        const Node& cn = g_.nodes[static_cast<size_t>(c)];
        if (cn.inputs.empty() || cn.inputs[0] != t) continue;
        if (cn.op_type == "Reshape" || cn.op_type == "Flatten") {
          if (!only_splits(g_.tensor(t).shape, g_.tensor(cn.outputs.front()).shape)) return true;
          todo.push_back(cn.outputs.front());
        } else if (cn.op_type == "Squeeze" || cn.op_type == "Unsqueeze" || cn.op_type == "Identity") {
          todo.push_back(cn.outputs.front());
        }
      }
    }
    return false;
  }

  void apply_views() {
    const RuntimeLowering::Views& vw = rt_.lowering.views;
    if (vw.ops.empty()) return;
    // Per folded view: the (group, reading node) pairs it is folded into.
    std::map<int, std::vector<std::pair<int, int>>> folded;
    for (int v = static_cast<int>(g_.nodes.size()) - 1; v >= 0; --v) {
      const Node& vn = g_.nodes[static_cast<size_t>(v)];
      const int gv = group_of_[static_cast<size_t>(v)];
      if (gv < 0 || !has(vw.ops, vn.op_type) || groups_[static_cast<size_t>(gv)].nodes.size() != 1) continue;
      if (vn.op_type == "Transpose" && reshape_merges(v) &&
          !(vw.channels_last_free && o_.layout == "nhwc" && nchw_nhwc_transpose(vn, g_))) {
        continue;
      }
      std::vector<std::pair<int, int>> targets;
      bool ok = true;
      for (TensorId t : vn.outputs) {
        if (t == kNoTensor) continue;
        if (pm_.escapes(t)) ok = false;
        for (int r : pm_.readers(t)) {
          if (auto it = folded.find(r); it != folded.end()) {
            for (const auto& x : it->second) {
              if (!has(targets, x)) targets.push_back(x);
            }
          } else {
            const std::pair<int, int> x{group_of_[static_cast<size_t>(r)], r};
            if (!has(targets, x)) targets.push_back(x);
          }
        }
      }
      if (!ok || targets.empty()) continue;
      for (const auto& [grp, reader] : targets) ok = ok && grp >= 0 && accepts(v, grp, reader);
      if (!ok) continue;
      folded[v] = targets;
      groups_[static_cast<size_t>(gv)].alive = false;
      std::set<int> gs;
      for (const auto& x : targets) gs.insert(x.first);
      group_of_[static_cast<size_t>(v)] = *gs.begin();
      for (int grp : gs) {
        Group& gr = groups_[static_cast<size_t>(grp)];
        gr.nodes.insert(std::upper_bound(gr.nodes.begin(), gr.nodes.end(), v), v);
        if (gs.size() > 1) gr.recomputed.push_back(v);
      }
    }
  }

  void apply_inserts() {
    for (const RuntimeLowering::Insert& ins : rt_.lowering.inserts) {
      if (!ins.layout.empty() && ins.layout != o_.layout) continue;
      for (Group& gr : groups_) {
        if (!gr.alive || gr.nodes.size() != 1) continue;
        const int n = gr.nodes.front();
        if (!pm_.selects(ins.on, n, -1)) continue;
        const Node& nd = g_.nodes[static_cast<size_t>(n)];
        if (!ins.dtypes.empty()) {
          // The type the node computes in: autocast's for the ops it lowers, else its input's.
          const DType dt = o_.autocast && precision_of(nd) == Precision::kLower
                               ? *o_.autocast
                               : (nd.inputs.empty() || nd.inputs[0] == kNoTensor ? DType::kUndefined
                                                                                  : g_.tensor(nd.inputs[0]).dtype);
          if (!has(ins.dtypes, dt)) continue;
        }
        if (ins.what == "layout" && !gr.layout) gr.layout = &ins;
      }
    }
  }

  // --- building the lowered graph and its plan

  enum class Precision { kLower, kFp32, kPromote, kKeep };

  // A bias Add the runtime splits off an op computes as that op does (autocast cast the bias with it).
  Precision precision_of(int node) const {
    if (bias_.adds.count(node)) return Precision::kLower;
    return precision_of(g_.nodes[static_cast<size_t>(node)]);
  }
  Precision precision_of(const Node& n) const {
    const auto& ac = rt_.lowering.autocast;
    if (has(ac.lower, n.op_type)) return Precision::kLower;
    if (has(ac.fp32, n.op_type)) return Precision::kFp32;
    if (has(ac.promote, n.op_type)) return Precision::kPromote;
    return Precision::kKeep;
  }

  // Groups in launch order: producers first, ties by their first node.
  std::vector<int> group_order() const {
    const size_t ng = groups_.size();
    std::vector<std::set<int>> succ(ng);
    std::vector<int> indeg(ng, 0);
    for (size_t gi = 0; gi < ng; ++gi) {
      if (!groups_[gi].alive) continue;
      for (int n : groups_[gi].nodes) {
        for (TensorId t : g_.nodes[static_cast<size_t>(n)].inputs) {
          if (t == kNoTensor) continue;
          const int prod = producer_group(t);
          if (prod >= 0 && prod != static_cast<int>(gi) && succ[static_cast<size_t>(prod)].insert(static_cast<int>(gi)).second) {
            ++indeg[gi];
          }
        }
      }
    }
    using Item = std::pair<int, int>;  // (first node, group)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
    for (size_t gi = 0; gi < ng; ++gi) {
      if (groups_[gi].alive && indeg[gi] == 0) ready.push({groups_[gi].nodes.front(), static_cast<int>(gi)});
    }
    std::vector<int> order;
    while (!ready.empty()) {
      const int gi = ready.top().second;
      ready.pop();
      order.push_back(gi);
      for (int s : succ[static_cast<size_t>(gi)]) {
        if (--indeg[static_cast<size_t>(s)] == 0) ready.push({groups_[static_cast<size_t>(s)].nodes.front(), s});
      }
    }
    return order;
  }

  // The group whose kernel writes tensor t (through views), or -1 (inputs, weights, constants).
  int producer_group(TensorId t) const {
    const TensorId r = pm_.resolve(t);
    const int p = pm_.index().producer[static_cast<size_t>(r)];
    if (p < 0) return -1;
    const Group* best = nullptr;
    int id = group_of_[static_cast<size_t>(p)];
    if (id >= 0) best = &groups_[static_cast<size_t>(id)];
    if (best && !has(best->recomputed, p)) return id;
    // A folded view: its inputs come from the group that produces its input.
    const Node& pn = g_.nodes[static_cast<size_t>(p)];
    return pn.inputs.empty() || pn.inputs[0] == kNoTensor ? -1 : producer_group(pn.inputs[0]);
  }

  Result<Lowering> build() {
    Lowering out;
    out.graph = g_;
    Graph& g2 = out.graph;
    g2.nodes.clear();
    const std::vector<int> order = group_order();
    const auto alive = std::count_if(groups_.begin(), groups_.end(), [](const Group& gr) { return gr.alive; });
    if (static_cast<int64_t>(order.size()) != static_cast<int64_t>(alive)) {
      return make_error(ErrorCode::kInternal,
                        fmt::format("runtime \"{}\"{}: the lowering of {} has a cycle among its kernels ({} of {} "
                                    "ordered); report this with the model",
                                    rt_.name, where(), g_.source_path, order.size(), alive));
    }
    const bool autocast = o_.autocast.has_value();
    const DType target = o_.autocast.value_or(DType::kFloat16);
    std::vector<int> new_index(g_.nodes.size(), -1);
    std::map<TensorId, TensorId> weight_cast;  // autocast's cache: one cast per weight a step
    const bool compiler = !rt_.lowering.fuse.empty();
    std::map<TensorId, size_t> generated_kernel_of;  // tensor -> the generated kernel writing it
    int inserted_nodes = 0, casts = 0, conversions = 0;

    auto add_tensor = [&](const Tensor& like, const std::string& name, DType dt, Shape shape, TensorRole role) {
      Tensor t;
      std::string nm = name;
      for (int k = 2; g2.by_name.count(nm); ++k) nm = fmt::format("{}#{}", name, k);
      t.name = nm;
      t.dtype = dt;
      t.shape = std::move(shape);
      t.role = role;
      (void)like;
      return g2.add_tensor(std::move(t));
    };
    auto emit = [&](Node n, int origin) {
      g2.nodes.push_back(std::move(n));
      out.origin.push_back(origin);
      if (origin < 0) ++inserted_nodes;
      return static_cast<int>(g2.nodes.size()) - 1;
    };
    auto make_transpose = [&](const std::string& name, TensorId in, std::vector<int64_t> perm) {
      const Tensor& x = g2.tensor(in);
      Shape s;
      for (int64_t p : perm) s.push_back(x.shape[static_cast<size_t>(p)]);
      Node t;
      t.name = name;
      t.op_type = "Transpose";
      Attribute a;
      a.kind = Attribute::Kind::kInts;
      a.ints = std::move(perm);
      t.attributes["perm"] = a;
      t.inputs = {in};
      t.outputs = {add_tensor(x, name + ":out", x.dtype, s, TensorRole::kActivation)};
      return t;
    };
    // Nodes of the input graph no group runs (views, import-time folds), placed before the first
    // kernel that needs them so the graph stays in topological order.
    std::vector<uint8_t> placed(g_.nodes.size(), 0);
    auto place_dependencies = [&](auto& self, int n) -> void {
      for (TensorId t : g_.nodes[static_cast<size_t>(n)].inputs) {
        if (t == kNoTensor) continue;
        const int p = pm_.index().producer[static_cast<size_t>(t)];
        if (p < 0 || placed[static_cast<size_t>(p)] || group_of_[static_cast<size_t>(p)] >= 0) continue;
        if (pm_.runs(p)) continue;
        placed[static_cast<size_t>(p)] = 1;
        self(self, p);
        new_index[static_cast<size_t>(p)] = emit(g_.nodes[static_cast<size_t>(p)], p);
        retype_passthrough(g2, g2.nodes.back(), autocast);
      }
    };

    for (int gi : order) {
      const Group& gr = groups_[static_cast<size_t>(gi)];
      const bool lower_group = autocast && precision_of(gr.anchor) == Precision::kLower;
      std::set<TensorId> produced_here;
      for (int n : gr.nodes) {
        for (TensorId t : g_.nodes[static_cast<size_t>(n)].outputs) {
          if (t != kNoTensor) produced_here.insert(pm_.resolve(t));
        }
      }
      std::map<TensorId, TensorId> cast_of;  // this group's casts
      std::vector<PlanKernel> before, after;
      PlanKernel main;
      main.fusions = {};
      if (!gr.rule.empty()) main.fusions.push_back(gr.fusion);
      if (!gr.rule.empty() && gr.rule != gr.fusion) main.fusions.push_back(gr.rule);
      main.call = gr.call;
      main.call_first = !gr.extra_call;
      for (int n : gr.nodes) {
        // The views and folds this node reads, placed just before it (after the group's earlier
        // nodes, whose output types they pass on).
        place_dependencies(place_dependencies, n);
        Node node = g_.nodes[static_cast<size_t>(n)];
        const bool recomputed_elsewhere = has(gr.recomputed, n) && new_index[static_cast<size_t>(n)] >= 0;
        if (recomputed_elsewhere) {
          main.nodes.push_back(new_index[static_cast<size_t>(n)]);
          main.recomputed.push_back(new_index[static_cast<size_t>(n)]);
          continue;
        }
        // Autocast: this node's inputs from outside the group, cast where its precision needs.
        if (autocast && op_class(node.domain, node.op_type) != OpClass::kDataMovement) {
          const Precision pr = lower_group ? Precision::kLower : precision_of(n);
          const DType want = pr == Precision::kLower ? target : DType::kFloat32;
          if (pr == Precision::kLower || pr == Precision::kFp32) {
            for (TensorId& in : node.inputs) {
              if (in == kNoTensor || produced_here.count(pm_.resolve(in))) continue;
              const Tensor& x = g2.tensor(in);
              if (!dtype_is_float(x.dtype) || x.dtype == want || x.elements() <= 1) continue;
              const bool weight = x.role == TensorRole::kWeight || x.role == TensorRole::kConstant;
              auto& cache = weight ? weight_cast : cast_of;
              if (auto it = cache.find(in); it != cache.end() && g2.tensor(it->second).dtype == want) {
                in = it->second;
                continue;
              }
              Node c;
              c.name = fmt::format("{}/autocast:{}", node.name, x.name);
              c.op_type = "Cast";
              Attribute to;
              to.kind = Attribute::Kind::kInt;
              to.i = static_cast<int64_t>(want);
              c.attributes["to"] = to;
              c.inputs = {in};
              const TensorId ct = add_tensor(x, fmt::format("{}@{}", x.name, dtype_name(want)), want, x.shape,
                                             TensorRole::kActivation);
              c.outputs = {ct};
              // A compiler writes the cast type from the kernel that produces the value (the cast
              // is a pointwise op its fusions take in); a framework launches a cast kernel.
              const auto gen = generated_kernel_of.find(pm_.resolve(in));
              if (compiler && !weight && gen != generated_kernel_of.end()) {
                out.plan.kernels[gen->second].nodes.push_back(emit(std::move(c), -1));
              } else {
                PlanKernel ck;
                ck.nodes = {emit(std::move(c), -1)};
                ck.fusions = {"autocast"};
                ck.call = "to";
                before.push_back(std::move(ck));
              }
              cache[in] = ct;
              in = ct;
              ++casts;
            }
          }
        }
        // The node, with its runtime's inserted kernels.
        if (gr.layout && n == gr.anchor) {
          for (size_t k = 0; k < 2 && k < node.inputs.size(); ++k) {
            if (node.inputs[k] == kNoTensor || g2.tensor(node.inputs[k]).shape.size() != 4) continue;
            if (!has(gr.layout->convert, std::string(k == 0 ? "input" : "weight"))) continue;
            PlanKernel ck;
            ck.nodes = {emit(make_transpose(fmt::format("{}/{}:{}", node.name, gr.layout->name,
                                                        k == 0 ? "input-to-nhwc" : "weight-to-nhwc"),
                                            node.inputs[k], {0, 2, 3, 1}),
                             -1)};
            ck.fusions = {gr.layout->name};
            ck.call = gr.call;
            ck.call_first = false;
            before.push_back(std::move(ck));
            ++conversions;
          }
        }
        const int ni = emit(std::move(node), n);
        new_index[static_cast<size_t>(n)] = ni;
        retype_outputs(g2, g2.nodes[static_cast<size_t>(ni)], autocast,
                       lower_group ? Precision::kLower : precision_of(n), target);
        main.nodes.push_back(ni);
        if (has(gr.recomputed, n)) main.recomputed.push_back(ni);
        if (gr.layout && n == gr.anchor && has(gr.layout->convert, std::string("output")) &&
            g2.tensor(g2.nodes[static_cast<size_t>(ni)].outputs[0]).shape.size() == 4) {
          PlanKernel ck;
          ck.nodes = {emit(make_transpose(fmt::format("{}/{}:output-to-nchw", g2.nodes[static_cast<size_t>(ni)].name,
                                                      gr.layout->name),
                                          g2.nodes[static_cast<size_t>(ni)].outputs[0], {0, 2, 3, 1}),
                           -1)};
          ck.fusions = {gr.layout->name};
          ck.call = gr.call;
          ck.call_first = false;
          after.push_back(std::move(ck));
          ++conversions;
        }
      }
      std::sort(main.nodes.begin(), main.nodes.end());
      main.anchor = static_cast<int>(std::find(main.nodes.begin(), main.nodes.end(),
                                               new_index[static_cast<size_t>(gr.anchor)]) -
                                     main.nodes.begin());
      if (main.anchor >= static_cast<int>(main.nodes.size())) main.anchor = 0;
      for (auto& k : before) out.plan.kernels.push_back(std::move(k));
      // A kernel the runtime generates (no library main loop): what it writes can take a cast.
      const bool generated = std::none_of(gr.nodes.begin(), gr.nodes.end(), [&](int n) {
        const Node& nd = g_.nodes[static_cast<size_t>(n)];
        const auto c = op_class(nd.domain, nd.op_type);
        return c == OpClass::kGemm || c == OpClass::kConv || c == OpClass::kAttention;
      });
      if (generated) {
        for (int n : gr.nodes) {
          for (TensorId t : g_.nodes[static_cast<size_t>(n)].outputs) {
            if (t != kNoTensor) generated_kernel_of[pm_.resolve(t)] = out.plan.kernels.size();
          }
        }
      }
      out.plan.kernels.push_back(std::move(main));
      for (auto& k : after) out.plan.kernels.push_back(std::move(k));
    }
    // Whatever no kernel needed (dead views, folds of nothing) goes last, in order.
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (new_index[i] >= 0 || pm_.runs(static_cast<int>(i)) || placed[i]) continue;
      new_index[i] = emit(g_.nodes[i], static_cast<int>(i));
      retype_passthrough(g2, g2.nodes.back(), autocast);
    }
    out.plan.model = g_.source_path;
    out.plan.scheduler = SchedulerKind::kLowering;
    out.plan.runtime = rt_.name;
    classify_kernels(out.graph, out.plan);
    if (inserted_nodes > 0) {
      out.notes.push_back(fmt::format("runtime {} inserts {} node(s): {} autocast cast(s), {} layout conversion(s), {} "
                                      "bias add(s)",
                                      rt_.name, inserted_nodes + biases_, casts, conversions, biases_));
    }
    return out;
  }

  // A node that runs no kernel of its own (a view, an import-time fold) passes its input's type on.
  void retype_passthrough(Graph& g2, Node& n, bool autocast) const {
    if (!autocast || n.inputs.empty() || n.inputs[0] == kNoTensor) return;
    const DType in = g2.tensor(n.inputs[0]).dtype;
    if (!dtype_is_float(in)) return;
    for (TensorId t : n.outputs) {
      if (t != kNoTensor && dtype_is_float(g2.tensor(t).dtype) && g2.tensor(t).role != TensorRole::kConstant) {
        g2.tensor(t).dtype = in;
      }
    }
  }

  // The type each float output of a node computes in under autocast.
  void retype_outputs(Graph& g2, Node& n, bool autocast, Precision pr, DType target) const {
    if (!autocast) return;
    DType out = DType::kUndefined;
    if (n.op_type == "Cast") return;  // the model's own cast: its type stands
    const bool moves = op_class(n.domain, n.op_type) == OpClass::kDataMovement;
    if (!moves && pr == Precision::kLower) {
      out = target;
    } else if (!moves && pr == Precision::kFp32) {
      out = DType::kFloat32;
    } else {
      // Promote: the widest float input with more than one element (scalars do not promote, as in
      // PyTorch); keep and data movement: the first float input's type.
      DType any = DType::kUndefined;
      for (TensorId t : n.inputs) {
        if (t == kNoTensor) continue;
        const Tensor& x = g2.tensor(t);
        if (!dtype_is_float(x.dtype)) continue;
        any = wider(any, x.dtype);
        if (x.elements() <= 1) continue;
        if (pr == Precision::kPromote && !moves) {
          out = wider(out, x.dtype);
        } else if (out == DType::kUndefined) {
          out = x.dtype;
        }
      }
      if (out == DType::kUndefined) out = any;
    }
    if (out == DType::kUndefined) return;
    for (TensorId t : n.outputs) {
      if (t != kNoTensor && dtype_is_float(g2.tensor(t).dtype)) g2.tensor(t).dtype = out;
    }
  }

  const Graph& g_;
  const RuntimeModel& rt_;
  const LoweringOptions& o_;
  PatternMatcher pm_;
  const BiasSplit& bias_;
  int biases_ = 0;
  std::vector<Group> groups_;
  std::vector<int> group_of_;
  std::vector<int> uf_;
  std::vector<std::vector<int>> raw_readers_;  // every node reading each tensor, views and folds too
};

}  // namespace

Status check_layout(const std::string& layout) {
  if (layout == "nchw" || layout == "nhwc") return Ok{};
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("layout \"{}\" is unknown; expected nchw (PyTorch's default) or nhwc (channels_last)",
                                layout));
}

namespace {

// A compiler's choice of memory format for a graph asked for in NCHW (runtime.h,
// RuntimeLowering::LayoutOptimization): inductor's decide_layout_opt for inference, on the graph's
// convolutions. The FX graph inductor counts holds a node per aten op and per parameter; the ONNX
// graph's nodes, inputs and initializers stand for them.
struct LayoutDecision {
  bool channels_last = false;
  std::string note;  // "" when the graph has no convolution (nothing to decide)
};

LayoutDecision decide_layout(const Graph& g, const RuntimeLowering::LayoutOptimization& lo, const std::string& rt) {
  LayoutDecision d;
  int convs = 0;
  bool unknown = false;
  double total = 0, weighted = 0, grouped = 0;
  for (const Node& n : g.nodes) {
    if ((n.op_type != "Conv" && n.op_type != "ConvTranspose") || !n.domain.empty() || n.inputs.size() < 2 ||
        n.inputs[0] == kNoTensor || n.inputs[1] == kNoTensor || n.outputs.empty() || n.outputs[0] == kNoTensor) {
      continue;
    }
    ++convs;
    // PyTorch's weight layout, as ONNX's: [out, in / groups, window...] ([in, out / groups, ...]
    // transposed); FLOPs as PyTorch's counter gives them, 2 x the larger activation's elements x the
    // weight's elements a channel.
    const Shape& w = g.tensor(n.inputs[1]).shape;
    const Shape& big = g.tensor(n.op_type == "Conv" ? n.outputs[0] : n.inputs[0]).shape;
    if (w.size() < 3) continue;
    double per_channel = 1, elems = 1;
    for (size_t i = 1; i < w.size(); ++i) per_channel *= static_cast<double>(w[i]);
    for (int64_t x : big) elems *= static_cast<double>(x);
    for (int64_t x : w) unknown = unknown || x < 0;
    for (int64_t x : big) unknown = unknown || x < 0;
    const double flops = 2 * elems * per_channel;
    const int64_t groups = n.attr_int("group", 1);
    double cost = lo.other;
    if (groups > 1 && w[1] > 1) {
      cost = lo.grouped;
      grouped += flops;
    } else if (w[0] <= 64 && w[1] <= 64) {
      cost = lo.small;
    } else if (w[0] * 2 <= w[1] && w[2] > 1) {
      cost = lo.in_out;
    }
    total += flops;
    weighted += cost * flops;
  }
  if (convs == 0) return d;
  size_t nodes = g.nodes.size() + 1;  // and the output node
  for (const Tensor& t : g.tensors) nodes += t.role == TensorRole::kInput || t.role == TensorRole::kWeight ? 1 : 0;
  const std::string head = fmt::format("{} keeps this graph in NCHW, as asked (inductor's layout optimization declines: ", rt);
  if (unknown) {
    d.note = head + "a convolution's shape is not fixed)";
  } else if (static_cast<double>(nodes) >= lo.nodes_per_conv * convs) {
    d.note = head + fmt::format("{} convolution(s) among about {} nodes, fewer than one per {:g})", convs, nodes,
                                lo.nodes_per_conv);
  } else if (total > 0 && weighted > total) {
    d.note = head + fmt::format("weighed by channels-last's cost per kind of convolution, the convolutions' FLOPs come "
                                "to {:.3f} of their sum, {:.0f}% of them in grouped convolutions); cuDNN converts "
                                "the operands of its half-precision convolutions",
                                weighted / total, 100 * grouped / total);
  } else {
    d.channels_last = true;
    d.note = fmt::format("{} runs this graph channels-last although NCHW was asked (inductor's layout optimization: "
                         "weighed by channels-last's cost per kind of convolution, the {} convolution(s)' FLOPs come to "
                         "{:.3f} of their sum)",
                         rt, convs, total > 0 ? weighted / total : 1.0);
  }
  return d;
}

}  // namespace

Result<Lowering> lower(const Graph& g, const RuntimeModel& rt, const LoweringOptions& o) {
  if (auto s = check_layout(o.layout); !s) return s.error();
  LoweringOptions eff = o;
  std::string layout_note;
  if (!rt.lowering.layout.use.empty()) {
    eff.layout = rt.lowering.layout.use;
    const bool convs = std::any_of(g.nodes.begin(), g.nodes.end(),
                                   [](const Node& n) { return n.op_type == "Conv" || n.op_type == "ConvTranspose"; });
    if (convs) layout_note = fmt::format("{} runs 4-D activations in {} whatever the layout asked ({}){}", rt.name,
                              rt.lowering.layout.use, o.layout,
                              rt.lowering.layout.why.empty() ? "" : ": " + rt.lowering.layout.why);
  } else if (rt.lowering.layout_optimization.present && o.layout == "nchw") {
    const LayoutDecision d = decide_layout(g, rt.lowering.layout_optimization, rt.name);
    if (d.channels_last) eff.layout = "nhwc";
    layout_note = d.note;
  }
  const BiasSplit bias = split_biases(g, rt, eff);
  Lowerer l(bias.graph, rt, eff, bias);
  auto r = l.run();
  if (!r) return r;
  for (int& n : r->origin) n = n < 0 ? -1 : bias.origin[static_cast<size_t>(n)];
  r->layout = eff.layout;
  if (!layout_note.empty()) r->notes.insert(r->notes.begin(), layout_note);
  return r;
}

}  // namespace gpusim
