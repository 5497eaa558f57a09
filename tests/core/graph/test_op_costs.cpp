// Per-op MACs, FLOPs by kind and bytes against hand calculations.
#include <catch2/catch.hpp>

#include "gpusim/onnx_import.h"
#include "gpusim/op_catalog.h"
#include "support/onnx_builder.h"

using gpusim::OpClass;
using gpusim::OpCost;
using gpusim::test::OnnxBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kF16 = onnx::TensorProto::FLOAT16;

namespace {

// Imports the builder's model and returns the cost of the node named `name`.
OpCost cost_of(const OnnxBuilder& b, const std::string& name) {
  static int counter = 0;
  auto g = gpusim::import_onnx(b.write("cost_" + std::to_string(++counter) + ".onnx"));
  if (!g) FAIL(g.error().message);
  for (const auto& n : g->nodes) {
    if (n.name == name) return gpusim::op_cost(*g, n);
  }
  FAIL("no node " + name);
  return {};
}

}  // namespace

TEST_CASE("Conv: MACs = out x C/group x kernel - FLOPs = 2 MACs + bias", "[catalog]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{64}, int64_t{56}, int64_t{56}});
  b.initializer("w", kF32, {128, 32, 3, 3});
  b.initializer("bias", kF32, {128});
  b.node("Conv", {"x", "w", "bias"}, {"y"}, "conv").i("group", 2).ints("pads", {1, 1, 1, 1});
  b.output("y");
  const OpCost c = cost_of(b, "conv");
  const int64_t out = 128LL * 56 * 56;
  CHECK(c.cls == OpClass::kConv);
  CHECK(c.macs == out * 32 * 9);
  CHECK(c.flops.fma == 2 * out * 32 * 9 + out);
  CHECK(c.flops.transcendental == 0);
  CHECK(c.bytes_read == 4 * (64LL * 56 * 56 + 128 * 32 * 9 + 128));
  CHECK(c.bytes_written == 4 * out);
}

TEST_CASE("ConvTranspose: MACs = input x M/group x kernel", "[catalog]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{8}, int64_t{16}, int64_t{16}});
  b.initializer("w", kF32, {8, 4, 4, 4});
  b.node("ConvTranspose", {"x", "w"}, {"y"}, "ct").ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1});
  b.output("y");
  const OpCost c = cost_of(b, "ct");
  CHECK(c.macs == 8LL * 16 * 16 * 4 * 16);
  CHECK(c.bytes_written == 4LL * 4 * 32 * 32);
}

TEST_CASE("MatMul and Gemm: MACs = batch x M x N x K and fp16 halves the bytes", "[catalog]") {
  OnnxBuilder b;
  b.input("a", kF16, {int64_t{4}, int64_t{128}, int64_t{256}});
  b.initializer("w", kF16, {256, 512});
  b.node("MatMul", {"a", "w"}, {"y"}, "mm");
  b.input("x", kF32, {int64_t{32}, int64_t{100}});
  b.initializer("gw", kF32, {10, 100});
  b.initializer("gb", kF32, {10});
  b.node("Gemm", {"x", "gw", "gb"}, {"z"}, "gemm").i("transB", 1);
  b.output("y");
  b.output("z");
  const OpCost mm = cost_of(b, "mm");
  CHECK(mm.cls == OpClass::kGemm);
  CHECK(mm.macs == 4LL * 128 * 512 * 256);
  CHECK(mm.flops.fma == 2 * mm.macs);
  CHECK(mm.bytes_read == 2 * (4LL * 128 * 256 + 256 * 512));
  CHECK(mm.bytes_written == 2 * 4LL * 128 * 512);
  const OpCost gemm = cost_of(b, "gemm");
  CHECK(gemm.macs == 32LL * 10 * 100);
  CHECK(gemm.flops.fma == 2 * 32LL * 10 * 100 + 2 * 32 * 10);  // + beta*C and the add
}

TEST_CASE("Einsum: MACs = product of every index extent", "[catalog]") {
  OnnxBuilder b;
  b.input("q", kF32, {int64_t{2}, int64_t{8}, int64_t{64}, int64_t{32}});
  b.input("k", kF32, {int64_t{2}, int64_t{8}, int64_t{64}, int64_t{32}});
  b.node("Einsum", {"q", "k"}, {"s"}, "ein").s("equation", "bhid,bhjd->bhij");
  b.output("s");
  const OpCost c = cost_of(b, "ein");
  CHECK(c.macs == 2LL * 8 * 64 * 64 * 32);
}

TEST_CASE("elementwise FLOPs by kind", "[catalog]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{8}, int64_t{100}});
  b.input("y", kF32, {int64_t{100}});
  b.node("Add", {"x", "y"}, {"a"}, "add");
  b.node("Relu", {"a"}, {"r"}, "relu");
  b.node("Sigmoid", {"r"}, {"s"}, "sig");
  b.node("Div", {"s", "y"}, {"d"}, "div");
  b.node("Sum", {"x", "a", "d"}, {"sum"}, "sum3");
  b.output("sum");
  const OpCost add = cost_of(b, "add");
  CHECK(add.cls == OpClass::kElementwise);
  CHECK(add.flops.fma == 800);
  CHECK(add.bytes_read == 4 * (800 + 100));
  CHECK(add.bytes_written == 4 * 800);
  CHECK(cost_of(b, "relu").flops.compare == 800);
  const OpCost sig = cost_of(b, "sig");
  CHECK(sig.flops.fma == 800);
  CHECK(sig.flops.transcendental == 1600);
  CHECK(cost_of(b, "div").flops.transcendental == 800);
  CHECK(cost_of(b, "sum3").flops.fma == 1600);  // two adds per element for three inputs
}

TEST_CASE("normalizations and softmax", "[catalog]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{2}, int64_t{128}, int64_t{768}});
  b.initializer("g", kF32, {768});
  b.initializer("bb", kF32, {768});
  b.node("LayerNormalization", {"x", "g", "bb"}, {"ln"}, "ln").i("axis", -1);
  b.node("Softmax", {"ln"}, {"sm"}, "sm").i("axis", -1);
  b.input("img", kF32, {int64_t{1}, int64_t{64}, int64_t{32}, int64_t{32}});
  b.initializer("gs", kF32, {64});
  b.initializer("gb", kF32, {64});
  b.node("GroupNormalization", {"img", "gs", "gb"}, {"gn"}, "gn").i("num_groups", 32);
  b.initializer("mean", kF32, {64});
  b.initializer("var", kF32, {64});
  b.node("BatchNormalization", {"img", "gs", "gb", "mean", "var"}, {"bn"}, "bn");
  b.output("sm");
  b.output("gn");
  b.output("bn");
  b.model().mutable_opset_import(0)->set_version(18);
  const int64_t n = 2 * 128 * 768;
  const OpCost ln = cost_of(b, "ln");
  CHECK(ln.cls == OpClass::kNormalization);
  CHECK(ln.flops.fma == 8 * n);
  CHECK(ln.flops.transcendental == 256);  // one rsqrt per row
  const OpCost sm = cost_of(b, "sm");
  CHECK(sm.flops.fma == 3 * n);
  CHECK(sm.flops.compare == n);
  CHECK(sm.flops.transcendental == n + 256);
  const OpCost gn = cost_of(b, "gn");
  CHECK(gn.flops.fma == 8 * 64 * 32 * 32);
  CHECK(gn.flops.transcendental == 32);
  CHECK(cost_of(b, "bn").flops.fma == 2 * 64 * 32 * 32);
}

TEST_CASE("reductions and pools", "[catalog]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{16}, int64_t{8}, int64_t{8}});
  b.node("ReduceMean", {"x"}, {"m"}, "mean").ints("axes", {2, 3});
  b.node("MaxPool", {"x"}, {"p"}, "maxpool").ints("kernel_shape", {2, 2}).ints("strides", {2, 2});
  b.node("GlobalAveragePool", {"x"}, {"g"}, "gap");
  b.output("m");
  b.output("p");
  b.output("g");
  b.model().mutable_opset_import(0)->set_version(13);
  const OpCost mean = cost_of(b, "mean");
  CHECK(mean.cls == OpClass::kReduction);
  CHECK(mean.flops.fma == 1024 + 16);  // one add per input, one scale per output
  CHECK(cost_of(b, "maxpool").flops.compare == 16 * 4 * 4 * 4);
  CHECK(cost_of(b, "gap").flops.fma == 1024 + 16);
}

TEST_CASE("data movement: views move nothing and gathers read what they copy", "[catalog]") {
  OnnxBuilder b;
  b.input("ids", onnx::TensorProto::INT64, {int64_t{1}, int64_t{16}});
  b.initializer("table", kF32, {30000, 768});
  b.node("Gather", {"table", "ids"}, {"emb"}, "gather");
  b.initializer_i64("shape", {2}, {16, 768});
  b.node("Reshape", {"emb", "shape"}, {"r"}, "reshape");
  b.node("Transpose", {"r"}, {"t"}, "transpose").ints("perm", {1, 0});
  b.output("t");
  const OpCost g = cost_of(b, "gather");
  CHECK(g.cls == OpClass::kDataMovement);
  CHECK(g.bytes_read == 16 * 768 * 4 + 16 * 8);
  CHECK(g.bytes_written == 16 * 768 * 4);
  const OpCost r = cost_of(b, "reshape");
  CHECK(r.bytes_read == 0);
  CHECK(r.bytes_written == 0);
  const OpCost t = cost_of(b, "transpose");
  CHECK(t.bytes_read == 16 * 768 * 4);
  CHECK(t.bytes_written == 16 * 768 * 4);
}

TEST_CASE("folded nodes cost nothing", "[catalog]") {
  OnnxBuilder b;
  b.input("x", kF32, {int64_t{2}, int64_t{3}});
  b.node("Shape", {"x"}, {"s"}, "shape");
  b.node("ConstantOfShape", {"s"}, {"z"}, "zeros");
  b.node("Add", {"x", "z"}, {"y"}, "add");
  b.output("y");
  const OpCost z = cost_of(b, "zeros");
  CHECK(z.bytes_written == 0);
  CHECK(z.flops.total() == 0);
  CHECK(cost_of(b, "add").flops.fma == 6);
}

TEST_CASE("the catalog lists every op with a class", "[catalog]") {
  const auto ops = gpusim::supported_ops();
  CHECK(ops.size() > 150);
  for (const char* op : {"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "GroupNormalization",
                         "InstanceNormalization", "LayerNormalization", "BatchNormalization", "Softmax", "Resize",
                         "MaxPool", "AveragePool", "ReduceMean", "Gelu", "Where", "Expand", "ScatterND"}) {
    INFO(op);
    CHECK(gpusim::op_supported("", op));
  }
  CHECK(gpusim::op_class("", "Conv") == OpClass::kConv);
  CHECK(gpusim::op_class("", "MatMul") == OpClass::kGemm);
  CHECK(gpusim::op_class("ai.onnx", "Softmax") == OpClass::kNormalization);
  CHECK_FALSE(gpusim::op_supported("", "Frobnicate"));
}

TEST_CASE("fused attention: MACs = batch x heads x Sq x Skv x (D + Dv) and no score matrix traffic", "[catalog]") {
  SECTION("ONNX Attention (opset 23) with 4-D inputs") {
    OnnxBuilder b(23);
    b.input("q", kF16, {int64_t{2}, int64_t{8}, int64_t{256}, int64_t{64}});
    b.input("k", kF16, {int64_t{2}, int64_t{8}, int64_t{512}, int64_t{64}});
    b.input("v", kF16, {int64_t{2}, int64_t{8}, int64_t{512}, int64_t{64}});
    b.node("Attention", {"q", "k", "v"}, {"y"}, "attn");
    b.output("y");
    const OpCost c = cost_of(b, "attn");
    CHECK(c.cls == OpClass::kAttention);
    const int64_t scores = 2LL * 8 * 256 * 512;
    CHECK(c.macs == scores * 128);
    CHECK(c.flops.transcendental == scores);
    CHECK(c.bytes_read == 2 * (2LL * 8 * 256 * 64 + 2 * 2LL * 8 * 512 * 64));
    CHECK(c.bytes_written == 2 * 2LL * 8 * 256 * 64);
  }
  SECTION("com.microsoft MultiHeadAttention") {
    OnnxBuilder b(17);
    b.input("q", kF16, {int64_t{1}, int64_t{4096}, int64_t{320}});
    b.input("k", kF16, {int64_t{1}, int64_t{77}, int64_t{320}});
    b.input("v", kF16, {int64_t{1}, int64_t{77}, int64_t{320}});
    b.node("MultiHeadAttention", {"q", "k", "v"}, {"y"}, "mha").i("num_heads", 8).proto()->set_domain("com.microsoft");
    b.output("y");
    const OpCost c = cost_of(b, "mha");
    CHECK(c.cls == OpClass::kAttention);
    CHECK(c.macs == 8LL * 4096 * 77 * (40 + 40));
  }
}
