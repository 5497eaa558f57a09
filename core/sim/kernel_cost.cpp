// The kernel cost model. See include/gpusim/kernel_cost.h for the contract and core/sim/README.md
// for the equations and the structural constants.
#include "gpusim/kernel_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <cmath>
#include <limits>

namespace gpusim {
namespace {

// Structural constants (core/sim/README.md explains each).
constexpr double kSectorBytes = 32;            // DRAM/L2 transaction granularity
constexpr double kWarpsToSaturate = 4;         // one warp per scheduler (4 per SM / SIMDs per CU)
constexpr double kLoadsInFlightPerThread = 2;  // streaming kernels keep two loads outstanding
constexpr double kTranscendentalSlots = 4;     // special-function ops issue at 1/4 the FMA rate
constexpr double kL2ReuseFraction = 0.5;       // share of the L2 a kernel's re-read operands can use
constexpr int kRegisterBase = 20;              // addressing, loop and epilogue registers per thread
// Board power (TDP) from which a card holds its boost clock under sustained load; below it, the
// clock falls from boost toward the base clock (the vendor's guaranteed clock at TDP) in
// proportion (core/sim/README.md). 70 W cards (T4, L4, P4) sit about halfway.
constexpr double kFullBoostTdpW = 125.0;

int64_t ceil_div(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }
double sector_round(double bytes) { return std::ceil(bytes / kSectorBytes) * kSectorBytes; }
double elem_bytes(DType t) { return std::max(0.5, dtype_bits(t) / 8.0); }
// Bytes of one element of a GEMM's B as stored: its quantized width where it has one.
double b_elem_bytes(const KernelWork& w) { return w.b_bits > 0 ? w.b_bits / 8.0 : elem_bytes(w.dtype); }

struct Occupancy {
  int64_t ctas_per_unit = 0;
  const char* limiter = "";
  const char* infeasible = nullptr;
};

Occupancy occupancy(const DeviceModel& d, int threads, int regs_per_thread, double smem_bytes) {
  Occupancy o;
  if (threads > d.max_threads_per_block) {
    o.infeasible = "threads per block exceed the device limit";
    return o;
  }
  if (regs_per_thread > d.max_registers_per_thread) {
    o.infeasible = "registers per thread exceed the device limit";
    return o;
  }
  if (smem_bytes > d.smem_per_block_bytes) {
    o.infeasible = "shared memory per block exceeds the device limit";
    return o;
  }
  const int warps = std::max(1, static_cast<int>(ceil_div(threads, d.warp_size)));
  // Registers are allocated per warp in units of 8 per thread.
  const int64_t regs_per_warp = ((regs_per_thread + 7) / 8) * 8 * d.warp_size;
  int64_t by_threads = d.max_warps_per_unit / warps;
  int64_t by_regs = d.registers_per_unit / std::max<int64_t>(1, regs_per_warp * warps);
  int64_t by_smem = smem_bytes > 0 ? static_cast<int64_t>(d.smem_per_unit_bytes / smem_bytes)
                                   : std::numeric_limits<int64_t>::max();
  int64_t by_blocks = d.max_blocks_per_unit;
  o.ctas_per_unit = by_blocks;
  o.limiter = "blocks";
  auto take = [&](int64_t v, const char* why) {
    if (v < o.ctas_per_unit) {
      o.ctas_per_unit = v;
      o.limiter = why;
    }
  };
  take(by_threads, "threads");
  take(by_regs, "registers");
  take(by_smem, "shared memory");
  if (o.ctas_per_unit < 1) o.infeasible = "one block does not fit on a unit";
  return o;
}

// Sets the cost's residency figures; false (and the cost marked infeasible) when a block cannot run.
bool place(KernelCost& c, const DeviceModel& d, int threads, int regs_per_thread, double smem_bytes) {
  const Occupancy o = occupancy(d, threads, regs_per_thread, smem_bytes);
  if (o.infeasible) {
    c.feasible = false;
    c.infeasible_reason = o.infeasible;
    c.total_us = std::numeric_limits<double>::infinity();
    return false;
  }
  c.ctas_per_unit = o.ctas_per_unit;
  c.occupancy_limiter = o.limiter;
  return true;
}

// Sustained DRAM bandwidth with `inflight` bytes outstanding (Little's law), capped by the peak.
double achieved_bw(const DeviceModel& d, double inflight) {
  return std::min(d.dram_bytes_per_s, inflight / d.dram_latency_s);
}

// Rounds of blocks on the busiest unit: as many run at once as fit on it.
double block_rounds(const KernelCost& c, const DeviceModel& d) {
  const int64_t load = ceil_div(c.ctas, d.units);
  return static_cast<double>(ceil_div(load, std::max<int64_t>(1, c.ctas_per_unit)));
}

// `path_s`: one block's dependent chain (memory round trips, barriers) that no other block's work
// can hide; the busiest unit's rounds of blocks each take at least that long.
void finish(KernelCost& c, const DeviceModel& d, double compute_s, double dram_s, double l2_s, double path_s) {
  c.compute_us = compute_s * 1e6;
  c.dram_us = dram_s * 1e6;
  c.l2_us = l2_s * 1e6;
  c.path_us = block_rounds(c, d) * path_s * 1e6;
  c.latency_us = d.dram_latency_s * 1e6;
  c.floor_us = d.floor_s * 1e6;
  // Starting blocks: the busiest unit starts ceil(CTAs / units) of them, one after another.
  c.dispatch_us = static_cast<double>(ceil_div(c.ctas, d.units)) * d.block_s * 1e6;
  double body = c.compute_us;
  c.bound = Bound::kCompute;
  if (c.dram_us > body) {
    body = c.dram_us;
    c.bound = Bound::kDram;
  }
  if (c.l2_us > body) {
    body = c.l2_us;
    c.bound = Bound::kL2;
  }
  if (c.path_us > body) {
    body = c.path_us;
    c.bound = Bound::kLatency;
  }
  c.total_us = body + c.latency_us + c.dispatch_us;
  if (c.floor_us > c.total_us) {
    c.total_us = c.floor_us;
    c.bound = Bound::kLatency;
  }
}

// Whether a tile's K split ends in a second kernel: a library's (main_loop kAny) does; gpusim's
// generated kernels add the slices in the tile's last group (generated_split_k), in one launch.
bool split_reduce_kernel(const TileConfig& t) { return t.split_k > 1 && t.main_loop == MainLoop::kAny; }

// The fp32 partials a K split moves through L2 (`out_partial_bytes`: one slice's): written by every
// slice, and read back in the kernel where it adds them itself; a second kernel's read is its own.
double split_partials(const TileConfig& t, double out_partial_bytes) {
  if (t.split_k <= 1) return 0.0;
  return (split_reduce_kernel(t) ? 1.0 : 2.0) * t.split_k * out_partial_bytes;
}

// A library kernel's K split ends in a second kernel that adds the slices' fp32 partials
// (`partial_bytes`, read from L2 when they fit its reusable part, else DRAM) and writes the result
// (`out_bytes` of `out_elem_bytes` elements): a streaming kernel of one 4-element load per thread,
// at least the profile's shortest kernel. The main kernel then only writes its partials.
void add_split_reduce(KernelCost& c, const DeviceModel& d, double partial_bytes, double out_bytes, double out_elem_bytes) {
  if (!split_reduce_kernel(c.tile) || !c.feasible) return;
  const double reuse_capacity = kL2ReuseFraction * (d.l2_size_bytes + d.llc_size_bytes);
  const double read_s = partial_bytes / (partial_bytes <= reuse_capacity ? d.l2_bytes_per_s : d.dram_bytes_per_s);
  const double body_s = std::max(read_s, out_bytes / d.dram_bytes_per_s);
  const int64_t blocks = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(out_bytes / out_elem_bytes / (256.0 * 4.0))));
  const double dispatch_s = static_cast<double>(ceil_div(blocks, d.units)) * d.block_s;
  c.reduce_us = std::max(d.floor_s, body_s + d.dram_latency_s + dispatch_s) * 1e6;
  c.total_us += c.reduce_us;
}

void waves(KernelCost& c, const DeviceModel& d) {
  const int64_t per_wave = std::max<int64_t>(1, d.units * c.ctas_per_unit);
  c.waves = ceil_div(c.ctas, per_wave);
  const int64_t last = c.ctas - (c.waves - 1) * per_wave;
  c.last_wave_fraction = c.waves > 0 ? static_cast<double>(last) / static_cast<double>(per_wave) : 0;
}

int gemm_registers(const KernelWork& w, const TileConfig& t) {
  if (t.registers > 0) return t.registers;  // the compiler's figure
  const double eb = elem_bytes(w.dtype);
  // GEMV-shaped: a row's sum a thread, and a vector load of B and of A (registers of 4 bytes).
  if (gemv_shaped(t)) {
    const double vb = std::max(1, t.vector_width);
    return kRegisterBase + t.block_m + static_cast<int>(std::ceil(vb * eb / 4.0)) +
           static_cast<int>(std::ceil(vb * b_elem_bytes(w) / 4.0));
  }
  const double acc = static_cast<double>(t.block_m) * t.block_n / t.threads;
  const double frag = (t.block_m + t.block_n) * t.block_k * eb / (4.0 * t.threads);
  return kRegisterBase + static_cast<int>(std::ceil(acc + frag));
}

int attention_registers(const KernelWork& w, const TileConfig& t) {
  if (t.registers > 0) return t.registers;
  const double dv = static_cast<double>(w.v_head_dim);
  return kRegisterBase + static_cast<int>(std::ceil((t.block_m * dv + t.block_m * t.block_n) / t.threads));
}

double attention_smem(const KernelWork& w, const TileConfig& t) {
  if (t.smem_bytes > 0) return t.smem_bytes;  // the generator's own layout
  const double dk = static_cast<double>(w.head_dim), dv = static_cast<double>(w.v_head_dim);
  return t.stages * (t.block_m * dk + t.block_n * (dk + dv)) * elem_bytes(w.dtype);
}

int streaming_registers(const TileConfig& t) { return t.registers > 0 ? t.registers : kRegisterBase; }

double streaming_smem(const KernelWork& w, const TileConfig& t) {
  if (t.smem_bytes > 0) return t.smem_bytes;
  const bool rowwise = (w.cls == OpClass::kReduction || w.cls == OpClass::kNormalization) && w.rows > 0;
  return rowwise ? t.threads * 4.0 : 0.0;
}

double gemm_smem(const KernelWork& w, const TileConfig& t) {
  if (t.smem_bytes > 0) return t.smem_bytes;  // the generator's own layout (padding, staging)
  if (gemv_shaped(t)) return static_cast<double>(t.threads) * t.block_m * 4.0;  // the threads' partial sums
  return t.stages * (static_cast<double>(t.block_m) * t.block_k + static_cast<double>(t.block_k) * t.block_n) *
         elem_bytes(w.dtype);
}

// The busiest unit of a GEMM-like kernel: its CTAs, and the share of its schedulers their warps keep busy.
struct BusiestUnit {
  int64_t load = 0;
  double util = 0;
};
BusiestUnit busiest_unit(const KernelCost& c, const DeviceModel& d, int warps) {
  BusiestUnit u;
  u.load = ceil_div(c.ctas, d.units);
  const double concurrent = static_cast<double>(std::min(c.ctas_per_unit, u.load));
  u.util = std::min(1.0, concurrent * warps / kWarpsToSaturate);
  return u;
}

// The fused epilogue's time on the busiest unit: it runs per output element on the vector units
// after the main loop.
double epilogue_s(const KernelWork& w, const KernelCost& c, const DeviceModel& d, const BusiestUnit& u) {
  const double instr = static_cast<double>(w.epilogue_flops.fma) + 2.0 * kTranscendentalSlots * w.epilogue_flops.transcendental +
                       2.0 * w.epilogue_flops.compare;
  const double share = static_cast<double>(u.load) / static_cast<double>(std::max<int64_t>(c.ctas, 1));
  return instr * share / (d.fp32_flops_per_s / d.units * u.util);
}

// A GEMV-shaped tile (gemv_shaped): block_k threads a column walk their share of K with vector
// loads and no barrier, so the weight streams at what the resident threads keep in flight; one
// barrier and a sum over the lanes in shared memory close each block.
KernelCost gemv_cost(const KernelWork& w, const TileConfig& t, const DeviceModel& d) {
  KernelCost c;
  c.tile = t;
  const double eb = elem_bytes(w.dtype);
  const double beb = b_elem_bytes(w);
  if (!place(c, d, t.threads, gemm_registers(w, t), gemm_smem(w, t))) return c;
  const int split = std::max(1, t.split_k);
  const int lanes = std::max(1, t.block_k);
  const int64_t grid_m = ceil_div(w.m, t.block_m), grid_n = ceil_div(w.n, t.block_n);
  c.ctas = w.batch * grid_m * grid_n * split;
  const int64_t k_split = ceil_div(w.k, split);
  const double cta_flops = 2.0 * t.block_m * t.block_n * static_cast<double>(k_split);
  c.executed_flops = cta_flops * static_cast<double>(c.ctas);
  waves(c, d);
  const int warps = static_cast<int>(ceil_div(t.threads, d.warp_size));
  c.occupancy = std::min(1.0, static_cast<double>(c.ctas_per_unit * warps) / d.max_warps_per_unit);
  double peak = 0;
  const double grouped = w.cls == OpClass::kConv && w.batch > 1 ? d.grouped_conv_eff : 1.0;
  const double rate = gemm_rate(w, d, MainLoop::kVector, &c.matrix_units, &peak, &c.tf32) * grouped;
  c.peak_tflops = peak;
  const BusiestUnit u = busiest_unit(c, d, warps);
  const int64_t load = u.load;
  const double util = u.util;
  double compute_s = static_cast<double>(load) * cta_flops / (rate / d.units * util);
  // Unpacking quantized weights: every element of B a block reads, once per block (its rows share it),
  // on the vector units beside the multiply-adds (an instruction is an FMA's issue slot: 2 FLOPs).
  if (w.dequant_ops > 0) {
    const double cta_ops = w.dequant_ops * t.block_n * static_cast<double>(k_split);
    compute_s += static_cast<double>(load) * 2.0 * cta_ops / (d.fp32_flops_per_s / d.units * util);
  }
  // The closing sum: every thread's block_m partials through shared memory, read back by one
  // thread an output; one barrier (three more where the last slice of a split adds the others in
  // this kernel: generated_split_k).
  if (d.smem_bytes_per_s > 0) {
    const double cta_smem = 2.0 * static_cast<double>(t.threads) * t.block_m * 4.0;
    compute_s += static_cast<double>(load) * cta_smem / (d.smem_bytes_per_s / d.units * util);
  }
  compute_s += epilogue_s(w, c, d, u);
  const bool fixup = split > 1 && !split_reduce_kernel(t);
  compute_s += static_cast<double>(load) * (fixup ? 4 : 1) * warps * d.barrier_s;

  // Traffic: every block reads its rows of A over its slice of K (from L2 after the first), and
  // its columns of B once; B's rows are read whole along k or n, sector-rounded per row of K.
  double sector_factor = 1.0;
  if (std::fmod(static_cast<double>(w.k) * beb, kSectorBytes) != 0) {
    sector_factor = sector_round(static_cast<double>(w.k) * beb) / (static_cast<double>(w.k) * beb);
  }
  const double batch = static_cast<double>(w.batch);
  const double a_bytes = w.a_bytes > 0 ? static_cast<double>(w.a_bytes) : batch * w.m * w.k * eb;
  const double b_bytes = (w.b_shared ? 1.0 : batch) * w.k * w.n * beb;
  const double c_bytes = batch * w.m * w.n * eb;
  const double partials = split_partials(t, batch * w.m * w.n * 4.0);
  const double epilogue = sector_round(static_cast<double>(w.epilogue_bytes));
  c.l2_bytes = std::max(a_bytes, batch * w.m * w.k * eb) * grid_n + batch * w.k * w.n * beb * grid_m * sector_factor +
               c_bytes + partials + epilogue;
  const double reuse_capacity = kL2ReuseFraction * (d.l2_size_bytes + d.llc_size_bytes);
  c.dram_bytes = a_bytes + b_bytes * sector_factor + c_bytes + epilogue + (partials > reuse_capacity ? partials : 0.0);
  c.dram_bytes = std::max(c_bytes, c.dram_bytes - std::min(a_bytes + b_bytes, static_cast<double>(w.l2_resident_bytes)));
  // Little's law over the resident threads: each keeps kLoadsInFlightPerThread loads of a vector
  // outstanding.
  const double resident_threads =
      static_cast<double>(std::min<int64_t>(c.ctas, d.units * c.ctas_per_unit)) * warps * d.warp_size;
  const double bw = achieved_bw(d, resident_threads * std::max(1, t.vector_width) * beb * kLoadsInFlightPerThread) * grouped;
  c.achieved_dram_gbps = bw / 1e9;
  // A block's chain: its threads' loads, kLoadsInFlightPerThread at a time, each a DRAM round
  // trip; then the closing sum and the stores.
  const double loads_per_thread =
      std::ceil(static_cast<double>(k_split) / (static_cast<double>(lanes) * std::max(1, t.vector_width)));
  const double path = d.dram_latency_s * std::max(1.0, loads_per_thread / kLoadsInFlightPerThread) + d.l2_latency_s;
  finish(c, d, compute_s, c.dram_bytes / bw, c.l2_bytes / d.l2_bytes_per_s, path);
  add_split_reduce(c, d, split * batch * w.m * w.n * 4.0, c_bytes, eb);
  return c;
}

// One block of gpusim's own GEMM-like kernels (t.chain known: codegen's design, or its compiled
// code), as its code runs: a fixed time; per k-step its dependent load rounds, each a round trip of
// a loaded GPU, and the step's products (overlapping the loads where the next step's are issued
// ahead of them) and barriers; after the loop the epilogue's round trips (a split's arrival and
// partial sums) and barriers, and its time per output value a thread handles.
double own_chain_s(const TileConfig& t, const DeviceModel& d, double k_steps, double step_products_s, int warps) {
  const KernelChain& c = t.chain;
  const double loads_s = c.load_rounds * d.own_round_trip_s;
  const double barriers_s = (t.stages >= 2 ? 1 : 2) * warps * d.barrier_s;
  const double step_s = (c.loads_ahead ? std::max(loads_s, step_products_s) : loads_s + step_products_s) + barriers_s;
  const double values = static_cast<double>(t.block_m) * t.block_n / std::max(1, t.threads);
  return d.own_block_s + k_steps * step_s + c.epilogue_rounds * d.own_round_trip_s +
         c.epilogue_barriers * warps * d.barrier_s + values * d.own_value_s;
}

KernelCost gemm_cost(const KernelWork& w, const TileConfig& t, const DeviceModel& d) {
  if (gemv_shaped(t) && t.main_loop != MainLoop::kMatrix && t.main_loop != MainLoop::kTf32) return gemv_cost(w, t, d);
  KernelCost c;
  c.tile = t;
  const double eb = elem_bytes(w.dtype);
  const int threads = t.threads;
  if (!place(c, d, threads, gemm_registers(w, t), gemm_smem(w, t))) return c;
  const int split = std::max(1, t.split_k);
  const int64_t grid_m = ceil_div(w.m, t.block_m), grid_n = ceil_div(w.n, t.block_n);
  c.ctas = w.batch * grid_m * grid_n * split;
  const int64_t k_split = ceil_div(ceil_div(w.k, split), t.block_k) * t.block_k;
  const double cta_flops = 2.0 * t.block_m * t.block_n * static_cast<double>(k_split);
  c.executed_flops = cta_flops * static_cast<double>(c.ctas);
  waves(c, d);
  const int warps = static_cast<int>(ceil_div(threads, d.warp_size));
  c.occupancy = std::min(1.0, static_cast<double>(c.ctas_per_unit * warps) / d.max_warps_per_unit);

  double peak = 0;
  // A grouped convolution (one GEMM per group) runs at the grouped kernels' share of the rates.
  const double grouped = w.cls == OpClass::kConv && w.batch > 1 ? d.grouped_conv_eff : 1.0;
  double rate = gemm_rate(w, d, t.main_loop, &c.matrix_units, &peak, &c.tf32) * grouped;
  // gpusim's own main loops reach their own fractions of the vector and matrix peaks, not a
  // library's: the SIMT loop's, and the wmma loop's (its fragments loaded from shared memory and
  // multiplied by one warp in turn, one or two blocks a unit, where a library's pipelines keep the
  // matrix units fed).
  if (t.chain.known() && !c.matrix_units && d.gemm_vector_eff > 0 && d.own_simt_eff > 0) {
    rate *= d.own_simt_eff / d.gemm_vector_eff;
  }
  if (t.chain.known() && c.matrix_units && d.matrix_eff > 0 && d.own_matrix_eff > 0) {
    rate *= d.own_matrix_eff / d.matrix_eff;
  }
  c.peak_tflops = peak;
  const BusiestUnit u = busiest_unit(c, d, warps);
  const int64_t load = u.load;
  const double util = u.util;
  double compute_s = static_cast<double>(load) * cta_flops / (rate / d.units * util);
  double cta_smem_s = 0;  // a block's shared-memory traffic alone on its unit (SIMT main loops)
  if (!c.matrix_units && d.smem_bytes_per_s > 0) {
    // SIMT main loop: per k, every thread reads its tm x tn micro-tile's tm + tn operands from
    // shared memory (fp32) and the tile's bm + bn values are stored there; the shared-memory pipe
    // and the FMA pipe run side by side.
    const int outputs = std::max(1, t.block_m * t.block_n / std::max(1, threads));
    int tm = 1;
    while (tm * 2 * tm * 2 <= outputs) tm *= 2;
    const int tn = std::max(1, outputs / tm);
    // fp32 operands (narrow floats are widened for the FMA); int8 as packed 32-bit words, four
    // values a dp4a.
    const double operand_bytes = precision_of(w.dtype) == Precision::kInt8 ? 1.0 : 4.0;
    const double cta_smem =
        static_cast<double>(k_split) * (static_cast<double>(threads) * (tm + tn) + t.block_m + t.block_n) * operand_bytes;
    compute_s = std::max(compute_s, static_cast<double>(load) * cta_smem / (d.smem_bytes_per_s / d.units * util));
    cta_smem_s = cta_smem / (d.smem_bytes_per_s / d.units * std::min(1.0, warps / kWarpsToSaturate));
  }
  // Unpacking quantized weights: each block unpacks its B tile once per k-step on the vector units.
  // A SIMT loop issues them between its multiply-adds; matrix units of their own overlap them with
  // the MMAs, but matrix instructions that issue on the vector ALUs (Apple's simdgroup matrices,
  // RDNA3's WMMA) share their slots with the unpacking: it adds.
  if (w.dequant_ops > 0) {
    const double cta_ops = w.dequant_ops * t.block_n * static_cast<double>(k_split);
    const double dq = static_cast<double>(load) * 2.0 * cta_ops / (d.fp32_flops_per_s / d.units * util);
    compute_s = c.matrix_units && !d.matrix_on_alus ? std::max(compute_s, dq) : compute_s + dq;
  }
  // Per-block rescale of integer products: each output, each block of K, converts its int32 sum
  // (kTranscendentalSlots issue slots: conversions run at the special-function rate) and adds it
  // scaled (two FMAs); it waits on that block's product, so it adds to the main loop's time.
  if (w.k_block > 0) {
    const double blocks = std::ceil(static_cast<double>(k_split) / w.k_block);
    const double slots = static_cast<double>(t.block_m) * t.block_n * blocks * (kTranscendentalSlots + 2.0);
    compute_s += static_cast<double>(load) * 2.0 * slots / (d.fp32_flops_per_s / d.units * util);
  }
  compute_s += epilogue_s(w, c, d, u);
  // Group barriers: two per k-step (one when double-buffered), each paid by every warp.
  const double k_steps = static_cast<double>(ceil_div(k_split, std::max(1, t.block_k)));
  compute_s += static_cast<double>(load) * k_steps * (t.stages >= 2 ? 1 : 2) * warps * d.barrier_s;

  // Traffic. Each CTA streams an m-tile of A and an n-tile of B over k; sector-rounded per row.
  const double row_bytes = t.block_k * eb;
  double sector_factor = sector_round(row_bytes) / row_bytes;
  if (std::fmod(static_cast<double>(w.k) * eb, kSectorBytes) != 0) sector_factor *= 1.0 + 0.5 * kSectorBytes / row_bytes;
  const double batch = static_cast<double>(w.batch);
  const double beb = b_elem_bytes(w);
  const double a_bytes = w.a_bytes > 0 ? static_cast<double>(w.a_bytes) : batch * w.m * w.k * eb;
  const double b_bytes = (w.b_shared ? 1.0 : batch) * w.k * w.n * beb;
  const double c_bytes = batch * w.m * w.n * eb;
  const double a_loads = std::max(a_bytes, batch * w.m * w.k * eb) * grid_n * sector_factor;
  const double b_loads = batch * w.k * w.n * beb * grid_m * sector_factor;
  const double partials = split_partials(t, batch * w.m * w.n * 4.0);
  const double epilogue = sector_round(static_cast<double>(w.epilogue_bytes));
  c.l2_bytes = a_loads + b_loads + c_bytes + partials + epilogue;
  // DRAM. Batched GEMMs walk the batch slowest: the CTAs in flight work on one batch slice, so a
  // slice whose operands fit in the reusable L2 is fetched once even when the whole batched
  // operand does not. A slice that does not fit is fetched wave by wave: the CTAs in flight (tiles
  // in row-major order, n fastest) share through L2 the row tiles of A and column tiles of B they
  // touch, and each wave fetches those again.
  const double reuse_capacity = kL2ReuseFraction * (d.l2_size_bytes + d.llc_size_bytes);
  const double a_slice = a_bytes / batch, b_slice = w.b_shared ? b_bytes : b_bytes / batch;
  double a_reads = 1.0, b_reads = 1.0;
  if (a_slice + b_slice > reuse_capacity) {
    const double gm = static_cast<double>(grid_m), gn = static_cast<double>(grid_n);
    const double slice_tiles = gm * gn * split;
    const double in_flight = std::min(slice_tiles, static_cast<double>(std::max<int64_t>(1, d.units * c.ctas_per_unit)));
    const double waves_per_slice = slice_tiles / in_flight;
    const double rows_touched = std::min(gm, std::ceil(in_flight / (gn * split)));
    const double cols_touched = std::min(gn, in_flight / split);
    a_reads = std::clamp(waves_per_slice * rows_touched / gm, 1.0, gn);
    b_reads = std::clamp(waves_per_slice * cols_touched / gn, 1.0, gm * (w.b_shared ? batch : 1.0));
  }
  c.dram_bytes = (a_bytes * a_reads + b_bytes * b_reads) * sector_factor + c_bytes + epilogue +
                 (partials > reuse_capacity ? partials : 0.0);
  // Operands already in L2 are not fetched from DRAM the first time.
  c.dram_bytes = std::max(c_bytes, c.dram_bytes - std::min(a_bytes + b_bytes, static_cast<double>(w.l2_resident_bytes)));
  // Multi-stage pipelines keep (stages - 1) tiles of A and B in flight per CTA.
  const double resident = static_cast<double>(std::min<int64_t>(c.ctas, d.units * c.ctas_per_unit));
  const double inflight = resident * std::max(1, t.stages - 1) * (t.block_m * eb + t.block_n * beb) * t.block_k;
  const double bw = achieved_bw(d, inflight) * grouped;
  c.achieved_dram_gbps = bw / 1e9;
  // A block's chain: its first tiles from DRAM, then each k-step waits for the next tile from L2
  // unless (stages - 1) loads already overlap it, then its stores. gpusim's own kernels: their
  // chain as their code runs it (own_chain_s), their products at the unit's rate for one block.
  double path = d.dram_latency_s + k_steps * d.l2_latency_s / std::max(1, t.stages - 1) + d.l2_latency_s;
  if (t.chain.known() && k_steps > 0) {
    // A k-step's products: its FLOPs at the unit's rate for one block, or (SIMT) its operands
    // through shared memory, whichever is longer.
    const double one_block = std::min(1.0, warps / kWarpsToSaturate);
    const double products_s = std::max(cta_flops / (rate / d.units * one_block), cta_smem_s);
    path = own_chain_s(t, d, k_steps, products_s / k_steps, warps);
  }
  finish(c, d, compute_s, c.dram_bytes / bw, c.l2_bytes / d.l2_bytes_per_s, path);
  add_split_reduce(c, d, split * batch * w.m * w.n * 4.0, c_bytes, eb);
  return c;
}

KernelCost attention_cost(const KernelWork& w, const TileConfig& t, const DeviceModel& d) {
  KernelCost c;
  c.tile = t;
  const double eb = elem_bytes(w.dtype);
  const double dk = static_cast<double>(w.head_dim), dv = static_cast<double>(w.v_head_dim);
  if (!place(c, d, t.threads, attention_registers(w, t), attention_smem(w, t))) return c;
  // split_k splits the keys (flash-decoding): each CTA takes kv_per of a head's keys and writes its
  // partial output with its row max and sum; the partials are combined after (read back once).
  const int split = std::max(1, t.split_k);
  const int64_t kv_per = ceil_div(w.kv_seq, split);
  c.ctas = w.batch * ceil_div(w.m, t.block_m) * split;
  waves(c, d);
  const int warps = static_cast<int>(ceil_div(t.threads, d.warp_size));
  c.occupancy = std::min(1.0, static_cast<double>(c.ctas_per_unit * warps) / d.max_warps_per_unit);
  KernelWork as_gemm = w;
  as_gemm.n = w.kv_seq;
  as_gemm.k = w.head_dim;
  double peak = 0;
  const double rate = gemm_rate(as_gemm, d, t.main_loop, &c.matrix_units, &peak, &c.tf32);
  c.peak_tflops = peak;
  const double kv = static_cast<double>(ceil_div(kv_per, t.block_n) * t.block_n);
  const double cta_mma = 2.0 * t.block_m * kv * (dk + dv);
  const double cta_scores = static_cast<double>(t.block_m) * kv;
  c.executed_flops = cta_mma * static_cast<double>(c.ctas);
  const int64_t load = ceil_div(c.ctas, d.units);
  const double util = std::min(1.0, static_cast<double>(std::min(c.ctas_per_unit, load)) * warps / kWarpsToSaturate);
  const double unit_vec = d.fp32_flops_per_s / d.units;
  // Softmax (3 fma, 1 exp, 1 max per score) competes with the MMAs for issue slots.
  const double softmax_s = cta_scores * (3.0 + 2.0 * kTranscendentalSlots + 2.0) / unit_vec;
  const double barriers = 2.0 * static_cast<double>(ceil_div(kv_per, std::max(1, t.block_n)));
  const double compute_s = static_cast<double>(load) * ((cta_mma / (rate / d.units) + softmax_s) / util +
                                                        barriers * warps * d.barrier_s);
  const double batch = static_cast<double>(w.batch);
  const double q_bytes = batch * w.m * dk * eb, o_bytes = batch * w.m * dv * eb;
  const double kv_bytes = batch * w.kv_seq * (dk + dv) * eb;
  // The split's partial outputs (fp32, with a max and a sum a row): written, and read back here
  // (generated) or by the combine kernel (a library's).
  const double partials = split_partials(t, batch * w.m * (dv + 2.0) * 4.0);
  c.l2_bytes = q_bytes + o_bytes + static_cast<double>(c.ctas) * static_cast<double>(kv_per) * (dk + dv) * eb + partials;
  const double resident = static_cast<double>(std::min<int64_t>(c.ctas, d.units * c.ctas_per_unit));
  const double per_head_kv = static_cast<double>(kv_per) * (dk + dv) * eb;
  const double miss = resident * per_head_kv <= kL2ReuseFraction * d.l2_size_bytes ? 0.0 : 0.5;
  c.dram_bytes = q_bytes + o_bytes + kv_bytes + partials +
                 (c.l2_bytes - q_bytes - o_bytes - kv_bytes - partials) * miss;
  const double bw = achieved_bw(d, resident * t.block_n * (dk + dv) * eb * std::max(1, t.stages - 1));
  c.achieved_dram_gbps = bw / 1e9;
  finish(c, d, compute_s, c.dram_bytes / bw, c.l2_bytes / d.l2_bytes_per_s,
         d.dram_latency_s + 0.5 * barriers * d.l2_latency_s / std::max(1, t.stages - 1) +
             (split > 1 && !split_reduce_kernel(t) ? d.dram_latency_s : 0.0));  // a KV tile per step; an in-kernel combine's round trip
  add_split_reduce(c, d, split * batch * w.m * (dv + 2.0) * 4.0, o_bytes, eb);
  return c;
}

// Elementwise chains, reductions, normalizations and data movement: streaming kernels.
KernelCost streaming_cost(const KernelWork& w, const TileConfig& t, const DeviceModel& d) {
  KernelCost c;
  c.tile = t;
  const double eb = elem_bytes(w.dtype);
  const bool rowwise = (w.cls == OpClass::kReduction || w.cls == OpClass::kNormalization) && w.rows > 0;
  if (!place(c, d, t.threads, streaming_registers(t), streaming_smem(w, t))) return c;
  const int64_t per_cta = static_cast<int64_t>(t.threads) * t.vector_width * t.items_per_thread;
  int64_t rows_per_cta = 1;
  if (rowwise) {
    // Rows packed into a CTA, a power of two up to one per thread, each reduced by its own
    // segment of threads (as codegen's row kernels do).
    // Rows of 16 elements or fewer go a row a thread.
    const int64_t fit = w.row_elements <= 16 ? std::max(1, t.threads)
                                              : std::clamp<int64_t>(per_cta / std::max<int64_t>(1, w.row_elements), 1,
                                                                    std::max(1, t.threads));
    while (rows_per_cta * 2 <= fit) rows_per_cta *= 2;
    if (t.rows_per_block > 0) rows_per_cta = t.rows_per_block;  // a library kernel's own launch
    c.ctas = ceil_div(w.rows, rows_per_cta);
  } else {
    c.ctas = std::max<int64_t>(1, ceil_div(std::max<int64_t>(w.elements, 1), per_cta));
  }
  waves(c, d);
  const int warps = static_cast<int>(ceil_div(t.threads, d.warp_size));
  c.occupancy = std::min(1.0, static_cast<double>(c.ctas_per_unit * warps) / d.max_warps_per_unit);

  // Traffic: compulsory bytes in sectors; strided copies waste part of each sector.
  double read = sector_round(static_cast<double>(w.bytes_read));
  double write = sector_round(static_cast<double>(w.bytes_written));
  if (w.contiguous_run > 0) {
    const double run = static_cast<double>(w.contiguous_run) * eb;
    write *= sector_round(run) / run;
  }
  double second_pass_l2 = 0, second_pass_dram = 0;
  if (rowwise && w.passes > 1) {
    // Each pass after the first reads the row again: from L2 while the rows resident on the
    // device fit in the reusable part of it, else from DRAM.
    const double row_bytes = static_cast<double>(w.row_elements) * eb;
    const double resident_rows = static_cast<double>(std::min<int64_t>(w.rows, d.units * c.ctas_per_unit * rows_per_cta));
    (resident_rows * row_bytes <= kL2ReuseFraction * d.l2_size_bytes ? second_pass_l2 : second_pass_dram) =
        static_cast<double>(w.bytes_read) * (w.passes - 1);
  }
  // Inputs already in L2 (just written, or re-read back to back) come from L2.
  const double resident_in = std::min(read, sector_round(static_cast<double>(w.l2_resident_bytes)));
  c.dram_bytes = read - resident_in + write + second_pass_dram;
  c.l2_bytes = read + write + second_pass_l2 + second_pass_dram;
  c.executed_flops = static_cast<double>(w.flops.total());
  // Compute: FMA-class FLOPs at the vector rate, special functions and compares by issue slots.
  const double instr = static_cast<double>(w.flops.fma) + 2.0 * kTranscendentalSlots * w.flops.transcendental +
                       2.0 * w.flops.compare;
  const int64_t load = ceil_div(c.ctas, d.units);
  const double util = std::min(1.0, static_cast<double>(std::min(c.ctas_per_unit, load)) * warps / kWarpsToSaturate);
  const double busiest_share = static_cast<double>(load) / static_cast<double>(std::max<int64_t>(c.ctas, 1));
  double compute_s = instr * busiest_share / (d.fp32_flops_per_s / d.units * util);
  // A block's chain: its loads' round trip from DRAM, then its stores.
  double path_s = d.dram_latency_s + d.l2_latency_s;
  if (rowwise) {
    // A tree reduction in shared memory per pass over each row's segment of threads:
    // log2(segment) + 2 barriers, paid by every warp.
    const double segment = static_cast<double>(t.threads) / static_cast<double>(rows_per_cta);
    const double per_pass = segment >= 2 ? std::ceil(std::log2(segment)) + 2 : 0;  // a row a thread: no tree
    const int passes = std::max(1, w.passes);
    compute_s += static_cast<double>(load) * passes * per_pass * warps * d.barrier_s;
    // Each pass after the first reads the row again (from L2 at best) before it can go on.
    path_s += (passes - 1) * d.l2_latency_s;
  }
  c.peak_tflops = d.fp32_flops_per_s / d.vector_eff / 1e12;
  const double resident_threads =
      static_cast<double>(std::min<int64_t>(c.ctas, d.units * c.ctas_per_unit)) * warps * d.warp_size;
  // A depthwise (or narrow grouped) convolution priced as a stream runs at the grouped kernels' share.
  const double grouped = w.cls == OpClass::kConv && w.batch > 1 ? d.grouped_conv_eff : 1.0;
  compute_s /= grouped;
  const double bw = achieved_bw(d, resident_threads * t.vector_width * eb * kLoadsInFlightPerThread) * grouped;
  c.achieved_dram_gbps = bw / 1e9;
  finish(c, d, compute_s, c.dram_bytes / bw, c.l2_bytes / d.l2_bytes_per_s, path_s);
  return c;
}

}  // namespace

std::string_view bound_name(Bound b) {
  switch (b) {
    case Bound::kCompute: return "compute";
    case Bound::kDram: return "dram";
    case Bound::kL2: return "l2";
    case Bound::kLatency: return "latency";
  }
  return "compute";
}

DeviceModel make_device(const GpuProfile& p) {
  DeviceModel d;
  d.profile = std::make_shared<const GpuProfile>(p);
  d.units = p.compute.units;
  d.warp_size = p.compute.warp_size;
  d.max_warps_per_unit = std::max(1, p.compute.max_threads_per_unit / p.compute.warp_size);
  d.max_blocks_per_unit = p.compute.max_blocks_per_unit;
  d.max_threads_per_block = p.compute.max_threads_per_block;
  d.registers_per_unit = p.compute.registers_per_unit;
  d.max_registers_per_thread = p.compute.max_registers_per_thread;
  d.smem_per_unit_bytes = p.compute.shared_memory_per_unit_kb * 1024;
  d.smem_per_block_bytes = p.compute.shared_memory_per_block_kb * 1024;
  d.clock_scale = p.compute.boost_clock_mhz > 0 ? sustained_clock_mhz(p) / p.compute.boost_clock_mhz : 1.0;
  d.smem_bytes_per_s = p.compute.shared_memory_bandwidth_gbps * 1e9 * d.clock_scale;
  d.barrier_s = p.compute.barrier_ns * 1e-9;
  d.dram_bytes_per_s = p.memory.dram.bandwidth_gbps * 1e9 * p.efficiency.dram_bandwidth;
  d.l2_bytes_per_s = p.memory.l2.bandwidth_gbps * 1e9 * p.efficiency.l2_bandwidth;
  d.l2_size_bytes = p.memory.l2.size_mb * 1e6;
  if (p.memory.infinity_cache.present) {
    d.llc_size_bytes = p.memory.infinity_cache.size_mb * 1e6;
    d.llc_bytes_per_s = p.memory.infinity_cache.bandwidth_gbps * 1e9 * p.efficiency.l2_bandwidth;
  }
  d.dram_latency_s = p.memory.dram.latency_ns * 1e-9;
  // An L2 hit; without a figure, half the DRAM round trip.
  d.l2_latency_s = (p.memory.l2.latency_ns > 0 ? p.memory.l2.latency_ns : 0.5 * p.memory.dram.latency_ns) * 1e-9;
  d.floor_s = p.launch.latency_floor_us * 1e-6;
  d.block_s = p.launch.block_us * 1e-6;
  d.vector_eff = p.efficiency.vector_flops;
  d.gemm_vector_eff = p.efficiency.gemm_vector_flops > 0 ? p.efficiency.gemm_vector_flops : p.efficiency.vector_flops;
  d.matrix_eff = p.efficiency.matrix_flops;
  d.grouped_conv_eff = p.efficiency.grouped_conv;
  d.fp32_flops_per_s = p.vector_tflops(Precision::kFp32) * 1e12 * d.vector_eff * d.clock_scale;
  d.matrix_alignment = p.compute.matrix_alignment_elements;
  d.own_round_trip_s = p.efficiency.own_round_trip * d.l2_latency_s;
  d.own_value_s = p.efficiency.own_value_ns * 1e-9 / d.clock_scale;
  d.own_block_s = p.efficiency.own_block_us * 1e-6;
  d.own_simt_eff = p.efficiency.own_simt_flops;
  d.own_matrix_eff = p.efficiency.own_matrix_flops;
  d.matrix_on_alus = p.compute.matrix_on_alus;
  return d;
}

double sustained_clock_mhz(const GpuProfile& p) {
  const double boost = p.compute.boost_clock_mhz;
  if (p.compute.sustained_clock_mhz > 0) return std::min(boost, p.compute.sustained_clock_mhz);
  const double base = p.compute.base_clock_mhz;
  if (base <= 0 || base >= boost || p.power.tdp_w <= 0) return boost;
  return base + (boost - base) * std::min(1.0, p.power.tdp_w / kFullBoostTdpW);
}

double gemm_rate(const KernelWork& w, const DeviceModel& d, bool* matrix_units, double* peak_tflops) {
  bool tf32 = false;
  return gemm_rate(w, d, MainLoop::kAny, matrix_units, peak_tflops, &tf32);
}

double gemm_rate(const KernelWork& w, const DeviceModel& d, MainLoop loop, bool* matrix_units, double* peak_tflops,
                 bool* tf32) {
  const GpuProfile& p = *d.profile;
  const Precision prec = precision_of(w.dtype);
  Precision acc = Precision::kFp32;
  if (w.accumulate_half && (prec == Precision::kFp16 || prec == Precision::kBf16)) acc = prec;
  if (prec == Precision::kInt8 || prec == Precision::kInt4) acc = Precision::kInt32;
  if (prec == Precision::kFp64) acc = Precision::kFp64;
  *tf32 = false;
  // fp32 runs on the vector units where matrix units need TF32, an opt-in mode on NVIDIA
  // (torch.backends.cuda.matmul.allow_tf32: DeviceModel::allow_tf32); AMD CDNA has fp32 matrix
  // units (fp32 MFMA) that rocBLAS uses by default: a profile with an fp32-input matrix peak gets
  // them.
  const bool fp32_matrix = prec == Precision::kFp32 && p.matrix_tflops(Precision::kFp32, Precision::kFp32).has_value();
  const bool tf32_allowed = prec == Precision::kFp32 && d.allow_tf32 && p.matrix_tflops(Precision::kTf32, acc).has_value();
  const int64_t a = d.matrix_alignment;
  const bool aligned = w.k % a == 0 && w.n % a == 0;
  std::optional<Precision> on_matrix;  // the input precision the matrix units run
  if (loop == MainLoop::kTf32) {
    if (prec == Precision::kFp32 && p.matrix_tflops(Precision::kTf32, acc)) on_matrix = Precision::kTf32;
  } else if (loop == MainLoop::kMatrix) {
    if (prec != Precision::kInt32 && p.matrix_tflops(prec, acc)) on_matrix = prec;
  } else if (loop == MainLoop::kAny && aligned && prec != Precision::kInt32) {
    // A library's pick: the dtype's own matrix rate (fp32 only where the units take fp32 inputs),
    // else TF32 where allowed.
    if ((prec != Precision::kFp32 || fp32_matrix) && p.matrix_tflops(prec, acc)) {
      on_matrix = prec;
    } else if (tf32_allowed) {
      on_matrix = Precision::kTf32;
    }
  }
  if (on_matrix) {
    const double m = *p.matrix_tflops(*on_matrix, acc);
    *matrix_units = true;
    *tf32 = *on_matrix == Precision::kTf32;
    *peak_tflops = m;
    return m * 1e12 * d.matrix_eff * d.clock_scale;
  }
  *matrix_units = false;
  // Without matrix units, libraries compute narrow types in fp32 when that is faster.
  const double vec = std::max(p.vector_tflops(prec), p.vector_tflops(Precision::kFp32));
  *peak_tflops = vec;
  return vec * 1e12 * d.gemm_vector_eff * d.clock_scale;
}

std::string tile_feasibility(const KernelWork& w, const TileConfig& t, const DeviceModel& d) {
  // Sizes a kernel cannot launch with (a plan file's "tile": {} gave a GEMM 0x0x0 blocks and a
  // latency of NaN): every count at least 1, and a GEMM's or attention's blocks too.
  const std::pair<const char*, int> counts[] = {{"threads", t.threads},     {"stages", t.stages},
                                                {"split_k", t.split_k},     {"vector_width", t.vector_width},
                                                {"items_per_thread", t.items_per_thread}};
  for (const auto& [name, v] : counts) {
    if (v < 1) return fmt::format("tile.{} is {}; it must be at least 1", name, v);
  }
  if (t.rows_per_block < 0) return fmt::format("tile.rows_per_block is {}; it must be 0 (automatic) or more", t.rows_per_block);
  if (t.smem_bytes < 0) return fmt::format("tile.smem_bytes is {}; it must be 0 (estimated from the tile) or more", t.smem_bytes);
  if (t.registers < 0) return fmt::format("tile.registers is {}; it must be 0 (estimated from the tile) or more", t.registers);
  const bool attention = w.cls == OpClass::kAttention && w.m > 0 && w.kv_seq > 0;
  if (has_gemm_view(w) || attention) {
    const std::pair<const char*, int> blocks[] = {{"block_m", t.block_m}, {"block_n", t.block_n}, {"block_k", t.block_k}};
    for (const auto& [name, v] : blocks) {
      if (v < 1 && !(attention && std::string_view(name) == "block_k")) {
        return fmt::format("tile.{} is {}; a {} kernel's blocks must be at least 1", name, v,
                           attention ? "attention" : "GEMM or convolution");
      }
    }
  }
  if (!has_gemm_view(w)) return {};
  const double smem = gemm_smem(w, t);
  if (smem > d.smem_per_block_bytes) {
    return fmt::format("tile {}x{}x{} with {} stages needs {:.0f} KiB shared memory, a block may use {:.0f} KiB",
                       t.block_m, t.block_n, t.block_k, t.stages, smem / 1024, d.smem_per_block_bytes / 1024);
  }
  const int regs = gemm_registers(w, t);
  if (regs > d.max_registers_per_thread) {
    return fmt::format("tile {}x{} over {} threads needs about {} registers per thread, the limit is {}", t.block_m,
                       t.block_n, t.threads, regs, d.max_registers_per_thread);
  }
  if (t.threads > d.max_threads_per_block) {
    return fmt::format("{} threads per block exceed the limit of {}", t.threads, d.max_threads_per_block);
  }
  return {};
}

Residency residency(const DeviceModel& d, int threads, int registers, double smem_bytes) {
  Residency r;
  r.threads = threads;
  r.registers = registers;
  r.smem_bytes = smem_bytes;
  const Occupancy o = occupancy(d, threads, registers, smem_bytes);
  r.ctas_per_unit = o.infeasible ? 0 : o.ctas_per_unit;
  r.limiter = o.infeasible ? o.infeasible : o.limiter;
  return r;
}

Residency assumed_residency(const KernelWork& w, const TileConfig& t, const DeviceModel& d) {
  if (w.cls == OpClass::kAttention && w.m > 0 && w.kv_seq > 0) {
    return residency(d, t.threads, attention_registers(w, t), attention_smem(w, t));
  }
  if (has_gemm_view(w)) return residency(d, t.threads, gemm_registers(w, t), gemm_smem(w, t));
  return residency(d, t.threads, streaming_registers(t), streaming_smem(w, t));
}

KernelCost kernel_cost(const KernelWork& w, const TileConfig& t, const DeviceModel& d) {
  if (w.cls == OpClass::kAttention && w.m > 0 && w.kv_seq > 0) return attention_cost(w, t, d);
  if (has_gemm_view(w)) return gemm_cost(w, t, d);
  return streaming_cost(w, t, d);
}

std::vector<TileConfig> tile_menu(const KernelWork& w, const DeviceModel& d) {
  std::vector<TileConfig> menu;
  const double eb = elem_bytes(w.dtype);
  if (w.cls == OpClass::kAttention && w.m > 0 && w.kv_seq > 0) {
    for (int bq : {32, 64, 128}) {
      for (int bkv : {16, 32, 64, 128}) {
        for (int stages : {1, 2}) {
          for (int threads : {128, 256}) menu.push_back({bq, bkv, 0, threads, stages, 1, 1, 1});
        }
      }
    }
    // A decode step's few queries over a long cache: flash-decoding's kernels (FlashAttention 2.2+,
    // FlashInfer, TensorRT-LLM's XQA) split the keys over CTAs so that every SM streams some cache.
    if (w.m <= 16) {
      for (int split : {2, 4, 8, 16, 32, 64}) {
        if (w.kv_seq < int64_t{64} * split) break;
        for (int bkv : {64, 128}) menu.push_back({16, bkv, 0, 128, 2, split, 1, 1});
      }
    }
    return menu;
  }
  if (has_gemm_view(w)) {
    bool matrix = false;
    double peak = 0;
    gemm_rate(w, d, &matrix, &peak);
    struct Shape3 {
      int m, n, threads, stages;
    };
    static const Shape3 kMatrixTiles[] = {{256, 128, 256, 3}, {128, 256, 256, 3}, {128, 128, 256, 3}, {128, 64, 128, 4},
                                          {64, 128, 128, 4},  {64, 64, 128, 4},   {64, 32, 64, 4},    {32, 32, 64, 3}};
    static const Shape3 kVectorTiles[] = {{128, 128, 256, 2}, {128, 64, 256, 2}, {64, 128, 256, 2},
                                          {64, 64, 256, 2},   {64, 32, 128, 2},  {32, 32, 64, 2}};
    const int bk = matrix ? static_cast<int>(64 / eb) : 8;
    // Operand tiles load in vectors of up to 16 bytes where K allows (codegen narrows the width
    // per operand to what its strides allow). The price does not depend on it: the model assumes
    // a GEMM's global loads are issued in wide accesses hidden behind its math and traffic.
    int vw = 1;
    while (vw * 2 * eb <= 16 && w.k % (vw * 2) == 0) vw *= 2;
    auto add = [&](const Shape3& s) {
      const int64_t tiles = w.batch * ceil_div(w.m, s.m) * ceil_div(w.n, s.n);
      for (int split : {1, 2, 4, 8, 16}) {
        // Split-K only pays when the tiles alone leave units idle; each split needs a k-tile.
        if (split > 1 && (tiles * split > 2 * d.units || w.k < static_cast<int64_t>(bk) * split)) break;
        menu.push_back({s.m, s.n, bk, s.threads, s.stages, split, vw, 1});
      }
    };
    if (matrix) {
      for (const auto& s : kMatrixTiles) add(s);
    } else {
      for (const auto& s : kVectorTiles) add(s);
    }
    // Matrix-vector products (at most 8 rows): libraries run GEMV-shaped kernels for them
    // (cuBLAS's gemv, llama.cpp's mul_mat_vec), a warp of 32 threads per output column.
    if (w.m <= 8) {
      int bm = 1;
      while (bm < w.m) bm *= 2;
      const int64_t tiles = w.batch * ceil_div(w.m, bm) * ceil_div(w.n, 8);
      // A quantized B loads in 16-byte vectors of its packed blocks (32 nibbles of Q4_0).
      int gvw = vw;
      if (w.b_bits > 0) {
        gvw = 1;
        while (gvw * 2 * w.b_bits / 8.0 <= 16 && w.k % (gvw * 2) == 0 && gvw < 32) gvw *= 2;
      }
      for (int split : {1, 2, 4, 8, 16}) {
        if (split > 1 && (tiles * split > 2 * d.units || w.k < int64_t{32} * split)) break;
        menu.push_back({bm, 8, 32, 256, 1, split, gvw, 1});
      }
    }
    return menu;
  }
  int vw = 1;
  for (int v : {8, 4, 2}) {
    const int64_t extent = w.row_elements > 0 ? w.row_elements : w.elements;
    if (v * eb <= 16 && extent % v == 0) {
      vw = v;
      break;
    }
  }
  const bool rowwise = (w.cls == OpClass::kReduction || w.cls == OpClass::kNormalization) && w.rows > 0;
  static const std::vector<int> kRowThreads = {64, 128, 256, 512, 1024};
  static const std::vector<int> kFlatThreads = {128, 256, 512};
  for (int threads : rowwise ? kRowThreads : kFlatThreads) {
    for (int ipt : {1, 4}) menu.push_back({0, 0, 0, threads, 1, 1, vw, ipt});
  }
  return menu;
}

TileConfig choose_tile(const KernelWork& w, const DeviceModel& d) {
  const std::vector<TileConfig> menu = tile_menu(w, d);
  TileConfig best = menu.back();
  double best_us = std::numeric_limits<double>::infinity();
  for (const TileConfig& t : menu) {
    const KernelCost c = kernel_cost(w, t, d);
    if (c.feasible && c.total_us < best_us) {
      best_us = c.total_us;
      best = t;
    }
  }
  return best;
}

KernelWork gemm_work(DType t, int64_t batch, int64_t m, int64_t n, int64_t k) {
  KernelWork w;
  w.cls = OpClass::kGemm;
  w.dtype = t;
  w.batch = batch;
  w.m = m;
  w.n = n;
  w.k = k;
  w.macs = batch * m * n * k;
  w.flops.fma = 2 * w.macs;
  const int64_t eb = std::max(1, dtype_bits(t) / 8);
  w.bytes_read = batch * (m * k + k * n) * eb;
  w.bytes_written = batch * m * n * eb;
  w.elements = batch * m * n;
  return w;
}

}  // namespace gpusim
