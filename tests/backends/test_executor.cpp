// The executor: what happens around the generated kernels — host fallbacks for ops no generator
// covers (said in the notes), plan kernels codegen cannot fuse running unfused, views sharing
// their root's buffer, per-kernel device timing — and `gpusim run` on a device backend with
// --check, predicted beside measured. The executor-logic cases run on every available backend
// (Vulkan on lavapipe in CI) and on the null backend, which runs them on any machine; outputs are
// compared with the reference where a device computes them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "executor.h"
#include "gpusim/kernel_work.h"
#include "gpusim/onnx_import.h"
#include "gpusim/scheduler.h"
#include "support/device_check.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"

using namespace gpusim;
constexpr int kF32 = onnx::TensorProto::FLOAT;

namespace {

// The executor's run beside the CPU reference (seed 7, two timed runs).
test::PlanRun run_checked(backend::Backend& dev, const Graph& g, const Plan& plan) {
  exec::RunOptions o;
  o.seed = 7;
  o.repeat = 2;
  return test::run_plan_against_reference(dev, g, plan, o);
}

}  // namespace

TEST_CASE("relative L2 error catches NaN and shape mismatches", "[executor]") {
  cpu::HostTensor a, b;
  a.shape = b.shape = {3};
  a.r = {1, 2, 3};
  b.r = {1, 2, 3};
  CHECK(exec::relative_l2(a, b) == 0);
  a.r[1] = 2.002;
  CHECK(exec::relative_l2(a, b) == Approx(0.002 / std::sqrt(14.0)));
  a.r[1] = std::nan("");
  CHECK(std::isnan(exec::relative_l2(a, b)));  // an unwritten (poisoned) element fails any tolerance
  a.shape = {1, 3};
  a.r = b.r;
  CHECK(std::isnan(exec::relative_l2(a, b)));
}

TEST_CASE("an op without a generator runs on the host and the run says so", "[executor][device]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{4}}, test::Dim{int64_t{6}}});
  b.node("Relu", {"x"}, {"r"});
  b.initializer_i64("idx", {1, 6}, {3, 0, 2, 1, 0, 3});
  b.initializer("upd", kF32, {1, 6});
  b.node("ScatterElements", {"r", "idx", "upd"}, {"e"}).i("axis", 0);
  b.node("Neg", {"e"}, {"y"});
  b.output("y");
  const Graph g = test::build_graph(b, "exec_fallback.onnx");
  for (test::OpenDevice* d : test::logic_devices()) {
    test::OpenDevice& od = *d;
    INFO(od.backend);
    const test::PlanRun pr = run_checked(*od.dev, g, test::one_kernel_per_op(g));
    CHECK(pr.compared == test::computes(od));
    CHECK(pr.worst() < 1e-6);
    const exec::RunResult& r = pr.run;
    REQUIRE(r.kernels.size() == 3);
    CHECK(r.kernels[0].device);
    CHECK_FALSE(r.kernels[1].device);
    CHECK(r.kernels[1].cls == "host");
    CHECK(r.kernels[2].device);
    bool said = false;
    for (const auto& n : r.notes) said = said || n.find("1 ScatterElements node(s) ran on the host reference") != std::string::npos;
    CHECK(said);
  }
}

TEST_CASE("a fused plan kernel codegen cannot build runs unfused and stays correct", "[executor][device]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{3}}, test::Dim{int64_t{5}}});
  b.node("Relu", {"x"}, {"r"});
  b.node("Transpose", {"r"}, {"t"}).ints("perm", {1, 0});
  b.node("Sigmoid", {"t"}, {"y"});
  b.output("y");
  const Graph g = test::build_graph(b, "exec_split.onnx");
  Plan p;
  PlanKernel k;
  k.nodes = {0, 1, 2};  // a Transpose inside an elementwise chain: no generator fuses that
  p.kernels.push_back(k);
  classify_kernels(g, p);
  for (test::OpenDevice* d : test::logic_devices()) {
    test::OpenDevice& od = *d;
    INFO(od.backend);
    const test::PlanRun pr = run_checked(*od.dev, g, p);
    CHECK(pr.worst() < 1e-6);
    const exec::RunResult& r = pr.run;
    REQUIRE(r.kernels.size() == 1);
    CHECK_FALSE(r.kernels[0].fused_as_planned);
    CHECK(r.kernels[0].launches == 3);
    CHECK(r.kernels[0].measured_us > 0);
  }
}

TEST_CASE("views share their root's buffer across kernels", "[executor][device]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{2}}, test::Dim{int64_t{3}}, test::Dim{int64_t{4}}});
  b.node("Exp", {"x"}, {"e"});
  b.initializer_i64("shape", {2}, {6, 4});
  b.node("Reshape", {"e", "shape"}, {"v"});
  b.node("Flatten", {"v"}, {"f"}).i("axis", 1);
  b.initializer("w", kF32, {4, 3});
  b.node("MatMul", {"f", "w"}, {"y"});
  b.output("y");
  b.output("v");
  const Graph g = test::build_graph(b, "exec_views.onnx");
  for (test::OpenDevice* d : test::logic_devices()) {
    test::OpenDevice& od = *d;
    INFO(od.backend);
    const test::PlanRun pr = run_checked(*od.dev, g, test::one_kernel_per_op(g));
    CHECK(pr.worst() < 1e-5);
    CHECK(pr.run.kernels.size() == 2);  // Exp and MatMul; the views launch nothing
  }
}

TEST_CASE("activations share device buffers by lifetime and host copies go when no longer read", "[executor][device]") {
  // Twenty 4.2 MB activations in a chain, a host node (ScatterElements) reading a view of one of
  // them in the middle: 88 MB of buffers as one per tensor, about 17 MB shared. The limit lets
  // a CPU device (lavapipe: buffers in host memory) hold the shared plan and not the other.
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{1024}}, test::Dim{int64_t{1024}}});
  std::string prev = "x";
  for (int k = 0; k < 20; ++k) {
    const std::string y = "a" + std::to_string(k);
    if (k == 10) {
      b.initializer_i64("shape", {2}, {2048, 512});
      b.node("Reshape", {prev, "shape"}, {"v"});
      b.initializer_i64("idx", {1, 512}, std::vector<int64_t>(512, 1));
      b.initializer("upd", kF32, {1, 512});
      b.node("ScatterElements", {"v", "idx", "upd"}, {"s"}).i("axis", 0);
      b.initializer_i64("back", {2}, {1024, 1024});
      b.node("Reshape", {"s", "back"}, {y});
    } else {
      b.node(k % 3 == 0 ? "Sigmoid" : k % 3 == 1 ? "Neg" : "Relu", {prev}, {y});
    }
    prev = y;
  }
  b.output(prev);
  const Graph g = test::build_graph(b, "exec_shared.onnx");
  for (test::OpenDevice* d : test::logic_devices()) {
    test::OpenDevice& od = *d;
    INFO(od.backend);
    exec::RunOptions o;
    o.seed = 7;
    o.repeat = 2;  // later runs read host values dropped in the warm-up back from the device
    o.max_host_bytes = 36 << 20;  // a CPU device: 64 MB for buffers and host copies together
    const test::PlanRun pr = test::run_plan_against_reference(*od.dev, g, test::one_kernel_per_op(g), o);
    CHECK(pr.worst() < 1e-6);
    bool host = false;
    for (const auto& k : pr.run.kernels) host = host || !k.device;
    CHECK(host);
    if (!od.dev->info().is_cpu) continue;
    o.max_host_bytes = 10 << 20;  // 17.8 MB: not even the shared plan
    auto small = exec::run_plan(*od.dev, g, test::one_kernel_per_op(g), {}, o);
    REQUIRE_FALSE(small);
    CHECK(small.error().code == ErrorCode::kLimit);
    CHECK_THAT(small.error().message, Catch::Contains("needs about") &&
                                          Catch::Contains("of them activations, sharing buffers by lifetime") &&
                                          Catch::Contains("make the inputs smaller (`dims`)"));
  }
}

TEST_CASE("gpusim run on a device backend checks outputs and prints predicted beside measured", "[executor][cli]") {
  if (test::devices().empty()) return;  // devices() said why
  const std::string backend = test::devices().front().backend;
  const std::string model = test::source_dir() + "/models/mobilenet_v2.onnx";
  const test::Run r = test::run_gpusim("run " + model + " --backend " + backend +
                                       " --gpu nvidia-rtx-3060 --check --repeat 1 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["backend"] == backend);
  CHECK(j["check"][0]["pass"] == true);
  CHECK(j["check"][0]["relative_l2"].get<double>() < 1e-3);
  REQUIRE(j["kernels"].size() > 50);
  int vectorized = 0;
  for (const auto& k : j["kernels"]) {
    CHECK(k["device"] == true);
    CHECK(k["measured_us"].get<double>() > 0);
    CHECK(k["predicted_us"].get<double>() > 0);
    // The tile that ran: vector widths in elementwise kernels (MobileNetV2's Clip(0, 6)
    // activations, whose element counts are multiples of 4), convolutions and the classifier's
    // GEMM; its one reduction averages rows of 7 x 7 = 49, which no width divides.
    const int vw = k["tile"]["vector_width"].get<int>();
    if (k["class"] == "reduction" || k["class"] == "normalization") CHECK(vw == 1);
    CHECK(vw <= 8);
    vectorized += k["class"] == "elementwise" && vw > 1;
  }
  CHECK(vectorized > 0);
  const test::Run text = test::run_gpusim("run " + model + " --backend " + backend + " --gpu nvidia-rtx-3060 --repeat 1");
  CHECK_THAT(text.out, Catch::Contains("predicted_us") && Catch::Contains("measured_us") && Catch::Contains("error"));
}

TEST_CASE("gpusim run names an unavailable backend and what to install", "[executor][cli][errors]") {
  for (const std::string& b : backend::built_backends()) {
    auto d = backend::open(b, 0);
    if (d) continue;
    const test::Run r = test::run_gpusim("run " + test::source_dir() + "/models/mobilenet_v2.onnx --backend " + b);
    INFO(r.out);
    CHECK(r.rc == 1);
    CHECK_THAT(r.out, Catch::Contains(d.error().message));
  }
  auto none = backend::open("vulkan", 99);
  const auto built = backend::built_backends();
  if (std::find(built.begin(), built.end(), "vulkan") != built.end()) {
    REQUIRE_FALSE(none);
    CHECK(none.error().code == ErrorCode::kUnavailable);
  }
}

TEST_CASE("gpusim run runs and prices the split-K tiles codegen generates and vector widths only where generated", "[executor][cli]") {
  // A GEMM that leaves an H200's SMs idle: the cost model's own choice splits K, and codegen
  // builds that split.
  test::OnnxBuilder b;
  b.input("a", kF32, {test::Dim{int64_t{64}}, test::Dim{int64_t{4096}}});
  b.initializer("w", kF32, {4096, 64});
  b.node("MatMul", {"a", "w"}, {"y"}, "mm");
  b.output("y");
  const std::string model = b.write("run_split_k.onnx");
  auto g = import_onnx(model);
  REQUIRE(g);
  const DeviceModel h200 = make_device(test::gpu("nvidia-h200"));
  const KernelWork w = *node_work(*g, g->nodes[0]);
  REQUIRE(choose_tile(w, h200).split_k > 1);
  const codegen::TargetCapability cap(codegen::target_options(h200, false));
  const TileConfig t = best_generated_tile(w, h200, cap);
  CHECK(t.split_k > 1);
  CHECK(t.vector_width == 4);  // fp32 operand tiles in float4 loads: 4096 is a multiple of 4
  CHECK(kernel_cost(w, t, h200).feasible);
  const TileConfig asked{64, 64, 8, 256, 2, 8, 4, 1};
  CHECK(cap.generated(w, asked).split_k == 8);
  KernelWork short_k = w;
  short_k.k = 24;
  CHECK(cap.generated(short_k, asked).split_k == 3);  // 3 k-steps of 8: at most 3 slices
  CHECK(cap.generated(w, asked).vector_width == 4);  // a cap codegen narrows per operand
  KernelWork ew;
  ew.cls = OpClass::kElementwise;
  ew.elements = 6 * 1024;
  CHECK(cap.generated(ew, asked).vector_width == 4);
  CHECK(cap.generated(ew, asked).split_k == 1);
  ew.elements = 6;  // 4 does not divide it: 2 does
  CHECK(cap.generated(ew, asked).vector_width == 2);
  CHECK(codegen::vector_lanes(16, 1024) == 8);
  CHECK(codegen::vector_lanes(3, 1024) == 2);
  CHECK(codegen::vector_lanes(8, 7) == 1);
  CHECK(codegen::vector_lanes(0, 8) == 1);
  if (test::devices().empty()) return;  // devices() said why
  // A plan file asking for split-K runs it split, checked against the reference, predicted as run.
  Plan p;
  PlanKernel k;
  k.nodes = {0};
  k.tile = {64, 64, 8, 256, 2, 8, 1, 1};
  p.kernels.push_back(k);
  classify_kernels(*g, p);
  const std::string plan_file = test::temp_dir() + "/run_split_k.plan.json";
  {
    std::ofstream f(plan_file);
    f << plan_to_json(p, *g);
  }
  const std::string backend = test::devices().front().backend;
  const test::Run r = test::run_gpusim("run " + model + " --backend " + backend + " --plan " + plan_file +
                                       " --gpu nvidia-h200 --repeat 1 --check --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& n : j["notes"]) CHECK(n.get<std::string>().find("with the tile that runs") == std::string::npos);
  REQUIRE(j["kernels"][0].contains("tile"));
  CHECK(j["kernels"][0]["tile"]["split_k"] == 8);  // ran, and priced, split 8 ways
  CHECK(j["kernels"][0]["predicted_us"].get<double>() > 0);
}

// A Swin-style block (roll, window partition, window attention with a relative-position bias,
// window reverse, roll back, residual): the plan the search picks folds the rolls, the pad and
// the window partition into the kernels that read them, and runs as the reference computes it.
TEST_CASE("a Swin-style window attention block runs with its data movement folded", "[executor][device][folding]") {
  const int64_t H = 8, W = 8, C = 16, ws = 4, heads = 2, hd = C / heads, N = ws * ws, nw = (H / ws) * (W / ws), s = 2;
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{1}}, test::Dim{H}, test::Dim{W}, test::Dim{C}});
  int consts = 0;
  auto i64 = [&](std::vector<int64_t> v) {
    const std::string name = "c" + std::to_string(consts++);
    b.initializer_i64(name, {static_cast<int64_t>(v.size())}, v);
    return name;
  };
  auto slice = [&](const std::string& in, int64_t from, int64_t to, int64_t axis, const std::string& out) {
    b.node("Slice", {in, i64({from}), i64({to}), i64({axis})}, {out}, out);
  };
  for (const char* w : {"g", "beta"}) b.initializer(w, kF32, {C});
  b.initializer("wqkv", kF32, {C, 3 * C});
  b.initializer("bqkv", kF32, {3 * C});
  b.initializer("relpos", kF32, {heads, N, N});
  b.initializer("wproj", kF32, {C, C});
  b.initializer("bproj", kF32, {C});
  b.node("LayerNormalization", {"x", "g", "beta"}, {"ln"}, "ln").i("axis", -1);
  slice("ln", s, H, 1, "r1a");
  slice("ln", 0, s, 1, "r1b");
  b.node("Concat", {"r1a", "r1b"}, {"r1"}, "roll_h").i("axis", 1);
  slice("r1", s, W, 2, "r2a");
  slice("r1", 0, s, 2, "r2b");
  b.node("Concat", {"r2a", "r2b"}, {"rolled"}, "roll_w").i("axis", 2);
  b.node("Pad", {"rolled", i64({0, 0, 0, 0, 0, 0, 0, 0})}, {"padded"}, "pad");
  b.node("Reshape", {"padded", i64({1, H / ws, ws, W / ws, ws, C})}, {"p1"}, "p1");
  b.node("Transpose", {"p1"}, {"p2"}, "partition").ints("perm", {0, 1, 3, 2, 4, 5});
  b.node("Reshape", {"p2", i64({nw, N, C})}, {"win"}, "win");
  b.node("MatMul", {"win", "wqkv"}, {"qkv0"}, "qkv");
  b.node("Add", {"bqkv", "qkv0"}, {"qkv1"}, "qkv_bias");
  b.node("Reshape", {"qkv1", i64({nw, N, 3, heads, hd})}, {"qkv2"}, "qkv_r");
  b.node("Transpose", {"qkv2"}, {"qkv3"}, "qkv_t").ints("perm", {2, 0, 3, 1, 4});
  b.node("Split", {"qkv3", i64({1, 1, 1})}, {"q0", "k0", "v0"}, "split").i("axis", 0);
  for (const char* n : {"q", "k", "v"}) b.node("Squeeze", {std::string(n) + "0", i64({0})}, {n}, std::string(n) + "_sq");
  b.node("Constant", {}, {"scale"}, "scale").tensor("value", test::f32_tensor({}, {1.0f / std::sqrt(float(hd))}));
  b.node("Mul", {"q", "scale"}, {"qs"}, "q_scale");
  b.node("Transpose", {"k"}, {"kt"}, "k_t").ints("perm", {0, 1, 3, 2});
  b.node("MatMul", {"qs", "kt"}, {"a0"}, "qk");
  b.node("Add", {"a0", "relpos"}, {"a1"}, "bias");
  b.node("Softmax", {"a1"}, {"a2"}, "softmax").i("axis", -1);
  b.node("MatMul", {"a2", "v"}, {"o0"}, "pv");
  b.node("Transpose", {"o0"}, {"o1"}, "o_t").ints("perm", {0, 2, 1, 3});
  b.node("Reshape", {"o1", i64({nw, N, C})}, {"o2"}, "o_r");
  b.node("MatMul", {"o2", "wproj"}, {"o3"}, "proj");
  b.node("Add", {"bproj", "o3"}, {"o4"}, "proj_bias");
  b.node("Reshape", {"o4", i64({1, H / ws, W / ws, ws, ws, C})}, {"rv1"}, "rv1");
  b.node("Transpose", {"rv1"}, {"rv2"}, "reverse").ints("perm", {0, 1, 3, 2, 4, 5});
  b.node("Reshape", {"rv2", i64({1, H, W, C})}, {"rv3"}, "rv3");
  slice("rv3", H - s, H, 1, "u1a");
  slice("rv3", 0, H - s, 1, "u1b");
  b.node("Concat", {"u1a", "u1b"}, {"u1"}, "unroll_h").i("axis", 1);
  slice("u1", W - s, W, 2, "u2a");
  slice("u1", 0, W - s, 2, "u2b");
  b.node("Concat", {"u2a", "u2b"}, {"u2"}, "unroll_w").i("axis", 2);
  b.node("Add", {"x", "u2"}, {"y"}, "residual");
  b.output("y");
  const Graph g = test::build_graph(b, "swin_block.onnx");

  SearchOptions so;
  so.scheduler = SchedulerKind::kGreedy;
  auto r = search(g, test::portable(test::gpu("nvidia-rtx-3060")), so);
  REQUIRE(r);
  const Plan& plan = r->plans.front().plan;
  // The rolls, the pad and the window partition run inside other kernels; what stays a copy says why.
  int folds = 0;
  for (const PlanKernel& k : plan.kernels) {
    folds += std::count(k.fusions.begin(), k.fusions.end(), std::string("fold-data-movement")) > 0 ? 1 : 0;
  }
  CHECK(folds >= 3);
  CHECK(plan.kernels.size() < 20);
  for (const std::string& d : plan.decisions) {
    if (d.rfind("not folded:", 0) == 0) CHECK_THAT(d, Catch::Contains("stays a copy kernel: "));
  }
  for (auto& od : test::devices()) {
    INFO(od.backend);
    const test::PlanRun pr = run_checked(*od.dev, g, plan);
    CHECK(pr.worst() < 1e-5);
    for (const auto& k : pr.run.kernels) CHECK(k.fused_as_planned);
  }
}
