// The timeline of an eager plan: kernels in order on one stream, launches paced by the host,
// copies on the copy engine, tensor lifetimes for peak memory, power for energy.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "gpusim/cancel.h"
#include "gpusim/kernel_work.h"
#include "gpusim/wording.h"
#include "gpusim/predict.h"
#include "base/json_text.h"

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

namespace {

// The runtime's half-precision accumulation (RuntimeLowering::half_accumulate) on a kernel's work:
// true when it applies (the kernel's class is listed; kernel_cost applies it to fp16/bf16 only).
bool runtime_work(KernelWork& w, const PredictOptions& opts) {
  if (!opts.runtime) return false;
  const auto& cls = opts.runtime->lowering.half_accumulate.classes;
  const char* name = w.cls == OpClass::kConv ? "conv" : w.cls == OpClass::kGemm ? "gemm" : nullptr;
  if (!name || std::find(cls.begin(), cls.end(), name) == cls.end()) return false;
  w.accumulate_half = true;
  return w.dtype == DType::kFloat16 || w.dtype == DType::kBFloat16;
}

// Predicts `plan` on the already re-typed graph `g`.
Result<Prediction> run_timeline(const Graph& g, const Plan& plan, const GpuProfile& gpu, const PredictOptions& opts) {
  DeviceModel dev = make_device(gpu);
  dev.allow_tf32 = plan.allow_tf32;  // as the target the plan was made for
  const GraphIndex idx = index_graph(g);
  Prediction p;
  p.gpu = gpu.name;
  p.model = g.source_path;
  p.dtype = plan.dtype.value_or(graph_float_type(g));

  // Kernels; which kernel produces and last reads each tensor. Views alias their input (view_roots).
  std::vector<int> producer(g.tensors.size(), -1), last_use(g.tensors.size(), -1), first_use(g.tensors.size(), -1);
  std::vector<int> readers_outside(g.tensors.size(), 0);
  const std::vector<TensorId>& alias = idx.root;
  auto root = [&](TensorId t) { return static_cast<size_t>(alias[static_cast<size_t>(t)]); };
  // An operand written by an earlier kernel is still in L2 when what the kernels in between wrote
  // (and it) fits in the reusable part of the L2.
  const double l2_reuse = 0.5 * (dev.l2_size_bytes + dev.llc_size_bytes);
  std::vector<double> written_before(plan.kernels.size() + 1, 0);  // bytes written by kernels [0, i)
  int half_accumulated = 0;  // kernels whose main loop accumulates in half precision (the runtime's)
  for (size_t ki = 0; ki < plan.kernels.size(); ++ki) {
    const PlanKernel& k = plan.kernels[ki];
    PlannedKernel pk;
    const Node& first = g.nodes[static_cast<size_t>(k.nodes.front())];
    pk.name = first.name;
    for (int ni : k.nodes) {
      const Node& n = g.nodes[static_cast<size_t>(ni)];
      pk.op_type += (pk.op_type.empty() ? "" : "+") + n.op_type;
    }
    pk.nodes = k.nodes;
    for (int ni : k.nodes) pk.node_names.push_back(g.nodes[static_cast<size_t>(ni)].name);
    pk.fusions = k.fusions;
    pk.call = k.call;
    pk.kind = k.kind;
    pk.work = plan_kernel_work(g, idx, k);
    half_accumulated += runtime_work(pk.work, opts) ? 1 : 0;
    {
      std::vector<size_t> seen;
      int64_t resident = 0;
      for (int ni : k.nodes) {
        for (TensorId t : g.nodes[static_cast<size_t>(ni)].inputs) {
          if (t == kNoTensor) continue;
          const size_t r = root(t);
          const int prod = producer[r];
          if (prod < 0 || std::find(seen.begin(), seen.end(), r) != seen.end()) continue;
          seen.push_back(r);
          if (written_before[ki] - written_before[static_cast<size_t>(prod)] <= l2_reuse) {
            resident += g.tensors[r].bytes();
          }
        }
      }
      pk.work.l2_resident_bytes = std::min(pk.work.bytes_read, resident);
    }
    pk.cost = kernel_cost(pk.work, k.tile, dev);
    written_before[ki + 1] = written_before[ki] + static_cast<double>(pk.work.bytes_written);
    if (!pk.cost.feasible) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel {} (\"{}\"): tile is infeasible on {}: {}", ki, pk.name, gpu.name,
                                    pk.cost.infeasible_reason));
    }
    const int kidx = static_cast<int>(ki);
    std::vector<bool> produced_here(0);
    for (int ni : k.nodes) {
      const Node& n = g.nodes[static_cast<size_t>(ni)];
      for (TensorId t : n.inputs) {
        if (t == kNoTensor) continue;
        const size_t r = root(t);
        last_use[r] = kidx;
        if (first_use[r] < 0) first_use[r] = kidx;
        if (producer[r] >= 0 && producer[r] != kidx) ++readers_outside[r];
      }
      for (TensorId o : n.outputs) {
        if (o != kNoTensor && producer[static_cast<size_t>(o)] < 0) producer[static_cast<size_t>(o)] = kidx;
      }
    }
    p.kernels.push_back(std::move(pk));
  }
  if (half_accumulated > 0) {
    p.notes.push_back(fmt::format("{} half-precision convolution and matrix-product kernel(s) accumulate in half "
                                  "precision under {} ({})",
                                  half_accumulated, opts.runtime->name, opts.runtime->lowering.half_accumulate.why));
  }
  for (size_t t = 0; t < g.tensors.size(); ++t) {  // views carry their source's producer
    if (alias[t] != static_cast<TensorId>(t) && producer[t] < 0) producer[t] = producer[root(static_cast<TensorId>(t))];
  }

  // Copies in on the copy engine: inputs, then offloaded weights in order of first use.
  const double link_bytes_per_us = gpu.host_link.bandwidth_gbps * 1e3 * gpu.efficiency.host_link;
  double copy_t = 0;
  std::map<size_t, double> ready_at;  // tensor root -> when it is on the device
  auto copy_in = [&](const Tensor& t, size_t r) {
    if (gpu.host_link.unified) {
      ready_at[r] = 0;
      return;
    }
    const double dur = kCopyLatencyUs + static_cast<double>(t.bytes()) / link_bytes_per_us;
    p.transfers.push_back({t.name, true, t.bytes(), copy_t, dur});
    copy_t += dur;
    ready_at[r] = copy_t;
  };
  for (TensorId id : g.inputs) {
    if (opts.host_copies) {
      copy_in(g.tensor(id), root(id));
    } else {
      ready_at[root(id)] = 0;
    }
  }
  std::vector<TensorId> offload = plan.offloaded;
  std::sort(offload.begin(), offload.end(), [&](TensorId a, TensorId b) { return first_use[root(a)] < first_use[root(b)]; });
  for (TensorId id : offload) copy_in(g.tensor(id), root(id));
  if (!offload.empty()) {
    p.notes.push_back(fmt::format("{} weights offloaded to host memory, streamed over the host link before first use",
                                  offload.size()));
  }

  // Launches. gpusim's executor: the host enqueues kernel i by (i + 1) x the profile's launch
  // overhead. A framework runtime: each op call takes its host time; "overlap" lets the host run
  // ahead of the GPU, "serial" makes each call wait for the kernel before it.
  const double launch_us = gpu.launch.overhead_us * gpu.efficiency.launch;
  const RuntimeModel* rt = opts.runtime && opts.runtime->combine != "device" ? &*opts.runtime : nullptr;
  if (rt) p.runtime = rt->name;
  if (opts.runtime && !opts.runtime->host.empty()) {
    p.host = opts.runtime->host;
    p.notes.push_back(opts.runtime->host_note);
  }
  double gpu_free = 0, host_t = 0;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    if ((i & 63) == 0) check_cancelled();
    PlannedKernel& k = p.kernels[i];
    double ready = 0;
    if (!rt) {
      k.host_start_us = static_cast<double>(i) * launch_us;
      host_t = static_cast<double>(i + 1) * launch_us;
      ready = host_t;
    } else if (rt->replay) {
      // One launch of the graph, then the device's own dispatch: kernel i is ready no later than
      // the executor would have launched it ((i + 1) x launch_us).
      host_t = launch_us + static_cast<double>(i) * std::min(rt->default_us, launch_us);
      k.host_start_us = i == 0 ? 0.0 : host_t;  // the graph's one launch, then the device's dispatch
      ready = host_t;
    } else {
      const Node& first = g.nodes[static_cast<size_t>(k.nodes.front())];
      const PlanKernel& pk = plan.kernels[i];
      // A lowering names each kernel's call; a call's later kernels cost the extra launch only.
      const double h = !pk.call.empty() && !pk.call_first
                           ? rt->extra_kernel_us
                           : rt->host_us(pk.call.empty() ? framework_op_name(g, first) : pk.call,
                                         std::string(op_class_name(k.work.cls)), 1);
      if (rt->combine == "serial") host_t = std::max(host_t, gpu_free);
      k.host_start_us = host_t;
      host_t += h;
      ready = host_t + rt->launch_latency_us;
    }
    k.host_end_us = host_t;
    for (int ni : k.nodes) {
      for (TensorId t : g.nodes[static_cast<size_t>(ni)].inputs) {
        if (t == kNoTensor) continue;
        if (auto it = ready_at.find(root(t)); it != ready_at.end()) ready = std::max(ready, it->second);
      }
    }
    if (ready > gpu_free) p.launch_bound_us += ready - gpu_free;
    k.start_us = std::max(gpu_free, ready);
    gpu_free = k.start_us + k.cost.total_us;
    p.kernels_us += k.cost.total_us;
  }
  p.host_us = host_t;
  // Copies out after the producing kernel.
  double end = std::max(gpu_free, host_t);
  for (TensorId id : g.outputs) {
    const Tensor& t = g.tensor(id);
    if (gpu.host_link.unified || !opts.host_copies) continue;
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

  // Peak memory: resident weights and constants; inputs, outputs and offloaded weights while
  // needed; activations from producer to last reader — only those that leave their kernel.
  std::vector<int64_t> delta(p.kernels.size() + 1, 0);
  int64_t resident = 0;
  const size_t n_k = p.kernels.size();
  auto live = [&](int64_t bytes, int from, int to) {
    delta[static_cast<size_t>(std::max(0, from))] += bytes;
    if (static_cast<size_t>(to) + 1 <= n_k) delta[static_cast<size_t>(to) + 1] -= bytes;
  };
  std::vector<bool> recomputed_out(g.tensors.size(), false);  // never stored: each reader recomputes it
  for (const PlanKernel& k : plan.kernels) {
    for (int ni : k.recomputed) {
      for (TensorId o : g.nodes[static_cast<size_t>(ni)].outputs) {
        if (o != kNoTensor) recomputed_out[static_cast<size_t>(o)] = true;
      }
    }
  }
  std::vector<bool> offloaded(g.tensors.size(), false);
  for (TensorId t : plan.offloaded) offloaded[static_cast<size_t>(t)] = true;
  for (size_t id = 0; id < g.tensors.size(); ++id) {
    const Tensor& t = g.tensors[id];
    if (alias[id] != static_cast<TensorId>(id)) continue;  // a view: counted with its source
    if (t.role == TensorRole::kWeight || t.role == TensorRole::kConstant) {
      if (t.role == TensorRole::kWeight) p.weight_bytes += t.bytes();
      if (offloaded[id]) {
        live(t.bytes(), first_use[id], std::max(first_use[id], last_use[id]));
      } else {
        resident += t.bytes();
      }
      continue;
    }
    if (t.role == TensorRole::kInput) {
      live(t.bytes(), 0, static_cast<int>(n_k));
      continue;
    }
    if (producer[id] < 0 || recomputed_out[id]) continue;
    const bool leaves = idx.graph_output[id] || t.role == TensorRole::kOutput || readers_outside[id] > 0;
    if (!leaves) continue;  // fused away: stays in registers or shared memory
    const bool keep = idx.graph_output[id] || t.role == TensorRole::kOutput;
    live(t.bytes(), producer[id], keep ? static_cast<int>(n_k) : std::max(producer[id], last_use[id]));
  }
  int64_t running = 0, peak_live = 0;
  for (int64_t d : delta) {
    running += d;
    peak_live = std::max(peak_live, running);
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

  if (plan.scheduler == SchedulerKind::kLowering) {
    p.notes.push_back(fmt::format("the {} kernels runtime {} launches (its lowering rules); weights resident in device "
                                  "memory",
                                  plan.kernels.size(), plan.runtime));
  } else {
    p.notes.push_back(plan.scheduler == SchedulerKind::kEager
                          ? "eager plan: one kernel per op; weights resident in device memory before the run"
                          : fmt::format("plan from the {} scheduler ({} kernels); weights resident unless offloaded",
                                        scheduler_name(plan.scheduler), plan.kernels.size()));
  }
  if (plan.dtype) p.notes.push_back(fmt::format("floating-point tensors re-typed to {}", dtype_name(*plan.dtype)));
  if (rt) {
    p.notes.push_back(fmt::format("runtime {} ({}): {:.1f} us of host time issuing {} op calls paces the launches",
                                  rt->name, rt->combine, host_t, p.kernels.size()));
  }
  if (!p.fits_in_memory) {
    p.notes.push_back(fmt::format("peak memory {:.1f} GB exceeds the {:.0f} GB of device memory (gpusim plan offloads "
                                  "weights to fit)",
                                  static_cast<double>(p.peak_memory_bytes) / 1e9, gpu.memory.dram.size_gb));
  }
  for (const std::string& a : gpu.assumptions) p.notes.push_back("profile lacks a figure, assumed: " + a);
  // Nothing printed may be NaN or infinite: a figure that is not finite is an error naming the
  // kernel and its inputs, never a "latency -nan ms".
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const auto& k = p.kernels[i];
    if (!std::isfinite(k.cost.total_us) || k.cost.total_us < 0) {
      const Node& first = g.nodes[static_cast<size_t>(k.nodes.front())];
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel {} (node \"{}\", {}) is priced at {} us on {}: its tile or the profile's "
                                    "figures give no finite time; check the plan's tile and `gpusim profiles validate "
                                    "{}`",
                                    i, first.name, first.op_type, k.cost.total_us, gpu.name, gpu.name));
    }
  }
  if (!std::isfinite(p.total_us) || !std::isfinite(p.energy_j)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("the prediction on {} is not finite (total {} us, energy {} J); check `gpusim "
                                  "profiles validate {}`",
                                  gpu.name, p.total_us, p.energy_j, gpu.name));
  }
  return p;
}

}  // namespace

DType graph_float_type(const Graph& g) {
  for (const Tensor& t : g.tensors) {
    if (t.role == TensorRole::kWeight && dtype_is_float(t.dtype)) return t.dtype;
  }
  return DType::kFloat32;
}

Status check_precisions(const Graph& g, const GpuProfile& gpu) {
  bool bf16 = false;
  for (const Tensor& t : g.tensors) bf16 = bf16 || t.dtype == DType::kBFloat16;
  if (!bf16 || gpu.compute.vector_tflops.count(Precision::kBf16) > 0) return Ok{};
  for (const MatrixPeak& m : gpu.compute.matrix_tflops) {
    if (m.input == Precision::kBf16) return Ok{};
  }
  std::vector<std::string> has;
  for (const auto& [p, tf] : gpu.compute.vector_tflops) has.push_back(std::string(precision_name(p)));
  std::vector<std::string> matrix;
  for (const MatrixPeak& m : gpu.compute.matrix_tflops) {
    const std::string n(precision_name(m.input));
    if (std::find(matrix.begin(), matrix.end(), n) == matrix.end()) matrix.push_back(n);
  }
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{} ({}) has no bf16 arithmetic: its profile gives vector {}{}{}, so a bf16 graph would "
                                "be priced at another precision's rate; use `dtype fp16` or `dtype fp32`, or a GPU with "
                                "bf16 (NVIDIA Ampere or newer, AMD CDNA2 or newer)",
                                gpu.display_name, gpu.name, fmt::join(has, ", "), matrix.empty() ? "" : " and matrix ",
                                fmt::join(matrix, ", ")));
}

Status check_retype(DType t, const GpuProfile& gpu) {
  const Precision p = precision_of(t);
  if (p != Precision::kInt8 && p != Precision::kFp8) return Ok{};
  std::vector<std::string> matrix;
  for (const MatrixPeak& m : gpu.compute.matrix_tflops) {
    if (m.input == p) return Ok{};
    const std::string n(precision_name(m.input));
    if (std::find(matrix.begin(), matrix.end(), n) == matrix.end()) matrix.push_back(n);
  }
  const bool fp8 = p == Precision::kFp8;
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{} ({}) has no {} matrix units: its profile gives matrix rates for {}, so a graph re-typed "
                                "to {} would be priced at another precision's rate; use `dtype fp16`, or a GPU with {}",
                                gpu.display_name, gpu.name, fp8 ? "fp8" : "int8",
                                matrix.empty() ? std::string("none") : fmt::format("{}", fmt::join(matrix, ", ")),
                                dtype_name(t),
                                fp8 ? "fp8 (NVIDIA Ada, Hopper or Blackwell; AMD CDNA3)"
                                    : "int8 matrix units (NVIDIA Turing or newer, AMD CDNA, Intel Xe)"));
}

Status check_retype_tiles(DType t, const Target& target) {
  const Precision p = precision_of(t);
  if ((p != Precision::kInt8 && p != Precision::kFp8) || target.space != TileSpace::kGenerated) return Ok{};
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("`dtype {}`: gpusim's code generator builds fp32 and fp16 kernels, not {} ones; price the "
                                "graph in the library tile space (`tiles library`: the kernels a TensorRT-class engine runs)",
                                dtype_name(t), dtype_name(t)));
}

namespace {
// Which tiles the kernels have, as the first note after the plan's.
void note_tiles(Prediction& p, const Target& target) {
  p.tiles = target.describe();
  p.notes.insert(p.notes.begin() + (p.notes.empty() ? 0 : 1),
                 fmt::format("tiles: each kernel's fastest in the {} tile space ({}){}", tile_space_name(target.space),
                             target.capability().describe(), target.space == TileSpace::kGenerated
                                 ? "; the library tile space is the menu vendor libraries choose from"
                                 : ""));
  // Which precision fp32 GEMM-like kernels were priced in.
  const auto tf32 = std::count_if(p.kernels.begin(), p.kernels.end(), [](const PlannedKernel& k) { return k.cost.tf32; });
  const auto fp32_vector = std::count_if(p.kernels.begin(), p.kernels.end(), [](const PlannedKernel& k) {
    return !k.cost.matrix_units && has_gemm_view(k.work) && k.work.dtype == DType::kFloat32;
  });
  const bool has_tf32 = target.gpu().matrix_tflops(Precision::kTf32, Precision::kFp32).has_value();
  if (tf32 > 0) {
    p.notes.push_back(fmt::format("TF32 allowed: {} fp32 GEMM and convolution kernels are priced on the matrix units as "
                                  "TF32 (operands rounded to 10-bit mantissas, fp32 sums), marked [tf32]",
                                  tf32));
  } else if (!target.device.allow_tf32 && has_tf32 && fp32_vector > 0) {
    p.notes.push_back(fmt::format("{} fp32 GEMM and convolution kernels run in full fp32 on the vector units, as PyTorch's "
                                  "default (TF32 off); {} prices them on the matrix units as TF32",
                                  fp32_vector, option_ref("allow_tf32")));
  }
  const auto compiled = std::count_if(p.kernels.begin(), p.kernels.end(),
                                      [](const PlannedKernel& k) { return k.cost.tile.registers > 0; });
  if (compiled > 0) {
    p.notes.push_back(fmt::format("{} of {} kernels are priced with the registers their compiled binaries hold (compiled "
                                  "figures `gpusim codegen report` stored); the others with the cost model's estimate",
                                  compiled, p.kernels.size()));
  }
}
}  // namespace

// A graph runs under a runtime that runs graphs: llama.cpp's runtimes price a described model's
// generations and never run an ONNX graph.
static Status check_graph_runtime(const PredictOptions& opts, const GpuProfile& gpu) {
  if (!opts.runtime) return Ok{};
  const RuntimeModel& rt = *opts.runtime;
  if (!rt.vendors.empty() && std::find(rt.vendors.begin(), rt.vendors.end(), gpu.vendor) == rt.vendors.end()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("runtime \"{}\" runs on {} GPUs; {} is {}: use a runtime that runs there",
                                  rt.name, fmt::join(rt.vendors, " and "), gpu.name, gpu.vendor));
  }
  if (rt.workload == "graphs") return Ok{};
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("runtime \"{}\"{} prices llama.cpp's generations of a language model (a gpusim.llm/1 "
                                "description, a config.json or a bundled name), not an ONNX graph's kernels; predict a "
                                "graph under gpusim, cuda-graph, pytorch-eager or torch-compile",
                                rt.name, rt.source_path.empty() ? "" : fmt::format(" ({})", rt.source_path)));
}

Result<Prediction> predict(const Graph& input, const Target& target, const PredictOptions& opts) {
  const GpuProfile& gpu = target.gpu();
  if (opts.dtype) {
    if (auto s = check_retype(*opts.dtype, gpu); !s) return s.error();
    if (auto s = check_retype_tiles(*opts.dtype, target); !s) return s.error();
  }
  const Graph g = opts.dtype ? retype(input, *opts.dtype) : input;
  if (auto s = check_precisions(g, gpu); !s) return s.error();
  if (opts.runtime && !opts.runtime->lowering.empty()) {
    // The runtime's own kernels (lowering.h).
    auto low = lower(g, *opts.runtime, opts.lowering);
    if (!low) return low.error();
    return predict_lowering(*low, target, opts);  // which checks the runtime runs graphs
  }
  if (auto s = check_graph_runtime(opts, gpu); !s) return s.error();
  if (!opts.lowering.skip.empty() || opts.lowering.autocast || opts.lowering.layout != "nchw") {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("runtime \"{}\" has no lowering rules, so `layout`, `autocast` and `skip_patterns` do "
                                  "not apply; use a runtime that has them (pytorch-eager, torch-compile)",
                                  opts.runtime ? opts.runtime->name : std::string("gpusim")));
  }
  Plan plan = eager_plan(g, target);
  plan.dtype = opts.dtype;
  auto p = run_timeline(g, plan, gpu, opts);
  if (p) note_tiles(*p, target);
  return p;
}

Result<Prediction> predict_plan(const Graph& input, const Plan& plan, const GpuProfile& gpu,
                                const PredictOptions& opts) {
  if (auto s = check_graph_runtime(opts, gpu); !s) return s.error();
  std::optional<Graph> retyped;
  if (plan.dtype) {
    if (auto s = check_retype(*plan.dtype, gpu); !s) return s.error();
    retyped = retype(input, *plan.dtype);
  }
  const Graph& g = retyped ? *retyped : input;
  if (auto s = check_precisions(g, gpu); !s) return s.error();
  auto p = run_timeline(g, plan, gpu, opts);
  if (p) p->tiles = "plan";  // as the plan gives them
  return p;
}

Result<Prediction> predict_lowering(const Lowering& low, const Target& target, const PredictOptions& opts) {
  // Each kernel with the fastest tile of the target's space.
  const GpuProfile& gpu = target.gpu();
  if (auto s = check_graph_runtime(opts, gpu); !s) return s.error();
  const DeviceModel& dev = target.device;
  const TileCapability& cap = target.capability();
  const GraphIndex idx = index_graph(low.graph);
  Plan plan = low.plan;
  plan.allow_tf32 = dev.allow_tf32;
  for (PlanKernel& k : plan.kernels) {
    KernelWork w = plan_kernel_work(low.graph, idx, k);
    runtime_work(w, opts);
    k.tile = best_generated_tile(w, dev, cap);
  }
  plan.dtype = opts.dtype;
  auto p = run_timeline(low.graph, plan, gpu, opts);
  if (!p) return p;
  note_tiles(*p, target);
  p->notes.insert(p->notes.begin(), low.notes.begin(), low.notes.end());
  if (opts.lowering.autocast) {
    p->notes.push_back(fmt::format("torch.autocast({}): the runtime's autocast rules set each op's type",
                                   dtype_name(*opts.lowering.autocast)));
    p->dtype = *opts.lowering.autocast;
  }
  return p;
}

std::string framework_op_name(const Graph& g, const Node& n) {
  if (n.op_type == "MatMul") {
    const bool weight = n.inputs.size() > 1 && n.inputs[1] != kNoTensor &&
                        g.tensor(n.inputs[1]).role == TensorRole::kWeight;
    return weight ? "linear" : "bmm";
  }
  for (const auto& [framework, onnx] : framework_ops()) {
    if (onnx == n.op_type) return framework;
  }
  return n.op_type;
}

std::string chrome_trace(const Prediction& p) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", p.gpu}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "compute stream"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 2}, {"args", {{"name", "copy engine"}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 3},
                    {"args", {{"name", fmt::format("host ({})", p.runtime)}}}});
  for (const PlannedKernel& k : p.kernels) {  // each launch's host time; a replayed graph's one launch
    if (k.host_end_us <= k.host_start_us) continue;
    events.push_back({{"name", k.call.empty() ? "launch " + k.op_type : k.call},
                      {"cat", "host"},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 3},
                      {"ts", k.host_start_us},
                      {"dur", k.host_end_us - k.host_start_us},
                      {"args", {{"node", k.name}, {"kernel_start_us", k.start_us}}}});
  }
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
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(-1, ' ', false, kInvalidUtf8);
}

}  // namespace gpusim
