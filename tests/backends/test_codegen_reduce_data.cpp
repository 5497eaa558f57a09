// The reduction/normalization/pooling and data-movement generators: every kernel compiles (GLSL
// with the Vulkan backend's compiler, a representative set of CUDA texts with NVRTC, fp32 and fp16
// storage) and — on a Vulkan device (lavapipe in CI) — computes what the CPU reference computes
// for awkward shapes (1, primes, rows shorter and longer than a group, many rows), integer tensors
// included, with every written buffer pre-filled with NaN (or an int poison) so a missed element
// shows. What the generators refuse is refused with the reason. Device and compiler checks skip
// with a WARN where the backend or NVRTC is absent.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <functional>
#include <limits>

#include "codegen.h"
#include "gpusim/onnx_import.h"
#include "support/device_check.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"

using namespace gpusim;
using Catch::Matchers::Contains;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

namespace {

using Values = test::InputValues;
using Attrs = std::function<void(test::NodeRef&)>;
using test::all_device_nodes;
using test::build_graph;

std::vector<test::Dim> dims(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

// y = op(x, extra...) with x [shape]; `consts` become int64 initializers (axes, pads, starts...).
Graph op_graph(const std::string& op, int opset, const std::vector<int64_t>& shape, const Attrs& attrs = {},
               const std::vector<std::string>& extra = {},
               const std::vector<std::pair<std::string, std::vector<int64_t>>>& consts = {},
               const std::function<void(test::OnnxBuilder&)>& more = {}) {
  test::OnnxBuilder b(opset);
  b.input("x", kF32, dims(shape));
  for (const auto& [name, v] : consts) {
    b.initializer_i64(name, name == "k" || name == "axis" ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())}, v);
  }
  if (more) more(b);
  std::vector<std::string> ins = {"x"};
  ins.insert(ins.end(), extra.begin(), extra.end());
  auto n = b.node(op, ins, {"y"}, "n");
  if (attrs) attrs(n);
  b.output("y");
  return build_graph(b, op + ".onnx");
}

// Generates (which must succeed), compiles with NVRTC (fp32 and fp16) and the fp16 GLSL when
// asked, runs on every device present with inputs from `values` (else random).
void check_kernel(const Graph& g, const PlanKernel& pk, const Values& values = {}, bool nvrtc = false) {
  test::KernelCheck c;
  c.values = values;
  test::check_kernel(g, pk, nvrtc ? test::Compile::kCudaAndFp16 : test::Compile::kVulkanOnly, c);
}
void check(const Graph& g, const Values& values = {}, bool nvrtc = false) { check_kernel(g, all_device_nodes(g), values, nvrtc); }

std::string refusal(const Graph& g) {
  auto k = codegen::generate(g, all_device_nodes(g));
  REQUIRE(!k);
  CHECK(k.error().code == ErrorCode::kUnsupported);
  return k.error().message;
}

}  // namespace

// ---- reductions -------------------------------------------------------------------------------

TEST_CASE("Reduce ops over any axes match the reference", "[codegen]") {
  struct C {
    const char* op;
    std::vector<int64_t> shape, axes;
    int keepdims;
  };
  // Rows longer than a group (group scheme), strided reduced axes, every axis, short rows (thread
  // per row), and a 1-element tensor.
  const std::vector<C> cases = {
      {"ReduceSum", {3, 37, 5}, {1}, 1},       {"ReduceMean", {5, 1000}, {-1}, 0},
      {"ReduceMax", {3, 7, 5}, {0, 2}, 0},     {"ReduceMin", {2, 300}, {}, 1},
      {"ReduceProd", {4, 6, 9}, {1, 2}, 1},    {"ReduceL1", {61}, {0}, 0},
      {"ReduceL2", {3, 37, 5}, {0, 1}, 1},     {"ReduceLogSum", {7, 3}, {1}, 0},
      {"ReduceLogSumExp", {2, 300}, {1}, 1},   {"ReduceSumSquare", {2100, 3, 5}, {1}, 0},
      {"ReduceSum", {1}, {0}, 1},
  };
  for (const C& c : cases) {
    INFO(c.op << " " << shape_str(c.shape) << " axes " << shape_str(c.axes));
    const bool has_axes = !c.axes.empty();
    const Graph g = op_graph(c.op, 18, c.shape, [&](test::NodeRef& n) { n.i("keepdims", c.keepdims); },
                             has_axes ? std::vector<std::string>{"axes"} : std::vector<std::string>{},
                             has_axes ? std::vector<std::pair<std::string, std::vector<int64_t>>>{{"axes", c.axes}}
                                      : std::vector<std::pair<std::string, std::vector<int64_t>>>{});
    Values v;
    if (std::string(c.op) == "ReduceProd") v["x"] = {0.9, 1.1, -1.05, 0.97};
    if (std::string(c.op) == "ReduceLogSum") v["x"] = {0.5, 1.1, 2.0, 0.97};
    check(g, v, std::string(c.op) == "ReduceLogSumExp");
  }
}

TEST_CASE("Reduce axes as attributes before opset 18 and noop_with_empty_axes", "[codegen]") {
  check(op_graph("ReduceMean", 13, {4, 6, 9}, [](test::NodeRef& n) { n.ints("axes", {0, 2}); }));
  check(op_graph("ReduceSum", 18, {4, 6}, [](test::NodeRef& n) { n.i("noop_with_empty_axes", 1); }));
}

TEST_CASE("many rows spread the groups over y and every row is written", "[codegen]") {
  // 70001 rows of 20 in groups of 32 threads, a row each: more groups than a grid's x allows,
  // one extra group that must do nothing.
  const Graph g = op_graph("ReduceSum", 18, {70001, 20}, {}, {"axes"}, {{"axes", {1}}});
  PlanKernel pk = all_device_nodes(g);
  pk.tile.threads = 32;
  auto k = codegen::generate(g, pk);
  REQUIRE(k);
  CHECK(k->groups[1] > 1);
  CHECK(int64_t{k->groups[0]} * k->groups[1] >= 70001);
  // 256 threads take 8 rows of 20 a group (256 / 20 = 12, rounded down to a power of two), in
  // segments of 32 threads; the last group has 1 row and 7 idle segments.
  auto packed = codegen::generate(g, all_device_nodes(g));
  REQUIRE(packed);
  CHECK(int64_t{packed->groups[0]} * packed->groups[1] == (70001 + 7) / 8);
  CHECK_THAT(packed->body, Contains("LID_X / 32") && Contains("live"));
  check(g);
}

TEST_CASE("a huge row takes a group of the tile's threads and a strided loop", "[codegen]") {
  // InstanceNormalization as the SD VAE decoder runs it: 32 rows of 2^21 elements.
  test::OnnxBuilder b(17);
  b.input("x", kF32, {int64_t{1}, int64_t{32}, int64_t{2097152}});
  b.input("s", kF32, {int64_t{32}});
  b.input("bias", kF32, {int64_t{32}});
  b.node("InstanceNormalization", {"x", "s", "bias"}, {"y"}, "in");
  b.output("y");
  const Graph g = build_graph(b, "in_big.onnx");
  PlanKernel pk = all_device_nodes(g);
  pk.tile.threads = 1024;
  auto k = codegen::generate(g, pk);
  REQUIRE(k);
  CHECK(k->block[0] == 1024);
  CHECK(k->groups[0] * k->groups[1] == 32);
  CHECK_THAT(k->body, Contains("jj += 1024"));
  CHECK(k->cls == "normalization");
}

TEST_CASE("ArgMax and ArgMin with ties and select_last_index", "[codegen]") {
  check(op_graph("ArgMax", 17, {3, 37, 5}, [](test::NodeRef& n) { n.i("axis", 1); }), {}, true);
  check(op_graph("ArgMax", 17, {3, 100}, [](test::NodeRef& n) { n.i("axis", 1).i("select_last_index", 1); }),
        {{"x", {1, 2, 2, 0, 2}}});
  check(op_graph("ArgMin", 17, {4, 301}, [](test::NodeRef& n) { n.i("axis", -1).i("keepdims", 0); }), {{"x", {1, 0, 2, 0, 2}}});
}

TEST_CASE("Softmax LogSoftmax and Hardmax along any axis and before opset 13", "[codegen]") {
  check(op_graph("Softmax", 17, {3, 5, 131}), {}, true);
  check(op_graph("Softmax", 17, {3, 5, 7}, [](test::NodeRef& n) { n.i("axis", 1); }));
  check(op_graph("Softmax", 11, {3, 5, 7}, [](test::NodeRef& n) { n.i("axis", 1); }));  // flattened at axis 1
  check(op_graph("LogSoftmax", 17, {40, 20, 100}, [](test::NodeRef& n) { n.i("axis", 1); }));
  check(op_graph("Hardmax", 17, {6, 33}), {{"x", {0.5, 2, -1, 2, 0}}});
  check(op_graph("Softmax", 17, {5, 1}));
}

// ---- normalizations ---------------------------------------------------------------------------

TEST_CASE("LayerNormalization with its statistics outputs and a fused epilogue", "[codegen]") {
  {
    test::OnnxBuilder b(17);
    b.input("x", kF32, {int64_t{2}, int64_t{3}, int64_t{77}});
    b.input("s", kF32, {int64_t{77}});
    b.input("bias", kF32, {int64_t{77}});
    b.node("LayerNormalization", {"x", "s", "bias"}, {"y", "mean", "inv"}, "ln").i("axis", -1).f("epsilon", 1e-3f);
    b.output("y");
    b.output("mean");
    b.output("inv");
    check(build_graph(b, "ln.onnx"), {}, true);
  }
  {
    test::OnnxBuilder b(17);  // normalized over two axes, scale without bias
    b.input("x", kF32, {int64_t{4}, int64_t{3}, int64_t{5}});
    b.input("s", kF32, {int64_t{3}, int64_t{5}});
    b.node("LayerNormalization", {"x", "s"}, {"y"}, "ln").i("axis", 1);
    b.output("y");
    check(build_graph(b, "ln2.onnx"));
  }
  {
    test::OnnxBuilder b(17);  // norm-epilogue: LayerNorm -> Mul(gamma) -> Relu, only y stored
    b.input("x", kF32, {int64_t{5}, int64_t{300}});
    b.input("s", kF32, {int64_t{300}});
    b.input("bias", kF32, {int64_t{300}});
    b.input("gamma", kF32, {int64_t{300}});
    b.node("LayerNormalization", {"x", "s", "bias"}, {"h"}, "ln");
    b.node("Mul", {"h", "gamma"}, {"hm"}, "mul");
    b.node("Relu", {"hm"}, {"y"}, "relu");
    b.output("y");
    const Graph g = build_graph(b, "ln_epi.onnx");
    PlanKernel pk = all_device_nodes(g);
    pk.fusions = {"norm-epilogue"};
    auto k = codegen::generate(g, pk);
    REQUIRE(k);
    int written = 0;
    for (const auto& a : k->args) written += a.written ? 1 : 0;
    CHECK(written == 1);
    check_kernel(g, pk, {}, true);
  }
}

TEST_CASE("elementwise ops fused before a normalization are computed wherever its input is read", "[codegen]") {
  {
    test::OnnxBuilder b(17);  // BERT's embeddings: two Adds (one broadcast) -> LayerNorm; h2 is also returned
    b.input("a", kF32, {int64_t{2}, int64_t{5}, int64_t{64}});
    b.input("p", kF32, {int64_t{5}, int64_t{64}});
    b.input("t", kF32, {int64_t{2}, int64_t{5}, int64_t{64}});
    b.input("s", kF32, {int64_t{64}});
    b.input("bias", kF32, {int64_t{64}});
    b.node("Add", {"a", "p"}, {"h1"}, "add1");
    b.node("Add", {"h1", "t"}, {"h2"}, "add2");
    b.node("LayerNormalization", {"h2", "s", "bias"}, {"y"}, "ln");
    b.output("y");
    b.output("h2");
    const Graph g = build_graph(b, "ln_prologue.onnx");
    PlanKernel pk = all_device_nodes(g);
    pk.anchor = 2;
    pk.fusions = {"norm-prologue"};
    check_kernel(g, pk, {}, true);
  }
  {
    test::OnnxBuilder b(17);  // a residual Add recomputed inside the LayerNorm (Relu reads it elsewhere)
    b.input("a", kF32, {int64_t{3}, int64_t{300}});
    b.input("b", kF32, {int64_t{3}, int64_t{300}});
    b.input("s", kF32, {int64_t{300}});
    b.node("Add", {"a", "b"}, {"h"}, "add");
    b.node("LayerNormalization", {"h", "s"}, {"y"}, "ln");
    b.node("Relu", {"h"}, {"z"}, "relu");
    b.output("y");
    b.output("z");
    const Graph g = build_graph(b, "ln_recompute.onnx");
    PlanKernel pk;
    pk.nodes = {0, 1};
    pk.anchor = 1;
    pk.recomputed = {0};
    pk.fusions = {"recompute"};
    auto k = codegen::generate(g, pk);
    REQUIRE(k);
    CHECK(k->args.size() == 4);  // a, b, s, y: h is not stored
    check_kernel(g, pk);
  }
  {
    test::OnnxBuilder b(17);  // attention-style scores: x * x + mask (broadcast) -> Softmax -> Sqrt
    b.input("x", kF32, {int64_t{2}, int64_t{3}, int64_t{5}, int64_t{7}});
    b.input("mask", kF32, {int64_t{2}, int64_t{1}, int64_t{1}, int64_t{7}});
    b.node("Mul", {"x", "x"}, {"sq"}, "mul");
    b.node("Add", {"sq", "mask"}, {"h"}, "add");
    b.node("Softmax", {"h"}, {"p"}, "sm");
    b.node("Sqrt", {"p"}, {"y"}, "sqrt");
    b.output("y");
    const Graph g = build_graph(b, "sm_prologue.onnx");
    PlanKernel pk = all_device_nodes(g);
    pk.anchor = 2;
    check_kernel(g, pk);
  }
  {
    test::OnnxBuilder b(17);  // LRN reads its neighbours through the prologue too
    b.input("x", kF32, {int64_t{2}, int64_t{7}, int64_t{3}, int64_t{5}});
    b.node("Exp", {"x"}, {"r"}, "exp");
    b.node("LRN", {"r"}, {"y"}, "lrn").i("size", 3);
    b.output("y");
    const Graph g = build_graph(b, "lrn_prologue.onnx");
    PlanKernel pk = all_device_nodes(g);
    pk.anchor = 1;
    check_kernel(g, pk);
  }
}

TEST_CASE("group and instance normalization with per-group and per-channel affine", "[codegen]") {
  auto gn = [](int opset, const std::string& op, std::vector<int64_t> x, int64_t n_affine, int64_t groups, bool silu) {
    test::OnnxBuilder b(opset);
    b.input("x", kF32, dims(x));
    b.input("s", kF32, {n_affine});
    b.input("bias", kF32, {n_affine});
    auto n = b.node(op, {"x", "s", "bias"}, {silu ? "h" : "y"}, "gn");
    if (groups) n.i("num_groups", groups);
    if (silu) {  // the SD VAE's GroupNorm -> SiLU as x * Sigmoid(x)
      b.node("Sigmoid", {"h"}, {"sg"}, "sig");
      b.node("Mul", {"h", "sg"}, {"y"}, "mul");
    }
    b.output("y");
    return build_graph(b, "gn.onnx");
  };
  check(gn(17, "InstanceNormalization", {2, 3, 7, 9}, 3, 0, false));
  check(gn(17, "InstanceNormalization", {1, 2, 300, 301}, 2, 0, true), {}, true);  // rows of 90300
  check(gn(21, "GroupNormalization", {2, 6, 5, 3}, 6, 3, false));
  check(gn(18, "GroupNormalization", {2, 6, 5, 3}, 2, 2, false));
}

TEST_CASE("BatchNormalization LRN LpNormalization and MeanVarianceNormalization", "[codegen]") {
  {
    test::OnnxBuilder b(15);
    b.input("x", kF32, {int64_t{2}, int64_t{3}, int64_t{5}, int64_t{7}});
    for (const char* n : {"s", "bias", "m", "var"}) b.input(n, kF32, {int64_t{3}});
    b.node("BatchNormalization", {"x", "s", "bias", "m", "var"}, {"y"}, "bn").f("epsilon", 1e-3f);
    b.output("y");
    check(build_graph(b, "bn.onnx"), {{"var", {0.5, 1.5, 2.0}}}, true);
  }
  check(op_graph("LRN", 17, {2, 7, 3, 5}, [](test::NodeRef& n) { n.i("size", 4).f("alpha", 1e-2f); }));
  check(op_graph("LpNormalization", 17, {3, 7, 5}, [](test::NodeRef& n) { n.i("axis", 1).i("p", 1); }));
  check(op_graph("LpNormalization", 17, {3, 7, 50}));
  check(op_graph("MeanVarianceNormalization", 17, {2, 3, 4, 5}));
  check(op_graph("MeanVarianceNormalization", 17, {2, 3, 4, 5}, [](test::NodeRef& n) { n.ints("axes", {1, 3}); }));
}

TEST_CASE("CumSum forward reverse and exclusive", "[codegen]") {
  check(op_graph("CumSum", 17, {3, 4, 5}, {}, {"axis"}, {{"axis", {1}}}), {}, true);
  check(op_graph("CumSum", 17, {3, 4, 5}, [](test::NodeRef& n) { n.i("reverse", 1).i("exclusive", 1); }, {"axis"},
                 {{"axis", {-1}}}));
}

// ---- pooling ----------------------------------------------------------------------------------

TEST_CASE("pools with pads dilations ceil_mode auto_pad and MaxPool indices", "[codegen]") {
  auto win = [](std::vector<int64_t> k, std::vector<int64_t> s) {
    return [=](test::NodeRef& n) { n.ints("kernel_shape", k).ints("strides", s); };
  };
  check(op_graph("MaxPool", 17, {1, 3, 11, 13}, [&](test::NodeRef& n) { win({3, 3}, {2, 2})(n); n.ints("pads", {1, 1, 1, 1}); }), {},
        true);
  check(op_graph("MaxPool", 17, {1, 2, 10, 9}, [&](test::NodeRef& n) { win({2, 3}, {2, 2})(n); n.ints("dilations", {2, 1}).i("ceil_mode", 1); }));
  check(op_graph("MaxPool", 17, {2, 2, 7, 7}, [&](test::NodeRef& n) { win({3, 3}, {2, 2})(n); n.s("auto_pad", "SAME_UPPER"); }));
  check(op_graph("AveragePool", 17, {1, 3, 11, 13}, [&](test::NodeRef& n) {
    win({3, 3}, {2, 2})(n);
    n.ints("pads", {1, 1, 1, 1}).i("count_include_pad", 1);
  }));
  check(op_graph("AveragePool", 17, {1, 3, 11, 13}, [&](test::NodeRef& n) { win({3, 3}, {2, 2})(n); n.ints("pads", {1, 1, 1, 1}).i("ceil_mode", 1); }));
  check(op_graph("AveragePool", 17, {2, 3, 17}, win({4}, {3})));
  check(op_graph("LpPool", 17, {1, 2, 6, 6}, [](test::NodeRef& n) { n.ints("kernel_shape", {2, 2}).i("p", 3); }));
  {
    test::OnnxBuilder b(17);
    b.input("x", kF32, {int64_t{2}, int64_t{3}, int64_t{6}, int64_t{5}});
    b.node("MaxPool", {"x"}, {"y", "idx"}, "mp").ints("kernel_shape", {2, 2}).ints("strides", {2, 2}).i("storage_order", 1);
    b.output("y");
    b.output("idx");
    check(build_graph(b, "mp_idx.onnx"));
  }
  check(op_graph("GlobalAveragePool", 17, {2, 3, 7, 9}));
  check(op_graph("GlobalMaxPool", 17, {2, 3, 1, 1}));
  check(op_graph("GlobalLpPool", 17, {2, 3, 4, 5}));
}

// ---- data movement ----------------------------------------------------------------------------

TEST_CASE("Transpose Concat Split and Slice", "[codegen]") {
  check(op_graph("Transpose", 17, {2, 3, 5, 7}, [](test::NodeRef& n) { n.ints("perm", {0, 2, 3, 1}); }), {}, true);
  check(op_graph("Transpose", 17, {3, 1, 5}));
  {
    test::OnnxBuilder b(17);
    b.input("a", kF32, {int64_t{2}, int64_t{3}, int64_t{5}});
    b.input("b", kF32, {int64_t{2}, int64_t{1}, int64_t{5}});
    b.input("c", kF32, {int64_t{2}, int64_t{4}, int64_t{5}});
    b.node("Concat", {"a", "b", "c"}, {"y"}, "cc").i("axis", -2);
    b.output("y");
    check(build_graph(b, "concat.onnx"));
  }
  {
    test::OnnxBuilder b(18);  // three outputs written by one kernel
    b.input("x", kF32, {int64_t{2}, int64_t{7}, int64_t{3}});
    b.initializer_i64("sp", {3}, {2, 4, 1});
    b.node("Split", {"x", "sp"}, {"y0", "y1", "y2"}, "sp").i("axis", 1);
    for (const char* y : {"y0", "y1", "y2"}) b.output(y);
    check(build_graph(b, "split.onnx"), {}, true);
  }
  // Negative and clamped starts, negative steps.
  check(op_graph("Slice", 17, {5, 9, 4}, {}, {"st", "en", "ax", "sp"},
                 {{"st", {1, -1, 100}}, {"en", {4, -100, -100}}, {"ax", {0, 1, 2}}, {"sp", {2, -2, -1}}}));
  check(op_graph("Slice", 17, {5, 9}, {}, {"st", "en"}, {{"st", {2}}, {"en", {std::numeric_limits<int64_t>::max()}}}));
}

TEST_CASE("Gather GatherElements and GatherND with negative indices and int data", "[codegen]") {
  auto gather = [](const std::string& op, int data_type, std::vector<int64_t> xs, std::vector<int64_t> is, const Attrs& a) {
    test::OnnxBuilder b(17);
    b.input("x", data_type, dims(xs));
    b.input("i", kI64, dims(is));
    auto n = b.node(op, {"x", "i"}, {"y"}, "g");
    a(n);
    b.output("y");
    return build_graph(b, op + ".onnx");
  };
  check(gather("Gather", kF32, {4, 5, 3}, {2, 3}, [](test::NodeRef& n) { n.i("axis", 1); }), {{"i", {0, -1, 3, 4, -5, 2}}}, true);
  check(gather("Gather", kI64, {6, 4}, {3}, [](test::NodeRef& n) { n.i("axis", 0); }),
        {{"i", {5, 0, -2}}, {"x", {3, -7, 100000, 12, 5}}});
  check(gather("GatherElements", kF32, {4, 5}, {3, 5}, [](test::NodeRef& n) { n.i("axis", 0); }), {{"i", {0, -1, 3, 2, 1, -4, 2}}});
  check(gather("GatherND", kF32, {2, 3, 4}, {2, 2, 1}, [](test::NodeRef& n) { n.i("batch_dims", 1); }), {{"i", {1, -1, 0, 2}}});
  // A constant scalar index is baked into the kernel.
  test::OnnxBuilder b(17);
  b.input("x", kF32, {int64_t{4}, int64_t{5}, int64_t{3}});
  b.initializer_i64("i", {}, {-2});
  b.node("Gather", {"x", "i"}, {"y"}, "g").i("axis", 0);
  b.output("y");
  const Graph g = build_graph(b, "gather_const.onnx");
  auto k = codegen::generate(g, all_device_nodes(g));
  REQUIRE(k);
  CHECK(k->args.size() == 2);
  check(g);
}

TEST_CASE("Expand Tile and Pad in every mode", "[codegen]") {
  check(op_graph("Expand", 17, {3, 1, 5}, {}, {"sh"}, {{"sh", {2, 3, 4, 5}}}));
  check(op_graph("Tile", 17, {3, 1, 5}, {}, {"rp"}, {{"rp", {2, 3, 2}}}));
  check(op_graph("Pad", 17, {3, 4}, {}, {"p", "cv"}, {{"p", {1, 2, 0, 3}}},
                 [](test::OnnxBuilder& b) { b.node("Constant", {}, {"cv"}, "cvn").tensor("value", test::f32_tensor({}, {1.5f})); }),
        {}, true);
  check(op_graph("Pad", 17, {3, 4}, [](test::NodeRef& n) { n.s("mode", "reflect"); }, {"p"}, {{"p", {2, 3, 1, 2}}}));
  check(op_graph("Pad", 17, {2, 3, 4}, [](test::NodeRef& n) { n.s("mode", "edge"); }, {"p"}, {{"p", {0, 2, 3, 1, 1, 2}}}));
  check(op_graph("Pad", 19, {2, 3, 4}, [](test::NodeRef& n) { n.s("mode", "wrap"); }, {"p", "", "ax"},
                 {{"p", {2, 1, 1, 3}}, {"ax", {1, -1}}}));
  check(op_graph("Pad", 17, {5, 6}, {}, {"p"}, {{"p", {-1, 2, -2, 1}}}));  // negative pads crop
}

TEST_CASE("Resize and Upsample in nearest linear and cubic modes", "[codegen]") {
  auto scales = [](std::vector<float> s) {
    return [s](test::OnnxBuilder& b) {
      b.node("Constant", {}, {"sc"}, "scn").tensor("value", test::f32_tensor({static_cast<int64_t>(s.size())}, s));
    };
  };
  using P = std::vector<std::pair<std::string, std::vector<int64_t>>>;
  auto mode = [](std::string m, std::string ctm, std::string nearest = "") {
    return [=](test::NodeRef& n) {
      n.s("mode", m);
      if (!ctm.empty()) n.s("coordinate_transformation_mode", ctm);
      if (!nearest.empty()) n.s("nearest_mode", nearest);
    };
  };
  // The SD VAE decoder's upsampling: nearest, scale 2.
  check(op_graph("Resize", 19, {1, 3, 5, 7}, mode("nearest", ""), {"", "sc"}, {}, scales({1, 1, 2, 2})), {}, true);
  check(op_graph("Resize", 13, {1, 2, 5, 7}, mode("nearest", "asymmetric", "floor"), {"", "sc"}, {}, scales({1, 1, 2, 3})));
  check(op_graph("Resize", 13, {1, 2, 9, 7}, mode("nearest", "", "ceil"), {"", "sc"}, {}, scales({1, 1, 0.5, 0.75})));
  check(op_graph("Resize", 13, {1, 2, 5, 6}, mode("nearest", "tf_half_pixel_for_nn", "round_prefer_ceil"), {"", "sc"}, {},
                 scales({1, 1, 2, 1.5})));
  check(op_graph("Resize", 13, {2, 3, 5, 7}, mode("linear", ""), {"", "sc"}, {}, scales({1, 1, 2, 1.5})));
  check(op_graph("Resize", 13, {1, 3, 5, 7}, mode("linear", "align_corners"), {"", "", "sz"}, P{{"sz", {1, 3, 9, 4}}}));
  check(op_graph("Resize", 13, {1, 3, 5, 1}, mode("linear", "pytorch_half_pixel"), {"", "", "sz"}, P{{"sz", {1, 3, 8, 1}}}));
  check(op_graph("Resize", 13, {1, 2, 6, 7}, mode("cubic", ""), {"", "sc"}, {}, scales({1, 1, 2, 0.5})), {}, true);
  check(op_graph("Resize", 13, {1, 2, 6, 7},
                 [&](test::NodeRef& n) { mode("cubic", "asymmetric")(n); n.i("exclude_outside", 1).f("cubic_coeff_a", -0.5f); },
                 {"", "sc"}, {}, scales({1, 1, 1.5, 2})));
  check(op_graph("Resize", 13, {1, 1, 6, 7},
                 [&](test::NodeRef& n) { mode("linear", "tf_crop_and_resize")(n); n.f("extrapolation_value", 9.f); },
                 {"roi", "", "sz"}, P{{"sz", {1, 1, 5, 9}}}, [](test::OnnxBuilder& b) {
                   b.node("Constant", {}, {"roi"}, "roin")
                       .tensor("value", test::f32_tensor({8}, {0, 0, 0.2f, -0.1f, 1, 1, 1.1f, 0.8f}));
                 }));
  check(op_graph("Upsample", 7, {1, 2, 3, 4}, [](test::NodeRef& n) { n.floats("scales", {1, 1, 2, 2}); }));
  check(op_graph("Upsample", 9, {1, 2, 3, 4}, mode("linear", ""), {"sc"}, {}, scales({1, 1, 2, 2})));
  check(op_graph("Resize", 10, {1, 2, 3, 4}, mode("nearest", ""), {"sc"}, {}, scales({1, 1, 2, 3})));
}

TEST_CASE("DepthToSpace SpaceToDepth Trilu OneHot EyeLike and ReverseSequence", "[codegen]") {
  check(op_graph("DepthToSpace", 17, {2, 8, 3, 5}, [](test::NodeRef& n) { n.i("blocksize", 2); }), {}, true);
  check(op_graph("DepthToSpace", 17, {2, 8, 3, 5}, [](test::NodeRef& n) { n.i("blocksize", 2).s("mode", "CRD"); }));
  check(op_graph("SpaceToDepth", 17, {2, 3, 4, 6}, [](test::NodeRef& n) { n.i("blocksize", 2); }));
  check(op_graph("Trilu", 17, {2, 5, 7}, {}, {"k"}, {{"k", {1}}}));
  check(op_graph("Trilu", 17, {5, 4}, [](test::NodeRef& n) { n.i("upper", 0); }, {"k"}, {{"k", {-1}}}));
  check(op_graph("EyeLike", 17, {4, 6}, [](test::NodeRef& n) { n.i("k", 2); }));
  {
    test::OnnxBuilder b(17);
    b.input("i", kI64, {int64_t{2}, int64_t{3}});
    b.initializer_i64("d", {}, {5});
    b.input("vals", kF32, {int64_t{2}});
    b.node("OneHot", {"i", "d", "vals"}, {"y"}, "oh").i("axis", 1);
    b.output("y");
    check(build_graph(b, "onehot.onnx"), {{"i", {0, -1, 3, 4, -5, 2}}});
  }
  {
    test::OnnxBuilder b(17);
    b.input("x", kF32, {int64_t{4}, int64_t{3}, int64_t{2}});
    b.input("l", kI64, {int64_t{3}});
    b.node("ReverseSequence", {"x", "l"}, {"y"}, "rs").i("batch_axis", 1).i("time_axis", 0);
    b.output("y");
    check(build_graph(b, "revseq.onnx"), {{"l", {4, 1, 2}}});
  }
}

// ---- refusals ---------------------------------------------------------------------------------

TEST_CASE("reduction and data-movement generators refuse what they do not cover with the reason", "[codegen]") {
  {
    // Axes whose values are not known (the importer folds what it can; a graph edited after import
    // may still carry such an input).
    Graph g = op_graph("ReduceSum", 18, {3, 4}, {}, {"axes"}, {{"axes", {1}}});
    g.tensor(g.nodes.back().inputs[1]).value.reset();
    CHECK_THAT(refusal(g), Contains("node \"n\" (ReduceSum)") && Contains("axes input is not a constant"));
  }
  {
    test::OnnxBuilder b(17);
    b.input("x", kF32, {int64_t{3}, int64_t{4}});
    b.initializer_i64("k", {1}, {2});
    b.node("TopK", {"x", "k"}, {"v", "i"}, "topk");
    b.output("v");
    b.output("i");
    CHECK_THAT(refusal(build_graph(b, "topk.onnx")), Contains("node \"topk\" (TopK)") && Contains("no generator"));
  }
  {
    test::OnnxBuilder b(17);
    b.input("x", kF32, {int64_t{4}, int64_t{3}});
    b.input("i", kI64, {int64_t{2}, int64_t{1}});
    b.input("u", kF32, {int64_t{2}, int64_t{3}});
    b.node("ScatterND", {"x", "i", "u"}, {"y"}, "sc");
    b.output("y");
    CHECK_THAT(refusal(build_graph(b, "scatter.onnx")), Contains("node \"sc\" (ScatterND)") && Contains("two passes"));
  }
  {
    test::OnnxBuilder b(17);  // an elementwise op fused before a reduction (only normalizations take them)
    b.input("x", kF32, {int64_t{4}, int64_t{8}});
    b.node("Relu", {"x"}, {"r"}, "relu");
    b.node("ReduceMax", {"r"}, {"y"}, "rm");
    b.output("y");
    const Graph g = build_graph(b, "prologue.onnx");
    PlanKernel pk = all_device_nodes(g);
    pk.anchor = 1;
    auto k = codegen::generate(g, pk);
    REQUIRE(!k);
    CHECK_THAT(k.error().message, Contains("node \"rm\" (ReduceMax)") && Contains("only before a normalization"));
  }
  {
    test::OnnxBuilder b(17);  // the scan axis computed at run time
    b.input("x", kF32, {int64_t{8}, int64_t{8}});
    b.input("ax", kI64, {});
    b.node("CumSum", {"x", "ax"}, {"y"}, "cs");
    b.output("y");
    CHECK_THAT(refusal(build_graph(b, "cumsum_dyn.onnx")), Contains("node \"cs\" (CumSum)") && Contains("axis input must be a constant"));
  }
  {
    test::OnnxBuilder b(15);
    b.input("x", kF32, {int64_t{2}, int64_t{3}, int64_t{4}});
    for (const char* n : {"s", "bias", "m", "var"}) b.input(n, kF32, {int64_t{3}});
    b.node("BatchNormalization", {"x", "s", "bias", "m", "var"}, {"y"}, "bn").i("training_mode", 1);
    b.output("y");
    auto g = import_onnx(b.write("bn_train.onnx"));
    REQUIRE(g);
    CHECK_THAT(refusal(*g), Contains("node \"bn\" (BatchNormalization)") && Contains("training_mode=1"));
  }
  {
    test::OnnxBuilder b(17);  // a gather is data movement that does not fold into its reader
    b.input("x", kF32, {int64_t{3}, int64_t{4}});
    b.initializer_i64("ix", {2}, {2, 0});
    b.node("Gather", {"x", "ix"}, {"t"}, "ga");
    b.node("Relu", {"t"}, {"y"}, "relu");
    b.output("y");
    CHECK_THAT(refusal(build_graph(b, "ga_relu.onnx")), Contains("node \"ga\" (Gather)") && Contains("is not data movement gpusim folds into its reader"));
  }
  CHECK_THAT(refusal(op_graph("Resize", 18, {1, 1, 4, 4}, [](test::NodeRef& n) { n.s("mode", "linear").i("antialias", 1); },
                              {"", "", "sz"}, {{"sz", {1, 1, 2, 2}}})),
             Contains("node \"n\" (Resize)") && Contains("antialias"));
  CHECK_THAT(refusal(op_graph("LpNormalization", 17, {3, 4}, [](test::NodeRef& n) { n.i("p", 3); })),
             Contains("only the L1 and L2 norms"));
}

// ---- data movement folded into the kernel that reads it (the planner's fold-data-movement) ----

namespace {

// A kernel of every device node, anchored on the last (the element-wise reader).
PlanKernel reader_kernel(const Graph& g) {
  PlanKernel k = all_device_nodes(g);
  k.anchor = static_cast<int>(k.nodes.size()) - 1;
  k.fusions = {"fold-data-movement"};
  return k;
}

}  // namespace

TEST_CASE("a transpose, slice, pad, concat, split or expand folds into the element-wise kernel reading it",
          "[codegen][folding]") {
  SECTION("transpose") {
    test::OnnxBuilder b;
    b.input("x", kF32, dims({2, 3, 4, 5}));
    b.input("z", kF32, dims({2, 4, 5, 3}));
    b.node("Transpose", {"x"}, {"t"}, "t").ints("perm", {0, 2, 3, 1});
    b.node("Add", {"t", "z"}, {"y"}, "add");
    b.output("y");
    const Graph g = build_graph(b, "fold_transpose.onnx");
    check_kernel(g, reader_kernel(g), {}, true);
  }
  SECTION("slice with a step, then a broadcast operand") {
    test::OnnxBuilder b;
    b.input("x", kF32, dims({3, 10, 7}));
    b.input("s", kF32, dims({3}));  // the slice is [3, 1, 3]: rows 1 of 10, columns 6, 4, 2 of 7
    b.initializer_i64("st", {2}, {1, 6});
    b.initializer_i64("en", {2}, {3, 0});
    b.initializer_i64("ax", {2}, {1, 2});
    b.initializer_i64("sp", {2}, {2, -2});
    b.node("Slice", {"x", "st", "en", "ax", "sp"}, {"t"}, "slice");
    b.node("Mul", {"t", "s"}, {"y"}, "mul");
    b.output("y");
    const Graph g = build_graph(b, "fold_slice.onnx");
    check_kernel(g, reader_kernel(g));
  }
  SECTION("a constant pad") {
    test::OnnxBuilder b(17);
    b.input("x", kF32, dims({2, 3, 5}));
    b.initializer_i64("pads", {6}, {0, 1, 2, 0, 2, 1});
    b.node("Constant", {}, {"v"}, "c").tensor("value", test::f32_tensor({}, {1.5f}));
    b.node("Pad", {"x", "pads", "v"}, {"t"}, "pad");
    b.node("Relu", {"t"}, {"y"}, "relu");
    b.output("y");
    const Graph g = build_graph(b, "fold_pad.onnx");
    check_kernel(g, reader_kernel(g));
  }
  SECTION("concat of a split, and an expand") {
    test::OnnxBuilder b;
    b.input("x", kF32, dims({4, 6}));
    b.input("e", kF32, dims({1, 9}));
    b.initializer_i64("sizes", {2}, {2, 4});
    b.initializer_i64("shape", {2}, {4, 9});
    b.node("Split", {"x", "sizes"}, {"a", "c"}, "split").i("axis", 1);
    b.node("Concat", {"c", "a", "c"}, {"t"}, "concat").i("axis", 1);  // [4, 4 + 2 + 4] = [4, 10]
    b.node("Expand", {"e", "shape"}, {"u"}, "expand");
    b.initializer_i64("st", {1}, {1});
    b.initializer_i64("en", {1}, {10});
    b.initializer_i64("ax", {1}, {1});
    b.node("Slice", {"t", "st", "en", "ax"}, {"w"}, "slice");  // [4, 9]
    b.node("Sub", {"w", "u"}, {"y"}, "sub");
    b.output("y");
    const Graph g = build_graph(b, "fold_concat.onnx");
    check_kernel(g, reader_kernel(g));
  }
  SECTION("data movement alone: a roll over two axes") {
    test::OnnxBuilder b;
    b.input("x", kF32, dims({1, 6, 5, 3}));
    auto one = [&](const char* n, int64_t v) { b.initializer_i64(n, {1}, {v}); };
    one("s2", 2), one("e6", 6), one("z", 0), one("a1", 1), one("s3", 3), one("e5", 5), one("a2", 2);
    b.node("Slice", {"x", "s2", "e6", "a1"}, {"p"}, "sa");
    b.node("Slice", {"x", "z", "s2", "a1"}, {"q"}, "sb");
    b.node("Concat", {"p", "q"}, {"r"}, "ca").i("axis", 1);
    b.node("Slice", {"r", "s3", "e5", "a2"}, {"u"}, "sc");
    b.node("Slice", {"r", "z", "s3", "a2"}, {"v"}, "sd");
    b.node("Concat", {"u", "v"}, {"y"}, "cb").i("axis", 2);
    b.output("y");
    const Graph g = build_graph(b, "fold_roll.onnx");
    PlanKernel k = all_device_nodes(g);  // anchored on the first Slice: the element-wise generator takes it
    check_kernel(g, k);
  }
}

TEST_CASE("data movement of a value computed in the same kernel does not fold", "[codegen][folding][errors]") {
  test::OnnxBuilder b;
  b.input("x", kF32, dims({3, 5}));
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("Transpose", {"r"}, {"t"}, "t").ints("perm", {1, 0});
  b.node("Sigmoid", {"t"}, {"y"}, "sig");
  b.output("y");
  const Graph g = build_graph(b, "fold_computed.onnx");
  auto k = codegen::generate(g, all_device_nodes(g));
  REQUIRE_FALSE(k);
  CHECK_THAT(k.error().message, Contains("folded data movement reads \"r\", computed in this kernel at another index"));
}
