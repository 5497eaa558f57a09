// Windowed pools (MaxPool, AveragePool, LpPool) and the pointwise normalizations
// (BatchNormalization in inference, LRN): one thread per output element, the window walked with
// one loop per spatial dim, sizes, strides, dilations and pads baked in. The window arithmetic
// (auto_pad, which positions count toward count_include_pad, MaxPool's Indices in row- or
// column-major order) follows the CPU reference (backends/cpu/kernels_gemm_conv.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "gen_rows.h"
#include "node_attrs.h"

namespace gpusim::codegen {

namespace {

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to && d < s.size(); ++d) p *= s[d];
  return p;
}

}  // namespace

Result<Kernel> gen_pool(const GenContext& c) {
  const Node& n = c.anchor();
  const std::string& op = n.op_type;
  const Shape& xs = c.tensor(n.inputs[0]).shape;
  const Shape& ys = c.tensor(n.outputs[0]).shape;
  if (xs.size() < 3 || ys.size() != xs.size()) return c.unsupported(n, "input needs rank >= 3 (N, C, spatial...)");
  const size_t nd = xs.size() - 2;
  std::vector<int64_t> k = node_ints(n, "kernel_shape"), s = node_ints(n, "strides"), d = node_ints(n, "dilations"),
                       pads = node_ints(n, "pads");
  if (s.empty()) s.assign(nd, 1);
  if (d.empty()) d.assign(nd, 1);
  if (pads.empty()) pads.assign(2 * nd, 0);
  if (k.size() != nd || s.size() != nd || d.size() != nd || pads.size() != 2 * nd) {
    return c.unsupported(n, "kernel_shape/strides/dilations/pads do not match the spatial rank");
  }
  const std::string ap = node_string(n, "auto_pad", "NOTSET");
  std::vector<int64_t> pb(nd), pe(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = xs[i + 2], out = ys[i + 2], eff = (k[i] - 1) * d[i] + 1;
    pb[i] = pads[i];
    pe[i] = pads[i + nd];
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (out - 1) * s[i] + eff - in);
      pb[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[i] = total - pb[i];
    } else if (ap == "VALID") {
      pb[i] = pe[i] = 0;
    }
  }
  const bool include_pad = node_int(n, "count_include_pad", 0) != 0;
  const bool col_major = node_int(n, "storage_order", 0) != 0;
  const int64_t p = node_int(n, "p", 2);
  if (op == "LpPool" && p <= 0) return c.unsupported(n, fmt::format("p = {} must be positive", p));
  const int64_t in_sp = product(xs, 2, xs.size()), out_sp = product(ys, 2, ys.size());
  const int64_t n_out = product(ys, 0, ys.size());
  const bool indices = n.outputs.size() > 1 && n.outputs[1] != kNoTensor;

  ArgList args(c);
  const Shape out_spatial(ys.begin() + 2, ys.end());
  std::string b = per_element_start(n_out, "oi");
  if (n_out > 0) {
    b += fmt::format("  int pl = oi / {};\n  int os = oi % {};\n", out_sp, out_sp);
    for (size_t i = 0; i < nd; ++i) b += fmt::format("  int od{} = {};\n", i, coord(out_spatial, i, "os"));
  } else {  // nothing to compute (the kernel returns at once); keep the text well-formed
    b += "  int pl = 0;\n";
    for (size_t i = 0; i < nd; ++i) b += fmt::format("  int od{} = 0;\n", i);
  }
  const bool count_pads = op == "AveragePool" && include_pad;
  b += op == "MaxPool" ? "  float best = -INF_F;\n  int bat = -1;\n" : "  float sum = 0.0f;\n";
  if (op == "AveragePool") b += count_pads ? "  int npad = 0;\n" : "  int cnt = 0;\n";
  std::string ind = "  ";
  std::string inside, in_pads, flat, cm;
  int64_t cm_stride = 1;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = xs[i + 2];
    b += fmt::format("{}for (int k{} = 0; k{} < {}; ++k{}) {{\n", ind, i, i, k[i], i);
    ind += "  ";
    b += fmt::format("{}int i{} = od{} * {} + k{} * {} - {};\n", ind, i, i, s[i], i, d[i], pb[i]);
    inside += fmt::format("{}i{} >= 0 && i{} < {}", i ? " && " : "", i, i, in);
    in_pads += fmt::format("{}i{} >= {} && i{} < {}", i ? " && " : "", i, -pb[i], i, in + pe[i]);
    const int64_t inner = product(xs, i + 3, xs.size());
    flat += fmt::format("{}i{}{}", i ? " + " : "", i, inner == 1 ? "" : fmt::format(" * {}", inner));
    cm += fmt::format("{}i{}{}", i ? " + " : "", i, cm_stride == 1 ? "" : fmt::format(" * {}", cm_stride));
    cm_stride *= in;
  }
  if (count_pads) b += fmt::format("{}if ({}) npad = npad + 1;\n", ind, in_pads);
  b += fmt::format("{}if ({}) {{\n", ind, inside);
  b += fmt::format("{}  int f = {};\n{}  float x = float({});\n", ind, flat, ind,
                   args.load(n.inputs[0], fmt::format("pl * {} + f", in_sp)));
  if (op == "AveragePool" && !count_pads) b += ind + "  cnt = cnt + 1;\n";
  if (op == "MaxPool") {
    b += fmt::format("{0}  if (x > best || bat < 0) {{\n{0}    best = x;\n{0}    bat = pl * {1} + {2};\n{0}  }}\n", ind,
                     in_sp, col_major ? "(" + cm + ")" : "f");
  } else if (op == "LpPool") {
    b += fmt::format("{}  sum = sum + {};\n", ind,
                     p == 1 ? "fabsf(x)" : p == 2 ? "x * x" : fmt::format("powf(fabsf(x), {})", float_lit(double(p))));
  } else {
    b += fmt::format("{}  sum = sum + x;\n", ind);
  }
  b += ind + "}\n";
  for (size_t i = nd; i-- > 0;) {
    ind.resize(ind.size() - 2);
    b += ind + "}\n";
  }
  std::string result;
  if (op == "MaxPool") {
    result = "best";
  } else if (op == "LpPool") {
    result = p == 1 ? "sum" : p == 2 ? "sqrtf(sum)" : fmt::format("powf(sum, {})", float_lit(1.0 / double(p)));
  } else {
    result = fmt::format("sum / float({})", count_pads ? "npad" : "cnt");
  }
  auto st = store_main(c, args, result, "oi");
  if (!st) return st.error();
  b += *st;
  if (indices) {
    if (op != "MaxPool") return c.unsupported(n, "a second output");
    b += "      " + args.store(n.outputs[1], "oi", "bat") + "\n";
  }
  Kernel kn;
  kn.name = short_name(c, "pool");
  kn.cls = "reduction";
  // The tile's threads, as priced (the capability rounds them to a power of two).
  const uint32_t block = std::min<uint32_t>(pow2_at_most(c.k.tile.threads > 0 ? c.k.tile.threads : 256),
                                            pow2_at_most(std::min(c.opts.max_threads, 1024)));
  kn.block = {block, 1, 1};
  kn.groups = groups_for(n_out, block);
  kn.body = b;
  kn.args = std::move(args.args);
  return kn;
}

Result<Kernel> gen_pointwise_norm(const GenContext& c) {
  const Node& n = c.anchor();
  const Shape& xs = c.tensor(n.inputs[0]).shape;
  if (xs.size() < 2) return c.unsupported(n, "X needs rank >= 2");
  const int64_t ch = xs[1], spatial = product(xs, 2, xs.size()), total = product(xs, 0, xs.size());
  ArgList args(c);
  std::string b = per_element_start(total, "oi");
  b += total > 0 ? fmt::format("  int ch = (oi / {}) % {};\n", spatial, ch) : std::string("  int ch = 0;\n");
  auto xv = input_value(c, args, "oi", "x", "  ");
  if (!xv) return xv.error();
  b += *xv;
  std::string result;
  if (n.op_type == "BatchNormalization") {
    if (node_int(n, "training_mode", 0) != 0) return c.unsupported(n, "training_mode=1 (only inference is generated)");
    for (size_t k = 1; k < n.outputs.size(); ++k) {
      if (n.outputs[k] != kNoTensor) return c.unsupported(n, "the running-statistics outputs (training graphs)");
    }
    for (size_t k = 1; k < 5; ++k) {
      if (!has_input(n, k)) return c.unsupported(n, fmt::format("input {} is missing", k));
      if (c.tensor(n.inputs[k]).elements() != ch) {
        return c.unsupported(n, fmt::format("input {} has {} elements, expected {} (per channel)", k,
                                            c.tensor(n.inputs[k]).elements(), ch));
      }
    }
    std::string ld[5];
    for (size_t k = 1; k < 5; ++k) ld[k] = "float(" + args.load(n.inputs[k], "ch") + ")";  // bindings in input order
    b += fmt::format("  float bs = {} / sqrtf({} + {});\n", ld[1], ld[4], float_lit(node_float(n, "epsilon", 1e-5)));
    b += fmt::format("  float bt = {} - {} * bs;\n", ld[2], ld[3]);
    result = "x * bs + bt";
  } else {  // LRN
    const int64_t size = node_int(n, "size", 0);
    if (size <= 0) return c.unsupported(n, fmt::format("size = {} must be positive", size));
    const double alpha = node_float(n, "alpha", 1e-4), beta = node_float(n, "beta", 0.75), bias = node_float(n, "bias", 1.0);
    const int64_t lo = (size - 1) / 2, hi = (size - 1) - lo;
    b += "  float sq = 0.0f;\n";
    b += fmt::format("  for (int kk = {}; kk <= {}; ++kk) {{\n    int cc = ch + kk;\n", -lo, hi);
    auto nv = input_value(c, args, fmt::format("oi + kk * {}", spatial), "v", "      ");
    if (!nv) return nv.error();
    b += fmt::format("    if (cc >= 0 && cc < {}) {{\n{}      sq = sq + v * v;\n    }}\n  }}\n", ch, *nv);
    result = fmt::format("x / powf({} + {} * sq, {})", float_lit(bias), float_lit(alpha / static_cast<double>(size)),
                         float_lit(beta));
  }
  auto st = store_main(c, args, result, "oi");
  if (!st) return st.error();
  b += *st;
  Kernel kn;
  kn.name = short_name(c, "norm");
  kn.cls = "normalization";
  // The tile's threads, as priced (the capability rounds them to a power of two).
  const uint32_t block = std::min<uint32_t>(pow2_at_most(c.k.tile.threads > 0 ? c.k.tile.threads : 256),
                                            pow2_at_most(std::min(c.opts.max_threads, 1024)));
  kn.block = {block, 1, 1};
  kn.groups = groups_for(total, block);
  kn.body = b;
  kn.args = std::move(args.args);
  return kn;
}

}  // namespace gpusim::codegen
