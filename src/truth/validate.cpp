// `gpusim validate` in-process (include/gpusim/validate.h): every record predicted with its GPU's
// profile and its runtime, and the errors gathered per (GPU, op class).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "gpusim/runtime.h"
#include "gpusim/validate.h"

namespace gpusim {
namespace {

std::string normalized(std::string s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string tile_text(const KernelWork& w, const TileConfig& t) {
  if (t.block_m > 0 && !(w.cls == OpClass::kGemm || w.cls == OpClass::kConv || w.cls == OpClass::kAttention)) {
    TileConfig flat = t;  // a GEMM-shaped tile on a kernel priced by threads: show what is priced
    flat.block_m = 0;
    return tile_notation(flat);
  }
  return tile_notation(t);
}

// Plain roofline of a kernel: the larger of its FLOPs at the datasheet peak it may use and its
// compulsory bytes at the datasheet DRAM bandwidth.
double roofline_us(const KernelWork& w, const DeviceModel& d) {
  const GpuProfile& p = *d.profile;
  double flops = static_cast<double>(w.flops.total() + w.epilogue_flops.total());
  double peak = p.vector_tflops(precision_of(w.dtype)) * 1e12;
  if (w.cls == OpClass::kGemm || w.cls == OpClass::kConv || w.cls == OpClass::kAttention) {
    bool mu = false;
    double tf = 0;
    gemm_rate(w, d, &mu, &tf);
    peak = tf * 1e12;
    flops = std::max(flops, 2.0 * static_cast<double>(w.macs));
  }
  const double bytes = static_cast<double>(w.bytes_read + w.bytes_written);
  const double bw = p.memory.dram.bandwidth_gbps * 1e9;
  return std::max(peak > 0 ? flops / peak : 0.0, bw > 0 ? bytes / bw : 0.0) * 1e6;
}

struct Target {
  std::string profile;
  DeviceModel dev;
};

}  // namespace

std::vector<GpuProfile> load_all_profiles(const std::vector<std::string>& dirs) {
  std::vector<GpuProfile> out;
  for (const ProfileEntry& e : list_profiles(dirs)) {
    auto p = load_profile(e.path, dirs);
    if (p) out.push_back(std::move(*p));  // `gpusim profiles validate` reports broken profiles
  }
  return out;
}

Result<ValidationReport> validate(const std::vector<Measurement>& records, const ValidateOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  ValidationReport rep;
  // Profiles by normalized display name and name.
  std::map<std::string, std::string> by_display;
  std::map<std::string, GpuProfile> loaded;
  const std::vector<GpuProfile> own = opts.profiles ? std::vector<GpuProfile>{} : load_all_profiles(opts.profile_dirs);
  for (const GpuProfile& p : opts.profiles ? *opts.profiles : own) {
    by_display[normalized(p.display_name)] = p.name;
    by_display[normalized(p.name)] = p.name;
    loaded.emplace(p.name, p);
  }
  // Which GPUs to keep: names of profiles or devices.
  std::vector<std::string> keep;
  for (const std::string& g : opts.gpus) keep.push_back(normalized(g));

  std::map<std::string, Target> targets;  // by device name
  std::map<std::string, std::string> missing;  // device -> reason
  auto target_for = [&](const std::string& gpu) -> const Target* {
    if (auto it = targets.find(gpu); it != targets.end()) return &it->second;
    if (missing.count(gpu)) return nullptr;
    std::string name;
    if (auto it = opts.profile_for.find(gpu); it != opts.profile_for.end()) {
      name = it->second;
    } else if (auto jt = by_display.find(normalized(gpu)); jt != by_display.end()) {
      name = jt->second;
    }
    auto lt = loaded.find(name);
    if (name.empty() || lt == loaded.end()) {
      missing[gpu] = name.empty() ? fmt::format("no profile for GPU \"{}\": no profile's display_name or name matches "
                                                "it; add one to gpu_profiles/ or pass --profile-for \"{}=PROFILE\"",
                                                gpu, gpu)
                                  : fmt::format("GPU \"{}\": profile \"{}\" is not found or does not load (`gpusim "
                                                "profiles validate {}` says why)",
                                                gpu, name, name);
      return nullptr;
    }
    GpuProfile prof = lt->second;
    if (opts.fitted && !prof.calibrated) {
      if (auto e = opts.fitted->efficiency.find(prof.vendor); e != opts.fitted->efficiency.end()) prof.efficiency = e->second;
    }
    return &targets.emplace(gpu, Target{name, make_device(prof)}).first->second;
  };

  // Runtimes by name, loaded once.
  std::map<std::string, RuntimeModel> runtimes;
  const std::vector<std::string> rdirs = default_runtime_dirs();
  auto runtime_for = [&](const std::string& name) -> Result<const RuntimeModel*> {
    const std::string n = opts.runtime.empty() ? (name.empty() ? "gpusim" : name) : opts.runtime;
    if (auto it = runtimes.find(n); it != runtimes.end()) return &it->second;
    if (opts.fitted) {
      if (auto f = opts.fitted->runtimes.find(n); f != opts.fitted->runtimes.end()) {
        return &runtimes.emplace(n, f->second).first->second;
      }
    }
    auto r = find_runtime(n, rdirs);
    if (!r) return r.error();
    return &runtimes.emplace(n, std::move(*r)).first->second;
  };

  // Resolve each record's target and runtime serially (the maps are not shared across threads).
  struct Job {
    size_t record;
    const Target* target;
    const RuntimeModel* runtime;
  };
  std::vector<Job> jobs;
  std::map<std::string, int64_t> skip_counts;
  for (size_t i = 0; i < records.size(); ++i) {
    const Measurement& m = records[i];
    const Target* t = target_for(m.gpu);
    if (!keep.empty()) {
      const bool wanted = std::find(keep.begin(), keep.end(), normalized(m.gpu)) != keep.end() ||
                          (t && std::find(keep.begin(), keep.end(), normalized(t->profile)) != keep.end());
      if (!wanted) continue;
    }
    if (!t) {
      ++skip_counts[missing[m.gpu]];
      continue;
    }
    auto rt = runtime_for(m.runtime);
    if (!rt) return rt.error();
    jobs.push_back({i, t, *rt});
  }
  if (!keep.empty() && jobs.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--gpu {}: no record of the truth data ran on it (its GPUs: {})",
                                  fmt::join(opts.gpus, ","), [&] {
                                    std::set<std::string> g;
                                    for (const auto& m : records) g.insert(m.gpu);
                                    return fmt::format("{}", fmt::join(g, ", "));
                                  }()));
  }

  // Predict in parallel.
  std::vector<ValidatedRow> rows(jobs.size());
  std::vector<std::string> errors(jobs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j = next.fetch_add(64); j < jobs.size(); j = next.fetch_add(64)) {
      for (size_t q = j; q < std::min(jobs.size(), j + 64); ++q) {
        const Job& job = jobs[q];
        const Measurement& m = records[job.record];
        ValidatedRow& row = rows[q];
        row.record = job.record;
        row.measured_us = m.time_us;
        auto w = measurement_work(m);
        if (!w) {
          errors[q] = w.error().message;
          continue;
        }
        const DeviceModel& d = job.target->dev;
        // Back-to-back repeats with no cache flush: inputs whose whole footprint fits in L2 are
        // still there from the previous call.
        if (m.warm_cache && static_cast<double>(w->bytes_read + w->bytes_written) <= d.l2_size_bytes) {
          w->l2_resident_bytes = w->bytes_read;
        }
        TileConfig tile;
        if (m.tile) {
          tile = *m.tile;
        } else if (auto lib = library_tile(m, *w, d)) {
          tile = *lib;
        } else {
          tile = choose_tile(*w, d);
        }
        const KernelCost c = kernel_cost(*w, tile, d);
        row.kernel_us = c.total_us;
        row.bound = std::string(bound_name(c.bound));
        row.tile = tile_text(*w, tile);
        row.predicted_us = job.runtime->op_time_us(m.op, m.op_class, c.total_us, 1);
        row.roofline_us = job.runtime->op_time_us(m.op, m.op_class, roofline_us(*w, d), 1);
      }
    }
  };
  const int nthreads = opts.threads > 0 ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int i = 1; i < nthreads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  // Records whose work could not be rebuilt are skipped with their reason (first message kept).
  std::vector<ValidatedRow> kept;
  kept.reserve(rows.size());
  std::vector<const Target*> kept_target;
  for (size_t q = 0; q < rows.size(); ++q) {
    if (!errors[q].empty()) {
      ++skip_counts[errors[q]];
      continue;
    }
    kept.push_back(rows[q]);
    kept_target.push_back(jobs[q].target);
  }
  for (const auto& [why, n] : skip_counts) rep.skipped.push_back({why, n});

  // Group.
  auto make_group = [&](const std::vector<size_t>& idx, std::string gpu, std::string profile, std::string cls) {
    ValidationGroup g;
    g.gpu = std::move(gpu);
    g.profile = std::move(profile);
    g.op_class = std::move(cls);
    std::vector<double> pred, roof, meas;
    for (size_t i : idx) {
      pred.push_back(kept[i].predicted_us);
      roof.push_back(kept[i].roofline_us);
      meas.push_back(kept[i].measured_us);
    }
    g.model = error_stats(pred, meas);
    g.roofline = error_stats(roof, meas);
    std::vector<size_t> order = idx;
    auto ape = [&](size_t i) { return std::abs(kept[i].predicted_us - kept[i].measured_us) / kept[i].measured_us; };
    const size_t nworst = std::min(order.size(), static_cast<size_t>(std::max(0, opts.worst)));
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(nworst), order.end(),
                      [&](size_t a, size_t b) { return ape(a) > ape(b); });
    for (size_t i = 0; i < nworst; ++i) g.worst.push_back(kept[order[i]]);
    return g;
  };
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_group;
  std::map<std::string, std::vector<size_t>> by_gpu;
  std::vector<size_t> all(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    const Measurement& m = records[kept[i].record];
    by_group[{m.gpu, m.op_class}].push_back(i);
    by_gpu[m.gpu].push_back(i);
    all[i] = i;
  }
  for (const auto& [key, idx] : by_group) {
    rep.groups.push_back(make_group(idx, key.first, kept_target[idx.front()]->profile, key.second));
  }
  for (const auto& [gpu, idx] : by_gpu) {
    rep.per_gpu.push_back(make_group(idx, gpu, kept_target[idx.front()]->profile, "all"));
  }
  rep.overall = make_group(all, "all", "", "all");
  if (opts.keep_rows) rep.rows = std::move(kept);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace gpusim
