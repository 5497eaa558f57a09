// The search driver: runs a scheduler's ask/tell loop over a FusionSpace, then ranks the best
// distinct plans by the full timeline under the objective, offloading weights to host memory
// where a plan does not fit the memory budget.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "gpusim/cancel.h"
#include "gpusim/scheduler.h"
#include "core/schedulers/registry.h"
#include "base/hash.h"

namespace gpusim {

std::vector<std::string> scheduler_names() {
  std::vector<std::string> out;
  for (SchedulerKind k : {SchedulerKind::kEager, SchedulerKind::kGreedy, SchedulerKind::kBeam, SchedulerKind::kRandom,
                          SchedulerKind::kSplit}) {
    out.emplace_back(scheduler_name(k));
  }
  return out;
}

Status check_scheduler_settings(SchedulerKind s, const std::vector<std::string>& given) {
  for (const std::string& g : given) {
    const SchedulerKind owner = g == "beam_width" ? SchedulerKind::kBeam : SchedulerKind::kRandom;
    if ((g == "beam_width" || g == "samples" || g == "seed") && s != owner) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("`{}` applies to the {} scheduler; the {} scheduler does not use it (give `scheduler "
                                    "{}`, or leave `{}` out)",
                                    g, scheduler_name(owner), scheduler_name(s), scheduler_name(owner), g));
    }
  }
  return Ok{};
}

Result<SchedulerKind> parse_scheduler(std::string_view name, std::string_view field) {
  const auto k = scheduler_from_name(name);
  if (!k || *k == SchedulerKind::kLowering) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} \"{}\" is not one of {}", field, name, fmt::join(scheduler_names(), ", ")));
  }
  return *k;
}

Result<Objective> parse_objective(std::string_view name, std::string_view field) {
  const auto o = objective_from_name(name);
  if (!o) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} \"{}\" is not one of {}", field, name, objective_names()));
  }
  return *o;
}

std::unique_ptr<Scheduler> make_scheduler(SchedulerKind kind, const FusionSpace& space, const SearchOptions& o) {
  switch (kind) {
    case SchedulerKind::kEager: return schedulers::make_eager(space, o);
    case SchedulerKind::kGreedy: return schedulers::make_greedy(space, o);
    case SchedulerKind::kBeam: return schedulers::make_beam(space, o);
    case SchedulerKind::kRandom: return schedulers::make_random(space, o);
    case SchedulerKind::kSplit: return schedulers::make_split(space, o);
    case SchedulerKind::kLowering: break;
  }
  return nullptr;
}

namespace {

// Order-free hash of a decision: the sum of schedulers::mix per candidate taken, so a base's hash
// plus mix(c) is the hash of the base with candidate c flipped on.
uint64_t decision_hash(const Decision& d) {
  uint64_t h = 0;
  for (size_t c = 0; c < d.size(); ++c) h += d[c] ? schedulers::mix(c) : 0;
  return h;
}

// The best `capacity` distinct finite scores seen, each with one decision: whole, or a shared base
// plus one flipped candidate (materialized only for the plans built at the end).
class Shortlist {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  struct Entry {
    uint64_t hash;
    std::shared_ptr<const Decision> base;
    size_t flip;
    Decision decision() const {
      Decision d = *base;
      if (flip != kNone) d[flip] = 1;
      return d;
    }
  };
  explicit Shortlist(size_t capacity) : capacity_(capacity) {}
  void offer(double score, uint64_t hash, std::shared_ptr<const Decision> base, size_t flip) {
    if (!std::isfinite(score)) return;  // a plan with a kernel no tile can run
    if (auto it = entries_.find(score); it != entries_.end()) {
      if (hash < it->second.hash) it->second = Entry{hash, std::move(base), flip};
      return;
    }
    if (entries_.size() >= capacity_ && score >= entries_.rbegin()->first) return;
    entries_.emplace(score, Entry{hash, std::move(base), flip});
    if (entries_.size() > capacity_) entries_.erase(std::prev(entries_.end()));
  }
  const std::map<double, Entry>& entries() const { return entries_; }

 private:
  size_t capacity_;
  std::map<double, Entry> entries_;
};

}  // namespace

double objective_value(Objective o, const Prediction& p, int64_t batch) {
  switch (o) {
    case Objective::kLatency: return p.total_us;
    case Objective::kThroughput: return -static_cast<double>(batch) / (p.total_us * 1e-6);
    case Objective::kEnergy: return p.energy_j;
    case Objective::kMemory: return static_cast<double>(p.peak_memory_bytes);
  }
  return p.total_us;
}

Result<Prediction> fit_memory(const Graph& g, Plan& plan, const GpuProfile& gpu, double budget_bytes) {
  auto pred = predict_plan(g, plan, gpu);
  if (!pred || static_cast<double>(pred->peak_memory_bytes) <= budget_bytes) return pred;
  std::vector<TensorId> weights;
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].role == TensorRole::kWeight) weights.push_back(static_cast<TensorId>(t));
  }
  const double scale = plan.dtype ? dtype_bits(*plan.dtype) / 32.0 : 1.0;  // weights re-typed from fp32
  std::sort(weights.begin(), weights.end(), [&](TensorId a, TensorId b) { return g.tensor(a).bytes() > g.tensor(b).bytes(); });
  double excess = static_cast<double>(pred->peak_memory_bytes) - budget_bytes;
  size_t next = 0;
  while (excess > 0 && next < weights.size()) {
    // Take enough weights to cover the excess, then check with the full timeline.
    double freed = 0;
    while (freed < excess && next < weights.size()) {
      freed += static_cast<double>(g.tensor(weights[next]).bytes()) * scale;
      plan.offloaded.push_back(weights[next++]);
    }
    pred = predict_plan(g, plan, gpu);
    if (!pred) return pred;
    excess = static_cast<double>(pred->peak_memory_bytes) - budget_bytes;
  }
  double moved = 0;
  for (TensorId t : plan.offloaded) moved += static_cast<double>(g.tensor(t).bytes()) * scale;
  double copy_us = 0;
  for (const Transfer& t : pred->transfers) copy_us += t.to_device ? t.duration_us : 0;
  // First in the list: it shapes the plan more than any one fusion.
  plan.decisions.insert(
      plan.decisions.begin(),
      excess > 0 ? fmt::format("offload: {} weights ({:.2f} GB) stay in host memory and stream over the host link ({:.1f} "
                               "ms of copies in), and the plan still needs {:.2f} GB, over the {:.3g} GB budget: its "
                               "activations alone do not fit",
                               plan.offloaded.size(), moved / 1e9, copy_us / 1e3,
                               static_cast<double>(pred->peak_memory_bytes) / 1e9, budget_bytes / 1e9)
                 : fmt::format("offload: {} weights ({:.2f} GB) stay in host memory and stream over the host link ({:.1f} "
                               "ms of copies in), so the plan fits in the {:.3g} GB budget",
                               plan.offloaded.size(), moved / 1e9, copy_us / 1e3, budget_bytes / 1e9));
  if (!plan.decision_saved_us.empty()) plan.decision_saved_us.insert(plan.decision_saved_us.begin(), 0.0);
  return pred;
}

Result<SearchResult> search(const Graph& input, const Target& target, const SearchOptions& o) {
  const GpuProfile& gpu = target.gpu();
  // A copy only when re-typed (a million-node graph is a gigabyte).
  std::optional<Graph> retyped;
  if (o.dtype) {
    if (auto s = check_retype(*o.dtype, gpu); !s) return s.error();
    if (auto s = check_retype_tiles(*o.dtype, target); !s) return s.error();
    retyped = retype(input, *o.dtype);
  }
  const Graph& g = retyped ? *retyped : input;
  FusionSpace space(g, target);
  auto sched = make_scheduler(o.scheduler, space, o);
  if (!sched) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("`scheduler` \"{}\" is not one of {}",
                                                               scheduler_name(o.scheduler), fmt::join(scheduler_names(), ", ")));
  }
  for (const SearchOptionRange& range : kSearchOptionRanges) {
    const int v = o.*range.field;
    if (v < range.lo || v > range.hi) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {} is out of range; give an integer from {} to {}",
                                                                 range.name, v, range.lo, range.hi));
    }
  }
  const size_t nc = space.candidates().size();
  if (o.scheduler == SchedulerKind::kBeam && static_cast<double>(o.beam_width) * static_cast<double>(nc) * static_cast<double>(nc) > kBeamWorkLimit) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`scheduler beam` on {} fusion candidates with width {} would copy {:.1e} decision "
                                  "bytes (its work grows as width x candidates^2; the limit is {:.0e}): use `scheduler "
                                  "greedy`, which is linear, or a smaller `beam_width`",
                                  nc, o.beam_width, static_cast<double>(o.beam_width) * static_cast<double>(nc) * static_cast<double>(nc),
                                  kBeamWorkLimit));
  }
  if (o.scheduler == SchedulerKind::kSplit && nc > kSplitCandidateLimit) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`scheduler split` on {} fusion candidates: it re-scores every remaining fusion's "
                                  "removal each round (up to candidates^3 work) and accepts at most {}; use "
                                  "`scheduler greedy`, which is linear",
                                  nc, kSplitCandidateLimit));
  }
  SearchResult r;
  // The most promising distinct plans, by the fast score: a bounded table, so memory does not grow
  // with the number of plans scored. One decision per distinct score (decisions that differ only in
  // fusions that could not apply give the same plan and score; two different plans with exactly
  // equal scores are rare), the one with the smallest hash, so a search is reproducible.
  const size_t full = static_cast<size_t>(std::max(8, 2 * o.top_k));
  Shortlist best(std::max<size_t>(64, 4 * full));
  const auto loop_start = std::chrono::steady_clock::now();
  while (true) {
    Proposals batch = sched->propose();
    if (batch.empty()) break;
    std::vector<double> scores;
    scores.reserve(batch.size());
    for (Decision& d : batch.decisions) {
      check_cancelled();
      const double s = space.score_us(d);
      scores.push_back(s);
      best.offer(s, decision_hash(d), std::make_shared<const Decision>(std::move(d)), Shortlist::kNone);
    }
    if (batch.base) {
      const std::vector<double> flipped = space.score_flips(*batch.base, batch.flips);
      const uint64_t base_hash = decision_hash(*batch.base);
      for (size_t i = 0; i < flipped.size(); ++i) {
        scores.push_back(flipped[i]);
        best.offer(flipped[i], base_hash + schedulers::mix(batch.flips[i]), batch.base, batch.flips[i]);
      }
    }
    r.plans_scored += static_cast<int64_t>(scores.size());
    sched->report(scores);
  }
  r.scoring_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
  const double budget = o.memory_budget_gb.value_or(gpu.memory.dram.size_gb) * 1e9;
  int64_t batch = 1;
  if (!g.inputs.empty() && !g.tensor(g.inputs[0]).shape.empty()) batch = g.tensor(g.inputs[0]).shape[0];
  // Decisions that skip conflicting fusions can build the same plan: each built plan's kernel
  // boundaries, hashed (the boundaries of a million-kernel plan are megabytes of text).
  std::unordered_set<uint64_t> built;
  const auto boundaries = [](const Plan& p) {
    uint64_t shape = base::kFnvBasis;  // a seed for the mix (not FNV itself)
    for (const PlanKernel& k : p.kernels) {
      shape = schedulers::mix(shape ^ static_cast<uint64_t>(k.nodes.back()));
      shape = schedulers::mix(shape ^ static_cast<uint64_t>(k.nodes.size()));
    }
    return shape;
  };
  size_t taken = 0;
  for (const auto& [score, entry] : best.entries()) {
    if (taken >= full) break;
    check_cancelled();
    RankedPlan rp;
    rp.plan = space.build(entry.decision(), o.scheduler);
    if (!built.insert(boundaries(rp.plan)).second) continue;
    if (o.scheduler == SchedulerKind::kRandom) space.sample_tiles(rp.plan, o.seed + taken);  // tilings too, reproducibly
    ++taken;
    rp.plan.dtype = o.dtype;
    rp.plan.objective = o.objective;
    auto pred = fit_memory(input, rp.plan, gpu, budget);
    if (!pred) return pred.error();
    rp.prediction = std::move(*pred);
    rp.objective_value = objective_value(o.objective, rp.prediction, batch);
    // Kept sorted as they come (ties in shortlist order, as a stable sort would leave them), and
    // only the top k: a plan and its prediction of a million-node graph are hundreds of megabytes.
    const auto at = std::upper_bound(r.plans.begin(), r.plans.end(), rp.objective_value,
                                     [](double v, const RankedPlan& p) { return v < p.objective_value; });
    if (at - r.plans.begin() >= o.top_k) continue;
    r.plans.insert(at, std::move(rp));
    if (r.plans.size() > static_cast<size_t>(o.top_k)) r.plans.pop_back();
  }
  Plan eager = space.eager();
  eager.dtype = o.dtype;
  eager.objective = o.objective;
  auto e = fit_memory(input, eager, gpu, budget);
  if (!e) return e.error();
  r.eager = std::move(*e);
  // The eager plan is a candidate like the others: a fused plan the full prediction scores worse
  // than it (the shortlist ranks by an estimate) is never ranked above it.
  if (!built.count(boundaries(eager))) {
    const double v = objective_value(o.objective, r.eager, batch);
    const auto at = std::upper_bound(r.plans.begin(), r.plans.end(), v,
                                     [](double x, const RankedPlan& p) { return x < p.objective_value; });
    if (at - r.plans.begin() < o.top_k) {
      RankedPlan rp;
      rp.plan = std::move(eager);
      rp.prediction = r.eager;
      rp.objective_value = v;
      r.plans.insert(at, std::move(rp));
      if (r.plans.size() > static_cast<size_t>(o.top_k)) r.plans.pop_back();
    }
  }
  // Every plan, the eager baseline too, holds tiles of the target's space.
  r.eager.tiles = target.describe();
  for (RankedPlan& p : r.plans) p.prediction.tiles = r.eager.tiles;
  r.notes.push_back(fmt::format("{} fusion candidates found by the passes; {} plans scored by the {} scheduler",
                                space.candidates().size(), r.plans_scored, sched->name()));
  r.notes.push_back(fmt::format("tiles: {}", r.eager.tiles));
  return r;
}

}  // namespace gpusim
