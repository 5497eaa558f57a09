// The autotuner: candidates ranked by the simulator are measured on every available device (Vulkan
// on lavapipe in CI), the measured best (within the tie band, the simulator's order) goes into the
// plan and the tuning cache, a second tune is a warm start, the budget stops it gracefully, and
// the cache keys on device, driver and version; then `gpusim tune` and `gpusim run --tune`.
#include <catch2/catch.hpp>

#include <filesystem>
#include <thread>
#include <cmath>
#include <nlohmann/json.hpp>

#include "gpusim/kernel_work.h"
#include "gpusim/onnx_import.h"
#include "support/device_check.h"
#include "support/fixtures.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"
#include "tune.h"

using namespace gpusim;
constexpr int kF32 = onnx::TensorProto::FLOAT;

namespace {

// A GEMM with a fused epilogue and a row softmax: classes with several generated tiles each.
Graph tune_graph() {
  test::OnnxBuilder b;
  b.input("x", kF32, {test::Dim{int64_t{64}}, test::Dim{int64_t{96}}});
  b.initializer("w", kF32, {96, 128});
  b.node("MatMul", {"x", "w"}, {"m"});
  b.node("Relu", {"m"}, {"r"});
  b.node("Softmax", {"r"}, {"y"}).i("axis", -1);
  b.output("y");
  return test::build_graph(b, "tune_small.onnx");
}

Plan fused_plan(const Graph& g, const DeviceModel& d) {
  Target t = make_target(*d.profile, std::make_shared<codegen::TargetCapability>(codegen::target_options(d, false)),
                         TileSpace::kGenerated);
  t.device = d;
  Plan p = eager_plan(g, t);
  REQUIRE(p.kernels.size() == 3);
  p.kernels[0].nodes = {0, 1};  // MatMul + Relu: a GEMM with its epilogue
  p.kernels[0].fusions = {"gemm-epilogue"};
  p.kernels.erase(p.kernels.begin() + 1);
  return p;
}

std::string fresh_store(const std::string& name) {
  const std::string path = test::temp_dir() + "/" + name;
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  return path;
}

// A new, empty store of that name, opened.
MeasurementStore open_fresh_store(const std::string& name) {
  auto store = MeasurementStore::open(fresh_store(name));
  if (!store) FAIL(store.error().message);
  return std::move(*store);
}

}  // namespace

TEST_CASE("Kendall's tau: same order 1, reversed -1, ties count for neither", "[tune]") {
  CHECK(tune::kendall_tau({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1));
  CHECK(tune::kendall_tau({1, 2, 3, 4}, {40, 30, 20, 10}) == Approx(-1));
  CHECK(tune::kendall_tau({1, 2, 3}, {1, 3, 2}) == Approx(1.0 / 3));
  CHECK(tune::kendall_tau({1}, {1}) == 0);
  CHECK(tune::kendall_tau({1, 1, 2}, {1, 2, 3}) == Approx(2 / std::sqrt(6.0)));  // tau-b with a tie
}

TEST_CASE("the cache key changes with the device, the driver, the version and the kernel", "[tune]") {
  const std::string k = tuning_key("GPU A", "driver 1", "0.1.0", "sig");
  CHECK(k.size() == 32);
  CHECK(k == tuning_key("GPU A", "driver 1", "0.1.0", "sig"));
  CHECK(k != tuning_key("GPU B", "driver 1", "0.1.0", "sig"));
  CHECK(k != tuning_key("GPU A", "driver 2", "0.1.0", "sig"));
  CHECK(k != tuning_key("GPU A", "driver 1", "0.2.0", "sig"));
  CHECK(k != tuning_key("GPU A", "driver 1", "0.1.0", "sig2"));
  // A kernel's signature: the same group and shapes give the same text; a shape or the storage changes it.
  const Graph g = tune_graph();
  const Plan p = fused_plan(g, make_device(test::gpu("lavapipe-epyc-2c")));
  codegen::Options o;
  const std::string s = tune::kernel_signature(g, p.kernels[0], o);
  CHECK(s == tune::kernel_signature(g, p.kernels[0], o));
  CHECK(s != tune::kernel_signature(g, p.kernels[1], o));
  codegen::Options half = o;
  half.float_storage = codegen::Storage::kF16;
  CHECK(s != tune::kernel_signature(g, p.kernels[0], half));
}

TEST_CASE("the tuning cache keeps each device's entries apart and survives two writers", "[tune]") {
  const std::string path = fresh_store("tuning_cache.db");
  auto store = MeasurementStore::open(path);
  REQUIRE(store);
  auto entry = [](const std::string& device, const std::string& sig) {
    TuningEntry e;
    e.device = device;
    e.driver = "d1";
    e.version = "v";
    e.signature = sig;
    e.backend = "vulkan";
    e.group = "MatMul";
    e.tile.block_m = 64;
    e.time_us = 12.5;
    e.key = tuning_key(e.device, e.driver, e.version, e.signature);
    return e;
  };
  // Two threads, each with its own connection (as two processes have), writing at once.
  std::thread a([&] {
    auto s = MeasurementStore::open(path);
    for (int i = 0; i < 50; ++i) CHECK(s->put_tuned(entry("GPU A", std::to_string(i))));
  });
  std::thread b([&] {
    auto s = MeasurementStore::open(path);
    for (int i = 0; i < 50; ++i) CHECK(s->put_tuned(entry("GPU B", std::to_string(i))));
  });
  a.join();
  b.join();
  auto info = store->tuning_info();
  REQUIRE(info);
  CHECK(info->entries == 100);
  REQUIRE(info->devices.size() == 2);
  auto hit = store->tuned(entry("GPU A", "7").key);
  REQUIRE(hit);
  REQUIRE(hit->has_value());
  CHECK((*hit)->tile.block_m == 64);
  CHECK((*hit)->time_us == 12.5);
  auto miss = store->tuned(tuning_key("GPU A", "d2", "v", "7"));  // a new driver: its own entries, none yet
  REQUIRE(miss);
  CHECK_FALSE(miss->has_value());
  auto gone = store->clear_tuned("GPU A");
  REQUIRE(gone);
  CHECK(*gone == 50);
  CHECK(store->tuning_info()->entries == 50);  // GPU B's stay
}

TEST_CASE("tuning measures the simulator's top K, keeps the measured best and starts warm the second time",
          "[tune][device]") {
  const Graph g = tune_graph();
  const DeviceModel d = make_device(test::gpu("lavapipe-epyc-2c"));
  for (auto& od : test::devices()) {
    INFO(od.backend);
    MeasurementStore store = open_fresh_store("tune_" + od.backend + ".db");
    tune::Options o;
    o.top_k = 3;
    o.target_ms = 2;
    o.store = &store;
    o.split_margin = 1e9;  // never split here (a loaded machine may time the unfused pair faster): the next case does
    Plan plan = fused_plan(g, d);
    auto r = tune::tune_plan(*od.dev, g, plan, d, o);
    REQUIRE(r);
    REQUIRE(r->kernels.size() == 2);
    CHECK(r->measured == 2);
    CHECK(r->cached == 0);
    for (const TunedKernel& k : r->kernels) {
      INFO(k.group);
      REQUIRE(k.chosen >= 0);
      REQUIRE(k.candidates.size() >= 2);
      CHECK(k.candidates.size() <= 3);
      double best = 0;
      for (size_t i = 0; i < k.candidates.size(); ++i) {
        const TuneCandidate& c = k.candidates[i];
        CHECK(c.predicted_rank == static_cast<int>(i));  // in the simulator's order
        CHECK(c.error.empty());
        CHECK(c.measured_us > 0);
        CHECK(c.samples >= 5);
        if (best == 0 || c.measured_us < best) best = c.measured_us;
        if (i > 0) CHECK(c.predicted_us >= k.candidates[i - 1].predicted_us);
      }
      CHECK(k.chosen_us <= best * 1.02 + 1e-9);  // within the tie band of the measured best
      CHECK(k.regret >= 0);
      CHECK(k.kendall_tau >= -1);
      CHECK(k.kendall_tau <= 1);
      // The plan now has the chosen tile.
      const TileConfig& t = plan.kernels[static_cast<size_t>(k.plan_kernel)].tile;
      CHECK(tile_notation(t) == tile_notation(k.candidates[static_cast<size_t>(k.chosen)].tile));
    }
    CHECK(r->kernels[0].group == "MatMul+Relu");
    CHECK(r->kernels[0].unfused_us > 0);  // the fusion alternative was timed too
    CHECK(r->kernels[0].unfused_predicted_us > 0);
    CHECK(r->kernels[1].unfused_us == 0);  // a single node has none
    CHECK_FALSE(r->kernels[0].split);
    CHECK(plan.kernels.size() == 2);
    CHECK(r->graded == 2);
    CHECK(r->top3_share == 1.0);  // three candidates: the fastest is always in them
    // Every measured candidate went to the store as a measurement.
    auto recs = store.query({.gpu = od.dev->info().name, .op_class = "", .source = "autotune", .limit = 0});
    REQUIRE(recs);
    CHECK(static_cast<int>(recs->size()) == r->candidates_run);
    for (const Measurement& m : *recs) {
      CHECK(m.work.has_value());
      CHECK(m.tile.has_value());
      CHECK(m.time_us > 0);
    }
    // A warm start: nothing measured, the same tiles.
    Plan again = fused_plan(g, d);
    auto w = tune::tune_plan(*od.dev, g, again, d, o);
    REQUIRE(w);
    CHECK(w->cached == 2);
    CHECK(w->measured == 0);
    CHECK(w->candidates_run == 0);
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      CHECK(tile_notation(again.kernels[k].tile) == tile_notation(plan.kernels[k].tile));
    }
    // --no-cache measures again; without a store nothing is read or kept.
    o.use_cache = false;
    Plan fresh = fused_plan(g, d);
    CHECK(tune::tune_plan(*od.dev, g, fresh, d, o)->measured == 2);
    o.store = nullptr;
    o.use_cache = true;
    Plan bare = fused_plan(g, d);
    CHECK(tune::tune_plan(*od.dev, g, bare, d, o)->measured == 2);
    // The tuned plan still computes what the graph does.
    exec::RunOptions eo;
    eo.seed = 3;
    eo.repeat = 1;
    CHECK(test::run_plan_against_reference(*od.dev, g, plan, eo).worst() < 1e-5);
  }
}

TEST_CASE("a fused group that runs faster unfused is split, and the cache remembers it", "[tune][device]") {
  const Graph g = tune_graph();
  const DeviceModel d = make_device(test::gpu("lavapipe-epyc-2c"));
  for (auto& od : test::devices()) {
    INFO(od.backend);
    MeasurementStore store = open_fresh_store("tune_split_" + od.backend + ".db");
    tune::Options o;
    o.top_k = 2;
    o.target_ms = 1;
    o.store = &store;
    o.split_margin = -1e9;  // any unfused time wins: the split path, whatever this device measures
    Plan plan = fused_plan(g, d);
    auto r = tune::tune_plan(*od.dev, g, plan, d, o);
    REQUIRE(r);
    CHECK(r->split == 1);
    CHECK(r->kernels[0].split);
    REQUIRE(plan.kernels.size() == 3);  // MatMul, Relu, Softmax
    CHECK(plan.kernels[0].nodes == std::vector<int>{0});
    CHECK(plan.kernels[1].nodes == std::vector<int>{1});
    CHECK_THAT(plan.decisions.back(), Catch::Contains("runs unfused, one kernel per node"));
    CHECK(validate_plan(plan, g, d));
    exec::RunOptions eo;
    eo.seed = 5;
    eo.repeat = 1;
    CHECK(test::run_plan_against_reference(*od.dev, g, plan, eo).worst() < 1e-5);
    // Warm: the cache says split, nothing is measured.
    o.split_margin = 0.02;
    Plan again = fused_plan(g, d);
    auto w = tune::tune_plan(*od.dev, g, again, d, o);
    REQUIRE(w);
    CHECK(w->candidates_run == 0);
    CHECK(w->split == 1);
    CHECK(again.kernels.size() == 3);
  }
}

TEST_CASE("a tuning budget stops measuring and keeps the simulator's pick, and bad options are refused",
          "[tune][device]") {
  const Graph g = tune_graph();
  const DeviceModel d = make_device(test::gpu("lavapipe-epyc-2c"));
  for (auto& od : test::devices()) {
    INFO(od.backend);
    tune::Options o;
    o.top_k = 2;
    o.target_ms = 1;
    o.budget_s = 1e-9;  // spent before the second kernel
    Plan plan = fused_plan(g, d);
    const Plan before = plan;
    auto r = tune::tune_plan(*od.dev, g, plan, d, o);
    REQUIRE(r);
    CHECK(r->budget_hit);
    CHECK(r->skipped >= 1);
    CHECK(r->kernels.back().skipped);
    CHECK(tile_notation(plan.kernels.back().tile) == tile_notation(before.kernels.back().tile));
    REQUIRE_FALSE(r->notes.empty());
    CHECK_THAT(r->notes[0], Catch::Contains("budget ran out"));
    o.top_k = 21;
    auto bad = tune::tune_plan(*od.dev, g, plan, d, o);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("`top_k 21` is out of range: give 1 to 20"));
    o.top_k = 2;
    o.budget_s = -1;
    bad = tune::tune_plan(*od.dev, g, plan, d, o);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("`budget_s -1` is not a time budget"));
  }
}

TEST_CASE("gpusim tune: report card, warm start, plan out, cache info and clear, and run --tune", "[tune][cli][vulkan]") {
  if (!test::device("vulkan")) return;  // says why
  const Graph g = tune_graph();
  (void)g;
  const std::string model = test::temp_dir() + "/tune_small.onnx";
  const std::string store = fresh_store("tune_cli.db");
  const std::string plan = test::temp_dir() + "/tuned_plan.json";
  const std::string common = " --top-k 2 --store " + store + " --quiet";
  test::Run r = test::run_gpusim("tune " + model + common + " --out " + plan + " --repeat 1");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("kernels measured") && Catch::Contains("report card over") &&
                        Catch::Contains("Kendall tau") && Catch::Contains("measured ") &&
                        Catch::Contains("end to end") && Catch::Contains("written to " + plan));
  CHECK(std::filesystem::exists(plan));
  r = test::run_gpusim("tune " + model + common + " --repeat 0 --json");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["schema"] == "gpusim.tune/1");
  CHECK(j["kernels_measured"] == 0);
  CHECK(j["kernels_cached"].get<int>() >= 1);
  r = test::run_gpusim("tune --cache-info --store " + store);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("tuning cache " + store + ":") && Catch::Contains("llvmpipe"));
  r = test::run_gpusim("run " + model + " --backend vulkan --plan " + plan + " --check --repeat 1");
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("PASS"));
  r = test::run_gpusim("run " + model + " --backend vulkan --tune" + common + " --check --repeat 1");
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("from the cache") && Catch::Contains("PASS"));
  r = test::run_gpusim("tune --clear --store " + store);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("entries removed"));
  r = test::run_gpusim("tune --cache-info --store " + store);
  CHECK_THAT(r.out, Catch::Contains(": 0 entries"));
}

TEST_CASE("gpusim tune refuses what it cannot do, naming the fix", "[tune][cli][errors]") {
  const std::string model = test::temp_dir() + "/tune_small.onnx";
  (void)tune_graph();  // writes the model
  test::Run r = test::run_gpusim("tune");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("give a model to tune (gpusim tune MODEL --backend vulkan), or --cache-info"));
  r = test::run_gpusim("tune " + model + " --backend cpu");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("--backend cpu is the reference and has nothing to tune"));
  r = test::run_gpusim("tune " + model + " --top-k 0");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("--top-k"));
  r = test::run_gpusim("tune " + model + " --top-k 21");
  CHECK(r.rc == 2);
  r = test::run_gpusim("tune " + model + " --budget-s -5");
  CHECK(r.rc == 2);
  r = test::run_gpusim("run " + model + " --tune");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("--tune needs a device backend"));
}
