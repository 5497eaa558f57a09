// The CPU reference against the ONNX project's test data: every graph in simple/,
// pytorch-converted/ and pytorch-operator/ runs on its stored inputs and must reproduce the stored
// outputs within the ONNX runner's tolerance (rtol 1e-3, atol 1e-7). Skips are listed with their
// reason. Skipped, saying so, where ../shared/onnx-testdata is absent.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "gpusim/onnx_import.h"
#include "gpusim/op_catalog.h"
#include "gpusim/tensor_data.h"
#include "reference.h"
#include "support/onnx_builder.h"
#include "support/skip.h"

namespace fs = std::filesystem;
using namespace gpusim;

namespace {

// Graphs the reference does not run yet, each with the reason.
const std::map<std::string, std::string>& skips() {
  static const std::map<std::string, std::string> s = {};
  return s;
}

// ONNX runner semantics: |got - want| <= atol + rtol * |want|; NaN matches NaN.
std::string compare(const cpu::HostTensor& got, const TensorData& want) {
  if (got.shape != want.shape) return fmt::format("shape {} != {}", shape_str(got.shape), shape_str(want.shape));
  const auto n = static_cast<size_t>(got.elements());
  if (want.dtype == DType::kString) {
    for (size_t k = 0; k < n; ++k) {
      if (got.s.at(k) != want.strings.at(k)) return fmt::format("element {}: \"{}\" != \"{}\"", k, got.s[k], want.strings[k]);
    }
    return {};
  }
  for (size_t k = 0; k < n; ++k) {
    const double g = got.real(static_cast<int64_t>(k));
    const double w = dtype_is_float(want.dtype) ? want.reals.at(k) : static_cast<double>(want.ints.at(k));
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= 1e-7 + 1e-3 * std::fabs(w))) {
      return fmt::format("element {}: {} != {} (of {})", k, g, w, n);
    }
  }
  return {};
}

}  // namespace

TEST_CASE("the CPU reference reproduces the ONNX test data", "[cpu][testdata]") {
  const std::string root = test::onnx_testdata_dir();
  if (root.empty()) {
    SKIPPED("../shared/onnx-testdata not found (set GPUSIM_ONNX_TESTDATA to its path)");
    return;
  }
  int passed = 0, skipped = 0, compared = 0;
  std::vector<std::string> failures;
  for (const char* suite : {"simple", "pytorch-converted", "pytorch-operator"}) {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(root) / suite)) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& dir : dirs) {
      const std::string name = dir.filename().string();
      if (skips().count(name)) {
        ++skipped;
        continue;
      }
      const fs::path data = dir / "test_data_set_0";
      std::vector<cpu::HostTensor> inputs;
      for (int k = 0; fs::exists(data / fmt::format("input_{}.pb", k)); ++k) {
        auto t = read_tensor_file((data / fmt::format("input_{}.pb", k)).string());
        if (!t) {
          failures.push_back(name + ": " + t.error().message);
          break;
        }
        inputs.push_back(cpu::from_data(*t));
      }
      // The stored inputs fix every input dim, symbolic ones included (as --dim would).
      ImportOptions opts;
      const auto names = test::graph_input_names((dir / "model.onnx").string());
      for (size_t k = 0; k < inputs.size() && k < names.size(); ++k) {
        for (size_t ax = 0; ax < inputs[k].shape.size(); ++ax) {
          opts.dims[fmt::format("{}:{}", names[k], ax)] = inputs[k].shape[ax];
        }
      }
      auto g = import_onnx((dir / "model.onnx").string(), opts);
      if (!g) {
        failures.push_back(name + ": import: " + g.error().message);
        continue;
      }
      auto weights = read_model_tensors((dir / "model.onnx").string());
      if (!weights) {
        failures.push_back(name + ": " + weights.error().message);
        continue;
      }
      cpu::RunOptions ro;
      ro.weights = &*weights;
      auto r = cpu::run_reference(*g, inputs, ro);
      if (!r) {
        failures.push_back(name + ": " + r.error().message);
        continue;
      }
      bool ok = true;
      for (size_t k = 0; k < r->outputs.size(); ++k) {
        const fs::path want_path = data / fmt::format("output_{}.pb", k);
        if (!fs::exists(want_path)) continue;
        auto want = read_tensor_file(want_path.string());
        if (!want) {
          failures.push_back(name + ": " + want.error().message);
          ok = false;
          break;
        }
        ++compared;
        const std::string diff = compare(r->outputs[k], *want);
        if (!diff.empty()) {
          failures.push_back(fmt::format("{}: output {}: {}", name, k, diff));
          ok = false;
        }
      }
      passed += ok;
    }
  }
  for (const auto& f : failures) INFO(f);
  INFO(fmt::format("{} passed, {} skipped, {} failed", passed, skipped, failures.size()));
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(passed + skipped >= 140);
  CHECK(compared >= 140);  // every graph checked against at least one stored output
}

// Inputs `predict` accepts that the reference must refuse with the node named, never crash on:
// values that do not fit the shapes, a type the op does not take, a graph too big for the host.
TEST_CASE("the CPU reference names the node whose values or types do not fit, and refuses what the host cannot hold",
          "[cpu][errors]") {
  constexpr int kF32 = onnx::TensorProto::FLOAT;
  SECTION("ReverseSequence: a sequence length past the time axis") {
    test::OnnxBuilder b;
    b.input("x", kF32, {int64_t{4}, int64_t{2}, int64_t{3}});
    b.initializer_i64("lens", {2}, {5, 1});
    b.node("ReverseSequence", {"x", "lens"}, {"y"}, "rev").i("batch_axis", 1).i("time_axis", 0);
    b.output("y");
    auto g = import_onnx(b.write("reverse_sequence_long.onnx"));
    REQUIRE(g);
    auto r = cpu::run_reference(*g, {});
    REQUIRE(!r);
    CHECK_THAT(r.error().message, Catch::Contains("node \"rev\" (ReverseSequence): sequence_lens[0] = 5 is outside 0..4 "
                                                  "(the time axis 0)"));
  }
  SECTION("Relu on strings") {  // refused at import (the schema's type check) before a kernel could read it
    test::OnnxBuilder b;
    b.input("x", onnx::TensorProto::STRING, {int64_t{3}});
    b.node("Relu", {"x"}, {"y"}, "relu");
    b.output("y");
    auto g = import_onnx(b.write("string_relu.onnx"));
    REQUIRE_FALSE(g);
    CHECK_THAT(g.error().message, Catch::Contains("node \"relu\" (Relu): input 0 (\"x\") is string"));
  }
  SECTION("a graph bigger than the host memory limit") {
    test::OnnxBuilder b;
    b.input("x", kF32, {int64_t{65536}, int64_t{65536}});
    b.node("Relu", {"x"}, {"y"}, "relu");
    b.output("y");
    auto g = import_onnx(b.write("huge_relu.onnx"));
    REQUIRE(g);
    cpu::RunOptions o;
    o.max_host_bytes = int64_t{8} << 30;
    auto r = cpu::run_reference(*g, {}, o);
    REQUIRE(!r);
    CHECK(r.error().code == ErrorCode::kLimit);
    CHECK_THAT(r.error().message, Catch::Contains("the CPU reference would hold at least 34.4 GB on the host at once"));
    CHECK_THAT(r.error().message, Catch::Contains("over its limit of 8.6 GB"));
    CHECK_THAT(r.error().message, Catch::Contains("\"x\" [65536, 65536] (34.4 GB)"));
  }
  SECTION("a chain whose tensors sum past the limit runs: each value is freed after its last reader") {
    // Ten 8.4 MB activations (92 MB with the input) under a 42 MB limit: at most two live at once.
    test::OnnxBuilder b;
    b.input("x", kF32, {int64_t{1024}, int64_t{1024}});
    std::string prev = "x";
    for (int k = 0; k < 10; ++k) {
      const std::string y = "y" + std::to_string(k);
      b.node(k % 2 ? "Neg" : "Relu", {prev}, {y}, "n" + std::to_string(k));
      prev = y;
    }
    b.output(prev);
    auto g = import_onnx(b.write("relu_chain.onnx"));
    REQUIRE(g);
    cpu::RunOptions o;
    o.max_host_bytes = 40 << 20;
    auto r = cpu::run_reference(*g, {}, o);
    REQUIRE(r);
    REQUIRE(r->outputs.size() == 1);
    CHECK(r->outputs[0].elements() == 1024 * 1024);
    CHECK(r->outputs[0].r[5] <= 0);  // Relu then Neg, five times
    o.max_host_bytes = 12 << 20;  // under two live tensors: refused
    auto small = cpu::run_reference(*g, {}, o);
    REQUIRE_FALSE(small);
    CHECK_THAT(small.error().message, Catch::Contains("would hold at least 16.8 MB on the host at once"));
    CHECK_THAT(small.error().message, Catch::Contains("over its limit of 12.6 MB"));
  }
}

// backends/README.md says every catalog op has a reference kernel; QLinearConv had none (the
// catalog priced it, `run` refused it).
TEST_CASE("every op the catalog prices has a CPU reference kernel", "[cpu]") {
  const auto& table = gpusim::cpu::kernels();
  for (const std::string& op : gpusim::supported_ops()) {
    INFO(op);
    CHECK(table.count(op) == 1);
  }
}
