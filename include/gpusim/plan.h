// Plan IR: how a graph runs — an ordered list of kernels, each a group of fused ops with a tile
// configuration and a stream, plus where each weight lives (device, or host-offloaded and
// streamed over the host link). Schedulers (core/schedulers/) propose plans, the simulator (predict.h)
// scores them, `gpusim run` will execute them. Plans are saved as JSON (schema gpusim.plan/1,
// documented in core/plan/README.md); nodes are referred to by name so a plan survives re-import.
//
// A plan on a device — the eager plan, the tile space priced there, validity there — is
// device_plan.h (the simulator's layer); this header needs only the graph.
//
// Usage:
//   gpusim::Plan p = gpusim::eager_plan(graph, device);                 // device_plan.h
//   std::string json = gpusim::plan_to_json(p, graph);
//   gpusim::Result<gpusim::Plan> back = gpusim::plan_from_json(json, "p.json", graph);
#pragma once

#include "gpusim/export.h"

#include <optional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/kernel_work.h"
#include "gpusim/tile.h"
#include "gpusim/result.h"

namespace gpusim {

// What a kernel is, as the simulator, codegen and the tuner treat it: element-wise work
// (including per-element normalizations, pools and streaming convolutions), one main loop (a GEMM
// or implicit-GEMM convolution and its epilogue), a pass over rows (reductions, softmax, layer
// norms), a flash-style attention (two main loops and a softmax in one kernel), or a copy (data
// movement that folds into no reader).
enum class KernelKind { kPointwise, kMainLoop, kRow, kAttention, kCopy };
GPUSIM_API std::string_view kernel_kind_name(KernelKind k);  // "pointwise", "main-loop", "row", "attention", "copy"
GPUSIM_API std::optional<KernelKind> kernel_kind_from_name(std::string_view s);

// The part a tensor crossing a kernel's boundary plays in it: a main loop's A and B operands,
// attention's query, key and value, any other input (a bias, a residual, a mask: the epilogue's
// or prologue's), a pointwise, row or copy kernel's input, and what the kernel writes that
// another kernel or the graph's caller reads.
enum class OperandRole { kInput, kA, kB, kQuery, kKey, kValue, kEpilogue, kOutput };
GPUSIM_API std::string_view operand_role_name(OperandRole r);  // "input", "a", "b", "query", ...

struct GPUSIM_API KernelOperand {
  TensorId tensor = kNoTensor;  // the memory read or written (a view resolved to its root)
  OperandRole role = OperandRole::kInput;
  bool operator==(const KernelOperand&) const = default;
};

// The scheduler that made a plan, or the runtime whose lowering it is (strings in JSON only).
enum class SchedulerKind { kEager, kGreedy, kBeam, kRandom, kSplit, kLowering };
GPUSIM_API std::string_view scheduler_name(SchedulerKind s);   // "eager", "greedy", ..., "lowering"
GPUSIM_API std::optional<SchedulerKind> scheduler_from_name(std::string_view s);

// What a search ranks plans by.
enum class Objective { kLatency, kThroughput, kEnergy, kMemory };
GPUSIM_API std::optional<Objective> objective_from_name(std::string_view s);
GPUSIM_API std::string_view objective_name(Objective o);
GPUSIM_API std::string objective_names();  // "latency, throughput, energy, memory"

struct GPUSIM_API PlanKernel {
  std::vector<int> nodes;  // indices into Graph::nodes, in execution order within the kernel
  int anchor = 0;          // position in `nodes` of the op that sets the kernel's class (GEMM, norm, ...)
  TileConfig tile;
  int stream = 0;
  // Named fusions that built this kernel ("elementwise-chain", "gemm-epilogue", ...), and nodes
  // that also run in another kernel (recomputed instead of stored).
  std::vector<std::string> fusions;
  std::vector<int> recomputed;
  // A runtime's lowering (lowering.h): the framework call that launches this kernel (its host-time
  // key: "linear", "gelu", "conv"), and whether it is that call's first kernel (a call's later
  // kernels, such as the layout conversions cuDNN adds, cost the runtime's extra_kernel_us). Empty
  // for plans of gpusim's own executor.
  std::string call;
  bool call_first = true;
  // Its kind and the tensors crossing its boundary with their roles, set once by whoever builds
  // the kernel (the fusion pass, eager_plan, a runtime's lowering, plan_from_json) through
  // classify_kernel; the later stages read them rather than re-deriving either.
  KernelKind kind = KernelKind::kPointwise;
  std::vector<KernelOperand> operands;
};

struct GPUSIM_API Plan {
  std::string model;
  std::string gpu;
  std::optional<DType> dtype;  // floats re-typed to this before planning
  // fp32 GEMM-like kernels may run on the matrix units as TF32 (the target it was made for allowed
  // it, TargetOptions::allow_tf32): a library tile (main_loop any) is priced so where it can be.
  bool allow_tf32 = false;
  SchedulerKind scheduler = SchedulerKind::kEager;
  std::string runtime;  // kLowering: the runtime whose lowering this is ("pytorch-eager")
  Objective objective = Objective::kLatency;
  std::vector<PlanKernel> kernels;
  std::vector<TensorId> offloaded;     // weights kept in host memory and streamed before use
  std::vector<std::string> decisions;  // why: one line per fusion or offload decision, most time saved first
  // The time each fusion decision saves, in `decisions` order (marginal: against the groups the
  // earlier fusions built, so they add up); empty when not known (a plan read from JSON).
  std::vector<double> decision_saved_us;
  // The graph input shapes the plan was made for (batch, sequence length); empty when not recorded.
  std::map<std::string, Shape> inputs;
};

GPUSIM_API std::string plan_to_json(const Plan& p, const Graph& g);
// Parses a plan for graph `g`; errors name the file, the JSON field and the value.
GPUSIM_API Result<Plan> plan_from_json(const std::string& text, const std::string& source, const Graph& g);

// Whether a node launches a kernel at all (views and import-time folds do not).
GPUSIM_API bool runs_on_device(const Graph& g, const Node& n);

// The one rule for views: a node that is not folded at import and launches no kernel (Reshape,
// Squeeze, Flatten, ...) makes its outputs alias its first input. view_roots gives, per tensor,
// the tensor whose memory it is (itself where it is no view).
// `views`, when given, receives is_view per node, and `kinds` each node's NodeKind (the rule
// costs a node's work; callers that need them ask once: index_graph does).
GPUSIM_API bool is_view(const Graph& g, const Node& n);
GPUSIM_API std::vector<TensorId> view_roots(const Graph& g, std::vector<bool>* views = nullptr,
                                            std::vector<NodeKind>* kinds = nullptr);

struct GraphIndex;
// The kind of a kernel of `nodes` (anchor: a position in it); `attention` when the attention
// fusion built it.
GPUSIM_API KernelKind kernel_kind(const Graph& g, const std::vector<int>& nodes, int anchor, bool attention);
// The same with the nodes' kinds from the graph's index (no node priced again).
GPUSIM_API KernelKind kernel_kind(const Graph& g, const GraphIndex& idx, const std::vector<int>& nodes, int anchor,
                                  bool attention);
// Sets k.kind and k.operands from its nodes, anchor and fusions (the "attention" fusion makes an
// attention kernel). `idx` is index_graph(g) (kernel_work.h), built once per graph by the caller.
GPUSIM_API void classify_kernel(const Graph& g, const GraphIndex& idx, PlanKernel& k);
// The same for every kernel of a plan.
GPUSIM_API void classify_kernels(const Graph& g, Plan& p);

}  // namespace gpusim
