// Language-model validation (include/gpusim/validate.h, validate_llm): llama-bench's prompt and
// generation tests predicted as generations of the bundled descriptions, scored per GPU, backend
// and test, with the quantized-over-F16 speed ratio checked per GPU.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "gpusim/llm.h"
#include "gpusim/validate.h"
#include "targets.h"

namespace gpusim {
namespace {

std::string cfg(const Measurement& m, const char* key) {
  auto it = m.config.find(key);
  return it == m.config.end() ? std::string() : it->second;
}

bool is_llm(const Measurement& m) { return m.op_class == "model" && cfg(m, "family") == "llm"; }

// A row predicted at gap 0: its kernel time and kernel count; the gap is added after the fit.
struct Priced {
  size_t record = 0;
  std::string profile, backend;
  double kernels_us = 0;
  int64_t kernels = 0;
  std::string bound;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The gap that makes the median tg row of `rows` (indices into `priced`) exact: each row's
// (measured - kernels) / kernels, never below 0.
double fit_gap(const std::vector<Measurement>& records, const std::vector<Priced>& priced, const std::vector<size_t>& rows) {
  std::vector<double> g;
  for (size_t i : rows) {
    const Priced& p = priced[i];
    const Measurement& m = records[p.record];
    if (!m.dims.count("generate") || p.kernels == 0) continue;
    g.push_back(std::max(0.0, (m.time_us - p.kernels_us) / static_cast<double>(p.kernels)));
  }
  return median(g);
}

}  // namespace

Result<LlmReport> validate_llm(const std::vector<Measurement>& records, const ValidateOptions& opts, bool leave_one_gpu_out,
                               const std::map<std::string, std::string>& held_with) {
  LlmReport rep;
  rep.leave_one_gpu_out = leave_one_gpu_out;
  rep.leave_one_architecture_out = leave_one_gpu_out && !held_with.empty();
  // The group a GPU is held out with: its architecture, else itself.
  const auto group = [&held_with](const std::string& gpu) {
    const auto it = held_with.find(gpu);
    return it == held_with.end() ? gpu : it->second;
  };
  truth::Targets targets(opts);
  std::map<std::string, int64_t> skip;
  std::map<std::string, LlmSpec> specs;
  std::map<std::string, double> runtime_gap;  // backend -> its runtime file's figure
  std::vector<Priced> priced;
  for (size_t i = 0; i < records.size(); ++i) {
    const Measurement& m = records[i];
    if (!is_llm(m)) continue;
    const truth::Target* t = targets.find(m.gpu);
    if (!targets.wanted(m.gpu, t)) continue;
    if (!t) {
      ++skip[targets.why_missing(m.gpu)];
      continue;
    }
    if (m.dims.count("prompt") == m.dims.count("generate") || !(m.time_us > 0)) {
      ++skip["a language-model record needs one dim, prompt or generate (llama-bench's ppN or tgN), and a positive time"];
      continue;
    }
    if (!cfg(m, "unpriced").empty()) {
      ++skip[cfg(m, "unpriced")];
      continue;
    }
    auto sit = specs.find(m.op);
    if (sit == specs.end()) {
      auto s = find_llm_spec(m.op, default_llm_dirs());
      if (!s) {
        ++skip[s.error().message];
        continue;
      }
      sit = specs.emplace(m.op, std::move(*s)).first;
    }
    const std::string weights = cfg(m, "weights");
    if (!llm_file_type(weights)) {
      ++skip[fmt::format("weights {} are not a file type gpusim models", weights)];
      continue;
    }
    GenerationOptions o;
    const bool pp = m.dims.count("prompt") > 0;
    o.prompt = pp ? m.dims.at("prompt") : 0;
    o.generate = pp ? 0 : m.dims.at("generate");
    o.weights = weights;
    o.backend = m.backend;
    o.flash_attention = cfg(m, "flash_attn") == "1";
    o.cuda_prompt = cfg(m, "cuda_prompt");
    if (const std::string ub = cfg(m, "n_ubatch"); !ub.empty()) {
      const auto [end, ec] = std::from_chars(ub.data(), ub.data() + ub.size(), o.ubatch);
      if (ec != std::errc() || end != ub.data() + ub.size()) {
        ++skip[fmt::format("config n_ubatch \"{}\" is not a whole number", ub.substr(0, 64))];
        continue;
      }
    }
    o.kernel_gap_us = 0.0;
    auto g = predict_generation(sit->second, t->library, o);
    if (!g) {
      ++skip[g.error().message];
      continue;
    }
    const GenerationPhase& ph = pp ? g->prefill : g->decode;
    Priced p;
    p.record = i;
    p.profile = t->profile;
    p.backend = m.backend;
    p.kernels_us = ph.time_us;
    p.kernels = ph.kernels;
    p.bound = ph.bound;
    priced.push_back(p);
    if (!runtime_gap.count(m.backend)) {
      auto rt = find_runtime(llm_runtime_name(m.backend), default_runtime_dirs());
      runtime_gap[m.backend] = rt ? rt->default_us : t->gpu.launch.overhead_us;
    }
  }
  for (const auto& [why, n] : skip) rep.skipped.push_back({why, n});

  // The gaps: per backend on every GPU (reported), and per held-out GPU on the others.
  std::map<std::string, std::vector<size_t>> by_backend;
  for (size_t i = 0; i < priced.size(); ++i) by_backend[priced[i].backend].push_back(i);
  for (const auto& [b, rows] : by_backend) rep.gaps[b] = fit_gap(records, priced, rows);
  for (size_t i = 0; i < priced.size(); ++i) {
    const Priced& p = priced[i];
    const Measurement& m = records[p.record];
    double gap = rep.gaps[p.backend];
    if (leave_one_gpu_out) {
      std::vector<size_t> others;
      for (size_t j : by_backend[p.backend]) {
        if (group(records[priced[j].record].gpu) != group(m.gpu)) others.push_back(j);
      }
      bool any_tg = false;
      for (size_t j : others) any_tg = any_tg || records[priced[j].record].dims.count("generate") > 0;
      gap = any_tg ? fit_gap(records, priced, others) : runtime_gap[p.backend];
    }
    LlmRow r;
    r.record = p.record;
    r.model = m.op;
    r.gpu = m.gpu;
    r.profile = p.profile;
    r.backend = p.backend;
    r.weights = *llm_file_type(cfg(m, "weights"));
    r.test = cfg(m, "test");
    r.tokens = m.dims.count("prompt") ? m.dims.at("prompt") : m.dims.at("generate");
    r.measured_us = m.time_us;
    r.kernels_us = p.kernels_us;
    r.kernels = p.kernels;
    r.gap_us = gap;
    r.predicted_us = p.kernels_us + gap * static_cast<double>(p.kernels);
    r.bound = p.bound;
    rep.rows.push_back(std::move(r));
  }

  // Groups.
  auto stats_of = [&](auto keep) {
    std::vector<double> pr, me;
    for (const LlmRow& r : rep.rows) {
      if (keep(r)) {
        pr.push_back(r.predicted_us);
        me.push_back(r.measured_us);
      }
    }
    return error_stats(pr, me);
  };
  auto kind = [](const LlmRow& r) { return r.test.substr(0, 2); };
  std::set<std::tuple<std::string, std::string, std::string>> keys;
  for (const LlmRow& r : rep.rows) {
    keys.insert({r.gpu, r.backend, kind(r)});
    keys.insert({"all", r.backend, kind(r)});
    keys.insert({"all", "all", kind(r)});
  }
  for (const auto& key : keys) {
    const std::string& gpu = std::get<0>(key);
    const std::string& backend = std::get<1>(key);
    const std::string& test = std::get<2>(key);
    LlmGroup grp{gpu, backend, test, {}};
    grp.stats = stats_of([&](const LlmRow& r) {
      return (gpu == "all" || r.gpu == gpu) && (backend == "all" || r.backend == backend) && kind(r) == test;
    });
    rep.groups.push_back(std::move(grp));
  }
  auto target = [&](const LlmRow& r, const char* test) {
    return (r.backend == "cuda" || r.backend == "metal") &&
           (r.weights == "F16" || r.weights == "Q8_0" || r.weights == "Q4_0") && r.test == test;
  };
  rep.target_tg = stats_of([&](const LlmRow& r) { return target(r, "tg128"); });
  rep.target_pp = stats_of([&](const LlmRow& r) { return target(r, "pp512"); });

  // Ratios: the mean time of each quantized type over F16's, same GPU, backend, model and test.
  // Rows of one build only: a ratio across builds would measure the build. A row that names no
  // build is of the build its source ran that day: rows of another page or date are another build
  // (a 2023 pull request's Metal prompt ran at 0.8x the speed a 2024 thread's did, same GPU).
  // (The reader names the driver "llama.cpp" alone where the row gives no build.)
  auto build_of = [](const Measurement& m) {
    return m.driver != "llama.cpp" ? m.driver : fmt::format("{} of {} {}", m.driver, cfg(m, "source_url"), cfg(m, "date"));
  };
  using Key = std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>;
  std::map<Key, std::pair<std::vector<double>, std::vector<double>>> t;
  for (const LlmRow& r : rep.rows) {
    auto& v = t[{r.gpu, r.backend, r.model, r.test, build_of(records[r.record]), r.weights}];
    v.first.push_back(r.measured_us);
    v.second.push_back(r.predicted_us);
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  for (const auto& [k, v] : t) {
    const auto& [gpu, backend, model, test, build, weights] = k;
    if (weights == "F16") continue;
    auto f16 = t.find({gpu, backend, model, test, build, "F16"});
    if (f16 == t.end()) continue;
    LlmRatio ra{gpu, backend, model, test, weights, mean(v.first) / mean(f16->second.first),
                mean(v.second) / mean(f16->second.second), 0};
    ra.error_pct = 100.0 * (ra.predicted - ra.measured) / ra.measured;
    rep.ratios.push_back(std::move(ra));
  }
  return rep;
}

}  // namespace gpusim
