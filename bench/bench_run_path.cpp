// The host side of Program::run: what a call costs around the kernels, measured on the null
// backend (a launch computes nothing and takes no time, so the wall time is the run path's own:
// checking the caller's buffers, uploads, downloads and any conversion between them).
//   BM_ProgramRun/<dtype>   y = relu(x) + b over 16 Mi elements (x the caller's, b a weight with its
//                           data in the file), y written to the caller's buffer; MB/s of x, b and y
// and the process's peak resident memory after the runs (counter peak_rss_MB: run one case per
// process, --benchmark_filter, for a per-case figure).
// Run: build/bench/bench_run_path --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <sys/resource.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpusim/gpusim.h"

namespace {

constexpr int64_t kElements = int64_t{1} << 24;

std::string model_bytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("gpusim bench_run_path");
  m.add_opset_import()->set_version(17);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("relu_add");
  const auto typed = [](onnx::ValueInfoProto* v, const char* name) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(kElements);
  };
  typed(g.add_input(), "x");
  typed(g.add_output(), "y");
  onnx::TensorProto* b = g.add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(kElements);
  std::vector<float> data(static_cast<size_t>(kElements));
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<float>(k % 97) * 0.01f;
  b->set_raw_data(data.data(), data.size() * sizeof(float));
  const auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
    onnx::NodeProto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
  };
  node("Relu", {"x"}, "r");
  node("Add", {"r", "b"}, "y");
  return m.SerializeAsString();
}

void BM_ProgramRun(benchmark::State& state, gpusim::DType dtype) {
  gpusim::Session s;
  auto m = s.open_model_bytes(model_bytes(), "relu_add.onnx");
  if (!m) {
    state.SkipWithError(m.error().message.c_str());
    return;
  }
  gpusim::CompileOptions o;
  o.backend = "null";
  o.dtype = dtype;
  auto p = s.compile(*m, o);
  if (!p) {
    state.SkipWithError(p.error().message.c_str());
    return;
  }
  const gpusim::TensorSpec& in = p->inputs().at(0);
  const gpusim::TensorSpec& out = p->outputs().at(0);
  std::vector<unsigned char> x(in.size_bytes, 0x3c), y(out.size_bytes);
  const gpusim::ConstTensorView xv{in.dtype, in.shape, x.data(), x.size()};
  const gpusim::TensorView yv{out.dtype, out.shape, y.data(), y.size()};
  for (auto _ : state) {
    if (auto r = p->run({xv}, {yv}); !r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(x.size() + y.size() + x.size());  // x, b (as stored) and y
  state.counters["MB/s"] = benchmark::Counter(bytes / 1e6, benchmark::Counter::kIsIterationInvariantRate);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  state.counters["peak_rss_MB"] = static_cast<double>(u.ru_maxrss) / 1024.0;
}

BENCHMARK_CAPTURE(BM_ProgramRun, fp32, gpusim::DType::kFloat32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ProgramRun, fp16, gpusim::DType::kFloat16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
