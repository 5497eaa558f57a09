// The matrix-unit GEMM main loop (see gemm_tile.h): the GEMM and implicit-GEMM convolution
// generators' kernel when the target has a matrix path for the plan's operands (mma_operand:
// fp16, or fp32 as TF32 or on fp32 matrix instructions; codegen.h).
//
// Kernel layout (one group per output tile, tiles spread linearly over the grid, as the SIMT loop):
//   shared  sA[stages][bm][lda] and sB[stages][bk][ldb] in the operand type (row-major; rows
//           padded by 16 bytes, which keeps wmma's leading-dimension rule and spreads banks), and
//           one 16x16 fp32 staging tile per warp for the epilogue.
//   warps   a wr x wc grid; warp (wy, wx) owns fm x fn 16x16 output fragments, rows
//           (wy * fm + i) * 16 and columns (wx * fn + j) * 16 of the tile.
//   k-step  every thread converts and stores its share of the A and B tiles (zero outside the
//           matrix), a barrier, then per MMA_K-deep slice (16 for fp16, 8 for TF32, 4 for fp32
//           MFMA): load fm A and fn B fragments, fm x fn matrix products into the fp32
//           accumulator fragments.
//   end     each fragment goes to the warp's staging tile, and the warp's lanes hand its 256
//           values to the fused epilogue (so it sees plain (gm, gn, acc_v), as after the SIMT loop).
//
// The fragment operations are macros (MMA_DECL, MMA_ZERO, MMA_LOAD_A/B, MMA_MMA, MMA_STORE)
// defined per path in the kernel's decls, so the body is one text for every path:
//   wmma      nvcuda::wmma fragments (opaque layouts; load/store through the API);
//   mfma      __builtin_amdgcn_mfma_f32_16x16x16f16 on wave64; lane l holds A[l % 16][4 (l / 16) + q],
//             B[4 (l / 16) + q][l % 16] and D[4 (l / 16) + q][l % 16], q = 0..3 (AMD's
//             matrix instruction layout for this instruction);
//   portable  lane l of a 32-thread warp owns elements q * 32 + l (q = 0..7) of each 16x16
//             fragment and computes them from shared memory: the same data flow without matrix
//             units, in any dialect target.
#include <fmt/format.h>

#include <algorithm>

#include "gemm_tile.h"

namespace gpusim::codegen {

namespace {

// Accumulator values one lane holds: at most this many (registers for everything else). At 64,
// 256x128 tiles ran 16 warps and their loads stayed in flight, but ptxas held those 512-thread
// blocks to 128 registers and spilled, and the compile tier's blocks-per-SM agreement fell.
constexpr int kMaxAccPerLane = 128;
constexpr int kRegistersPerSm = 65536;  // every NVIDIA GPU since Kepler

int lanes_of(MatrixPath p) { return p == MatrixPath::kMfma ? 64 : 32; }

// The fragment macros of a path, for a tile with F = fm * fn accumulators, its operands and
// depth D (MMA_K: the k of one product).
std::string fragment_macros(MatrixPath p, const MmaTile& t) {
  const int F = t.fm * t.fn;
  const MmaOperand op = t.operand;
  std::string s = fmt::format("#define MMA_LDA {}\n#define MMA_LDB {}\n#define MMA_K {}\n", t.lda(), t.ldb(), t.depth());
  // The loop over a k-step's slices: rolled for wmma's TF32 fragments (unrolled, ptxas kept 80
  // registers and spilled 8 bytes in 64x128x16 convolutions; rolled, none); left to ptxas on the
  // other paths.
  s += fmt::format("#define MMA_SLICES{}\n", p == MatrixPath::kWmma && op == MmaOperand::kTf32 ? " _Pragma(\"unroll 1\")" : "");
  switch (p) {
    case MatrixPath::kWmma: {
      // fp16 fragments (m16n16k16), or TF32 ones (m16n16k8) over fp32 in shared memory, each
      // element rounded to TF32 as it is stored there (the conversion wmma asks for; without it
      // the products use the fp32 bits truncated): once a block, not once per fragment load,
      // which cost ptxas 8 bytes of spills.
      const bool tf = op == MmaOperand::kTf32;
      s += fmt::format("#define MMA_HALF {}\n#define MMA_TO_HALF(x) {}\n#define MMA_ALIGN __align__(32)\n",
                       tf ? "float" : "__half", tf ? "nvcuda::wmma::__float_to_tf32(x)" : "__float2half(x)");
      s += fmt::format(
          "#define MMA_DECL nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, {0}, float> mma_acc[{1}]; "
          "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, {0}, {2}, nvcuda::wmma::row_major> mma_a[{3}]; "
          "nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, {0}, {2}, nvcuda::wmma::row_major> mma_b[{4}];\n",
          t.depth(), F, tf ? "nvcuda::wmma::precision::tf32" : "__half", t.fm, t.fn);
      s += "#define MMA_LOAD_A(fi, fo) nvcuda::wmma::load_matrix_sync(mma_a[fi], sA + (fo), MMA_LDA);\n";
      s += "#define MMA_LOAD_B(fj, fo) nvcuda::wmma::load_matrix_sync(mma_b[fj], sB + (fo), MMA_LDB);\n";
      s += "#define MMA_ZERO(f) nvcuda::wmma::fill_fragment(mma_acc[f], 0.0f);\n";
      s += "#define MMA_MMA(f, fi, fj) nvcuda::wmma::mma_sync(mma_acc[f], mma_a[fi], mma_b[fj], mma_acc[f]);\n";
      s += "#define MMA_STORE(f, co) nvcuda::wmma::store_matrix_sync(sC + (co), mma_acc[f], 16, nvcuda::wmma::mem_row_major);\n";
      s += "#define MMA_STORE_T(f, co) nvcuda::wmma::store_matrix_sync(sC + (co), mma_acc[f], 16, nvcuda::wmma::mem_col_major);\n";
      // The staging tile is the warp's own: the warp's lanes, not the block, wait for each other.
      s += "#define MMA_STAGED() __syncwarp()\n";
      s += "#define MMA_UNROLL _Pragma(\"unroll\")\n";
      break;
    }
    case MatrixPath::kMfma:
      s += "typedef float mma_f4 __attribute__((ext_vector_type(4)));\n";
      if (op == MmaOperand::kF32) {
        // v_mfma_f32_16x16x4f32: lane l holds A[l % 16][l / 16] and B[l / 16][l % 16] (one float
        // each), D as the fp16 instruction's.
        s += "#define MMA_HALF float\n#define MMA_TO_HALF(x) (x)\n#define MMA_ALIGN __attribute__((aligned(16)))\n";
        s += fmt::format("#define MMA_DECL mma_f4 mma_acc[{}]; float mma_a[{}]; float mma_b[{}];\n", F, t.fm, t.fn);
        s += "#define MMA_LOAD_A(fi, fo) mma_a[fi] = sA[(fo) + (mma_l % 16) * MMA_LDA + mma_l / 16];\n";
        s += "#define MMA_LOAD_B(fj, fo) mma_b[fj] = sB[(fo) + (mma_l / 16) * MMA_LDB + mma_l % 16];\n";
        s += "#define MMA_MMA(f, fi, fj) mma_acc[f] = __builtin_amdgcn_mfma_f32_16x16x4f32(mma_a[fi], mma_b[fj], mma_acc[f], 0, 0, 0);\n";
      } else {
        s += "typedef _Float16 mma_h4 __attribute__((ext_vector_type(4)));\n";
        s += "#define MMA_HALF _Float16\n#define MMA_TO_HALF(x) ((_Float16)(x))\n#define MMA_ALIGN __attribute__((aligned(16)))\n";
        s += fmt::format("#define MMA_DECL mma_f4 mma_acc[{}]; mma_h4 mma_a[{}]; mma_h4 mma_b[{}];\n", F, t.fm, t.fn);
        s += "#define MMA_LOAD_A(fi, fo) { for (int mq = 0; mq < 4; ++mq) mma_a[fi][mq] = sA[(fo) + (mma_l % 16) * MMA_LDA + (mma_l / 16) * 4 + mq]; }\n";
        s += "#define MMA_LOAD_B(fj, fo) { for (int mq = 0; mq < 4; ++mq) mma_b[fj][mq] = sB[(fo) + ((mma_l / 16) * 4 + mq) * MMA_LDB + mma_l % 16]; }\n";
        s += "#define MMA_MMA(f, fi, fj) mma_acc[f] = __builtin_amdgcn_mfma_f32_16x16x16f16(mma_a[fi], mma_b[fj], mma_acc[f], 0, 0, 0);\n";
      }
      s += "#define MMA_ZERO(f) { for (int mq = 0; mq < 4; ++mq) mma_acc[f][mq] = 0.0f; }\n";
      s += "#define MMA_STORE(f, co) { for (int mq = 0; mq < 4; ++mq) sC[(co) + ((mma_l / 16) * 4 + mq) * 16 + mma_l % 16] = mma_acc[f][mq]; }\n";
      s += "#define MMA_STORE_T(f, co) { for (int mq = 0; mq < 4; ++mq) sC[(co) + (mma_l % 16) * 16 + (mma_l / 16) * 4 + mq] = mma_acc[f][mq]; }\n";
      // The staging tile is the wavefront's own (64 lanes: one "warp" here), and a wavefront's LDS
      // accesses complete in order: a wavefront-scope fence (s_waitcnt lgkmcnt(0)) around a
      // wave barrier (no instruction; the compiler moves no access across it) is the wait, as
      // rocPRIM's wave_barrier, not a block barrier per fragment.
      s += "#define MMA_STAGED() { __builtin_amdgcn_fence(__ATOMIC_RELEASE, \"wavefront\"); __builtin_amdgcn_wave_barrier(); "
           "__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, \"wavefront\"); }\n";
      s += "#define MMA_UNROLL _Pragma(\"unroll\")\n";
      break;
    case MatrixPath::kPortable:
    case MatrixPath::kNone: {
      // fp16 operands read back as float; TF32 rounded when stored to shared memory (each
      // element once, as wmma rounds each fragment element once); fp32 as they are.
      const char* from = op == MmaOperand::kF16 ? "FROM_HALF" : "";
      if (op == MmaOperand::kF16) {
        s += "#define MMA_HALF HALF_T\n#define MMA_TO_HALF(x) TO_HALF(x)\n#define MMA_ALIGN\n";
      } else {
        s += fmt::format("#define MMA_HALF float\n#define MMA_TO_HALF(x) {}\n#define MMA_ALIGN\n",
                         op == MmaOperand::kTf32 ? "TF32_ROUND(x)" : "(x)");
      }
      s += fmt::format("#define MMA_DECL float mma_acc[{}]; int mma_a[{}]; int mma_b[{}];\n", F * 8, t.fm, t.fn);
      s += "#define MMA_ZERO(f) { for (int mq = 0; mq < 8; ++mq) mma_acc[(f) * 8 + mq] = 0.0f; }\n";
      s += "#define MMA_LOAD_A(fi, fo) mma_a[fi] = (fo);\n";
      s += "#define MMA_LOAD_B(fj, fo) mma_b[fj] = (fo);\n";
      s += fmt::format("#define MMA_MMA(f, fi, fj) {{ for (int mq = 0; mq < 8; ++mq) {{ int mr = mq * 2 + mma_l / 16; int mc = mma_l % 16; "
                       "float ms = 0.0f; for (int mt = 0; mt < MMA_K; ++mt) ms += {0}(sA[mma_a[fi] + mr * MMA_LDA + mt]) * "
                       "{0}(sB[mma_b[fj] + mt * MMA_LDB + mc]); mma_acc[(f) * 8 + mq] += ms; }} }}\n",
                       from);
      s += "#define MMA_STORE(f, co) { for (int mq = 0; mq < 8; ++mq) sC[(co) + mq * 32 + mma_l] = mma_acc[(f) * 8 + mq]; }\n";
      s += "#define MMA_STORE_T(f, co) { for (int mq = 0; mq < 8; ++mq) sC[(co) + (mma_l % 16) * 16 + mq * 2 + mma_l / 16] = mma_acc[(f) * 8 + mq]; }\n";
      // A portable "warp" is 32 threads of the group, not a subgroup the dialect can wait on alone.
      s += "#define MMA_STAGED() BARRIER()\n";
      s += "#define MMA_UNROLL\n";
      break;
    }
  }
  return s;
}

// The A and B tiles' loads (tile_loads), converted to the operand type as they are stored. An
// fp16 vector of an fp16 buffer goes to an fp16 tile whole (wmma and MFMA: the same 16 bits, one
// 16-byte shared store for 8 values instead of 8 conversions and 8 2-byte stores) where it runs
// along the tile's contiguous index (A's k, B's n) and the row length keeps it aligned.
TileLoads mma_tile_loads(const GemmLoop& L, const MmaTile& t, MatrixPath path) {
  const int bm = t.bm, bk = t.bk, la = t.lda(), lb = t.ldb();
  const bool f16_tile = t.operand == MmaOperand::kF16 && (path == MatrixPath::kWmma || path == MatrixPath::kMfma);
  // A tile of `rows` rows of `row` elements a stage, contiguous along pi (B: [bk][ldb]) where
  // `along_row`, else along kk (A: [bm][lda]).
  const auto whole = [f16_tile](const char* tile, bool along_row, int rows, int row) -> TileStoreVector {
    return [=](const std::string& buf, const std::string& pi, const std::string& kk, bool along_p, int vec, bool half,
               const std::string& type, const std::string& x) -> std::string {
      if (!f16_tile || !half || along_p != along_row || row % vec != 0) return "";
      const std::string at = fmt::format("({} * {} + {}) * {} + {}", buf, rows, along_row ? kk : pi, row, along_row ? pi : kk);
      return fmt::format("*reinterpret_cast<{}*>(&{}[{}]) = {};", type, tile, at, x);
    };
  };
  return tile_loads(
      L, t.bm, t.bn, t.bk, t.threads(), t.fm * t.fn * 256 / t.lanes,
      [bm, la](const std::string& buf, const std::string& r, const std::string& kk, const std::string& v) {
        return fmt::format("sA[({} * {} + {}) * {} + {}] = MMA_TO_HALF({});", buf, bm, r, la, kk, v);
      },
      [bk, lb](const std::string& buf, const std::string& c, const std::string& kk, const std::string& v) {
        return fmt::format("sB[({} * {} + {}) * {} + {}] = MMA_TO_HALF({});", buf, bk, kk, lb, c, v);
      },
      true, whole("sA", false, bm, la), whole("sB", true, bk, lb));
}

// The matrix products of one k-step from stage `buf`.
std::string compute_tile(const MmaTile& t, const std::string& buf) {
  std::string s;
  const int D = t.depth();
  s += fmt::format("    MMA_SLICES for (int ks = 0; ks < {}; ++ks) {{\n", t.bk / D);
  s += fmt::format("      MMA_UNROLL for (int i = 0; i < {}; ++i) MMA_LOAD_A(i, ({} * {} + (wy * {} + i) * 16) * {} + ks * {})\n",
                   t.fm, buf, t.bm, t.fm, t.lda(), D);
  s += fmt::format("      MMA_UNROLL for (int j = 0; j < {}; ++j) MMA_LOAD_B(j, ({} * {} + ks * {}) * {} + (wx * {} + j) * 16)\n",
                   t.fn, buf, t.bk, D, t.ldb(), t.fn);
  s += fmt::format("      MMA_UNROLL for (int i = 0; i < {}; ++i) {{\n", t.fm);
  s += fmt::format("        MMA_UNROLL for (int j = 0; j < {}; ++j) MMA_MMA(i * {} + j, i, j)\n", t.fn, t.fn);
  s += "      }\n    }\n";
  return s;
}

}  // namespace

std::string_view mma_operand_name(MmaOperand o) {
  return o == MmaOperand::kF16 ? "fp16" : o == MmaOperand::kTf32 ? "tf32" : "fp32";
}

std::optional<MmaOperand> mma_operand(const Options& opts, bool f16) {
  if (opts.matrix == MatrixPath::kNone) return std::nullopt;
  if (f16) return MmaOperand::kF16;
  if (opts.tf32 && (opts.matrix == MatrixPath::kWmma || opts.matrix == MatrixPath::kPortable)) return MmaOperand::kTf32;
  if (opts.fp32_matrix && (opts.matrix == MatrixPath::kMfma || opts.matrix == MatrixPath::kPortable)) return MmaOperand::kF32;
  return std::nullopt;
}

uint64_t MmaTile::shared_bytes() const {
  const auto tiles = static_cast<uint64_t>(stages) * static_cast<uint64_t>(bm * lda() + bk * ldb()) * static_cast<uint64_t>(elem_bytes());
  return tiles + static_cast<uint64_t>(wr * wc) * 256 * 4;
}

MmaTile fit_mma_tile(const TileConfig& tc, const GemmLoop& L, const Options& opts, MmaOperand operand) {
  MmaTile t;
  t.operand = operand;
  t.lanes = lanes_of(opts.matrix);
  if (tc.block_m > 0 && tc.block_n > 0) {
    t.bm = pow2_floor(std::min(tc.block_m, 256));
    t.bn = pow2_floor(std::min(tc.block_n, 256));
  }
  if (tc.block_k > 0) t.bk = pow2_floor(std::min(tc.block_k, 64));
  t.bm = std::max(16, std::min(t.bm, pow2_ceil(std::max<int64_t>(1, L.m))));
  t.bn = std::max(16, std::min(t.bn, pow2_ceil(std::max<int64_t>(1, L.n))));
  t.bk = std::max(16, std::min(t.bk, pow2_ceil(std::max<int64_t>(1, L.k))));
  t.stages = tc.stages >= 2 ? 2 : 1;
  const int max_warps = std::max(1, pow2_floor(std::max(1, opts.max_threads)) / t.lanes);
  int warps = std::min(max_warps, std::max(1, (tc.threads > 0 ? pow2_floor(std::min(tc.threads, 1024)) : 128) / t.lanes));
  auto frags = [&] { return (t.bm / 16) * (t.bn / 16); };
  auto shrink = [&] {  // the larger side; false when both are one fragment
    if (std::max(t.bm, t.bn) <= 16) return false;
    (t.bm >= t.bn ? t.bm : t.bn) /= 2;
    return true;
  };
  // Accumulators per lane within the register budget: more warps where allowed, else a smaller tile.
  while (frags() / std::min(warps, frags()) * (256 / t.lanes) > kMaxAccPerLane) {
    if (warps * 2 <= max_warps) {
      warps *= 2;
    } else if (!shrink()) {
      break;
    }
  }
  warps = std::min(warps, frags());
  auto fits = [&] {  // with one staging tile per warp, whatever the warp grid
    MmaTile u = t;
    u.wr = warps;
    u.wc = 1;
    return u.shared_bytes() <= opts.max_shared_bytes;
  };
  while (!fits()) {
    if (t.stages > 1) {
      t.stages = 1;
    } else if (t.bk > 16) {
      t.bk /= 2;
    } else if (shrink()) {
      warps = std::min(warps, frags());
    } else if (warps > 1) {
      warps /= 2;
    } else {
      break;
    }
  }
  // The warp grid: split the side with more fragments per warp.
  t.wr = 1;
  t.wc = 1;
  while (t.wr * t.wc < warps) {
    if ((t.bm / 16) / t.wr >= (t.bn / 16) / t.wc && (t.bm / 16) / t.wr > 1) {
      t.wr *= 2;
    } else {
      t.wc *= 2;
    }
  }
  t.fm = t.bm / 16 / t.wr;
  t.fn = t.bn / 16 / t.wc;
  t.split = generated_split_k(tc.split_k, L.k, t.bk);
  return t;
}

void emit_gemm_mma(const GemmLoop& L, const MmaTile& t, MatrixPath path, Kernel& k) {
  const int64_t tiles_m = (L.m + t.bm - 1) / t.bm, tiles_n = (L.n + t.bn - 1) / t.bn;
  const int64_t total = L.batch * tiles_m * tiles_n;
  const SplitK sk = split_k_plan(L.k, t.bk, t.split);
  const int warps = t.wr * t.wc, per_lane = 256 / t.lanes;
  k.matrix = path;
  k.block = {static_cast<uint32_t>(t.threads()), 1, 1};
  // Accumulators of a lane filling half of a 64K-register file for two blocks (a 256x128 tile of 8
  // warps: 128 a lane): one block an SM, whatever the compiler aims for (ptxas for sm_100 and
  // sm_120 aims for two, and spilled these tiles).
  if (2 * t.threads() * t.fm * t.fn * per_lane >= kRegistersPerSm) k.min_blocks = 1;
  k.groups = groups_for(std::max<int64_t>(total * sk.split, 1), 1);
  k.shared_bytes = t.shared_bytes();
  k.decls += fragment_macros(k.matrix, t);
  k.decls += fmt::format("SHARED MMA_ALIGN MMA_HALF sA[{}];\nSHARED MMA_ALIGN MMA_HALF sB[{}];\nSHARED MMA_ALIGN float sC[{}];\n",
                         t.stages * t.bm * t.lda(), t.stages * t.bk * t.ldb(), warps * 256);
  std::string& s = k.body;
  s += fmt::format("  // GEMM {} x [{} x {} x {}] on matrix units ({}, {} operands), tile {}x{}x{}, {}x{} warps of {} lanes with {}x{} "
                   "16x16 fragments, {} stage(s){}\n",
                   L.batch, L.m, L.n, L.k, matrix_path_name(k.matrix), mma_operand_name(t.operand), t.bm, t.bn, t.bk, t.wr, t.wc, t.lanes, t.fm, t.fn,
                   t.stages, sk.split > 1 ? fmt::format(", K split {} ways", sk.split) : "");
  s += split_k_header(sk, total, t.bk);
  s += fmt::format("  int n0 = (tile % {}) * {};\n", tiles_n, t.bn);
  s += fmt::format("  int m0 = ((tile / {}) % {}) * {};\n", tiles_n, tiles_m, t.bm);
  s += fmt::format("  int bz = tile / {};\n", tiles_n * tiles_m);
  s += fmt::format("  int warp = LID_X / {0}; int mma_l = LID_X % {0};\n", t.lanes);
  s += fmt::format("  int wy = warp / {0}; int wx = warp % {0};\n", t.wc);
  s += L.setup;
  s += "  MMA_DECL\n";
  s += fmt::format("  MMA_UNROLL for (int f = 0; f < {}; ++f) MMA_ZERO(f)\n", t.fm * t.fn);
  s += k_loop(sk.split > 1 ? "ksteps_here" : std::to_string(sk.ksteps), t.bk, t.stages, sk.split > 1 ? "kb" : "",
              mma_tile_loads(L, t, path), [&](const std::string& buf) { return compute_tile(t, buf); });
  // A fragment's values through the warp's staging tile: lane l reads values e = q * lanes + l,
  // stored transposed (column-major) where the output is contiguous along m, so consecutive lanes
  // write consecutive elements of the output either way.
  const char* store = L.c_m_fastest ? "MMA_STORE_T" : "MMA_STORE";
  const char* row = L.c_m_fastest ? "e % 16" : "e / 16";
  const char* col = L.c_m_fastest ? "e / 16" : "e % 16";
  if (sk.split > 1) {
    // Partial sums through the warp's staging tile: value e of fragment f of warp w of slice ks of
    // the tile at (((tile * split + ks) * F + f) * warps + w) * 256 + e. Then the last group of
    // the tile adds the slices up and runs the epilogue per value, with no staging.
    const int F = t.fm * t.fn;
    const auto at = [&](const std::string& slice) {
      return fmt::format("(((tile * {} + {}) * {} + i * {} + j) * {} + warp) * 256 + e", sk.split, slice, F, t.fn, warps);
    };
    // Unrolled, as every loop naming a fragment: an indexed fragment array goes to local memory.
    s += fmt::format("  MMA_UNROLL for (int i = 0; i < {}; ++i) {{\n    MMA_UNROLL for (int j = 0; j < {}; ++j) {{\n", t.fm, t.fn);
    s += fmt::format("      {}(i * {} + j, warp * 256)\n      MMA_STAGED();\n", store, t.fn);
    s += fmt::format("      for (int q = 0; q < {}; ++q) {{\n        int e = q * {} + mma_l;\n", per_lane, t.lanes);
    s += fmt::format("        SPLIT_ST({}, sC[warp * 256 + e]);\n      }}\n      MMA_STAGED();\n    }}\n  }}\n", at("ks"));
    s += split_k_arrive(sk);
    s += fmt::format("  for (int i = 0; i < {}; ++i) {{\n    for (int j = 0; j < {}; ++j) {{\n", t.fm, t.fn);
    s += fmt::format("      for (int q = 0; q < {}; ++q) {{\n        int e = q * {} + mma_l;\n", per_lane, t.lanes);
    s += fmt::format("        int gm = m0 + (wy * {} + i) * 16 + {};\n", t.fm, row);
    s += fmt::format("        int gn = n0 + (wx * {} + j) * 16 + {};\n", t.fn, col);
    s += fmt::format("        if (gm < {} && gn < {}) {{\n", L.m, L.n);
    s += "          float acc_v = 0.0f;\n" + split_sum("          ", sk.split, at("sl"));
    s += "          {\n" + L.epilogue + "          }\n";
    s += "        }\n      }\n    }\n  }\n";
    add_split_scratch(k, total * sk.split * F * warps * 256, total);
    return;
  }
  // Epilogue: fragment by fragment through the warp's staging tile, the warp waiting for its own
  // lanes only (MMA_STAGED: no block barrier per fragment where the dialect has a warp's). The
  // loops have the same trip counts in every thread, so any barrier is in uniform control flow;
  // they are unrolled, so the fragments stay in registers (not unrolled, a 256x128 tile's 16
  // fragments a warp went to 528 bytes of local memory).
  s += fmt::format("  MMA_UNROLL for (int i = 0; i < {}; ++i) {{\n", t.fm);
  s += fmt::format("    MMA_UNROLL for (int j = 0; j < {}; ++j) {{\n", t.fn);
  s += fmt::format("      {}(i * {} + j, warp * 256)\n", store, t.fn);
  s += "      MMA_STAGED();\n";
  s += fmt::format("      for (int q = 0; q < {}; ++q) {{\n", per_lane);
  s += fmt::format("        int e = q * {} + mma_l;\n", t.lanes);
  s += fmt::format("        int gm = m0 + (wy * {} + i) * 16 + {};\n", t.fm, row);
  s += fmt::format("        int gn = n0 + (wx * {} + j) * 16 + {};\n", t.fn, col);
  s += fmt::format("        if (gm < {} && gn < {}) {{\n", L.m, L.n);
  s += "          float acc_v = sC[warp * 256 + e];\n";
  s += "          {\n" + L.epilogue + "          }\n";
  s += "        }\n      }\n      MMA_STAGED();\n    }\n  }\n";
}

void emit_gemm_kernel(const GemmLoop& L, const TileConfig& tc, const Options& opts, Kernel& k) {
  if (const auto g = fit_gemv_tile(tc, L, opts)) {
    emit_gemv(L, *g, k);
    return;
  }
  if (const auto op = mma_operand(opts, opts.float_storage == Storage::kF16)) {
    emit_gemm_mma(L, fit_mma_tile(tc, L, opts, *op), opts.matrix, k);
    return;
  }
  emit_gemm(L, fit_gemm_tile(tc, L, opts), k);
}

}  // namespace gpusim::codegen
