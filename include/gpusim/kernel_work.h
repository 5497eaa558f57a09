// From graph nodes to the work a kernel does (KernelWork, see tile.h): one node's, or a
// fused group's, whose bytes are only what crosses the group's boundary — intermediates stay on
// chip — and whose FLOPs are all its ops'.
#pragma once

#include "gpusim/export.h"

#include <optional>
#include <vector>

#include "gpusim/graph.h"
#include "gpusim/tile.h"

namespace gpusim {

// The work of one node as a kernel (nullopt for nodes that launch nothing: views, folded nodes).
GPUSIM_API std::optional<KernelWork> node_work(const Graph& g, const Node& n);

// Who reads and who writes each tensor, computed once per graph for group_work.
struct GPUSIM_API GraphIndex {
  std::vector<int> producer;      // node index per tensor, -1 for inputs, weights and constants
  std::vector<TensorId> root;     // the tensor whose memory each tensor is: view_roots (plan.h)
  std::vector<int> readers;       // per root: run-time nodes reading it or any of its views
  std::vector<bool> graph_output; // per root: the graph returns it or one of its views
};
GPUSIM_API GraphIndex index_graph(const Graph& g);

// The work of a fused group; `anchor` (a position in `nodes`) sets the class and the GEMM/row
// view. Attention groups (QK^T, scale, mask, softmax, PV) become one attention kernel.
// `recomputed` lists nodes of the group that other kernels also run: their outputs are never written.
GPUSIM_API KernelWork group_work(const Graph& g, const GraphIndex& idx, const std::vector<int>& nodes, int anchor,
                      bool attention = false, const std::vector<int>& recomputed = {});

struct PlanKernel;
// The work of a plan's kernel, as its kind (classify_kernel, plan.h) says it runs.
GPUSIM_API KernelWork plan_kernel_work(const Graph& g, const GraphIndex& idx, const PlanKernel& k);

}  // namespace gpusim
