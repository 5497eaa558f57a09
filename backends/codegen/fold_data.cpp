// Data movement as index math (data_index.h): the windows of Slice and Pad, and the data movement
// an element-wise kernel reads through its loads instead of a copy kernel.
#include <fmt/format.h>

#include <algorithm>

#include "data_index.h"
#include "gpusim/op_catalog.h"
#include "gpusim/patterns.h"
#include "node_attrs.h"

namespace gpusim::codegen {

std::string sum_terms(const std::vector<std::string>& terms) {
  std::string e;
  for (const auto& t : terms) {
    if (t == "0" || t.empty()) continue;
    e += (e.empty() ? "" : " + ") + t;
  }
  return e.empty() ? "0" : "(" + e + ")";
}

std::string times(const std::string& e, int64_t k) {
  if (e == "0" || k == 0) return "0";
  return k == 1 ? e : fmt::format("{} * {}", e, k);
}

Result<SliceWindow> slice_window(const GenContext& c, const Node& n) {
  const Shape& xs = c.tensor(n.inputs[0]).shape;
  std::vector<int64_t> starts, axes, steps;
  if (c.g.opset < 10) {
    starts = node_ints(n, "starts");
    axes = node_ints(n, "axes");
  } else {
    const ConstInput s = const_input(c.g, n, 1), a = const_input(c.g, n, 3), st = const_input(c.g, n, 4);
    if (!s.known) return c.unsupported(n, "the starts input is not a constant");
    if (a.present && !a.known) return c.unsupported(n, "the axes input is not a constant");
    if (st.present && !st.known) return c.unsupported(n, "the steps input is not a constant");
    starts = s.ints;
    axes = a.ints;
    steps = st.ints;
  }
  for (size_t k = axes.size(); k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  steps.resize(starts.size(), 1);
  SliceWindow w;
  w.start.assign(xs.size(), 0);
  w.step.assign(xs.size(), 1);
  for (size_t k = 0; k < starts.size() && k < axes.size(); ++k) {
    int64_t d = axes[k];
    if (!normalize_axis(d, xs.size())) return c.unsupported(n, fmt::format("axis {} is out of range", axes[k]));
    const int64_t dim = xs[static_cast<size_t>(d)];
    if (steps[k] == 0) return c.unsupported(n, "a step is 0");
    int64_t s = starts[k] < 0 ? starts[k] + dim : starts[k];
    s = steps[k] > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, std::max<int64_t>(dim - 1, 0));
    w.start[static_cast<size_t>(d)] = s;
    w.step[static_cast<size_t>(d)] = steps[k];
  }
  return w;
}

Result<PadWindow> pad_window(const GenContext& c, const Node& n) {
  const Shape& xs = c.tensor(n.inputs[0]).shape;
  const bool attrs = c.g.opset < 11;
  PadWindow w;
  std::vector<int64_t> pads;
  if (attrs) {
    pads = node_ints(n, n.attr("pads") ? "pads" : "paddings");
    w.value = node_float(n, "value", 0.0);
  } else {
    const ConstInput p = const_input(c.g, n, 1);
    if (!p.known) return c.unsupported(n, "the pads input is not a constant");
    pads = p.ints;
    const ConstInput cv = const_input(c.g, n, 2);
    if (cv.known && !cv.reals.empty()) {
      w.value = cv.reals[0];
    } else if (cv.present && !cv.known) {
      w.value_known = false;
    }
  }
  std::vector<int64_t> axes;
  const ConstInput ai = attrs ? ConstInput{} : const_input(c.g, n, 3);
  if (ai.present && !ai.known) return c.unsupported(n, "the axes input is not a constant");
  if (ai.present) {
    for (int64_t a : ai.ints) {
      int64_t v = a;
      if (!normalize_axis(v, xs.size())) return c.unsupported(n, fmt::format("axis {} is out of range", a));
      axes.push_back(v);
    }
  } else {
    for (size_t d = 0; d < xs.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  }
  w.begin.assign(xs.size(), 0);
  for (size_t k = 0; k < axes.size() && k < pads.size(); ++k) w.begin[static_cast<size_t>(axes[k])] = pads[k];
  w.mode = node_string(n, "mode", "constant");
  if (w.mode != "constant" && w.mode != "reflect" && w.mode != "edge" && w.mode != "wrap") {
    return c.unsupported(n, fmt::format("mode \"{}\" is not constant/reflect/edge/wrap", w.mode));
  }
  return w;
}

FoldedData::FoldedData(const GenContext& c, ArgList& args) : c_(c), args_(args) {
  const auto& ops = folded_data_movement();
  folded_.assign(c.k.nodes.size(), false);
  computed_.assign(c.g.tensors.size(), false);
  for (size_t pos = 0; pos < c.k.nodes.size(); ++pos) {
    const Node& n = c.node(pos);
    const bool fold = std::find(ops.begin(), ops.end(), n.op_type) != ops.end() && !n.inputs.empty() &&
                      n.inputs[0] != kNoTensor && c.k.nodes.size() > 1;
    folded_[pos] = fold;
    for (TensorId t : n.outputs) {
      if (t == kNoTensor) continue;
      if (fold) {
        pos_of_[c.root(t)] = pos;
      } else {
        computed_[static_cast<size_t>(c.root(t))] = true;
      }
    }
  }
}

bool FoldedData::folded(size_t pos) const { return pos < folded_.size() && folded_[pos]; }

bool FoldedData::produces(TensorId t) const { return t != kNoTensor && pos_of_.count(c_.root(t)) > 0; }

Result<std::string> FoldedData::value_at(TensorId t, const std::string& index, std::string& code) {
  const TensorId r = c_.root(t);
  auto it = pos_of_.find(r);
  if (it == pos_of_.end()) {
    if (computed_[static_cast<size_t>(r)]) {
      return c_.unsupported(c_.node(0), fmt::format("folded data movement reads \"{}\", computed in this kernel at "
                                                    "another index; data movement folds only over values loaded "
                                                    "from memory",
                                                    c_.tensor(t).name));
    }
    if (c_.tensor(t).elements() > kMaxIndex) return c_.unsupported(c_.node(0), "over 2^31 elements: 32-bit indexing");
    return args_.load(t, index);
  }
  const Node& n = c_.node(it->second);
  const int id = counter_++;
  const std::string ix = fmt::format("fx{}", id);
  code += fmt::format("    int {} = {};\n", ix, index);
  const Shape& xs = c_.tensor(n.inputs[0]).shape;
  if (c_.tensor(n.inputs[0]).elements() > kMaxIndex) return c_.unsupported(n, "over 2^31 elements: 32-bit indexing");
  const auto st = strides_of(xs);
  // The output of n this tensor is (Split has several).
  size_t out = 0;
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    if (n.outputs[o] != kNoTensor && c_.root(n.outputs[o]) == r) out = o;
  }
  const Shape& ys = c_.tensor(n.outputs[out]).shape;
  const std::string& op = n.op_type;
  if (op == "Transpose") {
    std::vector<int64_t> perm = node_ints(n, "perm");
    if (perm.empty()) {
      for (size_t d = xs.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    }
    if (perm.size() != xs.size()) return c_.unsupported(n, "perm does not match the input rank");
    std::vector<std::string> terms;
    for (size_t d = 0; d < perm.size(); ++d) {
      int64_t p = perm[d];
      if (!normalize_axis(p, xs.size())) return c_.unsupported(n, fmt::format("perm entry {} is out of range", perm[d]));
      terms.push_back(times(coord(ys, d, ix), st[static_cast<size_t>(p)]));
    }
    return value_at(n.inputs[0], sum_terms(terms), code);
  }
  if (op == "Slice") {
    auto w = slice_window(c_, n);
    if (!w) return w.error();
    int64_t base = 0;
    std::vector<std::string> terms;
    for (size_t d = 0; d < xs.size(); ++d) {
      base += w->start[d] * st[d];
      terms.push_back(times(coord(ys, d, ix), w->step[d] * st[d]));
    }
    terms.push_back(base ? std::to_string(base) : "0");
    return value_at(n.inputs[0], sum_terms(terms), code);
  }
  if (op == "Expand") return value_at(n.inputs[0], broadcast_index(ys, xs, ix), code);
  if (op == "Split") {
    int64_t axis = node_int(n, "axis", 0);
    if (!normalize_axis(axis, xs.size())) return c_.unsupported(n, fmt::format("axis {} is out of range", axis));
    int64_t off = 0;
    for (size_t o = 0; o < out; ++o) off += c_.tensor(n.outputs[o]).shape[static_cast<size_t>(axis)];
    std::vector<std::string> terms;
    for (size_t d = 0; d < xs.size(); ++d) terms.push_back(times(coord(ys, d, ix), st[d]));
    terms.push_back(std::to_string(off * st[static_cast<size_t>(axis)]));
    return value_at(n.inputs[0], sum_terms(terms), code);
  }
  const bool is_int = args_.is_int(n.outputs[out]);
  const char* vt = is_int ? "int" : "float";
  const std::string v = fmt::format("fv{}", id);
  if (op == "Concat") {
    int64_t axis = node_int(n, "axis", 0);
    if (!normalize_axis(axis, ys.size())) return c_.unsupported(n, fmt::format("axis {} is out of range", axis));
    const auto ax = static_cast<size_t>(axis);
    int64_t inner = 1;
    for (size_t d = ax + 1; d < ys.size(); ++d) inner *= ys[d];
    code += fmt::format("    int fa{0} = {1};\n    int fo{0} = {2} / {3};\n    int fi{0} = {4};\n    {5} {6} = {7};\n", id,
                        coord(ys, ax, ix), ix, ys[ax] * inner, inner == 1 ? "0" : fmt::format("{} % {}", ix, inner), vt,
                        v, is_int ? "0" : "0.0f");
    int64_t off = 0;
    bool first = true;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (!has_input(n, k)) continue;
      const Shape& s = c_.tensor(n.inputs[k]).shape;
      const int64_t e = s.size() > ax ? s[ax] : 0;
      if (e == 0) continue;
      std::string inner_code;
      auto val = value_at(n.inputs[k], fmt::format("(fo{0} * {1} + fa{0} - {2}) * {3} + fi{0}", id, e, off, inner),
                          inner_code);
      if (!val) return val.error();
      code += fmt::format("    {}if (fa{} < {}) {{\n{}    {} = {}({});\n    }}\n", first ? "" : "else ", id, off + e,
                          inner_code, v, vt, *val);
      first = false;
      off += e;
    }
    return v;
  }
  if (op == "Pad") {
    auto w = pad_window(c_, n);
    if (!w) return w.error();
    if (w->mode != "constant" || !w->value_known) {
      return c_.unsupported(n, "only a constant pad with a constant value folds into its reader");
    }
    code += fmt::format("    bool fin{0} = true;\n    int fs{0} = 0;\n", id);
    for (size_t d = 0; d < xs.size(); ++d) {
      const std::string cd = coord(ys, d, ix);
      if (w->begin[d] == 0 && ys[d] <= xs[d]) {
        code += fmt::format("    fs{} = fs{} + {};\n", id, id, times(cd, st[d]));
        continue;
      }
      code += fmt::format("    {{\n      int x = {} - {};\n      if (x < 0 || x >= {}) fin{} = false;\n      fs{} = fs{} + "
                          "{};\n    }}\n",
                          cd, w->begin[d], xs[d], id, id, id, times("x", st[d]));
    }
    std::string inner_code;
    auto val = value_at(n.inputs[0], fmt::format("fs{}", id), inner_code);
    if (!val) return val.error();
    code += fmt::format("    {} {} = {};\n    if (fin{}) {{\n{}    {} = {}({});\n    }}\n", vt, v,
                        is_int ? std::to_string(static_cast<int64_t>(w->value)) : float_lit(w->value), id, inner_code, v,
                        vt, *val);
    return v;
  }
  return c_.unsupported(n, "is not data movement gpusim folds into its reader");
}

}  // namespace gpusim::codegen
