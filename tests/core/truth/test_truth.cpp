// The measurement store, its readers, the validation statistics, runtimes and `gpusim validate`:
// records round-trip and deduplicate, every reader's error names the file, line or field, the
// statistics match brute force, and the recorded validation figures hold (the CI guard).
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "gpusim/kernel_cost.h"
#include "base/json_text.h"
#include "gpusim/measurement.h"
#include "gpusim/runtime.h"
#include "gpusim/validate.h"
#include "sim/work_json.h"
#include "support/devices.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"

namespace fs = std::filesystem;
using namespace gpusim;

namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string p = (fs::path(test::temp_dir()) / name).string();
  std::ofstream(p) << text;
  return p;
}

const char* kCsvHeader = "op,device,torch,latency_ms,kernel,kernels_launched,grid,block,b,h\n";

Measurement sample_record() {
  Measurement m;
  m.op = "add";
  m.op_class = "elementwise";
  m.dims = {{"b", 64}, {"h", 1024}};
  m.kernel = "vectorized_elementwise_kernel<4, add>";
  m.gpu = "Tesla T4";
  m.backend = "cuda";
  m.driver = "torch 2.1.0";
  m.runtime = "pytorch-eager";
  m.timer = "cuda events";
  m.statistic = "mean of 5 fastest of 25";
  m.repeats = 25;
  m.warm_cache = true;
  m.time_us = 26.5;
  m.source = "test";
  m.source_ref = "add.csv:2";
  return m;
}

std::string truth_dir() { return test::source_dir() + "/../shared/truth"; }

}  // namespace

TEST_CASE("the store keeps every field and a record imported twice is one record", "[truth]") {
  const std::string db = (fs::path(test::temp_dir()) / "gpusim_store_test.db").string();
  fs::remove(db);
  auto s = MeasurementStore::open(db);
  REQUIRE(s);
  Measurement a = sample_record();
  Measurement b = a;
  b.time_us = 27.0;  // a second measurement of the same op: a second record
  Measurement c = a;
  c.work = gemm_work(DType::kFloat16, 2, 64, 128, 256);
  c.tile = TileConfig{64, 64, 32, 128, 3, 1, 8, 1};
  c.fused_ops = {"MatMul", "Add"};
  c.op_class = "gemm";
  auto st = s->insert({a, b, c}, "test");
  REQUIRE(st);
  CHECK(st->added == 3);
  auto again = s->insert({a, c}, "test again");
  REQUIRE(again);
  CHECK(again->added == 0);
  CHECK(again->duplicates == 2);
  CHECK(*s->count() == 3);
  auto back = s->query();
  REQUIRE(back);
  REQUIRE(back->size() == 3);
  CHECK(measurement_key((*back)[0]) == measurement_key(a));
  CHECK(measurement_key((*back)[2]) == measurement_key(c));
  CHECK((*back)[2].work->m == 64);
  CHECK((*back)[2].tile->stages == 3);
  CHECK((*back)[2].fused_ops == std::vector<std::string>{"MatMul", "Add"});
  MeasurementQuery q;
  q.gpu = "Tesla T4";
  q.op_class = "gemm";
  auto only = s->query(q);
  REQUIRE(only);
  CHECK(only->size() == 1);
  // Re-opened, the same file is a store of the same records.
  auto s2 = MeasurementStore::open(db, false);
  REQUIRE(s2);
  CHECK(*s2->count() == 3);
}

TEST_CASE("the store keeps compiled figures per architecture and kernel and a recompile replaces them", "[truth]") {
  const std::string db = (fs::path(test::temp_dir()) / "gpusim_compiled_test.db").string();
  fs::remove(db);
  {
    auto s = MeasurementStore::open(db);
    REQUIRE(s);
    CompiledKernelRecord a;
    a.arch = "sm_90";
    a.key = "0123456789abcdef";
    a.compiler = "NVRTC 13.0";
    a.kernel = "gemm_mm";
    a.op_class = "gemm";
    a.tile = "64x64x16 128t s2";
    a.gpu = "nvidia-h100-sxm";
    a.model = "models/resnet50.onnx";
    a.threads = 128;
    a.registers = 96;
    a.smem_bytes = 18432;
    CompiledKernelRecord b = a;
    b.arch = "gfx90a";
    b.compiler = "hiprtc (ROCm 5.2.21153)";
    b.registers = 64;
    b.spill_bytes = 8;
    REQUIRE(s->put_compiled({a, b}));
    a.registers = 80;  // the same kernel compiled again (a newer compiler): one record, the newer
    REQUIRE(s->put_compiled({a}));
    // A record out of range is refused by name, and nothing of its batch is written.
    CompiledKernelRecord bad = a;
    bad.key = "fedcba9876543210";
    bad.registers = 0;
    CompiledKernelRecord fine = a;
    fine.key = "1111111111111111";
    auto e = s->put_compiled({fine, bad});
    REQUIRE_FALSE(e);
    CHECK(e.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(e.error().message, Catch::Contains(db) && Catch::Contains("record 1") &&
                                      Catch::Contains("registers outside 1 to 1024") && Catch::Contains("gemm_mm"));
    bad.registers = 40;
    bad.arch.clear();
    CHECK_THAT(s->put_compiled({bad}).error().message, Catch::Contains("no architecture"));
  }
  auto r = MeasurementStore::open_read(db);
  REQUIRE(r);
  auto all = r->compiled();
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].arch == "gfx90a");
  CHECK((*all)[0].spill_bytes == 8);
  CHECK((*all)[1].arch == "sm_90");
  CHECK((*all)[1].registers == 80);
  CHECK((*all)[1].smem_bytes == 18432);
  CHECK((*all)[1].threads == 128);
  CHECK((*all)[1].model == "models/resnet50.onnx");
  CHECK((*all)[1].compiled_at.size() == 20);  // 2026-11-27T05:00:00Z
  auto sm90 = r->compiled("sm_90");
  REQUIRE(sm90);
  CHECK(sm90->size() == 1);
  CHECK(r->compiled("sm_80")->empty());
  CHECK(*r->count() == 0);  // compiled figures are not timing records
}

TEST_CASE("the store refuses files that are not stores", "[truth]") {
  const std::string p = write("not_a_store.db", "this is not sqlite, just text that is long enough to be read as a header");
  auto s = MeasurementStore::open(p);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().message, Catch::StartsWith(p + ": not a gpusim measurement store, or a damaged one ("));
  auto missing = MeasurementStore::open("/nonexistent-dir/x.db");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().message, Catch::StartsWith("/nonexistent-dir/x.db: cannot open the measurement store"));
}

TEST_CASE("NeuSight CSVs are read with quoted kernels, and bad rows are named", "[truth]") {
  const std::string ok = write("ns_ok.csv", std::string(kCsvHeader) +
                                                "add,Tesla T4,p2.1.0,0.025,\"void k<4, f<float>>(int, a)\",1,42x1x1,128x1x1,127,168\n");
  auto r = read_neusight_csv(ok);
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  const Measurement& m = (*r)[0];
  CHECK(m.kernel == "void k<4, f<float>>(int, a)");
  CHECK(m.time_us == Approx(25.0));
  CHECK(m.dims.at("b") == 127);
  CHECK(m.driver == "torch 2.1.0");
  CHECK(m.runtime == "pytorch-eager");
  CHECK(m.op_class == "elementwise");
  CHECK(m.source_ref == fs::path(ok).parent_path().filename().string() + "/ns_ok.csv:2");

  auto err = [&](const std::string& name, const std::string& body) {
    auto x = read_neusight_csv(write(name, body));
    REQUIRE_FALSE(x);
    return x.error().message;
  };
  const std::string dir = test::temp_dir();
  CHECK(err("ns1.csv", "device,latency_ms\n") ==
        (fs::path(dir) / "ns1.csv").string() +
            ":1: the header has no \"op\" column; a NeuSight CSV starts op,device,torch,latency_ms,kernel,"
            "kernels_launched,grid,block, then the op's dims");
  CHECK(err("ns2.csv", std::string(kCsvHeader) + "add,T4,p2,abc,k,1,1,1,2,3\n") ==
        (fs::path(dir) / "ns2.csv").string() + ":2: latency_ms \"abc\" is not a positive time in milliseconds");
  CHECK(err("ns3.csv", std::string(kCsvHeader) + "add,T4,p2,0.1,k,1,1,1,-2,3\n") ==
        (fs::path(dir) / "ns3.csv").string() + ":2: column b = \"-2\" is not a non-negative integer dim");
  CHECK(err("ns4.csv", std::string(kCsvHeader) + "frob,T4,p2,0.1,k,1,1,1,2,3\n") ==
        (fs::path(dir) / "ns4.csv").string() +
            ":2: op \"frob\" is not a NeuSight op gpusim knows (linear, bmm, conv, add, addu, mul, mulu, div, divu, "
            "pow, powu, relu, gelu, tanh, ln, softmax)");
  CHECK(err("ns5.csv", std::string(kCsvHeader) + "add,T4,p2,0.1,k\n") ==
        (fs::path(dir) / "ns5.csv").string() + ":2: 5 fields, the header has 10");
  CHECK(err("ns6.csv", "") == (fs::path(dir) / "ns6.csv").string() + ": empty file; expected a CSV header");
}

// Rows taken the NeuSight way on other types and timers (tools/device/llm_measure.py csv): the
// optional dtype, runtime, statistic and warm_cache columns, and a linear without its bias.
TEST_CASE("NeuSight CSVs carry a dtype runtime statistic and warm_cache where given", "[truth]") {
  const std::string head =
      "op,device,torch,latency_ms,kernel,kernels_launched,grid,block,dtype,runtime,statistic,warm_cache,b,m,n,k,bias\n";
  const std::string ok = write("ns_typed.csv", head + "linear,NVIDIA H200,p2.11.0,0.0254,k,1,,,fp16,cuda-graph,median of 5,0,"
                                                     "1,1,4096,11008,0\n");
  auto r = read_neusight_csv(ok);
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  const Measurement& m = (*r)[0];
  CHECK(m.dtype == DType::kFloat16);
  CHECK(m.runtime == "cuda-graph");
  CHECK(m.statistic == "median of 5");
  CHECK_FALSE(m.warm_cache);
  CHECK(m.dims.at("bias") == 0);
  // Without its bias the work is the GEMV's alone: W (11008 x 4096 fp16), x and y.
  auto w = measurement_work(m);
  REQUIRE(w);
  CHECK(w->bytes_read == (11008 * 4096 + 4096) * 2);
  Measurement with_bias = m;
  with_bias.dims["bias"] = 1;
  auto wb = measurement_work(with_bias);
  REQUIRE(wb);
  CHECK(wb->bytes_read > w->bytes_read);

  const std::string dir = test::temp_dir();
  auto bad = read_neusight_csv(write("ns_badtype.csv", head + "linear,H200,p2,0.02,k,1,,,int3,cuda-graph,x,0,1,1,8,8,0\n"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        (fs::path(dir) / "ns_badtype.csv").string() + ":2: dtype \"int3\" is not a float type; expected fp32, fp16 or bf16");
  auto badw = read_neusight_csv(write("ns_badwarm.csv", head + "linear,H200,p2,0.02,k,1,,,fp16,cuda-graph,x,yes,1,1,8,8,0\n"));
  REQUIRE_FALSE(badw);
  CHECK(badw.error().message == (fs::path(dir) / "ns_badwarm.csv").string() +
                                    ":2: warm_cache \"yes\" is not 0 or 1 (1: the inputs may still be in L2 from the "
                                    "previous call)");
}

TEST_CASE("read_measurements picks the reader by file and names what it cannot read", "[truth]") {
  auto missing = read_measurements("/nonexistent/truth.csv");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message ==
        "/nonexistent/truth.csv: no such file or directory; pass a NeuSight CSV (.csv, .csv.xz), a gpusim run or "
        "calibration JSON, a store (.db) or a directory of them (the training split lives in ../shared/truth beside a "
        "checkout)");
  const std::string txt = write("truth.txt", "x");
  auto unknown = read_measurements(txt);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message == txt + ": unknown kind of measurement file; expected *.csv, *.csv.xz (NeuSight), "
                                         "*.json, *.json.xz (gpusim run or calibration), *.db (a measurement store) or a "
                                         "directory");
  const std::string js = write("other.json", R"({"schema": "gpusim.plan/1"})");
  auto other = read_measurements(js);
  REQUIRE_FALSE(other);
  CHECK(other.error().message == js + ": schema \"gpusim.plan/1\" holds no measurements gpusim reads; expected "
                                      "gpusim.run/1 (`gpusim run --json`) or gpusim.calibration/1 (calibration raw data)");
  const std::string old_run = write("old_run.json", R"({"schema": "gpusim.run/1", "device": {"name": "x"},
      "kernels": [{"kernel": 0, "measured_us": 5.0, "class": "gemm", "op_type": "MatMul"}]})");
  auto no_work = read_measurements(old_run);
  REQUIRE_FALSE(no_work);
  CHECK(no_work.error().message == old_run + ": kernels[0]: no \"work\"; this file was written by a gpusim older than "
                                             "the measurement store: run `gpusim run --json` again to record it");
  const std::string xz = write("bad.csv.xz", "not xz at all");
  auto bad_xz = read_measurements(xz);
  REQUIRE_FALSE(bad_xz);
  CHECK_THAT(bad_xz.error().message, Catch::StartsWith(xz + ": not a valid xz stream"));
}

TEST_CASE("calibration raw data and gpusim run output become records with their work", "[truth]") {
  auto cal = read_measurements(test::source_dir() + "/gpu_profiles/calibrated/lavapipe-epyc-2c.measurements.json");
  REQUIRE(cal);
  REQUIRE(cal->size() > 10);
  for (const Measurement& m : *cal) {
    CHECK(m.work.has_value());
    CHECK(m.tile.has_value());
    CHECK(m.time_us > 0);
    CHECK(m.source == "gpusim calibrate");
  }
  const std::string run = write("run.json", R"({"schema": "gpusim.run/1", "model": "m.onnx", "backend": "vulkan",
      "dtype": "fp32", "repeat": 3, "device": {"name": "llvmpipe", "driver": "mesa"},
      "kernels": [{"kernel": 0, "name": "mm", "op_type": "MatMul+Relu", "class": "gemm", "launches": 1,
                   "measured_us": 120.5, "fused_ops": ["MatMul", "Relu"],
                   "work": {"class": "gemm", "dtype": "fp32", "batch": 1, "m": 64, "n": 64, "k": 64},
                   "tile": {"block_m": 32, "block_n": 32, "block_k": 8, "threads": 64}}]})");
  auto r = read_measurements(run);
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  CHECK((*r)[0].work->k == 64);
  CHECK((*r)[0].fused_ops.size() == 2);
  CHECK((*r)[0].runtime == "gpusim");
}

TEST_CASE("xz-compressed gpusim run output reads as the JSON does and a damaged one is named", "[truth]") {
  // A real run on a lent H200 (bench/gpu/h200-2026-11-27), kept compressed.
  const std::string dir = test::source_dir() + "/bench/gpu/h200-2026-11-27/truth/runs";
  auto r = read_measurements(dir + "/resnet50_fp32.json.xz");
  REQUIRE(r);
  REQUIRE(r->size() == 121);
  for (const Measurement& m : *r) {
    CHECK(m.gpu == "NVIDIA H200");
    CHECK(m.backend == "cuda");
    CHECK(m.work.has_value());
    CHECK(m.time_us > 0);
  }
  std::vector<std::string> notes;
  auto all = read_measurements(dir, &notes);
  REQUIRE(all);
  CHECK(all->size() > 10 * r->size());
  const std::string bad = write("bad_run.json.xz", "{\"schema\": \"gpusim.run/1\"}");
  auto b = read_measurements(bad);
  REQUIRE_FALSE(b);
  CHECK_THAT(b.error().message, Catch::StartsWith(bad + ": not a valid xz stream"));
  const fs::path empty = fs::path(test::temp_dir()) / "no_measurements";
  fs::create_directories(empty);
  std::ofstream(empty / "notes.txt") << "not a measurement";
  auto none = read_measurements(empty.string());
  REQUIRE_FALSE(none);
  CHECK(none.error().message == empty.string() + ": no measurement files (*.csv, *.csv.xz, *.json, *.json.xz, *.db) "
                                                 "in the directory");
}

TEST_CASE("Kendall tau-b matches the pairwise definition, ties included", "[truth]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(0, 20);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> x(60), y(60);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = d(rng);
      y[i] = d(rng) + (trial % 2 ? x[i] : 0);
    }
    double conc = 0, disc = 0, tx = 0, ty = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      for (size_t j = i + 1; j < x.size(); ++j) {
        const double s = (x[i] - x[j]) * (y[i] - y[j]);
        if (s > 0) ++conc;
        if (s < 0) ++disc;
        if (x[i] == x[j] && y[i] != y[j]) ++tx;
        if (y[i] == y[j] && x[i] != x[j]) ++ty;
      }
    }
    const double expect = (conc - disc) / std::sqrt((conc + disc + tx) * (conc + disc + ty));
    CHECK(kendall_tau(x, y) == Approx(expect).margin(1e-12));
  }
  const ErrorStats s = error_stats({110, 90, 100}, {100, 100, 100});
  CHECK(s.mape == Approx(20.0 / 3));
  CHECK(s.bias == Approx(0.0).margin(1e-12));
  CHECK(s.median_ape == Approx(10.0));
}

TEST_CASE("framework ops become the work the catalog counts", "[truth]") {
  Measurement lin = sample_record();
  lin.op = "linear";
  lin.op_class = "gemm";
  lin.dims = {{"b", 1}, {"m", 100}, {"n", 64}, {"k", 32}};
  auto w = measurement_work(lin);
  REQUIRE(w);
  CHECK(w->cls == OpClass::kGemm);
  CHECK(w->m == 100);
  CHECK(w->n == 32);
  CHECK(w->k == 64);
  Measurement conv = lin;
  conv.op = "conv";
  conv.op_class = "conv";
  conv.dims = {{"b", 2}, {"input_channel", 16}, {"output_channel", 32}, {"kernel_szie", 3}, {"input_size", 8},
               {"stride", 1}, {"padding", 1}};
  auto cw = measurement_work(conv);
  REQUIRE(cw);
  CHECK(cw->m == 2 * 8 * 8);
  CHECK(cw->n == 32);
  CHECK(cw->k == 16 * 9);
  Measurement sm = lin;
  sm.op = "softmax";
  sm.op_class = "normalization";
  sm.dims = {{"b", 8}, {"h", 512}};
  CHECK(measurement_work(sm)->passes == 1);  // a warp per row, in registers
  sm.dims["h"] = 2048;
  CHECK(measurement_work(sm)->passes == 3);  // a block per row: max, sum, write
  Measurement bad = lin;
  bad.dims.erase("k");
  auto e = measurement_work(bad);
  REQUIRE_FALSE(e);
  CHECK(e.error().message == "add.csv:2 (Tesla T4, op \"linear\"): no dim \"k\"; the op needs it");
  bad = conv;
  bad.dims["padding"] = 0;
  bad.dims["kernel_szie"] = 11;
  auto e2 = measurement_work(bad);
  REQUIRE_FALSE(e2);
  CHECK(e2.error().message == "add.csv:2 (Tesla T4, op \"conv\"): a 11x11 window with padding 0 does not fit an input of 8");
}

TEST_CASE("a library kernel's name and launch give the tile it ran with", "[truth]") {
  const DeviceModel d = make_device(*find_profile("nvidia-v100-pcie-32gb", default_profile_dirs()));
  // A record of `op` that ran `kernel` with this launch.
  auto launched = [](const std::string& op, const std::string& cls, std::map<std::string, int64_t> dims,
                     const std::string& kernel, const std::string& grid, const std::string& block) {
    Measurement m = sample_record();
    m.op = op;
    m.op_class = cls;
    m.dims = std::move(dims);
    m.kernel = kernel;
    m.grid = grid;
    m.block = block;
    return m;
  };
  // Its work and the tile its launch gives.
  auto priced = [&](const Measurement& m) {
    auto w = measurement_work(m);
    REQUIRE(w);
    auto t = library_tile(m, *w, d);
    REQUIRE(t);
    return std::pair{*w, *t};
  };
  const Measurement lin = launched("linear", "gemm", {{"b", 1}, {"m", 204}, {"n", 32026}, {"k", 432}},
                                   "volta_sgemm_64x32_sliced1x4_tn", "7x7x16", "256x1x1");
  const auto [w, t] = priced(lin);
  CHECK(t.block_n == 64);  // cuBLAS's first figure runs along the output's columns
  CHECK(t.block_m == 32);
  CHECK(t.block_k == 32);  // a k-step of 8, sliced four ways
  CHECK(t.threads == 256);
  CHECK(t.split_k == 16);  // the grid's depth over a batch of one
  CHECK(kernel_cost(w, t, d).feasible);

  const Measurement bmm = launched("bmm", "gemm", {{"b", 13}, {"m", 27}, {"n", 15}, {"k", 29}},
                                   "volta_sgemm_128x32_nn", "1x1x13", "256x1x1");
  const auto [bw, bt] = priced(bmm);
  CHECK(bt.block_n == 128);
  CHECK(bt.split_k == 1);  // the depth is the batch

  const Measurement ln = launched("ln", "normalization", {{"b", 4000}, {"h", 64}},
                                  "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
                                  "4000x1x1", "32x4x1");
  const auto [lw, lt] = priced(ln);
  CHECK(lt.threads == 128);
  CHECK(lt.rows_per_block == 1);
  // A block per row costs more than gpusim's own packing of short rows into one block.
  CHECK(kernel_cost(lw, lt, d).ctas == 4000);
  CHECK(kernel_cost(lw, choose_tile(lw, d), d).ctas < 4000);

  // What it cannot read leaves the choice to gpusim.
  Measurement other = lin;
  other.kernel = "Cijk_Ailk_Bljk_SB_MT64x64x16";
  CHECK_FALSE(library_tile(other, w, d));
  other = lin;
  other.kernel.clear();
  CHECK_FALSE(library_tile(other, w, d));
  other = ln;
  other.grid = "many";
  CHECK_FALSE(library_tile(other, lw, d));
  other = ln;
  other.block = "4096x1x1";  // more threads than a block may have here: not this device's launch
  CHECK_FALSE(library_tile(other, lw, d));
}

TEST_CASE("rows per block round-trips through tile JSON and is range-checked", "[truth][sim]") {
  TileConfig t;
  t.threads = 128;
  t.rows_per_block = 1;
  auto back = tile_from_json(tile_to_json(t), "test");
  REQUIRE(back);
  CHECK(back->rows_per_block == 1);
  CHECK_FALSE(tile_to_json(TileConfig{}).contains("rows_per_block"));
  auto j = tile_to_json(t);
  j["rows_per_block"] = -2;
  auto bad = tile_from_json(j, "run.json kernels[3]");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("tile.rows_per_block") && Catch::Contains("-2 is negative"));
}

TEST_CASE("a generated tile's chain round-trips through tile JSON and a bad one is named", "[truth][sim]") {
  TileConfig t;
  t.block_m = 64;
  t.chain = {3, 1, 10, 2};
  const auto j = tile_to_json(t);
  REQUIRE(j.contains("chain"));
  auto back = tile_from_json(j, "test");
  REQUIRE(back);
  CHECK(back->chain == t.chain);
  CHECK_FALSE(tile_to_json(TileConfig{}).contains("chain"));
  auto bad = j;
  bad["chain"]["loads_ahead"] = 2;
  auto e = tile_from_json(bad, "run.json kernels[3]");
  REQUIRE_FALSE(e);
  CHECK(e.error().message == "run.json kernels[3]: tile.chain.loads_ahead: 2 is not a count from 0 to 1");
  bad = j;
  bad["chain"]["rounds"] = 1;
  e = tile_from_json(bad, "run.json kernels[3]");
  REQUIRE_FALSE(e);
  CHECK(e.error().message == "run.json kernels[3]: tile.chain.rounds: unknown key; allowed: load_rounds, loads_ahead, "
                             "epilogue_rounds, epilogue_barriers");
  bad["chain"] = "fast";
  e = tile_from_json(bad, "run.json kernels[3]");
  REQUIRE_FALSE(e);
  CHECK_THAT(e.error().message, Catch::StartsWith("run.json kernels[3]: tile.chain: is not an object"));
}

// The H200 runs carry each GEMM-like kernel's chain (tools/annotate_chains.py), and gpusim's own
// kernels held out model by model meet the issue's targets per class: MAPE <= 25%, |bias| <= 10%.
TEST_CASE("gpusim's own GEMM-like kernels are predicted within 25% held out model by model", "[truth][cli]") {
  auto recs = read_measurements(test::source_dir() + "/bench/gpu/h200-2026-11-27/truth/runs/resnet50_fp16.json.xz");
  REQUIRE(recs);
  int chains = 0;
  for (const Measurement& m : *recs) chains += m.tile && m.tile->chain.known() ? 1 : 0;
  CHECK(chains == 54);  // every Conv and Gemm of ResNet-50
  const std::string runs = test::source_dir() + "/bench/gpu/h200-2026-11-27/truth/runs";
  const test::Run guard = test::run_gpusim("validate --truth " + runs + " --leave-one-model-out --worst 0 --check-against " +
                                           test::source_dir() + "/bench/validate/h200-own-kernels-lomo.json");
  INFO(guard.out);
  CHECK(guard.rc == 0);
  CHECK_THAT(guard.out, Catch::Contains("none worse"));
  const test::Run r = test::run_gpusim("validate --truth " + runs + " --leave-one-model-out --json --worst 0");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{'), r.out.rfind('}') - r.out.find('{') + 1));
  int pooled = 0;
  for (const auto& g : j.at("groups")) {
    const std::string cls = g.at("class").get<std::string>();
    if (g.at("gpu").get<std::string>().rfind("every model held out", 0) != 0 || (cls != "conv" && cls != "gemm")) continue;
    INFO(cls);
    CHECK(g.at("model").at("mape").get<double>() <= 25.0);
    CHECK(std::abs(g.at("model").at("bias").get<double>()) <= 10.0);
    ++pooled;
  }
  CHECK(pooled == 2);
}

// Leave-one-architecture-out holds out every GPU of a generation together: the P4 and the P100 (both
// Pascal) are predicted from the other architectures' fit, and say so.
TEST_CASE("leave-one-architecture-out holds each architecture's GPUs out together", "[truth][cli]") {
  const std::string sample = test::source_dir() + "/tests/data/truth/neusight-sample";
  const test::Run r = test::run_gpusim("validate --truth " + sample + " --leave-one-architecture-out --json --worst 0");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{'), r.out.rfind('}') - r.out.find('{') + 1));
  CHECK(j.at("mode") == "leave-one-architecture-out");
  std::map<std::string, std::set<std::string>> held;  // architecture -> GPUs predicted with it held out
  for (const auto& g : j.at("per_gpu")) {
    const std::string name = g.at("gpu").get<std::string>();
    const size_t colon = name.find(": ");
    REQUIRE(colon != std::string::npos);
    held[name.substr(0, colon)].insert(name.substr(colon + 2));
  }
  CHECK(held["Ampere"] == std::set<std::string>{"NVIDIA A100-PCIE-40GB"});
  CHECK(held["Pascal"] == std::set<std::string>{"Tesla P100-PCIE-16GB", "Tesla P4"});
  CHECK(held.count("CDNA1") == 1);
  const test::Run text = test::run_gpusim("validate --truth " + sample + " --leave-one-architecture-out --worst 0");
  CHECK_THAT(text.out, Catch::Contains("mode     leave-one-architecture-out: every GPU of an architecture predicted"));
  const test::Run both = test::run_gpusim("validate --truth " + sample + " --leave-one-architecture-out --leave-one-gpu-out");
  CHECK(both.rc == 2);
  CHECK_THAT(both.out, Catch::Contains("are separate runs; give one"));
}

TEST_CASE("a tile's derived shared memory and registers round-trip through tile JSON and are range-checked", "[truth][sim]") {
  TileConfig t;
  t.block_m = t.block_n = 64;
  t.block_k = 32;
  t.smem_bytes = 41472;
  t.registers = 72;
  auto back = tile_from_json(tile_to_json(t), "test");
  REQUIRE(back);
  CHECK(*back == t);
  CHECK_FALSE(tile_to_json(TileConfig{}).contains("smem_bytes"));
  CHECK_FALSE(tile_to_json(TileConfig{}).contains("registers"));
  // Derived, not a schedule: a tile without them schedules alike.
  TileConfig plain = t;
  plain.smem_bytes = plain.registers = 0;
  CHECK(same_schedule(t, plain));
  plain.stages = 2;
  CHECK_FALSE(same_schedule(t, plain));
  for (const char* field : {"smem_bytes", "registers"}) {
    auto j = tile_to_json(t);
    j[field] = -4;
    auto bad = tile_from_json(j, "run.json kernels[3]");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains(std::string("tile.") + field) && Catch::Contains("-4 is negative") &&
                                        Catch::Contains("run.json kernels[3]"));
  }
  auto j = tile_to_json(t);
  j["main_loop"] = "tensor";
  auto bad_loop = tile_from_json(j, "run.json kernels[3]");
  REQUIRE_FALSE(bad_loop);
  CHECK_THAT(bad_loop.error().message,
             Catch::Contains("tile.main_loop") && Catch::Contains("\"tensor\" is not any, vector, matrix or tf32"));
  t.main_loop = MainLoop::kTf32;
  auto tf32_back = tile_from_json(tile_to_json(t), "test");
  REQUIRE(tf32_back);
  CHECK(tf32_back->main_loop == MainLoop::kTf32);
}

TEST_CASE("runtimes: host time overlaps the kernels back to back, and bad files are named", "[truth]") {
  auto rt = find_runtime("pytorch-eager", default_runtime_dirs());
  REQUIRE(rt);
  CHECK(rt->combine == "overlap");
  const double host = rt->host_us("add", "elementwise", 1);
  CHECK(host > 15);
  CHECK(host < 60);
  CHECK(rt->op_time_us("add", "elementwise", 1.0, 1) == Approx(host));           // host-bound
  // Device-bound: the kernel and what each call pays on the device beside it.
  CHECK(rt->op_time_us("add", "elementwise", 10 * host, 1) == Approx(10 * host + rt->launch_latency_us));
  auto dev = find_runtime("gpusim", {});
  REQUIRE(dev);
  CHECK(dev->op_time_us("add", "elementwise", 3.0, 1) == 3.0);
  auto unknown = find_runtime("tensorflow", {});
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error().message, Catch::StartsWith("runtime \"tensorflow\" is unknown; known runtimes: cuda-graph, gpusim"));
  auto bad = [&](const std::string& name, const std::string& body) {
    auto r = load_runtime(write(name, body));
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  const std::string dir = test::temp_dir();
  CHECK(bad("rt1.yaml", "schema: gpusim.runtime/2\nname: x\n") ==
        (fs::path(dir) / "rt1.yaml").string() + ": schema: \"gpusim.runtime/2\"; expected gpusim.runtime/1");
  CHECK(bad("rt2.yaml", "schema: gpusim.runtime/1\nname: x\ncombine: add\n") ==
        (fs::path(dir) / "rt2.yaml").string() + ": combine: \"add\"; expected overlap, serial or device");
  CHECK(bad("rt3.yaml", "schema: gpusim.runtime/1\nname: x\nop_us: {add: -3}\n") ==
        (fs::path(dir) / "rt3.yaml").string() + ": op_us.add: -3 is out of range; expected 0 to 1e6 us");
  CHECK(bad("rt4.yaml", "schema: gpusim.runtime/1\nname: x\nhost: 3\n") ==
        (fs::path(dir) / "rt4.yaml").string() +
            ": host: unknown key; allowed: schema, name, description, extends, combine, default_us, class_us, "
            "op_us, extra_kernel_us, launch_latency_us, host_scaled, replay, workload, vendors, sources, fit, "
            "lowering");
  CHECK(bad("rt5.yaml", "schema: gpusim.runtime/1\nname: x\ndefault_us: fast\n") ==
        (fs::path(dir) / "rt5.yaml").string() + ": default_us: \"fast\" is not a number of microseconds");
  CHECK(bad("rt6.yaml", "schema: gpusim.runtime/1\nname: x\nhost_scaled: maybe\n") ==
        (fs::path(dir) / "rt6.yaml").string() +
            ": host_scaled: \"maybe\"; expected true (the figures are host time a host profile scales) or false "
            "(device time)");
  CHECK(bad("rt7.yaml", "schema: gpusim.runtime/1\nname: x\nworkload: llm\n") ==
        (fs::path(dir) / "rt7.yaml").string() +
            ": workload: \"llm\"; expected graphs (an ONNX graph's kernels) or language-models (a described model's "
            "generations, as llama.cpp runs them)");
}

TEST_CASE("a 70 W card runs below its boost clock, a 250 W one holds it", "[truth][sim]") {
  auto t4 = find_profile("nvidia-t4", default_profile_dirs());
  auto a100 = find_profile("nvidia-a100-pcie-40gb", default_profile_dirs());
  REQUIRE(t4);
  REQUIRE(a100);
  CHECK(sustained_clock_mhz(*t4) == Approx(585 + (1590 - 585) * 70.0 / 125));
  CHECK(sustained_clock_mhz(*a100) == Approx(a100->compute.boost_clock_mhz));
  GpuProfile measured = *t4;
  measured.compute.sustained_clock_mhz = 1400;
  CHECK(sustained_clock_mhz(measured) == 1400);
  CHECK(make_device(*t4).clock_scale < 0.8);
}

TEST_CASE("validate names what it cannot predict", "[truth][cli]") {
  const std::string csv = write("unknown_gpu.csv", std::string(kCsvHeader) + "add,Radeon 9000,p2,0.03,k,1,1,1,2,3\n" +
                                                       "add,Tesla T4,p2,0.03,k,1,1,1,2,3\n");
  const test::Run r = test::run_gpusim("validate --truth " + csv);
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("skipped  1 record(s): no profile for GPU \"Radeon 9000\": no profile's display_name "
                                    "or name matches it; add one to gpu_profiles/ or pass --profile-for \"Radeon "
                                    "9000=PROFILE\""));
  const test::Run g = test::run_gpusim("validate --truth " + csv + " --gpu nvidia-h100-sxm");
  CHECK(g.rc == 2);
  CHECK_THAT(g.out, Catch::Contains("--gpu nvidia-h100-sxm: no record of the truth data ran on it (its GPUs: Radeon 9000, Tesla T4)"));
  const test::Run pf = test::run_gpusim("validate --truth " + csv + " --profile-for Radeon");
  CHECK(pf.rc == 2);
  CHECK_THAT(pf.out, Catch::Contains("--profile-for \"Radeon\": expected DEVICE=PROFILE"));
  // Every record skipped: an empty table is not a validation (it exited 0 before).
  const std::string none = write("only_unknown_gpu.csv", std::string(kCsvHeader) + "add,Radeon 9000,p2,0.03,k,1,1,1,2,3\n");
  const test::Run n = test::run_gpusim("validate --truth " + none);
  CHECK(n.rc == 1);
  CHECK_THAT(n.out, Catch::Contains("nothing was validated: every one of the 1 record(s) was skipped"));
}

TEST_CASE("the store checks its integrity before an import, opens read-only to read, and creates its schema once",
          "[truth][cli][errors]") {
  const fs::path dir = fs::path(test::temp_dir()) / "gpusim_store_integrity";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "damaged.db").string();
  {
    auto s = MeasurementStore::open(db);
    REQUIRE(s);
    std::vector<Measurement> many;
    for (int i = 0; i < 400; ++i) {
      Measurement m = sample_record();
      m.time_us = 10 + i;
      m.source_ref = "row " + std::to_string(i) + std::string(200, 'x');
      many.push_back(m);
    }
    REQUIRE(s->insert(many, "test"));
    REQUIRE(s->check_integrity());
  }
  // Damaged pages (a disk fault, a copy cut short): the import refuses and adds nothing.
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 * 3);
    const std::string junk(4096 * 4, '\xa5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::string src = test::source_dir() + "/tests/data/truth/neusight-sample/add.csv.xz";
  auto r = test::run_gpusim("truth import --db " + db + " " + src);
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains(db + ": the measurement store is damaged ("));
  CHECK_THAT(r.out, Catch::Contains("nothing was written"));
  CHECK_THAT(r.out, !Catch::Contains("added"));
  // tune --clear always works: the damaged store is moved aside whole, and a new cache starts.
  r = test::run_gpusim("tune --clear --store " + db);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("damaged ("));
  CHECK_THAT(r.out, Catch::Contains("moved to " + db + ".damaged"));
  CHECK(fs::exists(db + ".damaged"));
  CHECK_FALSE(fs::exists(db));
  { std::ofstream(db) << "not a database at all, just text long enough to be read as a header......"; }
  r = test::run_gpusim("tune --clear --store " + db);
  CHECK(r.rc == 0);
  CHECK(fs::exists(db + ".damaged-2"));

  // Read-only: a reader never changes the store, even one of an older layout.
  const std::string ro = (dir / "ro.db").string();
  {
    auto s = MeasurementStore::open(ro);
    REQUIRE(s);
    REQUIRE(s->insert({sample_record()}, "test"));
  }
  const auto stamp = fs::last_write_time(ro);
  {
    auto s = MeasurementStore::open_read(ro);
    REQUIRE(s);
    CHECK(*s->count() == 1);
    auto w = s->insert({sample_record()}, "write through a reader");
    REQUIRE_FALSE(w);
  }
  CHECK(fs::last_write_time(ro) == stamp);
  // A WAL store whose -shm cannot be made (a folder the user may only read): read as immutable.
  fs::remove(ro + "-shm");
  fs::remove(ro + "-wal");
  fs::create_directory(ro + "-shm");
  {
    auto s = MeasurementStore::open_read(ro);
    REQUIRE(s);
    CHECK(*s->count() == 1);
  }
  r = test::run_gpusim("truth stats --db " + ro);
  CHECK(r.rc == 0);
  fs::remove(ro + "-shm");
  auto absent = MeasurementStore::open_read((dir / "absent.db").string());
  REQUIRE_FALSE(absent);
  CHECK_FALSE(fs::exists(dir / "absent.db"));

  // Eight connections creating the same new store at once all succeed, with one schema.
  const std::string fresh = (dir / "race.db").string();
  std::atomic<int> ok{0}, ready{0};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready < 8) std::this_thread::yield();
      auto s = MeasurementStore::open(fresh);
      if (!s) {
        errors[static_cast<size_t>(i)] = s.error().message;
        return;
      }
      Measurement m = sample_record();
      m.time_us = 100 + i;
      if (auto st = s->insert({m}, "race"); st) ++ok; else errors[static_cast<size_t>(i)] = st.error().message;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    INFO(e);
    CHECK(e.empty());
  }
  CHECK(ok == 8);
  CHECK(*MeasurementStore::open_read(fresh)->count() == 8);
}

TEST_CASE("readers refuse JSON nested deeper than 64 levels instead of overflowing the stack", "[truth][errors]") {
  const std::string deep(100000, '[');
  const std::string p = write("deep_run.json", "{\"schema\": \"gpusim.run/1\", \"device\": " + deep);
  auto r = read_measurements(p);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::StartsWith(p + ": JSON nested deeper than 64 levels at byte 100"));
  auto q = parse_run_json("{\"a\": \"[[[[ in a string ]]]]\", " + std::string(70, '{'), "run.json");
  REQUIRE_FALSE(q);
  CHECK_THAT(q.error().message, Catch::Contains("nested deeper than 64 levels at byte"));
  // Strings do not count, escapes included; 64 levels are fine.
  CHECK(json_depth_excess("[\"\\\"[[[[[[\"]", 1) == std::string_view::npos);
  CHECK(json_depth_excess(std::string(64, '[') + std::string(64, ']')) == std::string_view::npos);
  CHECK(json_depth_excess(std::string(65, '[')) == 64);
}

TEST_CASE("gpusim truth import is idempotent", "[truth][cli]") {
  const std::string db = (fs::path(test::temp_dir()) / "gpusim_import_test.db").string();
  fs::remove(db);
  const std::string src = test::source_dir() + "/tests/data/truth/neusight-sample/add.csv.xz";
  const test::Run a = test::run_gpusim("truth import --db " + db + " " + src);
  INFO(a.out);
  REQUIRE(a.rc == 0);
  CHECK_THAT(a.out, Catch::Contains("added, 0 already in"));
  const test::Run b = test::run_gpusim("truth import --db " + db + " " + src);
  CHECK_THAT(b.out, Catch::Contains(" 0 added, "));
  const test::Run s = test::run_gpusim("truth stats --db " + db);
  CHECK_THAT(s.out, Catch::Contains("neusight"));
}

// The CI guard: the committed sample of the training data, validated, must not get worse than the
// figures recorded in tests/data/truth/sample-figures.json (re-record with the command there).
TEST_CASE("validation errors on the training sample do not rise above the recorded ones", "[truth][cli]") {
  const std::string dir = test::source_dir() + "/tests/data/truth/";
  const test::Run r = test::run_gpusim("validate --truth " + dir + "neusight-sample --check-against " + dir +
                                       "sample-figures.json --worst 0");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("Tesla T4"));
  // It says what it checked, not nothing.
  CHECK_THAT(r.out, Catch::Contains("sample-figures.json: ") && Catch::Contains("per-op group(s)") &&
                        Catch::Contains("checked") && Catch::Contains("none worse"));
}

// The same guard for the measurements taken on a lent H200 (bench/gpu/h200-2026-11-27: gpusim's
// own kernels and PyTorch ops in NeuSight's format), a GPU none of the fitting saw.
TEST_CASE("validation errors on the H200 measurements do not rise above the recorded ones", "[truth][cli]") {
  const test::Run r = test::run_gpusim("validate --truth " + test::source_dir() + "/bench/gpu/h200-2026-11-27/truth" +
                                       " --check-against " + test::source_dir() +
                                       "/bench/validate/h200-2026-11-27.json --worst 0");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("NVIDIA H200") && Catch::Contains("none worse"));
}

// And for the language-model sweep on the same kind of card (bench/gpu/h200-llm-2026-11-27:
// cuBLAS's GEMV-shaped GEMMs at 1-512 rows on cold weights, fp16 and bf16, kernel time).
TEST_CASE("validation errors on the H200 GEMV sweep do not rise above the recorded ones", "[truth][cli]") {
  const test::Run r = test::run_gpusim("validate --truth " + test::source_dir() + "/bench/gpu/h200-llm-2026-11-27/truth" +
                                       " --check-against " + test::source_dir() +
                                       "/bench/validate/h200-llm-gemv.json --worst 0");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("NVIDIA H200") && Catch::Contains("none worse"));
}

// On the whole training split, where ../shared/truth is present (CI has it beside the clone).
TEST_CASE("validation errors on the full training split do not rise above the recorded ones", "[truth][cli]") {
  if (!fs::exists(truth_dir() + "/neusight-train")) {
    WARN("../shared/truth/neusight-train is absent: the full-data guard is skipped (the sample guard still runs)");
    return;
  }
  const test::Run r = test::run_gpusim("validate --truth " + truth_dir() + " --check-against " + test::source_dir() +
                                       "/bench/validate/neusight-train.json --worst 0");
  INFO(r.out);
  CHECK(r.rc == 0);
}

// --- whole models (timm's published benchmark rows with their graphs)

namespace {
std::string timm_sample() { return test::source_dir() + "/tests/data/truth/timm-sample"; }
}  // namespace

TEST_CASE("timm rows are read with their graphs and priced end to end", "[truth][models]") {
  std::vector<std::string> notes;
  auto recs = read_measurements(timm_sample(), &notes);
  REQUIRE(recs);
  CHECK(recs->size() == 44);
  int with_graph = 0;
  for (const Measurement& m : *recs) {
    CHECK(m.op_class == "model");
    CHECK((m.runtime == "pytorch-eager" || m.runtime == "torch-compile"));
    CHECK(m.dtype == DType::kFloat16);
    CHECK(m.config.at("precision") == "amp-fp16");
    CHECK(m.gpu.rfind("NVIDIA GeForce RTX ", 0) == 0);
    if (!m.graph.empty()) {
      ++with_graph;
      REQUIRE(m.graph_bytes);
      CHECK(m.config.count("unpriced") == 0);
    } else {
      CHECK_THAT(m.config.at("unpriced"), Catch::Contains("px"));
    }
  }
  // Five graphs, each in five configurations (eager NCHW and NHWC on two cards, compiled on one), but
  // one model the 3090's NHWC file lacks.
  CHECK(with_graph == 24);
  CHECK_THAT(notes.empty() ? std::string() : notes.front(), Catch::Contains("manifest.json"));

  ValidateOptions o;
  o.profile_dirs = default_profile_dirs();
  o.worst = 2;
  auto rep = validate_models(*recs, o);
  REQUIRE(rep);
  CHECK(rep->rows.size() == 24);
  bool eager_all = false, compile_all = false;
  for (const ModelGroup& g : rep->groups) {
    if (g.gpu == "all" && g.family == "all" && g.runtime == "pytorch-eager") eager_all = g.model.n == 19;
    if (g.gpu == "all" && g.family == "all" && g.runtime == "torch-compile") compile_all = g.model.n == 5;
  }
  CHECK(eager_all);
  CHECK(compile_all);
  REQUIRE(rep->speedups.size() == 1);
  CHECK(rep->speedups[0].faster == "torch-compile");
  CHECK(rep->speedups[0].stats.n == 5);
  for (const ModelRow& r : rep->rows) {
    CHECK(r.predicted_us > 0);
    CHECK(r.roofline_us > 0);
    CHECK_FALSE(r.top.empty());
  }
}

TEST_CASE("the store keeps whole-model records and their graphs", "[truth][models]") {
  auto recs = read_measurements(timm_sample());
  REQUIRE(recs);
  const std::string db = (fs::path(test::temp_dir()) / "gpusim_models.db").string();
  fs::remove(db);
  {
    auto s = MeasurementStore::open(db);
    REQUIRE(s);
    auto st = s->insert(*recs, "test");
    REQUIRE(st);
    CHECK(st->added == 44);
  }
  auto back = read_measurements(db);
  REQUIRE(back);
  REQUIRE(back->size() == recs->size());
  for (size_t i = 0; i < back->size(); ++i) {
    CHECK((*back)[i].graph == (*recs)[i].graph);
    CHECK((*back)[i].config == (*recs)[i].config);
    CHECK(measurement_key((*back)[i]) == measurement_key((*recs)[i]));
    if (!(*recs)[i].graph.empty()) {
      REQUIRE((*back)[i].graph_bytes);
      CHECK(*(*back)[i].graph_bytes == *(*recs)[i].graph_bytes);
    }
  }
  // Validated from the store alone, the same figures as from the files.
  ValidateOptions o;
  o.profile_dirs = default_profile_dirs();
  auto a = validate_models(*recs, o);
  auto b = validate_models(*back, o);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->rows.size() == b->rows.size());
  CHECK(a->groups.back().model.mape == Approx(b->groups.back().model.mape));
}

TEST_CASE("timm reader errors name the file, the line and the fix", "[truth][models][errors]") {
  const fs::path dir = fs::path(test::temp_dir()) / "timm-bad";
  fs::create_directories(dir / "models");
  const std::string header = "file,model,infer_img_size,infer_samples_per_sec,infer_step_time,infer_batch_size\n";
  std::ofstream(dir / "timm-x.csv") << header << "benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv,resnet18,224,1,2,8\n";
  auto r = read_timm_csv((dir / "timm-x.csv").string());
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("manifest.json") && Catch::Contains("models/ beside the CSV"));
  std::ofstream(dir / "models" / "manifest.json") << R"({"models": {}})";
  std::ofstream(dir / "timm-y.csv") << header << "benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv,resnet18,224,1,-2,8\n";
  r = read_timm_csv((dir / "timm-y.csv").string());
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("timm-y.csv:2") && Catch::Contains("infer_step_time \"-2\""));
  std::ofstream(dir / "timm-z.csv") << header << "benchmark-infer-amp-nchw-pt240-cu124-gtx.csv,resnet18,224,1,2,8\n";
  r = read_timm_csv((dir / "timm-z.csv").string());
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("timm-z.csv:2") && Catch::Contains("names no GPU"));
  // A model without a graph is kept and said to be unpriced.
  std::ofstream(dir / "timm-w.csv") << header << "benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv,resnet18,224,1,2,8\n";
  r = read_timm_csv((dir / "timm-w.csv").string());
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  CHECK_THAT(r->front().config.at("unpriced"), Catch::Contains("no graph of resnet18"));
}

TEST_CASE("a truth directory skips files of other formats, saying which", "[truth][models]") {
  const fs::path dir = fs::path(test::temp_dir()) / "truth-mixed";
  fs::create_directories(dir);
  std::ofstream(dir / "prices.csv") << "item,price\nbread,3\n";
  // llama-bench rows are read now (language models, validate_llm), beside NeuSight's.
  std::ofstream(dir / "llama.csv") << "gpu,gpu_norm,backend,model,quant,test,tokens_per_s\n"
                                      "NVIDIA GeForce RTX 4090,RTX 4090,CUDA,llama 7B,F16,tg128,61\n";
  std::ofstream(dir / "add.csv") << kCsvHeader << "add,Tesla T4,p2.1.0,0.03,k,1,1x1x1,128x1x1,64,1024\n";
  std::vector<std::string> notes;
  auto recs = read_measurements(dir.string(), &notes);
  REQUIRE(recs);
  CHECK(recs->size() == 2);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("prices.csv") && Catch::Contains("a CSV of no format gpusim reads"));
}

// The CI guard for whole models: the committed sample, validated, must not get worse than its
// recorded figures (tests/data/truth/timm-sample-figures.json; re-record with the command in
// bench/validate/README.md).
TEST_CASE("whole-model errors on the timm sample do not rise above the recorded ones", "[truth][models][cli]") {
  const std::string dir = test::source_dir() + "/tests/data/truth/";
  const test::Run r = test::run_gpusim("validate --truth " + dir + "timm-sample --check-against " + dir +
                                       "timm-sample-figures.json --worst 0");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("whole models") && Catch::Contains("speed-up torch-compile"));
}

TEST_CASE("validate on gpusim run --json output prices each record with the profile the run matched",
          "[truth][cli][vulkan]") {
  if (!test::device("vulkan")) return;  // says why
  test::OnnxBuilder b(17);
  b.input("x", onnx::TensorProto::FLOAT, {int64_t{64}, int64_t{128}});
  b.initializer("w", onnx::TensorProto::FLOAT, {128, 256});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  const std::string model = b.write("validate_run_matmul.onnx");
  const test::Run r = test::run_gpusim("run " + model + " --backend vulkan --repeat 2 --json");
  REQUIRE(r.rc == 0);
  const auto doc = nlohmann::json::parse(r.out);
  REQUIRE(doc.contains("gpu"));  // the profile run matched to the device (lavapipe on CI)
  const std::string run_json = write("validate_run.json", r.out);
  const test::Run v = test::run_gpusim("validate --truth " + run_json);
  INFO(v.out << v.out);
  CHECK(v.rc == 0);
  CHECK_THAT(v.out, !Catch::Contains("no profile for"));
  CHECK_THAT(v.out, Catch::Contains(doc["gpu"].get<std::string>()));
}
