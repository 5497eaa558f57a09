// gpusim plan MODEL --gpu NAME [--objective ...] [--scheduler ...] [--top K] [--out plan.json] [--json]
// Searches fusion and tiling plans with the simulator and reports the best: predicted time,
// speed-up over eager, kernel count, and why each fusion was taken (bytes and time saved).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "commands.h"
#include "common.h"
#include "format.h"
#include "hw/atomic_file.h"
#include "gpusim/gpusim.h"

namespace gpusim::cli {

void add_plan(CLI::App& app, int& rc) {
  struct Args {
    std::string model, gpu, objective = "latency", scheduler = "greedy", out, dtype, tiles = "generated";
    std::vector<std::string> dims, profile_dirs;
    int top = 3, beam_width = 8, samples = 64;
    uint64_t seed = 1;
    double memory_budget_gb = 0;
    bool json = false, all = false, allow_tf32 = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("plan", "Search fusion and tiling plans with the simulator and report the best");
  cmd->add_option("model", a->model, "The .onnx file (weights are not needed)")->required();
  cmd->add_option("--gpu", a->gpu, "GPU profile name (gpusim profiles list) or a .yaml path")->required();
  cmd->add_option("--objective", a->objective, "latency | throughput | energy | memory (default latency)");
  cmd->add_option("--scheduler", a->scheduler, "eager | greedy | beam | random | split (default greedy)");
  cmd->add_option("--top", a->top, "How many plans to report (default 3)");
  cmd->add_option("--beam-width", a->beam_width, "beam: plans kept per step (default 8)");
  cmd->add_option("--samples", a->samples, "random: plans sampled (default 64)");
  cmd->add_option("--seed", a->seed, "random: the seed (same seed, same plans)");
  cmd->add_option("--memory-budget-gb", a->memory_budget_gb,
                  "Device memory a plan may use (default: the GPU's); weights are offloaded to fit");
  cmd->add_option("--out", a->out, "Write the best plan as JSON (schema gpusim.plan/1) for predict --plan and run");
  cmd->add_option("--dtype", a->dtype, "Re-type the graph's float tensors: fp32, fp16, bf16, or int8 / fp8 (every float tensor in 8 bits, as a W8A8 engine runs it: GEMMs and convolutions on the 8-bit matrix units)");
  cmd->add_option("--dim", a->dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_option("--profiles", a->profile_dirs, "Extra directory of GPU profiles, searched first (repeatable)");
  cmd->add_flag("--json", a->json, "Print JSON (schema gpusim.plan-search/1)");
  cmd->add_flag("--all", a->all, "List every decision of plan 1, not the 20 that save most");
  cmd->add_option("--tiles", a->tiles,
                  "The tile space ranked: generated (default: the tiles gpusim's code generator builds, so the plan "
                  "runs with gpusim run --plan exactly as priced) or library (the cost model's whole menu, any vector "
                  "width and matrix units codegen has no path to, as vendor libraries run kernels)");
  cmd->add_flag("--allow-tf32", a->allow_tf32,
                "fp32 GEMMs and convolutions on the matrix units as TF32 where the GPU has them (PyTorch's "
                "torch.backends.cuda.matmul.allow_tf32; off by default, as there)");
  cmd->callback([a, cmd, &rc] {
    SearchOptions o;
    auto obj = parse_objective(a->objective, "--objective");
    auto sched = parse_scheduler(a->scheduler, "--scheduler");
    if (!obj || !sched) {
      fmt::print(stderr, "gpusim plan: {}\n", say(!obj ? obj.error() : sched.error()));
      rc = 2;
      return;
    }
    o.objective = *obj;
    o.scheduler = *sched;
    // A scheduler's own settings, given for another scheduler, would be ignored: refused instead.
    std::vector<std::string> given;
    for (const auto& [flag, field] : {std::pair{"--beam-width", "beam_width"}, {"--samples", "samples"}, {"--seed", "seed"}}) {
      if (cmd->count(flag) > 0) given.emplace_back(field);
    }
    if (auto st = check_scheduler_settings(o.scheduler, given); !st) {
      fmt::print(stderr, "gpusim plan: {}\n", say(st.error()));
      rc = 2;
      return;
    }
    o.top_k = a->top;
    o.beam_width = a->beam_width;
    o.samples = a->samples;
    o.seed = a->seed;
    auto tiles = parse_tile_space(a->tiles, "--tiles");
    if (!tiles) {
      fmt::print(stderr, "gpusim plan: {}\n", say(tiles.error()));
      rc = 2;
      return;
    }
    // The library's ranges, named as flags (--beam-width) rather than as fields (beam_width).
    for (const SearchOptionRange& f : kSearchOptionRanges) {
      const int v = o.*f.field;
      if (v < f.lo || v > f.hi) {
        std::string flag = std::string("--") + f.name;
        std::replace(flag.begin(), flag.end(), '_', '-');
        fmt::print(stderr, "gpusim plan: {} {} is out of range; give an integer from {} to {}\n", flag, v, f.lo, f.hi);
        rc = 2;
        return;
      }
    }
    if (a->memory_budget_gb < 0) {
      fmt::print(stderr, "gpusim plan: --memory-budget-gb {} is negative; give the device memory a plan may use, in GB\n",
                 a->memory_budget_gb);
      rc = 2;
      return;
    }
    if (a->memory_budget_gb > 0) o.memory_budget_gb = a->memory_budget_gb;
    if (!a->dtype.empty()) {
      auto d = parse_dtype(a->dtype);
      if (!d) {
        fmt::print(stderr, "gpusim plan: {}\n", say(d.error()));
        rc = 2;
        return;
      }
      o.dtype = *d;
    }
    if (!a->out.empty()) {
      if (const std::string why = output_file_problem(a->out, "--out"); !why.empty()) {
        fmt::print(stderr, "gpusim plan: {}\n", why);
        rc = 2;
        return;
      }
    }
    const Session session({a->profile_dirs, {}});
    warn_profile_dirs(session.profile_dirs());
    auto m = session.open_model(a->model, {a->dims});
    if (!m) {
      fmt::print(stderr, "gpusim plan: {}\n", say(m.error()));
      rc = exit_code(m.error());
      return;
    }
    auto gpu = session.gpu(a->gpu);
    if (!gpu) {
      fmt::print(stderr, "gpusim plan: {}\n", say(gpu.error()));
      rc = 1;
      return;
    }
    auto r = session.plan(*m, session.target(*gpu, *tiles, {a->allow_tf32}), o);
    if (!r) {
      fmt::print(stderr, "gpusim plan: {}\n", say(r.error()));
      rc = exit_code(r.error());
      return;
    }
    if (!a->out.empty()) {
      if (auto w = write_file_atomic(a->out, plan_to_json(r->plans.front().plan, m->graph()) + "\n"); !w) {
        fmt::print(stderr, "gpusim plan: {}\n", say(w.error()));
        rc = 1;
        return;
      }
    }
    const double eager_us = r->eager.total_us;
    // Plans over the memory budget (the device's, or --memory-budget-gb) are marked; when even the
    // best one, with weights offloaded, is over, the command fails (exit 3) after its report.
    const double budget_gb = o.memory_budget_gb.value_or(gpu->memory.dram.size_gb);
    const auto over = [&](const RankedPlan& p) { return static_cast<double>(p.prediction.peak_memory_bytes) > budget_gb * 1e9; };
    const auto finish = [&] {
      if (!over(r->plans.front())) return;
      fmt::print(stderr,
                 "gpusim plan: no plan fits: the best needs {} of memory, over the {:.3g} GB {}{}; lower the batch "
                 "(--dim), use --dtype fp16, or choose a GPU with more memory\n",
                 bytes_str(static_cast<double>(r->plans.front().prediction.peak_memory_bytes)), budget_gb,
                 o.memory_budget_gb ? "budget" : "of " + gpu->name,
                 r->plans.front().plan.offloaded.empty() ? "" : " even with weights offloaded");
      rc = 3;
    };
    if (a->json) {
      fmt::print("{}\n", plan_search_document(a->model, m->graph(), *gpu, o, *r));
      rc = 0;
      finish();
      return;
    }
    std::vector<std::string> shapes;
    for (TensorId t : m->graph().inputs) {
      shapes.push_back(fmt::format("{} {}", m->graph().tensor(t).name, shape_str(m->graph().tensor(t).shape)));
    }
    fmt::print("model    {}\ninputs   {}\ngpu      {} ({}), {}\nsearch   {} scheduler, objective {}; {}\n", a->model,
               fmt::join(shapes, ", "), gpu->display_name, gpu->name,
               dtype_name(r->plans.front().prediction.dtype), scheduler_name(o.scheduler), a->objective,
               say(r->notes.front()));
    fmt::print("tiles    {}\n", r->eager.tiles);
    fmt::print("memory   {:.2f} GB a plan may use ({})\n", budget_gb,
               o.memory_budget_gb ? "--memory-budget-gb" : "the device's memory");
    fmt::print("eager    {:.3f} ms in {} kernels\n\n", eager_us / 1e3, r->eager.kernels.size());
    fmt::print("{:>4} {:>12} {:>9} {:>8} {:>12} {:>10}\n", "rank", "latency_ms", "speedup", "kernels", "peak_mem",
               "energy_J");
    bool any_over = false;
    for (size_t i = 0; i < r->plans.size(); ++i) {
      const RankedPlan& p = r->plans[i];
      any_over = any_over || over(p);
      fmt::print("{:>4} {:>12.3f} {:>8.2f}x {:>8} {:>11}{} {:>10.3f}\n", i + 1, p.prediction.total_us / 1e3,
                 eager_us / p.prediction.total_us, p.plan.kernels.size(),
                 bytes_str(static_cast<double>(p.prediction.peak_memory_bytes)), over(p) ? "!" : " ",
                 p.prediction.energy_j);
    }
    if (any_over) {
      fmt::print("  ! over the {:.3g} GB {}\n", budget_gb,
                 o.memory_budget_gb ? std::string("memory budget") : "of " + gpu->name + "'s memory");
    }
    const Plan& best = r->plans.front().plan;
    const size_t shown = a->all ? best.decisions.size() : std::min<size_t>(best.decisions.size(), 20);
    double saved = 0;
    for (double us : best.decision_saved_us) saved += us;
    fmt::print("\nwhy (plan 1: {} decisions{}; its fusions save {:.3f} ms of kernel time)\n", best.decisions.size(),
               shown < best.decisions.size() ? fmt::format(", the {} that save most; --all lists every one", shown) : "",
               saved / 1e3);
    for (size_t i = 0; i < shown; ++i) fmt::print("  - {}\n", best.decisions[i]);
    if (!a->out.empty()) {
      // The command that scores the written plan, with every flag that shaped the graph.
      std::vector<std::string> w = {"predict", a->model, "--gpu", a->gpu, "--plan", a->out};
      for (const std::string& d : a->dims) w.insert(w.end(), {"--dim", d});
      if (!a->dtype.empty()) w.insert(w.end(), {"--dtype", a->dtype});
      for (const std::string& p : a->profile_dirs) w.insert(w.end(), {"--profiles", p});
      fmt::print("\nplan 1 written to {}; score it with:\n  {}\n", a->out, shell_command(w));
    }
    rc = 0;
    finish();
  });
}

}  // namespace gpusim::cli
