// gpusim predict MODEL --gpu NAME|FILE [--dtype fp32|fp16|bf16] [--dim k=v]... [--runtime NAME|FILE] [--json]
//                [--trace out.json]
// gpusim compare MODEL --gpus a,b,c [--dtype ...] [--dim ...] [--runtime ...] [--json]
// The eager plan's predicted latency with a per-kernel breakdown (time, share, bound, achieved
// FLOP/s and GB/s), peak memory and energy; JSON schema gpusim.predict/1 (README).
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "format.h"
#include "gpusim/predict.h"

namespace gpusim::cli {
namespace {

struct Args {
  std::string model;
  std::string gpu;
  std::vector<std::string> gpus;
  std::string dtype;
  std::vector<std::string> dims;
  std::vector<std::string> profile_dirs;
  bool json = false;
  bool all = false;
  std::string trace;
  std::string plan;
  std::string runtime;
};

nlohmann::json kernel_json(const Prediction& p, const PlannedKernel& k) {
  const KernelCost& c = k.cost;
  return {{"name", k.name},
          {"op_type", k.op_type},
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
          {"matrix_units", c.matrix_units},
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

nlohmann::json prediction_json(const Prediction& p, const GpuProfile& gpu) {
  nlohmann::json ks = nlohmann::json::array();
  for (const auto& k : p.kernels) ks.push_back(kernel_json(p, k));
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& t : p.transfers) {
    ts.push_back({{"tensor", t.tensor}, {"direction", t.to_device ? "h2d" : "d2h"}, {"bytes", t.bytes},
                  {"start_us", t.start_us}, {"duration_us", t.duration_us}});
  }
  return {{"schema", "gpusim.predict/1"},
          {"model", p.model},
          {"gpu", p.gpu},
          {"gpu_display_name", gpu.display_name},
          {"dtype", std::string(dtype_name(p.dtype))},
          {"total_us", p.total_us},
          {"kernels_us", p.kernels_us},
          {"launch_bound_us", p.launch_bound_us},
          {"runtime", p.runtime},
          {"host_us", p.host_us},
          {"kernel_count", p.kernels.size()},
          {"peak_memory_bytes", p.peak_memory_bytes},
          {"weight_bytes", p.weight_bytes},
          {"fits_in_memory", p.fits_in_memory},
          {"energy_j", p.energy_j},
          {"kernels", ks},
          {"transfers", ts},
          {"notes", p.notes}};
}

std::string tile_str(const KernelCost& c) {
  if (c.tile.block_m > 0) {
    return fmt::format("{}x{}x{}{}", c.tile.block_m, c.tile.block_n, c.tile.block_k,
                       c.tile.split_k > 1 ? fmt::format(" sk{}", c.tile.split_k) : "");
  }
  return fmt::format("{}t v{}", c.tile.threads, c.tile.vector_width);
}

void print_text(const Prediction& p, const GpuProfile& gpu, bool all) {
  double h2d = 0, d2h = 0;
  for (const auto& t : p.transfers) (t.to_device ? h2d : d2h) += t.duration_us;
  fmt::print("model    {}\n", p.model);
  fmt::print("gpu      {} ({}), {}\n", gpu.display_name, gpu.name, dtype_name(p.dtype));
  fmt::print("latency  {:.3f} ms  (kernels {:.3f} ms in {} launches; copies in {:.3f} ms, out {:.3f} ms; GPU waiting "
             "on launches {:.3f} ms)\n",
             p.total_us / 1e3, p.kernels_us / 1e3, p.kernels.size(), h2d / 1e3, d2h / 1e3, p.launch_bound_us / 1e3);
  if (p.runtime != "gpusim") fmt::print("runtime  {}: host issuing the op calls {:.3f} ms\n", p.runtime, p.host_us / 1e3);
  fmt::print("memory   peak {} of {:.0f} GB ({} weights){}\n", bytes_str(static_cast<double>(p.peak_memory_bytes)),
             gpu.memory.dram.size_gb, bytes_str(static_cast<double>(p.weight_bytes)),
             p.fits_in_memory ? "" : "  DOES NOT FIT");
  fmt::print("energy   {:.3f} J (average {:.0f} W)\n\n", p.energy_j, p.energy_j / (p.total_us * 1e-6));
  std::vector<const PlannedKernel*> order;
  for (const auto& k : p.kernels) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->cost.total_us > b->cost.total_us; });
  const size_t shown = all ? order.size() : std::min<size_t>(order.size(), 25);
  fmt::print("{:>10} {:>6} {:<8} {:>9} {:>8} {:>7} {:>6} {:>5} {:<14} {:<22} {}\n", "time_us", "share", "bound",
             "TFLOP/s", "GB/s", "CTAs", "waves", "occ", "tile", "op", "node");
  for (size_t i = 0; i < shown; ++i) {
    const PlannedKernel& k = *order[i];
    const KernelCost& c = k.cost;
    fmt::print("{:>10.1f} {:>5.1f}% {:<8} {:>9.2f} {:>8.1f} {:>7} {:>6} {:>5.2f} {:<14} {:<22} {}\n", c.total_us,
               100 * c.total_us / p.kernels_us, bound_name(c.bound), p.achieved_tflops(k), p.achieved_gbps(k), c.ctas,
               c.waves, c.occupancy, tile_str(c), k.op_type + (c.matrix_units ? " [mma]" : ""), k.name);
  }
  if (shown < order.size()) fmt::print("... {} more kernels (--all lists every one)\n", order.size() - shown);
  // Time by class and bound.
  std::map<std::string, double> by_class, by_bound;
  for (const auto& k : p.kernels) {
    by_class[std::string(op_class_name(k.work.cls))] += k.cost.total_us;
    by_bound[std::string(bound_name(k.cost.bound))] += k.cost.total_us;
  }
  fmt::print("\nby class ");
  for (const auto& [c, t] : by_class) fmt::print(" {} {:.1f}%", c, 100 * t / p.kernels_us);
  fmt::print("\nby bound ");
  for (const auto& [b, t] : by_bound) fmt::print(" {} {:.1f}%", b, 100 * t / p.kernels_us);
  fmt::print("\n\nnotes\n");
  for (const auto& n : p.notes) fmt::print("  - {}\n", n);
}

void add_common(CLI::App* cmd, Args& a) {
  cmd->add_option("model", a.model, "The .onnx file (weights are not needed)")->required();
  cmd->add_option("--dtype", a.dtype, "Re-type the graph's float tensors: fp32, fp16 or bf16");
  cmd->add_option("--dim", a.dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_option("--profiles", a.profile_dirs, "Extra directory of GPU profiles, searched first (repeatable)");
  cmd->add_flag("--json", a.json, "Print machine-readable JSON (schema gpusim.predict/1, see README)");
  cmd->add_option("--runtime", a.runtime,
                  "What launches the kernels: gpusim (default: gpusim's executor), cuda-graph, pytorch-eager, or a "
                  "runtime YAML (runtimes/)");
}

// Loads the model and the options (--dtype, --runtime); prints the error and sets rc on failure.
std::optional<Graph> load(const Args& a, const char* cmd, PredictOptions& opts, int& rc) {
  if (!a.dtype.empty()) {
    auto d = parse_dtype(a.dtype);
    if (!d) {
      fmt::print(stderr, "gpusim {}: {}\n", cmd, d.error().message);
      rc = 2;
      return std::nullopt;
    }
    opts.dtype = *d;
  }
  if (!a.runtime.empty()) {
    auto r = find_runtime(a.runtime, default_runtime_dirs());
    if (!r) {
      fmt::print(stderr, "gpusim {}: --runtime: {}\n", cmd, r.error().message);
      rc = 2;
      return std::nullopt;
    }
    opts.runtime = std::move(*r);
  }
  auto g = load_model(a.model, a.dims);
  if (!g) {
    fmt::print(stderr, "gpusim {}: {}\n", cmd, g.error().message);
    rc = exit_code(g.error());
    return std::nullopt;
  }
  return std::move(*g);
}

}  // namespace

void add_predict(CLI::App& app, int& rc) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("predict", "Predict the latency of a graph on a GPU, kernel by kernel");
  add_common(cmd, *a);
  cmd->add_option("--gpu", a->gpu, "GPU profile name (gpusim profiles list) or a .yaml path")->required();
  cmd->add_option("--trace", a->trace, "Write the timeline as Chrome trace-event JSON (Perfetto, chrome://tracing)");
  cmd->add_flag("--all", a->all, "List every kernel, not the 25 slowest");
  cmd->add_option("--plan", a->plan, "Score this plan (JSON from gpusim plan --out) instead of the eager one");
  cmd->callback([a, &rc] {
    PredictOptions opts;
    auto g = load(*a, "predict", opts, rc);
    if (!g) return;
    auto gpu = load_gpu(a->gpu, a->profile_dirs);
    if (!gpu) {
      fmt::print(stderr, "gpusim predict: {}\n", gpu.error().message);
      rc = 1;
      return;
    }
    Result<Prediction> p = make_error(ErrorCode::kInvalidArgument, "");
    if (a->plan.empty()) {
      p = predict(*g, *gpu, opts);
    } else {
      std::ifstream f(a->plan);
      if (!f) {
        fmt::print(stderr, "gpusim predict: {}: cannot open the plan file (check the path)\n", a->plan);
        rc = 1;
        return;
      }
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      auto plan = plan_from_json(text, a->plan, *g);
      if (plan && opts.dtype) plan->dtype = opts.dtype;
      Status valid = plan ? validate_plan(*plan, plan->dtype ? retype(*g, *plan->dtype) : *g, make_device(*gpu))
                          : Status(plan.error());
      if (!valid) {
        fmt::print(stderr, "gpusim predict: {}\n", valid.error().message);
        rc = 1;
        return;
      }
      p = predict_plan(*g, *plan, *gpu, {std::nullopt, opts.runtime});
    }
    if (!p) {
      fmt::print(stderr, "gpusim predict: {}\n", p.error().message);
      rc = 1;
      return;
    }
    if (!a->trace.empty()) {
      std::ofstream f(a->trace, std::ios::trunc);
      f << chrome_trace(*p);
      if (!f) {
        fmt::print(stderr, "gpusim predict: {}: cannot write the trace file\n", a->trace);
        rc = 1;
        return;
      }
    }
    if (a->json) {
      fmt::print("{}\n", prediction_json(*p, *gpu).dump(2));
    } else {
      print_text(*p, *gpu, a->all);
      if (!a->trace.empty()) fmt::print("\ntrace written to {}\n", a->trace);
    }
    rc = 0;
  });
}

void add_compare(CLI::App& app, int& rc) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("compare", "Predict one graph on several GPUs, side by side");
  add_common(cmd, *a);
  cmd->add_option("--gpus", a->gpus, "Comma-separated GPU profile names or paths")->required()->delimiter(',');
  cmd->callback([a, &rc] {
    PredictOptions opts;
    auto g = load(*a, "compare", opts, rc);
    if (!g) return;
    nlohmann::json rows = nlohmann::json::array();
    if (!a->json) {
      fmt::print("{:<26} {:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9}\n", "gpu", "latency_ms", "vs_first", "compute%",
                 "dram%", "latency%", "peak_mem", "energy_J");
    }
    double first = 0;
    for (const std::string& name : a->gpus) {
      auto gpu = load_gpu(name, a->profile_dirs);
      if (!gpu) {
        fmt::print(stderr, "gpusim compare: {}\n", gpu.error().message);
        rc = 1;
        return;
      }
      auto p = predict(*g, *gpu, opts);
      if (!p) {
        fmt::print(stderr, "gpusim compare: {}\n", p.error().message);
        rc = 1;
        return;
      }
      std::map<Bound, double> bound;
      for (const auto& k : p->kernels) bound[k.cost.bound] += k.cost.total_us;
      if (first == 0) first = p->total_us;
      auto share = [&](Bound b) { return p->kernels_us > 0 ? 100 * bound[b] / p->kernels_us : 0; };
      if (a->json) {
        rows.push_back({{"gpu", gpu->name}, {"total_us", p->total_us}, {"speedup_vs_first", first / p->total_us},
                        {"compute_share", share(Bound::kCompute) / 100}, {"dram_share", share(Bound::kDram) / 100},
                        {"l2_share", share(Bound::kL2) / 100}, {"latency_share", share(Bound::kLatency) / 100},
                        {"peak_memory_bytes", p->peak_memory_bytes}, {"fits_in_memory", p->fits_in_memory},
                        {"energy_j", p->energy_j}});
      } else {
        fmt::print("{:<26} {:>11.3f} {:>8.2f}x {:>8.1f}% {:>8.1f}% {:>8.1f}% {:>11} {:>9.3f}{}\n", gpu->name,
                   p->total_us / 1e3, first / p->total_us, share(Bound::kCompute), share(Bound::kDram),
                   share(Bound::kLatency), bytes_str(static_cast<double>(p->peak_memory_bytes)), p->energy_j,
                   p->fits_in_memory ? "" : "  (does not fit)");
      }
    }
    if (a->json) {
      fmt::print("{}\n", nlohmann::json{{"schema", "gpusim.compare/1"}, {"model", a->model}, {"gpus", rows}}.dump(2));
    }
    rc = 0;
  });
}

}  // namespace gpusim::cli
