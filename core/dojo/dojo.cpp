// The GPU Dojo's generator (dojo.h): tasks from graphs x GPUs x constraints, plans per task,
// a row per kernel and per plan, written shard by shard.
#include "gpusim/dojo.h"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <cctype>
#include <cstdio>
#include <map>
#include <random>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "hw/atomic_file.h"
#include "base/json_text.h"
#include "gpusim/kernel_work.h"
#include "gpusim/measurement.h"
#include "gpusim/onnx_import.h"
#include "gpusim/plan.h"
#include "gpusim/predict.h"
#include "gpusim/scheduler.h"
#include "sim/work_json.h"
#include "base/hash.h"

namespace gpusim::dojo {

namespace {

namespace fs = std::filesystem;

// SplitMix64: a task's seed from the configuration's seed and the task's index, so a task's plans
// do not depend on how the tasks are sharded.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t text_hash(const std::string& s) { return base::fnv1a(s); }

std::string stem(const std::string& path) { return fs::path(path).stem().string(); }

std::string dims_text(const std::map<std::string, int64_t>& dims) {
  std::string s;
  for (const auto& [k, v] : dims) s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, v);
  return s;
}

// ---- rows ------------------------------------------------------------------------------------

// Appends one row's values in column order, as CSV or as an NDJSON object.
class RowWriter {
 public:
  RowWriter(const std::vector<Column>& cols, bool json) : cols_(cols), json_(json) {
    for (const Column& c : cols_) keys_.push_back(fmt::format("\"{}\":", c.name));
  }

  void begin() {
    i_ = 0;
    if (json_) buf_.push_back('{');
  }
  void end() {
    if (json_) buf_.push_back('}');
    buf_.push_back('\n');
    ++rows_;
  }
  void i(int64_t v) {
    const fmt::format_int f(v);
    field()->append(f.data(), f.size());
  }
  void f(double v) {
    std::string* b = field();
    if (std::isfinite(v)) {
      fmt::format_to(std::back_inserter(*b), FMT_COMPILE("{}"), v);
    } else {
      b->append(json_ ? "null" : "");
    }
  }
  void b(bool v) { field()->append(v ? "true" : "false"); }
  void null() { field()->append(json_ ? "null" : ""); }
  void s(std::string_view v) {
    std::string* b = field();
    if (json_) {
      b->push_back('"');
      for (char c : v) {
        if (c == '"' || c == '\\') b->push_back('\\');
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(*b), "\\u{:04x}", static_cast<int>(c));
          continue;
        }
        b->push_back(c);
      }
      b->push_back('"');
    } else if (v.find_first_of(",\"\n") != std::string_view::npos) {
      b->push_back('"');
      for (char c : v) {
        if (c == '"') b->push_back('"');
        b->push_back(c);
      }
      b->push_back('"');
    } else {
      b->append(v);
    }
  }

  std::string header() const {
    std::string h;
    for (size_t k = 0; k < cols_.size(); ++k) h += fmt::format("{}{}", k ? "," : "", cols_[k].name);
    return h + "\n";
  }
  std::string& text() { return buf_; }
  int64_t rows() const { return rows_; }

 private:
  // The buffer, positioned for the next field (separator and, in NDJSON, its name written).
  std::string* field() {
    if (i_ > 0) buf_.push_back(',');
    if (json_) buf_ += keys_[std::min(i_, keys_.size() - 1)];
    ++i_;
    return &buf_;
  }

  const std::vector<Column>& cols_;
  std::vector<std::string> keys_;  // "name": of each column, for NDJSON
  bool json_;
  std::string buf_;
  size_t i_ = 0;
  int64_t rows_ = 0;
};

// ---- GPUs ------------------------------------------------------------------------------------

// The profile under a power cap: TDP scaled, and the clock it sustains scaled by the cube root of
// the cap (dynamic power goes as frequency x voltage^2, and voltage tracks frequency).
GpuProfile capped(const GpuProfile& p, double fraction) {
  if (fraction >= 1.0) return p;
  GpuProfile c = p;
  c.compute.sustained_clock_mhz = sustained_clock_mhz(p) * std::cbrt(fraction);
  c.power.tdp_w = p.power.tdp_w * fraction;
  return c;
}

}  // namespace

std::string virtual_gpu_yaml(const GpuProfile& base, const std::string& name, uint64_t seed) {
  std::mt19937_64 rng(mix(seed));
  auto draw = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  const ComputeSpec& c = base.compute;
  // Units and clock set every compute peak (rate per unit per clock is the architecture's); DRAM
  // and L2 vary on their own, within what a product line spans; TDP follows units x clock.
  const int units = std::max(1, static_cast<int>(std::lround(c.units * draw(0.5, 1.5))));
  const double clock = draw(0.85, 1.15);
  const double compute = static_cast<double>(units) / std::max(1, c.units) * clock;
  const double dram = draw(0.6, 1.6);
  const double l2_size = std::pow(2.0, std::round(draw(-1.0, 1.0)));  // half, same or double
  const double mem_gb = base.memory.dram.size_gb * std::pow(2.0, std::round(draw(-1.0, 1.0)));
  const double tdp = base.power.tdp_w * std::sqrt(compute);
  // The virtual card: the base with those figures scaled, written by the profile format's writer
  // (extends the base, only what differs; figures to 6 significant digits).
  auto r6 = [](double v) { return std::stod(fmt::format("{:.6g}", v)); };
  GpuProfile v = base;
  v.name = name;
  v.display_name = fmt::format("{} (virtual {})", base.display_name, name);
  v.calibrated.reset();
  ComputeSpec& vc = v.compute;
  vc.units = units;
  vc.boost_clock_mhz = r6(c.boost_clock_mhz * clock);
  if (c.base_clock_mhz > 0) vc.base_clock_mhz = r6(c.base_clock_mhz * clock);
  if (c.sustained_clock_mhz > 0) vc.sustained_clock_mhz = r6(c.sustained_clock_mhz * clock);
  if (c.shared_memory_bandwidth_gbps > 0) vc.shared_memory_bandwidth_gbps = r6(c.shared_memory_bandwidth_gbps * compute);
  for (auto& [prec, t] : vc.vector_tflops) t = r6(t * compute);
  for (MatrixPeak& m : vc.matrix_tflops) m.tflops = r6(m.tflops * compute);
  v.memory.dram.size_gb = r6(mem_gb);
  v.memory.dram.bandwidth_gbps = r6(base.memory.dram.bandwidth_gbps * dram);
  if (base.memory.l2.present) {
    v.memory.l2.size_mb = r6(base.memory.l2.size_mb * l2_size);
    if (base.memory.l2.bandwidth_gbps > 0) v.memory.l2.bandwidth_gbps = r6(base.memory.l2.bandwidth_gbps * std::sqrt(compute));
  }
  if (base.power.tdp_w > 0) v.power.tdp_w = r6(tdp);
  v.sources["compute.units"] = fmt::format("virtual: {} units x {:.3f}", base.name, static_cast<double>(units) / std::max(1, c.units));
  v.sources["compute.boost_clock_mhz"] = fmt::format("virtual: {} clocks x {:.3f}", base.name, clock);
  v.sources["compute.vector_tflops"] = fmt::format("virtual: {} peaks x units x clock ({:.3f})", base.name, compute);
  v.sources["memory.dram"] = fmt::format("virtual: {} bandwidth x {:.3f}", base.name, dram);
  return profile_to_yaml(v, &base,
                         fmt::format("A virtual GPU of the gpusim Dojo: {} with units x{:.3f}, clocks x{:.3f}, DRAM "
                                     "bandwidth x{:.3f}, L2 x{}, memory x{} (seed {}).",
                                     base.name, static_cast<double>(units) / std::max(1, c.units), clock, dram, l2_size,
                                     mem_gb / std::max(1e-9, base.memory.dram.size_gb), seed));
}

Graph cut_graph(const Graph& g, size_t first, size_t last) {
  Graph s;
  s.name = g.name;
  s.source_path = g.source_path;
  s.opset = g.opset;
  s.notes = g.notes;
  std::vector<int> produced_at(g.tensors.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (TensorId t : g.nodes[i].outputs) {
      if (t != kNoTensor) produced_at[static_cast<size_t>(t)] = static_cast<int>(i);
    }
  }
  std::vector<bool> read_later(g.tensors.size(), false);
  for (size_t i = last; i < g.nodes.size(); ++i) {
    for (TensorId t : g.nodes[i].inputs) {
      if (t != kNoTensor) read_later[static_cast<size_t>(t)] = true;
    }
  }
  for (TensorId t : g.outputs) read_later[static_cast<size_t>(t)] = true;
  std::vector<TensorId> remap(g.tensors.size(), kNoTensor);
  auto keep = [&](TensorId t) {
    if (t == kNoTensor) return kNoTensor;
    TensorId& r = remap[static_cast<size_t>(t)];
    if (r != kNoTensor) return r;
    Tensor copy = g.tensor(t);
    const int p = produced_at[static_cast<size_t>(t)];
    const bool from_before = p >= 0 && static_cast<size_t>(p) < first && !g.nodes[static_cast<size_t>(p)].folded;
    if (from_before || copy.role == TensorRole::kInput) {
      copy.role = TensorRole::kInput;
      r = s.add_tensor(std::move(copy));
      s.inputs.push_back(r);
    } else {
      if (copy.role == TensorRole::kOutput) copy.role = TensorRole::kActivation;
      r = s.add_tensor(std::move(copy));
    }
    return r;
  };
  for (size_t i = first; i < last; ++i) {
    Node n = g.nodes[i];
    for (TensorId& t : n.inputs) t = keep(t);
    for (TensorId& t : n.outputs) t = keep(t);
    s.nodes.push_back(std::move(n));
  }
  for (size_t i = first; i < last; ++i) {
    for (TensorId t : g.nodes[i].outputs) {
      if (t != kNoTensor && read_later[static_cast<size_t>(t)]) s.outputs.push_back(remap[static_cast<size_t>(t)]);
    }
  }
  if (s.outputs.empty()) {
    for (TensorId t : s.nodes.back().outputs) {
      if (t != kNoTensor) s.outputs.push_back(t);
    }
  }
  for (TensorId t : s.outputs) s.tensor(t).role = TensorRole::kOutput;
  return s;
}

Result<ShardSpec> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  ShardSpec s;
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    size_t a = 0, b = 0;
    s.index = std::stoi(text.substr(0, slash), &a);
    s.count = std::stoi(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`shard` \"{}\" is not of the form I/N (shard I of N, 0 <= I < N): write 0/4", text));
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("`shard {}`: the index must be from 0 to {} (shard I of N, 0 <= I < N)", text,
                                  std::max(0, s.count - 1)));
  }
  return s;
}

std::pair<size_t, size_t> shard_range(size_t tasks, ShardSpec s) {
  const auto n = static_cast<size_t>(std::max(1, s.count));
  const auto i = static_cast<size_t>(std::clamp(s.index, 0, s.count - 1));
  return {tasks * i / n, tasks * (i + 1) / n};
}

Result<Tasks> expand(const Config& c, const std::vector<std::string>& dirs) {
  Tasks t;
  t.config = c;
  t.profile_dirs = dirs;
  if (c.models.empty()) return make_error(ErrorCode::kInvalidArgument, "dojo: no models; give one or more ONNX files");
  if (c.gpus.empty()) return make_error(ErrorCode::kInvalidArgument, "dojo: no GPUs; give one or more profile ids (gpusim profiles lists them)");
  if (c.plans < 0 || c.plans > 10000) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("dojo: `plans {}` is out of range; give 0 to 10000", c.plans));
  }
  if (c.subgraphs < 0 || c.subgraphs > 10000) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("dojo: `subgraphs {}` is out of range; give 0 to 10000", c.subgraphs));
  }
  if (c.virtual_gpus < 0 || c.virtual_gpus > 1000) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("dojo: `virtual_gpus {}` is out of range; give 0 to 1000", c.virtual_gpus));
  }
  if (c.format != "csv" && c.format != "ndjson") {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("dojo: `format` \"{}\" is not csv or ndjson", c.format));
  }
  const auto dtype = float_dtype_from_name(c.dtype);
  if (!dtype || *dtype == DType::kFloat64) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("dojo: `dtype` \"{}\": give fp32, fp16 or bf16", c.dtype));
  }
  if (auto ts = parse_tile_space(c.tiles, "dojo: tiles"); !ts) return ts.error();
  for (const std::string& o : c.objectives) {
    if (!objective_from_name(o)) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("dojo: `objective` \"{}\" is not latency, throughput, energy or memory", o));
    }
  }
  for (double f : c.memory_fractions) {
    if (!(f > 0 && f <= 1)) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("dojo: `memory_fraction {}` is out of range; give a fraction in (0, 1]", f));
    }
  }
  for (double f : c.power_fractions) {
    if (!(f >= 0.2 && f <= 1)) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("dojo: `power_fraction {}` is out of range; give a fraction in [0.2, 1]", f));
    }
  }
  // Graph variants.
  std::vector<std::map<std::string, int64_t>> sets = c.dim_sets;
  if (sets.empty()) sets.emplace_back();
  for (const std::string& path : c.models) {
    int kept = 0;
    // Whether a dim override names a dim of this model: INPUT:AXIS an input it has, a name a
    // symbolic dim of its inputs (an import with only that override says so).
    std::vector<std::string> input_names;
    std::map<std::string, bool> names_dim;
    auto applies = [&](const std::string& key) -> bool {
      if (auto it = names_dim.find(key); it != names_dim.end()) return it->second;
      ImportOptions probe;
      probe.other_dims = 1;
      probe.onnx_shape_inference = false;
      bool ok = false;
      if (const auto colon = key.rfind(':'); colon != std::string::npos) {
        if (input_names.empty()) {
          if (auto g = import_onnx(path, probe)) {
            for (TensorId in : g->inputs) input_names.push_back(g->tensor(in).name);
          }
        }
        ok = std::find(input_names.begin(), input_names.end(), key.substr(0, colon)) != input_names.end();
      } else {
        probe.dims[key] = 1;
        auto g = import_onnx(path, probe);
        // A model with no symbolic dims: a dim name does not apply (batch=1 is noted where every input
        // leads with 1, refused where one does not).
        const auto fixed = [](const std::string& text) {
          return text.find("the model's inputs have no symbolic dims") != std::string::npos;
        };
        ok = g ? std::none_of(g->notes.begin(), g->notes.end(), fixed)
               : !fixed(g.error().message) && g.error().message.find("matches no input dim") == std::string::npos;
      }
      return names_dim[key] = ok;
    };
    std::vector<std::map<std::string, int64_t>> model_sets = sets;
    for (size_t si = 0; si < model_sets.size(); ++si) {
      const auto dims = model_sets[si];
      // A dim set naming a dim this model does not have does not apply to it.
      if (!std::all_of(dims.begin(), dims.end(), [&](const auto& kv) { return applies(kv.first); })) {
        t.notes.push_back(fmt::format("{}: dim set {} names a dim its inputs do not have: skipped for it", path,
                                      dims_text(dims)));
        // A model no set applies to runs once as it is.
        if (si + 1 == model_sets.size() && kept == 0) model_sets.emplace_back();
        continue;
      }
      ImportOptions io;
      io.dims = dims;
      io.onnx_shape_inference = false;
      auto g = import_onnx(path, io);
      if (!g) return make_error(g.error().code, fmt::format("dojo: {}", g.error().message));
      GraphVariant v;
      v.family = stem(path);
      v.id = dims.empty() ? v.family : fmt::format("{}[{}]", v.family, dims_text(dims));
      v.path = path;
      v.dims = dims;
      v.graph = std::make_shared<const Graph>(retype(*g, *dtype));
      // Sub-graphs: windows of 8..64 nodes that launch kernels, at seeded positions.
      std::vector<size_t> runtime;
      for (size_t i = 0; i < v.graph->nodes.size(); ++i) {
        if (runs_on_device(*v.graph, v.graph->nodes[i])) runtime.push_back(i);
      }
      std::mt19937_64 rng(mix(c.seed ^ text_hash(v.id)));
      std::vector<GraphVariant> cuts;
      for (int k = 0; k < c.subgraphs && runtime.size() >= 16; ++k) {
        const size_t len = 8 + static_cast<size_t>(rng() % std::min<size_t>(57, runtime.size() - 8));
        const size_t at = static_cast<size_t>(rng() % (runtime.size() - len + 1));
        GraphVariant cv;
        cv.family = v.family;
        cv.id = fmt::format("{}#{}-{}", v.id, runtime[at], runtime[at + len - 1]);
        cv.path = path;
        cv.dims = dims;
        cv.graph = std::make_shared<const Graph>(cut_graph(*v.graph, runtime[at], runtime[at + len - 1] + 1));
        cuts.push_back(std::move(cv));
      }
      t.graphs.push_back(std::move(v));
      for (GraphVariant& cv : cuts) t.graphs.push_back(std::move(cv));
      ++kept;
    }
  }
  // GPUs and their virtual variants ("all": every profile found, calibrated ones included).
  std::vector<std::string> gpu_ids = c.gpus;
  if (gpu_ids.size() == 1 && gpu_ids[0] == "all") {
    gpu_ids.clear();
    for (const ProfileEntry& e : list_profiles(dirs)) gpu_ids.push_back(e.path);
  }
  for (const std::string& id : gpu_ids) {
    auto p = find_profile(id, dirs);
    if (!p) return make_error(p.error().code, fmt::format("dojo: {}", p.error().message));
    GpuVariant base;
    base.id = p->name;
    base.family = p->name;
    base.profile = std::make_shared<const GpuProfile>(*p);
    t.gpus.push_back(base);
    for (int k = 1; k <= c.virtual_gpus; ++k) {
      GpuVariant v;
      v.id = fmt::format("{}-v{}", p->name, k);
      v.family = p->name;
      v.virtual_gpu = true;
      v.yaml = virtual_gpu_yaml(*p, v.id, mix(c.seed ^ text_hash(v.id)));
      auto vp = load_profile_yaml(v.yaml, v.id + ".yaml", dirs);
      if (!vp) {
        return make_error(vp.error().code, fmt::format("dojo: virtual GPU {} (around {}) is not a valid profile: {}", v.id,
                                                       p->name, vp.error().message));
      }
      v.profile = std::make_shared<const GpuProfile>(*vp);
      t.gpus.push_back(std::move(v));
    }
  }
  for (const std::string& o : c.objectives) {
    for (double m : c.memory_fractions) {
      for (double pw : c.power_fractions) t.constraints.push_back({o, m, pw});
    }
  }
  for (size_t g = 0; g < t.graphs.size(); ++g) {
    for (size_t v = 0; v < t.gpus.size(); ++v) {
      for (size_t k = 0; k < t.constraints.size(); ++k) {
        t.tasks.push_back({static_cast<int>(g), static_cast<int>(v), static_cast<int>(k)});
      }
    }
  }
  return t;
}

namespace {

// Measured kernel times by GPU profile, work and tile (medians), from the store's generated-kernel
// records whose device matches a profile of this dataset.
struct Measured {
  std::map<std::string, double> by_key;
  static std::string key(const std::string& gpu, const KernelWork& w, const TileConfig& t) {
    return gpu + "|" + work_to_json(w).dump() + "|" + tile_notation(t) + "|" + std::to_string(t.items_per_thread) + "|" +
           std::to_string(t.rows_per_block);
  }
};

Result<Measured> load_measured(const Tasks& t, const std::vector<std::string>& dirs) {
  Measured m;
  if (t.config.store.empty()) return m;
  auto store = MeasurementStore::open_read(t.config.store);
  if (!store) return make_error(store.error().code, fmt::format("dojo: `store`: {}", store.error().message));
  auto recs = store->query({});
  if (!recs) return make_error(recs.error().code, fmt::format("dojo: `store`: {}", recs.error().message));
  std::map<std::string, std::string> profile_of;  // device name -> profile name ("" : none)
  std::map<std::string, std::vector<double>> times;
  for (const Measurement& r : *recs) {
    if (!r.work || !r.tile || r.time_us <= 0) continue;
    auto it = profile_of.find(r.gpu);
    if (it == profile_of.end()) {
      auto p = profile_for_device(r.gpu, dirs);
      it = profile_of.emplace(r.gpu, p ? p->name : "").first;
    }
    if (it->second.empty()) continue;
    times[Measured::key(it->second, *r.work, *r.tile)].push_back(r.time_us);
  }
  for (auto& [k, v] : times) {
    std::sort(v.begin(), v.end());
    m.by_key[k] = v[v.size() / 2];
  }
  return m;
}

struct Shard {
  const Tasks& t;
  const Measured& measured;
  RowWriter kernels, plans;
  int64_t plan_count = 0;

  Shard(const Tasks& tasks, const Measured& m, bool json)
      : t(tasks), measured(m), kernels(kernel_columns(), json), plans(plan_columns(), json) {}

  void key_columns(RowWriter& w, size_t task, const Task& k, int plan, const char* kind) const {
    const GraphVariant& g = t.graphs[static_cast<size_t>(k.graph)];
    const GpuVariant& v = t.gpus[static_cast<size_t>(k.gpu)];
    const Constraint& c = t.constraints[static_cast<size_t>(k.constraint)];
    w.i(static_cast<int64_t>(task));
    w.s(g.id);
    w.s(g.family);
    w.s(v.id);
    w.s(v.family);
    w.b(v.virtual_gpu);
    w.s(c.objective);
    w.f(c.memory_fraction);
    w.f(c.power_fraction);
    w.i(plan);
    w.s(kind);
  }

  // One plan's rows.
  void write(size_t task, const Task& k, int plan, const char* kind, const Plan& p, const Prediction& pred,
             const GpuProfile& gpu, double budget, Objective obj, int64_t batch) {
    const GpuVariant& v = t.gpus[static_cast<size_t>(k.gpu)];
    const double clock = sustained_clock_mhz(gpu);
    const double matrix = gpu.matrix_tflops(precision_of(pred.dtype), Precision::kFp32).value_or(0.0);
    int fused = 0, with_measured = 0;
    for (size_t i = 0; i < pred.kernels.size(); ++i) {
      const PlannedKernel& pk = pred.kernels[i];
      const KernelWork& w = pk.work;
      const KernelCost& c = pk.cost;
      fused += pk.nodes.size() > 1;
      RowWriter& r = kernels;
      r.begin();
      key_columns(r, task, k, plan, kind);
      r.i(static_cast<int64_t>(i));
      r.s(pk.op_type);
      r.i(static_cast<int64_t>(pk.nodes.size()));
      r.s(op_class_name(w.cls));
      r.s(dtype_name(w.dtype));
      r.i(w.batch);
      r.i(w.m);
      r.i(w.n);
      r.i(w.k);
      r.i(w.window);
      r.i(w.kv_seq);
      r.i(w.head_dim);
      r.i(w.elements);
      r.i(w.rows);
      r.i(w.row_elements);
      r.i(w.flops.fma + w.epilogue_flops.fma);
      r.i(w.flops.transcendental + w.epilogue_flops.transcendental);
      r.i(w.flops.compare + w.epilogue_flops.compare);
      r.i(w.bytes_read);
      r.i(w.bytes_written);
      const TileConfig& tile = c.tile;
      r.i(tile.block_m);
      r.i(tile.block_n);
      r.i(tile.block_k);
      r.i(tile.threads);
      r.i(tile.stages);
      r.i(tile.split_k);
      r.i(tile.vector_width);
      r.i(tile.items_per_thread);
      r.i(gpu.compute.units);
      r.f(clock);
      r.f(gpu.vector_tflops(Precision::kFp32));
      r.f(matrix);
      r.f(gpu.memory.dram.bandwidth_gbps);
      r.f(gpu.memory.dram.size_gb);
      r.f(gpu.memory.l2.size_mb);
      r.f(gpu.memory.l2.bandwidth_gbps);
      r.f(gpu.compute.shared_memory_per_unit_kb);
      r.f(gpu.power.tdp_w);
      r.f(c.total_us);
      r.s(bound_name(c.bound));
      r.f(c.compute_us);
      r.f(c.dram_us);
      r.f(c.l2_us);
      r.f(c.latency_us);
      r.f(c.path_us);
      r.i(c.waves);
      r.f(c.occupancy);
      r.f(c.dram_bytes);
      r.f(pk.start_us);
      bool found = false;
      if (!measured.by_key.empty() && !v.virtual_gpu) {
        auto it = measured.by_key.find(Measured::key(v.family, w, tile));
        if (it != measured.by_key.end()) {
          r.f(it->second);
          found = true;
          ++with_measured;
        }
      }
      if (!found) r.null();
      r.end();
    }
    RowWriter& r = plans;
    r.begin();
    key_columns(r, task, k, plan, kind);
    r.i(static_cast<int64_t>(pred.kernels.size()));
    r.i(fused);
    r.i(static_cast<int64_t>(p.offloaded.size()));
    r.f(pred.total_us);
    r.f(pred.kernels_us);
    r.f(pred.launch_bound_us);
    r.i(pred.peak_memory_bytes);
    r.b(static_cast<double>(pred.peak_memory_bytes) <= budget);
    r.f(pred.energy_j);
    r.f(objective_value(obj, pred, batch));
    r.i(with_measured);
    r.end();
    ++plan_count;
  }
};

std::string shard_name(const char* table, ShardSpec s, const std::string& format) {
  return fmt::format("{}-{:05d}-of-{:05d}.{}", table, s.index, s.count, format);
}

}  // namespace

Result<ShardResult> generate_shard(const Tasks& t, ShardSpec s, const std::string& out_dir, const TargetMaker& make_target,
                                   const std::function<void(size_t, size_t)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  ShardResult res;
  res.index = s.index;
  res.count = s.count;
  const std::string format = t.config.format;
  res.kernels_file = (fs::path(out_dir) / shard_name("kernels", s, format)).string();
  res.plans_file = (fs::path(out_dir) / shard_name("plans", s, format)).string();
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) {
    return make_error(ErrorCode::kIo, fmt::format("dojo: cannot create {}: {}; give a writable `out` directory", out_dir,
                                                  ec.message()));
  }
  const std::string problem = shard_problem(out_dir, s, format);
  if (problem.empty()) {
    res.skipped = true;
    return res;
  }
  if (fs::exists(fs::path(out_dir) / shard_record_name(s), ec) || fs::exists(res.kernels_file, ec) ||
      fs::exists(res.plans_file, ec)) {
    res.redone = problem;
  }
  auto measured = load_measured(t, t.profile_dirs);
  if (!measured) return measured.error();
  Shard sh(t, *measured, format == "ndjson");
  if (format == "csv") {
    sh.kernels.text() = sh.kernels.header();
    sh.plans.text() = sh.plans.header();
  }
  const auto [first, last] = shard_range(t.tasks.size(), s);
  // One search space per graph and GPU (tasks are graph-major, then GPU: consecutive tasks share it).
  std::unique_ptr<FusionSpace> space;
  int space_graph = -1, space_gpu = -1, space_constraint_power = -1;
  GpuProfile gpu;
  Target target;
  auto space_kind = parse_tile_space(t.config.tiles, "dojo: tiles");
  if (!space_kind) return space_kind.error();
  if (!make_target) return make_error(ErrorCode::kInvalidArgument, "dojo: generate_shard needs a TargetMaker");
  for (size_t ti = first; ti < last; ++ti) {
    const Task& k = t.tasks[ti];
    const GraphVariant& gv = t.graphs[static_cast<size_t>(k.graph)];
    const Constraint& con = t.constraints[static_cast<size_t>(k.constraint)];
    const Graph& g = *gv.graph;
    // The power cap changes the device model: a space per (graph, GPU, cap).
    const int power_key = static_cast<int>(std::lround(con.power_fraction * 1e6));
    if (!space || space_graph != k.graph || space_gpu != k.gpu || space_constraint_power != power_key) {
      gpu = capped(*t.gpus[static_cast<size_t>(k.gpu)].profile, con.power_fraction);
      target = make_target(gpu, *space_kind);
      space = std::make_unique<FusionSpace>(g, target);
      space_graph = k.graph;
      space_gpu = k.gpu;
      space_constraint_power = power_key;
    }
    const uint64_t seed = mix(t.config.seed ^ mix(ti));
    const Objective obj = *objective_from_name(con.objective);
    const double budget = con.memory_fraction * gpu.memory.dram.size_gb * 1e9;
    int64_t batch = 1;
    if (!g.inputs.empty() && !g.tensor(g.inputs[0]).shape.empty()) batch = g.tensor(g.inputs[0]).shape[0];
    auto emit = [&](int index, const char* kind, Plan p) -> Status {
      auto pred = fit_memory(g, p, gpu, budget);
      if (!pred) {
        return make_error(pred.error().code, fmt::format("dojo: {} on {}, plan {} ({}): {}", gv.id,
                                                         t.gpus[static_cast<size_t>(k.gpu)].id, index, kind,
                                                         pred.error().message));
      }
      sh.write(ti, k, index, kind, p, *pred, gpu, budget, obj, batch);
      return Ok{};
    };
    // 0: eager; 1: the greedy search's best for the objective and budget; 2..: random plans.
    if (auto st = emit(0, "eager", space->eager()); !st) return st.error();
    SearchOptions so;
    so.scheduler = SchedulerKind::kGreedy;
    so.objective = obj;
    so.top_k = 1;
    so.memory_budget_gb = budget / 1e9;
    auto best = search(g, target, so);
    if (!best) return make_error(best.error().code, fmt::format("dojo: {}: {}", gv.id, best.error().message));
    if (auto st = emit(1, "best", best->plans.front().plan); !st) return st.error();
    if (t.config.plans > 0) {
      SearchOptions ro;
      ro.scheduler = SchedulerKind::kRandom;
      ro.samples = t.config.plans;
      ro.seed = seed;
      auto sched = make_scheduler(SchedulerKind::kRandom, *space, ro);
      const Proposals props = sched->propose();
      for (size_t i = 0; i < props.decisions.size(); ++i) {
        Plan p = space->build(props.decisions[i], SchedulerKind::kRandom);
        space->sample_tiles(p, mix(seed + i));
        if (auto st = emit(static_cast<int>(2 + i), "random", std::move(p)); !st) return st.error();
      }
    }
    if (progress) progress(ti - first + 1, last - first);
  }
  res.tasks = static_cast<int64_t>(last - first);
  res.plans = sh.plan_count;
  res.kernel_rows = sh.kernels.rows();
  // The files, then the record that makes the shard complete.
  fs::remove(fs::path(out_dir) / shard_record_name(s), ec);
  if (auto w = write_file_atomic(res.kernels_file, sh.kernels.text()); !w) return w.error();
  if (auto w = write_file_atomic(res.plans_file, sh.plans.text()); !w) return w.error();
  if (auto w = write_shard_record(out_dir, res, {fs::path(res.kernels_file).filename().string(),
                                                 fs::path(res.plans_file).filename().string()});
      !w) {
    return w.error();
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

namespace {

nlohmann::json config_json(const Config& c) {
  return {{"models", c.models},
          {"dim_sets", c.dim_sets},
          {"gpus", c.gpus},
          {"virtual_gpus", c.virtual_gpus},
          {"subgraphs", c.subgraphs},
          {"objectives", c.objectives},
          {"memory_fractions", c.memory_fractions},
          {"power_fractions", c.power_fractions},
          {"dtype", c.dtype},
          {"tiles", c.tiles},
          {"plans", c.plans},
          {"seed", c.seed},
          {"format", c.format},
          {"store", c.store}};
}

}  // namespace

std::string config_to_json(const Config& c) { return config_json(c).dump(); }

Result<Config> config_from_json(const std::string& text) {
  using nlohmann::json;
  auto parsed = parse_json(text, "dojo config");
  if (!parsed) {
    return make_error(parsed.error().code, parsed.error().message +
                                               "; give an object such as {\"models\": [\"m.onnx\"], \"gpus\": [\"nvidia-t4\"]}");
  }
  const json j = std::move(*parsed);
  if (!j.is_object()) return make_error(ErrorCode::kInvalidArgument, "dojo config: give a JSON object of Config's fields");
  Config c;
  static const std::vector<std::string> known = {"models", "dim_sets", "gpus", "virtual_gpus", "subgraphs", "objectives",
                                                 "memory_fractions", "power_fractions", "dtype", "tiles", "plans", "seed",
                                                 "format", "store"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("dojo config: unknown field \"{}\"; the fields are {}", key, fmt::join(known, ", ")));
    }
    try {
      if (key == "models") c.models = value.get<std::vector<std::string>>();
      if (key == "dim_sets") c.dim_sets = value.get<std::vector<std::map<std::string, int64_t>>>();
      if (key == "gpus") c.gpus = value.get<std::vector<std::string>>();
      if (key == "virtual_gpus") c.virtual_gpus = value.get<int>();
      if (key == "subgraphs") c.subgraphs = value.get<int>();
      if (key == "objectives") c.objectives = value.get<std::vector<std::string>>();
      if (key == "memory_fractions") c.memory_fractions = value.get<std::vector<double>>();
      if (key == "power_fractions") c.power_fractions = value.get<std::vector<double>>();
      if (key == "dtype") c.dtype = value.get<std::string>();
      if (key == "tiles") c.tiles = value.get<std::string>();
      if (key == "plans") c.plans = value.get<int>();
      if (key == "seed") c.seed = value.get<uint64_t>();
      if (key == "format") c.format = value.get<std::string>();
      if (key == "store") c.store = value.get<std::string>();
    } catch (const json::exception&) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("dojo config: field \"{}\" is {}, of the wrong type (lists of strings for models, "
                                    "gpus and objectives, of numbers for the fractions, of {{name: int}} objects for "
                                    "dim_sets; integers for virtual_gpus, subgraphs, plans and seed; strings otherwise)",
                                    key, value.dump()));
    }
  }
  return c;
}

namespace {

constexpr const char* kShardSchema = "gpusim.dojo-shard/1";

// A file's size and 128-bit content hash (two FNV-1a lanes, as content_hash), read in chunks.
struct Digest {
  int64_t bytes = -1;
  std::string hash;
};
Digest file_digest(const fs::path& p) {
  Digest d;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(p, ec))) return d;
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return d;
  base::ContentDigest digest;
  std::vector<char> buf(1 << 20);
  int64_t n = 0;
  size_t got = 0;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    digest.add(std::string_view(buf.data(), got));
    n += static_cast<int64_t>(got);
  }
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) return d;
  d.bytes = n;
  d.hash = digest.hex();
  return d;
}

Result<nlohmann::json> read_json_file(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return make_error(ErrorCode::kIo, fmt::format("{}: not a regular file", p.string()));
  const auto size = fs::file_size(p, ec);
  if (ec || size > (64u << 20)) return make_error(ErrorCode::kIo, fmt::format("{}: unreadable or over 64 MiB", p.string()));
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return make_error(ErrorCode::kIo, fmt::format("{}: cannot read it", p.string()));
  std::string text(size, '\0');
  const size_t got = std::fread(text.data(), 1, text.size(), f);
  std::fclose(f);
  text.resize(got);
  return parse_json(text, p.string());
}

// The dataset files a directory may hold: shards of any count and format, their records, the
// manifest and the card.
bool is_shard_file(const std::string& f) {
  auto digits = [&](size_t at, size_t n) {
    if (f.size() < at + n) return false;
    for (size_t i = at; i < at + n; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(f[i]))) return false;
    }
    return true;
  };
  for (const std::string prefix : {"kernels-", "plans-", "shard-"}) {
    if (f.rfind(prefix, 0) != 0) continue;
    const size_t at = prefix.size();
    if (!digits(at, 5) || f.compare(at + 5, 4, "-of-") != 0 || !digits(at + 9, 5)) return false;
    const std::string ext = f.substr(at + 14);
    if (prefix == "shard-") return ext == ".json";
    return ext == ".csv" || ext == ".ndjson" || ext == ".parquet";
  }
  return false;
}

std::string show(const nlohmann::json& v) {
  std::string t = v.dump(-1, ' ', false, kInvalidUtf8);
  return t.size() > 60 ? t.substr(0, 57) + "..." : t;
}

}  // namespace

std::string shard_record_name(ShardSpec s) { return fmt::format("shard-{:05d}-of-{:05d}.json", s.index, s.count); }

std::string shard_problem(const std::string& out_dir, ShardSpec s, const std::string& ext) {
  const fs::path dir(out_dir);
  const fs::path rec = dir / shard_record_name(s);
  std::error_code ec;
  if (!fs::exists(rec, ec)) return fmt::format("{} is missing", rec.filename().string());
  auto j = read_json_file(rec);
  if (!j) return j.error().message;
  try {
    if (j->at("schema") != kShardSchema || j->at("index") != s.index || j->at("count") != s.count) {
      return fmt::format("{} is not this shard's record", rec.filename().string());
    }
    const auto& files = j->at("files");
    if (!files.is_array() || files.size() != 2) return fmt::format("{} does not list two files", rec.filename().string());
    for (size_t k = 0; k < 2; ++k) {
      const std::string name = files[k].at("name");
      const std::string want = fmt::format("{}-{:05d}-of-{:05d}.{}", k == 0 ? "kernels" : "plans", s.index, s.count, ext);
      if (name != want) return fmt::format("{} lists {}, not {}", rec.filename().string(), name, want);
      const Digest d = file_digest(dir / name);
      if (d.bytes < 0) return fmt::format("{} is missing or not a regular file", name);
      const int64_t bytes = files[k].at("bytes");
      if (d.bytes != bytes) return fmt::format("{} is {} bytes; its record says {}", name, d.bytes, bytes);
      if (d.hash != files[k].at("hash")) return fmt::format("{} does not match the hash its record holds", name);
    }
  } catch (const nlohmann::json::exception&) {
    return fmt::format("{} is malformed", rec.filename().string());
  }
  return "";
}

Status write_shard_record(const std::string& out_dir, const ShardResult& r, const std::vector<std::string>& files) {
  using nlohmann::json;
  json list = json::array();
  for (const std::string& f : files) {
    const Digest d = file_digest(fs::path(out_dir) / f);
    if (d.bytes < 0) return make_error(ErrorCode::kIo, fmt::format("dojo: {}/{}: cannot read it back", out_dir, f));
    list.push_back({{"name", f}, {"bytes", d.bytes}, {"hash", d.hash}});
  }
  const json j = {{"schema", kShardSchema}, {"index", r.index},   {"count", r.count},         {"tasks", r.tasks},
                  {"plans", r.plans},       {"kernel_rows", r.kernel_rows}, {"files", list}};
  return write_file_atomic((fs::path(out_dir) / shard_record_name({r.index, r.count})).string(), j.dump(1) + "\n");
}

Status prepare_out_dir(const Tasks& t, int shard_count, const std::string& out_dir, bool force) {
  using nlohmann::json;
  const fs::path dir(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    return make_error(ErrorCode::kIo, fmt::format("dojo: cannot create the output directory {}: {}; give a writable `out` "
                                                  "directory",
                                                  out_dir, ec ? ec.message() : "it is not a directory"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return make_error(ErrorCode::kIo, fmt::format("dojo: the output directory {} is not writable; give a writable `out` "
                                                  "directory",
                                                  out_dir));
  }
  // The store is read by every shard: one that cannot be opened is refused before anything is written.
  if (!t.config.store.empty()) {
    auto store = MeasurementStore::open_read(t.config.store);
    if (!store) return make_error(store.error().code, fmt::format("dojo: `store`: {}", store.error().message));
  }
  std::vector<std::string> differ;
  const fs::path manifest = dir / "dojo.json";
  std::vector<fs::path> ours;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_shard_file(it->path().filename().string())) ours.push_back(it->path());
  }
  if (fs::exists(manifest, ec)) {
    auto m = read_json_file(manifest);
    if (!m) {
      differ.push_back(fmt::format("dojo.json cannot be read ({})", m.error().message));
    } else {
      const json now = config_json(t.config);
      const json& then = m->contains("config") && (*m)["config"].is_object() ? (*m)["config"] : json::object();
      if (m->value("schema", std::string()) != kSchema) differ.push_back(fmt::format("schema {}", show(m->value("schema", json()))));
      for (const auto& [k, v] : now.items()) {
        if (!then.contains(k)) {
          differ.push_back(fmt::format("{} (absent -> {})", k, show(v)));
        } else if (then[k] != v) {
          differ.push_back(fmt::format("{} ({} -> {})", k, show(then[k]), show(v)));
        }
      }
      for (const auto& [k, v] : then.items()) {
        if (!now.contains(k)) differ.push_back(fmt::format("{} ({} -> absent)", k, show(v)));
      }
      const json shards = m->value("shards", json());
      if (shards != json(shard_count)) differ.push_back(fmt::format("shards ({} -> {})", show(shards), shard_count));
    }
  } else {
    // No manifest: shards of another count are another dataset's (of this count they may be this
    // dataset's, written before its manifest; their records are checked shard by shard).
    const std::string count = fmt::format("-of-{:05d}.", shard_count);
    for (const fs::path& p : ours) {
      if (p.filename().string().find(count) == std::string::npos) {
        differ.push_back(fmt::format("it holds shards of another count ({}) and no dojo.json", p.filename().string()));
        break;
      }
    }
  }
  if (differ.empty()) return Ok{};
  if (!force) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("dojo: {} holds a dataset of another configuration: {}; give a new `out` directory, "
                                  "or `force` to replace it",
                                  out_dir, fmt::join(differ, ", ")));
  }
  for (const fs::path& p : ours) fs::remove(p, ec);
  for (const char* f : {"dojo.json", "DATASET.md"}) fs::remove(dir / f, ec);
  for (fs::directory_iterator it(dir / "gpus", ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".yaml") fs::remove(it->path(), ec);
  }
  return Ok{};
}

Status write_manifest(const Tasks& t, int shard_count, const std::string& out_dir, bool force) {
  using nlohmann::json;
  if (auto st = prepare_out_dir(t, shard_count, out_dir, force); !st) return st;
  const json cfg = config_json(t.config);
  json graphs = json::array(), gpus = json::array(), cons = json::array();
  for (const GraphVariant& g : t.graphs) graphs.push_back({{"id", g.id}, {"family", g.family}, {"path", g.path}, {"dims", g.dims}});
  for (const GpuVariant& v : t.gpus) {
    json j = {{"id", v.id}, {"family", v.family}, {"virtual", v.virtual_gpu}};
    if (v.virtual_gpu) j["profile"] = "gpus/" + v.id + ".yaml";
    gpus.push_back(std::move(j));
  }
  for (const Constraint& k : t.constraints) {
    cons.push_back({{"objective", k.objective}, {"memory_fraction", k.memory_fraction}, {"power_fraction", k.power_fraction}});
  }
  auto columns = [](const std::vector<Column>& cols) {
    json a = json::array();
    for (const Column& col : cols) a.push_back({{"name", col.name}, {"type", col.type}, {"unit", col.unit}, {"doc", col.doc}});
    return a;
  };
  const json m = {{"schema", kSchema},        {"config", cfg},         {"graphs", graphs},
                  {"gpus", gpus},             {"constraints", cons},   {"tasks", t.tasks.size()},
                  {"shards", shard_count},    {"kernel_columns", columns(kernel_columns())},
                  {"plan_columns", columns(plan_columns())}, {"notes", t.notes}};
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  // The virtual GPUs' profiles, so every sample can be reproduced.
  for (const GpuVariant& v : t.gpus) {
    if (!v.virtual_gpu) continue;
    const fs::path p = fs::path(out_dir) / "gpus" / (v.id + ".yaml");
    fs::create_directories(p.parent_path(), ec);
    if (auto w = write_file_atomic(p.string(), v.yaml); !w) return w.error();
  }
  return write_file_atomic((fs::path(out_dir) / "dojo.json").string(), m.dump(1) + "\n");
}

}  // namespace gpusim::dojo

namespace gpusim::dojo {

namespace {

namespace fs = std::filesystem;

// The dataset card: what the dataset holds, how to reproduce it, its splits, the files present and
// every column.
std::string card(const nlohmann::json& m) {
  using nlohmann::json;
  const json& c = m.at("config");
  std::vector<std::string> graphs, gpus, cons;
  for (const json& g : m.at("graphs")) graphs.push_back(g.at("id").get<std::string>());
  for (const json& g : m.at("gpus")) gpus.push_back(g.at("id").get<std::string>() + (g.value("virtual", false) ? " (virtual)" : ""));
  for (const json& k : m.at("constraints")) {
    cons.push_back(fmt::format("({}, {}, {})", k.at("objective").get<std::string>(), k.at("memory_fraction").dump(),
                               k.at("power_fraction").dump()));
  }
  const int shards = m.at("shards").get<int>();
  const int complete = m.value("complete_shards", 0);
  const json files = m.value("files", json::array());
  std::string ext = "csv";
  if (!files.empty()) ext = fs::path(files[0].at("name").get<std::string>()).extension().string().substr(1);
  std::string s;
  s += "# GPU Dojo dataset\n\n";
  s += fmt::format("Schema `{}`, generated by gpusim's Dojo (`gpusim dojo generate`, or `gpusim.dojo.generate`); the "
                   "generator's documentation is `core/dojo/README.md` in gpusim's source.\n\n",
                   m.at("schema").get<std::string>());
  s += "## What it holds\n\n";
  s += fmt::format("- {} graph variants: {}\n", graphs.size(), fmt::join(graphs, ", "));
  s += fmt::format("- {} GPUs: {}\n", gpus.size(), fmt::join(gpus, ", "));
  s += fmt::format("- {} constraints (objective, memory fraction, power fraction): {}\n", cons.size(), fmt::join(cons, ", "));
  s += fmt::format("- {} tasks in {} shards; each task has the eager plan, the greedy search's best and {} random plans; "
                   "dtype {}, {} tiles, seed {}\n",
                   m.at("tasks").get<int64_t>(), shards, c.at("plans").get<int64_t>(), c.at("dtype").get<std::string>(),
                   c.value("tiles", std::string("generated")), c.at("seed").dump());
  if (complete < shards) {
    s += fmt::format("- **Incomplete**: {} of {} shards are present and whole; the same command (or "
                     "`gpusim.dojo.generate`) generates the rest.\n",
                     complete, shards);
  }
  s += "\n## How to reproduce\n\nThe same configuration and seed give the same rows:\n\n```\n";
  s += c.dump(1) + "\n```\n\n";
  s += "Virtual GPUs are profiles in `gpus/` (each extends its base profile): every gpusim command takes them "
       "(`gpusim predict MODEL --profiles gpus --gpu ID`).\n\n";
  s += "## Splits\n\nHold out whole `gpu_family` values (a base profile and its virtual GPUs) to test on unseen GPUs, "
       "whole `graph_family` values to test on unseen graphs: `gpusim.dojo.split(table, by, holdout)`.\n\n";
  s += fmt::format("## Files\n\n{} of {} shards, each file checked against its record (size and hash) when the "
                   "dataset was last written:\n\n| file | table | shard | rows | bytes | hash |\n|---|---|---|---|---|---|\n",
                   complete, shards);
  for (const json& f : files) {
    s += fmt::format("| `{}` | {} | {} | {} | {} | `{}` |\n", f.at("name").get<std::string>(), f.at("table").get<std::string>(),
                     f.at("shard").get<int>(), f.at("rows").get<int64_t>(), f.at("bytes").get<int64_t>(),
                     f.at("hash").get<std::string>());
  }
  s += "\n";
  for (const auto& [table, key] : {std::pair{"kernels", "kernel_columns"}, std::pair{"plans", "plan_columns"}}) {
    s += fmt::format("## Table `{}` ({}-*.{})\n\n| column | type | unit | meaning |\n|---|---|---|---|\n", table, table, ext);
    for (const json& col : m.at(key)) {
      s += fmt::format("| `{}` | {} | {} | {} |\n", col.at("name").get<std::string>(), col.at("type").get<std::string>(),
                       col.at("unit").get<std::string>(), col.at("doc").get<std::string>());
    }
    s += "\n";
  }
  return s;
}

}  // namespace

Result<int> finish(const std::string& out_dir) {
  using nlohmann::json;
  const fs::path dir(out_dir);
  auto m = read_json_file(dir / "dojo.json");
  if (!m) return m.error();
  try {
    const int shards = m->at("shards").get<int>();
    json files = json::array();
    int complete = 0;
    for (int i = 0; i < shards; ++i) {
      auto rec = read_json_file(dir / shard_record_name({i, shards}));
      if (!rec) continue;
      bool whole = rec->value("schema", std::string()) == kShardSchema && rec->value("index", -1) == i &&
                   rec->value("count", -1) == shards && rec->contains("files") && (*rec)["files"].size() == 2;
      json these = json::array();
      for (size_t k = 0; whole && k < 2; ++k) {
        const json& f = (*rec)["files"][k];
        const std::string name = f.at("name");
        std::error_code ec;
        const auto size = fs::is_regular_file(dir / name, ec) ? static_cast<int64_t>(fs::file_size(dir / name, ec)) : -1;
        whole = !ec && size == f.at("bytes").get<int64_t>();
        these.push_back({{"table", k == 0 ? "kernels" : "plans"},
                         {"shard", i},
                         {"name", name},
                         {"rows", k == 0 ? rec->value("kernel_rows", int64_t{0}) : rec->value("plans", int64_t{0})},
                         {"bytes", f.at("bytes")},
                         {"hash", f.at("hash")}});
      }
      if (!whole) continue;
      ++complete;
      for (json& f : these) files.push_back(std::move(f));
    }
    (*m)["files"] = files;
    (*m)["complete_shards"] = complete;
    if (auto w = write_file_atomic((dir / "dojo.json").string(), m->dump(1, ' ', false, kInvalidUtf8) + "\n"); !w) return w.error();
    if (auto w = write_file_atomic((dir / "DATASET.md").string(), card(*m)); !w) return w.error();
    return complete;
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("{}/dojo.json: not a Dojo manifest ({})", out_dir, e.what()));
  }
}

}  // namespace gpusim::dojo
