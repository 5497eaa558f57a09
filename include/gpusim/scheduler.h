// Plan search. A FusionSpace lists, for one graph on one GPU, every legal fusion the passes find
// (each named: "elementwise-chain", "gemm-epilogue", "batchnorm-fold", "norm-prologue",
// "norm-epilogue", "transpose-into-gemm", "attention") as a candidate merge of eager kernels, and
// "recompute": a cheap elementwise op with several readers run again inside each of them instead
// of stored once and read back.
// A plan is a choice of candidates (a Decision) plus a tile per kernel; the space scores
// decisions quickly from cached kernel costs and builds the full Plan for the best ones.
//
// Schedulers (core/schedulers/<name>/) search that space behind one ask/tell interface:
// propose() a batch of decisions (whole, or as flips of one base), the driver scores them,
// report() the scores; repeat until propose() returns nothing. search() runs one and returns the top plans.
//
// Usage:
//   gpusim::SearchOptions o;  o.scheduler = gpusim::SchedulerKind::kGreedy;
//   auto r = gpusim::search(graph, target, o);      // r->plans[0] is the best (target.h)
#pragma once

#include "gpusim/export.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/kernel_work.h"
#include "gpusim/device_plan.h"
#include "gpusim/plan.h"
#include "gpusim/predict.h"
#include "gpusim/result.h"
#include "gpusim/target.h"

namespace gpusim {

struct GPUSIM_API FusionCandidate {
  std::string pass;          // which fusion pass proposed it
  std::vector<int> kernels;  // eager kernel indices merged by it (recompute: the producer, then its readers)
};

// One decision per candidate: 1 = fuse. Candidates that conflict with earlier accepted ones (two
// main loops in one kernel) are skipped when the plan is built.
using Decision = std::vector<uint8_t>;

class GPUSIM_API FusionSpace {
 public:
  // Every kernel's tile is the cost model's fastest of the target's tile space (target.h).
  FusionSpace(const Graph& g, const Target& target);
  // Not copied or moved: dev_ refers into target_, and the scoring caches are per object.
  FusionSpace(const FusionSpace&) = delete;
  FusionSpace& operator=(const FusionSpace&) = delete;

  const Graph& graph() const { return g_; }
  const DeviceModel& device() const { return target_.device; }
  const Target& target() const { return target_; }
  const Plan& eager() const { return eager_; }
  const std::vector<FusionCandidate>& candidates() const { return cands_; }

  // Groups of eager kernels under a decision (each group sorted, groups in execution order). A
  // member k >= eager().kernels.size() is a recomputed copy of kernel k - eager().kernels.size().
  std::vector<std::vector<int>> groups(const Decision& d) const;
  // Fast estimate of a plan's latency: kernels in order, each no faster than its launch.
  // When the decision is an already-scored one plus a candidate after all its others (how a beam
  // grows plans), the score is derived exactly from the parent's union-find, touching only the
  // groups that candidate changes.
  double score_us(const Decision& d) const;
  // Scores of `base` with each candidate in `flips` also taken, applied after the base's own
  // fusions (one that conflicts with them changes nothing and scores as the base): what
  // score_us gives the whole decision unless a later candidate of the base conflicts with the
  // flip. O(candidates) for the base, then O(the groups a flip touches) each: greedy's every
  // neighbour of a plan costs linear time and no copies of the decision.
  std::vector<double> score_flips(const Decision& base, const std::vector<size_t>& flips) const;
  // The full plan for a decision, tiles chosen by the cost model, with a line per fusion taken.
  Plan build(const Decision& d, SchedulerKind scheduler) const;
  // Replaces each kernel's tile with one drawn uniformly from the feasible tiles of the target's
  // tile space (generated_tiles), so random plans cover tilings as well as fusions.
  void sample_tiles(Plan& p, uint64_t seed) const;

 private:
  struct Cached {
    KernelWork work;
    TileConfig tile;
    double us;
    bool attention;
    int anchor;
  };
  const Cached& cached(const std::vector<int>& group) const;
  std::vector<int> nodes_of(const std::vector<int>& group) const;
  void find_candidates();
  // Union-find of the eager kernels under a decision; parent_[k] ends at each group's root.
  // Accepted recomputes land in recomp_ (candidate indices), their producers in removed_.
  void unite(const Decision& d) const;
  std::vector<int> recomputed_of(const std::vector<int>& group) const;
  int root(int k) const;

  const Graph& g_;
  Target target_;
  const DeviceModel& dev_;  // target_.device
  GraphIndex idx_;
  Plan eager_;
  std::vector<FusionCandidate> cands_;
  std::vector<int> kernel_of_node_;   // eager kernel per node, -1 for views and folds
  double launch_us_ = 0;
  std::vector<uint8_t> kind_;         // per eager kernel: pointwise, main loop or row-wise
  mutable std::unordered_map<uint64_t, Cached> cache_;  // keyed by an order-free hash of the group
  mutable std::vector<int> parent_, mains_, rows_, sizes_;  // scratch for unite() (a space is single-threaded)
  mutable std::vector<uint8_t> attention_, removed_, copied_, merged_;
  mutable std::vector<size_t> recomp_;
  // The union-find of recently scored decisions, for their children (bounded, oldest dropped).
  struct State {
    std::vector<int> parent, mains, rows, size;
    std::vector<uint8_t> attention, merged, removed, copied;
    std::vector<size_t> recomp;
    std::vector<uint64_t> hash;
    std::vector<double> cost;  // per root: its kernel time, at least the launch overhead
    std::vector<int> next;     // per kernel: the next member of its group (a circular list through the root)
    std::unordered_map<int, std::vector<int>> copies;  // per reader kernel: the recomputed copies it holds
    double total = 0;
  };
  mutable State scratch_;
  mutable std::unordered_map<std::string, std::shared_ptr<State>> states_;
  mutable std::vector<std::string> state_order_;
  double full_score(const Decision& d) const;
  double fill_state(const Decision& d, State& st) const;
  void trim_cache() const;
  static constexpr size_t kScoringCacheLimit = size_t{1} << 18;  // kernel groups (~0.5 KB each)
  mutable State flip_state_;
  double group_cost(State& s, int r) const;
  // Appends the members of group `r` (a root) to `out`: its kernels, then each recomputed copy
  // they hold once; O(the group's size).
  void members_of(const State& s, int r, std::vector<int>& out) const;
  void remember(const Decision& d, std::shared_ptr<State> s) const;
  std::vector<double> single_us_;
  std::vector<uint8_t> fold_source_;  // per eager kernel: the data movement of a fold-data-movement candidate
  std::vector<uint8_t> cand_attention_, cand_recompute_;  // per candidate: which pass     // each eager kernel alone (the common case when scoring)
};

// One batch of a scheduler's proposals: whole decisions, then (optionally) one base decision with
// single candidates turned on, each scored by FusionSpace::score_flips. A flip is a neighbour of
// the base described in O(1): proposing every neighbour of a plan costs O(candidates), where whole
// decisions would cost O(candidates^2) bytes. Scores come back in that order: decisions, flips.
struct GPUSIM_API Proposals {
  std::vector<Decision> decisions;
  std::shared_ptr<const Decision> base;
  std::vector<size_t> flips;
  size_t size() const { return decisions.size() + (base ? flips.size() : 0); }
  bool empty() const { return size() == 0; }
};

// The ask/tell interface every scheduler implements.
class GPUSIM_API Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::string_view name() const = 0;
  virtual Proposals propose() = 0;
  virtual void report(const std::vector<double>& scores) = 0;
};

struct GPUSIM_API SearchOptions {
  SchedulerKind scheduler = SchedulerKind::kGreedy;  // eager, greedy, beam, random or split (not lowering)
  Objective objective = Objective::kLatency;
  int top_k = 3;
  int beam_width = 8;
  int samples = 64;        // random: how many plans
  uint64_t seed = 1;       // random: reproducible by seed
  std::optional<DType> dtype;
  std::optional<double> memory_budget_gb;  // default: the GPU's memory
};

// The accepted range of each integer search option, the one table search() checks and the CLI,
// the service and the Python module check in their own spelling of the name.
struct GPUSIM_API SearchOptionRange {
  const char* name;  // as the service and Python spell it; the CLI's --flag has '-' for '_' (top: --top)
  int SearchOptions::*field;
  int lo, hi;
};
inline constexpr SearchOptionRange kSearchOptionRanges[] = {
    {"top", &SearchOptions::top_k, 1, 100},
    {"beam_width", &SearchOptions::beam_width, 1, 256},
    {"samples", &SearchOptions::samples, 1, 100000},
};

// The search sizes the schedulers that are not linear in the candidates accept: beam proposes
// 2 x width whole decisions per candidate (width x candidates^2 bytes in all), split every
// remaining fusion's removal per round (up to candidates^3). Above them search() says so and
// names greedy, which is linear.
inline constexpr double kBeamWorkLimit = 4e10;     // beam_width x candidates^2
inline constexpr size_t kSplitCandidateLimit = 20000;

// nullptr for SchedulerKind::kLowering (a runtime's lowering is no search).
GPUSIM_API std::unique_ptr<Scheduler> make_scheduler(SchedulerKind kind, const FusionSpace& space, const SearchOptions& o);
// The searchers' names, in SchedulerKind order ("eager", "greedy", "beam", "random", "split").
GPUSIM_API std::vector<std::string> scheduler_names();
// A searcher by name; the error names the value and the allowed ones (`field`: how the caller spells the option).
GPUSIM_API Result<SchedulerKind> parse_scheduler(std::string_view name, std::string_view field = "`scheduler`");
// A scheduler's own settings given for another scheduler would be ignored: `given` names the
// settings the caller set ("beam_width", "samples", "seed"); an error names the first that the
// scheduler `s` does not use and the scheduler that does.
GPUSIM_API Status check_scheduler_settings(SchedulerKind s, const std::vector<std::string>& given);
GPUSIM_API Result<Objective> parse_objective(std::string_view name, std::string_view field = "`objective`");

struct GPUSIM_API RankedPlan {
  Plan plan;
  Prediction prediction;
  double objective_value = 0;  // lower is better (throughput is negated samples/s)
};

struct GPUSIM_API SearchResult {
  std::vector<RankedPlan> plans;  // best first
  Prediction eager;
  int64_t plans_scored = 0;
  double scoring_seconds = 0;  // time in the propose/score/report loop
  std::vector<std::string> notes;
};

// Ranks plans over the target's tile space; the eager baseline (SearchResult::eager) is
// predict(g, target) of the same graph: the same kernels, tiles and number.
GPUSIM_API Result<SearchResult> search(const Graph& g, const Target& target, const SearchOptions& o);

// A plan's figure of merit under an objective, lower is better: latency and energy as predicted,
// memory as peak bytes, throughput as negated samples per second at `batch`.
GPUSIM_API double objective_value(Objective o, const Prediction& p, int64_t batch);
// Predicts `plan` on `gpu`, first offloading its largest weights (into plan.offloaded, with a
// decision line saying so) until the predicted peak memory fits `budget_bytes`, where it can.
GPUSIM_API Result<Prediction> fit_memory(const Graph& g, Plan& plan, const GpuProfile& gpu, double budget_bytes);

}  // namespace gpusim
