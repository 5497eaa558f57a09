// Simulator benchmarks (issue: GPU profiles and the shape-only simulator).
//   BM_KernelCost: kernel cost evaluations per second on one core, over a mix of GEMM, conv,
//     elementwise, reduction and attention kernels and tiles. Target >= 1e6 / s / core.
//   BM_PredictUnet: predict() of the bundled SD-1.5 UNet (after import) on an RTX 3060 at fp16:
//     the eager plan's ~1.4k kernels, each tile chosen from the menu. Target < 20 ms.
// Run: build/bench/bench_sim --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "gpusim/gpu_profile.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/onnx_import.h"
#include "gpusim/predict.h"

namespace {

const gpusim::GpuProfile& rtx3060() {
  static const gpusim::GpuProfile p = *gpusim::find_profile("nvidia-rtx-3060", gpusim::default_profile_dirs());
  return p;
}

void BM_KernelCost(benchmark::State& state) {
  using namespace gpusim;
  const DeviceModel d = make_device(rtx3060());
  std::vector<std::pair<KernelWork, TileConfig>> cases;
  for (int64_t s : {128, 1024, 4096}) {
    KernelWork g = gemm_work(DType::kFloat16, 1, s, s, s);
    for (const TileConfig& t : tile_menu(g, d)) cases.emplace_back(g, t);
  }
  KernelWork e;
  e.cls = OpClass::kElementwise;
  e.dtype = DType::kFloat16;
  e.elements = 1 << 22;
  e.bytes_read = e.bytes_written = 1 << 23;
  e.flops.fma = 1 << 22;
  for (const TileConfig& t : tile_menu(e, d)) cases.emplace_back(e, t);
  KernelWork r = e;
  r.cls = OpClass::kNormalization;
  r.rows = 2048;
  r.row_elements = 2048;
  r.passes = 2;
  for (const TileConfig& t : tile_menu(r, d)) cases.emplace_back(r, t);
  KernelWork a;
  a.cls = OpClass::kAttention;
  a.dtype = DType::kFloat16;
  a.batch = 8;
  a.m = a.kv_seq = 4096;
  a.head_dim = a.v_head_dim = 40;
  for (const TileConfig& t : tile_menu(a, d)) cases.emplace_back(a, t);
  size_t i = 0;
  for (auto _ : state) {
    const auto& [w, t] = cases[i];
    benchmark::DoNotOptimize(kernel_cost(w, t, d));
    i = i + 1 == cases.size() ? 0 : i + 1;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::to_string(cases.size()) + " kernel/tile cases");
}
BENCHMARK(BM_KernelCost);

void BM_PredictUnet(benchmark::State& state) {
  gpusim::ImportOptions opts;
  opts.dims["batch"] = 1;
  const auto g = gpusim::import_onnx(std::string(GPUSIM_SOURCE_DIR) + "/models/sd15_unet_64x64.onnx", opts);
  if (!g) {
    state.SkipWithError(g.error().message.c_str());
    return;
  }
  size_t kernels = 0;
  for (auto _ : state) {
    auto p = gpusim::predict(*g, rtx3060(), {gpusim::DType::kFloat16});
    kernels = p->kernels.size();
    benchmark::DoNotOptimize(p->total_us);
  }
  state.SetLabel(std::to_string(kernels) + " kernels");
}
BENCHMARK(BM_PredictUnet)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
