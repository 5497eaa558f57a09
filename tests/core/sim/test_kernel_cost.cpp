// The kernel cost model against physics: floors, monotonicity, wave quantization, matrix-unit
// eligibility, occupancy limits, infeasible tiles as data.
#include <catch2/catch.hpp>

#include "gpusim/gpu_profile.h"
#include "gpusim/kernel_cost.h"

using namespace gpusim;

namespace {

const std::vector<GpuProfile>& all_profiles() {
  static const std::vector<GpuProfile> v = [] {
    std::vector<GpuProfile> out;
    for (const ProfileEntry& e : list_profiles(default_profile_dirs())) {
      auto p = load_profile(e.path, default_profile_dirs());
      if (p) out.push_back(std::move(*p));
    }
    return out;
  }();
  return v;
}

const GpuProfile& profile(const std::string& name) {
  for (const GpuProfile& p : all_profiles()) {
    if (p.name == name) return p;
  }
  FAIL("no profile " << name);
  return all_profiles().front();
}

double best_us(const KernelWork& w, const DeviceModel& d) { return kernel_cost(w, choose_tile(w, d), d).total_us; }

}  // namespace

TEST_CASE("all profiles load for the physics tests", "[sim]") { CHECK(all_profiles().size() >= 28); }

TEST_CASE("a larger GEMM is never faster (aligned sizes)", "[sim]") {
  for (const GpuProfile& p : all_profiles()) {
    INFO(p.name);
    const DeviceModel d = make_device(p);
    for (DType t : {DType::kFloat32, DType::kFloat16}) {
      double prev = 0;
      for (int64_t s : {64, 128, 256, 512, 1024, 2048, 4096}) {
        const double us = best_us(gemm_work(t, 1, s, s, s), d);
        CHECK(us >= prev * 0.999);
        prev = us;
      }
      // Growing one dim at a time.
      for (int dim = 0; dim < 3; ++dim) {
        double last = 0;
        for (int64_t s : {256, 512, 768, 1024, 2048}) {
          const int64_t m = dim == 0 ? s : 512, n = dim == 1 ? s : 512, k = dim == 2 ? s : 512;
          const double us = best_us(gemm_work(t, 1, m, n, k), d);
          CHECK(us >= last * 0.999);
          last = us;
        }
      }
    }
  }
}

TEST_CASE("more bandwidth or more SMs is never slower", "[sim]") {
  const std::vector<KernelWork> works = [] {
    std::vector<KernelWork> v = {gemm_work(DType::kFloat16, 1, 4096, 4096, 4096), gemm_work(DType::kFloat32, 8, 128, 64, 512),
                                 gemm_work(DType::kFloat16, 1, 16, 4096, 4096)};
    KernelWork e;
    e.cls = OpClass::kElementwise;
    e.dtype = DType::kFloat16;
    e.elements = 1 << 24;
    e.bytes_read = 2 * (1 << 25);
    e.bytes_written = 1 << 25;
    e.flops.fma = 1 << 24;
    v.push_back(e);
    KernelWork r = e;
    r.cls = OpClass::kNormalization;
    r.rows = 4096;
    r.row_elements = 4096;
    r.passes = 2;
    v.push_back(r);
    return v;
  }();
  for (const GpuProfile& base : all_profiles()) {
    INFO(base.name);
    GpuProfile more_bw = base;
    more_bw.memory.dram.bandwidth_gbps *= 2;
    GpuProfile more_units = base;  // twice the SMs: twice the peaks, same per-SM resources
    more_units.compute.units *= 2;
    for (auto& [prec, tf] : more_units.compute.vector_tflops) tf *= 2;
    for (auto& m : more_units.compute.matrix_tflops) m.tflops *= 2;
    more_units.compute.shared_memory_bandwidth_gbps *= 2;
    more_units.power.tdp_w *= 2;       // and twice the power: the same clock under load
    more_units.memory.l2.size_mb *= 2;  // and twice the L2: the same share of it per resident row
    const DeviceModel d = make_device(base), d_bw = make_device(more_bw), d_units = make_device(more_units);
    for (const KernelWork& w : works) {
      const double t = best_us(w, d);
      CHECK(best_us(w, d_bw) <= t * 1.0001);
      CHECK(best_us(w, d_units) <= t * 1.0001);
    }
  }
}

TEST_CASE("fp16 beats fp32 on large GEMMs wherever there are fp16 matrix units", "[sim]") {
  int checked = 0;
  for (const GpuProfile& p : all_profiles()) {
    if (!p.matrix_tflops(Precision::kFp16, Precision::kFp32)) continue;
    // Apple's simdgroup matrices take fp32 at the fp16 rate (both the ALUs'): nothing to beat.
    const auto fp32_matrix = p.matrix_tflops(Precision::kFp32, Precision::kFp32);
    if (fp32_matrix && *fp32_matrix >= *p.matrix_tflops(Precision::kFp16, Precision::kFp32)) continue;
    INFO(p.name);
    const DeviceModel d = make_device(p);
    const KernelWork h = gemm_work(DType::kFloat16, 1, 4096, 4096, 4096);
    const KernelWork f = gemm_work(DType::kFloat32, 1, 4096, 4096, 4096);
    const KernelCost ch = kernel_cost(h, choose_tile(h, d), d);
    CHECK(ch.matrix_units);
    CHECK(ch.total_us < best_us(f, d));
    ++checked;
  }
  CHECK(checked >= 20);
}

TEST_CASE("wave quantization: SMs + 1 CTAs cost about two waves", "[sim]") {
  for (const char* name : {"nvidia-h100-sxm", "nvidia-rtx-3060", "amd-mi300x"}) {
    INFO(name);
    const DeviceModel d = make_device(profile(name));
    // fp32 on the vector units: 64 FLOP per byte of A, compute-bound on every profile.
    const TileConfig tile{128, 128, 8, 256, 2, 1, 1, 1};
    const int64_t units = d.units;
    const KernelWork full = gemm_work(DType::kFloat32, 1, 128 * units, 128, 65536);
    const KernelWork plus = gemm_work(DType::kFloat32, 1, 128 * (units + 1), 128, 65536);
    const KernelCost a = kernel_cost(full, tile, d), b = kernel_cost(plus, tile, d);
    CHECK(a.ctas == units);
    CHECK(b.ctas == units + 1);
    CHECK(a.bound == Bound::kCompute);
    CHECK(b.total_us / a.total_us == Approx(2.0).epsilon(0.1));
  }
}

TEST_CASE("row kernels pack rows into CTAs as codegen does", "[sim]") {
  const DeviceModel d = make_device(profile("nvidia-h100-sxm"));
  KernelWork r;
  r.cls = OpClass::kReduction;
  r.rows = 10000;
  r.row_elements = 100;
  r.bytes_read = 4 * r.rows * r.row_elements;
  r.bytes_written = 4 * r.rows;
  // 256 threads x 4 wide x 1 over 100 elements = 10 rows, rounded down to 8, 32 threads a row.
  const KernelCost packed = kernel_cost(r, {0, 0, 0, 256, 1, 1, 4, 1}, d);
  CHECK(packed.ctas == (10000 + 7) / 8);
  // Rows of 16 or fewer go a row a thread, whatever the width: 256 rows a CTA.
  r.row_elements = 12;
  const KernelCost per_thread = kernel_cost(r, {0, 0, 0, 256, 1, 1, 1, 1}, d);
  CHECK(per_thread.ctas == (10000 + 255) / 256);
  // A row a group for long rows.
  r.row_elements = 100000;
  CHECK(kernel_cost(r, {0, 0, 0, 256, 1, 1, 4, 1}, d).ctas == 10000);
}

TEST_CASE("matrix units need an eligible dtype and aligned dims", "[sim]") {
  const DeviceModel d = make_device(profile("nvidia-a100-40gb"));
  bool mma = false;
  double peak = 0;
  gemm_rate(gemm_work(DType::kFloat16, 1, 1024, 1024, 1024), d, &mma, &peak);
  CHECK(mma);
  CHECK(peak == Approx(312));
  gemm_rate(gemm_work(DType::kFloat16, 1, 1024, 1024, 1001), d, &mma, &peak);
  CHECK_FALSE(mma);  // K = 1001 is not a multiple of 8
  gemm_rate(gemm_work(DType::kFloat32, 1, 1024, 1024, 1024), d, &mma, &peak);
  CHECK_FALSE(mma);  // fp32 runs on the vector units (TF32 is opt-in)
  CHECK(peak == Approx(19.5));
  // A GPU without matrix units computes fp16 GEMMs on its vector units.
  const DeviceModel pascal = make_device(profile("nvidia-gtx-1080-ti"));
  gemm_rate(gemm_work(DType::kFloat16, 1, 1024, 1024, 1024), pascal, &mma, &peak);
  CHECK_FALSE(mma);
  CHECK(peak == Approx(profile("nvidia-gtx-1080-ti").vector_tflops(Precision::kFp32)));
  // GeForce: fp16 with fp32 accumulate runs at half the fp16-accumulate rate, and that is what is used.
  const DeviceModel ga106 = make_device(profile("nvidia-rtx-3060"));
  gemm_rate(gemm_work(DType::kFloat16, 1, 1024, 1024, 1024), ga106, &mma, &peak);
  CHECK(mma);
  CHECK(peak == Approx(25.5));
}

TEST_CASE("fp32 runs on the matrix units as TF32 only where the target allows it or the tile says so", "[sim]") {
  DeviceModel d = make_device(profile("nvidia-a100-40gb"));
  const KernelWork w = gemm_work(DType::kFloat32, 1, 1024, 1024, 1024);
  bool mma = false, tf32 = false;
  double peak = 0;
  gemm_rate(w, d, MainLoop::kAny, &mma, &peak, &tf32);
  CHECK_FALSE(mma);
  CHECK_FALSE(tf32);
  d.allow_tf32 = true;  // torch.backends.cuda.matmul.allow_tf32
  gemm_rate(w, d, MainLoop::kAny, &mma, &peak, &tf32);
  CHECK(mma);
  CHECK(tf32);
  CHECK(peak == Approx(156));
  // A library still needs aligned operands; a generated TF32 tile pads them.
  gemm_rate(gemm_work(DType::kFloat32, 1, 1024, 1024, 1001), d, MainLoop::kAny, &mma, &peak, &tf32);
  CHECK_FALSE(mma);
  gemm_rate(gemm_work(DType::kFloat32, 1, 1024, 1024, 1001), d, MainLoop::kTf32, &mma, &peak, &tf32);
  CHECK(tf32);
  // fp16 stays fp16's rate; a SIMT tile is priced on the vector units whatever the profile has.
  gemm_rate(gemm_work(DType::kFloat16, 1, 1024, 1024, 1024), d, MainLoop::kAny, &mma, &peak, &tf32);
  CHECK(mma);
  CHECK_FALSE(tf32);
  CHECK(peak == Approx(312));
  gemm_rate(gemm_work(DType::kFloat16, 1, 1024, 1024, 1024), d, MainLoop::kVector, &mma, &peak, &tf32);
  CHECK_FALSE(mma);
  // The price follows: a TF32 tile is faster than the same tile on the vector units.
  TileConfig t{128, 128, 32, 256, 2, 1, 4, 1};
  t.main_loop = MainLoop::kTf32;
  const KernelCost on_tf32 = kernel_cost(w, t, d);
  CHECK(on_tf32.tf32);
  CHECK(on_tf32.matrix_units);
  t.main_loop = MainLoop::kVector;
  const KernelCost on_vector = kernel_cost(w, t, d);
  CHECK_FALSE(on_vector.tf32);
  CHECK(on_vector.compute_us > 3 * on_tf32.compute_us);
  // No TF32 rate (Pascal): fp32 stays on the vector units even where allowed.
  DeviceModel pascal = make_device(profile("nvidia-gtx-1080-ti"));
  pascal.allow_tf32 = true;
  gemm_rate(w, pascal, MainLoop::kAny, &mma, &peak, &tf32);
  CHECK_FALSE(mma);
  gemm_rate(w, pascal, MainLoop::kTf32, &mma, &peak, &tf32);
  CHECK_FALSE(mma);
  // CDNA: fp32 MFMA by default (as rocBLAS), never TF32 there.
  const DeviceModel cdna = make_device(profile("amd-mi250x"));
  gemm_rate(w, cdna, MainLoop::kAny, &mma, &peak, &tf32);
  CHECK(mma);
  CHECK_FALSE(tf32);
  CHECK(peak == Approx(47.9));
  gemm_rate(w, cdna, MainLoop::kMatrix, &mma, &peak, &tf32);
  CHECK(mma);
  gemm_rate(w, cdna, MainLoop::kVector, &mma, &peak, &tf32);
  CHECK_FALSE(mma);
}

TEST_CASE("no kernel is faster than its physical floor", "[sim]") {
  for (const GpuProfile& p : all_profiles()) {
    INFO(p.name);
    const DeviceModel d = make_device(p);
    double best_peak = 0;
    for (const auto& [prec, tf] : p.compute.vector_tflops) best_peak = std::max(best_peak, tf);
    for (const auto& m : p.compute.matrix_tflops) best_peak = std::max(best_peak, m.tflops);
    for (const KernelWork& w : {gemm_work(DType::kFloat16, 1, 8192, 8192, 8192), gemm_work(DType::kFloat32, 4, 512, 512, 64),
                                gemm_work(DType::kFloat16, 1, 1, 4096, 4096)}) {
      const KernelCost c = kernel_cost(w, choose_tile(w, d), d);
      const double bytes_floor_us = static_cast<double>(w.bytes_read + w.bytes_written) / (p.memory.dram.bandwidth_gbps * 1e3);
      const double flops_floor_us = static_cast<double>(w.flops.total()) / (best_peak * 1e6);
      CHECK(c.total_us >= bytes_floor_us);
      CHECK(c.total_us >= flops_floor_us);
      CHECK(c.total_us >= p.launch.latency_floor_us);
    }
  }
}

TEST_CASE("tiny kernels sit on the latency floor", "[sim]") {
  const GpuProfile& p = profile("nvidia-h100-sxm");
  const DeviceModel d = make_device(p);
  KernelWork w;
  w.cls = OpClass::kElementwise;
  w.elements = 256;
  w.bytes_read = w.bytes_written = 1024;
  const KernelCost c = kernel_cost(w, choose_tile(w, d), d);
  CHECK(c.bound == Bound::kLatency);
  CHECK(c.total_us == Approx(p.launch.latency_floor_us));
}

TEST_CASE("transposes that move the innermost axis pay for partial sectors", "[sim]") {
  const DeviceModel d = make_device(profile("nvidia-rtx-4090"));
  KernelWork copy;
  copy.cls = OpClass::kDataMovement;
  copy.dtype = DType::kFloat32;
  copy.elements = 3 * 1024 * 1024;
  copy.bytes_read = copy.bytes_written = 12 * 1024 * 1024;
  KernelWork nchw_to_nhwc = copy;
  nchw_to_nhwc.contiguous_run = 3;  // C = 3 becomes the innermost axis
  const KernelCost a = kernel_cost(copy, choose_tile(copy, d), d);
  const KernelCost b = kernel_cost(nchw_to_nhwc, choose_tile(nchw_to_nhwc, d), d);
  CHECK(b.dram_bytes > a.dram_bytes * 1.5);
  CHECK(b.total_us > a.total_us);
}

TEST_CASE("infeasible tiles are data with a reason and occupancy names its limiter", "[sim]") {
  const DeviceModel d = make_device(profile("nvidia-t4"));  // 64 KiB shared memory per SM
  const KernelWork w = gemm_work(DType::kFloat16, 1, 4096, 4096, 4096);
  const TileConfig huge{128, 128, 64, 256, 4, 1, 1, 1};
  CHECK(tile_feasibility(w, huge, d) == "tile 128x128x64 with 4 stages needs 128 KiB shared memory, a block may use 64 KiB");
  const KernelCost c = kernel_cost(w, huge, d);
  CHECK_FALSE(c.feasible);
  REQUIRE(c.infeasible_reason != nullptr);
  CHECK(std::string(c.infeasible_reason) == "shared memory per block exceeds the device limit");
  const TileConfig ok{128, 128, 32, 256, 3, 1, 1, 1};
  CHECK(tile_feasibility(w, ok, d).empty());
  const KernelCost k = kernel_cost(w, ok, d);
  CHECK(k.feasible);
  CHECK(k.ctas_per_unit == 1);  // 48 KiB of shared memory per CTA: one fits in 64 KiB (registers allow two)
  CHECK(std::string(k.occupancy_limiter) == "shared memory");
}

// cuBLAS launches a split-K GEMM as two kernels (the NeuSight records: kernels_launched is 2 exactly
// when the grid's third dimension splits K; the H200 sweep: nvjet's splitK kernels come in pairs);
// gpusim's generated kernels add the slices in their last group, in one launch.
TEST_CASE("a library's split K adds its partial sums in a second kernel and a generated one does not", "[sim][gemv]") {
  const DeviceModel d = make_device(profile("nvidia-h100-sxm"));
  const KernelWork w = gemm_work(DType::kFloat16, 1, 1, 1024, 4096);
  TileConfig lib{1, 8, 32, 256, 1, 4, 8, 1};  // a library tile: its main loop is the library's (any)
  REQUIRE(lib.main_loop == MainLoop::kAny);
  const KernelCost two = kernel_cost(w, lib, d);
  REQUIRE(two.feasible);
  CHECK(two.reduce_us >= d.floor_s * 1e6);  // a kernel of its own: at least the shortest one
  TileConfig gen = lib;
  gen.main_loop = MainLoop::kVector;  // as codegen builds it: the last group adds the slices
  const KernelCost one = kernel_cost(w, gen, d);
  CHECK(one.reduce_us == 0);
  // The library's main kernel only writes its slices' fp32 partials; the generated one also reads
  // them back in its last group (and waits on three more barriers there, where the profile prices
  // a barrier).
  CHECK(one.l2_bytes - two.l2_bytes == Approx(4.0 * 1024 * 4).epsilon(1e-9));
  CHECK(two.compute_us <= one.compute_us);
  CHECK(two.total_us - two.reduce_us <= one.total_us);
  // Unsplit, there is nothing to add.
  lib.split_k = 1;
  CHECK(kernel_cost(w, lib, d).reduce_us == 0);
  // Large partials (a split GEMM of many rows) are read back from L2 at its bandwidth, not floored.
  const KernelWork big = gemm_work(DType::kFloat16, 1, 4096, 4096, 4096);
  TileConfig wide{128, 128, 32, 256, 3, 4, 8, 1};
  const KernelCost r = kernel_cost(big, wide, d);
  REQUIRE(r.feasible);
  CHECK(r.reduce_us * 1e-6 >= 4.0 * 4096 * 4096 * 4 / d.l2_bytes_per_s);
}

// Unpacking quantized weights in a matrix main loop: dedicated matrix units (tensor cores) run the
// MMAs while the vector units unpack, so a little unpacking is hidden; Apple's simdgroup matrices
// issue on the ALUs that unpack, so every unpacking instruction adds, at the vector rate.
TEST_CASE("unpacking overlaps dedicated matrix units and adds where matrix instructions issue on the ALUs", "[sim]") {
  const GpuProfile& apple = profile("apple-m2-max");
  REQUIRE(apple.compute.matrix_on_alus);
  GpuProfile dedicated = apple;
  dedicated.compute.matrix_on_alus = false;
  const KernelWork f16 = gemm_work(DType::kFloat16, 1, 512, 4096, 4096);
  KernelWork q2 = f16, q4 = f16;
  q2.b_bits = q4.b_bits = 4.5;
  q2.dequant_ops = 2;
  q4.dequant_ops = 4;
  const TileConfig t{64, 64, 32, 128, 2, 1, 1, 1};  // 4 warps: every scheduler of a core busy
  for (const GpuProfile* p : std::vector<const GpuProfile*>{&apple, &dedicated}) {
    const DeviceModel d = make_device(*p);
    INFO(p->compute.matrix_on_alus);
    const KernelCost c0 = kernel_cost(f16, t, d), c2 = kernel_cost(q2, t, d), c4 = kernel_cost(q4, t, d);
    REQUIRE(c0.feasible);
    REQUIRE(c2.matrix_units);
    if (d.matrix_on_alus) {
      // ceil(512 blocks / 38 cores) blocks on the busiest core, each unpacking its 64 columns over
      // K: two issue slots (FLOPs) an instruction at the sustained vector rate.
      const double load = std::ceil(512.0 / d.units);
      const double unpack_s = load * 2.0 * 2.0 * 64 * 4096 / (d.fp32_flops_per_s / d.units);
      CHECK((c2.compute_us - c0.compute_us) * 1e-6 == Approx(unpack_s).epsilon(1e-9));
      CHECK(c4.compute_us - c0.compute_us == Approx(2 * (c2.compute_us - c0.compute_us)).epsilon(1e-9));
    } else {
      CHECK(c2.compute_us == Approx(c0.compute_us).epsilon(1e-12));
    }
  }
}

TEST_CASE("GEMV-shaped tiles stream the weight with what their threads keep in flight", "[sim][gemv]") {
  const DeviceModel d = make_device(profile("nvidia-h100-sxm"));
  const TileConfig gemv{1, 8, 32, 256, 1, 1, 4, 1};
  REQUIRE(gemv_shaped(gemv));
  CHECK_FALSE(gemv_shaped(TileConfig{1, 32, 8, 32, 2, 1, 4, 1}));  // the tiled loop's one-row tile
  CHECK_FALSE(gemv_shaped(TileConfig{}));                          // not a GEMM tile
  // A classifier at batch 1: 8 MB of fp32 weight, never read faster than the bandwidth allows.
  // 125 blocks leave each thread 16 loads of 4 floats, 2 in flight: its chain of 8 DRAM round trips
  // bounds it; split in 2, the chain halves and the weight streams at the bandwidth.
  const KernelWork w = gemm_work(DType::kFloat32, 1, 1, 1000, 2048);
  const KernelCost c = kernel_cost(w, gemv, d);
  REQUIRE(c.feasible);
  CHECK(c.ctas == 125);
  CHECK(c.bound == Bound::kLatency);
  // (As codegen builds the split: one launch, its last group adding the halves. A library's split
  // pays a second kernel: the test before this one.)
  TileConfig split2{1, 8, 32, 256, 1, 2, 4, 1};
  split2.main_loop = MainLoop::kVector;
  const KernelCost halves = kernel_cost(w, split2, d);
  CHECK(halves.bound == Bound::kDram);
  CHECK(halves.total_us < c.total_us);
  CHECK(c.dram_bytes >= 1000.0 * 2048 * 4);
  CHECK(c.total_us >= c.dram_bytes / (d.dram_bytes_per_s * 1e-6));
  // Residency: registers for the row's sum and two vectors, shared memory for the partial sums.
  const Residency r = assumed_residency(w, gemv, d);
  CHECK(r.smem_bytes == 256 * 4);
  CHECK(r.registers < 32);
  // Fewer loads in flight (scalar loads) stream slower; more rows read the weight once all the same.
  TileConfig scalar = gemv;
  scalar.vector_width = 1;
  CHECK(kernel_cost(w, scalar, d).achieved_dram_gbps < c.achieved_dram_gbps);
  const KernelCost rows8 = kernel_cost(gemm_work(DType::kFloat32, 1, 8, 1000, 2048), TileConfig{8, 8, 32, 256, 1, 1, 4, 1}, d);
  CHECK(rows8.dram_bytes < c.dram_bytes * 1.01 + 8 * 2048 * 4 + 8 * 1000 * 4);
  // Split K: more blocks, the partial sums' traffic and barriers on top.
  const KernelCost split = kernel_cost(w, TileConfig{1, 8, 32, 256, 1, 4, 4, 1}, d);
  CHECK(split.ctas == 4 * 125);
  CHECK(split.l2_bytes > c.l2_bytes);
  // The menu offers the tile for at most 8 rows, and not past them.
  auto has_gemv = [&](const KernelWork& k) {
    for (const TileConfig& t : tile_menu(k, d)) {
      if (gemv_shaped(t)) return true;
    }
    return false;
  };
  CHECK(has_gemv(gemm_work(DType::kFloat16, 1, 1, 4096, 4096)));
  CHECK(has_gemv(gemm_work(DType::kFloat32, 1, 8, 4096, 4096)));
  CHECK_FALSE(has_gemv(gemm_work(DType::kFloat32, 1, 9, 4096, 4096)));
  // The one-row GEMM's best tile is a GEMV-shaped one on this GPU.
  CHECK(gemv_shaped(choose_tile(w, d)));
}

// gpusim's own kernels (tile.chain known) are priced by their block's chain (core/sim/README.md):
// the loads a k-step waits on cost round trips unless they are issued ahead of the products, the
// epilogue's round trips and values add, and a library tile of the same shape is priced as before.
TEST_CASE("a generated tile's chain prices its dependent loads, their overlap and its epilogue", "[sim]") {
  const DeviceModel d = make_device(profile("nvidia-h200"));
  KernelWork w;
  w.cls = OpClass::kConv;
  w.dtype = DType::kFloat16;
  w.m = 3136;
  w.n = 64;
  w.k = 576;
  w.macs = w.m * w.n * w.k;
  w.flops.fma = 2 * w.macs;
  w.bytes_read = (w.m * w.k + w.k * w.n) * 2;
  w.bytes_written = w.m * w.n * 2;
  TileConfig t;
  t.block_m = 128;
  t.block_n = 64;
  t.block_k = 32;
  t.threads = 256;
  t.stages = 1;
  t.main_loop = MainLoop::kMatrix;
  const KernelCost lib = kernel_cost(w, t, d);
  REQUIRE(lib.feasible);
  auto priced = [&](KernelChain c) {
    TileConfig g = t;
    g.chain = c;
    const KernelCost k = kernel_cost(w, g, d);
    REQUIRE(k.feasible);
    return k;
  };
  const KernelCost serial = priced({32, 0, 0, 0});  // one load at a time: 32 round trips a k-step
  const KernelCost staged = priced({1, 1, 0, 0});    // every load in flight, issued ahead
  const KernelCost once = priced({1, 0, 0, 0});      // in flight, but after the step before computes
  // 18 k-steps of 32 round trips each: the chain is the kernel's bound, and it is the sum.
  CHECK(serial.bound == Bound::kLatency);
  const double k_steps = 18;
  const double per_step = 32 * d.own_round_trip_s;
  CHECK(serial.path_us >= k_steps * per_step * 1e6);
  CHECK(serial.total_us > 5 * staged.total_us);
  CHECK(once.total_us >= staged.total_us);
  // The epilogue's round trips add one each (a block round on this grid: 25 blocks, 132 SMs).
  const KernelCost split = priced({1, 1, 10, 0});
  CHECK(split.path_us == Approx(staged.path_us + 10 * d.own_round_trip_s * 1e6).epsilon(1e-9));
  // A library tile of the same shape has no chain and keeps its pipeline's path.
  CHECK_FALSE(t.chain.known());
  CHECK(lib.total_us != serial.total_us);
}
