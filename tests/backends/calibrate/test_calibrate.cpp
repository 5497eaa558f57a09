// Calibration: the measurement discipline, the least-squares fit (it must recover parameters
// from synthetic measurements), the atomic profile writer and its errors, a quick calibration of
// the lavapipe Vulkan device (the CI tier), the matrix microbenchmark on the portable path,
// every calibration kernel compiled with NVRTC (sm_90) and hiprtc (gfx90a) by a whole quick run
// on a compile-only device, and the committed calibrations under gpu_profiles/calibrated/
// (predictions must stay within the error recorded when measured).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <span>
#include <utility>

#include "calibrate.h"
#include "hw/atomic_file.h"
#include "session.h"
#include "gpusim/kernel_cost.h"
#include "support/devices.h"
#include "support/onnx_builder.h"
#include "support/run_cli.h"
#ifdef GPUSIM_HAVE_CUDA
#include "cuda/nvrtc_compiler.h"
#endif
#ifdef GPUSIM_HAVE_HIP
#include "hip/hiprtc_compiler.h"
#endif

using namespace gpusim;
using namespace gpusim::calibrate;
namespace fs = std::filesystem;

namespace {

GpuProfile lavapipe() {
  auto p = find_profile("lavapipe", default_profile_dirs());
  REQUIRE(p);
  return *p;
}

Observation obs(const std::string& cls, KernelWork w, TileConfig t, double us, bool held_out = false) {
  Observation o;
  o.cls = cls;
  o.name = cls;
  o.work = w;
  o.tile = t;
  o.stats = summarize({us});
  o.held_out = held_out;
  return o;
}

KernelWork stream(double bytes, double fma, int64_t elements) {
  KernelWork w;
  w.cls = OpClass::kElementwise;
  w.bytes_read = static_cast<int64_t>(bytes / 2);
  w.bytes_written = static_cast<int64_t>(bytes / 2);
  w.flops.fma = static_cast<int64_t>(fma);
  w.elements = elements;
  return w;
}

// Observations "measured" on a device that behaves exactly like `truth`.
std::vector<Observation> synthetic(const GpuProfile& truth) {
  const DeviceModel d = make_device(truth);
  std::vector<Observation> v;
  auto add = [&](const std::string& cls, const KernelWork& w, const TileConfig& t, bool held_out) {
    v.push_back(obs(cls, w, t, kernel_cost(w, t, d).total_us, held_out));
  };
  TileConfig st;
  st.threads = 256;
  for (int i = 0; i < 6; ++i) {
    const double n = 1 << (16 + 2 * i);
    TileConfig many = st;
    many.items_per_thread = 4;
    add("dram", stream(8 * n, 0, static_cast<int64_t>(n)), many, i % 2 == 1);
    add("fma", stream(1024, 4096 * n, static_cast<int64_t>(n / 64)), st, i % 2 == 1);
    add("launch", stream(0, 0, 256 << i), st, i % 2 == 1);
    const int64_t s = 64 << (i / 2);
    KernelWork g = gemm_work(DType::kFloat32, 1, s, s, s);
    add("gemm", g, TileConfig{64, 64, 8, 256, 2, 1, 1, 1}, i % 2 == 1);
    KernelWork r;
    r.cls = OpClass::kReduction;
    r.rows = 256 << i;
    r.row_elements = 512;
    r.passes = 2;
    r.bytes_read = r.rows * r.row_elements * 4;
    r.bytes_written = r.rows * 4;
    r.flops.fma = r.rows * r.row_elements * 3;
    TileConfig rt = st;
    rt.threads = 128;
    add("reduction", r, rt, i % 2 == 1);
  }
  return v;
}

std::string tmp_dir(const std::string& name) {
  const fs::path d = fs::path(test::temp_dir()) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

}  // namespace

TEST_CASE("summarize: median, nearest-rank p95 and coefficient of variation", "[calibrate]") {
  std::vector<double> v;
  for (int i = 1; i <= 20; ++i) v.push_back(i);
  const Stats s = summarize(v);
  CHECK(s.p50 == Approx(10.5));
  CHECK(s.p95 == Approx(19));
  CHECK(s.min == 1);
  CHECK(s.max == 20);
  CHECK(s.cv == Approx(5.9161 / 10.5).epsilon(1e-3));
  CHECK(summarize({}).n == 0);
}

TEST_CASE("measure: warm-ups are dropped, a noisy round is re-measured, a noisy figure is flagged", "[calibrate]") {
  Discipline d;
  d.warmup = 2;
  d.repeats = 5;
  d.max_cv = 0.05;
  d.max_rounds = 3;
  SECTION("a quiet second round is kept") {
    // warm-ups 1000, 1000; round 1 noisy; round 2 quiet.
    std::vector<double> script = {1000, 1000, 1, 10, 1, 10, 1, 5, 5, 5, 5, 5};
    size_t i = 0;
    std::vector<double> kept;
    auto s = measure([&]() -> Result<double> { return script.at(i++); }, d, &kept);
    REQUIRE(s);
    CHECK(s->rounds == 2);
    CHECK_FALSE(s->noisy);
    CHECK(s->p50 == 5);
    CHECK(kept == std::vector<double>{5, 5, 5, 5, 5});
  }
  SECTION("noise in every round is flagged") {
    int k = 0;
    auto s = measure([&]() -> Result<double> { return (k++ % 2) ? 1.0 : 3.0; }, d);
    REQUIRE(s);
    CHECK(s->rounds == 3);
    CHECK(s->noisy);
  }
  SECTION("an error stops the measurement") {
    auto s = measure([&]() -> Result<double> { return make_error(ErrorCode::kDevice, "launch failed"); }, d);
    REQUIRE_FALSE(s);
    CHECK(s.error().message == "launch failed");
  }
}

TEST_CASE("fit: recovers the efficiency factors and launch figures of a synthetic device", "[calibrate]") {
  const GpuProfile base = lavapipe();
  GpuProfile truth = base;
  truth.efficiency.dram_bandwidth = 0.12;
  truth.efficiency.vector_flops = 0.3;
  truth.efficiency.gemm_vector_flops = 0.02;
  truth.launch.block_us = 0.7;
  truth.launch.latency_floor_us = 40;
  truth.compute.barrier_ns = 50;
  truth.efficiency.l2_bandwidth = 0.5;
  const std::vector<Observation> o = synthetic(truth);
  // The fit starts where the microbenchmarks would put it: off by up to 2x.
  GpuProfile start_profile = base;
  start_profile.compute.barrier_ns = 50;
  std::vector<Param> start = fit_parameters(start_profile, o);
  for (Param& p : start) {
    if (p.key == "efficiency.dram_bandwidth") p.value = 0.2;
    if (p.key == "efficiency.vector_flops") p.value = 0.5;
    if (p.key == "efficiency.gemm_vector_flops") p.value = 0.04;
    if (p.key == "launch.block_us") p.value = 0.4;
    if (p.key == "launch.latency_floor_us") p.value = 25;
    if (p.key == "compute.barrier_ns") p.value = 80;
  }
  // The synthetic GEMMs are priced compute-bound, so their rate is one of the parameters.
  CHECK(std::any_of(start.begin(), start.end(), [](const Param& p) { return p.key == "efficiency.gemm_vector_flops"; }));
  const FitResult r = fit(base, o, start);
  INFO("cost " << r.cost_before << " -> " << r.cost_after << " in " << r.iterations << " iterations");
  // Every kernel not held out but the 64^3 GEMM: one block does not fill the two units (fills_device).
  CHECK(r.fitted == static_cast<int>(o.size()) / 2 - 1);
  for (const Param& p : r.after) {
    INFO(p.key << " = " << p.value);
    if (p.key == "efficiency.dram_bandwidth") CHECK(p.value == Approx(0.12).epsilon(0.02));
    if (p.key == "efficiency.vector_flops") CHECK(p.value == Approx(0.3).epsilon(0.02));
    if (p.key == "efficiency.gemm_vector_flops") CHECK(p.value == Approx(0.02).epsilon(0.05));
    if (p.key == "launch.latency_floor_us") CHECK(p.value == Approx(40).epsilon(0.02));
  }
  // Held-out kernels: priced within 2 % after the fit, far off before.
  for (const ClassError& e : r.errors_after) {
    INFO(e.cls << (e.held_out ? " held-out" : " fit"));
    CHECK(e.mean_abs_pct < 2.0);
  }
  double before = 0;
  for (const ClassError& e : r.errors_before) before = std::max(before, e.mean_abs_pct);
  CHECK(before > 50);
}

TEST_CASE("observations round-trip through JSON and bad raw data names the field", "[calibrate][errors]") {
  KernelWork w = gemm_work(DType::kFloat16, 2, 64, 32, 16);
  w.epilogue_flops.transcendental = 7;
  TileConfig t{64, 32, 16, 128, 2, 1, 1, 1};
  auto w2 = work_from_json(to_json(w));
  auto t2 = tile_from_json(to_json(t));
  REQUIRE(w2);
  REQUIRE(t2);
  CHECK(to_json(*w2) == to_json(w));
  CHECK(to_json(*t2) == to_json(t));
  nlohmann::json bad = to_json(w);
  bad["class"] = "blas";
  CHECK(work_from_json(bad).error().message ==
        "raw data: work.class: \"blas\" is not a kernel class (gemm, conv, elementwise, ...)");
  nlohmann::json bt = to_json(t);
  bt["threads"] = 0;
  CHECK(tile_from_json(bt).error().message == "raw data: tile.threads: 0 is not a thread count; expected >= 1");
}

TEST_CASE("write_profile: atomic, validated, and its errors name the file", "[calibrate][errors]") {
  Outcome o;
  o.base = lavapipe();
  o.calibrated = o.base;
  o.device.name = "llvmpipe (test)";
  o.device.driver = "none";
  o.date = "2026-11-21";
  o.fit.after = fit_parameters(o.base, {});
  Figure f{"dram.copy", "DRAM copy bandwidth", "GB/s", summarize({4.0, 4.1, 4.2}), 40, ""};
  o.figures.push_back(f);
  const std::string dir = tmp_dir("gpusim_calibrate_write");
  const auto dirs = default_profile_dirs();
  SECTION("a written profile loads, extends its base and carries the calibrated block") {
    const std::string path = dir + "/lavapipe-test.yaml";
    REQUIRE(write_profile(o, path, dirs));
    auto p = load_profile(path, dirs);
    REQUIRE(p);
    CHECK(p->extends_chain == std::vector<std::string>{"lavapipe"});
    REQUIRE(p->calibrated);
    CHECK(p->calibrated->device == "llvmpipe (test)");
    CHECK(p->calibrated->figures.at("efficiency.dram_bandwidth").p50 == Approx(4.1));
    // The profile names its measurements, which are its own (content-named).
    const std::string m = p->calibrated->measurements;
    CHECK_THAT(m, Catch::Matches(R"(lavapipe-test\.[0-9a-f]{12}\.measurements\.json)"));
    CHECK(test::file_bytes(dir + "/" + m).find("llvmpipe (test)") != std::string::npos);
    for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().filename().string().find(".gpusim-tmp-") == std::string::npos);
    // Written again with other measurements: the new pair replaces the old, nothing stale stays.
    Outcome again = o;
    again.device.name = "llvmpipe (again)";
    REQUIRE(write_profile(again, path, dirs));
    auto q = load_profile(path, dirs);
    REQUIRE(q);
    CHECK(q->calibrated->measurements != m);
    CHECK_FALSE(fs::exists(dir + "/" + m));
    CHECK(test::file_bytes(dir + "/" + q->calibrated->measurements).find("llvmpipe (again)") != std::string::npos);
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);
  }
  SECTION("a file name without .yaml is refused") {
    auto s = write_profile(o, dir + "/profile.txt", dirs);
    REQUIRE_FALSE(s);
    CHECK(s.error().message == "calibrate: `out " + dir +
                                   "/profile.txt`: a profile file must end in .yaml (its name is the profile's name)");
  }
  SECTION("a profile that does not load is not written, and nothing is left behind") {
    // The base cannot be found in these dirs, so the written profile's `extends:` does not resolve.
    const std::string path = dir + "/orphan.yaml";
    auto s = write_profile(o, path, {dir});
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains("orphan.yaml`: the written profile does not load"));
    CHECK_THAT(s.error().message, Catch::Contains("nothing was written"));
    CHECK_FALSE(fs::exists(path));
    CHECK(fs::is_empty(dir));
  }
  SECTION("a calibration killed (SIGKILL) while writing leaves the previous profile whole and nothing else") {
    const std::string path = dir + "/lavapipe-test.yaml";
    REQUIRE(write_profile(o, path, dirs));
    const std::string before = test::file_bytes(path);
    for (int round = 0; round < 20; ++round) {
      const pid_t child = fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        Outcome changed = o;
        changed.device.name = "llvmpipe (rewritten " + std::string(200000, 'x') + ")";
        for (;;) (void)write_profile(changed, path, dirs);
      }
      usleep(static_cast<useconds_t>(2000 + 1500 * round));
      kill(child, SIGKILL);
      int st = 0;
      waitpid(child, &st, 0);
      const std::string now = test::file_bytes(path);
      // The old profile, or a whole new one: it loads either way, and the measurements it names
      // are there and are its own (the same device), never the other run's.
      CHECK((now == before || now.find("rewritten") != std::string::npos));
      auto loaded = load_profile(path, dirs);
      REQUIRE(loaded);
      const std::string named = test::file_bytes(dir + "/" + loaded->calibrated->measurements);
      CHECK((named.find("rewritten") != std::string::npos) == (now.find("rewritten") != std::string::npos));
      sweep_stale_temporaries(dir);  // what the next write does first
      for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        // A killed run may leave whole measurements its profile never named (the next write removes them).
        CHECK_THAT(name, Catch::Matches(R"(lavapipe-test\.yaml|lavapipe-test\.[0-9a-f]{12}\.measurements\.json)"));
      }
    }
  }
}

TEST_CASE("gpusim calibrate: bad arguments get clear errors", "[calibrate][cli][errors]") {
  auto r = test::run_gpusim("calibrate --backend cpu");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("--backend \"cpu\" is not a device backend; choose vulkan, cuda or hip"));
  r = test::run_gpusim("calibrate");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("--backend is required"));
  // An --out in a directory that does not exist is refused before the device is even opened (it
  // measured for minutes, then failed on the path).
  r = test::run_gpusim("calibrate --backend vulkan --quick --out /nonexistent-gpusim-dir/x.yaml");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("--out /nonexistent-gpusim-dir/x.yaml: the directory /nonexistent-gpusim-dir does "
                                    "not exist; create it or pick another --out"));
  if (test::device("vulkan")) {
    r = test::run_gpusim("calibrate --backend vulkan --base no-such-gpu --quick");
    CHECK(r.rc == 1);
    CHECK_THAT(r.out, Catch::Contains("--base: ") && Catch::Contains("no-such-gpu"));
    r = test::run_gpusim("calibrate --backend vulkan --quick --out profile.txt");
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Catch::Contains("--out profile.txt: a profile file must end in .yaml"));
  }
}

// The CI tier: a quick calibration of lavapipe, then the held-out kernels priced before and after.
TEST_CASE("gpusim calibrate --quick on lavapipe: a valid profile that lowers held-out error", "[calibrate][vulkan][timing]") {
  backend::Backend* dev = test::device("vulkan");
  if (!dev) return;
  const GpuProfile base = lavapipe();
  Options opts;
  opts.quick = true;
  opts.command = "test";
  // Which held-out classes the fit did not improve (empty: all improved), and how many were compared.
  auto worse = [](const Outcome& o, int* compared) {
    std::string w;
    *compared = 0;
    for (const ClassError& a : o.fit.errors_after) {
      if (!a.held_out) continue;
      for (const ClassError& b : o.fit.errors_before) {
        if (b.cls != a.cls || !b.held_out) continue;
        ++*compared;
        if (!(a.mean_abs_pct < b.mean_abs_pct)) w += fmt::format(" {}: {:.1f} % -> {:.1f} %;", a.cls, b.mean_abs_pct, a.mean_abs_pct);
      }
    }
    return w;
  };
  // A calibration measures the machine: on a noisy one (a neighbour's load on a shared host) a
  // quick run can fit noise (CI once saw gemm's held-out error go 97.6 % -> 103.4 % with seven
  // figures flagged NOISY). As the report's notes advise, measure once more before judging; the
  // second run must pass on its own.
  int compared = 0;
  auto out = run(*dev, base, opts);
  REQUIRE(out);
  if (const std::string w = worse(*out, &compared); !w.empty()) {
    WARN("first calibration: held-out error did not drop for" << w << " measuring again");
    out = run(*dev, base, opts);
    REQUIRE(out);
  }
  const std::string rep = report(*out);
  std::printf("%s\n", rep.c_str());
  const std::string dir = tmp_dir("gpusim_calibrate_lavapipe");
  const std::string path = dir + "/lavapipe-ci.yaml";
  REQUIRE(write_profile(*out, path, default_profile_dirs()));
  auto p = load_profile(path, default_profile_dirs());
  REQUIRE(p);
  REQUIRE(p->calibrated);
  // Every figure the microbenchmarks promise was measured (matrix units: lavapipe has none).
  for (const char* key : {"dram.read", "dram.write", "dram.copy", "l2.bandwidth", "shared.bandwidth", "barrier",
                          "latency.l1", "latency.l2", "latency.dram", "fma.fp32", "fma.int32", "launch.overhead",
                          "launch.floor", "host.upload", "host.download"}) {
    bool found = false;
    for (const Figure& f : out->figures) found = found || (f.key == key && f.measured && f.stats.p50 > 0);
    INFO(key);
    CHECK(found);
  }
  // The held-out kernels of every codegen class are predicted better after calibration.
  CHECK(worse(*out, &compared).empty());
  CHECK(compared >= 4);
  CHECK(out->fit.cost_after < out->fit.cost_before / 4);
}

// Measurements committed with their profile (gpu_profiles/calibrated/<name>.measurements.json):
// the held-out kernels, predicted with today's cost model and the committed profile, must stay
// within the error recorded when they were measured. No device needed.
TEST_CASE("committed calibrations still predict their held-out kernels", "[calibrate][truth]") {
  const fs::path dir = fs::path(test::source_dir()) / "gpu_profiles" / "calibrated";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string fname = e.path().filename().string();
    if (fname.size() < 18 || fname.substr(fname.size() - 18) != ".measurements.json") continue;
    ++files;
    std::ifstream f(e.path());
    const nlohmann::json j = nlohmann::json::parse(f);
    const std::string name = j.at("profile");
    INFO(fname << " (profile " << name << ")");
    auto p = find_profile(name, default_profile_dirs());
    REQUIRE(p);
    const DeviceModel d = make_device(*p);
    std::map<std::string, std::pair<double, int>> err;  // class -> sum of |error| %, count
    for (const auto& o : j.at("observations")) {
      if (!o.at("held_out").get<bool>()) continue;
      auto w = work_from_json(o.at("work"));
      auto t = tile_from_json(o.at("tile"));
      REQUIRE(w);
      REQUIRE(t);
      const double meas = o.at("measured_us").at("p50").get<double>();
      const double pred = kernel_cost(*w, *t, d).total_us;
      auto& [sum, n] = err[o.at("class").get<std::string>()];
      sum += 100.0 * std::fabs(pred - meas) / meas;
      ++n;
    }
    REQUIRE(!err.empty());
    for (const auto& rec : j.at("fit").at("errors_after")) {
      if (!rec.at("held_out").get<bool>()) continue;
      const std::string cls = rec.at("class");
      const double recorded = rec.at("mean_abs_pct");
      const double now = err.at(cls).first / err.at(cls).second;
      INFO(cls << ": recorded " << recorded << " %, now " << now << " %");
      CHECK(now <= recorded * 1.02 + 0.5);
    }
  }
  CHECK(files >= 1);
}

// The matrix-unit microbenchmark on lavapipe: it has no matrix units, so the portable path (the
// matrix kernels' tiles and fragments on plain threads) stands in for the code path, with a
// datasheet matrix peak added to the base profile so there is a figure to measure.
TEST_CASE("the matrix microbenchmark times fp16 GEMMs on a matrix path and feeds the fit", "[calibrate][vulkan]") {
  backend::Backend* dev = test::device("vulkan");
  if (dev == nullptr) return;
  if (!dev->info().fp16) {
    WARN("no fp16 storage on " << dev->info().name << ": matrix microbenchmark not run");
    return;
  }
  GpuProfile base = lavapipe();
  base.compute.matrix_tflops.push_back({Precision::kFp16, Precision::kFp32, 0.5});
  base.compute.matrix_tflops.push_back({Precision::kFp16, Precision::kFp16, 1.0});  // codegen accumulates in fp32: skipped
  base.compute.matrix_tflops.push_back({Precision::kInt8, Precision::kInt32, 2.0});
  DeviceTimer timer(*dev, 8u << 20);
  Session s(timer, base);
  s.quick = true;
  s.matrix = codegen::MatrixPath::kPortable;
  s.matrix_sizes = {32, 64, 96};
  s.disc.warmup = 1;
  s.disc.repeats = 3;
  s.disc.max_rounds = 1;
  REQUIRE(bench_matrix(s));
  REQUIRE(s.figures.size() == 2);
  const Figure& f = s.figures[0];
  CHECK(f.key == "matrix.fp16");
  CHECK(f.measured);
  CHECK(f.stats.p50 > 0);
  CHECK_THAT(f.note, Catch::Contains("portable path"));
  CHECK_FALSE(s.figures[1].measured);
  CHECK_THAT(s.figures[1].note, Catch::StartsWith("not measured"));  // int8: lavapipe has no matrix units at all
  REQUIRE(s.observations.size() == 3);
  int held_out = 0;
  for (const Observation& o : s.observations) {
    CHECK(o.cls == "gemm fp16");
    CHECK(o.work.dtype == DType::kFloat16);
    CHECK(kernel_cost(o.work, o.tile, s.model).matrix_units);  // priced on the matrix units
    CHECK(o.stats.p50 > 0);
    held_out += o.held_out;
  }
  CHECK(held_out == 1);
  // The device's own path: lavapipe reports no matrix units, and the figure says so.
  Session own(timer, base);
  own.quick = true;
  REQUIRE(bench_matrix(own));
  REQUIRE_FALSE(own.figures.empty());
  CHECK_FALSE(own.figures[0].measured);
  CHECK_THAT(own.figures[0].note, Catch::Contains("no matrix units"));
  CHECK(own.observations.empty());
}

namespace {

// A device that only compiles: every kernel calibration builds goes through a real compiler
// (NVRTC or hiprtc) for a real target; buffers hold nothing, and each launch "takes" a time
// that grows with its groups, so a whole calibration runs without a GPU. It checks that the
// CUDA and HIP texts of every microbenchmark and held-out kernel compile — not what they
// measure (the figures it yields are meaningless and never kept).
class CompileOnlyDevice : public backend::Backend {
 public:
  using Compiler = std::function<Result<std::string>(const backend::KernelSource&)>;
  CompileOnlyDevice(backend::DeviceInfo info, Compiler compile) : info_(std::move(info)), compile_(std::move(compile)) {}
  const backend::DeviceInfo& info() const override { return info_; }
  Result<backend::Buffer> allocate(uint64_t bytes) override { return backend::Buffer{++next_, bytes}; }
  Status upload(const backend::Buffer&, const void*, uint64_t, uint64_t) override { return Ok{}; }
  Status download(const backend::Buffer&, void* dst, uint64_t bytes, uint64_t) override {
    std::memset(dst, 0, bytes);
    return Ok{};
  }
  void release(const backend::Buffer&) override {}
  Result<backend::KernelHandle> compile(const backend::KernelSource& src) override {
    if (auto it = handles_.find(backend::source_hash(src)); it != handles_.end()) return it->second;
    if (auto st = can_run(src); !st) return st.error();
    auto bin = compile_(src);
    if (!bin) {
      failures.push_back(src.name + ": " + bin.error().message);
      return bin.error();
    }
    ++compiled;
    const auto h = static_cast<backend::KernelHandle>(handles_.size());
    handles_.emplace(backend::source_hash(src), h);
    return h;
  }
  Result<int> launch(backend::KernelHandle, std::array<uint32_t, 3> groups, std::span<const backend::Buffer>,
                     bool timed) override {
    if (!timed) return -1;
    times_.push_back(2.0 + 1e-3 * static_cast<double>(groups[0]) * groups[1] * groups[2]);
    return static_cast<int>(times_.size() - 1);
  }
  Status synchronize() override { return Ok{}; }
  Result<std::vector<double>> read_timers() override { return std::exchange(times_, {}); }
  backend::CompileStats compile_stats() const override { return {compiled, 0, 0}; }

  int compiled = 0;
  std::vector<std::string> failures;

 private:
  backend::DeviceInfo info_;
  Compiler compile_;
  uint64_t next_ = 0;
  std::map<uint64_t, backend::KernelHandle> handles_;
  std::vector<double> times_;
};

void calibrate_compiling(backend::DeviceInfo info, const std::string& profile, CompileOnlyDevice::Compiler compiler) {
  CompileOnlyDevice dev(std::move(info), std::move(compiler));
  auto base = find_profile(profile, default_profile_dirs());
  REQUIRE(base);
  Options o;
  o.quick = true;
  auto out = calibrate::run(dev, *base, o);
  INFO((out ? std::string() : out.error().message));
  INFO((dev.failures.empty() ? std::string() : dev.failures.front()));
  CHECK(dev.failures.empty());
  REQUIRE(out);
  CHECK(dev.compiled >= 20);
  bool matrix = false;
  for (const Figure& f : out->figures) matrix = matrix || (f.key == "matrix.fp16" && f.measured);
  CHECK(matrix);  // the fp16 GEMMs on the device's matrix path were built and compiled
  WARN(dev.info().name << " (" << dev.info().arch << "): " << dev.compiled << " calibration kernels compiled");
}

}  // namespace

TEST_CASE("every calibration kernel compiles for CUDA and HIP targets", "[calibrate][compile]") {
#ifdef GPUSIM_HAVE_CUDA
  if (std::string why; backend::cuda::nvrtc_available(&why)) {
    backend::DeviceInfo d;
    d.backend = "cuda";
    d.name = "NVIDIA H200 (compile only)";
    d.vendor = "NVIDIA";
    d.arch = "sm_90";
    d.compute_units = 132;
    d.max_shared_bytes = 48 * 1024;
    d.fp16 = d.fp64 = d.int64 = d.matrix_units = true;
    calibrate_compiling(d, "nvidia-h200", [](const backend::KernelSource& s) { return backend::cuda::compile_cuda(s, "sm_90"); });
  } else {
    WARN("NVRTC unavailable, calibration kernels not compiled for CUDA: " << why);
  }
#else
  WARN("the CUDA backend is not built: calibration kernels not compiled for CUDA");
#endif
#ifdef GPUSIM_HAVE_HIP
  if (std::string why; backend::hip::hiprtc_available(&why)) {
    backend::DeviceInfo d;
    d.backend = "hip";
    d.name = "AMD Instinct MI250X (compile only)";
    d.vendor = "AMD";
    d.arch = "gfx90a";
    d.compute_units = 110;
    d.subgroup_size = 64;
    d.max_shared_bytes = 64 * 1024;
    d.fp16 = d.fp64 = d.int64 = d.matrix_units = true;
    calibrate_compiling(d, "amd-mi250x", [](const backend::KernelSource& s) { return backend::hip::compile_hip(s, "gfx90a"); });
  } else {
    WARN("hiprtc unavailable, calibration kernels not compiled for HIP: " << why);
  }
#else
  WARN("the HIP backend is not built: calibration kernels not compiled for HIP");
#endif
}

TEST_CASE("fit: GEMMs too small to fill the device are not fitted and fit no GEMM rate", "[calibrate]") {
  // The H200's calibration (gpu_profiles/calibrated): its SIMT MatMuls of 64-384 leave most of its
  // 132 SMs idle; its fp16 MatMul of 4096^3 fills them.
  auto cal = find_profile("nvidia-h200-calibrated", default_profile_dirs());
  REQUIRE(cal);
  REQUIRE(cal->calibrated);
  const fs::path raw = fs::path(test::source_dir()) / "gpu_profiles" / "calibrated" / cal->calibrated->measurements;
  auto measured = read_raw(raw.string());
  REQUIRE(measured);
  const std::vector<Observation>& v = measured->observations;
  auto h200 = find_profile("nvidia-h200", default_profile_dirs());
  REQUIRE(h200);
  const std::vector<Param> params = fit_parameters(*h200, v);
  auto has = [&](const char* key) {
    return std::any_of(params.begin(), params.end(), [&](const Param& p) { return p.key == key; });
  };
  CHECK_FALSE(has("efficiency.gemm_vector_flops"));
  CHECK(has("efficiency.matrix_flops"));
  CHECK(has("efficiency.vector_flops"));
  // Fitted, the small GEMMs are left out: 41 kernels not held out, 9 of them GEMMs or convolutions
  // too small for the H200.
  const FitResult r = fit(*h200, v, params);
  CHECK(r.fitted == 32);
  // The committed profile is this data fitted again (gpusim calibrate --refit): no SIMT GEMM rate
  // of its own (the vendor's default, not 4.1%), the matrix rate from the 4096^3 MatMul.
  CHECK(cal->efficiency.gemm_vector_flops > 0.5);
  CHECK(cal->efficiency.matrix_flops < 0.2);
}

TEST_CASE("gpusim calibrate --refit fits a calibration's raw data again without its device", "[calibrate][cli]") {
  auto cal = find_profile("nvidia-h200-calibrated", default_profile_dirs());
  REQUIRE(cal);
  REQUIRE(cal->calibrated);
  const fs::path raw = fs::path(test::source_dir()) / "gpu_profiles" / "calibrated" / cal->calibrated->measurements;
  const std::string dir = tmp_dir("refit");
  const std::string out = dir + "/h200-refit.yaml";
  auto r = test::run_gpusim("calibrate --refit " + raw.string() + " --out " + out);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("fitted again from"));
  auto p = load_profile(out, default_profile_dirs());
  REQUIRE(p);
  REQUIRE(p->calibrated);
  CHECK(p->calibrated->device == "NVIDIA H200");
  CHECK(p->calibrated->date == cal->calibrated->date);  // when it was measured
  // The same data and fit as the committed profile: the same figures.
  CHECK(p->efficiency.dram_bandwidth == Approx(cal->efficiency.dram_bandwidth));
  CHECK(p->efficiency.matrix_flops == Approx(cal->efficiency.matrix_flops));
  CHECK(p->launch.latency_floor_us == Approx(cal->launch.latency_floor_us));
  // The raw data went beside it, with the observations whole and a note of the refit.
  std::ifstream f(fs::path(dir) / p->calibrated->measurements);
  REQUIRE(f);
  const nlohmann::json j = nlohmann::json::parse(f);
  std::ifstream g(raw);
  const nlohmann::json orig = nlohmann::json::parse(g);
  CHECK(j.at("observations").size() == orig.at("observations").size());
  CHECK(j.at("figures").size() == orig.at("figures").size());
  CHECK_THAT(j.at("notes").back().get<std::string>(), Catch::Contains("gpusim calibrate --refit"));
}

TEST_CASE("gpusim calibrate --refit: bad raw data and arguments get clear errors", "[calibrate][cli][errors]") {
  const std::string dir = tmp_dir("refit-errors");
  auto r = test::run_gpusim("calibrate --refit " + dir + "/none.json --out " + dir + "/x.yaml");
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains(dir + "/none.json: cannot open the calibration's raw data"));
  {
    std::ofstream(dir + "/run.json") << R"({"schema": "gpusim.run/1"})";
  }
  r = test::run_gpusim("calibrate --refit " + dir + "/run.json --out " + dir + "/x.yaml");
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains("schema is \"gpusim.run/1\", not gpusim.calibration/1"));
  {
    std::ofstream(dir + "/broken.json") << R"({"schema": "gpusim.calibration/1", "device": {"name": "X"}, "date": "2026-11-27",
      "observations": [{"class": "gemm", "work": {}, "tile": {}}]})";
  }
  r = test::run_gpusim("calibrate --refit " + dir + "/broken.json --out " + dir + "/x.yaml");
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains(dir + "/broken.json: observations[0]"));
  {
    std::ofstream(dir + "/empty.json") << R"({"schema": "gpusim.calibration/1", "device": {"name": "X"}, "date": "2026-11-27",
      "observations": []})";
  }
  r = test::run_gpusim("calibrate --refit " + dir + "/empty.json --out " + dir + "/x.yaml");
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains("observations: none; there is nothing to fit"));
  r = test::run_gpusim("calibrate --refit " + dir + "/empty.json --backend vulkan");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("--refit fits measurements already taken"));
  r = test::run_gpusim("calibrate --refit " + dir + "/empty.json --device 1");
  CHECK(r.rc == 2);
  // Raw data that names no base profile, and no --base.
  {
    std::ofstream(dir + "/nobase.json") << R"({"schema": "gpusim.calibration/1", "device": {"name": "X"}, "date": "2026-11-27",
      "observations": [{"class": "dram", "work": {"class": "elementwise", "dtype": "fp32", "elements": 1024, "bytes_read": 4096},
                        "tile": {"threads": 256}, "measured_us": {"p50": 3.0}}]})";
  }
  r = test::run_gpusim("calibrate --refit " + dir + "/nobase.json --out " + dir + "/x.yaml");
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Catch::Contains("base: the raw data names no base profile; pass --base NAME"));
  CHECK(!fs::exists(dir + "/x.yaml"));  // nothing written
}
