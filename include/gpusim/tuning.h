// What an autotuning run found (Program::tune, `gpusim tune`, `gpusim run --tune`): per plan kernel,
// the candidates the simulator ranked and what each measured, the tile chosen, and the simulator's
// report card. The tuner itself is backends/tune.h; the cache lives in the measurement store
// (gpusim/measurement.h: TuningEntry).
#pragma once

#include "gpusim/export.h"

#include <string>
#include <vector>

#include "gpusim/kernel_cost.h"

namespace gpusim {

// The most candidates a tune measures per kernel (TuneOptions::top_k, `--top-k`).
inline constexpr int kMaxTuneTopK = 20;

struct GPUSIM_API TuneCandidate {
  TileConfig tile;
  int predicted_rank = 0;   // 0: the simulator's top-1
  double predicted_us = 0;
  double measured_us = 0;   // median of its timed launches; 0 when it did not run
  double p95_us = 0;
  int samples = 0;
  std::string error;        // why it did not compile or run ("" when it did)
};

struct GPUSIM_API TunedKernel {
  int plan_kernel = 0;
  std::string group;        // fused op types, anchor first: "Conv+Relu"
  std::string name;         // the anchor node's name
  std::string signature;    // what the cache keys on, with the device, driver and gpusim version
  bool cached = false;      // the tile came from the cache: nothing measured
  bool skipped = false;     // not measured (out of budget, fewer than two candidates): the plan's tile kept
  std::vector<TuneCandidate> candidates;  // in the simulator's order
  // The feasible tiles of the kernel's whole generated tile space, of which `candidates` are the
  // simulator's top K: where space <= K the tune measured all of them (an exhaustive sweep).
  int space = 0;
  int chosen = -1;          // index into candidates (-1: cached or skipped)
  // The measured time of the simulator's pick: its best-ranked candidate that ran (its top-1,
  // unless that one failed to compile or run).
  double sim_pick_us = 0;
  // The report card, for kernels measured with two or more candidates that ran:
  double regret = 0;        // sim_pick_us / measured best - 1
  double kendall_tau = 0;   // of predicted against measured times over those candidates
  int best_predicted_rank = -1;  // the simulator's rank of the fastest candidate
  TileConfig tile;          // the tile the plan has now
  double chosen_us = 0;     // its measured (or cached) time
  // The group's fusion alternative (a fused group of several nodes, none recomputed): its nodes as
  // one kernel each, with the simulator's best generated tiles, timed one after another.
  double unfused_predicted_us = 0, unfused_us = 0;  // 0: not measured
  bool split = false;       // the unfused alternative won: the plan runs the nodes as their own kernels
};

struct GPUSIM_API TuneReport {
  std::string model, backend, device_name, driver, gpu, store;
  std::vector<TunedKernel> kernels;  // one per plan kernel, in plan order
  int top_k = 0;
  int measured = 0, cached = 0, skipped = 0;  // kernels
  int split = 0;            // fused kernels that ran faster as one kernel per node, and were split
  int candidates_run = 0;
  double compile_s = 0, measure_s = 0, total_s = 0;
  bool budget_hit = false;
  // Over the graded kernels (measured, two or more candidates ran):
  int graded = 0;
  double top1_within_3pct = 0;  // share whose simulator top-1 ran within 3 % of the best
  double top1_share = 0;        // share whose fastest was the simulator's top-1
  double top3_share = 0;        // share whose fastest was in the simulator's top 3
  double median_regret = 0;
  double mean_tau = 0;
  // Kernels measured alone: the simulator's picks (its top-1 of each measured kernel) against the
  // chosen tiles, summed over the measured kernels.
  double sim_pick_us = 0, tuned_us = 0;
  std::vector<std::string> notes;
};

}  // namespace gpusim
