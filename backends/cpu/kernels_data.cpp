// CPU reference kernels for data movement (core/graph/ops/data_movement.cpp: shape sources, views,
// copies, gathers/scatters, Pad, Resize, random ops, the training op Gradient) and ONNX sequences
// (core/graph/ops/sequence.cpp). Every copy works for any dtype: elements move through copy_el,
// which writes whichever of r/i/s the destination dtype uses. Output shapes come from the
// importer, except where the shape is data-dependent (NonZero, sequence elements). Random ops draw
// from a std::mt19937_64 seeded by the node's `seed` (values cannot match other runtimes).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "reference.h"

namespace gpusim::cpu {
namespace {

using Ints = std::vector<int64_t>;

// ---- Helpers ---------------------------------------------------------------------------------

// Element j of b from a value given both ways (exact for int64 and for floats).
void put(HostTensor& b, int64_t j, double real, int64_t integer) {
  if (b.is_real()) {
    b.r[j] = real;
  } else if (!b.is_string()) {
    b.i[j] = integer;
  }
}
void set_el(HostTensor& b, int64_t j, double v) {
  if (b.is_real()) {
    b.r[j] = v;
  } else if (!b.is_string()) {
    b.i[j] = static_cast<int64_t>(v);
  }
}
// Element k of a small constant value (exact for int64 values).
void put_value(HostTensor& b, int64_t j, const Value& v, int64_t k) {
  if (v.is_int()) {
    put(b, j, static_cast<double>(v.ints[k]), v.ints[k]);
  } else {
    set_el(b, j, v.reals[k]);
  }
}

// Element k of a to element j of b, whichever of r/i/s b's dtype uses.
void copy_el(const HostTensor& a, int64_t k, HostTensor& b, int64_t j) {
  if (b.is_string()) {
    b.s[j] = a.is_string() ? a.s[k] : std::string();
  } else if (b.is_real()) {
    b.r[j] = a.real(k);
  } else {
    b.i[j] = a.integer(k);
  }
}

Ints strides(const Shape& s) {
  Ints st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

int64_t prod(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  to = std::min(to, s.size());
  if (from >= to) return 1;
  return std::accumulate(s.begin() + static_cast<long>(from), s.begin() + static_cast<long>(to), int64_t{1},
                         std::multiplies<>());
}

// Calls f(coords, flat) for every element of shape s, in row-major order.
template <class F>
void for_each_index(const Shape& s, F f) {
  const int64_t n = prod(s);
  Ints c(s.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(c, flat);
    for (size_t d = s.size(); d-- > 0;) {
      if (++c[d] < s[d]) break;
      c[d] = 0;
    }
  }
}

// Flat index into `in` (right-aligned broadcast) of the element at out-coords c.
int64_t bcast(const Ints& c, const Shape& in, const Ints& in_st) {
  const size_t off = c.size() - in.size();
  int64_t k = 0;
  for (size_t d = 0; d < in.size(); ++d) k += (in[d] == 1 ? 0 : c[off + d]) * in_st[d];
  return k;
}

// Offset (strides st of shape s) of coords c with c[ax] replaced by the index x (negative wraps).
int64_t elem_offset(const Ints& c, size_t ax, int64_t x, const Shape& s, const Ints& st) {
  int64_t k = 0;
  for (size_t d = 0; d < c.size(); ++d) k += (d == ax ? (x < 0 ? x + s[d] : x) : c[d]) * st[d];
  return k;
}

const HostTensor* opt_in(const KernelArgs& a, size_t k) { return a.has(k) ? a.in[k] : nullptr; }

Ints ints_of(const HostTensor* t) {
  Ints v;
  for (int64_t k = 0; t && k < t->elements(); ++k) v.push_back(t->integer(k));
  return v;
}

int64_t norm_axis(int64_t a, int64_t r) { return a < 0 ? a + r : a; }

// out = in, element by element (views: Reshape, Flatten, Squeeze, Unsqueeze, Identity-like).
void copy_all(const HostTensor& in, HostTensor& out) {
  out.allocate();
  const int64_t n = std::min(in.elements(), out.elements());
  for (int64_t k = 0; k < n; ++k) copy_el(in, k, out, k);
}

// out[j] = in[src(coords_j)] over out's shape.
template <class F>
void map_copy(const HostTensor& in, HostTensor& out, F src) {
  out.allocate();
  for_each_index(out.shape, [&](const Ints& c, int64_t j) { copy_el(in, src(c), out, j); });
}

// Part of `in` along `axis`: [off, off+len); drops the axis when !keep (len must be 1).
HostTensor slice_axis(const HostTensor& in, size_t axis, int64_t off, int64_t len, bool keep) {
  HostTensor t;
  t.dtype = in.dtype;
  t.shape = in.shape;
  t.shape[axis] = len;
  const Ints st = strides(in.shape);
  map_copy(in, t, [&](const Ints& c) {
    int64_t k = 0;
    for (size_t d = 0; d < c.size(); ++d) k += (d == axis ? c[d] + off : c[d]) * st[d];
    return k;
  });
  if (!keep) t.shape.erase(t.shape.begin() + static_cast<long>(axis));
  return t;
}

// Concatenation of parts along axis; each part's extent along the axis is ext[i].
void concat_into(const std::vector<const HostTensor*>& parts, const Ints& ext, size_t axis, HostTensor& out) {
  out.allocate();
  const int64_t outer = prod(out.shape, 0, axis), inner = prod(out.shape, axis + 1);
  int64_t j = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < parts.size(); ++i) {
      const int64_t chunk = ext[i] * inner;
      for (int64_t k = 0; k < chunk; ++k) copy_el(*parts[i], o * chunk + k, out, j++);
    }
  }
}

// Reduction for Scatter*: none/add/mul/max/min.
Status scatter_apply(KernelArgs& a, HostTensor& o, int64_t j, const HostTensor& u, int64_t k, const std::string& red) {
  if (red == "none") {
    copy_el(u, k, o, j);
    return Ok{};
  }
  if (red != "add" && red != "mul" && red != "max" && red != "min") {
    return a.fail(fmt::format("reduction \"{}\" is not none/add/mul/max/min", red));
  }
  if (o.is_string()) return a.fail("reduction on a string tensor");
  if (o.is_real()) {
    double& x = o.r[j];
    const double y = u.real(k);
    x = red == "add" ? x + y : red == "mul" ? x * y : red == "max" ? std::max(x, y) : std::min(x, y);
  } else {
    int64_t& x = o.i[j];
    const int64_t y = u.integer(k);
    x = red == "add" ? x + y : red == "mul" ? x * y : red == "max" ? std::max(x, y) : std::min(x, y);
  }
  return Ok{};
}

// ---- Shape sources ---------------------------------------------------------------------------

Status k_shape(KernelArgs& a) {
  const Shape& s = a.in[0]->shape;
  const auto r = static_cast<int64_t>(s.size());
  const int64_t start = std::clamp<int64_t>(norm_axis(a.attr_i("start", 0), r), 0, r);
  const int64_t end = std::clamp<int64_t>(norm_axis(a.attr_i("end", r), r), 0, r);
  HostTensor& o = *a.out[0];
  o.shape = {std::max<int64_t>(0, end - start)};
  o.allocate();
  for (int64_t d = start; d < end; ++d) set_el(o, d - start, static_cast<double>(s[d]));
  return Ok{};
}

Status k_size(KernelArgs& a) {
  a.out[0]->allocate();
  set_el(*a.out[0], 0, static_cast<double>(a.in[0]->elements()));
  return Ok{};
}

void fill_from_value(const Value& v, HostTensor& o) {
  o.allocate();
  for (int64_t k = 0; k < std::min<int64_t>(v.size(), o.elements()); ++k) put_value(o, k, v, k);
}

Status k_constant(KernelArgs& a) {
  HostTensor& o = *a.out[0];
  if (a.node.attributes.empty()) return a.fail("has no value attribute");
  const auto& [key, at] = *a.node.attributes.begin();
  if (key == "value" || key == "sparse_value") {
    const Tensor& t = a.graph.tensor(a.node.outputs[0]);
    if (at.tensor && at.tensor_dtype != DType::kString) {
      fill_from_value(*at.tensor, o);
    } else if (t.value) {
      fill_from_value(*t.value, o);
    } else {
      const std::string why = !at.tensor_absent.empty() ? at.tensor_absent
                              : key == "sparse_value"      ? "gpusim keeps no values of sparse Constants"
                              : at.tensor_dtype == DType::kString
                                  ? "gpusim keeps no values of string Constants"
                                  : "the model holds no data for it";
      return a.fail(fmt::format("the \"{}\" tensor ({} elements of {}) has no values to run with: {}; re-export the "
                                "model keeping its Constant values (tools/export_models.py keeps them; torch.onnx.export "
                                "writes them) or put its external data file beside it",
                                key, prod(at.tensor_shape), dtype_name(at.tensor_dtype), why));
    }
    return Ok{};
  }
  o.allocate();
  if (key == "value_float" || key == "value_int") {
    put(o, 0, at.f, at.i);
  } else if (key == "value_floats" || key == "value_ints") {
    for (size_t k = 0; k < at.floats.size(); ++k) set_el(o, static_cast<int64_t>(k), at.floats[k]);
    for (size_t k = 0; k < at.ints.size(); ++k) {
      put(o, static_cast<int64_t>(k), static_cast<double>(at.ints[k]), at.ints[k]);
    }
  } else if (key == "value_string" || key == "value_strings") {
    o.s = key == "value_string" ? std::vector<std::string>{at.s} : at.strings;
  } else {
    return a.fail(fmt::format("attribute \"{}\" is not a Constant value attribute", key));
  }
  return Ok{};
}

Status k_constant_of_shape(KernelArgs& a) {
  HostTensor& o = *a.out[0];
  o.allocate();
  const Attribute* v = a.node.attr("value");
  const bool has = v && v->tensor && v->tensor->size() > 0;
  for (int64_t k = 0; has && k < o.elements(); ++k) put_value(o, k, *v->tensor, 0);
  return Ok{};
}

Status k_range(KernelArgs& a) {
  HostTensor& o = *a.out[0];
  o.allocate();
  for (int64_t k = 0; k < o.elements(); ++k) {
    const double x = a.in[0]->real(0) + static_cast<double>(k) * a.in[2]->real(0);
    put(o, k, x, o.is_real() ? 0 : a.in[0]->integer(0) + k * a.in[2]->integer(0));
  }
  return Ok{};
}

Status k_view(KernelArgs& a) {
  copy_all(*a.in[0], *a.out[0]);
  return Ok{};
}

// ---- Copies ----------------------------------------------------------------------------------

Status k_transpose(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  Ints perm = a.attr_ints("perm");
  if (perm.empty()) {
    for (size_t d = in.shape.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  const Ints st = strides(in.shape);
  map_copy(in, *a.out[0], [&](const Ints& c) {
    int64_t k = 0;
    for (size_t d = 0; d < c.size(); ++d) k += c[d] * st[norm_axis(perm[d], static_cast<int64_t>(c.size()))];
    return k;
  });
  return Ok{};
}

Status k_concat(KernelArgs& a) {
  HostTensor& o = *a.out[0];
  const auto ax = static_cast<size_t>(norm_axis(a.attr_i("axis", 0), static_cast<int64_t>(o.shape.size())));
  std::vector<const HostTensor*> parts;
  Ints ext;
  for (const HostTensor* t : a.in) {
    if (!t) continue;
    parts.push_back(t);
    ext.push_back(t->shape.size() > ax ? t->shape[ax] : 0);
  }
  concat_into(parts, ext, ax, o);
  return Ok{};
}

Status k_split(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  const auto ax = static_cast<size_t>(norm_axis(a.attr_i("axis", 0), static_cast<int64_t>(in.shape.size())));
  int64_t off = 0;
  for (HostTensor* o : a.out) {
    if (!o) return a.fail("an omitted Split output; every output is needed to know the split sizes");
    *o = slice_axis(in, ax, off, o->shape[ax], true);
    off += o->shape[ax];
  }
  return Ok{};
}

Status k_slice(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  // The output shape (from the importer) fixes where each axis ends; only starts and steps matter.
  const bool attrs = a.graph.opset < 10;
  const Ints starts = attrs ? a.attr_ints("starts") : ints_of(a.in[1]);
  Ints axes = attrs ? a.attr_ints("axes") : ints_of(opt_in(a, 3)), steps = attrs ? Ints{} : ints_of(opt_in(a, 4));
  for (size_t k = axes.size(); k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  steps.resize(starts.size(), 1);
  const auto r = static_cast<int64_t>(in.shape.size());
  Ints st0(in.shape.size(), 0), step(in.shape.size(), 1);
  for (size_t k = 0; k < starts.size() && k < axes.size(); ++k) {
    const int64_t d = norm_axis(axes[k], r), dim = in.shape[d];
    int64_t s = starts[k] < 0 ? starts[k] + dim : starts[k];
    if (steps[k] == 0) return a.fail("a step is 0");
    s = steps[k] > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
    st0[d] = s;
    step[d] = steps[k];
  }
  const Ints st = strides(in.shape);
  map_copy(in, *a.out[0], [&](const Ints& c) {
    int64_t k = 0;
    for (size_t d = 0; d < c.size(); ++d) k += (st0[d] + c[d] * step[d]) * st[d];
    return k;
  });
  return Ok{};
}

Status k_gather(KernelArgs& a) {
  const HostTensor &data = *a.in[0], &idx = *a.in[1];
  const auto ax = static_cast<size_t>(norm_axis(a.attr_i("axis", 0), static_cast<int64_t>(data.shape.size())));
  const int64_t inner = prod(data.shape, ax + 1), n_idx = idx.elements(), dim = data.shape[ax];
  HostTensor& o = *a.out[0];
  o.allocate();
  for (int64_t j = 0; j < o.elements(); ++j) {
    const int64_t in_pos = j % inner, k = (j / inner) % n_idx, outer = j / inner / n_idx;
    int64_t x = idx.integer(k);
    if (x < 0) x += dim;
    if (x < 0 || x >= dim) {
      return a.fail(fmt::format("index {} is out of range for axis {} of size {}", idx.integer(k), ax, dim));
    }
    copy_el(data, (outer * dim + x) * inner + in_pos, o, j);
  }
  return Ok{};
}

Status k_gather_elements(KernelArgs& a) {
  const HostTensor &data = *a.in[0], &idx = *a.in[1];
  const auto ax = static_cast<size_t>(norm_axis(a.attr_i("axis", 0), static_cast<int64_t>(data.shape.size())));
  const Ints st = strides(data.shape);
  HostTensor& o = *a.out[0];
  o.allocate();
  for_each_index(idx.shape, [&](const Ints& c, int64_t j) {
    copy_el(data, elem_offset(c, ax, idx.integer(j), data.shape, st), o, j);
  });
  return Ok{};
}

Status k_gather_nd(KernelArgs& a) {
  const HostTensor &data = *a.in[0], &idx = *a.in[1];
  const auto b = static_cast<size_t>(a.attr_i("batch_dims", 0));
  const int64_t last = idx.shape.back();
  const Ints st = strides(data.shape);
  const int64_t slice = prod(data.shape, b + static_cast<size_t>(last));
  const int64_t tuples = prod(idx.shape, 0, idx.shape.size() - 1);
  const int64_t per_batch = prod(idx.shape, b, idx.shape.size() - 1), batch_size = prod(data.shape, b);
  HostTensor& o = *a.out[0];
  o.allocate();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = (t / per_batch) * batch_size;
    for (int64_t q = 0; q < last; ++q) {
      const size_t d = b + static_cast<size_t>(q);
      int64_t x = idx.integer(t * last + q);
      if (x < 0) x += data.shape[d];
      base += x * st[d];
    }
    for (int64_t k = 0; k < slice; ++k) copy_el(data, base + k, o, t * slice + k);
  }
  return Ok{};
}

Status k_scatter_nd(KernelArgs& a) {
  const HostTensor &idx = *a.in[1], &upd = *a.in[2];
  HostTensor& o = *a.out[0];
  copy_all(*a.in[0], o);
  const std::string red = a.attr_s("reduction", "none");
  const int64_t last = idx.shape.back();
  const Ints st = strides(o.shape);
  const int64_t slice = prod(o.shape, static_cast<size_t>(last)), tuples = idx.elements() / std::max<int64_t>(1, last);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (int64_t q = 0; q < last; ++q) {
      int64_t x = idx.integer(t * last + q);
      if (x < 0) x += o.shape[q];
      base += x * st[q];
    }
    for (int64_t k = 0; k < slice; ++k) {
      if (auto s = scatter_apply(a, o, base + k, upd, t * slice + k, red); !s) return s;
    }
  }
  return Ok{};
}

Status k_scatter_elements(KernelArgs& a) {
  const HostTensor &idx = *a.in[1], &upd = *a.in[2];
  HostTensor& o = *a.out[0];
  copy_all(*a.in[0], o);
  const std::string red = a.attr_s("reduction", "none");
  const auto ax = static_cast<size_t>(norm_axis(a.attr_i("axis", 0), static_cast<int64_t>(o.shape.size())));
  const Ints st = strides(o.shape);
  Status res = Ok{};
  for_each_index(idx.shape, [&](const Ints& c, int64_t j) {
    if (res) res = scatter_apply(a, o, elem_offset(c, ax, idx.integer(j), o.shape, st), upd, j, red);
  });
  return res;
}

Status k_expand(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  const Ints st = strides(in.shape);
  map_copy(in, *a.out[0], [&](const Ints& c) { return bcast(c, in.shape, st); });
  return Ok{};
}

Status k_tile(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  const Ints st = strides(in.shape);
  map_copy(in, *a.out[0], [&](const Ints& c) {
    int64_t k = 0;
    for (size_t d = 0; d < c.size(); ++d) k += (c[d] % in.shape[d]) * st[d];
    return k;
  });
  return Ok{};
}

Status k_pad(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  HostTensor& o = *a.out[0];
  const auto r = static_cast<int64_t>(in.shape.size());
  const bool attrs = a.graph.opset < 11;
  const Ints pads = attrs ? a.attr_ints(a.node.attr("pads") ? "pads" : "paddings") : ints_of(a.in[1]);
  double cval = attrs ? a.attr_f("value", 0.0) : 0.0;
  if (!attrs && a.has(2) && a.in[2]->elements() > 0) cval = a.in[2]->real(0);
  Ints axes;
  for (int64_t x : ints_of(opt_in(a, 3))) axes.push_back(norm_axis(x, r));
  for (int64_t d = 0; !a.has(3) && d < r; ++d) axes.push_back(d);
  Ints begin(in.shape.size(), 0);
  for (size_t k = 0; k < axes.size() && k < pads.size(); ++k) begin[axes[k]] = pads[k];
  const std::string mode = a.attr_s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return a.fail(fmt::format("mode \"{}\" is not constant/reflect/edge/wrap", mode));
  }
  const Ints st = strides(in.shape);
  o.allocate();
  for_each_index(o.shape, [&](const Ints& c, int64_t j) {
    int64_t k = 0;
    for (size_t d = 0; d < c.size() && k >= 0; ++d) {
      const int64_t n = in.shape[d], p = 2 * (n - 1);  // p: the period of reflect
      int64_t x = c[d] - begin[d];
      if ((x < 0 || x >= n) && (mode == "constant" || n == 0)) {
        k = -1;
      } else if (x < 0 || x >= n) {
        x = mode == "wrap"                ? ((x % n) + n) % n
            : mode == "edge" || n == 1    ? std::clamp<int64_t>(x, 0, n - 1)
                                          : ((x % p) + p) % p;
        k += (x >= n ? p - x : x) * st[d];
      } else {
        k += x * st[d];
      }
    }
    if (k < 0) {
      set_el(o, j, cval);
    } else {
      copy_el(in, k, o, j);
    }
  });
  return Ok{};
}

// ---- Resize / Upsample -----------------------------------------------------------------------

struct Tap {
  int64_t idx;
  double w;
};

std::vector<double> reals_of(const KernelArgs& a, size_t k) {
  std::vector<double> v;
  for (int64_t j = 0; a.has(k) && j < a.in[k]->elements(); ++j) v.push_back(a.in[k]->real(j));
  return v;
}

// Input coordinate of output coordinate x (ONNX's formulas: lo is the unrounded in * scale).
double resize_coord(const std::string& ctm, double x, double s, double li, double lo, int64_t n_out, double rs,
                    double re) {
  if (ctm == "half_pixel") return (x + 0.5) / s - 0.5;
  if (ctm == "half_pixel_symmetric") return li / 2 * (1 - static_cast<double>(n_out) / lo) + (x + 0.5) / s - 0.5;
  if (ctm == "pytorch_half_pixel") return lo != 1 ? (x + 0.5) / s - 0.5 : -0.5;
  if (ctm == "align_corners") return lo == 1 ? 0.0 : x * (li - 1) / (lo - 1);
  if (ctm == "asymmetric") return x / s;
  if (ctm == "tf_half_pixel_for_nn") return (x + 0.5) / s;
  return lo != 1 ? rs * (li - 1) + x * (re - rs) * (li - 1) / (lo - 1) : 0.5 * (rs + re) * (li - 1);  // crop
}

// Resize/Upsample: per axis, each output coordinate reads a few input taps with weights
// (1 for nearest, 2 for linear, 4 for cubic); the output is the weighted sum over the product of
// the axes' taps (separable interpolation).
Status k_resize(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  HostTensor& o = *a.out[0];
  const auto r = static_cast<int64_t>(in.shape.size());
  const bool v11 = a.node.op_type != "Upsample" && a.graph.opset >= 11;
  std::vector<double> scales = !v11 && a.graph.opset < 9 ? a.attr_floats("scales") : reals_of(a, v11 ? 2 : 1);
  const std::vector<double> roi = v11 ? reals_of(a, 1) : std::vector<double>{};
  const Ints sizes = v11 && a.has(3) ? ints_of(a.in[3]) : Ints{};
  if (!sizes.empty()) scales.clear();
  Ints axes;
  for (int64_t x : a.attr_ints("axes")) axes.push_back(norm_axis(x, r));
  for (int64_t d = 0; a.attr_ints("axes").empty() && d < r; ++d) axes.push_back(d);
  std::vector<double> scale(in.shape.size(), 1.0), rs(in.shape.size(), 0.0), re(in.shape.size(), 1.0);
  const std::string policy = a.attr_s("keep_aspect_ratio_policy", "stretch");
  double common = policy == "not_larger" ? INFINITY : 0.0;
  for (size_t k = 0; k < axes.size(); ++k) {
    const auto d = static_cast<size_t>(axes[k]);
    const double li = static_cast<double>(in.shape[d]);
    scale[d] = k < scales.size() ? scales[k] : li > 0 ? static_cast<double>(o.shape[d]) / li : 1.0;
    if (k < sizes.size()) {
      const double q = static_cast<double>(sizes[k]) / li;
      common = policy == "not_larger" ? std::min(common, q) : std::max(common, q);
    }
    if (roi.size() == 2 * axes.size()) {
      rs[d] = roi[k];
      re[d] = roi[k + axes.size()];
    }
  }
  for (size_t k = 0; !sizes.empty() && policy != "stretch" && k < axes.size(); ++k) scale[axes[k]] = common;
  std::string mode = a.attr_s("mode", "nearest");
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";
  const std::string ctm = v11 ? a.attr_s("coordinate_transformation_mode", "half_pixel") : "asymmetric";
  const std::string nmode = v11 ? a.attr_s("nearest_mode", "round_prefer_floor") : "floor";
  const double A = a.attr_f("cubic_coeff_a", -0.75);
  const bool exclude = a.attr_i("exclude_outside", 0) != 0;
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    return a.fail(fmt::format("mode \"{}\" is not supported", mode));
  }
  if (a.attr_i("antialias", 0) != 0) return a.fail("antialias=1 is not supported by the CPU reference");
  static const std::vector<std::string> kModes = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
      "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(kModes.begin(), kModes.end(), ctm) == kModes.end()) {
    return a.fail(fmt::format("coordinate_transformation_mode \"{}\" is not supported", ctm));
  }
  // taps[d][x]: the input taps of output coordinate x along axis d (empty: extrapolated).
  std::vector<std::vector<std::vector<Tap>>> taps(in.shape.size());
  for (size_t d = 0; d < in.shape.size(); ++d) {
    const int64_t n_in = in.shape[d], n_out = o.shape[d];
    const double li = static_cast<double>(n_in);
    for (int64_t x = 0; x < n_out; ++x) {
      const double xo = resize_coord(ctm, static_cast<double>(x), scale[d], li, scale[d] * li, n_out, rs[d], re[d]);
      std::vector<Tap>& t = taps[d].emplace_back();
      if (ctm == "tf_crop_and_resize" && (xo < 0 || xo > li - 1)) continue;
      const double x0 = std::floor(xo), rr = xo - x0;
      const auto i0 = static_cast<int64_t>(x0);
      if (mode == "nearest") {
        const bool up = nmode == "ceil" || (nmode == "round_prefer_ceil" ? rr >= 0.5 : nmode != "floor" && rr > 0.5);
        t.push_back({std::clamp<int64_t>(up && rr > 0 ? i0 + 1 : i0, 0, n_in - 1), 1.0});
        continue;
      }
      if (mode == "linear") {
        t = {{i0, 1 - rr}, {i0 + 1, rr}};
      } else {
        const double p = rr + 1, q = 1 - rr, u = 2 - rr;
        t = {{i0 - 1, ((A * p - 5 * A) * p + 8 * A) * p - 4 * A}, {i0, ((A + 2) * rr - (A + 3)) * rr * rr + 1},
             {i0 + 1, ((A + 2) * q - (A + 3)) * q * q + 1}, {i0 + 2, ((A * u - 5 * A) * u + 8 * A) * u - 4 * A}};
      }
      double sum = 0;
      for (Tap& tp : t) {
        if (exclude && (tp.idx < 0 || tp.idx >= n_in)) tp.w = 0;
        sum += tp.w;
        tp.idx = std::clamp<int64_t>(tp.idx, 0, n_in - 1);
      }
      for (Tap& tp : t) tp.w /= exclude && sum != 0 ? sum : 1.0;
    }
  }
  const Ints st = strides(in.shape);
  const double extrap = a.attr_f("extrapolation_value", 0.0);
  o.allocate();
  std::vector<const std::vector<Tap>*> cur(in.shape.size());
  double acc = 0;
  // Weighted sum over the product of the axes' taps, skipping zero weights.
  std::function<void(size_t, int64_t, double)> rec = [&](size_t d, int64_t k, double w) {
    if (d == cur.size()) {
      acc += w * in.real(k);
      return;
    }
    for (const Tap& tp : *cur[d]) {
      if (tp.w != 0) rec(d + 1, k + tp.idx * st[d], w * tp.w);
    }
  };
  for_each_index(o.shape, [&](const Ints& c, int64_t j) {
    bool outside = false;
    int64_t k = 0;
    for (size_t d = 0; d < c.size(); ++d) {
      cur[d] = &taps[d][c[d]];
      outside = outside || cur[d]->empty();
      if (!outside) k += (*cur[d])[0].idx * st[d];
    }
    if (outside) {
      set_el(o, j, extrap);
    } else if (mode == "nearest") {
      copy_el(in, k, o, j);
    } else {
      acc = 0;
      rec(0, 0, 1.0);
      set_el(o, j, acc);
    }
  });
  return Ok{};
}

// ---- Rearrangements and generators -----------------------------------------------------------

Status k_depth_space(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  const int64_t b = a.attr_i("blocksize", 1);
  const bool d2s = a.node.op_type == "DepthToSpace", crd = a.attr_s("mode", "DCR") == "CRD";
  const Ints st = strides(in.shape);
  const int64_t C = a.out[0]->shape[1];
  map_copy(in, *a.out[0], [&](const Ints& c) {
    if (d2s) {  // out [n, c, h*b+i, w*b+j]
      const int64_t i = c[2] % b, j = c[3] % b;
      const int64_t ch = crd ? c[1] * b * b + i * b + j : (i * b + j) * C + c[1];
      return c[0] * st[0] + ch * st[1] + (c[2] / b) * st[2] + (c[3] / b) * st[3];
    }
    // SpaceToDepth: out [n, (i*b+j)*C_in + ch, h, w] = in [n, ch, h*b+i, w*b+j]
    const int64_t cin = in.shape[1], ch = c[1] % cin, blk = c[1] / cin;
    return c[0] * st[0] + ch * st[1] + (c[2] * b + blk / b) * st[2] + (c[3] * b + blk % b) * st[3];
  });
  return Ok{};
}

Status k_onehot(KernelArgs& a) {
  const HostTensor &idx = *a.in[0], &vals = *a.in[2];
  HostTensor& o = *a.out[0];
  const int64_t depth = a.in[1]->integer(0);
  const auto ax = static_cast<size_t>(norm_axis(a.attr_i("axis", -1), static_cast<int64_t>(o.shape.size())));
  o.allocate();
  const int64_t inner = prod(o.shape, ax + 1);
  for (int64_t j = 0; j < o.elements(); ++j) {
    const int64_t dpos = (j / inner) % depth, src = (j / inner / depth) * inner + j % inner;
    int64_t x = idx.integer(src);
    if (x < 0) x += depth;
    copy_el(vals, x == dpos ? 1 : 0, o, j);
  }
  return Ok{};
}

Status k_nonzero(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  std::vector<Ints> hits;
  for_each_index(in.shape, [&](const Ints& c, int64_t k) {
    if (in.is_string() ? !in.s[k].empty() : in.real(k) != 0) hits.push_back(c);
  });
  HostTensor& o = *a.out[0];
  const auto r = static_cast<int64_t>(in.shape.size()), n = static_cast<int64_t>(hits.size());
  o.shape = {r, n};
  o.allocate();
  for (int64_t k = 0; k < r * n; ++k) o.i[k] = hits[k % n][k / n];
  return Ok{};
}

Status k_trilu(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  HostTensor& o = *a.out[0];
  const bool upper = a.attr_i("upper", 1) != 0;
  const int64_t k = a.has(1) ? a.in[1]->integer(0) : 0;
  o.allocate();
  const size_t r = in.shape.size();
  for_each_index(in.shape, [&](const Ints& c, int64_t j) {
    const int64_t diff = c[r - 1] - c[r - 2];
    if (upper ? diff >= k : diff <= k) copy_el(in, j, o, j);
  });
  return Ok{};
}

Status k_reverse_sequence(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  const Ints lens = ints_of(a.in[1]);
  const int64_t bai = a.attr_i("batch_axis", 1), tai = a.attr_i("time_axis", 0);
  const auto rank = static_cast<int64_t>(in.shape.size());
  if (bai < 0 || bai >= rank || tai < 0 || tai >= rank || bai == tai) {
    return a.fail(fmt::format("batch_axis {} and time_axis {} must be two different axes of the rank-{} input", bai,
                              tai, rank));
  }
  const auto ba = static_cast<size_t>(bai), ta = static_cast<size_t>(tai);
  if (static_cast<int64_t>(lens.size()) != in.shape[ba]) {
    return a.fail(fmt::format("sequence_lens has {} values, the batch axis {} has {}", lens.size(), ba, in.shape[ba]));
  }
  for (size_t b = 0; b < lens.size(); ++b) {
    if (lens[b] < 0 || lens[b] > in.shape[ta]) {
      return a.fail(fmt::format("sequence_lens[{}] = {} is outside 0..{} (the time axis {})", b, lens[b],
                                in.shape[ta], ta));
    }
  }
  const Ints st = strides(in.shape);
  map_copy(in, *a.out[0], [&](const Ints& c) {
    int64_t k = 0;
    for (size_t d = 0; d < c.size(); ++d) {
      const int64_t len = lens[c[ba]];
      k += (d == ta && c[d] < len ? len - 1 - c[d] : c[d]) * st[d];
    }
    return k;
  });
  return Ok{};
}

Status k_eye_like(KernelArgs& a) {
  HostTensor& o = *a.out[0];
  const int64_t k = a.attr_i("k", 0);
  o.allocate();
  for_each_index(o.shape, [&](const Ints& c, int64_t j) { set_el(o, j, c[1] - c[0] == k ? 1.0 : 0.0); });
  return Ok{};
}

std::mt19937_64 rng_for(const KernelArgs& a) {
  const Attribute* s = a.node.attr("seed");
  return std::mt19937_64(s ? static_cast<uint64_t>(static_cast<int64_t>(s->f)) : 0x5eedULL);
}

// RandomNormal/RandomUniform(Like) and Bernoulli (1 where a uniform draw is below the input).
Status k_random(KernelArgs& a) {
  HostTensor& o = *a.out[0];
  auto rng = rng_for(a);
  o.allocate();
  const bool normal = a.node.op_type.rfind("RandomNormal", 0) == 0, bern = a.node.op_type == "Bernoulli";
  std::normal_distribution<double> nd(a.attr_f("mean", 0.0), a.attr_f("scale", 1.0));
  std::uniform_real_distribution<double> ud(a.attr_f("low", 0.0), a.attr_f("high", 1.0));
  for (int64_t j = 0; j < o.elements(); ++j) {
    set_el(o, j, bern ? (ud(rng) < a.in[0]->real(j) ? 1.0 : 0.0) : normal ? nd(rng) : ud(rng));
  }
  return Ok{};
}

Status k_multinomial(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  HostTensor& o = *a.out[0];
  auto rng = rng_for(a);
  o.allocate();
  const int64_t batch = in.shape[0], classes = in.shape[1], n = o.shape[1];
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<double> w(static_cast<size_t>(classes));
    for (int64_t c = 0; c < classes; ++c) w[c] = std::exp(in.real(b * classes + c));
    std::discrete_distribution<int64_t> dd(w.begin(), w.end());
    for (int64_t k = 0; k < n; ++k) set_el(o, b * n + k, static_cast<double>(dd(rng)));
  }
  return Ok{};
}

// ---- Sequences -------------------------------------------------------------------------------

Status seq_input(KernelArgs& a, size_t k) {
  if (!a.has(k) || !a.in[k]->is_sequence) return a.fail(fmt::format("input {} is not a sequence", k));
  return Ok{};
}

// Position from input k (default `def`), normalized against n; fails out of [0, hi].
Result<int64_t> seq_pos(KernelArgs& a, size_t k, int64_t n, int64_t def, int64_t hi) {
  int64_t p = a.has(k) ? a.in[k]->integer(0) : def;
  if (p < 0) p += n;
  if (p < 0 || p > hi) return a.fail(fmt::format("position {} is out of range for a sequence of {}", p, n));
  return p;
}

// SequenceConstruct, and SequenceEmpty (no inputs).
Status k_seq_construct(KernelArgs& a) {
  HostTensor& o = *a.out[0];
  o.is_sequence = true;
  o.seq.clear();
  for (const HostTensor* t : a.in) o.seq.push_back(*t);
  return Ok{};
}

// SequenceInsert (position defaults to the end) and SequenceErase (to the last element).
Status k_seq_edit(KernelArgs& a) {
  if (auto s = seq_input(a, 0); !s) return s;
  HostTensor& o = *a.out[0];
  o.seq = a.in[0]->seq;
  o.is_sequence = true;
  const bool insert = a.node.op_type == "SequenceInsert";
  const auto n = static_cast<int64_t>(o.seq.size());
  auto p = seq_pos(a, insert ? 2 : 1, n, insert ? n : n - 1, insert ? n : n - 1);
  if (!p) return p.error();
  if (insert) {
    o.seq.insert(o.seq.begin() + *p, *a.in[1]);
  } else {
    o.seq.erase(o.seq.begin() + *p);
  }
  return Ok{};
}

Status k_seq_at(KernelArgs& a) {
  if (auto s = seq_input(a, 0); !s) return s;
  const auto n = static_cast<int64_t>(a.in[0]->seq.size());
  auto p = seq_pos(a, 1, n, 0, n - 1);
  if (!p) return p.error();
  *a.out[0] = a.in[0]->seq[*p];
  return Ok{};
}

Status k_seq_length(KernelArgs& a) {
  if (auto s = seq_input(a, 0); !s) return s;
  a.out[0]->allocate();
  set_el(*a.out[0], 0, static_cast<double>(a.in[0]->seq.size()));
  return Ok{};
}

Status k_split_to_seq(KernelArgs& a) {
  const HostTensor& in = *a.in[0];
  HostTensor& o = *a.out[0];
  o.is_sequence = true;
  o.seq.clear();
  const auto ax = static_cast<size_t>(norm_axis(a.attr_i("axis", 0), static_cast<int64_t>(in.shape.size())));
  const int64_t dim = in.shape[ax];
  if (!a.has(1)) {
    const bool keep = a.attr_i("keepdims", 1) != 0;
    for (int64_t k = 0; k < dim; ++k) o.seq.push_back(slice_axis(in, ax, k, 1, keep));
    return Ok{};
  }
  Ints sizes = ints_of(a.in[1]);
  if (a.in[1]->shape.empty()) {  // a scalar: pieces of that length, the last one shorter
    const int64_t len = sizes[0];
    if (len <= 0) return a.fail(fmt::format("split = {} must be positive", len));
    sizes.clear();
    for (int64_t off = 0; off < dim; off += len) sizes.push_back(std::min(len, dim - off));
  }
  int64_t off = 0;
  for (int64_t len : sizes) {
    if (off + len > dim) return a.fail(fmt::format("split sizes exceed axis {} of size {}", ax, dim));
    o.seq.push_back(slice_axis(in, ax, off, len, true));
    off += len;
  }
  return Ok{};
}

Status k_concat_from_seq(KernelArgs& a) {
  if (auto s = seq_input(a, 0); !s) return s;
  const auto& el = a.in[0]->seq;
  if (el.empty()) return a.fail("cannot concatenate an empty sequence");
  const bool new_axis = a.attr_i("new_axis", 0) != 0;
  const auto r = static_cast<int64_t>(el[0].shape.size());
  const auto ax = static_cast<size_t>(norm_axis(a.attr_i("axis", 0), new_axis ? r + 1 : r));
  HostTensor& o = *a.out[0];
  o.dtype = el[0].dtype;
  o.shape = el[0].shape;
  if (new_axis) {
    o.shape.insert(o.shape.begin() + static_cast<long>(ax), static_cast<int64_t>(el.size()));
  } else {
    for (size_t k = 1; k < el.size(); ++k) o.shape[ax] += el[k].shape[ax];
  }
  std::vector<const HostTensor*> parts;
  Ints ext;
  for (const HostTensor& t : el) {
    parts.push_back(&t);
    ext.push_back(new_axis ? 1 : t.shape[ax]);
  }
  concat_into(parts, ext, ax, o);
  return Ok{};
}

// ---- Gradient (ai.onnx.preview.training) -----------------------------------------------------

// Gradient of attribute y with respect to each xs: the node's inputs are the values of xs (then
// zs), so the forward values of the Add/Sub/Mul chain from them to y are recomputed here, then
// reverse-mode differentiation runs over those nodes (with broadcasting).
template <class F>
HostTensor real_tensor(const Shape& s, F value_at) {
  HostTensor t;
  t.dtype = DType::kFloat64;
  t.shape = s;
  for (int64_t j = 0; j < prod(s); ++j) t.r.push_back(value_at(j));
  return t;
}

// acc += sign * g * mul, summed down to acc's shape (the reverse of broadcasting).
void add_reduced(const HostTensor& g, HostTensor& acc, double sign, const HostTensor* mul) {
  const Ints st = strides(acc.shape), mst = mul ? strides(mul->shape) : Ints{};
  for_each_index(g.shape, [&](const Ints& c, int64_t j) {
    acc.r[bcast(c, acc.shape, st)] += sign * g.r[j] * (mul ? mul->r[bcast(c, mul->shape, mst)] : 1.0);
  });
}

Status k_gradient(KernelArgs& a) {
  const std::string no_fwd = "Gradient needs the forward values; not supported by the CPU reference";
  const Attribute *xs_a = a.node.attr("xs"), *zs_a = a.node.attr("zs");
  std::vector<std::string> names = xs_a ? xs_a->strings : std::vector<std::string>{};
  const size_t n_x = names.size();
  if (zs_a) names.insert(names.end(), zs_a->strings.begin(), zs_a->strings.end());
  std::map<TensorId, HostTensor> val, grad;
  std::vector<TensorId> xs;
  for (size_t k = 0; k < names.size(); ++k) {
    auto id = a.graph.find(names[k]);
    if (!id || !a.has(k)) return a.fail(fmt::format("{} (input \"{}\" is not found)", no_fwd, names[k]));
    val[*id] = real_tensor(a.in[k]->shape, [&](int64_t j) { return a.in[k]->real(j); });
    if (k < n_x) xs.push_back(*id);
  }
  const std::string y = a.attr_s("y", "");
  auto yid = a.graph.find(y);
  std::vector<const Node*> fwd;
  for (const Node& n : a.graph.nodes) {
    if (&n == &a.node) break;
    if (!n.domain.empty() || (n.op_type != "Add" && n.op_type != "Sub" && n.op_type != "Mul")) continue;
    bool ok = n.inputs.size() == 2 && n.outputs.size() == 1;
    for (size_t k = 0; ok && k < 2; ++k) {
      const TensorId t = n.inputs[k];
      if (t != kNoTensor && !val.count(t) && a.graph.tensor(t).value) {
        const Value& v = *a.graph.tensor(t).value;
        val[t] = real_tensor(v.shape, [&](int64_t j) { return v.as_real(j); });
      }
      ok = val.count(t) > 0;
    }
    if (!ok) continue;
    const HostTensor &x0 = val[n.inputs[0]], &x1 = val[n.inputs[1]];
    const Ints s0 = strides(x0.shape), s1 = strides(x1.shape);
    HostTensor out = real_tensor(a.graph.tensor(n.outputs[0]).shape, [](int64_t) { return 0.0; });
    for_each_index(out.shape, [&](const Ints& c, int64_t j) {
      const double p = x0.r[bcast(c, x0.shape, s0)], q = x1.r[bcast(c, x1.shape, s1)];
      out.r[j] = n.op_type == "Add" ? p + q : n.op_type == "Sub" ? p - q : p * q;
    });
    val[n.outputs[0]] = std::move(out);
    fwd.push_back(&n);
  }
  if (!yid || !val.count(*yid)) {
    return a.fail(fmt::format("{} (y \"{}\" is not an Add/Sub/Mul chain of xs and constants)", no_fwd, y));
  }
  grad[*yid] = real_tensor(val[*yid].shape, [](int64_t) { return 1.0; });
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
    const Node& n = **it;
    if (!grad.count(n.outputs[0])) continue;
    const HostTensor gy = grad[n.outputs[0]];
    for (size_t k = 0; k < 2; ++k) {
      const TensorId t = n.inputs[k];
      if (!grad.count(t)) grad[t] = real_tensor(val[t].shape, [](int64_t) { return 0.0; });
      const double sign = n.op_type == "Sub" && k == 1 ? -1.0 : 1.0;
      add_reduced(gy, grad[t], sign, n.op_type == "Mul" ? &val[n.inputs[1 - k]] : nullptr);
    }
  }
  for (size_t k = 0; k < a.out.size() && k < xs.size(); ++k) {
    if (!a.out[k]) continue;
    a.out[k]->allocate();
    for (int64_t j = 0; grad.count(xs[k]) && j < a.out[k]->elements(); ++j) set_el(*a.out[k], j, grad[xs[k]].r[j]);
  }
  return Ok{};
}

}  // namespace

void register_data_movement(std::map<std::string, Kernel>& k) {
  const std::pair<const char*, Kernel> table[] = {
      {"Shape", k_shape}, {"Size", k_size}, {"Constant", k_constant}, {"ConstantOfShape", k_constant_of_shape},
      {"Range", k_range}, {"Reshape", k_view}, {"Flatten", k_view}, {"Squeeze", k_view}, {"Unsqueeze", k_view},
      {"Transpose", k_transpose}, {"Concat", k_concat}, {"Split", k_split}, {"Slice", k_slice}, {"Gather", k_gather},
      {"GatherElements", k_gather_elements}, {"GatherND", k_gather_nd}, {"ScatterND", k_scatter_nd},
      {"ScatterElements", k_scatter_elements}, {"Scatter", k_scatter_elements}, {"Expand", k_expand},
      {"Tile", k_tile}, {"Pad", k_pad}, {"Resize", k_resize}, {"Upsample", k_resize},
      {"DepthToSpace", k_depth_space}, {"SpaceToDepth", k_depth_space}, {"OneHot", k_onehot},
      {"NonZero", k_nonzero}, {"Trilu", k_trilu}, {"ReverseSequence", k_reverse_sequence}, {"EyeLike", k_eye_like},
      {"RandomNormal", k_random}, {"RandomUniform", k_random}, {"RandomNormalLike", k_random},
      {"RandomUniformLike", k_random}, {"Bernoulli", k_random}, {"Multinomial", k_multinomial},
      {"SequenceEmpty", k_seq_construct}, {"SequenceConstruct", k_seq_construct}, {"SequenceInsert", k_seq_edit},
      {"SequenceErase", k_seq_edit}, {"SequenceAt", k_seq_at}, {"SequenceLength", k_seq_length},
      {"SplitToSequence", k_split_to_seq}, {"ConcatFromSequence", k_concat_from_seq},
      {"ai.onnx.preview.training:Gradient", k_gradient},
  };
  for (const auto& [name, fn] : table) k[name] = fn;
}

}  // namespace gpusim::cpu
