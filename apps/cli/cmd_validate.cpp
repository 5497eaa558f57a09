// gpusim validate --truth FILE|DIR|DB [--gpu NAME]... [--runtime NAME] [--json] [--rows FILE.csv]
//                 [--check-against FIGURES.json]
// gpusim truth import --db FILE SOURCE...  |  gpusim truth stats --db FILE
#include <fmt/format.h>

#include <array>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "gpusim/gpusim.h"
#include "commands.h"
#include "hw/atomic_file.h"
#include "gpusim/documents.h"
#include "common.h"
#include "gpusim/measurement.h"
#include "gpusim/runtime.h"
#include "gpusim/validate.h"
#include "base/json_text.h"

namespace gpusim::cli {
namespace {

struct ValidateArgs {
  std::string truth;
  std::vector<std::string> gpus;
  std::string runtime;
  std::vector<std::string> profile_dirs;
  std::vector<std::string> profile_for;
  std::string rows;
  std::string check_against;
  double tolerance = 0.1;
  int worst = 3;
  int threads = 0;
  bool json = false;
  bool logo = false;
  bool lomo = false;
  bool loao = false;
  bool lofo = false;
  bool fit = false;
  std::string write_runtimes;
  std::string write_efficiency;
};

// Fitted vendor efficiencies, three decimals, for vendor_efficiency_to_yaml (gpu_profile.h).
VendorEfficiency fitted_efficiency(const FittedModel& fm, const std::string& command) {
  auto r3 = [](double v) { return std::round(v * 1000) / 1000; };
  VendorEfficiency e;
  e.command = command;
  for (const auto& [vendor, figs] : fm.fitted_figures) {
    for (const auto& [k, v] : figs) e.vendors[vendor][k] = r3(v);
  }
  for (const auto& [arch, figs] : fm.arch_figures) {
    for (const auto& [k, v] : figs) e.architectures[arch][k] = r3(v);
  }
  return e;
}

constexpr const char* kEfficiencyHow =
    "core/truth/fit.cpp: dram_bandwidth per architecture by a line through (kernel time at the datasheet bandwidth, "
    "measured time) of elementwise rows streaming >= 64 MiB (a vendor's: the median of its architectures'); "
    "gemm_vector_flops per vendor by golden-section search on device-bound GEMM and convolution rows; matrix_flops "
    "per vendor by golden-section search on whole-model rows";

// A fitted runtime's host times, two decimals, for runtime_to_yaml (runtime.h).
std::string fitted_runtime_yaml(RuntimeModel r, const std::string& command, const std::vector<std::string>& gpus) {
  auto r2 = [](double v) { return std::round(v * 100) / 100; };
  r.default_us = r2(r.default_us);
  r.extra_kernel_us = r2(r.extra_kernel_us);
  r.launch_latency_us = r2(r.launch_latency_us);
  for (auto& [k, v] : r.class_us) v = r2(v);
  for (auto& [k, v] : r.op_us) v = r2(v);
  return runtime_to_yaml(
      r, command,
      {{"op_us", fmt::format("median time of the rows whose work is trivial by construction (<= 1e7 FLOPs and <= 1 MiB "
                             "moved), per op, measured on {}",
                             fmt::join(gpus, ", "))},
       {"launch_latency_us", "the median intercept of measured time against kernel time at the datasheet bandwidth, "
                             "elementwise rows streaming >= 64 MiB (core/truth/fit.cpp)"}});
}

std::string dims_text(const std::map<std::string, int64_t>& d) {
  std::string s;
  for (const auto& [k, v] : d) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
  return s;
}

void print_table(const ValidationReport& rep) {
  fmt::print("{:<24} {:<22} {:<13} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} | {:>8} {:>7} {:>6}\n", "gpu", "profile",
             "class", "n", "MAPE", "median", "p90", "bias", "tau", "roofline", "bias", "tau");
  auto row = [](const ValidationGroup& g) {
    fmt::print("{:<24} {:<22} {:<13} {:>7} {:>6.1f}% {:>6.1f}% {:>6.1f}% {:>+6.1f}% {:>6.3f} | {:>7.1f}% {:>+6.1f}% "
               "{:>6.3f}\n",
               g.gpu.substr(0, 24), g.profile.substr(0, 22), g.op_class, g.model.n, g.model.mape, g.model.median_ape,
               g.model.p90_ape, g.model.bias, g.model.kendall_tau, g.roofline.mape, g.roofline.bias,
               g.roofline.kendall_tau);
  };
  std::string last;
  for (const auto& g : rep.groups) {
    if (!last.empty() && g.gpu != last) fmt::print("\n");
    row(g);
    last = g.gpu;
  }
  fmt::print("\n");
  for (const auto& g : rep.per_gpu) row(g);
  row(rep.overall);
}

void print_llm(const LlmReport& l, int worst) {
  if (l.rows.empty()) return;
  fmt::print("\nlanguage models (llama-bench: ppN = a prompt of N tokens in one pass, tgN = N tokens generated one at a "
             "time){}\n", l.leave_one_architecture_out
                              ? ", leave-one-architecture-out: each GPU's kernel gap fitted on its backend's GPUs of "
                                "other architectures"
                              : l.leave_one_gpu_out ? ", leave-one-GPU-out: each GPU's kernel gap fitted on the other GPUs "
                                                      "of its backend"
                                                    : "");
  fmt::print("{:<30} {:<7} {:<5} {:>4} {:>7} {:>7} {:>8} {:>6}\n", "gpu", "backend", "test", "n", "MAPE", "median", "bias", "tau");
  for (const LlmGroup& g : l.groups) {
    fmt::print("{:<30} {:<7} {:<5} {:>4} {:>6.1f}% {:>6.1f}% {:>+7.1f}% {:>6.3f}\n", g.gpu.substr(0, 30), g.backend, g.test,
               g.stats.n, g.stats.mape, g.stats.median_ape, g.stats.bias, g.stats.kendall_tau);
  }
  fmt::print("target set (CUDA and Metal; F16, Q8_0, Q4_0): tg128 {} rows MAPE {:.1f}% bias {:+.1f}%; pp512 {} rows MAPE "
             "{:.1f}% bias {:+.1f}%\n",
             l.target_tg.n, l.target_tg.mape, l.target_tg.bias, l.target_pp.n, l.target_pp.mape, l.target_pp.bias);
  std::string gaps;
  for (const auto& [b, g] : l.gaps) gaps += fmt::format("{}{} {:.2f} us", gaps.empty() ? "" : ", ", b, g);
  fmt::print("kernel gap fitted on every GPU's tg rows: {}\n", gaps);
  if (!l.ratios.empty()) {
    fmt::print("\nquantized time / F16 time (same GPU, backend, model, test)\n");
    for (const LlmRatio& r : l.ratios) {
      fmt::print("  {:<30} {:<7} {:<12} {:<6} {:<7} measured {:.3f}  predicted {:.3f} ({:+.1f}%)\n", r.gpu.substr(0, 30),
                 r.backend, r.model, r.test, r.weights, r.measured, r.predicted, r.error_pct);
    }
  }
  if (worst <= 0) return;
  fmt::print("\nrows (tokens/s measured and predicted)\n");
  for (const LlmRow& r : l.rows) {
    fmt::print("  {:<30} {:<7} {:<12} {:<7} {:<6} measured {:>9.1f}  predicted {:>9.1f} ({:+.0f}% time)  {} kernels, gap "
               "{:.2f} us, {}\n",
               r.gpu.substr(0, 30), r.backend, r.model, r.weights, r.test, r.tokens / (r.measured_us * 1e-6),
               r.tokens / (r.predicted_us * 1e-6), 100 * (r.predicted_us - r.measured_us) / r.measured_us, r.kernels, r.gap_us,
               r.bound);
  }
}

void print_models(const ModelReport& m, int worst) {
  if (m.groups.empty()) return;
  fmt::print("\nwhole models (one forward pass, end to end; roofline = each kernel's FLOPs or bytes at datasheet peaks)\n");
  fmt::print("{:<24} {:<14} {:<6} {:<9} {:>5} {:>7} {:>7} {:>7} {:>6} | {:>8} {:>7} {:>6}\n", "gpu", "runtime", "layout",
             "family", "n", "MAPE", "median", "bias", "tau", "roofline", "bias", "tau");
  for (const auto& g : m.groups) {
    fmt::print("{:<24} {:<14} {:<6} {:<9} {:>5} {:>6.1f}% {:>6.1f}% {:>+6.1f}% {:>6.3f} | {:>7.1f}% {:>+6.1f}% {:>6.3f}\n",
               g.gpu.substr(0, 24), g.runtime.substr(0, 14), g.layout, g.family, g.model.n, g.model.mape,
               g.model.median_ape, g.model.bias, g.model.kendall_tau, g.roofline.mape, g.roofline.bias,
               g.roofline.kendall_tau);
  }
  for (const auto& s : m.speedups) {
    fmt::print("speed-up {} over {} (nchw) on {}: {} models, tau {:.3f}, MAPE {:.1f}%, bias {:+.1f}%\n", s.faster, s.base,
               s.gpu, s.stats.n, s.stats.kendall_tau, s.stats.mape, s.stats.bias);
  }
  if (worst <= 0) return;
  fmt::print("\nworst models per GPU, runtime and layout (the kernels that cost most)\n");
  for (const auto& g : m.groups) {
    if (g.gpu == "all" || g.family != "all") continue;
    for (const auto& r : g.worst) {
      std::string top;
      for (const auto& [label, us] : r.top) top += fmt::format("{}{} {:.1f} ms", top.empty() ? "" : ", ", label, us / 1e3);
      fmt::print("  {:<22} {:<14} {:<5} {:<32} measured {:>9.2f} ms  predicted {:>9.2f} ({:+.0f}%)  {}\n",
                 g.gpu.substr(0, 22), g.runtime.substr(0, 14), g.layout, r.model.substr(0, 32), r.measured_us / 1e3,
                 r.predicted_us / 1e3, 100 * (r.predicted_us - r.measured_us) / r.measured_us, top);
    }
  }
}

// Fails (returns messages) where an error rose above the recorded figures by more than `tol`
// percentage points, or a tau fell by more than tol / 100.
std::vector<std::string> compare_with(const ValidationReport& rep, const nlohmann::json& rec, double tol) {
  std::vector<std::string> bad;
  std::map<std::pair<std::string, std::string>, const ValidationGroup*> now;
  for (const auto& g : rep.groups) now[{g.gpu, g.op_class}] = &g;
  for (const auto& r : rec.at("groups")) {
    const std::string gpu = r.at("gpu"), cls = r.at("class");
    auto it = now.find({gpu, cls});
    if (it == now.end()) {
      bad.push_back(fmt::format("{} / {}: recorded, but no such rows were validated now", gpu, cls));
      continue;
    }
    const ErrorStats& s = it->second->model;
    const auto& m = r.at("model");
    const double mape = m.at("mape"), p90 = m.at("p90_ape"), bias = m.at("bias"), tau = m.at("kendall_tau");
    const int64_t n = m.at("n");
    if (s.n != n) bad.push_back(fmt::format("{} / {}: {} rows, recorded {}", gpu, cls, s.n, n));
    if (s.mape > mape + tol) bad.push_back(fmt::format("{} / {}: MAPE {:.2f}% rose above the recorded {:.2f}%", gpu, cls, s.mape, mape));
    if (s.p90_ape > p90 + tol) bad.push_back(fmt::format("{} / {}: p90 error {:.2f}% rose above the recorded {:.2f}%", gpu, cls, s.p90_ape, p90));
    if (std::abs(s.bias) > std::abs(bias) + tol) {
      bad.push_back(fmt::format("{} / {}: |bias| {:.2f}% rose above the recorded {:.2f}%", gpu, cls, std::abs(s.bias), std::abs(bias)));
    }
    if (s.kendall_tau < tau - tol / 100) {
      bad.push_back(fmt::format("{} / {}: Kendall tau {:.4f} fell below the recorded {:.4f}", gpu, cls, s.kendall_tau, tau));
    }
  }
  // Whole models: the same per (GPU, runtime, layout, family), and the speed-ups' tau.
  // Language models: per (GPU, backend, test kind).
  if (rec.contains("llm")) {
    for (const auto& r : rec.at("llm").at("groups")) {
      const std::string gpu = r.at("gpu"), backend = r.at("backend"), test = r.at("test");
      const std::string name = fmt::format("{} / {} / {}", gpu, backend, test);
      const LlmGroup* cur = nullptr;
      for (const LlmGroup& g : rep.llm.groups) {
        if (g.gpu == gpu && g.backend == backend && g.test == test) cur = &g;
      }
      if (!cur) {
        bad.push_back(name + ": recorded, but no such language-model rows were validated now");
        continue;
      }
      const auto& m = r.at("stats");
      const double mape = m.at("mape"), bias = m.at("bias");
      if (cur->stats.n != m.at("n").get<int64_t>()) {
        bad.push_back(fmt::format("{}: {} rows, recorded {}", name, cur->stats.n, m.at("n").get<int64_t>()));
      }
      if (cur->stats.mape > mape + tol) bad.push_back(fmt::format("{}: MAPE {:.2f}% rose above the recorded {:.2f}%", name, cur->stats.mape, mape));
      if (std::abs(cur->stats.bias) > std::abs(bias) + tol) {
        bad.push_back(fmt::format("{}: |bias| {:.2f}% rose above the recorded {:.2f}%", name, std::abs(cur->stats.bias), std::abs(bias)));
      }
    }
  }
  if (rec.contains("models")) {
    std::map<std::array<std::string, 4>, const ModelGroup*> mnow;
    for (const auto& g : rep.models.groups) mnow[{g.gpu, g.runtime, g.layout, g.family}] = &g;
    for (const auto& r : rec.at("models").at("groups")) {
      const std::array<std::string, 4> key = {r.at("gpu"), r.at("runtime"), r.at("layout"), r.at("family")};
      const std::string name = fmt::format("{} / {} / {} / {}", key[0], key[1], key[2], key[3]);
      auto it = mnow.find(key);
      if (it == mnow.end()) {
        bad.push_back(name + ": recorded, but no such models were validated now");
        continue;
      }
      const ErrorStats& s = it->second->model;
      const auto& m = r.at("model");
      const double mape = m.at("mape"), bias = m.at("bias"), tau = m.at("kendall_tau");
      if (s.n != m.at("n").get<int64_t>()) bad.push_back(fmt::format("{}: {} models, recorded {}", name, s.n, m.at("n").get<int64_t>()));
      if (s.mape > mape + tol) bad.push_back(fmt::format("{}: MAPE {:.2f}% rose above the recorded {:.2f}%", name, s.mape, mape));
      if (std::abs(s.bias) > std::abs(bias) + tol) {
        bad.push_back(fmt::format("{}: |bias| {:.2f}% rose above the recorded {:.2f}%", name, std::abs(s.bias), std::abs(bias)));
      }
      if (s.kendall_tau < tau - tol / 100) {
        bad.push_back(fmt::format("{}: Kendall tau {:.4f} fell below the recorded {:.4f}", name, s.kendall_tau, tau));
      }
    }
    for (const auto& r : rec.at("models").value("speedups", nlohmann::json::array())) {
      for (const auto& s : rep.models.speedups) {
        if (s.gpu != r.at("gpu") || s.faster != r.at("faster")) continue;
        const double tau = r.at("stats").at("kendall_tau");
        if (s.stats.kendall_tau < tau - tol / 100) {
          bad.push_back(fmt::format("speed-up of {} on {}: Kendall tau {:.4f} fell below the recorded {:.4f}", s.faster,
                                    s.gpu, s.stats.kendall_tau, tau));
        }
      }
    }
  }
  return bad;
}

int run_validate(const ValidateArgs& a) {
  std::vector<std::string> read_notes;
  auto recs = read_measurements(a.truth, &read_notes);
  if (!recs) {
    fmt::print(stderr, "gpusim validate: {}\n", say(recs.error()));
    return recs.error().code == ErrorCode::kIo ? 1 : 2;
  }
  ValidateOptions o;
  o.profile_dirs = a.profile_dirs;
  for (const auto& d : default_profile_dirs()) o.profile_dirs.push_back(d);
  for (const std::string& g : a.gpus) o.gpus.push_back(g);
  o.runtime = a.runtime;
  o.threads = a.threads;
  o.worst = a.worst;
  o.keep_rows = !a.rows.empty();
  for (const std::string& pf : a.profile_for) {
    const size_t eq = pf.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pf.size()) {
      fmt::print(stderr, "gpusim validate: --profile-for \"{}\": expected DEVICE=PROFILE, e.g. \"Tesla T4=nvidia-t4\"\n", pf);
      return 2;
    }
    o.profile_for[pf.substr(0, eq)] = pf.substr(eq + 1);
  }
  FitOptions fo;
  fo.profile_dirs = o.profile_dirs;
  fo.threads = a.threads;
  std::optional<FittedModel> fitted;
  if (a.fit || !a.write_runtimes.empty() || !a.write_efficiency.empty()) {
    auto fm = fit_model(*recs, fo);
    if (!fm) {
      fmt::print(stderr, "gpusim validate: --fit: {}\n", say(fm.error()));
      return exit_code(fm.error());
    }
    fitted = std::move(*fm);
    o.fitted = &*fitted;
    if (!a.json) {
      for (const auto& line : fitted->log) fmt::print("fitted   {}\n", line);
    }
    if (!a.write_runtimes.empty()) {
      for (const auto& [name, rt] : fitted->runtimes) {
        if (rt.combine == "device") continue;
        const std::string path = a.write_runtimes + "/" + name + ".yaml";
        const std::string text = runtime_yaml_with_lowering_of(
            path, fitted_runtime_yaml(rt, fmt::format("gpusim validate --truth {} --write-runtimes {}", a.truth,
                                                      a.write_runtimes),
                                      fitted->gpus));
        if (auto w = write_file_atomic(path, text); !w) {
          fmt::print(stderr, "gpusim validate: --write-runtimes: {}\n", say(w.error()));
          return 1;
        }
        if (!a.json) fmt::print("wrote    {}\n", path);
      }
    }
    if (!a.write_efficiency.empty()) {
      const std::string text = efficiency_yaml_with_measured_of(
          a.write_efficiency,
          vendor_efficiency_to_yaml(fitted_efficiency(*fitted, fmt::format("gpusim validate --truth {} --write-efficiency {}",
                                                                            a.truth, a.write_efficiency)),
                                    fmt::format("{}", fmt::join(fitted->gpus, ", ")), kEfficiencyHow));
      if (auto w = write_file_atomic(a.write_efficiency, text); !w) {
        fmt::print(stderr, "gpusim validate: --write-efficiency: {}\n", say(w.error()));
        return 1;
      }
      if (!a.json) fmt::print("wrote    {}\n", a.write_efficiency);
    }
  }
  if (static_cast<int>(a.logo) + static_cast<int>(a.lofo) + static_cast<int>(a.lomo) + static_cast<int>(a.loao) > 1) {
    fmt::print(stderr, "gpusim validate: --leave-one-gpu-out, --leave-one-architecture-out, --leave-one-family-out and "
                       "--leave-one-model-out are separate runs; give one\n");
    return 2;
  }
  Result<ValidationReport> rep = ValidationReport{};
  if (a.lofo) {
    // Whole models only: each family predicted with figures fitted on the per-op records and the
    // other families' models.
    auto mr = validate_leave_one_family_out(*recs, o, fo);
    if (!mr) {
      rep = mr.error();
    } else {
      rep->models = std::move(*mr);
    }
  } else {
    rep = a.logo   ? validate_leave_one_out(*recs, o, fo)
          : a.lomo ? validate_leave_one_out(*recs, o, fo, nullptr, HoldOut::kModel)
          : a.loao ? validate_leave_one_out(*recs, o, fo, nullptr, HoldOut::kArchitecture)
                   : validate(*recs, o);
  }
  if (!rep) {
    fmt::print(stderr, "gpusim validate: {}\n", say(rep.error()));
    return exit_code(rep.error());
  }
  if (!a.rows.empty()) {
    std::ofstream f(a.rows);
    if (!f) {
      fmt::print(stderr, "gpusim validate: --rows {}: cannot write the file\n", a.rows);
      return 1;
    }
    f << "gpu,op,class,dims,kernel,kernels_launched,measured_us,predicted_us,kernel_us,roofline_us,bound,tile\n";
    for (const auto& r : rep->rows) {
      const Measurement& m = (*recs)[r.record];
      f << fmt::format("\"{}\",{},{},\"{}\",\"{}\",{},{:.4f},{:.4f},{:.4f},{:.4f},{},{}\n", m.gpu, m.op, m.op_class,
                       dims_text(m.dims), m.kernel.substr(0, 80), m.kernels_launched, r.measured_us, r.predicted_us,
                       r.kernel_us, r.roofline_us, r.bound, r.tile);
    }
    // Whole models go to a file of their own beside it: other columns.
    if (!rep->models.rows.empty()) {
      const std::string mpath = a.rows + ".models.csv";
      std::ofstream mf(mpath);
      if (!mf) {
        fmt::print(stderr, "gpusim validate: --rows {}: cannot write the file\n", mpath);
        return 1;
      }
      mf << "gpu,model,runtime,layout,family,batch,measured_us,predicted_us,roofline_us,kernels_us,host_us,kernels,"
            "top_kernels\n";
      for (const auto& r : rep->models.rows) {
        std::string top;
        for (const auto& [label, us] : r.top) top += fmt::format("{}{}={:.1f}", top.empty() ? "" : " ", label, us);
        mf << fmt::format("\"{}\",{},{},{},{},{},{:.2f},{:.2f},{:.2f},{:.2f},{:.2f},{},\"{}\"\n", r.gpu, r.model,
                          r.runtime, r.layout, r.family, r.batch, r.measured_us, r.predicted_us, r.roofline_us,
                          r.kernels_us, r.host_us, r.kernels, top);
      }
    }
  }
  std::vector<std::string> regressions;
  size_t checked_ops = 0, checked_models = 0;
  if (!a.check_against.empty()) {
    nlohmann::json rec;
    try {
      auto read = gpusim::read_user_file(a.check_against, int64_t{256} << 20, "the recorded figures");
      if (!read) throw std::runtime_error(read.error().message);
      rec = nlohmann::json::parse(*read);
      regressions = compare_with(*rep, rec, a.tolerance);
      checked_ops = rec.at("groups").size();
      if (rec.contains("models")) checked_models = rec.at("models").at("groups").size();
    } catch (const std::exception& e) {
      fmt::print(stderr, "gpusim validate: --check-against {}: not recorded figures of `gpusim validate --json` ({})\n",
                 a.check_against, e.what());
      return 2;
    }
  }
  if (a.json) {
    nlohmann::json out = nlohmann::json::parse(validation_document(
        *rep, *recs,
        a.logo ? "leave-one-gpu-out"
               : (a.loao ? "leave-one-architecture-out"
                         : (a.lomo ? "leave-one-model-out" : (a.lofo ? "leave-one-family-out" : (a.fit ? "fit" : "datasheet")))),
        a.truth, a.runtime));
    if (!a.check_against.empty()) out["regressions"] = regressions;
    fmt::print("{}\n", out.dump(1, ' ', false, kInvalidUtf8));
  } else {
    std::set<std::string> gpus;
    for (const auto& g : rep->per_gpu) gpus.insert(g.gpu);
    fmt::print("truth    {}: {} records; {} predicted on {} GPUs in {:.2f} s\n", a.truth, recs->size(),
               rep->overall.model.n, gpus.size(), rep->seconds);
    fmt::print("runtime  {}\n", a.runtime.empty() ? "each record's own (NeuSight: pytorch-eager, pytorch-eager-rocm)" : a.runtime);
    if (a.lofo) {
      fmt::print("mode     leave-one-family-out: each model family predicted with figures fitted on the per-op records "
                 "and the other families' models\n");
    }
    if (a.logo) {
      fmt::print("mode     leave-one-GPU-out: each GPU predicted with host times and efficiencies fitted on the "
                 "others\n");
    }
    if (a.loao) {
      fmt::print("mode     leave-one-architecture-out: every GPU of an architecture predicted with host times and "
                 "efficiencies fitted on the other architectures' GPUs (groups \"ARCHITECTURE: GPU\")\n");
    }
    if (a.lomo) {
      fmt::print("mode     leave-one-model-out: each model's kernels predicted with figures fitted on the other models' "
                 "(groups \"MODEL: GPU\"; \"every model held out\" pools them)\n");
    }
    fmt::print("errors   (predicted - measured) / measured; MAPE, median, p90 of |error|; bias = mean signed error; "
               "tau = Kendall tau-b\n\n");
    if (!rep->groups.empty()) print_table(*rep);
    if (a.worst > 0) {
      fmt::print("\nworst rows per GPU and class (model)\n");
      for (const auto& g : rep->groups) {
        for (const auto& r : g.worst) {
          const Measurement& m = (*recs)[r.record];
          fmt::print("  {:<22} {:<13} {:<8} {:<44} measured {:>10.1f} us  predicted {:>10.1f} ({:+.0f}%)  {} {}\n",
                     g.gpu.substr(0, 22), g.op_class, m.op, dims_text(m.dims).substr(0, 44), r.measured_us,
                     r.predicted_us, 100 * (r.predicted_us - r.measured_us) / r.measured_us, r.bound, r.tile);
        }
      }
      fmt::print("  {}\n", kTileLegend);
    }
    print_models(rep->models, a.worst);
    print_llm(rep->llm, a.worst);
    for (const auto& s : rep->llm.skipped) fmt::print("skipped  {} language-model record(s): {}\n", s.count, say(s.reason));
    for (const auto& s : rep->skipped) fmt::print("skipped  {} record(s): {}\n", s.count, say(s.reason));
    for (const auto& s : rep->models.skipped) fmt::print("skipped  {} model record(s): {}\n", s.count, say(s.reason));
    for (const auto& n : read_notes) fmt::print("note     {}\n", say(n));
  }
  if (rep->overall.model.n == 0 && rep->models.rows.empty() && rep->llm.rows.empty()) {
    fmt::print(stderr, "gpusim validate: nothing was validated: every one of the {} record(s) was skipped (the reasons "
                       "are listed above); give measurements of a GPU with a profile (--profile-for DEVICE=PROFILE "
                       "names one for a device no profile matches)\n",
               recs->size());
    return 1;
  }
  if (!regressions.empty()) {
    for (const auto& r : regressions) fmt::print(stderr, "gpusim validate: regression: {}\n", r);
    fmt::print(stderr, "gpusim validate: {} figure(s) worse than {}; fix the model or, for an intended change, "
                       "re-record the figures with the command in that file\n",
               regressions.size(), a.check_against);
    return 1;
  }
  if (!a.check_against.empty()) {
    fmt::print(stderr, "gpusim validate: --check-against {}: {} per-op group(s) and {} whole-model group(s) checked "
                       "(MAPE, p90, |bias| within {} points, tau, row counts): none worse\n",
               a.check_against, checked_ops, checked_models, a.tolerance);
  }
  return 0;
}

}  // namespace

void add_validate(CLI::App& app, int& rc) {
  auto a = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand("validate", "Predict measured records and report the simulator's errors per GPU and op class");
  cmd->add_option("--truth", a->truth, "Measurements: a NeuSight CSV(.xz), gpusim run/calibration JSON, a store (.db) or a directory of them")
      ->required();
  cmd->add_option("--gpu", a->gpus, "Only these GPUs (profile or device names; repeatable, comma-separated)")->delimiter(',');
  cmd->add_option("--runtime", a->runtime, "Predict every record under this runtime (pytorch-eager, cuda-graph, gpusim) instead of its own");
  cmd->add_option("--profiles", a->profile_dirs, "Extra directories of GPU profiles");
  cmd->add_option("--profile-for", a->profile_for, "DEVICE=PROFILE for a device no profile's display_name matches (repeatable)");
  cmd->add_option("--rows", a->rows,
                  "Write every row (measured, predicted, kernel, roofline, bound, tile) to this CSV, and whole models "
                  "to FILE.models.csv");
  cmd->add_option("--worst", a->worst, "Worst rows shown per GPU and class (default 3)");
  cmd->add_option("--threads", a->threads, "Prediction threads (default: all cores)");
  cmd->add_option("--check-against", a->check_against, "Recorded figures (JSON of an earlier --json run): exit 1 if an error rose");
  cmd->add_option("--tolerance", a->tolerance, "Percentage points an error may rise before --check-against fails (default 0.1)");
  cmd->add_flag("--json", a->json, "Print JSON (schema gpusim.validate/1)");
  cmd->add_flag("--leave-one-family-out", a->lofo,
                "Whole models: fit on the per-op records and every model family but one (config family: attention, "
                "conv), predict that one; each in turn");
  cmd->add_flag("--leave-one-model-out", a->lomo,
                "gpusim run records: fit on every model's kernels but one (host times, efficiencies and the own-kernel "
                "chain constants), predict that model's; each in turn");
  cmd->add_flag("--leave-one-gpu-out", a->logo,
                "Fit runtime host times and vendor efficiencies on all GPUs but one, predict that one; each in turn");
  cmd->add_flag("--leave-one-architecture-out", a->loao,
                "The same with every GPU of one architecture held out together (Pascal, Ampere, CDNA2, ... by their "
                "profiles): a generation the fit has not seen; each in turn");
  cmd->add_flag("--fit", a->fit, "Fit host times and vendor efficiencies on these records first (in-sample), and print them");
  cmd->add_option("--write-runtimes", a->write_runtimes, "Fit, then write each fitted runtime as DIR/NAME.yaml");
  cmd->add_option("--write-efficiency", a->write_efficiency,
                  "Fit, then write the vendor efficiencies as FILE (gpu_profiles/_efficiency.yaml: the defaults of "
                  "every profile of that vendor)");
  cmd->callback([a, &rc] { rc = run_validate(*a); });
}

void add_truth(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("truth", "The measurement store: import measurements, count what it holds");
  cmd->require_subcommand(1);
  auto db = std::make_shared<std::string>();
  auto sources = std::make_shared<std::vector<std::string>>();
  auto* imp = cmd->add_subcommand("import", "Add measurements to a store (created if absent); duplicates are skipped");
  imp->add_option("--db", *db, "The store (SQLite file)")->required();
  imp->add_option("sources", *sources, "NeuSight CSV(.xz), gpusim run --json output, calibration raw data, or directories")
      ->required();
  imp->callback([db, sources, &rc] {
    auto store = MeasurementStore::open(*db);
    if (!store) {
      fmt::print(stderr, "gpusim truth import: {}\n", say(store.error()));
      rc = 1;
      return;
    }
    for (const std::string& s : *sources) {
      std::vector<std::string> notes;
      auto recs = read_measurements(s, &notes);
      for (const auto& n : notes) fmt::print("note: {}\n", say(n));
      if (!recs) {
        fmt::print(stderr, "gpusim truth import: {}\n", say(recs.error()));
        rc = recs.error().code == ErrorCode::kIo ? 1 : 2;
        return;
      }
      auto st = store->insert(*recs, fmt::format("gpusim truth import --db {} {}", *db, s));
      if (!st) {
        fmt::print(stderr, "gpusim truth import: {}\n", say(st.error()));
        rc = 1;
        return;
      }
      fmt::print("{}: {} records, {} added, {} already in {}\n", s, recs->size(), st->added, st->duplicates, *db);
    }
  });
  auto sdb = std::make_shared<std::string>();
  auto* stats = cmd->add_subcommand("stats", "Count a store's records per source, GPU and op class");
  stats->add_option("--db", *sdb, "The store (SQLite file)")->required();
  stats->callback([sdb, &rc] {
    auto store = MeasurementStore::open_read(*sdb);
    if (!store) {
      fmt::print(stderr, "gpusim truth stats: {}\n", say(store.error()));
      rc = 1;
      return;
    }
    auto recs = store->query();
    if (!recs) {
      fmt::print(stderr, "gpusim truth stats: {}\n", say(recs.error()));
      rc = 1;
      return;
    }
    std::map<std::tuple<std::string, std::string, std::string>, int64_t> n;
    for (const auto& m : *recs) ++n[{m.source, m.gpu, m.op_class}];
    fmt::print("{}: {} records\n", *sdb, recs->size());
    fmt::print("{:<20} {:<28} {:<14} {:>8}\n", "source", "gpu", "class", "records");
    for (const auto& [k, c] : n) {
      fmt::print("{:<20} {:<28} {:<14} {:>8}\n", std::get<0>(k), std::get<1>(k), std::get<2>(k), c);
    }
    auto compiled = store->compiled();
    if (!compiled) {
      fmt::print(stderr, "gpusim truth stats: {}\n", say(compiled.error()));
      rc = 1;
      return;
    }
    if (!compiled->empty()) {
      std::map<std::pair<std::string, std::string>, std::array<int64_t, 2>> per;  // (arch, compiler): kernels, spilling
      for (const auto& c : *compiled) {
        auto& v = per[{c.arch, c.compiler}];
        ++v[0];
        if (c.spill_bytes > 0) ++v[1];
      }
      fmt::print("\ncompiled figures (gpusim codegen report --db): {} kernels\n", compiled->size());
      fmt::print("{:<10} {:<34} {:>8} {:>9}\n", "arch", "compiler", "kernels", "spilling");
      for (const auto& [k, v] : per) fmt::print("{:<10} {:<34} {:>8} {:>9}\n", k.first, k.second, v[0], v[1]);
    }
  });
}

}  // namespace gpusim::cli
