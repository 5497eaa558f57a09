// gpusim tune MODEL --backend vulkan|cuda|hip [--gpu NAME] [--top-k K] [--budget-s S] [--out plan.json]
//                   [--store PATH | --no-cache] [--repeat N] [--json]
// gpusim tune --cache-info | --clear [--store PATH]
// Just-in-time autotuning: per kernel of the plan (eager, or --plan), the simulator ranks the tiles
// codegen generates, the top K are compiled and timed alone on the device, and the measured best
// wins (within 2 % of it, the simulator's order decides). Winners go to the tuning cache in the
// measurement store (default $GPUSIM_TUNING_DB, else ~/.cache/gpusim/tuning.db), keyed by device,
// driver, gpusim version and kernel: a second tune of the same model on the same device measures
// nothing. Prints the simulator's report card (regret of its top-1, Kendall's tau, top-1/top-3
// hits), then times the tuned plan end to end (--repeat runs; 0 skips it).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "commands.h"
#include "common.h"
#include "hw/atomic_file.h"
#include "gpusim/data_dirs.h"
#include "gpusim/gpusim.h"
#include "run_setup.h"

namespace gpusim::cli {

namespace {

struct TuneArgs : RunArgs {
  std::string out;
  bool cache_info = false, clear = false;
};

void print_report(const TuneReport& t) {
  fmt::print("model    {}\n", t.model);
  fmt::print("device   {} ({} backend, driver {}); ranked with profile {}\n", t.device_name, t.backend, t.driver, t.gpu);
  fmt::print("tuned    {} kernels measured ({} candidates, top-{}), {} from the cache, {} kept untuned\n", t.measured,
             t.candidates_run, t.top_k, t.cached, t.skipped);
  fmt::print("time     {:.3f} s: {:.3f} s compiling, {:.3f} s measuring{}\n", t.total_s, t.compile_s, t.measure_s,
             t.budget_hit ? " (the budget ran out)" : "");
  int fused = 0;
  for (const TunedKernel& k : t.kernels) fused += k.unfused_us > 0;
  if (fused > 0) {
    fmt::print("fusion   {} fused kernels also timed unfused (one kernel per node): {} ran faster so and were split\n",
               fused, t.split);
  }
  std::vector<const TunedKernel*> shown;
  for (const TunedKernel& k : t.kernels) {
    if (!k.cached && !k.skipped && k.chosen >= 0) shown.push_back(&k);
  }
  std::stable_sort(shown.begin(), shown.end(),
                   [](const TunedKernel* a, const TunedKernel* b) { return a->chosen_us > b->chosen_us; });
  if (!shown.empty()) {
    fmt::print("\n{:>4}  {:<22} {:<24} {:>11} {:>11} {:>7} {:>6} {:>5}\n", "#", "group", "chosen tile", "tuned us",
               "sim top-1", "regret", "tau", "rank");
    const size_t rows = std::min<size_t>(shown.size(), 15);
    for (size_t i = 0; i < rows; ++i) {
      const TunedKernel& k = *shown[i];
      fmt::print("{:>4}  {:<22} {:<24} {:>11.1f} {:>11.1f} {:>6.1f}% {:>6.2f} {:>5}\n", k.plan_kernel,
                 k.group.size() > 22 ? k.group.substr(0, 21) + "~" : k.group, tile_notation(k.tile), k.chosen_us, k.sim_pick_us,
                 100 * k.regret, k.kendall_tau, k.best_predicted_rank + 1);
    }
    if (shown.size() > rows) fmt::print("      ... {} more measured kernels (--json lists every one)\n", shown.size() - rows);
    fmt::print("      rank: where the simulator ranked the fastest candidate (1 = its top-1)\n");
  }
  if (t.graded > 0) {
    fmt::print("\nreport card over {} kernels with two or more candidates measured:\n", t.graded);
    fmt::print("  simulator's top-1 within 3% of the measured best  {:.0f}%\n", 100 * t.top1_within_3pct);
    fmt::print("  fastest was the simulator's top-1 / in its top 3  {:.0f}% / {:.0f}%\n", 100 * t.top1_share,
               100 * t.top3_share);
    fmt::print("  median regret of the top-1                        {:.1f}%\n", 100 * t.median_regret);
    fmt::print("  mean Kendall tau (predicted vs measured)          {:.2f}\n", t.mean_tau);
    if (t.tuned_us > 0) {
      fmt::print("  kernels measured alone: simulator's picks {:.3f} ms, tuned {:.3f} ms ({:.2f}x)\n",
                 t.sim_pick_us / 1e3, t.tuned_us / 1e3, t.sim_pick_us / t.tuned_us);
    }
  }
  fmt::print("cache    {}\n", t.store.empty() ? "off (nothing kept)" : t.store);
  for (const std::string& n : t.notes) fmt::print("note     {}\n", say(n));
}

int cache_command(const TuneArgs& a) {
  std::string path = a.store.empty() ? default_tuning_store() : a.store;
  if (path.empty() || path == "off") {
    fmt::print(stderr, "gpusim tune: no tuning store to {}: set $GPUSIM_TUNING_DB or give --store PATH\n",
               a.clear ? "clear" : "describe");
    return 2;
  }
  if (!std::filesystem::exists(path)) {
    if (a.json) {
      fmt::print("{}\n", tuning_cache_document(path, {}));
    } else {
      fmt::print("tuning cache {}: none yet (gpusim tune creates it)\n", path);
    }
    return 0;
  }
  if (a.clear) {
    // --clear always works: a store that cannot be opened or cleared because it is damaged (or is
    // not a store at all) is moved aside, losing nothing, and the next tune starts a new one.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      fmt::print(stderr, "gpusim tune: {} is not a regular file; give the store's path with --store\n", path);
      return 1;
    }
    auto store = MeasurementStore::open(path, false);
    Result<int64_t> n = [&]() -> Result<int64_t> {
      if (!store) return store.error();
      if (auto ok = store->check_integrity(); !ok) return ok.error();
      return store->clear_tuned();
    }();
    if (n) {
      fmt::print("tuning cache {}: {} entries removed (the measurements stay in the store)\n", path, *n);
      return 0;
    }
    if (n.error().code != ErrorCode::kParse) {
      fmt::print(stderr, "gpusim tune: {}\n", say(n.error()));
      return 1;
    }
    if (store) store = make_error(ErrorCode::kIo, "closed");
    auto aside = MeasurementStore::set_aside(path);
    if (!aside) {
      fmt::print(stderr, "gpusim tune: {} ({})\n", say(aside.error()), say(n.error()));
      return 1;
    }
    fmt::print("tuning cache {}: damaged ({}); moved to {} (its measurements stay there); the next tune starts a new "
               "cache\n",
               path, say(n.error()), *aside);
    return 0;
  }
  auto store = MeasurementStore::open_read(path);
  if (!store) {
    fmt::print(stderr, "gpusim tune: {}\n", say(store.error()));
    return 1;
  }
  auto info = store->tuning_info();
  if (!info) {
    fmt::print(stderr, "gpusim tune: {}\n", say(info.error()));
    return 1;
  }
  if (a.json) {
    fmt::print("{}\n", tuning_cache_document(path, *info));
    return 0;
  }
  fmt::print("tuning cache {}: {} entries\n", path, info->entries);
  for (const auto& d : info->devices) {
    fmt::print("  {} ({}, driver {}): {} kernels, newest {}\n", d.device, d.backend, d.driver, d.entries, d.newest);
  }
  return 0;
}

int tune(const TuneArgs& a) {
  if (a.cache_info || a.clear) return cache_command(a);
  if (a.model.empty()) {
    fmt::print(stderr, "gpusim tune: give a model to tune (gpusim tune MODEL --backend vulkan), or --cache-info / "
                       "--clear\n");
    return 2;
  }
  if (a.backend == "cpu") {
    fmt::print(stderr, "gpusim tune: --backend cpu is the reference and has nothing to tune; give vulkan, cuda or "
                       "hip\n");
    return 2;
  }
  if (!a.out.empty()) {
    if (const std::string why = output_file_problem(a.out, "--out"); !why.empty()) {
      fmt::print(stderr, "gpusim tune: {}\n", why);
      return 2;
    }
  }
  int rc = 0;
  std::vector<HostBuffer> buffers;
  std::optional<Program> prog = open_program(a, "gpusim tune", rc, buffers);
  if (!prog) return rc;
  TuneReport rep;
  if (int t = tune_program(*prog, a, "gpusim tune", &rep); t != 0) return t;
  if (!a.out.empty()) {
    if (auto w = write_file_atomic(a.out, prog->plan_document() + "\n"); !w) {
      fmt::print(stderr, "gpusim tune: {}\n", say(w.error()));
      return 1;
    }
  }
  std::optional<RunReport> whole;
  if (a.repeat > 0) {
    std::vector<ConstTensorView> views;
    for (const HostBuffer& b : buffers) views.push_back(b.view());
    TimingOptions to;
    to.repeat = a.repeat;
    ProgressLine line("gpusim tune", !a.quiet, a.progress);
    if (line.enabled()) {
      to.progress = [&line](const Progress& p) {
        if (!line.due(p.phase, p.run)) return;
        line.show(fmt::format("end to end: {} {}/{} {}", p.phase, p.done, p.total, p.unit));
      };
    }
    auto r = prog->time(views, to);
    line.clear();
    if (!r) {
      fmt::print(stderr, "gpusim tune: timing the tuned plan: {}\n", say(r.error()));
      return 1;
    }
    whole = std::move(*r);
  }
  if (a.json) {
    fmt::print("{}\n", tune_document(rep, whole ? &*whole : nullptr));
    return 0;
  }
  print_report(rep);
  if (whole) {
    fmt::print("measured {:.3f} ms end to end: the tuned plan, {} kernels, median of {} runs per kernel, summed\n",
               whole->total_us / 1e3, whole->plan_kernels, whole->repeat);
  }
  if (!a.out.empty()) fmt::print("plan     written to {} (gpusim run {} --plan {})\n", a.out, a.model, a.out);
  return 0;
}

}  // namespace

void add_tune_options(CLI::App& cmd, RunArgs& a) {
  cmd.add_option("--top-k", a.top_k, "Candidates measured per kernel, the simulator's best first (default 8)")
      ->check(CLI::Range(1, TuneOptions::kMaxTopK));
  cmd.add_option("--budget-s", a.budget_s, "Stop measuring after this many seconds; the rest keep the simulator's "
                                           "pick (default 0: no limit)")
      ->check(CLI::Range(0.0, 1e7));
  cmd.add_option("--store", a.store, "The measurement store holding the tuning cache (default $GPUSIM_TUNING_DB, "
                                     "else ~/.cache/gpusim/tuning.db; off: keep nothing)");
  cmd.add_flag("--no-cache", a.no_cache, "Measure every kernel even when the cache has it (and replace the entry)");
}

int tune_program(Program& prog, const RunArgs& a, std::string_view command, TuneReport* out) {
  TuneOptions o;
  o.top_k = a.top_k;
  o.budget_s = a.budget_s;
  o.store = a.store;
  o.use_cache = !a.no_cache;
  o.command = fmt::format("{} {} --backend {}", command, a.model, a.backend);
  ProgressLine line(std::string(command), !a.quiet, a.progress);
  if (line.enabled()) {
    o.progress = [&line](const Progress& p) {
      if (!line.due(p.phase, 0)) return;
      line.show(fmt::format("tuning kernel {}/{}, {} candidates measured", p.done, p.total, p.run));
    };
  }
  auto r = prog.tune(o);
  line.clear();
  if (!r) {
    fmt::print(stderr, "{}: {}\n", command, say(r.error()));
    return r.error().code == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  if (out) {
    *out = std::move(*r);
  } else if (!a.json) {
    print_report(*r);
    fmt::print("\n");
  }
  return 0;
}

void add_tune(CLI::App& app, int& rc) {
  auto a = std::make_shared<TuneArgs>();
  a->backend = "vulkan";
  auto* cmd = app.add_subcommand("tune", "Autotune a model's kernels on a device: the simulator proposes, the device "
                                         "decides, the cache remembers");
  cmd->add_option("model", a->model, "The .onnx file");
  cmd->add_option("--backend", a->backend, "vulkan (default), cuda or hip");
  cmd->add_option("--device", a->device, "Device index within the backend (default 0)");
  cmd->add_option("--plan", a->plan, "Tune this plan (JSON from gpusim plan --out) instead of the eager one");
  cmd->add_option("--gpu", a->gpu, "Profile that ranks the candidates (default: the one matching the device)");
  cmd->add_option("--profiles", a->profile_dirs, "Extra directories of GPU profiles");
  cmd->add_option("--dtype", a->dtype, "fp32 or fp16: the float type kernels store (default: the model's own)");
  cmd->add_option("--dim", a->dims, "Set a symbolic input dim: NAME=VALUE or INPUT:AXIS=VALUE (repeatable)");
  cmd->add_option("--seed", a->seed, "Fills inputs and missing weights for the end-to-end run (default 1)");
  add_tune_options(*cmd, *a);
  cmd->add_option("--out", a->out, "Write the tuned plan as JSON (schema gpusim.plan/1) for run --plan");
  cmd->add_option("--repeat", a->repeat, "Timed runs of the tuned plan end to end afterwards (default 3; 0 skips)")
      ->check(CLI::Range(0, TimingOptions::kMaxRepeat));
  cmd->add_flag("--cache-info", a->cache_info, "Describe the tuning cache (entries per device and driver) and exit");
  cmd->add_flag("--clear", a->clear, "Empty the tuning cache (the measurements stay) and exit");
  cmd->add_flag("--json", a->json, "Print JSON (schema gpusim.tune/1; with --cache-info, gpusim.tuning-cache/1)");
  cmd->add_flag("--quiet", a->quiet, "No progress line (by default one is drawn on stderr when it is a terminal)");
  cmd->add_flag("--progress", a->progress, "Progress on stderr even when it is not a terminal");
  cmd->callback([a, &rc] { rc = tune(*a); });
}

}  // namespace gpusim::cli
