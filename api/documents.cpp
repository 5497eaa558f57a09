// The JSON documents of include/gpusim/documents.h: one place that writes each schema.
#include "gpusim/documents.h"

#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "gpusim/cancel.h"
#include "gpusim/gpusim.h"
#include "sim/work_json.h"
#include "base/json_text.h"

namespace gpusim {
namespace {

using nlohmann::json;

json kernel_json(const Prediction& p, const PlannedKernel& k) {
  const KernelCost& c = k.cost;
  return {{"name", k.name},
          {"op_type", k.op_type},
          {"nodes", k.node_names},
          {"fusions", k.fusions},
          {"kind", std::string(kernel_kind_name(k.kind))},
          {"call", k.call},
          {"class", std::string(op_class_name(k.work.cls))},
          {"start_us", k.start_us},
          {"time_us", c.total_us},
          {"share", p.kernels_us > 0 ? c.total_us / p.kernels_us : 0},
          {"bound", std::string(bound_name(c.bound))},
          {"compute_us", c.compute_us},
          {"dram_us", c.dram_us},
          {"l2_us", c.l2_us},
          {"latency_us", c.latency_us},
          {"floor_us", c.floor_us},
          {"ctas", c.ctas},
          {"ctas_per_unit", c.ctas_per_unit},
          {"occupancy_limiter", c.occupancy_limiter},
          {"occupancy", c.occupancy},
          {"waves", c.waves},
          {"last_wave_fraction", c.last_wave_fraction},
          {"matrix_units", c.matrix_units}, {"tf32", c.tf32},
          {"peak_tflops", c.peak_tflops},
          {"achieved_tflops", p.achieved_tflops(k)},
          {"achieved_gbps", p.achieved_gbps(k)},
          {"macs", k.work.macs},
          {"flops", k.work.flops.total()},
          {"dram_bytes", c.dram_bytes},
          {"l2_bytes", c.l2_bytes},
          {"tile",
           {{"block_m", c.tile.block_m}, {"block_n", c.tile.block_n}, {"block_k", c.tile.block_k},
            {"threads", c.tile.threads}, {"stages", c.tile.stages}, {"split_k", c.tile.split_k},
            {"vector_width", c.tile.vector_width}, {"items_per_thread", c.tile.items_per_thread}}}};
}

json cache_json(const CacheSpec& c) {
  if (!c.present) return nullptr;
  return {{"size_mb", c.size_mb}, {"bandwidth_gbps", c.bandwidth_gbps}, {"latency_ns", c.latency_ns}};
}

json stats_json(const ErrorStats& s) {
  return {{"n", s.n},       {"mape", s.mape}, {"median_ape", s.median_ape}, {"p90_ape", s.p90_ape},
          {"bias", s.bias}, {"kendall_tau", s.kendall_tau}};
}

json group_json(const ValidationGroup& g, const std::vector<Measurement>& recs) {
  json worst = json::array();
  for (const auto& r : g.worst) {
    const Measurement& m = recs.at(r.record);
    worst.push_back({{"op", m.op},
                     {"dims", m.dims},
                     {"measured_us", r.measured_us},
                     {"predicted_us", r.predicted_us},
                     {"kernel_us", r.kernel_us},
                     {"roofline_us", r.roofline_us},
                     {"bound", r.bound},
                     {"tile", r.tile},
                     {"kernel", m.kernel},
                     {"source", m.source_ref}});
  }
  return {{"gpu", g.gpu},
          {"profile", g.profile},
          {"class", g.op_class},
          {"model", stats_json(g.model)},
          {"roofline", stats_json(g.roofline)},
          {"worst", worst}};
}

// `doc` as json::dump(2) writes it, with its top-level array member `key` written element by
// element (`element(i)` for i < n, each a JSON value) instead of held whole as one tree: a large
// answer's tree cost about 11 KB a kernel (1.4 GB for a 100,000-node graph's prediction). The text
// is the same. `element` may check for cancellation.
std::string dump_with_array(json doc, const std::string& key, size_t n, const std::function<json(size_t)>& element) {
  const std::string marker = "\x01gpusim-" + key + "\x01";  // dumped as \u0001gpusim-KEY\u0001
  doc[key] = marker;
  const std::string head = doc.dump(2, ' ', false, kInvalidUtf8);
  const std::string placed = "\"" + key + "\": " + json(marker).dump(-1, ' ', false, kInvalidUtf8);
  const size_t at = head.find(placed);
  std::string out;
  out.append(head, 0, at + key.size() + 4);  // through "key":
  if (n == 0) {
    out += "[]";
  } else {
    out += "[\n";
    for (size_t i = 0; i < n; ++i) {
      out += "    ";
      for (char c : element(i).dump(2, ' ', false, kInvalidUtf8)) {  // one level deeper: every line shifted
        out += c;
        if (c == '\n') out += "    ";
      }
      out += i + 1 < n ? ",\n" : "\n";
    }
    out += "  ]";
  }
  out.append(head, at + placed.size(), std::string::npos);
  return out;
}

}  // namespace

std::string prediction_document(const Prediction& p, const GpuProfile& gpu) {
  json ts = json::array();
  for (const auto& t : p.transfers) {
    ts.push_back({{"tensor", t.tensor}, {"direction", t.to_device ? "h2d" : "d2h"}, {"bytes", t.bytes},
                  {"start_us", t.start_us}, {"duration_us", t.duration_us}});
  }
  const json doc = {{"schema", "gpusim.predict/1"},
                    {"model", p.model},
                    {"gpu", p.gpu},
                    {"gpu_display_name", gpu.display_name},
                    {"dtype", std::string(dtype_name(p.dtype))},
                    {"total_us", p.total_us},
                    {"kernels_us", p.kernels_us},
                    {"launch_bound_us", p.launch_bound_us},
                    {"runtime", p.runtime},
                    {"tiles", p.tiles},
                    {"host_us", p.host_us},
                    {"host", p.host},
                    {"kernel_count", p.kernels.size()},
                    {"peak_memory_bytes", p.peak_memory_bytes},
                    {"weight_bytes", p.weight_bytes},
                    {"fits_in_memory", p.fits_in_memory},
                    {"energy_j", p.energy_j},
                    {"transfers", ts},
                    {"notes", p.notes}};
  return dump_with_array(doc, "kernels", p.kernels.size(), [&](size_t i) {
    if (i % 256 == 0) check_cancelled();  // a request past its time limit stops writing its answer
    return kernel_json(p, p.kernels[i]);
  });
}

std::string compare_document(const std::string& model, const std::vector<ComparedGpu>& rows) {
  json out = json::array();
  const double first = rows.empty() ? 0 : rows.front().prediction.total_us;
  for (const ComparedGpu& r : rows) {
    const Prediction& p = r.prediction;
    std::map<Bound, double> bound;
    for (const auto& k : p.kernels) bound[k.cost.bound] += k.cost.total_us;
    auto share = [&](Bound b) { return p.kernels_us > 0 ? bound[b] / p.kernels_us : 0.0; };
    out.push_back({{"gpu", r.gpu.name}, {"total_us", p.total_us}, {"speedup_vs_first", first / p.total_us},
                   {"compute_share", share(Bound::kCompute)}, {"dram_share", share(Bound::kDram)},
                   {"l2_share", share(Bound::kL2)}, {"latency_share", share(Bound::kLatency)},
                   {"peak_memory_bytes", p.peak_memory_bytes}, {"fits_in_memory", p.fits_in_memory},
                   {"energy_j", p.energy_j}});
  }
  return json{{"schema", "gpusim.compare/1"}, {"model", model}, {"gpus", out}}.dump(2, ' ', false, kInvalidUtf8);
}

std::string run_trace(const RunReport& r) {
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", r.model}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 1},
                    {"args", {{"name", fmt::format("measured on {} (each kernel's median, end to end)", r.backend)}}}});
  const bool predicted = std::any_of(r.kernels.begin(), r.kernels.end(), [](const KernelReport& k) { return k.predicted_us.has_value(); });
  if (predicted) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", 2},
                      {"args", {{"name", fmt::format("predicted ({})", r.gpu.value_or("profile"))}}}});
  }
  double t = 0, tp = 0;
  for (const KernelReport& k : r.kernels) {
    json args = {{"measured_us", k.measured_us}, {"min_us", k.min_us}, {"max_us", k.max_us}, {"launches", k.launches},
                 {"class", k.cls}, {"on_device", k.device}};
    if (k.predicted_us) args["predicted_us"] = *k.predicted_us;
    events.push_back({{"name", k.op_type}, {"cat", k.cls}, {"ph", "X"}, {"pid", 1}, {"tid", 1}, {"ts", t},
                      {"dur", k.measured_us}, {"args", args}});
    t += k.measured_us;
    if (k.predicted_us) {
      events.push_back({{"name", k.op_type}, {"cat", k.cls}, {"ph", "X"}, {"pid", 1}, {"tid", 2}, {"ts", tp},
                        {"dur", *k.predicted_us}, {"args", {{"kernel", k.name}, {"measured_us", k.measured_us}}}});
      tp += *k.predicted_us;
    }
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(-1, ' ', false, kInvalidUtf8);
}

std::string runtime_comparison_document(const std::string& model, const std::vector<RuntimeComparison>& batches) {
  json out = json::array();
  json skipped = json::array();
  std::string gpu;
  for (const RuntimeComparison& c : batches) {
    gpu = c.gpu;
    json rows = json::array();
    int rank = 0;
    for (const ComparedRuntime& r : c.rows) {
      const Prediction& p = r.prediction;
      rows.push_back({{"rank", ++rank},
                      {"runtime", r.runtime},
                      {"tiles", std::string(tile_space_name(r.tiles))},
                      {"total_us", p.total_us},
                      {"items_per_s", r.items_per_s},
                      {"kernels", p.kernels.size()},
                      {"kernels_us", p.kernels_us},
                      {"launch_bound_us", p.launch_bound_us},
                      {"host_us", p.host_us},
                      {"peak_memory_bytes", p.peak_memory_bytes},
                      {"fits_in_memory", p.fits_in_memory},
                      {"energy_j", p.energy_j},
                      {"bound", r.bound},
                      {"why", r.why},
                      {"notes", p.notes}});
    }
    out.push_back({{"batch", c.rows.empty() ? 1 : c.rows.front().batch}, {"runtimes", rows}, {"verdict", c.verdict}});
    if (skipped.empty()) {
      for (const auto& [name, why] : c.skipped) skipped.push_back({{"runtime", name}, {"reason", why}});
    }
  }
  return json{{"schema", "gpusim.compare-runtimes/1"}, {"model", model}, {"gpu", gpu}, {"batches", out},
              {"skipped", skipped}}
      .dump(2, ' ', false, kInvalidUtf8);
}

std::string plan_search_document(const std::string& model, const Graph& g, const GpuProfile& gpu,
                                 const SearchOptions& o, const SearchResult& r) {
  const double eager_us = r.eager.total_us;
  // One ranked plan's tree at a time, not all of them.
  const json doc = {{"schema", "gpusim.plan-search/1"},
                    {"model", model},
                    {"gpu", gpu.name},
                    {"scheduler", std::string(scheduler_name(o.scheduler))},
                    {"objective", std::string(objective_name(o.objective))},
                    {"plans_scored", r.plans_scored},
                    {"eager", {{"total_us", eager_us}, {"kernels", r.eager.kernels.size()}}},
                    {"tiles", r.eager.tiles},
                    {"notes", r.notes}};
  return dump_with_array(doc, "plans", r.plans.size(), [&](size_t i) {
    check_cancelled();
    const RankedPlan& p = r.plans[i];
    return json{{"total_us", p.prediction.total_us},
                {"speedup_vs_eager", eager_us / p.prediction.total_us},
                {"kernels", p.plan.kernels.size()},
                {"peak_memory_bytes", p.prediction.peak_memory_bytes},
                {"energy_j", p.prediction.energy_j},
                {"objective_value", p.objective_value},
                {"offloaded_weights", p.plan.offloaded.size()},
                {"decisions", p.plan.decisions},
                {"plan", json::parse(plan_to_json(p.plan, g))}};
  });
}

std::optional<double> best_fp16_matrix_tflops(const GpuProfile& p) {
  std::optional<double> best;
  for (const MatrixPeak& m : p.compute.matrix_tflops) {
    if (m.input == Precision::kFp16 && (!best || m.tflops > *best)) best = m.tflops;
  }
  return best;
}

std::string efficiency_origin(const GpuProfile& p, const std::string& key, double value) {
  if (p.calibrated && p.calibrated->figures.count("efficiency." + key) > 0) return "calibrated";
  static const Efficiency kDefaults{};
  for (const auto& [k, member] : efficiency_fields()) {
    if (k == key) return value == kDefaults.*member ? "default" : "profile";
  }
  return "profile";
}

std::string profile_document(const GpuProfile& p) {
  json j;
  j["schema"] = "gpusim.profile/1";
  j["name"] = p.name;
  j["display_name"] = p.display_name;
  j["device_names"] = p.device_names;
  j["vendor"] = p.vendor;
  j["architecture"] = p.architecture;
  j["path"] = p.source_path;
  j["extends_chain"] = p.extends_chain;
  j["family"] = p.family;
  const ComputeSpec& c = p.compute;
  json vec = json::object();
  for (const auto& [prec, tflops] : c.vector_tflops) vec[std::string(precision_name(prec))] = tflops;
  json matrix = json::array();
  for (const MatrixPeak& m : c.matrix_tflops) {
    matrix.push_back({{"dtype", std::string(precision_name(m.input))},
                      {"accumulate", std::string(precision_name(m.accumulate))},
                      {"tflops", m.tflops}});
  }
  j["compute"] = {{"units", c.units},
                  {"boost_clock_mhz", c.boost_clock_mhz},
                  {"base_clock_mhz", c.base_clock_mhz},
                  {"sustained_clock_mhz", c.sustained_clock_mhz},
                  {"warp_size", c.warp_size},
                  {"max_threads_per_unit", c.max_threads_per_unit},
                  {"max_blocks_per_unit", c.max_blocks_per_unit},
                  {"max_threads_per_block", c.max_threads_per_block},
                  {"registers_per_unit", c.registers_per_unit},
                  {"max_registers_per_thread", c.max_registers_per_thread},
                  {"shared_memory_per_unit_kb", c.shared_memory_per_unit_kb},
                  {"shared_memory_per_block_kb", c.shared_memory_per_block_kb},
                  {"vector_tflops", vec},
                  {"matrix_tflops", matrix},
                  {"matrix_alignment_elements", c.matrix_alignment_elements},
                  {"matrix_units", c.matrix_on_alus ? "alus" : "dedicated"}};
  const DramSpec& d = p.memory.dram;
  j["memory"] = {{"dram",
                  {{"size_gb", d.size_gb},
                   {"bandwidth_gbps", d.bandwidth_gbps},
                   {"bus_width_bits", d.bus_width_bits},
                   {"type", d.type},
                   {"latency_ns", d.latency_ns}}},
                 {"l2", cache_json(p.memory.l2)},
                 {"infinity_cache", cache_json(p.memory.infinity_cache)},
                 {"l1", {{"size_per_unit_kb", p.memory.l1.size_per_unit_kb}, {"latency_ns", p.memory.l1.latency_ns}}}};
  const HostLinkSpec& h = p.host_link;
  j["host_link"] = {{"type", h.unified ? "unified" : "pcie"},
                    {"generation", h.generation},
                    {"lanes", h.lanes},
                    {"bandwidth_gbps", h.bandwidth_gbps},
                    {"sustained_bandwidth_gbps", h.bandwidth_gbps * p.efficiency.host_link}};
  j["launch"] = {{"overhead_us", p.launch.overhead_us}, {"latency_floor_us", p.launch.latency_floor_us}};
  j["power"] = {{"tdp_w", p.power.tdp_w}, {"idle_w", p.power.idle_w}};
  json eff = json::object();
  json origin = json::object();
  for (const auto& [key, member] : efficiency_fields()) {
    eff[key] = p.efficiency.*member;
    origin[key] = efficiency_origin(p, key, p.efficiency.*member);
  }
  j["efficiency"] = eff;
  j["efficiency_origin"] = origin;
  if (p.calibrated) {
    json figs = json::object();
    for (const auto& [key, f] : p.calibrated->figures) {
      figs[key] = {{"value", f.value}, {"p50", f.p50}, {"p95", f.p95}, {"repeats", f.repeats}, {"unit", f.unit}};
    }
    j["calibrated"] = {{"device", p.calibrated->device}, {"date", p.calibrated->date}, {"figures", figs}};
  } else {
    j["calibrated"] = nullptr;
  }
  j["sources"] = p.sources;
  j["assumptions"] = p.assumptions;
  return j.dump(2, ' ', false, kInvalidUtf8);
}

std::vector<std::string> profile_problems(const Error& e) {
  std::vector<std::string> out;
  const std::string& m = e.message;
  for (size_t at = 0; at <= m.size();) {
    const size_t nl = std::min(m.find('\n', at), m.size());
    if (nl > at) out.push_back(m.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

std::string profile_validation_document(const std::vector<std::pair<std::string, Result<GpuProfile>>>& results) {
  json arr = json::array();
  int valid = 0;
  for (const auto& [name, r] : results) {
    json j{{"name", name}, {"valid", r.ok()}};
    json problems = json::array(), derived = json::array();
    if (r) {
      ++valid;
      j["path"] = r->source_path;
      for (const std::string& a : r->assumptions) derived.push_back(a);
    } else {
      j["path"] = nullptr;
      problems = profile_problems(r.error());
    }
    j["problems"] = std::move(problems);
    j["derived"] = std::move(derived);
    arr.push_back(std::move(j));
  }
  const int total = static_cast<int>(results.size());
  return json{{"schema", "gpusim.profiles-validate/1"}, {"profiles", arr}, {"valid", valid}, {"invalid", total - valid}}
      .dump(2, ' ', false, kInvalidUtf8);
}

std::string profile_list_document(const std::vector<std::pair<ProfileEntry, Result<GpuProfile>>>& all) {
  json arr = json::array();
  for (const auto& [entry, profile] : all) {
    json j;
    j["name"] = entry.name;
    j["path"] = entry.path;
    if (profile) {
      const GpuProfile& p = *profile;
      j["vendor"] = p.vendor;
      j["display_name"] = p.display_name;
      j["units"] = p.compute.units;
      j["boost_clock_mhz"] = p.compute.boost_clock_mhz;
      j["fp32_tflops"] = p.vector_tflops(Precision::kFp32);
      const auto m = best_fp16_matrix_tflops(p);
      j["fp16_matrix_tflops"] = m ? json(*m) : json(nullptr);
      j["dram_gb"] = p.memory.dram.size_gb;
      j["dram_bandwidth_gbps"] = p.memory.dram.bandwidth_gbps;
      j["valid"] = true;
    } else {
      for (const char* k : {"vendor", "display_name", "units", "boost_clock_mhz", "fp32_tflops", "fp16_matrix_tflops",
                            "dram_gb", "dram_bandwidth_gbps"}) {
        j[k] = nullptr;
      }
      j["valid"] = false;
      j["error"] = profile.error().message;
    }
    arr.push_back(std::move(j));
  }
  return json{{"profiles", arr}}.dump(2, ' ', false, kInvalidUtf8);
}

static json model_row_json(const ModelRow& r) {
  json top = json::array();
  for (const auto& [label, us] : r.top) top.push_back({{"kernel", label}, {"time_us", us}});
  return {{"model", r.model},       {"gpu", r.gpu},         {"runtime", r.runtime},
          {"layout", r.layout},     {"family", r.family},   {"batch", r.batch},
          {"measured_us", r.measured_us}, {"predicted_us", r.predicted_us}, {"roofline_us", r.roofline_us},
          {"kernels_us", r.kernels_us},   {"host_us", r.host_us},           {"kernels", r.kernels},
          {"top_kernels", top}};
}

static json models_json(const ModelReport& m) {
  json groups = json::array(), speedups = json::array(), skipped = json::array();
  for (const auto& g : m.groups) {
    json worst = json::array();
    for (const auto& r : g.worst) worst.push_back(model_row_json(r));
    groups.push_back({{"gpu", g.gpu},
                      {"profile", g.profile},
                      {"runtime", g.runtime},
                      {"layout", g.layout},
                      {"family", g.family},
                      {"model", stats_json(g.model)},
                      {"roofline", stats_json(g.roofline)},
                      {"worst", worst}});
  }
  for (const auto& s : m.speedups) {
    speedups.push_back({{"gpu", s.gpu}, {"base", s.base}, {"faster", s.faster}, {"stats", stats_json(s.stats)}});
  }
  for (const auto& s : m.skipped) skipped.push_back({{"reason", s.reason}, {"count", s.count}});
  return {{"groups", groups}, {"speedups", speedups}, {"skipped", skipped}};
}

static json llm_json(const LlmReport& l) {
  json groups = json::array(), rows = json::array(), ratios = json::array(), skipped = json::array();
  for (const auto& g : l.groups) groups.push_back({{"gpu", g.gpu}, {"backend", g.backend}, {"test", g.test}, {"stats", stats_json(g.stats)}});
  for (const auto& r : l.rows) {
    rows.push_back({{"model", r.model}, {"gpu", r.gpu}, {"profile", r.profile}, {"backend", r.backend}, {"weights", r.weights},
                    {"test", r.test}, {"tokens", r.tokens}, {"measured_us", r.measured_us}, {"predicted_us", r.predicted_us},
                    {"kernels_us", r.kernels_us}, {"kernels", r.kernels}, {"gap_us", r.gap_us}, {"bound", r.bound}});
  }
  for (const auto& r : l.ratios) {
    ratios.push_back({{"gpu", r.gpu}, {"backend", r.backend}, {"model", r.model}, {"test", r.test}, {"weights", r.weights},
                      {"measured", r.measured}, {"predicted", r.predicted}, {"error_pct", r.error_pct}});
  }
  for (const auto& s : l.skipped) skipped.push_back({{"reason", s.reason}, {"count", s.count}});
  return {{"leave_one_gpu_out", l.leave_one_gpu_out}, {"leave_one_architecture_out", l.leave_one_architecture_out},
          {"groups", groups}, {"target_tg128", stats_json(l.target_tg)},
          {"target_pp512", stats_json(l.target_pp)}, {"gaps_us", l.gaps}, {"ratios", ratios}, {"rows", rows},
          {"skipped", skipped}};
}

std::string validation_document(const ValidationReport& rep, const std::vector<Measurement>& records,
                                const std::string& mode, const std::string& truth, const std::string& runtime) {
  json groups = json::array(), per_gpu = json::array(), skipped = json::array();
  for (const auto& g : rep.groups) groups.push_back(group_json(g, records));
  for (const auto& g : rep.per_gpu) per_gpu.push_back(group_json(g, records));
  for (const auto& s : rep.skipped) skipped.push_back({{"reason", s.reason}, {"count", s.count}});
  json doc{{"schema", "gpusim.validate/1"},
              {"mode", mode},
              {"truth", truth},
              {"records", records.size()},
              {"runtime", runtime.empty() ? "per record" : runtime},
              {"groups", groups},
              {"per_gpu", per_gpu},
              {"overall", group_json(rep.overall, records)},
              {"models", models_json(rep.models)},
              {"skipped", skipped}};
  // Language models only where there were some: documents of other truth sets keep their bytes.
  if (!rep.llm.rows.empty() || !rep.llm.skipped.empty()) doc["llm"] = llm_json(rep.llm);
  return doc.dump(1, ' ', false, kInvalidUtf8);
}

std::string tune_document(const TuneReport& t, const RunReport* end_to_end) {
  json ks = json::array();
  for (const TunedKernel& k : t.kernels) {
    json cands = json::array();
    for (const TuneCandidate& c : k.candidates) {
      json j = {{"tile", tile_to_json(c.tile)}, {"notation", tile_notation(c.tile)},
                {"predicted_rank", c.predicted_rank}, {"predicted_us", c.predicted_us}};
      if (c.measured_us > 0) {
        j["measured_us"] = c.measured_us;
        j["p95_us"] = c.p95_us;
        j["samples"] = c.samples;
      }
      if (!c.error.empty()) j["error"] = c.error;
      cands.push_back(std::move(j));
    }
    const char* how = k.cached ? "cached" : k.skipped ? "kept" : "measured";
    json j = {{"kernel", k.plan_kernel}, {"group", k.group}, {"name", k.name}, {"signature", k.signature},
              {"how", how}, {"tile", tile_to_json(k.tile)}, {"notation", tile_notation(k.tile)},
              {"candidates", cands}, {"space", k.space}};
    if (k.chosen_us > 0) j["chosen_us"] = k.chosen_us;
    j["split"] = k.split;
    if (k.unfused_us > 0) {
      j["unfused_us"] = k.unfused_us;
      j["unfused_predicted_us"] = k.unfused_predicted_us;
    }
    if (!k.cached && !k.skipped && k.chosen >= 0) {
      j["chosen"] = k.chosen;
      j["sim_pick_us"] = k.sim_pick_us;
      j["regret"] = k.regret;
      j["kendall_tau"] = k.kendall_tau;
      j["best_predicted_rank"] = k.best_predicted_rank;
    }
    ks.push_back(std::move(j));
  }
  json out = {{"schema", "gpusim.tune/1"},
              {"model", t.model},
              {"backend", t.backend},
              {"device", t.device_name},
              {"driver", t.driver},
              {"gpu", t.gpu},
              {"store", t.store},
              {"top_k", t.top_k},
              {"kernels_measured", t.measured},
              {"kernels_cached", t.cached},
              {"kernels_kept", t.skipped},
              {"kernels_split", t.split},
              {"candidates_run", t.candidates_run},
              {"compile_s", t.compile_s},
              {"measure_s", t.measure_s},
              {"total_s", t.total_s},
              {"budget_hit", t.budget_hit},
              {"report_card",
               {{"graded", t.graded},
                {"top1_within_3pct", t.top1_within_3pct},
                {"top1_share", t.top1_share},
                {"top3_share", t.top3_share},
                {"median_regret", t.median_regret},
                {"mean_kendall_tau", t.mean_tau}}},
              {"simulator_pick_us", t.sim_pick_us},
              {"tuned_us", t.tuned_us},
              {"kernels", ks},
              {"notes", t.notes}};
  if (end_to_end) out["end_to_end"] = json::parse(run_document(*end_to_end));
  return out.dump(2, ' ', false, kInvalidUtf8);
}

std::string tuning_cache_document(const std::string& path, const TuningCacheInfo& info) {
  json ds = json::array();
  for (const auto& d : info.devices) {
    ds.push_back({{"device", d.device}, {"driver", d.driver}, {"backend", d.backend}, {"entries", d.entries},
                  {"newest", d.newest}});
  }
  json out = {{"schema", "gpusim.tuning-cache/1"}, {"store", path}, {"entries", info.entries}, {"devices", ds}};
  return out.dump(2, ' ', false, kInvalidUtf8);
}

std::string run_document(const RunReport& r) {
  json outs = json::array();
  for (const OutputSummary& o : r.outputs) {
    outs.push_back({{"name", o.name}, {"shape", o.shape}, {"dtype", std::string(dtype_name(o.dtype))},
                    {"min", o.min}, {"max", o.max}, {"mean", o.mean}});
  }
  json out = {{"schema", "gpusim.run/1"}, {"model", r.model}, {"backend", r.backend}};
  json ks = json::array();
  if (r.backend == "cpu") {
    json nodes = json::array();
    for (const KernelReport& k : r.kernels) {
      nodes.push_back({{"node", k.name}, {"op_type", k.op_type}, {"measured_us", k.measured_us}});
    }
    out["repeat"] = r.repeat;
    out["total_us"] = r.total_us;
    out["outputs"] = outs;
    out["nodes"] = nodes;
    out["notes"] = r.notes;
    return out.dump(2, ' ', false, kInvalidUtf8);
  }
  for (const KernelReport& k : r.kernels) {
    json j = {{"kernel", k.plan_kernel}, {"name", k.name}, {"op_type", k.op_type}, {"class", k.cls},
              {"device", k.device}, {"fused_as_planned", k.fused_as_planned}, {"launches", k.launches},
              {"measured_us", k.measured_us}, {"min_us", k.min_us}, {"max_us", k.max_us},
              {"tile", tile_to_json(k.tile)}, {"fused_ops", k.fused_ops}};
    if (k.predicted_us) {
      if (k.work) j["work"] = work_to_json(*k.work);
      j["predicted_us"] = *k.predicted_us;
      j["error_pct"] = k.measured_us > 0 ? 100 * (*k.predicted_us - k.measured_us) / k.measured_us : 0.0;
    }
    ks.push_back(std::move(j));
  }
  out["device"] = {{"name", r.device_name}, {"vendor", r.device_vendor}, {"driver", r.device_driver},
                   {"arch", r.device_arch}, {"is_cpu", r.device_is_cpu}};
  out["dtype"] = r.dtype;
  out["repeat"] = r.repeat;
  out["total_us"] = r.total_us;
  out["outputs"] = outs;
  out["kernels"] = ks;
  out["compile"] = {{"compiled", r.compiled}, {"cache_hits", r.cache_hits}, {"compile_ms", r.compile_ms}};
  out["notes"] = r.notes;
  if (r.gpu) out["gpu"] = *r.gpu;
  if (r.predicted_us) out["predicted_us"] = *r.predicted_us;
  if (!r.checks.empty()) {
    json checks = json::array();
    for (const OutputCheck& c : r.checks) {
      checks.push_back({{"output", c.output}, {"relative_l2", std::isnan(c.relative_l2) ? -1.0 : c.relative_l2},
                        {"tolerance", c.tolerance}, {"pass", c.pass}});
    }
    out["check"] = checks;
  }
  return out.dump(2, ' ', false, kInvalidUtf8);
}

std::string_view error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kIo: return "io";
    case ErrorCode::kParse: return "parse";
    case ErrorCode::kInvalidModel: return "invalid_model";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kShape: return "shape";
    case ErrorCode::kDataDependent: return "data_dependent";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kDevice: return "device";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kInternal: return "internal";
    case ErrorCode::kLimit: return "limit";
  }
  return "unknown";
}

std::string error_document(const Error& e) {
  return json{{"schema", "gpusim.error/1"},
              {"error", {{"code", std::string(error_code_name(e.code))}, {"message", e.message}}}}
      .dump(2, ' ', false, kInvalidUtf8);
}

}  // namespace gpusim
