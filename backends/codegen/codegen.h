// Codegen: from a plan kernel (a group of fused ops and its TileConfig) to kernel source for the
// device backends — CUDA C++ (one text for CUDA via NVRTC and HIP via hiprtc) and GLSL compute
// (Vulkan, via shaderc).
//
// Every generator writes its kernel once, in a small C dialect that both languages accept once
// a per-target prelude is in front of it (dialect.h): buffers are arrays `b0`, `b1`, ... in
// argument order, loads and stores go through per-buffer macros `LD0(i)` / `ST1(i, v)` (which hide
// fp16 storage; `LDV0` / `STV1` move up to 16 bytes of consecutive elements at once), thread and
// group ids are `LID_X`, `GRP_X`, ..., `BARRIER()` syncs a group, `FENCE()` orders a thread's
// global memory accesses for other groups, `UNROLL` asks that the next loop be unrolled (CUDA/HIP;
// `UNROLL2` two iterations at a time),
// `SHARED` declares group memory at file scope, `FN` marks helper functions, and math uses the
// CUDA float names (expf, erff, fmaxf, rsqrtf, ...). Shapes and strides are baked into the text
// as constants: each kernel is specialized to its shapes, like other JIT code generators, and the
// backends' compile caches make a repeated shape free.
//
// Kernel classes: fused elementwise chains (any catalog elementwise op, broadcasting);
// GEMM (MatMul, Gemm) and implicit-GEMM convolution, tiled per TileConfig with shared-memory
// staging and a fused elementwise epilogue; reductions and normalizations (Reduce*, Softmax,
// LayerNorm, InstanceNorm/GroupNorm, pooling); attention; data movement (Transpose, Concat,
// Slice, Gather, Expand, Pad, Resize, ...).
//
// Usage:
//   auto k = gpusim::codegen::generate(graph, plan.kernels[i], {});
//   if (!k) { /* kUnsupported: this fusion or op has no generator; run its nodes one by one */ }
//   backend::KernelSource src = k->source(backend::Language::kGlsl);
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend.h"
#include "gpusim/graph.h"
#include "gpusim/device_plan.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/kernel_work.h"
#include "gpusim/plan.h"
#include "gpusim/result.h"
#include "gpusim/tile.h"

namespace gpusim::codegen {

class CompiledFigureTable;

// How a tensor is stored in a device buffer. Floats are fp32 or fp16 (computed in fp32); uint8 and
// int8 tensors (quantized weights and activations, packed low-bit blocks) are bytes, four to a
// 32-bit word, read as int (GLSL extracts them from words; stores set one byte of a word
// atomically, so neighbouring threads may write neighbouring bytes); other integer and bool
// tensors are int32 on the device (the executor converts int64 data on upload and refuses values
// outside int32). A byte buffer is allocated in whole words.
enum class Storage { kF32, kF16, kI32, kU8, kI8 };
std::string_view storage_name(Storage s);  // "f32", "f16", "i32", "u8", "i8"
int storage_bytes(Storage s);
inline bool storage_is_byte(Storage s) { return s == Storage::kU8 || s == Storage::kI8; }

// Scratch a kernel needs beside the graph's tensors (Arg::scratch): a split-K GEMM's partial sums
// (fp32, one slab per output tile and K slice) and its per-tile arrival counters (int32, zero
// between launches: the last group of a tile sets its counter back to 0). The executor keeps one
// buffer of each kind for every kernel of a program (launches run in order on one queue), and
// zeroes the counters once when it allocates them.
enum class Scratch { kNone = -1, kPartials = 0, kCounters = 1 };

struct Arg {
  TensorId tensor = -1;      // the graph tensor this buffer holds (a view root, see GraphIndex); -1 for scratch
  Storage storage = Storage::kF32;
  int64_t elements = 0;
  bool written = false;      // outputs: written by the kernel (inputs are read-only)
  // Elements per vector access (2, 4 or 8: at most 16 bytes) where the kernel also reads or
  // writes the buffer in vectors through LDVk / STVk (dialect.h); 0: scalar access only.
  int vector = 0;
  Scratch scratch = Scratch::kNone;  // scratch instead of a tensor: read and written coherently across groups
};

// The units a GEMM-like kernel's main loop (GEMM, implicit-GEMM convolution) runs on when the
// plan is fp16: fp16 products accumulated in fp32, as the simulator prices matrix units. fp32
// plans stay on the vector units unless the target allows TF32 (Options::tf32: wmma's tf32
// fragments) or has fp32 matrix instructions (Options::fp32_matrix: CDNA's fp32 MFMA).
//  kNone      SIMT register micro-tiles, every target.
//  kWmma      CUDA warp matrix functions (nvcuda::wmma, m16n16k16 fp16 -> fp32), sm_70 and later.
//  kMfma      AMD CDNA matrix cores (v_mfma_f32_16x16x16f16, wave64): gfx908, gfx90a, gfx94x.
//  kPortable  the matrix kernel's tiles, warp fragments and epilogue with each 16x16x16 product
//             computed by the warp's threads from shared memory. It runs on every target, GLSL
//             included, so the matrix kernels' structure is checked on lavapipe in CI; it is
//             never chosen for a device (it is no faster than kNone).
enum class MatrixPath { kNone, kWmma, kMfma, kPortable };
std::string_view matrix_path_name(MatrixPath p);  // "none", "wmma", "mfma", "portable"
// The path codegen uses for fp16 GEMMs on a device: kWmma on CUDA sm_70+, kMfma on CDNA; kNone
// elsewhere (RDNA3 WMMA and Vulkan cooperative matrices are not generated yet, see README).
MatrixPath matrix_path_for(const backend::DeviceInfo& d);

struct Options {
  Storage float_storage = Storage::kF32;  // fp16 storage when the plan runs in fp16
  // Matrix units for GEMM-like kernels: fp16 kernels use them whenever a path is set; fp32 ones
  // as below (MmaOperand in gemm_tile.h).
  MatrixPath matrix = MatrixPath::kNone;
  // fp32 GEMM-like kernels on the matrix path as TF32 (operands rounded to 10-bit mantissas,
  // fp32 accumulation): wmma's m16n16k8 tf32 fragments on sm_80 and newer, or the portable path
  // rounding the same way. Set where the target allows TF32 (TargetOptions::allow_tf32).
  bool tf32 = false;
  // fp32 GEMM-like kernels on fp32-input matrix instructions (CDNA's v_mfma_f32_16x16x4f32, or
  // the portable path in exact fp32): what rocBLAS runs by default, and the cost model prices.
  bool fp32_matrix = false;
  // Largest threads per group and shared memory the target allows (tiles are clamped to fit).
  int max_threads = 1024;
  uint64_t max_shared_bytes = 48 * 1024;
};

struct Kernel {
  std::string name;          // a C identifier, unique per source text
  std::string cls;           // "elementwise", "gemm", "conv", "reduction", "normalization", "attention", "data-movement"
  std::vector<Arg> args;     // buffer arguments in binding order (`written` marks outputs)
  std::array<uint32_t, 3> groups{1, 1, 1};
  std::array<uint32_t, 3> block{64, 1, 1};
  uint64_t shared_bytes = 0;
  std::string decls;         // file scope, in the dialect: helper functions, SHARED arrays
  std::string body;          // the entry point's statements, in the dialect
  MatrixPath matrix = MatrixPath::kNone;  // the matrix units its main loop uses (the prelude includes their header)
  // Blocks a multiprocessor must hold at once, for the compiler's register budget (the second
  // argument of CUDA's __launch_bounds__; 0: the compiler's own choice). 1 for a tile whose
  // accumulators fill half the register file: it runs one block an SM in any case, and ptxas for
  // sm_100 and sm_120, told nothing, budgets for two and spills it.
  int min_blocks = 0;

  // The complete translation unit for a language (prelude, buffer declarations, entry point).
  backend::KernelSource source(backend::Language lang) const;
};

// Generates the kernel for plan kernel `k` of graph `g`. kUnsupported, naming the op and the
// reason, where no generator covers the group (the executor then runs its nodes one by one and,
// for an op no generator covers, on the host reference — saying so).
Result<Kernel> generate(const Graph& g, const PlanKernel& k, const Options& opts = {});
// The same with the graph's index built once by the caller (the executor generates many kernels).
Result<Kernel> generate(const Graph& g, const GraphIndex& idx, const PlanKernel& k, const Options& opts = {});

// The elements per thread-step a fused elementwise kernel generates for a tile's vector_width
// over `elements` output elements (tile.h: generated_vector_lanes).
int vector_lanes(int vector_width, int64_t elements);

// The options codegen uses on a backend's device: its threads a group and shared memory, its
// matrix path (or `matrix` where the caller names one), fp16 storage when the plan runs in fp16.
// With `allow_tf32`, fp32 GEMM-like kernels run as TF32 where the device's path has it (CUDA sm_80
// and newer); CDNA's fp32 MFMA is used whatever it says (as rocBLAS does).
Options target_options(const backend::DeviceInfo& d, bool fp16_storage, std::optional<MatrixPath> matrix = std::nullopt,
                       bool allow_tf32 = false);
// The same for a GPU profile before any device is opened: the profile's threads and shared
// memory a block, and the matrix path its vendor's backend takes (wmma on NVIDIA cards with fp16
// matrix units, mfma on AMD CDNA, none elsewhere).
Options target_options(const DeviceModel& d, bool fp16_storage);
// A profile's vendor in lower case ("nvidia", "amd", "apple", "intel"): whose compiler and matrix
// path its kernels are generated for.
std::string profile_vendor(const GpuProfile& p);

// Codegen's answer to the planner's capability query (tile.h: TileCapability) on one target:
// asked for tile `t` for work `w`, the tile the generators build, by the same fitting they use —
// GEMMs and implicit-GEMM convolutions as fit_gemm_tile / fit_mma_tile fit them (powers of two,
// no larger than the problem, accumulators, threads and shared memory within the target; at most
// 2 stages), attention as its generator fits its query and key blocks (one stage), elementwise
// and row kernels with the threads and items the generators clamp to, split_k (GEMMs and
// implicit-GEMM convolutions: generated_split_k over the fitted block_k; 1 elsewhere) and vector
// widths as tile_as_generated. Fitting a fitted tile returns it unchanged. Convolutions with fewer than
// 16 output or reduction channels run as a direct loop that uses only the tile's threads; their
// block fields are kept as asked (priced as the implicit GEMM).
class TargetCapability final : public TileCapability {
 public:
  explicit TargetCapability(Options o) : o_(o) {}
  // With the compiled figures of the target's architecture (compiled_figures.h): a tile whose
  // kernel was compiled before carries the compiler's registers a thread.
  TargetCapability(Options o, std::shared_ptr<const CompiledFigureTable> figures) : o_(o), figures_(std::move(figures)) {}
  TileConfig generated(const KernelWork& w, const TileConfig& t) const override;
  // The tile as generated, carrying the chain of the kernel the generator builds for it (tile.h:
  // KernelChain; gemm_tile.h: design_chain) whether or not the planner prices its tiles by one:
  // for pricing a kernel that ran or was measured (calibration's kernels) as gpusim's own.
  TileConfig built(const KernelWork& w, const TileConfig& t) const;
  std::string describe() const override;
  const Options& options() const { return o_; }
  const CompiledFigureTable* figures() const { return figures_.get(); }

 private:
  TileConfig fit(const KernelWork& w, const TileConfig& asked, bool chain) const;
  Options o_;
  std::shared_ptr<const CompiledFigureTable> figures_;
};

// Storage of a graph tensor under these options.
Storage storage_of(DType t, const Options& opts);

}  // namespace gpusim::codegen
