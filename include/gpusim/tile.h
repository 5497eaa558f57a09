// The kernel a plan asks for: what it computes (KernelWork) and how it is scheduled (TileConfig),
// and the code generator's answer to "can you build this tile, and how?" (TileCapability).
//
// These are plan types: the planner writes them, the cost model (kernel_cost.h) prices them,
// codegen (backends/codegen) builds them. A plan holds only tiles its generator builds as asked,
// so the simulator ranks exactly what runs: the planner and the autotuner pass every tile of the
// cost model's menu through a capability (the backend's, for its device; portable_capability()
// where no target is known) and price what comes back.
//
// Usage:
//   const gpusim::TileCapability& cap = gpusim::portable_capability();
//   gpusim::TileConfig built = cap.generated(work, asked);   // what codegen builds when asked for `asked`
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "gpusim/dtype.h"
#include "gpusim/op_catalog.h"

namespace gpusim {

// The units a GEMM-like kernel's main loop runs on, where its builder has decided (codegen's
// capability sets it on the tiles it builds; a library's tile leaves it kAny).
enum class MainLoop : uint8_t {
  kAny,     // undecided: the cost model prices the matrix units where the dtype, the profile, the
            // operands' alignment and the target's TF32 permission allow, as a library picks
  kVector,  // the vector units (a SIMT loop), whatever the profile has
  kMatrix,  // the matrix units at the dtype's own rate (fp16, bf16; fp32 on CDNA's fp32 MFMA)
  kTf32,    // fp32 operands on the matrix units as TF32 (10-bit mantissas, fp32 accumulation)
};
// "any", "vector", "matrix", "tf32".
GPUSIM_API std::string_view main_loop_name(MainLoop m);
// The main loop `name` spells (main_loop_name's names); false where it is none of them.
GPUSIM_API bool parse_main_loop(std::string_view name, MainLoop* out);

// The dependent chain of one block of gpusim's own GEMM-like kernels, as codegen builds them or as
// their compiled code shows (`gpusim codegen report` reads the SASS): what the cost model prices
// them by (core/sim/README.md, "gpusim's own kernels"). All 0 where unknown: a library's kernel, or
// a tile not yet fitted to a generated target.
struct GPUSIM_API KernelChain {
  int load_rounds = 0;        // dependent global-load rounds a thread waits on per k-step of the main loop
  int loads_ahead = 0;        // 1: each k-step's loads are issued before the step before it computes
  int epilogue_rounds = 0;    // dependent round trips after the main loop (a K split's arrival and partial sums)
  int epilogue_barriers = 0;  // block barriers after the main loop
  bool known() const { return load_rounds > 0; }
  bool operator==(const KernelChain&) const = default;
};

// How a kernel is scheduled. GEMM-like kernels use block_m/n/k, stages and split_k (and
// vector_width as the widest operand tile load, which their price does not depend on); the
// others use threads, vector_width and items_per_thread.
struct GPUSIM_API TileConfig {
  int block_m = 0;
  int block_n = 0;
  int block_k = 0;
  int threads = 256;
  int stages = 1;
  int split_k = 1;
  int vector_width = 1;  // elements per memory access
  int items_per_thread = 1;
  // Row kernels: rows each block reduces. 0: as many as the block holds (gpusim's codegen packs
  // short rows); a library kernel's launch may fix it (PyTorch's LayerNorm runs a block per row).
  int rows_per_block = 0;
  // Shared memory a block of the kernel as built holds, in bytes, where its generator knows its
  // layout (codegen's padded operand tiles, per-warp staging tiles, attention's score rows): the
  // cost model's occupancy uses it. 0: unknown (a library's kernel), and the model estimates it
  // from the tile (stages x (block_m + block_n) x block_k elements). A derived figure, not a
  // choice: codegen's capability sets it, plan files leave it out, and a plan's tiles regain it
  // when they are fitted to a target.
  int smem_bytes = 0;
  // Registers a thread of the kernel as compiled, where the compiler's figure for it is known
  // (codegen's compiled figures, backends/codegen/compiled_figures.h): the cost model's occupancy
  // uses it. 0: the model estimates it from the tile. Derived like smem_bytes.
  int registers = 0;
  // What its main loop runs on (GEMM-like and attention kernels); derived like smem_bytes.
  MainLoop main_loop = MainLoop::kAny;
  // gpusim's own GEMM-like kernels: their block's dependent chain (KernelChain); derived like
  // smem_bytes (codegen's capability sets it from its design, or from the compiled code).
  KernelChain chain = {};

  bool operator==(const TileConfig&) const = default;
};

// Whether two tiles schedule a kernel alike: equal but for the derived smem_bytes, registers, main_loop and chain
// (a plan file's tile against the same tile fitted to a target).
GPUSIM_API bool same_schedule(const TileConfig& a, const TileConfig& b);

// What the kernel computes, independent of how it is tiled.
struct GPUSIM_API KernelWork {
  OpClass cls = OpClass::kElementwise;
  DType dtype = DType::kFloat32;  // element type of the data it moves and computes on
  // GEMM view (gemm, conv as implicit GEMM, attention): batch x [m, k] x [k, n].
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool b_shared = false;  // B is the same for every batch (a weight): read once, not per batch
  // Conv: kernel window size (implicit GEMM re-reads its input per output-channel tile).
  int64_t window = 1;
  // Bytes of A (and other non-weight inputs, such as a bias) read at least once from DRAM when that
  // differs from batch x m x k: a convolution's input tensor, which its im2col view re-reads or,
  // with strides, skips. 0: batch x m x k elements.
  int64_t a_bytes = 0;
  // Fused epilogue of a GEMM-like kernel: extra inputs read once (bias, residual) and its FLOPs
  // (run on the vector units after the main loop).
  int64_t epilogue_bytes = 0;
  FlopCounts epilogue_flops;
  // Attention: heads (folded into batch), q_seq = m, kv_seq, head dims.
  int64_t kv_seq = 0, head_dim = 0, v_head_dim = 0;
  int64_t macs = 0;
  FlopCounts flops;
  int64_t bytes_read = 0;     // compulsory, from the op catalog
  int64_t bytes_written = 0;
  int64_t elements = 0;       // output elements: the parallelism of elementwise kernels
  // Reductions and normalizations: independent rows of row_elements each; passes over each row.
  int64_t rows = 0, row_elements = 0;
  int passes = 1;  // times each row is read (a library that keeps rows in registers reads once)
  // Bytes of the inputs already in L2 when the kernel starts (an operand that fits and was just
  // written, or re-read back to back): they are read from L2, not DRAM.
  int64_t l2_resident_bytes = 0;
  // Data movement: contiguous run of elements on the strided side (0 = fully contiguous copy).
  int64_t contiguous_run = 0;
  // Block-quantized weights (GGUF's Q4_0/Q8_0/K-quants, MatMulNBits): B as stored, in bits an
  // element with its share of the blocks' scales (Q4_0: 4.5); 0 when B is stored as `dtype`.
  // `dequant_ops`: vector instructions per element of B to unpack and scale it, paid each time a
  // block of the kernel loads it (include/gpusim/llm.h, BlockFormat).
  double b_bits = 0;
  double dequant_ops = 0;
  // The matrix units accumulate in the inputs' own precision (cuBLAS's CUBLAS_COMPUTE_16F, which
  // llama.cpp asks for fp16 weights): the fp16-accumulate peak, twice the fp32-accumulate one on
  // GeForce cards.
  bool accumulate_half = false;
  // Block-scaled integer products (llama.cpp's MMQ: int8 activations times int8-unpacked weights,
  // a scale per block of k_block elements of K on each side): every output converts each block's
  // int32 sum to float and adds it scaled (a conversion and two multiply-adds on the vector units,
  // waiting on that block's product). 0: no per-block rescale.
  int k_block = 0;
};


// A tile in one short notation, as every table prints it. GEMM-like kernels (a tile with
// block_m > 0): "128x64x32 256t s3" (block tile MxN, K step, threads a block, pipeline stages),
// then " sk4" when K is split into 4 slices and " v8" when operand tiles load 8 elements at a time.
// Other kernels: "256t v4 x2" (threads a block, elements a load, items each thread handles).
GPUSIM_API std::string tile_notation(const TileConfig& t);
// One line explaining tile_notation, printed under tables that show tiles.
inline constexpr std::string_view kTileLegend =
    "tile: MxNxK = block tile and K step; Nt = threads a block; sN = pipeline stages; skN = K split into N "
    "slices; vN = elements a load (vector width); xN = items a thread";

// The elements per thread-step a fused elementwise kernel generates for a tile's vector_width over
// `elements` output elements: vector_width rounded down to a power of two, at most 8, and halved
// until it divides `elements` (so every vector access is whole and aligned).
GPUSIM_API int generated_vector_lanes(int vector_width, int64_t elements);

// GEMM-like work with its GEMM view set (a MatMul, Gemm or convolution with m, n and k): what a
// tiled main loop runs, with block_m/n/k, stages and split_k.
GPUSIM_API bool has_gemm_view(const KernelWork& w);

// A GEMV-shaped GEMM tile: more threads than block_m x block_n outputs, the threads of each
// output column splitting its K among them (block_k of them) with no shared-memory staging of the
// operands and no barrier in the main loop, their sums added once at the end. gpusim's codegen
// builds it for GEMMs and convolutions of at most 8 rows (backends/codegen/gemv.cpp); libraries
// run such kernels for matrix-vector products (cuBLAS's gemv, llama.cpp's mul_mat_vec).
GPUSIM_API bool gemv_shaped(const TileConfig& t);

// The K split codegen builds for a GEMM-like kernel asked for `asked` slices of a K of `k`
// elements in `block_k`-deep steps: `asked` clamped to [1, min(64, k-steps)], then the fewest
// slices that give each the same number of k-steps (the last may hold fewer; none is empty).
// Fitting a fitted split returns it. Each slice is a group of its own; the last of a tile's groups
// to finish adds the slices' partial sums up in a fixed order and runs the fused epilogue on the
// whole sum (serial split-K in one launch: no second kernel, the same result on every run).
GPUSIM_API int generated_split_k(int asked, int64_t k, int block_k);

// The rules every gpusim code generator follows whatever its target: split_k as
// generated_split_k for GEMMs and convolutions, and over the key blocks (kv_seq in block_n steps)
// for attention (flash-decoding: each group a share of the keys, the last combining them; 1 for
// the other classes); vector_width as
// generated_vector_lanes for fused elementwise kernels and (over the row length) for row
// reductions and normalizations; a power of two up to 8 for GEMMs and convolutions (the widest
// tile load, narrowed per operand); 1 for the other classes; the rest kept.
GPUSIM_API TileConfig tile_as_generated(TileConfig t, const KernelWork& w);

// A code generator's capability on one target: asked for tile `t` for work `w`, the tile it
// builds. Codegen fits tiles to the target's limits (threads a block, shared memory, registers,
// matrix fragments) and to the problem, so the tile built may differ from the one asked; the
// planner prices the built tile, never the asked one. A Target (target.h) carries one to every
// planner entry. Implementations: library_capability() (target.h: the menu as asked, as vendor
// libraries run), portable_capability() (tile_as_generated, no target limits) and
// codegen::TargetCapability (backends/codegen: the fitted tile for a backend's device, or for a
// GPU profile before any device is opened).
class GPUSIM_API TileCapability {
 public:
  virtual ~TileCapability() = default;
  virtual TileConfig generated(const KernelWork& w, const TileConfig& t) const = 0;
  // A short description for reports ("portable", "codegen: 1024 threads, 48 KiB shared, wmma").
  virtual std::string describe() const = 0;
};

// tile_as_generated as a TileCapability.
GPUSIM_API const TileCapability& portable_capability();

}  // namespace gpusim
