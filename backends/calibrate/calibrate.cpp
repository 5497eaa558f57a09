#include "calibrate.h"

#include "hw/atomic_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "session.h"
#include "base/files.h"
#include "base/json_text.h"
#include "base/hash.h"

namespace gpusim::calibrate {

std::string today() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

namespace {

namespace fs = std::filesystem;

const Figure* find(const std::vector<Figure>& v, const std::string& key) {
  for (const Figure& f : v) {
    if (f.key == key && f.measured && f.stats.n > 0) return &f;
  }
  return nullptr;
}

// The figures the profile takes straight from the microbenchmarks (before the fit).
GpuProfile apply_direct(const GpuProfile& base, const std::vector<Figure>& figs) {
  GpuProfile p = base;
  if (auto* f = find(figs, "latency.dram")) p.memory.dram.latency_ns = f->stats.p50;
  if (auto* f = find(figs, "latency.l2")) p.memory.l2.latency_ns = f->stats.p50;
  if (auto* f = find(figs, "latency.l1")) p.memory.l1.latency_ns = f->stats.p50;
  if (auto* f = find(figs, "l2.size")) p.memory.l2.size_mb = f->stats.p50;
  if (auto* f = find(figs, "shared.bandwidth")) p.compute.shared_memory_bandwidth_gbps = f->stats.p50;
  if (auto* f = find(figs, "barrier")) p.compute.barrier_ns = f->stats.p50;
  if (auto* f = find(figs, "launch.overhead")) p.launch.overhead_us = std::clamp(f->stats.p50, 0.0, 1000.0);
  if (!p.host_link.unified) {
    const Figure* up = find(figs, "host.upload");
    const Figure* down = find(figs, "host.download");
    if (up && down && p.host_link.bandwidth_gbps > 0) {
      p.efficiency.host_link = std::clamp(std::min(up->stats.p50, down->stats.p50) / p.host_link.bandwidth_gbps, 1e-4, 1.0);
    }
  }
  return p;
}

// Where the fit starts: each factor as its microbenchmark measures it.
std::vector<Param> starting_point(const GpuProfile& p, const std::vector<Figure>& figs, const std::vector<Observation>& obs) {
  std::vector<Param> v = fit_parameters(p, obs);
  for (Param& x : v) {
    if (x.key == "efficiency.dram_bandwidth") {
      if (auto* f = find(figs, "dram.copy")) x.value = f->stats.p50 / p.memory.dram.bandwidth_gbps;
    } else if (x.key == "efficiency.vector_flops") {
      if (auto* f = find(figs, "fma.fp32")) x.value = f->stats.p50 / (p.vector_tflops(Precision::kFp32) * 1e3);
    } else if (x.key == "efficiency.l2_bandwidth") {
      const Figure* size = find(figs, "l2.size");
      if (auto* f = find(figs, "l2.bandwidth"); f && size) x.value = f->stats.p50 / p.memory.l2.bandwidth_gbps;
    } else if (x.key == "launch.block_us") {
      if (auto* f = find(figs, "launch.per_group")) x.value = f->stats.p50 * p.compute.units;
    } else if (x.key == "efficiency.gemm_vector_flops") {
      // The median rate the fitted GEMM-like kernels reached, as a fraction of the vector peak.
      std::vector<double> rates;
      for (const Observation& o : obs) {
        if (o.held_out || (o.cls != "gemm" && o.cls != "conv") || o.stats.p50 <= 0) continue;
        rates.push_back(2.0 * static_cast<double>(o.work.macs) / (o.stats.p50 * 1e-6) /
                        (p.vector_tflops(Precision::kFp32) * 1e12));
      }
      if (!rates.empty()) {
        std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2), rates.end());
        x.value = rates[rates.size() / 2];
      }
    } else if (x.key == "compute.barrier_ns") {
      if (auto* f = find(figs, "barrier")) x.value = f->stats.p50;
    } else if (x.key == "launch.latency_floor_us") {
      if (auto* f = find(figs, "launch.floor")) x.value = f->stats.p50;
    }
    x.value = std::clamp(x.value, x.lo, x.hi);
  }
  return v;
}

double param(const std::vector<Param>& v, const std::string& key, double fallback) {
  for (const Param& p : v) {
    if (p.key == key) return p.value;
  }
  return fallback;
}

nlohmann::json stats_json(const Stats& s) {
  return {{"p50", s.p50}, {"p95", s.p95}, {"mean", s.mean}, {"min", s.min}, {"max", s.max},
          {"cv", s.cv},   {"n", s.n},     {"rounds", s.rounds}, {"noisy", s.noisy}};
}

nlohmann::json errors_json(const std::vector<ClassError>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const ClassError& e : v) {
    a.push_back({{"class", e.cls}, {"held_out", e.held_out}, {"kernels", e.kernels},
                 {"mean_abs_pct", e.mean_abs_pct}, {"max_abs_pct", e.max_abs_pct}});
  }
  return a;
}

}  // namespace

Result<Outcome> run(backend::Backend& dev, const GpuProfile& base, const Options& opts) {
  const double cache = (base.memory.l2.size_mb + (base.memory.infinity_cache.present ? base.memory.infinity_cache.size_mb : 0)) * 1e6;
  DeviceTimer timer(dev, static_cast<uint64_t>(std::min(std::clamp(2 * cache, 8e6, 512e6),
                                                        static_cast<double>(dev.info().max_buffer_bytes))));
  Session s(timer, base);
  s.quick = opts.quick;
  if (opts.quick) {
    s.disc.warmup = 1;
    s.disc.repeats = 7;
    s.disc.max_rounds = 2;
  } else {
    s.disc.warmup = 2;
    s.disc.repeats = 15;
    s.disc.max_rounds = 3;
  }
  struct Phase {
    const char* what;
    Status (*fn)(Session&);
    double weight;
  };
  const Phase phases[] = {{"DRAM bandwidth", bench_dram, 12},      {"cache sweep", bench_cache_sweep, 12},
                          {"shared memory", bench_shared, 3},       {"barriers", bench_barrier, 2},       {"latency", bench_latency, 6},
                          {"FMA throughput", bench_fma, 5},         {"matrix units", bench_matrix, 4},
                          {"launch overhead", bench_launch, 10},    {"host link", bench_host_link, 8},
                          {"occupancy", bench_occupancy, 12},       {"codegen kernels", bench_codegen_kernels, 32}};
  double total = 0, done = 0;
  for (const Phase& p : phases) total += p.weight;
  for (const Phase& p : phases) {
    s.progress = [&](double, const std::string& what) {
      if (opts.progress) opts.progress(done / total, what);
    };
    if (opts.progress) opts.progress(done / total, p.what);
    if (auto st = p.fn(s); !st) {
      return make_error(st.error().code, fmt::format("calibrate: {} on {}: {}", p.what, dev.info().name, st.error().message));
    }
    done += p.weight;
  }
  if (opts.progress) opts.progress(1.0, "fitting");
  Outcome o;
  o.device = dev.info();
  o.base = base;
  o.quick = opts.quick;
  o.command = opts.command;
  o.date = opts.date.empty() ? today() : opts.date;
  for (const Figure& f : s.figures) {
    if (f.measured && f.stats.noisy) {
      s.notes.push_back(fmt::format("{} stayed noisy after {} rounds (CV {:.1f} %): flagged; re-run on a quieter machine",
                                    f.label, f.stats.rounds, 100 * f.stats.cv));
    }
  }
  o.figures = std::move(s.figures);
  o.observations = std::move(s.observations);
  o.curves = std::move(s.curves);
  o.notes = std::move(s.notes);
  o.elapsed_s = s.elapsed_s();
  fit_outcome(o);
  return o;
}

namespace {

Stats stats_from_json(const nlohmann::json& j) {
  Stats s;
  s.p50 = j.at("p50").get<double>();
  s.p95 = j.value("p95", s.p50);
  s.mean = j.value("mean", s.p50);
  s.min = j.value("min", s.p50);
  s.max = j.value("max", s.p50);
  s.cv = j.value("cv", 0.0);
  s.n = j.value("n", int64_t{1});
  s.rounds = j.value("rounds", 1);
  s.noisy = j.value("noisy", false);
  return s;
}

}  // namespace

Result<Outcome> read_raw(const std::string& path) {
  auto read = base::read_regular_file(path, int64_t{256} << 20, "the calibration's raw data");
  if (!read) {
    return make_error(read.error().code, fmt::format("{}; give the raw data a calibration wrote beside its profile "
                                                     "(<profile>.<id>.measurements.json)",
                                                     read.error().message));
  }
  Outcome o;
  std::string at = "(the file)";
  try {
    const nlohmann::json j = nlohmann::json::parse(*read);
    at = "schema";
    if (j.value("schema", "") != "gpusim.calibration/1") {
      return make_error(ErrorCode::kParse, fmt::format("{}: schema is \"{}\", not gpusim.calibration/1: not the raw data "
                                                       "`gpusim calibrate` writes beside a profile",
                                                       path, j.value("schema", "")));
    }
    o.base_name = j.value("base", "");
    at = "device";
    const auto& d = j.at("device");
    o.device.backend = d.value("backend", "");
    o.device.name = d.at("name").get<std::string>();
    o.device.vendor = d.value("vendor", "");
    o.device.driver = d.value("driver", "");
    o.device.arch = d.value("arch", "");
    o.device.is_cpu = d.value("is_cpu", false);
    o.device.memory_bytes = d.value("memory_bytes", uint64_t{0});
    o.device.subgroup_size = d.value("subgroup_size", 0u);
    at = "date";
    o.date = j.at("date").get<std::string>();
    o.command = j.value("command", "");
    o.quick = j.value("quick", false);
    o.elapsed_s = j.value("elapsed_s", 0.0);
    for (const auto& f : j.value("figures", nlohmann::json::array())) {
      at = fmt::format("figures[{}]", o.figures.size());
      Figure x;
      x.key = f.at("key").get<std::string>();
      x.label = f.value("label", x.key);
      x.unit = f.value("unit", "");
      x.measured = f.value("measured", true);
      x.peak = f.value("datasheet", 0.0);
      x.note = f.value("note", "");
      x.stats = stats_from_json(f.at("stats"));
      o.figures.push_back(std::move(x));
    }
    for (const auto& c : j.value("curves", nlohmann::json::array())) {
      at = fmt::format("curves[{}]", o.curves.size());
      Curve x;
      x.key = c.at("key").get<std::string>();
      x.x_unit = c.value("x_unit", "");
      x.y_unit = c.value("y_unit", "");
      x.x = c.at("x").get<std::vector<double>>();
      x.y = c.at("y").get<std::vector<double>>();
      o.curves.push_back(std::move(x));
    }
    at = "observations";
    for (const auto& ob : j.at("observations")) {
      at = fmt::format("observations[{}]", o.observations.size());
      Observation x;
      x.cls = ob.at("class").get<std::string>();
      x.name = ob.value("name", x.cls);
      x.held_out = ob.value("held_out", false);
      auto w = work_from_json(ob.at("work"));
      if (!w) return make_error(ErrorCode::kParse, fmt::format("{}: {}: {}", path, at, w.error().message));
      auto t = tile_from_json(ob.at("tile"));
      if (!t) return make_error(ErrorCode::kParse, fmt::format("{}: {}: {}", path, at, t.error().message));
      x.work = *w;
      x.tile = *t;
      x.stats = stats_from_json(ob.at("measured_us"));
      o.observations.push_back(std::move(x));
    }
    for (const auto& n : j.value("notes", nlohmann::json::array())) o.notes.push_back(n.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}: {}: {}; raw data of `gpusim calibrate` (schema "
                                                     "gpusim.calibration/1) has it",
                                                     path, at, e.what()));
  }
  if (o.observations.empty()) {
    return make_error(ErrorCode::kParse, fmt::format("{}: observations: none; there is nothing to fit", path));
  }
  return o;
}

void fit_outcome(Outcome& o) {
  const GpuProfile direct = apply_direct(o.base, o.figures);
  o.fit = fit(direct, o.observations, starting_point(direct, o.figures, o.observations));
  o.fit.before = fit_parameters(o.base, o.observations);
  o.fit.errors_before = class_errors(o.base, o.observations);
  o.fit.cost_before = fit_cost(o.base, o.observations);
  o.calibrated = with_parameters(direct, o.fit.after);
}

std::string profile_yaml(const Outcome& o, const std::string& name, const std::string& measurements_file) {
  // The calibrated profile extends the datasheet one; the format's writer (gpu_profile.h) puts
  // what was measured in the calibrated block and nothing else it sets above it.
  GpuProfile c = o.calibrated;
  c.name = name;
  c.display_name = o.base.display_name;
  c.vendor = o.base.vendor;
  c.architecture = o.base.architecture;
  c.sources = o.base.sources;
  Calibration cal;
  cal.device = o.device.name;
  cal.driver = o.device.driver;
  cal.date = o.date;
  cal.command = o.command;
  cal.measurements = measurements_file;
  auto entry = [&](const std::string& key, double value, const Figure* f, const std::string& unit) {
    CalibratedFigure fig;
    fig.value = value;
    fig.unit = unit;
    if (f) {
      fig.p50 = f->stats.p50;
      fig.p95 = f->stats.p95;
      fig.repeats = std::max<int64_t>(1, f->stats.n);
    }
    cal.figures[key] = fig;
  };
  const auto& figs = o.figures;
  const auto& after = o.fit.after;
  const GpuProfile& k = o.calibrated;
  entry("efficiency.dram_bandwidth", param(after, "efficiency.dram_bandwidth", k.efficiency.dram_bandwidth), find(figs, "dram.copy"), "GB/s");
  entry("efficiency.l2_bandwidth", param(after, "efficiency.l2_bandwidth", k.efficiency.l2_bandwidth), find(figs, "l2.bandwidth"), "GB/s");
  entry("efficiency.vector_flops", param(after, "efficiency.vector_flops", k.efficiency.vector_flops), find(figs, "fma.fp32"), "GFLOP/s");
  for (const Param& p : after) {
    if (p.key == "efficiency.matrix_flops") entry("efficiency.matrix_flops", p.value, nullptr, "fraction");
    if (p.key == "efficiency.gemm_vector_flops") entry("efficiency.gemm_vector_flops", p.value, nullptr, "fraction");
  }
  if (!k.host_link.unified && find(figs, "host.upload")) {
    entry("efficiency.host_link", k.efficiency.host_link, find(figs, "host.upload"), "GB/s");
  }
  if (const Figure* f = find(figs, "launch.overhead")) entry("launch.overhead_us", k.launch.overhead_us, f, "us");
  entry("launch.block_us", param(after, "launch.block_us", k.launch.block_us), nullptr, "us");
  entry("launch.latency_floor_us", param(after, "launch.latency_floor_us", k.launch.latency_floor_us), find(figs, "launch.floor"), "us");
  if (const Figure* f = find(figs, "latency.dram")) entry("memory.dram.latency_ns", f->stats.p50, f, "ns");
  if (const Figure* f = find(figs, "latency.l2")) entry("memory.l2.latency_ns", f->stats.p50, f, "ns");
  if (const Figure* f = find(figs, "latency.l1")) entry("memory.l1.latency_ns", f->stats.p50, f, "ns");
  if (const Figure* f = find(figs, "l2.size")) entry("memory.l2.size_mb", f->stats.p50, f, "MB");
  if (const Figure* f = find(figs, "shared.bandwidth")) entry("compute.shared_memory_bandwidth_gbps", f->stats.p50, f, "GB/s");
  entry("compute.barrier_ns", param(after, "compute.barrier_ns", k.compute.barrier_ns), find(figs, "barrier"), "ns");
  c.calibrated = std::move(cal);
  return profile_to_yaml(c, &o.base,
                         fmt::format("Written by gpusim calibrate on {} ({} s{}). Raw measurements: {}", o.date,
                                     static_cast<int>(std::lround(o.elapsed_s)), o.quick ? ", quick" : "",
                                     measurements_file.empty() ? name + ".measurements.json" : measurements_file));
}

nlohmann::json raw_json(const Outcome& o, const std::string& profile_name) {
  nlohmann::json j;
  j["schema"] = "gpusim.calibration/1";
  j["profile"] = profile_name;
  j["base"] = o.base.name;
  j["device"] = {{"backend", o.device.backend}, {"name", o.device.name}, {"vendor", o.device.vendor},
                 {"driver", o.device.driver}, {"arch", o.device.arch}, {"is_cpu", o.device.is_cpu},
                 {"memory_bytes", o.device.memory_bytes}, {"subgroup_size", o.device.subgroup_size},
                 {"clocks", "not exposed by the backend interface"}};
  j["date"] = o.date;
  j["command"] = o.command;
  j["quick"] = o.quick;
  j["elapsed_s"] = o.elapsed_s;
  for (const Figure& f : o.figures) {
    j["figures"].push_back({{"key", f.key}, {"label", f.label}, {"unit", f.unit}, {"measured", f.measured},
                            {"datasheet", f.peak}, {"stats", stats_json(f.stats)}, {"note", f.note}});
  }
  for (const Curve& c : o.curves) {
    j["curves"].push_back({{"key", c.key}, {"x_unit", c.x_unit}, {"y_unit", c.y_unit}, {"x", c.x}, {"y", c.y}});
  }
  const DeviceModel before = make_device(o.base), after = make_device(o.calibrated);
  for (const Observation& ob : o.observations) {
    j["observations"].push_back({{"class", ob.cls}, {"name", ob.name}, {"held_out", ob.held_out},
                                 {"work", to_json(ob.work)}, {"tile", to_json(ob.tile)},
                                 {"measured_us", stats_json(ob.stats)},
                                 {"predicted_before_us", predict_us(ob, before)},
                                 {"predicted_after_us", predict_us(ob, after)}});
  }
  nlohmann::json params = nlohmann::json::array();
  for (size_t i = 0; i < o.fit.after.size(); ++i) {
    const Param& a = o.fit.after[i];
    params.push_back({{"key", a.key}, {"before", param(o.fit.before, a.key, 0)}, {"after", a.value}, {"lo", a.lo}, {"hi", a.hi}});
  }
  j["fit"] = {{"parameters", params}, {"iterations", o.fit.iterations}, {"fitted_kernels", o.fit.fitted},
              {"cost_before", o.fit.cost_before}, {"cost_after", o.fit.cost_after},
              {"errors_before", errors_json(o.fit.errors_before)}, {"errors_after", errors_json(o.fit.errors_after)}};
  j["notes"] = o.notes;
  return j;
}

std::string report(const Outcome& o) {
  std::string r;
  r += fmt::format("Calibration of {} ({} backend, {}) against profile {}: {:.1f} s{}\n\n", o.device.name, o.device.backend,
                   o.device.driver, o.base.name, o.elapsed_s, o.quick ? " (`quick`)" : "");
  r += "Measured                           p50          datasheet     share   p95          CV     runs\n";
  for (const Figure& f : o.figures) {
    if (!f.measured) {
      r += fmt::format("  {:<32} not measured: {}\n", f.label, f.note);
      continue;
    }
    const std::string share = f.peak > 0 ? fmt::format("{:.0f} %", 100 * f.stats.p50 / f.peak) : "";
    const std::string peak = f.peak > 0 ? fmt::format("{:.4g} {}", f.peak, f.unit) : "";
    r += fmt::format("  {:<32} {:<12} {:<13} {:<7} {:<12} {:<6} {}{}\n", f.label, fmt::format("{:.4g} {}", f.stats.p50, f.unit),
                     peak, share, fmt::format("{:.4g}", f.stats.p95), fmt::format("{:.1f}%", 100 * f.stats.cv), f.stats.n,
                     f.stats.noisy ? "  NOISY" : "");
  }
  r += fmt::format("\nFit: least squares over {} kernels ({} iterations), weighted mean squared log error {:.4g} -> {:.4g}\n",
                   o.fit.fitted, o.fit.iterations, o.fit.cost_before, o.fit.cost_after);
  for (const Param& p : o.fit.after) {
    r += fmt::format("  {:<28} {:>10.4g} -> {:.4g}\n", p.key, param(o.fit.before, p.key, 0), p.value);
  }
  r += "\nPrediction error per class, mean |predicted - measured| / measured (max):\n";
  r += "  class          set        kernels   before                 after\n";
  for (const ClassError& a : o.fit.errors_after) {
    const ClassError* b = nullptr;
    for (const ClassError& e : o.fit.errors_before) {
      if (e.cls == a.cls && e.held_out == a.held_out) b = &e;
    }
    r += fmt::format("  {:<14} {:<10} {:>7}   {:<22} {}\n", a.cls, a.held_out ? "held-out" : "fit", a.kernels,
                     b ? fmt::format("{:.1f} % ({:.0f} %)", b->mean_abs_pct, b->max_abs_pct) : "",
                     fmt::format("{:.1f} % ({:.0f} %)", a.mean_abs_pct, a.max_abs_pct));
  }
  if (!o.notes.empty()) {
    r += "\nNotes:\n";
    for (const auto& n : o.notes) r += "  - " + n + "\n";
  }
  return r;
}

namespace {

// Removes <name>.measurements.json (the name before content-named files) and every
// <name>.<12 hex>.measurements.json but `keep`: measurements of profiles since replaced, or of
// a calibration killed before its profile was written.
void remove_unnamed_measurements(const fs::path& dir, const std::string& name, const std::string& keep) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f == keep) continue;
    bool ours = f == name + ".measurements.json";
    const std::string tail = ".measurements.json";
    if (!ours && f.size() == name.size() + 1 + 12 + tail.size() && f.compare(0, name.size() + 1, name + ".") == 0 &&
        f.compare(f.size() - tail.size(), tail.size(), tail) == 0) {
      ours = std::all_of(f.begin() + static_cast<std::ptrdiff_t>(name.size() + 1),
                         f.begin() + static_cast<std::ptrdiff_t>(name.size() + 13),
                         [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
    }
    std::error_code rec;
    if (ours) fs::remove(it->path(), rec);
  }
}

}  // namespace

Status write_profile(const Outcome& o, const std::string& path, const std::vector<std::string>& dirs) {
  const fs::path target(path);
  if (target.extension() != ".yaml") {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("calibrate: `out {}`: a profile file must end in .yaml (its name is the profile's name)", path));
  }
  const std::string name = target.stem().string();
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) {
    return make_error(ErrorCode::kIo, fmt::format("calibrate: `out {}`: cannot create directory {}: {}", path,
                                                  parent.string(), ec.message()));
  }
  // The pair is committed in one step: the measurements go to a new file named for their content
  // (<name>.<id>.measurements.json, never replacing a file the current profile names), then the
  // profile that names them replaces the old one in one rename. A kill before that rename leaves
  // the old profile with its old measurements; after it, the new pair. Measurements no profile
  // names any more are removed last.
  const std::string json = raw_json(o, name).dump(1, ' ', false, kInvalidUtf8) + "\n";
  const uint64_t h = base::fnv1a(json);
  const std::string measurements = fmt::format("{}.{:012x}.measurements.json", name, h & 0xffffffffffffull);
  // Checked before anything is written: the profile must load as it will be read back.
  const std::string yaml = profile_yaml(o, name, measurements);
  std::vector<std::string> search = dirs;
  auto loaded = load_profile_yaml(yaml, target.string(), search);
  if (!loaded) {
    return make_error(ErrorCode::kIo, fmt::format("calibrate: `out {}`: the written profile does not load: {}; "
                                                  "nothing was written",
                                                  path, loaded.error().message));
  }
  if (auto s = write_file_atomic((parent / measurements).string(), json); !s) {
    return make_error(ErrorCode::kIo, fmt::format("calibrate: `out {}`: {}; nothing was replaced", path, s.error().message));
  }
  if (auto s = write_file_atomic(target.string(), yaml); !s) {
    fs::remove(parent / measurements, ec);
    return make_error(ErrorCode::kIo, fmt::format("calibrate: `out {}`: {}; nothing was replaced", path, s.error().message));
  }
  remove_unnamed_measurements(parent, name, measurements);
  return Ok{};
}

}  // namespace gpusim::calibrate
