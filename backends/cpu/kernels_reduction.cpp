// CPU reference kernels for reductions (what core/graph/ops/reduction.cpp registers: Reduce*,
// ArgMax/ArgMin, TopK, CumSum) and normalizations (core/graph/ops/normalization.cpp:
// BatchNormalization, Layer/Group/InstanceNormalization, Softmax, LogSoftmax, Hardmax,
// LpNormalization, MeanVarianceNormalization, LRN).
//
// Numerical conventions:
//  - Everything accumulates in double (integers in int64 where the op is exact: CumSum, Sum of ints
//    goes through double and is truncated back). Variances are the biased (population) E[(x-mean)^2],
//    computed in two passes. Softmax and LogSumExp subtract the running maximum first.
//  - Reductions over an empty set give the ONNX identities: Sum 0, Prod 1, Max -inf, Min +inf,
//    LogSum/LogSumExp -inf; Mean of nothing is NaN.
//  - Ties: ArgMax/ArgMin take the first index (last with select_last_index=1); TopK orders equal values
//    by lower index first and always returns sorted results (sorted=0 leaves the order unspecified).
//  - Softmax/LogSoftmax/Hardmax before opset 13 coerce the input to 2-D at `axis` (default 1); from 13
//    they normalize along `axis` (default -1) only.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "reference.h"

namespace gpusim::cpu {
namespace {

void put(HostTensor& o, int64_t e, double v) {
  const auto k = static_cast<size_t>(e);
  if (o.is_real()) {
    o.r[k] = v;
  } else if (std::isnan(v)) {
    o.i[k] = 0;
  } else if (v >= 9.2233720368547758e18) {
    o.i[k] = std::numeric_limits<int64_t>::max();
  } else if (v <= -9.2233720368547758e18) {
    o.i[k] = std::numeric_limits<int64_t>::min();
  } else {
    o.i[k] = static_cast<int64_t>(v);
  }
}

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to && d < s.size(); ++d) p *= s[d];
  return p;
}

// Normalizes a possibly negative axis; false when out of range.
bool norm_axis(int64_t& axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  return axis >= 0 && axis < std::max<int64_t>(r, 1);
}

// A tensor seen as [outer, len, inner] around one axis.
struct Split {
  int64_t outer = 1, len = 1, inner = 1;
  int64_t at(int64_t o, int64_t j, int64_t i) const { return (o * len + j) * inner + i; }
};
Split split_at(const Shape& s, int64_t axis) {
  if (s.empty()) return {};
  const auto ax = static_cast<size_t>(axis);
  return {prod(s, 0, ax), s[ax], prod(s, ax + 1, s.size())};
}

// For each input flat index, the flat index of its slot once the `red` axes are reduced away.
std::vector<int64_t> reduce_map(const Shape& in, const std::vector<bool>& red) {
  const int64_t n = prod(in, 0, in.size());
  std::vector<int64_t> m(static_cast<size_t>(n));
  std::vector<int64_t> coord(in.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t o = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      if (!red[d]) o = o * in[d] + coord[d];
    }
    m[static_cast<size_t>(e)] = o;
    for (size_t d = in.size(); d-- > 0;) {
      if (++coord[d] < in[d]) break;
      coord[d] = 0;
    }
  }
  return m;
}

// Reduced-axes mask from a list of (possibly negative) axes.
Result<std::vector<bool>> axes_mask(const KernelArgs& a, const std::vector<int64_t>& axes, size_t rank) {
  std::vector<bool> red(rank, false);
  for (int64_t ax : axes) {
    if (!norm_axis(ax, rank) || rank == 0) return a.fail(fmt::format("axis {} is out of range for rank {}", ax, rank));
    red[static_cast<size_t>(ax)] = true;
  }
  return red;
}

// ---- reductions ----------------------------------------------------------------------------------

Status reduce(KernelArgs& a) {
  const std::string& op = a.node.op_type;
  const HostTensor& x = *a.in[0];
  HostTensor& o = *a.out[0];
  std::vector<int64_t> axes;
  if (a.has(1)) {
    for (int64_t k = 0; k < a.in[1]->elements(); ++k) axes.push_back(a.in[1]->integer(k));
  } else {
    axes = a.attr_ints("axes");
  }
  if (axes.empty()) {
    if (a.attr_i("noop_with_empty_axes", 0) != 0) {
      const DType t = o.dtype;
      o = x;
      o.dtype = t;
      return Ok{};
    }
    for (size_t d = 0; d < x.shape.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  }
  auto red = axes_mask(a, axes, x.shape.size());
  if (!red) return red.error();
  o.allocate();
  const auto n_out = static_cast<size_t>(o.elements());
  const std::vector<int64_t> map = reduce_map(x.shape, *red);
  const int64_t n = x.elements();
  const bool is_max = op == "ReduceMax", is_min = op == "ReduceMin", is_prod = op == "ReduceProd";
  std::vector<double> acc(n_out, is_prod ? 1.0 : is_max ? -INFINITY : is_min ? INFINITY : 0.0);
  std::vector<double> peak(n_out, -INFINITY);  // LogSumExp's shift
  std::vector<int64_t> count(n_out, 0);
  if (op == "ReduceLogSumExp") {
    for (int64_t e = 0; e < n; ++e) {
      double& p = peak[static_cast<size_t>(map[static_cast<size_t>(e)])];
      p = std::max(p, x.real(e));
    }
    for (double& p : peak) {
      if (!std::isfinite(p)) p = 0;
    }
  }
  for (int64_t e = 0; e < n; ++e) {
    const auto k = static_cast<size_t>(map[static_cast<size_t>(e)]);
    const double v = x.real(e);
    double& s = acc[k];
    ++count[k];
    if (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceLogSum") s += v;
    else if (is_max) s = (std::isnan(v) || std::isnan(s)) ? NAN : std::max(s, v);
    else if (is_min) s = (std::isnan(v) || std::isnan(s)) ? NAN : std::min(s, v);
    else if (is_prod) s *= v;
    else if (op == "ReduceL1") s += std::fabs(v);
    else if (op == "ReduceL2" || op == "ReduceSumSquare") s += v * v;
    else if (op == "ReduceLogSumExp") s += std::exp(v - peak[k]);
    else return a.fail("no reduction kernel for this op");
  }
  for (size_t k = 0; k < n_out; ++k) {
    double v = acc[k];
    if (op == "ReduceMean") v /= static_cast<double>(count[k]);
    if (op == "ReduceL2") v = std::sqrt(v);
    if (op == "ReduceLogSum") v = std::log(v);
    if (op == "ReduceLogSumExp") v = std::log(v) + peak[k];
    put(o, static_cast<int64_t>(k), v);
  }
  return Ok{};
}

Status arg_extreme(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  HostTensor& o = *a.out[0];
  int64_t axis = a.attr_i("axis", 0);
  if (!norm_axis(axis, x.shape.size())) return a.fail(fmt::format("axis {} is out of range", a.attr_i("axis", 0)));
  const bool is_max = a.node.op_type == "ArgMax";
  const bool last = a.attr_i("select_last_index", 0) != 0;
  o.allocate();
  const Split sp = split_at(x.shape, axis);
  for (int64_t p = 0; p < sp.outer; ++p) {
    for (int64_t i = 0; i < sp.inner; ++i) {
      int64_t best = 0;
      double bv = x.real(sp.at(p, 0, i));
      for (int64_t j = 1; j < sp.len; ++j) {
        const double v = x.real(sp.at(p, j, i));
        const bool better = is_max ? (v > bv || (last && v == bv)) : (v < bv || (last && v == bv));
        if (better) {
          best = j;
          bv = v;
        }
      }
      o.i[static_cast<size_t>(p * sp.inner + i)] = best;
    }
  }
  return Ok{};
}

Status topk(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  int64_t k = a.attr_i("k", -1);
  if (a.graph.opset >= 10 && a.has(1)) k = a.in[1]->integer(0);
  int64_t axis = a.attr_i("axis", -1);
  if (!norm_axis(axis, x.shape.size())) return a.fail(fmt::format("axis {} is out of range", a.attr_i("axis", -1)));
  const Split sp = split_at(x.shape, axis);
  if (k < 0 || k > sp.len) return a.fail(fmt::format("K = {} is outside [0, {}]", k, sp.len));
  const bool largest = a.attr_i("largest", 1) != 0;
  HostTensor& vals = *a.out[0];
  vals.allocate();
  HostTensor* idx = a.out.size() > 1 ? a.out[1] : nullptr;
  if (idx) idx->allocate();
  std::vector<int64_t> order(static_cast<size_t>(sp.len));
  for (int64_t p = 0; p < sp.outer; ++p) {
    for (int64_t i = 0; i < sp.inner; ++i) {
      std::iota(order.begin(), order.end(), 0);
      auto val = [&](int64_t j) { return x.real(sp.at(p, j, i)); };
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
        const double vl = val(l), vr = val(r);
        return largest ? vl > vr : vl < vr;
      });
      for (int64_t j = 0; j < k; ++j) {
        const int64_t src = sp.at(p, order[static_cast<size_t>(j)], i);
        const int64_t dst = (p * k + j) * sp.inner + i;
        if (vals.is_real()) {
          vals.r[static_cast<size_t>(dst)] = x.r[static_cast<size_t>(src)];
        } else {
          vals.i[static_cast<size_t>(dst)] = x.i[static_cast<size_t>(src)];
        }
        if (idx) idx->i[static_cast<size_t>(dst)] = order[static_cast<size_t>(j)];
      }
    }
  }
  return Ok{};
}

Status cumsum(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  if (!a.has(1) || a.in[1]->elements() < 1) return a.fail("the axis input is missing");
  int64_t axis = a.in[1]->integer(0);
  if (!norm_axis(axis, x.shape.size())) return a.fail(fmt::format("axis {} is out of range", a.in[1]->integer(0)));
  const bool exclusive = a.attr_i("exclusive", 0) != 0, reverse = a.attr_i("reverse", 0) != 0;
  HostTensor& o = *a.out[0];
  o.allocate();
  const Split sp = split_at(x.shape, axis);
  for (int64_t p = 0; p < sp.outer; ++p) {
    for (int64_t i = 0; i < sp.inner; ++i) {
      double racc = 0;
      int64_t iacc = 0;
      for (int64_t t = 0; t < sp.len; ++t) {
        const int64_t j = reverse ? sp.len - 1 - t : t;
        const auto e = static_cast<size_t>(sp.at(p, j, i));
        if (x.is_real()) {
          if (!exclusive) racc += x.r[e];
          o.r[e] = racc;
          if (exclusive) racc += x.r[e];
        } else {
          if (!exclusive) iacc += x.i[e];
          o.i[e] = iacc;
          if (exclusive) iacc += x.i[e];
        }
      }
    }
  }
  return Ok{};
}

// ---- normalizations ------------------------------------------------------------------------------

Status batchnorm(KernelArgs& a) {
  if (a.attr_i("training_mode", 0) != 0) return a.fail("training_mode=1 is not supported (inference only)");
  for (size_t k = 0; k < 5; ++k) {
    if (!a.has(k)) return a.fail(fmt::format("input {} is missing", k));
  }
  const HostTensor& x = *a.in[0];
  if (x.shape.size() < 2) return a.fail("X needs rank >= 2");
  const int64_t n = x.shape[0], c = x.shape[1], inner = prod(x.shape, 2, x.shape.size());
  for (size_t k = 1; k < 5; ++k) {
    if (a.in[k]->elements() != c) {
      return a.fail(fmt::format("input {} has {} elements, expected {} (per channel; non-spatial mode is not supported)",
                                k, a.in[k]->elements(), c));
    }
  }
  const double eps = a.attr_f("epsilon", 1e-5);
  HostTensor& o = *a.out[0];
  o.allocate();
  // A zero-element X has nothing to normalize, however many channels it declares.
  for (int64_t ch = 0; ch < c && n * inner > 0; ++ch) {
    const double scale = a.in[1]->real(ch) / std::sqrt(a.in[4]->real(ch) + eps);
    const double shift = a.in[2]->real(ch) - a.in[3]->real(ch) * scale;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t s = 0; s < inner; ++s) {
        const int64_t e = (b * c + ch) * inner + s;
        put(o, e, x.real(e) * scale + shift);
      }
    }
  }
  // Optional statistics outputs (older opsets): in inference they are the running statistics.
  for (size_t k = 1; k < a.out.size(); ++k) {
    if (!a.out[k]) continue;
    a.out[k]->allocate();
    const HostTensor& src = *a.in[k % 2 == 1 ? 3 : 4];
    for (int64_t ch = 0; ch < c && ch < a.out[k]->elements(); ++ch) put(*a.out[k], ch, src.real(ch));
  }
  return Ok{};
}

Status layernorm(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  int64_t axis = a.attr_i("axis", -1);
  if (!norm_axis(axis, x.shape.size())) return a.fail(fmt::format("axis {} is out of range", a.attr_i("axis", -1)));
  const int64_t rows = prod(x.shape, 0, static_cast<size_t>(axis));
  const int64_t cols = prod(x.shape, static_cast<size_t>(axis), x.shape.size());
  const HostTensor* scale = a.has(1) ? a.in[1] : nullptr;
  const HostTensor* bias = a.has(2) ? a.in[2] : nullptr;
  const int64_t ns = scale ? scale->elements() : 1, nb = bias ? bias->elements() : 1;
  if (ns == 0 || nb == 0 || cols % ns != 0 || cols % nb != 0) {
    return a.fail("scale/bias do not broadcast to the normalized dims");
  }
  const double eps = a.attr_f("epsilon", 1e-5);
  HostTensor& o = *a.out[0];
  o.allocate();
  HostTensor* mean_out = a.out.size() > 1 ? a.out[1] : nullptr;
  HostTensor* inv_out = a.out.size() > 2 ? a.out[2] : nullptr;
  if (mean_out) mean_out->allocate();
  if (inv_out) inv_out->allocate();
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j) mean += x.real(r * cols + j);
    mean /= static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) {
      const double d = x.real(r * cols + j) - mean;
      var += d * d;
    }
    var /= static_cast<double>(cols);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j) {
      double y = (x.real(r * cols + j) - mean) * inv;
      if (scale) y *= scale->real(j % ns);
      if (bias) y += bias->real(j % nb);
      put(o, r * cols + j, y);
    }
    if (mean_out && r < mean_out->elements()) put(*mean_out, r, mean);
    if (inv_out && r < inv_out->elements()) put(*inv_out, r, inv);
  }
  return Ok{};
}

// Group and instance normalization: statistics per (sample, group of channels).
Status groupnorm(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  if (x.shape.size() < 2) return a.fail("X needs rank >= 2");
  if (!a.has(1) || !a.has(2)) return a.fail("scale and bias inputs are required");
  const int64_t n = x.shape[0], c = x.shape[1], spatial = prod(x.shape, 2, x.shape.size());
  const bool instance = a.node.op_type == "InstanceNormalization";
  const int64_t groups = instance ? c : a.attr_i("num_groups", 0);
  if (groups <= 0 || c % groups != 0) return a.fail(fmt::format("num_groups = {} does not divide {} channels", groups, c));
  const HostTensor &scale = *a.in[1], &bias = *a.in[2];
  // Opset 18 GroupNormalization: scale/bias per group; opset 21 and InstanceNormalization: per channel.
  const bool per_channel = scale.elements() == c;
  if (!per_channel && scale.elements() != groups) {
    return a.fail(fmt::format("scale has {} elements: neither the {} channels nor the {} groups", scale.elements(), c,
                              groups));
  }
  if (bias.elements() != scale.elements()) return a.fail("bias and scale lengths differ");
  const double eps = a.attr_f("epsilon", 1e-5);
  const int64_t cpg = c / groups, block = cpg * spatial;
  HostTensor& o = *a.out[0];
  o.allocate();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = (b * groups + g) * block;
      double mean = 0, var = 0;
      for (int64_t j = 0; j < block; ++j) mean += x.real(base + j);
      mean /= static_cast<double>(block);
      for (int64_t j = 0; j < block; ++j) {
        const double d = x.real(base + j) - mean;
        var += d * d;
      }
      var /= static_cast<double>(block);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < block; ++j) {
        const int64_t p = per_channel ? g * cpg + j / spatial : g;
        put(o, base + j, (x.real(base + j) - mean) * inv * scale.real(p) + bias.real(p));
      }
    }
  }
  return Ok{};
}

Status softmax(KernelArgs& a) {
  const std::string& op = a.node.op_type;
  const HostTensor& x = *a.in[0];
  const bool legacy = a.graph.opset < 13;
  int64_t axis = a.attr_i("axis", legacy ? 1 : -1);
  Split sp;
  if (!x.shape.empty()) {
    if (!norm_axis(axis, x.shape.size())) return a.fail(fmt::format("axis {} is out of range", a.attr_i("axis", 0)));
    sp = legacy ? Split{prod(x.shape, 0, static_cast<size_t>(axis)), prod(x.shape, static_cast<size_t>(axis), x.shape.size()), 1}
                : split_at(x.shape, axis);
  }
  HostTensor& o = *a.out[0];
  o.allocate();
  for (int64_t p = 0; p < sp.outer; ++p) {
    for (int64_t i = 0; i < sp.inner; ++i) {
      double m = -INFINITY;
      int64_t arg = 0;
      for (int64_t j = 0; j < sp.len; ++j) {
        const double v = x.real(sp.at(p, j, i));
        if (v > m) {
          m = v;
          arg = j;
        }
      }
      if (op == "Hardmax") {
        for (int64_t j = 0; j < sp.len; ++j) put(o, sp.at(p, j, i), j == arg ? 1.0 : 0.0);
        continue;
      }
      if (!std::isfinite(m)) m = 0;
      double s = 0;
      for (int64_t j = 0; j < sp.len; ++j) s += std::exp(x.real(sp.at(p, j, i)) - m);
      const double ls = std::log(s);
      for (int64_t j = 0; j < sp.len; ++j) {
        const double v = x.real(sp.at(p, j, i)) - m;
        put(o, sp.at(p, j, i), op == "LogSoftmax" ? v - ls : std::exp(v) / s);
      }
    }
  }
  return Ok{};
}

Status lpnorm(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  int64_t axis = a.attr_i("axis", -1);
  if (!norm_axis(axis, x.shape.size())) return a.fail(fmt::format("axis {} is out of range", a.attr_i("axis", -1)));
  const int64_t p = a.attr_i("p", 2);
  if (p != 1 && p != 2) return a.fail(fmt::format("p = {}: only the L1 and L2 norms are defined", p));
  const Split sp = split_at(x.shape, axis);
  HostTensor& o = *a.out[0];
  o.allocate();
  for (int64_t q = 0; q < sp.outer; ++q) {
    for (int64_t i = 0; i < sp.inner; ++i) {
      double s = 0;
      for (int64_t j = 0; j < sp.len; ++j) {
        const double v = x.real(sp.at(q, j, i));
        s += p == 1 ? std::fabs(v) : v * v;
      }
      const double norm = p == 1 ? s : std::sqrt(s);
      for (int64_t j = 0; j < sp.len; ++j) put(o, sp.at(q, j, i), x.real(sp.at(q, j, i)) / norm);
    }
  }
  return Ok{};
}

Status mvn(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  std::vector<int64_t> axes = a.node.attr("axes") ? a.attr_ints("axes") : std::vector<int64_t>{0, 2, 3};
  auto red = axes_mask(a, axes, x.shape.size());
  if (!red) return red.error();
  const std::vector<int64_t> map = reduce_map(x.shape, *red);
  int64_t n_stat = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (!(*red)[d]) n_stat *= x.shape[d];
  }
  std::vector<double> mean(static_cast<size_t>(n_stat), 0.0), var(static_cast<size_t>(n_stat), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(n_stat), 0);
  const int64_t n = x.elements();
  for (int64_t e = 0; e < n; ++e) {
    const auto k = static_cast<size_t>(map[static_cast<size_t>(e)]);
    mean[k] += x.real(e);
    ++count[k];
  }
  for (size_t k = 0; k < mean.size(); ++k) mean[k] /= static_cast<double>(count[k]);
  for (int64_t e = 0; e < n; ++e) {
    const auto k = static_cast<size_t>(map[static_cast<size_t>(e)]);
    const double d = x.real(e) - mean[k];
    var[k] += d * d;
  }
  HostTensor& o = *a.out[0];
  o.allocate();
  for (int64_t e = 0; e < n; ++e) {
    const auto k = static_cast<size_t>(map[static_cast<size_t>(e)]);
    const double sd = std::sqrt(var[k] / static_cast<double>(count[k]));
    put(o, e, (x.real(e) - mean[k]) / (sd + 1e-9));
  }
  return Ok{};
}

Status lrn(KernelArgs& a) {
  const HostTensor& x = *a.in[0];
  if (x.shape.size() < 2) return a.fail("X needs rank >= 2");
  const int64_t size = a.attr_i("size", 0);
  if (size <= 0) return a.fail(fmt::format("size = {} must be positive", size));
  const double alpha = a.attr_f("alpha", 1e-4), beta = a.attr_f("beta", 0.75), bias = a.attr_f("bias", 1.0);
  const int64_t n = x.shape[0], c = x.shape[1], spatial = prod(x.shape, 2, x.shape.size());
  const int64_t lo = (size - 1) / 2, hi = (size - 1) - lo;  // floor and ceil of (size-1)/2
  HostTensor& o = *a.out[0];
  o.allocate();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t s = 0; s < spatial; ++s) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, ch - lo); k <= std::min(c - 1, ch + hi); ++k) {
          const double v = x.real((b * c + k) * spatial + s);
          sq += v * v;
        }
        const int64_t e = (b * c + ch) * spatial + s;
        put(o, e, x.real(e) / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
      }
    }
  }
  return Ok{};
}

}  // namespace

void register_reduction_normalization(std::map<std::string, Kernel>& k) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    k[op] = reduce;
  }
  k["ArgMax"] = arg_extreme;
  k["ArgMin"] = arg_extreme;
  k["TopK"] = topk;
  k["CumSum"] = cumsum;
  k["BatchNormalization"] = batchnorm;
  k["LayerNormalization"] = layernorm;
  k["GroupNormalization"] = groupnorm;
  k["InstanceNormalization"] = groupnorm;
  k["Softmax"] = softmax;
  k["LogSoftmax"] = softmax;
  k["Hardmax"] = softmax;
  k["LpNormalization"] = lpnorm;
  k["MeanVarianceNormalization"] = mvn;
  k["LRN"] = lrn;
}

}  // namespace gpusim::cpu
