// The microbenchmarks, written once in the kernel dialect (backends/codegen/dialect.h), so the
// same text runs on Vulkan (GLSL), CUDA and HIP. Each times its kernel with the device's timers
// under the session's discipline and adds figures (with the datasheet figure they compare to),
// observations the fit prices with the simulator, and curves for the raw data.
#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "executor.h"
#include "graphs.h"
#include "session.h"

namespace gpusim::calibrate {
namespace {

constexpr int kThreads = 256;

using codegen::Storage;

codegen::Kernel kernel(const std::string& name, std::vector<codegen::Arg> args, std::string body,
                       uint32_t threads = kThreads, std::string decls = {}) {
  codegen::Kernel k;
  k.name = name;
  k.cls = "calibrate";
  k.args = std::move(args);
  k.block = {threads, 1, 1};
  k.body = std::move(body);
  k.decls = std::move(decls);
  return k;
}

codegen::Arg in(int64_t n, Storage s = Storage::kF32) { return {-1, s, n, false}; }
codegen::Arg out(int64_t n, Storage s = Storage::kF32) { return {-1, s, n, true}; }
// The fp32 streams' step: 4 floats, one 16-byte access (LDVk/STVk), as generated elementwise
// kernels take them at the cost model's vector width.
constexpr int kVec = 4;
codegen::Arg vin(int64_t n) { return {-1, Storage::kF32, n, false, kVec}; }
codegen::Arg vout(int64_t n) { return {-1, Storage::kF32, n, true, kVec}; }
// The head of a stream loop: `steps` steps of kVec floats per thread into float v[kVec], `threads`
// steps apart (coalesced), element index `i`; with `n` > 0 a thread stops at element n. The
// caller writes the step's statements and closes the loop.
std::string stream_steps(int64_t steps, int64_t threads, int64_t n = 0) {
  return fmt::format("  const int tid = GRP_X * BLOCK_X + LID_X;\n  float v[{}];\n"
                     "  for (int j = 0; j < {}; ++j) {{\n    const int i = (tid + j * {}) * {};\n{}",
                     kVec, steps, threads, kVec, n > 0 ? fmt::format("    if (i >= {}) return;\n", n) : "");
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Times `k` under the session's discipline. Returns the time statistics (us); `figure` (optional)
// receives the statistics of scale / us, the figure each sample gives.
Result<Stats> timed(Session& s, backend::KernelHandle k, std::array<uint32_t, 3> groups,
                    const std::vector<backend::Buffer>& args, bool cold, double scale = 0, Stats* figure = nullptr,
                    const Discipline* disc = nullptr) {
  std::vector<double> samples;
  auto st = measure([&]() { return s.timer.time(k, groups, args, cold); }, disc ? *disc : s.disc, &samples);
  if (!st) return st.error();
  if (figure) {
    std::vector<double> f;
    for (double us : samples) f.push_back(scale / std::max(us, 1e-3));
    *figure = summarize(f);
    figure->rounds = st->rounds;
    figure->noisy = st->noisy;
  }
  return st;
}

// A streaming kernel as the simulator sees it: `elements` items over `groups` groups of `threads`.
Observation streaming(const std::string& cls, const std::string& name, double read, double written, double fma,
                      int64_t elements, uint32_t groups, int threads, const Stats& st) {
  Observation o;
  o.cls = cls;
  o.name = name;
  o.work.cls = OpClass::kElementwise;
  o.work.dtype = DType::kFloat32;
  o.work.bytes_read = static_cast<int64_t>(read);
  o.work.bytes_written = static_cast<int64_t>(written);
  o.work.flops.fma = static_cast<int64_t>(fma);
  o.work.elements = elements;
  o.tile.threads = threads;
  o.tile.vector_width = 1;
  o.tile.items_per_thread = static_cast<int>(std::max<int64_t>(1, ceil_div(elements, int64_t{groups} * threads)));
  o.stats = st;
  return o;
}

// Elements of the DRAM test buffers: far larger than the last-level cache, within device memory.
int64_t dram_elements(Session& s) {
  const double cache = std::max(s.cache_bytes(), 4e6);
  double bytes = std::max((s.quick ? 4.0 : 8.0) * cache, s.quick ? 32e6 : 64e6);
  const double mem = static_cast<double>(s.dev().info().memory_bytes);
  if (mem > 0) bytes = std::min(bytes, mem / 8);
  bytes = std::min({bytes, 1.0e9, static_cast<double>(s.dev().info().max_buffer_bytes)});
  return static_cast<int64_t>(bytes / 4) / 1024 * 1024;
}

std::string mib(double bytes) { return bytes >= 1 << 20 ? fmt::format("{:.0f} MiB", bytes / (1 << 20)) : fmt::format("{:.0f} KiB", bytes / 1024); }


}  // namespace

uint32_t Session::full_groups() const {
  const int per_unit = std::max(1, base.compute.max_threads_per_unit / kThreads);
  return static_cast<uint32_t>(std::max(1, base.compute.units * std::min(per_unit, base.compute.max_blocks_per_unit) * 2));
}

// DRAM streams shaped like generated elementwise kernels: steps of kVec consecutive floats (one
// 16-byte access, as codegen's elementwise kernels take them at the cost model's vector width),
// `ipt` steps per thread strided by the thread count so each warp's accesses coalesce, as many
// groups as that takes.
Status bench_dram(Session& s) {
  int ipt = 4;
  int64_t n = dram_elements(s);
  const uint64_t max_groups = s.dev().info().max_groups[0];
  while (static_cast<uint64_t>(n / (int64_t{ipt} * kVec * kThreads)) > max_groups) ipt *= 2;
  n = n / (int64_t{ipt} * kVec * kThreads) * ipt * kVec * kThreads;
  const int64_t threads = n / (ipt * kVec);
  const uint32_t g = static_cast<uint32_t>(threads / kThreads);
  const double peak = s.base.memory.dram.bandwidth_gbps;
  auto a = s.timer.floats(static_cast<uint64_t>(n), 11);
  auto b = s.timer.scratch(static_cast<uint64_t>(n) * 4);
  if (!a) return a.error();
  if (!b) return b.error();
  const std::string loop = stream_steps(ipt, threads);
  struct Case {
    const char* key;
    const char* label;
    codegen::Kernel k;
    std::vector<backend::Buffer> args;
    double read, written;
  };
  std::vector<Case> cases;
  // Inputs are in [0.5, 1.5): the sum is never negative, so the read kernel stores nothing.
  cases.push_back({"dram.read", "DRAM read",
                   kernel("gpusim_dram_read", {vin(n), out(1)},
                          "  float acc = 0.0;\n" + loop + "    LDV0(i, v, 0);\n    acc += (v[0] + v[1]) + (v[2] + v[3]);\n  }\n"
                          "  if (acc < 0.0) ST1(0, acc);\n"),
                   {*a, *b}, n * 4.0, 0});
  cases.push_back({"dram.write", "DRAM write",
                   kernel("gpusim_dram_write", {vout(n)},
                          loop + fmt::format("    for (int c = 0; c < {}; ++c) v[c] = float((i + c) & 1023) + 0.5;\n", kVec) +
                              "    STV0(i, v, 0);\n  }\n"),
                   {*b}, 0, n * 4.0});
  cases.push_back({"dram.copy", "DRAM copy",
                   kernel("gpusim_dram_copy", {vin(n), vout(n)}, loop + "    LDV0(i, v, 0);\n    STV1(i, v, 0);\n  }\n"),
                   {*a, *b}, n * 4.0, n * 4.0});
  for (Case& c : cases) {
    if (s.progress) s.progress(-1, fmt::format("{} bandwidth, {}", c.label, mib(n * 4.0)));
    auto h = s.timer.compile(c.k);
    if (!h) return h.error();
    Stats fig;
    auto st = timed(s, *h, {g, 1, 1}, c.args, true, (c.read + c.written) / 1e3, &fig);
    if (!st) return st.error();
    s.add_figure({c.key, std::string(c.label) + " bandwidth", "GB/s", fig, peak,
                  fmt::format("{} buffer, {} groups of {} threads, {} steps of {} floats (16-byte accesses) each, "
                              "caches flushed before each run",
                              mib(n * 4.0), g, kThreads, ipt, kVec)});
    Observation o = streaming("dram", fmt::format("{} {}", c.label, mib(n * 4.0)), c.read, c.written,
                              std::string(c.key) == "dram.read" ? static_cast<double>(n) : 0.0, n, g, kThreads, *st);
    o.tile.vector_width = kVec;
    o.tile.items_per_thread = ipt;
    s.observations.push_back(o);
  }
  return Ok{};
}

// Group barriers: one group per unit, two barriers per iteration around a shared-memory exchange.
Status bench_barrier(Session& s) {
  const uint32_t g = static_cast<uint32_t>(std::max(1, s.base.compute.units));
  const int iters = s.quick ? 256 : 1024;
  auto a = s.timer.floats(kThreads, 17);
  auto o = s.timer.scratch(int64_t{g} * kThreads * 4);
  if (!a) return a.error();
  if (!o) return o.error();
  if (s.progress) s.progress(-1, "group barriers");
  const std::string body = fmt::format(
      "  tile[LID_X] = LD0(LID_X);\n  BARRIER();\n"
      "  for (int j = 0; j < {0}; ++j) {{\n    const float v = tile[(LID_X + 1) & {1}];\n    BARRIER();\n"
      "    tile[LID_X] += v;\n    BARRIER();\n  }}\n  ST1(GRP_X * BLOCK_X + LID_X, tile[LID_X]);\n",
      iters, kThreads - 1);
  auto k = kernel("gpusim_barrier", {in(kThreads), out(int64_t{g} * kThreads)}, body, kThreads,
                  fmt::format("SHARED float tile[{}];\n", kThreads));
  k.shared_bytes = kThreads * 4;
  auto h = s.timer.compile(k);
  if (!h) return h.error();
  const int warps = (kThreads + s.base.compute.warp_size - 1) / s.base.compute.warp_size;
  auto st = timed(s, *h, {g, 1, 1}, {*a, *o}, false);
  if (!st) return st.error();
  // ns per barrier per warp, as the cost model charges it (each unit runs its group's barriers).
  Stats fig = *st;
  const double per = 1000.0 / (2.0 * iters * warps);
  for (double* v : {&fig.p50, &fig.p95, &fig.mean, &fig.min, &fig.max}) *v *= per;
  s.add_figure({"barrier", "Group barrier (per warp)", "ns", fig, 0,
                fmt::format("one group of {} threads per unit, {} iterations of two barriers around a shared-memory "
                            "exchange; the whole time is charged to the barriers", kThreads, iters)});
  return Ok{};
}

Status bench_cache_sweep(Session& s) {
  const uint32_t g = s.full_groups();
  const int64_t threads = int64_t{g} * kThreads;
  const double cache = std::max(s.cache_bytes(), 1e6);
  std::vector<double> footprints;
  const std::vector<double> fractions = s.quick ? std::vector<double>{1.0 / 16, 1.0 / 4, 1.0, 4.0}
                                                : std::vector<double>{1.0 / 32, 1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2,
                                                                      3.0 / 4, 1.0, 1.5, 2.0, 4.0};
  for (double f : fractions) footprints.push_back(std::min(f * cache, static_cast<double>(s.dev().info().max_buffer_bytes)));
  const int64_t max_n = static_cast<int64_t>(footprints.back() / 4);
  auto a = s.timer.floats(static_cast<uint64_t>(max_n), 12);
  auto o = s.timer.scratch(static_cast<uint64_t>(threads) * 4);
  if (!a) return a.error();
  if (!o) return o.error();
  // Each run reads about as much as the DRAM test's buffer, in passes over the footprint.
  const double target = static_cast<double>(dram_elements(s)) * 4;
  Curve curve{"cache.sweep", "footprint bytes", "GB/s", {}, {}};
  std::vector<Stats> figs;
  Discipline d = s.disc;
  d.repeats = std::max(3, d.repeats / 2);
  for (double fp : footprints) {
    const int64_t n = std::max<int64_t>(1024, static_cast<int64_t>(fp / 4) / 256 * 256);
    const int passes = static_cast<int>(std::clamp(target / (n * 4.0), 1.0, 4096.0));
    if (s.progress) s.progress(-1, fmt::format("cache sweep, {} footprint", mib(n * 4.0)));
    auto k = kernel(fmt::format("gpusim_sweep_{}", n), {in(max_n), out(threads)},
                    fmt::format("  const int tid = GRP_X * BLOCK_X + LID_X;\n  float acc = 0.0;\n"
                                "  for (int p = 0; p < {}; ++p) {{\n"
                                "    for (int i = tid; i < {}; i += NGRP_X * BLOCK_X) acc += LD0(i);\n  }}\n"
                                "  ST1(tid, acc);\n",
                                passes, n));
    auto h = s.timer.compile(k);
    if (!h) return h.error();
    // Warm: the first (discarded) runs bring a resident footprint into the cache.
    Stats fig;
    auto st = timed(s, *h, {g, 1, 1}, {*a, *o}, false, passes * n * 4.0 / 1e3, &fig, &d);
    if (!st) return st.error();
    curve.x.push_back(n * 4.0);
    curve.y.push_back(fig.p50);
    figs.push_back(fig);
  }
  s.curves.push_back(curve);
  // Resident bandwidth: the footprints up to a quarter of the cache; beyond-cache: the largest.
  double resident = 0;
  Stats resident_stats;
  for (size_t i = 0; i < footprints.size(); ++i) {
    if (footprints[i] <= cache / 4 && curve.y[i] > resident) {
      resident = curve.y[i];
      resident_stats = figs[i];
    }
  }
  const double beyond = curve.y.back();
  Figure bw{"l2.bandwidth", "L2 (resident) read bandwidth", "GB/s", resident_stats, s.base.memory.l2.bandwidth_gbps,
            fmt::format("best read bandwidth with a footprint of at most a quarter of the {} cache", mib(cache))};
  Figure size{"l2.size", "L2 size", "MB", {}, cache / 1e6, ""};
  if (resident < 1.25 * beyond) {
    size.measured = false;
    size.note = fmt::format("no knee in the sweep: resident reads ({:.1f} GB/s) are not faster than reads beyond the "
                            "cache ({:.1f} GB/s) on this device, so the datasheet size is kept",
                            resident, beyond);
    bw.note += "; not faster than DRAM reads on this device";
  } else {
    // The knee: the largest footprint whose bandwidth is above the geometric mid-point,
    // interpolated in log space to the next footprint.
    const double mid = std::sqrt(resident * beyond);
    double knee = curve.x.front();
    for (size_t i = 0; i + 1 < curve.x.size(); ++i) {
      if (curve.y[i] >= mid && curve.y[i + 1] < mid) {
        const double t = std::log(curve.y[i] / mid) / std::log(curve.y[i] / curve.y[i + 1]);
        knee = std::exp(std::log(curve.x[i]) + t * (std::log(curve.x[i + 1]) - std::log(curve.x[i])));
      }
    }
    size.stats = summarize({knee / 1e6});
    size.stats.n = static_cast<int64_t>(curve.x.size());
    size.note = fmt::format("knee of the read-bandwidth sweep ({} footprints, {:.1f} -> {:.1f} GB/s)", curve.x.size(),
                            resident, beyond);
  }
  s.add_figure(bw);
  s.add_figure(size);
  return Ok{};
}

Status bench_shared(Session& s) {
  const uint32_t g = s.full_groups();
  const int64_t threads = int64_t{g} * kThreads;
  const int iters = s.quick ? 256 : 1024;
  auto a = s.timer.floats(kThreads, 13);
  auto o = s.timer.scratch(static_cast<uint64_t>(threads) * 4);
  if (!a) return a.error();
  if (!o) return o.error();
  if (s.progress) s.progress(-1, "shared-memory bandwidth");
  // Four independent loads per iteration, conflict-free (consecutive threads, consecutive words).
  const std::string body = fmt::format(
      "  tile[LID_X] = LD0(LID_X);\n  BARRIER();\n"
      "  float a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;\n"
      "  for (int j = 0; j < {0}; j += 4) {{\n"
      "    a0 += tile[(LID_X + j) & {1}];\n    a1 += tile[(LID_X + j + 1) & {1}];\n"
      "    a2 += tile[(LID_X + j + 2) & {1}];\n    a3 += tile[(LID_X + j + 3) & {1}];\n  }}\n"
      "  ST1(GRP_X * BLOCK_X + LID_X, a0 + a1 + a2 + a3);\n",
      iters, kThreads - 1);
  auto k = kernel("gpusim_shared_bw", {in(kThreads), out(threads)}, body, kThreads,
                  fmt::format("SHARED float tile[{}];\n", kThreads));
  k.shared_bytes = kThreads * 4;
  auto h = s.timer.compile(k);
  if (!h) return h.error();
  Stats fig;
  auto st = timed(s, *h, {g, 1, 1}, {*a, *o}, false, static_cast<double>(threads) * iters * 4 / 1e3, &fig);
  if (!st) return st.error();
  s.add_figure({"shared.bandwidth", "Shared-memory bandwidth", "GB/s", fig, s.base.compute.shared_memory_bandwidth_gbps,
                fmt::format("{} groups x {} threads x {} conflict-free 4-byte loads", g, kThreads, iters)});
  return Ok{};
}

Status bench_latency(Session& s) {
  const double cache = std::max(s.cache_bytes(), 1e6);
  struct Level {
    const char* key;
    const char* label;
    double bytes;
    double datasheet;
  };
  const Level levels[] = {{"latency.l1", "L1 latency", 16 * 1024.0, s.base.memory.l1.latency_ns},
                          {"latency.l2", "L2 latency", cache / 4, s.base.memory.l2.latency_ns},
                          {"latency.dram", "DRAM latency", std::min(8 * cache, 4.0 * static_cast<double>(dram_elements(s))),
                           s.base.memory.dram.latency_ns}};
  const int steps = s.quick ? 20000 : 50000;
  Curve curve{"latency.chase", "footprint bytes", "ns", {}, {}};
  Discipline d = s.disc;
  d.repeats = std::max(3, d.repeats / 3);
  for (const Level& lv : levels) {
    if (s.progress) s.progress(-1, fmt::format("pointer chase, {} footprint", mib(lv.bytes)));
    // A random cycle over cache-line-sized (64-byte) slots: each load depends on the last, and
    // neither the order nor the stride can be prefetched.
    const int64_t slots = std::max<int64_t>(16, static_cast<int64_t>(lv.bytes / 64));
    std::vector<int64_t> order(static_cast<size_t>(slots));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(14));
    std::vector<int32_t> next(static_cast<size_t>(slots * 16), 0);
    for (int64_t i = 0; i < slots; ++i) {
      next[static_cast<size_t>(order[static_cast<size_t>(i)] * 16)] =
          static_cast<int32_t>(order[static_cast<size_t>((i + 1) % slots)] * 16);
    }
    auto buf = s.timer.ints(next);
    auto o = s.timer.scratch(4);
    if (!buf) return buf.error();
    if (!o) return o.error();
    auto k = kernel(fmt::format("gpusim_chase_{}", slots), {in(slots * 16, Storage::kI32), out(1)},
                    fmt::format("  int p = 0;\n  for (int j = 0; j < {}; ++j) p = LD0(p);\n  ST1(0, float(p));\n", steps), 1);
    auto h = s.timer.compile(k);
    if (!h) return h.error();
    Stats fig;
    auto st = timed(s, *h, {1, 1, 1}, {*buf, *o}, false, 0, nullptr, &d);
    if (!st) return st.error();
    // ns per step from each sample (us * 1000 / steps): summarize the time statistics, scaled.
    fig = *st;
    for (double* v : {&fig.p50, &fig.p95, &fig.mean, &fig.min, &fig.max}) *v *= 1000.0 / steps;
    curve.x.push_back(static_cast<double>(slots) * 64);
    curve.y.push_back(fig.p50);
    s.add_figure({lv.key, lv.label, "ns", fig, lv.datasheet,
                  fmt::format("one thread, {} dependent loads over a random cycle of 64-byte slots in {}", steps, mib(lv.bytes))});
  }
  s.curves.push_back(curve);
  return Ok{};
}

Status bench_fma(Session& s) {
  const uint32_t g = s.full_groups();
  const int64_t threads = int64_t{g} * kThreads;
  const int iters = s.quick ? 512 : 2048;
  auto a = s.timer.floats(1024, 15);
  if (!a) return a.error();
  struct Type {
    const char* key;
    Precision prec;
    Storage out;
    const char* glsl;
    const char* cuda;
    bool supported;
  };
  const backend::DeviceInfo& info = s.dev().info();
  const Type types[] = {{"fma.fp32", Precision::kFp32, Storage::kF32, "float", "float", true},
                        {"fma.fp16", Precision::kFp16, Storage::kF16, "float16_t", "__half", info.fp16},
                        {"fma.int32", Precision::kInt32, Storage::kF32, "int", "int", true}};
  for (const Type& t : types) {
    const double peak = s.base.compute.vector_tflops.count(t.prec) ? s.base.compute.vector_tflops.at(t.prec) * 1e3 : 0;
    if (!t.supported) {
      Figure f{t.key, fmt::format("FMA {}", precision_name(t.prec)), "GFLOP/s", {}, peak, "the device has no fp16 arithmetic"};
      f.measured = false;
      s.add_figure(f);
      continue;
    }
    if (s.progress) s.progress(-1, fmt::format("FMA throughput, {}", precision_name(t.prec)));
    auto o = s.timer.scratch(static_cast<uint64_t>(threads) * 4);
    if (!o) return o.error();
    const char* T = s.timer.language() == backend::Language::kGlsl ? t.glsl : t.cuda;
    // Eight independent multiply-add chains per thread; the operands come from memory so nothing folds.
    std::string body = fmt::format("  const {0} m = {0}(LD0(LID_X & 1023) * 0.001);\n  const {0} c = {0}(LD0((LID_X + 7) & 1023));\n", T);
    for (int j = 0; j < 8; ++j) body += fmt::format("  {0} a{1} = {0}(LD0((LID_X + {1}) & 1023));\n", T, j);
    body += fmt::format("  for (int it = 0; it < {}; ++it) {{\n", iters);
    for (int j = 0; j < 8; ++j) body += fmt::format("    a{0} = a{0} * m + c;\n", j);
    body += "  }\n  ST1(GRP_X * BLOCK_X + LID_X, float(a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7));\n";
    auto k = kernel(std::string("gpusim_fma_") + std::string(precision_name(t.prec)), {in(1024), out(threads, t.out)}, body);
    auto h = s.timer.compile(k);
    if (!h) return h.error();
    const double flops = 2.0 * 8 * iters * static_cast<double>(threads);
    Stats fig;
    auto st = timed(s, *h, {g, 1, 1}, {*a, *o}, false, flops / 1e3, &fig);
    if (!st) return st.error();
    s.add_figure({t.key, fmt::format("FMA {}", precision_name(t.prec)), "GFLOP/s", fig, peak,
                  fmt::format("{} threads x 8 chains x {} dependent multiply-adds", threads, iters)});
    if (t.prec == Precision::kFp32) {
      s.observations.push_back(streaming("fma", "FMA fp32", 1024 * 4.0, threads * 4.0, flops, threads, g, kThreads, *st));
    }
  }
  return Ok{};
}

Status bench_matrix(Session& s) {
  const backend::DeviceInfo& info = s.dev().info();
  const codegen::MatrixPath path = s.matrix ? *s.matrix : codegen::matrix_path_for(info);
  for (const MatrixPeak& m : s.base.compute.matrix_tflops) {
    const bool fp16_fp32 = m.input == Precision::kFp16 && m.accumulate == Precision::kFp32;
    Figure f{fmt::format("matrix.{}", precision_name(m.input)), fmt::format("Matrix units {}", precision_name(m.input)),
             "TFLOP/s", {}, m.tflops, ""};
    if (m.input == Precision::kFp16 && !fp16_fp32) continue;  // the fp16-accumulate rate: codegen accumulates in fp32
    if (!fp16_fp32 || path == codegen::MatrixPath::kNone || !info.fp16) {
      f.measured = false;
      f.note = !info.matrix_units ? "not measured: the device reports no matrix units to this backend"
               : !fp16_fp32     ? "not measured: gpusim's code generator drives matrix units with fp16 inputs only"
                                : "not measured: gpusim's code generator has no matrix path for this device yet (RDNA3 "
                                  "WMMA, Vulkan cooperative matrices), so the datasheet peak x the default efficiency is kept";
      s.add_figure(f);
      continue;
    }
    // Square fp16 GEMMs (fp32 accumulation) generated on the device's matrix path and run by the
    // executor as `gpusim run --dtype fp16` runs them; every other size is held out of the fit.
    const std::vector<int64_t> sizes = s.matrix_sizes.empty()
                                           ? (s.quick ? std::vector<int64_t>{1024, 2048} : std::vector<int64_t>{1024, 2048, 4096})
                                           : s.matrix_sizes;
    Stats best;
    std::string best_name;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = sizes[i];
      OneKernelGraph c = matmul_graph(n, n, n);
      c.g = retype(c.g, DType::kFloat16);
      c.name = fmt::format("MatMul fp16 {0}x{0}x{0}", n);
      if (s.progress) s.progress(-1, fmt::format("matrix units: {} ({})", c.name, codegen::matrix_path_name(path)));
      exec::RunOptions o;
      o.seed = 29 + i;
      o.fp16_storage = true;
      o.matrix = path;
      KernelWork work;
      TileConfig tile;
      auto r = run_kernel_graph(s, c, o, &work, &tile);
      if (!r) return r.error();
      const exec::KernelTiming& kt = r->kernels.front();
      if (!kt.device || kt.launches != 1) {
        s.notes.push_back(fmt::format("{}: not used (it ran as {} launches{})", c.name, kt.launches, kt.device ? "" : " on the host"));
        continue;
      }
      Observation ob;
      ob.cls = "gemm fp16";
      ob.name = c.name;
      ob.held_out = i % 2 == 1;
      ob.work = work;
      ob.tile = tile;
      ob.stats = summarize(kt.samples_us);
      std::vector<double> rate;
      for (double us : kt.samples_us) rate.push_back(c.work / std::max(us, 1e-3) / 1e6);  // TFLOP/s
      Stats fig = summarize(rate);
      if (best_name.empty() || fig.p50 > best.p50) {
        best = fig;
        best_name = c.name;
      }
      s.observations.push_back(std::move(ob));
    }
    if (best_name.empty()) {
      f.measured = false;
      f.note = "not measured: no fp16 GEMM ran as one matrix-unit kernel (see the notes)";
    } else {
      f.stats = best;
      f.note = fmt::format("{} generated for the {} path (fp16 inputs, fp32 accumulation), the fastest of {} sizes",
                           best_name, codegen::matrix_path_name(path), sizes.size());
    }
    s.add_figure(f);
  }
  return Ok{};
}

Status bench_launch(Session& s) {
  const int units = s.base.compute.units;
  std::vector<int64_t> counts = s.quick ? std::vector<int64_t>{1, units, 16LL * units, 128LL * units}
                                        : std::vector<int64_t>{1, units, 4LL * units, 16LL * units, 64LL * units, 256LL * units};
  auto o = s.timer.scratch(4);
  if (!o) return o.error();
  // Never true (group and thread ids are not negative) but the compiler cannot know that.
  auto k = kernel("gpusim_empty", {out(1)}, "  if (GRP_X + LID_X < 0) ST0(0, 1.0);\n");
  auto h = s.timer.compile(k);
  if (!h) return h.error();
  const int batch = s.quick ? 50 : 200;
  Curve curve{"launch.back_to_back", "thread groups", "us per launch", {}, {}};
  Discipline d = s.disc;
  d.repeats = std::max(3, d.repeats / 2);
  Stats first_wall;
  for (int64_t c : counts) {
    if (s.progress) s.progress(-1, fmt::format("launch overhead, {} groups", c));
    const auto groups = std::array<uint32_t, 3>{static_cast<uint32_t>(c), 1, 1};
    std::vector<double> samples;
    auto st = measure([&]() -> Result<double> {
      auto w = s.timer.wall(*h, groups, {*o}, batch);
      if (!w) return w.error();
      return *w / batch;
    }, d, &samples);
    if (!st) return st.error();
    if (c == 1) first_wall = *st;
    curve.x.push_back(static_cast<double>(c));
    curve.y.push_back(st->p50);
    auto dev_t = timed(s, *h, groups, {*o}, false, 0, nullptr, &d);
    if (!dev_t) return dev_t.error();
    s.observations.push_back(streaming("launch", fmt::format("empty kernel, {} groups", c), 0, 0, 0, c * kThreads,
                                       static_cast<uint32_t>(c), kThreads, *dev_t));
    if (c == 1) {
      s.add_figure({"launch.floor", "Shortest kernel (device time)", "us", *dev_t, s.base.launch.latency_floor_us,
                    "an empty kernel of one group, timed by the device"});
    }
  }
  s.curves.push_back(curve);
  // Least squares: us per launch = a + b * groups.
  Eigen::MatrixXd A(static_cast<Eigen::Index>(counts.size()), 2);
  Eigen::VectorXd y(static_cast<Eigen::Index>(counts.size()));
  for (size_t i = 0; i < counts.size(); ++i) {
    A(static_cast<Eigen::Index>(i), 0) = 1;
    A(static_cast<Eigen::Index>(i), 1) = static_cast<double>(counts[i]);
    y(static_cast<Eigen::Index>(i)) = curve.y[i];
  }
  const Eigen::Vector2d ab = A.colPivHouseholderQr().solve(y);
  Stats a = first_wall;
  const double shift = std::max(0.0, ab(0)) - first_wall.p50;
  for (double* v : {&a.p50, &a.p95, &a.mean, &a.min, &a.max}) *v += shift;
  s.add_figure({"launch.overhead", "Launch overhead (a)", "us", a, s.base.launch.overhead_us,
                fmt::format("intercept of us per launch = a + b x groups over {} back-to-back empty launches at {} "
                            "group counts (p95 shifted with it)", batch, counts.size())});
  Stats b = summarize({std::max(0.0, ab(1))});
  s.add_figure({"launch.per_group", "Launch cost per group (b)", "us", b, 0,
                "slope of the same fit: device-wide cost of one more thread group"});
  return Ok{};
}

Status bench_host_link(Session& s) {
  const std::vector<double> sizes = s.quick ? std::vector<double>{4096, 262144, 4194304, 16777216}
                                            : std::vector<double>{4096, 65536, 1048576, 4194304, 16777216, 67108864};
  auto buf = s.timer.scratch(static_cast<uint64_t>(sizes.back()));
  if (!buf) return buf.error();
  std::vector<float> host(static_cast<size_t>(sizes.back() / 4), 1.25f);
  Discipline d = s.disc;
  d.repeats = std::max(3, d.repeats / 2);
  for (bool up : {true, false}) {
    Curve curve{up ? "host.upload" : "host.download", "bytes", "us", {}, {}};
    std::vector<Stats> per;
    for (double bytes : sizes) {
      if (s.progress) s.progress(-1, fmt::format("host {}, {}", up ? "to device" : "from device", mib(bytes)));
      auto st = measure([&]() -> Result<double> {
        const auto t0 = std::chrono::steady_clock::now();
        auto r = up ? s.dev().upload(*buf, host.data(), static_cast<uint64_t>(bytes))
                    : s.dev().download(*buf, host.data(), static_cast<uint64_t>(bytes));
        if (!r) return r.error();
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      }, d);
      if (!st) return st.error();
      curve.x.push_back(bytes);
      curve.y.push_back(st->p50);
      per.push_back(*st);
    }
    // us = latency + bytes / bandwidth, least squares.
    Eigen::MatrixXd A(static_cast<Eigen::Index>(sizes.size()), 2);
    Eigen::VectorXd y(static_cast<Eigen::Index>(sizes.size()));
    for (size_t i = 0; i < sizes.size(); ++i) {
      A(static_cast<Eigen::Index>(i), 0) = 1;
      A(static_cast<Eigen::Index>(i), 1) = sizes[i];
      y(static_cast<Eigen::Index>(i)) = curve.y[i];
    }
    const Eigen::Vector2d lb = A.colPivHouseholderQr().solve(y);
    Stats bw = per.back();  // the largest transfer's samples, as bandwidth
    const double big = sizes.back();
    bw.p50 = big / 1e3 / per.back().p50;
    bw.p95 = big / 1e3 / per.back().p95;
    bw.mean = big / 1e3 / per.back().mean;
    bw.min = big / 1e3 / per.back().max;
    bw.max = big / 1e3 / per.back().min;
    const std::string dir = up ? "upload" : "download";
    s.add_figure({"host." + dir, up ? "Host to device bandwidth" : "Device to host bandwidth", "GB/s", bw,
                  s.base.host_link.unified ? 0 : s.base.host_link.bandwidth_gbps,
                  fmt::format("{} of {} (p95: the slow tail); fitted slope {:.2f} GB/s{}", dir, mib(big),
                              lb(1) > 0 ? 1e-3 / lb(1) : 0.0,
                              s.base.host_link.unified ? "; the profile is unified memory, so the simulator copies nothing" : "")});
    s.add_figure({"host." + dir + "_latency", up ? "Host to device latency" : "Device to host latency", "us",
                  per.front(), 0, fmt::format("a {} transfer; fitted intercept {:.1f} us", mib(sizes.front()), lb(0))});
    s.curves.push_back(curve);
  }
  return Ok{};
}

Status bench_occupancy(Session& s) {
  const int64_t n = dram_elements(s) / (s.quick ? 4 : 2);
  const uint32_t full = s.full_groups();
  auto a = s.timer.floats(static_cast<uint64_t>(n), 16);
  auto b = s.timer.scratch(static_cast<uint64_t>(n) * 4);
  if (!a) return a.error();
  if (!b) return b.error();
  // Shaped like the DRAM streams (and generated elementwise kernels): 16-byte steps, a fixed
  // number per thread, strided by the thread count; one kernel per group count.
  Curve curve{"occupancy", "thread groups", "GB/s", {}, {}};
  Discipline d = s.disc;
  d.repeats = std::max(3, d.repeats / 2);
  std::vector<uint32_t> counts;
  for (uint32_t c = 1; c < full * 2; c *= s.quick ? 4 : 2) counts.push_back(c);
  counts.push_back(full * 2);
  for (uint32_t c : counts) {
    if (s.progress) s.progress(-1, fmt::format("bandwidth against occupancy, {} groups", c));
    const int64_t threads = int64_t{c} * kThreads;
    const int64_t steps = ceil_div(n / kVec, threads);
    auto h = s.timer.compile(kernel(fmt::format("gpusim_occupancy_copy_{}", c), {vin(n), vout(n)},
                                    stream_steps(steps, threads, n) + "    LDV0(i, v, 0);\n    STV1(i, v, 0);\n  }\n"));
    if (!h) return h.error();
    Stats fig;
    auto st = timed(s, *h, {c, 1, 1}, {*a, *b}, true, n * 8.0 / 1e3, &fig, &d);
    if (!st) return st.error();
    curve.x.push_back(c);
    curve.y.push_back(fig.p50);
    Observation o = streaming("occupancy", fmt::format("copy {} over {} groups", mib(n * 4.0), c), n * 4.0, n * 4.0, 0, n,
                              c, kThreads, *st);
    o.tile.vector_width = kVec;
    o.tile.items_per_thread = static_cast<int>(std::max<int64_t>(1, steps));
    // A CPU device (lavapipe) runs a group's invocations one SIMD chunk after another through
    // the whole kernel, so with thousands of steps a thread each chunk walks the entire buffer
    // at a 4 KiB stride: the curve measures that emulation, not bytes in flight. It is judged
    // (held out) there, not fitted.
    o.held_out = s.dev().info().is_cpu;
    s.observations.push_back(o);
  }
  s.curves.push_back(curve);
  return Ok{};
}

}  // namespace gpusim::calibrate
