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

#include "gpusim/cancel.h"
#include "gpusim/runtime.h"
#include "gpusim/validate.h"
#include "targets.h"
#include "base/parallel.h"

namespace gpusim {
namespace {

std::string tile_text(const KernelWork& w, const TileConfig& t) {
  if (t.block_m > 0 && !(w.cls == OpClass::kGemm || w.cls == OpClass::kConv || w.cls == OpClass::kAttention)) {
    TileConfig flat = t;  // a GEMM-shaped tile on a kernel priced by threads: show what is priced
    flat.block_m = 0;
    return tile_notation(flat);
  }
  return tile_notation(t);
}

}  // namespace

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

namespace truth {

std::string normalized(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Targets::Targets(const ValidateOptions& opts) : opts_(opts), runtime_dirs_(default_runtime_dirs()) {
  if (auto v = load_vendor_efficiency(opts.profile_dirs)) measured_ = std::move(*v);
  if (!opts.profiles) own_ = load_all_profiles(opts.profile_dirs);
  for (const GpuProfile& p : opts.profiles ? *opts.profiles : own_) {
    by_display_[normalized(p.display_name)] = p.name;
    by_display_[normalized(p.name)] = p.name;
    loaded_.emplace(p.name, &p);
  }
  for (const std::string& g : opts.gpus) keep_.push_back(normalized(g));
}

const Target* Targets::find(const std::string& gpu, const std::string& matched) {
  if (auto it = targets_.find(gpu); it != targets_.end()) return &it->second;
  if (missing_.count(gpu)) return nullptr;
  std::string name;
  if (auto it = opts_.profile_for.find(gpu); it != opts_.profile_for.end()) {
    name = it->second;
  } else if (!matched.empty() && loaded_.count(matched)) {
    name = matched;  // the profile the run itself matched to the device (gpusim run --json's "gpu")
  } else if (auto jt = by_display_.find(normalized(gpu)); jt != by_display_.end()) {
    name = jt->second;
  } else if (!opts_.profile_dirs.empty()) {
    // A name as a tool printed it ("Radeon RX 7900 XTX" from rocm-smi, "NVIDIA GeForce RTX 4090,
    // 550.54" from nvidia-smi): the profile find_profile resolves it to, when it names one alone.
    if (auto p = find_profile(gpu, opts_.profile_dirs); p && loaded_.count(p->name)) name = p->name;
  }
  auto lt = loaded_.find(name);
  if (name.empty() || lt == loaded_.end()) {
    missing_[gpu] = name.empty() ? fmt::format("no profile for GPU \"{}\": no profile's display_name or name matches "
                                               "it; add one to gpu_profiles/ or pass `profile_for` \"{}=PROFILE\"",
                                               gpu, gpu)
                                 : fmt::format("GPU \"{}\": profile \"{}\" is not found or does not load (`gpusim "
                                               "profiles validate {}` says why)",
                                               gpu, name, name);
    return nullptr;
  }
  GpuProfile prof = *lt->second;
  if (opts_.fitted && !prof.calibrated) {
    if (auto e = opts_.fitted->efficiency.find(prof.vendor); e != opts_.fitted->efficiency.end()) prof.efficiency = e->second;
    // Figures a published benchmark measured for the architecture (not fitted on any record) stand
    // where the fit has none for it.
    if (auto m = measured_.measured.find(architecture_family(prof)); m != measured_.measured.end()) {
      for (const auto& [key, v] : m->second) {
        if (key == "dram_bandwidth") prof.efficiency.dram_bandwidth = v;
      }
    }
    if (auto a = opts_.fitted->arch_figures.find(architecture_family(prof)); a != opts_.fitted->arch_figures.end()) {
      for (const auto& [key, v] : a->second) {
        if (key == "dram_bandwidth") prof.efficiency.dram_bandwidth = v;
        if (key == "gemm_vector_flops") prof.efficiency.gemm_vector_flops = v;
        if (key == "matrix_flops") prof.efficiency.matrix_flops = v;
      }
    }
  }
  Target t{name, prof, make_device(prof), library_target(prof)};
  return &targets_.emplace(gpu, std::move(t)).first->second;
}

bool Targets::wanted(const std::string& gpu, const Target* t) const {
  if (keep_.empty()) return true;
  return std::find(keep_.begin(), keep_.end(), normalized(gpu)) != keep_.end() ||
         (t && std::find(keep_.begin(), keep_.end(), normalized(t->profile)) != keep_.end());
}

Result<const RuntimeModel*> Targets::runtime(const std::string& name) {
  const std::string n = opts_.runtime.empty() ? (name.empty() ? "gpusim" : name) : opts_.runtime;
  if (auto it = runtimes_.find(n); it != runtimes_.end()) return &it->second;
  auto r = find_runtime(n, runtime_dirs_);
  if (opts_.fitted) {
    if (auto f = opts_.fitted->runtimes.find(n); f != opts_.fitted->runtimes.end()) {
      // Fitted host times on the runtime's own lowering rules.
      RuntimeModel m = f->second;
      if (r) m.lowering = r->lowering;
      return &runtimes_.emplace(n, std::move(m)).first->second;
    }
  }
  if (!r) return r.error();
  return &runtimes_.emplace(n, std::move(*r)).first->second;
}

}  // namespace truth

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
  truth::Targets targets(opts);

  // Resolve each record's target and runtime serially (the maps are not shared across threads).
  struct Job {
    size_t record;
    const truth::Target* target;
    const RuntimeModel* runtime;
  };
  std::vector<Job> jobs;
  std::map<std::string, int64_t> skip_counts;
  bool any_model = false, any_llm = false;
  for (size_t i = 0; i < records.size(); ++i) {
    const Measurement& m = records[i];
    if (m.op_class == "model" && m.config.count("family") && m.config.at("family") == "llm") {  // validate_llm
      any_llm = true;
      continue;
    }
    if (m.op_class == "model") {  // whole models: validate_models
      any_model = true;
      continue;
    }
    const auto matched = m.config.find("profile");
    const truth::Target* t = targets.find(m.gpu, matched == m.config.end() ? std::string() : matched->second);
    if (!targets.wanted(m.gpu, t)) continue;
    if (!t) {
      ++skip_counts[targets.why_missing(m.gpu)];
      continue;
    }
    auto rt = targets.runtime(m.runtime);
    if (!rt) return rt.error();
    jobs.push_back({i, t, *rt});
  }
  if (targets.filtered() && jobs.empty() && !any_model && !any_llm) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`gpu {}`: no record of the truth data ran on it (its GPUs: {})",
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
  // The caller's cancellation reaches the pool's threads by pointer; they stop, and the caller throws.
  const CancelToken* cancel = current_cancel_token();
  auto worker = [&] {
    for (size_t j = next.fetch_add(64); j < jobs.size(); j = next.fetch_add(64)) {
      if (cancel != nullptr && cancel->cancelled()) return;
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
  const int nthreads = opts.threads > 0 ? opts.threads : base::core_count();
  // A cancelled caller (cancel.h) stops every thread at its next record, then throws.
  base::run_cancellable(nthreads, worker);

  // Records whose work could not be rebuilt are skipped with their reason (first message kept).
  std::vector<ValidatedRow> kept;
  kept.reserve(rows.size());
  std::vector<const truth::Target*> kept_target;
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
  if (any_model) {
    auto mr = validate_models(records, opts);
    if (!mr) return mr.error();
    rep.models = std::move(*mr);
  }
  if (any_llm) {
    auto lr = validate_llm(records, opts, false);
    if (!lr) return lr.error();
    rep.llm = std::move(*lr);
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace gpusim
