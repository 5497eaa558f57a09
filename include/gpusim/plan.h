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
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/tile.h"
#include "gpusim/result.h"

namespace gpusim {

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
};

struct GPUSIM_API Plan {
  std::string model;
  std::string gpu;
  std::optional<DType> dtype;  // floats re-typed to this before planning
  std::string scheduler = "eager";
  std::string objective = "latency";
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

}  // namespace gpusim
