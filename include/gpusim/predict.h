// Prediction: the eager plan of a graph on a target — one kernel per op, each with the cost model's
// fastest tile of the target's tile space (target.h) — laid on a timeline: kernels in order on one stream, host
// launches paced by the launch overhead, input and output copies on the copy engine, peak device
// memory from tensor lifetimes, and energy from the power figures.
//
// Usage:
//   auto p = gpusim::predict(graph, gpusim::library_target(profile), {gpusim::DType::kFloat16});
//   if (!p) { ... }
//   fmt::print("{:.2f} ms\n", p->total_us / 1e3);
#pragma once

#include "gpusim/export.h"

#include <optional>
#include <string>
#include <vector>

#include "gpusim/gpu_profile.h"
#include "gpusim/graph.h"
#include "gpusim/kernel_cost.h"
#include "gpusim/device_plan.h"
#include "gpusim/lowering.h"
#include "gpusim/plan.h"
#include "gpusim/result.h"
#include "gpusim/runtime.h"
#include "gpusim/target.h"

namespace gpusim {

struct GPUSIM_API PredictOptions {
  PredictOptions() = default;
  PredictOptions(std::optional<DType> dt, std::optional<RuntimeModel> rt = std::nullopt)  // NOLINT: {dtype} reads well
      : dtype(dt), runtime(std::move(rt)) {}
  // Re-type the graph's floating-point tensors (fp32/fp16/bf16/fp64) to this type first.
  std::optional<DType> dtype;
  // The runtime that launches the kernels (include/gpusim/runtime.h): its host time per op call
  // paces the launches ("overlap": the host runs ahead, kernel i waits for the host's i-th call;
  // "serial": each call waits for the previous kernel). Unset, or a "device" runtime such as
  // `gpusim`: gpusim's own executor, launches paced by the profile's launch overhead.
  std::optional<RuntimeModel> runtime;
  // How the runtime lowers the graph (a runtime with lowering rules launches the kernels they
  // give, lowering.h): the memory layout, autocast, patterns the model's code does not take.
  LoweringOptions lowering;
  // Copy the graph's inputs to the device before the first kernel and its outputs back after
  // the last (false: they are already there, as a benchmark that makes its input on the GPU).
  bool host_copies = true;
};

// One kernel of the plan: the ops it runs, what it computes, and its cost.
struct GPUSIM_API PlannedKernel {
  std::string name;     // the (first) node's name
  std::string op_type;  // the op type(s), "+"-joined when fused
  std::vector<int> nodes;  // indices into Graph::nodes (of the lowered graph under a lowering runtime)
  std::vector<std::string> node_names;  // the nodes' names, in that order
  // What made it: the fusions or the runtime's patterns ("gelu", "linear", "attention"), and the
  // runtime call that launches it (its host-time key); empty for one node's kernel.
  std::vector<std::string> fusions;
  std::string call;
  KernelKind kind = KernelKind::kPointwise;  // the plan kernel's (plan.h)
  KernelWork work;
  KernelCost cost;
  double start_us = 0;  // on the compute stream
  // Its launch on the host (the runtime's call, or the executor's launch): from host_start_us to
  // host_end_us; the kernel starts no earlier. A replayed graph launches once: every kernel after
  // the first has an empty interval at the device's dispatch.
  double host_start_us = 0, host_end_us = 0;
};

struct GPUSIM_API Transfer {
  std::string tensor;
  bool to_device = true;
  int64_t bytes = 0;
  double start_us = 0;
  double duration_us = 0;
};

struct GPUSIM_API Prediction {
  std::string gpu;
  std::string model;
  DType dtype = DType::kFloat32;  // the float type the graph ran in
  double total_us = 0;            // first copy in to last copy out
  double kernels_us = 0;          // sum of kernel times
  double launch_bound_us = 0;     // time the GPU waited for the host to launch
  std::string runtime = "gpusim";  // the runtime whose host time paced the launches
  // The tile space the kernels' tiles came from (Target::describe()); for a given plan, "plan".
  std::string tiles;
  double host_us = 0;              // the host's time to issue every call
  // The host profile the runtime's host figures were scaled to (host.h); "": the reference hosts
  // they were fitted on.
  std::string host;
  std::vector<PlannedKernel> kernels;
  std::vector<Transfer> transfers;
  int64_t weight_bytes = 0;
  int64_t peak_memory_bytes = 0;  // weights + live activations at the worst point
  bool fits_in_memory = true;
  double energy_j = 0;
  std::vector<std::string> notes;  // assumptions the prediction rests on

  // {name, op_type, us, share, bound} are in `kernels`; derived figures:
  double achieved_tflops(const PlannedKernel& k) const;
  double achieved_gbps(const PlannedKernel& k) const;
};

// The float type a graph computes in: its first floating-point weight's (fp32 when it has none).
// predict reports it; `gpusim run` stores kernels in it by default (fp16 stays fp16).
GPUSIM_API DType graph_float_type(const Graph& g);

// Refuses a graph with bf16 tensors on a GPU whose profile has no bf16 figure, vector or matrix (T4,
// V100, GTX 1080 Ti): it would be priced at another precision's rate. predict and predict_plan run it.
GPUSIM_API Status check_precisions(const Graph& g, const GpuProfile& gpu);

// Refuses re-typing a graph to int8 or fp8 (`dtype int8|fp8`: every float tensor in 8 bits, as a
// fully quantized W8A8 engine runs a model, its GEMMs and convolutions on the 8-bit matrix units) for
// a GPU whose profile gives no matrix rate for that type (fp8 before Ada and Hopper, int8 before
// Turing): it would be priced at another precision's rate. Other types pass. predict, predict_plan
// and search run it.
GPUSIM_API Status check_retype(DType t, const GpuProfile& gpu);
// And refuses it in the generated tile space (codegen builds fp32 and fp16 kernels): such a graph is
// priced in the library's.
GPUSIM_API Status check_retype_tiles(DType t, const Target& target);

// The eager plan of `g` (re-typed per opts) on `target`, predicted (under a runtime with lowering
// rules, its kernels, each with the fastest tile of the target's space).
GPUSIM_API Result<Prediction> predict(const Graph& g, const Target& target, const PredictOptions& opts = {});

// A given plan predicted: its kernels in order, offloaded weights streamed over the host link
// before their first use. The plan must be valid for `g` (validate_plan); `g` is re-typed to
// plan.dtype first when the plan has one.
GPUSIM_API Result<Prediction> predict_plan(const Graph& g, const Plan& plan, const GpuProfile& gpu,
                                const PredictOptions& opts = {});  // opts.runtime only: the plan has its dtype

// A runtime's lowering of a graph (lowering.h) predicted: each kernel with the fastest tile of the
// target's space (library_target: a vendor library's heuristic, as frameworks run), paced by the
// runtime's host time. What predict() does for a runtime with lowering rules, for callers that
// lower once and price on many GPUs or figures (validation, fitting).
GPUSIM_API Result<Prediction> predict_lowering(const Lowering& low, const Target& target, const PredictOptions& opts);

// The name a framework runtime's per-op host times use for an ONNX op ("Add" -> "add", "Gemm" and
// MatMul by a weight -> "linear", other MatMul -> "bmm", "LayerNormalization" -> "ln"); the op
// type itself when it has none.
GPUSIM_API std::string framework_op_name(const Graph& g, const Node& n);

// Chrome trace-event JSON (opens in Perfetto and chrome://tracing).
GPUSIM_API std::string chrome_trace(const Prediction& p);

}  // namespace gpusim
