// A runtime's lowering (include/gpusim/lowering.h): the kernels PyTorch eager and torch.compile
// launch for an exporter's graph, the runtime YAML's rules and their errors.
#include <catch2/catch.hpp>

#include <fstream>

#include "gpusim/lowering.h"
#include "gpusim/patterns.h"
#include "gpusim/predict.h"
#include "support/fixtures.h"

using namespace gpusim;

namespace {

RuntimeModel runtime(const std::string& name) {
  auto r = find_runtime(name, default_runtime_dirs());
  if (!r) FAIL(r.error().message);
  return std::move(*r);
}

// An exporter's transformer MLP: Linear (MatMul + bias Add), erf-GELU as five nodes, Linear, the
// residual Add and a LayerNorm.
Graph mlp_block() {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2, 16, 64});
  b.initializer("w1", onnx::TensorProto::FLOAT, {64, 256});
  b.initializer("b1", onnx::TensorProto::FLOAT, {256});
  b.initializer("w2", onnx::TensorProto::FLOAT, {256, 64});
  b.initializer("b2", onnx::TensorProto::FLOAT, {64});
  b.initializer("g", onnx::TensorProto::FLOAT, {64});
  b.initializer("beta", onnx::TensorProto::FLOAT, {64});
  b.node("Constant", {}, {"sqrt2"}, "c0").tensor("value", test::f32_tensor({}, {1.4142135f}));
  b.node("Constant", {}, {"one"}, "c1").tensor("value", test::f32_tensor({}, {1.0f}));
  b.node("Constant", {}, {"half"}, "c2").tensor("value", test::f32_tensor({}, {0.5f}));
  b.node("MatMul", {"x", "w1"}, {"h0"}, "fc1/MatMul");
  b.node("Add", {"b1", "h0"}, {"h1"}, "fc1/Add");
  b.node("Div", {"h1", "sqrt2"}, {"d"}, "act/Div");
  b.node("Erf", {"d"}, {"e"}, "act/Erf");
  b.node("Add", {"e", "one"}, {"a"}, "act/Add");
  b.node("Mul", {"h1", "a"}, {"m"}, "act/Mul");
  b.node("Mul", {"m", "half"}, {"gelu"}, "act/Mul_1");
  b.node("MatMul", {"gelu", "w2"}, {"h2"}, "fc2/MatMul");
  b.node("Add", {"b2", "h2"}, {"h3"}, "fc2/Add");
  b.node("Add", {"x", "h3"}, {"r"}, "residual");
  b.node("LayerNormalization", {"r", "g", "beta"}, {"y"}, "norm").i("axis", -1);
  b.output("y");
  return test::build_graph(b, "mlp_block.onnx");
}

// Attention as an exporter without scaled_dot_product_attention writes it.
Graph attention_block() {
  test::OnnxBuilder b;
  b.input("q", onnx::TensorProto::FLOAT, {1, 2, 8, 16});
  b.input("k", onnx::TensorProto::FLOAT, {1, 2, 8, 16});
  b.input("v", onnx::TensorProto::FLOAT, {1, 2, 8, 16});
  b.node("Constant", {}, {"scale"}, "c").tensor("value", test::f32_tensor({}, {0.25f}));
  b.node("Mul", {"q", "scale"}, {"qs"}, "attn/Mul");
  b.node("Transpose", {"k"}, {"kt"}, "attn/Transpose_k").ints("perm", {0, 1, 3, 2});
  b.node("MatMul", {"qs", "kt"}, {"s"}, "attn/MatMul");
  b.node("Softmax", {"s"}, {"p"}, "attn/Softmax").i("axis", -1);
  b.node("MatMul", {"p", "v"}, {"o"}, "attn/MatMul_1");
  b.node("Transpose", {"o"}, {"ot"}, "attn/Transpose_o").ints("perm", {0, 2, 1, 3});
  b.output("ot");
  return test::build_graph(b, "attention_block.onnx");
}

// A convolution with a bias, then BatchNorm and Relu.
Graph conv_block() {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2, 16, 8, 8});
  b.initializer("w", onnx::TensorProto::FLOAT, {32, 16, 3, 3});
  b.initializer("bias", onnx::TensorProto::FLOAT, {32});
  for (const char* n : {"s", "o", "mean", "var"}) b.initializer(n, onnx::TensorProto::FLOAT, {32});
  b.node("Conv", {"x", "w", "bias"}, {"c"}, "conv").ints("pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"c", "s", "o", "mean", "var"}, {"n"}, "bn");
  b.node("Relu", {"n"}, {"y"}, "relu");
  b.output("y");
  return test::build_graph(b, "conv_block.onnx");
}

const PlanKernel* kernel_with(const Lowering& low, const std::string& rule) {
  for (const PlanKernel& k : low.plan.kernels) {
    if (!k.fusions.empty() && k.fusions.back() == rule) return &k;
  }
  return nullptr;
}

std::string write_runtime(const std::string& name, const std::string& body) {
  const std::string path = test::temp_dir() + "/" + name + ".yaml";
  std::ofstream(path) << "schema: gpusim.runtime/1\nname: " << name << "\n" << body;
  return path;
}

}  // namespace

TEST_CASE("eager lowering: GELU's five nodes, Linear's MatMul and bias run as one kernel each", "[sim][lowering]") {
  const Graph g = mlp_block();
  auto low = lower(g, runtime("pytorch-eager"));
  REQUIRE(low);
  // linear, gelu, linear, residual Add, LayerNorm.
  REQUIRE(low->plan.kernels.size() == 5);
  const PlanKernel* gelu = kernel_with(*low, "gelu");
  REQUIRE(gelu);
  CHECK(gelu->nodes.size() == 5);
  CHECK(gelu->call == "gelu");
  int linears = 0;
  for (const PlanKernel& k : low->plan.kernels) {
    if (!k.fusions.empty() && k.fusions.back() == "linear") {
      ++linears;
      CHECK(k.nodes.size() == 2);
      CHECK(k.fusions.front() == "gemm-epilogue");
      CHECK(low->graph.nodes[static_cast<size_t>(k.nodes[static_cast<size_t>(k.anchor)])].op_type == "MatMul");
    }
  }
  CHECK(linears == 2);
  // gpusim's own executor runs one kernel per node: 11 run-time nodes.
  auto own = predict(g, test::library(test::gpu("nvidia-rtx-3090")), {std::nullopt, runtime("gpusim")});
  REQUIRE(own);
  CHECK(own->kernels.size() == 11);
  // Priced as the runtime runs it: fewer kernels, less time, each naming the nodes it covers.
  auto eager = predict(g, test::library(test::gpu("nvidia-rtx-3090")), {std::nullopt, runtime("pytorch-eager")});
  REQUIRE(eager);
  CHECK(eager->kernels.size() == 5);
  CHECK(eager->kernels_us < own->kernels_us);
  bool named = false;
  for (const PlannedKernel& k : eager->kernels) {
    if (k.node_names.size() == 5) named = k.node_names.front() == "act/Div" && k.fusions.back() == "gelu";
  }
  CHECK(named);
}

TEST_CASE("eager lowering under autocast: casts before matrix products, LayerNorm and the residual in fp32",
          "[sim][lowering]") {
  const Graph g = mlp_block();
  LoweringOptions o;
  o.autocast = DType::kFloat16;
  auto low = lower(g, runtime("pytorch-eager"), o);
  REQUIRE(low);
  int casts = 0;
  for (const PlanKernel& k : low->plan.kernels) {
    if (!k.fusions.empty() && k.fusions.back() == "autocast") {
      ++casts;
      CHECK(k.call == "to");
      CHECK(low->graph.nodes[static_cast<size_t>(k.nodes[0])].op_type == "Cast");
      CHECK(low->origin[static_cast<size_t>(k.nodes[0])] == -1);
    }
  }
  // x to fp16 for fc1; w1, b1, w2, b2 each once (autocast's weight cache); fc2 reads the fp16 GELU.
  CHECK(casts == 5);
  auto dtype_of = [&](const std::string& name) { return low->graph.tensor(*low->graph.find(name)).dtype; };
  CHECK(dtype_of("h1") == DType::kFloat16);    // the Linear's output
  CHECK(dtype_of("gelu") == DType::kFloat16);  // GELU runs in its input's type
  CHECK(dtype_of("r") == DType::kFloat32);     // fp32 x + fp16 Linear output promotes
  CHECK(dtype_of("y") == DType::kFloat32);     // layer_norm is on autocast's fp32 list
  // A runtime without autocast rules refuses, naming itself.
  auto plain = lower(g, runtime("torch-compile"), o);
  REQUIRE(plain);
  RuntimeModel none = runtime("pytorch-eager");
  none.lowering.autocast = {};
  auto refused = lower(g, none, o);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("has no autocast rules"));
}

TEST_CASE("eager lowering: attention is one SDPA kernel with its transposes folded in, unless skipped",
          "[sim][lowering]") {
  const Graph g = attention_block();
  auto low = lower(g, runtime("pytorch-eager"));
  REQUIRE(low);
  REQUIRE(low->plan.kernels.size() == 1);
  const PlanKernel& k = low->plan.kernels[0];
  CHECK(k.fusions.front() == "attention");
  CHECK(k.fusions.back() == "sdpa");
  CHECK(k.nodes.size() == 6);  // Mul, both Transposes, two MatMuls and the Softmax
  // A model whose code computes attention with matmuls (timm's Swin) skips the pattern: the
  // K^T transpose is still a view cuBLAS takes, the output transpose a copy.
  LoweringOptions o;
  o.skip = {"sdpa"};
  auto unfused = lower(g, runtime("pytorch-eager"), o);
  REQUIRE(unfused);
  CHECK(unfused->plan.kernels.size() == 5);
  o.skip = {"flash"};
  auto bad = lower(g, runtime("pytorch-eager"), o);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("has no kernel pattern \"flash\" to skip") &&
                                      Catch::Contains("its patterns: gelu"));
}

TEST_CASE("eager lowering: a convolution's bias is a kernel of its own, NCHW half convolutions convert layouts",
          "[sim][lowering]") {
  const Graph g = retype(conv_block(), DType::kFloat16);
  auto nchw = lower(g, runtime("pytorch-eager"));
  REQUIRE(nchw);
  const PlanKernel* bias = kernel_with(*nchw, "conv-bias");
  REQUIRE(bias);
  CHECK(bias->call == "conv");
  CHECK_FALSE(bias->call_first);  // a later kernel of the convolution's call
  int conversions = 0;
  for (const PlanKernel& k : nchw->plan.kernels) {
    if (!k.fusions.empty() && k.fusions.back() == "cudnn-nchw-half") {
      ++conversions;
      CHECK_FALSE(k.call_first);
    }
  }
  CHECK(conversions == 2);  // the input and the filter; the output is written in NCHW
  // conversion, conversion, conv, bias, BatchNorm, Relu.
  CHECK(nchw->plan.kernels.size() == 6);
  LoweringOptions o;
  o.layout = "nhwc";
  auto nhwc = lower(g, runtime("pytorch-eager"), o);
  REQUIRE(nhwc);
  CHECK(nhwc->plan.kernels.size() == 4);
  // In fp32 cuDNN runs NCHW as it is.
  auto fp32 = lower(conv_block(), runtime("pytorch-eager"));
  REQUIRE(fp32);
  CHECK(fp32->plan.kernels.size() == 4);
  o.layout = "nwhc";
  auto bad = lower(g, runtime("pytorch-eager"), o);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("layout \"nwhc\" is unknown") && Catch::Contains("nhwc"));
}

TEST_CASE("compile lowering: the bias, BatchNorm and Relu fuse into one kernel after the convolution",
          "[sim][lowering]") {
  auto low = lower(conv_block(), runtime("torch-compile"));
  REQUIRE(low);
  REQUIRE(low->plan.kernels.size() == 2);
  CHECK(low->graph.nodes[static_cast<size_t>(low->plan.kernels[0].nodes[0])].op_type == "Conv");
  CHECK(low->plan.kernels[1].nodes.size() == 3);  // bias Add, BatchNorm, Relu
  // The MLP: two library GEMMs with their bias, GELU one generated kernel, and the residual Add
  // with the LayerNorm (a reduction's prologue).
  auto mlp = lower(mlp_block(), runtime("torch-compile"));
  REQUIRE(mlp);
  CHECK(mlp->plan.kernels.size() == 4);
  const Graph g = mlp_block();
  auto eager = predict(g, test::library(test::gpu("nvidia-rtx-4090")), {std::nullopt, runtime("pytorch-eager")});
  auto compiled = predict(g, test::library(test::gpu("nvidia-rtx-4090")), {std::nullopt, runtime("torch-compile")});
  REQUIRE(eager);
  REQUIRE(compiled);
  CHECK(compiled->kernels_us < eager->kernels_us);
}

namespace {

// A grouped convolution (four groups of 32 input channels) with a bias, fp16.
Graph grouped_conv() {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT16, {2, 128, 16, 16});
  b.initializer("w", onnx::TensorProto::FLOAT16, {128, 32, 3, 3});
  b.node("Conv", {"x", "w"}, {"y"}, "conv").ints("pads", {1, 1, 1, 1}).i("group", 4);
  b.output("y");
  return test::build_graph(b, "grouped_conv.onnx");
}

int conversions(const Lowering& low) {
  int n = 0;
  for (const PlanKernel& k : low.plan.kernels) n += !k.fusions.empty() && k.fusions.back() == "cudnn-nchw-half";
  return n;
}

bool noted(const Lowering& low, const std::string& text) {
  for (const std::string& n : low.notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("compile lowering: inductor's layout optimization picks channels-last unless grouped convolutions or few "
          "convolutions weigh against it",
          "[sim][lowering]") {
  const RuntimeModel rt = runtime("torch-compile");
  REQUIRE(rt.lowering.layout_optimization.present);
  // A plain convolution: channels-last is cheaper (0.823 of its FLOPs), so no conversions.
  auto plain = lower(retype(conv_block(), DType::kFloat16), rt);
  REQUIRE(plain);
  CHECK(plain->layout == "nhwc");
  CHECK(conversions(*plain) == 0);
  CHECK(noted(*plain, "runs this graph channels-last although NCHW was asked"));
  // A grouped convolution costs 1.358 channels-last: the graph stays NCHW and cuDNN converts.
  auto grouped = lower(grouped_conv(), rt);
  REQUIRE(grouped);
  CHECK(grouped->layout == "nchw");
  CHECK(conversions(*grouped) == 2);
  CHECK(noted(*grouped, "come to 1.358 of their sum, 100% of them in grouped convolutions"));
  // Eager PyTorch has no such choice: NCHW as asked, converted.
  auto eager = lower(grouped_conv(), runtime("pytorch-eager"));
  REQUIRE(eager);
  CHECK(eager->layout == "nchw");
  CHECK(conversions(*eager) == 2);
  // Asked for channels-last, it runs channels-last and says nothing.
  LoweringOptions o;
  o.layout = "nhwc";
  auto asked = lower(grouped_conv(), rt, o);
  REQUIRE(asked);
  CHECK(asked->layout == "nhwc");
  CHECK(conversions(*asked) == 0);
  CHECK_FALSE(noted(*asked, "inductor"));
  // One convolution among 300 nodes: too few to change the layout.
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT16, {2, 16, 8, 8});
  b.initializer("w", onnx::TensorProto::FLOAT16, {32, 16, 3, 3});
  b.node("Conv", {"x", "w"}, {"t0"}, "conv").ints("pads", {1, 1, 1, 1});
  for (int i = 0; i < 300; ++i) {
    b.node("Relu", {"t" + std::to_string(i)}, {"t" + std::to_string(i + 1)}, "relu" + std::to_string(i));
  }
  b.output("t300");
  auto few = lower(test::build_graph(b, "few_convs.onnx"), rt);
  REQUIRE(few);
  CHECK(few->layout == "nchw");
  CHECK(noted(*few, "1 convolution(s) among about 304 nodes, fewer than one per 300"));
  // No convolution: nothing to decide, nothing said.
  auto none = lower(mlp_block(), rt);
  REQUIRE(none);
  CHECK_FALSE(noted(*none, "inductor"));
}

TEST_CASE("runtime files: a layout optimization is checked when read", "[sim][lowering][errors]") {
  auto load = [](const std::string& name, const std::string& body) { return load_runtime(write_runtime(name, body)); };
  auto r = load("lo-kind", "lowering:\n  layout_optimization:\n    cost: {grouped: 1.3, small: 0.8, in_out: 0.7, "
                           "default: 0.8, depthwise: 0.5}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lo-kind.yaml: lowering.layout_optimization.cost.depthwise") &&
                                    Catch::Contains("allowed: grouped, small, in_out, default"));
  r = load("lo-missing", "lowering:\n  layout_optimization:\n    cost: {grouped: 1.3, small: 0.8, in_out: 0.7}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.layout_optimization.cost.default") &&
                                    Catch::Contains("missing"));
  r = load("lo-nocost", "lowering:\n  layout_optimization: {nodes_per_conv: 300}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.layout_optimization.cost") &&
                                    Catch::Contains("for each kind of convolution"));
  r = load("lo-value", "lowering:\n  layout_optimization:\n    nodes_per_conv: -3\n    cost: {grouped: 1.3, small: "
                       "0.8, in_out: 0.7, default: 0.8}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.layout_optimization.nodes_per_conv") &&
                                    Catch::Contains("\"-3\" is not a number in (0, 1000000]"));
  r = load("lo-word", "lowering:\n  layout_optimization:\n    cost: {grouped: fast, small: 0.8, in_out: 0.7, "
                      "default: 0.8}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("cost.grouped") && Catch::Contains("\"fast\" is not a number"));
  r = load("lo-key", "lowering:\n  layout_optimization: {weights: {}}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.layout_optimization.weights") &&
                                    Catch::Contains("allowed: nodes_per_conv, cost, why"));
}

TEST_CASE("runtime files: patterns are checked when read", "[sim][lowering][errors]") {
  auto load = [](const std::string& name, const std::string& body) { return load_runtime(write_runtime(name, body)); };
  auto r = load("unknown-op", "lowering:\n  kernels:\n    - {name: act, region: {Gelux: 1, Mul: 1}}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("unknown-op.yaml: lowering.kernels[0].region.Gelux") &&
                                    Catch::Contains("matches nothing"));
  r = load("never", "lowering:\n  kernels:\n    - {name: x, chain: [{ops: [Conv], kinds: [rowwise]}, {ops: [Relu]}]}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.kernels[0].chain[0]") &&
                                    Catch::Contains("no op it names (Conv) runs as a rowwise kernel"));
  r = load("optional", "lowering:\n  kernels:\n    - {name: x, chain: [{ops: [Relu], optional: true}]}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("every step is optional, so it matches nothing"));
  r = load("overlap", "lowering:\n  kernels:\n    - {name: silu, region: {Sigmoid: 1, Mul: 1}}\n"
                      "    - {name: swish2, region: {Sigmoid: 1, Mul: 2}}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("kernel patterns \"silu\"") && Catch::Contains("\"swish2\"") &&
                                    Catch::Contains("overlap"));
  r = load("fuse3", "lowering:\n  fuse:\n    - {name: f, chain: [{ops: [Relu]}, {ops: [Relu]}, {ops: [Relu]}]}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("a fuse rule is a producer and a reader"));
  r = load("badkey", "lowering:\n  kernels:\n    - {name: x, region: {Sigmoid: 1, Mul: 1}, shape: 3}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.kernels[0].shape") && Catch::Contains("unknown key"));
  r = load("viewop", "lowering:\n  views: {ops: [Relu]}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("\"Relu\" is not data movement"));
  r = load("insert", "lowering:\n  inserts:\n    - {name: x, what: fuse, on: {ops: [Conv]}}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.inserts[0].what") && Catch::Contains("expected bias"));
}

TEST_CASE("runtime files: two patterns that claim the same node of a graph are an error naming both",
          "[sim][lowering][errors]") {
  // Chains of different lengths (the file's own check passes them), but both take fc1's bias Add.
  auto r = load_runtime(write_runtime("claims", "lowering:\n  kernels:\n"
                                                "    - {name: linear, chain: [{ops: [MatMul], others: weight}, {ops: "
                                                "[Add], others: bias}]}\n"
                                                "    - {name: bias-only, chain: [{ops: [Add], others: bias}]}\n"));
  REQUIRE(r);
  auto low = lower(mlp_block(), *r);
  REQUIRE_FALSE(low);
  CHECK_THAT(low.error().message, Catch::Contains("patterns \"linear\"") && Catch::Contains("\"bias-only\"") &&
                                      Catch::Contains("both match node \"fc1/Add\"") &&
                                      Catch::Contains("must not overlap"));
}

TEST_CASE("the planner's fusion passes and the lowerings share one matcher", "[sim][lowering][passes]") {
  const Graph g = mlp_block();
  const PatternMatcher pm(g);
  // The erf-GELU region, whatever order its nodes come in.
  auto gelu = pm.match_all(region_pattern("gelu", {{"Div", 1}, {"Erf", 1}, {"Add", 1}, {"Mul", 2}}));
  REQUIRE(gelu.size() == 1);
  CHECK(gelu[0].nodes.size() == 5);
  // The planner's gemm-epilogue pass is a chain pattern: fc1's MatMul and its bias Add.
  const Pattern* epilogue = nullptr;
  for (const Pattern& p : planner_pair_passes()) epilogue = p.name == "gemm-epilogue" ? &p : epilogue;
  REQUIRE(epilogue);
  int mm = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) mm = g.nodes[i].name == "fc1/MatMul" ? static_cast<int>(i) : mm;
  auto m = pm.match_at(*epilogue, mm);
  REQUIRE(m);
  CHECK(g.nodes[static_cast<size_t>(m->nodes[1])].name == "fc1/Add");
}

TEST_CASE("runtime files: extends, replay, vendors, a fixed layout and half accumulation are read and checked",
          "[sim][lowering][errors]") {
  auto load = [](const std::string& name, const std::string& body) { return load_runtime(write_runtime(name, body)); };
  // A file that extends another beside it takes its figures and lowering; each key given replaces one.
  write_runtime("base-rt", "default_us: 7\nhost_scaled: true\nop_us: {add: 3}\nlowering:\n  views:\n    ops: [Transpose]\n"
                           "  inserts:\n    - {name: conv-bias, what: bias, on: {ops: [Conv]}}\n");
  auto child = load("child-rt", "extends: base-rt\nreplay: true\ndefault_us: 1\nop_us: {}\nlowering:\n  inserts: []\n");
  REQUIRE(child);
  CHECK(child->name == "child-rt");
  CHECK(child->extends == "base-rt");
  CHECK(child->replay);
  CHECK(child->default_us == 1);
  CHECK(child->host_scaled);       // inherited
  CHECK(child->op_us.empty());     // replaced by the empty map
  CHECK(child->lowering.views.ops == std::vector<std::string>{"Transpose"});  // inherited
  CHECK(child->lowering.inserts.empty());                                      // replaced
  auto r = load("orphan-rt", "extends: no-such-runtime\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("orphan-rt.yaml: extends: \"no-such-runtime\": there is no") &&
                                    Catch::Contains("name a runtime file in the same directory"));
  r = load("path-rt", "extends: ../etc/passwd\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("extends: \"../etc/passwd\"; expected the name of a runtime file"));
  write_runtime("loop-a", "extends: loop-b\n");
  r = load("loop-b", "extends: loop-a\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("more than 8 files extend one another (a cycle?)"));
  r = load("replay-rt", "replay: sometimes\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("replay-rt.yaml: replay: \"sometimes\"; expected true"));
  r = load("vendor-rt", "vendors: [nvidia, 3dfx]\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("vendors: \"3dfx\"; expected nvidia, amd, intel, apple or cpu"));
  r = load("layout-rt", "lowering:\n  layout: {use: hwc}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.layout.use: \"hwc\"; expected nhwc or nchw"));
  r = load("layout2-rt", "lowering:\n  layout: {use: nhwc}\n  layout_optimization:\n    cost: {grouped: 1, small: 1, "
                         "in_out: 1, default: 1}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.layout: a runtime that fixes its layout has no "
                                                "layout_optimization"));
  r = load("acc-rt", "lowering:\n  half_accumulate: {classes: [conv, softmax]}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.half_accumulate.classes: \"softmax\"; expected conv or gemm"));
  r = load("acc2-rt", "lowering:\n  half_accumulate: {why: fast}\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("lowering.half_accumulate.classes: missing or empty"));
}

TEST_CASE("TensorRT's lowering: epilogues fused into the convolution, NHWC whatever asked, fp16 accumulation, and "
          "a runtime for other GPUs is refused",
          "[sim][lowering]") {
  const RuntimeModel trt = runtime("tensorrt");
  REQUIRE(trt.vendors == std::vector<std::string>{"nvidia"});
  // Conv, BatchNorm and Relu are one kernel; no bias kernel, no conversion, NHWC with a note.
  const Graph half = retype(conv_block(), DType::kFloat16);
  auto low = lower(half, trt);
  REQUIRE(low);
  CHECK(low->plan.kernels.size() == 1);
  CHECK(low->layout == "nhwc");
  CHECK(conversions(*low) == 0);
  CHECK(noted(*low, "tensorrt runs 4-D activations in nhwc whatever the layout asked (nchw)"));
  // The same engine priced with fp32 accumulation is slower on a GeForce card (half-rate fp32 accumulate).
  RuntimeModel fp32_acc = trt;
  fp32_acc.lowering.half_accumulate = {};
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT16, {8, 256, 64, 64});
  b.initializer("w", onnx::TensorProto::FLOAT16, {256, 256, 3, 3});
  b.node("Conv", {"x", "w"}, {"y"}, "conv").ints("pads", {1, 1, 1, 1});
  b.output("y");
  const Graph big = test::build_graph(b, "big_conv.onnx");
  const Target t = test::library(test::gpu("nvidia-rtx-3060"));
  auto fast = predict(big, t, {std::nullopt, trt});
  auto slow = predict(big, t, {std::nullopt, fp32_acc});
  REQUIRE(fast);
  REQUIRE(slow);
  CHECK(fast->kernels_us < 0.7 * slow->kernels_us);
  bool said = false;
  for (const std::string& n : fast->notes) said = said || n.find("accumulate in half precision under tensorrt") != std::string::npos;
  CHECK(said);
  // An fp32 graph is untouched by it.
  auto f32a = predict(conv_block(), t, {std::nullopt, trt});
  auto f32b = predict(conv_block(), t, {std::nullopt, fp32_acc});
  REQUIRE(f32a);
  REQUIRE(f32b);
  CHECK(f32a->kernels_us == Approx(f32b->kernels_us));
  // TensorRT on an AMD GPU, PyTorch's ROCm build on an NVIDIA one: refused, naming both.
  auto amd = predict(conv_block(), test::library(test::gpu("amd-mi300x")), {std::nullopt, trt});
  REQUIRE_FALSE(amd);
  CHECK_THAT(amd.error().message, Catch::Contains("runtime \"tensorrt\" runs on nvidia GPUs; amd-mi300x is amd"));
  auto rocm = predict(conv_block(), t, {std::nullopt, runtime("pytorch-eager-rocm")});
  REQUIRE_FALSE(rocm);
  CHECK_THAT(rocm.error().message, Catch::Contains("runs on amd GPUs; nvidia-rtx-3060 is nvidia"));
}

TEST_CASE("torch.compile's modes: reduce-overhead replays the compiled kernels, max-autotune fuses GEMM epilogues",
          "[sim][lowering]") {
  const RuntimeModel ro = runtime("torch-compile-reduce-overhead");
  const RuntimeModel ma = runtime("torch-compile-max-autotune");
  CHECK(ro.replay);
  CHECK(ro.extends == "torch-compile");
  CHECK(ma.replay);
  CHECK(ro.lowering.layout_optimization.present);  // torch-compile's, inherited
  // The same kernels as default mode; only the launches differ.
  auto def = lower(mlp_block(), runtime("torch-compile"));
  auto rep = lower(mlp_block(), ro);
  auto tuned = lower(mlp_block(), ma);
  REQUIRE(def);
  REQUIRE(rep);
  REQUIRE(tuned);
  CHECK(rep->plan.kernels.size() == def->plan.kernels.size());
  CHECK(tuned->plan.kernels.size() < def->plan.kernels.size());  // the first GEMM takes the GELU
  const Target t = test::library(test::gpu("nvidia-rtx-4090"));
  auto pd = predict(mlp_block(), t, {std::nullopt, runtime("torch-compile")});
  auto pr = predict(mlp_block(), t, {std::nullopt, ro});
  REQUIRE(pd);
  REQUIRE(pr);
  CHECK(pr->launch_bound_us < pd->launch_bound_us);
  CHECK(pr->kernels_us == Approx(pd->kernels_us));
}
