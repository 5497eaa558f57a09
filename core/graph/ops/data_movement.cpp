// Data movement: ops that copy, reorder or index elements without arithmetic, plus the sources of
// shape arithmetic (Shape, Size, Constant, ConstantOfShape, Range). These are where PyTorch exports
// compute shapes at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape); each op folds its
// value when its inputs' values are known, so every shape ends static.
// Bytes: views (Reshape, Flatten, Squeeze, Unsqueeze) move nothing; Gather and Slice read only what
// they copy; the others read their inputs once.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "ops/checked.h"
#include "ops/registry.h"

namespace gpusim::ops {
namespace {

// Output value whose element i is src's element index_of(i) (for shape-preserving copies and
// permutations of small values).
template <class F>
void fold_copy(InferContext& c, size_t out_i, const Value& src, F index_of) {
  const int64_t n = c.out(out_i).elements();
  if (!value_fits(n)) return;
  Value r = make_value(src.dtype, c.out(out_i).shape);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = index_of(i);
    if (src.is_int()) {
      r.ints.push_back(src.ints[static_cast<size_t>(k)]);
    } else {
      r.reals.push_back(src.reals[static_cast<size_t>(k)]);
    }
  }
  c.set_value(out_i, std::move(r));
}

void fold_same_order(InferContext& c, size_t out_i = 0) {
  if (const Value* v = c.value(0)) fold_copy(c, out_i, *v, [](int64_t i) { return i; });
}

// Axes from input `idx` (newer opsets) or attribute "axes" (older).
Result<std::vector<int64_t>> axes_from(const InferContext& c, size_t idx, bool* given) {
  *given = false;
  if (c.has_input(idx)) {
    auto v = c.need_value(idx, "axes");
    if (!v) return v.error();
    *given = true;
    return value_ints(**v);
  }
  if (c.has_attr("axes")) {
    *given = true;
    return c.attr_ints("axes");
  }
  return std::vector<int64_t>{};
}

// ---- Shape sources -------------------------------------------------------------------------

Status infer_shape(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  const int64_t r = c.rank(0);
  int64_t start = c.attr_i("start", 0), end = c.attr_i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  const int64_t n = std::max<int64_t>(0, end - start);
  if (auto s = c.set(0, DType::kInt64, {n}); !s) return s;
  Value v = make_value(DType::kInt64, {n});
  for (int64_t i = start; i < end; ++i) v.ints.push_back(c.shape(0)[static_cast<size_t>(i)]);
  c.set_value(0, std::move(v));
  return Ok{};
}

Status infer_size(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  if (auto s = c.set(0, DType::kInt64, {}); !s) return s;
  Value v = make_value(DType::kInt64, {});
  v.ints.push_back(c.in(0).elements());
  c.set_value(0, std::move(v));
  return Ok{};
}

Status infer_constant(InferContext& c) {
  const Node& n = c.node();
  if (n.attributes.size() != 1) {
    return c.fail(fmt::format("needs exactly one value attribute, has {}", n.attributes.size()));
  }
  const auto& [key, a] = *n.attributes.begin();
  Value v;
  if (key == "value" || key == "sparse_value") {
    if (auto s = c.set(0, a.tensor_dtype, a.tensor_shape); !s) return s;
    if (a.tensor) c.set_value(0, *a.tensor);
    return Ok{};
  }
  if (key == "value_float" || key == "value_floats") {
    const bool scalar = key == "value_float";
    v = make_value(DType::kFloat32, scalar ? Shape{} : Shape{static_cast<int64_t>(a.floats.size())});
    v.reals = scalar ? std::vector<double>{a.f} : a.floats;
  } else if (key == "value_int" || key == "value_ints") {
    const bool scalar = key == "value_int";
    v = make_value(DType::kInt64, scalar ? Shape{} : Shape{static_cast<int64_t>(a.ints.size())});
    v.ints = scalar ? std::vector<int64_t>{a.i} : a.ints;
  } else if (key == "value_string" || key == "value_strings") {
    const bool scalar = key == "value_string";
    return c.set(0, DType::kString, scalar ? Shape{} : Shape{static_cast<int64_t>(a.strings.size())});
  } else {
    return c.fail(fmt::format("attribute \"{}\" is not a Constant value attribute", key));
  }
  if (auto s = c.set(0, v.dtype, v.shape); !s) return s;
  c.set_value(0, std::move(v));
  return Ok{};
}

Status infer_constant_of_shape(InferContext& c) {
  auto sv = c.need_value(0, "shape");
  if (!sv) return sv.error();
  Shape shape = value_ints(**sv);
  DType t = DType::kFloat32;
  double fill = 0.0;
  if (const Attribute* a = c.node().attr("value")) {
    t = a->tensor_dtype;
    if (a->tensor && a->tensor->size() > 0) fill = a->tensor->as_real(0);
  }
  for (int64_t d : shape) {
    if (d < 0) return c.fail(fmt::format("shape {} has a negative dim", shape_str(shape)));
  }
  if (auto s = c.set(0, t, shape); !s) return s;
  const int64_t n = c.out(0).elements();
  if (value_fits(n)) {
    Value v = make_value(t, shape);
    for (int64_t i = 0; i < n; ++i) {
      if (v.is_int()) {
        v.ints.push_back(saturate_int64(fill));
      } else {
        v.reals.push_back(fill);
      }
    }
    c.set_value(0, std::move(v));
  }
  return Ok{};
}

Status infer_range(InferContext& c) {
  auto s0 = c.need_value(0, "start");
  if (!s0) return s0.error();
  auto s1 = c.need_value(1, "limit");
  if (!s1) return s1.error();
  auto s2 = c.need_value(2, "delta");
  if (!s2) return s2.error();
  const double start = (*s0)->as_real(0), limit = (*s1)->as_real(0), delta = (*s2)->as_real(0);
  if (delta == 0) return c.fail("delta is 0");
  const auto n = saturate_int64(std::max(0.0, std::ceil((limit - start) / delta)));
  if (auto s = c.set(0, c.dtype(0), {n}); !s) return s;
  if (value_fits(n)) {
    Value v = make_value(c.dtype(0), {n});
    for (int64_t i = 0; i < n; ++i) {
      const double x = start + static_cast<double>(i) * delta;
      if (v.is_int()) {
        v.ints.push_back(saturate_int64(x));
      } else {
        v.reals.push_back(x);
      }
    }
    c.set_value(0, std::move(v));
  }
  return Ok{};
}

// ---- Views ---------------------------------------------------------------------------------

Status infer_reshape(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  std::vector<int64_t> target;
  if (c.opset() < 5 && c.has_attr("shape")) {
    target = c.attr_ints("shape");
  } else {
    auto v = c.need_value(1, "shape");
    if (!v) return v.error();
    target = value_ints(**v);
  }
  const Shape& in = c.shape(0);
  const bool allowzero = c.attr_i("allowzero", 0) != 0;
  Shape out(target.size());
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) {
        return c.fail(fmt::format("shape {} copies dim {} (0) but the input {} has rank {}", shape_str(target), i,
                                  shape_str(in), in.size()));
      }
      d = in[i];
    }
    if (d == -1) {
      if (infer_at >= 0) return c.fail(fmt::format("shape {} has more than one -1", shape_str(target)));
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d < -1) return c.fail(fmt::format("shape {} has the invalid dim {}", shape_str(target), d));
    out[i] = d;
    const auto k = mul_checked(known, d);
    if (!k) return c.fail(fmt::format("shape {}: the product of its dims overflows 64 bits", shape_str(target)));
    known = *k;
  }
  const int64_t total = c.in(0).elements();
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return c.fail(fmt::format("cannot reshape {} ({} elements) to {}: {} is not a multiple of {}", shape_str(in),
                                total, shape_str(target), total, known));
    }
    out[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    return c.fail(fmt::format("cannot reshape {} ({} elements) to {} ({} elements)", shape_str(in), total,
                              shape_str(target), known));
  }
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  fold_same_order(c);
  return Ok{};
}

Status infer_flatten(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  const Shape& in = c.shape(0);
  const int64_t r = c.rank(0);
  int64_t axis = c.attr_i("axis", 1);
  if (axis < -r || axis > r) return c.fail(fmt::format("axis = {} is out of range [{}, {}]", axis, -r, r));
  if (axis < 0) axis += r;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= in[static_cast<size_t>(i)];
  if (auto s = c.set(0, c.dtype(0), {a, b}); !s) return s;
  fold_same_order(c);
  return Ok{};
}

Status infer_squeeze(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  bool given = false;
  auto axes = axes_from(c, 1, &given);
  if (!axes) return axes.error();
  const Shape& in = c.shape(0);
  std::vector<bool> drop(in.size(), false);
  if (!given || axes->empty()) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    for (int64_t a : *axes) {
      auto n = c.axis(a, c.rank(0), "axes");
      if (!n) return n.error();
      if (in[static_cast<size_t>(*n)] != 1) {
        return c.fail(fmt::format("cannot squeeze axis {} of {}: its size is {}, not 1", *n, shape_str(in),
                                  in[static_cast<size_t>(*n)]));
      }
      drop[static_cast<size_t>(*n)] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  fold_same_order(c);
  return Ok{};
}

Status infer_unsqueeze(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  bool given = false;
  auto axes = axes_from(c, 1, &given);
  if (!axes) return axes.error();
  if (axes->empty()) return c.fail("axes is empty; Unsqueeze needs at least one axis");
  const Shape& in = c.shape(0);
  const int64_t r_out = c.rank(0) + static_cast<int64_t>(axes->size());
  std::set<int64_t> ins;
  for (int64_t a : *axes) {
    auto n = c.axis(a, r_out, "axes");
    if (!n) return n.error();
    if (!ins.insert(*n).second) return c.fail(fmt::format("axes {} repeats axis {}", shape_str(*axes), *n));
  }
  Shape out;
  size_t k = 0;
  for (int64_t i = 0; i < r_out; ++i) out.push_back(ins.count(i) ? 1 : in[k++]);
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  fold_same_order(c);
  return Ok{};
}

// ---- Copies --------------------------------------------------------------------------------

Status infer_transpose(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  const Shape& in = c.shape(0);
  std::vector<int64_t> perm = c.attr_ints("perm");
  if (perm.empty()) {
    for (size_t i = in.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != in.size()) {
    return c.fail(fmt::format("perm {} has {} entries, the input {} has rank {}", shape_str(perm), perm.size(),
                              shape_str(in), in.size()));
  }
  Shape out(in.size());
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    auto p = c.axis(perm[i], c.rank(0), "perm");
    if (!p || seen[static_cast<size_t>(*p)]) return c.fail(fmt::format("perm {} is not a permutation", shape_str(perm)));
    seen[static_cast<size_t>(*p)] = true;
    perm[i] = *p;
    out[i] = in[static_cast<size_t>(*p)];
  }
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  if (const Value* v = c.value(0)) {
    const auto in_st = strides_of(in);
    fold_copy(c, 0, *v, [&](int64_t flat) {
      int64_t src = 0;
      for (size_t d = out.size(); d-- > 0;) {
        src += (flat % out[d]) * in_st[static_cast<size_t>(perm[d])];
        flat /= out[d];
      }
      return src;
    });
  }
  return Ok{};
}

Status infer_concat(InferContext& c) {
  if (c.num_inputs() == 0) return c.fail("needs at least one input");
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (auto s = c.need(i, "input"); !s) return s;
  }
  auto axis = c.axis(c.attr_i("axis", 0), c.rank(0), "axis");
  if (!axis) return axis.error();
  const auto ax = static_cast<size_t>(*axis);
  Shape out = c.shape(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    const Shape& s = c.shape(i);
    bool ok = s.size() == out.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = d == ax || s[d] == out[d];
    if (!ok) {
      return c.fail(fmt::format("input {} has shape {}, which does not match input 0 {} outside axis {}", i,
                                shape_str(s), shape_str(c.shape(0)), ax));
    }
    out[ax] += s[ax];
  }
  if (auto st = c.set(0, c.dtype(0), out); !st) return st;
  bool all = true;
  for (size_t i = 0; i < c.num_inputs(); ++i) all = all && c.value(i);
  if (all && value_fits(c.out(0).elements())) {
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < ax; ++d) outer *= out[d];
    for (size_t d = ax + 1; d < out.size(); ++d) inner *= out[d];
    Value r = make_value(c.dtype(0), out);
    for (int64_t o = 0; o < outer; ++o) {
      for (size_t i = 0; i < c.num_inputs(); ++i) {
        const Value* v = c.value(i);
        const int64_t chunk = c.shape(i)[ax] * inner;
        for (int64_t k = 0; k < chunk; ++k) {
          const int64_t src = o * chunk + k;
          if (r.is_int()) {
            r.ints.push_back(v->as_int(src));
          } else {
            r.reals.push_back(v->as_real(src));
          }
        }
      }
    }
    c.set_value(0, std::move(r));
  }
  return Ok{};
}

Status infer_split(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  auto axis = c.axis(c.attr_i("axis", 0), c.rank(0), "axis");
  if (!axis) return axis.error();
  const auto ax = static_cast<size_t>(*axis);
  const Shape& in = c.shape(0);
  const auto n_out = static_cast<int64_t>(c.num_outputs());
  std::vector<int64_t> sizes;
  if (c.has_input(1)) {
    auto v = c.need_value(1, "split");
    if (!v) return v.error();
    sizes = value_ints(**v);
  } else if (c.has_attr("split")) {
    sizes = c.attr_ints("split");
  } else if (c.has_attr("num_outputs")) {
    const int64_t k = c.attr_i("num_outputs", n_out);
    // Checked before the sizes are built: 2^31 parts of a 4-element axis is a loop of 2^31.
    if (k != n_out) {
      return c.fail(fmt::format("num_outputs is {} but the node has {} output{}; they must be equal", k, n_out,
                                n_out == 1 ? "" : "s"));
    }
    const int64_t chunk = (in[ax] + k - 1) / k;
    for (int64_t i = 0; i < k; ++i) sizes.push_back(std::min(chunk, in[ax] - chunk * i));
  } else {
    if (in[ax] % n_out != 0) {
      return c.fail(fmt::format("axis {} of size {} does not split evenly into {} outputs", ax, in[ax], n_out));
    }
    sizes.assign(static_cast<size_t>(n_out), in[ax] / n_out);
  }
  int64_t sum = 0;
  for (int64_t s : sizes) sum += s;
  if (static_cast<int64_t>(sizes.size()) != n_out || sum != in[ax]) {
    return c.fail(fmt::format("split sizes {} (sum {}) do not cover axis {} of size {} with {} outputs",
                              shape_str(sizes), sum, ax, in[ax], n_out));
  }
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape o = in;
    o[ax] = sizes[i];
    if (auto s = c.set(i, c.dtype(0), o); !s) return s;
    if (const Value* v = c.value(0); v && in.size() == 1) {
      const int64_t off = offset;
      fold_copy(c, i, *v, [off](int64_t k) { return off + k; });
    }
    offset += sizes[i];
  }
  return Ok{};
}

// Normalized slice along one axis: start, step and output length.
struct SliceDim {
  int64_t start, step, len;
};

// Overflow-free for any int64 start, end and step (step != 0): a negative start or end counts
// from the end, both are clamped to the dim, and the length is a count of steps within the span.
SliceDim slice_dim(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim == 0) return {0, step, 0};
  if (start < 0) start += dim;  // a negative plus a non-negative dim cannot overflow
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return {start, step, end > start ? 1 + (end - start - 1) / step : 0};
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  // -step overflows for INT64_MIN; any step at or below -dim takes one element.
  const int64_t back = step < -dim ? dim + 1 : -step;
  return {start, step, start > end ? 1 + (start - end - 1) / back : 0};
}

Status infer_slice(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  } else {
    auto s = c.need_value(1, "starts");
    if (!s) return s.error();
    auto e = c.need_value(2, "ends");
    if (!e) return e.error();
    starts = value_ints(**s);
    ends = value_ints(**e);
    if (c.has_input(3)) {
      auto a = c.need_value(3, "axes");
      if (!a) return a.error();
      axes = value_ints(**a);
    }
    if (c.has_input(4)) {
      auto st = c.need_value(4, "steps");
      if (!st) return st.error();
      steps = value_ints(**st);
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.fail(fmt::format("starts {}, ends {}, axes {} and steps {} must have the same length", shape_str(starts),
                              shape_str(ends), shape_str(axes), shape_str(steps)));
  }
  const Shape& in = c.shape(0);
  std::vector<SliceDim> dims(in.size());
  for (size_t d = 0; d < in.size(); ++d) dims[d] = {0, 1, in[d]};
  for (size_t i = 0; i < starts.size(); ++i) {
    auto a = c.axis(axes[i], c.rank(0), "axes");
    if (!a) return a.error();
    if (steps[i] == 0) return c.fail(fmt::format("steps[{}] is 0", i));
    dims[static_cast<size_t>(*a)] = slice_dim(in[static_cast<size_t>(*a)], starts[i], ends[i], steps[i]);
  }
  Shape out(in.size());
  for (size_t d = 0; d < in.size(); ++d) out[d] = dims[d].len;
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  if (const Value* v = c.value(0)) {
    const auto in_st = strides_of(in);
    fold_copy(c, 0, *v, [&](int64_t flat) {
      int64_t src = 0;
      for (size_t d = out.size(); d-- > 0;) {
        src += (dims[d].start + (flat % out[d]) * dims[d].step) * in_st[d];
        flat /= out[d];
      }
      return src;
    });
  }
  return Ok{};
}

void cost_slice(const CostContext& c, OpCost& cost) { cost.bytes_read = c.out(0).bytes(); }

Status infer_gather(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  if (auto s = c.need(1, "indices"); !s) return s;
  auto axis = c.axis(c.attr_i("axis", 0), c.rank(0), "axis");
  if (!axis) return axis.error();
  const Shape& data = c.shape(0);
  const Shape& idx = c.shape(1);
  const auto ax = static_cast<size_t>(*axis);
  Shape out(data.begin(), data.begin() + static_cast<long>(ax));
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + static_cast<long>(ax) + 1, data.end());
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  const Value *vd = c.value(0), *vi = c.value(1);
  if (vd && vi) {
    for (int64_t k = 0; k < vi->size(); ++k) {
      const int64_t j = vi->as_int(k);
      if (j < -data[ax] || j >= data[ax]) {
        return c.fail(fmt::format("index {} is out of range for axis {} of size {}", j, ax, data[ax]));
      }
    }
    int64_t inner = 1;
    for (size_t d = ax + 1; d < data.size(); ++d) inner *= data[d];
    const int64_t n_idx = vi->size();
    fold_copy(c, 0, *vd, [&](int64_t flat) {
      const int64_t in_pos = flat % inner;
      const int64_t k = (flat / inner) % n_idx;
      const int64_t outer = flat / inner / n_idx;
      int64_t j = vi->as_int(k);
      if (j < 0) j += data[ax];
      return (outer * data[ax] + j) * inner + in_pos;
    });
  }
  return Ok{};
}

void cost_gather(const CostContext& c, OpCost& cost) {
  // Reads the gathered rows and the indices, not the whole table.
  cost.bytes_read = c.out(0).bytes() + c.in(1).bytes();
}

Status infer_gather_elements(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  if (auto s = c.need(1, "indices"); !s) return s;
  return c.set(0, c.dtype(0), c.shape(1));
}

Status infer_gather_nd(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  if (auto s = c.need(1, "indices"); !s) return s;
  const Shape &data = c.shape(0), &idx = c.shape(1);
  const int64_t b = c.attr_i("batch_dims", 0);
  if (idx.empty()) return c.fail("indices must have rank >= 1");
  const int64_t last = idx.back();
  if (b + last > static_cast<int64_t>(data.size())) {
    return c.fail(fmt::format("batch_dims {} + indices.shape[-1] {} exceeds the data rank {}", b, last, data.size()));
  }
  Shape out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + b + last, data.end());
  return c.set(0, c.dtype(0), out);
}

void cost_gather_like(const CostContext& c, OpCost& cost) {
  cost.bytes_read = c.out(0).bytes() + c.in(1).bytes();
}

Status infer_scatter(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  return c.set(0, c.dtype(0), c.shape(0));
}

Status infer_expand(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  auto v = c.need_value(1, "shape");
  if (!v) return v.error();
  auto b = broadcast(c.shape(0), value_ints(**v));
  if (!b) return c.fail(b.error().message);
  if (auto s = c.set(0, c.dtype(0), *b); !s) return s;
  if (const Value* x = c.value(0)) {
    const Shape out = *b;
    fold_copy(c, 0, *x, [&](int64_t flat) { return broadcast_index(out, x->shape, flat); });
  }
  return Ok{};
}

Status infer_tile(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  auto v = c.need_value(1, "repeats");
  if (!v) return v.error();
  const auto reps = value_ints(**v);
  const Shape& in = c.shape(0);
  if (reps.size() != in.size()) {
    return c.fail(fmt::format("repeats {} has {} entries, the input {} has rank {}", shape_str(reps), reps.size(),
                              shape_str(in), in.size()));
  }
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (reps[i] < 0) return c.fail(fmt::format("repeats[{}] = {} is negative", i, reps[i]));
    if (__builtin_mul_overflow(in[i], reps[i], &out[i])) {
      return c.fail(fmt::format("repeats[{}] = {} times dim {} overflows 64 bits", i, reps[i], in[i]));
    }
  }
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  if (const Value* x = c.value(0)) {
    const auto in_st = strides_of(in);
    fold_copy(c, 0, *x, [&](int64_t flat) {
      int64_t src = 0;
      for (size_t d = out.size(); d-- > 0;) {
        src += ((flat % out[d]) % in[d]) * in_st[d];
        flat /= out[d];
      }
      return src;
    });
  }
  return Ok{};
}

Status infer_pad(InferContext& c) {
  if (auto s = c.need(0, "data"); !s) return s;
  std::vector<int64_t> pads;
  if (c.opset() < 11) {
    pads = c.attr_ints(c.has_attr("pads") ? "pads" : "paddings");
  } else {
    auto v = c.need_value(1, "pads");
    if (!v) return v.error();
    pads = value_ints(**v);
  }
  const Shape& in = c.shape(0);
  const int64_t r = c.rank(0);
  std::vector<int64_t> axes;
  if (c.has_input(3)) {
    auto a = c.need_value(3, "axes");
    if (!a) return a.error();
    for (int64_t x : value_ints(**a)) {
      auto n = c.axis(x, r, "axes");
      if (!n) return n.error();
      axes.push_back(*n);
    }
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size()) {
    return c.fail(fmt::format("pads {} has {} values, expected {} (begin and end for {} axes)", shape_str(pads),
                              pads.size(), 2 * axes.size(), axes.size()));
  }
  Shape out = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<size_t>(axes[i]);
    out[a] = in[a] + pads[i] + pads[i + axes.size()];
    if (out[a] < 0) return c.fail(fmt::format("pads {} make axis {} negative", shape_str(pads), a));
  }
  return c.set(0, c.dtype(0), out);
}

Status infer_resize(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  const Shape& in = c.shape(0);
  const int64_t r = c.rank(0);
  const std::string& op = c.node().op_type;
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (op == "Upsample" && c.opset() < 9) {
    scales = c.attr_floats("scales");
  } else if (op == "Upsample" || c.opset() < 11) {
    auto v = c.need_value(1, "scales");
    if (!v) return v.error();
    for (int64_t i = 0; i < (*v)->size(); ++i) scales.push_back((*v)->as_real(i));
  } else {
    if (c.has_input(3) && c.in(3).elements() > 0) {
      auto v = c.need_value(3, "sizes");
      if (!v) return v.error();
      sizes = value_ints(**v);
    } else if (c.has_input(2) && c.in(2).elements() > 0) {
      auto v = c.need_value(2, "scales");
      if (!v) return v.error();
      for (int64_t i = 0; i < (*v)->size(); ++i) scales.push_back((*v)->as_real(i));
    } else {
      return c.fail("neither scales (input 2) nor sizes (input 3) is given");
    }
  }
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  const size_t given = sizes.empty() ? scales.size() : sizes.size();
  if (given != axes.size()) {
    return c.fail(fmt::format("{} has {} values, expected {} for a rank-{} input", sizes.empty() ? "scales" : "sizes",
                              given, axes.size(), r));
  }
  for (size_t i = 0; i < scales.size(); ++i) {
    if (!std::isfinite(scales[i]) || scales[i] <= 0) {
      return c.fail(fmt::format("scales[{}] = {} is not a positive finite number; give scales > 0 (or sizes)", i,
                                scales[i]));
    }
  }
  Shape out = in;
  const std::string policy = c.attr_s("keep_aspect_ratio_policy", "stretch");
  if (!sizes.empty() && policy != "stretch") {
    double scale = policy == "not_larger" ? INFINITY : 0.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      const double s = static_cast<double>(sizes[i]) / static_cast<double>(in[static_cast<size_t>(axes[i])]);
      scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      const auto a = static_cast<size_t>(axes[i]);
      out[a] = saturate_int64(std::nearbyint(static_cast<double>(in[a]) * scale));
    }
  } else {
    for (size_t i = 0; i < axes.size(); ++i) {
      auto a = c.axis(axes[i], r, "axes");
      if (!a) return a.error();
      const auto ax = static_cast<size_t>(*a);
      out[ax] = sizes.empty() ? saturate_int64(std::floor(static_cast<double>(in[ax]) * scales[i] + 1e-9)) : sizes[i];
    }
  }
  return c.set(0, c.dtype(0), out);
}

void cost_resize(const CostContext& c, OpCost& cost) {
  const std::string mode = c.attr_s("mode", "nearest");
  const int64_t n = c.out_elems();
  const Shape& s = c.out(0).shape;
  const int64_t spatial = std::max<int64_t>(1, static_cast<int64_t>(s.size()) - 2);
  if (mode == "linear" || mode == "bilinear" || mode == "trilinear") {
    cost.flops.fma = n * 3 * ((int64_t{1} << spatial) - 1);  // lerps over the 2^d corners
  } else if (mode == "cubic") {
    cost.flops.fma = n * 8 * spatial * 4;
  }
  cost.bytes_read = std::min(c.in(0).bytes(), c.out(0).bytes());
}

Status infer_depth_space(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  const Shape& in = c.shape(0);
  const int64_t b = c.attr_i("blocksize", 0);
  if (in.size() != 4) return c.fail(fmt::format("input {} must be 4-D (N, C, H, W)", shape_str(in)));
  if (b <= 0) return c.fail(fmt::format("blocksize = {} must be positive", b));
  // blocksize^2 and the grown dims in checked arithmetic: a blocksize of 2^62 squared wrapped to 0
  // and the modulo by it ended the process (SIGFPE).
  const auto b2 = mul_checked(b, b);
  if (!b2) return c.fail(fmt::format("blocksize = {}: its square overflows 64 bits", b));
  if (c.node().op_type == "DepthToSpace") {
    if (in[1] % *b2 != 0) return c.fail(fmt::format("channels {} are not a multiple of blocksize^2 = {}", in[1], *b2));
    const auto h = mul_checked(in[2], b), w = mul_checked(in[3], b);
    if (!h || !w) return c.fail(fmt::format("H {} and W {} times blocksize {} overflow 64 bits", in[2], in[3], b));
    return c.set(0, c.dtype(0), {in[0], in[1] / *b2, *h, *w});
  }
  if (in[2] % b != 0 || in[3] % b != 0) {
    return c.fail(fmt::format("H {} and W {} must be multiples of blocksize {}", in[2], in[3], b));
  }
  const auto ch = mul_checked(in[1], *b2);
  if (!ch) return c.fail(fmt::format("channels {} times blocksize^2 = {} overflow 64 bits", in[1], *b2));
  return c.set(0, c.dtype(0), {in[0], *ch, in[2] / b, in[3] / b});
}

Status infer_onehot(InferContext& c) {
  if (auto s = c.need(0, "indices"); !s) return s;
  auto d = c.need_value(1, "depth");
  if (!d) return d.error();
  if (auto s = c.need(2, "values"); !s) return s;
  const int64_t depth = (*d)->as_int(0);
  Shape out = c.shape(0);
  auto a = c.axis(c.attr_i("axis", -1), static_cast<int64_t>(out.size()) + 1, "axis");
  if (!a) return a.error();
  out.insert(out.begin() + *a, depth);
  return c.set(0, c.dtype(2), out);
}

Status infer_nonzero(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  const Value* v = c.value(0);
  if (!v) {
    return make_error(ErrorCode::kDataDependent, fmt::format("its output size depends on the run-time values of \"{}\"; gpusim needs static shapes "
                              "(export without NonZero on this path, e.g. avoid boolean-mask indexing)",
                              c.in(0).name));
  }
  int64_t nz = 0;
  for (int64_t i = 0; i < v->size(); ++i) nz += v->as_real(i) != 0;
  return c.set(0, DType::kInt64, {c.rank(0), nz});
}

Status infer_same(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  DType t = c.dtype(0);
  if (c.has_attr("dtype")) {
    if (auto d = dtype_from_onnx(static_cast<int>(c.attr_i("dtype", 1)))) t = *d;
  }
  return c.set(0, t, c.shape(0));
}

Status infer_random(InferContext& c) {
  auto t = dtype_from_onnx(static_cast<int>(c.attr_i("dtype", 1)));
  if (!t) return c.fail(fmt::format("dtype = {} is not an ONNX tensor type", c.attr_i("dtype", 1)));
  return c.set(0, *t, c.attr_ints("shape"));
}

Status infer_multinomial(InferContext& c) {
  if (auto s = c.need(0, "input"); !s) return s;
  auto t = dtype_from_onnx(static_cast<int>(c.attr_i("dtype", 6)));
  return c.set(0, t.value_or(DType::kInt32), {c.shape(0)[0], c.attr_i("sample_size", 1)});
}

// ai.onnx.preview.training Gradient: the gradient of y with respect to each input xs[i] has xs[i]'s
// shape. Counted like one backward elementwise pass over the outputs.
Status infer_gradient(InferContext& c) {
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    if (auto s = c.need(i, "xs"); !s) return s;
    if (auto s = c.set(i, c.dtype(i), c.shape(i)); !s) return s;
  }
  return Ok{};
}

void cost_gradient(const CostContext& c, OpCost& cost) {
  for (size_t i = 0; i < c.num_outputs(); ++i) cost.flops.fma += 2 * c.out_elems(i);
}

void cost_view(const CostContext&, OpCost& cost) { cost.bytes_read = cost.bytes_written = 0; }
void cost_no_read(const CostContext&, OpCost& cost) { cost.bytes_read = 0; }
void cost_compare_in(const CostContext& c, OpCost& cost) { cost.flops.compare = c.in_elems(0); }
void cost_trilu(const CostContext& c, OpCost& cost) { cost.flops.compare = c.out_elems(); }

}  // namespace

std::vector<OpDef> data_movement_ops() {
  const OpClass dm = OpClass::kDataMovement;
  return {
      {"Shape", "", dm, infer_shape, cost_view},
      {"Size", "", dm, infer_size, cost_view},
      {"Constant", "", dm, infer_constant, cost_no_read},
      {"ConstantOfShape", "", dm, infer_constant_of_shape, cost_no_read},
      {"Range", "", dm, infer_range, cost_no_read},
      {"Reshape", "", dm, infer_reshape, cost_view},
      {"Flatten", "", dm, infer_flatten, cost_view},
      {"Squeeze", "", dm, infer_squeeze, cost_view},
      {"Unsqueeze", "", dm, infer_unsqueeze, cost_view},
      {"Transpose", "", dm, infer_transpose, nullptr},
      {"Concat", "", dm, infer_concat, nullptr},
      {"Split", "", dm, infer_split, nullptr},
      {"Slice", "", dm, infer_slice, cost_slice},
      {"Gather", "", dm, infer_gather, cost_gather},
      {"GatherElements", "", dm, infer_gather_elements, cost_gather_like},
      {"GatherND", "", dm, infer_gather_nd, cost_gather_like},
      {"ScatterND", "", dm, infer_scatter, nullptr},
      {"ScatterElements", "", dm, infer_scatter, nullptr},
      {"Scatter", "", dm, infer_scatter, nullptr},
      {"Expand", "", dm, infer_expand, nullptr},
      {"Tile", "", dm, infer_tile, nullptr},
      {"Pad", "", dm, infer_pad, nullptr},
      {"Resize", "", dm, infer_resize, cost_resize},
      {"Upsample", "", dm, infer_resize, cost_resize},
      {"DepthToSpace", "", dm, infer_depth_space, nullptr},
      {"SpaceToDepth", "", dm, infer_depth_space, nullptr},
      {"OneHot", "", dm, infer_onehot, cost_no_read},
      {"NonZero", "", dm, infer_nonzero, cost_compare_in},
      {"Trilu", "", dm, infer_same, cost_trilu},
      {"ReverseSequence", "", dm, infer_same, nullptr},
      {"EyeLike", "", dm, infer_same, cost_no_read},
      {"RandomNormalLike", "", OpClass::kElementwise, infer_same, cost_no_read},
      {"RandomUniformLike", "", OpClass::kElementwise, infer_same, cost_no_read},
      {"Bernoulli", "", OpClass::kElementwise, infer_same, nullptr},
      {"RandomNormal", "", OpClass::kElementwise, infer_random, nullptr},
      {"RandomUniform", "", OpClass::kElementwise, infer_random, nullptr},
      {"Multinomial", "", OpClass::kElementwise, infer_multinomial, nullptr},
      {"Gradient", "ai.onnx.preview.training", OpClass::kElementwise, infer_gradient, cost_gradient},
  };
}

}  // namespace gpusim::ops
