// Codegen's answer to the planner's capability query: the tile the generators build when a plan
// asks for one (codegen.h: TargetCapability), by the fitting functions the generators call.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "codegen.h"
#include "compiled_figures.h"
#include "gemm_tile.h"
#include "gen_rows.h"

namespace gpusim::codegen {

namespace {
// Whether the tiles the capability fits carry codegen's design chain (gemm_tile.h: design_chain),
// so that predict and plan price them by it. Off: with it, the planner moved to tiles (32x32 of 64
// threads, 64x64 of 128) whose compiled registers the cost model's estimate misses by up to 2x,
// and the compile tier's blocks-per-SM agreement fell from 97% to 56-80% on sm_80 (bench/RESULTS.md,
// "gpusim's own kernels"): the register estimate of those tiles comes first. Runs carry the chain
// of the kernels that ran (tools/annotate_chains.py), which the model prices.
constexpr bool kPriceDesignChain = false;
}  // namespace

Options target_options(const backend::DeviceInfo& d, bool fp16_storage, std::optional<MatrixPath> matrix, bool allow_tf32) {
  Options o;
  o.float_storage = fp16_storage ? Storage::kF16 : Storage::kF32;
  o.max_threads = d.max_threads_per_group;
  o.max_shared_bytes = d.max_shared_bytes;
  o.matrix = matrix ? *matrix : matrix_path_for(d);
  // wmma's tf32 fragments need sm_80; the portable path rounds the same way on any device.
  const bool ampere = d.backend == "cuda" && d.arch.rfind("sm_", 0) == 0 && d.arch.size() > 3 &&
                      std::isdigit(static_cast<unsigned char>(d.arch[3])) && std::atoi(d.arch.c_str() + 3) >= 80;
  o.tf32 = allow_tf32 && ((o.matrix == MatrixPath::kWmma && ampere) || o.matrix == MatrixPath::kPortable);
  // CDNA's fp32 MFMA; the portable path runs the same structure in exact fp32.
  o.fp32_matrix = o.matrix == MatrixPath::kMfma || o.matrix == MatrixPath::kPortable;
  return o;
}

std::string profile_vendor(const GpuProfile& p) {
  std::string vendor = p.vendor;
  std::transform(vendor.begin(), vendor.end(), vendor.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return vendor;
}

Options target_options(const DeviceModel& d, bool fp16_storage) {
  Options o;
  o.float_storage = fp16_storage ? Storage::kF16 : Storage::kF32;
  if (d.max_threads_per_block > 0) o.max_threads = std::max(32, d.max_threads_per_block);
  if (d.smem_per_block_bytes > 0) o.max_shared_bytes = static_cast<uint64_t>(d.smem_per_block_bytes);
  o.matrix = MatrixPath::kNone;
  if (d.profile) {
    const GpuProfile& p = *d.profile;
    const bool fp16_matrix = p.matrix_tflops(Precision::kFp16, Precision::kFp32).has_value();
    const std::string vendor = profile_vendor(p);
    // CUDA's static limit, as the CUDA backend reports it for a device (cuda_backend.cpp).
    if (vendor == "nvidia") o.max_shared_bytes = std::min(o.max_shared_bytes, backend::kCudaStaticSharedBytes);
    if (fp16_matrix && vendor == "nvidia") {
      o.matrix = MatrixPath::kWmma;
      // TF32 where the target allows it and the GPU has a TF32 rate (Ampere and newer).
      o.tf32 = d.allow_tf32 && p.matrix_tflops(Precision::kTf32, Precision::kFp32).has_value();
    } else if (fp16_matrix && vendor == "amd" && p.architecture.rfind("CDNA", 0) == 0) {
      o.matrix = MatrixPath::kMfma;
      // fp32 MFMA, as rocBLAS runs fp32 GEMMs and the cost model prices them.
      o.fp32_matrix = p.matrix_tflops(Precision::kFp32, Precision::kFp32).has_value();
    }
  }
  return o;
}

TileConfig TargetCapability::generated(const KernelWork& w, const TileConfig& asked) const {
  return fit(w, asked, kPriceDesignChain);
}

TileConfig TargetCapability::built(const KernelWork& w, const TileConfig& asked) const { return fit(w, asked, true); }

TileConfig TargetCapability::fit(const KernelWork& w, const TileConfig& asked, bool chain) const {
  TileConfig t = tile_as_generated(asked, w);
  const bool gemm_like = has_gemm_view(w);
  if (w.cls == OpClass::kAttention && w.m > 0 && w.kv_seq > 0) {
    const AttentionTile a = fit_attention_tile(asked, w.m, w.kv_seq, w.head_dim, w.v_head_dim, o_);
    t.block_m = a.bq;
    t.block_n = a.bkv;
    t.block_k = 0;
    t.threads = a.threads;
    t.stages = 1;
    t.split_k = a.split;  // key blocks over groups, combined by the last (gen_attention.cpp)
    t.smem_bytes = static_cast<int>(a.shared_bytes());
    t.main_loop = MainLoop::kVector;  // scores and products on the vector units (gen_attention.cpp)
  } else if (gemm_like && !(w.cls == OpClass::kConv && (w.n < 16 || w.k < 16))) {
    GemmLoop L;
    L.batch = w.batch;
    L.m = w.m;
    L.n = w.n;
    L.k = w.k;
    // fp16 kernels are stored in fp16 whatever the options say (a target made for a profile
    // serves plans of every float type).
    const bool f16 = o_.float_storage == Storage::kF16 || w.dtype == DType::kFloat16;
    if (const auto v = fit_gemv_tile(asked, L, o_)) {
      t.block_m = v->bm;
      t.block_n = v->bn;
      t.block_k = v->lanes;
      t.threads = v->threads;
      t.stages = 1;
      t.split_k = v->split;
      t.smem_bytes = static_cast<int>(v->shared_bytes() + (v->split > 1 ? kSplitFlagBytes : 0));
      t.main_loop = MainLoop::kVector;
    } else if (const auto op = mma_operand(o_, f16)) {
      const MmaTile m = fit_mma_tile(asked, L, o_, *op);
      t.main_loop = *op == MmaOperand::kTf32 ? MainLoop::kTf32 : MainLoop::kMatrix;
      t.block_m = m.bm;
      t.block_n = m.bn;
      t.block_k = m.bk;
      t.threads = m.threads();
      t.stages = m.stages;
      t.split_k = m.split;
      t.smem_bytes = static_cast<int>(m.shared_bytes() + (m.split > 1 ? kSplitFlagBytes : 0));  // padded operand tiles, a staging tile per warp
      // Operands as gathers, B in vectors of the tile's width; the epilogue's staging: a warp's own
      // on wmma, the block's (two barriers a fragment) on the other paths.
      if (chain) t.chain = design_chain(m.bm, m.bn, m.bk, m.threads(), m.fm * m.fn * 256 / m.lanes, 1,
                             gemm_vector_width(asked, f16 ? Storage::kF16 : Storage::kF32), m.split, m.fm * m.fn,
                             o_.matrix == MatrixPath::kWmma ? 0 : 2);
    } else {
      const GemmTile g = fit_gemm_tile(asked, L, o_);
      t.block_m = g.bm;
      t.block_n = g.bn;
      t.block_k = g.bk;
      t.threads = g.threads;
      t.stages = g.stages;
      t.split_k = g.split;
      t.smem_bytes = static_cast<int>(g.shared_bytes() + (g.split > 1 ? kSplitFlagBytes : 0));  // fp32 tiles, a float of padding a k-row
      t.main_loop = MainLoop::kVector;
      if (chain) t.chain = design_chain(g.bm, g.bn, g.bk, g.threads, g.tm * g.tn, 1,
                             gemm_vector_width(asked, f16 ? Storage::kF16 : Storage::kF32), g.split, 0, 0, 2);
    }
  } else if (gemm_like) {
    t.split_k = 1;  // a direct convolution (fewer than 16 output or reduction channels): one loop a thread
    t.main_loop = MainLoop::kVector;
  } else if (w.cls == OpClass::kElementwise || w.cls == OpClass::kDataMovement) {
    t.threads = std::clamp(asked.threads > 0 ? asked.threads : 256, 32, std::min(1024, o_.max_threads));
    // Data movement: one element a thread (gen_data.cpp).
    t.items_per_thread = w.cls == OpClass::kElementwise ? std::clamp(asked.items_per_thread, 1, 8) : 1;
  } else if (w.cls == OpClass::kReduction || w.cls == OpClass::kNormalization) {
    // Row kernels (gen_reduce.cpp) and pooling and per-element normalizations (gen_pool.cpp) alike.
    const uint32_t cap = pow2_at_most(std::min(o_.max_threads, 1024));
    t.threads = static_cast<int>(std::min<uint32_t>(pow2_at_most(asked.threads > 0 ? asked.threads : 256), cap));
  }
  t.registers = 0;
  if (figures_ && !figures_->empty()) {
    if (const CompiledFigures* f = figures_->find(compiled_figures_key(w, t, o_))) t.registers = f->registers;
  }
  return t;
}

std::string TargetCapability::describe() const {
  return fmt::format("codegen: {} threads a group, {} KiB shared memory, matrix path {}{}{}{}{}", o_.max_threads,
                     o_.max_shared_bytes / 1024, matrix_path_name(o_.matrix), o_.tf32 ? " (fp32 as TF32)" : "",
                     o_.fp32_matrix ? " (fp32 on fp32 matrix instructions)" : "",
                     o_.float_storage == Storage::kF16 ? ", fp16 storage" : "",
                     figures_ && !figures_->empty()
                         ? fmt::format(", compiled figures of {} kernels for {}", figures_->size(), figures_->arch())
                         : "");
}

}  // namespace gpusim::codegen
