// Predictions of whole graphs: every bundled model on every profile obeys the physical floors;
// timelines, copies, memory, energy and traces are consistent; golden cases pin today's numbers.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpusim/gpu_profile.h"
#include "gpusim/onnx_import.h"
#include "gpusim/predict.h"
#include "gpusim/runtime.h"
#include "support/data_cases.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"

using namespace gpusim;
namespace fs = std::filesystem;

namespace {

using test::gpu;

const Graph& model(const std::string& file) { return test::bundled_model(file); }

const std::vector<std::string> kModels = {"resnet50.onnx",         "mobilenet_v2.onnx",        "vit_b_16.onnx",
                                          "bert_base_seq128.onnx", "gpt2_prefill_seq512.onnx", "sd15_unet_64x64.onnx",
                                          "sd15_vae_decoder_512.onnx"};

}  // namespace

TEST_CASE("every bundled model on every profile: no kernel beats its floor", "[sim][predict]") {
  const auto profiles = list_profiles(default_profile_dirs());
  REQUIRE(profiles.size() >= 28);
  for (const std::string& m : kModels) {
    const Graph& g = model(m);
    for (const ProfileEntry& e : profiles) {
      INFO(m << " on " << e.name);
      const GpuProfile p = gpu(e.name);
      double best_peak = 0;
      for (const auto& [prec, tf] : p.compute.vector_tflops) best_peak = std::max(best_peak, tf);
      for (const auto& mp : p.compute.matrix_tflops) best_peak = std::max(best_peak, mp.tflops);
      auto pred = predict(g, test::library(p), {DType::kFloat16});
      REQUIRE(pred);
      REQUIRE(!pred->kernels.empty());
      double sum = 0;
      for (const PlannedKernel& k : pred->kernels) {
        const KernelCost& c = k.cost;
        INFO(k.name);
        REQUIRE(c.feasible);
        // Operands still in L2 from the kernel that wrote them do not come from DRAM.
        const double bytes =
            static_cast<double>(k.work.bytes_read - k.work.l2_resident_bytes + k.work.bytes_written);
        CHECK(k.work.l2_resident_bytes <= k.work.bytes_read);
        CHECK(c.total_us * 1.0001 >= bytes / (p.memory.dram.bandwidth_gbps * 1e3));
        CHECK(c.total_us * 1.0001 >= static_cast<double>(std::max(k.work.flops.total(), 2 * k.work.macs)) / (best_peak * 1e6));
        CHECK(c.total_us >= p.launch.latency_floor_us * 0.9999);
        sum += c.total_us;
      }
      CHECK(pred->kernels_us == Approx(sum));
      CHECK(pred->total_us >= pred->kernels_us);
      CHECK(pred->peak_memory_bytes >= pred->weight_bytes);
      CHECK(pred->energy_j >= p.power.idle_w * pred->total_us * 1e-6);
      CHECK(pred->energy_j <= p.power.tdp_w * pred->total_us * 1e-6 * 1.0001);
    }
  }
}

TEST_CASE("fp16 makes the SD UNet faster on tensor-core GPUs and halves its weights", "[sim][predict]") {
  const Graph& g = model("sd15_unet_64x64.onnx");
  for (const char* name : {"nvidia-rtx-3060", "nvidia-a100-40gb", "nvidia-h100-sxm", "amd-mi300x"}) {
    INFO(name);
    const GpuProfile p = gpu(name);
    auto f32 = predict(g, test::library(p), {DType::kFloat32});
    auto f16 = predict(g, test::library(p), {DType::kFloat16});
    REQUIRE(f32);
    REQUIRE(f16);
    CHECK(f16->total_us < f32->total_us);
    CHECK(f16->weight_bytes * 2 == f32->weight_bytes);
  }
}

TEST_CASE("copies use the host link and unified memory has none", "[sim][predict]") {
  const Graph& g = model("resnet50.onnx");
  auto pcie = predict(g, test::library(gpu("nvidia-rtx-4090")));
  REQUIRE(pcie);
  REQUIRE(pcie->transfers.size() == 2);
  CHECK(pcie->transfers[0].to_device);
  CHECK(pcie->transfers[0].bytes == 3 * 224 * 224 * 4);
  CHECK_FALSE(pcie->transfers[1].to_device);
  CHECK(pcie->transfers[1].start_us >= pcie->kernels.back().start_us + pcie->kernels.back().cost.total_us);
  CHECK(pcie->kernels.front().start_us >= pcie->transfers[0].start_us + pcie->transfers[0].duration_us);
  auto unified = predict(g, test::library(gpu("apple-m3-max")));
  REQUIRE(unified);
  CHECK(unified->transfers.empty());
}

TEST_CASE("a model too large for the card is flagged", "[sim][predict]") {
  auto p = predict(model("sd15_vae_decoder_512.onnx"), test::library(gpu("nvidia-rtx-4060")), {DType::kFloat32});
  REQUIRE(p);
  CHECK(p->peak_memory_bytes > 0);
  auto small = predict(model("resnet50.onnx"), test::library(gpu("nvidia-rtx-4060")));
  REQUIRE(small);
  CHECK(small->fits_in_memory);
}

TEST_CASE("tiny graphs are launch-bound", "[sim][predict]") {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {int64_t{256}});
  std::string prev = "x";
  for (int i = 0; i < 50; ++i) {
    const std::string out = "r" + std::to_string(i);
    b.node("Relu", {prev}, {out});
    prev = out;
  }
  b.output(prev);
  auto g = import_onnx(b.write("chain.onnx"));
  REQUIRE(g);
  const GpuProfile p = gpu("nvidia-h100-sxm");
  auto pred = predict(*g, test::library(p));
  REQUIRE(pred);
  CHECK(pred->kernels.size() == 50);
  CHECK(pred->launch_bound_us > 0);
  CHECK(pred->total_us >= 50 * p.launch.overhead_us);
}

TEST_CASE("a CUDA graph replay is never predicted slower than gpusim's executor launching kernel by kernel",
          "[sim][predict][runtime]") {
  const auto graph = find_runtime("cuda-graph", {});
  REQUIRE(graph);
  for (const char* m : {"mobilenet_v2.onnx", "resnet50.onnx", "bert_base_seq128.onnx"}) {
    const Graph& g = model(m);
    for (const char* name : {"nvidia-t4", "nvidia-a100-40gb", "amd-mi250x", "lavapipe"}) {
      INFO(m << " on " << name);
      const GpuProfile p = gpu(name);
      auto own = predict(g, test::library(p));
      auto replayed = predict(g, test::library(p), {std::nullopt, *graph});
      REQUIRE(own);
      REQUIRE(replayed);
      CHECK(replayed->runtime == "cuda-graph");
      CHECK(replayed->total_us <= own->total_us + 1e-6);
      CHECK(replayed->kernels_us == Approx(own->kernels_us));
    }
  }
}

TEST_CASE("a framework runtime paces the launches with its host time per op", "[sim][predict][runtime]") {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {int64_t{256}});
  b.input("y", onnx::TensorProto::FLOAT, {int64_t{256}});
  b.node("Add", {"x", "y"}, {"s"});
  b.node("Relu", {"s"}, {"r"});
  b.node("Tanh", {"r"}, {"t"});
  b.output("t");
  auto g = import_onnx(b.write("runtime_chain.onnx"));
  REQUIRE(g);
  const GpuProfile p = gpu("nvidia-t4");
  auto own = predict(*g, test::library(p));
  REQUIRE(own);
  CHECK(own->runtime == "gpusim");

  RuntimeModel eager;
  eager.name = "test-eager";
  eager.combine = "overlap";
  eager.default_us = 30;
  eager.op_us = {{"add", 40}, {"relu", 20}};
  auto e = predict(*g, test::library(p), {std::nullopt, eager});
  REQUIRE(e);
  CHECK(e->runtime == "test-eager");
  // Host-bound: each kernel waits for its call; the last starts after 40 + 20 + 30 (tanh: default).
  CHECK(e->host_us == Approx(90));
  CHECK(e->kernels.back().start_us >= 90);
  CHECK(e->total_us >= 90);
  CHECK(e->total_us > own->total_us);
  CHECK(e->kernels_us == Approx(own->kernels_us));

  // Serial: every call waits for the kernel before it, so host time and kernels add up.
  RuntimeModel serial = eager;
  serial.combine = "serial";
  auto s = predict(*g, test::library(p), {std::nullopt, serial});
  REQUIRE(s);
  CHECK(s->host_us >= 90 + own->kernels.front().cost.total_us + own->kernels[1].cost.total_us - 1e-6);

  // A device runtime (gpusim's own timing) leaves the executor's pacing as it is.
  auto d = predict(*g, test::library(p), {std::nullopt, *find_runtime("gpusim", {})});
  REQUIRE(d);
  CHECK(d->total_us == Approx(own->total_us));
  // The names framework runtimes use for ONNX ops.
  CHECK(framework_op_name(*g, g->nodes[0]) == "add");
  CHECK(framework_op_name(*g, g->nodes[2]) == "tanh");
}

TEST_CASE("an operand the previous kernel just wrote is read from L2 when it fits", "[sim][predict][l2]") {
  auto chain = [](int64_t n) {
    test::OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {n});
    b.node("Relu", {"x"}, {"a"});
    b.node("Tanh", {"a"}, {"t"});
    b.output("t");
    auto g = import_onnx(b.write("l2_chain_" + std::to_string(n) + ".onnx"));
    REQUIRE(g);
    return *g;
  };
  const GpuProfile p = gpu("nvidia-a100-40gb");  // 40 MB L2
  auto small = predict(chain(1 << 20), test::library(p));        // 4 MB: stays in L2
  REQUIRE(small);
  CHECK(small->kernels[0].work.l2_resident_bytes == 0);  // the graph input came over the host link
  CHECK(small->kernels[1].work.l2_resident_bytes == int64_t{4} << 20);
  CHECK(small->kernels[1].cost.dram_bytes < small->kernels[0].cost.dram_bytes);
  auto big = predict(chain(int64_t{1} << 26), test::library(p));  // 256 MB: evicted long before it is read
  REQUIRE(big);
  CHECK(big->kernels[1].work.l2_resident_bytes == 0);
}

TEST_CASE("the Chrome trace is valid trace-event JSON with every kernel, copy and launch", "[sim][predict]") {
  auto p = predict(model("mobilenet_v2.onnx"), test::library(gpu("nvidia-l4")), {DType::kFloat16});
  REQUIRE(p);
  const auto j = nlohmann::json::parse(chrome_trace(*p));
  REQUIRE(j.contains("traceEvents"));
  size_t complete = 0, launches = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      launches += e["tid"] == 3;
      CHECK(e["dur"].get<double>() > 0);
      CHECK(e.contains("ts"));
    }
  }
  // gpusim's executor launches every kernel from the host, one launch overhead each.
  CHECK(launches == p->kernels.size());
  CHECK(complete == 2 * p->kernels.size() + p->transfers.size());
}

// Golden cases: tests/data/golden/*.json, one prediction each (model, gpu, dtype, dims, expected
// total and tolerance). They pin today's model so that any change to predictions is deliberate:
// regenerate with tools/update_golden.sh and explain the change in the commit.
// One test case per golden file: "golden prediction: resnet50-t4-fp32.json", ...
const int golden_cases = test::file_cases("tests/data/golden", ".json", "golden prediction", "[sim][golden]",
                                          [](const fs::path& file) {
  std::ifstream f(file);
  const auto c = nlohmann::json::parse(f);
  ImportOptions opts;
  for (const auto& [k, v] : c["dims"].items()) opts.dims[k] = v.get<int64_t>();
  auto g = import_onnx(test::source_dir() + "/" + c["model"].get<std::string>(), opts);
  REQUIRE(g);
  std::optional<DType> dtype;
  if (c["dtype"] == "fp16") dtype = DType::kFloat16;
  if (c["dtype"] == "bf16") dtype = DType::kBFloat16;
  auto p = predict(*g, test::library(gpu(c["gpu"].get<std::string>())), {dtype});
  REQUIRE(p);
  const double want = c["expected_total_us"].get<double>();
  CHECK(p->total_us == Approx(want).epsilon(c["tolerance"].get<double>()));
  CHECK(static_cast<int64_t>(p->kernels.size()) == c["expected_kernels"].get<int64_t>());
});

TEST_CASE("golden predictions cover the bundled models", "[sim][golden]") { CHECK(golden_cases >= 6); }

TEST_CASE("a batched activation times a weight matrix is priced as one GEMM over all its rows", "[predict]") {
  // ViT's attention in-projection, sequence first: [197, 1, 768] x [768, 2304].
  test::OnnxBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {197, 1, 768});
  b.initializer("w", onnx::TensorProto::FLOAT, {768, 2304});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y");
  test::OnnxBuilder flat(17);
  flat.input("x", onnx::TensorProto::FLOAT, {197, 768});
  flat.initializer("w", onnx::TensorProto::FLOAT, {768, 2304});
  flat.node("MatMul", {"x", "w"}, {"y"});
  flat.output("y");
  const GpuProfile t4 = gpu("nvidia-t4");
  const Graph g3 = test::build_graph(b, "matmul_seq_first.onnx");
  const Graph g2 = test::build_graph(flat, "matmul_flat.onnx");
  const auto p3 = predict(g3, test::library(t4), {});
  const auto p2 = predict(g2, test::library(t4), {});
  REQUIRE(p3);
  REQUIRE(p2);
  CHECK(p3->kernels.at(0).work.m == 197);
  CHECK(p3->kernels.at(0).work.batch == 1);
  CHECK(p3->kernels_us == Approx(p2->kernels_us).epsilon(0.01));
}
