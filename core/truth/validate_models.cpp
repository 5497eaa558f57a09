// Whole-model validation (include/gpusim/validate.h, validate_models): each model record's graph
// lowered by its runtime and priced on its GPU's profile, scored per GPU, runtime, layout and
// family, with the speed-up of one runtime over another ranked across models.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "gpusim/cancel.h"
#include "gpusim/onnx_import.h"
#include "gpusim/predict.h"
#include "gpusim/validate.h"
#include "targets.h"
#include "base/parallel.h"

namespace gpusim {
namespace {

std::string config(const Measurement& m, const char* key, const std::string& def = "") {
  auto it = m.config.find(key);
  return it == m.config.end() ? def : it->second;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// What a kernel of a prediction is called in reports: the runtime pattern or fusion, else its op.
std::string kernel_label(const PlannedKernel& k) { return k.fusions.empty() ? k.op_type : k.fusions.back(); }

}  // namespace

struct ModelCache {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Lowering>> lowered;
};

std::shared_ptr<ModelCache> make_model_cache() { return std::make_shared<ModelCache>(); }

Result<ModelReport> validate_models(const std::vector<Measurement>& records, const ValidateOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  ModelReport rep;
  truth::Targets targets(opts);
  struct Job {
    size_t record;
    const truth::Target* target;
    const RuntimeModel* runtime;
    const Graph* graph;
  };
  std::vector<Job> jobs;
  std::map<std::string, int64_t> skip_counts;
  // Graphs imported once per (graph, batch), before the predictions run in parallel.
  std::map<std::pair<std::string, int64_t>, Graph> graphs;
  std::map<std::pair<std::string, int64_t>, std::string> graph_errors;
  for (size_t i = 0; i < records.size(); ++i) {
    const Measurement& m = records[i];
    if (m.op_class != "model") continue;
    if (m.config.count("family") && m.config.at("family") == "llm") continue;  // validate_llm
    const truth::Target* t = targets.find(m.gpu);
    if (!targets.wanted(m.gpu, t)) continue;
    if (!t) {
      ++skip_counts[targets.why_missing(m.gpu)];
      continue;
    }
    if (m.config.count("unpriced")) {
      // One line for all of them (each record's config says which graph size it lacked).
      ++skip_counts["no graph prices the configuration measured (another image size than the graph's; the record's "
                    "config \"unpriced\" names it)"];
      continue;
    }
    if (m.graph.empty() || !m.graph_bytes) {
      ++skip_counts[fmt::format("{}: the record names no graph gpusim has ({})", m.source_ref,
                                m.graph.empty() ? "none given" : m.graph)];
      continue;
    }
    auto rt = targets.runtime(m.runtime);
    if (!rt) {
      ++skip_counts[rt.error().message];
      continue;
    }
    const auto bit = m.dims.find("batch");
    const int64_t batch = bit == m.dims.end() ? 1 : bit->second;
    const auto key = std::make_pair(m.graph, batch);
    if (!graphs.count(key) && !graph_errors.count(key)) {
      ImportOptions io;
      io.dims["batch"] = batch;
      auto g = import_onnx_bytes(*m.graph_bytes, m.graph, io);
      if (g) {
        graphs.emplace(key, std::move(*g));
      } else {
        graph_errors[key] = g.error().message;
      }
    }
    if (auto e = graph_errors.find(key); e != graph_errors.end()) {
      ++skip_counts[e->second];
      continue;
    }
    jobs.push_back({i, t, *rt, &graphs.at(key)});
  }

  std::vector<ModelRow> rows(jobs.size());
  std::vector<std::string> errors(jobs.size());
  std::atomic<size_t> next{0};
  const CancelToken* cancel = current_cancel_token();
  auto worker = [&] {
    for (size_t q = next.fetch_add(1); q < jobs.size(); q = next.fetch_add(1)) {
      if (cancel != nullptr && cancel->cancelled()) return;
      const Job& job = jobs[q];
      const Measurement& m = records[job.record];
      ModelRow& row = rows[q];
      row.record = job.record;
      row.model = m.op;
      row.gpu = m.gpu;
      row.profile = job.target->profile;
      row.runtime = m.runtime;
      row.layout = config(m, "layout", "nchw");
      row.family = config(m, "family", "all");
      row.batch = m.dims.count("batch") ? m.dims.at("batch") : 1;
      row.measured_us = m.time_us;
      PredictOptions po;
      po.runtime = *job.runtime;
      po.host_copies = false;
      po.lowering.layout = row.layout;
      po.lowering.skip = split_list(config(m, "skip"));
      const std::string prec = config(m, "precision", "fp32");
      if (prec == "amp-fp16") {
        po.lowering.autocast = DType::kFloat16;
      } else if (prec == "amp-bf16") {
        po.lowering.autocast = DType::kBFloat16;
      } else if (auto d = float_dtype_from_name(prec)) {
        po.dtype = *d;
      }
      // Lowered once per configuration when a cache is given (a fit prices the same models again
      // and again with other figures); the lowering depends on none of them.
      Result<Prediction> p = Prediction{};
      if (opts.model_cache && job.runtime && !job.runtime->lowering.empty()) {
        const std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}", m.graph, row.batch, m.runtime, po.lowering.layout,
                                            po.lowering.autocast ? dtype_name(*po.lowering.autocast) : "-",
                                            config(m, "skip"), po.dtype ? dtype_name(*po.dtype) : "-");
        std::shared_ptr<const Lowering> low;
        {
          std::lock_guard<std::mutex> lock(opts.model_cache->mu);
          if (auto it = opts.model_cache->lowered.find(key); it != opts.model_cache->lowered.end()) low = it->second;
        }
        if (!low) {
          const Graph g = po.dtype ? retype(*job.graph, *po.dtype) : *job.graph;
          auto l = lower(g, *job.runtime, po.lowering);
          if (!l) {
            errors[q] = fmt::format("{} ({}): {}", m.source_ref, m.op, l.error().message);
            continue;
          }
          low = std::make_shared<const Lowering>(std::move(*l));
          std::lock_guard<std::mutex> lock(opts.model_cache->mu);
          opts.model_cache->lowered.emplace(key, low);
        }
        p = predict_lowering(*low, job.target->library, po);
      } else {
        p = predict(*job.graph, job.target->library, po);
      }
      if (!p) {
        errors[q] = fmt::format("{} ({}): {}", m.source_ref, m.op, p.error().message);
        continue;
      }
      row.predicted_us = p->total_us;
      row.kernels_us = p->kernels_us;
      row.host_us = p->host_us;
      row.kernels = static_cast<int>(p->kernels.size());
      double roof = 0;
      std::map<std::string, double> by_label;
      for (const PlannedKernel& k : p->kernels) {
        roof += roofline_us(k.work, job.target->dev);
        by_label[kernel_label(k)] += k.cost.total_us;
      }
      row.roofline_us = std::max(roof, p->host_us);
      std::vector<std::pair<std::string, double>> top(by_label.begin(), by_label.end());
      std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
      if (top.size() > 3) top.resize(3);
      row.top = std::move(top);
    }
  };
  const int nthreads = opts.threads > 0 ? opts.threads : base::core_count();
  // A cancelled caller (cancel.h) stops every thread at its next record, then throws.
  base::run_cancellable(nthreads, worker);
  std::vector<ModelRow> kept;
  for (size_t q = 0; q < rows.size(); ++q) {
    if (!errors[q].empty()) {
      ++skip_counts[errors[q]];
      continue;
    }
    kept.push_back(std::move(rows[q]));
  }
  ModelReport summary = summarize_models(std::move(kept), opts.worst);
  summary.skipped = rep.skipped;
  rep = std::move(summary);
  for (const auto& [why, n] : skip_counts) rep.skipped.push_back({why, n});
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

ModelReport summarize_models(std::vector<ModelRow> rows, int worst) {
  ModelReport rep;
  rep.rows = std::move(rows);

  // Groups: per (GPU, runtime, layout, family), each pooled over family, then over GPUs and layouts.
  std::map<std::array<std::string, 4>, std::vector<size_t>> by;
  std::map<std::string, std::string> profile_of;
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const ModelRow& r = rep.rows[i];
    profile_of[r.gpu] = r.profile;
    for (const std::string& fam : {r.family, std::string("all")}) {
      by[{r.gpu, r.runtime, r.layout, fam}].push_back(i);
      by[{"all", r.runtime, "all", fam}].push_back(i);
    }
  }
  for (const auto& [key, idx] : by) {
    ModelGroup g;
    g.gpu = key[0];
    g.profile = key[0] == "all" ? "" : profile_of[key[0]];
    g.runtime = key[1];
    g.layout = key[2];
    g.family = key[3];
    std::vector<double> pred, roof, meas;
    for (size_t i : idx) {
      pred.push_back(rep.rows[i].predicted_us);
      roof.push_back(rep.rows[i].roofline_us);
      meas.push_back(rep.rows[i].measured_us);
    }
    g.model = error_stats(pred, meas);
    g.roofline = error_stats(roof, meas);
    std::vector<size_t> order = idx;
    auto ape = [&](size_t i) { return std::abs(rep.rows[i].predicted_us / rep.rows[i].measured_us - 1); };
    const size_t nworst = std::min(order.size(), static_cast<size_t>(std::max(0, worst)));
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(nworst), order.end(),
                      [&](size_t a, size_t b) { return ape(a) > ape(b); });
    for (size_t i = 0; i < nworst; ++i) g.worst.push_back(rep.rows[order[i]]);
    rep.groups.push_back(std::move(g));
  }
  // Speed-ups: per GPU and model, each runtime against pytorch-eager in NCHW (per-sample times).
  std::map<std::pair<std::string, std::string>, std::map<std::string, const ModelRow*>> per_model;
  for (const ModelRow& r : rep.rows) {
    const std::string key = r.runtime == "pytorch-eager" ? (r.layout == "nchw" ? "base" : "") : r.runtime;
    if (!key.empty()) per_model[{r.gpu, r.model}][key] = &r;
  }
  std::map<std::pair<std::string, std::string>, std::pair<std::vector<double>, std::vector<double>>> speed;
  for (const auto& [gm, rs] : per_model) {
    auto base = rs.find("base");
    if (base == rs.end()) continue;
    for (const auto& [rt, r] : rs) {
      if (rt == "base") continue;
      auto per_sample = [](const ModelRow& x, double us) { return us / static_cast<double>(std::max<int64_t>(1, x.batch)); };
      const ModelRow& b = *base->second;
      auto& s = speed[{gm.first, rt}];
      s.first.push_back(per_sample(b, b.predicted_us) / per_sample(*r, r->predicted_us));
      s.second.push_back(per_sample(b, b.measured_us) / per_sample(*r, r->measured_us));
    }
  }
  for (const auto& [key, pm] : speed) rep.speedups.push_back({key.first, "pytorch-eager", key.second, error_stats(pm.first, pm.second)});
  return rep;
}

}  // namespace gpusim
