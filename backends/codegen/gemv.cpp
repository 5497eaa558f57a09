// The GEMV-shaped main loop (see gemm_tile.h: GemvTile): GEMMs and implicit-GEMM convolutions of
// at most kGemvMaxRows rows (a classifier at batch 1, a squeeze-excitation convolution, a
// language model's projections while it generates), where a tiled loop would stage one or two rows
// of A in shared memory per k-step and leave most of its threads idle or waiting at barriers.
//
// Kernel layout (one group per bm x bn output tile, tiles spread linearly over the grid):
//   threads  `lanes` threads per output column, bn columns a group; a thread owns all bm rows of
//            its column and walks its share of K with no barrier: lane r reads k = r * vec, then
//            r * vec + lanes * vec, ... (`vec` consecutive elements a load where the operand allows).
//            Where B is contiguous along k (a weight stored [N][K], as Gemm with transB and every
//            convolution keep theirs) a column's lanes are neighbouring threads, so a warp streams
//            one weight row; where B is contiguous along n ([K][N], MatMul's), neighbouring threads
//            take neighbouring columns, and a warp reads bn consecutive columns of 32 / bn k rows.
//   end      each thread's bm partial sums go to shared memory; after one barrier, thread
//            i * bn + c adds up the lanes of row i, column c in lane order (the same sum on every
//            run) and hands it to the fused epilogue as after the tiled loop.
// Split-K (the tile's split) works as in the tiled loop: each slice a group, the last of a tile's
// groups adding the slices' sums in slice order (split_k_header / split_k_arrive).
#include <fmt/format.h>

#include <algorithm>

#include "gemm_tile.h"

namespace gpusim::codegen {

std::optional<GemvTile> fit_gemv_tile(const TileConfig& tc, const GemmLoop& L, const Options& opts) {
  if (L.m < 1 || L.m > kGemvMaxRows || L.n < 1 || L.k < 1) return std::nullopt;
  const int max_threads = pow2_floor(std::max(1, opts.max_threads));
  if (max_threads < 32) return std::nullopt;
  GemvTile t;
  t.bm = pow2_ceil(L.m);
  t.threads = std::clamp(tc.threads > 0 ? pow2_floor(std::min(tc.threads, 1024)) : 256, 32, max_threads);
  // A warp per column (a wavefront of 64 takes two); fewer columns where N is narrower.
  t.bn = std::min(std::max(1, t.threads / 32), pow2_ceil(L.n));
  t.lanes = t.threads / t.bn;
  t.split = generated_split_k(tc.split_k, L.k, t.lanes);
  return t;
}

void emit_gemv(const GemmLoop& L, const GemvTile& t, Kernel& k) {
  const int64_t tiles_m = (L.m + t.bm - 1) / t.bm, tiles_n = (L.n + t.bn - 1) / t.bn;
  const int64_t total = L.batch * tiles_m * tiles_n;
  const SplitK sk = split_k_plan(L.k, t.lanes, t.split);
  const int outs = t.bm * t.bn;
  // Vector loads of B along k where the generator proved them (B contiguous along k); of A too
  // when it has the same width along k.
  const int vec = !L.b_n_fastest && L.b_vec > 1 ? L.b_vec : 1;
  const bool a_vec = vec > 1 && !L.a_m_fastest && L.a_vec == vec;
  k.block = {static_cast<uint32_t>(t.threads), 1, 1};
  k.groups = groups_for(std::max<int64_t>(total * sk.split, 1), 1);
  k.shared_bytes = static_cast<uint64_t>(t.threads) * t.bm * 4;
  k.decls += fmt::format("SHARED float sR[{}];\n", t.threads * t.bm);
  std::string& s = k.body;
  s += fmt::format("  // GEMV-shaped GEMM {} x [{} x {} x {}]: {}x{} outputs a group, {} threads a column{}{}\n", L.batch,
                   L.m, L.n, L.k, t.bm, t.bn, t.lanes, vec > 1 ? fmt::format(", loads of {} along k", vec) : "",
                   sk.split > 1 ? fmt::format(", K split {} ways", sk.split) : "");
  s += split_k_header(sk, total, t.lanes);
  s += fmt::format("  int n0 = (tile % {}) * {};\n", tiles_n, t.bn);
  s += fmt::format("  int m0 = ((tile / {}) % {}) * {};\n", tiles_n, tiles_m, t.bm);
  s += fmt::format("  int bz = tile / {};\n", tiles_n * tiles_m);
  s += L.b_n_fastest ? fmt::format("  int col = LID_X % {0}; int lane = LID_X / {0};\n", t.bn)
                     : fmt::format("  int col = LID_X / {0}; int lane = LID_X % {0};\n", t.lanes);
  s += L.setup;
  s += fmt::format("  float acc[{0}];\n  for (int i = 0; i < {0}; ++i) acc[i] = 0.0f;\n", t.bm);
  const std::string kbeg = sk.split > 1 ? "kb" : "0";
  const std::string kend = sk.split > 1 ? fmt::format("min({}, kb + ksteps_here * {})", L.k, t.lanes) : std::to_string(L.k);
  s += "  {\n    int gn = n0 + col;\n";
  s += fmt::format("    int kend = {};\n", kend);
  s += fmt::format("    if (gn < {}) {{\n", L.n);
  s += fmt::format("      for (int k0 = {} + lane * {}; k0 < kend; k0 += {}) {{\n", kbeg, vec, t.lanes * vec);
  if (vec > 1) {
    s += "        int gk = k0;\n";
    s += fmt::format("        float bv_v[{}];\n        {}\n", vec, L.load_b_vec);
    s += fmt::format("        for (int i = 0; i < {}; ++i) {{\n", t.bm);
    s += fmt::format("          int gm = m0 + i;\n          if (gm >= {}) break;\n", L.m);
    if (a_vec) {
      s += fmt::format("          float av_v[{}];\n          {}\n", vec, L.load_a_vec);
      s += fmt::format("          for (int v = 0; v < {}; ++v) acc[i] += av_v[v] * bv_v[v];\n", vec);
    } else {
      s += fmt::format("          for (int v = 0; v < {}; ++v) {{\n", vec);
      s += fmt::format("            int gk = k0 + v; float av = 0.0f;\n            {}\n", L.load_a);
      s += "            acc[i] += av * bv_v[v];\n          }\n";
    }
    s += "        }\n";
  } else {
    s += "        int gk = k0; float bv = 0.0f;\n";
    s += fmt::format("        {}\n", L.load_b);
    s += fmt::format("        for (int i = 0; i < {}; ++i) {{\n", t.bm);
    s += fmt::format("          int gm = m0 + i;\n          if (gm >= {}) break;\n", L.m);
    s += fmt::format("          float av = 0.0f;\n          {}\n          acc[i] += av * bv;\n        }}\n", L.load_a);
  }
  s += "      }\n    }\n  }\n";
  // Partial sums of row i at sR[i * threads + LID_X]; thread o < bm * bn sums (i, c) = (o / bn,
  // o % bn) over its column's lanes.
  s += fmt::format("  UNROLL for (int i = 0; i < {}; ++i) sR[i * {} + LID_X] = acc[i];\n  BARRIER();\n", t.bm, t.threads);
  const std::string lane_pos =
      L.b_n_fastest ? fmt::format("q * {} + oc", t.bn) : fmt::format("oc * {} + q", t.lanes);
  s += "  float acc_v = 0.0f;\n";
  s += fmt::format("  int oi = LID_X / {0}; int oc = LID_X % {0};\n", t.bn);
  s += fmt::format("  if (LID_X < {}) {{\n", outs);
  s += fmt::format("    for (int q = 0; q < {}; ++q) acc_v += sR[oi * {} + {}];\n  }}\n", t.lanes, t.threads, lane_pos);
  if (sk.split > 1) {
    // The group's slice sums at (tile * split + ks) * outs + o; the last group of the tile adds
    // the slices in slice order.
    s += fmt::format("  if (LID_X < {}) SPLIT_ST((tile * {} + ks) * {} + LID_X, acc_v);\n", outs, sk.split, outs);
    s += split_k_arrive(sk);
    s += fmt::format("  if (LID_X < {}) {{\n    acc_v = 0.0f;\n", outs);
    s += split_sum("    ", sk.split, fmt::format("(tile * {} + sl) * {} + LID_X", sk.split, outs)) + "  }\n";
    add_split_scratch(k, total * sk.split * outs, total);
  }
  s += fmt::format("  if (LID_X < {}) {{\n", outs);
  s += fmt::format("    int gm = m0 + oi; int gn = n0 + oc;\n    if (gm < {} && gn < {}) {{\n", L.m, L.n);
  s += L.epilogue + "    }\n  }\n";
}

}  // namespace gpusim::codegen
