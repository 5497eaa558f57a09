// The kernel cost model: the time of one generated kernel on one GPU, at tile and wave
// granularity, with every component it is made of.
//
// A kernel is described by its work (KernelWork: class, GEMM dims, FLOPs by kind, compulsory
// bytes, rows of a reduction, ...) and its schedule (TileConfig). The model computes CTAs from the
// tile, CTAs per unit from registers, shared memory, threads and block limits, waves and the
// partial last wave, compute time at the matrix-unit or vector rate the dtype and alignment allow,
// DRAM and L2 traffic from tile reuse and L2 capacity in 32-byte sectors, achieved bandwidth from
// the bytes in flight (Little's law), a latency floor, and reports which bound limits the kernel.
// All figures come from the GpuProfile (via DeviceModel); nothing is typed in here except the
// structural constants documented in src/sim/README.md.
//
// Usage:
//   gpusim::DeviceModel dev = gpusim::make_device(profile);
//   gpusim::KernelWork w = gpusim::gemm_work("mm", DType::kFloat16, 1, 4096, 4096, 4096);
//   gpusim::TileConfig t = gpusim::choose_tile(w, dev);
//   gpusim::KernelCost c = gpusim::kernel_cost(w, t, dev);   // c.total_us, c.bound, ...
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/dtype.h"
#include "gpusim/gpu_profile.h"
#include "gpusim/op_catalog.h"

namespace gpusim {

// How a kernel is scheduled. GEMM-like kernels use block_m/n/k, stages and split_k (and
// vector_width as the widest operand tile load, which their price does not depend on); the
// others use threads, vector_width and items_per_thread.
struct TileConfig {
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

  bool operator==(const TileConfig&) const = default;
};

// What the kernel computes, independent of how it is tiled.
struct KernelWork {
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
};

enum class Bound { kCompute, kDram, kL2, kLatency };
std::string_view bound_name(Bound b);

// A tile in one short notation, as every table prints it. GEMM-like kernels (a tile with
// block_m > 0): "128x64x32 256t s3" (block tile MxN, K step, threads a block, pipeline stages),
// then " sk4" when K is split into 4 slices and " v8" when operand tiles load 8 elements at a time.
// Other kernels: "256t v4 x2" (threads a block, elements a load, items each thread handles).
std::string tile_notation(const TileConfig& t);
// One line explaining tile_notation, printed under tables that show tiles.
inline constexpr std::string_view kTileLegend =
    "tile: MxNxK = block tile and K step; Nt = threads a block; sN = pipeline stages; skN = K split into N "
    "slices; vN = elements a load (vector width); xN = items a thread";

struct KernelCost {
  TileConfig tile;
  bool feasible = true;
  const char* infeasible_reason = nullptr;  // static text; see tile_feasibility() for the figures
  int64_t ctas = 0;
  int64_t ctas_per_unit = 0;   // resident CTAs per SM/CU
  const char* occupancy_limiter = "";  // "threads", "registers", "shared memory", "blocks"
  int64_t waves = 0;
  double last_wave_fraction = 0;  // how full the last wave is (1 = full)
  double occupancy = 0;           // resident warps / max warps per unit
  bool matrix_units = false;
  double peak_tflops = 0;          // the peak the compute time uses (before efficiency)
  double executed_flops = 0;       // including tile padding
  double dram_bytes = 0;
  double l2_bytes = 0;
  double achieved_dram_gbps = 0;   // after efficiency and bytes in flight
  double compute_us = 0;
  double dram_us = 0;
  double l2_us = 0;
  double latency_us = 0;           // pipeline fill: the first loads' round trip
  // Latency-bound floor of the body: the blocks on the busiest unit run in rounds of as many as
  // fit at once, and no round ends before its blocks' dependent chain of memory round trips and
  // barriers does (rounds x path). It sets the time of small and narrow kernels.
  double path_us = 0;
  double dispatch_us = 0;          // starting blocks: ceil(CTAs / units) x the profile's block_us
  double floor_us = 0;             // the profile's shortest kernel
  double total_us = 0;             // max(floor, max(compute, dram, l2, path) + latency + dispatch)
  Bound bound = Bound::kCompute;
};

// The profile's figures turned into rates the model uses, precomputed once per profile.
struct DeviceModel {
  // A copy of the profile, shared: a DeviceModel never dangles, whatever the caller's profile does.
  std::shared_ptr<const GpuProfile> profile;
  int units = 0;
  int warp_size = 32;
  int max_warps_per_unit = 0;
  int max_blocks_per_unit = 0;
  int max_threads_per_block = 0;
  int64_t registers_per_unit = 0;
  int max_registers_per_thread = 0;
  double smem_per_unit_bytes = 0;
  double smem_per_block_bytes = 0;
  double smem_bytes_per_s = 0;  // shared-memory bandwidth, whole device
  double barrier_s = 0;         // one warp's time in a group barrier (compute.barrier_ns)
  double dram_bytes_per_s = 0;  // sustained: datasheet x efficiency
  double l2_bytes_per_s = 0;
  double l2_size_bytes = 0;
  double llc_size_bytes = 0;    // Infinity Cache / SLC, 0 if none
  double llc_bytes_per_s = 0;
  double dram_latency_s = 0;
  double l2_latency_s = 0;
  double floor_s = 0;
  double block_s = 0;           // per block started on a unit (launch.block_us)
  // Sustained clock under load / boost clock: cards at their power limit (70 W) do not hold their
  // boost clock; every compute rate (vector, matrix, shared memory) scales with it.
  double clock_scale = 1;
  double fp32_flops_per_s = 0;  // sustained vector fp32
  double vector_eff = 0;
  double gemm_vector_eff = 0;   // GEMM-like kernels without matrix units
  double matrix_eff = 0;
  int matrix_alignment = 8;
};

DeviceModel make_device(const GpuProfile& p);

// The clock a card holds under sustained load: the profile's compute.sustained_clock_mhz
// (datasheet or calibrated), else base + (boost - base) x min(1, TDP / 125 W) where the base clock
// is known — cards of 125 W and more hold their boost, a 70 W card sits about halfway between
// base and boost — else the boost clock (src/sim/README.md).
double sustained_clock_mhz(const GpuProfile& p);

// The compute rate (FLOP/s, sustained) a GEMM-like kernel of this dtype gets, and whether that is
// the matrix units; alignment of m, n, k to the profile's matrix alignment is required.
double gemm_rate(const KernelWork& w, const DeviceModel& d, bool* matrix_units, double* peak_tflops);

// Why a tile cannot run on the device ("tile needs 96 KiB shared memory, the SM has 64 KiB"), or
// empty when it can.
std::string tile_feasibility(const KernelWork& w, const TileConfig& t, const DeviceModel& d);

// One evaluation. Allocation-free (the search calls it millions of times).
KernelCost kernel_cost(const KernelWork& w, const TileConfig& t, const DeviceModel& d);

// The eager heuristic: the fastest feasible tile of a fixed menu per class (what a library's
// heuristic table does), documented in src/sim/README.md.
std::vector<TileConfig> tile_menu(const KernelWork& w, const DeviceModel& d);
TileConfig choose_tile(const KernelWork& w, const DeviceModel& d);

// Convenience constructor for tests and benchmarks: a plain [batch] x [m,k] x [k,n] GEMM.
KernelWork gemm_work(DType t, int64_t batch, int64_t m, int64_t n, int64_t k);

}  // namespace gpusim
