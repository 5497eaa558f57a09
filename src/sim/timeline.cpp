// The timeline of an eager plan: kernels in order on one stream, launches paced by the host,
// copies on the copy engine, tensor lifetimes for peak memory, power for energy.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "gpusim/predict.h"

namespace gpusim {
namespace {

// Host-to-device copies pay this fixed cost each (driver call and DMA setup).
constexpr double kCopyLatencyUs = 8.0;

}  // namespace

double Prediction::achieved_tflops(const PlannedKernel& k) const {
  const double flops = static_cast<double>(std::max<int64_t>(k.work.flops.total(), 2 * k.work.macs));
  return k.cost.total_us > 0 ? flops / (k.cost.total_us * 1e-6) / 1e12 : 0;
}

double Prediction::achieved_gbps(const PlannedKernel& k) const {
  const double bytes = static_cast<double>(k.work.bytes_read + k.work.bytes_written);
  return k.cost.total_us > 0 ? bytes / (k.cost.total_us * 1e-6) / 1e9 : 0;
}

Result<Prediction> predict(const Graph& input, const GpuProfile& gpu, const PredictOptions& opts) {
  const Graph g = opts.dtype ? retype(input, *opts.dtype) : input;
  const DeviceModel dev = make_device(gpu);
  Prediction p;
  p.gpu = gpu.name;
  p.model = g.source_path;
  p.dtype = opts.dtype.value_or(DType::kFloat32);
  if (!opts.dtype) {
    for (const Tensor& t : g.tensors) {
      if (t.role == TensorRole::kWeight && dtype_is_float(t.dtype)) {
        p.dtype = t.dtype;
        break;
      }
    }
  }

  // Kernels, and which kernel produces / last reads each tensor (views alias their input).
  std::vector<int> producer(g.tensors.size(), -1);
  std::vector<int> last_use(g.tensors.size(), -1);
  std::vector<TensorId> alias(g.tensors.size());
  std::iota(alias.begin(), alias.end(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    auto work = node_work(g, n);
    if (!work) {
      if (!n.folded && !n.inputs.empty() && n.inputs[0] != kNoTensor) {
        for (TensorId o : n.outputs) {
          if (o != kNoTensor) alias[static_cast<size_t>(o)] = alias[static_cast<size_t>(n.inputs[0])];
        }
      }
      continue;
    }
    PlannedKernel k;
    k.name = n.name;
    k.op_type = n.op_type;
    k.nodes = {static_cast<int>(i)};
    k.work = *work;
    k.cost = kernel_cost(k.work, choose_tile(k.work, dev), dev);
    const int idx = static_cast<int>(p.kernels.size());
    for (TensorId t : n.inputs) {
      if (t != kNoTensor) last_use[static_cast<size_t>(alias[static_cast<size_t>(t)])] = idx;
    }
    for (TensorId o : n.outputs) {
      if (o != kNoTensor) producer[static_cast<size_t>(o)] = idx;
    }
    p.kernels.push_back(std::move(k));
  }

  // Copies in on the copy engine; a kernel waits for the inputs it reads.
  const double link_bytes_per_us = gpu.host_link.bandwidth_gbps * 1e3 * gpu.efficiency.host_link;
  double copy_t = 0;
  std::map<TensorId, double> input_ready;
  for (TensorId id : g.inputs) {
    const Tensor& t = g.tensor(id);
    if (gpu.host_link.unified) {
      input_ready[id] = 0;
      continue;
    }
    const double dur = kCopyLatencyUs + static_cast<double>(t.bytes()) / link_bytes_per_us;
    p.transfers.push_back({t.name, true, t.bytes(), copy_t, dur});
    copy_t += dur;
    input_ready[id] = copy_t;
  }
  // Launches: the host enqueues kernel i by (i + 1) x overhead; the GPU runs them in order.
  const double launch_us = gpu.launch.overhead_us * gpu.efficiency.launch;
  double gpu_free = 0;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    PlannedKernel& k = p.kernels[i];
    double ready = static_cast<double>(i + 1) * launch_us;
    for (int ni : k.nodes) {
      for (TensorId t : g.nodes[static_cast<size_t>(ni)].inputs) {
        if (auto it = input_ready.find(t == kNoTensor ? -1 : alias[static_cast<size_t>(t)]); it != input_ready.end()) {
          ready = std::max(ready, it->second);
        }
      }
    }
    if (ready > gpu_free) p.launch_bound_us += ready - gpu_free;
    k.start_us = std::max(gpu_free, ready);
    gpu_free = k.start_us + k.cost.total_us;
    p.kernels_us += k.cost.total_us;
  }
  // Copies out after the producing kernel.
  double end = gpu_free;
  copy_t = std::max(copy_t, 0.0);
  for (TensorId id : g.outputs) {
    const Tensor& t = g.tensor(id);
    if (gpu.host_link.unified) continue;
    const int prod = producer[static_cast<size_t>(id)];
    const double after = prod >= 0 ? p.kernels[static_cast<size_t>(prod)].start_us +
                                         p.kernels[static_cast<size_t>(prod)].cost.total_us
                                   : 0;
    const double start = std::max(copy_t, after);
    const double dur = kCopyLatencyUs + static_cast<double>(t.bytes()) / link_bytes_per_us;
    p.transfers.push_back({t.name, false, t.bytes(), start, dur});
    copy_t = start + dur;
    end = std::max(end, copy_t);
  }
  p.total_us = end;

  // Peak memory: weights and constants resident; activations live from producer to last reader.
  std::vector<int64_t> delta(p.kernels.size() + 1, 0);
  int64_t resident = 0;
  for (size_t id = 0; id < g.tensors.size(); ++id) {
    const Tensor& t = g.tensors[id];
    if (alias[id] != static_cast<TensorId>(id)) continue;  // a view: counted with its source
    if (t.role == TensorRole::kWeight || t.role == TensorRole::kConstant) {
      resident += t.bytes();
      if (t.role == TensorRole::kWeight) p.weight_bytes += t.bytes();
      continue;
    }
    const int from = t.role == TensorRole::kInput ? 0 : std::max(0, producer[id]);
    const bool keep = t.role == TensorRole::kOutput || t.role == TensorRole::kInput;
    const int to = keep ? static_cast<int>(p.kernels.size()) : std::max(from, last_use[id]);
    if (producer[id] < 0 && t.role == TensorRole::kActivation) continue;  // produced by no kernel
    delta[static_cast<size_t>(from)] += t.bytes();
    if (static_cast<size_t>(to) + 1 <= p.kernels.size()) delta[static_cast<size_t>(to) + 1] -= t.bytes();
  }
  int64_t live = 0, peak_live = 0;
  for (int64_t d : delta) {
    live += d;
    peak_live = std::max(peak_live, live);
  }
  p.peak_memory_bytes = resident + peak_live;
  p.fits_in_memory = static_cast<double>(p.peak_memory_bytes) <= gpu.memory.dram.size_gb * 1e9;

  // Energy: idle power throughout, plus the dynamic share while a kernel keeps its bottleneck busy.
  const double dynamic_w = gpu.power.tdp_w - gpu.power.idle_w;
  p.energy_j = gpu.power.idle_w * p.total_us * 1e-6;
  for (const PlannedKernel& k : p.kernels) {
    const double busy = std::max({k.cost.compute_us, k.cost.dram_us, k.cost.l2_us});
    const double util = k.cost.total_us > 0 ? std::min(1.0, busy / k.cost.total_us) : 0;
    p.energy_j += dynamic_w * util * k.cost.total_us * 1e-6;
  }

  p.notes.push_back("eager plan: one kernel per op, tiles from the cost model's menu; weights resident in device "
                    "memory before the run");
  if (opts.dtype) p.notes.push_back(fmt::format("floating-point tensors re-typed to {}", dtype_name(*opts.dtype)));
  if (!p.fits_in_memory) {
    p.notes.push_back(fmt::format("peak memory {:.1f} GB exceeds the {:.0f} GB of device memory (offloading is "
                                  "the planner's job)",
                                  static_cast<double>(p.peak_memory_bytes) / 1e9, gpu.memory.dram.size_gb));
  }
  for (const std::string& a : gpu.assumptions) p.notes.push_back("profile lacks a figure, assumed: " + a);
  return p;
}

std::string chrome_trace(const Prediction& p) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", p.gpu}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "compute stream"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 2}, {"args", {{"name", "copy engine"}}}});
  for (const PlannedKernel& k : p.kernels) {
    const KernelCost& c = k.cost;
    events.push_back({{"name", k.op_type},
                      {"cat", std::string(op_class_name(k.work.cls))},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", k.start_us},
                      {"dur", c.total_us},
                      {"args",
                       {{"node", k.name},
                        {"bound", std::string(bound_name(c.bound))},
                        {"compute_us", c.compute_us},
                        {"dram_us", c.dram_us},
                        {"l2_us", c.l2_us},
                        {"ctas", c.ctas},
                        {"waves", c.waves},
                        {"occupancy", c.occupancy},
                        {"matrix_units", c.matrix_units}}}});
  }
  for (const Transfer& t : p.transfers) {
    events.push_back({{"name", (t.to_device ? "H2D " : "D2H ") + t.tensor},
                      {"cat", "copy"},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 2},
                      {"ts", t.start_us},
                      {"dur", t.duration_us},
                      {"args", {{"bytes", t.bytes}}}});
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace gpusim
