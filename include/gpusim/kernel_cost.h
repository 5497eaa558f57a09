// The kernel cost model: the time of one generated kernel on one GPU, at tile and wave
// granularity, with every component it is made of.
//
// A kernel is described by its work (KernelWork: class, GEMM dims, FLOPs by kind, compulsory
// bytes, rows of a reduction, ...) and its schedule (TileConfig), both plan types (tile.h). The
// model computes CTAs from the tile, CTAs per unit from registers, shared memory, threads and
// block limits, waves and the partial last wave, compute time at the matrix-unit or vector rate
// the dtype and alignment allow, DRAM and L2 traffic from tile reuse and L2 capacity in 32-byte
// sectors, achieved bandwidth from the bytes in flight (Little's law), a latency floor, and
// reports which bound limits the kernel.
// All figures come from the GpuProfile (via DeviceModel); nothing is typed in here except the
// structural constants documented in core/sim/README.md.
//
// Usage:
//   gpusim::DeviceModel dev = gpusim::make_device(profile);
//   gpusim::KernelWork w = gpusim::gemm_work("mm", DType::kFloat16, 1, 4096, 4096, 4096);
//   gpusim::TileConfig t = gpusim::choose_tile(w, dev);
//   gpusim::KernelCost c = gpusim::kernel_cost(w, t, dev);   // c.total_us, c.bound, ...
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/dtype.h"
#include "gpusim/gpu_profile.h"
#include "gpusim/op_catalog.h"
#include "gpusim/tile.h"

namespace gpusim {

enum class Bound { kCompute, kDram, kL2, kLatency };
GPUSIM_API std::string_view bound_name(Bound b);

struct GPUSIM_API KernelCost {
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
  bool tf32 = false;               // fp32 on the matrix units as TF32 (a target that allows it)
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
                                   // + reduce_us
  // A library's K split (split_k > 1 in a library tile: main_loop kAny) adds its slices' partial
  // sums in a second kernel, as cuBLAS (splitKreduce_kernel; nvjet's splitK pair) and
  // FlashAttention's split-KV combine do: that kernel's time, at least the profile's shortest
  // kernel, is in total_us. gpusim's generated kernels add them in the tile's last group
  // (generated_split_k): 0.
  double reduce_us = 0;
  Bound bound = Bound::kCompute;
};

// The profile's figures turned into rates the model uses, precomputed once per profile.
struct GPUSIM_API DeviceModel {
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
  double grouped_conv_eff = 1;  // grouped and depthwise convolutions' library kernels
  int matrix_alignment = 8;
  // gpusim's own kernels (Efficiency::own_*): a dependent load round trip, the epilogue's time per
  // output value of a thread, a block's fixed time.
  double own_round_trip_s = 0, own_value_s = 0, own_block_s = 0;
  double own_simt_eff = 0;    // their SIMT main loop's fraction of the vector peak
  double own_matrix_eff = 0;  // their matrix-unit main loop's fraction of the matrix peak
  // The matrix instructions issue on the vector ALUs (compute.matrix_units: alus): vector work in a
  // matrix main loop adds to its time instead of overlapping it.
  bool matrix_on_alus = false;
  // fp32 GEMMs and convolutions may run on the matrix units as TF32, where the profile has a TF32
  // rate: PyTorch's torch.backends.cuda.matmul.allow_tf32, off by default there and here (a
  // Target's option: TargetOptions::allow_tf32).
  bool allow_tf32 = false;
};

GPUSIM_API DeviceModel make_device(const GpuProfile& p);

// The clock a card holds under sustained load: the profile's compute.sustained_clock_mhz
// (datasheet or calibrated), else base + (boost - base) x min(1, TDP / 125 W) where the base clock
// is known — cards of 125 W and more hold their boost, a 70 W card sits about halfway between
// base and boost — else the boost clock (core/sim/README.md).
GPUSIM_API double sustained_clock_mhz(const GpuProfile& p);

// The compute rate (FLOP/s, sustained) a GEMM-like kernel of this dtype gets, and whether that is
// the matrix units; alignment of m, n, k to the profile's matrix alignment is required.
GPUSIM_API double gemm_rate(const KernelWork& w, const DeviceModel& d, bool* matrix_units, double* peak_tflops);
// The same for a main loop its builder has decided (TileConfig::main_loop): kVector on the vector
// units, kMatrix and kTf32 on the matrix units (the builder pads the operands, so no alignment is
// asked), kAny as above, with TF32 for fp32 where `d` allows it. `tf32`: whether the rate is TF32's.
GPUSIM_API double gemm_rate(const KernelWork& w, const DeviceModel& d, MainLoop loop, bool* matrix_units,
                            double* peak_tflops, bool* tf32);

// Why a tile cannot run on the device ("tile needs 96 KiB shared memory, the SM has 64 KiB"), or
// empty when it can.
GPUSIM_API std::string tile_feasibility(const KernelWork& w, const TileConfig& t, const DeviceModel& d);

// One evaluation. Allocation-free (the search calls it millions of times).
GPUSIM_API KernelCost kernel_cost(const KernelWork& w, const TileConfig& t, const DeviceModel& d);

// What a block holds and how many a unit keeps resident. The cost model assumes a kernel's
// registers a thread from its tile (accumulators, operand fragments, a base for addressing and the
// loop) and its shared memory from the tile's stages, or the generator's own figure where the tile
// carries one (TileConfig::smem_bytes: padding and staging included); `gpusim codegen report` checks that against
// what the compiler builds (registers and shared memory read from the binary).
struct GPUSIM_API Residency {
  int threads = 0;
  int registers = 0;         // per thread
  double smem_bytes = 0;     // per block
  int64_t ctas_per_unit = 0;  // 0: one block does not fit a unit
  const char* limiter = "";   // "threads", "registers", "shared memory", "blocks", or why it does not fit
};
// The registers and shared memory kernel_cost assumes for work `w` with tile `t`, and the blocks
// per unit that gives on `d`.
GPUSIM_API Residency assumed_residency(const KernelWork& w, const TileConfig& t, const DeviceModel& d);
// The blocks per unit of `threads` threads holding `registers` each and `smem_bytes` a block, on `d`.
GPUSIM_API Residency residency(const DeviceModel& d, int threads, int registers, double smem_bytes);

// The eager heuristic: the fastest feasible tile of a fixed menu per class (what a library's
// heuristic table does), documented in core/sim/README.md.
GPUSIM_API std::vector<TileConfig> tile_menu(const KernelWork& w, const DeviceModel& d);
GPUSIM_API TileConfig choose_tile(const KernelWork& w, const DeviceModel& d);

// Convenience constructor for tests and benchmarks: a plain [batch] x [m,k] x [k,n] GEMM.
GPUSIM_API KernelWork gemm_work(DType t, int64_t batch, int64_t m, int64_t n, int64_t k);

}  // namespace gpusim
