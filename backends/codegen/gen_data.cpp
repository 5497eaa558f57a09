// Data movement: one thread per output element (Split: per input element, writing whichever
// output the element belongs to), each computing its source index with the shapes, strides and
// constant inputs (Slice starts, Pad pads, Resize scales, ...) baked in. Values move in their
// storage type: int tensors as int, floats as float (fp16 storage converts in LD/ST).
// Semantics follow the CPU reference (backends/cpu/kernels_data.cpp); out-of-range gather
// indices are clamped instead of failing (a kernel cannot report them).
//
// Not generated (kUnsupported, the executor runs them on the host): Scatter* (a copy then a
// scatter: two passes), NonZero (data-dependent shape), Shape/Size/Constant (import-time values),
// sequences; Resize with antialias.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "data_index.h"
#include "gen_rows.h"
#include "node_attrs.h"

namespace gpusim::codegen {

namespace {

int64_t product(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t d = from; d < to && d < s.size(); ++d) p *= s[d];
  return p;
}


// Clamp an int variable into [0, n-1] (statement).
std::string clamp_stmt(const std::string& v, int64_t n) {
  return fmt::format("{0} = {0} < 0 ? 0 : ({0} > {1} ? {1} : {0});", v, n - 1);
}

struct Gen {
  const GenContext& c;
  const Node& n;
  ArgList args;
  std::string body;

  Gen(const GenContext& ctx) : c(ctx), n(ctx.anchor()), args(ctx) {}  // NOLINT
  const Tensor& in(size_t i) const { return c.tensor(n.inputs[i]); }
  const Tensor& out(size_t i = 0) const { return c.tensor(n.outputs[i]); }
  const Shape& ys() const { return out().shape; }
  bool out_int() const { return !dtype_is_float(out().dtype); }
  const char* vt() const { return out_int() ? "int" : "float"; }
  // Input k's element `idx`, converted to the output's value type.
  std::string ld(size_t k, const std::string& idx) { return fmt::format("{}({})", vt(), args.load(n.inputs[k], idx)); }
  std::string ldi(size_t k, const std::string& idx) { return fmt::format("int({})", args.load(n.inputs[k], idx)); }
  Error fail(const std::string& why) const { return c.unsupported(n, why); }
  // Ends the body: the main output gets `value` at oi.
  Status finish(const std::string& value) {
    auto st = store_main(c, args, value, "oi");
    if (!st) return st.error();
    body += *st;
    return Ok{};
  }
};

std::string coords_of(const Shape& s, const std::string& flat, const char* prefix) {
  std::string b;
  for (size_t d = 0; d < s.size(); ++d) b += fmt::format("  int {}{} = {};\n", prefix, d, coord(s, d, flat));
  return b;
}

// ---- copies -----------------------------------------------------------------------------------

Status transpose(Gen& g) {
  const Shape& xs = g.in(0).shape;
  std::vector<int64_t> perm = node_ints(g.n, "perm");
  if (perm.empty()) {
    for (size_t d = xs.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (perm.size() != xs.size()) return g.fail("perm does not match the input rank");
  const auto st = strides_of(xs);
  std::vector<std::string> terms;
  for (size_t d = 0; d < perm.size(); ++d) {
    int64_t p = perm[d];
    if (!normalize_axis(p, xs.size())) return g.fail(fmt::format("perm entry {} is out of range", perm[d]));
    terms.push_back(times(coord(g.ys(), d, "oi"), st[static_cast<size_t>(p)]));
  }
  return g.finish(g.ld(0, sum_terms(terms)));
}

Status concat(Gen& g) {
  const Shape& ys = g.ys();
  int64_t axis = node_int(g.n, "axis", 0);
  if (!normalize_axis(axis, ys.size())) return g.fail(fmt::format("axis {} is out of range", axis));
  const auto ax = static_cast<size_t>(axis);
  const int64_t inner = product(ys, ax + 1), along = ys[ax];
  g.body += fmt::format("  int ca = {};\n  int ou = oi / {};\n  int iu = {};\n", coord(ys, ax, "oi"), along * inner,
                        inner == 1 ? "0" : fmt::format("oi % {}", inner));
  g.body += fmt::format("  {} v = {};\n", g.vt(), g.out_int() ? "0" : "0.0f");
  int64_t off = 0;
  bool first = true;
  for (size_t k = 0; k < g.n.inputs.size(); ++k) {
    if (!has_input(g.n, k)) continue;
    const Shape& s = g.in(k).shape;
    const int64_t e = s.size() > ax ? s[ax] : 0;
    if (e == 0) continue;
    const std::string idx = fmt::format("(ou * {} + ca - {}) * {} + iu", e, off, inner);
    g.body += fmt::format("  {}if (ca < {}) v = {};\n", first ? "" : "else ", off + e, g.ld(k, idx));
    first = false;
    off += e;
  }
  return g.finish("v");
}

Status split(Gen& g) {
  const Shape& xs = g.in(0).shape;
  int64_t axis = node_int(g.n, "axis", 0);
  if (!normalize_axis(axis, xs.size())) return g.fail(fmt::format("axis {} is out of range", axis));
  const auto ax = static_cast<size_t>(axis);
  const int64_t inner = product(xs, ax + 1), along = xs[ax];
  g.body += fmt::format("  int ca = {};\n  int ou = oi / {};\n  int iu = {};\n", coord(xs, ax, "oi"), along * inner,
                        inner == 1 ? "0" : fmt::format("oi % {}", inner));
  const bool is_int = g.args.is_int(g.n.inputs[0]);
  g.body += fmt::format("  {0} v = {0}({1});\n", is_int ? "int" : "float", g.args.load(g.n.inputs[0], "oi"));
  int64_t off = 0;
  bool first = true;
  for (size_t k = 0; k < g.n.outputs.size(); ++k) {
    if (g.n.outputs[k] == kNoTensor) return g.fail("an omitted output; every output is needed to know the split sizes");
    const Shape& s = g.out(k).shape;
    const int64_t e = s.size() > ax ? s[ax] : 0;
    if (e == 0) {
      g.args.output(g.n.outputs[k]);
      continue;
    }
    const std::string idx = fmt::format("(ou * {} + ca - {}) * {} + iu", e, off, inner);
    g.body += fmt::format("  {}if (ca < {}) {}\n", first ? "" : "else ", off + e, g.args.store(g.n.outputs[k], idx, "v"));
    first = false;
    off += e;
  }
  return Ok{};
}

Status slice(Gen& g) {
  const Shape& xs = g.in(0).shape;
  auto w = slice_window(g.c, g.n);
  if (!w) return w.error();
  const auto st = strides_of(xs);
  int64_t base = 0;
  std::vector<std::string> terms;
  for (size_t d = 0; d < xs.size(); ++d) {
    base += w->start[d] * st[d];
    terms.push_back(times(coord(g.ys(), d, "oi"), w->step[d] * st[d]));
  }
  terms.push_back(base ? std::to_string(base) : "0");
  return g.finish(g.ld(0, sum_terms(terms)));
}

// ---- gathers ----------------------------------------------------------------------------------

Status gather(Gen& g) {
  const Shape& xs = g.in(0).shape;
  int64_t axis = node_int(g.n, "axis", 0);
  if (!normalize_axis(axis, xs.size()) || xs.empty()) return g.fail(fmt::format("axis {} is out of range", axis));
  const auto ax = static_cast<size_t>(axis);
  const int64_t inner = product(xs, ax + 1), dim = xs[ax], n_idx = g.in(1).elements();
  const ConstInput ci = const_input(g.c.g, g.n, 1);
  g.body += fmt::format("  int iu = {};\n  int kq = {};\n  int ou = oi / {};\n", inner == 1 ? "0" : fmt::format("oi % {}", inner),
                        n_idx == 1 ? "0" : inner == 1 ? fmt::format("oi % {}", n_idx) : fmt::format("(oi / {}) % {}", inner, n_idx),
                        inner * n_idx);
  if (ci.known && n_idx == 1 && ci.ints.size() == 1) {
    g.body += fmt::format("  int gx = {};\n", ci.ints[0]);
  } else {
    g.body += fmt::format("  int gx = {};\n", g.ldi(1, "kq"));
  }
  g.body += fmt::format("  if (gx < 0) gx = gx + {};\n  {}\n", dim, clamp_stmt("gx", dim));
  return g.finish(g.ld(0, fmt::format("(ou * {} + gx) * {} + iu", dim, inner)));
}

Status gather_elements(Gen& g) {
  const Shape& xs = g.in(0).shape;
  const Shape& is = g.in(1).shape;
  int64_t axis = node_int(g.n, "axis", 0);
  if (!normalize_axis(axis, xs.size()) || xs.empty() || is.size() != xs.size()) {
    return g.fail(fmt::format("axis {} is out of range (or indices rank differs)", axis));
  }
  const auto ax = static_cast<size_t>(axis);
  const auto st = strides_of(xs);
  g.body += fmt::format("  int gx = {};\n  if (gx < 0) gx = gx + {};\n  {}\n", g.ldi(1, "oi"), xs[ax], clamp_stmt("gx", xs[ax]));
  std::vector<std::string> terms;
  for (size_t d = 0; d < xs.size(); ++d) terms.push_back(d == ax ? times("gx", st[d]) : times(coord(is, d, "oi"), st[d]));
  return g.finish(g.ld(0, sum_terms(terms)));
}

Status gather_nd(Gen& g) {
  const Shape& xs = g.in(0).shape;
  const Shape& is = g.in(1).shape;
  const auto b = static_cast<size_t>(node_int(g.n, "batch_dims", 0));
  if (is.empty() || b + static_cast<size_t>(is.back()) > xs.size()) return g.fail("indices do not match the data rank");
  const int64_t last = is.back();
  const auto st = strides_of(xs);
  const int64_t slice = product(xs, b + static_cast<size_t>(last));
  const int64_t per_batch = product(is, b, is.size() - 1), batch_size = product(xs, b);
  g.body += fmt::format("  int tq = oi / {};\n  int kq = oi % {};\n  int gb = (tq / {}) * {};\n", slice, slice,
                        std::max<int64_t>(per_batch, 1), batch_size);
  for (int64_t q = 0; q < last; ++q) {
    const size_t d = b + static_cast<size_t>(q);
    g.body += fmt::format("  {{\n    int gx = {};\n    if (gx < 0) gx = gx + {};\n    {}\n    gb = gb + gx * {};\n  }}\n",
                          g.ldi(1, fmt::format("tq * {} + {}", last, q)), xs[d], clamp_stmt("gx", xs[d]), st[d]);
  }
  return g.finish(g.ld(0, "gb + kq"));
}

// ---- broadcasts and padding -------------------------------------------------------------------

Status expand(Gen& g) { return g.finish(g.ld(0, broadcast_index(g.ys(), g.in(0).shape, "oi"))); }

Status tile(Gen& g) {
  const Shape& xs = g.in(0).shape;
  if (xs.size() != g.ys().size()) return g.fail("repeats do not match the input rank");
  const auto st = strides_of(xs);
  std::vector<std::string> terms;
  for (size_t d = 0; d < xs.size(); ++d) {
    const std::string cd = coord(g.ys(), d, "oi");
    terms.push_back(times(xs[d] == g.ys()[d] || cd == "0" ? cd : fmt::format("({} % {})", cd, xs[d]), st[d]));
  }
  return g.finish(g.ld(0, sum_terms(terms)));
}

Status pad(Gen& g) {
  const Shape& xs = g.in(0).shape;
  const Shape& ys = g.ys();
  auto w = pad_window(g.c, g.n);
  if (!w) return w.error();
  const std::vector<int64_t>& begin = w->begin;
  const std::string& mode = w->mode;
  const std::string cval = !w->value_known ? g.ld(2, "0")
                           : g.out_int()   ? std::to_string(static_cast<int64_t>(w->value))
                                           : float_lit(w->value);
  const auto st = strides_of(xs);
  g.body += "  bool inside = true;\n  int src = 0;\n";
  for (size_t d = 0; d < xs.size(); ++d) {
    const int64_t nd = xs[d];
    const std::string cd = coord(ys, d, "oi");
    if (begin[d] == 0 && ys[d] <= nd) {  // no padding along d (cropping at the end only)
      g.body += fmt::format("  src = src + {};\n", times(cd, st[d]));
      continue;
    }
    g.body += fmt::format("  {{\n    int x = {} - {};\n", cd, begin[d]);
    if (mode == "constant" || nd == 0) {
      g.body += fmt::format("    if (x < 0 || x >= {}) inside = false;\n", nd);
    } else if (mode == "edge" || nd == 1) {
      g.body += "    " + clamp_stmt("x", nd) + "\n";
    } else if (mode == "wrap") {
      g.body += fmt::format("    x = ((x % {0}) + {0}) % {0};\n", nd);
    } else {  // reflect: period 2(n-1)
      const int64_t p = 2 * (nd - 1);
      g.body += fmt::format("    if (x < 0 || x >= {0}) {{\n      x = ((x % {1}) + {1}) % {1};\n      if (x >= {0}) x = {1} - x;\n    }}\n",
                            nd, p);
    }
    g.body += fmt::format("    src = src + {};\n  }}\n", times("x", st[d]));
  }
  g.body += fmt::format("  {} v = {};\n  if (inside) v = {};\n", g.vt(), cval, g.ld(0, "src"));
  return g.finish("v");
}

// ---- Resize / Upsample ------------------------------------------------------------------------

Status resize(Gen& g) {
  const Node& n = g.n;
  const Shape& xs = g.in(0).shape;
  const Shape& ys = g.ys();
  const auto r = static_cast<int64_t>(xs.size());
  if (ys.size() != xs.size()) return g.fail("output rank differs from the input's");
  const bool v11 = n.op_type != "Upsample" && g.c.g.opset >= 11;
  if (node_int(n, "antialias", 0) != 0) return g.fail("antialias=1 is not generated");
  std::vector<double> scales;
  if (!v11 && g.c.g.opset < 9) {
    scales = node_floats(n, "scales");
  } else {
    const ConstInput s = const_input(g.c.g, n, v11 ? 2 : 1);
    if (s.present && !s.known) return g.fail("the scales input is not a constant");
    scales = s.reals;
  }
  std::vector<double> roi;
  std::vector<int64_t> sizes;
  if (v11) {
    const ConstInput ri = const_input(g.c.g, n, 1);
    roi = ri.reals;
    const ConstInput si = const_input(g.c.g, n, 3);
    if (si.present) {
      sizes = si.ints;
      if (!si.known) sizes.assign(1, -1);  // given but unknown: only the stretch policy works then
      scales.clear();
    }
    if (ri.present && !ri.known && node_string(n, "coordinate_transformation_mode", "") == "tf_crop_and_resize") {
      return g.fail("the roi input is not a constant");
    }
  }
  std::vector<int64_t> axes;
  for (int64_t x : node_ints(n, "axes")) {
    int64_t v = x;
    if (!normalize_axis(v, xs.size())) return g.fail(fmt::format("axis {} is out of range", x));
    axes.push_back(v);
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  }
  std::vector<double> scale(xs.size(), 1.0), rs(xs.size(), 0.0), re(xs.size(), 1.0);
  const std::string policy = node_string(n, "keep_aspect_ratio_policy", "stretch");
  if (!sizes.empty() && sizes[0] < 0 && policy != "stretch") return g.fail("the sizes input is not a constant");
  double common = policy == "not_larger" ? INFINITY : 0.0;
  for (size_t k = 0; k < axes.size(); ++k) {
    const auto d = static_cast<size_t>(axes[k]);
    const double li = static_cast<double>(xs[d]);
    scale[d] = k < scales.size() ? scales[k] : li > 0 ? static_cast<double>(ys[d]) / li : 1.0;
    if (k < sizes.size() && sizes[0] >= 0) {
      const double q = static_cast<double>(sizes[k]) / li;
      common = policy == "not_larger" ? std::min(common, q) : std::max(common, q);
    }
    if (roi.size() == 2 * axes.size()) {
      rs[d] = roi[k];
      re[d] = roi[k + axes.size()];
    }
  }
  for (size_t k = 0; !sizes.empty() && policy != "stretch" && k < axes.size(); ++k) scale[static_cast<size_t>(axes[k])] = common;
  std::string mode = node_string(n, "mode", "nearest");
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear" && mode != "cubic") return g.fail(fmt::format("mode \"{}\" is not supported", mode));
  const std::string ctm = v11 ? node_string(n, "coordinate_transformation_mode", "half_pixel") : "asymmetric";
  const std::string nmode = v11 ? node_string(n, "nearest_mode", "round_prefer_floor") : "floor";
  static const char* kModes[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                 "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kModes), std::end(kModes), ctm) == std::end(kModes)) {
    return g.fail(fmt::format("coordinate_transformation_mode \"{}\" is not supported", ctm));
  }
  if (nmode != "round_prefer_floor" && nmode != "round_prefer_ceil" && nmode != "floor" && nmode != "ceil") {
    return g.fail(fmt::format("nearest_mode \"{}\" is not supported", nmode));
  }
  const double A = node_float(n, "cubic_coeff_a", -0.75);
  const bool exclude = node_int(n, "exclude_outside", 0) != 0;
  const bool crop = ctm == "tf_crop_and_resize";
  const auto st = strides_of(xs);
  const std::string zero = g.out_int() ? "0" : "0.0f";

  g.body += "  bool outside = false;\n  int src = 0;\n";
  struct Axis {
    size_t d;
    int taps;
  };
  std::vector<Axis> multi;  // axes with more than one tap
  for (size_t d = 0; d < xs.size(); ++d) {
    const int64_t n_in = xs[d], n_out = ys[d];
    const double li = static_cast<double>(n_in), s = scale[d], lo = s * li;
    const std::string cd = coord(ys, d, "oi");
    const bool identity = n_in == n_out && s == 1.0 && !crop && ctm != "tf_half_pixel_for_nn";
    if (identity || (n_in == 1 && !crop)) {
      g.body += fmt::format("  src = src + {};\n", n_in == 1 ? "0" : times(cd, st[d]));
      continue;
    }
    const std::string x = fmt::format("float({})", cd);
    std::string xo;
    if (ctm == "half_pixel") xo = fmt::format("({} + 0.5f) / {} - 0.5f", x, float_lit(s));
    else if (ctm == "half_pixel_symmetric")
      xo = fmt::format("{} + ({} + 0.5f) / {} - 0.5f", float_lit(li / 2 * (1 - static_cast<double>(n_out) / lo)), x, float_lit(s));
    else if (ctm == "pytorch_half_pixel")
      xo = lo != 1 ? fmt::format("({} + 0.5f) / {} - 0.5f", x, float_lit(s)) : "(-0.5f)";
    else if (ctm == "align_corners")
      xo = lo == 1 ? "0.0f" : fmt::format("({} * {}) / {}", x, float_lit(li - 1), float_lit(lo - 1));
    else if (ctm == "asymmetric") xo = fmt::format("{} / {}", x, float_lit(s));
    else if (ctm == "tf_half_pixel_for_nn") xo = fmt::format("({} + 0.5f) / {}", x, float_lit(s));
    else
      xo = lo != 1 ? fmt::format("{} + {} * {}", float_lit(rs[d] * (li - 1)), x, float_lit((re[d] - rs[d]) * (li - 1) / (lo - 1)))
                   : float_lit(0.5 * (rs[d] + re[d]) * (li - 1));
    g.body += fmt::format("  float xo{0} = {1};\n", d, xo);
    if (crop) g.body += fmt::format("  if (xo{0} < 0.0f || xo{0} > {1}) outside = true;\n", d, float_lit(li - 1));
    g.body += fmt::format("  float fl{0} = floorf(xo{0});\n  int i0{0} = int(fl{0});\n", d);
    if (mode != "nearest" || nmode != "floor") g.body += fmt::format("  float rr{0} = xo{0} - fl{0};\n", d);
    if (mode == "nearest") {
      const std::string up = nmode == "ceil" ? fmt::format("rr{} > 0.0f", d)
                             : nmode == "round_prefer_ceil" ? fmt::format("rr{} >= 0.5f", d)
                             : nmode == "round_prefer_floor" ? fmt::format("rr{} > 0.5f", d)
                                                             : std::string("false");
      g.body += fmt::format("  int t{0} = ({1}) ? i0{0} + 1 : i0{0};\n  {2}\n  src = src + {3};\n", d, up,
                            clamp_stmt(fmt::format("t{}", d), n_in), times(fmt::format("t{}", d), st[d]));
      continue;
    }
    const int taps = mode == "linear" ? 2 : 4;
    g.body += fmt::format("  int ti{0}[{1}];\n  float tw{0}[{1}];\n", d, taps);
    if (mode == "linear") {
      g.body += fmt::format("  ti{0}[0] = i0{0};\n  tw{0}[0] = 1.0f - rr{0};\n  ti{0}[1] = i0{0} + 1;\n  tw{0}[1] = rr{0};\n", d);
    } else {
      const std::string a = float_lit(A);
      g.body += fmt::format(
          "  {{\n    float p = rr{0} + 1.0f;\n    float q = 1.0f - rr{0};\n    float u = 2.0f - rr{0};\n"
          "    ti{0}[0] = i0{0} - 1;\n    tw{0}[0] = (({1} * p - 5.0f * {1}) * p + 8.0f * {1}) * p - 4.0f * {1};\n"
          "    ti{0}[1] = i0{0};\n    tw{0}[1] = (({1} + 2.0f) * rr{0} - ({1} + 3.0f)) * rr{0} * rr{0} + 1.0f;\n"
          "    ti{0}[2] = i0{0} + 1;\n    tw{0}[2] = (({1} + 2.0f) * q - ({1} + 3.0f)) * q * q + 1.0f;\n"
          "    ti{0}[3] = i0{0} + 2;\n    tw{0}[3] = (({1} * u - 5.0f * {1}) * u + 8.0f * {1}) * u - 4.0f * {1};\n  }}\n",
          d, a);
    }
    g.body += fmt::format("  {{\n    float wsum = 0.0f;\n    for (int a = 0; a < {1}; ++a) {{\n", d, taps);
    if (exclude) g.body += fmt::format("      if (ti{0}[a] < 0 || ti{0}[a] >= {1}) tw{0}[a] = 0.0f;\n", d, n_in);
    g.body += fmt::format("      wsum = wsum + tw{0}[a];\n      int t = ti{0}[a];\n      {1}\n      ti{0}[a] = t;\n    }}\n", d,
                          clamp_stmt("t", n_in));
    if (exclude) g.body += fmt::format("    if (wsum != 0.0f) for (int a = 0; a < {1}; ++a) tw{0}[a] = tw{0}[a] / wsum;\n", d, taps);
    g.body += "  }\n";
    multi.push_back({d, taps});
  }
  if (mode == "nearest" || multi.empty()) {
    const double ev = node_float(n, "extrapolation_value", 0.0);
    g.body += fmt::format("  {} v = {};\n  if (!outside) v = {};\n", g.vt(),
                          g.out_int() ? std::to_string(static_cast<int64_t>(ev)) : float_lit(ev), g.ld(0, "src"));
    return g.finish("v");
  }
  // Weighted sum over the product of the taps of each interpolated axis.
  std::string acc = "  float acc = 0.0f;\n";
  std::string ind = "  ", idx = "src", w = "1.0f";
  for (size_t m = 0; m < multi.size(); ++m) {
    acc += fmt::format("{0}for (int a{1} = 0; a{1} < {2}; ++a{1}) {{\n", ind, m, multi[m].taps);
    ind += "  ";
    idx += fmt::format(" + {}", times(fmt::format("ti{}[a{}]", multi[m].d, m), st[multi[m].d]));
    w += fmt::format(" * tw{}[a{}]", multi[m].d, m);
  }
  acc += fmt::format("{}acc = acc + {} * float({});\n", ind, w, g.args.load(n.inputs[0], idx));
  for (size_t m = multi.size(); m-- > 0;) {
    ind.resize(ind.size() - 2);
    acc += ind + "}\n";
  }
  g.body += acc;
  g.body += fmt::format("  float v = outside ? {} : acc;\n", float_lit(node_float(n, "extrapolation_value", 0.0)));
  return g.finish(g.out_int() ? "int(v)" : "v");
}

// ---- rearrangements and generators ------------------------------------------------------------

Status depth_space(Gen& g) {
  const Shape& xs = g.in(0).shape;
  const Shape& ys = g.ys();
  if (xs.size() != 4 || ys.size() != 4) return g.fail("input must have rank 4");
  const int64_t b = node_int(g.n, "blocksize", 1);
  if (b <= 0) return g.fail(fmt::format("blocksize {} must be positive", b));
  const auto st = strides_of(xs);
  g.body += coords_of(ys, "oi", "c");
  std::string src;
  if (g.n.op_type == "DepthToSpace") {
    const bool crd = node_string(g.n, "mode", "DCR") == "CRD";
    const int64_t C = ys[1];
    g.body += fmt::format("  int bi = c2 % {0};\n  int bj = c3 % {0};\n", b);
    g.body += crd ? fmt::format("  int ch = c1 * {} + bi * {} + bj;\n", b * b, b)
                  : fmt::format("  int ch = (bi * {} + bj) * {} + c1;\n", b, C);
    src = fmt::format("c0 * {} + ch * {} + (c2 / {}) * {} + (c3 / {}) * {}", st[0], st[1], b, st[2], b, st[3]);
  } else {
    const int64_t cin = xs[1];
    g.body += fmt::format("  int ch = c1 % {0};\n  int blk = c1 / {0};\n", cin);
    src = fmt::format("c0 * {} + ch * {} + (c2 * {} + blk / {}) * {} + (c3 * {} + blk % {}) * {}", st[0], st[1], b, b, st[2],
                      b, b, st[3]);
  }
  return g.finish(g.ld(0, src));
}

Status trilu(Gen& g) {
  const Shape& xs = g.in(0).shape;
  if (xs.size() < 2) return g.fail("input needs rank >= 2");
  const bool upper = node_int(g.n, "upper", 1) != 0;
  const ConstInput ki = const_input(g.c.g, g.n, 1);
  std::string k = "0";
  if (ki.known && !ki.ints.empty()) k = std::to_string(ki.ints[0]);
  else if (ki.present && !ki.known) k = g.ldi(1, "0");
  const size_t r = xs.size();
  g.body += fmt::format("  int dg = {} - {};\n", coord(xs, r - 1, "oi"), coord(xs, r - 2, "oi"));
  g.body += fmt::format("  {} v = {};\n  if (dg {} {}) v = {};\n", g.vt(), g.out_int() ? "0" : "0.0f", upper ? ">=" : "<=", k,
                        g.ld(0, "oi"));
  return g.finish("v");
}

Status range(Gen& g) {
  for (size_t k = 0; k < 3; ++k) {
    if (!has_input(g.n, k)) return g.fail("start, limit and delta are required");
  }
  auto scalar = [&](size_t k) {
    const ConstInput v = const_input(g.c.g, g.n, k);
    if (v.known && !v.reals.empty()) return g.out_int() ? std::to_string(v.ints[0]) : float_lit(v.reals[0]);
    return g.ld(k, "0");
  };
  const std::string start = scalar(0), delta = scalar(2);
  return g.finish(g.out_int() ? fmt::format("{} + oi * {}", start, delta) : fmt::format("{} + float(oi) * {}", start, delta));
}

Status constant_of_shape(Gen& g) {
  const Attribute* v = g.n.attr("value");
  std::string val = g.out_int() ? "0" : "0.0f";
  if (v && v->tensor && v->tensor->size() > 0) {
    val = g.out_int() ? std::to_string(v->tensor->as_int(0)) : float_lit(v->tensor->as_real(0));
  }
  return g.finish(val);
}

Status eye_like(Gen& g) {
  const Shape& ys = g.ys();
  if (ys.size() != 2) return g.fail("output must have rank 2");
  const int64_t k = node_int(g.n, "k", 0);
  const std::string one = g.out_int() ? "1" : "1.0f", zero = g.out_int() ? "0" : "0.0f";
  return g.finish(fmt::format("(({} - {}) == {} ? {} : {})", coord(ys, 1, "oi"), coord(ys, 0, "oi"), k, one, zero));
}

Status one_hot(Gen& g) {
  const Shape& ys = g.ys();
  int64_t axis = node_int(g.n, "axis", -1);
  if (!normalize_axis(axis, ys.size())) return g.fail(fmt::format("axis {} is out of range", axis));
  const auto ax = static_cast<size_t>(axis);
  const int64_t inner = product(ys, ax + 1), depth = ys[ax];
  g.body += fmt::format("  int dp = (oi / {}) % {};\n  int sx = (oi / {}) * {} + oi % {};\n", inner, depth, inner * depth,
                        inner, inner);
  g.body += fmt::format("  int hx = {};\n  if (hx < 0) hx = hx + {};\n", g.ldi(0, "sx"), depth);
  return g.finish(g.ld(2, "(hx == dp ? 1 : 0)"));
}

Status reverse_sequence(Gen& g) {
  const Shape& xs = g.in(0).shape;
  const auto ba = static_cast<size_t>(node_int(g.n, "batch_axis", 1)), ta = static_cast<size_t>(node_int(g.n, "time_axis", 0));
  if (ba >= xs.size() || ta >= xs.size()) return g.fail("batch_axis/time_axis out of range");
  const auto st = strides_of(xs);
  g.body += coords_of(xs, "oi", "c");
  g.body += fmt::format("  int sl = {};\n  int tx = c{} < sl ? sl - 1 - c{} : c{};\n", g.ldi(1, fmt::format("c{}", ba)), ta, ta, ta);
  std::vector<std::string> terms;
  for (size_t d = 0; d < xs.size(); ++d) terms.push_back(times(d == ta ? "tx" : fmt::format("c{}", d), st[d]));
  return g.finish(g.ld(0, sum_terms(terms)));
}

}  // namespace

Result<Kernel> gen_data_movement(const GenContext& c) {
  const Node& n = c.anchor();
  const std::string& op = n.op_type;
  if (c.k.nodes.size() != 1) return c.unsupported(n, "data movement fused with other ops is not generated");
  if (n.outputs.empty() || n.outputs[0] == kNoTensor) return c.unsupported(n, "no output");
  for (TensorId t : n.inputs) {
    if (t != kNoTensor && c.tensor(t).elements() > kMaxIndex) return c.unsupported(n, "over 2^31 elements: 32-bit indexing");
  }
  for (TensorId t : n.outputs) {
    if (t != kNoTensor && c.tensor(t).elements() > kMaxIndex) return c.unsupported(n, "over 2^31 elements: 32-bit indexing");
  }
  if (op == "ScatterND" || op == "ScatterElements" || op == "Scatter") {
    return c.unsupported(n, "scatters need two passes (a copy, then the updates in index order); no generator");
  }
  if (op == "NonZero") return c.unsupported(n, "NonZero's output shape depends on the data");
  if (op == "Shape" || op == "Size" || op == "Constant") return c.unsupported(n, "an import-time value; no kernel computes it");
  Gen g(c);
  // Split walks its input; everything else its (first) output.
  const int64_t space = op == "Split" ? c.tensor(n.inputs[0]).elements() : g.out().elements();
  g.body = per_element_start(space, "oi");
  Status s = Ok{};
  if (space == 0) {  // nothing to move: a kernel that returns at once
    for (TensorId t : n.outputs) {
      if (t != kNoTensor) g.args.output(t);
    }
  } else if (op == "Transpose") s = transpose(g);
  else if (op == "Concat") s = concat(g);
  else if (op == "Split") s = split(g);
  else if (op == "Slice") s = slice(g);
  else if (op == "Gather") s = gather(g);
  else if (op == "GatherElements") s = gather_elements(g);
  else if (op == "GatherND") s = gather_nd(g);
  else if (op == "Expand") s = expand(g);
  else if (op == "Tile") s = tile(g);
  else if (op == "Pad") s = pad(g);
  else if (op == "Resize" || op == "Upsample") s = resize(g);
  else if (op == "DepthToSpace" || op == "SpaceToDepth") s = depth_space(g);
  else if (op == "Trilu") s = trilu(g);
  else if (op == "Range") s = range(g);
  else if (op == "ConstantOfShape") s = constant_of_shape(g);
  else if (op == "EyeLike") s = eye_like(g);
  else if (op == "OneHot") s = one_hot(g);
  else if (op == "ReverseSequence") s = reverse_sequence(g);
  else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity") {
    s = g.finish(g.ld(0, "oi"));  // views launch nothing; when asked anyway, a copy
  } else {
    return c.unsupported(n, "no data-movement generator for this op");
  }
  if (!s) return s.error();
  Kernel k;
  k.name = short_name(c, "dm");
  k.cls = "data-movement";
  // The tile's threads a group, as the elementwise generator takes them (and the capability says).
  const uint32_t block = static_cast<uint32_t>(std::clamp(c.k.tile.threads > 0 ? c.k.tile.threads : 256, 32,
                                                          std::min(1024, c.opts.max_threads)));
  k.block = {block, 1, 1};
  k.groups = groups_for(space, block);
  k.body = std::move(g.body);
  k.args = std::move(g.args.args);
  return k;
}

}  // namespace gpusim::codegen
