// Import benchmarks (issue: foundation).
//   BM_ImportUnet: import of the bundled SD-1.5 UNet (7.6k nodes), shape-only. Target < 100 ms.
//   BM_ImportLargeEmbedded: import of a >= 500 MB ONNX file whose weights are embedded, generated
//     at bench time. Target < 1 s and peak memory < 1.3x the file size. Peak memory is the child
//     process's maximum RSS (getrusage), measured in a fresh fork so the generator's memory does
//     not count; it includes the process's own baseline (code, libraries).
// Run: build/bench/bench_import --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gpusim/onnx_import.h"

namespace {

void BM_ImportUnet(benchmark::State& state) {
  const std::string path = std::string(GPUSIM_SOURCE_DIR) + "/models/sd15_unet_64x64.onnx";
  gpusim::ImportOptions opts;
  opts.dims["batch"] = 1;
  opts.onnx_shape_inference = state.range(0) != 0;
  for (auto _ : state) {
    auto g = gpusim::import_onnx(path, opts);
    if (!g) {
      state.SkipWithError(g.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(g->nodes.size());
  }
  state.SetLabel(opts.onnx_shape_inference ? "with ONNX shape inference" : "gpusim inference only");
}
BENCHMARK(BM_ImportUnet)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

// A transformer-like stack of MatMul + Add layers with 16 MiB fp32 weights embedded as raw_data.
// Written by a child process so this process never holds the weights.
std::string large_model_path() {
  static const std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() / "gpusim_bench_large_embedded.onnx").string();
    if (std::filesystem::exists(p) && std::filesystem::file_size(p) >= 500'000'000) return p;
    const pid_t pid = ::fork();
    if (pid == 0) {
      onnx::ModelProto m;
      m.set_ir_version(8);
      m.add_opset_import()->set_version(17);
      auto* g = m.mutable_graph();
      g->set_name("large");
      auto* in = g->add_input();
      in->set_name("x");
      auto* tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(onnx::TensorProto::FLOAT);
      tt->mutable_shape()->add_dim()->set_dim_value(16);
      tt->mutable_shape()->add_dim()->set_dim_value(2048);
      const int layers = 32;  // 32 x 16 MiB = 512 MiB of weights
      std::string prev = "x";
      for (int i = 0; i < layers; ++i) {
        auto* w = g->add_initializer();
        w->set_name(fmt::format("w{}", i));
        w->set_data_type(onnx::TensorProto::FLOAT);
        w->add_dims(2048);
        w->add_dims(2048);
        std::string raw(2048 * 2048 * 4, '\0');
        for (size_t k = 0; k < raw.size(); k += 4096) raw[k] = static_cast<char>(k * 31 + i);
        w->set_raw_data(std::move(raw));
        auto* n = g->add_node();
        n->set_op_type("MatMul");
        n->set_name(fmt::format("mm{}", i));
        n->add_input(prev);
        n->add_input(w->name());
        prev = fmt::format("h{}", i);
        n->add_output(prev);
      }
      g->add_output()->set_name(prev);
      std::ofstream f(p, std::ios::binary | std::ios::trunc);
      _exit(m.SerializeToOstream(&f) ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return p;
  }();
  return path;
}

void BM_ImportLargeEmbedded(benchmark::State& state) {
  const std::string path = large_model_path();
  const double file_mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  for (auto _ : state) {
    auto g = gpusim::import_onnx(path);
    if (!g) {
      state.SkipWithError(g.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(g->nodes.size());
  }
  // Peak RSS of one import in a fresh child process.
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto g = gpusim::import_onnx(path);
    _exit(g ? 0 : 1);
  }
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  const double peak_mb = static_cast<double>(ru.ru_maxrss) / 1e3;  // ru_maxrss is in KiB
  state.counters["file_MB"] = file_mb;
  state.counters["peak_rss_MB"] = peak_mb * 1.024;
  state.counters["peak_over_file"] = peak_mb * 1.024 / file_mb;
}
BENCHMARK(BM_ImportLargeEmbedded)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
