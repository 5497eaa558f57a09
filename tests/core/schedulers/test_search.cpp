// Fusion passes on small graphs, every scheduler on every bundled model over a range of GPUs
// (valid plans, never slower than eager), reproducible random sampling, offloading to fit.
#include <catch2/catch.hpp>

#include <algorithm>

#include "gpusim/kernel_work.h"
#include "gpusim/onnx_import.h"
#include "gpusim/scheduler.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"

#include <random>

using namespace gpusim;
using Catch::Matchers::Contains;
constexpr int kF32 = onnx::TensorProto::FLOAT;

namespace {

using test::gpu;

const Graph& model(const std::string& file) { return test::bundled_model(file); }
Graph build(const test::OnnxBuilder& b, const std::string& file) { return test::build_graph(b, file); }

std::vector<std::string> passes(const FusionSpace& s) {
  std::vector<std::string> out;
  for (const auto& c : s.candidates()) out.push_back(c.pass);
  return out;
}

}  // namespace

TEST_CASE("pass: elementwise chains fuse and save the intermediate", "[schedulers][passes]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{1024}, int64_t{1024}});
  b.node("Sigmoid", {"x"}, {"s"}, "sig");
  b.node("Mul", {"x", "s"}, {"silu"}, "mul");
  b.node("Tanh", {"silu"}, {"y"}, "tanh");
  b.output("y");
  const Graph g = build(b, "chain.onnx");
  const FusionSpace s(g, test::portable(gpu("nvidia-rtx-3060")));
  CHECK(passes(s) == std::vector<std::string>{"elementwise-chain", "elementwise-chain"});
  const Decision all(s.candidates().size(), 1);
  REQUIRE(s.groups(all).size() == 1);
  CHECK(s.score_us(all) < s.score_us(Decision(s.candidates().size(), 0)));
  const Plan p = s.build(all, SchedulerKind::kGreedy);
  REQUIRE(validate_plan(p, g, s.device()));
  REQUIRE(p.decisions.size() == 2);
  CHECK_THAT(p.decisions[0], Contains("elementwise-chain: Sigmoid \"sig\" + Mul \"mul\"; saves 12.58 MB of traffic"));
}

TEST_CASE("pass: GEMM and conv epilogues, BatchNorm folded into its conv", "[schedulers][passes]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{1}, int64_t{64}, int64_t{56}, int64_t{56}});
  b.initializer("w", kF32, {64, 64, 3, 3});
  b.initializer("sc", kF32, {64});
  b.initializer("bi", kF32, {64});
  b.initializer("mu", kF32, {64});
  b.initializer("va", kF32, {64});
  b.node("Conv", {"x", "w"}, {"c"}, "conv").ints("pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"c", "sc", "bi", "mu", "va"}, {"bn"}, "bn");
  b.node("Relu", {"bn"}, {"r"}, "relu");
  b.node("Add", {"r", "x"}, {"y"}, "residual");
  b.output("y");
  const Graph g = build(b, "conv_bn.onnx");
  const FusionSpace s(g, test::portable(gpu("nvidia-a100-40gb")));
  CHECK(passes(s) == std::vector<std::string>{"batchnorm-fold", "elementwise-chain", "elementwise-chain"});
  const Plan p = s.build(Decision(s.candidates().size(), 1), SchedulerKind::kGreedy);
  REQUIRE(p.kernels.size() == 1);
  CHECK(p.kernels[0].fusions == std::vector<std::string>{"batchnorm-fold", "elementwise-chain"});
  REQUIRE(validate_plan(p, g, s.device()));
}

TEST_CASE("pass: normalization prologue and epilogue", "[schedulers][passes]") {
  test::OnnxBuilder b(18);
  b.input("x", kF32, {int64_t{2}, int64_t{128}, int64_t{768}});
  b.input("res", kF32, {int64_t{2}, int64_t{128}, int64_t{768}});
  b.initializer("g", kF32, {768});
  b.initializer("bb", kF32, {768});
  b.node("Add", {"x", "res"}, {"s"}, "residual");
  b.node("LayerNormalization", {"s", "g", "bb"}, {"ln"}, "ln").i("axis", -1);
  b.node("Mul", {"ln", "x"}, {"y"}, "scale");
  b.output("y");
  const Graph g = build(b, "norm.onnx");
  const FusionSpace s(g, test::portable(gpu("nvidia-l4")));
  CHECK(passes(s) == std::vector<std::string>{"norm-prologue", "norm-epilogue"});
  const Decision all(s.candidates().size(), 1);
  REQUIRE(s.groups(all).size() == 1);
  CHECK(s.score_us(all) < s.score_us(Decision(s.candidates().size(), 0)));
}

TEST_CASE("pass: attention becomes one kernel and a GEMM never takes a second main loop", "[schedulers][passes]") {
  test::OnnxBuilder b;
  b.input("q", kF32, {int64_t{8}, int64_t{1024}, int64_t{64}});
  b.input("k", kF32, {int64_t{8}, int64_t{1024}, int64_t{64}});
  b.input("v", kF32, {int64_t{8}, int64_t{1024}, int64_t{64}});
  b.node("Transpose", {"k"}, {"kt"}, "kt").ints("perm", {0, 2, 1});
  b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
  b.initializer("scale", kF32, {});
  b.node("Mul", {"s", "scale"}, {"ss"}, "scale_mul");
  b.node("Softmax", {"ss"}, {"p"}, "softmax").i("axis", -1);
  b.node("MatMul", {"p", "v"}, {"o"}, "pv");
  b.output("o");
  const Graph g = build(b, "attention.onnx");
  const FusionSpace s(g, test::portable(gpu("nvidia-h100-sxm")));
  const auto names = passes(s);
  CHECK(std::find(names.begin(), names.end(), "attention") != names.end());
  CHECK(std::find(names.begin(), names.end(), "transpose-into-gemm") != names.end());
  Decision only_attention(s.candidates().size(), 0);
  for (size_t i = 0; i < names.size(); ++i) only_attention[i] = names[i] == "attention";
  const Plan p = s.build(only_attention, SchedulerKind::kGreedy);
  REQUIRE(p.kernels.size() == 1);
  CHECK(p.kernels[0].fusions.front() == "attention");
  REQUIRE(validate_plan(p, g, s.device()));
  CHECK(s.score_us(only_attention) < s.score_us(Decision(s.candidates().size(), 0)));
  // Without the attention pass, the two MatMuls never end up in one kernel.
  Decision rest(s.candidates().size(), 1);
  for (size_t i = 0; i < names.size(); ++i) rest[i] = names[i] != "attention";
  for (const auto& grp : s.groups(rest)) {
    int matmuls = 0;
    for (int k : grp) matmuls += g.nodes[static_cast<size_t>(s.eager().kernels[static_cast<size_t>(k)].nodes[0])].op_type == "MatMul";
    CHECK(matmuls <= 1);
  }
}

TEST_CASE("every scheduler gives valid plans never slower than eager on every bundled model", "[schedulers]") {
  const std::vector<std::string> models = {"resnet50.onnx",         "mobilenet_v2.onnx",        "vit_b_16.onnx",
                                           "bert_base_seq128.onnx", "gpt2_prefill_seq512.onnx", "sd15_unet_64x64.onnx",
                                           "sd15_vae_decoder_512.onnx"};
  const std::vector<std::string> gpus = {"nvidia-rtx-3060", "nvidia-h100-sxm", "amd-mi300x", "apple-m3-max", "nvidia-gtx-1080-ti"};
  for (const std::string& m : models) {
    const Graph g = model(m);
    for (const std::string& name : gpus) {
      const GpuProfile p = gpu(name);
      const DeviceModel d = make_device(p);
      for (const std::string& sched : scheduler_names()) {
        if ((sched == "beam" || sched == "split") && name != "nvidia-rtx-3060") continue;  // slow tier elsewhere
        INFO(m << " on " << name << " with " << sched);
        SearchOptions o;
        o.scheduler = *scheduler_from_name(sched);
        o.dtype = DType::kFloat16;
        o.beam_width = 2;
        o.samples = 8;
        auto r = search(g, test::portable(p), o);
        INFO((r ? std::string() : r.error().message));
        REQUIRE(r);
        REQUIRE(!r->plans.empty());
        const RankedPlan& best = r->plans.front();
        CHECK(validate_plan(best.plan, retype(g, DType::kFloat16), d));
        if (sched != "random") CHECK(best.prediction.total_us <= r->eager.total_us * 1.0001);
      }
    }
  }
}

TEST_CASE("random sampling is reproducible by seed", "[schedulers]") {
  const Graph g = model("bert_base_seq128.onnx");
  const GpuProfile p = gpu("nvidia-a10");
  SearchOptions o;
  o.scheduler = SchedulerKind::kRandom;
  o.samples = 16;
  o.top_k = 3;
  o.seed = 42;
  auto a = search(g, test::portable(p), o), b = search(g, test::portable(p), o);
  o.seed = 43;
  auto c = search(g, test::portable(p), o);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  REQUIRE(a->plans.size() == b->plans.size());
  for (size_t i = 0; i < a->plans.size(); ++i) {
    CHECK(plan_to_json(a->plans[i].plan, g) == plan_to_json(b->plans[i].plan, g));
  }
  // Another seed samples other plans (the eager plan, a candidate too, may rank first in both).
  std::string all_a, all_c;
  for (const auto& rp : a->plans) all_a += plan_to_json(rp.plan, g);
  for (const auto& rp : c->plans) all_c += plan_to_json(rp.plan, g);
  CHECK(all_a != all_c);
}

TEST_CASE("a plan over the memory budget offloads weights and pays for the transfers", "[schedulers]") {
  const Graph g = model("resnet50.onnx");
  const GpuProfile p = gpu("nvidia-rtx-4060");
  SearchOptions o;
  o.scheduler = SchedulerKind::kGreedy;
  auto fits = search(g, test::portable(p), o);
  o.memory_budget_gb = 0.08;  // the fp32 weights alone are 102 MB
  auto tight = search(g, test::portable(p), o);
  REQUIRE(fits);
  REQUIRE(tight);
  const RankedPlan& t = tight->plans.front();
  CHECK(fits->plans.front().plan.offloaded.empty());
  CHECK_FALSE(t.plan.offloaded.empty());
  CHECK(static_cast<double>(t.prediction.peak_memory_bytes) <= 0.08e9);
  CHECK(t.prediction.total_us > fits->plans.front().prediction.total_us);
  CHECK_THAT(t.plan.decisions.front(), Contains("offload: ") && Contains("so the plan fits in the 0.08 GB budget"));
  CHECK(validate_plan(t.plan, g, make_device(p)));
}

TEST_CASE("a plan's decisions are sorted by time saved and their savings add up", "[schedulers]") {
  const Graph g = model("resnet50.onnx");
  const GpuProfile p = gpu("nvidia-t4");
  SearchOptions o;
  o.scheduler = SchedulerKind::kGreedy;
  auto r = search(g, test::portable(p), o);
  REQUIRE(r);
  const Plan& best = r->plans.front().plan;
  REQUIRE(best.decision_saved_us.size() == best.decisions.size());
  REQUIRE(best.decisions.size() > 10);
  CHECK(std::is_sorted(best.decision_saved_us.rbegin(), best.decision_saved_us.rend()));
}

TEST_CASE("fusion savings add up: a chain of three ops fused by two decisions saves what one kernel saves over three", "[schedulers]") {
  // x -> Relu -> Sigmoid -> Tanh on 64 Mi floats (256 MB, far past any L2): two fusions, one kernel.
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {64, 1024, 1024});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Sigmoid", {"a"}, {"s"}, "sigmoid");
  b.node("Tanh", {"s"}, {"y"}, "tanh");
  b.output("y");
  const Graph g = build(b, "chain3.onnx");
  const GpuProfile p = gpu("nvidia-a100-40gb");
  SearchOptions o;
  o.scheduler = SchedulerKind::kGreedy;
  auto r = search(g, test::portable(p), o);
  REQUIRE(r);
  const RankedPlan& best = r->plans.front();
  REQUIRE(best.plan.kernels.size() == 1);
  REQUIRE(best.plan.decision_saved_us.size() == 2);
  double eager_kernels = 0, plan_kernels = 0;
  for (const auto& k : r->eager.kernels) eager_kernels += k.cost.total_us;
  for (const auto& k : best.prediction.kernels) plan_kernels += k.cost.total_us;
  const double saved = best.plan.decision_saved_us[0] + best.plan.decision_saved_us[1];
  INFO("saved " << saved << " us; eager kernels " << eager_kernels << " us, plan kernels " << plan_kernels << " us");
  // The two fusions' savings add up to the kernel time the one fused kernel removes.
  CHECK(saved == Approx(eager_kernels - plan_kernels).epsilon(0.02));
}

TEST_CASE("objectives rank by their own figure", "[schedulers]") {
  const Graph g = model("mobilenet_v2.onnx");
  const GpuProfile p = gpu("nvidia-t4");
  for (Objective obj : {Objective::kLatency, Objective::kEnergy, Objective::kMemory, Objective::kThroughput}) {
    SearchOptions o;
    o.scheduler = SchedulerKind::kRandom;
    o.samples = 12;
    o.objective = obj;
    o.top_k = 4;
    auto r = search(g, test::portable(p), o);
    REQUIRE(r);
    for (size_t i = 1; i < r->plans.size(); ++i) CHECK(r->plans[i - 1].objective_value <= r->plans[i].objective_value);
  }
}

TEST_CASE("gpusim plan reports plans and reasons and writes a plan predict can score", "[schedulers][cli]") {
  const std::string out = test::temp_dir() + "/resnet.plan.json";
  const test::Run r = test::run_gpusim("plan " + test::source_dir() + "/models/resnet50.onnx --gpu nvidia-rtx-3060 "
                                       "--dtype fp16 --scheduler beam --beam-width 2 --out " + out);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("speedup"));
  CHECK_THAT(r.out, Contains("gemm-epilogue: Conv"));
  const test::Run p = test::run_gpusim("predict " + test::source_dir() + "/models/resnet50.onnx --gpu nvidia-rtx-3060 --plan " + out);
  INFO(p.out);
  REQUIRE(p.rc == 0);
  CHECK_THAT(p.out, Contains("plan from the beam scheduler"));
  const test::Run bad = test::run_gpusim("plan " + test::source_dir() + "/models/resnet50.onnx --gpu nvidia-t4 --scheduler annealing");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.out, Contains("--scheduler \"annealing\" is not one of eager, greedy, beam, random, split"));
  const test::Run obj = test::run_gpusim("plan " + test::source_dir() + "/models/resnet50.onnx --gpu nvidia-t4 --objective speed");
  CHECK(obj.rc == 2);
  CHECK_THAT(obj.out, Contains("--objective \"speed\" is not one of latency, throughput, energy, memory"));
  const test::Run wrong = test::run_gpusim("predict " + test::source_dir() + "/models/mobilenet_v2.onnx --gpu nvidia-t4 --plan " + out);
  CHECK(wrong.rc == 1);
  CHECK_THAT(wrong.out, Contains("is not a node of"));
}

TEST_CASE("pass: recompute a cheap op in each reader instead of storing it", "[schedulers][passes]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{2048}, int64_t{2048}});
  b.input("a", kF32, {int64_t{2048}, int64_t{2048}});
  b.input("c", kF32, {int64_t{2048}, int64_t{2048}});
  b.node("Sigmoid", {"x"}, {"s"}, "gate");
  b.node("Mul", {"s", "a"}, {"y1"}, "use1");
  b.node("Mul", {"s", "c"}, {"y2"}, "use2");
  b.output("y1");
  b.output("y2");
  const Graph g = build(b, "recompute.onnx");
  const FusionSpace s(g, test::portable(gpu("nvidia-rtx-4090")));
  REQUIRE(passes(s) == std::vector<std::string>{"recompute"});
  const Decision take(1, 1), keep(1, 0);
  CHECK(s.score_us(take) < s.score_us(keep));  // 6 tensors of traffic instead of 8
  const Plan p = s.build(take, SchedulerKind::kGreedy);
  REQUIRE(p.kernels.size() == 2);
  for (const PlanKernel& k : p.kernels) {
    CHECK(k.recomputed == std::vector<int>{0});
    CHECK(k.fusions == std::vector<std::string>{"recompute"});
  }
  REQUIRE(validate_plan(p, g, s.device()));
  CHECK_THAT(p.decisions.front(), Contains("recompute: Sigmoid \"gate\" runs again in each of its 2 readers instead of "
                                           "being stored; saves 33.55 MB of traffic"));
  auto pred = predict_plan(g, p, gpu("nvidia-rtx-4090"));
  REQUIRE(pred);
  auto eager = predict(g, test::library(gpu("nvidia-rtx-4090")));
  REQUIRE(eager);
  CHECK(pred->kernels_us < eager->kernels_us);  // end to end, the 16 MB host copies dominate
  CHECK(pred->peak_memory_bytes < eager->peak_memory_bytes);  // s is never stored
  SearchOptions o;
  o.scheduler = SchedulerKind::kGreedy;
  auto r = search(g, test::portable(gpu("nvidia-rtx-4090")), o);
  REQUIRE(r);
  CHECK(r->plans.front().plan.kernels.size() == 2);
}

TEST_CASE("random plans sample tilings from the feasible space and stay valid", "[schedulers]") {
  const Graph g = model("resnet50.onnx");
  const GpuProfile p = gpu("nvidia-t4");
  SearchOptions o;
  o.scheduler = SchedulerKind::kRandom;
  o.samples = 8;
  o.top_k = 4;
  o.seed = 7;
  auto r = search(g, test::portable(p), o);
  REQUIRE(r);
  const Plan best_tiles = FusionSpace(g, test::portable(p)).build(Decision(FusionSpace(g, test::portable(p)).candidates().size(), 0), SchedulerKind::kEager);
  int differ = 0;
  for (const RankedPlan& rp : r->plans) {
    CHECK(validate_plan(rp.plan, g, make_device(p)));
    for (const PlanKernel& k : rp.plan.kernels) {
      for (const PlanKernel& e : best_tiles.kernels) {
        if (e.nodes == k.nodes && (e.tile.block_m != k.tile.block_m || e.tile.threads != k.tile.threads)) ++differ;
      }
    }
  }
  CHECK(differ > 0);
}

TEST_CASE("pass: a transpose feeding a GEMM is read in place", "[schedulers][passes]") {
  test::OnnxBuilder b;
  b.input("x", kF32, {int64_t{512}, int64_t{1024}});
  b.initializer("w", kF32, {512, 256});
  b.node("Transpose", {"x"}, {"xt"}, "t").ints("perm", {1, 0});
  b.node("MatMul", {"xt", "w"}, {"y"}, "mm");
  b.output("y");
  const Graph g = build(b, "transpose_gemm.onnx");
  const FusionSpace s(g, test::portable(gpu("nvidia-a10")));
  REQUIRE(passes(s) == std::vector<std::string>{"transpose-into-gemm"});
  const Decision take(1, 1);
  CHECK(s.score_us(take) < s.score_us(Decision(1, 0)));
  const Plan p = s.build(take, SchedulerKind::kGreedy);
  REQUIRE(p.kernels.size() == 1);
  CHECK(g.nodes[static_cast<size_t>(p.kernels[0].nodes[static_cast<size_t>(p.kernels[0].anchor)])].op_type == "MatMul");
  REQUIRE(validate_plan(p, g, s.device()));
}

TEST_CASE("incremental scores equal full scores as a beam grows plans", "[schedulers]") {
  for (const char* file : {"bert_base_seq128.onnx", "sd15_unet_64x64.onnx"}) {
    INFO(file);
    const Graph& g = model(file);
    const GpuProfile p = gpu("nvidia-rtx-3060");
    const FusionSpace grown(g, test::portable(p));
    const size_t n = grown.candidates().size();
    std::mt19937_64 rng(5);
    Decision d(n, 0);
    grown.score_us(d);  // the root state
    int checked = 0;
    for (size_t c = 0; c < n && checked < 12; c += 1 + rng() % 37) {
      Decision child = d;
      child[c] = 1;  // the beam adds candidates in order: c is after every candidate taken
      const double incremental = grown.score_us(child);
      const FusionSpace fresh(g, test::portable(p));  // no remembered states: a full evaluation
      CHECK(incremental == Approx(fresh.score_us(child)).epsilon(1e-12));
      if (rng() % 2) d = child;  // keep growing from it, or branch again from the parent
      ++checked;
    }
    CHECK(checked >= 10);
  }
}

TEST_CASE("flip scores equal full scores where the flip comes after the base's fusions", "[schedulers]") {
  for (const char* file : {"bert_base_seq128.onnx", "sd15_unet_64x64.onnx", "mobilenet_v2.onnx"}) {
    INFO(file);
    const Graph& g = model(file);
    const GpuProfile p = gpu("nvidia-a10");
    const FusionSpace s(g, test::portable(p));
    const size_t n = s.candidates().size();
    REQUIRE(n > 20);
    // A base with every fourth candidate of the first half taken; flips: the whole second half
    // (after every candidate taken, so exact) and candidates of the first half (in between).
    Decision base(n, 0);
    for (size_t c = 0; c < n / 2; c += 4) base[c] = 1;
    std::vector<size_t> flips;
    for (size_t c = 0; c < n; ++c) {
      if (!base[c]) flips.push_back(c);
    }
    const std::vector<double> scores = s.score_flips(base, flips);
    REQUIRE(scores.size() == flips.size());
    const FusionSpace fresh(g, test::portable(p));
    const double base_us = fresh.score_us(base);
    int exact = 0, moved = 0;
    for (size_t i = 0; i < flips.size(); ++i) {
      Decision d = base;
      d[flips[i]] = 1;
      const double whole = fresh.score_us(d);
      if (flips[i] >= n / 2) {
        CHECK(scores[i] == Approx(whole).epsilon(1e-12));
        ++exact;
      }
      moved += scores[i] != base_us;
    }
    CHECK(exact > 5);
    CHECK(moved > 0);  // some flips change the plan
  }
}

TEST_CASE("greedy on a long chain takes every helpful fusion in linear work", "[schedulers]") {
  // 2,000 blocks of MatMul + bias Add + Relu: the shortlist, the flips and the combination must
  // give the plan of fusing each block's epilogue, as the eager kernels count minus the fusions.
  test::OnnxBuilder b;
  b.input("x0", kF32, {int64_t{64}, int64_t{64}});
  std::string x = "x0";
  for (int i = 0; i < 2000; ++i) {
    const std::string p = "b" + std::to_string(i) + "_";
    b.initializer(p + "w", kF32, {64, 64});
    b.initializer(p + "bias", kF32, {64});
    b.node("MatMul", {x, p + "w"}, {p + "mm"}, p + "mm");
    b.node("Add", {p + "mm", p + "bias"}, {p + "a"}, p + "add");
    b.node("Relu", {p + "a"}, {p + "y"}, p + "relu");
    x = p + "y";
  }
  b.output(x);
  const Graph g = build(b, "long_chain.onnx");
  SearchOptions o;
  auto r = search(g, test::portable(gpu("nvidia-a10")), o);
  REQUIRE(r);
  REQUIRE(!r->plans.empty());
  CHECK(r->plans[0].plan.kernels.size() == 2000);  // MatMul + Add + Relu, one kernel per block
  CHECK(r->plans[0].prediction.total_us < r->eager.total_us / 2);
  CHECK(r->plans_scored < 3 * 2 * 4000);  // a few rounds of flips, not one decision per pair
}

TEST_CASE("a fused kernel holds at most 64 eager kernels, so a long element-wise chain plans in linear work",
          "[schedulers]") {
  // 1,000 Relus in a chain: one kernel would be a thousand-op generated kernel, and costing the
  // growing group at each step made the search quadratic (a 10,000-node chain took 30 s).
  test::OnnxBuilder b;
  b.input("x0", kF32, {int64_t{256}, int64_t{256}});
  std::string x = "x0";
  for (int i = 0; i < 1000; ++i) {
    const std::string y = "r" + std::to_string(i);
    b.node("Relu", {x}, {y}, y);
    x = y;
  }
  b.output(x);
  const Graph g = build(b, "relu_chain.onnx");
  SearchOptions o;
  auto r = search(g, test::portable(gpu("nvidia-a10")), o);
  REQUIRE(r);
  REQUIRE(!r->plans.empty());
  const Plan& p = r->plans[0].plan;
  size_t largest = 0;
  for (const PlanKernel& k : p.kernels) largest = std::max(largest, k.nodes.size());
  CHECK(largest == 64);
  CHECK(p.kernels.size() >= 1000 / 64);
  CHECK(p.kernels.size() <= 2 * (1000 / 64 + 1));
}

TEST_CASE("search checks its option ranges and refuses beam and split past their work limits", "[schedulers]") {
  const Graph& g = model("mobilenet_v2.onnx");
  SearchOptions o;
  o.top_k = 0;
  auto r = search(g, test::portable(gpu("nvidia-a10")), o);
  REQUIRE(!r);
  CHECK_THAT(r.error().message, Contains("top: 0 is out of range; give an integer from 1 to 100"));
  o = SearchOptions{};
  o.beam_width = 100000;
  r = search(g, test::portable(gpu("nvidia-a10")), o);
  REQUIRE(!r);
  CHECK_THAT(r.error().message, Contains("beam_width: 100000 is out of range"));

  // A chain of elementwise ops: one candidate per adjacent pair, past split's limit.
  test::OnnxBuilder b;
  b.input("x0", kF32, {int64_t{256}});
  std::string x = "x0";
  for (size_t i = 0; i <= kSplitCandidateLimit + 1; ++i) {
    const std::string y = "x" + std::to_string(i + 1);
    b.node(i % 2 ? "Relu" : "Neg", {x}, {y}, "n" + std::to_string(i));
    x = y;
  }
  b.output(x);
  const Graph chain = build(b, "split_limit.onnx");
  o = SearchOptions{};
  o.scheduler = SchedulerKind::kSplit;
  r = search(chain, test::portable(gpu("nvidia-a10")), o);
  REQUIRE(!r);
  CHECK_THAT(r.error().message, Contains("`scheduler split` on 20001 fusion candidates"));
  CHECK_THAT(r.error().message, Contains("use `scheduler greedy`, which is linear"));
  o.scheduler = SchedulerKind::kBeam;
  o.beam_width = 256;  // 256 x 20001^2 > 4e10
  r = search(chain, test::portable(gpu("nvidia-a10")), o);
  REQUIRE(!r);
  CHECK_THAT(r.error().message, Contains("`scheduler beam` on 20001 fusion candidates with width 256"));
}

TEST_CASE("plan search ranks only the tiles codegen generates unless asked for the whole menu", "[schedulers][plan]") {
  // A GEMM that leaves an H200's SMs idle (the cost model's own choice splits K) with a fused
  // epilogue, then a row softmax: every scheduler's plans must hold tiles as codegen builds them.
  test::OnnxBuilder b;
  b.input("a", kF32, {test::Dim{int64_t{64}}, test::Dim{int64_t{4096}}});
  b.initializer("w", kF32, {4096, 64});
  b.node("MatMul", {"a", "w"}, {"m"}, "mm");
  b.node("Relu", {"m"}, {"r"});
  b.node("Softmax", {"r"}, {"y"}).i("axis", -1);
  b.output("y");
  const Graph g = test::build_graph(b, "search_generated.onnx");
  const GpuProfile h200 = gpu("nvidia-h200");
  const DeviceModel d = make_device(h200);
  const GraphIndex idx = index_graph(g);
  // A target whose generator builds at most 128 threads a block and two pipeline stages: every
  // plan any scheduler returns holds tiles exactly as that target builds them.
  struct Narrow final : TileCapability {
    TileConfig generated(const KernelWork& w, const TileConfig& t) const override {
      TileConfig b = tile_as_generated(t, w);
      b.threads = std::min(b.threads, 128);
      b.stages = std::min(b.stages, 2);
      return b;
    }
    std::string describe() const override { return "narrow test target"; }
  };
  auto narrow = std::make_shared<Narrow>();
  auto as_built_everywhere = [&](const Plan& p, const TileCapability& cap) {
    for (const PlanKernel& k : p.kernels) {
      const KernelWork w = plan_kernel_work(g, idx, k);
      if (!(cap.generated(w, k.tile) == k.tile)) return false;
    }
    return true;
  };
  for (const char* scheduler : {"eager", "greedy", "beam", "random", "split"}) {
    INFO(scheduler);
    SearchOptions o;
    o.scheduler = *scheduler_from_name(scheduler);
    o.samples = 16;
    auto r = search(g, test::portable(h200), o);
    REQUIRE(r);
    REQUIRE_FALSE(r->plans.empty());
    for (const auto& p : r->plans) CHECK(as_built_everywhere(p.plan, portable_capability()));
    auto n = search(g, make_target(h200, narrow, TileSpace::kGenerated), o);
    REQUIRE(n);
    bool wide = false;
    for (const auto& p : n->plans) {
      CHECK(as_built_everywhere(p.plan, *narrow));
      for (const PlanKernel& k : p.plan.kernels) wide = wide || k.tile.threads > 128;
    }
    CHECK_FALSE(wide);
  }
  SearchOptions all;
  all.scheduler = SchedulerKind::kEager;
  auto r = search(g, test::library(h200), all);
  REQUIRE(r);
  bool split = false;
  for (const PlanKernel& k : r->plans.front().plan.kernels) split = split || k.tile.split_k > 1;
  CHECK(split);  // the whole menu: the cost model's split-K GEMM (generated too, checked below)
  // The tile space the planner, the tuner and codegen share: each tile as generated, no duplicates.
  const KernelWork w = *node_work(g, g.nodes[0]);
  const std::vector<TileConfig> tiles = generated_tiles(w, d, portable_capability());
  REQUIRE_FALSE(tiles.empty());
  bool generated_split = false;
  for (size_t i = 0; i < tiles.size(); ++i) {
    CHECK(tiles[i].split_k == generated_split_k(tiles[i].split_k, w.k, tiles[i].block_k));
    generated_split = generated_split || tiles[i].split_k > 1;
    for (size_t j = 0; j < i; ++j) CHECK_FALSE(tiles[i] == tiles[j]);
  }
  CHECK(generated_split);  // codegen splits K too (serial split-K in one launch)
  CHECK(best_generated_tile(w, d, portable_capability()).split_k > 1);
  for (const TileConfig& t : generated_tiles(w, d, *narrow)) CHECK(t.threads <= 128);
}
