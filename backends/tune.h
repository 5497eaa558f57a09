// Just-in-time autotuning: the simulator proposes, the device decides, the cache remembers.
//
// For each kernel of a plan, the cost model ranks the tiles codegen builds on the device
// (device_plan.h: generated_tiles with codegen::TargetCapability, the space plan search ranks too), the top K are compiled together
// (Backend::prepare: shaderc, NVRTC or hiprtc on every core) and timed on the device alone (warm-up,
// repeats, median, a re-time when the samples scatter), and the measured best wins; within a tie
// band of the best the simulator's order decides, so a re-tune on a quiet device picks the same
// tile. A fused group is also timed unfused (one kernel per node) and split when that is faster
// by more than split_margin. What was measured goes to the measurement store (source "autotune")
// and the winner to its tuning cache, keyed by device, driver, gpusim version and the kernel's
// signature: a later tune of the same kernel on the same device and driver measures nothing (a
// warm start).
//
// Every tune also grades the simulator: per kernel, the regret of its top-1 (how much slower the
// tile it ranked first ran than the measured best), Kendall's tau of predicted against measured
// times over the candidates, and whether the measured best was its top-1 or in its top 3.
//
// Usage:
//   auto store = gpusim::MeasurementStore::open(path);
//   gpusim::tune::Options o;  o.top_k = 8;  o.store = &*store;
//   auto r = gpusim::tune::tune_plan(*dev, graph, plan, device_model, o);  // plan's tiles updated
//   fmt::print("{} kernels measured, {} from the cache\n", r->measured, r->cached);
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend.h"
#include "codegen.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/measurement.h"
#include "gpusim/plan.h"
#include "gpusim/tuning.h"

namespace gpusim::tune {

struct Options {
  static constexpr int kMaxTopK = kMaxTuneTopK;
  int top_k = 8;           // candidates measured per kernel: 1..kMaxTopK
  double budget_s = 0;     // stop measuring after this long (0: no limit); the rest keep the simulator's pick
  double tie_band = 0.02;  // candidates within 2 % of the measured best count as tied: the simulator's order decides
  // A fused group is split into one kernel per node only when that runs this much faster (fusing
  // also saves memory traffic and footprint the kernel timings do not see).
  double split_margin = 0.02;
  double target_ms = 20;   // time each candidate about this long per round (at least 5 launches, at most 200)
  bool fp16_storage = false;
  std::optional<codegen::MatrixPath> matrix;  // unset: codegen::matrix_path_for(the device)
  bool allow_tf32 = false;                    // fp32 GEMM-like kernels as TF32 where the path has it
  MeasurementStore* store = nullptr;  // cache and records; nullptr: neither read nor written
  bool use_cache = true;              // false: measure even what the cache holds (and overwrite it)
  std::string command;                // recorded with the measurements ("gpusim tune model.onnx ...")
  // Called between kernels and candidates: kernels done of total, and candidates measured so far.
  std::function<void(int done, int total, int measured)> progress;
};

using Candidate = TuneCandidate;
using KernelTune = TunedKernel;
using TuneResult = TuneReport;

// Tunes `plan` (valid for `g`, already in the dtype it runs in) on `dev`, ranking with `d`; the
// plan's tiles become the chosen ones.
Result<TuneResult> tune_plan(backend::Backend& dev, const Graph& g, Plan& plan, const DeviceModel& d,
                             const Options& opts);

// A kernel's identity for the cache: its nodes' ops, attributes and constant inputs, every
// tensor's shape and dtype, how the group is wired, and how codegen stores its data.
std::string kernel_signature(const Graph& g, const PlanKernel& k, const codegen::Options& o);

// Kendall's tau-b of two equally long series (1: same order, -1: reversed; 0 with fewer than two).
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace gpusim::tune
