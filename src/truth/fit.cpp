// Fitting the figures measurements constrain (fit_model) and leave-one-GPU-out validation
// (include/gpusim/validate.h).
//
// The fit alternates two steps, three times:
//   1. host times: for each runtime and op, the median measured time of the rows whose predicted
//      kernels take under 30% of the op's host time (first its 2nd-percentile time): the host is
//      the bottleneck there, so the time measured is the host's;
//   2. per vendor, each efficiency factor by a golden-section search that minimizes the mean
//      |log(predicted / measured)| of the rows it drives whose kernels take over 1.5x the host time
//      (device-bound rows): DRAM bandwidth <- elementwise ops, the SIMT GEMM rate <- GEMMs and
//      convolutions.
// Everything else comes from the profiles. A fixed stride sample of each (GPU, op) keeps it quick.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gpusim/validate.h"

namespace gpusim {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

struct Param {
  const char* name;
  double Efficiency::*field;
  std::set<std::string> classes;
  double lo, hi;
};

}  // namespace

Result<FittedModel> fit_model(const std::vector<Measurement>& records, const FitOptions& fo) {
  FittedModel fm;
  // A fixed stride sample of at most rows_per_op rows per (GPU, op).
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_op;
  for (size_t i = 0; i < records.size(); ++i) by_op[{records[i].gpu, records[i].op}].push_back(i);
  std::vector<Measurement> sample;
  std::set<std::string> gpus;
  for (const auto& [key, idx] : by_op) {
    gpus.insert(key.first);
    const size_t step = std::max<size_t>(1, idx.size() / static_cast<size_t>(std::max(1, fo.rows_per_op)));
    for (size_t j = 0; j < idx.size(); j += step) sample.push_back(records[idx[j]]);
  }
  fm.gpus.assign(gpus.begin(), gpus.end());
  if (sample.empty()) return make_error(ErrorCode::kInvalidArgument, "fit: no records to fit on");

  // Start from blank overlap runtimes and the default efficiencies.
  for (const Measurement& m : sample) {
    const std::string n = m.runtime.empty() ? "gpusim" : m.runtime;
    if (fm.runtimes.count(n)) continue;
    // Built-ins keep their figures; a framework runtime is fitted from nothing (never from its
    // file, which was fitted on every GPU: leave-one-GPU-out must not see the held-out one).
    if (n == "gpusim" || n == "cuda-graph") {
      fm.runtimes[n] = *find_runtime(n, {});
    } else {
      RuntimeModel blank;
      blank.name = n;
      blank.combine = "overlap";
      blank.description = n.rfind("pytorch", 0) == 0
                              ? "PyTorch eager mode: host time per op call (dispatch up to the kernel launch), "
                                "overlapped with the previous call's kernels when calls run back to back"
                              : "host time per op call, fitted from measurements";
      fm.runtimes[n] = blank;
    }
  }
  const std::vector<GpuProfile> profiles = load_all_profiles(fo.profile_dirs);
  ValidateOptions vo;
  vo.profile_dirs = fo.profile_dirs;
  vo.profiles = &profiles;
  vo.threads = fo.threads;
  vo.worst = 0;
  vo.keep_rows = true;
  vo.fitted = &fm;
  // Vendor of each GPU, through the profile validation matched it to.
  std::map<std::string, std::string> vendor_of;
  {
    auto rep = validate(sample, vo);
    if (!rep) return rep.error();
    for (const auto& g : rep->per_gpu) {
      for (const GpuProfile& p : profiles) {
        if (p.name == g.profile) vendor_of[g.gpu] = p.vendor;
      }
    }
  }
  std::set<std::string> vendors;
  for (const auto& [g, v] : vendor_of) vendors.insert(v);
  for (const std::string& v : vendors) fm.efficiency[v] = Efficiency{};

  const std::vector<Param> params = {
      {"dram_bandwidth", &Efficiency::dram_bandwidth, {"elementwise"}, 0.3, 1.0},
      {"gemm_vector_flops", &Efficiency::gemm_vector_flops, {"gemm", "conv"}, 0.2, 1.0},
  };
  for (int round = 0; round < 3; ++round) {
    // 1. Host times.
    auto rep = validate(sample, vo);
    if (!rep) return rep.error();
    // A row is host-bound when its predicted kernels take under 30% of the op's host time: in the
    // first round, of the op's 2nd-percentile time (its floor); after that, of the fitted host time.
    std::map<std::pair<std::string, std::string>, std::vector<double>> per_op;
    for (const ValidatedRow& r : rep->rows) per_op[{sample[r.record].runtime, sample[r.record].op}].push_back(r.measured_us);
    std::map<std::pair<std::string, std::string>, double> floor;
    for (auto& [key, v] : per_op) {
      std::sort(v.begin(), v.end());
      floor[key] = v[v.size() / 50];
    }
    std::map<std::pair<std::string, std::string>, std::vector<double>> host_rows;
    std::map<std::string, std::vector<double>> host_all;
    for (const ValidatedRow& r : rep->rows) {
      const Measurement& m = sample[r.record];
      const RuntimeModel& rt = fm.runtimes[m.runtime.empty() ? "gpusim" : m.runtime];
      const double host = round == 0 || !rt.op_us.count(m.op) ? floor[{m.runtime, m.op}] : rt.host_us(m.op, m.op_class, 1);
      if (r.kernel_us < 0.3 * host) {
        host_rows[{m.runtime, m.op}].push_back(r.measured_us);
        host_all[m.runtime].push_back(r.measured_us);
      }
    }
    for (auto& [name, rt] : fm.runtimes) {
      if (rt.combine == "device") continue;
      if (auto it = host_all.find(name); it != host_all.end() && it->second.size() >= 5) rt.default_us = median(it->second);
    }
    for (const auto& [key, v] : host_rows) {
      if (v.size() < 5) continue;
      RuntimeModel& rt = fm.runtimes[key.first];
      if (rt.combine != "device") rt.op_us[key.second] = median(v);
    }
    // 2. Efficiencies per vendor, on device-bound rows.
    auto rep2 = validate(sample, vo);
    if (!rep2) return rep2.error();
    for (const std::string& vendor : vendors) {
      for (const Param& prm : params) {
        std::vector<Measurement> rows;
        for (const ValidatedRow& r : rep2->rows) {
          const Measurement& m = sample[r.record];
          auto rt = fm.runtimes.find(m.runtime.empty() ? "gpusim" : m.runtime);
          const double host = rt == fm.runtimes.end() ? 0 : rt->second.host_us(m.op, m.op_class, 1);
          if (vendor_of[m.gpu] == vendor && prm.classes.count(m.op_class) && r.kernel_us > 1.5 * host) {
            rows.push_back(m);
          }
        }
        if (rows.size() < 20) continue;
        auto objective = [&](double x) -> double {
          fm.efficiency[vendor].*prm.field = x;
          ValidateOptions o = vo;
          auto r = validate(rows, o);
          if (!r) return 1e9;
          double s = 0;
          for (const ValidatedRow& row : r->rows) s += std::abs(std::log(row.predicted_us / row.measured_us));
          return s / static_cast<double>(std::max<size_t>(1, r->rows.size()));
        };
        // Golden-section search on [lo, hi].
        const double phi = (std::sqrt(5.0) - 1) / 2;
        double a = prm.lo, b = prm.hi;
        double c = b - phi * (b - a), d = a + phi * (b - a);
        double fc = objective(c), fd = objective(d);
        for (int it = 0; it < 18; ++it) {
          if (fc < fd) {
            b = d;
            d = c;
            fd = fc;
            c = b - phi * (b - a);
            fc = objective(c);
          } else {
            a = c;
            c = d;
            fc = fd;
            d = a + phi * (b - a);
            fd = objective(d);
          }
        }
        const double best = (a + b) / 2;
        const double fbest = objective(best);
        if (round == 2) {
          fm.fitted_figures[vendor][prm.name] = best;
          fm.log.push_back(fmt::format("{} efficiency.{} = {:.3f} on {} device-bound rows (mean |log error| {:.3f})",
                                       vendor, prm.name, best, rows.size(), fbest));
        }
      }
    }
  }
  for (const auto& [name, rt] : fm.runtimes) {
    if (rt.combine == "device") continue;
    fm.log.push_back(fmt::format("runtime {}: default {:.1f} us, {} ops fitted", name, rt.default_us, rt.op_us.size()));
  }
  return fm;
}

Result<ValidationReport> validate_leave_one_out(const std::vector<Measurement>& records, const ValidateOptions& vopts,
                                                const FitOptions& fopts, std::vector<FittedModel>* fits) {
  std::set<std::string> gpus;
  for (const Measurement& m : records) gpus.insert(m.gpu);
  ValidationReport out;
  std::vector<ValidatedRow> all_rows;
  std::vector<double> pred, roof, meas;
  for (const std::string& g : gpus) {
    std::vector<Measurement> train, test;
    std::vector<size_t> test_idx;  // test row -> index in records
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].gpu == g) {
        test.push_back(records[i]);
        test_idx.push_back(i);
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
    for (auto& grp : rep->groups) out.groups.push_back(std::move(grp));
    for (auto& grp : rep->per_gpu) out.per_gpu.push_back(std::move(grp));
    for (const auto& s : rep->skipped) out.skipped.push_back(s);
    for (ValidatedRow& r : rep->rows) {
      r.record = test_idx[r.record];
      if (vopts.keep_rows) out.rows.push_back(r);
      pred.push_back(r.predicted_us);
      roof.push_back(r.roofline_us);
      meas.push_back(r.measured_us);
    }
    out.seconds += rep->seconds;
    if (fits) fits->push_back(std::move(*fm));
  }
  out.overall.gpu = "all";
  out.overall.op_class = "all";
  out.overall.model = error_stats(pred, meas);
  out.overall.roofline = error_stats(roof, meas);
  return out;
}

}  // namespace gpusim
