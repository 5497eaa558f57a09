// gpusim run MODEL --backend cpu|vulkan|cuda|hip [--device N] [--plan plan.json | --gpu NAME]
//                  [--dtype fp32|fp16] [--check] [--repeat N] [--json] [--input FILE.pb]... [--dim k=v]...
// Runs a model for real. Inputs come from .pb files or the seed; weights a shape-only file lacks
// come from the seed, which the run says. The cpu backend is the reference (fp64 accumulation) and
// times every node. A device backend runs a plan — the given one, or the eager plan — through
// codegen, times every kernel with device timers (one warm-up, then the median of --repeat runs)
// and prints, per kernel, the simulator's prediction for the profile (--gpu, or the profile whose
// name matches the device), the measured time and the error. --check compares every output with
// the CPU reference (relative L2 error per output) and exits 1 when one fails.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "executor.h"
#include "format.h"
#include "gpusim/predict.h"
#include "gpusim/tensor_data.h"
#include "gpusim/work_json.h"
#include "reference.h"

namespace gpusim::cli {

namespace {

struct Args {
  std::string model, backend = "cpu", plan, gpu, dtype = "fp32";
  std::vector<std::string> dims, inputs, profile_dirs;
  int device = 0;
  uint64_t seed = 1;
  int repeat = 3;
  bool json = false, check = false;
};

nlohmann::json output_summary(const Graph& g, const std::vector<cpu::HostTensor>& outputs) {
  nlohmann::json outs = nlohmann::json::array();
  for (size_t k = 0; k < outputs.size(); ++k) {
    const cpu::HostTensor& o = outputs[k];
    double lo = 0, hi = 0, sum = 0;
    const int64_t n = o.is_sequence || o.is_string() ? 0 : o.elements();
    for (int64_t e = 0; e < n; ++e) {
      const double v = o.real(e);
      lo = e == 0 ? v : std::min(lo, v);
      hi = e == 0 ? v : std::max(hi, v);
      sum += v;
    }
    outs.push_back({{"name", g.tensor(g.outputs[k]).name}, {"shape", o.shape}, {"dtype", std::string(dtype_name(o.dtype))},
                    {"min", lo}, {"max", hi}, {"mean", n > 0 ? sum / static_cast<double>(n) : 0.0}});
  }
  return outs;
}

void print_outputs(const nlohmann::json& outs) {
  for (const auto& o : outs) {
    fmt::print("output   {} {} {}: min {:.6g}, max {:.6g}, mean {:.6g}\n", o["name"].get<std::string>(),
               o["shape"].dump(), o["dtype"].get<std::string>(), o["min"].get<double>(), o["max"].get<double>(),
               o["mean"].get<double>());
  }
}

// The reference run --check compares with; nullopt after printing the error.
Result<cpu::RunResult> reference_run(const Graph& g, const std::vector<cpu::HostTensor>& inputs,
                                     const std::map<std::string, TensorData>& weights, uint64_t seed) {
  cpu::RunOptions o;
  o.weights = &weights;
  o.seed = seed;
  return cpu::run_reference(g, inputs, o);
}

int run_cpu(const Args& a, const Graph& g, const std::vector<cpu::HostTensor>& inputs,
            const std::map<std::string, TensorData>& weights) {
  cpu::RunOptions opts;
  opts.weights = &weights;
  opts.seed = a.seed;
  const int repeat = std::max(1, a.repeat);
  std::vector<std::vector<double>> times(g.nodes.size());
  Result<cpu::RunResult> r = make_error(ErrorCode::kInvalidArgument, "");
  for (int i = 0; i <= repeat; ++i) {  // run 0 is the warm-up
    r = cpu::run_reference(g, inputs, opts);
    if (!r) {
      fmt::print(stderr, "gpusim run: {}\n", r.error().message);
      return 1;
    }
    if (i == 0) continue;
    for (size_t n = 0; n < times.size(); ++n) times[n].push_back(r->node_us[n]);
  }
  std::vector<double> median(times.size());
  double total = 0;
  for (size_t n = 0; n < times.size(); ++n) {
    std::sort(times[n].begin(), times[n].end());
    median[n] = times[n][times[n].size() / 2];
    total += median[n];
  }
  if (g.inputs.size() > inputs.size()) {
    r->notes.push_back(fmt::format("{} inputs filled from seed {}", g.inputs.size() - inputs.size(), a.seed));
  }
  if (a.check) r->notes.push_back("--check: the cpu backend is the reference itself; nothing to compare");
  const nlohmann::json outs = output_summary(g, r->outputs);
  std::vector<size_t> order(times.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return median[x] > median[y]; });
  if (a.json) {
    nlohmann::json nodes = nlohmann::json::array();
    for (size_t i : order) {
      if (median[i] <= 0) continue;
      nodes.push_back({{"node", g.nodes[i].name}, {"op_type", g.nodes[i].op_type}, {"measured_us", median[i]}});
    }
    fmt::print("{}\n", nlohmann::json{{"schema", "gpusim.run/1"}, {"model", a.model}, {"backend", "cpu"},
                                      {"repeat", repeat}, {"total_us", total}, {"outputs", outs}, {"nodes", nodes},
                                      {"notes", r->notes}}
                           .dump(2));
    return 0;
  }
  fmt::print("model    {}\nbackend  cpu reference (fp64 accumulation), {} timed runs after a warm-up\n", a.model, repeat);
  fmt::print("total    {:.3f} ms (median per node, summed)\n", total / 1e3);
  print_outputs(outs);
  fmt::print("\n{:>12} {:>7}  {:<22} {}\n", "measured_us", "share", "op", "node");
  for (size_t k = 0; k < std::min<size_t>(order.size(), 15); ++k) {
    const size_t i = order[k];
    fmt::print("{:>12.1f} {:>6.1f}%  {:<22} {}\n", median[i], total > 0 ? 100 * median[i] / total : 0,
               g.nodes[i].op_type, g.nodes[i].name);
  }
  if (!r->notes.empty()) {
    fmt::print("\nnotes\n");
    for (const auto& n : r->notes) fmt::print("  - {}\n", n);
  }
  return 0;
}

int run_device(const Args& a, const Graph& g0, const std::vector<cpu::HostTensor>& inputs,
               const std::map<std::string, TensorData>& weights) {
  auto dtype = parse_dtype(a.dtype);
  if (!dtype) {
    fmt::print(stderr, "gpusim run: {}\n", dtype.error().message);
    return 2;
  }
  auto dev = backend::open(a.backend, a.device);
  if (!dev) {
    fmt::print(stderr, "gpusim run: {}\n", dev.error().message);
    return exit_code(dev.error());
  }
  const backend::DeviceInfo& info = (*dev)->info();
  std::vector<std::string> dirs = a.profile_dirs;
  for (const auto& d : default_profile_dirs()) dirs.push_back(d);
  std::optional<GpuProfile> gpu;
  std::vector<std::string> notes;
  if (!a.gpu.empty()) {
    auto p = find_profile(a.gpu, dirs);
    if (!p) {
      fmt::print(stderr, "gpusim run: {}\n", p.error().message);
      return 1;
    }
    gpu = *p;
  } else {
    gpu = profile_for_device(info.name, dirs);
    if (gpu) {
      notes.push_back(fmt::format("predictions use profile {} (matched the device name; --gpu picks another)", gpu->name));
    } else {
      notes.push_back(fmt::format("no profile matches device \"{}\": kernels use default tiles and nothing is predicted "
                                  "(--gpu NAME picks a profile; gpusim calibrate makes one for this device)",
                                  info.name));
    }
  }
  // The plan: from the file, or eager (one kernel per op; tiles from the profile's cost model when
  // there is one, else each generator's default).
  Plan plan;
  if (!a.plan.empty()) {
    std::ifstream f(a.plan);
    if (!f) {
      fmt::print(stderr, "gpusim run: {}: cannot open the plan file (check the path)\n", a.plan);
      return 1;
    }
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto p = plan_from_json(text, a.plan, g0);
    if (!p) {
      fmt::print(stderr, "gpusim run: {}\n", p.error().message);
      return 1;
    }
    plan = std::move(*p);
    if (a.dtype != "fp32" || !plan.dtype) plan.dtype = *dtype;
  } else if (gpu) {
    // One kernel per op, each with the cost model's best tile among those codegen generates as
    // priced (no split-K, scalar loads), so the prediction prices the kernel that runs.
    plan = eager_plan(*dtype == DType::kFloat32 ? g0 : retype(g0, *dtype), make_device(*gpu), codegen::generated_tile);
    plan.dtype = *dtype;
  } else {
    for (size_t i = 0; i < g0.nodes.size(); ++i) {
      if (!runs_on_device(g0, g0.nodes[i])) continue;
      PlanKernel k;
      k.nodes = {static_cast<int>(i)};
      plan.kernels.push_back(k);
    }
    plan.dtype = *dtype;
  }
  const Graph g = plan.dtype && *plan.dtype != DType::kFloat32 ? retype(g0, *plan.dtype) : g0;
  // A plan file's split-K is not generated, nor vector widths outside fused elementwise kernels
  // (or ones that do not divide the kernel's elements): price each tile as it runs.
  int regenerated = 0;
  const GraphIndex idx = index_graph(g);
  for (PlanKernel& k : plan.kernels) {
    if (k.nodes.empty() || k.anchor < 0 || k.anchor >= static_cast<int>(k.nodes.size())) continue;  // validate_plan says why
    const bool attention = std::find(k.fusions.begin(), k.fusions.end(), "attention") != k.fusions.end();
    const TileConfig t =
        codegen::as_generated(k.tile, group_work(g, idx, k.nodes, k.anchor, attention, k.recomputed));
    regenerated += t.split_k != k.tile.split_k || t.vector_width != k.tile.vector_width;
    k.tile = t;
  }
  if (regenerated > 0) {
    notes.push_back(fmt::format("{} kernel(s) of the plan ask for split-K, or for a vector width that codegen does not "
                                "generate for their class and size: they run, and are predicted, with split_k 1 and "
                                "the vector width that runs (1 outside fused elementwise kernels)",
                                regenerated));
  }
  if (gpu) {
    if (auto v = validate_plan(plan, g, make_device(*gpu)); !v) {
      fmt::print(stderr, "gpusim run: {}\n", v.error().message);
      return 1;
    }
  }
  std::optional<Prediction> pred;
  if (gpu) {
    auto p = predict_plan(g0, plan, *gpu);
    if (!p) {
      fmt::print(stderr, "gpusim run: {}\n", p.error().message);
      return 1;
    }
    pred = std::move(*p);
  }
  exec::RunOptions eo;
  eo.weights = &weights;
  eo.seed = a.seed;
  eo.repeat = std::max(1, a.repeat);
  eo.fp16_storage = *dtype == DType::kFloat16;
  if (*dtype == DType::kBFloat16) {
    fmt::print(stderr, "gpusim run: --dtype bf16 is not supported by the device backends yet; use fp32 or fp16\n");
    return 2;
  }
  auto r = exec::run_plan(**dev, g, plan, inputs, eo);
  if (!r) {
    fmt::print(stderr, "gpusim run: {}\n", r.error().message);
    return 1;
  }
  for (const auto& n : notes) r->notes.push_back(n);
  // --check: every output against the CPU reference.
  nlohmann::json checks = nlohmann::json::array();
  bool check_ok = true;
  const double tol = *dtype == DType::kFloat16 ? 2e-2 : 1e-3;
  if (a.check) {
    auto ref = reference_run(g, inputs, weights, a.seed);
    if (!ref) {
      fmt::print(stderr, "gpusim run: --check: the CPU reference failed: {}\n", ref.error().message);
      return 1;
    }
    for (size_t k = 0; k < r->outputs.size(); ++k) {
      const double err = exec::relative_l2(r->outputs[k], ref->outputs[k]);
      const bool ok = err <= tol;  // NaN fails
      check_ok = check_ok && ok;
      checks.push_back({{"output", g.tensor(g.outputs[k]).name}, {"relative_l2", std::isnan(err) ? -1.0 : err},
                        {"tolerance", tol}, {"pass", ok}});
    }
  }
  const nlohmann::json outs = output_summary(g, r->outputs);
  double predicted_total = 0;
  nlohmann::json ks = nlohmann::json::array();
  for (const auto& k : r->kernels) {
    const double p = pred ? pred->kernels.at(static_cast<size_t>(k.plan_kernel)).cost.total_us : 0;
    predicted_total += p;
    nlohmann::json j = {{"kernel", k.plan_kernel}, {"name", k.name}, {"op_type", k.op_type}, {"class", k.cls},
                        {"device", k.device}, {"fused_as_planned", k.fused_as_planned}, {"launches", k.launches},
                        {"measured_us", k.measured_us}, {"min_us", k.min_us}, {"max_us", k.max_us}};
    // The tile it ran with (and was priced for): the plan's, as codegen generates it.
    const PlanKernel& pk_plan = plan.kernels.at(static_cast<size_t>(k.plan_kernel));
    j["tile"] = tile_to_json(pk_plan.tile);
    // The fused group's op types, anchor first (the measurement store keeps them).
    std::vector<std::string> fused;
    const int anchor = pk_plan.nodes.empty() ? -1 : pk_plan.nodes.at(static_cast<size_t>(pk_plan.anchor));
    if (anchor >= 0) fused.push_back(g.nodes.at(static_cast<size_t>(anchor)).op_type);
    for (int n : pk_plan.nodes) {
      if (n != anchor) fused.push_back(g.nodes.at(static_cast<size_t>(n)).op_type);
    }
    j["fused_ops"] = fused;
    if (pred) {
      // What the kernel computes, so the measurement store can re-predict it (gpusim truth import).
      j["work"] = work_to_json(pred->kernels.at(static_cast<size_t>(k.plan_kernel)).work);
      j["predicted_us"] = p;
      j["error_pct"] = k.measured_us > 0 ? 100 * (p - k.measured_us) / k.measured_us : 0.0;
    }
    ks.push_back(std::move(j));
  }
  if (a.json) {
    nlohmann::json out = {{"schema", "gpusim.run/1"},
                          {"model", a.model},
                          {"backend", a.backend},
                          {"device", {{"name", info.name}, {"vendor", info.vendor}, {"driver", info.driver},
                                      {"arch", info.arch}, {"is_cpu", info.is_cpu}}},
                          {"dtype", a.dtype},
                          {"repeat", eo.repeat},
                          {"total_us", r->total_us},
                          {"outputs", outs},
                          {"kernels", ks},
                          {"compile", {{"compiled", r->compile.compiled}, {"cache_hits", r->compile.cache_hits},
                                       {"compile_ms", r->compile.compile_ms}}},
                          {"notes", r->notes}};
    if (gpu) {
      out["gpu"] = gpu->name;
      out["predicted_us"] = predicted_total;
    }
    if (a.check) out["check"] = checks;
    fmt::print("{}\n", out.dump(2));
    return check_ok ? 0 : 1;
  }
  fmt::print("model    {}\nbackend  {} device {}: {} ({}, driver {})\n", a.model, a.backend, a.device, info.name,
             info.arch, info.driver);
  fmt::print("plan     {} kernels ({}), {}; {} timed runs after a warm-up\n", plan.kernels.size(),
             a.plan.empty() ? "eager" : a.plan, a.dtype, eo.repeat);
  fmt::print("measured {:.3f} ms (median per kernel, summed)", r->total_us / 1e3);
  if (gpu) {
    fmt::print("; predicted {:.3f} ms on {} ({:+.1f}%)", predicted_total / 1e3, gpu->name,
               r->total_us > 0 ? 100 * (predicted_total - r->total_us) / r->total_us : 0.0);
  }
  fmt::print("\ncompile  {} kernels compiled in {:.0f} ms, {} from the cache\n", r->compile.compiled,
             r->compile.compile_ms, r->compile.cache_hits);
  print_outputs(outs);
  for (const auto& c : checks) {
    fmt::print("check    {}: relative L2 error {:.3g} (tolerance {:.0e}) {}\n", c["output"].get<std::string>(),
               c["relative_l2"].get<double>(), tol, c["pass"].get<bool>() ? "PASS" : "FAIL");
  }
  std::vector<size_t> order(r->kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return r->kernels[x].measured_us > r->kernels[y].measured_us; });
  fmt::print("\n{:>5} {:>12} {:>12} {:>8}  {:<14} {:<28} {}\n", "#", "predicted_us", "measured_us", "error",
             "class", "op", "node");
  for (size_t i : order) {
    const auto& k = r->kernels[i];
    const std::string p = pred ? fmt::format("{:.1f}", ks[i]["predicted_us"].get<double>()) : "-";
    const std::string e = pred && k.measured_us > 0 ? fmt::format("{:+.0f}%", ks[i]["error_pct"].get<double>()) : "-";
    std::string op = k.op_type.size() > 28 ? k.op_type.substr(0, 25) + "..." : k.op_type;
    fmt::print("{:>5} {:>12} {:>12.1f} {:>8}  {:<14} {:<28} {}{}\n", k.plan_kernel, p, k.measured_us, e,
               k.cls + (k.fused_as_planned ? "" : "*"), op, k.name, k.device ? "" : " [host]");
  }
  if (!r->notes.empty()) {
    fmt::print("\nnotes\n");
    for (const auto& n : r->notes) fmt::print("  - {}\n", n);
  }
  if (!check_ok) {
    fmt::print(stderr, "gpusim run: --check failed: an output differs from the CPU reference beyond tolerance\n");
    return 1;
  }
  return 0;
}

}  // namespace

void add_run(CLI::App& app, int& rc) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("run", "Run a model for real on a backend, time every kernel, compare with predictions");
  cmd->add_option("model", a->model, "The .onnx file")->required();
  cmd->add_option("--backend", a->backend, "cpu (the reference), vulkan, cuda or hip");
  cmd->add_option("--device", a->device, "Device index within the backend (default 0)");
  cmd->add_option("--plan", a->plan, "Run this plan (JSON from gpusim plan --out) instead of the eager one");
  cmd->add_option("--gpu", a->gpu, "Profile for predictions and tiles (default: the one matching the device)");
  cmd->add_option("--profiles", a->profile_dirs, "Extra directories of GPU profiles");
  cmd->add_option("--dtype", a->dtype, "fp32 (default) or fp16: the float type kernels store");
  cmd->add_option("--input", a->inputs, "A serialized TensorProto (.pb) per graph input, in order (repeatable)");
  cmd->add_option("--dim", a->dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_option("--seed", a->seed, "Fills inputs and missing weights (default 1)");
  cmd->add_option("--repeat", a->repeat, "Timed runs after one warm-up (default 3); times are medians");
  cmd->add_flag("--check", a->check, "Compare every output with the CPU reference; exit 1 on a mismatch");
  cmd->add_flag("--json", a->json, "Print JSON (schema gpusim.run/1)");
  cmd->callback([a, &rc] {
    if (a->backend != "cpu" && a->backend != "vulkan" && a->backend != "cuda" && a->backend != "hip") {
      fmt::print(stderr, "gpusim run: --backend \"{}\" is not a backend; choose cpu, vulkan, cuda or hip\n", a->backend);
      rc = 2;
      return;
    }
    auto g = load_model(a->model, a->dims);
    if (!g) {
      fmt::print(stderr, "gpusim run: {}\n", g.error().message);
      rc = exit_code(g.error());
      return;
    }
    std::vector<cpu::HostTensor> inputs;
    for (const std::string& f : a->inputs) {
      auto t = read_tensor_file(f);
      if (!t) {
        fmt::print(stderr, "gpusim run: {}\n", t.error().message);
        rc = 1;
        return;
      }
      inputs.push_back(cpu::from_data(*t));
    }
    auto weights = read_model_tensors(a->model);
    if (!weights) {
      fmt::print(stderr, "gpusim run: {}\n", weights.error().message);
      rc = 1;
      return;
    }
    rc = a->backend == "cpu" ? run_cpu(*a, *g, inputs, *weights) : run_device(*a, *g, inputs, *weights);
  });
}

}  // namespace gpusim::cli
