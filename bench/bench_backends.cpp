// Backend benchmarks (issue: real execution). Generated kernels timed with each device's own
// timers (Vulkan timestamp queries, CUDA/HIP events) through the executor, against the device's
// ceilings:
//   BM_Gemm/<backend>/N/vwV  square fp32 MatMul N x N x N (codegen's tiled GEMM, operand tiles
//                            loaded V elements at a time); GFLOP/s
//   BM_Conv/<backend>        ResNet-50's 3x3 conv, 1x64x56x56 -> 64 channels (implicit GEMM); GFLOP/s
//   BM_SiluChain/<backend>/vwV  x * sigmoid(x) * k + x over 4 Mi fp32, one fused kernel taking V
//                            consecutive elements a step (vector_width: float4 loads at V = 4); GB/s moved
//   BM_Copy/<backend>        a plain copy of the same buffer (the bandwidth ceiling); GB/s
//   BM_EigenGemm/N           the CPU's own GEMM (Eigen, one thread): lavapipe's ceiling per core
//   BM_HostMemcpy            host memcpy of 16 MiB: lavapipe's bandwidth ceiling
// Backends without a device here are skipped (the program prints why).
// Run: build/bench/bench_backends --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <Eigen/Dense>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "backend.h"
#include "executor.h"
#include "graphs.h"

namespace {

using namespace gpusim;

struct Built {
  Graph g;
  Plan plan;
};

// The benchmarked kernels are calibration's one-kernel graphs (backends/calibrate/graphs.h).
Built built(calibrate::OneKernelGraph k) {
  Built b{std::move(k.g), {}};
  PlanKernel pk;
  pk.nodes = k.nodes;
  b.plan.kernels.push_back(pk);
  return b;
}

Built gemm(int64_t n, int vector_width) {
  Built b = built(calibrate::matmul_graph(n, n, n));
  b.plan.kernels[0].tile.vector_width = vector_width;
  return b;
}
Built conv() { return built(calibrate::conv_graph(64, 64, 56, 3)); }

constexpr int64_t kChain = int64_t{1} << 22;

Built silu_chain(int vector_width) {
  Built b = built(calibrate::silu_chain_graph(kChain));
  b.plan.kernels[0].tile.vector_width = vector_width;
  return b;
}

std::map<std::string, std::unique_ptr<backend::Backend>>& devices() {
  static std::map<std::string, std::unique_ptr<backend::Backend>> d = [] {
    std::map<std::string, std::unique_ptr<backend::Backend>> out;
    for (const auto& b : backend::built_backends()) {
      auto dev = backend::open(b, 0);
      if (dev) {
        out[b] = std::move(*dev);
      } else {
        fmt::print(stderr, "bench_backends: {} skipped: {}\n", b, dev.error().message);
      }
    }
    return out;
  }();
  return d;
}

// Times plan kernel 0 of `b` on `dev` (median of 3 device-timed runs per iteration).
void run(benchmark::State& state, backend::Backend& dev, const Built& b, double work, const char* unit) {
  exec::RunOptions o;
  o.repeat = 3;
  o.poison = false;
  double us = 0;
  for (auto _ : state) {
    auto r = exec::run_plan(dev, b.g, b.plan, {}, o);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    if (!r->kernels[0].device || r->kernels[0].launches != 1) {
      state.SkipWithError("the kernel did not run as one generated device kernel");
      return;
    }
    us = r->kernels[0].measured_us;
    state.SetIterationTime(us * 1e-6);
  }
  state.counters[unit] = work / (us * 1e-6) / 1e9;
  state.SetLabel(dev.info().name);
}

void BM_Copy(benchmark::State& state, backend::Backend* dev) {
  backend::KernelSource src;
  src.name = "copy";
  src.language = dev->info().backend == "vulkan" ? backend::Language::kGlsl : backend::Language::kCudaCpp;
  src.buffers = 2;
  src.block = {256, 1, 1};
  const int64_t n = kChain;
  if (src.language == backend::Language::kGlsl) {
    src.code = fmt::format(
        "#version 450\nlayout(local_size_x = 256) in;\nlayout(std430, binding = 0) readonly buffer A {{ float a[]; }};\n"
        "layout(std430, binding = 1) buffer B {{ float b[]; }};\nvoid main() {{ uint i = gl_GlobalInvocationID.x;"
        " if (i < {}u) b[i] = a[i]; }}\n",
        n);
  } else {
    src.code = fmt::format("extern \"C\" __global__ void copy(const float* a, float* b) {{ unsigned i = blockIdx.x * "
                           "256 + threadIdx.x; if (i < {}u) b[i] = a[i]; }}\n",
                           n);
  }
  auto k = dev->compile(src);
  auto a = dev->allocate(n * 4), b = dev->allocate(n * 4);
  if (!k || !a || !b) {
    state.SkipWithError("copy kernel setup failed");
    return;
  }
  std::vector<float> host(static_cast<size_t>(n), 1.5f);
  (void)dev->upload(*a, host.data(), host.size() * 4);
  const backend::Buffer args[2] = {*a, *b};
  double us = 0;
  for (auto _ : state) {
    std::vector<double> t;
    for (int r = 0; r < 3; ++r) {
      (void)dev->launch(*k, {static_cast<uint32_t>(n / 256), 1, 1}, args, true);
      (void)dev->synchronize();
      auto tt = dev->read_timers();
      if (tt && !tt->empty()) t.push_back(tt->front());
    }
    std::sort(t.begin(), t.end());
    us = t.empty() ? 0 : t[t.size() / 2];
    state.SetIterationTime(us * 1e-6);
  }
  state.counters["GB/s"] = 8.0 * static_cast<double>(n) / (us * 1e-6) / 1e9;
  state.SetLabel(dev->info().name);
  dev->release(*a);
  dev->release(*b);
}

void BM_EigenGemm(benchmark::State& state) {
  const auto n = static_cast<Eigen::Index>(state.range(0));
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP"] =  // printed as a rate: GFLOP/s
      benchmark::Counter(2.0 * static_cast<double>(n * n * n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_EigenGemm)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);

void BM_HostMemcpy(benchmark::State& state) {
  std::vector<float> a(static_cast<size_t>(kChain), 1.0f), b(static_cast<size_t>(kChain));
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), a.size() * 4);
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kChain * 8);
}
BENCHMARK(BM_HostMemcpy)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  for (auto& [name, dev] : devices()) {
    backend::Backend* d = dev.get();
    for (auto [n, vw] : {std::pair<int64_t, int>{256, 1}, {256, 4}, {512, 1}, {512, 4}}) {
      static std::vector<Built> keep;
      keep.reserve(16);
      keep.push_back(gemm(n, vw));
      const Built* b = &keep.back();
      benchmark::RegisterBenchmark(fmt::format("BM_Gemm/{}/{}/vw{}", name, n, vw).c_str(),
                                   [d, b, n](benchmark::State& s) { run(s, *d, *b, 2.0 * n * n * n, "GFLOP/s"); })
          ->UseManualTime()
          ->Iterations(2)
          ->Unit(benchmark::kMillisecond);
    }
    static const Built cv = conv();
    benchmark::RegisterBenchmark(fmt::format("BM_Conv/{}", name).c_str(),
                                 [d](benchmark::State& s) { run(s, *d, cv, 2.0 * 64 * 56 * 56 * 64 * 9, "GFLOP/s"); })
        ->UseManualTime()
        ->Iterations(2)
        ->Unit(benchmark::kMillisecond);
    for (int vw : {1, 2, 4}) {
      static std::map<int, Built> chains;
      if (!chains.count(vw)) chains.emplace(vw, silu_chain(vw));
      const Built* ch = &chains.at(vw);
      benchmark::RegisterBenchmark(fmt::format("BM_SiluChain/{}/vw{}", name, vw).c_str(),
                                   [d, ch](benchmark::State& s) { run(s, *d, *ch, 12.0 * kChain, "GB/s"); })
          ->UseManualTime()
          ->Iterations(3)
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(fmt::format("BM_Copy/{}", name).c_str(), BM_Copy, d)
        ->UseManualTime()
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
