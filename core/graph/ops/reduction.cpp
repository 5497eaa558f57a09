// Reductions over axes (Reduce*, ArgMax/ArgMin, TopK, CumSum). Every input element is read once;
// FLOPs per input element by op are in cost_reduce. Reductions of known small values (ReduceProd of
// a shape, say) are folded.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "ops/checked.h"
#include "ops/registry.h"

namespace gpusim::ops {
namespace {

// The reduced axes (normalized, sorted), or all axes. `noop` is set when the op is an identity
// (empty axes with noop_with_empty_axes=1).
Result<std::vector<int64_t>> reduce_axes(const InferContext& c, bool* noop) {
  *noop = false;
  const int64_t r = c.rank(0);
  std::vector<int64_t> axes;
  bool given = false;
  if (c.has_input(1)) {
    auto v = c.need_value(1, "axes");
    if (!v) return v.error();
    axes = value_ints(**v);
    given = true;
  } else if (c.has_attr("axes")) {
    axes = c.attr_ints("axes");
    given = true;
  }
  if (!given || axes.empty()) {
    if (c.attr_i("noop_with_empty_axes", 0) != 0) {
      *noop = true;
      return axes;
    }
    axes.resize(static_cast<size_t>(r));
    for (int64_t i = 0; i < r; ++i) axes[static_cast<size_t>(i)] = i;
    return axes;
  }
  std::set<int64_t> uniq;
  for (int64_t a : axes) {
    auto n = c.axis(a, r, "axes");
    if (!n) return n.error();
    uniq.insert(*n);
  }
  return std::vector<int64_t>(uniq.begin(), uniq.end());
}

Status infer_reduce(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  bool noop = false;
  auto axes = reduce_axes(c, &noop);
  if (!axes) return axes.error();
  const Shape& in = c.shape(0);
  if (noop) return c.set(0, c.dtype(0), in);
  const bool keep = c.attr_i("keepdims", 1) != 0;
  Shape out;
  std::vector<bool> red(in.size(), false);
  for (int64_t a : *axes) red[static_cast<size_t>(a)] = true;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!red[i]) {
      out.push_back(in[i]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  const std::string& op = c.node().op_type;
  const Value* v = c.value(0);
  if (!v || !(op == "ReduceSum" || op == "ReduceProd" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceMean")) {
    return Ok{};
  }
  // Fold: accumulate each input element into its output slot.
  const int64_t n_out = c.out(0).elements();
  std::vector<double> acc(static_cast<size_t>(n_out), op == "ReduceProd" ? 1.0 : (op == "ReduceMax" ? -INFINITY : (op == "ReduceMin" ? INFINITY : 0.0)));
  std::vector<int64_t> count(static_cast<size_t>(n_out), 0);
  const auto in_strides = strides_of(in);
  for (int64_t e = 0; e < v->size(); ++e) {
    int64_t o = 0, rem = e;
    for (size_t d = 0; d < in.size(); ++d) {
      const int64_t coord = rem / in_strides[d];
      rem %= in_strides[d];
      if (!red[d]) o = o * in[d] + coord;
    }
    const double x = v->as_real(e);
    double& a = acc[static_cast<size_t>(o)];
    if (op == "ReduceSum" || op == "ReduceMean") a += x;
    if (op == "ReduceProd") a *= x;
    if (op == "ReduceMax") a = std::max(a, x);
    if (op == "ReduceMin") a = std::min(a, x);
    ++count[static_cast<size_t>(o)];
  }
  Value r = make_value(c.dtype(0), out);
  for (size_t i = 0; i < acc.size(); ++i) {
    const double x = op == "ReduceMean" && count[i] ? acc[i] / static_cast<double>(count[i]) : acc[i];
    if (r.is_int()) {
      r.ints.push_back(saturate_int64(x));
    } else {
      r.reals.push_back(x);
    }
  }
  c.set_value(0, std::move(r));
  return Ok{};
}

void cost_reduce(const CostContext& c, OpCost& cost) {
  const std::string& op = c.node().op_type;
  const int64_t in = c.in_elems(0), out = c.out_elems();
  if (op == "ReduceSum") cost.flops.fma = in;
  if (op == "ReduceMean") cost.flops.fma = in + out;
  if (op == "ReduceProd") cost.flops.fma = in;
  if (op == "ReduceMax" || op == "ReduceMin") cost.flops.compare = in;
  if (op == "ReduceSumSquare") cost.flops.fma = 2 * in;
  if (op == "ReduceL1") { cost.flops.fma = in; cost.flops.compare = in; }
  if (op == "ReduceL2") { cost.flops.fma = 2 * in; cost.flops.transcendental = out; }
  if (op == "ReduceLogSum") { cost.flops.fma = in; cost.flops.transcendental = out; }
  if (op == "ReduceLogSumExp") {
    cost.flops.compare = in;
    cost.flops.fma = 2 * in;
    cost.flops.transcendental = in + out;
  }
}

Status infer_arg(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  auto a = c.axis(c.attr_i("axis", 0), c.rank(0), "axis");
  if (!a) return a.error();
  Shape out = c.shape(0);
  if (c.attr_i("keepdims", 1) != 0) {
    out[static_cast<size_t>(*a)] = 1;
  } else {
    out.erase(out.begin() + *a);
  }
  return c.set(0, DType::kInt64, out);
}

void cost_arg(const CostContext& c, OpCost& cost) { cost.flops.compare = c.in_elems(0); }

Status infer_topk(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  int64_t k;
  if (c.opset() < 10 || !c.has_input(1)) {
    k = c.attr_i("k", -1);
  } else {
    auto v = c.need_value(1, "K");
    if (!v) return v.error();
    k = (*v)->as_int(0);
  }
  auto a = c.axis(c.attr_i("axis", -1), c.rank(0), "axis");
  if (!a) return a.error();
  Shape out = c.shape(0);
  if (k < 0 || k > out[static_cast<size_t>(*a)]) {
    return c.fail(fmt::format("K = {} is outside [0, {}] (the size of axis {})", k, out[static_cast<size_t>(*a)], *a));
  }
  out[static_cast<size_t>(*a)] = k;
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  return c.num_outputs() > 1 ? c.set(1, DType::kInt64, out) : Status(Ok{});
}

void cost_topk(const CostContext& c, OpCost& cost) {
  // A partial selection: about log2(K) comparisons per input element.
  const Shape& out = c.out(0).shape;
  int64_t axis = c.attr_i("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(out.size());
  const int64_t k = out.empty() ? 1 : out[static_cast<size_t>(axis)];
  cost.flops.compare = c.in_elems(0) * std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::log2(static_cast<double>(std::max<int64_t>(k, 2))))));
}

Status infer_same(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  return c.set(0, c.dtype(0), c.shape(0));
}

void cost_cumsum(const CostContext& c, OpCost& cost) { cost.flops.fma = c.out_elems(); }

}  // namespace

std::vector<OpDef> reduction_ops() {
  std::vector<OpDef> v;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    v.push_back({op, "", OpClass::kReduction, infer_reduce, cost_reduce});
  }
  v.push_back({"ArgMax", "", OpClass::kReduction, infer_arg, cost_arg});
  v.push_back({"ArgMin", "", OpClass::kReduction, infer_arg, cost_arg});
  v.push_back({"TopK", "", OpClass::kReduction, infer_topk, cost_topk});
  v.push_back({"CumSum", "", OpClass::kReduction, infer_same, cost_cumsum});
  return v;
}

}  // namespace gpusim::ops
