// The autotuner (see tune.h).
#include "tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "gpusim/kernel_work.h"
#include "gpusim/op_catalog.h"
#include "raw_decode.h"
#include "base/hash.h"

namespace gpusim::tune {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string attr_text(const Attribute& a) {
  switch (a.kind) {
    case Attribute::Kind::kInt: return fmt::format("i{}", a.i);
    case Attribute::Kind::kFloat: return fmt::format("f{:.9g}", a.f);
    case Attribute::Kind::kString: return "s" + a.s;
    case Attribute::Kind::kInts: return fmt::format("I{}", fmt::join(a.ints, ","));
    case Attribute::Kind::kFloats: return fmt::format("F{:.9g}", fmt::join(a.floats, ","));
    case Attribute::Kind::kStrings: return fmt::format("S{}", fmt::join(a.strings, ","));
    case Attribute::Kind::kTensor: {
      std::string s = fmt::format("T{}{}", dtype_name(a.tensor_dtype), shape_str(a.tensor_shape));
      if (a.tensor) s += fmt::format("={}|{:.9g}", fmt::join(a.tensor->ints, ","), fmt::join(a.tensor->reals, ","));
      return s;
    }
  }
  return "?";
}

// The group's op types, anchor first.
std::vector<std::string> group_ops(const Graph& g, const PlanKernel& k) {
  std::vector<std::string> ops;
  if (k.nodes.empty()) return ops;
  const auto anchor = static_cast<size_t>(std::clamp<int>(k.anchor, 0, static_cast<int>(k.nodes.size()) - 1));
  ops.push_back(g.nodes[static_cast<size_t>(k.nodes[anchor])].op_type);
  for (size_t i = 0; i < k.nodes.size(); ++i) {
    if (i != anchor) ops.push_back(g.nodes[static_cast<size_t>(k.nodes[i])].op_type);
  }
  return ops;
}
std::string group_name(const Graph& g, const PlanKernel& k) { return fmt::format("{}", fmt::join(group_ops(g, k), "+")); }


// Device bytes of a random-filled input: floats uniform in [-1, 1] (fp32 or fp16), bytes any value
// (packed quantized weights), other integers 0 (a valid index into any dim, as the executor's
// seeded inputs are).
std::vector<uint8_t> input_bytes(const codegen::Arg& a, std::mt19937_64& rng) {
  const auto n = static_cast<size_t>(std::max<int64_t>(1, a.elements));
  std::vector<uint8_t> bytes(n * static_cast<size_t>(codegen::storage_bytes(a.storage)), 0);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t k = 0; k < n; ++k) {
    if (a.storage == codegen::Storage::kF32) {
      const float f = u(rng);
      std::memcpy(&bytes[k * 4], &f, 4);
    } else if (a.storage == codegen::Storage::kF16) {
      const uint16_t h = detail::float_to_half(u(rng));
      std::memcpy(&bytes[k * 2], &h, 2);
    } else if (codegen::storage_is_byte(a.storage)) {
      bytes[k] = static_cast<uint8_t>(rng());  // quantized weights: any byte is a weight
    }
  }
  return bytes;
}

struct Timing {
  double median = 0, p95 = 0;
  int samples = 0;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

class Tuner {
 public:
  Tuner(backend::Backend& dev, const Graph& g, const DeviceModel& d, const Options& o)
      : dev_(dev), g_(g), idx_(index_graph(g)), d_(d), o_(o), rng_(7) {
    copts_ = codegen::target_options(dev.info(), o.fp16_storage, o.matrix, o.allow_tf32);
    cap_ = codegen::TargetCapability(copts_);
    lang_ = dev.info().language;
    version_ = GPUSIM_TUNE_VERSION;
  }
  Result<TuneResult> run(Plan& plan) {
    start_ = Clock::now();
    TuneResult r;
    std::vector<PlanKernel> out;  // the tuned plan's kernels: split groups become one kernel per node
    const int total = static_cast<int>(plan.kernels.size());
    progress_total_ = total;
    for (size_t ki = 0; ki < plan.kernels.size(); ++ki) {
      if (o_.progress) o_.progress(static_cast<int>(ki), total, r.candidates_run);
      PlanKernel& pk = plan.kernels[ki];
      KernelTune kt;
      kt.plan_kernel = static_cast<int>(ki);
      kt.group = group_name(g_, pk);
      kt.tile = pk.tile;
      if (pk.nodes.empty() || pk.anchor < 0 || pk.anchor >= static_cast<int>(pk.nodes.size())) {
        kt.skipped = true;
        ++r.skipped;
        r.kernels.push_back(std::move(kt));
        continue;
      }
      kt.name = g_.nodes[static_cast<size_t>(pk.nodes[static_cast<size_t>(pk.anchor)])].name;
      const std::string sig_text = kernel_signature(g_, pk, copts_);
      kt.signature = fmt::format("{:016x}", base::fnv1a(sig_text));
      const std::string key = tuning_key(dev_.info().name, dev_.info().driver, version_, kt.signature);
      if (o_.store && o_.use_cache) {
        auto hit = o_.store->tuned(key);
        if (!hit) return hit.error();
        if (*hit) {
          pk.tile = (*hit)->tile;
          kt.tile = pk.tile;
          kt.cached = true;
          kt.split = (*hit)->split;
          kt.chosen_us = (*hit)->time_us;
          ++r.cached;
          r.kernels.push_back(std::move(kt));
          continue;
        }
      }
      if (o_.budget_s > 0 && seconds_since(start_) > o_.budget_s) {
        r.budget_hit = true;
        kt.skipped = true;
        ++r.skipped;
        r.kernels.push_back(std::move(kt));
        continue;
      }
      auto s = tune_kernel(pk, kt, r);
      if (!s) return s.error();
      if (kt.skipped) {
        ++r.skipped;
      } else {
        ++r.measured;
        pk.tile = kt.tile;
        if (o_.store) {
          if (auto put = remember(key, kt); !put) return put.error();
        }
      }
      r.kernels.push_back(std::move(kt));
    }
    if (o_.progress) o_.progress(total, total, r.candidates_run);
    // Groups that ran faster unfused become one kernel per node.
    for (size_t ki = 0; ki < plan.kernels.size(); ++ki) {
      if (ki < r.kernels.size() && r.kernels[ki].split) {
        for (const PlanKernel& one : unfused(plan.kernels[ki])) out.push_back(one);
        ++r.split;
        plan.decisions.push_back(fmt::format("tune: kernel {} ({}) runs unfused, one kernel per node: {:.1f} us measured "
                                             "against {:.1f} us fused",
                                             ki, r.kernels[ki].group, r.kernels[ki].unfused_us, r.kernels[ki].chosen_us));
        if (!plan.decision_saved_us.empty()) {
          plan.decision_saved_us.push_back(std::max(0.0, r.kernels[ki].chosen_us - r.kernels[ki].unfused_us));
        }
      } else {
        out.push_back(plan.kernels[ki]);
      }
    }
    plan.kernels = std::move(out);
    if (r.split > 0) {
      r.notes.push_back(fmt::format("{} fused kernel(s) ran faster as one kernel per node and were split", r.split));
    }
    r.total_s = seconds_since(start_);
    grade(r);
    if (r.budget_hit) {
      r.notes.push_back(fmt::format("the {:.0f} s budget ran out: {} kernel(s) keep the simulator's pick untuned",
                                    o_.budget_s, r.skipped));
    }
    return r;
  }

 private:
  // The candidates: every tile of the menu as codegen generates it, deduplicated, priced, the
  // feasible ones in the simulator's order; the plan's own tile is among them.
  std::vector<Candidate> rank(const PlanKernel& pk, const KernelWork& w) const {
    std::vector<TileConfig> tiles = generated_tiles(w, d_, cap_);
    const TileConfig own = cap_.generated(w, pk.tile);
    if (std::find(tiles.begin(), tiles.end(), own) == tiles.end()) tiles.push_back(own);
    std::vector<Candidate> out;
    for (const TileConfig& t : tiles) {
      const KernelCost c = kernel_cost(w, t, d_);
      if (!c.feasible) continue;
      Candidate cand;
      cand.tile = t;
      cand.predicted_us = c.total_us;
      out.push_back(cand);
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const Candidate& a, const Candidate& b) { return a.predicted_us < b.predicted_us; });
    for (size_t i = 0; i < out.size(); ++i) out[i].predicted_rank = static_cast<int>(i);
    return out;
  }

  // One kernel's tuning; its buffers go when it is done (a model's tensors all at once would be
  // the whole model's activations).
  Status tune_kernel(const PlanKernel& pk, KernelTune& kt, TuneResult& r) {
    Status s = tune_kernel_on_buffers(pk, kt, r);
    for (auto& [t, b] : bufs_) dev_.release(b);
    bufs_.clear();
    for (auto& [t, b] : scratch_) dev_.release(b);
    scratch_.clear();
    return s;
  }

  Status tune_kernel_on_buffers(const PlanKernel& pk, KernelTune& kt, TuneResult& r) {
    const KernelWork w = plan_kernel_work(g_, idx_, pk);
    std::vector<Candidate> all = rank(pk, w);
    kt.space = static_cast<int>(all.size());
    const int k = o_.top_k;  // tune_plan checked its range
    // The top K that codegen builds and the device accepts (a tile past a device limit is skipped,
    // and the next one takes its place).
    struct Trial {
      Candidate c;
      codegen::Kernel kernel;
      backend::KernelSource source;
      backend::KernelHandle handle = 0;
    };
    std::vector<Trial> trials;
    const auto t0 = Clock::now();
    for (Candidate& c : all) {
      if (static_cast<int>(trials.size()) >= k) break;
      PlanKernel trial = pk;
      trial.tile = c.tile;
      auto gen = codegen::generate(g_, idx_, trial, copts_);
      if (!gen) continue;  // no generator for this group: nothing to tune
      backend::KernelSource src = gen->source(lang_);
      if (!dev_.can_run(src)) continue;
      trials.push_back({c, std::move(*gen), std::move(src), 0});
    }
    if (trials.size() < 2) {  // nothing to choose between (one tile, or a group codegen does not build)
      kt.skipped = true;
      for (const Trial& t : trials) kt.candidates.push_back(t.c);
      return Ok{};
    }
    std::vector<backend::KernelSource> sources;
    for (const Trial& t : trials) sources.push_back(t.source);
    dev_.prepare(sources);  // the candidates' compilers run in parallel where the backend can
    std::vector<Trial*> built;
    for (Trial& t : trials) {
      auto h = dev_.compile(t.source);
      if (!h) {
        if (h.error().code == ErrorCode::kDevice) return h.error();
        t.c.error = h.error().message;
        continue;
      }
      t.handle = *h;
      built.push_back(&t);
    }
    r.compile_s += seconds_since(t0);
    const auto t1 = Clock::now();
    for (Trial* t : built) {
      // Out of budget: the candidates measured so far decide (the simulator's best ones first).
      if (o_.budget_s > 0 && seconds_since(start_) > o_.budget_s && r.candidates_run > 0 &&
          std::any_of(built.begin(), built.end(), [](const Trial* b) { return b->c.measured_us > 0; })) {
        r.budget_hit = true;
        break;
      }
      if (o_.progress) o_.progress(kt.plan_kernel, progress_total_, r.candidates_run);
      auto m = time(t->kernel, t->handle);
      if (!m) {
        if (m.error().code == ErrorCode::kDevice) return m.error();
        t->c.error = m.error().message;
        continue;
      }
      t->c.measured_us = m->median;
      t->c.p95_us = m->p95;
      t->c.samples = m->samples;
      ++r.candidates_run;
    }
    r.measure_s += seconds_since(t1);
    for (const Trial& t : trials) kt.candidates.push_back(t.c);
    std::sort(kt.candidates.begin(), kt.candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.predicted_rank < b.predicted_rank; });
    decide(kt);
    if (kt.chosen < 0) {
      kt.skipped = true;
      return Ok{};
    }
    record(pk, w, kt);
    return try_unfused(pk, kt, r);
  }

  // The group's nodes as kernels of their own (device nodes only; views need none), each with the
  // simulator's best generated tile.
  std::vector<PlanKernel> unfused(const PlanKernel& pk) const {
    std::vector<PlanKernel> out;
    for (int ni : pk.nodes) {
      const auto work = node_work(g_, g_.nodes[static_cast<size_t>(ni)]);
      if (!work) continue;
      PlanKernel one;
      one.nodes = {ni};
      classify_kernel(g_, idx_, one);
      one.tile = best_generated_tile(*work, d_, cap_);
      out.push_back(std::move(one));
    }
    return out;
  }

  // The fusion alternative: measured when the group fuses several nodes and recomputes none
  // (attention, whose unfused form needs its scores stored, is left as planned). It wins only by
  // more than split_margin, since fusing also saves memory the timing does not see.
  Status try_unfused(const PlanKernel& pk, KernelTune& kt, TuneResult& r) {
    if (pk.nodes.size() < 2 || !pk.recomputed.empty() || pk.kind == KernelKind::kAttention || kt.chosen_us <= 0) return Ok{};
    const std::vector<PlanKernel> parts = unfused(pk);
    if (parts.size() < 2) return Ok{};
    double predicted = 0, measured = 0;
    const auto t0 = Clock::now();
    std::vector<std::pair<codegen::Kernel, backend::KernelHandle>> built;
    for (const PlanKernel& one : parts) {
      auto gen = codegen::generate(g_, idx_, one, copts_);
      if (!gen) return Ok{};  // not every node has a kernel: no alternative
      const backend::KernelSource src = gen->source(lang_);
      if (!dev_.can_run(src)) return Ok{};
      auto h = dev_.compile(src);
      if (!h) return h.error().code == ErrorCode::kDevice ? Status(h.error()) : Status(Ok{});
      predicted += kernel_cost(*node_work(g_, g_.nodes[static_cast<size_t>(one.nodes[0])]), one.tile, d_).total_us;
      built.emplace_back(std::move(*gen), *h);
    }
    r.compile_s += seconds_since(t0);
    const auto t1 = Clock::now();
    for (size_t i = 0; i < built.size(); ++i) {
      auto m = time(built[i].first, built[i].second);
      if (!m) return m.error().code == ErrorCode::kDevice ? Status(m.error()) : Status(Ok{});
      measured += m->median;
      ++r.candidates_run;
      const PlanKernel& one = parts[i];
      record_one(one, *node_work(g_, g_.nodes[static_cast<size_t>(one.nodes[0])]), one.tile, m->median, m->p95,
                 m->samples);
    }
    r.measure_s += seconds_since(t1);
    kt.unfused_predicted_us = predicted;
    kt.unfused_us = measured;
    kt.split = measured < kt.chosen_us * (1 - o_.split_margin);
    return Ok{};
  }

  // The measured best; within the tie band of it, the simulator's order decides.
  void decide(KernelTune& kt) const {
    double best = 0;
    int fastest = -1;
    for (size_t i = 0; i < kt.candidates.size(); ++i) {
      const Candidate& c = kt.candidates[i];
      if (c.measured_us <= 0) continue;
      if (fastest < 0 || c.measured_us < best) {
        best = c.measured_us;
        fastest = static_cast<int>(i);
      }
    }
    if (fastest < 0) return;
    for (size_t i = 0; i < kt.candidates.size(); ++i) {  // in the simulator's order
      const Candidate& c = kt.candidates[i];
      if (c.measured_us > 0 && c.measured_us <= best * (1 + o_.tie_band)) {
        kt.chosen = static_cast<int>(i);
        break;
      }
    }
    kt.tile = kt.candidates[static_cast<size_t>(kt.chosen)].tile;
    kt.chosen_us = kt.candidates[static_cast<size_t>(kt.chosen)].measured_us;
    kt.best_predicted_rank = kt.candidates[static_cast<size_t>(fastest)].predicted_rank;
    std::vector<double> p, m;  // in the simulator's order: m.front() is its pick's time
    for (const Candidate& c : kt.candidates) {
      if (c.measured_us <= 0) continue;
      p.push_back(c.predicted_us);
      m.push_back(c.measured_us);
    }
    kt.sim_pick_us = m.front();
    kt.regret = kt.sim_pick_us / best - 1;
    kt.kendall_tau = kendall_tau(p, m);
  }

  // Buffers for the kernel's arguments (shared by its candidates), inputs filled once; then a
  // warm-up launch, a probe of one timed launch to size the rounds, and a round of timed
  // launches; a second round when the samples scatter (p95 over 1.5x the median) and the median
  // of both.
  Result<Timing> time(const codegen::Kernel& k, backend::KernelHandle h) {
    std::vector<backend::Buffer> args;
    for (const codegen::Arg& a : k.args) {
      auto b = buffer(a);
      if (!b) return b.error();
      args.push_back(*b);
    }
    auto launch_round = [&](int n, bool timed) -> Result<std::vector<double>> {
      for (int i = 0; i < n; ++i) {
        auto s = dev_.launch(h, k.groups, args, timed);
        if (!s) return s.error();
      }
      if (auto s = dev_.synchronize(); !s) return s.error();
      auto t = dev_.read_timers();
      if (!t) return t.error();
      return *t;
    };
    if (auto w = launch_round(1, false); !w) return w.error();
    auto probe = launch_round(1, true);
    if (!probe) return probe.error();
    const double one = probe->empty() ? 0 : probe->front();
    // At least 5 timed launches, 3 for a kernel of 50 ms or more (its noise is small beside it).
    const int least = one >= 50e3 ? 3 : 5;
    const int n = one > 0 ? std::clamp(static_cast<int>(o_.target_ms * 1e3 / one), least, 200) : least;
    auto round = launch_round(n, true);
    if (!round) return round.error();
    std::vector<double> samples = *round;
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    if (!sorted.empty() && sorted[sorted.size() * 95 / 100] > 1.5 * sorted[sorted.size() / 2]) {
      auto again = launch_round(n, true);
      if (!again) return again.error();
      samples.insert(samples.end(), again->begin(), again->end());
      sorted = samples;
      std::sort(sorted.begin(), sorted.end());
    }
    if (sorted.empty()) {
      return make_error(ErrorCode::kUnsupported, fmt::format("{} has no device timers: nothing to tune with",
                                                             dev_.info().name));
    }
    Timing t;
    t.median = sorted[sorted.size() / 2];
    t.p95 = sorted[std::min(sorted.size() - 1, sorted.size() * 95 / 100)];
    t.samples = static_cast<int>(sorted.size());
    return t;
  }

  Result<backend::Buffer> buffer(const codegen::Arg& a) {
    // Whole 32-bit words, as the executor allocates (byte tensors are read a word at a time).
    const uint64_t bytes = (static_cast<uint64_t>(std::max<int64_t>(1, a.elements)) *
                                static_cast<uint64_t>(codegen::storage_bytes(a.storage)) + 3) / 4 * 4;
    if (a.scratch != codegen::Scratch::kNone) {
      // Split-K scratch, per size (candidates split differently); the counters start at zero.
      const auto key = std::make_pair(static_cast<int>(a.scratch), bytes);
      if (auto it = scratch_.find(key); it != scratch_.end()) return it->second;
      auto b = dev_.allocate(bytes);
      if (!b) return b.error();
      scratch_[key] = *b;
      const std::vector<uint8_t> zeros(bytes, 0);
      if (auto s = dev_.upload(*b, zeros.data(), zeros.size()); !s) return s.error();
      return *b;
    }
    const auto key = std::make_pair(a.tensor, static_cast<int>(a.storage));
    if (auto it = bufs_.find(key); it != bufs_.end()) return it->second;
    auto b = dev_.allocate(bytes);
    if (!b) return b.error();
    bufs_[key] = *b;
    if (!a.written) {
      const std::vector<uint8_t> data = input_bytes(a, rng_);
      if (auto s = dev_.upload(*b, data.data(), data.size()); !s) return s.error();
    }
    return *b;
  }

  // Every candidate that ran, as a measurement (source "autotune"), for validate and calibration.
  void record(const PlanKernel& pk, const KernelWork& w, const KernelTune& kt) {
    if (!o_.store) return;
    for (const Candidate& c : kt.candidates) {
      if (c.measured_us > 0) record_one(pk, w, c.tile, c.measured_us, c.p95_us, c.samples);
    }
  }

  void record_one(const PlanKernel& pk, const KernelWork& w, const TileConfig& tile, double median, double p95,
                  int samples) {
    if (!o_.store) return;
    const std::vector<std::string> fused = group_ops(g_, pk);
    Measurement m;
    m.op = fused.front();
    m.op_class = std::string(op_class_name(w.cls));
    m.dtype = w.dtype;
    m.work = w;
    m.tile = tile;
    m.fused_ops = fused;
    m.kernel = fmt::format("{} {}", fmt::join(fused, "+"), tile_notation(tile));
    m.gpu = dev_.info().name;
    m.backend = dev_.info().backend;
    m.driver = dev_.info().driver;
    m.runtime = "gpusim";
    m.timer = "device timestamps";
    m.statistic = fmt::format("median of {}", samples);
    m.repeats = samples;
    m.warm_cache = true;
    m.time_us = median;
    m.p50_us = median;
    m.p95_us = p95;
    m.source = "autotune";
    m.source_ref = o_.command;
    pending_.push_back(std::move(m));
  }

  Status remember(const std::string& key, const KernelTune& kt) {
    if (!pending_.empty()) {
      auto ins = o_.store->insert(pending_, o_.command.empty() ? "gpusim tune" : o_.command);
      if (!ins) return ins.error();
      pending_.clear();
    }
    TuningEntry e;
    e.key = key;
    e.device = dev_.info().name;
    e.driver = dev_.info().driver;
    e.version = version_;
    e.signature = kt.signature;
    e.backend = dev_.info().backend;
    e.group = kt.group;
    e.tile = kt.tile;
    e.split = kt.split;
    e.time_us = kt.split ? kt.unfused_us : kt.chosen_us;
    e.predicted_us = kt.candidates[static_cast<size_t>(kt.chosen)].predicted_us;
    int ran = 0;
    for (const Candidate& c : kt.candidates) ran += c.measured_us > 0;
    e.candidates = ran;
    return o_.store->put_tuned(e);
  }

  static void grade(TuneResult& r) {
    std::vector<double> regrets;
    double tau = 0;
    int within = 0, top1 = 0, top3 = 0;
    for (const KernelTune& k : r.kernels) {
      if (k.cached || k.skipped || k.chosen < 0) continue;
      int ran = 0;
      for (const Candidate& c : k.candidates) ran += c.measured_us > 0;
      if (ran < 2) continue;
      regrets.push_back(k.regret);
      tau += k.kendall_tau;
      within += k.regret <= 0.03;
      top1 += k.best_predicted_rank == 0;
      top3 += k.best_predicted_rank >= 0 && k.best_predicted_rank < 3;
    }
    for (const KernelTune& k : r.kernels) {
      if (k.cached || k.skipped || k.chosen < 0) continue;
      r.sim_pick_us += k.sim_pick_us;
      r.tuned_us += k.chosen_us;
    }
    r.graded = static_cast<int>(regrets.size());
    if (r.graded == 0) return;
    const double n = r.graded;
    r.top1_within_3pct = within / n;
    r.top1_share = top1 / n;
    r.top3_share = top3 / n;
    r.median_regret = median_of(regrets);
    r.mean_tau = tau / n;
  }

  backend::Backend& dev_;
  const Graph& g_;
  GraphIndex idx_;
  const DeviceModel& d_;
  Options o_;
  codegen::Options copts_;
  codegen::TargetCapability cap_{copts_};  // what the device's generators build (set from copts_)
  backend::Language lang_;
  std::string version_;
  std::mt19937_64 rng_;
  std::map<std::pair<TensorId, int>, backend::Buffer> bufs_;
  std::map<std::pair<int, uint64_t>, backend::Buffer> scratch_;  // (Scratch kind, bytes)
  std::vector<Measurement> pending_;
  int progress_total_ = 0;
  Clock::time_point start_;  // when run() began: the budget counts from it
};

}  // namespace

std::string kernel_signature(const Graph& g, const PlanKernel& k, const codegen::Options& o) {
  std::string s = fmt::format("storage {} matrix {} threads {} shared {} anchor {}\n",
                              codegen::storage_name(o.float_storage), codegen::matrix_path_name(o.matrix),
                              o.max_threads, o.max_shared_bytes, k.anchor);
  // Tensors by their position in the group: the first time each is seen.
  std::map<TensorId, int> local;
  auto tensor = [&](TensorId t) {
    if (t == kNoTensor) return std::string("-");
    const Tensor& tt = g.tensor(t);
    auto [it, fresh] = local.emplace(t, static_cast<int>(local.size()));
    std::string d = fmt::format("t{}:{}{}:{}", it->second, dtype_name(tt.dtype), shape_str(tt.shape),
                                role_name(tt.role));
    if (fresh && tt.value) {
      d += fmt::format("={}|{:.9g}", fmt::join(tt.value->ints, ","), fmt::join(tt.value->reals, ","));
    }
    return d;
  };
  for (size_t i = 0; i < k.nodes.size(); ++i) {
    const Node& n = g.nodes[static_cast<size_t>(k.nodes[i])];
    const bool recomputed = std::find(k.recomputed.begin(), k.recomputed.end(), k.nodes[i]) != k.recomputed.end();
    s += fmt::format("{}{}:{}{}(", n.domain, n.domain.empty() ? "" : ".", n.op_type, recomputed ? " recomputed" : "");
    for (TensorId t : n.inputs) s += tensor(t) + ",";
    s += ")->(";
    for (TensorId t : n.outputs) s += tensor(t) + ",";
    s += ")";
    for (const auto& [key, a] : n.attributes) s += " " + key + "=" + attr_text(a);
    s += "\n";
  }
  for (const std::string& f : k.fusions) s += "fusion " + f + "\n";
  return s;
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return 0;
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;
      if (da == 0) {
        ++ties_a;
      } else if (db == 0) {
        ++ties_b;
      } else if ((da > 0) == (db > 0)) {
        ++concordant;
      } else {
        ++discordant;
      }
    }
  }
  const double denom = std::sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b));
  return denom > 0 ? (concordant - discordant) / denom : 0;
}

Result<TuneResult> tune_plan(backend::Backend& dev, const Graph& g, Plan& plan, const DeviceModel& d,
                             const Options& opts) {
  if (opts.top_k < 1 || opts.top_k > Options::kMaxTopK) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("`top_k {}` is out of range: give 1 to {} candidates "
                                                               "per kernel",
                                                               opts.top_k, Options::kMaxTopK));
  }
  if (opts.budget_s < 0 || !std::isfinite(opts.budget_s)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`budget_s {}` is not a time budget: give seconds > 0, or 0 for no limit", opts.budget_s));
  }
  Tuner t(dev, g, d, opts);
  auto r = t.run(plan);
  if (r) r->top_k = opts.top_k;
  return r;
}

}  // namespace gpusim::tune
