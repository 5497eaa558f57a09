// Conformance, written once and run on every device backend available (Vulkan on lavapipe in CI;
// CUDA and HIP where a GPU is present; each skipped with a WARN saying why where not): every
// kernel class x dtype x awkward shapes (1, primes, non-multiples of the tile) against the CPU
// reference, with per-class tolerances on the relative L2 error. Inputs and weights are fresh
// random values each run (the seed is printed on failure); every buffer a kernel writes is
// poisoned with NaN before the first launch, so an element a kernel forgets to write fails.
// Each graph runs twice: one kernel per op (eager) and as the fusion search plans it.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <cstdlib>
#include <random>

#include "executor.h"
#include "gpusim/scheduler.h"
#include "support/device_check.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"

using namespace gpusim;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

namespace {

struct Case {
  std::string name;
  std::string cls;
  double tol_fp32;
  double tol_fp16;
  std::function<void(test::OnnxBuilder&)> build;
};

test::Dim d(int64_t v) { return test::Dim{v}; }

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"elementwise broadcast add", "elementwise", 1e-6, 2e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(2), d(3), d(7), d(13)});
                 b.initializer("y", kF32, {3, 1, 1});
                 b.node("Add", {"x", "y"}, {"z"});
                 b.output("z");
               }});
  c.push_back({"elementwise silu chain", "elementwise", 1e-5, 3e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(1), d(5), d(61)});
                 b.node("Sigmoid", {"x"}, {"s"});
                 b.node("Mul", {"x", "s"}, {"m"});
                 b.initializer("k", kF32, {61});
                 b.node("Mul", {"m", "k"}, {"z"});
                 b.output("z");
               }});
  c.push_back({"elementwise gelu erf and clip", "elementwise", 1e-5, 3e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(127)});
                 b.initializer("r2", kF32, {});
                 b.node("Div", {"x", "r2"}, {"a"});
                 b.node("Erf", {"a"}, {"e"});
                 b.initializer("one", kF32, {});
                 b.node("Add", {"e", "one"}, {"f"});
                 b.node("Mul", {"x", "f"}, {"g"});
                 b.initializer("lo", kF32, {});
                 b.initializer("hi", kF32, {});
                 b.node("Clip", {"g", "lo", "hi"}, {"z"});
                 b.output("z");
               }});
  c.push_back({"elementwise compare where cast", "elementwise", 1e-6, 2e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(3), d(11)});
                 b.input("y", kF32, {d(1), d(11)});
                 b.node("Less", {"x", "y"}, {"c"});
                 b.node("Where", {"c", "x", "y"}, {"w"});
                 b.node("Cast", {"c"}, {"cf"}).i("to", kF32);
                 b.node("Add", {"w", "cf"}, {"z"});
                 b.output("z");
               }});
  // 192 elements: every vector width divides it. y is contiguous over a vector step (a run of 16
  // equal trailing dims), s is not (one value per 16-element row), the bool c and the int32 cast
  // are stored as int vectors, and eager plans load c back as one. c compares with zero, which
  // fp16 rounding cannot flip (a comparison of two random values can, against the reference).
  c.push_back({"elementwise vector lanes broadcast and int", "elementwise", 1e-6, 2e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(2), d(6), d(16)});
                 b.initializer("y", kF32, {16});
                 b.initializer("s", kF32, {6, 1});
                 b.node("Add", {"x", "y"}, {"a"});
                 b.node("Mul", {"a", "s"}, {"m"});
                 b.initializer("zero", kF32, {});
                 b.node("Less", {"x", "zero"}, {"c"});
                 b.node("Where", {"c", "m", "x"}, {"z"});
                 b.node("Cast", {"c"}, {"q"}).i("to", onnx::TensorProto::INT32);
                 b.output("z");
                 b.output("c");
                 b.output("q");
               }});
  for (const auto& mkn : {std::array<int64_t, 3>{1, 1, 1}, {7, 13, 61}, {127, 64, 33}, {64, 64, 64}}) {
    const int64_t m = mkn[0], k = mkn[1], n = mkn[2];  // named (clang 14 cannot capture structured bindings)
    c.push_back({fmt::format("gemm matmul {}x{}x{}", m, k, n), "gemm", 1e-5, 5e-3, [m, k, n](test::OnnxBuilder& b) {
                   b.input("a", kF32, {d(m), d(k)});
                   b.initializer("w", kF32, {k, n});
                   b.node("MatMul", {"a", "w"}, {"y"});
                   b.output("y");
                 }});
  }
  c.push_back({"gemm batched matmul with relu epilogue", "gemm", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("a", kF32, {d(2), d(3), d(17), d(19)});
                 b.input("bm", kF32, {d(2), d(3), d(19), d(5)});
                 b.node("MatMul", {"a", "bm"}, {"y"});
                 b.node("Relu", {"y"}, {"z"});
                 b.output("z");
               }});
  c.push_back({"gemm transB with bias", "gemm", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("a", kF32, {d(5), d(37)});
                 b.initializer("w", kF32, {11, 37});
                 b.initializer("bias", kF32, {11});
                 b.node("Gemm", {"a", "w", "bias"}, {"y"}).i("transB", 1).f("alpha", 0.5f);
                 b.output("y");
               }});
  // Extents and strides multiples of 8, so every vector width applies: A read along m (transA),
  // B along k (transB), batch offsets, and weight rows of a convolution with K = 8 * 3 * 3.
  c.push_back({"gemm transA transB aligned", "gemm", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("a", kF32, {d(24), d(16)});
                 b.initializer("w", kF32, {40, 24});
                 b.node("Gemm", {"a", "w"}, {"y"}).i("transA", 1).i("transB", 1);
                 b.output("y");
               }});
  c.push_back({"gemm batched matmul aligned", "gemm", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("a", kF32, {d(2), d(3), d(16), d(24)});
                 b.input("bm", kF32, {d(2), d(3), d(24), d(40)});
                 b.node("MatMul", {"a", "bm"}, {"y"});
                 b.output("y");
               }});
  c.push_back({"conv 3x3 aligned channels", "conv", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(1), d(8), d(9), d(7)});
                 b.initializer("w", kF32, {16, 8, 3, 3});
                 b.node("Conv", {"x", "w"}, {"y"}).ints("pads", {1, 1, 1, 1});
                 b.output("y");
               }});
  c.push_back({"conv 3x3 stride 2 pad 1 with bias and relu", "conv", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(1), d(3), d(13), d(11)});
                 b.initializer("w", kF32, {5, 3, 3, 3});
                 b.initializer("bias", kF32, {5});
                 b.node("Conv", {"x", "w", "bias"}, {"y"}).ints("pads", {1, 1, 1, 1}).ints("strides", {2, 2});
                 b.node("Relu", {"y"}, {"z"});
                 b.output("z");
               }});
  c.push_back({"conv depthwise 3x3", "conv", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(2), d(7), d(9), d(9)});
                 b.initializer("w", kF32, {7, 1, 3, 3});
                 b.node("Conv", {"x", "w"}, {"y"}).ints("pads", {1, 1, 1, 1}).i("group", 7);
                 b.output("y");
               }});
  c.push_back({"conv 1x1 with residual add", "conv", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(1), d(19), d(5), d(7)});
                 b.initializer("w", kF32, {19, 19, 1, 1});
                 b.node("Conv", {"x", "w"}, {"y"});
                 b.node("Add", {"y", "x"}, {"z"});
                 b.output("z");
               }});
  c.push_back({"reduction mean and softmax", "reduction", 1e-5, 3e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(3), d(5), d(67)});
                 b.node("ReduceMean", {"x"}, {"m"}).ints("axes", {2}).i("keepdims", 1);
                 b.node("Softmax", {"x"}, {"s"}).i("axis", -1);
                 b.node("Sub", {"s", "m"}, {"z"});
                 b.output("z");
               }});
  c.push_back({"normalization layernorm", "normalization", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(1), d(7), d(97)});
                 b.initializer("g", kF32, {97});
                 b.initializer("bb", kF32, {97});
                 b.node("LayerNormalization", {"x", "g", "bb"}, {"y"}).i("axis", -1).f("epsilon", 1e-5f);
                 b.output("y");
               }});
  c.push_back({"normalization groupnorm as instancenorm", "normalization", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(1), d(6), d(5), d(5)});
                 b.initializer_i64("s1", {3}, {1, 3, -1});
                 b.node("Reshape", {"x", "s1"}, {"r"});
                 b.initializer("ones", kF32, {3});
                 b.initializer("zeros", kF32, {3});
                 b.node("InstanceNormalization", {"r", "ones", "zeros"}, {"n"}).f("epsilon", 1e-5f);
                 b.initializer_i64("s2", {4}, {1, 6, 5, 5});
                 b.node("Reshape", {"n", "s2"}, {"y"});
                 b.initializer("gamma", kF32, {6, 1, 1});
                 b.node("Mul", {"y", "gamma"}, {"z"});
                 b.output("z");
               }});
  // Rows of 64 and 128 contiguous elements, so the row loads take every vector width; the
  // middle-axis sum is not contiguous and loads scalars whatever the width.
  c.push_back({"reduction aligned rows softmax layernorm argmax", "normalization", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(3), d(5), d(128)});
                 b.node("Softmax", {"x"}, {"s"}).i("axis", -1);
                 b.initializer("g", kF32, {128});
                 b.initializer("bb", kF32, {128});
                 b.node("LayerNormalization", {"x", "g", "bb"}, {"y"}).i("axis", -1).f("epsilon", 1e-5f);
                 b.node("ReduceMax", {"x"}, {"mx"}).ints("axes", {2}).i("keepdims", 1);
                 b.initializer_i64("sum_axes", {1}, {1});  // an input since opset 13 (ReduceMax: 18)
                 b.node("ReduceSum", {"x", "sum_axes"}, {"ms"}).i("keepdims", 1);
                 b.node("Add", {"s", "y"}, {"z"});
                 b.node("Add", {"mx", "ms"}, {"w"});
                 b.output("z");
                 b.output("w");
               }});
  c.push_back({"reduction pooling", "reduction", 1e-6, 2e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(1), d(3), d(11), d(11)});
                 b.node("MaxPool", {"x"}, {"p"}).ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1});
                 b.node("GlobalAveragePool", {"p"}, {"z"});
                 b.output("z");
                 b.output("p");
               }});
  c.push_back({"data transpose concat slice", "data-movement", 1e-7, 1e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(2), d(3), d(5)});
                 b.node("Transpose", {"x"}, {"t"}).ints("perm", {2, 0, 1});
                 b.node("Concat", {"t", "t"}, {"c"}).i("axis", 1);
                 b.initializer_i64("st", {1}, {1});
                 b.initializer_i64("en", {1}, {4});
                 b.initializer_i64("ax", {1}, {1});
                 b.node("Slice", {"c", "st", "en", "ax"}, {"z"});
                 b.output("z");
               }});
  c.push_back({"data gather and resize", "data-movement", 1e-7, 1e-3, [](test::OnnxBuilder& b) {
                 b.input("x", kF32, {d(1), d(2), d(3), d(5)});
                 b.initializer_i64("idx", {2}, {2, 0});
                 b.node("Gather", {"x", "idx"}, {"g"}).i("axis", 3);
                 b.node("Resize", {"g", "", "sc"}, {"z"}).s("mode", "nearest");
                 b.output("z");
               }});
  c.push_back({"attention qk softmax pv", "attention", 1e-5, 5e-3, [](test::OnnxBuilder& b) {
                 b.input("q", kF32, {d(2), d(13), d(16)});
                 b.input("k", kF32, {d(2), d(13), d(16)});
                 b.input("v", kF32, {d(2), d(13), d(16)});
                 b.node("Transpose", {"k"}, {"kt"}).ints("perm", {0, 2, 1});
                 b.node("MatMul", {"q", "kt"}, {"s"});
                 b.initializer("scale", kF32, {});
                 b.node("Mul", {"s", "scale"}, {"ss"});
                 b.node("Softmax", {"ss"}, {"p"}).i("axis", -1);
                 b.node("MatMul", {"p", "v"}, {"o"});
                 b.output("o");
               }});
  return c;
}

Plan fused(const Graph& g) {
  const FusionSpace s(g, test::portable(test::gpu("nvidia-a100-80gb")));
  return s.build(Decision(s.candidates().size(), 1), SchedulerKind::kGreedy);
}

}  // namespace

TEST_CASE("conformance: every kernel class on every available device backend against the CPU reference",
          "[conformance]") {
  std::random_device rd;
  for (auto& od : test::devices()) {
    backend::Backend& dev = *od.dev;
    for (const Case& cs : cases()) {
      test::OnnxBuilder b;
      cs.build(b);
      // Resize's scales: a constant input the builder cannot express with data for floats.
      if (cs.name == "data gather and resize") {
        b.graph().mutable_node(1)->set_input(2, "sc");
        *b.graph().add_initializer() = test::f32_tensor({4}, {1, 1, 2, 2});
        b.graph().mutable_initializer(b.graph().initializer_size() - 1)->set_name("sc");
      }
      for (const char* tn : {"r2", "one", "lo", "hi", "scale", "zero"}) {
        for (auto& init : *b.graph().mutable_initializer()) {
          if (init.name() != tn || init.float_data_size() > 0) continue;
          const float v = std::string(tn) == "r2" ? 1.41421356f : std::string(tn) == "one" ? 1.0f
                          : std::string(tn) == "lo" ? -0.2f : std::string(tn) == "hi" ? 0.3f
                          : std::string(tn) == "zero" ? 0.0f : 0.25f;
          init.add_float_data(v);
        }
      }
      const std::string file = "conf_" + std::to_string(std::hash<std::string>{}(cs.name)) + ".onnx";
      const std::string path = b.write(file);
      auto g0 = import_onnx(path);
      INFO(cs.name << ": " << (g0 ? std::string() : g0.error().message));
      REQUIRE(g0);
      auto weights = read_model_tensors(path);
      REQUIRE(weights);
      for (DType dt : {DType::kFloat32, DType::kFloat16}) {
        if (dt == DType::kFloat16 && !dev.info().fp16) {
          WARN(od.backend << ": no fp16 storage on " << dev.info().name << "; fp16 cases skipped");
          continue;
        }
        const Graph g = dt == DType::kFloat32 ? *g0 : retype(*g0, dt);
        // fp16 GEMMs and convolutions run on matrix units where the device has a path; both that
        // and the SIMT loop are checked. Where it has none, the portable matrix kernel (the same
        // tiles and fragments, computed by the warp's threads) stands in, so CI checks its structure.
        std::vector<std::optional<codegen::MatrixPath>> paths = {std::nullopt};
        if (dt == DType::kFloat16 && (cs.cls == "gemm" || cs.cls == "conv")) {
          const codegen::MatrixPath own = codegen::matrix_path_for(dev.info());
          paths = {codegen::MatrixPath::kNone, own == codegen::MatrixPath::kNone ? codegen::MatrixPath::kPortable : own};
        }
        // Elementwise, GEMM, convolution, reduction and normalization kernels also run with each
        // vector width forced on every kernel (0: the plan's own); an elementwise kernel narrows a
        // width that does not divide its elements, a GEMM loads an operand whose strides do not
        // allow it in scalars, a row reduction whose rows are not contiguous too.
        std::vector<int> widths = {0};
        if (cs.cls == "elementwise") widths = {0, 2, 4, 8};
        if (cs.cls == "gemm" || cs.cls == "conv") widths = {0, 1, 8};
        if (cs.cls == "reduction" || cs.cls == "normalization") widths = {0, 1, 8};
        for (const auto& mpath : paths)
        for (int vw : widths)
        for (bool fuse : {false, true}) {
          // GPUSIM_CONFORMANCE_SEED replays a failure's printed seed.
          const char* fixed = std::getenv("GPUSIM_CONFORMANCE_SEED");
          const uint64_t seed = fixed ? std::strtoull(fixed, nullptr, 10) : (static_cast<uint64_t>(rd()) << 32) | rd();
          INFO(od.backend << " / " << cs.name << " / " << dtype_name(dt) << (fuse ? " / fused" : " / eager")
                          << (mpath ? " / matrix path " + std::string(codegen::matrix_path_name(*mpath)) : "")
                          << (vw ? " / vector width " + std::to_string(vw) : "") << " / seed " << seed);
          Plan plan = fuse ? fused(g) : test::one_kernel_per_op(g);
          if (vw) {
            for (PlanKernel& k : plan.kernels) k.tile.vector_width = vw;
          }
          exec::RunOptions o;
          o.weights = &*weights;
          o.seed = seed;
          o.repeat = 1;
          o.poison = true;
          o.fp16_storage = dt == DType::kFloat16;
          o.matrix = mpath;
          const test::PlanRun r = test::run_plan_against_reference(dev, g, plan, o);
          std::string notes;
          for (const auto& n : r.run.notes) notes += n + "\n";
          INFO(notes);
          for (const auto& k : r.run.kernels) CHECK(k.device);  // every class has a generator
          for (size_t k = 0; k < r.errors.size(); ++k) {
            INFO("output " << k << " relative L2 " << r.errors[k]);
            CHECK(r.errors[k] <= (dt == DType::kFloat32 ? cs.tol_fp32 : cs.tol_fp16));
          }
        }
      }
    }
  }
}
