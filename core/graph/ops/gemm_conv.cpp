// Matmul- and conv-like ops, and pooling (which shares the convolution's window arithmetic).
//   MACs: Conv = out elements x (C / group) x prod(kernel); ConvTranspose = input elements x
//   (M / group) x prod(kernel); MatMul = batch x M x N x K; Gemm = M x N x K; Einsum = product of
//   every index extent. FLOPs: 2 fma per MAC, plus the bias/C adds and alpha/beta scaling.
//   Pools: MaxPool = kernel compares per output; AveragePool = kernel adds and one multiply per
//   output; global pools read every input element once.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "graph/einsum.h"
#include "ops/checked.h"
#include "ops/registry.h"

namespace gpusim::ops {
namespace {

int64_t prod(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad;
  bool ceil_mode = false;
};

// Reads the window attributes for `n` spatial dims, with ONNX defaults; validates lengths.
Result<Window> read_window(const InferContext& c, size_t n, std::vector<int64_t> kernel) {
  Window w;
  w.kernel = std::move(kernel);
  w.strides = c.attr_ints("strides");
  w.dilations = c.attr_ints("dilations");
  w.pads = c.attr_ints("pads");
  w.auto_pad = c.attr_s("auto_pad", "NOTSET");
  w.ceil_mode = c.attr_i("ceil_mode", 0) != 0;
  if (w.strides.empty()) w.strides.assign(n, 1);
  if (w.dilations.empty()) w.dilations.assign(n, 1);
  if (w.pads.empty()) w.pads.assign(2 * n, 0);
  auto check = [&](const std::vector<int64_t>& v, size_t want, const char* name) -> Status {
    if (v.size() != want) {
      return c.fail(fmt::format("attribute {} has {} values, expected {} for an input with {} spatial dims", name,
                                v.size(), want, n));
    }
    return Ok{};
  };
  if (auto s = check(w.kernel, n, "kernel_shape"); !s) return s.error();
  if (auto s = check(w.strides, n, "strides"); !s) return s.error();
  if (auto s = check(w.dilations, n, "dilations"); !s) return s.error();
  if (auto s = check(w.pads, 2 * n, "pads"); !s) return s.error();
  for (size_t i = 0; i < n; ++i) {
    if (w.strides[i] <= 0) return c.fail(fmt::format("strides[{}] = {} must be positive", i, w.strides[i]));
    if (w.dilations[i] <= 0) return c.fail(fmt::format("dilations[{}] = {} must be positive", i, w.dilations[i]));
    if (w.kernel[i] <= 0) return c.fail(fmt::format("kernel_shape[{}] = {} must be positive", i, w.kernel[i]));
  }
  return w;
}

Result<Shape> window_out(const InferContext& c, const Shape& in_spatial, const Window& w) {
  Shape out(in_spatial.size());
  const size_t n = in_spatial.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = in_spatial[i];
    const int64_t s = w.strides[i];
    const int64_t pb = w.pads[i], pe = w.pads[i + n];
    if (pb < 0 || pe < 0) return c.fail(fmt::format("pads[{}] = {}, pads[{}] = {}: pads must be >= 0", i, pb, i + n, pe));
    // kernel, dilation and stride are positive (read_window); every sum below is checked.
    auto eff_k = mul_checked(w.kernel[i] - 1, w.dilations[i]);
    if (eff_k) eff_k = add_checked(*eff_k, 1);
    auto padded = add_checked(in, pb);
    if (padded) padded = add_checked(*padded, pe);
    if (!eff_k || !padded) {
      return c.fail(fmt::format("spatial dim {}: kernel {} dilation {} pads {} + {} overflow 64 bits", i, w.kernel[i],
                                w.dilations[i], pb, pe));
    }
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      out[i] = in / s + (in % s != 0 ? 1 : 0);
    } else if (w.auto_pad == "VALID") {
      out[i] = in >= *eff_k ? (in - *eff_k) / s + 1 : 0;
    } else if (w.auto_pad == "NOTSET" || w.auto_pad.empty()) {
      const int64_t span = *padded - *eff_k;
      if (span < 0) {
        return c.fail(fmt::format("spatial dim {}: the window ({} with dilation {}) is larger than the padded input "
                                  "({} + pads {} + {})",
                                  i, w.kernel[i], w.dilations[i], in, pb, pe));
      }
      out[i] = (w.ceil_mode ? span / s + (span % s != 0 ? 1 : 0) : span / s) + 1;
      // A last window that would start in the end padding is dropped (PyTorch and ONNX agree).
      // (out - 1) * s >= in + pb, without the product: in + pb cannot overflow (padded did not).
      const int64_t before_end_pad = in + pb;
      if (w.ceil_mode && out[i] - 1 >= before_end_pad / s + (before_end_pad % s != 0 ? 1 : 0)) --out[i];
    } else {
      return c.fail(fmt::format("auto_pad = \"{}\" is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", w.auto_pad));
    }
    if (out[i] <= 0) {
      return c.fail(fmt::format("spatial dim {} of size {} leaves no output for kernel {} stride {}", i, in,
                                w.kernel[i], s));
    }
  }
  return out;
}

Status infer_conv(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  if (auto s = c.need(1, "W"); !s) return s;
  const Shape& x = c.shape(0);
  const Shape& w = c.shape(1);
  if (x.size() < 3) return c.fail(fmt::format("input X {} needs rank >= 3 (N, C, spatial...)", shape_str(x)));
  if (w.size() != x.size()) {
    return c.fail(fmt::format("weight W {} has rank {}, input X {} has rank {}", shape_str(w), w.size(), shape_str(x),
                              x.size()));
  }
  const int64_t group = c.attr_i("group", 1);
  if (group <= 0) return c.fail(fmt::format("group = {} must be positive", group));
  const auto group_channels = mul_checked(w[1], group);  // a group near 2^62 overflowed here
  if (!group_channels || x[1] != *group_channels) {
    return c.fail(fmt::format("input channels {} != weight channels {} x group {}", x[1], w[1], group));
  }
  const size_t n = x.size() - 2;
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty()) kernel.assign(w.begin() + 2, w.end());
  if (kernel.size() != n) {
    return c.fail(fmt::format("kernel_shape has {} dims, input has {} spatial dims", kernel.size(), n));
  }
  auto win = read_window(c, n, kernel);
  if (!win) return win.error();
  auto sp = window_out(c, Shape(x.begin() + 2, x.end()), *win);
  if (!sp) return sp.error();
  Shape out = {x[0], w[0]};
  out.insert(out.end(), sp->begin(), sp->end());
  return c.set(0, c.node().op_type == "ConvInteger" ? DType::kInt32 : c.dtype(0), out);
}

void cost_conv(const CostContext& c, OpCost& cost) {
  const Shape& w = c.in(1).shape;
  const int64_t per_out = prod(w, 1);  // (C / group) x prod(kernel)
  cost.macs = c.out_elems() * per_out;
  cost.flops.fma = 2 * cost.macs + (c.has_input(2) ? c.out_elems() : 0);
}

Status infer_conv_transpose(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  if (auto s = c.need(1, "W"); !s) return s;
  const Shape& x = c.shape(0);
  const Shape& w = c.shape(1);
  if (x.size() < 3 || w.size() != x.size()) {
    return c.fail(fmt::format("input X {} and weight W {} must both have rank >= 3 and equal ranks", shape_str(x),
                              shape_str(w)));
  }
  const int64_t group = c.attr_i("group", 1);
  if (group <= 0) return c.fail(fmt::format("group = {} must be positive", group));
  if (x[1] != w[0]) return c.fail(fmt::format("input channels {} != weight dim 0 ({})", x[1], w[0]));
  const size_t n = x.size() - 2;
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty()) kernel.assign(w.begin() + 2, w.end());
  auto win = read_window(c, n, kernel);
  if (!win) return win.error();
  std::vector<int64_t> out_pad = c.attr_ints("output_padding");
  if (out_pad.empty()) out_pad.assign(n, 0);
  std::vector<int64_t> out_shape = c.attr_ints("output_shape");
  const auto out_channels = mul_checked(w[1], group);
  if (!out_channels) return c.fail(fmt::format("weight dim 1 ({}) x group {} overflows 64 bits", w[1], group));
  if (out_pad.size() != n) {
    return c.fail(fmt::format("output_padding has {} values, expected {} (one per spatial dim)", out_pad.size(), n));
  }
  if (!out_shape.empty() && out_shape.size() < n) {
    return c.fail(fmt::format("output_shape has {} values, expected at least {} (one per spatial dim)", out_shape.size(), n));
  }
  Shape out = {x[0], *out_channels};
  for (size_t i = 0; i < n; ++i) {
    std::optional<int64_t> o;
    if (!out_shape.empty()) {
      o = out_shape[out_shape.size() - n + i];
    } else if (win->auto_pad == "SAME_UPPER" || win->auto_pad == "SAME_LOWER") {
      o = mul_checked(x[2 + i], win->strides[i]);
    } else {
      // stride x (in - 1) + output_padding + (kernel - 1) x dilation + 1 - pads, each step checked:
      // strides, dilations or pads near 2^62 overflowed here.
      auto a = mul_checked(win->strides[i], x[2 + i] - 1);
      auto b = mul_checked(kernel[i] - 1, win->dilations[i]);
      auto sum = a && b ? add_checked(*a, *b) : std::nullopt;
      if (sum) sum = add_checked(*sum, out_pad[i]);
      if (sum) sum = add_checked(*sum, 1);
      auto pads = add_checked(win->pads[i], win->pads[i + n]);
      if (sum && pads) o = *sum - *pads;
    }
    if (!o) {
      return c.fail(fmt::format("spatial dim {}: stride {}, dilation {}, output_padding {} and pads overflow 64 bits", i,
                                win->strides[i], win->dilations[i], out_pad[i]));
    }
    if (*o <= 0) return c.fail(fmt::format("spatial dim {} of the output would be {}", i, *o));
    out.push_back(*o);
  }
  return c.set(0, c.dtype(0), out);
}

void cost_conv_transpose(const CostContext& c, OpCost& cost) {
  const Shape& w = c.in(1).shape;
  cost.macs = c.in_elems(0) * prod(w, 1);  // each input element scatters into (M / group) x kernel outputs
  cost.flops.fma = 2 * cost.macs + (c.has_input(2) ? c.out_elems() : 0);
}

Status infer_matmul(InferContext& c) {
  if (auto s = c.need(0, "A"); !s) return s;
  if (auto s = c.need(1, "B"); !s) return s;
  Shape a = c.shape(0), b = c.shape(1);
  if (a.empty() || b.empty()) return c.fail("MatMul operands must have rank >= 1");
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  const int64_t k_a = a.back(), k_b = b[b.size() - 2];
  if (k_a != k_b) {
    return c.fail(fmt::format("inner dims differ: A {} has K = {}, B {} has K = {}", shape_str(c.shape(0)), k_a,
                              shape_str(c.shape(1)), k_b));
  }
  auto batch = broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!batch) return c.fail("batch dims: " + batch.error().message);
  Shape out = *batch;
  if (!a1) out.push_back(a[a.size() - 2]);
  if (!b1) out.push_back(b.back());
  DType t = c.dtype(0);
  if (c.node().op_type == "MatMulInteger") t = DType::kInt32;
  return c.set(0, t, out);
}

void cost_matmul(const CostContext& c, OpCost& cost) {
  const Shape& a = c.in(0).shape;
  const int64_t k = a.back();
  cost.macs = c.out_elems() * k;
  cost.flops.fma = 2 * cost.macs;
}

Status infer_gemm(InferContext& c) {
  if (auto s = c.need(0, "A"); !s) return s;
  if (auto s = c.need(1, "B"); !s) return s;
  const Shape &a = c.shape(0), &b = c.shape(1);
  if (a.size() != 2 || b.size() != 2) {
    return c.fail(fmt::format("A {} and B {} must be 2-D", shape_str(a), shape_str(b)));
  }
  const bool ta = c.attr_i("transA", 0) != 0, tb = c.attr_i("transB", 0) != 0;
  const int64_t m = ta ? a[1] : a[0], ka = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (ka != kb) {
    return c.fail(fmt::format("inner dims differ: A {} (transA={}) gives K = {}, B {} (transB={}) gives K = {}",
                              shape_str(a), int(ta), ka, shape_str(b), int(tb), kb));
  }
  if (c.has_input(2)) {
    auto bc = broadcast(Shape{m, n}, c.shape(2));
    if (!bc || *bc != Shape{m, n}) {
      return c.fail(fmt::format("C {} does not broadcast to the output [{}, {}]", shape_str(c.shape(2)), m, n));
    }
  }
  return c.set(0, c.dtype(0), {m, n});
}

void cost_gemm(const CostContext& c, OpCost& cost) {
  const Shape& a = c.in(0).shape;
  const int64_t k = c.attr_i("transA", 0) ? a[0] : a[1];
  cost.macs = c.out_elems() * k;
  cost.flops.fma = 2 * cost.macs + (c.has_input(2) ? 2 * c.out_elems() : 0);
}

// ---- Einsum --------------------------------------------------------------------------------

Result<EinsumEquation> parse_einsum(const InferContext& c, const std::string& eq, size_t n_inputs) {
  EinsumEquation t = parse_einsum_equation(eq);
  if (t.inputs.size() != n_inputs) {
    return c.fail(fmt::format("equation \"{}\" names {} operands, the node has {} inputs", eq, t.inputs.size(),
                              n_inputs));
  }
  return t;
}

Status infer_einsum(InferContext& c) {
  auto terms = parse_einsum(c, c.attr_s("equation", ""), c.num_inputs());
  if (!terms) return terms.error();
  std::map<char, int64_t> dim;
  Shape ell;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (auto s = c.need(i, "operand"); !s) return s;
    const std::string& term = terms->inputs[i];
    const Shape& sh = c.shape(i);
    const bool has_ell = term.find('.') != std::string::npos;
    const size_t letters = term.size() - (has_ell ? 1 : 0);
    if (sh.size() < letters || (!has_ell && sh.size() != letters)) {
      return c.fail(fmt::format("operand {} has shape {} but the equation term \"{}\" needs rank {}", i, shape_str(sh),
                                term, letters));
    }
    const size_t ell_rank = sh.size() - letters;
    size_t d = 0;
    for (char ch : term) {
      if (ch == '.') {
        Shape e(sh.begin() + static_cast<long>(d), sh.begin() + static_cast<long>(d + ell_rank));
        auto b = broadcast(ell, e);
        if (!b) return c.fail("ellipsis dims: " + b.error().message);
        ell = *b;
        d += ell_rank;
        continue;
      }
      const int64_t v = sh[d++];
      auto [it, inserted] = dim.emplace(ch, v);
      if (!inserted && it->second != v) {
        if (it->second == 1) {
          it->second = v;
        } else if (v != 1) {
          return c.fail(fmt::format("index '{}' has size {} in one operand and {} in operand {}", ch, it->second, v, i));
        }
      }
    }
  }
  Shape out;
  for (char ch : terms->output) {
    if (ch == '.') {
      out.insert(out.end(), ell.begin(), ell.end());
    } else if (auto it = dim.find(ch); it != dim.end()) {
      out.push_back(it->second);
    } else {
      return c.fail(fmt::format("output index '{}' does not appear in any operand", ch));
    }
  }
  return c.set(0, c.dtype(0), out);
}

void cost_einsum(const CostContext& c, OpCost& cost) {
  // Every distinct index once: the loop nest an unfused einsum runs.
  std::map<char, int64_t> dim;
  std::string eq = c.attr_s("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const std::string lhs = eq.substr(0, eq.find("->"));
  size_t op = 0, d = 0;
  int64_t ell_elems = 1;
  for (size_t p = 0; p < lhs.size(); ++p) {
    const char ch = lhs[p];
    if (ch == ',') {
      ++op;
      d = 0;
      continue;
    }
    const Shape& sh = c.in(op).shape;
    if (ch == '.') {
      // Count the ellipsis dims of this operand once (the broadcast maximum over operands).
      size_t letters = 0, q = p;
      while (q > 0 && lhs[q - 1] != ',') --q;
      for (size_t r = q; r < lhs.size() && lhs[r] != ','; ++r) letters += (std::isalpha(static_cast<unsigned char>(lhs[r])) != 0);
      const size_t ell_rank = sh.size() - letters;
      int64_t e = 1;
      for (size_t k = 0; k < ell_rank; ++k) e *= sh[d + k];
      ell_elems = std::max(ell_elems, e);
      d += ell_rank;
      p += 2;
      continue;
    }
    int64_t& v = dim[ch];
    v = std::max(v, sh[d++]);
  }
  int64_t macs = ell_elems;
  for (auto& [ch, v] : dim) macs *= v;
  cost.macs = macs;
  cost.flops.fma = 2 * macs;
}

// ---- Pooling --------------------------------------------------------------------------------

Status infer_pool(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  const Shape& x = c.shape(0);
  if (x.size() < 3) return c.fail(fmt::format("input X {} needs rank >= 3 (N, C, spatial...)", shape_str(x)));
  const size_t n = x.size() - 2;
  auto win = read_window(c, n, c.attr_ints("kernel_shape"));
  if (!win) return win.error();
  auto sp = window_out(c, Shape(x.begin() + 2, x.end()), *win);
  if (!sp) return sp.error();
  Shape out = {x[0], x[1]};
  out.insert(out.end(), sp->begin(), sp->end());
  if (auto s = c.set(0, c.dtype(0), out); !s) return s;
  if (c.num_outputs() > 1) return c.set(1, DType::kInt64, out);  // MaxPool indices
  return Ok{};
}

void cost_pool(const CostContext& c, OpCost& cost) {
  const Attribute* k = c.node().attr("kernel_shape");
  const int64_t window = k ? prod(k->ints) : 1;
  const std::string& op = c.node().op_type;
  if (op == "MaxPool") {
    cost.flops.compare = c.out_elems() * window;
  } else if (op == "LpPool") {
    cost.flops.fma = 2 * c.out_elems() * window;
    cost.flops.transcendental = c.out_elems() * (window + 1);
  } else {
    cost.flops.fma = c.out_elems() * (window + 1);
  }
}

Status infer_global_pool(InferContext& c) {
  if (auto s = c.need(0, "X"); !s) return s;
  const Shape& x = c.shape(0);
  if (x.size() < 3) return c.fail(fmt::format("input X {} needs rank >= 3 (N, C, spatial...)", shape_str(x)));
  Shape out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  return c.set(0, c.dtype(0), out);
}

void cost_global_pool(const CostContext& c, OpCost& cost) {
  if (c.node().op_type == "GlobalMaxPool") {
    cost.flops.compare = c.in_elems(0);
  } else if (c.node().op_type == "GlobalLpPool") {
    cost.flops.fma = 2 * c.in_elems(0);
    cost.flops.transcendental = c.in_elems(0) + c.out_elems();
  } else {
    cost.flops.fma = c.in_elems(0) + c.out_elems();
  }
}

}  // namespace

Status matmul_shape(InferContext& c) { return infer_matmul(c); }
Status conv_shape(InferContext& c) { return infer_conv(c); }

std::vector<OpDef> gemm_conv_ops() {
  return {
      {"Conv", "", OpClass::kConv, infer_conv, cost_conv},
      {"ConvInteger", "", OpClass::kConv, infer_conv, cost_conv},
      {"ConvTranspose", "", OpClass::kConv, infer_conv_transpose, cost_conv_transpose},
      {"MatMul", "", OpClass::kGemm, infer_matmul, cost_matmul},
      {"MatMulInteger", "", OpClass::kGemm, infer_matmul, cost_matmul},
      {"Gemm", "", OpClass::kGemm, infer_gemm, cost_gemm},
      {"Einsum", "", OpClass::kGemm, infer_einsum, cost_einsum},
      {"MaxPool", "", OpClass::kReduction, infer_pool, cost_pool},
      {"AveragePool", "", OpClass::kReduction, infer_pool, cost_pool},
      {"LpPool", "", OpClass::kReduction, infer_pool, cost_pool},
      {"GlobalAveragePool", "", OpClass::kReduction, infer_global_pool, cost_global_pool},
      {"GlobalMaxPool", "", OpClass::kReduction, infer_global_pool, cost_global_pool},
      {"GlobalLpPool", "", OpClass::kReduction, infer_global_pool, cost_global_pool},
  };
}

}  // namespace gpusim::ops
