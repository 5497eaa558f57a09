// The GPU Dojo's generator: byte-identical re-runs, sharding that does not change the data,
// resuming after an interruption, one value per column in every row, virtual GPUs that are valid
// and consistent profiles, measured labels from the store, and the errors of bad configurations.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpusim/dojo.h"
#include "gpusim/gpusim.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/measurement.h"
#include "gpusim/plan.h"
#include "gpusim/predict.h"
#include "gpusim/scheduler.h"
#include "support/fixtures.h"
#include "support/run_cli.h"

using namespace gpusim;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

dojo::Config small_config() {
  dojo::Config c;
  c.models = {test::source_dir() + "/models/mobilenet_v2.onnx", test::source_dir() + "/models/bert_base_seq128.onnx"};
  c.dim_sets = {{{"batch", 1}}, {{"batch", 4}}};
  c.gpus = {"nvidia-t4", "nvidia-rtx-3060"};
  c.virtual_gpus = 1;
  c.plans = 3;
  c.seed = 7;
  return c;
}

std::string fresh_dir(const std::string& name) {
  const std::string d = test::temp_dir() + "/" + name;
  fs::remove_all(d);
  return d;
}

// CSV fields of one line (quotes honoured).
size_t csv_fields(const std::string& line) {
  size_t n = 1;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) ++n;
  }
  return n;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("dojo: the same configuration gives the same bytes, however it is sharded", "[dojo]") {
  auto t = dojo::expand(small_config(), default_profile_dirs());
  REQUIRE(t);
  // mobilenet has no batch dim: it runs once, as it is; bert once per dim set.
  REQUIRE(t->graphs.size() == 3);
  CHECK(t->graphs[1].id == "bert_base_seq128[batch=1]");
  CHECK(t->graphs[2].family == "bert_base_seq128");
  REQUIRE(t->gpus.size() == 4);
  CHECK(t->gpus[1].id == "nvidia-t4-v1");
  CHECK(t->gpus[1].family == "nvidia-t4");
  CHECK(t->tasks.size() == 12);
  const std::string a = fresh_dir("dojo_a"), b = fresh_dir("dojo_b"), s = fresh_dir("dojo_s");
  auto ra = dojo::generate_shard(*t, {0, 1}, a, Session::target_maker());
  REQUIRE(ra);
  CHECK(ra->plans == 12 * 5);  // eager, best, 3 random
  CHECK(ra->kernel_rows > 1000);
  REQUIRE(dojo::generate_shard(*t, {0, 1}, b, Session::target_maker()));
  CHECK(slurp(ra->kernels_file) == slurp(b + "/kernels-00000-of-00001.csv"));
  CHECK(slurp(ra->plans_file) == slurp(b + "/plans-00000-of-00001.csv"));
  // Three shards hold the same rows, in the same order, as one.
  std::string joined;
  int64_t rows = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = dojo::generate_shard(*t, {i, 3}, s, Session::target_maker());
    REQUIRE(r);
    rows += r->kernel_rows;
    const auto ls = lines(slurp(r->kernels_file));
    for (size_t k = 1; k < ls.size(); ++k) joined += ls[k] + "\n";
  }
  CHECK(rows == ra->kernel_rows);
  const std::string whole = slurp(ra->kernels_file);
  CHECK(joined == whole.substr(whole.find('\n') + 1));
  // Another seed gives other random plans.
  dojo::Config other = small_config();
  other.seed = 8;
  auto t2 = dojo::expand(other, default_profile_dirs());
  REQUIRE(t2);
  const std::string o = fresh_dir("dojo_o");
  REQUIRE(dojo::generate_shard(*t2, {0, 1}, o, Session::target_maker()));
  CHECK(slurp(o + "/kernels-00000-of-00001.csv") != whole);
}

TEST_CASE("dojo: every row has one value per column, in CSV and NDJSON", "[dojo]") {
  dojo::Config c = small_config();
  c.models.pop_back();
  c.dim_sets.clear();
  c.memory_fractions = {0.0001, 1.0};  // a budget nothing fits: weights offloaded, rows say not fitting
  c.objectives = {"latency", "energy"};
  c.power_fractions = {0.5, 1.0};
  for (const std::string format : {"csv", "ndjson"}) {
    INFO(format);
    c.format = format;
    auto t = dojo::expand(c, default_profile_dirs());
    REQUIRE(t);
    CHECK(t->constraints.size() == 8);
    const std::string d = fresh_dir("dojo_cols_" + format);
    auto r = dojo::generate_shard(*t, {0, 1}, d, Session::target_maker());
    REQUIRE(r);
    const auto kl = lines(slurp(r->kernels_file));
    const auto pl = lines(slurp(r->plans_file));
    bool offloaded = false, unfit = false, capped_slower = false;
    if (format == "csv") {
      REQUIRE(kl.size() == static_cast<size_t>(r->kernel_rows) + 1);
      CHECK(csv_fields(kl[0]) == dojo::kernel_columns().size());
      for (const std::string& l : kl) REQUIRE(csv_fields(l) == dojo::kernel_columns().size());
      for (const std::string& l : pl) REQUIRE(csv_fields(l) == dojo::plan_columns().size());
    } else {
      REQUIRE(kl.size() == static_cast<size_t>(r->kernel_rows));
      std::map<std::string, double> eager_us;  // by gpu and power fraction
      for (const std::string& l : kl) {
        const auto j = nlohmann::ordered_json::parse(l);
        REQUIRE(j.size() == dojo::kernel_columns().size());
        size_t i = 0;
        for (const auto& [key, value] : j.items()) CHECK(key == dojo::kernel_columns()[i++].name);
        CHECK(j["measured_us"].is_null());
        CHECK(j["predicted_us"].get<double>() > 0);
      }
      for (const std::string& l : pl) {
        const auto j = nlohmann::json::parse(l);
        REQUIRE(j.size() == dojo::plan_columns().size());
        offloaded = offloaded || j["offloaded"].get<int>() > 0;
        unfit = unfit || !j["fits"].get<bool>();
        if (j["plan_kind"] == "eager" && j["objective"] == "latency" && j["memory_fraction"] == 1.0) {
          eager_us[j["gpu"].get<std::string>() + (j["power_fraction"] == 1.0 ? "" : " capped")] = j["kernels_us"];
        }
      }
      // Half the power: a lower sustained clock, slower kernels on every GPU (the launch-bound
      // total of so small a model may not move).
      capped_slower = eager_us.at("nvidia-t4 capped") > eager_us.at("nvidia-t4") &&
                      eager_us.at("nvidia-rtx-3060 capped") > eager_us.at("nvidia-rtx-3060");
      CHECK(offloaded);
      CHECK(unfit);
      CHECK(capped_slower);
    }
  }
}

TEST_CASE("dojo: an interrupted run resumes, skipping complete shards", "[dojo]") {
  dojo::Config c = small_config();
  c.models.pop_back();
  c.dim_sets.clear();
  auto t = dojo::expand(c, default_profile_dirs());
  REQUIRE(t);
  const std::string d = fresh_dir("dojo_resume");
  auto first = dojo::generate_shard(*t, {1, 3}, d, Session::target_maker());
  REQUIRE(first);
  CHECK_FALSE(first->skipped);
  // An interruption leaves a temporary file and no final one for shard 0, and shard 2 half done
  // (its kernel file renamed, its plan file not): both are generated again.
  { std::ofstream(d + "/kernels-00000-of-00003.csv.tmp.123") << "partial"; }
  { std::ofstream(d + "/kernels-00002-of-00003.csv") << "partial"; }
  const auto before = fs::last_write_time(first->kernels_file);
  const std::string kept = slurp(first->kernels_file);
  for (int i = 0; i < 3; ++i) {
    auto r = dojo::generate_shard(*t, {i, 3}, d, Session::target_maker());
    REQUIRE(r);
    CHECK(r->skipped == (i == 1));
  }
  CHECK(fs::last_write_time(first->kernels_file) == before);
  CHECK(slurp(first->kernels_file) == kept);
  CHECK(slurp(d + "/kernels-00002-of-00003.csv").rfind("task,", 0) == 0);
  // The manifest writes the virtual GPUs' profiles: valid, and they load back as what the rows used.
  REQUIRE(dojo::write_manifest(*t, 3, d));
  for (const dojo::GpuVariant& v : t->gpus) {
    if (!v.virtual_gpu) continue;
    auto p = load_profile(d + "/gpus/" + v.id + ".yaml", default_profile_dirs());
    REQUIRE(p);
    CHECK(p->compute.units == v.profile->compute.units);
  }
}

TEST_CASE("dojo generate: a dataset of another configuration is refused, a damaged shard redone, the card true",
          "[dojo][cli]") {
  const std::string d = fresh_dir("dojo_integrity");
  const std::string base = "dojo generate --model " + test::source_dir() + "/models/mobilenet_v2.onnx --gpu nvidia-t4 "
                           "--plans 1 --shards 2 --out " + d;
  auto r = test::run_gpusim(base);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("2 of 2 shards complete"));
  const std::string k0 = d + "/kernels-00000-of-00002.csv";
  const std::string kept = slurp(k0);
  auto manifest = nlohmann::json::parse(slurp(d + "/dojo.json"));
  REQUIRE(manifest.at("files").size() == 4);
  CHECK(manifest.at("complete_shards") == 2);
  CHECK_THAT(slurp(d + "/DATASET.md"), Catch::Contains("| `plans-00001-of-00002.csv` | plans | 1 |"));
  // Truncated after it was written: generated again, byte for byte.
  fs::resize_file(k0, 10);
  r = test::run_gpusim(base);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("shard    0/2: kernels-00000-of-00002.csv is 10 bytes; its record says"));
  CHECK_THAT(r.out, Catch::Contains("1/2: complete already"));
  CHECK(slurp(k0) == kept);
  // Overwritten with another valid shard's bytes: the size or the hash gives it away.
  fs::copy_file(d + "/plans-00001-of-00002.csv", d + "/plans-00000-of-00002.csv", fs::copy_options::overwrite_existing);
  r = test::run_gpusim(base);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("shard    0/2: plans-00000-of-00002.csv"));
  // Another configuration, another shard count: refused, naming what differs, nothing written.
  const auto before = fs::last_write_time(d + "/dojo.json");
  r = test::run_gpusim("dojo generate --model " + test::source_dir() + "/models/mobilenet_v2.onnx --gpu nvidia-t4 "
                       "--plans 3 --seed 9 --shards 2 --out " + d);
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("holds a dataset of another configuration: plans (1 -> 3), seed (1 -> 9); give a new "
                                    "--out directory, or --force to replace it"));
  r = test::run_gpusim(base.substr(0, base.find("--shards")) + "--shards 3 --out " + d);
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("shards (2 -> 3)"));
  CHECK(fs::last_write_time(d + "/dojo.json") == before);
  // --force replaces it: the old shard set goes, the card lists the new one only.
  r = test::run_gpusim(base.substr(0, base.find("--shards")) + "--shards 3 --force --out " + d);
  REQUIRE(r.rc == 0);
  CHECK_FALSE(fs::exists(d + "/kernels-00000-of-00002.csv"));
  CHECK_FALSE(fs::exists(d + "/shard-00000-of-00002.json"));
  const std::string card = slurp(d + "/DATASET.md");
  CHECK_THAT(card, Catch::Contains("kernels-00002-of-00003.csv"));
  CHECK_THAT(card, !Catch::Contains("of-00002"));
  // An output directory that cannot be made is refused before any work.
  { std::ofstream(d + "/file") << "x"; }
  r = test::run_gpusim("dojo generate --model " + test::source_dir() + "/models/mobilenet_v2.onnx --gpu nvidia-t4 --out " +
                       d + "/file/sub");
  CHECK(r.rc != 0);
  CHECK_THAT(r.out, Catch::Contains("cannot create the output directory " + d + "/file/sub"));
}

TEST_CASE("dojo: virtual GPUs are valid profiles whose peaks follow units and clock", "[dojo]") {
  const GpuProfile base = test::gpu("nvidia-rtx-3060");
  int differ = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::string name = fmt::format("nvidia-rtx-3060-v{}", seed);
    const std::string y = dojo::virtual_gpu_yaml(base, name, seed);
    CHECK(y == dojo::virtual_gpu_yaml(base, name, seed));  // reproducible
    auto p = load_profile_yaml(y, name + ".yaml", default_profile_dirs());
    REQUIRE(p);
    INFO(y);
    const double units = static_cast<double>(p->compute.units) / base.compute.units;
    const double clock = p->compute.boost_clock_mhz / base.compute.boost_clock_mhz;
    CHECK(units >= 0.49);
    CHECK(units <= 1.51);
    CHECK(clock >= 0.85 - 1e-9);
    CHECK(clock <= 1.15 + 1e-9);
    // Rate per unit per clock is the architecture's.
    CHECK(p->vector_tflops(Precision::kFp32) == Approx(base.vector_tflops(Precision::kFp32) * units * clock).epsilon(1e-4));
    CHECK(p->matrix_tflops(Precision::kFp16, Precision::kFp32).value() ==
          Approx(base.matrix_tflops(Precision::kFp16, Precision::kFp32).value() * units * clock).epsilon(1e-4));
    CHECK(p->compute.max_threads_per_block == base.compute.max_threads_per_block);  // inherited
    differ += p->memory.dram.bandwidth_gbps != base.memory.dram.bandwidth_gbps;
  }
  CHECK(differ == 20);
}

TEST_CASE("dojo: kernels the store measured get their measured time", "[dojo]") {
  dojo::Config c;
  c.models = {test::source_dir() + "/models/resnet50.onnx"};
  c.gpus = {"nvidia-t4"};
  c.plans = 0;
  c.dtype = "fp32";
  // A measurement of the eager plan's first kernel on a T4, as `gpusim run` records one.
  const GpuProfile t4 = test::gpu("nvidia-t4");
  const Graph& g = test::bundled_model("resnet50.onnx");
  auto pred = predict_plan(g, FusionSpace(g, test::portable(t4)).eager(), t4);
  REQUIRE(pred);
  const std::string db = test::temp_dir() + "/dojo_store.db";
  fs::remove(db);
  {
    auto store = MeasurementStore::open(db);
    REQUIRE(store);
    Measurement m;
    m.op = "Conv";
    m.op_class = "conv";
    m.work = pred->kernels[0].work;
    m.tile = pred->kernels[0].cost.tile;
    m.gpu = "Tesla T4";
    m.backend = "cuda";
    m.runtime = "gpusim";
    m.time_us = 123.5;
    m.source = "gpusim run";
    REQUIRE(store->insert({m}, "test"));
  }
  c.store = db;
  auto t = dojo::expand(c, default_profile_dirs());
  REQUIRE(t);
  const std::string d = fresh_dir("dojo_measured");
  auto r = dojo::generate_shard(*t, {0, 1}, d, Session::target_maker());
  REQUIRE(r);
  const auto kl = lines(slurp(r->kernels_file));
  REQUIRE_FALSE(kl.empty());
  int measured = 0;
  std::string first_row;
  for (const std::string& l : kl) {
    if (l.rfind("task,", 0) == 0) continue;
    if (first_row.empty()) first_row = l;
    measured += l.find(",123.5") != std::string::npos;
  }
  CHECK(measured >= 1);  // the eager plan's first kernel (and any kernel of another plan alike)
  CHECK(first_row.find(",123.5") != std::string::npos);
  const auto pl = lines(slurp(r->plans_file));
  CHECK(pl[1].substr(pl[1].rfind(',') + 1) != "0");  // the eager plan counts it
}

TEST_CASE("dojo generate: bad configurations are refused with the value and the fix", "[dojo][cli]") {
  const std::string m = test::source_dir() + "/models/mobilenet_v2.onnx";
  const std::string out = fresh_dir("dojo_cli");
  struct Case {
    std::string args, says;
  };
  for (const Case& k : std::vector<Case>{
           {"--shard 3/2", "--shard 3/2: the index must be from 0 to 1"},
           {"--shard half", "--shard \"half\" is not of the form I/N"},
           {"--gpu nvidia-t5", "nvidia-t5"},
           {"--memory-fraction 1.5", "--memory-fraction 1.5 is out of range; give a fraction in (0, 1]"},
           {"--power-fraction abc", "--power-fraction \"abc\" is not a number"},
           {"--format parquet", "--format \"parquet\" is not csv or ndjson"},
           {"--objective speed", "--objective \"speed\" is not latency, throughput, energy or memory"},
           {"--plans -1", "--plans -1 is out of range; give 0 to 10000"},
           {"--dims batch", "batch"},
           {"--store /nonexistent/dir/x.db", "--store"},
       }) {
    INFO(k.args);
    std::string args = k.args;
    if (args.find("--gpu ") == std::string::npos) args += " --gpu nvidia-t4";
    const test::Run r = test::run_gpusim(fmt::format("dojo generate --model {} --out {} {}", m, out, args));
    INFO(r.out);
    CHECK(r.rc != 0);
    CHECK(r.rc != 70);
    CHECK_THAT(r.out, Catch::Contains(k.says));
  }
  // A good run, then the same command again: complete shards are skipped.
  const test::Run ok = test::run_gpusim(fmt::format("dojo generate --model {} --gpu t4 --plans 1 --shards 2 --out {}", m, out));
  INFO(ok.out);
  REQUIRE(ok.rc == 0);
  CHECK_THAT(ok.out, Catch::Contains("shard    1/2: ") && Catch::Contains("kernel rows"));
  const test::Run again = test::run_gpusim(fmt::format("dojo generate --model {} --gpu t4 --plans 1 --shards 2 --out {}", m, out));
  CHECK(again.rc == 0);
  CHECK_THAT(again.out, Catch::Contains("shard    0/2: complete already"));
  const auto manifest = nlohmann::json::parse(slurp(out + "/dojo.json"));
  CHECK(manifest["schema"] == dojo::kSchema);
  CHECK(manifest["kernel_columns"].size() == dojo::kernel_columns().size());
  // A virtual GPU's profile, written beside the shards, is one every command takes.
  const std::string vout = fresh_dir("dojo_cli_virtual");
  REQUIRE(test::run_gpusim(fmt::format("dojo generate --model {} --gpu t4 --virtual-gpus 1 --plans 0 --out {} --quiet", m,
                                       vout)).rc == 0);
  const test::Run p = test::run_gpusim(fmt::format("predict {} --profiles {}/gpus --gpu nvidia-t4-v1 --json", m, vout));
  INFO(p.out);
  REQUIRE(p.rc == 0);
  const auto pj = nlohmann::json::parse(p.out);
  CHECK(pj["gpu"] == "nvidia-t4-v1");
  CHECK(pj["gpu_display_name"] == "Tesla T4 (virtual nvidia-t4-v1)");
}

TEST_CASE("dojo: the dataset card documents every column", "[dojo][docs]") {
  const std::string card = test::file_bytes(test::source_dir() + "/core/dojo/README.md");
  REQUIRE_FALSE(card.empty());
  for (const auto* cols : {&dojo::kernel_columns(), &dojo::plan_columns()}) {
    for (const dojo::Column& c : *cols) {
      INFO(c.name);
      CHECK_THAT(card, Catch::Contains(fmt::format("| `{}` | {} | {} |", c.name, c.type, c.unit)));
    }
  }
}

TEST_CASE("dojo: sub-graphs cut from a model are graphs of their own, priced like any", "[dojo]") {
  const Graph& g = test::bundled_model("resnet50.onnx");
  std::vector<size_t> runtime;  // nodes that launch a kernel (not folded shape arithmetic, not views)
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (runs_on_device(g, g.nodes[i])) runtime.push_back(i);
  }
  REQUIRE(runtime.size() > 40);
  const Graph s = dojo::cut_graph(g, runtime[10], runtime[29] + 1);
  REQUIRE(s.nodes.size() == runtime[29] + 1 - runtime[10]);
  CHECK_FALSE(s.inputs.empty());
  CHECK_FALSE(s.outputs.empty());
  std::vector<bool> produced(s.tensors.size(), false);
  for (const Node& n : s.nodes) {
    for (TensorId t : n.inputs) {
      if (t == kNoTensor) continue;
      const TensorRole r = s.tensor(t).role;
      // Every input is fed, a weight or constant, or produced earlier inside the cut.
      CHECK((r == TensorRole::kInput || r == TensorRole::kWeight || r == TensorRole::kConstant ||
             produced[static_cast<size_t>(t)]));
    }
    for (TensorId t : n.outputs) {
      if (t != kNoTensor) produced[static_cast<size_t>(t)] = true;
    }
  }
  for (TensorId t : s.outputs) CHECK(produced[static_cast<size_t>(t)]);
  CHECK(s.tensors.size() < g.tensors.size());  // only what the window touches
  auto p = predict(s, test::library(test::gpu("nvidia-t4")));
  REQUIRE(p);
  CHECK(p->kernels.size() <= s.nodes.size());
  CHECK(p->weight_bytes < predict(g, test::library(test::gpu("nvidia-t4")))->weight_bytes);
  // In a configuration: each model's cuts, reproducibly, in its family; "all" takes every profile.
  dojo::Config c;
  c.models = {test::source_dir() + "/models/resnet50.onnx"};
  c.gpus = {"all"};
  c.subgraphs = 3;
  auto t = dojo::expand(c, default_profile_dirs());
  REQUIRE(t);
  REQUIRE(t->graphs.size() == 4);
  for (size_t i = 1; i < 4; ++i) {
    CHECK(t->graphs[i].id.rfind("resnet50#", 0) == 0);
    CHECK(t->graphs[i].family == "resnet50");
  }
  CHECK(t->gpus.size() == list_profiles(default_profile_dirs()).size());
  auto again = dojo::expand(c, default_profile_dirs());
  REQUIRE(again);
  CHECK(again->graphs[2].id == t->graphs[2].id);
}

TEST_CASE("dojo: dim sets sweep resolution and sequence length through INPUT:AXIS", "[dojo]") {
  dojo::Config c;
  c.models = {test::source_dir() + "/models/resnet50.onnx", test::source_dir() + "/models/bert_base_seq128.onnx"};
  c.dim_sets = {{{"input:2", 160}, {"input:3", 160}}, {{"batch", 1}, {"input_ids:1", 64}, {"attention_mask:1", 64}}};
  c.gpus = {"nvidia-t4"};
  auto t = dojo::expand(c, default_profile_dirs());
  REQUIRE(t);
  REQUIRE(t->graphs.size() == 2);  // each model takes the set naming its inputs
  CHECK(t->graphs[0].id == "resnet50[input:2=160,input:3=160]");
  CHECK(t->graphs[0].graph->tensor(t->graphs[0].graph->inputs[0]).shape == Shape{1, 3, 160, 160});
  CHECK(t->graphs[1].graph->tensor(t->graphs[1].graph->inputs[0]).shape == Shape{1, 64});
}
