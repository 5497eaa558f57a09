// The convolution generator: ONNX Conv (1-D, 2-D and 3-D; groups, depthwise; strides, pads,
// dilations, auto_pad SAME_UPPER/SAME_LOWER/VALID; optional bias) with the group's fused epilogue.
//
// Two kernels, chosen by shape (the cost model's rule, core/plan/kernel_work.cpp): where the GEMM
// view is wide enough (output channels per group and C/group x window both >= 16), an implicit
// GEMM per convolution group — M = N x output pixels, N = output channels per group,
// K = C/group x kernel window, A gathered from the input on the fly (im2col never materialized,
// padding read as zeros), B the weights read in place — tiled like gen_gemm (gemm_tile.h). Else
// (depthwise, tiny channel counts) a direct kernel, one thread per output element.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "gemm_tile.h"

namespace gpusim::codegen {
namespace {


struct ConvShape {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;
  Shape in, out, kernel;  // spatial dims
  std::vector<int64_t> strides, dilations, pad_begin;
  int64_t in_sp = 1, out_sp = 1, k_sp = 1;
};

Result<ConvShape> conv_shape(const GenContext& c, const Node& n) {
  ConvShape s;
  const Shape& xs = c.tensor(n.inputs[0]).shape;
  const Shape& ws = c.tensor(n.inputs[1]).shape;
  const Shape& ys = c.tensor(n.outputs[0]).shape;
  if (xs.size() < 3 || ws.size() != xs.size() || ys.size() != xs.size()) {
    return c.unsupported(n, fmt::format("input {}, weight {} and output {} are not [N, C, spatial...] of one rank",
                                        shape_str(xs), shape_str(ws), shape_str(ys)));
  }
  const size_t sd = xs.size() - 2;
  s.n = xs[0];
  s.c = xs[1];
  s.m = ys[1];
  s.group = n.attr_int("group", 1);
  if (s.group <= 0 || s.c % s.group != 0 || s.m % s.group != 0 || ws[0] != s.m || ws[1] * s.group != s.c) {
    return c.unsupported(n, fmt::format("channels do not divide into {} groups (input {}, weight {})", s.group,
                                        shape_str(xs), shape_str(ws)));
  }
  s.cg = s.c / s.group;
  s.mg = s.m / s.group;
  s.in.assign(xs.begin() + 2, xs.end());
  s.out.assign(ys.begin() + 2, ys.end());
  s.kernel.assign(ws.begin() + 2, ws.end());
  if (const Attribute* a = n.attr("kernel_shape"); a && !a->ints.empty() && a->ints != s.kernel) {
    return c.unsupported(n, fmt::format("kernel_shape {} differs from the weight's {}", shape_str(a->ints),
                                        shape_str(s.kernel)));
  }
  auto ints = [&](const char* key, size_t count, int64_t def) {
    const Attribute* a = n.attr(key);
    return a && !a->ints.empty() ? a->ints : std::vector<int64_t>(count, def);
  };
  s.strides = ints("strides", sd, 1);
  s.dilations = ints("dilations", sd, 1);
  std::vector<int64_t> pads = ints("pads", 2 * sd, 0);
  if (s.strides.size() != sd || s.dilations.size() != sd || pads.size() != 2 * sd) {
    return c.unsupported(n, "strides/dilations/pads do not match the spatial rank");
  }
  const std::string ap = n.attr("auto_pad") ? n.attr("auto_pad")->s : "NOTSET";
  for (size_t i = 0; i < sd; ++i) {
    const int64_t eff = (s.kernel[i] - 1) * s.dilations[i] + 1;
    int64_t pb = pads[i];
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (s.out[i] - 1) * s.strides[i] + eff - s.in[i]);
      pb = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (ap == "VALID") {
      pb = 0;
    }
    s.pad_begin.push_back(pb);
    s.in_sp *= s.in[i];
    s.out_sp *= s.out[i];
    s.k_sp *= s.kernel[i];
  }
  for (TensorId t : {n.inputs[0], n.inputs[1], n.outputs[0]}) {
    if (c.tensor(t).elements() > kMaxIndex) {
      return c.unsupported(n, fmt::format("tensor \"{}\" has {} elements, past the 32-bit indices generated kernels use",
                                          c.tensor(t).name, c.tensor(t).elements()));
    }
  }
  return s;
}

// Statements computing the input offset of each spatial dim and whether the tap is inside:
// declares `ok` (bool) and `xo` (int, the spatial offset in the input plane), from the output
// position `p` (flat over the output plane) and the tap `q` (flat over the kernel window).
std::string gather_tap(const ConvShape& s, const std::string& p, const std::string& q) {
  std::string code = "bool ok = true; int xo = 0;";
  const auto in_st = strides_of(s.in);
  for (size_t i = 0; i < s.in.size(); ++i) {
    const std::string o = coord(s.out, i, p), kk = coord(s.kernel, i, q);
    std::string e = add_term("", o, s.strides[i]);
    e = add_term(e, kk, s.dilations[i]);
    if (s.pad_begin[i] != 0) e = fmt::format("{} - {}", e, s.pad_begin[i]);
    code += fmt::format(" {{ int ip = {}; ok = ok && ip >= 0 && ip < {}; xo += ip * {}; }}", e, s.in[i], in_st[i]);
  }
  return code;
}

}  // namespace

Result<Kernel> gen_conv(const GenContext& c) {
  const Node& n = c.anchor();
  const auto anchor_pos = static_cast<size_t>(c.k.anchor);
  if (n.op_type != "Conv") return c.unsupported(n, "the convolution generator covers Conv only");
  if (n.inputs.size() < 2 || n.inputs[0] == kNoTensor || n.inputs[1] == kNoTensor || n.outputs.empty()) {
    return c.unsupported(n, "needs an input, a weight and an output");
  }
  auto sh = conv_shape(c, n);
  if (!sh) return sh.error();
  const ConvShape& s = *sh;
  ArgList args(c);
  std::vector<size_t> folded;
  for (TensorId t : n.inputs) {
    if (t == kNoTensor) continue;
    const int p = c.idx.producer[static_cast<size_t>(c.root(t))];
    if (p >= 0 && std::find(c.k.nodes.begin(), c.k.nodes.end(), p) != c.k.nodes.end()) {
      return c.unsupported(n, fmt::format("its input \"{}\" is computed inside the same kernel", c.tensor(t).name));
    }
  }
  const TensorId xt = n.inputs[0], wt = n.inputs[1];
  const TensorId bt = n.inputs.size() > 2 ? n.inputs[2] : kNoTensor;
  auto bias = [&](const std::string& co) {
    return bt == kNoTensor ? std::string() : " + float(" + args.load(bt, c.tensor(bt).elements() <= 1 ? "0" : co) + ")";
  };
  Kernel k;
  k.cls = "conv";
  const bool direct = s.mg < 16 || s.cg * s.k_sp < 16;
  if (direct) {
    k.name = kernel_name("conv_direct", n);
    const int64_t total = s.n * s.m * s.out_sp;
    const int threads = std::min(std::max(32, pow2_floor(c.k.tile.threads > 0 ? c.k.tile.threads : 256)),
                                 pow2_floor(std::max(1, c.opts.max_threads)));
    std::string& b = k.body;
    b += fmt::format("  // direct Conv: {} outputs, {} taps of {} channels each\n", total, s.k_sp, s.cg);
    b += fmt::format("  int o = {} * {} + LID_X;\n  if (o >= {}) return;\n", kLinearGroup, threads, total);
    b += fmt::format("  int p = o % {};\n  int co = (o / {}) % {};\n  int nb = o / {};\n", s.out_sp, s.out_sp, s.m,
                     s.out_sp * s.m);
    b += "  float acc = 0.0f;\n";
    b += fmt::format("  for (int ci = 0; ci < {}; ++ci) {{\n", s.cg);
    b += fmt::format("    int xb = (nb * {} + (co / {}) * {} + ci) * {};\n", s.c, s.mg, s.cg, s.in_sp);
    b += fmt::format("    int wb = (co * {} + ci) * {};\n", s.cg, s.k_sp);
    b += fmt::format("    for (int q = 0; q < {}; ++q) {{\n", s.k_sp);
    b += "      " + gather_tap(s, "p", "q") + "\n";
    b += fmt::format("      if (ok) acc += float({}) * float({});\n", args.load(xt, "xb + xo"), args.load(wt, "wb + q"));
    b += "    }\n  }\n";
    auto epi = gemm_epilogue(c, args, anchor_pos, folded, "v", "o");
    if (!epi) return epi.error();
    b += fmt::format("  {{\n        float v = acc{};\n{}  }}\n", bias("co"), *epi);
    k.block = {static_cast<uint32_t>(threads), 1, 1};
    k.groups = groups_for(total, static_cast<uint32_t>(threads));
    k.args = std::move(args.args);
    return k;
  }
  // Implicit GEMM, one batch entry per convolution group: A[m][kk] = x[n][g*Cg + c][in(p, tap)]
  // with m = n * out_sp + p and kk = c * k_sp + tap; B[kk][co] = w[g*Mg + co][kk].
  GemmLoop L;
  L.batch = s.group;
  L.m = s.n * s.out_sp;
  L.n = s.mg;
  L.k = s.cg * s.k_sp;
  const std::string a_stmts = fmt::format("int pn = gm / {}; int pp = gm % {}; int pc = gk / {}; int pq = gk % {}; {}",
                                          s.out_sp, s.out_sp, s.k_sp, s.k_sp, gather_tap(s, "pp", "pq"));
  const std::string a_index = fmt::format("(pn * {} + bz * {} + pc) * {} + xo", s.c, s.cg, s.in_sp);
  L.load_a = fmt::format("{} if (ok) av = float({});", a_stmts, args.load(xt, a_index));
  const int xa = args.input(xt), wa = args.input(wt);
  L.a_gather = {xa, a_stmts, a_index, "ok", args.half(xa)};
  L.a_m_fastest = true;  // neighbouring output pixels read neighbouring input pixels
  L.load_b = fmt::format("bv = float({});", args.load(wt, fmt::format("(bz * {} + gn) * {} + gk", s.mg, L.k)));
  L.b_gather = {wa, "", fmt::format("(bz * {} + gn) * {} + gk", s.mg, L.k), "", args.half(wa)};
  L.b_n_fastest = false;  // a weight row is contiguous along k
  // The tile's vector width loads weight rows in vectors where K is a multiple of it (the im2col
  // gather of A stays scalar).
  if (const int vw = gemm_vector_width(c.k.tile, storage_of(c.tensor(wt).dtype, c.opts)); vw > 1 && L.k % vw == 0) {
    L.b_vec = vw;
    L.load_b_vec = args.load_vector(wt, fmt::format("(bz * {} + gn) * {} + gk", s.mg, L.k), "bv_v", vw);
  }
  auto epi = gemm_epilogue(c, args, anchor_pos, folded, "v", "o");
  if (!epi) return epi.error();
  L.c_m_fastest = true;  // NCHW: neighbouring output pixels are neighbours in memory
  L.epilogue = fmt::format(
      "        int co = bz * {} + gn;\n        int o = ((gm / {}) * {} + co) * {} + gm % {};\n        float v = acc_v{};\n{}",
      s.mg, s.out_sp, s.m, s.out_sp, s.out_sp, bias("co"), *epi);
  k.name = kernel_name("conv", n);
  emit_gemm_kernel(L, c.k.tile, c.opts, k);
  k.args.insert(k.args.begin(), args.args.begin(), args.args.end());  // the kernel's own first, then any scratch
  return k;
}

}  // namespace gpusim::codegen
