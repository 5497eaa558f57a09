// The Plan IR: the eager plan is valid and predicts like predict(); JSON round trips; malformed
// plan files are rejected naming the field; invalid plans are caught with reasons; fused groups
// move only what crosses their boundary.
#include <catch2/catch.hpp>

#include "gpusim/gpu_profile.h"
#include "gpusim/kernel_work.h"
#include "gpusim/onnx_import.h"
#include "gpusim/plan.h"
#include "gpusim/predict.h"
#include "gpusim/scheduler.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"

using namespace gpusim;
using Catch::Matchers::Contains;
constexpr int kF32 = onnx::TensorProto::FLOAT;

namespace {

using test::gpu;

const Graph& model(const std::string& file) { return test::bundled_model(file); }

// x -> MatMul(w) -> Add(bias) -> Relu -> MatMul(w2) -> Sigmoid -> y
Graph mlp() {
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{256}, int64_t{512}});
  b.initializer("w", kF32, {512, 1024});
  b.initializer("bias", kF32, {1024});
  b.initializer("w2", kF32, {1024, 256});
  b.node("MatMul", {"x", "w"}, {"h"}, "mm1");
  b.node("Add", {"h", "bias"}, {"hb"}, "bias_add");
  b.node("Relu", {"hb"}, {"r"}, "relu");
  b.node("MatMul", {"r", "w2"}, {"o"}, "mm2");
  b.node("Sigmoid", {"o"}, {"y"}, "sig");
  b.output("y");
  auto g = import_onnx(b.write("mlp.onnx"));
  if (!g) FAIL(g.error().message);
  return std::move(*g);
}

}  // namespace

TEST_CASE("the eager plan is valid and predict_plan reproduces predict", "[plan]") {
  const GpuProfile p = gpu("nvidia-a10");
  const DeviceModel d = make_device(p);
  for (const char* m : {"resnet50.onnx", "bert_base_seq128.onnx", "sd15_vae_decoder_512.onnx"}) {
    INFO(m);
    const Graph g = model(m);
    const Plan plan = eager_plan(g, test::library(p));
    REQUIRE(validate_plan(plan, g, d));
    auto a = predict(g, test::library(p));
    auto b = predict_plan(g, plan, p);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(b->total_us == Approx(a->total_us));
    CHECK(b->peak_memory_bytes == a->peak_memory_bytes);
  }
}

TEST_CASE("plan JSON round trips", "[plan]") {
  const Graph g = model("mobilenet_v2.onnx");
  const GpuProfile p = gpu("nvidia-l4");
  const DeviceModel d = make_device(p);
  Plan plan = eager_plan(g, test::library(p));
  plan.dtype = DType::kFloat16;
  plan.decisions.push_back("a decision");
  for (size_t t = 0; t < g.tensors.size() && plan.offloaded.empty(); ++t) {
    if (g.tensors[t].role == TensorRole::kWeight && g.tensors[t].elements() > 1000) {
      plan.offloaded.push_back(static_cast<TensorId>(t));
    }
  }
  REQUIRE(plan.offloaded.size() == 1);
  const std::string text = plan_to_json(plan, g);
  auto back = plan_from_json(text, "plan.json", g);
  REQUIRE(back);
  CHECK(plan_to_json(*back, g) == text);
  REQUIRE(back->kernels.size() == plan.kernels.size());
  CHECK(back->kernels[3].nodes == plan.kernels[3].nodes);
  CHECK(back->kernels[3].tile.threads == plan.kernels[3].tile.threads);
  CHECK(back->dtype == DType::kFloat16);
  CHECK(back->offloaded == plan.offloaded);
  auto a = predict_plan(g, plan, p);
  auto b = predict_plan(g, *back, p);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->total_us == Approx(b->total_us));
}

TEST_CASE("a plan nested 100,000 deep in any field is refused, not a stack overflow", "[plan][errors]") {
  const Graph g = mlp();
  const std::string text = plan_to_json(eager_plan(g, test::library(gpu("nvidia-l4"))), g);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  // The field's value replaced by the deep list, for every field the 18 crashes were found in.
  for (const std::string field : {"\"schema\": ", "\"decisions\": ", "\"tile\": ", "\"stream\": ",
                                  "\"recomputed\": ", "\"offloaded\": "}) {
    INFO(field);
    const size_t at = text.find(field);
    std::string bad = at == std::string::npos ? "{" + field + deep + ", " + text.substr(1)
                                              : text.substr(0, at + field.size()) + deep + "," +
                                                    text.substr(text.find_first_of(",}", at + field.size()) + 1);
    auto p = plan_from_json(bad, "deep.json", g);
    REQUIRE_FALSE(p);
    CHECK_THAT(p.error().message, Contains("deep.json: JSON nested deeper than 64 levels at byte"));
  }
}

TEST_CASE("malformed plan files are rejected naming the field", "[plan][errors]") {
  const Graph g = mlp();
  auto err = [&](const std::string& text) {
    auto p = plan_from_json(text, "bad.json", g);
    REQUIRE_FALSE(p);
    return p.error().message;
  };
  CHECK_THAT(err("{not json"), Contains("bad.json: not valid JSON at byte 3"));
  CHECK(err("[]") == "bad.json: the file is not a JSON object; expected a gpusim.plan/1 document");
  CHECK(err(R"({"schema": "gpusim.plan/9", "kernels": []})") == "bad.json: schema: \"gpusim.plan/9\" is not \"gpusim.plan/1\"");
  CHECK(err(R"({"schema": "gpusim.plan/1"})") == "bad.json: kernels: missing or not a list; expected one entry per kernel");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernelz": []})") ==
        "bad.json: kernelz: unknown key; allowed: schema, model, gpu, dtype, allow_tf32, inputs, scheduler, objective, kernels, "
        "offloaded, decisions, predicted");
  CHECK(err(R"({"schema": "gpusim.plan/1", "inputs": [1], "kernels": []})") ==
        "bad.json: inputs: [1] is not an object of input name -> shape");
  CHECK(err(R"({"schema": "gpusim.plan/1", "inputs": {"x": [2, -1]}, "kernels": []})") ==
        "bad.json: inputs.x: [2,-1] is not a shape (a list of dims >= 0)");
  CHECK(err(R"({"schema": "gpusim.plan/1", "allow_tf32": "yes", "kernels": []})") ==
        "bad.json: allow_tf32: \"yes\" is not true or false");
  CHECK(err(R"({"schema": "gpusim.plan/1", "dtype": "fp4", "kernels": []})") ==
        "bad.json: dtype: \"fp4\" is not fp32, fp16, bf16, int8, fp8 or null");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": ["mm9"], "tile": {}}]})") ==
        "bad.json: kernels[0].nodes[0]: \"mm9\" is not a node of " + g.source_path +
            " (was the plan made for another model?)");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": [], "tile": {}}]})") ==
        "bad.json: kernels[0].nodes: missing or empty; a kernel runs at least one node");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": ["mm1"], "anchor": "relu", "tile": {}}]})") ==
        "bad.json: kernels[0].anchor: \"relu\" is not one of the kernel's nodes");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": ["mm1"], "tile": {"block_m": -64}}]})") ==
        "bad.json: kernels[0].tile.block_m: -64 is not an integer in [0, 65536]");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": ["mm1"], "tile": {"warps": 4}}]})") ==
        "bad.json: kernels[0].tile.warps: unknown key; allowed: block_m, block_n, block_k, threads, stages, split_k, "
        "vector_width, items_per_thread, smem_bytes, registers, main_loop, chain");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": ["mm1"], "tile": {"main_loop": "tensor"}}]})") ==
        "bad.json: kernels[0].tile.main_loop: \"tensor\" is not \"any\", \"vector\", \"matrix\" or \"tf32\"");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": ["mm1"], "tile": {"smem_bytes": -1}}]})") ==
        "bad.json: kernels[0].tile.smem_bytes: -1 is not an integer in [0, 16777216]");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": ["mm1"], "tile": {"registers": 4096}}]})") ==
        "bad.json: kernels[0].tile.registers: 4096 is not an integer in [0, 1024]");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [{"nodes": ["mm1"]}]})") ==
        "bad.json: kernels[0].tile: missing; expected {block_m, ...}");
  CHECK(err(R"({"schema": "gpusim.plan/1", "kernels": [], "offloaded": ["x"]})") ==
        "bad.json: offloaded[0]: \"x\" is not a weight of the model");
}

TEST_CASE("invalid plans are caught with every reason", "[plan][errors]") {
  const Graph g = mlp();
  const DeviceModel d = make_device(gpu("nvidia-t4"));
  const Plan good = eager_plan(g, test::library(gpu("nvidia-t4")));
  REQUIRE(good.kernels.size() == 5);
  REQUIRE(validate_plan(good, g, d));
  SECTION("a node in no kernel and one in two") {
    Plan p = good;
    p.kernels[1].nodes = {0};  // bias_add dropped, mm1 twice
    auto s = validate_plan(p, g, d);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Contains("node \"mm1\" runs in kernels 0 and 1 without being marked recomputed"));
    CHECK_THAT(s.error().message, Contains("node \"bias_add\" (Add) is in no kernel"));
  }
  SECTION("a consumer before its producer") {
    Plan p = good;
    std::swap(p.kernels[0], p.kernels[1]);
    auto s = validate_plan(p, g, d);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Contains("node \"bias_add\" in kernel 0 reads \"h\", which kernel 1 produces later"));
  }
  SECTION("two main loops in one kernel") {
    Plan p = good;
    p.kernels[0].nodes = {0, 1, 2, 3};
    p.kernels.erase(p.kernels.begin() + 1, p.kernels.begin() + 4);
    auto s = validate_plan(p, g, d);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Contains("kernel 0 fuses 2 matmul/conv ops; a kernel has one main loop"));
  }
  SECTION("an infeasible tile") {
    Plan p = good;
    p.kernels[0].tile = {128, 128, 64, 256, 4, 1, 1, 1};
    auto s = validate_plan(p, g, d);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Contains("kernel 0 (\"mm1\"): tile 128x128x64 with 4 stages needs 256 KiB shared memory, "
                                           "a block may use 64 KiB"));
  }
  SECTION("a tile of zero sizes (a plan file's \"tile\": {}), which priced the GEMM at NaN") {
    Plan p = good;
    p.kernels[0].tile = TileConfig{};
    auto s = validate_plan(p, g, d);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Contains("kernel 0 (\"mm1\"): tile.block_m is 0; a GEMM or convolution kernel's blocks "
                                           "must be at least 1"));
    p = good;
    p.kernels[1].tile.threads = 0;
    s = validate_plan(p, g, d);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Contains("kernel 1 (\"bias_add\"): tile.threads is 0; it must be at least 1"));
  }
}

TEST_CASE("a fused group moves only what crosses its boundary", "[plan]") {
  const Graph g = mlp();
  const GraphIndex idx = index_graph(g);
  // mm1 + bias_add + relu: reads x, w, bias; writes r. h and hb never leave the kernel.
  const KernelWork w = group_work(g, idx, {0, 1, 2}, 0);
  CHECK(w.cls == OpClass::kGemm);
  CHECK(w.bytes_read == 4 * (256 * 512 + 512 * 1024 + 1024));
  CHECK(w.bytes_written == 4 * 256 * 1024);
  CHECK(w.epilogue_bytes == 4 * 1024);
  CHECK(w.epilogue_flops.fma == 256 * 1024);      // the bias add
  CHECK(w.epilogue_flops.compare == 256 * 1024);  // the relu
  CHECK(w.macs == 256LL * 1024 * 512);
  // The fused kernel beats the three unfused ones on the simulator.
  const DeviceModel d = make_device(gpu("nvidia-rtx-3060"));
  double apart = 0;
  for (int i : {0, 1, 2}) {
    const KernelWork one = group_work(g, idx, {i}, 0);
    apart += kernel_cost(one, choose_tile(one, d), d).total_us;
  }
  CHECK(kernel_cost(w, choose_tile(w, d), d).total_us < apart);
}

TEST_CASE("each kernel carries its kind and operand roles, set once where it is built", "[plan]") {
  const Graph g = mlp();
  const GraphIndex idx = index_graph(g);
  auto id = [&](const char* name) { return *g.find(name); };
  // mm1 + bias_add + relu: one main loop with a bias epilogue.
  PlanKernel k;
  k.nodes = {0, 1, 2};
  classify_kernel(g, idx, k);
  CHECK(k.kind == KernelKind::kMainLoop);
  const std::vector<KernelOperand> want = {{id("x"), OperandRole::kA},
                                           {id("w"), OperandRole::kB},
                                           {id("bias"), OperandRole::kEpilogue},
                                           {id("r"), OperandRole::kOutput}};
  CHECK(k.operands == want);
  // The eager plan: each kernel classified by whoever built it.
  const Plan eager = eager_plan(g, test::library(gpu("nvidia-a10")));
  REQUIRE(eager.kernels.size() == 5);
  CHECK(eager.kernels[0].kind == KernelKind::kMainLoop);
  CHECK(eager.kernels[1].kind == KernelKind::kPointwise);
  CHECK(eager.kernels[4].kind == KernelKind::kPointwise);
  CHECK(eager.kernels[1].operands == std::vector<KernelOperand>{{id("h"), OperandRole::kInput},
                                                                {id("bias"), OperandRole::kInput},
                                                                {id("hb"), OperandRole::kOutput}});
  // Rows and copies.
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{8}, int64_t{16}});
  b.node("Softmax", {"x"}, {"s"}, "softmax").i("axis", -1);
  b.node("Transpose", {"s"}, {"t"}, "transpose").ints("perm", {1, 0});
  b.initializer_i64("shape", {1}, {128});
  b.node("Reshape", {"t", "shape"}, {"y"}, "flatten");
  b.output("y");
  auto g2 = import_onnx(b.write("rows_copies.onnx"));
  REQUIRE(g2);
  const Plan p2 = eager_plan(*g2, test::library(gpu("nvidia-a10")));
  REQUIRE(p2.kernels.size() == 2);  // the Reshape is a view
  CHECK(p2.kernels[0].kind == KernelKind::kRow);
  CHECK(p2.kernels[1].kind == KernelKind::kCopy);
  // One rule for views: the Reshape's output is the Transpose's memory.
  const std::vector<TensorId> roots = view_roots(*g2);
  CHECK(roots[static_cast<size_t>(*g2->find("y"))] == *g2->find("t"));
  CHECK(is_view(*g2, g2->nodes[2]));
  CHECK_FALSE(is_view(*g2, g2->nodes[1]));
  CHECK(index_graph(*g2).root == roots);
}

TEST_CASE("attention kernels name their query, key and value", "[plan]") {
  const Graph& g = model("bert_base_seq128.onnx");
  const GpuProfile p = gpu("nvidia-a10");
  FusionSpace s(g, test::library(p));
  Decision only_attention(s.candidates().size(), 0);
  for (size_t i = 0; i < s.candidates().size(); ++i) only_attention[i] = s.candidates()[i].pass == "attention";
  const Plan plan = s.build(only_attention, SchedulerKind::kGreedy);
  int seen = 0;
  for (const PlanKernel& k : plan.kernels) {
    if (k.kind != KernelKind::kAttention) continue;
    ++seen;
    auto has = [&](OperandRole r) {
      return std::any_of(k.operands.begin(), k.operands.end(), [&](const KernelOperand& o) { return o.role == r; });
    };
    CHECK(has(OperandRole::kQuery));
    CHECK(has(OperandRole::kKey));
    CHECK(has(OperandRole::kValue));
    CHECK(has(OperandRole::kOutput));
  }
  CHECK(seen == 12);  // one per layer
  // Kinds survive JSON; a file that states another kind, scheduler or objective is refused by name.
  const std::string text = plan_to_json(plan, g);
  CHECK_THAT(text, Contains("\"kind\": \"attention\""));
  auto back = plan_from_json(text, "p.json", g);
  REQUIRE(back);
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    CHECK(back->kernels[i].kind == plan.kernels[i].kind);
    CHECK(back->kernels[i].operands == plan.kernels[i].operands);
  }
  CHECK(back->scheduler == SchedulerKind::kGreedy);
  std::string wrong = text;
  wrong.replace(wrong.find("\"kind\": \"attention\""), 19, "\"kind\": \"row\"");
  auto bad = plan_from_json(wrong, "p.json", g);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Contains(".kind: \"row\" is not what its nodes and fusions make (\"attention\")"));
  std::string sched = text;
  sched.replace(sched.find("\"scheduler\": \"greedy\""), 21, "\"scheduler\": \"annealing\"");
  auto bs = plan_from_json(sched, "p.json", g);
  REQUIRE_FALSE(bs);
  CHECK_THAT(bs.error().message,
             Contains("p.json: scheduler: \"annealing\" is not eager, greedy, beam, random, split or lowering:<runtime>"));
  std::string obj = text;
  obj.replace(obj.find("\"objective\": \"latency\""), 22, "\"objective\": \"speed\"");
  auto bo = plan_from_json(obj, "p.json", g);
  REQUIRE_FALSE(bo);
  CHECK_THAT(bo.error().message, Contains("p.json: objective: \"speed\" is not one of latency, throughput, energy, memory"));
}

TEST_CASE("a kernel built by hand without classify_kernel is caught by validate_plan", "[plan]") {
  const Graph g = mlp();
  const DeviceModel d = make_device(gpu("nvidia-a10"));
  Plan p = eager_plan(g, test::library(gpu("nvidia-a10")));
  REQUIRE(validate_plan(p, g, d));
  p.kernels[0].kind = KernelKind::kPointwise;  // mm1 is a main loop
  auto v = validate_plan(p, g, d);
  REQUIRE_FALSE(v);
  CHECK_THAT(v.error().message, Contains("kernel 0 is marked pointwise but its ops make a main-loop kernel"));
  p.kernels[0].kind = KernelKind::kMainLoop;
  p.kernels[0].operands.clear();
  v = validate_plan(p, g, d);
  REQUIRE_FALSE(v);
  CHECK_THAT(v.error().message, Contains("kernel 0: its operands are not those of its ops"));
}

TEST_CASE("scheduler and objective names parse to the IR's enums", "[plan]") {
  for (const std::string& n : scheduler_names()) {
    auto k = parse_scheduler(n);
    REQUIRE(k);
    CHECK(scheduler_name(*k) == n);
  }
  auto bad = parse_scheduler("lowering");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "`scheduler` \"lowering\" is not one of eager, greedy, beam, random, split");
  auto o = parse_objective("speed", "--objective");
  REQUIRE_FALSE(o);
  CHECK(o.error().message == "--objective \"speed\" is not one of latency, throughput, energy, memory");
  CHECK(parse_objective("energy").value() == Objective::kEnergy);
  CHECK(kernel_kind_from_name("main-loop") == KernelKind::kMainLoop);
  CHECK_FALSE(kernel_kind_from_name("gemm"));
  CHECK(operand_role_name(OperandRole::kValue) == "value");
}
