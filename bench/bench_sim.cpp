// Simulator benchmarks (issue: GPU profiles and the shape-only simulator).
//   BM_KernelCost: kernel cost evaluations per second on one core, over a mix of GEMM, conv,
//     elementwise, reduction and attention kernels and tiles. Target >= 1e6 / s / core.
//   BM_PredictUnet: predict() of the bundled SD-1.5 UNet (after import) on an RTX 3060 at fp16:
//     the eager plan's ~1.4k kernels, each tile chosen from the menu. Target < 20 ms.
//   BM_GenerationLlama2Q4: predict_generation() of Llama-2-7B in Q4_0 on an RTX 3060 12 GB, prompt 512
//     and generate 128 (issue 34): the prompt's pass and 65 priced decode steps. Target < 100 ms.
// Run: build/bench/bench_sim --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "gpusim/gpu_profile.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/llm.h"
#include "gpusim/onnx_import.h"
#include "gpusim/predict.h"
#include "gpusim/scheduler.h"

#include <random>

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
    auto p = gpusim::predict(*g, gpusim::library_target(rtx3060()), {gpusim::DType::kFloat16});
    kernels = p->kernels.size();
    benchmark::DoNotOptimize(p->total_us);
  }
  state.SetLabel(std::to_string(kernels) + " kernels");
}
BENCHMARK(BM_PredictUnet)->Unit(benchmark::kMillisecond);

void BM_GenerationLlama2Q4(benchmark::State& state) {
  using namespace gpusim;
  const LlmSpec spec = *load_llm_spec(std::string(GPUSIM_SOURCE_DIR) + "/models/llm/llama-2-7b.yaml");
  const Target target = library_target(rtx3060());
  GenerationOptions o;
  o.weights = "Q4_0";
  o.prompt = 512;
  o.generate = 128;
  for (auto _ : state) {
    auto g = predict_generation(spec, target, o);
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK(BM_GenerationLlama2Q4)->Unit(benchmark::kMillisecond);

gpusim::Graph load(const char* file) {
  gpusim::ImportOptions opts;
  opts.dims["batch"] = 1;
  auto g = gpusim::import_onnx(std::string(GPUSIM_SOURCE_DIR) + "/models/" + file, opts);
  if (!g) g = gpusim::import_onnx(std::string(GPUSIM_SOURCE_DIR) + "/models/" + file);
  return std::move(*g);
}

// Plan search (issue: plan search). Whole search, import excluded: the fusion passes, the beam
// over every candidate (width 8), the full timeline of the best plans, the eager baseline.
void BM_BeamUnet(benchmark::State& state) {
  const gpusim::Graph g = load("sd15_unet_64x64.onnx");
  gpusim::SearchOptions o;
  o.scheduler = gpusim::SchedulerKind::kBeam;
  o.beam_width = 8;
  o.dtype = gpusim::DType::kFloat16;
  int64_t scored = 0;
  double speedup = 0, scoring_s = 0;
  for (auto _ : state) {
    auto r = gpusim::search(g, gpusim::library_target(rtx3060()), o);
    scored = r->plans_scored;
    scoring_s = r->scoring_seconds;
    speedup = r->eager.total_us / r->plans.front().prediction.total_us;
  }
  state.counters["plans_scored"] = static_cast<double>(scored);
  // Scoring throughput inside the search (beam children are scored from their parent's state).
  state.counters["plans_per_s"] = static_cast<double>(scored) / scoring_s;
  state.counters["speedup"] = speedup;
}
BENCHMARK(BM_BeamUnet)->Unit(benchmark::kMillisecond);

// Plans scored per second from scratch: FusionSpace::score_us on distinct random decisions (more
// than the space remembers, so each is a full evaluation), kernel costs cached.
void BM_ScorePlans(benchmark::State& state) {
  const char* file = state.range(0) == 0 ? "sd15_unet_64x64.onnx" : "bert_base_seq128.onnx";
  const gpusim::Graph g = load(file);
  const gpusim::FusionSpace space(g, gpusim::library_target(rtx3060()));
  std::mt19937_64 rng(1);
  std::vector<gpusim::Decision> decisions(4096, gpusim::Decision(space.candidates().size()));
  for (auto& d : decisions) {
    for (auto& x : d) x = static_cast<uint8_t>(rng() & 1);
  }
  for (size_t i = 0; i < 256; ++i) space.score_us(decisions[i]);  // warm the kernel-cost cache
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(space.score_us(decisions[i]));
    i = (i + 1) % decisions.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(file) + ", " + std::to_string(space.eager().kernels.size()) + " eager kernels, " +
                 std::to_string(space.candidates().size()) + " candidates");
}
BENCHMARK(BM_ScorePlans)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
