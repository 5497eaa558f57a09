// Shape arithmetic as PyTorch exports it, folded at import so every shape ends static.
#include <catch2/catch.hpp>

#include "gpusim/onnx_import.h"
#include "support/onnx_builder.h"

using gpusim::Shape;
using gpusim::test::OnnxBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

namespace {

const gpusim::Tensor& out(const gpusim::Graph& g, const std::string& name) { return g.tensor(*g.find(name)); }

gpusim::Graph import_ok(const OnnxBuilder& b, const std::string& file, gpusim::ImportOptions opts = {}) {
  auto g = gpusim::import_onnx(b.write(file), opts);
  if (!g) FAIL(g.error().message);
  return std::move(*g);
}

}  // namespace

TEST_CASE("Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds to a static shape", "[import][folding]") {
  // x: [batch, seq, 768] -> reshape to [batch, seq, 12, 64] with the batch and seq read at run time.
  OnnxBuilder b(13);
  b.input("x", kF32, {std::string("batch"), std::string("seq"), int64_t{768}});
  b.node("Shape", {"x"}, {"s"});
  b.initializer_i64("i0", {}, {0});
  b.initializer_i64("i1", {}, {1});
  b.initializer_i64("ax0", {1}, {0});
  b.initializer_i64("heads", {1}, {12});
  b.initializer_i64("hd", {1}, {64});
  b.node("Gather", {"s", "i0"}, {"b"}).i("axis", 0);
  b.node("Gather", {"s", "i1"}, {"t"}).i("axis", 0);
  b.node("Unsqueeze", {"b", "ax0"}, {"b1"});
  b.node("Unsqueeze", {"t", "ax0"}, {"t1"});
  b.node("Concat", {"b1", "t1", "heads", "hd"}, {"target"}).i("axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y");
  gpusim::ImportOptions opts;
  opts.dims = {{"batch", 2}, {"seq", 128}};
  auto g = import_ok(b, "fold_reshape.onnx", opts);
  CHECK(out(g, "y").shape == Shape{2, 128, 12, 64});
  const auto& target = out(g, "target");
  REQUIRE(target.value);
  CHECK(target.value->ints == std::vector<int64_t>{2, 128, 12, 64});
  // Everything but the Reshape itself was computed at import.
  int runtime = 0;
  for (const auto& n : g.nodes) runtime += n.folded ? 0 : 1;
  CHECK(runtime == 1);
}

TEST_CASE("Expand and Slice and Range targets computed from shapes fold", "[import][folding]") {
  OnnxBuilder b(13);
  b.input("x", kF32, {int64_t{4}, std::string("n")});
  b.node("Shape", {"x"}, {"s"});
  b.initializer_i64("one", {1}, {1});
  b.initializer_i64("two", {1}, {2});
  b.initializer_i64("zero", {1}, {0});
  b.initializer_i64("neg1", {1}, {-1});
  // n = s[1:2]; Range(0, n, 1) -> [n]
  b.node("Slice", {"s", "one", "two"}, {"n1"});
  b.node("Squeeze", {"n1", "zero"}, {"n0"});
  b.initializer_i64("start", {}, {0});
  b.initializer_i64("step", {}, {1});
  b.node("Range", {"start", "n0", "step"}, {"pos"});
  // Expand pos to [4, n] using the shape itself
  b.node("Expand", {"pos", "s"}, {"grid"});
  // Slice x[:, 1:-1] with ends computed: n - 1
  b.node("Sub", {"n1", "one"}, {"end"});
  b.node("Slice", {"x", "one", "end", "one"}, {"mid"});
  // ConstantOfShape over the computed shape
  b.node("ConstantOfShape", {"s"}, {"zeros"});
  b.output("grid");
  b.output("mid");
  b.output("zeros");
  gpusim::ImportOptions opts;
  opts.dims = {{"n", 10}};
  auto g = import_ok(b, "fold_expand.onnx", opts);
  CHECK(out(g, "pos").shape == Shape{10});
  CHECK(out(g, "grid").shape == Shape{4, 10});
  CHECK(out(g, "mid").shape == Shape{4, 8});
  CHECK(out(g, "zeros").shape == Shape{4, 10});
  CHECK(out(g, "zeros").dtype == gpusim::DType::kFloat32);
  REQUIRE(out(g, "pos").value);
  CHECK(out(g, "pos").value->ints == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("opset-dependent forms: attributes before and inputs after", "[import][folding]") {
  SECTION("Squeeze/Unsqueeze/ReduceSum axes as attributes (opset 11)") {
    OnnxBuilder b(11);
    b.input("x", kF32, {int64_t{2}, int64_t{1}, int64_t{5}});
    b.node("Squeeze", {"x"}, {"a"}).ints("axes", {1});
    b.node("Unsqueeze", {"a"}, {"u"}).ints("axes", {0, 3});
    b.node("ReduceSum", {"u"}, {"r"}).ints("axes", {2}).i("keepdims", 0);
    b.node("Split", {"x"}, {"p", "q"}).i("axis", 2).ints("split", {2, 3});
    b.output("r");
    b.output("q");
    auto g = import_ok(b, "opset11.onnx");
    CHECK(out(g, "u").shape == Shape{1, 2, 5, 1});
    CHECK(out(g, "r").shape == Shape{1, 2, 1});
    CHECK(out(g, "q").shape == Shape{2, 1, 3});
  }
  SECTION("axes as inputs, Split num_outputs, Pad axes (opset 18)") {
    OnnxBuilder b(18);
    b.input("x", kF32, {int64_t{2}, int64_t{8}, int64_t{5}});
    b.initializer_i64("ax", {1}, {1});
    b.node("ReduceMean", {"x", "ax"}, {"m"});
    b.node("Split", {"x"}, {"p", "q", "r"}).i("axis", 1).i("num_outputs", 3);
    b.initializer_i64("pads", {2}, {1, 2});
    b.initializer_i64("pax", {1}, {2});
    b.node("Pad", {"x", "pads", "", "pax"}, {"padded"});
    b.output("m");
    b.output("r");
    b.output("padded");
    auto g = import_ok(b, "opset18.onnx");
    CHECK(out(g, "m").shape == Shape{2, 1, 5});
    CHECK(out(g, "p").shape == Shape{2, 3, 5});
    CHECK(out(g, "r").shape == Shape{2, 2, 5});
    CHECK(out(g, "padded").shape == Shape{2, 8, 8});
  }
}

TEST_CASE("conv and pool window arithmetic", "[import][shapes]") {
  OnnxBuilder b(17);
  b.input("x", kF32, {int64_t{1}, int64_t{3}, int64_t{224}, int64_t{224}});
  b.initializer("w", kF32, {64, 3, 7, 7});
  b.node("Conv", {"x", "w"}, {"c"}).ints("strides", {2, 2}).ints("pads", {3, 3, 3, 3});
  b.node("MaxPool", {"c"}, {"p"}).ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1});
  b.node("AveragePool", {"p"}, {"a"}).ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).i("ceil_mode", 1);
  b.node("Conv", {"x", "w"}, {"same"}).s("auto_pad", "SAME_UPPER").ints("strides", {2, 2});
  b.initializer("wt", kF32, {64, 32, 4, 4});
  b.node("ConvTranspose", {"p", "wt"}, {"up"}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1});
  b.output("a");
  b.output("same");
  b.output("up");
  auto g = import_ok(b, "window.onnx");
  CHECK(out(g, "c").shape == Shape{1, 64, 112, 112});
  CHECK(out(g, "p").shape == Shape{1, 64, 56, 56});
  CHECK(out(g, "a").shape == Shape{1, 64, 28, 28});  // ceil((56 - 3) / 2) + 1 = 28
  CHECK(out(g, "same").shape == Shape{1, 64, 112, 112});
  CHECK(out(g, "up").shape == Shape{1, 32, 112, 112});
}

TEST_CASE("MatMul broadcasting and Gemm transposes and Einsum", "[import][shapes]") {
  OnnxBuilder b(17);
  b.input("q", kF32, {int64_t{2}, int64_t{12}, int64_t{128}, int64_t{64}});
  b.input("k", kF32, {int64_t{2}, int64_t{12}, int64_t{64}, int64_t{128}});
  b.node("MatMul", {"q", "k"}, {"s"});
  b.input("a", kF32, {int64_t{16}, int64_t{32}});
  b.initializer("bw", kF32, {10, 32});
  b.node("Gemm", {"a", "bw"}, {"g"}).i("transB", 1);
  b.node("Einsum", {"q", "k"}, {"e"}).s("equation", "bhqd,bhdk->bhqk");
  b.input("v", kF32, {int64_t{64}});
  b.node("MatMul", {"q", "v"}, {"mv"});
  b.output("s");
  b.output("g");
  b.output("e");
  b.output("mv");
  auto g = import_ok(b, "gemm.onnx");
  CHECK(out(g, "s").shape == Shape{2, 12, 128, 128});
  CHECK(out(g, "g").shape == Shape{16, 10});
  CHECK(out(g, "e").shape == Shape{2, 12, 128, 128});
  CHECK(out(g, "mv").shape == Shape{2, 12, 128});
}
