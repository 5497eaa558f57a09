// Fitting the figures measurements constrain (fit_model) and cross-validation (leave one GPU, or
// one model family, out) (include/gpusim/validate.h).
//
// Each figure is fitted on the rows that isolate it, so that none absorbs another's error:
//   1. host times: per runtime and op, the median measured time of rows whose work is trivial by
//      construction (at most 1e7 FLOPs and 1 MiB moved: under two microseconds on any GPU here),
//      never of rows chosen by how the kernel model prices them;
//   2. per architecture (architecture_family), the sustained DRAM bandwidth: elementwise rows that
//      stream at least 64 MiB, where a kernel's fixed costs and the host's are a small part, fitted
//      per GPU (a line, slope and intercept) and averaged per architecture; a vendor's figure, for
//      architectures with no rows, is the mean of all its GPUs';
//   3. per vendor, the SIMT GEMM rate: GEMM and convolution rows whose kernels take over 1.5x the
//      host time (device-bound);
//   4. per vendor, the matrix-unit rate and the grouped convolutions' share of the rates:
//      whole-model rows (one forward pass, mostly GEMMs and convolutions on the matrix units; no
//      per-op record has a grouped or depthwise convolution), with the figures above fixed.
// Each by a golden-section search minimizing mean |log(predicted / measured)|. Everything else
// comes from the profiles. A fixed stride sample of each (GPU, op) keeps it quick.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "gpusim/validate.h"
#include "targets.h"

namespace gpusim {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Work no GPU here takes more than a couple of microseconds for: what such a row measures is the
// runtime's host time.
constexpr double kTrivialFlops = 1e7;
constexpr double kTrivialBytes = 1 << 20;
// Elementwise rows that stream this much are priced by the sustained bandwidth, not fixed costs.
constexpr double kStreamingBytes = 64.0 * (1 << 20);

// Golden-section search on [lo, hi] of a unimodal objective; the midpoint of the final bracket.
double golden(double lo, double hi, int iterations, const std::function<double(double)>& f) {
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double a = lo, b = hi;
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = f(c), fd = f(d);
  for (int it = 0; it < iterations; ++it) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - phi * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + phi * (b - a);
      fd = f(d);
    }
  }
  return (a + b) / 2;
}

double mean_abs_log(const std::vector<double>& pred, const std::vector<double>& meas) {
  double s = 0;
  for (size_t i = 0; i < pred.size(); ++i) s += std::abs(std::log(pred[i] / meas[i]));
  return s / static_cast<double>(std::max<size_t>(1, pred.size()));
}

}  // namespace

Result<FittedModel> fit_model(const std::vector<Measurement>& records, const FitOptions& fo) {
  FittedModel fm;
  // A fixed stride sample of at most rows_per_op rows per (GPU, op), of the per-op records; every
  // whole-model record.
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_op;
  std::vector<Measurement> models;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].op_class == "model") {
      // Language models fit their own figure (validate_llm): the kernel gap of each backend.
      if (records[i].config.count("family") && records[i].config.at("family") == "llm") continue;
      models.push_back(records[i]);
    } else {
      by_op[{records[i].gpu, records[i].op}].push_back(i);
    }
  }
  std::vector<Measurement> sample;
  std::set<std::string> gpus;
  for (const auto& [key, idx] : by_op) {
    gpus.insert(key.first);
    const size_t step = std::max<size_t>(1, idx.size() / static_cast<size_t>(std::max(1, fo.rows_per_op)));
    for (size_t j = 0; j < idx.size(); j += step) sample.push_back(records[idx[j]]);
  }
  for (const Measurement& m : models) gpus.insert(m.gpu);
  fm.gpus.assign(gpus.begin(), gpus.end());
  if (sample.empty() && models.empty()) return make_error(ErrorCode::kInvalidArgument, "fit: no records to fit on");

  // 1. Host times, from trivial rows alone.
  std::map<std::string, std::map<std::string, std::vector<double>>> trivial;  // runtime -> op -> times
  for (const Measurement& m : sample) {
    const std::string n = m.runtime.empty() ? "gpusim" : m.runtime;
    if (!fm.runtimes.count(n)) {
      // Built-ins keep their figures; a framework runtime is fitted from nothing (never from its
      // file, which was fitted on every GPU: leave-one-GPU-out must not see the held-out one).
      if (n == "gpusim" || n == "cuda-graph") {
        fm.runtimes[n] = *find_runtime(n, {});
      } else {
        RuntimeModel blank;
        blank.name = n;
        blank.combine = "overlap";
        blank.host_scaled = true;  // fitted from trivial rows: the host's time a call
        blank.description = n.rfind("pytorch", 0) == 0
                                ? "PyTorch eager mode: host time per op call (dispatch up to the kernel launch), "
                                  "overlapped with the previous call's kernels when calls run back to back"
                                : "host time per op call, fitted from measurements";
        fm.runtimes[n] = blank;
      }
    }
    auto w = measurement_work(m);
    if (!w) continue;
    const double flops = static_cast<double>(std::max<int64_t>(w->flops.total(), 2 * w->macs));
    const double bytes = static_cast<double>(w->bytes_read + w->bytes_written);
    if (flops <= kTrivialFlops && bytes <= kTrivialBytes) trivial[n][m.op].push_back(m.time_us);
  }
  for (auto& [name, rt] : fm.runtimes) {
    if (rt.combine == "device") continue;
    std::vector<double> all;
    for (const auto& [op, v] : trivial[name]) {
      all.insert(all.end(), v.begin(), v.end());
      if (v.size() >= 5) rt.op_us[op] = median(v);
    }
    if (all.size() >= 5) rt.default_us = median(all);
    fm.log.push_back(fmt::format("runtime {}: host time of {} ops from {} trivial rows (<= {:.0e} FLOPs, <= {} KiB), "
                                 "default {:.1f} us",
                                 name, rt.op_us.size(), all.size(), kTrivialFlops, kTrivialBytes / 1024,
                                 rt.default_us));
  }

  // The profile each GPU is priced with: its vendor and architecture.
  const std::vector<GpuProfile> profiles = load_all_profiles(fo.profile_dirs);
  ValidateOptions vo;
  vo.profile_dirs = fo.profile_dirs;
  vo.profiles = &profiles;
  vo.threads = fo.threads;
  vo.worst = 0;
  vo.keep_rows = true;
  vo.fitted = &fm;
  std::map<std::string, std::string> vendor_of, arch_of;
  {
    truth::Targets targets(vo);
    for (const std::string& g : gpus) {
      if (const truth::Target* t = targets.find(g)) {
        vendor_of[g] = t->gpu.vendor;
        arch_of[g] = architecture_family(t->gpu);
      }
    }
  }
  std::set<std::string> vendors;
  for (const auto& [g, v] : vendor_of) vendors.insert(v);
  for (const std::string& v : vendors) fm.efficiency[v] = Efficiency{};

  // Per-op rows priced with the current figures.
  auto rows_where = [&](const std::function<bool(const Measurement&, const ValidatedRow&)>& keep) {
    std::vector<Measurement> out;
    auto rep = validate(sample, vo);
    if (!rep) return out;
    for (const ValidatedRow& r : rep->rows) {
      if (keep(sample[r.record], r)) out.push_back(sample[r.record]);
    }
    return out;
  };
  auto per_op_objective = [&](const std::vector<Measurement>& rows) {
    auto r = validate(rows, vo);
    if (!r) return 1e9;
    std::vector<double> p, m;
    for (const ValidatedRow& row : r->rows) {
      p.push_back(row.predicted_us);
      m.push_back(row.measured_us);
    }
    return mean_abs_log(p, m);
  };

  // 2. DRAM bandwidth per architecture, on streaming elementwise rows. Such a row measures
  //    t0 + k / eff: k its kernel's time at the datasheet bandwidth (the cost model's, with eff 1),
  //    t0 what every call pays on the device beside its kernel (launch and event latency). A line
  //    through (k, measured) gives both, per GPU: eff = 1 / slope, t0 the intercept. An
  //    architecture's eff is the mean of its GPUs'; a vendor's (for its architectures without
  //    rows) the mean of all its GPUs'; t0 is the runtime's launch latency, the median over GPUs.
  std::map<std::string, std::vector<double>> vendor_dram, arch_dram;
  std::map<std::string, std::vector<double>> runtime_t0;
  for (const std::string& gpu : gpus) {
    if (!arch_of.count(gpu)) continue;
    const std::string arch = arch_of[gpu];
    std::vector<Measurement> rows;
    for (const Measurement& m : sample) {
      if (m.gpu != gpu || m.op_class != "elementwise") continue;
      auto w = measurement_work(m);
      if (w && static_cast<double>(w->bytes_read + w->bytes_written) >= kStreamingBytes) rows.push_back(m);
    }
    if (rows.size() < 20) continue;
    const auto saved = fm.arch_figures;
    fm.arch_figures[arch]["dram_bandwidth"] = 1.0;
    auto rep = validate(rows, vo);
    fm.arch_figures = saved;
    if (!rep || rep->rows.size() < 20) continue;
    // Theil-Sen: the median of the pairwise slopes and of the intercepts it leaves, so that a few
    // outlying rows (a throttled run) do not tilt the line.
    std::vector<double> slopes;
    const auto& rr = rep->rows;
    const size_t stride = std::max<size_t>(1, rr.size() / 400);
    for (size_t i = 0; i < rr.size(); i += stride) {
      for (size_t j = i + stride; j < rr.size(); j += stride) {
        const double dx = rr[j].kernel_us - rr[i].kernel_us;
        if (std::abs(dx) > 1e-3 * std::max(rr[i].kernel_us, rr[j].kernel_us)) {
          slopes.push_back((rr[j].measured_us - rr[i].measured_us) / dx);
        }
      }
    }
    const double slope = median(slopes);
    std::vector<double> intercepts;
    for (const ValidatedRow& r : rr) intercepts.push_back(r.measured_us - slope * r.kernel_us);
    const double t0 = median(intercepts);
    const double eff = std::clamp(1.0 / std::max(1e-9, slope), 0.3, 1.0);
    arch_dram[arch].push_back(eff);
    vendor_dram[vendor_of[gpu]].push_back(eff);
    runtime_t0[rows.front().runtime.empty() ? "gpusim" : rows.front().runtime].push_back(t0);
    fm.log.push_back(fmt::format("{} ({}): sustained DRAM bandwidth {:.3f} of the datasheet on {} elementwise rows "
                                 "streaming >= {:.0f} MiB, each call also paying {:.1f} us on the device",
                                 gpu, arch, eff, rr.size(), kStreamingBytes / (1 << 20), t0));
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  for (const auto& [arch, v] : arch_dram) {
    fm.arch_figures[arch]["dram_bandwidth"] = mean(v);
    fm.log.push_back(fmt::format("{} efficiency.dram_bandwidth = {:.3f} (the mean of its {} GPU(s))", arch, mean(v), v.size()));
  }
  for (const auto& [vendor, v] : vendor_dram) {
    fm.efficiency[vendor].dram_bandwidth = mean(v);
    fm.fitted_figures[vendor]["dram_bandwidth"] = mean(v);
    fm.log.push_back(fmt::format("{} efficiency.dram_bandwidth = {:.3f}: the mean of its {} GPU(s), for architectures "
                                 "without rows",
                                 vendor, mean(v), v.size()));
  }
  for (const auto& [name, v] : runtime_t0) {
    auto it = fm.runtimes.find(name);
    if (it == fm.runtimes.end() || it->second.combine == "device") continue;
    it->second.launch_latency_us = std::max(0.0, median(v));
    fm.log.push_back(fmt::format("runtime {}: launch latency {:.1f} us (the median intercept of {} GPU(s))", name,
                                 it->second.launch_latency_us, v.size()));
  }

  // 2b. gpusim's own runs time each kernel with events around its launch, so a measured kernel
  //     holds its launch: the median of (measured - modelled kernel) over their elementwise rows
  //     (short kernels, the modelled time mostly the profile's floor) is that cost, added to every
  //     kernel of runtime gpusim in this fit (RuntimeModel::op_time_us), so that no other figure
  //     absorbs it.
  {
    std::vector<Measurement> rows;
    for (const Measurement& m : sample) {
      if (m.source == "gpusim run" && m.op_class == "elementwise" && (m.runtime.empty() || m.runtime == "gpusim")) rows.push_back(m);
    }
    auto rt = fm.runtimes.find("gpusim");
    if (rows.size() >= 20 && rt != fm.runtimes.end()) {
      rt->second.launch_latency_us = 0;
      if (auto rep = validate(rows, vo); rep && rep->rows.size() >= 20) {
        std::vector<double> gap;
        for (const ValidatedRow& r : rep->rows) gap.push_back(r.measured_us - r.kernel_us);
        rt->second.launch_latency_us = std::max(0.0, median(gap));
        fm.log.push_back(fmt::format("runtime gpusim: {:.2f} us a kernel beside its device time (the launch inside "
                                     "the events that time it), the median over {} elementwise rows of gpusim's own runs",
                                     rt->second.launch_latency_us, rep->rows.size()));
      }
    }
  }

  // 3. SIMT GEMM rate per vendor, on device-bound GEMM and convolution rows.
  for (const std::string& vendor : vendors) {
    const auto rows = rows_where([&](const Measurement& m, const ValidatedRow& r) {
      if (vendor_of[m.gpu] != vendor || (m.op_class != "gemm" && m.op_class != "conv")) return false;
      // Library kernels only: gpusim's own (its runs' records) are priced as their generator builds
      // them (step 5 for the GEMM-like ones), not at a library's SIMT rate.
      if (m.source == "gpusim run") return false;
      auto rt = fm.runtimes.find(m.runtime.empty() ? "gpusim" : m.runtime);
      const double host = rt == fm.runtimes.end() ? 0 : rt->second.host_us(m.op, m.op_class, 1);
      return r.kernel_us > 1.5 * host;
    });
    if (rows.size() < 20) continue;
    const double best = golden(0.2, 1.0, 18, [&](double x) {
      fm.efficiency[vendor].gemm_vector_flops = x;
      return per_op_objective(rows);
    });
    fm.efficiency[vendor].gemm_vector_flops = best;
    fm.fitted_figures[vendor]["gemm_vector_flops"] = best;
    fm.log.push_back(fmt::format("{} efficiency.gemm_vector_flops = {:.3f} on {} device-bound rows (mean |log error| "
                                 "{:.3f})",
                                 vendor, best, rows.size(), per_op_objective(rows)));
  }

  // 5. gpusim's own GEMM-like kernels per vendor (records whose tile carries its chain, tile.h:
  //    KernelChain): a loaded round trip (a multiple of the L2 hit latency), the epilogue's time per
  //    output value, a block's fixed time, the SIMT loop's share of the vector peak, by coordinate
  //    descent (golden-section search on each in turn, three times, from a fixed start) on the mean
  //    |log error|.
  for (const std::string& vendor : vendors) {
    std::vector<Measurement> rows;
    for (const Measurement& m : sample) {
      if (vendor_of[m.gpu] == vendor && m.tile && m.tile->chain.known() && (m.op_class == "gemm" || m.op_class == "conv")) {
        rows.push_back(m);
      }
    }
    if (rows.size() < 20) continue;
    Efficiency& e = fm.efficiency[vendor];
    // Each figure, its search range, iterations and start (the same whatever the defaults, which
    // are this fit's result on the H200 runs).
    struct Figure {
      const char* key;
      double Efficiency::*member;
      double lo, hi, start;
      int iterations;
    };
    static constexpr Figure kFigures[] = {{"own_round_trip", &Efficiency::own_round_trip, 0.5, 40.0, 4.0, 16},
                                          {"own_value_ns", &Efficiency::own_value_ns, 0.0, 400.0, 4.0, 16},
                                          {"own_block_us", &Efficiency::own_block_us, 0.0, 20.0, 2.0, 14},
                                          {"own_simt_flops", &Efficiency::own_simt_flops, 0.05, 1.0, 0.5, 14}};
    for (const Figure& f : kFigures) e.*f.member = f.start;
    for (int round = 0; round < 3; ++round) {
      for (const Figure& f : kFigures) {
        e.*f.member = golden(f.lo, f.hi, f.iterations, [&](double x) {
          e.*f.member = x;
          return per_op_objective(rows);
        });
      }
    }
    for (const Figure& f : kFigures) fm.fitted_figures[vendor][f.key] = e.*f.member;
    fm.log.push_back(fmt::format("{} efficiency.own_round_trip = {:.2f} (x the L2 hit latency), own_value_ns = {:.2f}, "
                                 "own_block_us = {:.2f}, own_simt_flops = {:.3f} on {} of gpusim's own GEMM-like kernels, with "
                                 "own_matrix_flops = {:.3f} as measured, not fitted (mean |log error| {:.3f})",
                                 vendor, e.own_round_trip, e.own_value_ns, e.own_block_us, e.own_simt_flops, rows.size(),
                                 e.own_matrix_flops, per_op_objective(rows)));
  }

  // 4. Matrix-unit rate per vendor, on whole-model rows.
  if (!models.empty()) {
    vo.model_cache = make_model_cache();
    std::map<std::string, std::string> model_vendor;
    {
      truth::Targets targets(vo);
      for (const Measurement& m : models) {
        if (const truth::Target* t = targets.find(m.gpu)) {
          model_vendor[m.gpu] = t->gpu.vendor;
          if (!fm.efficiency.count(t->gpu.vendor)) fm.efficiency[t->gpu.vendor] = Efficiency{};
        }
      }
    }
    std::set<std::string> mvendors;
    for (const auto& [g, v] : model_vendor) mvendors.insert(v);
    for (const std::string& vendor : mvendors) {
      std::vector<Measurement> rows;
      for (const Measurement& m : models) {
        if (model_vendor[m.gpu] == vendor) rows.push_back(m);
      }
      auto error = [&]() {
        auto r = validate_models(rows, vo);
        if (!r || r->rows.empty()) return 1e9;
        std::vector<double> p, m;
        for (const ModelRow& row : r->rows) {
          p.push_back(row.predicted_us);
          m.push_back(row.measured_us);
        }
        return mean_abs_log(p, m);
      };
      // The matrix-unit rate, the grouped convolutions' share (only models with grouped or depthwise
      // convolutions move with it), then the matrix-unit rate again (coordinate descent).
      Efficiency& e = fm.efficiency[vendor];
      for (int round = 0; round < 2; ++round) {
        e.matrix_flops = golden(0.4, 1.0, round == 0 ? 10 : 7, [&](double x) {
          e.matrix_flops = x;
          return error();
        });
        if (round > 0) break;
        e.grouped_conv = golden(0.1, 1.0, 9, [&](double x) {
          e.grouped_conv = x;
          return error();
        });
      }
      const double err = error();
      fm.fitted_figures[vendor]["matrix_flops"] = e.matrix_flops;
      fm.fitted_figures[vendor]["grouped_conv"] = e.grouped_conv;
      fm.log.push_back(fmt::format("{} efficiency.matrix_flops = {:.3f}, efficiency.grouped_conv = {:.3f} on {} "
                                   "whole-model rows (mean |log error| {:.3f})",
                                   vendor, e.matrix_flops, e.grouped_conv, rows.size(), err));
    }
  }
  return fm;
}

std::string record_model(const Measurement& m) {
  if (m.source != "gpusim run") return {};
  const std::string path = m.source_ref.substr(0, m.source_ref.find(' '));
  std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (const size_t dot = name.rfind('.'); dot != std::string::npos) name.resize(dot);
  return name;
}

Result<ValidationReport> validate_leave_one_out(const std::vector<Measurement>& all_records, const ValidateOptions& vopts,
                                                const FitOptions& fopts, std::vector<FittedModel>* fits, HoldOut by) {
  // Architectures: each record's GPU by its profile, as validate resolves it (the display name or id,
  // else the name as a tool prints it).
  std::map<std::string, std::string> architecture;
  if (by == HoldOut::kArchitecture) {
    std::vector<GpuProfile> own;
    if (!vopts.profiles) own = load_all_profiles(vopts.profile_dirs);
    std::map<std::string, std::string> by_name;
    for (const GpuProfile& p : vopts.profiles ? *vopts.profiles : own) {
      by_name[truth::normalized(p.display_name)] = architecture_family(p);
      by_name[truth::normalized(p.name)] = architecture_family(p);
    }
    for (const Measurement& m : all_records) {
      if (architecture.count(m.gpu)) continue;
      std::string arch;
      if (auto it = by_name.find(truth::normalized(m.gpu)); it != by_name.end()) {
        arch = it->second;
      } else if (auto p = find_profile(m.gpu, vopts.profile_dirs)) {
        arch = architecture_family(*p);
      }
      architecture[m.gpu] = arch.empty() ? m.gpu : arch;
    }
  }
  const auto key = [by, &architecture](const Measurement& m) {
    if (by == HoldOut::kArchitecture) return architecture.at(m.gpu);
    return by == HoldOut::kGpu ? m.gpu : record_model(m);
  };
  // Language-model records have a leave-one-out of their own (validate_llm); the rest fit here.
  std::vector<Measurement> records;
  std::vector<size_t> orig;  // index in all_records
  bool any_llm = false;
  for (size_t i = 0; i < all_records.size(); ++i) {
    const Measurement& m = all_records[i];
    if (m.op_class == "model" && m.config.count("family") && m.config.at("family") == "llm") {
      any_llm = true;
    } else {
      records.push_back(m);
      orig.push_back(i);
    }
  }
  std::set<std::string> gpus;  // the groups held out in turn: GPUs, or models
  for (const Measurement& m : records) {
    if (!key(m).empty()) gpus.insert(key(m));
  }
  ValidationReport out;
  if (any_llm) {
    auto lr = validate_llm(all_records, vopts, true, by == HoldOut::kArchitecture ? architecture
                                                                                  : std::map<std::string, std::string>{});
    if (!lr) return lr.error();
    out.llm = std::move(*lr);
  }
  std::vector<ValidatedRow> all_rows;
  std::vector<double> pred, roof, meas;
  // Every held-out row per (GPU, class) and per (GPU, class and dtype, TF32 apart): with
  // HoldOut::kModel, these groups pool the folds.
  std::map<std::pair<std::string, std::string>, std::array<std::vector<double>, 3>> pooled;
  std::vector<ModelRow> model_rows;
  for (const std::string& g : gpus) {
    std::vector<Measurement> train, test;
    std::vector<size_t> test_idx;  // test row -> index in records
    for (size_t i = 0; i < records.size(); ++i) {
      if (key(records[i]) == g) {
        test.push_back(records[i]);
        test_idx.push_back(orig[i]);
      } else {
        train.push_back(records[i]);
      }
    }
    if (!vopts.gpus.empty()) {
      ValidateOptions probe = vopts;
      probe.worst = 0;
      if (!validate(test, probe)) continue;  // not a GPU asked for
    }
    auto fm = fit_model(train, fopts);
    if (!fm) return fm.error();
    ValidateOptions vo = vopts;
    vo.fitted = &*fm;
    vo.keep_rows = true;
    auto rep = validate(test, vo);
    if (!rep) return rep.error();
    for (auto* groups : {&rep->groups, &rep->per_gpu}) {
      for (auto& grp : *groups) {
        for (auto& w : grp.worst) w.record = test_idx[w.record];
      }
    }
    if (by != HoldOut::kGpu) {  // each fold's groups name the model or architecture held out
      for (auto* groups : {&rep->groups, &rep->per_gpu}) {
        for (auto& grp : *groups) grp.gpu = g + ": " + grp.gpu;
      }
    }
    for (auto& grp : rep->groups) out.groups.push_back(std::move(grp));
    for (auto& grp : rep->per_gpu) out.per_gpu.push_back(std::move(grp));
    for (const auto& s : rep->skipped) out.skipped.push_back(s);
    for (ValidatedRow& r : rep->rows) {
      r.record = test_idx[r.record];
      if (vopts.keep_rows) out.rows.push_back(r);
      pred.push_back(r.predicted_us);
      roof.push_back(r.roofline_us);
      meas.push_back(r.measured_us);
      const Measurement& rec = all_records[r.record];
      const std::string by_dtype = fmt::format("{} {}{}", rec.op_class, dtype_name(rec.dtype),
                                               rec.tile && rec.tile->main_loop == MainLoop::kTf32 ? " (tf32)" : "");
      for (const std::string& cls : {rec.op_class, by_dtype}) {
        auto& pool = pooled[{rec.gpu, cls}];
        pool[0].push_back(r.predicted_us);
        pool[1].push_back(r.roofline_us);
        pool[2].push_back(r.measured_us);
      }
    }
    for (ModelRow& r : rep->models.rows) {
      r.record = test_idx[r.record];
      model_rows.push_back(std::move(r));
    }
    for (const auto& s : rep->models.skipped) out.models.skipped.push_back(s);
    out.seconds += rep->seconds;
    if (fits) fits->push_back(std::move(*fm));
  }
  {
    auto skipped = std::move(out.models.skipped);
    out.models = summarize_models(std::move(model_rows), vopts.worst);
    out.models.skipped = std::move(skipped);
  }
  if (by == HoldOut::kModel) {
    for (const auto& [k, v] : pooled) {
      ValidationGroup grp;
      grp.gpu = "every model held out: " + k.first;
      grp.op_class = k.second;
      grp.model = error_stats(v[0], v[2]);
      grp.roofline = error_stats(v[1], v[2]);
      out.groups.push_back(std::move(grp));
    }
  }
  out.overall.gpu = "all";
  out.overall.op_class = "all";
  out.overall.model = error_stats(pred, meas);
  out.overall.roofline = error_stats(roof, meas);
  return out;
}

Result<ModelReport> validate_leave_one_family_out(const std::vector<Measurement>& records, const ValidateOptions& vopts,
                                                  const FitOptions& fopts) {
  std::set<std::string> families;
  for (const Measurement& m : records) {
    if (m.op_class == "model" && m.config.count("family") && m.config.at("family") != "llm") families.insert(m.config.at("family"));
  }
  std::vector<ModelRow> rows;
  std::vector<SkippedRecords> skipped;
  double seconds = 0;
  for (const std::string& fam : families) {
    std::vector<Measurement> train, test;
    std::vector<size_t> test_idx;
    for (size_t i = 0; i < records.size(); ++i) {
      const Measurement& m = records[i];
      const bool held = m.op_class == "model" && m.config.count("family") && m.config.at("family") == fam;
      if (held) {
        test.push_back(m);
        test_idx.push_back(i);
      } else {
        train.push_back(m);
      }
    }
    auto fm = fit_model(train, fopts);
    if (!fm) return fm.error();
    ValidateOptions vo = vopts;
    vo.fitted = &*fm;
    auto rep = validate_models(test, vo);
    if (!rep) return rep.error();
    for (ModelRow& r : rep->rows) {
      r.record = test_idx[r.record];
      rows.push_back(std::move(r));
    }
    skipped.insert(skipped.end(), rep->skipped.begin(), rep->skipped.end());
    seconds += rep->seconds;
  }
  ModelReport out = summarize_models(std::move(rows), vopts.worst);
  out.skipped = std::move(skipped);
  out.seconds = seconds;
  return out;
}

}  // namespace gpusim
